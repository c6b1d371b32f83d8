#!/usr/bin/env python3
"""admin_client.py - raw-TCP catalog and admin requests for the catalog tests.

Subcommands (each exits 0 when the broker answered as Kafka would, 1 with the
reason on stderr otherwise). Encoding helpers come from bad_client.py.

  create PORT N PARTS PREFIX [--validate]   CreateTopics v4 of N topics PREFIX-0..N-1;
        prints one line per topic: "name error" (the caller checks the counts)
  delete PORT PREFIX FROM TO [PREFIX FROM TO]...  one DeleteTopics v1 of PREFIX-FROM..TO-1 (each
        range); prints "name error"
  internal PORT KNOWN                        internal names: CreateTopics refused with
        INVALID_REQUEST, Metadata never creates them, Produce refused with INVALID_TOPIC_EXCEPTION
  dups PORT KNOWN                            a CreateTopics naming topics more than once: every
        entry of such a name answers INVALID_REQUEST with Kafka's message, none is created,
        the other topics are (validateOnly too; KNOWN twice is INVALID_REQUEST, not
        TOPIC_ALREADY_EXISTS; only the first 1,024 such entries carry the message)
  commit PORT KNOWN PARTS                    OffsetCommit v2: partitions of KNOWN answer NONE,
        unknown topics and partitions past PARTS answer UNKNOWN_TOPIC_OR_PARTITION, and
        OffsetFetch returns the committed offset only for the known ones
  txncommit PORT KNOWN PARTS                 TxnOffsetCommit v2 the same way, in a transaction
        of its own (InitProducerId, AddOffsetsToTxn, EndTxn commit): unknown topics and
        partitions answer UNKNOWN_TOPIC_OR_PARTITION (also before the producer is checked),
        and the commit applies offsets for the known ones only
  cluster PORT NODE HOST:PORT                DescribeCluster v0 (flexible): no error, the
        controller is NODE and the one broker is NODE at HOST:PORT, the body read to its last byte
  offdel PORT KNOWN PARTS PHASE               OffsetDelete v0 (PHASE "delete"): simple commits of
        group G to every partition of KNOWN; deleting partition 0's, an unknown topic's
        (UNKNOWN_TOPIC_OR_PARTITION) and one never committed answer NONE, and OffsetFetch then
        has -1 for partition 0 and the others kept; an unknown or empty group id is
        GROUP_ID_NOT_FOUND / INVALID_GROUP_ID at the top; a DeleteGroups v1 of 300 unknown
        names answers GROUP_ID_NOT_FOUND for the first 256 (DP_GRP_DELETE_GROUPS_MAX) and
        INVALID_REQUEST for the rest. PHASE "after" (after a restart): the same offsets read
        back (the tombstone held)
  parts PORT TOPIC NOW                       CreatePartitions v1 against TOPIC of NOW partitions
        (hostile counts and names, an explicit assignment, validateOnly); the topic ends with NOW + 2
  configs PORT TOPIC                         IncrementalAlterConfigs v0 of TOPIC (no max.message.bytes
        set, cleanup.policy=delete): SET, DELETE, APPEND and SUBTRACT as Kafka applies them,
        a key twice in one resource INVALID_REQUEST (IncrementalAlterConfigs; AlterConfigs keeps the last value) with nothing applied,
        each checked with DescribeConfigs v0; refusals (a config sluice does not implement, an
        APPEND to a non-list, an unknown operation, hostile sizes and counts, the broker
        resource, an unknown topic); validateOnly changes nothing. Then Kafka 2.x's answers to a null
        value (AlterConfigs, CreateTopics: INVALID_REQUEST naming the keys) and to a resource named
        twice (AlterConfigs, IncrementalAlterConfigs: INVALID_REQUEST for each entry, as Kafka 3;
        DescribeConfigs answers each)
  delgroups PORT GROUP...                    DeleteGroups v1 of the groups; prints "group error" for each
  confsync PORT TOPIC                        (broker under --fault-conf-sync-fail 1) an alter whose
        directory sync failed answers KAFKA_STORAGE_ERROR and the broker reports the file's new
        value; the next alter answers NONE
Python 3 stdlib only.
"""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bad_client as bc  # noqa: E402

bc.TIMEOUT_S = 120.0     # creates of thousands of partitions take a while on a busy machine

API_OFFSET_COMMIT, API_OFFSET_FETCH, API_CREATE, API_DELETE = 8, 9, 19, 20
API_INIT_PRODUCER_ID, API_ADD_OFFSETS_TO_TXN, API_END_TXN, API_TXN_OFFSET_COMMIT = 22, 25, 26, 28
INVALID_REQUEST, POLICY_VIOLATION = 42, 44
# Answers a transactional request may get while the coordinator settles: asked again.
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS = 14, 15, 51


def create_v4(conn, topics, validate=False):
    """topics: [(name, nparts)]; returns [(name, error, message)] in answer order."""
    body = struct.pack('>i', len(topics))
    for name, nparts in topics:
        body += bc.kstr(name) + struct.pack('>ih', nparts, -1) + struct.pack('>i', 0) + struct.pack('>i', 0)
    body += struct.pack('>i', 60000) + (b'\x01' if validate else b'\x00')
    r = bc.Reader(conn.call(API_CREATE, 4, body))
    r.i32()  # throttle
    out = []
    for _ in range(r.i32()):
        name, err = r.string(), r.i16()
        msg = r.string()
        out.append((name, err, msg))
    if not r.done():
        raise ValueError('trailing bytes in CreateTopics v4 response')
    return out


def delete_v1(conn, names):
    body = struct.pack('>i', len(names)) + b''.join(bc.kstr(n) for n in names) + struct.pack('>i', 60000)
    r = bc.Reader(conn.call(API_DELETE, 1, body))
    r.i32()
    out = []
    for _ in range(r.i32()):
        out.append((r.string(), r.i16()))
    if not r.done():
        raise ValueError('trailing bytes in DeleteTopics v1 response')
    return out


def commit_topics(parts, leader_epoch):
    """OffsetCommit's and TxnOffsetCommit's topics array of parts [(topic, partition, offset)],
    with CommittedLeaderEpoch -1 when leader_epoch, and null metadata."""
    by_topic = {}
    for t, p, o in parts:
        by_topic.setdefault(t, []).append((p, o))
    body = struct.pack('>i', len(by_topic))
    for t, ps in by_topic.items():
        body += bc.kstr(t) + struct.pack('>i', len(ps))
        for p, o in ps:
            body += struct.pack('>iq', p, o) + (struct.pack('>i', -1) if leader_epoch else b'') + bc.kstr(None)
    return body


def commit_errors(r, what):
    """The rest of an OffsetCommit or TxnOffsetCommit response: {(topic, partition): error}."""
    out = {}
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            p, err = r.i32(), r.i16()
            out[(t, p)] = err
    if not r.done():
        raise ValueError(f'trailing bytes in {what} response')
    return out


def offset_commit_v2(conn, group, parts):
    """parts: [(topic, partition, offset)]; returns {(topic, partition): error}."""
    body = bc.kstr(group) + struct.pack('>i', -1) + bc.kstr('') + struct.pack('>q', -1)
    r = bc.Reader(conn.call(API_OFFSET_COMMIT, 2, body + commit_topics(parts, False)))
    return commit_errors(r, 'OffsetCommit v2')


def retried(what, call):
    """call() -> (error, value): asked again while the coordinator settles, for up to 60 s."""
    deadline = time.monotonic() + 60
    while True:
        err, value = call()
        if err not in (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS) or \
                time.monotonic() > deadline:
            if err != bc.NONE:
                die(f'{what}: error {err}')
            return value
        time.sleep(0.2)


def init_producer_id_v1(conn, txn_id):
    """Returns (error, (producer id, epoch))."""
    r = bc.Reader(conn.call(API_INIT_PRODUCER_ID, 1, bc.kstr(txn_id) + struct.pack('>i', 60000)))
    r.i32()
    err, pid, epoch = r.i16(), r.i64(), r.i16()
    return err, (pid, epoch)


def add_offsets_to_txn_v1(conn, txn_id, pid, epoch, group):
    body = bc.kstr(txn_id) + struct.pack('>qh', pid, epoch) + bc.kstr(group)
    r = bc.Reader(conn.call(API_ADD_OFFSETS_TO_TXN, 1, body))
    r.i32()
    return r.i16(), None


def end_txn_v1(conn, txn_id, pid, epoch, commit):
    body = bc.kstr(txn_id) + struct.pack('>qhb', pid, epoch, 1 if commit else 0)
    r = bc.Reader(conn.call(API_END_TXN, 1, body))
    r.i32()
    return r.i16(), None


def txn_offset_commit_v2(conn, txn_id, group, pid, epoch, parts):
    """parts: [(topic, partition, offset)]; returns {(topic, partition): error}."""
    body = bc.kstr(txn_id) + bc.kstr(group) + struct.pack('>qh', pid, epoch)
    r = bc.Reader(conn.call(API_TXN_OFFSET_COMMIT, 2, body + commit_topics(parts, True)))
    r.i32()   # throttle
    return commit_errors(r, 'TxnOffsetCommit v2')


def offset_fetch_v1(conn, group, parts):
    """Returns {(topic, partition): (offset, error)}."""
    by_topic = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    body = bc.kstr(group) + struct.pack('>i', len(by_topic))
    for t, ps in by_topic.items():
        body += bc.kstr(t) + struct.pack('>i', len(ps)) + b''.join(struct.pack('>i', p) for p in ps)
    r = bc.Reader(conn.call(API_OFFSET_FETCH, 1, body))
    out = {}
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            p, off = r.i32(), r.i64()
            r.string()
            out[(t, p)] = (off, r.i16())
    if not r.done():
        raise ValueError('trailing bytes in OffsetFetch v1 response')
    return out


def die(msg):
    print(f'admin_client: {msg}', file=sys.stderr)
    sys.exit(1)


def cmd_create(port, n, parts, prefix, validate):
    c = bc.Conn(port)
    res = create_v4(c, [(f'{prefix}-{i}', parts) for i in range(n)], validate)
    if len(res) != n:
        die(f'{len(res)} results for {n} topics')
    for name, err, msg in res:
        print(f'{name} {err} {msg or ""}'.rstrip())
    return 0


def cmd_delete(port, ranges):
    """ranges: [PREFIX FROM TO]...: one DeleteTopics of every PREFIX-i, FROM <= i < TO."""
    names = []
    for k in range(0, len(ranges) - 2, 3):
        names += [f'{ranges[k]}-{i}' for i in range(int(ranges[k + 1]), int(ranges[k + 2]))]
    c = bc.Conn(port)
    res = delete_v1(c, names)
    if len(res) != len(names):
        die(f'{len(res)} results for {len(names)} topics')
    for name, err in res:
        print(f'{name} {err}')
    return 0


def cmd_internal(port, known):
    c = bc.Conn(port)
    names = ['__consumer_offsets', '__transaction_state']
    for name, err, msg in create_v4(c, [(n, 1) for n in names]):
        if err != INVALID_REQUEST:
            die(f'CreateTopics {name}: error {err} ({msg}), want INVALID_REQUEST {INVALID_REQUEST}')
    for name, err, msg in create_v4(c, [(n, 1) for n in names], validate=True):
        if err != INVALID_REQUEST:
            die(f'CreateTopics validateOnly {name}: error {err}, want {INVALID_REQUEST}')
    errs = bc.metadata_v4_topic_errors(c, names + [known])
    if errs.get(known) != bc.NONE:
        die(f'Metadata: {known} error {errs.get(known)}')
    for n in names:
        if errs.get(n) == bc.NONE:
            die(f'Metadata (auto-create on) made a topic of {n}')
    for n in names:
        err, _ = bc.produce_error(port, n, 0, bc.batch_v2())
        if err != bc.INVALID_TOPIC_EXCEPTION:
            die(f'Produce to {n}: error {err}, want INVALID_TOPIC_EXCEPTION {bc.INVALID_TOPIC_EXCEPTION}')
    # Still nothing of that name after all this.
    errs = bc.metadata_v4_topic_errors(c, names)
    if any(errs.get(n) == bc.NONE for n in names):
        die(f'an internal name became a topic: {errs}')
    return 0


def cmd_dups(port, known):
    c = bc.Conn(port)
    TOPIC_ALREADY_EXISTS = 36
    want_msg = (f'Create topics request from client `{bc.CLIENT_ID.decode()}` contains multiple entries '
                'for the following topics: ')
    for validate in (True, False):
        ask = [('dup-a', 1), ('dup-other', 1), ('dup-a', 2), ('dup-b', 1), (known, 1), ('dup-b', 1),
               ('dup-a', 3), (known, 2)]
        res = create_v4(c, ask, validate)
        if [name for name, _, _ in res] != [name for name, _ in ask]:
            die(f'validateOnly={validate}: results {res} not in request order')
        for name, err, msg in res:
            if name == 'dup-other':
                if err != bc.NONE:
                    die(f'validateOnly={validate}: {name} error {err} ({msg}), want NONE')
                continue
            if err != INVALID_REQUEST:
                die(f'validateOnly={validate}: duplicate {name} error {err} ({msg}), want INVALID_REQUEST')
            if not msg or not msg.startswith(want_msg) or \
                    sorted(msg[len(want_msg):].split(',')) != sorted(['dup-a', 'dup-b', known]):
                die(f'validateOnly={validate}: duplicate {name} message {msg!r}')
    # Only dup-other was made: the duplicated names are still free, known is as it was.
    for name, err, msg in create_v4(c, [('dup-a', 1), ('dup-b', 1)], validate=True):
        if err != bc.NONE:
            die(f'{name} after the duplicates: error {err} ({msg}): a duplicated name was created')
    for name, err, msg in create_v4(c, [('dup-other', 1), (known, 1)], validate=True):
        if err != TOPIC_ALREADY_EXISTS:
            die(f'{name} after the duplicates: error {err} ({msg}), want TOPIC_ALREADY_EXISTS')
    # A message cut short stays within its bound for a long list of duplicated names.
    many = [(f'dup-long-{i:03d}-' + 'x' * 200, 1) for i in range(50)]
    res = create_v4(c, many + many, validate=True)
    if len(res) != 100 or any(err != INVALID_REQUEST or not msg.startswith(want_msg) or len(msg) > 256
                              for _, err, msg in res):
        die(f'50 duplicated long names: {[(e, len(m or "")) for _, e, m in res][:3]}')
    # Only the first 1,024 duplicates carry the message, so that a request of millions
    # cannot ask for an answer many times its size; every one has the error.
    res = create_v4(c, [('dup-many', 1)] * 1100, validate=True)
    if len(res) != 1100 or any(err != INVALID_REQUEST for _, err, _ in res) or \
            any(not msg for _, _, msg in res[:1024]) or any(msg is not None for _, _, msg in res[1024:]):
        die(f'1,100 entries of one name: {sum(e == INVALID_REQUEST for _, e, _ in res)} INVALID_REQUEST, '
            f'{sum(m is not None for _, _, m in res)} messages (want 1024)')
    return 0


def commit_cases(known, parts):
    """The partitions both commit tests ask for: those of KNOWN, and unknown ones."""
    return ([(known, p) for p in range(parts)],
            [(known, parts), (known, parts + 7), ('no-such-topic', 0), ('no-such-topic', 1)])


def expect_commit_errors(what, res, want_ok, want_unknown):
    for k in want_ok:
        if res.get(k) != bc.NONE:
            die(f'{what} {k}: error {res.get(k)}, want NONE')
    for k in want_unknown:
        if res.get(k) != bc.UNKNOWN_TOPIC_OR_PARTITION:
            die(f'{what} {k}: error {res.get(k)}, want UNKNOWN_TOPIC_OR_PARTITION')


def expect_fetched(conn, group, want_ok, want_unknown, base):
    """OffsetFetch: base + p for each known partition p (waited for up to 60 s: a
    transaction's offsets are applied once its marker is written), -1 for the unknown."""
    deadline = time.monotonic() + 60
    while True:
        got = offset_fetch_v1(conn, group, want_ok + want_unknown)
        if all(got.get((t, p), (None,))[0] == base + p for t, p in want_ok) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for t, p in want_ok:
        if got.get((t, p), (None,))[0] != base + p:
            die(f'OffsetFetch {(t, p)}: {got.get((t, p))}, want offset {base + p}')
    for k in want_unknown:
        if got.get(k, (None,))[0] != -1:
            die(f'OffsetFetch {k}: {got.get(k)}: an offset was stored for an unknown partition')


def cmd_commit(port, known, parts):
    c = bc.Conn(port)
    want_ok, want_unknown = commit_cases(known, parts)
    res = offset_commit_v2(c, 'catalog-group', [(t, p, 42 + p) for t, p in want_ok + want_unknown])
    expect_commit_errors('OffsetCommit', res, want_ok, want_unknown)
    expect_fetched(c, 'catalog-group', want_ok, want_unknown, 42)
    return 0


def cmd_txncommit(port, known, parts):
    c = bc.Conn(port)
    txn, group = 'catalog-txn', 'catalog-txn-group'
    want_ok, want_unknown = commit_cases(known, parts)
    commits = [(t, p, 50 + p) for t, p in want_ok + want_unknown]
    # Before any producer: Kafka looks at the topics first, so unknown ones say so.
    res = txn_offset_commit_v2(c, txn, group, 12345, 0, commits)
    for k in want_unknown:
        if res.get(k) != bc.UNKNOWN_TOPIC_OR_PARTITION:
            die(f'TxnOffsetCommit without a producer {k}: error {res.get(k)}, want UNKNOWN_TOPIC_OR_PARTITION')
    for k in want_ok:
        if res.get(k) in (None, bc.NONE, bc.UNKNOWN_TOPIC_OR_PARTITION):
            die(f'TxnOffsetCommit without a producer {k}: error {res.get(k)}, want the producer refused')
    pid, epoch = retried('InitProducerId', lambda: init_producer_id_v1(c, txn))
    retried('AddOffsetsToTxn', lambda: add_offsets_to_txn_v1(c, txn, pid, epoch, group))
    res = txn_offset_commit_v2(c, txn, group, pid, epoch, commits)
    expect_commit_errors('TxnOffsetCommit', res, want_ok, want_unknown)
    retried('EndTxn', lambda: end_txn_v1(c, txn, pid, epoch, True))
    expect_fetched(c, group, want_ok, want_unknown, 50)
    return 0


API_DESCRIBE_CLUSTER = 60


def cmd_cluster(port, node, hostport):
    host, want_port = hostport.rsplit(':', 1)
    c = bc.Conn(port)
    r = bc.Reader(c.call(API_DESCRIBE_CLUSTER, 0, b'\x00' + b'\x00', flexible=True))
    r.skip_tags()   # response header v1

    def cstr():
        n = r.uvarint()
        return None if n == 0 else r.take(n - 1).decode(errors='replace')
    r.i32()  # throttle
    err, msg, cluster, controller = r.i16(), cstr(), cstr(), r.i32()
    brokers = []
    for _ in range(r.uvarint() - 1):
        b = (r.i32(), cstr(), r.i32(), cstr())
        r.skip_tags()
        brokers.append(b)
    r.i32()  # cluster authorized operations
    r.skip_tags()
    if not r.done():
        die(f'DescribeCluster: {len(r.d) - r.p} bytes after the body')
    if err or msg is not None:
        die(f'DescribeCluster: error {err} {msg}')
    if not cluster or controller != node:
        die(f'DescribeCluster: cluster {cluster!r} controller {controller}, want a cluster id and {node}')
    if brokers != [(node, host, int(want_port), None)]:
        die(f'DescribeCluster: brokers {brokers}, want [({node}, {host}, {want_port}, None)]')
    print(f'cluster {cluster} controller {controller} brokers {brokers}')
    return 0


API_CREATE_PARTITIONS = 37
INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT = 37, 39


def create_partitions_v1(conn, topics, validate=False):
    """topics: [(name, count, assignments or None)]; returns [(name, error)]."""
    body = struct.pack('>i', len(topics))
    for name, count, asg in topics:
        body += bc.kstr(name) + struct.pack('>i', count)
        if asg is None:
            body += struct.pack('>i', -1)
        else:
            body += struct.pack('>i', len(asg))
            for ids in asg:
                body += struct.pack('>i', len(ids)) + b''.join(struct.pack('>i', i) for i in ids)
    body += struct.pack('>i', 30000) + (b'\x01' if validate else b'\x00')
    r = bc.Reader(conn.call(API_CREATE_PARTITIONS, 1, body))
    r.i32()  # throttle
    out = []
    for _ in range(r.i32()):
        name, err = r.string(), r.i16()
        r.string()  # message
        out.append((name, err))
    if not r.done():
        die('CreatePartitions: bytes after the body')
    return out


def cmd_parts(port, topic, now):
    c = bc.Conn(port)
    cases = [
        ('a count past any limit', [(topic, 2**31 - 1, None)], False, [INVALID_PARTITIONS]),
        ('a count below the topic\'s', [(topic, now - 1, None)], False, [INVALID_PARTITIONS]),
        ('past --partitions-max', [(topic, 5000, None)], False, [POLICY_VIOLATION]),
        ('the topic twice', [(topic, now + 1, None), (topic, now + 2, None)], False,
         [INVALID_REQUEST, INVALID_REQUEST]),
        ('an assignment one short', [(topic, now + 2, [[1]])], False, [INVALID_REPLICA_ASSIGNMENT]),
        ('an assignment of two brokers', [(topic, now + 1, [[1, 1]])], False, [INVALID_REPLICA_ASSIGNMENT]),
        ('validateOnly', [(topic, now + 5, None)], True, [0]),
        ('an assignment to this broker', [(topic, now + 2, [[1], [1]])], False, [0]),
    ]
    for what, topics, validate, want in cases:
        got = [e for _, e in create_partitions_v1(c, topics, validate)]
        if got != want:
            die(f'CreatePartitions, {what}: errors {got}, want {want}')
    return 0


API_OFFSET_DELETE, API_DELETE_GROUPS = 47, 42
GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST = 69, 24, 3, 42


def delete_groups_v1(conn, groups):
    """Returns [(group, error)] in the answer's order."""
    body = struct.pack('>i', len(groups)) + b''.join(bc.kstr(g) for g in groups)
    r = bc.Reader(conn.call(API_DELETE_GROUPS, 1, body))
    r.i32()
    out = [(r.string(), r.i16()) for _ in range(r.i32())]
    if not r.done():
        raise ValueError('trailing bytes in DeleteGroups v1 response')
    return out


def cmd_delgroups(port, groups):
    """DeleteGroups v1 of the groups; prints "group error" per group."""
    c = bc.Conn(port)
    for g, err in delete_groups_v1(c, [g.encode() for g in groups]):
        print(g, err)
    return 0


def offset_delete_v0(conn, group, parts):
    """parts: [(topic, partition)]; returns (top-level error, {(topic, partition): error})."""
    by_topic = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    body = bc.kstr(group) + struct.pack('>i', len(by_topic))
    for t, ps in by_topic.items():
        body += bc.kstr(t) + struct.pack('>i', len(ps)) + b''.join(struct.pack('>i', p) for p in ps)
    r = bc.Reader(conn.call(API_OFFSET_DELETE, 0, body))
    err = r.i16()
    r.i32()
    out = {}
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            p, e = r.i32(), r.i16()
            out[(t, p)] = e
    if not r.done():
        raise ValueError('trailing bytes in OffsetDelete v0 response')
    return err, out


def cmd_offdel(port, known, parts, phase):
    c = bc.Conn(port)
    group = 'offdel-g'
    want = {(known, p): (-1 if p == 0 else 100 + p, bc.NONE) for p in range(parts)}
    if phase == 'delete':
        res = retried('OffsetCommit', lambda: (0, offset_commit_v2(c, group, [(known, p, 100 + p)
                                                                             for p in range(parts)])))
        if any(e != bc.NONE for e in res.values()):
            die(f'OffsetCommit: {res}')
        err, res = offset_delete_v0(c, group, [(known, 0), ('no-such-topic', 0)])
        if err or res != {(known, 0): bc.NONE, ('no-such-topic', 0): UNKNOWN_TOPIC_OR_PARTITION}:
            die(f'OffsetDelete: error {err}, partitions {res}')
        err, res = offset_delete_v0(c, group, [(known, 0)])   # none left there: still NONE
        if err or res != {(known, 0): bc.NONE}:
            die(f'OffsetDelete again: error {err}, partitions {res}')
        for g, e in (('offdel-none', GROUP_ID_NOT_FOUND), ('', INVALID_GROUP_ID)):
            err, res = offset_delete_v0(c, g, [(known, 1)])
            if err != e:
                die(f'OffsetDelete of group {g!r}: error {err}, want {e}')
        names = [f'dg-none-{i}' for i in range(300)]
        got = delete_groups_v1(c, names)
        want_dg = [(n, GROUP_ID_NOT_FOUND if i < 256 else INVALID_REQUEST) for i, n in enumerate(names)]
        if got != want_dg:
            die(f'DeleteGroups of 300 unknown names: {got[:2]}...{got[-2:]}')
    got = offset_fetch_v1(c, group, [(known, p) for p in range(parts)])
    if got != want:
        die(f'OffsetFetch after OffsetDelete ({phase}): {got}, want {want}')
    print(f'offdel {phase}: ok')
    return 0


API_DESCRIBE_CONFIGS, API_ALTER_CONFIGS, API_INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
INVALID_CONFIG, UNKNOWN_TOPIC, KAFKA_STORAGE_ERROR = 40, 3, 56


def incremental_alter_v0(conn, resources, validate=False):
    """resources: [(type, name, [(key, op, value)])]; returns [(error, message)]."""
    body = struct.pack('>i', len(resources))
    for rtype, name, cfgs in resources:
        body += struct.pack('>b', rtype) + bc.kstr(name) + struct.pack('>i', len(cfgs))
        for key, op, value in cfgs:
            body += bc.kstr(key) + struct.pack('>b', op) + (struct.pack('>h', -1) if value is None else bc.kstr(value))
    body += b'\x01' if validate else b'\x00'
    r = bc.Reader(conn.call(API_INCREMENTAL_ALTER_CONFIGS, 0, body))
    r.i32()
    out = []
    for _ in range(r.i32()):
        err, msg = r.i16(), r.string()
        r.i8()
        r.string()
        out.append((err, msg))
    if not r.done():
        raise ValueError('trailing bytes in IncrementalAlterConfigs v0 response')
    return out


def alter_v0(conn, resources, msgs=None):
    """AlterConfigs v0 (replace): resources [(type, name, [(key, value)])], a value None is null;
    returns [error], and appends each message to msgs when given."""
    body = struct.pack('>i', len(resources))
    for rtype, name, cfgs in resources:
        body += struct.pack('>b', rtype) + bc.kstr(name) + struct.pack('>i', len(cfgs))
        for key, value in cfgs:
            body += bc.kstr(key) + (struct.pack('>h', -1) if value is None else bc.kstr(value))
    body += b'\x00'
    r = bc.Reader(conn.call(API_ALTER_CONFIGS, 0, body))
    r.i32()
    out = []
    for _ in range(r.i32()):
        err, msg = r.i16(), r.string()
        r.i8()
        r.string()
        out.append(err)
        if msgs is not None:
            msgs.append(msg)
    if not r.done():
        raise ValueError('trailing bytes in AlterConfigs v0 response')
    return out


def describe_v0(conn, topic):
    """{key: value} of TOPIC's configs (DescribeConfigs v0, all keys)."""
    body = struct.pack('>i', 1) + struct.pack('>b', 2) + bc.kstr(topic) + struct.pack('>i', -1)
    r = bc.Reader(conn.call(API_DESCRIBE_CONFIGS, 0, body))
    r.i32()
    if r.i32() != 1:
        raise ValueError('DescribeConfigs: not one resource')
    err, _msg, _t, _n = r.i16(), r.string(), r.i8(), r.string()
    if err:
        raise ValueError(f'DescribeConfigs of {topic}: error {err}')
    out = {}
    for _ in range(r.i32()):
        k, v = r.string(), r.string()
        r.take(3)  # read_only, is_default, is_sensitive
        out[k] = v
    if not r.done():
        raise ValueError('trailing bytes in DescribeConfigs v0 response')
    return out


def describe_v0_count(conn, resources):
    """DescribeConfigs v0 of resources [(type, name)], all keys: [(error, name, number of configs)]."""
    body = struct.pack('>i', len(resources))
    for rtype, name in resources:
        body += struct.pack('>b', rtype) + bc.kstr(name) + struct.pack('>i', -1)
    r = bc.Reader(conn.call(API_DESCRIBE_CONFIGS, 0, body))
    r.i32()
    out = []
    for _ in range(r.i32()):
        err, _msg, _t, name = r.i16(), r.string(), r.i8(), r.string()
        n = r.i32()
        for _ in range(max(n, 0)):
            r.string()
            r.string()
            r.take(3)
        out.append((err, name, n))
    if not r.done():
        raise ValueError('trailing bytes in DescribeConfigs v0 response')
    return out


def create_v4_configs(conn, name, configs, validate=False):
    """CreateTopics v4 of one topic (1 partition) with configs [(key, value)], None a null value:
    (error, message)."""
    body = struct.pack('>i', 1) + bc.kstr(name) + struct.pack('>ih', 1, -1) + struct.pack('>i', 0)
    body += struct.pack('>i', len(configs))
    for key, value in configs:
        body += bc.kstr(key) + (struct.pack('>h', -1) if value is None else bc.kstr(value))
    body += struct.pack('>i', 60000) + (b'\x01' if validate else b'\x00')
    r = bc.Reader(conn.call(API_CREATE, 4, body))
    r.i32()
    if r.i32() != 1:
        raise ValueError('CreateTopics: not one topic')
    _name, err, msg = r.string(), r.i16(), r.string()
    if not r.done():
        raise ValueError('trailing bytes in CreateTopics v4 response')
    return err, msg


def config_deviations(c, topic):
    """Kafka 2.x's answers to null values and to a resource named twice; TOPIC's retention.ms is 10."""
    T = 2
    # A null value in AlterConfigs: INVALID_REQUEST naming every such key (ZkAdminManager.alterConfigs).
    msgs = []
    got = alter_v0(c, [(T, topic, [('retention.ms', None), ('max.message.bytes', None)])], msgs)
    want_msg = 'Null value not supported for : retention.ms,max.message.bytes'
    if got != [INVALID_REQUEST] or msgs != [want_msg]:
        die(f'AlterConfigs with null values: {got} {msgs}, want [{INVALID_REQUEST}] [{want_msg!r}]')
    # The same resource twice: every entry of it INVALID_REQUEST (Kafka 3's ConfigAdminManager), none
    # applied; another resource beside them is answered as ever.
    once = 'Each resource must appear at most once.'
    msgs = []
    got = alter_v0(c, [(T, topic, [('retention.ms', '11')]), (T, topic + '-none', [('retention.ms', '1')]),
                       (T, topic, [('retention.ms', '12')])], msgs)
    if got != [INVALID_REQUEST, UNKNOWN_TOPIC, INVALID_REQUEST] or msgs[0] != once or msgs[2] != once:
        die(f'AlterConfigs of a topic twice: {got} {msgs}')
    got = incremental_alter_v0(c, [(T, topic, [('retention.ms', 0, '13')]), (T, topic, [('retention.ms', 0, '14')])])
    if got != [(INVALID_REQUEST, once)] * 2:
        die(f'IncrementalAlterConfigs of a topic twice: {got}')
    if describe_v0(c, topic).get('retention.ms') != '10':
        die(f'after refused alters: {describe_v0(c, topic)}, want retention.ms 10')
    # DescribeConfigs of a resource twice answers each (Kafka 2.x and 3 alike).
    got = describe_v0_count(c, [(T, topic), (T, topic)])
    if len(got) != 2 or any(e != 0 or n <= 0 or name != topic for e, name, n in got):
        die(f'DescribeConfigs of a topic twice: {got}')
    # A null value in CreateTopics: INVALID_REQUEST (Kafka 2.x's ZkAdminManager.createTopics), not created.
    name = topic + '-nullcfg'
    got = create_v4_configs(c, name, [('retention.ms', None), ('max.message.bytes', '2000'), ('cleanup.policy', None)])
    want = (INVALID_REQUEST, 'Null value not supported for topic configs : retention.ms,cleanup.policy')
    if got != want:
        die(f'CreateTopics with null config values: {got}, want {want}')
    got = create_v4_configs(c, name, [], validate=True)
    if got[0] != 0:
        die(f'the topic refused for its null configs exists: a validateOnly create answers {got}')


def cmd_configs(port, topic):
    c = bc.Conn(port)
    T = 2
    thr = 'leader.replication.throttled.replicas'
    cases = [
        ('SET max.message.bytes', [(T, topic, [('max.message.bytes', 0, '3000')])], False, [0],
         {'max.message.bytes': '3000'}),
        ('APPEND compact to cleanup.policy', [(T, topic, [('cleanup.policy', 2, 'compact')])], False,
         [INVALID_CONFIG], {'cleanup.policy': 'delete'}),
        ('APPEND delete to cleanup.policy (there already)', [(T, topic, [('cleanup.policy', 2, 'delete')])], False,
         [0], {'cleanup.policy': 'delete'}),
        # A key twice in one resource: Kafka's ConfigAdminManager refuses it whole, INVALID_REQUEST.
        ('APPEND a throttle twice', [(T, topic, [(thr, 2, '0:1'), (thr, 2, '1:1,0:1')])], False, [INVALID_REQUEST],
         {thr: ''}),
        ('SET and DELETE one key', [(T, topic, [('max.message.bytes', 0, '4000'), ('max.message.bytes', 1, None)])],
         False, [INVALID_REQUEST], {'max.message.bytes': '3000'}),
        ('a duplicate beside a good resource', [(T, topic, [('retention.ms', 0, '7'), ('retention.ms', 0, '8')]),
                                                (T, topic + '-none', [('max.message.bytes', 0, '1')])],
         False, [INVALID_REQUEST, UNKNOWN_TOPIC], {}),
        # A resource refused part way applies none of its configs.
        ('a good SET and a refused one', [(T, topic, [('max.message.bytes', 0, '4000'), ('segment.ms', 0, '1')])],
         False, [INVALID_CONFIG], {'max.message.bytes': '3000'}),
        ('APPEND two throttles', [(T, topic, [(thr, 2, '0:1,1:1,0:1')])], False, [0], {thr: '0:1,1:1'}),
        ('SUBTRACT one throttle', [(T, topic, [(thr, 3, '0:1')])], False, [0], {thr: '1:1'}),
        ('APPEND to an int', [(T, topic, [('max.message.bytes', 2, '1')])], False, [INVALID_CONFIG],
         {'max.message.bytes': '3000'}),
        ('operation 9', [(T, topic, [('max.message.bytes', 9, '1')])], False, [INVALID_CONFIG], {}),
        ('SET segment.ms (not implemented)', [(T, topic, [('segment.ms', 0, '1000')])], False, [INVALID_CONFIG], {}),
        ('SET segment.bytes after create', [(T, topic, [('segment.bytes', 0, '8192')])], False, [INVALID_CONFIG], {}),
        ('validateOnly SET', [(T, topic, [('max.message.bytes', 0, '1')])], True, [0], {'max.message.bytes': '3000'}),
        ('a value of 300 bytes', [(T, topic, [('message.format.version', 0, 'v' * 300)])], False, [INVALID_CONFIG], {}),
        ('a name of 30000 bytes', [(T, topic, [('n' * 30000, 0, '1')])], False, [INVALID_CONFIG], {}),
        ('1001 configs', [(T, topic, [('max.message.bytes', 0, '5')] * 1001)], False, [INVALID_CONFIG],
         {'max.message.bytes': '3000'}),
        ('the broker resource', [(4, '1', [('log.retention.ms', 0, '1')])], False, [INVALID_REQUEST], {}),
        ('an unknown topic', [(T, topic + '-none', [('max.message.bytes', 0, '1')])], False, [UNKNOWN_TOPIC], {}),
        ('DELETE max.message.bytes', [(T, topic, [('max.message.bytes', 1, None)])], False, [0], {}),
    ]
    for what, res, validate, want, after in cases:
        got = [e for e, _ in incremental_alter_v0(c, res, validate)]
        if got != want:
            die(f'IncrementalAlterConfigs, {what}: errors {got}, want {want}')
        now = describe_v0(c, topic)
        for k, v in after.items():
            if now.get(k) != v:
                die(f'IncrementalAlterConfigs, {what}: {k} is {now.get(k)!r}, want {v!r}')
    now = describe_v0(c, topic)
    if now.get('max.message.bytes') == '3000' or thr not in now or 'segment.ms' in now:
        die(f'after DELETE: {now}')
    # AlterConfigs (replace) naming a key twice: its last value, as Kafka 2.x (librdkafka's 0092
    # sends the described configs with the changed one added again).
    got = alter_v0(c, [(T, topic, [('retention.ms', '9'), ('retention.ms', '10')])])
    if got != [0]:
        die(f'AlterConfigs with a key twice: errors {got}, want [0]')
    if describe_v0(c, topic).get('retention.ms') != '10':
        die(f'AlterConfigs with a key twice: {describe_v0(c, topic)}, want retention.ms 10')
    config_deviations(c, topic)
    return 0


def cmd_confsync(port, topic):
    """Under --fault-conf-sync-fail 1: the first alter's file is renamed into place but its directory
    sync fails: KAFKA_STORAGE_ERROR, and the broker reports the new value (what the file holds); the
    next alter is durable and answers NONE."""
    c = bc.Conn(port)
    T = 2
    got = [e for e, _ in incremental_alter_v0(c, [(T, topic, [('max.message.bytes', 0, '3500')])])]
    if got != [KAFKA_STORAGE_ERROR]:
        die(f'alter whose directory sync failed: errors {got}, want [{KAFKA_STORAGE_ERROR}]')
    now = describe_v0(c, topic)
    if now.get('max.message.bytes') != '3500':
        die(f'after the failed sync the broker reports max.message.bytes {now.get("max.message.bytes")!r}, '
            'want the file\'s 3500')
    got = [e for e, _ in incremental_alter_v0(c, [(T, topic, [('max.message.bytes', 0, '3600')])])]
    if got != [0]:
        die(f'the next alter: errors {got}, want [0]')
    if describe_v0(c, topic).get('max.message.bytes') != '3600':
        die('the next alter is not in effect')
    return 0


def main(argv):
    if len(argv) < 3:
        die(__doc__)
    cmd, port = argv[1], int(argv[2])
    try:
        if cmd == 'create':
            return cmd_create(port, int(argv[3]), int(argv[4]), argv[5], '--validate' in argv[6:])
        if cmd == 'delete':
            return cmd_delete(port, argv[3:])
        if cmd == 'internal':
            return cmd_internal(port, argv[3])
        if cmd == 'dups':
            return cmd_dups(port, argv[3])
        if cmd == 'commit':
            return cmd_commit(port, argv[3], int(argv[4]))
        if cmd == 'cluster':
            return cmd_cluster(port, int(argv[3]), argv[4])
        if cmd == 'parts':
            return cmd_parts(port, argv[3], int(argv[4]))
        if cmd == 'offdel':
            return cmd_offdel(port, argv[3], int(argv[4]), argv[5])
        if cmd == 'delgroups':
            return cmd_delgroups(port, argv[3:])
        if cmd == 'configs':
            return cmd_configs(port, argv[3])
        if cmd == 'confsync':
            return cmd_confsync(port, argv[3])
        if cmd == 'txncommit':
            return cmd_txncommit(port, argv[3], int(argv[4]))
    except (bc.Closed, TimeoutError, ValueError, OSError) as e:
        die(f'{cmd}: {e}')
    die(f'unknown command {cmd}')


if __name__ == '__main__':
    sys.exit(main(sys.argv))
