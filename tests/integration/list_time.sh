#!/usr/bin/env bash
# list_time.sh SLUICED
#
# ListOffsets by timestamp on a partition of many segments (64 KiB each):
# 1,500 batches whose timestamps run out of order across and within batches,
# a third of them gzip-compressed (list_time.py). Every answer must be
# Kafka's (in the first batch whose maxTimestamp reaches the target, the
# first record that does: its offset and timestamp; or -1), from the page
# cache, from evicted
# segments, and after a restart, whose sealed segments' time indexes are then
# read from their files; and again after every .timeindex file was removed or
# damaged, which the restart rebuilds (the log says so). One request of
# 300,000 lookups by time is past DP_LIST_WORK_BYTES_MAX: header answers.
. "$(dirname "$0")/lib.sh"
integ_init list-time 81 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
ADMIN=$(abs_path "$(dirname "$0")/admin_client.py")
LT=$(abs_path "$(dirname "$0")/list_time.py")
TOPIC=lt-0

start_broker --cores 2 --segment-bytes 65536
guarded "$PY" "$ADMIN" create "$PORT" 1 1 lt >"$WORK/create.out" 2>&1 || fail "CreateTopics: $(tail -n 2 "$WORK/create.out")"
guarded "$PY" "$LT" produce --port "$PORT" --topic $TOPIC --state "$WORK/batches.json" >"$WORK/produce.out" 2>&1 ||
	fail "produce: $(tail -n 3 "$WORK/produce.out")"
log "$(tail -n 1 "$WORK/produce.out")"
check() {   # $1: what the round is
	guarded "$PY" "$LT" check --port "$PORT" --topic $TOPIC --state "$WORK/batches.json" "${@:2}" >"$WORK/check.out" 2>&1 ||
		fail "$1: $(tail -n 5 "$WORK/check.out" | tr '\n' ';')"
	log "$1: $(tail -n 1 "$WORK/check.out")"
}
check "cached"
check "evicted" --data "$DATA"
stop_broker
nsegs=$(find "$DATA/$TOPIC-0" -name '*.log' | wc -l)
ntidx=$(find "$DATA/$TOPIC-0" -name '*.timeindex' | wc -l)
((nsegs >= 8)) || fail "only $nsegs segments"
[ "$ntidx" = "$nsegs" ] || fail "$ntidx time indexes for $nsegs segments"
start_broker --cores 2 --segment-bytes 65536
check "restarted" --data "$DATA"
stop_broker
# Remove every other time index, damage the rest (a byte of an entry, or cut short).
k=0
for f in "$DATA/$TOPIC-0"/*.timeindex; do
	case $((k++ % 3)) in
	0) rm -f "$f" ;;
	1) printf '\xff' | dd of="$f" bs=1 seek=40 conv=notrunc status=none ;;
	*) truncate -s 20 "$f" ;;
	esac
done
from=$(($(wc -l <"$BROKER_LOG") + 1))
start_broker --cores 2 --segment-bytes 65536
check "time indexes rebuilt" --data "$DATA"
rebuilt=$(tail -n +"$from" "$BROKER_LOG" | grep -c 'no valid time index, scanning it' || true)
stop_broker
# The active segment is scanned at every open (no message): every sealed one was rebuilt.
[ "$rebuilt" = $((nsegs - 1)) ] || fail "$rebuilt sealed segments rebuilt their time index, expected $((nsegs - 1))"
[ "$(find "$DATA/$TOPIC-0" -name '*.timeindex' | wc -l)" = "$nsegs" ] || fail "time indexes not all written again"
pass "ListOffsets by time right on $nsegs segments: cached, evicted, restarted, time indexes rebuilt ($rebuilt)"
