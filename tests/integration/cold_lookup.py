#!/usr/bin/env python3
"""cold_lookup.py --port P --topic T --partitions N --data DIR - lookups in
segments that are not in the page cache (nonblock.sh).

Before each lookup every segment file of the topic is dropped from the page
cache (posix_fadvise DONTNEED: the bytes were synced, so the kernel lets them
go), then: ListOffsets by timestamp (0: the log start; one of a stored batch:
at or before that batch; far ahead: -1) and Fetch from offsets spread over
each partition (the answer starts with the batch that holds the offset).
The broker must find the batch headers without a blocking read on its poll
core (the LD_PRELOAD probe of nonblock.sh counts them) and answer correctly.
Exit 0 when every answer is right, 1 with what was wrong, 2 on a protocol
error.
"""
import argparse
import glob
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bad_client import Conn, Reader, kstr, list_offsets  # noqa: E402

API_FETCH = 1
FETCH_MAX_BYTES = 64 << 10
SPREAD = 8                   # offsets fetched per partition


def evict(data, topic):
    for path in glob.glob(os.path.join(data, topic + '-*', '*.log')):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def fetch(c, topic, part, offset):
    """Fetch v4 of one partition: (error, high watermark, record bytes)."""
    body = struct.pack('>iiiib', -1, 100, 1, FETCH_MAX_BYTES, 0) + struct.pack('>i', 1) + kstr(topic)
    body += struct.pack('>iiqi', 1, part, offset, FETCH_MAX_BYTES)
    r = Reader(c.call(API_FETCH, 4, body))
    r.i32()  # throttle
    if r.i32() != 1:
        sys.exit(2)
    r.string()
    r.i32()
    r.i32()  # partition
    err = r.i16()
    hw = r.i64()
    r.i64()  # LSO
    for _ in range(max(r.i32(), 0)):
        r.i64(), r.i64()
    n = r.i32()
    return err, hw, r.take(n) if n > 0 else b''


def first_batch(records):
    """(base offset, last offset, base timestamp) of the first batch."""
    base, = struct.unpack_from('>q', records, 0)
    delta, ts = struct.unpack_from('>iq', records, 23)
    return base, base + delta, ts


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--topic', required=True)
    p.add_argument('--partitions', type=int, required=True)
    p.add_argument('--data', required=True)
    a = p.parse_args()
    c = Conn(a.port)
    bad, lookups = [], 0
    for part in range(a.partitions):
        evict(a.data, a.topic)
        err, _, start = list_offsets(c, a.topic, part, -2)
        err2, _, end = list_offsets(c, a.topic, part, -1)
        if err or err2 or end <= start:
            bad.append(f'{a.topic}/{part}: ListOffsets earliest/latest: errors {err}/{err2}, [{start}, {end})')
            continue
        for k in range(SPREAD):
            off = start + (end - start) * k // SPREAD
            evict(a.data, a.topic)
            err, hw, recs = fetch(c, a.topic, part, off)
            lookups += 1
            if err or len(recs) < 61:
                bad.append(f'{a.topic}/{part}: Fetch from {off}: error {err}, {len(recs)} bytes')
                continue
            base, last, ts = first_batch(recs)
            if not base <= off <= last:
                bad.append(f'{a.topic}/{part}: Fetch from {off} began with batch [{base}, {last}]')
            evict(a.data, a.topic)
            err, _, found = list_offsets(c, a.topic, part, ts)
            lookups += 1
            if err or not start <= found <= base:
                bad.append(f'{a.topic}/{part}: ListOffsets({ts}) = {found} (error {err}), want in [{start}, {base}]')
        evict(a.data, a.topic)
        err, _, first = list_offsets(c, a.topic, part, 0)
        err2, _, none = list_offsets(c, a.topic, part, int(time.time() * 1000) + 3600 * 1000)
        lookups += 2
        if err or first != start or err2 or none != -1:
            bad.append(f'{a.topic}/{part}: ListOffsets(0) = {first}, (in an hour) = {none}, want {start} and -1')
    c.close()
    for b in bad:
        print(b)
    if bad:
        sys.exit(1)
    print(f'{lookups} lookups in cold segments answered right')


if __name__ == '__main__':
    main()
