#!/usr/bin/env bash
# crash.sh SLUICED RDK_LOAD SLUICE_DUMP
#
# Durability across SIGKILL: a librdkafka producer (acks=all, retries, long
# message.timeout.ms) writes 600,000 keyed messages and records every
# acknowledged (partition, offset, i). Mid-load the broker is SIGKILLed and
# restarted on the same data dir and port (twice by default, so a recovered
# log is recovered again); the producer rides through and finishes. Then every
# acknowledged message must be found at exactly its acknowledged offset, and
# every message read must be whole. Duplicates are
# allowed (a non-idempotent retry after a crash may write twice) and reported.
# Finally sluice-dump must read each partition directory and exit 0.
# SIGKILL keeps the page cache, so this checks recovery and ack ordering, not
# fdatasync itself (that needs a power cut or the simulated faulty disk).
# With CRASH_IDEMPOTENT=1 the producer is idempotent and the check is strict:
# every message exactly once, in order per partition, no duplicates (the
# producer state must survive the crash for retries to be recognised).
# Knobs: SLUICE_CORES (default 2), CRASH_COUNT (600000), CRASH_KILLS (2),
# CRASH_KILL_AFTER (acked lines before each kill, default 40000), CRASH_IDEMPOTENT,
# CRASH_SNAPSHOT_MS (a producer-state snapshot interval, so that the kills land
# while snapshots are being written; each restart must then load one), SLUICE_DIRECT_IO=on
# (lib.sh: the O_DIRECT append path; then no segment may have fallen back to the page cache).
. "$(dirname "$0")/lib.sh"

CORES=${SLUICE_CORES:-2}
COUNT=${CRASH_COUNT:-600000}
KILLS=${CRASH_KILLS:-2}
KILL_AFTER=${CRASH_KILL_AFTER:-40000}
PARTS=3
TOPIC=crash
IDEMP=()
STRICT=()
BARGS=()
[ -n "${CRASH_SNAPSHOT_MS:-}" ] && BARGS=(--producer-snapshot-ms "$CRASH_SNAPSHOT_MS")
if [ "${CRASH_IDEMPOTENT:-0}" = 1 ]; then
	IDEMP=(--idempotent)
	STRICT=(--expect "$COUNT")
fi
integ_init crash 6 "$@"
need_exe "$RDK_LOAD"
need_exe "$SLUICE_DUMP"
ACKED=$WORK/acked.txt

start_broker --cores "$CORES" "${BARGS[@]}"
"$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions "$PARTS" \
	--count "$COUNT" --size 100 --acks all --acked-file "$ACKED" --allow-failures \
	--timeout-ms 180000 "${IDEMP[@]}" >"$WORK/produce.out" 2>"$WORK/produce.err" &
PROD_PID=$!
INTEG_CHILDREN=$PROD_PID

acked_lines() { if [ -f "$ACKED" ]; then wc -l <"$ACKED"; else echo 0; fi; }

for ((k = 1; k <= KILLS; k++)); do
	want=$((k * KILL_AFTER))
	deadline=$((SECONDS + 60))
	while (($(acked_lines) < want)); do
		kill -0 "$PROD_PID" 2>/dev/null ||
			fail "producer ended before $want acks (see $WORK/produce.err):
$(tail -n 5 "$WORK/produce.err")"
		((SECONDS < deadline)) || fail "fewer than $want acks after 60 s"
		broker_alive || fail "broker died under load before the planned kill"
		sleep 0.05
	done
	n=$(acked_lines)
	kill9_broker
	log "SIGKILL $k/$KILLS with $n acks recorded"
	sleep 0.5
	start_broker --cores "$CORES" "${BARGS[@]}"
done

while kill -0 "$PROD_PID" 2>/dev/null; do
	broker_alive || fail "restarted broker died while the producer was still running"
	sleep 0.2
done
wait "$PROD_PID"
prc=$?
INTEG_CHILDREN=
cat "$WORK/produce.out"
[ "$prc" -eq 0 ] || fail "producer exited $prc: $(tail -n 5 "$WORK/produce.err")"
grep -q ' failed 0 ' "$WORK/produce.out" ||
	log "NOTE: some messages were not acknowledged (allowed; they are not checked)"
broker_alive || fail "broker died after restart"

guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions "$PARTS" \
	--acked-file "$ACKED" --timeout 240 "${STRICT[@]}" || fail "verification failed (rdk_load consume exited $?)"

for ((p = 0; p < PARTS; p++)); do
	dir=$DATA/$TOPIC-$p
	[ -d "$dir" ] || fail "no partition directory $dir (ls $DATA: $(ls "$DATA" | head))"
	"$SLUICE_DUMP" "$dir" >"$WORK/dump-$p.txt" 2>&1 ||
		fail "sluice-dump $dir exited $?: $(tail -n 5 "$WORK/dump-$p.txt")"
	[ -s "$WORK/dump-$p.txt" ] || fail "sluice-dump $dir printed nothing"
	log "sluice-dump $dir: OK ($(wc -l <"$WORK/dump-$p.txt") lines)"
done

if [ -n "${CRASH_SNAPSHOT_MS:-}" ]; then
	# Every restart found a whole snapshot written by the killed broker (none torn, none missing).
	loaded=$(grep -c 'opened on core .*(snapshot at [0-9]' "$BROKER_LOG" || true)
	((loaded >= KILLS * PARTS)) || fail "only $loaded partition opens used a snapshot after $KILLS restarts"
	grep -q 'unusable' "$BROKER_LOG" && fail "a snapshot was unusable after a crash: $(grep unusable "$BROKER_LOG" | head -n 3)"
	log "$loaded partition opens after a crash used a snapshot"
fi
if [ "${SLUICE_DIRECT_IO:-}" = on ]; then
	# The direct path really ran: no segment fell back to the page cache (a tmpfs data dir would).
	grep -q 'go through the page cache' "$BROKER_LOG" && fail "O_DIRECT was refused: $(grep 'go through the page cache' "$BROKER_LOG" | head -n 2)"
	grep -q 'direct io on' "$BROKER_LOG" || fail "the broker did not say direct io was on"
fi
stop_broker
pass "$KILLS crash(es), $(acked_lines) acked messages verified"
