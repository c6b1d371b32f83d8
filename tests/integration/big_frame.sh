#!/usr/bin/env bash
# big_frame.sh SLUICED [RDK_LOAD [SLUICE_DUMP]]
#
# A request of 140 MiB, allowed by --max-frame-bytes 1 GiB: its decode arena
# (DP_ARENA_PER_FRAME_BYTE per frame byte) must stay within one pool buffer
# (DP_ARENA_BYTES_MAX) instead of aborting the broker (before: dp_buf_get
# abort() on a 1.1 GiB arena). The request is zeros after its header (an
# empty acks=0 Produce); the broker must live on and answer the next one.
. "$(dirname "$0")/lib.sh"
integ_init big-frame 75 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
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
pass "a 140 MiB request was refused without harm"
