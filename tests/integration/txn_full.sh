#!/usr/bin/env bash
# txn_full.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# Full owner tables (issue 10): a producer's batch is written only when its
# entries can be recorded. The broker is shrunk with test-only flags.
#
# 1. --test-txn-open-max 1: a producer's open transaction holds the one open
#    slot of partition tf/0 (it flushes and is SIGKILLed; the broker aborts it
#    after its 5 s timeout). A second producer's transaction must wait for the
#    slot (its batches are refused retriably, NOT_ENOUGH_REPLICAS) and is then
#    aborted: read_committed must see none of it. Before, its batches were
#    appended without an open entry, the LSO passed them, the abort found no
#    open transaction to index, and read_committed showed the aborted records.
# 2. --test-producers-max 1 with connections closed after 30 % of the appends
#    (so librdkafka retries): a second producer must wait until the first one
#    expires (--producer-expiration-ms 3000) and is then deduplicated. Before,
#    its batches were appended with no producer entry, and every retry of one
#    was appended again: duplicates in read_committed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-full 72 "$@"
OUT=$WORK/produced.txt

start_broker --cores "${SLUICE_CORES:-3}" --test-txn-open-max 1
txn_open_killed dead --bootstrap "$BOOTSTRAP" --txn-id tf-dead --topics tf --partitions 1 \
	--count 10 --tag dead --plan open --txn-timeout-ms 5000 --out "$OUT" --create
log "SIGKILLed a producer with an open transaction on tf/0 (the only open slot)"
txn_run second "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id tf-second --topics tf \
	--partitions 1 --count 10 --tag second --plan abort,commit --out "$OUT" ||
	fail "the second producer exited $?: $(txn_show second)"
grep -q 'transaction index full' "$BROKER_LOG" ||
	fail "the second producer's batches were never refused for the full table: the test proved nothing"
expect_lines "$OUT" commit >"$WORK/exp-c"
expect_lines "$OUT" commit abort open >"$WORK/exp-all"
[ "$(wc -l <"$WORK/exp-c")" -eq 10 ] && [ "$(wc -l <"$WORK/exp-all")" -eq 30 ] ||
	fail "want 10 + 20 records in $OUT"
consume_check rc1 committed "$WORK/exp-c" tf 1 --timeout 60
consume_check ru1 uncommitted "$WORK/exp-all" tf 1
stop_broker

: >"$OUT"
start_broker --cores "${SLUICE_CORES:-3}" --test-producers-max 1 --producer-expiration-ms 3000 \
	--producer-snapshot-ms 200 --fault-close-produce 300 --fault-seed 5
for who in first second; do
	txn_run "p-$who" "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id "tp-$who" --topics tp \
		--partitions 1 --count 20 --tag "$who" --plan commit,commit,commit,commit,commit \
		--out "$OUT" --create --op-timeout-ms 120000 ||
		fail "producer $who exited $?: $(txn_show "p-$who")"
done
closes=$(grep -c "fault injection: closing" "$BROKER_LOG" || true)
log "fault injection: $closes connections closed after an append"
[ "$closes" -gt 0 ] || fail "fault injection did not fire: the test proved nothing"
grep -q 'producer state full' "$BROKER_LOG" ||
	fail "the second producer was never refused for the full table: the test proved nothing"
expect_lines "$OUT" commit >"$WORK/exp-c2"
[ "$(wc -l <"$WORK/exp-c2")" -eq 200 ] || fail "want 200 records in $OUT"
consume_check rc2 committed "$WORK/exp-c2" tp 1 --timeout 60
stop_broker
pass "full transaction index and producer state: batches wait (retriably), none unrecorded"
