#!/usr/bin/env bash
# txn_state_pool.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# The owner core's producer and transaction state pool (issue 11): every
# partition's producer table and transaction index grow in one pool per data
# core, sized at start-up (--txn-state-mib; here --test-txn-state-bytes 16384,
# room for 16 producers on one partition), never by malloc on the poll core.
# 24 transactional producers write one partition at once: those beyond the
# pool's room have their batches refused before the append, retriably
# (NOT_ENOUGH_REPLICAS), until the first ones end and expire
# (--producer-expiration-ms 3000) and give their entries back. Every
# producer's transactions must then commit, and read_committed must see each
# record once. The broker before the pool has no --test-txn-state-bytes: this
# fails there (and before, nothing bounded the tables but the per-partition
# limits of a million producers).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-state-pool 81 "$@"
N=${TXN_POOL_PRODUCERS:-24}

start_broker --cores "${SLUICE_CORES:-3}" --test-txn-state-bytes 16384 --producer-expiration-ms 3000 \
	--producer-snapshot-ms 200
txn_run p0 "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id pool-0 --topics pool --partitions 1 \
	--count 10 --tag p0 --plan commit --out "$WORK/out-0.txt" --create ||
	fail "the first producer exited $?: $(txn_show p0)"
pids=
for k in $(seq 1 "$N"); do
	"$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id "pool-$k" --topics pool --partitions 1 \
		--count 10 --tag "p$k" --plan commit,commit --out "$WORK/out-$k.txt" --op-timeout-ms 150000 \
		--txn-timeout-ms 170000 >"$WORK/p$k.out" 2>"$WORK/p$k.err" &
	pids="$pids $!"
done
INTEG_CHILDREN="${INTEG_CHILDREN:-} $pids"
k=0
for pid in $pids; do
	k=$((k + 1))
	# waits while watching the broker: a crash fails at once
	while kill -0 "$pid" 2>/dev/null; do
		broker_alive || fail "broker exited while $N producers shared the pool"
		sleep 0.5
	done
	wait "$pid" || fail "producer $k exited $?: $(txn_show "p$k")"
done
grep -q 'producer state full (No buffer space available)' "$BROKER_LOG" ||
	fail "no batch was refused for the spent pool: the test proved nothing"
log "$(grep -c 'producer state full' "$BROKER_LOG") refusal lines for the spent pool (rate-limited)"
cat "$WORK"/out-*.txt >"$WORK/produced.txt"
expect_lines "$WORK/produced.txt" commit >"$WORK/exp-c"
[ "$(wc -l <"$WORK/exp-c")" -eq $((10 + 20 * N)) ] ||
	fail "want $((10 + 20 * N)) committed records, the producers wrote $(wc -l <"$WORK/exp-c")"
consume_check rc committed "$WORK/exp-c" pool 1 --timeout 120
stop_broker
grep -q 'producer and transaction state pool: [0-9]* of 16384 bytes' "$BROKER_LOG" ||
	fail "the pool's use was not logged at exit"
log "$(grep -o 'producer and transaction state pool: [0-9]* of 16384 bytes' "$BROKER_LOG" | tail -n 2 | tr '\n' ' ')"
pass "$N producers through a 16 KiB state pool: refused retriably while it was spent, none unrecorded"
