#!/usr/bin/env bash
# txn_marker_many.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# Markers waiting to be sent again are bounded by the transactions, not by a
# table that can fill. Three transactions over 8 topics x 64 partitions (1,536
# markers, more than 1,024) at --cores 1 with every marker refused (test only, --fault-marker-fail 1000):
# each refusal is answered inside the send (the owner shares the core). The
# retry table used to hold 1,024; past it a marker was sent again at once,
# refused again at once, and so on in one recursion until the stack ran out
# (SIGSEGV; at --cores > 1 a busy loop between two cores). The broker must
# keep sending every marker again, once a second, and stay up; restarted
# without the fault it finishes the commit, and read_committed reads it all.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-marker-many 75 "$@"
TOPICS=tmm1,tmm2,tmm3,tmm4,tmm5,tmm6,tmm7,tmm8
NPROD=3
PARTS=$((NPROD * 8 * 64))   # markers, one per partition of each transaction
OUT=$WORK/produced.txt

start_broker --cores "${SLUICE_CORES:-1}" --fault-marker-fail 1000 --fault-seed 7
# EndTxn is answered once the commit is durable, before its markers: one after the other.
for ((i = 1; i <= NPROD; i++)); do
	txn_run "prod$i" "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id "tmm$i" --topics "$TOPICS" \
		--partitions 64 --count 1 --tag "many$i" --plan commit --out "$OUT" --create --op-timeout-ms 120000 ||
		fail "producer $i exited $?: $(txn_show "prod$i")"
done
# Two whole rounds of refusals: every marker was refused and sent again at least once.
deadline=$((SECONDS + 120))
until n=$(grep -o '([0-9]* markers sent again so far)' "$BROKER_LOG" | tail -n 1 | tr -dc 0-9) &&
	[ -n "$n" ] && ((n >= 2 * PARTS)); do
	broker_alive || fail "the broker died with up to $PARTS markers refused: $(tail -n 3 "$BROKER_LOG")"
	((SECONDS < deadline)) || fail "markers were not sent again: last count ${n:-none}"
	sleep 0.5
done
broker_alive || fail "the broker died with up to $PARTS markers refused: $(tail -n 3 "$BROKER_LOG")"
log "$n refused markers sent again, broker up"
stop_broker

start_broker --cores "${SLUICE_CORES:-1}"
expect_lines "$OUT" commit >"$WORK/exp-c"
[ "$(wc -l <"$WORK/exp-c")" -eq $PARTS ] || fail "want $PARTS committed records in $OUT"
consume_check rc committed "$WORK/exp-c" "$TOPICS" 64 --timeout 120
stop_broker
pass "$PARTS markers refused and sent again without end; after a restart the commit is whole"
