#!/usr/bin/env python3
"""delete_race.py - Produce racing a topic delete, on partitions owned by other cores.

With the broker on several cores, one connection keeps pipelined Produce v7
requests in flight to every partition of topic `race` while another deletes
the topic. Each produce must get success (it reached the old topic in time)
or UNKNOWN_TOPIC_OR_PARTITION; nothing may hang. Then the topic is created
again: it must start empty (no late write from the old topic leaked into the
new one), and take exactly what is produced to it afterwards.

usage: delete_race.py --port P [--partitions 6]
"""
import argparse
import os
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bad_client import (Conn, Reader, batch_v2, kstr, parse_produce_v7,  # noqa: E402
                        produce_v7_body)

API_PRODUCE, API_LIST_OFFSETS, API_CREATE, API_DELETE = 0, 2, 19, 20
TOPIC = 'race'


def create_topic(port, parts):
    body = (struct.pack('>i', 1) + kstr(TOPIC) + struct.pack('>ih', parts, 1) +
            struct.pack('>ii', 0, 0) + struct.pack('>ib', 30000, 0))   # v3: no assignments/configs
    r = Reader(Conn(port).call(API_CREATE, 3, body))
    r.i32()                                  # throttle
    assert r.i32() == 1
    name, err = r.string(), r.i16()
    return err


def delete_topic(port):
    body = struct.pack('>i', 1) + kstr(TOPIC) + struct.pack('>i', 30000)
    r = Reader(Conn(port).call(API_DELETE, 1, body))
    r.i32()
    assert r.i32() == 1
    name, err = r.string(), r.i16()
    return err


def latest_offsets(port, parts):
    body = (struct.pack('>i', -1) + struct.pack('>i', 1) + kstr(TOPIC) + struct.pack('>i', parts) +
            b''.join(struct.pack('>iq', p, -1) for p in range(parts)))
    r = Reader(Conn(port).call(API_LIST_OFFSETS, 1, body))
    out = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            p, err, ts, off = r.i32(), r.i16(), r.i64(), r.i64()
            out[p] = (err, off)
    return out


class Producer(threading.Thread):
    """Pipelines produce requests (all partitions per request) until stopped."""

    def __init__(self, port, parts):
        super().__init__(daemon=True)
        self.port, self.parts = port, parts
        self.stop = threading.Event()
        self.ok = self.unknown = 0
        self.other = []
        self.error = None

    def run(self):
        try:
            c = Conn(self.port)
            inflight = []
            batch = batch_v2(3)
            while not self.stop.is_set() or inflight:
                while not self.stop.is_set() and len(inflight) < 5:
                    body = (kstr(None) + struct.pack('>hi', -1, 10000) + struct.pack('>i', 1) +
                            kstr(TOPIC) + struct.pack('>i', self.parts) +
                            b''.join(struct.pack('>i', p) + struct.pack('>i', len(batch)) + batch
                                     for p in range(self.parts)))
                    inflight.append(c.send(API_PRODUCE, 7, body))
                res = parse_produce_v7(c.response(inflight.pop(0)))
                for (_, _p), (err, _base) in res.items():
                    if err == 0:
                        self.ok += 1
                    elif err == 3:
                        self.unknown += 1
                    else:
                        self.other.append(err)
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.error = repr(e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--partitions', type=int, default=6)
    a = ap.parse_args()
    parts = a.partitions

    if create_topic(a.port, parts) != 0:
        print('create failed', file=sys.stderr)
        return 1
    prod = Producer(a.port, parts)
    prod.start()
    deadline = time.time() + 30
    while prod.ok < 200 and time.time() < deadline and not prod.error:
        time.sleep(0.01)
    err = delete_topic(a.port)
    if err != 0:
        print(f'delete answered {err}', file=sys.stderr)
        return 1
    while prod.unknown < parts and time.time() < deadline and not prod.error:
        time.sleep(0.01)
    prod.stop.set()
    prod.join(30)
    print(f'racing producer: {prod.ok} appended, {prod.unknown} unknown-topic, others {prod.other}, '
          f'error {prod.error}')
    if prod.error or prod.other or prod.unknown < parts or prod.is_alive():
        return 1

    if create_topic(a.port, parts) != 0:
        print('re-create failed', file=sys.stderr)
        return 1
    offs = latest_offsets(a.port, parts)
    if any(v != (0, 0) for v in offs.values()) or len(offs) != parts:
        print(f're-created topic is not empty: {offs}', file=sys.stderr)
        return 1
    c = Conn(a.port)
    rounds = 10
    for _ in range(rounds):
        res = parse_produce_v7(c.call(API_PRODUCE, 7, b''.join([
            kstr(None), struct.pack('>hi', -1, 10000), struct.pack('>i', 1), kstr(TOPIC),
            struct.pack('>i', parts)] + [struct.pack('>i', p) + struct.pack('>i', len(batch_v2(3))) +
                                          batch_v2(3) for p in range(parts)])))
        if any(err for err, _ in res.values()):
            print(f'produce to re-created topic failed: {res}', file=sys.stderr)
            return 1
    offs = latest_offsets(a.port, parts)
    if any(v != (0, 3 * rounds) for v in offs.values()):
        print(f'unexpected offsets after re-create: {offs}', file=sys.stderr)
        return 1
    print('delete race: ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
