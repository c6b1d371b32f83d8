#!/usr/bin/env python3
"""txn_add_lost.py PHASE PORT WORK - AddPartitionsToTxn records lost in a crash
(txn_add_lost.sh runs one phase per broker start; pids, epochs, sequences and
the offsets of every batch stay in WORK/state.json between them).

  run1   (normal broker) creates tal (4 partitions). X ("tal-x") opens a
         transaction on tal/0 with batch B0 and leaves it open; Z ("tal-z")
         commits batch Z1 on tal/3; Y ("tal-y") only gets its producer id.
  run2   (broker under --fault-txn-kill add-lost: no AddPartitionsToTxn record
         is written, SIGKILL at the first EndTxn) X adds tal/1 and writes B1,
         Y adds tal/2 and writes B2, Z adds tal/3 and writes Z2 (its sequence
         after Z1's); then X's EndTxn commit must see the connection closed,
         not an answer. Prints "killed".
  run3a  (broker under --fault-marker-delay-ms, so that its reconciliation
         waits for the aborts' markers; started at once) X writes B3 on tal/0,
         its open transaction: until the coordinator has reconciled (and the
         owner has X's grant again) the answer must be NOT_ENOUGH_REPLICAS,
         retriable, never INVALID_TXN_STATE; then NONE. Prints "B3: ... waited
         N" (the answers that said come back).
  run3   (same broker, after its reconciliation) before any EndTxn:
         read_committed's LSO (ListOffsets v2, isolation 1) on tal/0 and tal/1
         is at most B0's / B1's base (X's transaction is open there: tal/1
         joined it), on tal/2 and tal/3 it is the high watermark (Y's and Z's
         open data aborted). Then X's EndTxn commit answers NONE, Y's and Z's
         at their old epochs INVALID_PRODUCER_EPOCH (EndTxn v1). Writes
         WORK/exp-c (B0, B1, Z1: what read_committed must show) and WORK/exp-u
         (all five batches: read_uncommitted), as rdk_txn --expect lines.
Exit status 0 when every answer was as expected, else the reason (sys.exit).
Python 3 stdlib only (bad_client.py, admin_client.py).
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_client as ac  # noqa: E402
import bad_client as bc  # noqa: E402

API_END_TXN = 26
NONE, COORD_LOAD, COORD_NA, NOT_ENOUGH_REPLICAS, CONCURRENT = 0, 14, 15, 19, 51
INVALID_PRODUCER_EPOCH = 47
TOPIC, PARTS = 'tal', 4
IDS = {'x': 'tal-x', 'y': 'tal-y', 'z': 'tal-z'}
# Long enough that X's transaction, open across three broker starts, cannot time out.
TXN_TIMEOUT_MS = 300000
DEADLINE_S = 120


txn_batch, retried = bc.txn_batch, bc.retried   # the raw producer's helpers


def init_pid(c, txn_id):
    return bc.init_producer_id(c, txn_id, TXN_TIMEOUT_MS)


def add_parts(c, txn_id, pid, epoch, parts):
    return bc.add_partitions_to_txn(c, txn_id, TOPIC, pid, epoch, parts)


def produce(c, txn_id, partition, batch):
    return bc.txn_produce(c, txn_id, TOPIC, partition, batch)


end_txn_body, end_txn = bc.end_txn_body, bc.end_txn


def list_offset(c, partition, isolation):
    return bc.list_offset(c, TOPIC, partition, isolation)


def load(work):
    with open(os.path.join(work, 'state.json')) as f:
        return json.load(f)


def save(work, st):
    tmp = os.path.join(work, 'state.json.tmp')
    with open(tmp, 'w') as f:
        json.dump(st, f, indent=1)
    os.replace(tmp, os.path.join(work, 'state.json'))


def write_batch(c, st, who, name, partition, keys):
    """Produce one transactional batch of producer WHO to tal/partition (acks -1),
    its sequence after that producer's previous batch there; records it in st."""
    p = st['producers'][who]
    seq = p['seq'].get(str(partition), 0)
    err, base = produce(c, IDS[who], partition, txn_batch(p['pid'], p['epoch'], seq, keys))
    if err != NONE:
        sys.exit(f'batch {name} of {IDS[who]} to tal/{partition} (seq {seq}): error {err}')
    p['seq'][str(partition)] = seq + len(keys)
    st['batches'][name] = {'partition': partition, 'base': base, 'keys': keys}
    print(f'{name}: {IDS[who]} tal/{partition} base {base} seq {seq}')


def add(c, st, who, partition):
    p = st['producers'][who]
    retried(f'AddPartitionsToTxn {IDS[who]} tal/{partition}',
            lambda: add_parts(c, IDS[who], p['pid'], p['epoch'], [partition]))


def run1(port, work):
    c = bc.Conn(port)
    res = ac.create_v4(c, [(TOPIC, PARTS)])
    if res[0][1] != NONE:
        sys.exit(f'create {TOPIC}: {res}')
    st = {'producers': {}, 'batches': {}}
    for who in ('x', 'z', 'y'):
        _, (pid, epoch) = retried(f'InitProducerId {IDS[who]}', lambda: init_pid(c, IDS[who]))
        st['producers'][who] = {'pid': pid, 'epoch': epoch, 'seq': {}}
        print(f'{IDS[who]}: pid {pid} epoch {epoch}')
    add(c, st, 'x', 0)
    write_batch(c, st, 'x', 'B0', 0, ['x0-a', 'x0-b'])
    add(c, st, 'z', 3)
    write_batch(c, st, 'z', 'Z1', 3, ['z1-a', 'z1-b'])
    z = st['producers']['z']
    retried('EndTxn commit tal-z', lambda: end_txn(c, IDS['z'], z['pid'], z['epoch'], 1))
    # Z's commit must be complete before the restart (its markers written): the
    # next AddPartitionsToTxn of Z (run2) would get CONCURRENT_TRANSACTIONS otherwise,
    # and read_committed must show Z1. A second EndTxn at that epoch would be
    # INVALID_TXN_STATE; instead wait until tal/3's LSO passes Z1.
    deadline = time.monotonic() + DEADLINE_S
    z1 = st['batches']['Z1']
    while list_offset(c, 3, 1) < z1['base'] + len(z1['keys']):
        if time.monotonic() > deadline:
            sys.exit('tal/3: the LSO never passed Z1 after its commit')
        time.sleep(0.2)
    save(work, st)


def run2(port, work):
    st = load(work)
    c = bc.Conn(port)
    add(c, st, 'x', 1)
    write_batch(c, st, 'x', 'B1', 1, ['x1-a', 'x1-b'])
    add(c, st, 'y', 2)
    write_batch(c, st, 'y', 'B2', 2, ['y2-a', 'y2-b'])
    add(c, st, 'z', 3)
    write_batch(c, st, 'z', 'Z2', 3, ['z2-a', 'z2-b'])
    save(work, st)   # before the EndTxn: the broker dies in it
    x = st['producers']['x']
    bc.TIMEOUT_S = 60.0
    deadline = time.monotonic() + DEADLINE_S
    while True:
        c2 = bc.Conn(port)
        try:
            r = bc.Reader(c2.call(API_END_TXN, 1, end_txn_body(IDS['x'], x['pid'], x['epoch'], 1)))
        except bc.Closed as e:
            print(f'killed: EndTxn commit of tal-x saw the connection closed ({e})')
            return
        except TimeoutError as e:
            sys.exit(f'EndTxn commit of tal-x: {e}, want the connection closed by the killed broker')
        r.i32()
        err = r.i16()
        if err not in (COORD_LOAD, COORD_NA, CONCURRENT) or time.monotonic() > deadline:
            sys.exit(f'EndTxn commit of tal-x answered error {err}: the broker should have killed itself')
        c2.close()
        time.sleep(0.2)


def run3a(port, work):
    st = load(work)
    c = bc.Conn(port)
    x = st['producers']['x']
    seq = x['seq']['0']
    keys = ['x0-c', 'x0-d']
    waited = 0
    deadline = time.monotonic() + DEADLINE_S
    while True:
        err, base = produce(c, IDS['x'], 0, txn_batch(x['pid'], x['epoch'], seq, keys))
        if err == NONE:
            break
        if err != NOT_ENOUGH_REPLICAS or time.monotonic() > deadline:
            sys.exit(f'B3 of tal-x to tal/0 during the reconciliation: error {err}, want {NOT_ENOUGH_REPLICAS} '
                     f'(come back) until it is done, then {NONE}')
        waited += 1
        time.sleep(0.05)
    x['seq']['0'] = seq + len(keys)
    st['batches']['B3'] = {'partition': 0, 'base': base, 'keys': keys}
    print(f'B3: tal-x tal/0 base {base} seq {seq} waited {waited}')
    save(work, st)


def run3(port, work):
    st = load(work)
    c = bc.Conn(port)
    b = st['batches']
    # Before any EndTxn. Y's and Z's open data are aborted by the reconciliation
    # (its markers follow): the LSO reaches the high watermark there.
    deadline = time.monotonic() + DEADLINE_S
    while True:
        hw = {p: list_offset(c, p, 0) for p in range(PARTS)}
        lso = {p: list_offset(c, p, 1) for p in range(PARTS)}
        if lso[2] == hw[2] and lso[3] == hw[3]:
            break
        if time.monotonic() > deadline:
            sys.exit(f'LSO {lso} / high watermarks {hw}: tal/2 and tal/3 never settled '
                     f'(Y\'s B2 and Z\'s Z2 not aborted)')
        time.sleep(0.2)
    print(f'before EndTxn: LSO {lso}, high watermarks {hw}')
    for name in ('B2', 'Z2'):
        if hw[b[name]['partition']] <= b[name]['base'] + len(b[name]['keys']) - 1:
            sys.exit(f'tal/{b[name]["partition"]}: high watermark {hw[b[name]["partition"]]} '
                     f'does not cover {name} (base {b[name]["base"]}): its records are gone?')
    for name in ('B0', 'B1'):
        p = b[name]['partition']
        if lso[p] > b[name]['base']:
            sys.exit(f'tal/{p}: LSO {lso[p]} past {name}\'s base {b[name]["base"]}: '
                     f'X\'s open transaction there was closed (not joined)')
    x, y, z = (st['producers'][w] for w in 'xyz')
    retried('EndTxn commit tal-x', lambda: end_txn(c, IDS['x'], x['pid'], x['epoch'], 1))
    print('tal-x: EndTxn commit NONE')
    for who, p in (('y', y), ('z', z)):
        err, _ = retried(f'EndTxn commit {IDS[who]} at its old epoch',
                         lambda: end_txn(c, IDS[who], p['pid'], p['epoch'], 1),
                         ok=(INVALID_PRODUCER_EPOCH,))
        print(f'{IDS[who]}: EndTxn commit at epoch {p["epoch"]}: error {err}')
    with open(os.path.join(work, 'exp-c'), 'w') as fc, open(os.path.join(work, 'exp-u'), 'w') as fu:
        for name in ('B0', 'B1', 'B2', 'B3', 'Z1', 'Z2'):
            label = 'commit' if name in ('B0', 'B1', 'B3', 'Z1') else 'abort'
            for i, k in enumerate(b[name]['keys']):
                line = f'{label} {k} {TOPIC} {b[name]["partition"]} {b[name]["base"] + i}\n'
                fu.write(line)
                if label == 'commit':
                    fc.write(line)


def main(argv):
    if len(argv) != 4 or argv[1] not in ('run1', 'run2', 'run3a', 'run3'):
        sys.exit('usage: txn_add_lost.py run1|run2|run3a|run3 PORT WORK')
    {'run1': run1, 'run2': run2, 'run3a': run3a, 'run3': run3}[argv[1]](int(argv[2]), argv[3])


if __name__ == '__main__':
    main(sys.argv)
