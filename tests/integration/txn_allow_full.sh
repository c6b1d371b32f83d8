#!/usr/bin/env bash
# txn_allow_full.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# The owner's transaction grants (issue 11): a data core records which
# producers the coordinator added to a transaction on each partition in a
# fixed pool, sized at start-up (DP_TXN_ALLOWS_MAX; here one, with the
# test-only --test-txn-allows-max 1). Before, the list grew by realloc on the
# poll core, without bound.
#
# 1. Id a adds ta/0 (the one grant). Id b's AddPartitionsToTxn must be
#    answered COORDINATOR_NOT_AVAILABLE (15, retriable), not granted, and the
#    broker says why.
# 2. a aborts; its marker gives the grant back, and b's retry is granted.
# 3. A librdkafka producer whose transactions start while b holds the grant
#    retries until b aborts, then commits: read_committed sees exactly its
#    records. Its batches are taken only with a grant, so this also shows the
#    retry told the owner.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-allow-full 79 "$@"
command -v python3 >/dev/null || skip "python3 not installed"
TXN_IDS=$(abs_path "$(dirname "$0")/txn_ids.py")
OUT=$WORK/produced.txt
T=ta
WAIT_S=60

tids() { python3 "$TXN_IDS" "$1" --port "$PORT" "${@:2}" 2>>"$WORK/txn_ids.err"; }
# pid_of ID: "PID EPOCH" from an InitProducerId.
pid_of() {
	local out err pid epoch
	out=$(tids ids "$1") || fail "txn_ids ids $1 failed: $(tail -n 2 "$WORK/txn_ids.err")"
	read -r _ err pid epoch <<<"$out"
	[ "$err" = 0 ] || fail "InitProducerId of $1 answered $err"
	echo "$pid $epoch"
}
# until_added ID PID EPOCH: AddPartitionsToTxn of ta/0 again until granted.
until_added() {
	local got deadline=$((SECONDS + WAIT_S))
	until got=$(tids begin --id "$1" --pid "$2" --epoch "$3" --topic $T) && [ "$got" = "added 0" ]; do
		broker_alive || fail "broker died"
		((SECONDS < deadline)) || fail "$1 was not granted ta/0 within ${WAIT_S}s: $got"
		sleep 0.2
	done
}

start_broker --cores "${SLUICE_CORES:-2}" --test-txn-allows-max 1
# the topic, and a first transaction (its grant comes back at its marker)
txn_run first "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id ta-first --topics $T --partitions 1 \
	--count 5 --tag first --plan commit --out "$OUT" --create || fail "the first producer exited $?: $(txn_show first)"

# 1.
read -r A_PID A_EPOCH <<<"$(pid_of a)"
read -r B_PID B_EPOCH <<<"$(pid_of b)"
got=$(tids begin --id a --pid "$A_PID" --epoch "$A_EPOCH" --topic $T)
[ "$got" = "added 0" ] || fail "(1) AddPartitionsToTxn of a: $got"
got=$(tids begin --id b --pid "$B_PID" --epoch "$B_EPOCH" --topic $T)
[ "$got" = "added 15" ] ||
	fail "(1) AddPartitionsToTxn of b with the one grant taken: want 15 (COORDINATOR_NOT_AVAILABLE), got '$got'"
grep -q 'transaction grant pool full' "$BROKER_LOG" || fail "(1) the broker did not say why b was refused"
got=$(tids begin --id b --pid "$B_PID" --epoch "$B_EPOCH" --topic $T)
[ "$got" = "added 15" ] || fail "(1) b's retry while a holds the grant: want 15, got '$got'"
log "(1) a holds the one grant; b is answered COORDINATOR_NOT_AVAILABLE, twice"

# 2.
got=$(tids end --id a --pid "$A_PID" --epoch "$A_EPOCH")
[ "$got" = "ended 0" ] || fail "(2) EndTxn of a: $got"
until_added b "$B_PID" "$B_EPOCH"
log "(2) a aborted: b's retry is granted"

# 3. (the refusal lines are rate-limited, 10 per call site a window: their count so far)
refused_so_far() { grep -o '([0-9]* refused on this core so far)' "$BROKER_LOG" | tr -dc '0-9\n' | sort -n | tail -n 1; }
R0=$(refused_so_far)
n0=$(grep -c 'transaction grant pool full' "$BROKER_LOG")
"$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id ta-live --topics $T --partitions 1 --count 10 \
	--tag live --plan commit,commit --out "$OUT" --op-timeout-ms 120000 \
	>"$WORK/live.out" 2>"$WORK/live.err" &
LIVE=$!
INTEG_CHILDREN=$LIVE
deadline=$((SECONDS + WAIT_S))
until (($(grep -c 'transaction grant pool full' "$BROKER_LOG") > n0)) || ((n0 >= 10)); do
	kill -0 "$LIVE" 2>/dev/null || fail "(3) the producer ended while b held the grant: $(txn_show live)"
	((SECONDS < deadline)) || fail "(3) the producer was never refused while b held the grant"
	sleep 0.2
done
kill -0 "$LIVE" 2>/dev/null || fail "(3) the producer ended while b held the grant: $(txn_show live)"
got=$(tids end --id b --pid "$B_PID" --epoch "$B_EPOCH")
[ "$got" = "ended 0" ] || fail "(3) EndTxn of b: $got"
wait "$LIVE" || fail "(3) the producer exited $?: $(txn_show live)"
INTEG_CHILDREN=
expect_lines "$OUT" commit >"$WORK/exp-c"
[ "$(wc -l <"$WORK/exp-c")" -eq 25 ] || fail "(3) want 5 + 20 committed records in $OUT"
consume_check rc committed "$WORK/exp-c" $T 1
stop_broker
total=$(grep -o '[0-9]* transaction grants refused for an empty grant pool' "$BROKER_LOG" | tail -n 1 | cut -d' ' -f1)
((${total:-0} > R0)) || fail "(3) the producer was never refused (grants refused: ${total:-0}, $R0 before it started)"
log "(3) the producer waited for b's grant and committed; $total grants refused in all, $((total - R0)) of them its"
pass "a full grant pool answers AddPartitionsToTxn retriably; grants come back at the marker"
