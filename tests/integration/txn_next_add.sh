#!/usr/bin/env bash
# txn_next_add.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# A producer's next AddPartitionsToTxn is served once its last transaction's
# markers are sent, not once they are durable (txncoord.c add_partitions);
# the next transaction's record is written only after the last one's
# Complete. txn_next_add.py plays a raw producer, the broker holding each
# durable marker's completion for seconds (--fault-marker-delay-ms):
#   pipe: T2's add is answered within half the delay (before, it waited for all
#     of it), its batch taken beside T1's closing marker (LSO held at c1's
#     base), T2 commits and T3 aborts; read_committed exact, and again after
#     a restart.
#   kill + after: the broker SIGKILLed with T2's batches written and T1's
#     markers not yet acted on (T1 had added tnk/1 and written nothing there,
#     T2 wrote there); after the restart T1 is committed, T2's batches aborted
#     on both partitions (the LSO reaches the high watermark) and its producer
#     fenced.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-next-add 93 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
CLIENT=$(dirname "$0")/txn_next_add.py
INTEG_FAIL_LOGS="$WORK/pipe.out $WORK/pipe.err $WORK/kill.out $WORK/kill.err $WORK/after.out $WORK/after.err"

# 10 s: the window for the client's requests on a busy machine.
export TNA_MARKER_DELAY_S=10
start_broker --cores 2 --fault-marker-delay-ms 10000
txn_run pipe "$PY" "$CLIENT" pipe "$PORT" "$WORK" || fail "pipe: $(txn_show pipe)"
log "pipe: $(tr '\n' ';' <"$WORK/pipe.out")"
consume_check rc-tna committed "$WORK/exp-tna" tna 2 --timeout 60

# The markers' completions held for longer than the client takes: the kill comes inside.
export TNA_MARKER_DELAY_S=60
stop_broker
start_broker --cores 2 --fault-marker-delay-ms 60000
txn_run kill "$PY" "$CLIENT" kill "$PORT" "$WORK" || fail "kill: $(txn_show kill)"
grep -q '^ready' "$WORK/kill.out" || fail "kill: the client did not get as far as T2's batches: $(txn_show kill)"
log "kill: $(tr '\n' ';' <"$WORK/kill.out")"
kill9_broker

start_broker --cores 2
txn_run after "$PY" "$CLIENT" after "$PORT" "$WORK" || fail "after: $(txn_show after)"
log "after: $(tr '\n' ';' <"$WORK/after.out")"
# T2's data on both partitions, each after T1's marker there (tnk/1's closed no data of T1).
grep -q 'open transactions reported by the partitions: 0 known, 0 joined, 2 aborted' "$BROKER_LOG" ||
	fail "the restart did not abort T2's two open partitions: $(grep 'open transactions reported' "$BROKER_LOG" | tail -n 1)"
consume_check rc-tnk committed "$WORK/exp-tnk" tnk 2 --timeout 60
consume_check rc-tna2 committed "$WORK/exp-tna" tna 2 --timeout 60
stop_broker
pass "the next transaction's AddPartitionsToTxn served while the last one's markers were held; a crash then aborted it and fenced its producer"
