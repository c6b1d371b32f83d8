#!/usr/bin/env bash
# txn_offsets_next.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# Issue 12: a producer never gets CONCURRENT_TRANSACTIONS because of the
# broker's own pipeline. A transaction that staged offsets (AddOffsetsToTxn +
# TxnOffsetCommit) ends them in __consumer_offsets; the old code wrote those
# ends only at CompleteCommit, after the partitions' markers, and answered the
# producer's next AddPartitionsToTxn CONCURRENT_TRANSACTIONS (51) until they
# were durable: every such transaction cost its successor a client back-off
# (librdkafka's retry.backoff.ms). Now the ends go out with the markers and
# count as markers, so the next AddPartitionsToTxn waits for them (queued) and
# is answered 0. --fault-offsets-delay-ms holds every transactional-offset
# write's completion for DELAY_MS, so the window is seconds wide. The next
# AddPartitionsToTxn goes on EndTxn's own connection, from the same process,
# right after its answer (txn_ids.py end --then-begin), and the script checks
# it was sent inside the window: a new process started for it could come
# after the window on a loaded machine, and then the test would pass without
# having tested anything.
. "$(dirname "$0")/lib.sh"
integ_init txn-offsets-next 83 "$@"
need_exe "$RDK_LOAD"
command -v python3 >/dev/null || skip "python3 not installed"
TXN_IDS=$(abs_path "$(dirname "$0")/txn_ids.py")
T=ton
G=ton-g
DELAY_MS=5000

tids() { python3 "$TXN_IDS" "$1" --port "$PORT" "${@:2}" 2>>"$WORK/txn_ids.err"; }

start_broker --cores "${SLUICE_CORES:-2}" --fault-offsets-delay-ms $DELAY_MS
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic $T --partitions 1 --count 0 \
	>"$WORK/prod.log" 2>&1 || fail "creating $T: rdk_load exited $?"
out=$(tids ids ton-id) || fail "InitProducerId failed: $(tail -n 2 "$WORK/txn_ids.err")"
read -r _ err PID EPOCH <<<"$out"
[ "$err" = 0 ] || fail "InitProducerId answered $err"
ID=(--id ton-id --pid "$PID" --epoch "$EPOCH")
got=$(tids begin "${ID[@]}" --topic $T)
[ "$got" = "added 0" ] || fail "transaction 1: AddPartitionsToTxn answered '$got'"
for txn in 1 2; do
	got=$(tids offsets "${ID[@]}" --group $G)
	[ "$got" = "offsets 0" ] || fail "transaction $txn: AddOffsetsToTxn answered '$got'"
	got=$(tids txncommit "${ID[@]}" --group $G --topic $T --offset $((txn * 10)))
	[ "$got" = "txncommit 0" ] || fail "transaction $txn: TxnOffsetCommit answered '$got'"
	# EndTxn, then the next transaction's AddPartitionsToTxn at once.
	got=$(tids end "${ID[@]}" --commit --then-begin $T)
	# Three lines: "ended ERR", "added ERR", "sent_ms MS".
	{ read -r ended; read -r added; read -r sent; } <<<"$got"
	[ "${ended:-}" = "ended 0" ] || fail "transaction $txn: EndTxn answered '$got'"
	log "transaction $txn committed; the next AddPartitionsToTxn: $added, $sent"
	ms=${sent:-}; ms=${ms#sent_ms }
	[[ "$ms" =~ ^[0-9]+$ ]] || fail "transaction $txn: no sent_ms in '$got'"
	# Sent after the window closed, an answer 0 would prove nothing.
	[ "$ms" -lt $DELAY_MS ] ||
		fail "transaction $txn: the next AddPartitionsToTxn went ${ms} ms after EndTxn's answer, past the ${DELAY_MS} ms window: nothing was tested"
	[ "$added" = "added 0" ] ||
		fail "after transaction $txn: AddPartitionsToTxn answered '$added' (51: CONCURRENT_TRANSACTIONS)"
done
grep -q 'acting on a transaction-end write' "$BROKER_LOG" || fail "no transaction-end write was held: the window was not open"
broker_alive || fail "broker died"
stop_broker
pass "the AddPartitionsToTxn after a transaction with offsets waited for their end, not CONCURRENT_TRANSACTIONS"
