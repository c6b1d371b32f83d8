#!/usr/bin/env bash
# delete_records.sh SLUICED RDK_LOAD SLUICE_DUMP SLUICE_ADMIN
#
# DeleteRecords (API 21): refusals as Kafka answers them, the log start moved
# into the middle of a segment (ListOffsets earliest says it, a fetch below it
# is OFFSET_OUT_OF_RANGE, Fetch's log_start_offset reports it; never moved
# down), offset -1 (the high watermark) over v2, sluice-admin delete-records;
# the segments wholly below the start are deleted by the next retention pass
# and the one straddling it stays; then SIGKILL and a restart on the same data
# keep the start (the log-start file was durable before the answer).
. "$(dirname "$0")/lib.sh"
integ_init delete-records 46 "$@"
ADMIN=$(abs_path "${4:-}")
need_exe "$RDK_LOAD"
need_exe "$ADMIN"
BARGS=(--cores "${SLUICE_CORES:-2}" --no-auto-create --segment-bytes 65536 --producer-snapshot-ms 2000)
start_broker "${BARGS[@]}"
adm() { "$ADMIN" --bootstrap "$BOOTSTRAP" "$@"; }
PY=$(dirname "$0")/delete_records.py

adm topics create dr 2 >/dev/null || fail "create exited $?"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic dr --count 6000 --partitions 2 --size 100 --batch-messages 50 --no-create >/dev/null ||
	fail "rdk_load produce exited $?"
adm topics describe dr >"$WORK/d.out" || fail "describe exited $?"
end0=$(awk '/^partition dr 0 /{ split($6, e, "="); print e[2] }' "$WORK/d.out")
[ -n "$end0" ] && ((end0 > 100)) || fail "partition 0 has too few records: $(cat "$WORK/d.out")"
segs() { find "$DATA" -path "*dr-0*" -name '*.log' | wc -l; }
before=$(segs)
((before >= 3)) || fail "partition 0 has $before segments, want several (--segment-bytes 65536)"

off=$((end0 / 2 + 1))
guarded python3 "$PY" delete "$PORT" dr 2 "$off" || fail "DeleteRecords cases"
off2=$((off + 7))
adm delete-records dr 0 "$off2" >"$WORK/a.out" || fail "sluice-admin delete-records exited $?"
grep -qx "dr 0 low_watermark=$off2" "$WORK/a.out" || fail "delete-records printed: $(cat "$WORK/a.out")"
if adm delete-records dr 0 $((end0 + 1)) 2>"$WORK/a.err"; then fail "an offset past the high watermark was taken"; fi
grep -q "OFFSET_OUT_OF_RANGE" "$WORK/a.err" || fail "past the high watermark: $(cat "$WORK/a.err")"
guarded python3 "$PY" check "$PORT" dr "$off2" || fail "the log start before the restart"

# The next retention pass (every 30 s) deletes the segments wholly below the start.
deadline=$((SECONDS + 75))
while (($(segs) >= before)) && ((SECONDS < deadline)); do sleep 1; done
after=$(segs)
((after < before)) || fail "no segment below the log start was deleted ($before segments before, $after after)"
((after >= 2)) || fail "only $after segments left: the one straddling the start must stay"
log "segments of partition 0: $before -> $after"

kill9_broker
start_broker "${BARGS[@]}"
guarded python3 "$PY" check "$PORT" dr "$off2" || fail "the log start after SIGKILL and restart"
adm topics describe dr >"$WORK/d2.out" || fail "describe exited $?"
grep -q "^partition dr 0 leader=1 start=$off2 end=$end0\$" "$WORK/d2.out" || fail "describe after restart: $(cat "$WORK/d2.out")"
stop_broker
pass
