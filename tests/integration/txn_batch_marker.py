#!/usr/bin/env python3
"""txn_batch_marker.py PORT OUT - a transactional batch that reaches its partition
while its producer's previous marker there is written but not yet durable
(txn_batch_marker.sh runs the broker with --fault-marker-delay-ms, so that
window lasts seconds).

A producer (raw client) opens a transaction on tbm/0 and writes batch c1; an
admin WriteTxnMarkers COMMIT for it lands on tbm/0 (held not durable by the
fault). The producer then adds tbm/1 to its transaction, which grants it tbm/0
again, and writes batch a1 to tbm/0 and batch a2 to tbm/1: a1 opens the
producer's next transaction there at once, beside the closing one, whose
marker still holds tbm/0's LSO at c1's base (checked right after a1). The
producer aborts; its ABORT marker on tbm/0 waits for the held COMMIT
(CONCURRENT_TRANSACTIONS, sent again). Prints the records read_committed must
show, as rdk_txn --expect lines, to OUT (c1's only), "refused N" (answers
that said come back) and "held LSO L base B" (tbm/0's LSO just after a1).
Python 3 stdlib only (bad_client.py, admin_client.py).
"""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_client as ac  # noqa: E402
import bad_client as bc  # noqa: E402

API_WRITE_MARKERS = 27
NONE, NOT_ENOUGH_REPLICAS, COORD_LOAD, COORD_NA, CONCURRENT = 0, 19, 14, 15, 51
TXN_ID, TOPIC = 'tbm', 'tbm'
DEADLINE_S = 120


txn_batch, retried = bc.txn_batch, bc.retried   # the raw producer's helpers


def init_pid(c):
    return bc.init_producer_id(c, TXN_ID, 60000)


def add_parts(c, pid, epoch, parts):
    return bc.add_partitions_to_txn(c, TXN_ID, TOPIC, pid, epoch, parts)


def produce(c, partition, batch):
    return bc.txn_produce(c, TXN_ID, TOPIC, partition, batch)


def end_txn(c, pid, epoch, commit):
    return bc.end_txn(c, TXN_ID, pid, epoch, commit)


def main(argv):
    port, out = int(argv[1]), argv[2]
    c = bc.Conn(port)
    res = ac.create_v4(c, [(TOPIC, 2)])
    if res[0][1] != NONE:
        sys.exit(f'create {TOPIC}: {res}')
    _, (pid, epoch) = retried('InitProducerId', lambda: init_pid(c))
    retried('AddPartitionsToTxn tbm/0', lambda: add_parts(c, pid, epoch, [0]))
    c1 = [f'c1.{i}' for i in range(3)]
    err, base = produce(c, 0, txn_batch(pid, epoch, 0, c1))
    if err != NONE:
        sys.exit(f'batch c1: error {err}')

    # The admin's COMMIT marker for the open transaction on tbm/0: written at once, durable
    # only after the fault's delay; its answer is read at the end.
    admin = bc.Conn(port)
    body = struct.pack('>i', 1) + struct.pack('>qhb', pid, epoch, 1) + struct.pack('>i', 1) + bc.kstr(TOPIC)
    body += struct.pack('>ii', 1, 0) + struct.pack('>i', 0)
    corr = admin.send(API_WRITE_MARKERS, 0, body)
    time.sleep(0.5)   # the marker is appended long before its held completion

    # tbm/1 joins the transaction: its owners are told of every partition, tbm/0 again.
    t0 = time.monotonic()
    retried('AddPartitionsToTxn tbm/1', lambda: add_parts(c, pid, epoch, [1]))
    a1, a2 = [f'a1.{i}' for i in range(3)], [f'a2.{i}' for i in range(3)]
    refused = 0
    deadline = time.monotonic() + DEADLINE_S
    while True:
        err, _ = produce(c, 0, txn_batch(pid, epoch, len(c1), a1))
        if err == NONE:
            break
        if err != NOT_ENOUGH_REPLICAS or time.monotonic() > deadline:
            sys.exit(f'batch a1 to tbm/0: error {err} (after {refused} refusals)')
        refused += 1
        time.sleep(0.2)
    print(f'a1 accepted after {time.monotonic() - t0:.1f} s and {refused} refusals')
    held = bc.list_offset(c, TOPIC, 0, 1)
    err, _ = produce(c, 1, txn_batch(pid, epoch, 0, a2))
    if err != NONE:
        sys.exit(f'batch a2 to tbm/1: error {err}')
    r = bc.Reader(admin.response(corr))
    for _ in range(r.i32()):
        r.i64()
        for _ in range(r.i32()):
            r.string()
            for _ in range(r.i32()):
                r.i32()
                if r.i16() != NONE:
                    sys.exit('the admin COMMIT marker was not written')
    retried('EndTxn abort', lambda: end_txn(c, pid, epoch, 0))
    # Wait until the abort is complete: the next InitProducerId answers then.
    retried('InitProducerId after the abort', lambda: init_pid(c))
    with open(out, 'w') as f:
        for i, k in enumerate(c1):
            f.write(f'commit {k} {TOPIC} 0 {base + i}\n')
    print(f'refused {refused}')
    print(f'held LSO {held} base {base}')


if __name__ == '__main__':
    main(sys.argv)
