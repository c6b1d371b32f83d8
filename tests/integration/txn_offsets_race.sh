#!/usr/bin/env bash
# txn_offsets_race.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXOFFS
#
# KIP-447's promise to a consumer that takes partitions over from a
# transactional copier: an OffsetFetch with RequireStable never answers an
# offset older than one a transaction has staged and may still commit; it
# answers UNSTABLE_OFFSET_COMMIT (librdkafka retries) until the transaction's
# offsets are applied, and then the new ones. The broker runs with
# --fault-offsets-delay-ms, so it learns of every durable transactional-offset
# write (TxnOffsetCommit's staged record, a commit's records) seconds late,
# which holds open the two windows issue 10 item 2 fell into:
#  (a) a TxnOffsetCommit written but not yet acted on: the staged offset must
#      already count as pending (the old code recorded it only once durable);
#  (b) a commit's offsets being written: the staged offset must stay pending
#      until the committed one replaces it (the old code dropped it when the
#      writes were queued and added the committed one when durable, so in
#      between the previous transaction's offset was answered as stable).
# rdk_txoffs copies 10 records per transaction: (a) two transactions, then
# (b) one more; each RequireStable OffsetFetch (rdk_txoffs committed) is sent
# inside a window (the broker's log says when one opens) and must get at
# least the offset staged before it was sent.
. "$(dirname "$0")/lib.sh"
integ_init txn-offsets-race 71 "$@"
need_exe "$RDK_LOAD"
RDK_TXOFFS=$(abs_path "${4:-}")
need_exe "$RDK_TXOFFS"
IN=txr-in
OUT=txr-out
G=txr-g
DELAY_MS=5000
WAIT_S=120

# committed_at_least N WHAT: the group's committed offset (waited out past
# UNSTABLE_OFFSET_COMMIT) is at least N.
committed_at_least() {
	guarded "$RDK_TXOFFS" committed --bootstrap "$BOOTSTRAP" --in "$IN" --group "$G" >"$WORK/c.out" 2>"$WORK/c.err" ||
		fail "$2: committed exited $?: $(tail -n 3 "$WORK/c.err" | tr '\n' ';')"
	local got
	got=$(sed -n 's/^committed //p' "$WORK/c.out")
	[ -n "$got" ] && ((got >= $1)) || fail "$2: a RequireStable OffsetFetch answered $got, older than the staged $1"
	log "$2: committed $got (staged $1)"
}

# wait_log PATTERN N: the broker has logged PATTERN at least N times.
wait_log() {
	local deadline=$((SECONDS + WAIT_S))
	until (($(grep -c -- "$1" "$BROKER_LOG") >= $2)); do
		broker_alive || fail "broker died"
		[ -z "$RUN_DONE" ] && ! kill -0 "$RUN" 2>/dev/null && run_reap
		((SECONDS < deadline)) || fail "the broker did not log '$1' $2 times in ${WAIT_S}s"
		sleep 0.05
	done
}

start_broker --cores "${SLUICE_CORES:-2}" --fault-offsets-delay-ms $DELAY_MS
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$IN" --partitions 1 --count 100 \
	--size 20 --acks all >"$WORK/prod.log" 2>&1 || fail "rdk_load produce exited $?"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$OUT" --partitions 1 --count 1 \
	--size 20 --acks all >"$WORK/prod2.log" 2>&1 || fail "rdk_load produce (out) exited $?"

# run_bg NAME PLAN: rdk_txoffs in the background, its pid in RUN.
run_bg() {
	"$RDK_TXOFFS" run --bootstrap "$BOOTSTRAP" --in "$IN" --out "$OUT" --group "$G" --txn-id txr \
		--per 10 --plan "$2" >"$WORK/$1.out" 2>"$WORK/$1.err" &
	RUN=$! RUN_NAME=$1 RUN_DONE=
	INTEG_CHILDREN="$RUN"
}

run_reap() {   # the run has ended (or is waited for): it must have exited 0
	wait "$RUN" || fail "$RUN_NAME exited $?: $(grep -v '^%7' "$WORK/$RUN_NAME.err" | tail -n 5 | tr '\n' ';')"
	RUN_DONE=1
	INTEG_CHILDREN=
}

run_wait() {   # LAST_STEP_LINE: the run must exit 0 having printed it
	[ -n "$RUN_DONE" ] || run_reap
	log "$RUN_NAME: $(tr '\n' ';' <"$WORK/$RUN_NAME.out")"
	grep -qx "$1" "$WORK/$RUN_NAME.out" || fail "$RUN_NAME did not print '$1': $(cat "$WORK/$RUN_NAME.out")"
}

# (a) Two transactions; the second one's TxnOffsetCommit (offset 20) is
# durable, the broker not yet told: the first one's 10 is no answer any more.
run_bg r1 commit,commit
wait_log "acting on a staged-offset write" 2
committed_at_least 20 "(a) during the second TxnOffsetCommit's write"
run_wait "step 1 commit 20"

# (b) One more transaction, alone (offset 30): once its commit's first
# record is durable, the broker not yet told, the 20 is no answer any more.
# One staged offset per commit, two records each (the committed offset, the
# staged one's tombstone).
ends=$(grep -c "acting on a transaction-end write" "$BROKER_LOG")
run_bg r2 commit
wait_log "acting on a transaction-end write" $((ends + 1))
committed_at_least 30 "(b) while the commit's offsets are written"
run_wait "step 0 commit 30"
committed_at_least 30 "after the runs"
stop_broker
pass "RequireStable OffsetFetch never answered an offset older than a staged one"
