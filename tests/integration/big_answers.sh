#!/usr/bin/env bash
# big_answers.sh SLUICED
#
# Coordinator answers sized by the broker's state, not by their requests (a
# JoinGroup leader's member list, a follower's SyncGroup assignment,
# DescribeGroups, ListGroups, OffsetFetch of all partitions) are made again
# in a larger call and arrive whole (big_answers.py says what each check
# compares); before, each was answered UNKNOWN_SERVER_ERROR. The members'
# connections land on every core, so the call is sent again both to a
# coordinator on another core and to one on its own (whose answer comes in
# the middle of its rebalance's work).
. "$(dirname "$0")/lib.sh"
integ_init big-answers 87 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
T=bt

# Kafka's initial rebalance delay, so that all members, joining within it, form generation 1.
SLUICE_GROUP_DELAY_MS=3000 start_broker --cores "${SLUICE_CORES:-2}"
guarded "$PY" "$(dirname "$0")/admin_client.py" create "$PORT" 1 64 $T >"$WORK/create.out" ||
	fail "CreateTopics failed: $(cat "$WORK/create.out")"
grep -q "^$T-0 0\$" "$WORK/create.out" || fail "CreateTopics of $T-0: $(cat "$WORK/create.out")"
guarded "$PY" "$(dirname "$0")/big_answers.py" --port "$PORT" --topic "$T-0" --partitions 64 \
	>"$WORK/big.out" 2>&1 || fail "big_answers.py failed: $(tail -n 3 "$WORK/big.out")"
sed 's/^/  /' "$WORK/big.out"
broker_alive || fail "broker died"
! grep -q "does not fit the largest call arena" "$BROKER_LOG" || fail "an answer was refused: $(grep -m1 'largest call' "$BROKER_LOG")"
stop_broker
pass "answers up to $(awk '/members joined/ { print $2 }' "$WORK/big.out") members' metadata and assignments, and long listings, arrived whole"
