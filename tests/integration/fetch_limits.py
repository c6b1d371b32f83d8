#!/usr/bin/env python3
"""fetch_limits.py - Fetch byte limits against a running sluiced (run by fetch_limits.sh).

Issue 10, items 3 and 4. Every client byte count is clamped to the broker's
own limit before it sizes memory (a PartitionMaxBytes or MaxBytes of
0x7fffffff used to abort the broker), and the response honours MaxBytes over
all partitions as Kafka does (KIP-74): partitions in request order, each
given min(PartitionMaxBytes, what is left of MaxBytes), whole batches only,
except that the first batch of the first partition with records always goes
whole. Each case checks the records of every partition against the batches
in the log (read first with a plain fetch per partition).

With --data (the broker's data directory) the cases named 'evicted' first
drop the topic's segment files from the page cache: Kafka's answer does not
depend on what the page cache holds (the owner reads batch headers from it
only; it used to end the range at the first header it did not hold, 21 of 24
batches here, as the cases' answers did when the kernel let go of pages).

usage: fetch_limits.py --port P --topic T --partitions N [--seed S] [--only SUBSTRING] [--data DIR]
Exit status 0 if every case passed, 1 otherwise.  Python 3 stdlib only.
"""
import argparse
import os
import random
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bad_client import (Conn, Reader, Closed, kstr, crc32c, record, check_apiversions_v3,  # noqa: E402
                        metadata_v4_topic_errors, parse_produce_v7, produce_v7_body)

API_PRODUCE, API_FETCH = 0, 1
INT32_MAX = 0x7fffffff
BATCHES_PER_PARTITION = 24
RECORDS_PER_BATCH = 4
VALUE_BYTES = 2500           # ~10 KB batches
BROKER_RESPONSE_MAX = 55 << 20   # DP_FETCH_RESPONSE_MAX_BYTES (dataplane/loop/dp_limits.h)


def big_batch(tag, n=RECORDS_PER_BATCH, value_bytes=VALUE_BYTES):
    ts = int(time.time() * 1000)
    recs = b''.join(record(i, b'%s-%d' % (tag, i), bytes([65 + i % 26]) * value_bytes) for i in range(n))
    after_crc = struct.pack('>hiqqqhii', 0, n - 1, ts, ts, -1, -1, -1, n) + recs
    return struct.pack('>qiibI', 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc32c(after_crc)) + after_crc


def split_batches(records):
    """[(base_offset, last_offset, size)] of the whole v2 batches in a Records blob."""
    out, p = [], 0
    while p + 61 <= len(records):
        base, length = struct.unpack('>qi', records[p:p + 12])
        size = 12 + length
        if p + size > len(records):
            raise ValueError(f'partial batch at byte {p} of {len(records)}')
        last_delta = struct.unpack('>i', records[p + 23:p + 27])[0]
        out.append((base, base + last_delta, size))
        p += size
    if p != len(records):
        raise ValueError(f'{len(records) - p} trailing bytes after the batches')
    return out


def fetch_v4(port, version, topic, parts, max_bytes, isolation=0):
    """parts: [(partition, offset, partition_max_bytes)]. Returns ([(partition, err, records)], size)."""
    body = struct.pack('>iii', -1, 0, 0)                    # replica, MaxWaitMs 0, MinBytes 0
    if version >= 3:
        body += struct.pack('>i', max_bytes)
    if version >= 4:
        body += struct.pack('>b', isolation)
    body += struct.pack('>i', 1) + kstr(topic) + struct.pack('>i', len(parts))
    for p, off, pmax in parts:
        body += struct.pack('>iqi', p, off, pmax)
    c = Conn(port)
    try:
        corr = c.send(API_FETCH, version, body)
        size = struct.unpack('>i', c.recv_exact(4))[0]
        if size < 4 or size > BROKER_RESPONSE_MAX + (1 << 20):
            raise ValueError(f'response of {size} bytes')
        data = c.recv_exact(size)
    finally:
        c.close()
    if struct.unpack('>i', data[:4])[0] != corr:
        raise ValueError('correlation id mismatch')
    r = Reader(data[4:])
    if version >= 1:
        r.i32()                                             # throttle
    out = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            idx, err, _hw = r.i32(), r.i16(), r.i64()
            if version >= 4:
                r.i64()                                     # LSO
                for _ in range(max(r.i32(), 0)):
                    r.i64(), r.i64()
            n = r.i32()
            out.append((idx, err, r.take(n) if n > 0 else b''))
    if not r.done():
        raise ValueError('trailing bytes in the Fetch response')
    return out, size


def fetch_v11_frame(conn, topic, parts, max_bytes):
    """A Fetch v11 of parts [(partition, offset, partition_max_bytes)], one topic. Returns (corr, frame)."""
    body = struct.pack('>iiiibii', -1, 0, 0, max_bytes, 0, 0, -1)   # ..., isolation, session id, epoch
    body += struct.pack('>i', 1) + kstr(topic) + struct.pack('>i', len(parts))
    body += b''.join(struct.pack('>iiqqi', p, -1, off, -1, pmax) for p, off, pmax in parts)
    body += struct.pack('>i', 0) + kstr('')                          # forgotten topics, rack
    return conn.frame(API_FETCH, 11, body)


def parse_fetch_v11(data):
    """[(partition, err, records)] of a Fetch v11 response body (after the correlation id)."""
    r = Reader(data)
    r.i32(), r.i16(), r.i32()                               # throttle, error, session
    out = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            idx, err = r.i32(), r.i16()
            r.i64(), r.i64(), r.i64()                       # HW, LSO, log start
            for _ in range(max(r.i32(), 0)):
                r.i64(), r.i64()
            r.i32()                                         # preferred read replica
            n = r.i32()
            out.append((idx, err, r.take(n) if n > 0 else b''))
    if not r.done():
        raise ValueError('trailing bytes in the Fetch response')
    return out


def proc_status(pid, keys=('VmPeak', 'VmHWM', 'VmSize', 'VmRSS')):
    """The broker's memory figures from /proc/PID/status, in bytes."""
    got = {}
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            k, _, v = line.partition(':')
            if k in keys:
                got[k] = int(v.split()[0]) * 1024
    return got


def evict(data, topic, nparts, from_bytes=0):
    """Drop the segment files of topic's partitions from the page cache from byte from_bytes on
    (written with acks=-1, so synced: the kernel lets clean pages go). Returns how many files."""
    n = 0
    for p in range(nparts):
        d = os.path.join(data, f'{topic}-{p}')
        for name in sorted(os.listdir(d)):
            if name.endswith('.log'):
                fd = os.open(os.path.join(d, name), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, from_bytes, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
                n += 1
    return n


class Log:
    """The batches of each partition, as a plain fetch returns them."""

    def __init__(self, port, topic, nparts):
        self.b = {}
        for p in range(nparts):
            got, _ = fetch_v4(port, 4, topic, [(p, 0, 16 << 20)], 16 << 20)
            if got[0][1] != 0:
                raise ValueError(f'partition {p}: error {got[0][1]}')
            self.b[p] = split_batches(got[0][2])

    def from_offset(self, p, off):
        return [x for x in self.b[p] if x[1] >= off]


def kafka_answer(log, parts, max_bytes):
    """What Kafka returns: per entry of parts the sizes of the batches it sends."""
    left, first, want = max(max_bytes, 0), True, []
    for p, off, pmax in parts:
        allow, taken, sizes = min(max(pmax, 0), left), 0, []
        for (_b, _l, size) in log.from_offset(p, off):
            if taken + size > allow and not (first and not sizes):
                break
            sizes.append(size)
            taken += size
        if sizes:
            first = False
        left = max(0, left - taken)
        want.append(sizes)
    return want


def check(log, got, parts, max_bytes, exact):
    """None if the answer keeps every rule (and equals Kafka's with exact), else the problem."""
    want = kafka_answer(log, parts, max_bytes)
    total, first_p, nonempty = 0, None, 0
    if len(got) != len(parts):
        return f'{len(got)} partitions answered, {len(parts)} asked'
    for i, ((p, err, recs), (_p, off, pmax)) in enumerate(zip(got, parts)):
        if err:
            return f'partition {p}: error {err}'
        bs = split_batches(recs)
        expect = log.from_offset(p, off)[:len(bs)]
        if [x[2] for x in bs] != [x[2] for x in expect] or (bs and bs[0][0] != expect[0][0]):
            return f'partition {p}: batches {bs[:3]} are not the log\'s from {off}'
        if exact and [x[2] for x in bs] != want[i]:
            return f'partition {p}: {len(bs)} batches ({len(recs)} bytes), Kafka sends {len(want[i])} ({sum(want[i])})'
        if bs and first_p is None:
            first_p = p
            if len(recs) > min(max(pmax, 0), max(max_bytes, 0)) and len(bs) != 1:
                return f'partition {p}: {len(bs)} batches, {len(recs)} bytes over its limit'
        elif len(recs) > max(pmax, 0):
            return f'partition {p}: {len(recs)} bytes over PartitionMaxBytes {pmax}'
        total += len(recs)
        nonempty += bool(bs)
    first_alone = nonempty == 1 and len(split_batches(next(g[2] for g in got if g[2]))) == 1
    if total > max(max_bytes, 0) and not first_alone:
        return f'{total} record bytes in all, MaxBytes {max_bytes}, and not just one first batch'
    if first_p is None and any(want):
        return 'no records although the log has some: KIP-74 sends the first batch'
    return None


def produce(a):
    c = Conn(a.port)
    try:
        deadline = time.monotonic() + 20
        while True:   # the topic is created by the Metadata request (auto-create)
            errs = metadata_v4_topic_errors(c, [a.topic])
            if errs.get(a.topic) == 0:
                break
            if time.monotonic() > deadline:
                raise ValueError(f'topic {a.topic} not created: {errs}')
            time.sleep(0.2)
        for p in range(a.partitions):
            for i in range(BATCHES_PER_PARTITION):
                # A few batches of other sizes, so byte limits fall between batches.
                n = RECORDS_PER_BATCH + (i % 3 == 2) * 3
                res = parse_produce_v7(c.call(API_PRODUCE, 7,
                                              produce_v7_body(a.topic, p, big_batch(b'p%d-%d' % (p, i), n))))
                err = res.get((a.topic, p), (None,))[0]
                if err != 0:
                    raise ValueError(f'produce to {a.topic}/{p}: error {err}')
    finally:
        c.close()


AMP_PARTITION_ENTRIES = 3000
AMP_REQUESTS_PER_CONN = 50
AMP_CONNS = 6
AMP_BATCH_VALUE_BYTES = 50000       # ~200 KB batches: larger than any buffer lent ahead (64 KiB)
# What the attack may add to the broker's peak VmSize and VmRSS over the run. A growth, not a total:
# the broker reserves its pools whole at start-up (--print-budget; budget.sh holds RSS to that sum),
# so its idle figures move with every pool added; the amplification must not add more than this.
AMP_MEMORY_GROWTH_BOUND_BYTES = 448 << 20


def amplification(a):
    """Issue 10 follow-up: a Fetch of 3,000 partition entries and MaxBytes 100 used to lend
    every entry a buffer for its first batch (~3 GB per request with 1 MiB batches; 50 such
    pipelined took a broker to VmSize 150 GB). Pipelined on several connections at once, the
    broker's peak VmSize and VmRSS may grow by AMP_MEMORY_GROWTH_BOUND_BYTES at most, and every answer
    must be Kafka's (the first batch of the first entry, whole; nothing for the rest)."""
    import threading
    topic = a.topic + '-amp'
    c = Conn(a.port)
    try:
        deadline = time.monotonic() + 20
        while metadata_v4_topic_errors(c, [topic]).get(topic) != 0:
            if time.monotonic() > deadline:
                raise ValueError(f'topic {topic} not created')
            time.sleep(0.2)
        for p in range(a.partitions):
            for i in range(4):
                res = parse_produce_v7(c.call(API_PRODUCE, 7, produce_v7_body(
                    topic, p, big_batch(b'amp%d-%d' % (p, i), 4, AMP_BATCH_VALUE_BYTES))))
                if res.get((topic, p), (None,))[0] != 0:
                    raise ValueError(f'produce to {topic}/{p}: {res}')
    finally:
        c.close()
    log = Log(a.port, topic, a.partitions)
    parts = [(i % a.partitions, 0, 1 << 20) for i in range(AMP_PARTITION_ENTRIES)]
    before = proc_status(a.broker_pid)
    problems = []

    def one_conn(k):
        conn = Conn(a.port)
        try:
            frames = [fetch_v11_frame(conn, topic, parts, 100) for _ in range(AMP_REQUESTS_PER_CONN)]
            sender = threading.Thread(target=lambda: conn.send_raw(b''.join(f for _, f in frames)))
            sender.start()
            for corr, _ in frames:
                why = check(log, parse_fetch_v11(conn.response(corr)), parts, 100, True)
                if why:
                    problems.append(f'connection {k}: {why}')
                    break
            sender.join()
        except (Closed, TimeoutError, ValueError, OSError) as e:
            problems.append(f'connection {k}: {type(e).__name__}: {e}')
        finally:
            conn.close()

    threads = [threading.Thread(target=one_conn, args=(k,)) for k in range(AMP_CONNS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = proc_status(a.broker_pid)
    print(f'amplification: {AMP_CONNS} connections x {AMP_REQUESTS_PER_CONN} Fetches of '
          f'{AMP_PARTITION_ENTRIES} entries, MaxBytes 100: broker VmPeak {before["VmPeak"] >> 20} -> '
          f'{after["VmPeak"] >> 20} MB, VmHWM {before["VmHWM"] >> 20} -> {after["VmHWM"] >> 20} MB')
    for k in ('VmPeak', 'VmHWM'):
        if after[k] - before[k] >= AMP_MEMORY_GROWTH_BOUND_BYTES:
            problems.append(f'{k} grew {(after[k] - before[k]) >> 20} MB, bound {AMP_MEMORY_GROWTH_BOUND_BYTES >> 20} MB')
    for why in problems[:10]:
        print(f'FAIL amplification: {why}')
    return not problems


def cpu_ticks(pid):
    """utime + stime of every thread of pid, in clock ticks."""
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return int(fields[11]) + int(fields[12])


def min_bytes_unmeetable(a):
    """A Fetch whose MinBytes what is there cannot meet (INT32_MAX) waits MaxWaitMs for new
    data. Its watch used to be set at the fetch offset, which the data already passed: it
    fired at once, re-read, parked and fired again until MaxWaitMs, a NIC core and the
    owner busy all along. Over 3 s of waiting the broker must use well under a second of
    CPU (a spin took two cores' worth)."""
    wait_ms = 3000
    c = Conn(a.port)
    try:
        body = struct.pack('>iiiibii', -1, wait_ms, INT32_MAX, 1 << 20, 0, 0, -1)
        body += struct.pack('>i', 1) + kstr(a.topic) + struct.pack('>i', 1)
        body += struct.pack('>iiqqi', 0, -1, 0, -1, 1 << 20) + struct.pack('>i', 0) + kstr('')
        t0, ticks0 = time.monotonic(), cpu_ticks(a.broker_pid)
        c.call(API_FETCH, 11, body)
        took, ticks = time.monotonic() - t0, cpu_ticks(a.broker_pid) - ticks0
    finally:
        c.close()
    cpu_s = ticks / os.sysconf('SC_CLK_TCK')
    ok = took >= wait_ms / 1000 * 0.9 and cpu_s < 0.8
    print(f'{"ok  " if ok else "FAIL"} MinBytes INT32_MAX over data: answered after {took:.2f} s, '
          f'broker CPU {cpu_s:.2f} s while it waited', flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--topic', required=True)
    ap.add_argument('--partitions', type=int, required=True)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--only', help='run only the cases whose name contains this')
    ap.add_argument('--broker-pid', type=int, help='run the memory amplification case against this broker')
    ap.add_argument('--data', help="the broker's data directory: run the 'evicted' cases")
    a = ap.parse_args()
    produce(a)
    log = Log(a.port, a.topic, a.partitions)
    sizes = [x[2] for p in log.b for x in log.b[p]]
    b0 = log.b[0][0][2]
    print(f'seed {a.seed}; log: {a.partitions} partitions x {len(log.b[0])} batches of '
          f'{min(sizes)}..{max(sizes)} bytes')
    P = list(range(a.partitions))
    cases = [
        # name, version, parts [(p, offset, pmax)], MaxBytes, exact (== Kafka's answer)
        ('partition max 0x7fffffff (item 3)', 4, [(0, 0, INT32_MAX)], 1 << 20, False),
        ('both 0x7fffffff', 4, [(p, 0, INT32_MAX) for p in P], INT32_MAX, True),
        ('v2 (no MaxBytes) partition max 0x7fffffff', 2, [(p, 0, INT32_MAX) for p in P], 0, True),
        ('the same partition 40 times at 0x7fffffff', 4, [(0, 0, INT32_MAX)] * 40, INT32_MAX, False),
        ('MaxBytes 2.5 batches, partition max 20 MB (item 4)', 4, [(p, 0, 20 << 20) for p in P],
         b0 * 5 // 2, True),
        ('MaxBytes ends inside the second partition', 4, [(p, 0, b0 * 3) for p in P], b0 * 4 + b0 // 2, True),
        ('first batch over MaxBytes goes alone', 4, [(p, 0, 20 << 20) for p in P], 100, True),
        ('first batch over its partition max', 4, [(p, 0, 100) for p in P], 20 << 20, True),
        ('first partition empty: the next one gives the first batch', 4,
         [(0, log.b[0][-1][1] + 1, 1 << 20)] + [(p, 0, 1 << 20) for p in P[1:]], 10, True),
        ('negative limits', 4, [(p, 0, -5) for p in P], -1, True),
        ('MaxBytes 0', 4, [(p, 3, 1 << 20) for p in P], 0, True),
        # Before v5 a partition is 16 bytes on the wire and decodes to several times that:
        # the request arena must still hold it (it used to close such a request as malformed).
        ('v4 with 3,900 partition entries', 4, [(p % len(P), 0, b0) for p in range(3900)], b0 * 40, True),
        ('v0 with 3,900 partition entries', 0, [(p % len(P), 0, 100) for p in range(3900)], 0, True),
    ]
    evicted = {}
    if a.data:
        # Each partition's ~300 KB, with its pages from 0, 100 KiB or 256 KiB on dropped
        # (the owner's first lookup read brings ST_LOG_WARM_BYTES, 256 KiB, and what the
        # kernel reads ahead): the whole log, as Kafka reads it, cached or not.
        for at in (0, 100 << 10, 256 << 10):
            evicted[f'evicted from {at >> 10} KiB: one partition'] = at
            evicted[f'evicted from {at >> 10} KiB: every partition'] = at
            evicted[f'evicted from {at >> 10} KiB: from offset 9, MaxBytes 2.5 batches short'] = at
            cases += [
                (f'evicted from {at >> 10} KiB: one partition', 4, [(0, 0, INT32_MAX)], INT32_MAX, True),
                (f'evicted from {at >> 10} KiB: every partition', 4, [(p, 0, INT32_MAX) for p in P],
                 INT32_MAX, True),
                (f'evicted from {at >> 10} KiB: from offset 9, MaxBytes 2.5 batches short', 4,
                 [(1, 9, INT32_MAX)], sum(x[2] for x in log.from_offset(1, 9)) - b0 * 5 // 2, True),
            ]
    rnd = random.Random(a.seed)
    for k in range(60):
        parts = [(rnd.choice(P), rnd.choice([0, 0, rnd.randrange(0, 60)]),
                  rnd.choice([INT32_MAX, 0, -1, rnd.randrange(1, 200000), 1 << 30, 0x40000001]))
                 for _ in range(rnd.randrange(1, 6))]
        # Kafka's answer exactly unless a partition is named twice (kafka_answer keys by partition).
        cases.append((f'random {k}', rnd.choice([3, 4, 4, 4]), parts,
                      rnd.choice([INT32_MAX, 0, -7, rnd.randrange(1, 300000), 0x40000001]),
                      len({x[0] for x in parts}) == len(parts)))
    cases = [x for x in cases if not a.only or a.only in x[0]]
    failed = 0
    if a.broker_pid and (not a.only or a.only in 'amplification'):
        # First, so that the broker's peak memory is this case's.
        failed += not amplification(a)
        cases.append(('amplification',))
    if a.broker_pid and (not a.only or a.only in 'min bytes'):
        failed += not min_bytes_unmeetable(a)
        cases.append(('min bytes',))
    canary = Conn(a.port)
    for name, version, parts, max_bytes, exact in (x for x in cases if len(x) > 1):
        try:
            if name in evicted and not evict(a.data, a.topic, a.partitions, evicted[name]):
                raise ValueError(f'no segment files of {a.topic} under {a.data}')
            got, size = fetch_v4(a.port, version, a.topic, parts, max_bytes)
            if version < 3:
                max_bytes = BROKER_RESPONSE_MAX   # no MaxBytes field: the broker's own limit
            why = check(log, got, parts, max_bytes, exact)
        except (Closed, TimeoutError, ValueError, OSError) as e:
            why, size = f'{type(e).__name__}: {e}', 0
        canary_why = check_apiversions_v3(canary)
        if canary_why:
            why = (why + '; ' if why else '') + 'canary: ' + canary_why
        print(f'{"ok  " if not why else "FAIL"} {name}: response {size} bytes{": " + why if why else ""}',
              flush=True)
        failed += bool(why)
        if canary_why:
            print('broker gone: stopping')
            return 1
    canary.close()
    print(f'fetch_limits: {failed} of {len(cases)} cases failed (seed {a.seed})')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
