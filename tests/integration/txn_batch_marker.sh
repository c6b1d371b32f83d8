#!/usr/bin/env bash
# txn_batch_marker.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# A transactional batch that arrives while its producer's previous marker on
# that partition is written but not yet durable opens the producer's next
# transaction there at once, beside the closing one, whose marker holds the
# LSO until it is durable (txn_batch_marker.py: an admin WriteTxnMarkers
# COMMIT held not durable by --fault-marker-delay-ms, then a re-grant and a
# batch of the same producer's next transaction there, which it aborts; the
# ABORT marker waits for the held COMMIT). read_committed then shows the
# committed batch and nothing of the aborted one, before and after a restart.
# Before b31efd6 the batch joined the old transaction's LSO entry: the held
# marker's end closed that entry over it, the abort found nothing open there
# and wrote no marker, and read_committed showed the aborted records. From
# b31efd6 to the closing state (txn_lso_close) it was refused until then.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-batch-marker 76 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
CLIENT=$(dirname "$0")/txn_batch_marker.py

# 10 s: the window for one AddPartitionsToTxn and one Produce on a busy machine.
start_broker --cores 2 --fault-marker-delay-ms 10000
txn_run client "$PY" "$CLIENT" "$PORT" "$WORK/exp-c" || fail "the client: $(txn_show client)"
log "client: $(grep -E '^a1|^refused' "$WORK/client.out" | tr '\n' ' ')"
consume_check rc committed "$WORK/exp-c" tbm 2 --timeout 60
refused=$(sed -n 's/^refused //p' "$WORK/client.out")
[ "${refused:-1}" -eq 0 ] || fail "the batch was refused $refused times while the marker was not durable"
read -r held base < <(sed -n 's/^held LSO \([0-9-]*\) base \([0-9-]*\)/\1 \2/p' "$WORK/client.out")
[ -n "$held" ] && [ "$held" -le "$base" ] ||
	fail "tbm/0's LSO just after a1 was ${held:-?}, past c1's base ${base:-?}: the held marker was durable already, the test proved nothing"
stop_broker
start_broker --cores 2
consume_check rc2 committed "$WORK/exp-c" tbm 2 --timeout 60
stop_broker
pass "a batch of the next transaction taken while its producer's marker was not durable (LSO held at $held); read_committed exact"
