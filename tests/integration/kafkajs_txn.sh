#!/usr/bin/env bash
# kafkajs_txn.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# kafkajs 2.2.4 transactions (kafkajs/txn.js): five transactions over 2 topics
# x 3 partitions, committed and aborted in turn; then a librdkafka
# read_committed consumer (rdk_txn consume) must see exactly the committed
# records at the offsets kafkajs was told, and read_uncommitted all of them.
# node_modules as in kafkajs.sh (skipped, 77, without node/npm/network).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init kafkajs-txn 35 "$@"
kafkajs_ready
OUT=$WORK/produced.txt
start_broker --cores "${SLUICE_CORES:-3}"
txn_run kjs env -C "$JSDIR" node txn.js "$BOOTSTRAP" "$OUT" ||
	fail "kafkajs txn.js exited $?: $(txn_show kjs)"
log "$(tail -n 1 "$WORK/kjs.out")"
expect_lines "$OUT" commit >"$WORK/exp-c"
expect_lines "$OUT" commit abort >"$WORK/exp-all"
[ "$(wc -l <"$WORK/exp-c")" -eq 144 ] && [ "$(wc -l <"$WORK/exp-all")" -eq 240 ] ||
	fail "txn.js wrote $(wc -l <"$WORK/exp-all") records, $(wc -l <"$WORK/exp-c") committed; want 240, 144"
consume_check rc committed "$WORK/exp-c" kjt1,kjt2 3
consume_check ru uncommitted "$WORK/exp-all" kjt1,kjt2 3
stop_broker
pass "kafkajs committed 3 and aborted 2 transactions; librdkafka read_committed agrees"
