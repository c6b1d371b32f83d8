#!/usr/bin/env bash
# dpdk_lab_kafkajs.sh SLUICED RDK_LOAD SLUICE_DUMP SLUICED_DPDK
# The broker core's kafkajs tests, unchanged, through issue 13's lab
# (tools/dpdk-lab.sh; see dpdk_lab.sh): sluiced-dpdk on DPDK's net_af_packet
# with its own ARP/IPv4/TCP in one namespace, and in the other
#   - kafkajs/test.js (as kafkajs.sh runs it): creates a 6-partition topic,
#     produces KJS_COUNT (default 20,000, kafkajs.sh's; meson gives the issue's
#     1,000,000, about 18 s of kafkajs here: see meson.build) keyed messages with
#     acks -1, checks offsets and ListOffsets; rdk_load reads them back exactly
#     once, whole, in order per partition;
#   - kafkajs/group.js (as kafkajs_group.sh): two consumer.run() consumers in
#     a group split a topic and read every message exactly once, and a new
#     member resumes from the committed offsets (kafkajs consuming);
# then the broker stops cleanly with no TCP flow left behind.
# Skipped (77) without root / network namespaces / veth / DPDK's EAL (as
# dpdk_lab.sh), or without node and kafkajs (as kafkajs.sh).
. "$(dirname "$0")/lib.sh"
COUNT=${KJS_COUNT:-20000}
integ_init dpdk_lab_kafkajs 52 "$@"
need_exe "$RDK_LOAD"
SLUICED_DPDK=$(abs_path "${4:-}")
[ -x "$SLUICED_DPDK" ] || fail "not an executable: '${4:-}' (the 4th argument: sluiced-dpdk)"
kafkajs_ready
. "$(dirname "$0")/dpdk_lab_lib.sh"
# group.js, as kafkajs_group.sh: no initial rebalance delay
lab_start --group-initial-rebalance-delay-ms 0

"$LAB" exec env -C "$JSDIR" node test.js "$BOOT" kjs "$COUNT" >"$WORK/kjs.out" 2>&1 ||
	fail "kafkajs test.js through the lab exited $?: $(tail -5 "$WORK/kjs.out")"
log "$(grep produced "$WORK/kjs.out")"
"$LAB" exec "$RDK_LOAD" consume --bootstrap "$BOOT" --topic kjs --partitions 6 --expect "$COUNT" \
	--timeout 240 >"$WORK/consume.log" 2>&1 ||
	fail "rdk_load read-back of the kafkajs data through the lab failed ($?): $(tail -3 "$WORK/consume.log")"
log "$(tail -1 "$WORK/consume.log")"
"$LAB" exec env -C "$JSDIR" node group.js "$BOOT" kjs-grp kjs-g1 >"$WORK/group.out" 2>&1 ||
	fail "kafkajs group.js through the lab exited $?: $(tail -n 15 "$WORK/group.out")"
log "$(grep -E 'phase|OK' "$WORK/group.out" | tr '\n' ';')"
lab_stop_check 0
INTEG_OK=1
pass "kafkajs through DPDK af_packet and the userspace TCP ($CORES data cores): produced $COUNT (librdkafka verified), consumer.run in a group"
