#!/usr/bin/env bash
# txn_many_aborts.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# More aborted transactions than one read_committed answer may list (issue 10,
# item 1): one transactional producer writes 2,400 transactions of one record
# to each of 3 partitions, every other one aborted after a flush, so each
# partition holds 1,200 aborted transactions. A read_committed consumer from
# offset 0 must see exactly the committed records at their offsets, none of
# the aborted ones (an answer cut where its aborted list would exceed the
# broker's DP_FETCH_ABORTED_MAX, never one with the list silently left
# empty), before and after a broker restart; read_uncommitted sees all.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-many-aborts 33 "$@"
TOPIC=tma
OUT=$WORK/produced.txt
PAIRS=${TMA_PAIRS:-1200}

start_broker --cores "${SLUICE_CORES:-3}"
txn_run prod "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id tma --topics "$TOPIC" \
	--partitions 3 --count 1 --tag ma --plan commit,abort --repeat "$PAIRS" --out "$OUT" --create ||
	fail "producer exited $?: $(txn_show prod)"
expect_lines "$OUT" commit >"$WORK/exp-c"
expect_lines "$OUT" commit abort >"$WORK/exp-all"
[ "$(wc -l <"$WORK/exp-c")" -eq $((3 * PAIRS)) ] && [ "$(wc -l <"$WORK/exp-all")" -eq $((6 * PAIRS)) ] ||
	fail "want $((3 * PAIRS)) committed and $((3 * PAIRS)) aborted records in $OUT"
log "produced $((6 * PAIRS)) records in $((2 * PAIRS)) transactions"
consume_check rc committed "$WORK/exp-c" "$TOPIC" 3 --timeout 120
consume_check ru uncommitted "$WORK/exp-all" "$TOPIC" 3 --timeout 120
stop_broker
# After a restart the aborted index comes from aborted.txnindex and the log tail.
start_broker --cores "${SLUICE_CORES:-3}"
consume_check rc-restart committed "$WORK/exp-c" "$TOPIC" 3 --timeout 120
stop_broker
pass "$((3 * PAIRS)) aborted of $((6 * PAIRS)) records invisible to read_committed, also after a restart"
