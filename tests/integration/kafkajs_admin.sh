#!/usr/bin/env bash
# kafkajs_admin.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# kafkajs 2.2.4's admin client (kafkajs/admin.js): createPartitions grows a
# topic from 2 to 5 partitions (Metadata follows, the new partitions take
# produces and are consumed, Kafka's refusals come back); after a restart
# the count and the records stay. The new partitions are spread over the
# data cores by the rule every partition follows (--cores 3: three data cores,
# as the control role shares core 0 by default below 8 cores).
# node_modules as in kafkajs.sh (skipped, 77, without node/npm/network).
. "$(dirname "$0")/lib.sh"
integ_init kafkajs-admin 37 "$@"
kafkajs_ready
start_broker --cores "${SLUICE_CORES:-3}" --no-auto-create
guarded env -C "$JSDIR" node admin.js "$BOOTSTRAP" grow || fail "kafkajs admin.js grow exited $?"
stop_broker
start_broker --cores "${SLUICE_CORES:-3}" --no-auto-create
guarded env -C "$JSDIR" node admin.js "$BOOTSTRAP" after || fail "kafkajs admin.js after exited $?"
stop_broker
pass "kafkajs admin: createPartitions 2 -> 5, produced and consumed, kept across a restart"
