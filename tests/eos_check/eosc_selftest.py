#!/usr/bin/env python3
"""eosc_selftest.py - proves that eosc_check.py sees each anomaly class.

Builds a synthetic run (client logs in eosc_driver's format, a partition log
with markers, the read_committed and read_uncommitted read-backs derived from
it) that holds every legal case: interleaved transactions of several
producers, commits, aborts with and without a flush, unknown outcomes that
turned out committed and aborted, a zombie instance fenced by its successor,
a copier with aborted and retried copies. The checker must report 0 in every
class for it; then each anomaly is injected into a fresh copy, one at a time,
and its class must be reported (other classes may fire too where one fault
implies another, e.g. a lost committed record is also a torn transaction).
Also checks that a log's torn last line is ignored and that the file-reading
path (check_dir) sees what the in-memory one does.

Exit 0 when all hold, 1 otherwise. Locality: a test program, one thread.
"""

import json
import os
import random
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eosc_check  # noqa: E402

INPUTS = {'a': 2, 'b': 2}
OUT = 'o'


class Synth:
    """A synthetic run: client logs, partition logs, read-backs."""

    def __init__(self, inject=None, seed=1):
        self.inject = inject
        self.log_injected = False
        self.rng = random.Random(seed)
        self.ms = 1000
        self.logs = {}
        self.plog = {}            # (topic, part) -> [value or None (a marker)]
        self.visible = {}         # (topic, part) -> [bool] per entry: read_committed shows it
        self.txns = []            # every Txn built (for injections)
        self.dump = []            # markers.txt: batches and markers as the log holds them
        self.pids = {}            # transactional id -> producer id
        for t, n in list(INPUTS.items()) + [(OUT, 4)]:
            for p in range(n):
                self.plog[(t, p)] = []
                self.visible[(t, p)] = []

    def tick(self):
        self.ms += self.rng.randint(1, 5)
        return self.ms

    def instance(self, prefix, tid, inst):
        name = '%s-%s-%d' % (prefix, tid, inst)
        lines = self.logs.setdefault(name, [])
        ins = {'name': name, 'tid': tid, 'inst': inst, 'lines': lines, 'txn': 0}
        self.line(ins, 'start %s %d 100' % (tid, inst))
        self.line(ins, 'init_ok')
        return ins

    def line(self, ins, text):
        ins['lines'].append('%d %s' % (self.tick(), text))

    def begin(self, ins):
        ins['txn'] += 1
        t = {'ins': ins, 'n': ins['txn'], 'recs': [], 'in_log': []}
        self.line(ins, 'begin %d' % t['n'])
        self.txns.append(t)
        return t

    def rec_id(self, t, seq):
        return '%s.%d.%d.%d' % (t['ins']['tid'], t['ins']['inst'], t['n'], seq)

    def send(self, t, topic, part, orig=None, to_log=True, dr=True):
        seq = len(t['recs'])
        rid = self.rec_id(t, seq)
        value = rid if orig is None else rid + '<' + orig
        self.line(t['ins'], 'send %d %d %s %d%s' % (t['n'], seq, topic, part, '' if orig is None else ' ' + orig))
        t['recs'].append((topic, part, value))
        if to_log:
            off = len(self.plog[(topic, part)])
            self.plog[(topic, part)].append(value)
            self.visible[(topic, part)].append(None)   # decided by the end of the transaction
            t['in_log'].append((topic, part, off))
            pid = self.pids.setdefault(t['ins']['tid'], len(self.pids) + 1)
            self.dump.append('batch %s %d %d %d %d' % (topic, part, off, off, pid))
            if dr:
                self.line(t['ins'], 'dr %d %d %s %d %d -' % (t['n'], seq, topic, part, off))
        return value

    def markers(self, t, commit):
        for (topic, part, off) in t['in_log']:
            self.visible[(topic, part)][off] = commit
        pid = self.pids.get(t['ins']['tid'])
        tps = sorted({(x[0], x[1]) for x in t['in_log']})
        for k, tp in enumerate(tps):
            kind = 'COMMIT' if commit else 'ABORT'
            if commit and t['ins']['tid'] == 'p1' and len(tps) > 1 and not self.log_injected:
                if self.inject == 'log_torn' and k == 0:
                    kind = 'ABORT'      # the log itself torn
                if self.inject == 'log_outcome':
                    kind = 'ABORT'      # the log contradicts a commit_ok
                self.log_injected = k == len(tps) - 1
            self.dump.append('marker %s %d %d %d %s' % (tp[0], tp[1], len(self.plog[tp]), pid, kind))
            self.plog[tp].append(None)
            self.visible[tp].append(False)

    def commit(self, t):
        self.line(t['ins'], 'commit_req %d %d' % (t['n'], len(t['recs'])))
        self.markers(t, True)
        self.line(t['ins'], 'commit_ok %d' % t['n'])
        t['outcome'] = 'committed'

    def abort(self, t, why):
        if why == 'flush':
            self.line(t['ins'], 'flush %d -' % t['n'])
        self.line(t['ins'], 'abort_req %d %s' % (t['n'], why))
        self.markers(t, False)
        self.line(t['ins'], 'abort_ok %d' % t['n'])
        t['outcome'] = 'aborted'

    def unknown(self, t, committed):
        """Commit requested, then the client was killed: the broker finished it
        (committed) or never got the EndTxn and a later instance aborted it."""
        self.line(t['ins'], 'commit_req %d %d' % (t['n'], len(t['recs'])))
        self.markers(t, committed)
        t['outcome'] = 'unknown'

    def random_recs(self, t, n):
        for _ in range(n):
            topic = self.rng.choice(sorted(INPUTS))
            self.send(t, topic, self.rng.randrange(INPUTS[topic]))

    def build(self):
        inj = self.inject
        p0 = self.instance('prod', 'p0', 0)
        p1 = self.instance('prod', 'p1', 0)
        # Interleaved transactions of p0 and p1, every outcome.
        for i in range(12):
            a, b = self.begin(p0), self.begin(p1)
            self.random_recs(a, 1 + self.rng.randrange(6))
            self.random_recs(b, 1 + self.rng.randrange(6))
            kind_a, kind_b = i % 3, (i + 1) % 3
            for t, k in ((a, kind_a), (b, kind_b)):
                if k == 0:
                    self.commit(t)
                elif k == 1:
                    self.abort(t, 'flush')
                else:
                    self.commit(t)
        # A broker killed mid-request had written a record that the client
        # then reported purged; the client gave its sequence number to its
        # next record, which the broker answered as a duplicate with the
        # first one's offset (librdkafka 2.0.2, not an anomaly of the broker).
        t = self.begin(p1)
        v = self.send(t, 'b', 1, dr=False)
        self.line(p1, 'dr %d 0 b 1 -1 _PURGE_QUEUE' % t['n'])
        reused = t['in_log'][0][2]
        self.abort(t, 'noflush')
        t = self.begin(p1)
        self.send(t, 'b', 1, to_log=False, dr=False)
        self.line(p1, 'dr %d 0 b 1 %d -' % (t['n'], reused))
        if inj == 'ack_missing_other':
            self.logs['prod-p1-0'][-1] = self.logs['prod-p1-0'][-1].replace(' %d -' % reused, ' %d -' % (reused - 1))
        self.abort(t, 'flush')
        # Aborted without a flush: never in the log.
        t = self.begin(p1)
        for _ in range(3):
            self.send(t, 'a', 0, to_log=False, dr=False)
        self.abort(t, 'noflush')
        # p0 instance 0: killed mid-commit twice, the outcomes differ.
        t = self.begin(p0)
        self.random_recs(t, 4)
        self.unknown(t, True)
        self.unk_visible = t
        p0b = self.instance('prod', 'p0', 1)
        t = self.begin(p0b)
        for p in range(2):
            self.send(t, 'b', p, dr=False)
        self.unknown(t, False)
        # p0 instance 2 (its init fenced instance 1); instance 1 came back as a
        # zombie and had its commit refused (fatal): aborted, as its commit was
        # requested after the fence.
        p0c = self.instance('prod', 'p0', 2)
        z = self.begin(p0b)
        self.send(z, 'a', 1, to_log=False, dr=False)
        if inj == 'zombie_commit':
            # The broker let the fenced instance commit after all.
            z['in_log'].clear()
            self.line(p0b, 'commit_req %d 1' % z['n'])
            off = len(self.plog[('a', 1)])
            self.plog[('a', 1)].append(z['recs'][0][2])
            self.visible[('a', 1)].append(None)
            z['in_log'].append(('a', 1, off))
            self.markers(z, True)
            self.line(p0b, 'commit_ok %d' % z['n'])
        else:
            self.line(p0b, 'commit_req %d 1' % z['n'])
            self.line(p0b, 'commit_err %d PRODUCER_FENCED fatal' % z['n'])
            self.line(p0b, 'fatal commit_transaction PRODUCER_FENCED')
        for i in range(4):
            t = self.begin(p0c)
            self.random_recs(t, 2 + i)
            if i == 1:
                self.abort(t, 'flush')
            else:
                self.commit(t)
        if inj == 'aborted_visible':
            t = next(x for x in self.txns if x.get('outcome') == 'aborted' and x['in_log'])
            topic, part, off = t['in_log'][0]
            self.visible[(topic, part)][off] = True
        if inj == 'torn':
            topic, part, off = self.unk_visible['in_log'][-1]
            self.visible[(topic, part)][off] = False
        self.copier(inj)
        if inj == 'history_bad':
            self.logs['prod-p1-0'].insert(5, '1234 frobnicate 1 2')

    def copier(self, inj):
        c = self.instance('copy', 'c0', 0)
        order = [(t, p) for t in sorted(INPUTS) for p in range(INPUTS[t])]
        extra = None
        if inj == 'copy_extra':
            # An aborted input record copied as if committed.
            t = next(x for x in self.txns if x.get('outcome') == 'aborted' and x['in_log'])
            topic, part, off = t['in_log'][0]
            extra = (order.index((topic, part)), self.plog[(topic, part)][off])
        for k, tp in enumerate(order):
            shown = [v for v, vis in zip(self.plog[tp], self.visible[tp]) if vis]
            if inj == 'copy_order' and k == 0:
                shown[0], shown[1] = shown[1], shown[0]
            i, first = 0, True
            while i < len(shown):
                batch = shown[i:i + 3]
                t = self.begin(c)
                for v in batch:
                    self.send(t, OUT, k, orig=v)
                if first:
                    # The first copy of each partition is aborted (after a flush) and redone.
                    first = False
                    self.abort(t, 'flush')
                    self.line(c, 'rewind')
                    continue
                if inj == 'copy_dup' and k == 1 and i == 0:
                    self.send(t, OUT, k, orig=batch[0])
                if extra and extra[0] == k:
                    self.send(t, OUT, k, orig=extra[1])
                    extra = None
                self.line(c, 'offsets %d %s:%d:%d' % (t['n'], tp[0], tp[1], i + len(batch)))
                self.commit(t)
                i += len(batch)
        if inj != 'copier_unfinished':
            self.line(c, 'done')
        self.line(c, 'exit')

    def reads(self):
        rc, ru = [], []
        for (topic, part), entries in sorted(self.plog.items()):
            for off, v in enumerate(entries):
                if v is None:
                    continue
                ru.append('rec %s %d %d %s' % (topic, part, off, v))
                if self.visible[(topic, part)][off]:
                    rc.append('rec %s %d %d %s' % (topic, part, off, v))
            hw = len(entries)
            rc.append('end %s %d %d %d %d' % (topic, part, hw, hw, hw))
            ru.append('end %s %d %d %d %d' % (topic, part, hw, hw, hw))
        return rc, ru

    def run(self, markers=True):
        self.build()
        rc, ru = self.reads()
        rc, ru = self.mutate_reads(rc, ru)
        cfg = {'inputs': INPUTS, 'output': OUT}
        return eosc_check.check(self.logs, rc, ru, cfg, self.dump if markers else None), rc, ru, cfg

    def mutate_reads(self, rc, ru):
        inj = self.inject
        recs = [i for i, l in enumerate(rc) if l.startswith('rec ')]
        if inj == 'committed_lost':
            # A committed record of p1 that the copier's copy refers to: gone.
            i = next(i for i in recs if rc[i].split()[4].startswith('p1.'))
            del rc[i]
        elif inj == 'duplicates':
            rc.insert(recs[3], rc[recs[3]])
        elif inj == 'log_duplicates':
            l = next(l for l in ru if l.startswith('rec a 0 '))
            f = l.split()
            ru.append('rec a 0 %d %s' % (len(self.plog[('a', 0)]) + 5, f[4]))
        elif inj == 'order':
            # Two records of one instance in one partition, their offsets swapped.
            by = {}
            for i in recs:
                f = rc[i].split()
                if f[1] in INPUTS:
                    by.setdefault((f[1], f[2], f[4].rsplit('.', 2)[0]), []).append(i)
            i, j = next(v for v in by.values() if len(v) >= 2)[:2]
            fi, fj = rc[i].split(), rc[j].split()
            rc[i] = ' '.join(fi[:4] + [fj[4]])
            rc[j] = ' '.join(fj[:4] + [fi[4]])
        elif inj == 'ack_missing':
            t = next(x for x in self.txns if x.get('outcome') == 'aborted' and x['in_log'])
            topic, part, off = t['in_log'][0]
            ru.remove('rec %s %d %d %s' % (topic, part, off, self.plog[(topic, part)][off]))
        elif inj == 'lso_stuck':
            i = next(i for i, l in enumerate(rc) if l.startswith('end b 1 '))
            f = rc[i].split()
            rc[i] = 'end b 1 %d %d %s' % (int(f[3]) - 1, int(f[4]) - 1, f[5])
        elif inj == 'phantom':
            rc.append('rec a 1 999 zz.0.1.0')
        elif inj == 'copy_missing':
            i = next(i for i in recs if rc[i].split()[1] == OUT)
            del rc[i]
        return rc, ru


# injection -> the class that must see it
INJECTIONS = {
    'aborted_visible': 'aborted_visible',
    'committed_lost': 'committed_lost',
    'torn': 'torn',
    'duplicates': 'duplicates',
    'log_duplicates': 'log_duplicates',
    'order': 'order',
    'ack_missing': 'ack_missing',
    'ack_missing_other': 'ack_missing',
    'lso_stuck': 'lso_stuck',
    'zombie_commit': 'zombie_commit',
    'phantom': 'phantom',
    'copy_missing': 'copy_missing',
    'copy_dup': 'copy_dup',
    'copy_extra': 'copy_extra',
    'copy_order': 'copy_order',
    'copier_unfinished': 'copier_unfinished',
    'history_bad': 'history_bad',
    'log_torn': 'log_torn',
    'log_outcome': 'log_outcome',
}

# sluice-dump's lines (its format at 9fddf41) and what markers.txt gets of them.
DUMP = [
    'partition data/a-1: 1 segment(s)',
    'segment data/a-1/00000000000000000000.log size 376550',
    '  offset 4554..4555 pos 213640 size 115 pid 1 epoch 2 seq 339 codec none transactional records 2 '
    'first_ts 1 max_ts 1 crc ok',
    '  offset 4556..4556 pos 213755 size 78 pid 2 epoch 0 seq -1 codec none transactional control records 1 '
    'first_ts 1 max_ts 1 crc ok COMMIT coordinator_epoch 0',
    '  offset 4557..4557 pos 213833 size 78 pid 1 epoch 2 seq -1 codec none transactional control records 1 '
    'first_ts 1 max_ts 1 crc ok ABORT coordinator_epoch 0',
    '  offset 4558..4560 pos 213911 size 99 pid -1 epoch -1 seq -1 codec none records 3 first_ts 1 max_ts 1 crc ok',
]
DUMP_MARKERS = ['batch a 1 4554 4555 1', 'marker a 1 4556 2 COMMIT', 'marker a 1 4557 1 ABORT']


def main():
    failures = []
    missing = set(eosc_check.CLASSES) - set(INJECTIONS.values())
    if missing:
        failures.append('classes without an injection: %s' % sorted(missing))

    got = eosc_check.markers_from_dump('a', 1, DUMP)
    if got != DUMP_MARKERS:
        failures.append('markers_from_dump: %s, want %s' % (got, DUMP_MARKERS))

    for seed in range(1, 6):
        for markers in (True, False):
            res, rc, ru, cfg = Synth(None, seed).run(markers)
            if not res.ok():
                failures.append('clean history (seed %d, markers %s) reported anomalies:\n%s' %
                                (seed, markers, res.report()))
            st = res.stats
            if not (st['committed'] and st['aborted'] and st['unknown'] == 2 and st['unknown_committed'] == 1 and
                    st['unknown_by_log'] == (2 if markers else 0) and st['client_seq_reuse'] == 1):
                failures.append('clean history (seed %d) lacks a case: %s' % (seed, st))
    print('clean: %s' % res.report().splitlines()[-1])

    for inj, cls in INJECTIONS.items():
        # Each with the log's markers at hand, and (where it does not need them) without.
        for markers in (True, False) if inj not in ('log_torn', 'log_outcome') else (True,):
            res = Synth(inj, 1).run(markers)[0]
            fired = sorted(c for c, n in res.counts.items() if n)
            print('%-18s %-10s -> %s' % (inj, 'markers' if markers else 'no markers',
                                          ', '.join('%s=%d' % (c, res.counts[c]) for c in fired) or 'nothing'))
            if not res.counts[cls]:
                failures.append('%s injected (markers %s), %s = 0:\n%s' % (inj, markers, cls, res.report()))

    # The file path: a clean run written out, a torn last line added to a log.
    s = Synth(None, 7)
    res_mem, rc, ru, cfg = s.run()
    work = tempfile.mkdtemp(prefix='eosc-selftest-')
    try:
        for name, lines in s.logs.items():
            with open(os.path.join(work, name + '.log'), 'w') as f:
                f.write('\n'.join(lines) + '\n')
        with open(os.path.join(work, 'prod-p1-0.log'), 'a') as f:
            f.write('1999 send 99 0 a')         # SIGKILLed in the middle of a line
        for fname, lines in (('rc.txt', rc), ('ru.txt', ru)):
            with open(os.path.join(work, fname), 'w') as f:
                f.write('\n'.join(lines) + '\n')
        with open(os.path.join(work, 'run.json'), 'w') as f:
            json.dump(cfg, f)
        with open(os.path.join(work, 'markers.txt'), 'w') as f:
            f.write('\n'.join(s.dump) + '\n')
        res_file = eosc_check.check_dir(work)
        if not res_file.ok() or res_file.stats != res_mem.stats:
            failures.append('check_dir differs from check:\n%s\n%s' % (res_file.report(), res_mem.report()))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    for f in failures:
        print('FAIL: ' + f)
    print('selftest: %s' % ('FAIL' if failures else 'PASS'))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
