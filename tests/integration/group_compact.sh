#!/usr/bin/env bash
# group_compact.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_GROUP
#
# The committed-offsets log only grows (one record per commit) until it is
# compacted: with a tiny --transaction-log-compact-records, a consumer that
# commits after each of 600 messages on 6 partitions forces several
# compactions. Old segments must go, and after a SIGKILL and a restart every
# committed offset must still be there: a new consumer in the same group
# reads exactly the records produced after the first consumer stopped.
. "$(dirname "$0")/lib.sh"
integ_init group-compact 44 "$@"
need_exe "$RDK_LOAD"
RDK_GROUP=$(abs_path "${4:-}")
need_exe "$RDK_GROUP"
TOPIC=gc
GROUP=gc1

# expected HW_FILE [FROM_FILE]: "partition offset" lines, offsets in [from, hw).
expected() {
	if [ $# -eq 2 ]; then
		join "$2" "$1" | awk '{ for (o = $2; o < $3; o++) print $1, o }'
	else
		awk '{ for (o = 0; o < $2; o++) print $1, o }' "$1"
	fi | sort
}

same_set() {
	local dups
	dups=$(sort "$1" | uniq -d | head -n 5 | tr '\n' ';')
	[ -z "$dups" ] || fail "$3: offsets processed twice: $dups"
	sort "$1" | cmp -s - "$2" || fail "$3: $(sort "$1" | comm -23 - "$2" | wc -l) unexpected, \
$(sort "$1" | comm -13 - "$2" | wc -l) missing"
}

start_broker --cores "${SLUICE_CORES:-2}" --transaction-log-compact-records 10
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 --count 600 \
	--size 50 --acks all >"$WORK/prod1.log" 2>&1 || fail "rdk_load produce exited $?"
guarded "$RDK_GROUP" watermarks --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 >"$WORK/hw1" ||
	fail "watermarks exited $?"
expected "$WORK/hw1" >"$WORK/exp1"
: >"$WORK/A.out"
guarded "$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group "$GROUP" --partitions 6 \
	--out "$WORK/A.out" --until 600 --timeout 60 >"$WORK/A.log" 2>&1 ||
	fail "consumer A exited $?: $(tail -n 5 "$WORK/A.log" | tr '\n' ';')"
same_set "$WORK/A.out" "$WORK/exp1" "A"
sleep 0.5   # compaction runs on the group coordinator's 100 ms timer
n=$(grep -c "offsets log: compaction done" "$BROKER_LOG" || true)
[ "$n" -ge 1 ] || fail "no compaction of __consumer_offsets happened"
segs=$(ls "$DATA/__consumer_offsets"/*.log | wc -l)
[ "$segs" -le 3 ] || fail "$segs segment files left in __consumer_offsets after $n compactions"
log "$n compaction(s); $segs segment file(s) left in __consumer_offsets"

kill9_broker
start_broker --cores "${SLUICE_CORES:-2}" --transaction-log-compact-records 10
grep -q 'group coordinator: 6 committed offsets loaded' "$BROKER_LOG" ||
	fail "want 6 committed offsets after the restart: $(grep 'group coordinator' "$BROKER_LOG")"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 --count 60 \
	--size 50 --acks all >"$WORK/prod2.log" 2>&1 || fail "rdk_load produce (2) exited $?"
guarded "$RDK_GROUP" watermarks --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 >"$WORK/hw2" ||
	fail "watermarks exited $?"
sort "$WORK/hw1" >"$WORK/hw1.s"
sort "$WORK/hw2" >"$WORK/hw2.s"
expected "$WORK/hw2.s" "$WORK/hw1.s" >"$WORK/exp2"
: >"$WORK/C.out"
guarded "$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group "$GROUP" --partitions 6 \
	--out "$WORK/C.out" --until 60 --timeout 40 >"$WORK/C.log" 2>&1 ||
	fail "consumer C exited $?: $(tail -n 5 "$WORK/C.log" | tr '\n' ';')"
sleep 1
same_set "$WORK/C.out" "$WORK/exp2" "C after the restart"
stop_broker
pass "$n compaction(s) of __consumer_offsets; C resumed after SIGKILL with exactly the 60 new"
