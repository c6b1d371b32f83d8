#!/usr/bin/env bash
# disk_full.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# A partition that ran out of disk comes back once space is freed (issue 10,
# item 12). The broker's data directory is a small tmpfs mounted for the test
# (as root; exit 77 where mounting is not allowed), filled up to 2 MiB with a
# filler file. A producer then writes more than fits (the partition's preallocated reserve
# included): its appends fail with
# KAFKA_STORAGE_ERROR and the partition goes offline, which the broker logs
# once, not once per failed append. The filler is removed; without a restart
# the partition must be reopened by the broker's own retries and take appends
# again, and every record acknowledged before or after is read back whole.
. "$(dirname "$0")/lib.sh"

integ_init disk-full 49 "$@"
need_exe "$RDK_LOAD"
SMALL=$WORK/small
mkdir -p "$SMALL"
mount -t tmpfs -o size=24m tmpfs "$SMALL" 2>/dev/null || skip "cannot mount a tmpfs (needs root)"

disk_cleanup() {
	local rc=$1
	if [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2>/dev/null; then
		kill -KILL "$BROKER_PID" 2>/dev/null
		wait "$BROKER_PID" 2>/dev/null
	fi
	BROKER_PID=
	umount "$SMALL" 2>/dev/null || umount -l "$SMALL"
	(exit "$rc")
	integ_cleanup
}
trap 'disk_cleanup $?' EXIT

DATA=$SMALL/data
mkdir -p "$DATA"
start_broker --cores "${SLUICE_CORES:-2}"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic full --partitions 1 --count 100 --size 1000 \
	--acks all --acked-file "$WORK/acked0" || fail "first produce"

avail=$(df --output=avail -B1 "$SMALL" | tail -n 1)
fill_mb=$((avail / 1048576 - 2))
[ "$fill_mb" -gt 0 ] || fail "the tmpfs is already full ($avail bytes free)"
dd if=/dev/zero of="$SMALL/filler" bs=1M count="$fill_mb" status=none 2>/dev/null
log "filled: $(df --output=avail -B1 "$SMALL" | tail -n 1) bytes left"

# 20 MB into 2 MiB and what the partition reserved before the filler came (its active segment's
# preallocation, --prealloc-bytes: 8 MiB): the reserve takes appends while the disk is full, then
# its next fallocate fails (logged once) and the writes after it; most of it is refused, and
# librdkafka retries until its message timeout.
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic full --partitions 1 --count 20000 --size 1000 \
	--acks all --allow-failures --timeout-ms 8000 --acked-file "$WORK/acked1" --no-create >"$WORK/full.log" 2>&1 ||
	fail "produce into a full disk: $(tail -n 3 "$WORK/full.log")"
tail -n 1 "$WORK/full.log" >&2
grep -q "failed 0 " "$WORK/full.log" && fail "nothing failed: the disk did not fill"
broker_alive || fail "the broker died on a full disk"
grep -q "is offline" "$BROKER_LOG" || fail "no log line said the partition went offline"
lines=$(grep -Ec "append.*failed|failed.*append|is offline" "$BROKER_LOG")
log "failure lines in the broker log: $lines"
[ "$lines" -le 6 ] || fail "$lines lines about failed appends: should be logged once, not per append"

rm -f "$SMALL/filler"
log "space freed: $(df --output=avail -B1 "$SMALL" | tail -n 1) bytes"
# Back without a restart: the broker's retry (1 s, backing off) reopens the partition.
deadline=$((SECONDS + 120))
back=0
while ((SECONDS < deadline)); do
	if "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic full --partitions 1 --count 1000 --size 1000 \
		--acks all --timeout-ms 10000 --acked-file "$WORK/acked2" --no-create >"$WORK/back.log" 2>&1; then
		back=1
		break
	fi
	broker_alive || fail "the broker died"
	sleep 2
done
[ "$back" = 1 ] || fail "the partition did not come back after space was freed: $(tail -n 2 "$WORK/back.log")"
grep -q "back online" "$BROKER_LOG" || fail "no log line said the partition is back"
cat "$WORK/acked0" "$WORK/acked1" "$WORK/acked2" >"$WORK/acked"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic full --partitions 1 --acked-file "$WORK/acked" \
	--timeout 120 || fail "acknowledged records missing or damaged after the partition came back"
stop_broker
pass "offline on a full disk (logged once), back online after space was freed, nothing acknowledged lost"
