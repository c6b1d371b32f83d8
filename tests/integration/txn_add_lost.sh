#!/usr/bin/env bash
# txn_add_lost.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# AddPartitionsToTxn is answered before its coordinator record is durable, so
# a crash can lose the record of a partition that was added, granted and
# written to. At start-up the partitions' owners report the transactions open
# there and the coordinator decides: the id is Ongoing at that epoch, the
# partition joins its transaction; otherwise (Empty, Complete*) that open data
# is aborted and the id fenced. txn_add_lost.py plays the producers, one
# phase per broker start (state in $WORK/state.json):
#   run 1 (normal): X ("tal-x") opens a transaction with batch B0 on tal/0; Z
#     ("tal-z") commits Z1 on tal/3; Y ("tal-y") only gets its producer id.
#   run 2 (--fault-txn-kill add-lost: no AddPartitionsToTxn record is written,
#     SIGKILL at the first EndTxn): X adds tal/1 and writes B1, Y adds tal/2
#     and writes B2, Z adds tal/3 and writes Z2; X's EndTxn commit kills the
#     broker (the client sees the connection closed).
#   run 3 (--fault-marker-delay-ms 3000: the reconciliation waits that long for
#     the aborts' markers): X's batch B3 on tal/0, sent at once, is told to
#     come back (NOT_ENOUGH_REPLICAS) until the coordinator has reconciled and
#     given X's grants again, then taken; it must have been told so at least
#     once. The reconciliation logs 1 joined (X's tal/1) and 2 aborted
#     (Y's tal/2, Z's tal/3); before any EndTxn, the LSO is at most B0's/B1's
#     base on tal/0 and tal/1 and the high watermark on tal/2 and tal/3; X's
#     commit answers NONE, Y's and Z's at their old epochs
#     INVALID_PRODUCER_EPOCH; read_committed shows exactly B0, B1 and Z1,
#     read_uncommitted all five batches; read_committed again after a restart.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-add-lost 87 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
CLIENT=$(dirname "$0")/txn_add_lost.py
INTEG_FAIL_LOGS="$WORK/run1.out $WORK/run1.err $WORK/run2.out $WORK/run2.err $WORK/run3a.out $WORK/run3a.err $WORK/run3.out $WORK/run3.err"

# log_from: the number of the broker log's next line (where the next start's lines begin).
log_from() {
	echo $(($(wc -l <"$BROKER_LOG" 2>/dev/null || echo 0) + 1))
}

# --- run 1: a normal broker ---
start_broker --cores 2
txn_run run1 "$PY" "$CLIENT" run1 "$PORT" "$WORK" || fail "run 1 client: $(txn_show run1)"
log "run 1: $(grep -E '^(tal-|B0|Z1)' "$WORK/run1.out" | tr '\n' ';')"
stop_broker

# --- run 2: the AddPartitionsToTxn records are lost, the broker dies at the first EndTxn ---
from2=$(log_from)
start_broker --cores 2 --fault-txn-kill add-lost
# Not guarded: the broker is meant to die during this client's EndTxn.
timeout 180 "$PY" "$CLIENT" run2 "$PORT" "$WORK" >"$WORK/run2.out" 2>"$WORK/run2.err"
rc=$?
[ "$rc" -eq 0 ] || fail "run 2 client exited $rc: $(txn_show run2)"
grep -q '^killed' "$WORK/run2.out" || fail "run 2: the client did not see the connection close: $(txn_show run2)"
deadline=$((SECONDS + 20))
while broker_alive && ((SECONDS < deadline)); do sleep 0.1; done
broker_alive && fail "run 2: the broker did not kill itself within 20 s of the EndTxn"
wait "$BROKER_PID" 2>/dev/null
rc=$?
BROKER_PID=
echo "=== died (status $rc)" >>"$BROKER_LOG"
tail -n +"$from2" "$BROKER_LOG" | grep -q "fault injection: SIGKILL" ||
	fail "run 2: no 'fault injection: SIGKILL' line in the broker log: the fault never fired, the test proved nothing"
[ "$rc" -eq 137 ] || fail "run 2: broker exited with status $rc, want 137 (SIGKILL)"
log "run 2: $(grep -E '^(B1|B2|Z2|killed)' "$WORK/run2.out" | tr '\n' ';')"
log "run 2: broker: $(tail -n +"$from2" "$BROKER_LOG" | grep -m1 'fault injection: SIGKILL' | sed 's/.*fault injection/fault injection/')"

# --- run 3: the broker reconciles, slowly: a batch of X meanwhile must be told to come back ---
from3=$(log_from)
start_broker --cores 2 --fault-marker-delay-ms 3000
txn_run run3a "$PY" "$CLIENT" run3a "$PORT" "$WORK" || fail "run 3 client (B3): $(txn_show run3a)"
b3=$(grep '^B3' "$WORK/run3a.out")
log "run 3: $b3"
[[ $b3 =~ waited\ ([0-9]+) ]] && ((BASH_REMATCH[1] >= 1)) ||
	fail "run 3: B3 was never told to come back: it came after the reconciliation, the test proved nothing ($b3)"
deadline=$((SECONDS + 60))
until recon=$(tail -n +"$from3" "$BROKER_LOG" | grep -m1 'open transactions reported by the partitions'); do
	broker_alive || fail "run 3: the broker died during start-up"
	((SECONDS < deadline)) || fail "run 3: no 'open transactions reported by the partitions' line within 60 s"
	sleep 0.1
done
recon=${recon#*transaction coordinator: }
log "run 3: $recon"
grep -q '\b2 aborted\b' <<<"$recon" || fail "run 3: want 2 aborted (Y's tal/2, Z's tal/3): $recon"
grep -q '\b1 joined\b' <<<"$recon" || fail "run 3: want 1 joined (X's tal/1): $recon"
txn_run run3 "$PY" "$CLIENT" run3 "$PORT" "$WORK" || fail "run 3 client: $(txn_show run3)"
log "run 3: $(grep -E '^(before|tal-)' "$WORK/run3.out" | tr '\n' ';')"
consume_check rc committed "$WORK/exp-c" tal 4 --timeout 60
consume_check ru uncommitted "$WORK/exp-u" tal 4 --timeout 60
stop_broker

start_broker --cores 2
consume_check rc2 committed "$WORK/exp-c" tal 4 --timeout 60
stop_broker
pass "lost adds reconciled: $recon; B3 during it told to come back, then taken; X committed B0+B1+B3, Y and Z fenced (47), read_committed exact across a restart"
