#!/usr/bin/env python3
"""big_answers.py - coordinator answers far larger than their requests.

A coordinator call's memory is sized by its request (dp_limits.h
DP_ARENA_*), but some answers are sized by the broker's state: a JoinGroup
leader's member list, a follower's SyncGroup assignment, DescribeGroups,
ListGroups, OffsetFetch of every partition. Such an answer is made again in
a larger call (call.h dp_call_grow); before, each was answered
UNKNOWN_SERVER_ERROR, so a group of ~100 members with 1 KB subscriptions
never formed. Each check compares the answer with what was sent:

1. MEMBERS JoinGroup v1 members, each with its own META-byte metadata, join
   one group: all get generation 1 and no error, and the leader's list has
   every member with its metadata, byte for byte.
2. The leader's SyncGroup gives each member its own ASSIGN-byte assignment;
   every follower's SyncGroup gets its own back.
3. DescribeGroups v0 of that group: every member, metadata and assignment.
4. GROUPS groups commit an offset each (OffsetCommit v2): ListGroups v0
   lists every one.
5. One group commits PARTS partitions with OFFMETA-byte metadata each:
   OffsetFetch v2 of all (null topics) returns every one.

usage: big_answers.py --port P --topic T [--members N ...]
Exit status 0 on success, 1 with the reason on stderr. Python 3 stdlib only.
"""
import argparse
import os
import struct
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bad_client as bc  # noqa: E402

bc.TIMEOUT_S = 120.0

API_OFFSET_COMMIT, API_OFFSET_FETCH, API_JOIN, API_SYNC, API_DESCRIBE, API_LIST = 8, 9, 11, 14, 15, 16


def die(msg):
    print(f'big_answers: {msg}', file=sys.stderr)
    sys.exit(1)


def meta_of(i, n):
    """Member i's metadata (or assignment): n bytes that name it."""
    tag = f'member-{i:05d}:'.encode()
    return (tag * (n // len(tag) + 1))[:n]


def join_v1(conn, group, meta):
    body = bc.kstr(group) + struct.pack('>ii', 60000, 30000) + bc.kstr('')
    body += bc.kstr('consumer') + struct.pack('>i', 1) + bc.kstr('range') + bc.kbytes(meta)
    r = bc.Reader(conn.call(API_JOIN, 1, body))
    err, gen = r.i16(), r.i32()
    _proto, leader, member = r.string(), r.string(), r.string()
    members = {}
    for _ in range(r.i32()):
        mid = r.string()
        members[mid] = r.take(r.i32())
    if not r.done():
        raise ValueError('trailing bytes in JoinGroup v1 response')
    return err, gen, leader, member, members


def sync_v1(conn, group, gen, member, assignments):
    body = bc.kstr(group) + struct.pack('>i', gen) + bc.kstr(member) + struct.pack('>i', len(assignments))
    for mid, a in assignments.items():
        body += bc.kstr(mid) + bc.kbytes(a)
    r = bc.Reader(conn.call(API_SYNC, 1, body))
    r.i32()  # throttle
    err = r.i16()
    a = r.take(r.i32())
    if not r.done():
        raise ValueError('trailing bytes in SyncGroup v1 response')
    return err, a


def check_group(port, group, n, meta_len, assign_len):
    conns = [bc.Conn(port) for _ in range(n)]
    joined = [None] * n
    errors = []

    def join(i):
        try:
            joined[i] = join_v1(conns[i], group, meta_of(i, meta_len))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(f'member {i}: {e}')

    ts = [threading.Thread(target=join, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        die(f'(1) JoinGroup: {errors[0]}')
    bad = [(i, j[0], j[1]) for i, j in enumerate(joined) if j[0] != 0 or j[1] != joined[0][1]]
    if bad:
        die(f'(1) JoinGroup answers (member, error, generation) not all 0 and one generation: {bad[:5]}')
    leaders = [i for i, j in enumerate(joined) if j[4]]
    if len(leaders) != 1:
        die(f'(1) {len(leaders)} members got the member list, want 1')
    li = leaders[0]
    _err, gen, leader, _me, members = joined[li]
    ids = {j[3]: i for i, j in enumerate(joined)}
    if leader != joined[li][3] or set(members) != set(ids):
        die(f'(1) the leader\'s list has {len(members)} members, want {n}; leader {leader}')
    for mid, m in members.items():
        if m != meta_of(ids[mid], meta_len):
            die(f'(1) member {mid}\'s metadata is not what it sent ({len(m)} bytes)')
    print(f'(1) {n} members joined generation {gen}; the leader got all {n} with their metadata')

    assignments = {mid: meta_of(i + 100000, assign_len) for mid, i in ids.items()}
    got = [None] * n
    errors = []

    def sync(i):
        try:
            a = assignments if i == li else {}
            got[i] = sync_v1(conns[i], group, gen, joined[i][3], a)
        except Exception as e:  # noqa: BLE001
            errors.append(f'member {i}: {e}')

    ts = [threading.Thread(target=sync, args=(i,)) for i in range(n) if i != li]
    for t in ts:
        t.start()
    sync(li)
    for t in ts:
        t.join()
    if errors:
        die(f'(2) SyncGroup: {errors[0]}')
    for i in range(n):
        err, a = got[i]
        if err or a != assignments[joined[i][3]]:
            die(f'(2) member {i}: SyncGroup error {err}, assignment of {len(a)} bytes, want its own {assign_len}')
    print(f'(2) every member got its own {assign_len}-byte assignment')

    c = bc.Conn(port)
    r = bc.Reader(c.call(API_DESCRIBE, 0, struct.pack('>i', 1) + bc.kstr(group)))
    if r.i32() != 1:
        die('(3) DescribeGroups: not one group answered')
    err, gid, state, _ptype, _proto = r.i16(), r.string(), r.string(), r.string(), r.string()
    if err or gid != group or state != 'Stable':
        die(f'(3) DescribeGroups: error {err}, group {gid}, state {state}')
    seen = 0
    for _ in range(r.i32()):
        mid, _cid, _host = r.string(), r.string(), r.string()
        m, a = r.take(r.i32()), r.take(r.i32())
        if mid not in ids or m != meta_of(ids[mid], meta_len) or a != assignments[mid]:
            die(f'(3) DescribeGroups: member {mid} differs ({len(m)}-byte metadata, {len(a)}-byte assignment)')
        seen += 1
    if seen != n or not r.done():
        die(f'(3) DescribeGroups: {seen} members, want {n}')
    print(f'(3) DescribeGroups: all {n} members with metadata and assignment')
    c.close()
    for k in conns:
        k.close()


def commit_v2(conn, group, topic, parts):
    """parts: [(partition, offset, metadata)]; returns the errors not 0."""
    body = bc.kstr(group) + struct.pack('>i', -1) + bc.kstr('') + struct.pack('>q', -1)
    body += struct.pack('>i', 1) + bc.kstr(topic) + struct.pack('>i', len(parts))
    for p, o, m in parts:
        body += struct.pack('>iq', p, o) + bc.kstr(m)
    r = bc.Reader(conn.call(API_OFFSET_COMMIT, 2, body))
    bad = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            p, err = r.i32(), r.i16()
            if err:
                bad.append((p, err))
    return bad


def check_lists(port, topic, groups, parts, offmeta):
    c = bc.Conn(port)
    for g in range(groups):
        bad = commit_v2(c, f'bg-{g:05d}', topic, [(0, g, None)])
        if bad:
            die(f'(4) OffsetCommit of group bg-{g:05d}: {bad}')
    r = bc.Reader(c.call(API_LIST, 0, b''))
    err = r.i16()
    listed = set()
    for _ in range(r.i32()):
        listed.add(r.string())
        r.string()
    want = {f'bg-{g:05d}' for g in range(groups)}
    if err or not want <= listed:
        die(f'(4) ListGroups: error {err}, {len(want & listed)} of the {groups} groups listed')
    print(f'(4) ListGroups: all {groups} groups listed ({len(listed)} in all)')

    sent = {p: (p * 7, meta_of(p, offmeta).decode()) for p in range(parts)}
    bad = commit_v2(c, 'bg-wide', topic, [(p, o, m) for p, (o, m) in sent.items()])
    if bad:
        die(f'(5) OffsetCommit of {parts} partitions: {bad[:5]}')
    r = bc.Reader(c.call(API_OFFSET_FETCH, 2, bc.kstr('bg-wide') + struct.pack('>i', -1)))
    got = {}
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            p, o, m, e = r.i32(), r.i64(), r.string(), r.i16()
            if t == topic and not e:
                got[p] = (o, m)
    err = r.i16()
    if err or got != sent or not r.done():
        die(f'(5) OffsetFetch of all: error {err}, {len(got)} of {parts} partitions as committed')
    print(f'(5) OffsetFetch of all: {parts} partitions with their {offmeta}-byte metadata')
    c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--topic', required=True)
    ap.add_argument('--partitions', type=int, default=64)
    ap.add_argument('--members', type=int, default=120)
    ap.add_argument('--meta', type=int, default=1000)
    ap.add_argument('--assign', type=int, default=40000)
    ap.add_argument('--groups', type=int, default=2000)
    ap.add_argument('--offmeta', type=int, default=2000)
    a = ap.parse_args()
    check_group(a.port, 'big-group', a.members, a.meta, a.assign)
    check_lists(a.port, a.topic, a.groups, a.partitions, a.offmeta)


if __name__ == '__main__':
    main()
