#!/usr/bin/env bash
# kafkajs_delrec.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# kafkajs 2.2.4's admin.deleteTopicRecords (kafkajs/delrec.js): the low
# watermarks move (to an offset, and to the high watermark with '-1'), never
# down, an offset past the high watermark is refused, a consumer from the
# beginning starts at the new start; after SIGKILL and a restart the starts
# are kept. node_modules as in kafkajs.sh (skipped, 77, without node/npm/network).
. "$(dirname "$0")/lib.sh"
integ_init kafkajs-delrec 47 "$@"
kafkajs_ready
start_broker --cores "${SLUICE_CORES:-2}" --no-auto-create
guarded env -C "$JSDIR" node delrec.js "$BOOTSTRAP" delete || fail "kafkajs delrec.js delete exited $?"
kill9_broker
start_broker --cores "${SLUICE_CORES:-2}" --no-auto-create
guarded env -C "$JSDIR" node delrec.js "$BOOTSTRAP" after || fail "kafkajs delrec.js after exited $?"
stop_broker
pass "kafkajs deleteTopicRecords: low watermarks moved, consumed from the start, kept across SIGKILL"
