#!/usr/bin/env bash
# nonblock.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN SYNCPROBE
#
# Nothing on a poll core waits for the disk: with a 20 ms producer-state
# snapshot interval, an idempotent producer and transactional producers that
# abort a third of their transactions (aborted-index appends and syncs), new
# producer ids (id blocks) and small segments (rolls), and Fetch and
# ListOffsets lookups in segments dropped from the page cache
# (cold_lookup.py), sluiced runs under syncprobe.so, which records each
# fsync, fdatasync, rename, pwrite, blocking pread or regular-file write its
# core threads make while armed. Topics are created
# and the broker started before the window opens, and it closes before the
# clean shutdown (both may wait). The window must record nothing, and the
# partitions must hold snapshots written meanwhile (newer than the window's
# start): the work was done, through io_uring.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init nonblock 77 "$@"
PROBE=$(abs_path "${5:-}")
[ -f "$PROBE" ] || fail "no syncprobe library at '$PROBE'"
ARM=$WORK/probe.arm
OUT=$WORK/probe.out
PARTS=4

LD_PRELOAD=$PROBE SYNCPROBE_ARM=$ARM SYNCPROBE_OUT=$OUT \
	start_broker --cores 3 --producer-snapshot-ms 20 --segment-bytes 262144
# Topics first (creation makes directories durable synchronously, on purpose).
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic nb --partitions $PARTS --count 10 --size 100 \
	--acks all --idempotent >"$WORK/warm.out" 2>&1 || fail "warm-up produce failed: $(tail -n 3 "$WORK/warm.out")"
txn_run warm-txn "$RDK_TXN" random --bootstrap "$BOOTSTRAP" --txn-id nb-warm --topics nbt --partitions $PARTS \
	--txns 2 --seed 1 --tag warm --create || fail "warm-up transactions failed: $(txn_show warm-txn)"

touch "$ARM"
sleep 0.2
mark=$WORK/window.start
touch "$mark"
log "window open: idempotent and transactional load, snapshots every 20 ms"
"$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic nb --partitions $PARTS --count 60000 --size 200 \
	--acks all --idempotent --no-create >"$WORK/prod.out" 2>"$WORK/prod.err" &
prod=$!
INTEG_CHILDREN=$prod
for k in 1 2 3; do
	txn_run txn-$k "$RDK_TXN" random --bootstrap "$BOOTSTRAP" --txn-id nb-$k --topics nbt --partitions $PARTS \
		--txns 40 --seed $k --tag t$k --abort-pct 33 || fail "transactions $k failed: $(txn_show txn-$k)"
done
wait "$prod" || fail "idempotent producer failed: $(tail -n 3 "$WORK/prod.err")"
INTEG_CHILDREN=
# Lookups in segments dropped from the page cache: Fetch by offset and ListOffsets by time read
# batch headers; from a poll core they must come through the ring (nothing counted below).
PY=$(command -v python3) || fail "python3 is not installed"
guarded "$PY" "$(dirname "$0")/cold_lookup.py" --port "$PORT" --topic nb --partitions $PARTS --data "$DATA" \
	>"$WORK/cold.out" 2>&1 || fail "lookups in cold segments: $(tail -n 5 "$WORK/cold.out")"
log "$(tail -n 1 "$WORK/cold.out")"
sleep 0.3   # a few more snapshot intervals after the last append
rm -f "$ARM"
log "window closed"

newer=0
for d in "$DATA"/nb-* "$DATA"/nbt-*; do
	for f in "$d"/*.snapshot; do
		[ -e "$f" ] && [ "$f" -nt "$mark" ] && newer=$((newer + 1))
	done
done
((newer >= 2 * PARTS)) || fail "only $newer snapshot(s) written in the window (want one per partition at least)"
stop_broker
if [ -s "$OUT" ]; then
	sort "$OUT" | uniq -c | sort -rn | head -n 20 >&2
	fail "$(wc -l <"$OUT") blocking call(s) on poll cores during the load (above: count, call)"
fi
warm=$(grep -Eo '[0-9]+ lookups met batch headers outside the page cache' "$BROKER_LOG" | awk '{ s += $1 } END { print s + 0 }')
[ "$warm" -gt 0 ] || fail "no lookup read its headers through io_uring after the eviction"
pass "no blocking call on a poll core; $newer snapshots written in the window; $warm lookups read headers through io_uring"
