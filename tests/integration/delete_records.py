#!/usr/bin/env python3
"""delete_records.py - DeleteRecords (API 21) against a broker, raw TCP.

  delete PORT TOPIC PARTS OFFSET   DeleteRecords v1 of partition 0 of TOPIC (PARTS partitions) to
        OFFSET; checks the refusals as Kafka answers them: an offset past the high watermark and
        one below -1 are OFFSET_OUT_OF_RANGE, an unknown topic and a partition past PARTS are
        UNKNOWN_TOPIC_OR_PARTITION, partitions past the 1,024th of a request INVALID_REQUEST, an offset below the log start leaves it (never moves down);
        then ListOffsets v2 earliest is OFFSET, Fetch v5 below it OFFSET_OUT_OF_RANGE with
        log_start_offset OFFSET, Fetch at OFFSET returns the batch that holds it; v2 (flexible) of
        offset -1 on partition 1 moves its start to its high watermark
  pipeline PORT TOPIC              24 DeleteRecords of partition 0 sent at once (pipelined): each
        answered once, in order, past the 8 that may wait REQUEST_TIMED_OUT
  check PORT TOPIC OFFSET          after a restart: ListOffsets earliest and Fetch v5 say the
        log start is still OFFSET, and a fetch below it is OFFSET_OUT_OF_RANGE
Exits 0 when every answer is Kafka's, 1 with the reason on stderr. Python 3 stdlib only.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bad_client import Conn, Reader, kstr, compact_str, uvarint  # noqa: E402

API_FETCH, API_LIST_OFFSETS, API_DELETE_RECORDS = 1, 2, 21
NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT, INVALID_REQUEST = 0, 1, 3, 7, 42


def die(msg):
    sys.stderr.write('delete_records.py: ' + msg + '\n')
    sys.exit(1)


def delete_records_body(topics, ver=1, timeout_ms=30000):
    flex = ver >= 2
    arr = (lambda n: uvarint(n + 1)) if flex else (lambda n: struct.pack('>i', n))
    s = compact_str if flex else kstr
    tag = b'\x00' if flex else b''
    body = arr(len(topics))
    for name, parts in topics:
        body += s(name) + arr(len(parts))
        for p, off in parts:
            body += struct.pack('>iq', p, off) + tag
        body += tag
    return body + struct.pack('>i', timeout_ms) + tag


def delete_records(c, topics, ver=1, timeout_ms=30000):
    """topics: [(name, [(partition, offset)])] -> {(name, partition): (low, error)}."""
    corr = c.send(API_DELETE_RECORDS, ver, delete_records_body(topics, ver, timeout_ms), flexible=ver >= 2)
    return delete_records_answer(c, corr, ver)


def delete_records_answer(c, corr, ver=1):
    flex = ver >= 2
    r = Reader(c.response(corr))
    if flex:
        r.skip_tags()   # response header v1
    r.i32()  # throttle
    out = {}
    nt = r.uvarint() - 1 if flex else r.i32()
    for _ in range(nt):
        name = (r.take(r.uvarint() - 1).decode() if flex else r.string())
        np_ = r.uvarint() - 1 if flex else r.i32()
        for _ in range(np_):
            p, low, err = r.i32(), r.i64(), r.i16()
            if flex:
                r.skip_tags()
            out[(name, p)] = (low, err)
        if flex:
            r.skip_tags()
    if flex:
        r.skip_tags()
    if not r.done():
        die('trailing bytes in the DeleteRecords response')
    return out


def earliest(c, topic, part):
    body = struct.pack('>ib', -1, 0) + struct.pack('>i', 1) + kstr(topic) + struct.pack('>iiq', 1, part, -2)
    r = Reader(c.call(API_LIST_OFFSETS, 2, body))
    r.i32()
    r.i32()
    r.string()
    r.i32()
    r.i32()
    err = r.i16()
    r.i64()
    off = r.i64()
    if err:
        die(f'ListOffsets earliest of {topic}-{part}: error {err}')
    return off


def fetch_v5(c, topic, part, offset):
    """(error, high watermark, log start, first batch base offset or None)."""
    body = struct.pack('>iiiib', -1, 100, 1, 1 << 20, 0) + struct.pack('>i', 1) + kstr(topic)
    body += struct.pack('>iiqqi', 1, part, offset, -1, 1 << 20)
    r = Reader(c.call(API_FETCH, 5, body))
    r.i32()
    r.i32()
    r.string()
    r.i32()
    r.i32()
    err, hw, _lso, start = r.i16(), r.i64(), r.i64(), r.i64()
    for _ in range(max(r.i32(), 0)):
        r.i64(), r.i64()
    n = r.i32()
    recs = r.take(n) if n > 0 else b''
    base = struct.unpack_from('>q', recs, 0)[0] if len(recs) >= 8 else None
    return err, hw, start, base


def check_start(c, topic, want):
    got = earliest(c, topic, 0)
    if got != want:
        die(f'ListOffsets earliest is {got}, want {want}')
    err, hw, start, _ = fetch_v5(c, topic, 0, want - 1)
    if err != OFFSET_OUT_OF_RANGE or start != want:
        die(f'Fetch below the start ({want - 1}): error {err}, log_start_offset {start}, want '
            f'OFFSET_OUT_OF_RANGE and {want}')
    err, hw, start, base = fetch_v5(c, topic, 0, want)
    if err != NONE or start != want or base is None or base > want:
        die(f'Fetch at the start {want}: error {err}, log_start_offset {start}, first batch {base}')
    return hw


def cmd_delete(port, topic, parts, offset):
    c = Conn(port)
    hw = fetch_v5(c, topic, 0, 0)[1]
    if not 0 < offset < hw:
        die(f'OFFSET {offset} must lie inside partition 0 (high watermark {hw})')
    got = delete_records(c, [(topic, [(0, hw + 1), (0 + parts, 0)]), ('no-such-topic', [(0, 0)])])
    want = {(topic, 0): (-1, OFFSET_OUT_OF_RANGE), (topic, parts): (-1, UNKNOWN_TOPIC_OR_PARTITION),
            ('no-such-topic', 0): (-1, UNKNOWN_TOPIC_OR_PARTITION)}
    if got != want:
        die(f'refusals: {got}, want {want}')
    # More partitions than DP_DELREC_PARTS_MAX (1,024) in one request: those past it are
    # INVALID_REQUEST, none of them reaches an owner; the ones before it are answered as usual.
    many = [(p, 0) for p in range(parts, parts + 1100)]
    got = delete_records(c, [(topic, many)])
    bad = [p for p, _ in many[:1024] if got.get((topic, p)) != (-1, UNKNOWN_TOPIC_OR_PARTITION)]
    bad += [p for p, _ in many[1024:] if got.get((topic, p)) != (-1, INVALID_REQUEST)]
    if bad or len(got) != len(many):
        die(f'1,100 partitions: {len(got)} answered, wrong for {bad[:5]}')
    got = delete_records(c, [(topic, [(0, -2)])])
    if got != {(topic, 0): (-1, OFFSET_OUT_OF_RANGE)}:
        die(f'offset -2: {got}')
    if earliest(c, topic, 0) != 0:
        die('a refused DeleteRecords moved the log start')
    got = delete_records(c, [(topic, [(0, offset)])], ver=0)
    if got != {(topic, 0): (offset, NONE)}:
        die(f'DeleteRecords v0 to {offset}: {got}')
    got = delete_records(c, [(topic, [(0, offset // 2)])])
    if got != {(topic, 0): (offset, NONE)}:
        die(f'DeleteRecords below the start: {got}, want the start {offset} kept')
    check_start(c, topic, offset)
    if parts > 1:
        hw1 = fetch_v5(c, topic, 1, 0)[1]
        got = delete_records(c, [(topic, [(1, -1)])], ver=2)
        if got != {(topic, 1): (hw1, NONE)}:
            die(f'DeleteRecords v2 of offset -1 on partition 1 (high watermark {hw1}): {got}')
        if earliest(c, topic, 1) != hw1:
            die('partition 1: earliest is not its high watermark')
    print(f'log start {offset}, high watermark {hw}')


def cmd_pipeline(port, topic):
    """Many DeleteRecords of partition 0 sent before any answer is read (one core owns both the
    connection and the partition: an answer runs the next request inside it). Each is answered
    once, in order, with a start at or past its offset; nothing more comes."""
    c = Conn(port)
    hw = fetch_v5(c, topic, 0, 0)[1]
    start = earliest(c, topic, 0)
    n = 24
    if hw - start < n + 2:
        die(f'partition 0 has too few records ({start}..{hw})')
    offs = [start + 1 + i for i in range(n)]
    offs[5] = offs[4]          # the same offset twice
    offs[9] = -1               # the high watermark
    offs[10] = start           # already below the start by then
    sent = []
    frames = b''
    for o in offs:
        corr, f = c.frame(API_DELETE_RECORDS, 1, delete_records_body([(topic, [(0, o)])]))
        sent.append((corr, o))
        frames += f
    c.send_raw(frames)
    refused = 0
    for corr, o in sent:
        got = delete_records_answer(c, corr)
        low, err = got.get((topic, 0), (None, None))
        if err == REQUEST_TIMED_OUT and low == -1:
            refused += 1   # more waiting than DP_DELREC_WAITS_PER_PART (8)
        elif err != NONE or len(got) != 1 or low < (hw if o == -1 else o):
            die(f'pipelined DeleteRecords to {o}: {got}')
    c.s.settimeout(1.0)
    try:
        extra = c.s.recv(4096)
    except OSError:
        extra = b''
    c.s.settimeout(30)
    if extra:
        die(f'{len(extra)} bytes more than one answer each')
    if refused > n - 8:
        die(f'{refused} of {n} refused, more than past the 8 that may wait')
    got = delete_records(c, [(topic, [(0, -1)])])
    if got != {(topic, 0): (hw, NONE)} or earliest(c, topic, 0) != hw:
        die(f'DeleteRecords to -1 after the pipeline: {got}, want the high watermark {hw}')
    print(f'{n} pipelined DeleteRecords answered once each ({refused} REQUEST_TIMED_OUT)')


def cmd_check(port, topic, offset):
    c = Conn(port)
    hw = check_start(c, topic, offset)
    print(f'log start {offset} kept, high watermark {hw}')


def main(argv):
    if len(argv) == 5 and argv[0] == 'delete':
        cmd_delete(int(argv[1]), argv[2], int(argv[3]), int(argv[4]))
    elif len(argv) == 3 and argv[0] == 'pipeline':
        cmd_pipeline(int(argv[1]), argv[2])
    elif len(argv) == 4 and argv[0] == 'check':
        cmd_check(int(argv[1]), argv[2], int(argv[3]))
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == '__main__':
    main(sys.argv[1:])
