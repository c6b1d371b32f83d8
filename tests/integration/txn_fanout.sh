#!/usr/bin/env bash
# txn_fanout.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# Every partition of a transaction gets its marker, also when the owner of a
# partition is the coordinator's own core and answers inside the send
# (--cores 1). txn_fanout.py sends over raw TCP a transaction of partitions
# 0, 1 and 2 of a topic with data on 1 only, aborts it, then commits one on
# partition 0: partition 1 must then hold the ABORT marker and its LSO must
# have passed it. Found by eos_check (an aborted transaction committed by
# the producer's next COMMIT): the coordinator counted the answer of
# partition 0, where nothing was written, before it had sent the others'
# markers, took the abort as complete and never marked partition 1.
. "$(dirname "$0")/lib.sh"
integ_init txn-fanout 76 "$@"
PY=$(command -v python3) || skip "python3 is not installed"

start_broker --cores "${SLUICE_CORES:-1}" --partitions 3
guarded "$PY" "$(dirname "$0")/txn_fanout.py" --port "$PORT" --topic tf
rc=$?
broker_alive || fail "broker died during the transactions"
[ "$rc" -eq 0 ] || fail "txn_fanout.py: a partition lacks its marker (exit $rc)"
stop_broker
if [ -n "$SLUICE_DUMP" ]; then
	"$SLUICE_DUMP" "$DATA/tf-1" >"$WORK/dump-1.txt" || fail "sluice-dump of tf-1 failed"
	grep -q "ABORT" "$WORK/dump-1.txt" || fail "tf-1 has no ABORT marker in its log: $(cat "$WORK/dump-1.txt")"
fi
pass "each partition of an aborted transaction got its ABORT marker (cores ${SLUICE_CORES:-1})"
