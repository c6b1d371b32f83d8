#!/usr/bin/env bash
# bad_input.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# Hostile-client test: with --no-auto-create and a 1 MiB frame limit, a known
# 2-partition topic is created and filled by librdkafka, then bad_client.py
# sends garbage, truncated and oversized frames, unknown keys and versions,
# corrupt/legacy/misaddressed Produce requests and bad Metadata names, checking
# each reaction and that an untouched connection keeps working. Afterwards the
# broker must still be alive and serve a normal produce/consume round trip.
. "$(dirname "$0")/lib.sh"

MAX_FRAME=1048576
integ_init bad-input 10 "$@"
need_exe "$RDK_LOAD"
PY=$(command -v python3) || skip "python3 is not installed"

start_broker --cores "${SLUICE_CORES:-2}" --no-auto-create --max-frame-bytes "$MAX_FRAME"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic known --partitions 2 --count 100 \
	--size 64 --acks all || fail "setup produce exited $?"

guarded "$PY" "$(dirname "$0")/bad_client.py" --port "$PORT" --max-frame-bytes "$MAX_FRAME" \
	--known-topic known --known-partitions 2
rc=$?
broker_alive || fail "broker died during the bad-input cases"
[ "$rc" -eq 0 ] || fail "bad_client.py: some cases failed (exit $rc)"

guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic after --partitions 3 --count 1000 \
	--size 100 --acks all || fail "produce after bad input exited $?"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic after --partitions 3 --expect 1000 \
	--timeout 60 || fail "consume after bad input exited $?"
stop_broker
pass "all bad-input cases, broker alive"
