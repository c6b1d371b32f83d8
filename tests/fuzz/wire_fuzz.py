#!/usr/bin/env python3
"""wire_fuzz.py - mutational Kafka wire fuzzer against a running sluiced (over TCP).

Run by tests/integration/fuzz_wire.sh against sluiced-asan. Python 3 stdlib only.

Seeds: valid requests for every API key and version the broker advertises in
ApiVersions, encoded from the same JSON schemas the broker's codec is generated
from (dataplane/proto/schema, read with dataplane/proto/kgen.py), with values that
reach past the decoder: the topics, partitions, groups and transactional ids the
fuzzer set up, record batches with good CRCs, consumer-protocol metadata.

Mutations (the encoder records where every length, count and integer lies): lying
string/bytes lengths and array counts (negative, huge, off by one, null where not
nullable), bad varints (overlong, overflowing, cut), extreme integers (limits such
as PartitionMaxBytes, MaxBytes, timeouts), truncation anywhere, bit flips, byte
runs, splices of two requests, compact-vs-classic confusion (a body encoded for the
other flexibility than its header's version), version lies, header damage, lying
frame lengths (short, long, negative, zero, huge), many requests pipelined, big
arrays, connections closed half way through a frame or before reading answers.

Before the bursts: the regression cases (the minimal request of each failure this
fuzzer found, see regressions()), then a truncation sweep (one valid frame of every
(key, version) cut at every byte).

After each burst it checks: the broker process is alive, the sanitizer logs are
empty, its RSS is under --rss-limit-mb (also watched every 100 ms), a sweep of
unmutated requests was answered in order, and a normal client is still served (a
fresh connection: ApiVersions, Metadata, Produce acks=-1, Fetch of that record).

Seeded and replayable: every burst is a pure function of (--seed, burst number),
so the same seed sends the same bytes. On a failure the burst is written to
--save (JSON), which --replay sends again (--one-by-one: each frame on its own
connection, to find the single frame that does it).

usage: wire_fuzz.py --port P --pid PID --schemas DIR --kgen KGEN.py [--seed N]
       [--duration S] [--sanitizer-log PREFIX] [--rss-limit-mb M] [--save FILE]
       [--replay FILE [--one-by-one]]
Exit status: 0 clean, 1 a check failed (the reason and the seed are printed).
"""
import argparse
import glob
import importlib.util
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import threading
import time

CALL_TIMEOUT_S = 30.0      # one canary/sweep round trip; the ASan broker on a busy 2-core machine is slow
BURST_READ_S = 1.0         # how long a burst's connections are read for answers, at most
BURST_IDLE_S = 0.15        # a burst connection that says nothing for this long is done
SEND_TIMEOUT_S = 5.0       # a broker that stops reading (flow control) is not waited for
TRUNC_BATCH = 64           # connections open at once in the truncation sweep
FLOOD_ODDS = 0.02          # a burst connection that pipelines >1024 requests
SWEEP_PER_BURST = 4        # unmutated requests per burst, round-robin over every (key, version)
CANARY_TOPIC_PARTS = 3
FUZZ_TOPICS = {'fz-a': 3, 'fz-b': 1}
FUZZ_GROUPS = ['fz-g1', 'fz-g2']
FUZZ_TXN_IDS = ['fz-t1', 'fz-t2']
NEW_TOPIC_NAMES = ['fz-new-%d' % i for i in range(4)]   # a small pool: auto-creation stays bounded
ELEMENTS_MAX = 6000        # array elements per request: big arrays, but not nested big ones
MAX_FRAME_BYTES = 1 << 20  # the broker runs with --max-frame-bytes 1 MiB (fuzz_wire.sh)
API_APIVERSIONS, API_PRODUCE, API_FETCH, API_METADATA, API_CREATETOPICS = 18, 0, 1, 3, 19
API_DELETETOPICS = 20
# Fields that are limits a client names (bytes, waits, timeouts): extreme far more often.
LIMIT_FIELDS = {'partitionmaxbytes', 'maxbytes', 'minbytes', 'maxwaitms', 'timeoutms', 'timeout',
                'sessiontimeoutms', 'rebalancetimeoutms', 'transactiontimeoutms', 'numpartitions',
                'retentiontimems', 'durationfilter'}


class Fail(Exception):
    """A check failed: the broker crashed, leaked, stopped serving, or misbehaved."""


# ---- schemas -----------------------------------------------------------------

def load_schemas(kgen_path, schema_dir):
    spec = importlib.util.spec_from_file_location('kgen', kgen_path)
    kgen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kgen)
    reqs = {}
    for path in sorted(glob.glob(os.path.join(schema_dir, '*Request.json'))):
        m = kgen.Message(path)
        if m.kind == 'request':
            reqs[m.api_key] = m
    return reqs


def vin(r, v):
    return r[0] <= v <= r[1]


# ---- primitive encoding ------------------------------------------------------

def uvarint(n):
    n &= 0xFFFFFFFF
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint(n):  # zig-zag (record level)
    return uvarint(((n << 1) ^ (n >> 31)) & 0xFFFFFFFF) if -2**31 <= n < 2**31 else b''


def varlong(n):
    u = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def pack_int(v, width):
    return (v & ((1 << (8 * width)) - 1)).to_bytes(width, 'big')


def kstr(s):
    if s is None:
        return struct.pack('>h', -1)
    b = s.encode() if isinstance(s, str) else s
    return struct.pack('>h', len(b)) + b


def _crc32c_table():
    t = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_T = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def record_batch(values, pid=-1, epoch=-1, seq=-1, attributes=0, base_ts=None):
    """A RecordBatch v2 with a correct CRC32C, uncompressed unless attributes say otherwise."""
    ts = base_ts if base_ts is not None else 1700000000000
    recs = b''
    for i, v in enumerate(values):
        body = b'\x00' + varlong(0) + varint(i) + varint(-1) + varint(len(v)) + v + varint(0)
        recs += varint(len(body)) + body
    n = len(values)
    after_crc = struct.pack('>hiqqqhii', attributes, n - 1, ts, ts, pid, epoch, seq, n) + recs
    return struct.pack('>qiib', 0, 4 + 1 + 4 + len(after_crc), -1, 2) + \
        struct.pack('>I', crc32c(after_crc)) + after_crc


# ---- schema-driven encoder that remembers where lengths and integers are ------

INT_WIDTH = {'int8': 1, 'int16': 2, 'uint16': 2, 'int32': 4, 'int64': 8}


class Enc:
    def __init__(self):
        self.b = bytearray()
        self.sites = []   # (kind, offset, width, value, name); kind: len, uvlen, int

    def raw(self, data):
        self.b += data

    def int(self, v, width, name):
        self.sites.append(('int', len(self.b), width, v, name))
        self.b += pack_int(v, width)

    def length(self, n, flex, classic_width, name):
        off = len(self.b)
        if flex:
            self.b += uvarint(n + 1)
            self.sites.append(('uvlen', off, len(self.b) - off, n, name))
        else:
            self.b += pack_int(n, classic_width)
            self.sites.append(('len', off, classic_width, n, name))

    def sub(self, other):
        base = len(self.b)
        self.b += other.b
        self.sites += [(k, o + base, w, v, n) for k, o, w, v, n in other.sites]


def interesting(width, rng):
    top = (1 << (8 * width - 1))
    vals = [0, 1, -1, -2, top - 1, -top, top - 2, 0x7F, 0x80, 0xFF, 0x100]
    if width >= 2:
        vals += [0x7FFF, 0x8000, 0xFFFF]
    if width >= 4:
        vals += [0x10000, 0x3FFFFFFF, 0x40000000, 0x40000001, 0x7FFFFFFF, 0x7FFFFFFE, 10000, 10001,
                 1 << 20, 100 << 20]
    if width >= 8:
        vals += [1 << 32, 1 << 62, 2**63 - 1]
    v = rng.choice(vals)
    return v if -top <= v < top else v & ((1 << (8 * width)) - 1)


class Gen:
    """Values for a request: semantic enough to get past the decoders into the handlers."""

    def __init__(self, rng, key, version, tame):
        self.rng, self.key, self.v = rng, key, version
        self.tame = tame                    # sweep requests: values a normal client sends
        self.topic = 'fz-a'
        self.big = not tame and rng.random() < 0.04   # one request in 25 carries big arrays
        self.budget = ELEMENTS_MAX

    def topic_name(self):
        r = self.rng.random()
        if self.key == API_DELETETOPICS and r < 0.9:
            # Deletes mostly hit the pool of new names: the set-up topics stay, so that
            # the other requests keep reaching partitions that exist.
            self.topic = self.rng.choice(NEW_TOPIC_NAMES)
        elif r < 0.8:
            self.topic = self.rng.choice(list(FUZZ_TOPICS))
        elif r < 0.9:
            self.topic = self.rng.choice(NEW_TOPIC_NAMES)
        elif r < 0.95 and not self.tame:
            self.topic = self.rng.choice(['', '.', '..', 'bad name!', 'x' * 250, '__consumer_offsets',
                                          '__transaction_state', 'a/../b', '\x00', 'é'])
        else:
            self.topic = ''.join(self.rng.choice('abcxyz-_.') for _ in range(self.rng.randint(1, 12)))
        return self.topic

    def partition(self):
        if self.rng.random() < 0.85:
            return self.rng.randrange(FUZZ_TOPICS.get(self.topic, 1))
        return interesting(4, self.rng)

    def string(self, name, path, nullable):
        rng, n = self.rng, name.lower()
        if nullable and rng.random() < 0.1:
            return None
        if n in ('name', 'topic', 'topicname', 'topicnames', 'topics') and not any(
                'protocol' in p.lower() for p in path):
            return self.topic_name()
        if 'protocol' in ''.join(path).lower() and n == 'name':
            return rng.choice(['range', 'roundrobin', 'cooperative-sticky', ''])
        if n in ('groupid', 'groups', 'groupsid'):
            if self.tame:
                # A group of its own: a JoinGroup into a group with other members
                # rightly waits for the rebalance (up to RebalanceTimeoutMs).
                return 'fz-sweep-%d' % rng.randrange(1 << 30)
            return rng.choice(FUZZ_GROUPS + ['', 'fz-g%d' % rng.randrange(100)])
        if n == 'memberid':
            return rng.choice(['', '', 'fz-member', 'rdkafka-%d' % rng.randrange(10)])
        if n == 'groupinstanceid':
            return rng.choice([None, 'fz-i1', 'fz-i2']) if nullable else 'fz-i1'
        if n in ('transactionalid', 'transactionalids'):
            return rng.choice(FUZZ_TXN_IDS + [None if nullable else '', 'fz-t%d' % rng.randrange(1000)])
        if n == 'protocoltype':
            return rng.choice(['consumer', 'consumer', 'connect', ''])
        if n == 'protocolname':
            return rng.choice(['range', 'roundrobin'])
        if rng.random() < 0.05 and not self.tame:
            return 'z' * rng.choice([0, 255, 256, 1000, 0x7FFF])
        return ''.join(rng.choice('abcdefgh-0123') for _ in range(rng.randint(0, 10)))

    def bytes_(self, name, path, nullable, is_records):
        rng, n = self.rng, name.lower()
        if nullable and rng.random() < 0.05:
            return None
        if is_records:
            r = rng.random()
            vals = [b'fz-%d' % rng.randrange(1 << 20) for _ in range(rng.randint(1, 4))]
            if r < 0.6:
                return record_batch(vals)
            if r < 0.75:   # idempotent / transactional-looking headers
                attrs = rng.choice([0, 0x10, 0x20 | 0x10, 1, 2, 3, 4, 5])
                return record_batch(vals, pid=rng.choice([0, 1, 2, 1000, -1]), epoch=rng.choice([0, 1, -1]),
                                    seq=rng.choice([0, 1, 5, 0x7FFFFFFF, -1]), attributes=attrs)
            if r < 0.85:
                return record_batch(vals) + record_batch(vals[:1])
            if r < 0.9:
                return b''
            return bytes(rng.randrange(256) for _ in range(rng.randint(1, 80)))
        if n == 'metadata' and 'protocols' in ''.join(path).lower():
            # ConsumerProtocolSubscription v0: version, topics, user data.
            return struct.pack('>hi', 0, 1) + kstr(self.rng.choice(list(FUZZ_TOPICS))) + struct.pack('>i', -1)
        if n == 'assignment':
            # ConsumerProtocolAssignment v0: version, [topic, [partition]], user data.
            return struct.pack('>hi', 0, 1) + kstr('fz-a') + struct.pack('>iiii', 3, 0, 1, 2) + \
                struct.pack('>i', -1)
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 16)))

    def integer(self, name, width):
        rng, n = self.rng, name.lower()
        wild = not self.tame and rng.random() < (0.3 if n in LIMIT_FIELDS else 0.1)
        if wild:
            return interesting(width, rng)
        if n in ('partition', 'partitionindex', 'index', 'partitionindexes', 'partitions'):
            return self.partition()
        if n in ('partitionmaxbytes', 'maxbytes'):
            return rng.choice([1 << 20, 65536, 1024, 1])
        if n == 'minbytes':
            return rng.choice([0, 0, 1])
        if n == 'maxwaitms':
            return rng.choice([0, 0, 10, 100])
        if n in ('timeoutms', 'timeout'):
            return rng.choice([1000, 5000, 30000])
        if n in ('sessiontimeoutms', 'rebalancetimeoutms'):
            return rng.choice([6000, 10000, 30000])
        if n == 'transactiontimeoutms':
            return rng.choice([10000, 60000])
        if n == 'acks':
            return rng.choice([-1, -1, 1, 0])
        if n in ('fetchoffset', 'committedoffset', 'timestamp', 'logstartoffset', 'offset'):
            return rng.choice([0, 0, 1, 5, -1, -2])
        if n == 'producerid':
            return rng.choice([-1, -1, 0, 1, 2])
        if n == 'producerepoch':
            return rng.choice([-1, 0, 1])
        if n in ('generationid', 'generationidormemberepoch'):
            return rng.choice([-1, 0, 1])
        if n == 'numpartitions':
            return rng.choice([1, 2, 3, -1])
        if n == 'replicationfactor':
            return rng.choice([-1, 1])
        if n == 'isolationlevel':
            return rng.choice([0, 1])
        if n in ('replicaid', 'brokerid', 'currentleaderepoch', 'leaderepoch', 'lastfetchedepoch',
                 'committedleaderepoch', 'brokerepoch'):
            return -1
        if n == 'keytype':
            return rng.choice([0, 1])
        if n in ('sessionid', 'sessionepoch', 'coordinatorepoch'):
            return rng.choice([0, -1])
        if n == 'version':
            return 0
        return rng.choice([0, 0, 0, 1, rng.randrange(1 << min(8 * width - 1, 16))])

    def count(self, name, nullable):
        rng = self.rng
        if nullable and rng.random() < 0.08:
            return -1
        if self.big and rng.random() < 0.5 and self.budget > 3000:
            n = rng.choice([100, 1000, 3000])
        else:
            n = rng.choice([0, 1, 1, 1, 2, 2, 3])
        n = min(n, self.budget)
        self.budget -= n
        return n


def enc_struct(e, s, v, flex, g, path, tag_extra):
    tagged = []
    for f in s.fields:
        if f.tag >= 0 and vin(f.tagged, v):
            tagged.append(f)
        elif vin(f.versions, v):
            enc_field(e, f, v, flex, g, path)
    if not flex:
        return
    chosen = [f for f in tagged if g.rng.random() < 0.3]
    extra = tag_extra and g.rng.random() < 0.1
    e.raw(uvarint(len(chosen) + (1 if extra else 0)))
    for f in chosen:
        sub = Enc()
        enc_field(sub, f, v, flex, g, path)
        e.raw(uvarint(f.tag) + uvarint(len(sub.b)))
        e.sub(sub)
    if extra:   # an unknown tag, which must be skipped by its size
        junk = bytes(g.rng.randrange(256) for _ in range(g.rng.randint(0, 6)))
        e.raw(uvarint(10000 + g.rng.randrange(100)) + uvarint(len(junk)) + junk)


def enc_value(e, f, v, flex, g, path, nullable):
    base = f.base
    if f.sub is not None:
        enc_struct(e, f.sub, v, flex, g, path + [f.name], True)
    elif base == 'string':
        s = g.string(f.name, path, nullable)
        b = None if s is None else s.encode()
        e.length(-1 if b is None else len(b), flex, 2, f.name)
        if b:
            e.raw(b)
    elif base in ('bytes', 'records'):
        b = g.bytes_(f.name, path, nullable, base == 'records')
        e.length(-1 if b is None else len(b), flex, 4, f.name)
        if b:
            e.raw(b)
    elif base == 'bool':
        e.int(1 if g.rng.random() < 0.5 else 0, 1, f.name)
    elif base == 'uuid':
        e.raw(bytes(16) if g.rng.random() < 0.7 else bytes(g.rng.randrange(256) for _ in range(16)))
    elif base == 'float64':
        e.raw(struct.pack('>d', g.rng.choice([0.0, 1.5, -1.0, float('nan'), float('inf')])))
    else:
        w = INT_WIDTH[base]
        e.int(g.integer(f.name, w), w, f.name)


def enc_field(e, f, v, flex, g, path):
    nullable = vin(f.nullable, v)
    if not f.is_array:
        enc_value(e, f, v, flex, g, path, nullable)
        return
    n = g.count(f.name, nullable)
    e.length(n, flex, 4, f.name)
    for _ in range(max(n, 0)):
        enc_value(e, f, v, flex, g, path + [f.name], False)


def encode_body(msg, v, flex, rng, tame):
    e = Enc()
    enc_struct(e, msg.root, v, flex, Gen(rng, msg.api_key, v, tame), [], True)
    return e


def header(key, ver, corr, flex, client=b'wire_fuzz'):
    h = struct.pack('>hhi', key, ver, corr) + kstr(client)
    return h + (b'\x00' if flex else b'')


# ---- mutations -----------------------------------------------------------------

def lie_len(site, rng):
    kind, off, width, n, _ = site
    cands = [-1, -2, n + 1, n - 1, n + 2, 0, n * 2 + 7, 0x7FFF, -0x8000]
    if width == 4:
        cands += [0x7FFFFFFF, -0x80000000, 0x10000000, 1 << 20]
    if kind == 'uvlen':
        return uvarint(rng.choice([0, n, n + 2, n + 3, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 1 << 20, 300]))
    return pack_int(rng.choice(cands), width)


BAD_VARINTS = [b'\x80' * 5 + b'\x00', b'\xff' * 6, b'\xff\xff\xff\xff\x7f', b'\xff\xff\xff\xff\x1f',
               b'\x80', b'\xff\xff\xff\xff\x0f', b'\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01']


def mutate(payload, sites, hlen, rng, other):
    """One mutation of header+body; sites are offsets within the body. Returns (bytes, kind)."""
    b = bytearray(payload)
    body_sites = [(k, o + hlen, w, v, n) for k, o, w, v, n in sites]
    r = rng.random()
    lens = [s for s in body_sites if s[0] in ('len', 'uvlen')]
    ints = [s for s in body_sites if s[0] == 'int']
    if r < 0.22 and lens:
        s = rng.choice(lens)
        b[s[1]:s[1] + s[2]] = lie_len(s, rng)
        return bytes(b), 'len_lie'
    if r < 0.30 and any(s[0] == 'uvlen' for s in lens):
        s = rng.choice([s for s in lens if s[0] == 'uvlen'])
        b[s[1]:s[1] + s[2]] = rng.choice(BAD_VARINTS)
        return bytes(b), 'bad_varint'
    if r < 0.44 and ints:
        s = rng.choice(ints)
        b[s[1]:s[1] + s[2]] = pack_int(interesting(s[2], rng), s[2])
        return bytes(b), 'int_extreme'
    if r < 0.56:
        return bytes(b[:rng.randrange(len(b) + 1)]), 'truncate'
    if r < 0.68:
        for _ in range(rng.randint(1, 4)):
            if b:
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        return bytes(b), 'bitflip'
    if r < 0.76:
        at = rng.randrange(len(b) + 1)
        run = bytes(rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)]) for _ in range(rng.randint(1, 8)))
        if rng.random() < 0.5:
            b[at:at] = run
        else:
            del b[at:at + rng.randint(1, 8)]
        return bytes(b), 'bytes'
    if r < 0.84 and other:
        return bytes(b[:rng.randrange(len(b) + 1)]) + other[rng.randrange(len(other) + 1):], 'splice'
    if r < 0.92:
        # header damage: client id length, key or version, tag section
        which = rng.randrange(4)
        if which == 0:
            b[8:10] = pack_int(rng.choice([-2, 0x7FFF, len(b), len(b) - 9]), 2)
        elif which == 1:
            b[0:2] = pack_int(rng.choice([-1, 0x7FFF, 17, 21, 23, 32, 67, 127, 128]), 2)
        elif which == 2:
            b[2:4] = pack_int(rng.choice([-1, 0x7FFF, 12, 16, 100]), 2)
        else:
            b[hlen - 1:hlen] = rng.choice(BAD_VARINTS)
        return bytes(b), 'header'
    return bytes(b), 'none'


class Frame:
    def __init__(self, data, key, ver, kind, corr, expect_answer):
        self.data, self.key, self.ver, self.kind, self.corr = data, key, ver, kind, corr
        self.expect_answer = expect_answer

    def to_json(self):
        return {'hex': self.data.hex(), 'key': self.key, 'ver': self.ver, 'kind': self.kind}


class Fuzzer:
    def __init__(self, a, schemas, apis):
        self.a, self.schemas = a, schemas
        self.apis = apis                       # {key: (lo, hi)} as advertised
        self.pairs = [(k, v) for k in sorted(apis) for v in range(apis[k][0], apis[k][1] + 1)]
        self.sweep_pos = 0
        self.sent = {}                         # (key, ver) -> frames sent
        self.swept = set()                     # (key, ver) answered unmutated
        self.kinds = {}

    def make_frame(self, rng, key, ver, corr, mutate_it=True, other=None, acks_ok=True):
        msg = self.schemas[key]
        flex = vin(msg.flexible, ver)
        body_flex = flex
        kind = 'none'
        if mutate_it and rng.random() < 0.06:
            body_flex, kind = not flex, 'compact_confusion'
        e = encode_body(msg, ver, body_flex, rng, not mutate_it)
        if not acks_ok and key == API_PRODUCE:
            # A sweep Produce must be answered: make its Acks (the int16 after the
            # transactional id, or first at v0-2) non-zero.
            for k, off, w, v, n in e.sites:
                if n == 'Acks':
                    e.b[off:off + 2] = pack_int(-1, 2)
        h = header(key, ver, corr, flex)
        payload = h + bytes(e.b)
        if mutate_it and kind == 'none':
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                payload, k2 = mutate(payload, e.sites, len(h), rng, other)
                kind = k2 if kind == 'none' else kind + '+' + k2
        size = len(payload)
        if mutate_it and rng.random() < 0.06:
            size = rng.choice([size - 1, size + 1, size + rng.randint(2, 100), -1, 0, 7, 0x7FFFFFFF,
                               MAX_FRAME_BYTES + 1, size // 2])
            kind += '+frame_len'
        self.sent[(key, ver)] = self.sent.get((key, ver), 0) + 1
        for k in kind.split('+'):
            self.kinds[k] = self.kinds.get(k, 0) + 1
        return Frame(pack_int(size, 4) + payload, key, ver, kind, corr, not mutate_it)

    def burst(self, idx):
        """The connections of burst idx: a pure function of (seed, idx)."""
        rng = random.Random(self.a.seed * 1000003 + idx)
        conns = []
        # One connection of unmutated requests, the next few (key, version) pairs in turn.
        sweep = []
        for i in range(SWEEP_PER_BURST):
            key, ver = self.pairs[(idx * SWEEP_PER_BURST + i) % len(self.pairs)]
            sweep.append(self.make_frame(rng, key, ver, 1000 + i, mutate_it=False, acks_ok=False))
        conns.append({'frames': sweep, 'action': 'sweep'})
        for c in range(rng.randint(1, 4)):
            if rng.random() < FLOOD_ODDS:
                # More requests at once than a connection may have unfinished
                # (DP_CONN_REQS_MAX 1024): its reads pause and resume.
                key = rng.choice([API_APIVERSIONS, API_METADATA, API_PRODUCE, API_FETCH])
                lo, hi = self.apis[key]
                f = self.make_frame(rng, key, rng.randint(lo, hi), 3000, rng.random() < 0.3)
                conns.append({'frames': [f] * rng.randint(1100, 1500), 'action': rng.choice(['read', 'no_read'])})
                continue
            n = rng.choice([1, 1, 2, 3, 5, 10, 30])
            frames, prev = [], None
            for i in range(n):
                key = rng.choice(list(self.apis))
                lo, hi = self.apis[key]
                ver = rng.randint(lo, hi) if rng.random() < 0.95 else rng.choice([hi + 1, -1, lo - 1, 0x7FFF])
                if key not in self.schemas or not vin(self.schemas[key].valid, ver):
                    ver = rng.randint(lo, hi)
                f = self.make_frame(rng, key, ver, 2000 + i, True, prev)
                prev = f.data[4:]
                frames.append(f)
            action = rng.choice(['read', 'read', 'read', 'read', 'close_mid', 'no_read', 'trickle'])
            conns.append({'frames': frames, 'action': action, 'cut': rng.random()})
        return conns


# ---- talking to the broker ------------------------------------------------------

class Closed(Exception):
    pass


def connect(port):
    s = socket.create_connection(('127.0.0.1', port), timeout=CALL_TIMEOUT_S)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        try:
            b = s.recv(n - len(buf))
        except ConnectionResetError:
            raise Closed('connection reset')
        except socket.timeout:
            raise Fail(f'no answer within {CALL_TIMEOUT_S:.0f}s')
        if not b:
            raise Closed('connection closed')
        buf += b
    return bytes(buf)


def read_response(s, corr, flex_hdr=False):
    size = struct.unpack('>i', recv_exact(s, 4))[0]
    if size < 4 or size > 256 << 20:
        raise Fail(f'response frame size {size}')
    data = recv_exact(s, size)
    got = struct.unpack('>i', data[:4])[0]
    if got != corr:
        raise Fail(f'response correlation id {got}, want {corr}')
    return data[5:] if flex_hdr else data[4:]


def call(s, key, ver, body, corr, flex=False):
    s.sendall(pack_int(len(header(key, ver, corr, flex)) + len(body), 4) + header(key, ver, corr, flex) + body)
    return read_response(s, corr, flex and key != API_APIVERSIONS)


class R:
    def __init__(self, d):
        self.d, self.p = d, 0

    def take(self, n):
        if n < 0 or self.p + n > len(self.d):
            raise Fail(f'response too short: need {n} at {self.p} of {len(self.d)}')
        b = self.d[self.p:self.p + n]
        self.p += n
        return b

    def i8(self): return struct.unpack('>b', self.take(1))[0]
    def i16(self): return struct.unpack('>h', self.take(2))[0]
    def i32(self): return struct.unpack('>i', self.take(4))[0]
    def i64(self): return struct.unpack('>q', self.take(8))[0]

    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode(errors='replace')

    def uvarint(self):
        shift = v = 0
        while True:
            b = self.take(1)[0]
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def api_versions(s):
    body = uvarint(len(b'wire_fuzz') + 1) + b'wire_fuzz' + uvarint(4) + b'0.1' + b'\x00'
    r = R(call(s, API_APIVERSIONS, 3, body, 1, True))
    err = r.i16()
    if err:
        raise Fail(f'ApiVersions v3: error {err}')
    apis = {}
    for _ in range(r.uvarint() - 1):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        r.skip_tags()
        apis[k] = (lo, hi)
    return apis


def create_topic(s, name, parts):
    body = struct.pack('>i', 1) + kstr(name) + struct.pack('>ihii', parts, 1, 0, 0) + struct.pack('>i', 30000)
    r = R(call(s, API_CREATETOPICS, 0, body, 7))
    r.i32()
    r.string()
    err = r.i16()
    if err not in (0, 36):   # 36: TOPIC_ALREADY_EXISTS
        raise Fail(f'CreateTopics {name}: error {err}')


def metadata_parts(s, topic):
    body = struct.pack('>i', 1) + kstr(topic) + b'\x00'
    r = R(call(s, API_METADATA, 4, body, 8))
    r.i32()
    for _ in range(r.i32()):
        r.i32(), r.string(), r.i32(), r.string()
    r.string(), r.i32()
    out = {}
    for _ in range(r.i32()):
        err, name = r.i16(), r.string()
        r.i8()
        n = r.i32()
        for _ in range(n):
            r.i16(), r.i32(), r.i32()
            for _ in range(r.i32()):
                r.i32()
            for _ in range(r.i32()):
                r.i32()
        out[name] = (err, n)
    return out.get(topic, (-1, 0))


def canary(port, topic, n):
    """A normal client's round trip on a fresh connection. Raises Fail."""
    try:
        s = connect(port)
    except OSError as e:
        raise Fail(f'canary cannot connect: {e}')
    try:
        api_versions(s)
        err, nparts = metadata_parts(s, topic)
        if err or nparts != CANARY_TOPIC_PARTS:
            raise Fail(f'canary Metadata {topic}: error {err}, {nparts} partitions')
        part = n % CANARY_TOPIC_PARTS
        value = b'canary-%d' % n
        body = kstr(None) + struct.pack('>hi', -1, 30000) + struct.pack('>i', 1) + kstr(topic) + \
            struct.pack('>ii', 1, part) + (lambda b: struct.pack('>i', len(b)) + b)(record_batch([value]))
        r = R(call(s, API_PRODUCE, 7, body, 9))
        r.i32(), r.string(), r.i32(), r.i32()
        err, base = r.i16(), r.i64()
        if err or base < 0:
            raise Fail(f'canary Produce: error {err}, base offset {base}')
        body = struct.pack('>iiiib', -1, 0, 0, 1 << 20, 0) + struct.pack('>ii', 0, -1) + struct.pack('>i', 1) + \
            kstr(topic) + struct.pack('>ii', 1, part) + struct.pack('>iqqi', -1, base, -1, 1 << 20) + \
            struct.pack('>i', 0) + kstr('')
        r = R(call(s, API_FETCH, 11, body, 10))
        r.i32(), r.i16(), r.i32(), r.i32(), r.string(), r.i32(), r.i32()
        err = r.i16()
        hw = r.i64()
        r.i64(), r.i64()
        for _ in range(max(r.i32(), 0)):
            r.i64(), r.i64()
        r.i32()
        rec = r.take(max(r.i32(), 0))
        if err or hw <= base or len(rec) < 12 or struct.unpack('>q', rec[:8])[0] != base or value not in rec:
            raise Fail(f'canary Fetch {topic}/{part}@{base}: error {err}, high watermark {hw}, '
                       f'{len(rec)} bytes without the record just produced')
    except Closed as e:
        raise Fail(f'canary: {e}')
    except OSError as e:
        raise Fail(f'canary: {type(e).__name__}: {e}')
    finally:
        s.close()


class Watch:
    """The broker process: alive, its sanitizer logs, its RSS (sampled every 100 ms)."""

    def __init__(self, pid, san_prefix, rss_limit_mb):
        self.pid, self.san_prefix, self.limit = pid, san_prefix, rss_limit_mb
        self.max_rss_mb = 0
        self.over = None
        self.stop = False
        if pid:
            threading.Thread(target=self.loop, daemon=True).start()

    def rss_mb(self):
        try:
            with open(f'/proc/{self.pid}/status') as f:
                for line in f:
                    if line.startswith('VmRSS:'):
                        return int(line.split()[1]) // 1024
        except OSError:
            return None
        return 0

    def loop(self):
        while not self.stop:
            m = self.rss_mb()
            if m is None:
                return
            self.max_rss_mb = max(self.max_rss_mb, m)
            if self.limit and m > self.limit and not self.over:
                self.over = f'broker RSS {m} MB over the {self.limit} MB limit'
                # Stop it before it takes the shared machine's memory; SIGABRT leaves a core/trace.
                os.kill(self.pid, signal.SIGABRT)
                return
            time.sleep(0.1)

    def alive(self):
        if not self.pid:
            return True
        try:
            with open(f'/proc/{self.pid}/stat') as f:
                return f.read().split(') ')[1][0] not in 'ZX'
        except OSError:
            return False

    def sanitizer_report(self):
        if not self.san_prefix:
            return None
        for p in sorted(glob.glob(self.san_prefix + '*')):
            try:
                if os.path.getsize(p) > 0:
                    return p
            except OSError:
                pass
        return None

    def check(self):
        if self.over:
            raise Fail(self.over)
        rep = self.sanitizer_report()
        if rep:
            raise Fail(f'sanitizer report in {rep}')
        if not self.alive():
            raise Fail('broker process is gone')


def run_conns(port, conns, rng_seed):
    """Sends a burst; returns answers received per connection. Checks the sweep."""
    rng = random.Random(rng_seed)
    socks = []
    for c in conns:
        try:
            s = connect(port)
        except OSError as e:
            raise Fail(f'burst connection refused: {e}')
        socks.append(s)
    sweep_fail = None
    try:
        for c, s in zip(conns, socks):
            data = b''.join(f.data for f in c['frames'])
            action = c['action']
            s.settimeout(SEND_TIMEOUT_S)
            try:
                if action == 'close_mid':
                    s.sendall(data[:int(len(data) * c.get('cut', 0.5))])
                    s.close()
                    c['closed'] = True
                elif action == 'trickle':
                    for k in range(0, len(data), 7):
                        s.sendall(data[k:k + 7])
                elif action != 'sweep':
                    s.sendall(data)
            except (OSError, socket.timeout):
                c['closed'] = True
        # The sweep goes one request at a time: each must be answered.
        sweep = conns[0]
        s = socks[0]
        s.settimeout(CALL_TIMEOUT_S)
        for f in sweep['frames']:
            try:
                s.sendall(f.data)
                read_response(s, f.corr)
            except (Closed, OSError) as e:
                sweep_fail = f'unmutated {f.key} v{f.ver} ({f.data[4:].hex()[:120]}...): {e}'
                break
            except Fail as e:
                sweep_fail = f'unmutated {f.key} v{f.ver}: {e}'
                break
            sweep.setdefault('answered', []).append((f.key, f.ver))
        # The others: read whatever comes until quiet, closed, or time is up.
        live = {s: c for c, s in zip(conns[1:], socks[1:])
                if not c.get('closed') and c['action'] in ('read', 'trickle')}
        deadline = time.monotonic() + BURST_READ_S
        while live and time.monotonic() < deadline:
            ready, _, _ = select.select(list(live), [], [], BURST_IDLE_S)
            if not ready:
                break
            for s in ready:
                try:
                    b = s.recv(1 << 16)
                except OSError:
                    b = b''
                if not b:
                    del live[s]
    finally:
        for s in socks:
            try:
                s.close()
            except OSError:
                pass
    return sweep_fail


def save_burst(path, seed, idx, conns, why):
    if not path:
        return
    with open(path, 'w') as f:
        json.dump({'seed': seed, 'burst': idx, 'why': why,
                   'conns': [{'action': c['action'], 'cut': c.get('cut', 0.5),
                              'frames': [fr.to_json() for fr in c['frames']]} for c in conns]}, f, indent=1)


def load_burst(path):
    j = json.load(open(path))
    conns = []
    for c in j['conns']:
        frames = [Frame(bytes.fromhex(fr['hex']), fr['key'], fr['ver'], fr['kind'],
                        struct.unpack('>i', bytes.fromhex(fr['hex'])[8:12])[0] if len(fr['hex']) >= 24 else 0,
                        c['action'] == 'sweep') for fr in c['frames']]
        conns.append({'frames': frames, 'action': c['action'], 'cut': c.get('cut', 0.5)})
    return j, conns


def setup(a):
    s = connect(a.port)
    try:
        apis = api_versions(s)
        for t, n in list(FUZZ_TOPICS.items()) + [(a.canary_topic, CANARY_TOPIC_PARTS)]:
            create_topic(s, t, n)
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while metadata_parts(s, a.canary_topic)[1] != CANARY_TOPIC_PARTS:
            if time.monotonic() > deadline:
                raise Fail('canary topic never showed up in Metadata')
            time.sleep(0.1)
    finally:
        s.close()
    return apis


# Requests that once stopped the broker (the reproducers that wire_fuzz.py found,
# made minimal), sent first in every run, each on a connection of its own.
def regressions():
    def frame(key, ver, body, flex=False):
        h = header(key, ver, 77, flex)
        return pack_int(len(h) + len(body), 4) + h + body

    def fetch_v11(part_max, max_bytes=1 << 20):
        return frame(API_FETCH, 11, struct.pack('>iiiib', -1, 0, 0, max_bytes, 0) + struct.pack('>ii', 0, -1) +
                     struct.pack('>i', 1) + kstr('fz-a') + struct.pack('>ii', 1, 0) +
                     struct.pack('>iqqi', -1, 0, -1, part_max) + struct.pack('>i', 0) + kstr(''))

    def join_v0(group):
        meta = struct.pack('>hi', 0, 1) + kstr('fz-a') + struct.pack('>i', -1)
        return frame(11, 0, kstr(group) + struct.pack('>i', 10000) + kstr('') + kstr('consumer') +
                     struct.pack('>i', 1) + kstr('range') + struct.pack('>i', len(meta)) + meta)
    def commit_v2(group):
        parts = b''.join(struct.pack('>iq', p, 5) + kstr('') for p in range(FUZZ_TOPICS['fz-a']))
        return frame(8, 2, kstr(group) + struct.pack('>i', -1) + kstr('') + struct.pack('>q', -1) +
                     struct.pack('>i', 1) + kstr('fz-a') + struct.pack('>i', FUZZ_TOPICS['fz-a']) + parts)
    def produce_v7(topic, part, batches):
        recs = b''.join(batches)
        return frame(API_PRODUCE, 7, kstr(None) + struct.pack('>hi', -1, 30000) + struct.pack('>i', 1) +
                     kstr(topic) + struct.pack('>ii', 1, part) + struct.pack('>i', len(recs)) + recs)

    def fetch_v11_committed(topic, offset, part_max):
        return frame(API_FETCH, 11, struct.pack('>iiiib', -1, 0, 0, part_max, 1) + struct.pack('>ii', 0, -1) +
                     struct.pack('>i', 1) + kstr(topic) + struct.pack('>ii', 1, 0) +
                     struct.pack('>iqqi', -1, offset, -1, part_max) + struct.pack('>i', 0) + kstr(''))
    # Two batches of ~40 KB, the first written to fz-b/0 (regressions run first, on a
    # fresh broker, so they start at offset 0), read back read_committed with
    # PartitionMaxBytes exactly their size.
    rc_batches = [record_batch([b'r' * 40000]), record_batch([b'c' * 40000])]
    rc_bytes = sum(len(b) for b in rc_batches)
    # (name, requests sent first on one connection, each answered; the case; must it be answered)
    return [
        # Found by wire_fuzz (seed 220968553, burst 1240): a read_committed read that fills
        # its buffer to within 8 bytes of the end left no room for the aborted-list count
        # behind the records, and shard.c's fetch_reply wrote it past the buffer anyway
        # (ASan: heap-buffer-overflow) instead of asking for a bigger one.
        ('read_committed fetch filling its buffer', [produce_v7('fz-b', 0, rc_batches)],
         fetch_v11_committed('fz-b', 0, rc_bytes), True),
        # issue 10 item 3: fetch.c sized the partition's buffer by PartitionMaxBytes and
        # dp_buf_get aborted above 1 GiB.
        ('fetch PartitionMaxBytes 0x7fffffff', [], fetch_v11(0x7FFFFFFF), False),
        ('fetch PartitionMaxBytes 0x40000001, MaxBytes 0x7fffffff', [], fetch_v11(0x40000001, 0x7FFFFFFF), False),
        # issue 10 item 12: txn/group.c copied the absent instance id (NULL, 0 bytes) with
        # memcpy, undefined behaviour (UBSan aborts sluiced-asan): any JoinGroup v0-v4.
        ('JoinGroup v0 without an instance id', [], join_v0('fz-regress'), False),
        # Found by wire_fuzz (seeds 31, 33: burst 651): with more groups and committed
        # offsets than fit a ListGroups request's arena (~340), dataplane/control/group.c answered
        # UNKNOWN_SERVER_ERROR, whose code is -1, the same as its "answered later": the
        # request was never answered and held its connection's slot for good (which is
        # also how new connections came to be refused).
        ('ListGroups v0 with 400 groups and offsets', [commit_v2('fz-lg-%d' % i) for i in range(130)],
         frame(16, 0, b''), True),
    ]


def run_regressions(a, w):
    for i, (name, setup_frames, data, must_answer) in enumerate(regressions()):
        try:
            if setup_frames:
                s = connect(a.port)
                s.sendall(b''.join(setup_frames))
                for _ in setup_frames:
                    read_response(s, 77)
                s.close()
            s = connect(a.port)
            s.sendall(data)
            if must_answer:
                read_response(s, 77)
            else:
                s.settimeout(2.0)
                try:
                    s.recv(1 << 16)
                except OSError:
                    pass
            s.close()
            time.sleep(0.2)
            w.check()
            canary(a.port, a.canary_topic, 1000000 + i)
        except (Fail, OSError, Closed) as e:
            raise Fail(f'regression case "{name}" ({data.hex()[:400]}): {e}')
    print(f'wire_fuzz: {len(regressions())} regression cases passed', flush=True)


def truncation_sweep(a, w, fz):
    """One valid frame of every advertised (key, version), cut at every byte: once with
    the frame size saying so (the decoder sees a short body), once with the full size
    and the connection closed there. Each on its own connection, TRUNC_BATCH at a time;
    closed with RST (SO_LINGER 0), so 20,000 connections leave no TIME_WAIT behind."""
    rng = random.Random(a.seed ^ 0x7C0FFEE)
    linger = struct.pack('ii', 1, 0)
    total = 0
    for pi, (key, ver) in enumerate(fz.pairs):
        f = fz.make_frame(rng, key, ver, 4000, mutate_it=False).data
        cuts = [pack_int(t - 4, 4) + f[4:t] for t in range(8, len(f))] + [f[:t] for t in range(1, len(f))]
        for b in range(0, len(cuts), TRUNC_BATCH):
            socks = []
            try:
                for data in cuts[b:b + TRUNC_BATCH]:
                    s = connect(a.port)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                    socks.append(s)
                    s.sendall(data)
            except OSError as e:
                raise Fail(f'truncation sweep of {key} v{ver}: {e}')
            finally:
                for s in socks:
                    s.close()
        total += len(cuts)
        w.check()
        if pi % 10 == 9 or pi == len(fz.pairs) - 1:
            canary(a.port, a.canary_topic, 2000000 + pi)
    print(f'wire_fuzz: truncation sweep: {total} cut frames of {len(fz.pairs)} (api, version) pairs', flush=True)


def replay(a, w):
    j, conns = load_burst(a.replay)
    print(f'wire_fuzz: replaying burst {j["burst"]} of seed {j["seed"]} ({j["why"]})', flush=True)
    if a.one_by_one:
        for ci, c in enumerate(conns):
            for fi, f in enumerate(c['frames']):
                try:
                    run_conns(a.port, [{'frames': [], 'action': 'sweep'},
                                       {'frames': [f], 'action': 'read'}], 0)
                    time.sleep(0.2)
                    w.check()
                    canary(a.port, a.canary_topic, fi)
                except Fail as e:
                    print(f'wire_fuzz: REPRODUCED by connection {ci} frame {fi} alone '
                          f'(api {f.key} v{f.ver}, mutation {f.kind}): {e}\n  frame: {f.data.hex()}', flush=True)
                    return 1
        print('wire_fuzz: no single frame reproduces it', flush=True)
        return 0
    try:
        run_conns(a.port, conns, 0)
        time.sleep(0.5)
        w.check()
        canary(a.port, a.canary_topic, 0)
    except Fail as e:
        print(f'wire_fuzz: REPRODUCED: {e}', flush=True)
        return 1
    print('wire_fuzz: the burst did not reproduce it', flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--pid', type=int, default=0, help='broker pid: liveness and RSS')
    ap.add_argument('--schemas', required=True)
    ap.add_argument('--kgen', required=True)
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--duration', type=float, default=60.0, help='seconds of bursts')
    ap.add_argument('--sanitizer-log', default=None, help='log_path prefix of ASAN/UBSAN')
    ap.add_argument('--rss-limit-mb', type=int, default=0)
    ap.add_argument('--canary-topic', default='wire-fuzz-canary')
    ap.add_argument('--save', default=None, help='where a failing burst is written (JSON)')
    ap.add_argument('--replay', default=None)
    ap.add_argument('--one-by-one', action='store_true')
    ap.add_argument('--first-burst', type=int, default=0, help='start at this burst number')
    ap.add_argument('--skip-api', default='', help='comma-separated api keys not to send: a '
                    'diagnostic, to look past a known failure while hunting others (never in the test)')
    a = ap.parse_args()
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1 << 31)
    schemas = load_schemas(a.kgen, a.schemas)
    w = Watch(a.pid, a.sanitizer_log, a.rss_limit_mb)
    try:
        apis = setup(a)
    except (Fail, OSError, Closed) as e:
        print(f'wire_fuzz: setup failed: {e}', flush=True)
        return 1
    if a.replay:
        return replay(a, w)
    missing = [k for k in apis if k not in schemas]
    if missing:
        print(f'wire_fuzz: FAIL: advertised api keys without a request schema: {missing}', flush=True)
        return 1
    for k in filter(None, a.skip_api.split(',')):
        apis.pop(int(k), None)
        print(f'wire_fuzz: NOT sending api {k} (--skip-api)', flush=True)
    fz = Fuzzer(a, schemas, apis)
    print(f'wire_fuzz: seed {a.seed}, {len(fz.pairs)} advertised (api, version) pairs, '
          f'{a.duration:.0f}s (replay: --seed {a.seed})', flush=True)
    try:
        run_regressions(a, w)
        truncation_sweep(a, w, fz)
    except Fail as e:
        time.sleep(1.0)
        print(f'wire_fuzz: FAIL: {e}', flush=True)
        return 1
    start = time.monotonic()
    idx = a.first_burst
    frames = 0
    conns = []
    try:
        while time.monotonic() - start < a.duration or len(fz.swept) < len(fz.pairs):
            if time.monotonic() - start > a.duration + 20 * CALL_TIMEOUT_S:
                raise Fail(f'the sweep answered only {len(fz.swept)} of {len(fz.pairs)} pairs')
            conns = fz.burst(idx)
            frames += sum(len(c['frames']) for c in conns)
            why = run_conns(a.port, conns, idx)
            w.check()
            if why:
                raise Fail(why)
            fz.swept.update(conns[0].get('answered', []))
            canary(a.port, a.canary_topic, idx)
            w.check()
            idx += 1
            if idx % 100 == 0:
                print(f'wire_fuzz: {idx} bursts, {frames} frames, {time.monotonic() - start:.0f}s, '
                      f'RSS max {w.max_rss_mb} MB', flush=True)
    except Fail as e:
        time.sleep(1.0)   # let the sanitizer finish its report
        rep = w.sanitizer_report()
        why = str(e) + (f' (sanitizer report: {rep})' if rep else '')
        save_burst(a.save, a.seed, idx, conns, why)
        print(f'wire_fuzz: FAIL at burst {idx} of seed {a.seed}, {time.monotonic() - start:.1f}s in '
              f'(at {time.strftime("%H:%M:%S")}): {why}', flush=True)
        if conns:
            for ci, c in enumerate(conns):
                print(f'  connection {ci} ({c["action"]}): ' +
                      ', '.join(f'{f.key}v{f.ver}:{f.kind}' for f in c['frames']), flush=True)
        print(f'wire_fuzz: replay with --seed {a.seed} (from the start), or --replay {a.save} '
              f'[--one-by-one] against a fresh broker', flush=True)
        return 1
    w.stop = True
    kinds = ', '.join(f'{k} {n}' for k, n in sorted(fz.kinds.items()))
    print(f'wire_fuzz: OK: seed {a.seed}, {idx - a.first_burst} bursts, {frames} frames, every one of the '
          f'{len(fz.pairs)} advertised (api, version) pairs answered unmutated, RSS max {w.max_rss_mb} MB; '
          f'mutations: {kinds}', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
