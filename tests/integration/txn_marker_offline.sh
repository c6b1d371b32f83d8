#!/usr/bin/env bash
# txn_marker_offline.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# A marker whose log write fails after it was queued (test only,
# --fault-marker-write-fail 1: the write carrying it writes nothing and fails
# EIO) takes its partition offline; the partition's memory then says the
# transaction is closed (the marker was applied at the append) while its log
# has no marker. Until the probe reopens the log, a marker sent again must be
# refused retriably, and the coordinator must not complete the transaction
# without it: once the partition is back the marker is written and the LSO
# moves, so read_committed reads every committed record to the end.
# Before (b31efd6), the offline partition answered the re-sent marker
# CONCURRENT_TRANSACTIONS, which the coordinator counted as written: it wrote
# Complete, and the reopened log held the first transaction open: the next
# one's batches joined it and its ABORT marker aborted the first one's
# committed records too, so read_committed missed them. (The fault holds the
# probe until one re-sent marker met the partition offline, at most 5 s, so
# that path is taken whatever the timers' order.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-marker-offline 74 "$@"
TOPICS=to1
OUT=$WORK/produced.txt

# One data core: the first marker any partition writes is the one that fails.
start_broker --cores 2 --fault-marker-write-fail 1
txn_run prod "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id tmo --topics "$TOPICS" \
	--partitions 2 --count 10 --tag one --plan commit,abort,commit,commit --out "$OUT" --create \
	--op-timeout-ms 120000 ||
	fail "the producer exited $?: $(txn_show prod)"
grep -q "fault injection: the log write of the marker" "$BROKER_LOG" ||
	fail "fault injection did not fire: the test proved nothing"
grep -q "is offline: Input/output error" "$BROKER_LOG" || fail "the failed marker write did not take its partition offline"
grep -q "is back online" "$BROKER_LOG" || fail "the partition never came back online"
expect_lines "$OUT" commit >"$WORK/exp-c"
expect_lines "$OUT" commit abort >"$WORK/exp-all"
[ "$(wc -l <"$WORK/exp-c")" -eq 60 ] && [ "$(wc -l <"$WORK/exp-all")" -eq 80 ] ||
	fail "want 60 + 20 records in $OUT"
# read_committed reads every partition to its end (the LSO): with the first marker lost,
# the LSO stayed at the first transaction and the committed records after it were never read.
consume_check rc committed "$WORK/exp-c" "$TOPICS" 2 --timeout 60
consume_check ru uncommitted "$WORK/exp-all" "$TOPICS" 2
# The owner's answer to the marker sent again while offline: retriable storage error, never
# CONCURRENT_TRANSACTIONS (which only the coordinator's own re-send on it kept from completing).
grep -q "fault injection: partition .* refused a marker while offline" "$BROKER_LOG" ||
	fail "no marker was sent again while the partition was offline: $(grep -E 'marker|offline|online' "$BROKER_LOG" | tail -n 8)"
! grep -q "could not write its marker (error 51 \|answered error 51 " "$BROKER_LOG" ||
	fail "the offline partition answered a marker CONCURRENT_TRANSACTIONS: $(grep 'error 51' "$BROKER_LOG" | head -n 2)"
# After a restart (recovery from the log alone) the same.
stop_broker
start_broker --cores 2
consume_check rc2 committed "$WORK/exp-c" "$TOPICS" 2 --timeout 60
stop_broker
pass "a marker whose write failed was refused offline, written once back, the LSO moved"
