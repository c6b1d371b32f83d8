#!/usr/bin/env bash
# txn_interleave.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# Two transactional producers and a plain one interleave on ONE partition
# (rdk_txn interleave): while both transactions are open, read_committed ends
# at the first open transaction's first offset (the LSO), even with later
# non-transactional records in the log, and ListOffsets(latest,
# read_committed) says the same; after A commits it ends at B's first offset;
# after B aborts it sees exactly the plain and A records in offset order and
# nothing of B, while read_uncommitted sees every record.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-interleave 31 "$@"
start_broker --cores "${SLUICE_CORES:-3}"
txn_run interleave "$RDK_TXN" interleave --bootstrap "$BOOTSTRAP" --topic ti ||
	fail "interleave exited $?: $(grep -E 'CHECK|rdk_txn:|FAIL' "$WORK/interleave.err" | head -n 20)
$(grep -vE '^produced' "$WORK/interleave.out")"
grep -vE '^produced' "$WORK/interleave.out" >&2
stop_broker
pass "interleaved commit/abort on one partition, LSO and ListOffsets read_committed"
