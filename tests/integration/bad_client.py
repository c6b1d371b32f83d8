#!/usr/bin/env python3
"""bad_client.py - raw-TCP hostile client for sluiced (run by bad_input.sh).

Sends malformed and edge-case requests, encoded by hand with struct (Kafka
wire format, see shared/kafka-protocol/README.md), and checks the broker's
reaction: a malformed frame closes only that connection; protocol-level
problems come back as Kafka error codes. After every case a "canary"
connection, opened before the first case and kept open throughout, must still
answer ApiVersions v3 correctly, so one bad client never disturbs another.

usage: bad_client.py --port P --max-frame-bytes N --known-topic T --known-partitions K
Exit status 0 if every case passed, 1 otherwise.  Python 3 stdlib only.
"""
import argparse
import socket
import struct
import sys
import gzip
import time
import zlib

TIMEOUT_S = 5.0          # per reply / per expected close
CLIENT_ID = b'bad_client'

# Kafka error codes used below (README.md section 7).
NONE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 2, 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION, UNSUPPORTED_VERSION = 17, 35
UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_RECORD = 43, 87
UNSUPPORTED_COMPRESSION_TYPE = 76
API_PRODUCE, API_METADATA, API_APIVERSIONS = 0, 3, 18


class Closed(Exception):
    """The broker closed the connection."""


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC32C_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b'123456789') == 0xE3069283


def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n):  # zig-zag, record level
    return uvarint((n << 1) ^ (n >> 63))


def kstr(s):
    if s is None:
        return struct.pack('>h', -1)
    b = s.encode() if isinstance(s, str) else s
    return struct.pack('>h', len(b)) + b


def compact_str(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


def kbytes(b):
    return struct.pack('>i', -1) if b is None else struct.pack('>i', len(b)) + b


class Reader:
    """Bounds-checked reader of a response body."""

    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, n):
        if n < 0 or self.p + n > len(self.d):
            raise ValueError(f'response too short: need {n} at {self.p} of {len(self.d)}')
        b = self.d[self.p:self.p + n]
        self.p += n
        return b

    def i8(self):
        return struct.unpack('>b', self.take(1))[0]

    def i16(self):
        return struct.unpack('>h', self.take(2))[0]

    def i32(self):
        return struct.unpack('>i', self.take(4))[0]

    def i64(self):
        return struct.unpack('>q', self.take(8))[0]

    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode(errors='replace')

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError('uvarint too long')

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def done(self):
        return self.p == len(self.d)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(('127.0.0.1', port), timeout=TIMEOUT_S)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 100

    def close(self):
        self.s.close()

    def send_raw(self, b):
        self.s.sendall(b)

    def frame(self, key, ver, body, flexible=False):
        self.corr += 1
        hdr = struct.pack('>hhi', key, ver, self.corr) + kstr(CLIENT_ID)
        if flexible:
            hdr += b'\x00'
        return self.corr, struct.pack('>i', len(hdr) + len(body)) + hdr + body

    def send(self, key, ver, body, flexible=False):
        corr, f = self.frame(key, ver, body, flexible)
        self.send_raw(f)
        return corr

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            try:
                b = self.s.recv(n - len(buf))
            except ConnectionResetError:
                raise Closed('connection reset')
            except socket.timeout:
                raise TimeoutError(f'no reply within {TIMEOUT_S}s')
            if not b:
                raise Closed('connection closed')
            buf += b
        return bytes(buf)

    def response(self, corr):
        """Read one response frame and return its body after a v0 header."""
        size = struct.unpack('>i', self.recv_exact(4))[0]
        if size < 4 or size > 64 << 20:
            raise ValueError(f'bad response size {size}')
        data = self.recv_exact(size)
        got = struct.unpack('>i', data[:4])[0]
        if got != corr:
            raise ValueError(f'correlation id {got}, want {corr}')
        return data[4:]

    def call(self, key, ver, body, flexible=False):
        return self.response(self.send(key, ver, body, flexible))

    def closed_by_peer(self):
        """None if the broker closes the connection within TIMEOUT_S, else why not."""
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                b = self.s.recv(65536)
            except ConnectionResetError:
                return None
            except socket.timeout:
                break
            if not b:
                return None
            return f'broker sent {len(b)} bytes instead of closing: {b[:32].hex()}'
        return f'connection still open after {TIMEOUT_S}s'


# ---- requests -------------------------------------------------------------

def apiversions_v3_body():
    return compact_str('bad-client') + compact_str('0.1') + b'\x00'


def parse_apiversions_v3(body):
    r = Reader(body)
    err = r.i16()
    keys = {}
    for _ in range(r.uvarint() - 1):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        r.skip_tags()
        keys[k] = (lo, hi)
    r.i32()  # throttle
    r.skip_tags()
    if not r.done():
        raise ValueError(f'{len(body) - r.p} trailing bytes in ApiVersions v3 response')
    return err, keys


def check_apiversions_v3(conn):
    """None if conn answers ApiVersions v3 correctly, else the problem."""
    try:
        err, keys = parse_apiversions_v3(conn.call(API_APIVERSIONS, 3, apiversions_v3_body(), True))
    except (Closed, TimeoutError, ValueError, OSError) as e:
        return f'ApiVersions v3: {e}'
    if err != NONE:
        return f'ApiVersions v3: error {err}'
    for k, need in ((API_PRODUCE, 7), (API_METADATA, 4), (API_APIVERSIONS, 3)):
        if k not in keys or not keys[k][0] <= need <= keys[k][1]:
            return f'ApiVersions v3: key {k} range {keys.get(k)} lacks v{need}'
    return None


def record(offset_delta, key, value):
    body = (b'\x00' + varint(0) + varint(offset_delta) + varint(len(key)) + key +
            varint(len(value)) + value + varint(0))
    return varint(len(body)) + body


def records_v2(n=3):
    return b''.join(record(i, b'bad-%d' % i, b'value-%d' % i) for i in range(n))


def batch_v2(n=3, magic=2, corrupt_crc=False, length_delta=0, attributes=0, recs=None, count=None):
    """A RecordBatch v2 of n records (recs: its records section as sent, e.g.
    compressed; count: the header's record count if it should differ)."""
    ts = int(time.time() * 1000)
    recs = records_v2(n) if recs is None else recs
    count = n if count is None else count
    after_crc = struct.pack('>hiqqqhii', attributes, count - 1, ts, ts, -1, -1, -1, count) + recs
    crc = crc32c(after_crc) ^ (0x5A5A5A5A if corrupt_crc else 0)
    batch_len = 4 + 1 + 4 + len(after_crc) + length_delta
    return struct.pack('>qiibI', 0, batch_len, -1, magic, crc) + after_crc


GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


def txn_batch(pid, epoch, seq, keys):
    """A transactional v2 batch of one record per key (key = value), as a raw producer sends it."""
    ts = int(time.time() * 1000)
    recs = b''.join(record(i, k.encode(), k.encode()) for i, k in enumerate(keys))
    n = len(keys)
    after_crc = struct.pack('>hiqqqhii', 0x10, n - 1, ts, ts, pid, epoch, seq, n) + recs   # transactional
    return struct.pack('>qiibI', 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc32c(after_crc)) + after_crc


def add_partitions_to_txn(c, txn_id, topic, pid, epoch, parts):
    """AddPartitionsToTxn v1 of one topic's parts: (the first non-zero error, else 0; None)."""
    body = kstr(txn_id) + struct.pack('>qh', pid, epoch) + struct.pack('>i', 1) + kstr(topic)
    body += struct.pack('>i', len(parts)) + b''.join(struct.pack('>i', p) for p in parts)
    r = Reader(c.call(24, 1, body))
    r.i32()
    errs = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            r.i32()
            errs.append(r.i16())
    return max(errs, key=lambda e: e != 0), None


def init_producer_id(c, txn_id, timeout_ms):
    """InitProducerId v1 of txn_id: (error, (producer id, epoch))."""
    r = Reader(c.call(22, 1, kstr(txn_id) + struct.pack('>i', timeout_ms)))
    r.i32()
    err, pid, epoch = r.i16(), r.i64(), r.i16()
    return err, (pid, epoch)


def txn_produce(c, txn_id, topic, partition, batch):
    """Produce v7 (acks -1) of one batch of txn_id's producer to topic/partition: (error, base offset)."""
    body = (kstr(txn_id) + struct.pack('>hi', -1, 30000) + struct.pack('>i', 1) + kstr(topic) +
            struct.pack('>i', 1) + struct.pack('>i', partition) + kbytes(batch))
    return parse_produce_v7(c.call(0, 7, body))[(topic, partition)]


def end_txn_body(txn_id, pid, epoch, commit):
    return kstr(txn_id) + struct.pack('>qhb', pid, epoch, commit)


def end_txn(c, txn_id, pid, epoch, commit):
    """EndTxn v1: (error, None)."""
    r = Reader(c.call(26, 1, end_txn_body(txn_id, pid, epoch, commit)))
    r.i32()
    return r.i16(), None


def list_offsets(c, topic, partition, ts, isolation=0):
    """ListOffsets v2 of one partition at timestamp ts (-1 latest, -2 earliest):
    (error, timestamp, offset)."""
    body = struct.pack('>ib', -1, isolation) + struct.pack('>i', 1) + kstr(topic)
    body += struct.pack('>iiq', 1, partition, ts)
    r = Reader(c.call(2, 2, body))
    r.i32()  # throttle
    r.i32()
    r.string()
    r.i32()
    r.i32()  # partition
    err = r.i16()
    return err, r.i64(), r.i64()


def list_offset(c, topic, partition, isolation):
    """The high watermark (isolation 0) or the LSO (isolation 1) of topic/partition.
    Exits on an error."""
    err, _, off = list_offsets(c, topic, partition, -1, isolation)
    if err != 0:
        sys.exit(f'ListOffsets {topic}/{partition} isolation {isolation}: error {err}')
    return off


def retried(what, fn, ok=(0,), again=(14, 15, 51), deadline_s=120):
    """fn() -> (error, value) until error is in ok; retriable ones (COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS) again, for deadline_s at most."""
    deadline = time.monotonic() + deadline_s
    while True:
        err, val = fn()
        if err in ok:
            return err, val
        if err not in again or time.monotonic() > deadline:
            sys.exit(f'{what}: error {err}, want {" or ".join(map(str, ok))}')
        time.sleep(0.2)


def snappy_raw(data):
    """A valid raw snappy stream of literals only (what the broker must
    decode; snappy has no stdlib encoder): varint length, then literal runs."""
    out = bytearray(uvarint(len(data)))
    for i in range(0, len(data), 65536):
        chunk = data[i:i + 65536]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 256:
            out += bytes([60 << 2, n])
        else:
            out += bytes([61 << 2]) + struct.pack('<H', n)
        out += chunk
    return bytes(out)


def zstd_raw(data):
    """A valid zstd frame of raw (stored) blocks: magic, a single-segment
    header with a 4-byte content size, blocks of at most 128 KiB."""
    out = bytearray(struct.pack('<IB', 0xFD2FB528, 0xA0) + struct.pack('<I', len(data)))
    blocks = [data[i:i + 131072] for i in range(0, len(data), 131072)] or [b'']
    for i, b in enumerate(blocks):
        out += struct.pack('<I', (len(b) << 3) | (i == len(blocks) - 1))[:3] + b
    return bytes(out)


def message_set_v1():
    """One legacy magic-1 message: offset, size, crc32, magic=1, attrs, ts, key, value.
    Its magic byte sits at offset 16, where a v2 batch keeps its magic too."""
    msg = struct.pack('>bbq', 1, 0, int(time.time() * 1000)) + kbytes(b'k') + kbytes(b'legacy')
    return struct.pack('>qiI', 0, 4 + len(msg), zlib.crc32(msg)) + msg


def produce_v7_body(topic, partition, records, acks=-1):
    return (kstr(None) + struct.pack('>hi', acks, 10000) + struct.pack('>i', 1) + kstr(topic) +
            struct.pack('>i', 1) + struct.pack('>i', partition) + kbytes(records))


def parse_produce_v7(body):
    """Returns {(topic, partition): (error, base_offset)}."""
    r = Reader(body)
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            idx, err, base = r.i32(), r.i16(), r.i64()
            r.i64()  # log_append_time
            r.i64()  # log_start_offset
            out[(name, idx)] = (err, base)
    r.i32()  # throttle
    if not r.done():
        raise ValueError('trailing bytes in Produce v7 response')
    return out


def produce_error(port, topic, partition, records):
    """Send one Produce v7 on a fresh connection; returns (error, base) or raises."""
    c = Conn(port)
    try:
        res = parse_produce_v7(c.call(API_PRODUCE, 7, produce_v7_body(topic, partition, records)))
    finally:
        c.close()
    if (topic, partition) not in res:
        raise ValueError(f'no result for {topic}/{partition} in {res}')
    return res[(topic, partition)]


def metadata_v4_topic_errors(conn, topics):
    body = struct.pack('>i', len(topics)) + b''.join(kstr(t) for t in topics) + b'\x01'
    r = Reader(conn.call(API_METADATA, 4, body))
    r.i32()  # throttle
    for _ in range(r.i32()):
        r.i32(), r.string(), r.i32(), r.string()
    r.string()  # cluster id
    r.i32()     # controller
    errs = {}
    for _ in range(r.i32()):
        err, name = r.i16(), r.string()
        r.i8()
        for _ in range(r.i32()):
            r.i16(), r.i32(), r.i32()
            for _ in range(r.i32()):
                r.i32()
            for _ in range(r.i32()):
                r.i32()
        errs[name] = err
    if not r.done():
        raise ValueError('trailing bytes in Metadata v4 response')
    return errs


# ---- cases: each returns None (pass) or a description of the failure ------

def expect_close_after(port, raw):
    c = Conn(port)
    try:
        try:
            c.send_raw(raw)
        except (BrokenPipeError, ConnectionResetError):
            return None  # closed while we were still sending: that is a close
        return c.closed_by_peer()
    finally:
        c.close()


def hdr(key, ver, corr=1, client=CLIENT_ID):
    return struct.pack('>hhi', key, ver, corr) + kstr(client)


def case_garbage_http(a):
    return expect_close_after(a.port, b'GET / HTTP/1.1\r\nHost: localhost\r\n\r\n')


def case_garbage_negative_size(a):
    return expect_close_after(a.port, b'\xde\xad\xbe\xef' + bytes(range(60)))


def case_garbage_in_frame(a):
    return expect_close_after(a.port, struct.pack('>i', 32) + b'\xff' * 32)


def case_zero_size(a):
    return expect_close_after(a.port, struct.pack('>i', 0))


def case_short_header(a):
    # 6 bytes cannot hold key, version and correlation id.
    return expect_close_after(a.port, struct.pack('>i', 6) + struct.pack('>hhh', 18, 0, 0))


def case_client_id_overruns_frame(a):
    h = struct.pack('>hhi', 18, 0, 1) + struct.pack('>h', 200) + b'abc'
    return expect_close_after(a.port, struct.pack('>i', len(h)) + h)


def case_oversize_frame(a):
    return expect_close_after(a.port, struct.pack('>i', a.max_frame_bytes + 1))


def case_huge_frame(a):
    return expect_close_after(a.port, struct.pack('>i', 0x7FFFFFFF) + b'\x00' * 1024)


def case_unknown_api_key(a):
    h = hdr(1000, 0)
    return expect_close_after(a.port, struct.pack('>i', len(h)) + h)


def case_unsupported_version(a):
    # Metadata v99: not ApiVersions, so (like Kafka) the broker closes.
    h = hdr(API_METADATA, 99) + b'\x00' * 8
    return expect_close_after(a.port, struct.pack('>i', len(h)) + h)


def case_truncated_then_close(a):
    c = Conn(a.port)
    c.send_raw(struct.pack('>i', 100) + hdr(API_APIVERSIONS, 0))
    c.close()
    return None  # the verdict is the canary check and liveness after it


def case_truncated_held_open(a):
    # A half-sent frame must not stall other connections (checked by the
    # canary while this one is still open), and a later completion of the
    # same connection is not required to work.
    a.held.append(Conn(a.port))
    a.held[-1].send_raw(struct.pack('>i', 100) + hdr(API_APIVERSIONS, 0))
    return None


def case_byte_at_a_time(a):
    c = Conn(a.port)
    try:
        corr, f = c.frame(API_APIVERSIONS, 3, apiversions_v3_body(), True)
        for k in range(len(f)):
            c.send_raw(f[k:k + 1])
            time.sleep(0.005)
        err, keys = parse_apiversions_v3(c.response(corr))
        return None if err == NONE and API_PRODUCE in keys else f'error {err}, keys {sorted(keys)}'
    finally:
        c.close()


def case_pipelined(a):
    c = Conn(a.port)
    try:
        frames = [c.frame(API_APIVERSIONS, 3, apiversions_v3_body(), True) for _ in range(8)]
        c.send_raw(b''.join(f for _, f in frames))
        for corr, _ in frames:  # replies must come back in request order
            err, _ = parse_apiversions_v3(c.response(corr))
            if err != NONE:
                return f'pipelined ApiVersions: error {err}'
        return None
    finally:
        c.close()


def case_apiversions_v9(a):
    c = Conn(a.port)
    try:
        body = c.call(API_APIVERSIONS, 9, apiversions_v3_body(), True)
        r = Reader(body)
        err, n = r.i16(), r.i32()
        if err != UNSUPPORTED_VERSION:
            return f'error {err}, want {UNSUPPORTED_VERSION}'
        if n < 1 or len(body) != 6 + 6 * n:
            return f'not a v0 body: {n} entries in {len(body)} bytes ({body[:40].hex()})'
        entries = [(r.i16(), r.i16(), r.i16()) for _ in range(n)]
        if (API_APIVERSIONS, 0, 3) not in entries:
            return f'entries {entries} lack (18, 0, 3)'
        # Clients retry a lower version on the same connection, so it must stay usable.
        return check_apiversions_v3(c)
    finally:
        c.close()


def case_produce_good_batch(a):
    err, base = produce_error(a.port, a.known_topic, 0, batch_v2())
    return None if err == NONE and base >= 0 else f'error {err} base {base}, want 0 and >= 0'


def expect_produce_error(a, topic, partition, records, want):
    err, _ = produce_error(a.port, topic, partition, records)
    want = want if isinstance(want, tuple) else (want,)
    return None if err in want else f'error {err}, want {" or ".join(map(str, want))}'


def case_produce_bad_crc(a):
    return expect_produce_error(a, a.known_topic, 0, batch_v2(corrupt_crc=True), CORRUPT_MESSAGE)


def case_produce_unknown_topic(a):
    return expect_produce_error(a, 'no-such-topic-bad-client', 0, batch_v2(),
                                UNKNOWN_TOPIC_OR_PARTITION)


def case_produce_partition_past_end(a):
    return expect_produce_error(a, a.known_topic, a.known_partitions, batch_v2(),
                                UNKNOWN_TOPIC_OR_PARTITION)


def case_produce_partition_huge(a):
    return expect_produce_error(a, a.known_topic, 99999, batch_v2(), UNKNOWN_TOPIC_OR_PARTITION)


def case_produce_partition_negative(a):
    return expect_produce_error(a, a.known_topic, -1, batch_v2(), UNKNOWN_TOPIC_OR_PARTITION)


def case_produce_magic1(a):
    # The brief asks for 43; Kafka 3.7's ProduceRequest.validateRecords throws
    # InvalidRecordException (87) for a non-v2 batch at Produce v3+. Either names
    # the real problem; CORRUPT_MESSAGE (2) would not (the message is intact).
    return expect_produce_error(a, a.known_topic, 0, message_set_v1(),
                                (UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_RECORD))


def lenient(a, records):
    # Malformed framing inside the records: a non-zero partition error or a closed
    # connection are both acceptable; success is not.
    c = Conn(a.port)
    try:
        res = parse_produce_v7(c.call(API_PRODUCE, 7, produce_v7_body(a.known_topic, 0, records)))
        err = res.get((a.known_topic, 0), (None, None))[0]
        return None if err not in (None, NONE) else f'error {err}, want non-zero or close'
    except Closed:
        return None
    finally:
        c.close()


def case_produce_batch_length_too_big(a):
    return lenient(a, batch_v2(length_delta=+40))


def case_produce_batch_length_too_small(a):
    return lenient(a, batch_v2(length_delta=-7))


def case_produce_records_truncated(a):
    return lenient(a, batch_v2()[:45])


def case_records_length_overruns_frame(a):
    c = Conn(a.port)
    try:
        body = (kstr(None) + struct.pack('>hi', -1, 10000) + struct.pack('>i', 1) +
                kstr(a.known_topic) + struct.pack('>ii', 1, 0) + struct.pack('>i', 1 << 20) +
                batch_v2())
        res = parse_produce_v7(c.call(API_PRODUCE, 7, body))
        err = res.get((a.known_topic, 0), (None, None))[0]
        return None if err not in (None, NONE) else f'error {err}, want non-zero or close'
    except Closed:
        return None
    finally:
        c.close()


def fetch_error(port, version, topic, partition, offset):
    """Fetch (v4+ layout) one partition; returns (error, records length)."""
    body = struct.pack('>iiiib', -1, 100, 1, 1 << 20, 0)             # replica, wait, min, max, isolation
    if version >= 7:
        body += struct.pack('>ii', 0, -1)                            # session id, epoch
    body += struct.pack('>i', 1) + kstr(topic) + struct.pack('>ii', 1, partition)
    if version >= 9:
        body += struct.pack('>i', -1)                                # current leader epoch
    body += struct.pack('>q', offset)
    if version >= 5:
        body += struct.pack('>q', -1)                                # log start offset
    body += struct.pack('>i', 1 << 20)
    if version >= 7:
        body += struct.pack('>i', 0)                                 # forgotten topics
    if version >= 11:
        body += kstr('')                                             # rack
    c = Conn(port)
    try:
        r = Reader(c.call(1, version, body))
    finally:
        c.close()
    r.i32()                                                          # throttle
    if version >= 7:
        r.i16(), r.i32()                                             # error, session
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    err = r.i16()
    r.i64(), r.i64()                                                 # hw, lso
    if version >= 5:
        r.i64()
    for _ in range(max(r.i32(), 0)):
        r.i64(), r.i64()
    if version >= 11:
        r.i32()
    n = r.i32()
    return err, n


def case_zstd_needs_produce_v7_and_fetch_v10(a):
    zstd = batch_v2(attributes=ZSTD, recs=zstd_raw(records_v2()))
    c = Conn(a.port)
    try:
        res = parse_produce_v7(c.call(API_PRODUCE, 6, produce_v7_body(a.known_topic, 1, zstd)))
    finally:
        c.close()
    if res.get((a.known_topic, 1), (None,))[0] != UNSUPPORTED_COMPRESSION_TYPE:
        return f'Produce v6 with zstd: {res}, want {UNSUPPORTED_COMPRESSION_TYPE}'
    err, base = produce_error(a.port, a.known_topic, 1, zstd)
    if err != NONE:
        return f'Produce v7 with zstd: error {err}'
    err, n = fetch_error(a.port, 9, a.known_topic, 1, base)
    if err != UNSUPPORTED_COMPRESSION_TYPE:
        return f'Fetch v9 of a zstd batch: error {err} ({n} bytes), want {UNSUPPORTED_COMPRESSION_TYPE}'
    err, n = fetch_error(a.port, 11, a.known_topic, 1, base)
    if err != NONE or n != len(zstd):
        return f'Fetch v11 of a zstd batch: error {err}, {n} bytes, want 0 and {len(zstd)}'
    return None


def appended_nothing(a, partition, records, want):
    """A good batch, then records (answered `want`), then a good batch again:
    the second good one must start right after the first (nothing appended)."""
    err, base = produce_error(a.port, a.known_topic, partition, batch_v2())
    if err != NONE:
        return f'good batch before: error {err}'
    err, _ = produce_error(a.port, a.known_topic, partition, records)
    if err != want:
        return f'error {err}, want {want}'
    err, after = produce_error(a.port, a.known_topic, partition, batch_v2())
    if err != NONE:
        return f'good batch after: error {err}'
    return None if after == base + 3 else f'offsets {base} then {after}: the bad batch took offsets'


# Garbage flagged compressed (issue 10 item 10): Kafka decompresses and checks
# every batch on produce; a batch no consumer can read must never be stored.
def case_compressed_snappy_garbage(a):
    return appended_nothing(a, 0, batch_v2(attributes=SNAPPY, recs=bytes(range(7, 207))), CORRUPT_MESSAGE)


def case_lone_snappy_garbage(a):
    # The same batch alone, for compression.sh: a consumer of that partition must
    # then read what librdkafka wrote there, and nothing else.
    return expect_produce_error(a, a.known_topic, 0,
                                batch_v2(attributes=SNAPPY, recs=bytes(range(7, 207))), CORRUPT_MESSAGE)


def case_compressed_garbage_each_codec(a):
    junk = bytes((i * 37 + 11) & 0xff for i in range(300))
    for codec in (GZIP, SNAPPY, LZ4, ZSTD):
        why = appended_nothing(a, 0, batch_v2(attributes=codec, recs=junk), CORRUPT_MESSAGE)
        if why:
            return f'codec {codec}: {why}'
        # Plain records flagged compressed.
        why = appended_nothing(a, 0, batch_v2(attributes=codec), CORRUPT_MESSAGE)
        if why:
            return f'codec {codec}, uncompressed records: {why}'
    return None


def case_compressed_garbage_after_good(a):
    # A good batch and then a bad one for the same partition: neither is appended.
    bad = batch_v2(attributes=SNAPPY, recs=bytes(range(7, 207)))
    return appended_nothing(a, 0, batch_v2() + bad, CORRUPT_MESSAGE)


def case_compressed_valid_accepted(a):
    for codec, recs in ((GZIP, gzip.compress(records_v2(5))), (SNAPPY, snappy_raw(records_v2(5))),
                        (ZSTD, zstd_raw(records_v2(5)))):
        err, base = produce_error(a.port, a.known_topic, 0, batch_v2(5, attributes=codec, recs=recs))
        if err != NONE:
            return f'codec {codec}: error {err}'
    return None


def case_compressed_truncated(a):
    recs = gzip.compress(records_v2(50))
    return appended_nothing(a, 0, batch_v2(50, attributes=GZIP, recs=recs[:-5]), CORRUPT_MESSAGE)


def case_compressed_wrong_count(a):
    # Well-compressed, well-formed records, but not as many as the header says.
    why = appended_nothing(a, 0, batch_v2(4, attributes=GZIP, recs=gzip.compress(records_v2(3))),
                           CORRUPT_MESSAGE)
    if why:
        return 'gzip, 3 records for 4: ' + why
    why = appended_nothing(a, 0, batch_v2(3, recs=records_v2(4)), CORRUPT_MESSAGE)
    return 'uncompressed, 4 records for 3: ' + why if why else None


def case_compressed_bomb(a):
    # 40 MiB of zeros in one record: ~40 KB of gzip, past the decompressed limit (32 MiB).
    value = bytes(40 << 20)
    body = b'\x00' + varint(0) + varint(0) + varint(-1) + varint(len(value)) + value + varint(0)
    recs = gzip.compress(varint(len(body)) + body, compresslevel=1)
    return appended_nothing(a, 0, batch_v2(1, attributes=GZIP, recs=recs), MESSAGE_TOO_LARGE)


def case_compressed_request_budget(a):
    # Batches that each decompress to 30 MiB (under the 32 MiB batch limit): four
    # in one request fit its 128 MiB budget, five do not (and nothing is appended).
    value = bytes(30 << 20)
    body = b'\x00' + varint(0) + varint(0) + varint(-1) + varint(len(value)) + value + varint(0)
    one = batch_v2(1, attributes=GZIP, recs=gzip.compress(varint(len(body)) + body, compresslevel=1))
    err, _ = produce_error(a.port, a.known_topic, 1, one * 4)
    if err != NONE:
        return f'4 x 30 MiB: error {err}, want {NONE}'
    return appended_nothing(a, 1, one * 5, MESSAGE_TOO_LARGE)


def case_write_txn_markers_any_pid(a):
    # WriteTxnMarkers v0 (API 27) names its producers itself: a negative or
    # unknown pid has no open transaction on the partition, so nothing is
    # written and the answer is NONE per partition (a negative one stopped
    # the broker on an assertion, fuzz_wire in CI).
    pids = [-1, -2, -(1 << 63), (1 << 63) - 1, 123456789]
    body = struct.pack('>i', len(pids))
    for pid in pids:
        body += struct.pack('>qhb', pid, 0, 1) + struct.pack('>i', 1) + kstr(a.known_topic)
        body += struct.pack('>i', a.known_partitions)
        body += b''.join(struct.pack('>i', i) for i in range(a.known_partitions))
        body += struct.pack('>i', 7)   # coordinator epoch (sluice: the decision serial)
    c = Conn(a.port)
    try:
        r = Reader(c.call(27, 0, body))
        got = []
        for _ in range(r.i32()):
            pid = r.i64()
            for _ in range(r.i32()):
                r.string()
                for _ in range(r.i32()):
                    part, err = r.i32(), r.i16()
                    got.append((pid, part, err))
        want = [(pid, i, NONE) for pid in pids for i in range(a.known_partitions)]
        return None if got == want and r.done() else f'answers {got}, want {want}'
    finally:
        c.close()


def case_metadata_bad_names(a):
    c = Conn(a.port)
    try:
        bad = ['bad topic!', 'x' * 300, '..', '']
        errs = metadata_v4_topic_errors(c, bad)
        for t in bad:
            if errs.get(t) not in (INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION):
                return (f'topic {t[:20]!r}: error {errs.get(t)}, want '
                        f'{INVALID_TOPIC_EXCEPTION} or {UNKNOWN_TOPIC_OR_PARTITION}')
        # the valid, existing topic is still described correctly on the same connection
        errs = metadata_v4_topic_errors(c, [a.known_topic])
        return None if errs.get(a.known_topic) == NONE else f'known topic: {errs}'
    finally:
        c.close()


CASES = [
    case_pipelined, case_byte_at_a_time,
    case_garbage_http, case_garbage_negative_size, case_garbage_in_frame, case_zero_size,
    case_short_header, case_client_id_overruns_frame, case_oversize_frame, case_huge_frame,
    case_unknown_api_key, case_unsupported_version, case_write_txn_markers_any_pid,
    case_truncated_then_close, case_truncated_held_open,
    case_apiversions_v9,
    case_produce_good_batch, case_produce_bad_crc, case_produce_unknown_topic,
    case_produce_partition_past_end, case_produce_partition_huge,
    case_produce_partition_negative, case_produce_magic1,
    case_produce_batch_length_too_big, case_produce_batch_length_too_small,
    case_produce_records_truncated, case_records_length_overruns_frame,
    case_zstd_needs_produce_v7_and_fetch_v10, case_metadata_bad_names,
    case_compressed_snappy_garbage, case_lone_snappy_garbage, case_compressed_garbage_each_codec,
    case_compressed_garbage_after_good, case_compressed_valid_accepted, case_compressed_truncated, case_compressed_wrong_count,
    case_compressed_bomb, case_compressed_request_budget,
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--max-frame-bytes', type=int, required=True)
    ap.add_argument('--known-topic', required=True)
    ap.add_argument('--known-partitions', type=int, required=True)
    ap.add_argument('--only', help='run only the cases whose name contains this')
    a = ap.parse_args()
    a.held = []

    canary = Conn(a.port)
    why = check_apiversions_v3(canary)
    if why:
        print(f'canary connection does not work before any bad input: {why}')
        return 1
    failed = []
    cases = [c for c in CASES if not a.only or a.only in c.__name__]
    for case in cases:
        name = case.__name__[5:]
        try:
            why = case(a)
        except (Closed, TimeoutError, ValueError, OSError) as e:
            why = f'{type(e).__name__}: {e}'
        canary_why = check_apiversions_v3(canary)
        if canary_why:
            why = (why + '; ' if why else '') + 'canary: ' + canary_why
            canary.close()
            try:
                canary = Conn(a.port)  # keep checking the remaining cases
            except OSError as e:
                print(f'FAIL {name}: {why}; broker unreachable: {e}')
                return 1
        print(f'{"ok  " if not why else "FAIL"} {name}{": " + why if why else ""}', flush=True)
        if why:
            failed.append(name)
    for c in a.held:
        c.close()
    canary.close()
    print(f'bad_client: {len(failed)} of {len(cases)} cases failed{": " + " ".join(failed) if failed else ""}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
