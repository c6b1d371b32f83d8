#!/usr/bin/env python3
"""group_hangup.py - JoinGroups left waiting by clients that hung up (issue 10 item 6).

1. A member joins a group and then only heartbeats; four clients each send
   a JoinGroup v1 for that group with RebalanceTimeoutMs = INT32_MAX and
   hang up without reading. Each waits in a rebalance for the first member,
   which never rejoins (before: for 24 days), with its connection gone.
2. Then --conns new connections, one after another, each must answer
   ApiVersions (before: 39 of 40 were refused, "connection slots of index N
   busy"), and the JoinGroups held in the rebalance must have been
   answered when their clients left, so that those silent members expire
   with their sessions (DescribeGroups: only the first left within 20 s).
3. A JoinGroup left waiting with a short rebalance timeout is answered after
   its client left: the answer is dropped, and the broker goes on serving.
4. --floods connections each send a request for an API version we do not
   support (the broker logs a warning and closes each): the log must not grow
   by a line per connection (checked by the caller).

usage: group_hangup.py --port P [--conns N] [--floods N]
Exit status 0 on success, 1 with the reason on stderr. Python 3 stdlib only.
"""
import argparse
import socket
import struct
import sys
import threading
import time

CLIENT = b'hangup'
TIMEOUT_S = 20.0


def kstr(b):
    return struct.pack('>h', len(b)) + b


def frame(key, ver, corr, body):
    msg = struct.pack('>hhi', key, ver, corr) + kstr(CLIENT) + body
    return struct.pack('>i', len(msg)) + msg


def join_v1(group, session_ms, rebalance_ms):
    body = kstr(group) + struct.pack('>ii', session_ms, rebalance_ms) + kstr(b'')
    body += kstr(b'consumer') + struct.pack('>i', 1) + kstr(b'range') + struct.pack('>i', 0)
    return frame(11, 1, 1, body)


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        b = s.recv(n - len(buf))
        if not b:
            raise ConnectionError('closed by the broker')
        buf += b
    return bytes(buf)


def api_versions_ok(port):
    """None if a fresh connection answers ApiVersions v0, else why not."""
    try:
        s = socket.create_connection(('127.0.0.1', port), timeout=TIMEOUT_S)
    except OSError as e:
        return f'connect: {e}'
    try:
        s.sendall(frame(18, 0, 9, b''))
        size = struct.unpack('>i', recv_exact(s, 4))[0]
        data = recv_exact(s, size)
        corr, err = struct.unpack('>ih', data[:6])
        return None if corr == 9 and err == 0 else f'correlation {corr}, error {err}'
    except (OSError, ConnectionError, struct.error) as e:
        return f'ApiVersions: {e}'
    finally:
        s.close()


def group_members(port, group):
    """Members of group by DescribeGroups v0 (-1 if the answer is not understood)."""
    s = socket.create_connection(('127.0.0.1', port), timeout=TIMEOUT_S)
    try:
        s.sendall(frame(15, 0, 5, struct.pack('>i', 1) + kstr(group)))
        size = struct.unpack('>i', recv_exact(s, 4))[0]
        d = recv_exact(s, size)
        p = 4

        def string():
            nonlocal p
            n = struct.unpack('>h', d[p:p + 2])[0]
            p += 2 + max(n, 0)

        ngroups = struct.unpack('>i', d[p:p + 4])[0]
        p += 4
        if ngroups != 1:
            return -1
        err = struct.unpack('>h', d[p:p + 2])[0]
        p += 2
        for _ in range(4):   # group id, state, protocol type, protocol
            string()
        return -1 if err else struct.unpack('>i', d[p:p + 4])[0]
    finally:
        s.close()


def call(s, raw):
    s.sendall(raw)
    size = struct.unpack('>i', recv_exact(s, 4))[0]
    return recv_exact(s, size)


class Anchor(threading.Thread):
    """A member that joins, syncs and then only heartbeats, never rejoining: a
    rebalance started after it waits for it until the rebalance deadline."""

    def __init__(self, port, group):
        super().__init__(daemon=True)
        self.s = socket.create_connection(('127.0.0.1', port), timeout=TIMEOUT_S)
        d = call(self.s, join_v1(group, 6000, 0x7fffffff))
        err, self.gen = struct.unpack('>hi', d[4:10])
        p = 10
        for _ in range(2):   # protocol, leader
            p += 2 + struct.unpack('>h', d[p:p + 2])[0]
        n = struct.unpack('>h', d[p:p + 2])[0]
        self.member = d[p + 2:p + 2 + n]
        if err:
            raise RuntimeError(f'anchor JoinGroup error {err}')
        body = kstr(group) + struct.pack('>i', self.gen) + kstr(self.member) + struct.pack('>i', 0)
        call(self.s, frame(14, 0, 2, body))
        self.group = group
        self.stop = threading.Event()

    def run(self):
        body = kstr(self.group) + struct.pack('>i', self.gen) + kstr(self.member)
        while not self.stop.wait(1.0):
            call(self.s, frame(12, 0, 3, body))


def hang_up_after(port, raw, wait_s):
    s = socket.create_connection(('127.0.0.1', port), timeout=TIMEOUT_S)
    s.sendall(raw)
    time.sleep(wait_s)   # let the broker read and hand it to the coordinator
    s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--conns', type=int, default=40)
    ap.add_argument('--floods', type=int, default=500)
    a = ap.parse_args()
    errs = []

    anchor = Anchor(a.port, b'hangup-group')
    anchor.start()
    for _ in range(4):
        hang_up_after(a.port, join_v1(b'hangup-group', 6000, 0x7fffffff), 0.3)
    served = 0
    for i in range(a.conns):
        why = api_versions_ok(a.port)
        if why:
            errs.append(f'new connection {i}: {why}')
        else:
            served += 1
    print(f'{served} of {a.conns} new connections served after 4 hung-up JoinGroups', file=sys.stderr)
    # The JoinGroups waiting in the rebalance (for the anchor, which never rejoins)
    # were answered when their clients left, so those members, silent, expire with
    # their 6 s sessions; before, their held JoinGroups kept them for the
    # rebalance timeout. The anchor heartbeats and stays.
    deadline = time.monotonic() + TIMEOUT_S
    members = group_members(a.port, b'hangup-group')
    while members != 1 and time.monotonic() < deadline:
        time.sleep(0.2)
        members = group_members(a.port, b'hangup-group')
    anchor.stop.set()
    print(f'hangup-group has {members} member(s)', file=sys.stderr)
    if members != 1:
        errs.append(f'hangup-group still has {members} members whose JoinGroups wait for clients that left')

    # A member that stays, then a join that waits 2 s for it and whose client leaves.
    keep = socket.create_connection(('127.0.0.1', a.port), timeout=TIMEOUT_S)
    keep.sendall(join_v1(b'drop-group', 6000, 2000))
    size = struct.unpack('>i', recv_exact(keep, 4))[0]
    recv_exact(keep, size)
    hang_up_after(a.port, join_v1(b'drop-group', 6000, 2000), 0.3)
    time.sleep(3.0)   # the rebalance times out and answers the gone client
    keep.close()
    why = api_versions_ok(a.port)
    if why:
        errs.append(f'after a dropped JoinGroup answer: {why}')

    for i in range(a.floods):
        try:
            s = socket.create_connection(('127.0.0.1', a.port), timeout=TIMEOUT_S)
            s.sendall(frame(3, 99, 1, b'\x00' * 8))   # Metadata v99: logged and closed
            s.recv(16)
            s.close()
        except OSError:
            pass
    why = api_versions_ok(a.port)
    if why:
        errs.append(f'after {a.floods} bad requests: {why}')
    for e in errs:
        print('FAIL: ' + e, file=sys.stderr)
    return 1 if errs else 0


if __name__ == '__main__':
    sys.exit(main())
