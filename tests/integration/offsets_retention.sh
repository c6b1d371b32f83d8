#!/usr/bin/env bash
# offsets_retention.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_GROUP SLUICE_ADMIN
#
# Offset retention (--offsets-retention-ms, Kafka's offsets.retention.ms),
# with a 3 s retention: offsets of a group that only made simple commits, and
# of a consumer group whose members all left, are gone once the retention
# passed (OffsetFetch: none; the lag unknown), and stay gone after a restart
# (tombstones in __consumer_offsets); a group with a live member keeps its
# offsets however old its last commit is.
. "$(dirname "$0")/lib.sh"
integ_init offsets-retention 65 "$@"
need_exe "$RDK_LOAD"
RDK_GROUP=$(abs_path "${4:-}")
ADMIN=$(abs_path "${5:-}")
need_exe "$RDK_GROUP"
need_exe "$ADMIN"
TOPIC=oret
RET_MS=3000

described() {   # GROUP OUT: sluice-admin group into $WORK/OUT
	guarded "$ADMIN" --bootstrap "$BOOTSTRAP" group "$1" >"$WORK/$2" 2>&1 || fail "sluice-admin group $1: $(cat "$WORK/$2")"
}
committed_count() { grep -c "^offset $TOPIC [0-9]* committed=[0-9]" "$WORK/$1"; }

start_broker --cores "${SLUICE_CORES:-2}" --offsets-retention-ms $RET_MS
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 2 --count 200 \
	--size 50 --acks all >"$WORK/prod.log" 2>&1 || fail "rdk_load produce exited $?"
# Simple commits (no member ever).
guarded "$RDK_GROUP" commit --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group oret-simple --partitions 2 \
	--offset 5 >"$WORK/simple.log" 2>&1 || fail "simple commit: $(cat "$WORK/simple.log")"
# A consumer group that reads everything and leaves.
guarded "$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group oret-left --partitions 2 \
	--out "$WORK/left.out" --until 200 --timeout 30 >"$WORK/left.log" 2>&1 || fail "consumer exited $?: $(tail -n 3 "$WORK/left.log")"
# A consumer that stays: it reads everything, then idles in the group (its commits get old).
: >"$WORK/stay.out"
"$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group oret-stay --partitions 2 \
	--out "$WORK/stay.out" --until 100000 --timeout 60 >"$WORK/stay.log" 2>&1 &
PS=$!
INTEG_CHILDREN="$PS"
deadline=$((SECONDS + 30))
until [ "$(wc -l <"$WORK/stay.out")" -ge 200 ]; do
	((SECONDS < deadline)) || fail "the staying consumer read $(wc -l <"$WORK/stay.out") of 200"
	sleep 0.1
done
for g in oret-simple oret-left oret-stay; do
	described $g before-$g
	[ "$(committed_count before-$g)" -eq 2 ] || fail "$g before: $(tr '\n' ';' <"$WORK/before-$g")"
done
log "all three groups have committed offsets; waiting out the retention"
sleep $((RET_MS / 1000 * 2 + 2))
for g in oret-simple oret-left; do
	described $g after-$g
	[ "$(committed_count after-$g)" -eq 0 ] || fail "$g kept its offsets past the retention: $(tr '\n' ';' <"$WORK/after-$g")"
done
described oret-stay after-stay
[ "$(committed_count after-stay)" -eq 2 ] || fail "the live group lost its offsets: $(tr '\n' ';' <"$WORK/after-stay")"
grep -q "committed offset(s) expired" "$BROKER_LOG" || fail "no expiry logged"
kill9_broker
start_broker --cores "${SLUICE_CORES:-2}" --offsets-retention-ms $RET_MS
for g in oret-simple oret-left; do
	described $g restart-$g
	[ "$(committed_count restart-$g)" -eq 0 ] || fail "$g's offsets came back after a restart: $(tr '\n' ';' <"$WORK/restart-$g")"
done
kill -KILL "$PS" 2>/dev/null
wait "$PS" 2>/dev/null
INTEG_CHILDREN=
stop_broker
pass "offsets of memberless groups expired after ${RET_MS} ms (also across a restart); a live group's stayed"
