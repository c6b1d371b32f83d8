#!/usr/bin/env bash
# partial_frames.sh SLUICED [RDK_LOAD [SLUICE_DUMP]]
#
# Frames that never finish arriving (issue 11): a client opens CONNS
# connections and on each sends most of a 100 MiB frame (the default
# --max-frame-bytes), never the rest. A frame's buffer counts against its
# core's byte budget (DP_CORE_HELD_BYTES_MAX, 512 MiB); before, nothing
# checked it while a frame grew, so the broker took the whole
# CONNS x 100 MiB. Now a frame that does not fit waits (its connection
# paused), and the core closes the connections holding the largest such
# frames once it is full. Checked: the broker's peak resident memory grows
# by at most what the budget (--print-budget) allows these buffers on the
# data core: the requests' held bytes (512 MiB), the one request past it
# (a frame of 100 MiB, its 256 MiB arena, a 55 MiB fetch), the idle buffer
# pool (256 MiB, where the freed frames go), the NIC's receive buffers
# (16 MiB), and 64 MiB of slack: 1,259 MiB, against the ~1.6 GiB of frames
# sent; the broker said it made frames wait; and a new connection is still
# answered while the partial frames are open.
. "$(dirname "$0")/lib.sh"
integ_init partial-frames 76 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
CONNS=16
FRAME=$((100 << 20))
SEND=$((90 << 20))
CORE_BUDGET_KB=$(((512 + 100 + 256 + 55 + 256 + 16) * 1024))
SLACK_KB=$((64 * 1024))
hwm_kb() { awk '/^VmHWM:/ { print $2 }' "/proc/$BROKER_PID/status"; }

start_broker --cores 2 --control-core own   # one data core, as the bounds below assume
hwm0=$(hwm_kb)
cat >"$WORK/partial.py" <<'PY'
import select, socket, struct, sys, time
port, conns, frame, send = (int(a) for a in sys.argv[1:5])
STALL_S = 10.0   # no byte taken for this long on any socket: the broker paused them all
socks, sent = [], {}
for _ in range(conns):
    s = socket.create_connection(('127.0.0.1', port), timeout=30)
    s.setblocking(False)
    socks.append(s)
    sent[s] = -4   # the size comes first
chunk = bytes(1 << 20)
hdr = struct.pack('>i', frame)
closed = 0
last = time.monotonic()
live = list(socks)
while live and time.monotonic() - last < STALL_S:
    _, w, _ = select.select([], live, [], 1.0)
    for s in w:
        try:
            data = hdr if sent[s] < 0 else chunk[:min(len(chunk), send - sent[s])]
            n = s.send(data)
        except OSError:
            closed += 1
            live.remove(s)
            continue
        sent[s] += n
        last = time.monotonic()
        if sent[s] >= send:
            live.remove(s)
total = sum(max(v, 0) for v in sent.values())
print(f'sent {total >> 20} MiB on {conns} connections; {closed} closed by the broker, {len(live)} stalled', flush=True)
# the partial frames stay open: a new connection must still be answered
t = socket.create_connection(('127.0.0.1', port), timeout=60)
msg = struct.pack('>hhih', 18, 0, 9, 1) + b'x'
t.sendall(struct.pack('>i', len(msg)) + msg)
got = b''
while len(got) < 8:
    b = t.recv(8 - len(got))
    if not b:
        break
    got += b
ok = len(got) == 8 and struct.unpack('>i', got[4:8])[0] == 9
print('ApiVersions answered' if ok else 'ApiVersions NOT answered', flush=True)
sys.stdout.flush()
input_wait = sys.stdin.readline()   # hold the sockets until the script has measured
sys.exit(0 if ok else 1)
PY
coproc PART { "$PY" "$WORK/partial.py" "$PORT" $CONNS $FRAME $SEND 2>"$WORK/partial.err"; }
INTEG_CHILDREN=$PART_PID
read -r -t 300 line1 <&"${PART[0]}" || fail "the client said nothing: $(tail -n 3 "$WORK/partial.err")"
log "$line1"
read -r -t 120 line2 <&"${PART[0]}" || fail "the client never got past ApiVersions: $(tail -n 3 "$WORK/partial.err")"
log "$line2"
broker_alive || fail "the broker died under the partial frames"
hwm=$(hwm_kb)
echo >&"${PART[1]}"
wait "$PART_PID"
rc=$?
INTEG_CHILDREN=
[ "$line2" = "ApiVersions answered" ] && ((rc == 0)) || fail "a new connection was not answered while the partial frames were open"
grown=$((hwm - hwm0))
log "broker peak RSS grew by $((grown / 1024)) MiB (at most $(((CORE_BUDGET_KB + SLACK_KB) / 1024)))"
((grown <= CORE_BUDGET_KB + SLACK_KB)) ||
	fail "the partial frames took $((grown / 1024)) MiB, more than the budget's $((CORE_BUDGET_KB / 1024)) MiB for them"
stop_broker
grep -q 'times a frame still arriving waited for room' "$BROKER_LOG" ||
	fail "no frame ever waited for room: the test proved nothing"
log "$(grep 'times a frame still arriving waited' "$BROKER_LOG" | tail -n 1 | sed 's/.*core[0-9]*: //')"
pass "frames still arriving stay within the core's byte budget"
