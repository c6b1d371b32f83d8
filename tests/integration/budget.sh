#!/usr/bin/env bash
# budget.sh SLUICED RDK_LOAD SLUICE_DUMP
#
# The memory budget (dataplane/loop/budget.c, and each role's budget hook): `sluiced --print-budget` prints one
# line per user and a total; the items must add up to the total, the total
# must follow the flags (a smaller --max-frame-bytes, fewer cores: less), the
# broker must log the same total at start-up, and after a load (librdkafka
# produce and consume, 200,000 messages over 6 partitions at --cores 3) its
# peak resident memory (VmHWM) must stay under the total. The broker before
# the budget has no --print-budget: this fails there.
# Per-partition state is an item too ("partitions": as many as the file
# descriptors allow, each its fixed state and its active segment's full
# index): 1,000 more partitions (one CreateTopics of 2 topics of 500: no
# traffic, so that the idle buffer pool, an item of its own, stays put) must
# grow the broker's resident memory by at most that item's per-partition
# bytes each, and fit in its count (before issue 11's item: no such line).
# The read slots with the warm-read sink are an item per data core.
. "$(dirname "$0")/lib.sh"
integ_init budget 64 "$@"
need_exe "$RDK_LOAD"
PY=$(command -v python3) || skip "python3 is not installed"
ADMIN=$(abs_path "$(dirname "$0")/admin_client.py")

# --data as the broker's below: a partition's item counts its directory's name.
"$SLUICED" --print-budget --cores 3 --data "$DATA" >"$WORK/budget3.txt" 2>&1 || fail "--print-budget exited $?: $(head -n 3 "$WORK/budget3.txt")"
"$SLUICED" --print-budget --cores 2 --max-frame-bytes 1048576 >"$WORK/budget2.txt" 2>&1 ||
	fail "--print-budget exited $?"
cat >"$WORK/sum.py" <<'PY'
import re, sys
items, total = [], None
for line in open(sys.argv[1]):
    m = re.match(r'^  (\S.*?)\s+(\d+) B  ', line)
    if not m:
        continue
    if m.group(1) == 'total':
        total = int(m.group(2))
    else:
        items.append((m.group(1), int(m.group(2))))
if total is None or len(items) < 5:
    sys.exit('no total, or fewer than 5 items: %r' % items)
if sum(b for _, b in items) != total:
    sys.exit('items add up to %d, the total says %d' % (sum(b for _, b in items), total))
print(total)
PY
total3=$("$PY" "$WORK/sum.py" "$WORK/budget3.txt") || fail "--cores 3: $total3"
total2=$("$PY" "$WORK/sum.py" "$WORK/budget2.txt") || fail "--cores 2: $total2"
[ "$total2" -lt "$total3" ] || fail "fewer cores and a smaller frame limit did not lower the budget: $total2 >= $total3"
log "budget: --cores 3 $total3 B, --cores 2 --max-frame-bytes 1 MiB $total2 B"
# Issue 11: the partitions item is bounded by --partitions-max (default 4,096), not only by the
# file descriptors: under a hard RLIMIT_NOFILE of 1,048,576 it was ~260,000 partitions (~137 GiB).
# And the producer/txn state pool follows --txn-state-mib, per data core.
parts_of() { sed -n 's/^  partitions  *[0-9]* B  \([0-9]*\) x .*/\1/p' "$1"; }
pool_of() { sed -n 's/^  producer\/txn state  *\([0-9]*\) B  .*/\1/p' "$1"; }
(ulimit -Hn 1048576 2>/dev/null; ulimit -Sn 1048576 2>/dev/null
 "$SLUICED" --print-budget --cores 3 >"$WORK/budget-nofile.txt" 2>&1
 "$SLUICED" --print-budget --cores 3 --partitions-max 100 --txn-state-mib 8 >"$WORK/budget-small.txt" 2>&1) ||
	fail "--print-budget with --partitions-max / --txn-state-mib exited $?: $(head -n 3 "$WORK/budget-small.txt")"
p_big=$(parts_of "$WORK/budget-nofile.txt") p_small=$(parts_of "$WORK/budget-small.txt")
[ -n "$p_big" ] && [ "$p_big" -le 4096 ] || fail "partitions item without --partitions-max: '$p_big' (want <= 4096)"
[ "$p_small" = 100 ] || fail "--partitions-max 100: the partitions item counts '$p_small'"
pool=$(pool_of "$WORK/budget-small.txt")
# --cores 3 below DP_CONTROL_OWN_CORES_MIN: the control role shares core 0, three data cores.
ndata=$(sed -n 's/^sluiced memory budget for --cores [0-9]* (\([0-9]*\) data core.*/\1/p' "$WORK/budget-small.txt")
[ "$ndata" = 3 ] || fail "--cores 3: want 3 data cores (control beside data on core 0), the budget has '$ndata'"
[ "$pool" = $((ndata * ((8 << 20) + (8 << 20) / 64))) ] || fail "--txn-state-mib 8: the pool item is '$pool' B"
"$PY" "$WORK/sum.py" "$WORK/budget-small.txt" >/dev/null || fail "--partitions-max 100: items do not add up"
log "partitions item: $p_big at the default limit (hard RLIMIT_NOFILE raised if allowed), 100 with --partitions-max 100"
# The shard's read slots and warm-read sink are made at start-up on each data core, an item of
# their own (before: allocated on a core's first cold read, in no item).
read -r _ rcount _ reach _ <<<"$(sed -n 's/^  read slots  *[0-9]* B  \([0-9]*\) x \([0-9]*\) B: .*/x \1 x \2 x/p' "$WORK/budget3.txt")"
[ "$rcount" = "$ndata" ] && ((reach > 256 * 1024)) ||
	fail "no read-slots item for the $ndata data cores, each with the 256 KiB warm-read sink: '$rcount' x '$reach' B"

start_broker --cores 3
logged=$(sed -n 's/.*memory budget \([0-9]*\) MiB for these flags.*/\1/p' "$BROKER_LOG" | tail -n 1)
[ "$logged" = "$((total3 >> 20))" ] || fail "start-up logged a budget of '$logged' MiB, --print-budget says $((total3 >> 20))"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic budget --partitions 6 \
	--count 200000 --size 100 --acks all || fail "rdk_load produce exited $?"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic budget --partitions 6 \
	--expect 200000 --timeout 240 || fail "rdk_load consume exited $?"
read -r _ pcount _ pbytes _ <<<"$(sed -n 's/^  partitions  *[0-9]* B  \([0-9]*\) x \([0-9]*\) B: .*/x \1 x \2 x/p' "$WORK/budget3.txt")"
[ -n "$pbytes" ] && ((pbytes > 0)) || fail "no per-partition item in the budget: $(grep -c . "$WORK/budget3.txt") lines"
# 2 x 500, or what the descriptors leave room for beside the 6 above
per_topic=$(((pcount - 6) / 2 < 500 ? (pcount - 6) / 2 : 500))
((per_topic >= 100)) || fail "the budget holds only $pcount partitions"
nparts=$((2 * per_topic))
rss0=$(awk '/^VmRSS:/ {print $2}' "/proc/$BROKER_PID/status")
guarded "$PY" "$ADMIN" create "$PORT" 2 $per_topic many >"$WORK/create.out" 2>&1 ||
	fail "CreateTopics of 2 x $per_topic partitions failed: $(tail -n 2 "$WORK/create.out")"
[ "$(grep -c ' 0$' "$WORK/create.out")" = 2 ] || fail "CreateTopics: $(cat "$WORK/create.out")"
rss1=$(awk '/^VmRSS:/ {print $2}' "/proc/$BROKER_PID/status")
per=$(((rss1 - rss0) * 1024 / nparts))
log "$nparts partitions: resident memory grew by $(((rss1 - rss0) / 1024)) MiB, $per B each (the budget: $pbytes B each, $pcount partitions)"
((per <= pbytes)) || fail "a partition took $per B resident, more than the budget's $pbytes B"
hwm_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$BROKER_PID/status")
[ -n "$hwm_kb" ] || fail "no VmHWM for the broker"
stop_broker
[ $((hwm_kb * 1024)) -lt "$total3" ] || fail "peak resident ${hwm_kb} KiB is over the budget of $total3 B"
pass "items add up to the total ($total3 B at --cores 3); peak resident $hwm_kb KiB after 200,000 messages"
