#!/usr/bin/env python3
"""txn_next_add.py PHASE PORT WORK - a producer's next transaction begins while the
markers of its last one are still being written (txn_next_add.sh runs the broker with
--fault-marker-delay-ms, so that window lasts seconds). One raw producer per phase:

  pipe (txn id tna, topic tna): T1 writes c1 to tna/0 and commits. T2's AddPartitionsToTxn
    of tna/0 and tna/1, sent as soon as EndTxn is answered, must be answered within half
    the marker delay (it does not wait for T1's markers); its batch a1 on tna/0 is taken at
    once, beside T1's closing entry (tna/0's LSO is still at c1's base just after it), and
    a2 on tna/1. T2 commits (its EndTxn waits for T1's Complete), and T3, begun at once,
    writes b1 to tna/1 and aborts. Expected read_committed: c1, a1, a2.
  kill (txn id tnk, topic tnk): T1 adds tnk/1 too but writes nothing there; as far as T2's
    batches a1 and a2, T1's markers held; then it prints "ready" and the script SIGKILLs the
    broker.
  after (a restart, no delay): T1 was decided: committed. T2 was never written to the
    coordinator log (its record waits for T1's Complete): its batches are aborted on both
    partitions at the restart, and the producer fenced (EndTxn at its epoch:
    INVALID_PRODUCER_EPOCH); the LSO reaches the high watermark on both. Expected
    read_committed: c1 only. On tnk/1 T2's a2 follows T1's marker there, written with no
    data of T1 to close: without it, a2 looked like T1's own data at the restart (open, the
    decision not applied) and T1's resumed COMMIT made it visible.

Prints the records read_committed must show, as rdk_txn --expect lines, to
WORK/exp-<topic>; state between phases in WORK/tnk.json. Python 3 stdlib only.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_client as ac  # noqa: E402
import bad_client as bc  # noqa: E402

NONE, INVALID_PRODUCER_EPOCH = 0, 47
DELAY_S = float(os.environ.get('TNA_MARKER_DELAY_S', '10'))


def expect(work, topic, recs):
    with open(os.path.join(work, f'exp-{topic}'), 'w') as f:
        for k, p, off in recs:
            f.write(f'commit {k} {topic} {p} {off}\n')


class Producer:
    def __init__(self, port, txn_id):
        self.c, self.txn_id, self.topic = bc.Conn(port), txn_id, txn_id
        self.seq = {}
        _, (self.pid, self.epoch) = bc.retried('InitProducerId', lambda: bc.init_producer_id(self.c, txn_id, 60000))

    def add(self, parts):
        return bc.add_partitions_to_txn(self.c, self.txn_id, self.topic, self.pid, self.epoch, parts)

    def write(self, partition, keys):
        """One batch, taken at once (any error exits); its records as (key, partition, offset)."""
        seq = self.seq.get(partition, 0)
        err, base = bc.txn_produce(self.c, self.txn_id, self.topic, partition,
                                   bc.txn_batch(self.pid, self.epoch, seq, keys))
        if err != NONE:
            sys.exit(f'{self.txn_id}: batch {keys[0]} to {self.topic}/{partition}: error {err}')
        self.seq[partition] = seq + len(keys)
        return [(k, partition, base + i) for i, k in enumerate(keys)]

    def end(self, commit):
        return bc.retried('EndTxn', lambda: bc.end_txn(self.c, self.txn_id, self.pid, self.epoch, commit))


def t1_then_t2(port, txn_id, t1_parts):
    """T1 (partitions t1_parts added, c1 written to 0) committed, then T2 (a1 on 0, a2 on 1)
    open: its add timed, partition 0's LSO read right after a1. Returns (producer, c1, a1 + a2,
    add seconds, LSO)."""
    p = Producer(port, txn_id)
    res = ac.create_v4(p.c, [(p.topic, 2)])
    if res[0][1] != NONE:
        sys.exit(f'create {p.topic}: {res}')
    bc.retried('AddPartitionsToTxn T1', lambda: p.add(t1_parts))
    c1 = p.write(0, ['c1.0', 'c1.1', 'c1.2'])
    p.end(1)   # answered once PrepareCommit is durable; its markers' completions are held
    t0 = time.monotonic()
    bc.retried('AddPartitionsToTxn T2', lambda: p.add([0, 1]))
    add_s = time.monotonic() - t0
    a = p.write(0, ['a1.0', 'a1.1'])
    lso = bc.list_offset(p.c, p.topic, 0, 1)
    a += p.write(1, ['a2.0', 'a2.1'])
    print(f'{txn_id}: T2 added in {add_s:.3f} s; {p.topic}/0 LSO {lso} after a1, c1 base {c1[0][2]}')
    if lso > c1[0][2]:
        sys.exit(f'{p.topic}/0: the LSO passed c1 ({lso} > {c1[0][2]}) before T2 was done: T1\'s marker '
                 'was durable already, the test proved nothing')
    if add_s >= DELAY_S / 2:
        sys.exit(f'T2\'s AddPartitionsToTxn took {add_s:.1f} s: it waited for T1\'s markers '
                 f'(held {DELAY_S:.0f} s)')
    return p, c1, a, add_s, lso


def pipe(port, work):
    p, c1, a, _, _ = t1_then_t2(port, 'tna', [0])
    p.end(1)
    t0 = time.monotonic()
    bc.retried('AddPartitionsToTxn T3', lambda: p.add([1]))
    print(f'tna: T3 added in {time.monotonic() - t0:.3f} s')
    p.write(1, ['b1.0'])
    p.end(0)
    expect(work, 'tna', c1 + a)


def kill(port, work):
    p, c1, a, _, _ = t1_then_t2(port, 'tnk', [0, 1])
    with open(os.path.join(work, 'tnk.json'), 'w') as f:
        json.dump({'pid': p.pid, 'epoch': p.epoch, 'a': a}, f)
    expect(work, 'tnk', c1)
    print('ready', flush=True)


def after(port, work):
    with open(os.path.join(work, 'tnk.json')) as f:
        st = json.load(f)
    c = bc.Conn(port)
    bc.retried('EndTxn of the lost T2', lambda: bc.end_txn(c, 'tnk', st['pid'], st['epoch'], 1),
               ok=(INVALID_PRODUCER_EPOCH,))
    deadline = time.monotonic() + 60
    for part in (0, 1):
        while True:
            hw, lso = bc.list_offset(c, 'tnk', part, 0), bc.list_offset(c, 'tnk', part, 1)
            if lso == hw:
                break
            if time.monotonic() > deadline:
                sys.exit(f'tnk/{part}: the LSO stays at {lso}, below the high watermark {hw}')
            time.sleep(0.2)
    print('tnk: T2 fenced; LSO at the high watermark on both partitions')


def main(argv):
    phase, port, work = argv[1], int(argv[2]), argv[3]
    {'pipe': pipe, 'kill': kill, 'after': after}[phase](port, work)


if __name__ == '__main__':
    main(sys.argv)
