#!/usr/bin/env bash
# call_refuse.sh SLUICED [RDK_LOAD [SLUICE_DUMP]]
#
# A coordinator request goes to its coordinator as a call (dataplane/loop/
# call.h) whose buffer comes from the connection core's pool; when the pool
# refuses it the client must get the protocol's retriable answer, not a
# closed connection or a hang. --fault-call-refuse N makes the pool refuse
# with N/1000 odds. With every call refused, call_refuse.py checks each
# kind's answer (COORDINATOR_LOAD_IN_PROGRESS, shaped as the coordinator
# shapes its errors) on a connection that stays open; with half refused, a
# client that retries gets its transactions through (--cores 2, then 1).
. "$(dirname "$0")/lib.sh"
integ_init call-refuse 79 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
PYDIR=$(dirname "$0")

start_broker --cores "${SLUICE_CORES:-2}" --fault-call-refuse 1000
guarded "$PY" "$PYDIR/call_refuse.py" all "$PORT" || fail "every call refused: wrong answers"
grep -q "coordinator call: answered COORDINATOR_LOAD_IN_PROGRESS" "$BROKER_LOG" ||
	fail "no refusal in the broker log: $(tail -n 3 "$BROKER_LOG" | tr '\n' ';')"
stop_broker

start_broker --cores 1 --fault-call-refuse 500
guarded "$PY" "$PYDIR/call_refuse.py" some "$PORT" || fail "half the calls refused: retries did not get through"
stop_broker
pass "refused coordinator calls answered COORDINATOR_LOAD_IN_PROGRESS; retried ones got through"
