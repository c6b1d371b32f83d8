#!/usr/bin/env bash
# kafkajs_group.sh SLUICED RDK_LOAD SLUICE_DUMP [RDK_GROUP]
#
# kafkajs 2.2.4 consumer groups (kafkajs/group.js): two consumer.run()
# consumers in one group split a 6-partition topic and read every message
# exactly once; after both disconnect, a new consumer in the group reads
# exactly the messages produced since (committed offsets). Skipped (77)
# without node/npm, as kafkajs.sh.
# The consumers long-poll (minBytes 1); this test found a Fetch bug where a
# parked fetch whose owner is its own core recursed without bound (fixed in
# dp_fetch_more). Run it with SLUICE_CORES=1 to exercise that path.
. "$(dirname "$0")/lib.sh"
integ_init kafkajs-group 41 "$@"
kafkajs_ready
start_broker --cores "${SLUICE_CORES:-3}"
guarded env -C "$JSDIR" node group.js "$BOOTSTRAP" kjs-grp kjs-g1 >"$WORK/kjs.out" 2>&1 ||
	fail "kafkajs group.js exited $?: $(tail -n 15 "$WORK/kjs.out")"
log "$(grep -E 'phase|OK' "$WORK/kjs.out" | tr '\n' ';')"
stop_broker
pass "kafkajs consumer.run in a group"
