#!/usr/bin/env python3
"""many_conns.py - hundreds of connections, each pipelining requests.

Opens N connections at once (default 400), sends on each a pipeline of
ApiVersions v3 / Metadata v1 / ApiVersions v2 requests without waiting, then
reads every response and checks that each connection's answers come back
complete and in request order (by correlation id). Python 3 stdlib only.

usage: many_conns.py --port P [--host H] [--conns N] [--depth D]
"""
import argparse
import selectors
import socket
import struct
import sys
import time


def apiversions_v3(corr):
    hdr = struct.pack('>hhih', 18, 3, corr, 4) + b'many' + b'\x00'
    body = b'\x05sluc' + b'\x040.1' + b'\x00'   # compact strings + empty tags
    return hdr + body


def apiversions_v2(corr):
    return struct.pack('>hhih', 18, 2, corr, 4) + b'many'


def metadata_v1(corr):
    return struct.pack('>hhih', 3, 1, corr, 4) + b'many' + struct.pack('>i', 0)  # no topics


def frame(b):
    return struct.pack('>i', len(b)) + b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--host', default='127.0.0.1')
    ap.add_argument('--conns', type=int, default=400)
    ap.add_argument('--depth', type=int, default=9)
    a = ap.parse_args()

    sel = selectors.DefaultSelector()
    conns = []
    for i in range(a.conns):
        s = socket.create_connection((a.host, a.port), timeout=10)
        s.setblocking(False)
        reqs = bytearray()
        expect = []
        for d in range(a.depth):
            corr = i * 1000 + d
            make = (apiversions_v3, metadata_v1, apiversions_v2)[d % 3]
            reqs += frame(make(corr))
            expect.append((corr, d % 3))
        st = {'sock': s, 'out': bytes(reqs), 'in': bytearray(), 'expect': expect, 'got': []}
        conns.append(st)
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, st)

    deadline = time.time() + 60
    open_n = len(conns)
    while open_n and time.time() < deadline:
        for key, ev in sel.select(timeout=1):
            st = key.data
            s = st['sock']
            if ev & selectors.EVENT_WRITE and st['out']:
                n = s.send(st['out'])
                st['out'] = st['out'][n:]
                if not st['out']:
                    sel.modify(s, selectors.EVENT_READ, st)
            if ev & selectors.EVENT_READ:
                data = s.recv(65536)
                if not data:
                    print('connection closed early', file=sys.stderr)
                    return 1
                st['in'] += data
                while len(st['in']) >= 4:
                    (size,) = struct.unpack('>i', st['in'][:4])
                    if len(st['in']) < 4 + size:
                        break
                    body = bytes(st['in'][4:4 + size])
                    del st['in'][:4 + size]
                    (corr,) = struct.unpack('>i', body[:4])
                    st['got'].append((corr, body))
                if len(st['got']) == len(st['expect']):
                    sel.unregister(s)
                    s.close()
                    open_n -= 1
    if open_n:
        print(f'{open_n} connections did not get all responses', file=sys.stderr)
        return 1
    bad = 0
    for st in conns:
        for (corr, kind), (gcorr, body) in zip(st['expect'], st['got']):
            if corr != gcorr:
                bad += 1
            elif kind in (0, 2):
                (err,) = struct.unpack('>h', body[4:6])   # header v0, then ErrorCode
                bad += err != 0
    total = sum(len(st['expect']) for st in conns)
    print(f'{len(conns)} connections, {total} pipelined requests, {bad} out of order or failed')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
