#!/usr/bin/env bash
# restart_port.sh SLUICED [RDK_LOAD [SLUICE_DUMP]]
# A broker restarted at once after a SIGKILL comes up on the same port: the dead
# broker's listeners outlive it for a moment (the kernel closes files an io_uring
# held in a worker, after the process is reaped), and start-up waits that out.
# A port that stays held (a live listener) is still refused.
. "$(dirname "$0")/lib.sh"
integ_init restart-port 15 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
hold() {   # SECONDS: listen on $PORT for that long (in the background)
	# Emptied first: the wait below must not find the previous holder's "held"
	# before this one's shell has truncated the file (then the broker meant to
	# be refused could take the port before the holder, and never exit).
	: >"$WORK/hold.out"
	"$PY" -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
print("held", flush=True); time.sleep(float(sys.argv[2]))' "$PORT" "$1" >"$WORK/hold.out" 2>&1 &
	HOLDER=$!
	INTEG_CHILDREN="$HOLDER"
	local deadline=$((SECONDS + 10))
	until grep -q held "$WORK/hold.out"; do
		((SECONDS < deadline)) || fail "the holder never listened: $(cat "$WORK/hold.out")"
		sleep 0.05
	done
}

# A port released within the wait: the broker starts once it is free.
hold 2
start_broker --cores 2
grep -q "is in use; waiting" "$BROKER_LOG" || fail "the broker did not wait for the held port"
wait "$HOLDER"

# SIGKILL with clients connected, then restart at once, a few times.
for i in 1 2 3 4 5; do
	"$PY" -c '
import socket, sys, time
s = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(8)]
time.sleep(5)' "$PORT" &
	CL=$!
	INTEG_CHILDREN="$CL"
	sleep 0.3
	kill9_broker
	start_broker --cores 2
	kill "$CL" 2>/dev/null
	wait "$CL" 2>/dev/null
done

# A port that stays held: refused after the wait, with the reason.
stop_broker
hold 60
: >"$WORK/refused.log"
# Bounded: should it start after all, the test fails instead of waiting for it forever.
timeout 60 "$SLUICED" --listen "$BOOTSTRAP" --data "$DATA" --cores 2 >"$WORK/refused.log" 2>&1
rc=$?
[ "$rc" -ne 0 ] || fail "a second listener on the port was not refused"
grep -q "cannot listen on $BOOTSTRAP: Address already in use" "$WORK/refused.log" ||
	fail "no reason given: $(tail -n 3 "$WORK/refused.log")"
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null
INTEG_CHILDREN=
pass "restarted on the same port at once after SIGKILL; a held port waited for, then refused"
