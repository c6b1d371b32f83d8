#!/usr/bin/env bash
# txn_marker_retry.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# A COMMIT/ABORT marker that an owner could not write is sent again until it
# is written (as Kafka's marker channel does), never counted as done. The
# broker (test only, --fault-marker-fail) answers half of the markers as a
# failed write without writing them. Five transactions, commits and aborts,
# over 2 topics x 3 partitions: read_committed must then read exactly the
# committed records to the end of every partition, read_uncommitted all of
# them. Before, the coordinator took the error as an answer and wrote
# Complete: the partition kept the transaction open for good, and
# read_committed stopped there.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-marker-retry 73 "$@"
TOPICS=tm1,tm2
OUT=$WORK/produced.txt

start_broker --cores "${SLUICE_CORES:-3}" --fault-marker-fail 500 --fault-seed 3
txn_run prod "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id tm --topics "$TOPICS" \
	--partitions 3 --count 10 --tag one --plan commit,abort,commit,abort,commit --out "$OUT" --create \
	--op-timeout-ms 120000 ||
	fail "the producer exited $?: $(txn_show prod)"
refused=$(grep -c "fault injection: refusing the marker" "$BROKER_LOG" || true)
log "fault injection: $refused markers refused"
[ "$refused" -gt 0 ] || fail "fault injection did not fire: the test proved nothing"
expect_lines "$OUT" commit >"$WORK/exp-c"
expect_lines "$OUT" commit abort >"$WORK/exp-all"
[ "$(wc -l <"$WORK/exp-c")" -eq 180 ] && [ "$(wc -l <"$WORK/exp-all")" -eq 300 ] ||
	fail "want 180 + 120 records in $OUT"
consume_check rc committed "$WORK/exp-c" "$TOPICS" 3 --timeout 60
consume_check ru uncommitted "$WORK/exp-all" "$TOPICS" 3
stop_broker
pass "$refused refused markers sent again until written: read_committed exact"
