#!/usr/bin/env bash
# txn_lists_full.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# The open transactions' partition and group lists (issue 11) come from two
# fixed pools sized at start-up (--txn-partitions-max, --txn-groups-max);
# before, each list grew by realloc on the control core's poll loop, with no
# bound but the per-transaction limits (10,000 partitions and 64 groups for
# each of up to 100,000 ids). Here the pools hold 8 partitions and 1 group.
#
# 1. Id a adds tl/0..7 (the whole partition pool). Id b's AddPartitionsToTxn
#    is answered COORDINATOR_NOT_AVAILABLE (15, retriable), the broker says
#    which flag; a aborts and b's retry is taken.
# 2. b adds group g1 (the one group). c's AddOffsetsToTxn is answered 15,
#    and c's transaction did not start (its EndTxn finds none); b aborts and
#    c's retry is taken.
# 3. A librdkafka producer whose transaction starts while a holds the whole
#    partition pool retries until a aborts, then commits: read_committed
#    sees exactly its records (and the first producer's).
# 4. A restart with a smaller pool than the log's open transactions need
#    (a holds 8 partitions; --txn-partitions-max 4) starts and loads it
#    whole (on the heap, at start-up only), with a warning naming the
#    flags; the pool of 4 still serves new transactions in full (b's is
#    taken, then c's is refused, 15), and a's abort still completes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-lists-full 81 "$@"
command -v python3 >/dev/null || skip "python3 not installed"
TXN_IDS=$(abs_path "$(dirname "$0")/txn_ids.py")
OUT=$WORK/produced.txt
T=tl
WAIT_S=60

tids() { python3 "$TXN_IDS" "$1" --port "$PORT" "${@:2}" 2>>"$WORK/txn_ids.err"; }
pid_of() {
	local out err pid epoch
	out=$(tids ids "$1") || fail "txn_ids ids $1 failed: $(tail -n 2 "$WORK/txn_ids.err")"
	read -r _ err pid epoch <<<"$out"
	[ "$err" = 0 ] || fail "InitProducerId of $1 answered $err"
	echo "$pid $epoch"
}

start_broker --cores "${SLUICE_CORES:-2}" --txn-partitions-max 8 --txn-groups-max 1
txn_run first "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id tl-first --topics $T --partitions 8 \
	--count 8 --tag first --plan commit --out "$OUT" --create || fail "the first producer exited $?: $(txn_show first)"

# 1.
read -r A_PID A_EPOCH <<<"$(pid_of a)"
read -r B_PID B_EPOCH <<<"$(pid_of b)"
read -r C_PID C_EPOCH <<<"$(pid_of c)"
got=$(tids begin --id a --pid "$A_PID" --epoch "$A_EPOCH" --topic $T --partitions 8)
[ "$got" = "added 0" ] || fail "(1) AddPartitionsToTxn of a's 8 partitions: $got"
got=$(tids begin --id b --pid "$B_PID" --epoch "$B_EPOCH" --topic $T)
[ "$got" = "added 15" ] ||
	fail "(1) AddPartitionsToTxn of b with the pool taken: want 15 (COORDINATOR_NOT_AVAILABLE), got '$got'"
grep -q "partition pool is full (--txn-partitions-max)" "$BROKER_LOG" || fail "(1) the broker did not say why b was refused"
got=$(tids end --id b --pid "$B_PID" --epoch "$B_EPOCH")
[ "$got" = "ended 48" ] || fail "(1) b's refused call started a transaction: EndTxn answered '$got', want 48 (INVALID_TXN_STATE)"
got=$(tids end --id a --pid "$A_PID" --epoch "$A_EPOCH")
[ "$got" = "ended 0" ] || fail "(1) EndTxn of a: $got"
deadline=$((SECONDS + WAIT_S))
until got=$(tids begin --id b --pid "$B_PID" --epoch "$B_EPOCH" --topic $T) && [ "$got" = "added 0" ]; do
	((SECONDS < deadline)) || fail "(1) b's retry was not taken within ${WAIT_S}s after a aborted: $got"
	sleep 0.2
done
log "(1) a holds the partition pool: b is answered COORDINATOR_NOT_AVAILABLE, and taken once a aborted"

# 2.
got=$(tids offsets --id b --pid "$B_PID" --epoch "$B_EPOCH" --group g1)
[ "$got" = "offsets 0" ] || fail "(2) AddOffsetsToTxn of b: $got"
got=$(tids offsets --id c --pid "$C_PID" --epoch "$C_EPOCH" --group g2)
[ "$got" = "offsets 15" ] || fail "(2) AddOffsetsToTxn of c with the group pool taken: want 15, got '$got'"
grep -q "group pool is full (--txn-groups-max)" "$BROKER_LOG" || fail "(2) the broker did not say why c was refused"
got=$(tids end --id c --pid "$C_PID" --epoch "$C_EPOCH")
[ "$got" = "ended 48" ] || fail "(2) c's refused call started a transaction: EndTxn answered '$got', want 48"
got=$(tids end --id b --pid "$B_PID" --epoch "$B_EPOCH")
[ "$got" = "ended 0" ] || fail "(2) EndTxn of b: $got"
deadline=$((SECONDS + WAIT_S))
until got=$(tids offsets --id c --pid "$C_PID" --epoch "$C_EPOCH" --group g2) && [ "$got" = "offsets 0" ]; do
	((SECONDS < deadline)) || fail "(2) c's retry was not taken within ${WAIT_S}s after b aborted: $got"
	sleep 0.2
done
got=$(tids end --id c --pid "$C_PID" --epoch "$C_EPOCH")
[ "$got" = "ended 0" ] || fail "(2) EndTxn of c: $got"
log "(2) b holds the group pool: c is answered COORDINATOR_NOT_AVAILABLE, and taken once b aborted"

# 3.
got=$(tids begin --id a --pid "$A_PID" --epoch "$A_EPOCH" --topic $T --partitions 8)
[ "$got" = "added 0" ] || fail "(3) AddPartitionsToTxn of a's 8 partitions again: $got"
n0=$(grep -c "partition pool is full" "$BROKER_LOG")
"$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id tl-live --topics $T --partitions 8 --count 16 \
	--tag live --plan commit --out "$OUT" --op-timeout-ms 120000 >"$WORK/live.out" 2>"$WORK/live.err" &
LIVE=$!
INTEG_CHILDREN=$LIVE
deadline=$((SECONDS + WAIT_S))
until (($(grep -c "partition pool is full" "$BROKER_LOG") > n0)) || ((n0 >= 10)); do
	kill -0 "$LIVE" 2>/dev/null || fail "(3) the producer ended while a held the pool: $(txn_show live)"
	((SECONDS < deadline)) || fail "(3) the producer was never refused while a held the pool"
	sleep 0.2
done
kill -0 "$LIVE" 2>/dev/null || fail "(3) the producer ended while a held the pool: $(txn_show live)"
got=$(tids end --id a --pid "$A_PID" --epoch "$A_EPOCH")
[ "$got" = "ended 0" ] || fail "(3) EndTxn of a: $got"
wait "$LIVE" || fail "(3) the producer exited $?: $(txn_show live)"
INTEG_CHILDREN=
expect_lines "$OUT" commit >"$WORK/exp-c"
[ "$(wc -l <"$WORK/exp-c")" -eq 192 ] || fail "(3) want 8 x 8 + 8 x 16 committed records in $OUT"
consume_check rc committed "$WORK/exp-c" $T 8

# 4.
got=$(tids begin --id a --pid "$A_PID" --epoch "$A_EPOCH" --topic $T --partitions 8)
[ "$got" = "added 0" ] || fail "(4) AddPartitionsToTxn of a's 8 partitions before the restart: $got"
stop_broker
start_broker --cores "${SLUICE_CORES:-2}" --txn-partitions-max 4 --txn-groups-max 1
grep -q "1 open transactions' partition/group lists do not fit --txn-partitions-max 4 / --txn-groups-max 1; loaded past them" \
	"$BROKER_LOG" || fail "(4) no warning naming the flags at a start-up past the pool"
got=$(tids begin --id b --pid "$B_PID" --epoch "$B_EPOCH" --topic $T --partitions 4)
[ "$got" = "added 0" ] || fail "(4) b's 4 partitions, the new pool's whole: $got"
got=$(tids begin --id c --pid "$C_PID" --epoch "$C_EPOCH" --topic $T)
[ "$got" = "added 15" ] || fail "(4) c's AddPartitionsToTxn with the pool of 4 taken: want 15, got '$got'"
got=$(tids end --id a --pid "$A_PID" --epoch "$A_EPOCH")
[ "$got" = "ended 0" ] || fail "(4) EndTxn of a, loaded past the pool: $got"
got=$(tids end --id b --pid "$B_PID" --epoch "$B_EPOCH")
[ "$got" = "ended 0" ] || fail "(4) EndTxn of b: $got"
deadline=$((SECONDS + WAIT_S))
until got=$(tids begin --id c --pid "$C_PID" --epoch "$C_EPOCH" --topic $T) && [ "$got" = "added 0" ]; do
	((SECONDS < deadline)) || fail "(4) c's retry was not taken within ${WAIT_S}s after b aborted: $got"
	sleep 0.2
done
got=$(tids end --id c --pid "$C_PID" --epoch "$C_EPOCH")
[ "$got" = "ended 0" ] || fail "(4) EndTxn of c: $got"
consume_check rc4 committed "$WORK/exp-c" $T 8
log "(4) a restart with a smaller pool loads the open transaction whole; the pool still bounds new ones"
stop_broker
pass "full transaction list pools answer AddPartitionsToTxn/AddOffsetsToTxn retriably; room comes back at the end"
