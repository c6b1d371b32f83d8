#!/usr/bin/env bash
# cold_fetch.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# Fetches that miss the page cache: 40,000 keyed 1000-byte records in a
# 3-partition topic (acks=all, so every byte is durable and its page clean),
# then the partitions' segment files are evicted from the page cache
# (posix_fadvise DONTNEED), and a librdkafka consumer reads everything back:
# each message whole, exactly once, in order. The owner core must have read
# the evicted bytes through io_uring (its exit lines count those reads: a
# fetch's read of a range, or a lookup's read of the batch headers, which
# since the lookup reads a range's headers in, may be all there is)
# instead of blocking in pread. Then once more while a producer appends to
# another topic on the same core, so cold reads and appends interleave.
. "$(dirname "$0")/lib.sh"
integ_init cold-fetch 62 "$@"
need_exe "$RDK_LOAD"
command -v python3 >/dev/null || skip "python3 is not installed"
TOPIC=cold
COUNT=40000

evict() {   # drop the clean pages of every partition segment of $TOPIC
	python3 - "$DATA" "$TOPIC" <<'PY' || fail "evicting the page cache failed"
import glob, os, sys
n = 0
for f in glob.glob(os.path.join(sys.argv[1], sys.argv[2] + "-*", "*.log")):
    fd = os.open(f, os.O_RDONLY)
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    n += 1
print("evicted", n, "segment files")
PY
}

start_broker --cores 2
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 3 --count $COUNT \
	--size 1000 --acks all >"$WORK/prod1.log" 2>&1 || fail "rdk_load produce exited $?: $(tail -n 3 "$WORK/prod1.log")"
log "$(evict)"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 3 --expect $COUNT \
	--timeout 120 >"$WORK/cons1.log" 2>&1 || fail "consume after eviction: $(tail -n 5 "$WORK/cons1.log" | tr '\n' ';')"

# Cold reads while appends go on: the topic is read again from evicted pages while a
# producer appends to another topic whose partitions live on the same (only) data core.
log "$(evict)"
"$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic cold-busy --partitions 3 --count $COUNT --size 1000 \
	--acks all >"$WORK/prod2.log" 2>&1 &
PP=$!
INTEG_CHILDREN="$PP"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 3 --expect $COUNT \
	--timeout 120 >"$WORK/cons2.log" 2>&1 || fail "consume during appends: $(tail -n 5 "$WORK/cons2.log" | tr '\n' ';')"
wait "$PP" || fail "the producer exited $?: $(tail -n 3 "$WORK/prod2.log")"
INTEG_CHILDREN=
stop_broker
cold=$(grep -Eo '[0-9]+ (fetch reads missed the page cache|lookups met batch headers outside the page cache)' \
	"$BROKER_LOG" | awk '{ s += $1 } END { print s + 0 }')
[ "$cold" -gt 0 ] || fail "no fetch or lookup read went through io_uring after the eviction"
pass "$COUNT records read back whole after their pages were evicted; $cold cold reads through io_uring"
