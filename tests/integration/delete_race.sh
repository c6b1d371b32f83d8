#!/usr/bin/env bash
# delete_race.sh SLUICED [RDK_LOAD [SLUICE_DUMP]]
# Produce to partitions owned by other cores while the topic is deleted (see delete_race.py).
. "$(dirname "$0")/lib.sh"
integ_init delete-race 12 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
start_broker --cores "${SLUICE_CORES:-3}" --no-auto-create
guarded "$PY" "$(dirname "$0")/delete_race.py" --port "$PORT" || fail "delete_race.py failed"
broker_alive || fail "broker died"
stop_broker
pass "produce racing delete"
