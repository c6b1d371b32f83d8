#!/usr/bin/env python3
"""txn_fanout.py - every partition of a transaction gets its marker (run by txn_fanout.sh).

A raw-TCP transactional producer (the wire format by hand, helpers from
bad_client.py) that sends exactly this, so the order of the coordinator's
partition list is known:

  1. InitProducerId; AddPartitionsToTxn T/0, T/1, T/2; a transactional
     batch of 3 records to T/1 only; EndTxn abort.
  2. AddPartitionsToTxn T/0 (served once 1's markers are sent); a batch to
     T/0; EndTxn commit.
  3. AddPartitionsToTxn T/0.

Then (within a deadline: nothing waits for the markers' durability) T/1 must
hold its 3 records and the ABORT marker (high watermark 4) and its last
stable offset must have passed them (4), T/0 the ABORT marker of 1 (written
where the transaction wrote nothing, as Kafka does, so that the decision is
recorded there), its records and the COMMIT marker (5), and T/2 that ABORT
marker alone (1). The coordinator used to count a partition's answer while it
was still sending: an owner on its own core (--cores 1) answers the marker
of T/0, where the transaction wrote nothing, at once, the count reached 0,
the abort was taken as complete, and T/1 never got its marker: its
transaction stayed open (LSO 0), for the next COMMIT of that producer there
to commit.

usage: txn_fanout.py --port P --topic T
Exit status 0 if the broker answered as Kafka would, 1 with the reason otherwise.
Python 3 stdlib only.
"""
import argparse
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bad_client as bc  # noqa: E402

bc.TIMEOUT_S = 120.0     # a busy machine: generous, never a timing assertion

API_PRODUCE, API_LIST_OFFSETS, API_INIT_PRODUCER_ID = 0, 2, 22
API_ADD_PARTITIONS, API_END_TXN = 24, 26
TXN_ID = 'txn-fanout'
ATTR_TRANSACTIONAL = 0x10
LATEST = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
# Answers a transactional request may get while the coordinator settles: asked again.
RETRIABLE = (14, 15, 51)   # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS
SETTLE_S = 60


class Failed(Exception):
    pass


def retried(what, call):
    """call() -> (error, value), asked again while the answer is retriable."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        err, value = call()
        if err == bc.NONE:
            return value
        if err not in RETRIABLE or time.monotonic() > deadline:
            raise Failed(f'{what}: error {err}')
        time.sleep(0.1)


def init_producer_id(c):
    r = bc.Reader(c.call(API_INIT_PRODUCER_ID, 1, bc.kstr(TXN_ID) + struct.pack('>i', 60000)))
    r.i32()
    err, pid, epoch = r.i16(), r.i64(), r.i16()
    return err, (pid, epoch)


def add_partitions(c, pid, epoch, topic, parts):
    body = bc.kstr(TXN_ID) + struct.pack('>qh', pid, epoch) + struct.pack('>i', 1) + bc.kstr(topic)
    body += struct.pack('>i', len(parts)) + b''.join(struct.pack('>i', p) for p in parts)
    r = bc.Reader(c.call(API_ADD_PARTITIONS, 1, body))
    r.i32()
    errs = set()
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            r.i32()
            errs.add(r.i16())
    errs.discard(bc.NONE)
    return (max(errs) if errs else bc.NONE), None


def end_txn(c, pid, epoch, commit):
    r = bc.Reader(c.call(API_END_TXN, 1, bc.kstr(TXN_ID) + struct.pack('>qhb', pid, epoch, 1 if commit else 0)))
    r.i32()
    return r.i16(), None


def txn_batch(pid, epoch, seq, tag, n=3):
    ts = int(time.time() * 1000)
    recs = b''.join(bc.record(i, b'%s-%d' % (tag, i), b'value') for i in range(n))
    after_crc = struct.pack('>hiqqqhii', ATTR_TRANSACTIONAL, n - 1, ts, ts, pid, epoch, seq, n) + recs
    return struct.pack('>qiibI', 0, 4 + 1 + 4 + len(after_crc), -1, 2, bc.crc32c(after_crc)) + after_crc


def produce(c, topic, partition, batch):
    body = (bc.kstr(TXN_ID) + struct.pack('>hi', -1, 30000) + struct.pack('>i', 1) + bc.kstr(topic) +
            struct.pack('>ii', 1, partition) + bc.kbytes(batch))
    err, _base = bc.parse_produce_v7(c.call(API_PRODUCE, 7, body)).get((topic, partition), (None, None))
    if err != bc.NONE:
        raise Failed(f'produce to {topic}/{partition}: error {err}')


def latest(c, topic, partition, isolation):
    """ListOffsets v2 latest: the high watermark (read_uncommitted) or the LSO (read_committed)."""
    body = struct.pack('>ib', -1, isolation) + struct.pack('>i', 1) + bc.kstr(topic)
    body += struct.pack('>iiq', 1, partition, LATEST)
    r = bc.Reader(c.call(API_LIST_OFFSETS, 2, body))
    r.i32()
    r.i32()
    r.string()
    r.i32()
    r.i32()
    err, _ts, off = r.i16(), r.i64(), r.i64()
    if err != bc.NONE:
        raise Failed(f'ListOffsets {topic}/{partition}: error {err}')
    return off


def run(a):
    c = bc.Conn(a.port)
    deadline = time.monotonic() + SETTLE_S
    while bc.metadata_v4_topic_errors(c, [a.topic]).get(a.topic) != bc.NONE:   # auto-create
        if time.monotonic() > deadline:
            raise Failed(f'topic {a.topic} not created')
        time.sleep(0.2)
    pid, epoch = retried('InitProducerId', lambda: init_producer_id(c))

    retried('AddPartitionsToTxn 0,1,2', lambda: add_partitions(c, pid, epoch, a.topic, [0, 1, 2]))
    produce(c, a.topic, 1, txn_batch(pid, epoch, 0, b'aborted'))
    retried('EndTxn abort', lambda: end_txn(c, pid, epoch, False))

    retried('AddPartitionsToTxn 0 (second)', lambda: add_partitions(c, pid, epoch, a.topic, [0]))
    produce(c, a.topic, 0, txn_batch(pid, epoch, 0, b'committed'))
    retried('EndTxn commit', lambda: end_txn(c, pid, epoch, True))
    retried('AddPartitionsToTxn 0 (third)', lambda: add_partitions(c, pid, epoch, a.topic, [0]))

    bad = []
    want = ((1, 4, 'the aborted batch and its ABORT marker'),
            (0, 5, 'the first ABORT marker, the committed batch and its COMMIT marker'),
            (2, 1, 'the first ABORT marker: the transaction wrote nothing there'))
    deadline = time.monotonic() + 30
    for p, end, what in want:
        while True:
            hw, lso = latest(c, a.topic, p, READ_UNCOMMITTED), latest(c, a.topic, p, READ_COMMITTED)
            if (hw, lso) == (end, end) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        print(f'{a.topic}/{p}: high watermark {hw}, last stable offset {lso}')
        if (hw, lso) != (end, end):
            bad.append(f'{a.topic}/{p}: high watermark {hw}, LSO {lso}; want {end} and {end} ({what})')
    c.close()
    if bad:
        raise Failed('; '.join(bad))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--topic', required=True)
    a = ap.parse_args()
    try:
        run(a)
    except (Failed, bc.Closed, ValueError, TimeoutError, OSError) as e:
        print(f'txn_fanout: {e}', file=sys.stderr)
        return 1
    print('txn_fanout: every partition got its marker')
    return 0


if __name__ == '__main__':
    sys.exit(main())
