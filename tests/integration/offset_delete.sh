#!/usr/bin/env bash
# offset_delete.sh SLUICED
#
# OffsetDelete v0 on the group coordinator (admin_client.py offdel): a group's
# committed offset for one partition is tombstoned and reads back as -1, the
# others stay; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, an unknown group
# GROUP_ID_NOT_FOUND, an empty id INVALID_GROUP_ID; after a SIGKILL and a
# restart the delete holds (the tombstone is durable before the answer).
. "$(dirname "$0")/lib.sh"
integ_init offset-delete 85 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
ADMIN=$(abs_path "$(dirname "$0")/admin_client.py")
start_broker --cores 2
guarded "$PY" "$ADMIN" create "$PORT" 1 3 od >"$WORK/create.out" 2>&1 || fail "CreateTopics: $(tail -n 2 "$WORK/create.out")"
guarded "$PY" "$ADMIN" offdel "$PORT" od-0 3 delete || fail "OffsetDelete"
kill -9 "$BROKER_PID"
wait "$BROKER_PID" 2>/dev/null || true
BROKER_PID=
start_broker --cores 2
guarded "$PY" "$ADMIN" offdel "$PORT" od-0 3 after || fail "OffsetDelete after a restart"
stop_broker
pass "OffsetDelete: one partition's offset deleted, the others kept, Kafka's errors, held across a SIGKILL"
