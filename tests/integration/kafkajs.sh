#!/usr/bin/env bash
# kafkajs.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# kafkajs 2.2.4 (pinned in kafkajs/package-lock.json) creates a 6-partition
# topic and produces 20,000 keyed messages with acks -1 (kafkajs/test.js checks
# errors, offsets and ListOffsets); then rdk_load reads the topic back and
# checks every message exactly once, whole, in order per partition.
# With KJS_IDEMPOTENT=1 the producer is idempotent and the broker drops 5% of
# Produce responses (and closes 1% of connections) after appending, so every
# retry must be recognised as a duplicate: still exactly once.
# With KJS_COMPRESSION=gzip or snappy every batch is compressed (topic kjs-CODEC),
# and sluice-dump must show that codec on disk.
# node_modules is installed once with `npm ci` and kept (gitignored); without
# node/npm or without a network for the first install the test is skipped (77).
. "$(dirname "$0")/lib.sh"

COUNT=${KJS_COUNT:-20000}
TOPIC=kjs
integ_init kafkajs 8 "$@"
need_exe "$RDK_LOAD"
kafkajs_ready

FAULTS=()
if [ "${KJS_IDEMPOTENT:-0}" = 1 ]; then
	# Test-only: lose 5% of Produce responses after the append, so kafkajs retries.
	FAULTS=(--fault-drop-produce 50 --fault-close-produce 10 --fault-seed 3)
	TOPIC=kjs-idem
fi
CODEC=${KJS_COMPRESSION:-none}
[ "$CODEC" = none ] || TOPIC=kjs-$CODEC
start_broker --cores "${SLUICE_CORES:-2}" "${FAULTS[@]}"
guarded env -C "$JSDIR" KJS_COMPRESSION="$CODEC" node test.js "$BOOTSTRAP" "$TOPIC" "$COUNT" ||
	fail "kafkajs test.js exited $?"
broker_alive || fail "broker died during the kafkajs run"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 \
	--expect "$COUNT" --timeout 120 || fail "rdk_load consume of the kafkajs data exited $?"
if [ "$CODEC" != none ]; then
	need_exe "$SLUICE_DUMP"
	"$SLUICE_DUMP" "$DATA/$TOPIC-0" >"$WORK/dump.txt" || fail "sluice-dump exited $?"
	grep -q "codec $CODEC " "$WORK/dump.txt" || fail "batches on disk are not $CODEC-compressed"
fi
stop_broker
pass "kafkajs produced $COUNT ($CODEC), librdkafka verified"
