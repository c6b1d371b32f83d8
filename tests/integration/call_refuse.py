#!/usr/bin/env python3
"""call_refuse.py - coordinator calls refused on the NIC core (sluiced --fault-call-refuse).

  all PORT    the broker refuses every call's buffer (1000/1000): InitProducerId,
        AddOffsetsToTxn, OffsetCommit, Heartbeat and JoinGroup are each answered
        COORDINATOR_LOAD_IN_PROGRESS in their own shape (no producer id, every
        partition, the member id given back), and the connection stays open
  some PORT   the broker refuses some (500/1000): a client that retries the
        retriable answer gets through a transaction (InitProducerId,
        AddOffsetsToTxn, EndTxn) and a group commit, and saw refusals on the way
Exits 0 when the broker answered so, 1 with the reason otherwise. Python 3 stdlib only.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bad_client as bc  # noqa: E402
import admin_client as ac  # noqa: E402

API_HEARTBEAT, API_JOIN_GROUP = 12, 11
LOAD = ac.COORDINATOR_LOAD_IN_PROGRESS


def die(msg):
    print(f'call_refuse.py: {msg}', file=sys.stderr)
    sys.exit(1)


def heartbeat_v0(conn, group, gen, member):
    r = bc.Reader(conn.call(API_HEARTBEAT, 0, bc.kstr(group) + struct.pack('>i', gen) + bc.kstr(member)))
    return r.i16()


def join_v1(conn, group, member):
    """Returns (error, generation, member id)."""
    body = bc.kstr(group) + struct.pack('>ii', 10000, 30000) + bc.kstr(member) + bc.kstr('consumer')
    body += struct.pack('>i', 1) + bc.kstr('range') + struct.pack('>i', 4) + b'meta'
    r = bc.Reader(conn.call(API_JOIN_GROUP, 1, body))
    err, gen = r.i16(), r.i32()
    r.string()   # protocol name
    r.string()   # leader
    return err, gen, r.string()


def cmd_all(port):
    conn = bc.Conn(port)
    err, (pid, epoch) = ac.init_producer_id_v1(conn, 'refused-tx')
    if (err, pid, epoch) != (LOAD, -1, -1):
        die(f'InitProducerId: error {err}, producer {pid} epoch {epoch}; want {LOAD}, -1, -1')
    err, _ = ac.add_offsets_to_txn_v1(conn, 'refused-tx', 7, 0, 'g')
    if err != LOAD:
        die(f'AddOffsetsToTxn: error {err}, want {LOAD}')
    parts = [('t-a', 0, 5), ('t-a', 1, 6), ('t-b', 0, 7)]
    errs = ac.offset_commit_v2(conn, 'g', parts)
    if errs != {(t, p): LOAD for t, p, _ in parts}:
        die(f'OffsetCommit: {errs}, want every partition {LOAD}')
    err = heartbeat_v0(conn, 'g', 1, 'm-1')
    if err != LOAD:
        die(f'Heartbeat: error {err}, want {LOAD}')
    err, gen, member = join_v1(conn, 'g', 'm-given')
    if (err, gen, member) != (LOAD, -1, 'm-given'):
        die(f'JoinGroup: error {err}, generation {gen}, member {member!r}; want {LOAD}, -1, m-given')
    why = bc.check_apiversions_v3(conn)
    if why:
        die(f'the connection did not stay usable: {why}')
    print('every call answered COORDINATOR_LOAD_IN_PROGRESS on an open connection')
    return 0


def cmd_some(port):
    conn = bc.Conn(port)
    refused = 0

    def counted(call):
        def f():
            nonlocal refused
            err, value = call()
            refused += err == LOAD
            return err, value
        return f

    for i in range(8):
        txn = f'some-tx-{i}'
        pid, epoch = ac.retried('InitProducerId', counted(lambda: ac.init_producer_id_v1(conn, txn)))
        ac.retried('AddOffsetsToTxn', counted(lambda: ac.add_offsets_to_txn_v1(conn, txn, pid, epoch, 'g2')))
        ac.retried('EndTxn', counted(lambda: ac.end_txn_v1(conn, txn, pid, epoch, False)))
    if refused == 0:
        die('no call was refused at 500/1000: the flag did nothing')
    print(f'8 transactions through; {refused} refusals retried')
    return 0


def main(argv):
    if len(argv) != 3 or argv[1] not in ('all', 'some'):
        die(__doc__)
    try:
        return (cmd_all if argv[1] == 'all' else cmd_some)(int(argv[2]))
    except (bc.Closed, TimeoutError, ValueError, OSError) as e:
        die(f'{argv[1]}: {e}')


if __name__ == '__main__':
    sys.exit(main(sys.argv))
