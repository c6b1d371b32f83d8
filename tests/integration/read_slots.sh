#!/usr/bin/env bash
# read_slots.sh SLUICED RDK_LOAD SLUICE_DUMP SYNCPROBE
#
# Cold fetches with one read slot (--cores 1 --test-reads-max 1): four topics of
# 6 partitions, 8,000 1000-byte records each (acks=all), then the broker is
# restarted, every file of the topics evicted from the page cache (posix_fadvise
# DONTNEED), and four librdkafka consumers, one per topic, read everything back
# at once: each message whole, exactly once, in order; meanwhile
# cold_lookup.py's Fetch and ListOffsets-by-time lookups (each after evicting
# again) in one of the topics must be answered right. With a single slot the
# fetches and lookups that miss the cache must wait their turn for it
# (shard/read.c's wait queue) rather than read with a blocking syscall: the
# broker's exit lines must count waits, and 0 blocking reads on every core,
# and syncprobe.so (nonblock.sh) must record no blocking read from a core
# thread while the reads go on.
. "$(dirname "$0")/lib.sh"
integ_init read-slots 19 "$@"
need_exe "$RDK_LOAD"
PROBE=$(abs_path "${4:-}")
[ -f "$PROBE" ] || fail "no syncprobe library at '$PROBE'"
PY=$(command -v python3) || skip "python3 is not installed"
ARM=$WORK/probe.arm
OUT=$WORK/probe.out
COUNT=8000
TOPICS="slots-a slots-b slots-c slots-d"

evict() {   # drop the pages of every file of the topics (the restart's recovery read them in)
	python3 - "$DATA" <<'PY' || fail "evicting the page cache failed"
import glob, os, sys
n = 0
for f in glob.glob(os.path.join(sys.argv[1], "slots-*", "*")):
    if not os.path.isfile(f):
        continue
    fd = os.open(f, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    n += 1
print("evicted", n, "files")
PY
}

start_broker --cores 1 --test-reads-max 1
for t in $TOPICS; do
	guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$t" --partitions 6 --count $COUNT \
		--size 1000 --acks all >"$WORK/prod-$t.log" 2>&1 || fail "rdk_load produce $t exited $?: $(tail -n 3 "$WORK/prod-$t.log")"
done
stop_broker

from=$(($(wc -l <"$BROKER_LOG") + 1))
LD_PRELOAD=$PROBE SYNCPROBE_ARM=$ARM SYNCPROBE_OUT=$OUT start_broker --cores 1 --test-reads-max 1
log "$(evict)"
touch "$ARM"
sleep 0.2
PIDS=
for t in $TOPICS; do
	"$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic "$t" --partitions 6 --expect $COUNT \
		--timeout 120 >"$WORK/cons-$t.log" 2>&1 &
	PIDS="$PIDS $!"
done
"$PY" "$(dirname "$0")/cold_lookup.py" --port "$PORT" --topic slots-d --partitions 6 --data "$DATA" \
	>"$WORK/cold.out" 2>&1 &
LOOKUP=$!
INTEG_CHILDREN="$PIDS $LOOKUP"
for pid in $PIDS; do
	wait "$pid" || fail "a consumer exited $?: $(tail -n 3 "$WORK"/cons-*.log | tr '\n' ';')"
done
wait "$LOOKUP" || fail "lookups in cold segments: $(tail -n 5 "$WORK/cold.out" | tr '\n' ';')"
INTEG_CHILDREN=
log "$(tail -n 1 "$WORK/cold.out")"
rm -f "$ARM"
broker_alive || fail "the broker died while the consumers read"
stop_broker
if [ -s "$OUT" ]; then
	sort "$OUT" | uniq -c | sort -rn | head -n 20 >&2
	fail "$(wc -l <"$OUT") blocking call(s) on poll cores while they read (above: count, call)"
fi

run_log=$(tail -n +"$from" "$BROKER_LOG")
blocking=$(grep -Eo '[0-9]+ blocking reads on the poll core' <<<"$run_log" | awk '{ print $1 }')
[ -n "$blocking" ] || fail "no core logged its blocking reads at exit"
for n in $blocking; do
	[ "$n" -eq 0 ] || fail "a core read with blocking syscalls $n times: $(grep 'blocking reads' <<<"$run_log" | tr '\n' ';')"
done
waited=$(grep -Eo '[0-9]+ fetch and list offsets requests waited for a read slot \([0-9]+ answered' <<<"$run_log" |
	awk '{ s += $1 } END { print s + 0 }')
cold=$(grep -Eo '[0-9]+ (fetch reads missed the page cache|lookups met batch headers outside the page cache)' \
	<<<"$run_log" | awk '{ s += $1 } END { print s + 0 }')
[ "$cold" -gt 0 ] || fail "no fetch or lookup read went through io_uring after the eviction"
[ "$waited" -gt 0 ] || fail "no request waited for the one read slot: the test did not test the wait queue"
pass "4 x $COUNT records read back whole with one read slot: $cold cold reads, $waited waits, 0 blocking reads"
