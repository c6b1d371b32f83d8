#!/usr/bin/env bash
# big_frame.sh SLUICED [RDK_LOAD [SLUICE_DUMP]]
#
# A request of 140 MiB, allowed by --max-frame-bytes 1 GiB: its decode arena
# (DP_ARENA_PER_FRAME_BYTE per frame byte) must stay within one pool buffer
# (DP_ARENA_BYTES_MAX) instead of aborting the broker (before: dp_buf_get
# abort() on a 1.1 GiB arena). The request is zeros after its header (an
# empty acks=0 Produce); the broker must live on and answer the next one.
#
# BIG_FRAME_VMEM_MB=N runs the broker with its address space limited to N MiB
# more than it maps at start-up (ulimit -v), so the buffers the frame grows
# into cannot all be had: the pool's NULL must close that connection, not
# abort the broker (before: dp_buf_get's abort() on a failed malloc).
. "$(dirname "$0")/lib.sh"
integ_init big-frame 75 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
if [ -n "${BIG_FRAME_VMEM_MB:-}" ]; then
	# What the broker maps at start-up, measured on a first run.
	start_broker --cores 2 --max-frame-bytes 1073741824
	vm_kb=$(awk '/^VmSize:/ {print $2}' "/proc/$BROKER_PID/status")
	stop_broker
	[ -n "$vm_kb" ] || fail "no VmSize for the broker"
	limit_kb=$((vm_kb + BIG_FRAME_VMEM_MB * 1024))
	REAL_SLUICED=$SLUICED
	SLUICED=$WORK/sluiced-limited
	printf '#!/usr/bin/env bash\nulimit -v %d || exit 3\nexec "%s" "$@"\n' "$limit_kb" "$REAL_SLUICED" >"$SLUICED"
	chmod +x "$SLUICED"
	log "broker maps $vm_kb KiB at start-up; limited to $limit_kb KiB"
fi
start_broker --cores 2 --max-frame-bytes 1073741824
cat >"$WORK/big_frame.py" <<'PY'
import socket, struct, sys
port = int(sys.argv[1])
s = socket.create_connection(('127.0.0.1', port), timeout=60)
n = 140 << 20
hdr = struct.pack('>hhih', 0, 7, 1, 1) + b'x'
try:
    s.sendall(struct.pack('>i', n) + hdr + bytes(n - len(hdr)))
    s.settimeout(5)
    s.recv(64)   # zeros decode as an empty acks=0 Produce: no answer; or a close
except OSError:
    pass
s.close()
t = socket.create_connection(('127.0.0.1', port), timeout=30)
msg = struct.pack('>hhih', 18, 0, 9, 1) + b'x'
t.sendall(struct.pack('>i', len(msg)) + msg)
size = struct.unpack('>i', t.recv(4))[0]
corr = struct.unpack('>i', t.recv(4))[0]
print(f'ApiVersions answered after the big frame: size {size}, correlation {corr}', file=sys.stderr)
sys.exit(0 if corr == 9 else 1)
PY
guarded "$PY" "$WORK/big_frame.py" "$PORT" || fail "big frame client failed"
broker_alive || fail "broker died on a 140 MiB request"
stop_broker
if [ -n "${BIG_FRAME_VMEM_MB:-}" ]; then
	grep -q 'no memory for its frame' "$BROKER_LOG" ||
		fail "the frame's buffers did not run out under the limit: the test proves nothing"
fi
pass "a 140 MiB request was refused without harm${BIG_FRAME_VMEM_MB:+ (address space limited, the connection closed for memory)}"
