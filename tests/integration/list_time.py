#!/usr/bin/env python3
"""list_time.py produce|check --port P --topic T --state FILE [--data DIR] [--batches N]

ListOffsets by timestamp on a topic of many segments (list_time.sh).

produce: N batches of 1..8 records on partition 0 (raw Produce v7, acks=-1),
each with its own firstTimestamp, seeded: rising with jitter, batches far in
the past and future among them, and records' timestamps out of order within
a batch (deltas below and above the first; the maximum seldom the first
record's), every third batch gzip-compressed. Each batch's base offset and
its records' timestamps go to FILE.

check: for targets around every record's timestamp and spread between, the
broker's ListOffsets v2 answer must be Kafka's (CreateTime): in the first
batch whose maxTimestamp >= target, the first record whose timestamp >=
target, its offset and timestamp; or -1 and -1 when there is none. With
--data the segment files are dropped from the page cache first (the lookups
meet cold headers and batches). Exit 0 when every answer is right, 1 with
what was wrong, 2 on a protocol error.
"""
import argparse
import glob
import gzip
import json
import os
import random
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bad_client import Conn, Reader, crc32c, kstr, varint, produce_v7_body, parse_produce_v7  # noqa: E402

API_PRODUCE, API_LIST_OFFSETS = 0, 2


def record(offset_delta, ts_delta, key, value):
    body = (b'\x00' + varint(ts_delta) + varint(offset_delta) + varint(len(key)) + key +
            varint(len(value)) + value + varint(0))
    return varint(len(body)) + body


def batch(first_ts, tss, tag, compress):
    n = len(tss)
    recs = b''.join(record(i, ts - first_ts, b'k%d' % i, b'%s-%d-' % (tag, i) + b'x' * 200)
                    for i, ts in enumerate(tss))
    attributes = 0
    if compress:
        recs, attributes = gzip.compress(recs), 1
    after_crc = struct.pack('>hiqqqhii', attributes, n - 1, first_ts, max(tss), -1, -1, -1, n) + recs
    return struct.pack('>qiibI', 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc32c(after_crc)) + after_crc


def list_offsets(c, topic, ts):
    body = struct.pack('>ib', -1, 0) + struct.pack('>i', 1) + kstr(topic) + struct.pack('>iiq', 1, 0, ts)
    r = Reader(c.call(API_LIST_OFFSETS, 2, body))
    r.i32()
    r.i32()
    r.string()
    r.i32()
    r.i32()
    err = r.i16()
    return err, r.i64(), r.i64()


def list_offsets_many(c, topic, ts, n):
    """One ListOffsets v2 naming partition 0 n times: the set of (error, timestamp, offset) answered."""
    body = struct.pack('>ib', -1, 0) + struct.pack('>i', 1) + kstr(topic) + struct.pack('>i', n) + \
        struct.pack('>iq', 0, ts) * n
    r = Reader(c.call(API_LIST_OFFSETS, 2, body))
    r.i32()
    r.i32()
    r.string()
    got = set()
    for _ in range(r.i32()):
        r.i32()
        got.add((r.i16(), r.i64(), r.i64()))
    return got


def produce(a):
    rnd = random.Random(11)
    c = Conn(a.port)
    out = []
    base_ts = int(time.time() * 1000) - 3_600_000   # recent: time retention (7 days) keeps it
    for i in range(a.batches):
        first = base_ts + 1000 * i + rnd.randrange(20000)    # rising, with jitter
        if i % 97 == 5:
            first = base_ts + 10_000_000 + rnd.randrange(1000)  # far ahead, early in the log
        if i % 89 == 7:
            first = base_ts - 5_000_000                      # far behind
        # Records out of order within the batch: the maximum seldom the first record's.
        tss = [first] + [first + rnd.randrange(-500, 3000) for _ in range(rnd.randrange(8))]
        b = batch(first, tss, b'b%d' % i, i % 3 == 2)
        res = parse_produce_v7(c.call(API_PRODUCE, 7, produce_v7_body(a.topic, 0, b)))
        err, base = res[(a.topic, 0)]
        if err:
            print(f'produce of batch {i}: error {err}')
            return 2
        out.append((base, tss))
    with open(a.state, 'w') as f:
        json.dump(out, f)
    print(f'{len(out)} batches produced, offsets 0..{out[-1][0]}')
    return 0


def check(a):
    with open(a.state) as f:
        batches = json.load(f)
    if a.data:
        n = 0
        for path in glob.glob(os.path.join(a.data, a.topic + '-0', '*.log')):
            fd = os.open(path, os.O_RDONLY)
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
            n += 1
        if n < 4:
            print(f'only {n} segments: the test wants many')
            return 1
    targets = set()
    for _, tss in batches:
        for t in tss:
            targets.update((t - 1, t, t + 1))
    lo, hi = min(min(t) for _, t in batches), max(max(t) for _, t in batches)
    targets.update(range(lo - 10, hi + 10, max(1, (hi - lo) // 500)))
    c = Conn(a.port)
    bad = []
    for ts in sorted(targets):
        if ts < 0:
            continue
        want = (-1, -1)
        for base, tss in batches:
            if max(tss) >= ts:   # Kafka: the first batch that reaches it, there the first record that does
                i = next(i for i, t in enumerate(tss) if t >= ts)
                want = (base + i, tss[i])
                break
        err, got_ts, got = list_offsets(c, a.topic, ts)
        if err or (got, got_ts) != want:
            bad.append(f'ListOffsets({ts}) = offset {got} timestamp {got_ts} (error {err}), want {want}')
    # One request of 300,000 lookups by time: past DP_LIST_WORK_BYTES_MAX (256 MiB) among them, so
    # each gets less than its batch and is answered by the batch's header (base offset, maxTimestamp),
    # all alike, and the broker answers the rest as before. Lookups past the owner's credit answer
    # LEADER_NOT_AVAILABLE (retriable, dp_limits.h), as any request's do.
    for base, tss in batches:
        i = next((i for i, t in enumerate(tss) if i and t > max(tss[:i])), None)
        if i is None or len(tss) < 3:
            continue
        ts = tss[i]   # a record past the first whose timestamp is above every one before it
        got = list_offsets_many(c, a.topic, ts, 300_000)
        want = next(((b, max(t)) for b, t in batches if max(t) >= ts))
        if got - {(5, -1, -1)} != {(0, want[1], want[0])}:
            bad.append(f'300,000 lookups of {ts}: {sorted(got)[:3]}, want the header answer {want}')
        break
    for line in bad[:10]:
        print(line)
    if bad:
        print(f'{len(bad)} of {len(targets)} lookups wrong')
        return 1
    print(f'{len(targets)} lookups by time right')
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument('mode', choices=['produce', 'check'])
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--topic', required=True)
    p.add_argument('--state', required=True)
    p.add_argument('--data')
    p.add_argument('--batches', type=int, default=1500)
    a = p.parse_args()
    try:
        return produce(a) if a.mode == 'produce' else check(a)
    except (OSError, ValueError, struct.error) as e:
        print(f'protocol error: {e}')
        return 2


if __name__ == '__main__':
    sys.exit(main())
