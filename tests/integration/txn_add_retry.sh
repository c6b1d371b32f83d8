#!/usr/bin/env bash
# txn_add_retry.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# An AddPartitionsToTxn record the coordinator could not write (issue 11):
# --fault-add-fail 2 fails the first two, one refused at the append and one
# reported failed at completion. The refused one is answered
# COORDINATOR_NOT_AVAILABLE and the client retries; the retry must write the
# record again and tell the partitions' owners. (The one failed at completion
# was answered already, before its record was durable: the list is in memory
# and the next record of the id, at the latest EndTxn's Prepare, carries it.) Before, the partitions were already in the
# transaction's list in memory, so the retry was answered at once, as a
# retry of a finished call, and the owners, never told, refused the
# producer's batches (INVALID_TXN_STATE): the transaction failed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-add-retry 78 "$@"
OUT=$WORK/produced.txt
start_broker --cores "${SLUICE_CORES:-3}" --fault-add-fail 2

txn_run live "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id tar-live --topics tar \
	--partitions 3 --count 5 --tag live --plan commit,commit --out "$OUT" --create \
	--op-timeout-ms 120000 ||
	fail "the producer exited $?: $(txn_show live)"
faults=$(grep -c "fault injection: the AddPartitions write" "$BROKER_LOG" || true)
[ "$faults" -eq 2 ] || fail "want 2 failed AddPartitions writes, saw $faults: the test proved nothing"
expect_lines "$OUT" commit >"$WORK/exp-c"
[ "$(wc -l <"$WORK/exp-c")" -eq 30 ] || fail "want 30 committed records in $OUT"
consume_check rc committed "$WORK/exp-c" tar 3
stop_broker
pass "a failed AddPartitions write is written again on the retry, and the owners told"
