#!/usr/bin/env bash
# txn_fence.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# Zombie fencing (rdk_txn fence): instance 1 of transactional.id fence-x
# flushes records of an open transaction on 3 partitions; instance 2 with the
# same id calls init_transactions (epoch bump: the broker aborts instance 1's
# transaction). Instance 1's next produce/commit must fail with a fatal
# fencing error (_FENCED / PRODUCER_FENCED / INVALID_PRODUCER_EPOCH); its
# flushed records stay invisible to read_committed (but are in the log for
# read_uncommitted); instance 2 commits and exactly its records are visible.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-fence 32 "$@"
start_broker --cores "${SLUICE_CORES:-3}"
txn_run fence "$RDK_TXN" fence --bootstrap "$BOOTSTRAP" --topic tf --partitions 3 ||
	fail "fence exited $?: $(grep -E 'CHECK|rdk_txn:' "$WORK/fence.err" | head -n 20)
$(cat "$WORK/fence.out")"
cat "$WORK/fence.out" >&2
stop_broker
pass "second instance fenced the first; its open transaction was aborted"
