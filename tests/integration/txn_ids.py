#!/usr/bin/env python3
"""txn_ids.py - many transactional ids (and offsets), fast, for txn_id_expiry.sh
and offsets_fetch_all.sh.

A raw-TCP client (Kafka wire format encoded by hand, see
shared/kafka-protocol/) that sends InitProducerId v1 for many transactional
ids over one connection, pipelined, as no real client would bother to.

usage:
  txn_ids.py init --port P --prefix X --count N [--start S] [--window W]
      InitProducerId for ids X-S .. X-(S+N-1); prints "err CODE COUNT" for
      each error code answered (0 = NONE, 14 = COORDINATOR_LOAD_IN_PROGRESS).
  txn_ids.py ids --port P ID...
      InitProducerId for each ID in turn; prints "ID ERR PID EPOCH".
  txn_ids.py begin --port P --id ID --pid N --epoch E --topic T [--partitions N]
      AddPartitionsToTxn of T/0 (or T/0..N-1): the id's transaction is then
      Ongoing; prints "added ERR" (the partitions' errors, when all the same,
      else "added mixed ERR...").
  txn_ids.py offsets --port P --id ID --pid N --epoch E --group G
      AddOffsetsToTxn v0 of group G; prints "offsets ERR".
  txn_ids.py txncommit --port P --id ID --pid N --epoch E --group G --topic T --offset O
      TxnOffsetCommit v0 of offset O for T/0 in group G (staged in the id's
      transaction); prints "txncommit ERR".
  txn_ids.py end --port P --id ID --pid N --epoch E [--commit] [--then-begin T [--partitions N]]
      EndTxn v1 (abort, or commit); prints "ended ERR". --then-begin: then, on the
      same connection, AddPartitionsToTxn for T as begin does; prints "added ERR"
      and "sent_ms MS" (how long after EndTxn's answer it was sent).
  txn_ids.py commit --port P --group G --topic T --partitions N --offset O
      OffsetCommit v2 (a simple commit, no member) of offset O for
      partitions 0..N-1 of T; prints "err CODE COUNT" per error code.
Exit status 0 if every answer arrived, 1 otherwise.  Python 3 stdlib only.
"""
import argparse
import socket
import struct
import sys
import time

TIMEOUT_S = 60.0
CLIENT_ID = b'txn_ids'
TXN_TIMEOUT_MS = 600000
API_OFFSET_COMMIT, API_INIT_PRODUCER_ID, API_ADD_PARTITIONS, API_ADD_OFFSETS, API_END_TXN = 8, 22, 24, 25, 26
API_TXN_OFFSET_COMMIT = 28


def kstr(b):
    return struct.pack('>h', len(b)) + b


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(('127.0.0.1', port), timeout=TIMEOUT_S)
        self.corr = 0
        self.buf = b''

    def send(self, api, version, body):
        self.corr += 1
        hdr = struct.pack('>hhi', api, version, self.corr) + kstr(CLIENT_ID)
        msg = hdr + body
        self.s.sendall(struct.pack('>i', len(msg)) + msg)
        return self.corr

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise ConnectionError('the broker closed the connection')
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self, corr):
        size = struct.unpack('>i', self._read(4))[0]
        frame = self._read(size)
        got = struct.unpack('>i', frame[:4])[0]
        if got != corr:
            raise ValueError('correlation id %d, expected %d' % (got, corr))
        return frame[4:]


def init_body(txn_id):
    return kstr(txn_id) + struct.pack('>i', TXN_TIMEOUT_MS)


def init_parse(body):
    _throttle, err, pid, epoch = struct.unpack('>ihqh', body[:16])
    return err, pid, epoch


def cmd_init(a):
    c = Conn(a.port)
    counts = {}
    inflight = []
    names = ('%s-%d' % (a.prefix, i) for i in range(a.start, a.start + a.count))
    left = a.count
    while left or inflight:
        while left and len(inflight) < a.window:
            inflight.append(c.send(API_INIT_PRODUCER_ID, 1, init_body(next(names).encode())))
            left -= 1
        err, _pid, _epoch = init_parse(c.recv(inflight.pop(0)))
        counts[err] = counts.get(err, 0) + 1
    for err in sorted(counts):
        print('err %d %d' % (err, counts[err]))


def cmd_ids(a):
    c = Conn(a.port)
    for name in a.ids:
        err, pid, epoch = init_parse(c.recv(c.send(API_INIT_PRODUCER_ID, 1, init_body(name.encode()))))
        print('%s %d %d %d' % (name, err, pid, epoch))


def begin(c, a, topic):
    """AddPartitionsToTxn for partitions 0..a.partitions-1 of topic on c:
    ('added ERR', the monotonic time it was sent)."""
    body = kstr(a.id.encode()) + struct.pack('>qh', a.pid, a.epoch)
    body += struct.pack('>i', 1) + kstr(topic.encode()) + struct.pack('>i', a.partitions)
    for part in range(a.partitions):
        body += struct.pack('>i', part)
    corr = c.send(API_ADD_PARTITIONS, 1, body)
    sent = time.monotonic()
    resp = c.recv(corr)
    # throttle, [topic: name, [partition, error]]
    off = 4 + 4
    tlen = struct.unpack('>h', resp[off:off + 2])[0]
    off += 2 + tlen
    n = struct.unpack('>i', resp[off:off + 4])[0]
    off += 4
    errs = []
    for _ in range(n):
        _part, err = struct.unpack('>ih', resp[off:off + 6])
        off += 6
        errs.append(err)
    if len(set(errs)) == 1:
        return 'added %d' % errs[0], sent
    return 'added mixed %s' % ' '.join(str(e) for e in errs), sent


def cmd_begin(a):
    print(begin(Conn(a.port), a, a.topic)[0])


def cmd_offsets(a):
    c = Conn(a.port)
    body = kstr(a.id.encode()) + struct.pack('>qh', a.pid, a.epoch) + kstr(a.group.encode())
    resp = c.recv(c.send(API_ADD_OFFSETS, 0, body))
    _throttle, err = struct.unpack('>ih', resp[:6])
    print('offsets %d' % err)


def cmd_txncommit(a):
    c = Conn(a.port)
    body = kstr(a.id.encode()) + kstr(a.group.encode()) + struct.pack('>qh', a.pid, a.epoch)
    body += struct.pack('>i', 1) + kstr(a.topic.encode()) + struct.pack('>i', 1)
    body += struct.pack('>iq', 0, a.offset) + kstr(b'')
    resp = c.recv(c.send(API_TXN_OFFSET_COMMIT, 0, body))
    # throttle, [topic: name, [partition, error]]
    off = 4 + 4
    tlen = struct.unpack('>h', resp[off:off + 2])[0]
    off += 2 + tlen + 4
    _part, err = struct.unpack('>ih', resp[off:off + 6])
    print('txncommit %d' % err)


def cmd_end(a):
    c = Conn(a.port)
    body = kstr(a.id.encode()) + struct.pack('>qhb', a.pid, a.epoch, 1 if a.commit else 0)
    resp = c.recv(c.send(API_END_TXN, 1, body))
    answered = time.monotonic()
    _throttle, err = struct.unpack('>ih', resp[:6])
    print('ended %d' % err)
    if a.then_begin is not None:
        # The next transaction's AddPartitionsToTxn right after EndTxn's answer,
        # on the same connection, as a client does: no process start between
        # them. sent_ms says how soon after the answer it went (the caller
        # checks that it fell inside the window it means to test).
        out, sent = begin(c, a, a.then_begin)
        print(out)
        print('sent_ms %d' % int((sent - answered) * 1000))


def cmd_commit(a):
    c = Conn(a.port)
    body = kstr(a.group.encode()) + struct.pack('>i', -1) + kstr(b'') + struct.pack('>q', -1)
    body += struct.pack('>i', 1) + kstr(a.topic.encode()) + struct.pack('>i', a.partitions)
    for part in range(a.partitions):
        body += struct.pack('>iqh', part, a.offset, -1)
    resp = c.recv(c.send(API_OFFSET_COMMIT, 2, body))
    # [topic: name, [partition, error]]
    off = 4
    tlen = struct.unpack('>h', resp[off:off + 2])[0]
    off += 2 + tlen
    n = struct.unpack('>i', resp[off:off + 4])[0]
    off += 4
    counts = {}
    for _ in range(n):
        _part, err = struct.unpack('>ih', resp[off:off + 6])
        off += 6
        counts[err] = counts.get(err, 0) + 1
    for err in sorted(counts):
        print('err %d %d' % (err, counts[err]))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest='cmd', required=True)
    i = sub.add_parser('init')
    i.add_argument('--port', type=int, required=True)
    i.add_argument('--prefix', required=True)
    i.add_argument('--count', type=int, required=True)
    i.add_argument('--start', type=int, default=0)
    i.add_argument('--window', type=int, default=256)
    d = sub.add_parser('ids')
    d.add_argument('--port', type=int, required=True)
    d.add_argument('ids', nargs='+')
    b = sub.add_parser('begin')
    b.add_argument('--port', type=int, required=True)
    b.add_argument('--id', required=True)
    b.add_argument('--pid', type=int, required=True)
    b.add_argument('--epoch', type=int, required=True)
    b.add_argument('--topic', required=True)
    b.add_argument('--partitions', type=int, default=1)
    f = sub.add_parser('offsets')
    f.add_argument('--port', type=int, required=True)
    f.add_argument('--id', required=True)
    f.add_argument('--pid', type=int, required=True)
    f.add_argument('--epoch', type=int, required=True)
    f.add_argument('--group', required=True)
    t = sub.add_parser('txncommit')
    t.add_argument('--port', type=int, required=True)
    t.add_argument('--id', required=True)
    t.add_argument('--pid', type=int, required=True)
    t.add_argument('--epoch', type=int, required=True)
    t.add_argument('--group', required=True)
    t.add_argument('--topic', required=True)
    t.add_argument('--offset', type=int, required=True)
    e = sub.add_parser('end')
    e.add_argument('--port', type=int, required=True)
    e.add_argument('--id', required=True)
    e.add_argument('--pid', type=int, required=True)
    e.add_argument('--epoch', type=int, required=True)
    e.add_argument('--commit', action='store_true')
    e.add_argument('--then-begin', metavar='TOPIC',
                   help='then AddPartitionsToTxn for TOPIC on the same connection')
    e.add_argument('--partitions', type=int, default=1)
    o = sub.add_parser('commit')
    o.add_argument('--port', type=int, required=True)
    o.add_argument('--group', required=True)
    o.add_argument('--topic', required=True)
    o.add_argument('--partitions', type=int, required=True)
    o.add_argument('--offset', type=int, required=True)
    a = p.parse_args()
    try:
        {'init': cmd_init, 'ids': cmd_ids, 'begin': cmd_begin, 'offsets': cmd_offsets, 'txncommit': cmd_txncommit, 'end': cmd_end,
         'commit': cmd_commit}[a.cmd](a)
    except (OSError, ValueError, struct.error) as e:
        print('txn_ids: %s' % e, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
