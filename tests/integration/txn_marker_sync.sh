#!/usr/bin/env bash
# txn_marker_sync.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# A transaction's markers go to every partition even when an owner answers
# one at once. At --cores 1 the coordinator and the owners share the core, so
# a partition of the transaction that holds none of its data (its owner has
# nothing open there) answers its marker inside the send; that answer brought
# the outstanding count to 0 and completed the transaction in the middle of
# the fan-out, which freed the partition list: the partitions after it never
# got their marker, and their LSO stayed below their data for good.
# txn_marker_sync.py: T/0 (no data) then T/1 (data), commit, and T/1's
# read_committed end must reach its high watermark.
. "$(dirname "$0")/lib.sh"
integ_init txn-marker-sync 74 "$@"
need_exe "$RDK_LOAD"
PY=$(command -v python3) || skip "python3 is not installed"

start_broker --cores "${SLUICE_CORES:-1}"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic tms --partitions 2 --count 0 \
	>"$WORK/prod.log" 2>&1 || fail "creating tms: rdk_load exited $?"
out=$(guarded "$PY" "$(dirname "$0")/txn_marker_sync.py" --port "$PORT" --topic tms 2>&1)
rc=$?
broker_alive || fail "broker died: $out"
[ "$rc" -eq 0 ] || fail "txn_marker_sync.py exited $rc: $out"
log "$out"
stop_broker
pass "a marker answered inside the fan-out does not end it: every partition got its marker"
