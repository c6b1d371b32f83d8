#!/usr/bin/env bash
# fetch_limits.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# Fetch byte limits (issue 10, items 3 and 4). fetch_limits.py fills 3
# partitions with ~10 KB batches over raw TCP and sends Fetches whose
# PartitionMaxBytes and MaxBytes are huge (0x7fffffff: the broker used to
# abort sizing a buffer from them), negative, zero, or end between batches and
# partitions; each answer must keep KIP-74 exactly (at most MaxBytes over all
# partitions, whole batches, the first batch of the first partition with data
# always whole) and the broker must stay up; Fetch v0 and v4 of 3,900 partition
# entries are answered (the request arena used to be too small for them). A
# Fetch v11 of 3,000 entries with MaxBytes 100, pipelined 50 times on each of 6
# connections, must leave the broker's peak VmSize and VmRSS under 1 GB (every
# entry used to be lent a buffer for its first batch: GBs per request), each
# answer Kafka's. Answers with the topic's segments dropped from the page cache
# must be Kafka's too (the owner used to end a range at the first batch header
# the page cache did not hold). Then librdkafka's own case 0082:
# fetch.max.bytes 1,000,000 with max.partition.fetch.bytes 20 MB over 3
# partitions of ~900 KB messages must be consumed without "Invalid response
# size" (it used to get the whole first partition, ~9 MB, and retry forever;
# receive.message.max.bytes is the least librdkafka 2.0 allows: fetch.max.bytes + 512).
. "$(dirname "$0")/lib.sh"
integ_init fetch-limits 34 "$@"
need_exe "$RDK_LOAD"
PY=$(command -v python3) || skip "python3 is not installed"

start_broker --cores "${SLUICE_CORES:-3}" --partitions 3
guarded "$PY" "$(dirname "$0")/fetch_limits.py" --port "$PORT" --topic fl --partitions 3 \
	--seed "${FETCH_LIMITS_SEED:-$RANDOM}" --broker-pid "$BROKER_PID" --data "$DATA"
rc=$?
broker_alive || fail "broker died during the fetch limit cases"
[ "$rc" -eq 0 ] || fail "fetch_limits.py: some cases failed (exit $rc)"

guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic big --partitions 3 --count 30 \
	--size 921600 --acks all || fail "produce of 900 KB messages exited $?"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic big --partitions 3 --expect 30 --timeout 60 \
	--conf fetch.max.bytes=1000000 --conf max.partition.fetch.bytes=20000000 \
	--conf receive.message.max.bytes=1000512 >"$WORK/consume.out" 2>"$WORK/consume.err"
rc=$?
if grep -q "Invalid response size" "$WORK/consume.err"; then
	fail "librdkafka got responses over fetch.max.bytes: $(grep -m 3 "Invalid response size" "$WORK/consume.err")"
fi
[ "$rc" -eq 0 ] || fail "consume with fetch.max.bytes 1000000 exited $rc: $(tail -n 5 "$WORK/consume.err")"
log "$(tail -n 1 "$WORK/consume.out")"
stop_broker
pass "Fetch limits clamped, MaxBytes kept as KIP-74 says; librdkafka 0082's case consumed"
