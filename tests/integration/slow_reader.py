#!/usr/bin/env python3
"""slow_reader.py - clients that pipeline Fetches and never read the answers.

Each of --conns hostile connections sends Fetch v4 requests for partition 0
of --topic from offset 0 with a large PartitionMaxBytes and MaxBytes, as fast
as the socket takes them, and never reads (a small SO_RCVBUF, so the
answers stay on the broker's side). A connection the broker closes is opened
again at once, so the pressure stays on. Meanwhile the broker's resident
memory (VmRSS in /proc/PID/status) is sampled; it must stay below --bound-mb
for the whole run (the script stops at once if it does not, so an unfixed
broker cannot take the machine's memory). Every few seconds a normal
client on a fresh connection sends one Fetch and must get its answer.

With --park-offset O the hostile fetches instead long-poll at offset O (the
end of the log) with MaxWaitMs INT32_MAX and a MinBytes never reached, each
holding its lent buffer while parked; normal clients must still be served.

usage: slow_reader.py --port P --pid PID --topic T --bound-mb N
                      [--conns C] [--duration S] [--partition-max-bytes B] [--park-offset O]
Exit status 0 on success, 1 with the reason on stderr. Python 3 stdlib only.
"""
import argparse
import socket
import struct
import sys
import threading
import time

CLIENT = b'slow-reader'


def kstr(b):
    return struct.pack('>h', len(b)) + b


def fetch_v4(corr, topic, pmax, maxb, wait_ms=0, min_bytes=1, offset=0):
    hdr = struct.pack('>hhi', 1, 4, corr) + kstr(CLIENT)
    body = struct.pack('>iiiib', -1, wait_ms, min_bytes, maxb, 0)
    body += struct.pack('>i', 1) + kstr(topic) + struct.pack('>i', 1)
    body += struct.pack('>iqi', 0, offset, pmax)
    msg = hdr + body
    return struct.pack('>i', len(msg)) + msg


def rss_mb(pid):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError('no VmRSS')


class Hostile(threading.Thread):
    def __init__(self, a, idx, stop):
        super().__init__(daemon=True)
        self.a, self.idx, self.stop = a, idx, stop
        self.sent = 0
        self.reconnects = 0

    def run(self):
        corr = self.idx << 20
        if self.a.park_offset >= 0:
            # Long polls at the end of the log: each parks, holding its lent buffer.
            burst = b''.join(fetch_v4(corr + i, self.a.topic.encode(), self.a.partition_max_bytes,
                                      self.a.partition_max_bytes, 0x7fffffff, 1 << 30, self.a.park_offset)
                             for i in range(64))
        else:
            burst = b''.join(fetch_v4(corr + i, self.a.topic.encode(), self.a.partition_max_bytes,
                                      self.a.partition_max_bytes) for i in range(64))
        while not self.stop.is_set():
            try:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.settimeout(0.5)
                s.connect(('127.0.0.1', self.a.port))
            except OSError:
                time.sleep(0.1)
                continue
            try:
                while not self.stop.is_set():
                    try:
                        s.sendall(burst)
                        self.sent += 64
                    except socket.timeout:
                        pass   # the broker stopped reading us: flow control at work
            except OSError:
                self.reconnects += 1
            finally:
                s.close()


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        b = s.recv(n - len(buf))
        if not b:
            raise ConnectionError('closed by the broker')
        buf += b
    return bytes(buf)


def normal_fetch(a, timeout_s):
    """One Fetch on a fresh connection, read back: None if answered well, else why not."""
    try:
        s = socket.create_connection(('127.0.0.1', a.port), timeout=timeout_s)
    except OSError as e:
        return f'connect: {e}'
    try:
        s.sendall(fetch_v4(7, a.topic.encode(), 1 << 20, 1 << 20))
        size = struct.unpack('>i', recv_exact(s, 4))[0]
        data = recv_exact(s, size)
        corr, _throttle, ntopics = struct.unpack('>iii', data[:12])
        if corr != 7 or ntopics != 1:
            return f'bad answer: correlation {corr}, {ntopics} topics'
        p = 12
        tlen = struct.unpack('>h', data[p:p + 2])[0]
        p += 2 + tlen
        _nparts, _part, err, hw = struct.unpack('>iihq', data[p:p + 18])
        if err != 0 or hw <= 0:
            return f'partition error {err}, high watermark {hw}'
        return None
    except (OSError, ConnectionError, struct.error) as e:
        return f'fetch: {e}'
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--pid', type=int, required=True)
    ap.add_argument('--topic', required=True)
    ap.add_argument('--bound-mb', type=float, required=True)
    ap.add_argument('--conns', type=int, default=8)
    ap.add_argument('--duration', type=float, default=20.0)
    ap.add_argument('--partition-max-bytes', type=int, default=64 << 20)
    ap.add_argument('--check-every', type=float, default=3.0)
    ap.add_argument('--park-offset', type=int, default=-1,
                    help='hostile fetches long-poll here (MaxWaitMs INT32_MAX) instead of reading from 0')
    a = ap.parse_args()

    base = rss_mb(a.pid)
    stop = threading.Event()
    hs = [Hostile(a, i, stop) for i in range(a.conns)]
    for h in hs:
        h.start()
    peak, fails, checks = base, [], 0
    t0 = time.monotonic()
    next_check = t0 + a.check_every
    watcher_err = []

    def watch():
        nonlocal peak
        while not stop.is_set():
            try:
                r = rss_mb(a.pid)
            except (OSError, RuntimeError) as e:
                watcher_err.append(f'broker gone: {e}')
                stop.set()
                return
            peak = max(peak, r)
            if r > a.bound_mb:
                watcher_err.append(f'broker RSS {r:.0f} MB exceeds the bound {a.bound_mb:.0f} MB')
                stop.set()
                return
            time.sleep(0.1)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    while time.monotonic() - t0 < a.duration and not stop.is_set():
        if time.monotonic() >= next_check:
            checks += 1
            why = normal_fetch(a, 60.0)
            if why:
                fails.append(f'normal client at {time.monotonic() - t0:.0f}s: {why}')
            next_check = time.monotonic() + a.check_every
        time.sleep(0.1)
    stop.set()
    w.join()
    for h in hs:
        h.join(timeout=5)
    sent = sum(h.sent for h in hs)
    reconnects = sum(h.reconnects for h in hs)
    print(f'rss: base {base:.0f} MB, peak {peak:.0f} MB, bound {a.bound_mb:.0f} MB; '
          f'{sent} fetches sent by {a.conns} non-reading clients, {reconnects} reconnects; '
          f'{checks} normal fetches, {len(fails)} failed', file=sys.stderr)
    errs = watcher_err + fails
    if not watcher_err and checks == 0:
        errs.append('no normal fetch was tried')
    if errs:
        for e in errs:
            print('FAIL: ' + e, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
