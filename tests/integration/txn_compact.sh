#!/usr/bin/env bash
# txn_compact.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# The coordinator log only grows (one record per state change) until it is
# compacted: with a tiny --transaction-log-compact-records, 40 transactions of
# 3 transactional ids force several compactions. Old segments must go, and
# after a SIGKILL and a restart the coordinator must still know every id: each
# id's next producer instance fences the old epoch and commits, and
# read_committed sees exactly the committed records.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-compact 36 "$@"
OUT=$WORK/produced.txt
start_broker --cores "${SLUICE_CORES:-2}" --transaction-log-compact-records 10
plan=commit,abort,commit,commit,abort,commit,commit,commit,abort,commit,commit,commit,abort
for id in a b c; do
	txn_run "p-$id" "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id "tc-$id" --topics tc \
		--partitions 3 --count 5 --tag "$id" --plan "$plan" --out "$OUT" --create ||
		fail "producer $id exited $?: $(txn_show "p-$id")"
done
sleep 0.5   # compaction runs on the coordinator's 100 ms timer
n=$(grep -c "compaction done" "$BROKER_LOG" || true)
[ "$n" -ge 1 ] || fail "no compaction happened"
segs=$(ls "$DATA/__transaction_state"/*.log | wc -l)
log "$n compaction(s); $segs segment file(s) left in __transaction_state"
kill9_broker
start_broker --cores "${SLUICE_CORES:-2}" --transaction-log-compact-records 10
grep -q "transaction coordinator: 3 transactional ids loaded" "$BROKER_LOG" ||
	fail "the coordinator did not reload the 3 ids: $(grep 'transaction coordinator' "$BROKER_LOG")"
for id in a b c; do
	txn_run "q-$id" "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id "tc-$id" --topics tc \
		--partitions 3 --count 5 --tag "$id-after" --plan commit --out "$OUT" ||
		fail "producer $id after restart exited $?: $(txn_show "q-$id")"
done
expect_lines "$OUT" commit >"$WORK/exp"
consume_check rc committed "$WORK/exp" tc 3
stop_broker
pass "$n compaction(s), ids and outcomes intact across a crash"
