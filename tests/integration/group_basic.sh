#!/usr/bin/env bash
# group_basic.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_GROUP
#
# librdkafka group consumers (subscribe(), rd_kafka_commit_message after each
# message) against the group coordinator, on a 6-partition topic:
#  (a) consumers A and B in one group split the partitions (both consume);
#      A then closes (LeaveGroup) and B takes over A's partitions from their
#      committed offsets: every offset is processed and committed exactly
#      once across A and B, none is missing;
#  (b) the broker is SIGKILLed and restarted; more records are produced; a
#      new consumer C in the same group reads exactly the new records, so the
#      committed offsets survived the crash.
. "$(dirname "$0")/lib.sh"
integ_init group-basic 40 "$@"
need_exe "$RDK_LOAD"
RDK_GROUP=$(abs_path "${4:-}")
need_exe "$RDK_GROUP"
TOPIC=grp
GROUP=g1

# expected HW_FILE [FROM_FILE]: "partition offset" lines, offsets in [from, hw).
expected() {
	if [ $# -eq 2 ]; then
		join "$2" "$1" | awk '{ for (o = $2; o < $3; o++) print $1, o }'
	else
		awk '{ for (o = 0; o < $2; o++) print $1, o }' "$1"
	fi | sort
}

# same_set GOT EXPECT NAME: GOT has every line of EXPECT exactly once, and nothing else.
same_set() {
	local dups
	dups=$(sort "$1" | uniq -d | head -n 5 | tr '\n' ';')
	[ -z "$dups" ] || fail "$3: offsets processed twice: $dups"
	sort "$1" | cmp -s - "$2" || fail "$3: $(sort "$1" | comm -23 - "$2" | wc -l) unexpected, \
$(sort "$1" | comm -13 - "$2" | wc -l) missing (e.g. $(sort "$1" | comm -13 - "$2" | head -n 3 | tr '\n' ';'))"
}

start_broker --cores "${SLUICE_CORES:-3}"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 --count 600 \
	--size 50 --acks all >"$WORK/prod1.log" 2>&1 || fail "rdk_load produce exited $?"
guarded "$RDK_GROUP" watermarks --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 >"$WORK/hw1" ||
	fail "watermarks exited $?"
expected "$WORK/hw1" >"$WORK/exp1"
[ "$(wc -l <"$WORK/exp1")" -eq 600 ] || fail "want 600 records, the topic has $(wc -l <"$WORK/exp1")"

# (a) two consumers, then one leaves.
: >"$WORK/A.out"
: >"$WORK/B.out"
"$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group "$GROUP" --partitions 6 \
	--out "$WORK/A.out" --peer "$WORK/B.out" --stop-shared 40 --delay-ms 10 --timeout 40 \
	>"$WORK/A.log" 2>&1 &
PA=$!
"$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group "$GROUP" --partitions 6 \
	--out "$WORK/B.out" --peer "$WORK/A.out" --until 600 --delay-ms 10 --timeout 50 \
	>"$WORK/B.log" 2>&1 &
PB=$!
INTEG_CHILDREN="$PA $PB"
wait "$PA" || fail "consumer A exited $?: $(tail -n 5 "$WORK/A.log" | tr '\n' ';')"
wait "$PB" || fail "consumer B exited $?: $(tail -n 5 "$WORK/B.log" | tr '\n' ';')"
broker_alive || fail "broker died during (a)"
na=$(wc -l <"$WORK/A.out")
nb=$(wc -l <"$WORK/B.out")
log "(a) A processed $na, B $nb; B: $(grep -c '^assigned' "$WORK/B.log") assignments, last: $(grep '^assigned' "$WORK/B.log" | tail -n 1)"
[ "$na" -gt 0 ] && [ "$nb" -gt 0 ] || fail "both consumers should have consumed (A $na, B $nb)"
grep -q '^assigned 3 partitions' "$WORK/A.log" || fail "A never shared the topic: $(grep '^assigned' "$WORK/A.log" | tr '\n' ';')"
grep -q '^assigned 6 partitions' "$WORK/B.log" || fail "B never took over all partitions"
cat "$WORK/A.out" "$WORK/B.out" >"$WORK/AB.out"
same_set "$WORK/AB.out" "$WORK/exp1" "(a) A+B"

# (b) crash, more records, a new consumer resumes from the committed offsets.
kill9_broker
start_broker --cores "${SLUICE_CORES:-3}"
grep -q 'group coordinator: [1-9][0-9]* committed offsets loaded' "$BROKER_LOG" ||
	fail "no committed offsets loaded after the restart"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 --count 60 \
	--size 50 --acks all >"$WORK/prod2.log" 2>&1 || fail "rdk_load produce (2) exited $?"
guarded "$RDK_GROUP" watermarks --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 >"$WORK/hw2" ||
	fail "watermarks exited $?"
sort "$WORK/hw1" >"$WORK/hw1.s"
sort "$WORK/hw2" >"$WORK/hw2.s"
expected "$WORK/hw2.s" "$WORK/hw1.s" >"$WORK/exp2"
[ "$(wc -l <"$WORK/exp2")" -eq 60 ] || fail "want 60 new records, got $(wc -l <"$WORK/exp2")"
: >"$WORK/C.out"
guarded "$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group "$GROUP" --partitions 6 \
	--out "$WORK/C.out" --until 60 --timeout 40 >"$WORK/C.log" 2>&1 ||
	fail "consumer C exited $?: $(tail -n 5 "$WORK/C.log" | tr '\n' ';')"
# Anything re-read from before the crash would show up here within a short wait.
sleep 1
same_set "$WORK/C.out" "$WORK/exp2" "(b) C after the restart"
stop_broker
pass "A+B read 600 exactly once across a rebalance; C resumed after SIGKILL with exactly the 60 new"
