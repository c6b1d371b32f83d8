#!/usr/bin/env bash
# kafkajs_groups.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# kafkajs 2.2.4's admin deleteGroups (kafkajs/groups.js): Empty groups are
# deleted (offsets, listing, state), one with a member is NON_EMPTY_GROUP, an
# unknown one GROUP_ID_NOT_FOUND; after a restart the deletes hold (the
# tombstones in __consumer_offsets), and commits made after a delete stay.
# node_modules as in kafkajs.sh (skipped, 77, without node/npm/network).
. "$(dirname "$0")/lib.sh"
integ_init kafkajs-groups 84 "$@"
kafkajs_ready
start_broker --cores "${SLUICE_CORES:-2}"
guarded env -C "$JSDIR" node groups.js "$BOOTSTRAP" delete || fail "kafkajs groups.js delete exited $?"
stop_broker
start_broker --cores "${SLUICE_CORES:-2}"
guarded env -C "$JSDIR" node groups.js "$BOOTSTRAP" after || fail "kafkajs groups.js after exited $?"
stop_broker
pass "kafkajs deleteGroups: Empty groups deleted, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, kept across a restart"
