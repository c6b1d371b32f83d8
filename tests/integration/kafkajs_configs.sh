#!/usr/bin/env bash
# kafkajs_configs.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# Topic configs that CreateTopics takes are stored with the topic and applied
# (kafkajs/configs.js): max.message.bytes refuses a larger batch with
# MESSAGE_TOO_LARGE, min.insync.replicas=2 refuses acks=all, segment.bytes rolls
# the log at 4 KiB (counted here, in the partition's directory), and both
# limits hold after a restart. A config sluice does not implement is
# INVALID_CONFIG. A topic deleted and made again without configs starts bare
# (its config file went with it). AlterConfigs replaces a topic's configs and
# IncrementalAlterConfigs changes them key by key (admin_client.py configs);
# both are in effect at once and after a restart; an altered retention.bytes
# trims the open log. An alter whose directory sync failed answers KAFKA_STORAGE_ERROR.
# A null config value (CreateTopics, AlterConfigs) and a resource named twice in an
# alter are INVALID_REQUEST, as Kafka answers them (admin_client.py configs).
. "$(dirname "$0")/lib.sh"
integ_init kafkajs-configs 84 "$@"
kafkajs_ready
js() { guarded env -C "$JSDIR" node configs.js "$BOOTSTRAP" "$1" || fail "kafkajs configs.js $1 exited $?"; }
start_broker --cores "${SLUICE_CORES:-3}" --no-auto-create
js create
segs=$(find "$DATA/kjc-seg-0" -name '*.log' | wc -l)
[ "$segs" -ge 5 ] || fail "kjc-seg: $segs segment files after 40 KB at segment.bytes=4096, want at least 5"
[ -f "$DATA/__topic_configs/kjc-big" ] || fail "kjc-big has no config file"
grep -qx 'max.message.bytes=2000' "$DATA/__topic_configs/kjc-big" || fail "kjc-big's config file: $(cat "$DATA/__topic_configs/kjc-big")"
[ ! -e "$DATA/__topic_configs/kjc-no" ] || fail "a refused create left a config file"
stop_broker
start_broker --cores "${SLUICE_CORES:-3}" --no-auto-create
js after
js alter
# IncrementalAlterConfigs (kafkajs 2.2.4 has none): raw v0 requests, each checked by DescribeConfigs.
guarded python3 "$(dirname "$0")/admin_client.py" configs "$PORT" kjc-inert || fail "IncrementalAlterConfigs and config refusal cases"
stop_broker
start_broker --cores "${SLUICE_CORES:-3}" --no-auto-create
js altered
js retain
js recreate
[ ! -e "$DATA/__topic_configs/kjc-big" ] || fail "kjc-big made again without configs still has a config file"
js recreated
stop_broker
# A config file whose topic has no partition directory (a create that a stop interrupted) goes at start-up.
printf 'retention.ms=1\n' >"$DATA/__topic_configs/kjc-gone"
printf 'retention.ms=1\n' >"$DATA/__topic_configs/~kjc-tmp"
start_broker --cores "${SLUICE_CORES:-3}" --no-auto-create
[ ! -e "$DATA/__topic_configs/kjc-gone" ] && [ ! -e "$DATA/__topic_configs/~kjc-tmp" ] ||
	fail "start-up kept config files of no topic: $(ls "$DATA/__topic_configs")"
stop_broker
# An alter whose file was renamed into place but whose directory sync failed: KAFKA_STORAGE_ERROR
# (before, NONE), and the broker reports what the file holds.
start_broker --cores "${SLUICE_CORES:-3}" --no-auto-create --fault-conf-sync-fail 1
guarded python3 "$(dirname "$0")/admin_client.py" create "$PORT" 1 1 kjc-sync >/dev/null || fail "create kjc-sync-0"
guarded python3 "$(dirname "$0")/admin_client.py" confsync "$PORT" kjc-sync-0 || fail "alter with a failed directory sync"
stop_broker
grep -qx 'max.message.bytes=3600' "$DATA/__topic_configs/kjc-sync-0" ||
	fail "kjc-sync-0's config file: $(cat "$DATA/__topic_configs/kjc-sync-0")"
pass "kafkajs configs: stored, applied (max.message.bytes, min.insync.replicas, segment.bytes), kept across a restart"
