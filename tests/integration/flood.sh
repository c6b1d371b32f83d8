#!/usr/bin/env bash
# flood.sh SLUICED RDK_LOAD SLUICE_DUMP SLUICE_BENCH
#
# Flow control: acks=0 producers never wait for answers, so four of them
# (sluice-bench --acks 0, pipelining as fast as they can) pile up requests
# far faster than the disk takes them. The broker must slow them down by
# pausing their reads (TCP backpressure), not drop their connections: every
# run ends well, the broker logs no closed connection, and everything they
# sent is in the log: a consumer reads back exactly as many records as the
# producers sent, with the same checksum (sluice-bench's order-independent
# digest), also the records the last run sent just before it closed.
. "$(dirname "$0")/lib.sh"
integ_init flood 64 "$@"
BENCH=$(abs_path "${4:-}")
need_exe "$BENCH"
TOPIC=flood
RUNS=${FLOOD_RUNS:-3}

start_broker --cores "${SLUICE_CORES:-2}"
total=0
sum=0
for ((i = 1; i <= RUNS; i++)); do
	guarded "$BENCH" --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --create --partitions 6 --acks 0 --connections 4 \
		--duration 2 --interval 10 >"$WORK/run$i.out" 2>&1 || fail "run $i exited $?: $(tail -n 3 "$WORK/run$i.out" | tr '\n' ';')"
	tot=$(grep '^# totals' "$WORK/run$i.out") || fail "run $i: no totals line"
	n=$(sed -n 's/.* issued=\([0-9]*\) .*/\1/p' <<<"$tot")
	ck=$(sed -n 's/.* checksum=\([0-9a-f]*\).*/\1/p' <<<"$tot")
	[ -n "$n" ] && [ -n "$ck" ] || fail "run $i: bad totals line: $tot"
	total=$((total + n))
	sum=$(python3 -c "print('%016x' % ((int('$sum', 16) + int('$ck', 16)) % 2**64))")
	log "run $i: $n records sent with acks=0"
done
guarded "$BENCH" --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --workload consume --count "$total" --duration 120 \
	--interval 100 >"$WORK/consume.out" 2>&1 || fail "consume exited $?: $(tail -n 3 "$WORK/consume.out" | tr '\n' ';')"
got=$(grep '^# totals' "$WORK/consume.out")
read_n=$(sed -n 's/.* read=\([0-9]*\) .*/\1/p' <<<"$got")
read_ck=$(sed -n 's/.* checksum=\([0-9a-f]*\).*/\1/p' <<<"$got")
[ "$read_n" = "$total" ] && [ "$read_ck" = "$sum" ] ||
	fail "sent $total records (checksum $sum), the log holds $read_n (checksum $read_ck)"
! grep -Eq 'refusing|closing connection|request pool exhausted' "$BROKER_LOG" ||
	fail "the broker dropped a connection: $(grep -E 'refusing|closing connection|request pool' "$BROKER_LOG" | head -n 3)"
stop_broker
pass "$total records from acks=0 floods, all in the log (checksum $sum); no connection dropped"
