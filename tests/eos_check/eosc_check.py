#!/usr/bin/env python3
"""eosc_check.py - judges one exactly-once checker run (issue 10).

    eosc_check.py WORKDIR [--examples N]

WORKDIR holds what eosc_run.py left: run.json (topics, seed), one log per
client instance (prod-*.log, copy-*.log, close-*.log; the format is in
eosc_driver.c), the read-backs rc.txt (read_committed) and ru.txt
(read_uncommitted), and, when sluice-dump was at hand, markers.txt: the
batches' producer ids and the transaction markers as the broker's log holds
them ("batch T P FIRST LAST PID", "marker T P OFFSET PID COMMIT|ABORT"),
which tell a transaction's outcome as written. Prints one line per anomaly class with its count and a
few examples; exit status 0 when every class is 0, 1 otherwise, 2 on a usage
or input error.

A transaction's outcome comes from its instance's log: committed (commit_ok),
aborted (abort_ok, or commit never requested: the client died, was fenced or
was SIGKILLed before it asked), or unknown (commit requested, no answer: the
client or the broker was killed mid-commit, or a fatal error). An unknown
one is resolved by the markers in the log when they agree, else by what
read_committed shows: all of it (committed) or none of it (aborted);
anything between is torn. The markers also separate a log that is wrong
from a log that is right but served wrong (aborted_visible with correct
ABORT markers: the read path).

Classes (a fault can show in several):
  aborted_visible   records of aborted transactions read with read_committed
  committed_lost    records of committed transactions missing from read_committed
  torn              committed or unknown transactions partly visible
  duplicates        extra copies of a record in read_committed
  log_duplicates    extra copies of a record in read_uncommitted (idempotence)
  order             a producer instance's records out of send order in a partition
  ack_missing       records acknowledged (delivery report with an offset; acks=all)
                    that read_uncommitted does not have at that offset (except
                    where the client reused a purged record's sequence number:
                    stats client_seq_reuse)
  lso_stuck         partitions where read_committed does not reach the high
                    watermark (LSO below it, or the reader stops short of it)
  zombie_commit     transactions committed (or visible) whose commit was requested
                    after a newer instance with the same transactional.id
                    finished init_transactions (it should have been fenced; such
                    a transaction counts as aborted in the other classes)
  phantom           records read that no client logged sending
  copy_missing      committed input records with no copy in the copier's output
                    (only judged when the copier finished)
  copy_dup          committed input records copied more than once (distinct copies)
  copy_extra        copies of input records that were not committed
  copy_order        copies out of their input partition's order
  copier_unfinished the copier never reached the end of its input
  history_bad       log lines that do not parse (a torn last line is not counted)
  log_torn          transactions with a COMMIT marker in one partition and an ABORT
                    in another (needs markers.txt)
  log_outcome       transactions whose markers contradict what the client was told
                    (committed but ABORT markers, or aborted but COMMIT markers)

Locality: a test program, one thread; pure functions over lines, so that
eosc_selftest.py can feed it synthetic histories.
"""

import json
import os
import sys

CLASSES = [
    'aborted_visible', 'committed_lost', 'torn', 'duplicates', 'log_duplicates',
    'order', 'ack_missing', 'lso_stuck', 'zombie_commit', 'phantom',
    'copy_missing', 'copy_dup', 'copy_extra', 'copy_order', 'copier_unfinished',
    'history_bad', 'log_torn', 'log_outcome',
]

EXAMPLES_MAX = 5


class Txn:
    """One transaction of one client instance, as its log tells it."""

    __slots__ = ('key', 'begin_ms', 'sends', 'drs', 'dr_errs', 'commit_req_ms', 'commit_ok',
                 'abort_ok', 'outcome')

    def __init__(self, key, begin_ms):
        self.key = key              # (txn_id, instance, txn)
        self.begin_ms = begin_ms
        self.sends = {}             # seq -> (topic, part, orig or None)
        self.drs = {}               # seq -> (topic, part, offset) of successful reports
        self.dr_errs = {}           # seq -> error name of failed reports
        self.commit_req_ms = None
        self.commit_ok = False
        self.abort_ok = False
        self.outcome = None         # committed | aborted | unknown

    def rec_id(self, seq):
        return '%s.%d.%d.%d' % (self.key[0], self.key[1], self.key[2], seq)


class Instance:
    """One client process: a transactional id and an instance number."""

    def __init__(self, name):
        self.name = name
        self.tid = None
        self.inst = None
        self.init_ok_ms = None
        self.done = False
        self.txns = {}              # txn number -> Txn


class Result:
    def __init__(self):
        self.counts = {c: 0 for c in CLASSES}
        self.examples = {c: [] for c in CLASSES}
        self.stats = {}

    def add(self, cls, n=1, example=None):
        self.counts[cls] += n
        if example is not None and len(self.examples[cls]) < EXAMPLES_MAX:
            self.examples[cls].append(example)

    def ok(self):
        return not any(self.counts.values())

    def report(self):
        out = []
        for c in CLASSES:
            out.append('%-18s %d' % (c, self.counts[c]))
            for e in self.examples[c]:
                out.append('    ' + e)
        out.append('stats: ' + ' '.join('%s=%s' % kv for kv in sorted(self.stats.items())))
        return '\n'.join(out)


def parse_log(name, lines, res):
    """An instance's log lines into an Instance. A line that does not parse is
    history_bad, except the last one (a SIGKILL may tear it)."""
    ins = Instance(name)
    n = len(lines)
    for i, line in enumerate(lines):
        f = line.split()
        try:
            ms, ev = int(f[0]), f[1]
            a = f[2:]
            if ev == 'start':
                ins.tid, ins.inst = a[0], int(a[1])
            elif ev == 'init_ok':
                ins.init_ok_ms = ms
            elif ev == 'begin':
                t = int(a[0])
                ins.txns[t] = Txn((ins.tid, ins.inst, t), ms)
            elif ev == 'send':
                ins.txns[int(a[0])].sends[int(a[1])] = (a[2], int(a[3]), a[4] if len(a) > 4 else None)
            elif ev == 'dr':
                if a[5] == '-':
                    ins.txns[int(a[0])].drs[int(a[1])] = (a[2], int(a[3]), int(a[4]))
                else:
                    ins.txns[int(a[0])].dr_errs[int(a[1])] = a[5]
            elif ev == 'commit_req':
                ins.txns[int(a[0])].commit_req_ms = ms
            elif ev == 'commit_ok':
                ins.txns[int(a[0])].commit_ok = True
            elif ev == 'abort_ok':
                ins.txns[int(a[0])].abort_ok = True
            elif ev == 'done':
                ins.done = True
            elif ev in ('init_err', 'produce_err', 'flush', 'offsets', 'offsets_err', 'commit_err',
                        'abort_req', 'abort_err', 'rewind', 'assigned', 'revoked', 'behind', 'fatal', 'exit'):
                pass
            else:
                raise ValueError(ev)
            if ins.tid is None:
                raise ValueError('no start line')
        except (IndexError, ValueError, KeyError) as e:
            if i < n - 1:
                res.add('history_bad', 1, '%s line %d: %r (%s)' % (name, i + 1, line, e))
    for t in ins.txns.values():
        if t.commit_ok:
            t.outcome = 'committed'
        elif t.abort_ok or t.commit_req_ms is None:
            t.outcome = 'aborted'
        else:
            t.outcome = 'unknown'
    return ins


def parse_read(lines, res, label):
    """A reader's output: records [(topic, part, offset, value)] and
    ends {(topic, part): (position, listoffsets, hw)}."""
    recs, ends = [], {}
    for i, line in enumerate(lines):
        f = line.split(' ', 4)
        try:
            if f[0] == 'rec':
                recs.append((f[1], int(f[2]), int(f[3]), f[4] if len(f) > 4 else ''))
            elif f[0] == 'end':
                g = f[4].split()
                ends[(f[1], int(f[2]))] = (int(f[3]), int(g[0]), int(g[1]))
            else:
                raise ValueError(f[0])
        except (IndexError, ValueError) as e:
            res.add('history_bad', 1, '%s line %d: %r (%s)' % (label, i + 1, line, e))
    return recs, ends


def markers_from_dump(topic, part, dump_lines):
    """sluice-dump's batch lines of one partition into markers.txt lines:
    "  offset A..B pos .. pid N epoch E .. transactional [control] records .. [COMMIT|ABORT] .."."""
    out = []
    for line in dump_lines:
        f = line.split()
        if len(f) < 2 or f[0] != 'offset' or 'pid' not in f:
            continue
        first, last = f[1].split('..')
        pid = f[f.index('pid') + 1]
        if 'control' in f:
            kind = 'COMMIT' if 'COMMIT' in f else 'ABORT' if 'ABORT' in f else None
            if kind:
                out.append('marker %s %d %s %s %s' % (topic, part, first, pid, kind))
        elif 'transactional' in f:
            out.append('batch %s %d %s %s %s' % (topic, part, first, last, pid))
    return out


def parse_markers(lines, res):
    """markers.txt into {(topic, part, offset): COMMIT | ABORT | open} for the
    records of transactional batches: the first marker of the batch's
    producer id after it decides."""
    events = {}
    for i, line in enumerate(lines):
        f = line.split()
        try:
            if f[0] == 'batch':
                events.setdefault((f[1], int(f[2])), []).append((int(f[3]), int(f[4]), int(f[5]), None))
            elif f[0] == 'marker':
                events.setdefault((f[1], int(f[2])), []).append((int(f[3]), int(f[3]), int(f[4]), f[5]))
            else:
                raise ValueError(f[0])
        except (IndexError, ValueError) as e:
            res.add('history_bad', 1, 'markers line %d: %r (%s)' % (i + 1, line, e))
    verdict = {}
    for (topic, part), evs in events.items():
        pending = {}
        for first, last, pid, kind in sorted(evs):
            if kind is None:
                pending.setdefault(pid, []).extend(range(first, last + 1))
            else:
                for off in pending.pop(pid, []):
                    verdict[(topic, part, off)] = kind
        for offs in pending.values():
            for off in offs:
                verdict[(topic, part, off)] = 'open'
    return verdict


def split_value(v):
    """'ID' or 'ID<ORIG' into (id, orig or None)."""
    if '<' in v:
        i, o = v.split('<', 1)
        return i, o
    return v, None


def check(logs, rc_lines, ru_lines, cfg, marker_lines=None):
    """logs: {name: [line]}; rc_lines/ru_lines: reader outputs; cfg: run.json's
    dict ('inputs': {topic: parts} in copier order, 'output': topic or None);
    marker_lines: markers.txt's lines, or None when there is none."""
    res = Result()
    verdict = parse_markers(marker_lines, res) if marker_lines is not None else None
    insts = [parse_log(name, lines, res) for name, lines in sorted(logs.items())]
    rc, rc_end = parse_read(rc_lines, res, 'rc')
    ru, ru_end = parse_read(ru_lines, res, 'ru')

    # Zombies: once a newer instance of a transactional id has finished
    # init_transactions, the older ones are fenced: a commit they request
    # after that must fail, so such a transaction is aborted, whatever the
    # client was told, and one that commits or shows is a zombie_commit.
    by_tid = {}
    for ins in insts:
        if ins.init_ok_ms is not None:
            by_tid.setdefault(ins.tid, []).append(ins)
    fenced = {}      # (tid, inst, txn) -> the fence's ms
    for ins in insts:
        later = [o.init_ok_ms for o in by_tid.get(ins.tid, []) if o.inst > ins.inst]
        if later:
            fence = min(later)
            for t in ins.txns.values():
                if t.commit_req_ms is not None and t.commit_req_ms > fence:
                    fenced[t.key] = fence
                    if not t.commit_ok:
                        t.outcome = 'aborted'

    txns = {}        # (tid, inst, txn) -> Txn
    recs = {}        # record id -> (Txn, seq)
    for ins in insts:
        for t in ins.txns.values():
            txns[t.key] = t
            for seq in t.sends:
                recs[t.rec_id(seq)] = (t, seq)

    def views(records, label):
        seen = {}    # id -> [(topic, part, off)]
        for topic, part, off, value in records:
            rid, _ = split_value(value)
            if rid not in recs:
                res.add('phantom', 1, '%s %s-%d@%d %r' % (label, topic, part, off, value))
                continue
            seen.setdefault(rid, []).append((topic, part, off))
        return seen

    rc_seen = views(rc, 'rc')
    ru_seen = views(ru, 'ru')

    # The log's verdict on each transaction: the markers after its records.
    log_says = {}
    if verdict is not None:
        for key, t in txns.items():
            v = set()
            for s in t.sends:
                for where in ru_seen.get(t.rec_id(s), []):
                    v.add(verdict.get(where, 'none'))
            log_says[key] = v
            if 'COMMIT' in v and 'ABORT' in v:
                res.add('log_torn', 1, 'txn %s.%d.%d (%s): COMMIT and ABORT markers' %
                        (key[0], key[1], key[2], t.outcome))
            elif (t.outcome == 'committed' and 'ABORT' in v) or (t.outcome == 'aborted' and 'COMMIT' in v):
                res.add('log_outcome', 1, 'txn %s.%d.%d: client was told %s, the log says %s' %
                        (key[0], key[1], key[2], t.outcome, sorted(v)))

    # Outcomes: an unknown one resolved by the log's markers where they agree,
    # else by read_committed, all or nothing.
    resolved, by_log = {}, 0
    for key, t in txns.items():
        if t.outcome != 'unknown':
            resolved[key] = t.outcome
            continue
        v = log_says.get(key, set())
        if v in ({'COMMIT'}, {'ABORT'}):
            resolved[key] = 'committed' if v == {'COMMIT'} else 'aborted'
            by_log += 1
            continue
        vis = sum(1 for s in t.sends if t.rec_id(s) in rc_seen)
        resolved[key] = 'committed' if vis else 'aborted'

    ru_at = {(topic, part, off): split_value(v)[0] for topic, part, off, v in ru}
    served_aborted = seq_reuse = 0
    for key, t in txns.items():
        ids = [t.rec_id(s) for s in sorted(t.sends)]
        vis = [i for i in ids if i in rc_seen]
        out = resolved[key]
        if out == 'aborted':
            for i in vis:
                topic, part, off = rc_seen[i][0]
                said = verdict.get((topic, part, off)) if verdict is not None else None
                served_aborted += said == 'ABORT'
                res.add('aborted_visible', 1, '%s (%s) at %s-%d@%d%s' %
                        (i, t.outcome, topic, part, off, ', log marker ' + said if said else ''))
        else:
            if t.outcome == 'committed' or log_says.get(key) == {'COMMIT'}:
                for i in ids:
                    if i not in rc_seen:
                        topic, part, _ = t.sends[int(i.rsplit('.', 1)[1])][:3]
                        res.add('committed_lost', 1, '%s (to %s-%d)' % (i, topic, part))
            if 0 < len(vis) < len(ids):
                res.add('torn', 1, 'txn %s.%d.%d (%s): %d of %d visible%s' %
                        (key[0], key[1], key[2], t.outcome, len(vis), len(ids),
                         ', log markers %s' % sorted(log_says[key]) if key in log_says else ''))
        # Acknowledged (acks=all: on disk) records stay in the log whatever the outcome.
        for seq, (topic, part, off) in t.drs.items():
            i = t.rec_id(seq)
            if (topic, part, off) in ru_seen.get(i, []):
                continue
            # librdkafka 2.0.2 may report a message purged (_PURGE_QUEUE) that
            # a broker killed mid-request had already written, and give its
            # sequence number to the next message without an epoch bump; the
            # broker then answers that one as a duplicate, with the first
            # one's offset, as Kafka does. The client's doing, not the
            # broker's: counted in the stats.
            there = ru_at.get((topic, part, off))
            if there in recs:
                t2, seq2 = recs[there]
                if t2.key[:2] == t.key[:2] and seq2 in t2.dr_errs:
                    seq_reuse += 1
                    continue
            res.add('ack_missing', 1, '%s acked at %s-%d@%d, read_uncommitted has %s (there: %s)' %
                    (i, topic, part, off, ru_seen.get(i, 'none'), there))

    for seen, cls, label in ((rc_seen, 'duplicates', 'rc'), (ru_seen, 'log_duplicates', 'ru')):
        for i, where in seen.items():
            if len(where) > 1:
                res.add(cls, len(where) - 1, '%s %d times: %s' % (i, len(where), where))

    # Per instance and partition, records in send order (txn, seq).
    for records, label in ((rc, 'rc'), (ru, 'ru')):
        last = {}    # (topic, part, tid, inst) -> ((txn, seq), off)
        for topic, part, off, value in sorted(records, key=lambda r: (r[0], r[1], r[2])):
            rid, _ = split_value(value)
            if rid not in recs:
                continue
            t, seq = recs[rid]
            k = (topic, part, t.key[0], t.key[1])
            cur = (t.key[2], seq)
            if k in last and last[k][0] > cur:
                res.add('order', 1, '%s %s-%d: %s@%d after %s.%d.%d@%d' %
                        (label, topic, part, rid, off, k[2], k[3], last[k][0][0], last[k][1]))
            last[k] = (cur, off)

    # read_committed must reach the high watermark once nothing is open.
    parts = set(rc_end) | set(ru_end)
    for tp in sorted(parts):
        e = rc_end.get(tp)
        if e is None:
            res.add('lso_stuck', 1, '%s-%d: no read_committed end' % tp)
            continue
        pos, lso, hw = e
        if pos < hw or lso < hw:
            res.add('lso_stuck', 1, '%s-%d: read_committed position %d, LSO %d, high watermark %d' %
                    (tp[0], tp[1], pos, lso, hw))

    for key, fence in fenced.items():
        t = txns[key]
        if t.commit_ok or any(t.rec_id(s) in rc_seen for s in t.sends):
            res.add('zombie_commit', 1, 'txn %s.%d.%d commit requested at %d after a newer instance fenced it '
                    'at %d (%s)' % (key[0], key[1], key[2], t.commit_req_ms, fence,
                                    'committed' if t.commit_ok else 'visible'))

    # The copier: every committed input record exactly once in the output, in order.
    out_topic = cfg.get('output')
    inputs = cfg.get('inputs', {})
    if out_topic:
        copier_done = any(ins.done for ins in insts if ins.name.startswith('copy-'))
        if not copier_done:
            res.add('copier_unfinished', 1, 'no copier instance logged done')
        committed_in = {}   # input id -> (topic, part, off) in read_committed
        for i, (t, seq) in recs.items():
            if t.sends[seq][0] in inputs and resolved[t.key] == 'committed' and i in rc_seen:
                committed_in[i] = rc_seen[i][0]
        copies = {}         # orig -> set of copy ids
        out_recs = sorted((r for r in rc if r[0] == out_topic), key=lambda r: (r[1], r[2]))
        last = {}           # output partition -> input offset of the last copy
        for topic, part, off, value in out_recs:
            cid, orig = split_value(value)
            if orig is None:
                res.add('copy_extra', 1, 'output %s-%d@%d %r is not a copy' % (topic, part, off, value))
                continue
            copies.setdefault(orig, set()).add(cid)
            src = committed_in.get(orig)
            if src is None:
                why = 'not committed' if orig in recs else 'unknown'
                res.add('copy_extra', 1, 'output %s-%d@%d copies %s (%s)' % (topic, part, off, orig, why))
                continue
            if part in last and last[part] >= src[2]:
                res.add('copy_order', 1, 'output %s-%d@%d copies %s@%d after input @%d' %
                        (topic, part, off, orig, src[2], last[part]))
            last[part] = src[2]
        for orig, cids in copies.items():
            if len(cids) > 1 and orig in committed_in:
                res.add('copy_dup', len(cids) - 1, '%s copied %d times: %s' % (orig, len(cids), sorted(cids)))
        if copier_done:
            for orig, src in sorted(committed_in.items(), key=lambda kv: kv[1]):
                if orig not in copies:
                    res.add('copy_missing', 1, '%s at %s-%d@%d never copied' % (orig, src[0], src[1], src[2]))

    outcomes = {}
    for key, t in txns.items():
        outcomes[t.outcome] = outcomes.get(t.outcome, 0) + 1
    res.stats = {
        'instances': len(insts),
        'txns': len(txns),
        'committed': outcomes.get('committed', 0),
        'aborted': outcomes.get('aborted', 0),
        'unknown': outcomes.get('unknown', 0),
        'unknown_committed': sum(1 for k, t in txns.items() if t.outcome == 'unknown' and resolved[k] == 'committed'),
        'unknown_by_log': by_log,
        'aborted_visible_log_abort': served_aborted,
        'client_seq_reuse': seq_reuse,
        'records_sent': len(recs),
        'rc_records': len(rc),
        'ru_records': len(ru),
    }
    return res


def read_lines(path):
    """A file's complete lines: a last line without its newline (torn by a
    SIGKILL) is dropped."""
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            data = f.read()
    except FileNotFoundError:
        return []
    lines = data.split('\n')
    return [l for l in lines[:-1] if l]


def check_dir(work):
    with open(os.path.join(work, 'run.json')) as f:
        cfg = json.load(f)
    logs = {}
    for name in os.listdir(work):
        if name.endswith('.log') and name.split('-', 1)[0] in ('prod', 'copy', 'close'):
            logs[name[:-4]] = read_lines(os.path.join(work, name))
    mpath = os.path.join(work, 'markers.txt')
    markers = read_lines(mpath) if os.path.exists(mpath) else None
    return check(logs, read_lines(os.path.join(work, 'rc.txt')), read_lines(os.path.join(work, 'ru.txt')), cfg,
                 markers)


def main(argv):
    global EXAMPLES_MAX
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    if len(argv) == 4 and argv[2] == '--examples':
        EXAMPLES_MAX = int(argv[3])
    try:
        res = check_dir(argv[1])
    except (OSError, ValueError) as e:
        print('eosc_check: %s' % e, file=sys.stderr)
        return 2
    print(res.report())
    return 0 if res.ok() else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
