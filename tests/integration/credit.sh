#!/usr/bin/env bash
# credit.sh SLUICED RDK_LOAD SLUICE_DUMP SLUICE_BENCH
#
# Cross-core flow control (dp_limits.h, "Cross-core flow control"): a
# message that does not fit its ring waits in a fixed backlog, bounded by
# credit: per pair of cores at most --test-xmsg-credits requests may be
# unanswered, and a produce (or fetch) partition beyond it is answered with a
# retriable error instead of growing the backlog. With the credit shrunk to
# 4 at --cores 3 (NIC cores send to the other data core), acks=-1
# producers with several requests in flight over 12 partitions must be
# refused some partitions and retry them; in the end everything acknowledged
# is in the log exactly once (count and checksum), and the broker says at
# exit how many it refused. The broker before the bound has no such flag
# (and no refusal): this test fails there.
. "$(dirname "$0")/lib.sh"
integ_init credit 64 "$@"
BENCH=$(abs_path "${4:-}")
need_exe "$BENCH"
TOPIC=credit

start_broker --cores 3 --test-xmsg-credits 4
guarded "$BENCH" --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --create --partitions 12 --mode plain --acks -1 \
	--connections 4 --inflight 5 --batch-records 20 --count 40000 --duration 120 --interval 10 \
	>"$WORK/produce.out" 2>&1 || fail "produce exited $?: $(tail -n 3 "$WORK/produce.out" | tr '\n' ';')"
tot=$(grep '^# totals' "$WORK/produce.out") || fail "no totals line"
n=$(sed -n 's/.* acked=\([0-9]*\) .*/\1/p' <<<"$tot")
[ -n "$n" ] || n=$(sed -n 's/.* issued=\([0-9]*\) .*/\1/p' <<<"$tot")
ck=$(sed -n 's/.* checksum=\([0-9a-f]*\).*/\1/p' <<<"$tot")
[ -n "$n" ] && [ -n "$ck" ] || fail "bad totals line: $tot"
grep -q 'retriable error 19' "$WORK/produce.out" ||
	fail "no partition was refused for credit (NOT_ENOUGH_REPLICAS): $(grep -c . "$WORK/produce.out") lines"
stop_broker
refused=$(sed -n 's/.* \([0-9]*\) cross-core requests refused for credit.*/\1/p' "$BROKER_LOG" | awk '{s += $1} END {print s + 0}')
[ "$refused" -gt 0 ] || fail "the broker logged no refusal for credit"
# Read back with the default credit (sluice-bench takes a fetch error for fatal).
start_broker --cores 3
guarded "$BENCH" --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --workload consume --count "$n" --duration 120 \
	--interval 100 >"$WORK/consume.out" 2>&1 || fail "consume exited $?: $(tail -n 3 "$WORK/consume.out" | tr '\n' ';')"
got=$(grep '^# totals' "$WORK/consume.out")
read_n=$(sed -n 's/.* read=\([0-9]*\) .*/\1/p' <<<"$got")
read_ck=$(sed -n 's/.* checksum=\([0-9a-f]*\).*/\1/p' <<<"$got")
[ "$read_n" = "$n" ] && [ "$read_ck" = "$ck" ] ||
	fail "produced $n records (checksum $ck), the log holds $read_n (checksum $read_ck)"
stop_broker
pass "$n records with credit 4 per pair of cores, all in the log once (checksum $ck); $refused requests refused for credit and retried"
