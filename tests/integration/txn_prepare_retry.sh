#!/usr/bin/env bash
# txn_prepare_retry.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# A Prepare{Commit,Abort} record the coordinator could not write (issue 11):
# --fault-prepare-fail 6 fails the first six, in turn refused at the append
# and reported failed at completion. The decision stands and is written again
# (every second) until durable, then the markers follow. Before, a refused
# EndTxn fell back to Ongoing by writing the state directly (no legal move),
# and a write that failed at completion, or a timeout's abort that could not
# be written, left the id at Prepare* with nothing under way: every later
# EndTxn or InitProducerId was answered CONCURRENT_TRANSACTIONS for good.
#
# 1. A producer commits twice; its EndTxns meet all six faults and must
#    succeed.
# 2. The broker restarts with --fault-prepare-fail 2. A producer opens a
#    transaction and is SIGKILLed; its abort (the timeout's, or the fence of
#    the id's next instance, whichever comes first) meets both faults;
#    read_committed must read exactly the committed records, and the dead
#    producer's transactional.id start over and commit.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-prepare-retry 77 "$@"
OUT=$WORK/produced.txt
start_broker --cores "${SLUICE_CORES:-3}" --fault-prepare-fail 6

txn_run live "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id tpr-live --topics tpr \
	--partitions 3 --count 5 --tag live --plan commit,commit --out "$OUT" --create \
	--op-timeout-ms 120000 ||
	fail "the committing producer exited $?: $(txn_show live)"
faults=$(grep -c "fault injection: the Prepare" "$BROKER_LOG" || true)
log "fault injection: $faults Prepare writes failed during the commits"
[ "$faults" -eq 6 ] || fail "want 6 faults during the commits: the test proved nothing"
stop_broker
start_broker --cores "${SLUICE_CORES:-3}" --fault-prepare-fail 2

txn_open_killed dead --bootstrap "$BOOTSTRAP" --txn-id tpr-dead --topics tpr --partitions 3 \
	--count 5 --tag dead --plan open --txn-timeout-ms 5000 --out "$OUT"
log "SIGKILLed a producer with an open transaction"
expect_lines "$OUT" commit >"$WORK/exp-c"
expect_lines "$OUT" commit open >"$WORK/exp-all"
[ "$(wc -l <"$WORK/exp-c")" -eq 30 ] || fail "want 30 committed records in $OUT"
consume_check rc committed "$WORK/exp-c" tpr 3 --timeout 60
consume_check ru uncommitted "$WORK/exp-all" tpr 3

txn_run again "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id tpr-dead --topics tpr \
	--partitions 3 --count 5 --tag again --plan commit --out "$OUT" --op-timeout-ms 120000 ||
	fail "re-init of the aborted transactional.id exited $?: $(txn_show again)"
expect_lines "$OUT" commit >"$WORK/exp-c2"
consume_check rc2 committed "$WORK/exp-c2" tpr 3
faults=$(grep -c "fault injection: the PrepareAbort write of txn tpr-dead" "$BROKER_LOG" || true)
[ "$faults" -eq 2 ] || fail "want the abort to meet 2 faults, saw $faults: the test proved nothing"
stop_broker
pass "failed Prepare writes are written again; no transaction stranded"
