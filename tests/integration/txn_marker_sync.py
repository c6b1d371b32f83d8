#!/usr/bin/env python3
"""txn_marker_sync.py --port P --topic T - a transaction whose first partition
holds none of its data (txn_marker_sync.sh).

Raw TCP: InitProducerId, AddPartitionsToTxn of T/0 and T/1 (in that order),
one transactional batch to T/1 only, EndTxn(commit). The owner of T/0 has no
open transaction there and answers its marker at once; the others must still
get theirs: T/1's read_committed end (ListOffsets, isolation 1) must reach
its high watermark. Exit 0 when it does, 1 when it does not within
WAIT_S (with what was seen), 2 on a protocol error.
"""
import argparse
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bad_client import Conn, Reader, kstr, kbytes, crc32c, record  # noqa: E402

WAIT_S = 60
API_PRODUCE, API_LIST_OFFSETS, API_INIT_PID, API_ADD_PARTS, API_END_TXN = 0, 2, 22, 24, 26
TXN_TIMEOUT_MS = 600000
ATTR_TRANSACTIONAL = 0x10


def txn_batch(pid, epoch, n):
    ts = int(time.time() * 1000)
    recs = b''.join(record(i, b'k%d' % i, b'v%d' % i) for i in range(n))
    after_crc = struct.pack('>hiqqqhii', ATTR_TRANSACTIONAL, n - 1, ts, ts, pid, epoch, 0, n) + recs
    return struct.pack('>qiibI', 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc32c(after_crc)) + after_crc


def expect(what, err):
    if err:
        print('%s answered error %d' % (what, err))
        sys.exit(2)


def list_offsets(c, topic, part, isolation):
    body = struct.pack('>ib', -1, isolation) + struct.pack('>i', 1) + kstr(topic) + struct.pack('>iiq', 1, part, -1)
    r = Reader(c.call(API_LIST_OFFSETS, 2, body))
    r.i32()  # throttle
    r.i32()
    r.string()
    r.i32()
    r.i32()  # partition
    expect('ListOffsets', r.i16())
    r.i64()  # timestamp
    return r.i64()


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--topic', required=True)
    a = p.parse_args()
    tid = b'marker-sync'
    c = Conn(a.port)
    r = Reader(c.call(API_INIT_PID, 1, kstr(tid) + struct.pack('>i', TXN_TIMEOUT_MS)))
    r.i32()
    expect('InitProducerId', r.i16())
    pid, epoch = r.i64(), r.i16()

    body = kstr(tid) + struct.pack('>qh', pid, epoch) + struct.pack('>i', 1) + kstr(a.topic)
    body += struct.pack('>iii', 2, 0, 1)   # T/0 first: it gets no data
    r = Reader(c.call(API_ADD_PARTS, 1, body))
    r.i32()
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            r.i32()
            expect('AddPartitionsToTxn', r.i16())

    body = kstr(tid) + struct.pack('>hi', -1, 10000) + struct.pack('>i', 1) + kstr(a.topic)
    body += struct.pack('>ii', 1, 1) + kbytes(txn_batch(pid, epoch, 3))
    r = Reader(c.call(API_PRODUCE, 7, body))
    r.i32()
    r.string()
    r.i32()
    r.i32()
    expect('Produce', r.i16())

    r = Reader(c.call(API_END_TXN, 1, kstr(tid) + struct.pack('>qh?', pid, epoch, True)))
    r.i32()
    expect('EndTxn', r.i16())

    deadline = time.monotonic() + WAIT_S
    while True:
        hw, lso = list_offsets(c, a.topic, 1, 0), list_offsets(c, a.topic, 1, 1)
        if hw >= 4 and lso == hw:
            print('%s/1: read_committed end %d = high watermark' % (a.topic, lso))
            return 0
        if time.monotonic() > deadline:
            print('%s/1: read_committed end %d, high watermark %d after %d s: the commit marker never came'
                  % (a.topic, lso, hw, WAIT_S))
            return 1
        time.sleep(0.2)


if __name__ == '__main__':
    sys.exit(main())
