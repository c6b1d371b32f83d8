#!/usr/bin/env bash
# txn_ab.sh BUILD_A BUILD_B [ROUNDS] - transactions of two builds side by side (issue 12).
# BUILD_A/BUILD_B: meson build directories (release builds: -Dbuildtype=release
# -Doptimization=3) holding dataplane/sluiced and bench/sluice-bench. Each round runs,
# for A then B, each on a fresh broker (--cores 2, durable unless marked) and data
# directory, `sync` between:
#   txn1        one producer of 1-record transactions (100 B), 1 partition
#   txn1nofsync the same with --no-fsync
#   txn64       64 such producers
#   idem        idempotent, 1 KiB, 6 partitions, 2 connections x 8 in flight
#   txn1000     transactional, the same, 1,000 records per transaction
# One line per run: the build, the case, then sluice-bench's RESULT and TXN lines
# (txn/s, per-step p50/p99, broker CPU). Nothing here is asserted: it measures.
set -u
A=${1:?usage: txn_ab.sh BUILD_A BUILD_B [ROUNDS]} B=${2:?usage: txn_ab.sh BUILD_A BUILD_B [ROUNDS]}
ROUNDS=${3:-3}
PORT=${TXN_AB_PORT:-19092}
DATA=${TXN_AB_DATA:-/tmp/txn-ab-data}

run() {   # BUILD_DIR NAME LABEL BROKER_FLAGS... -- BENCH_ARGS...
	local dir=$1 name=$2 label=$3 flags=() pid res
	shift 3
	while [ "$1" != "--" ]; do flags+=("$1"); shift; done
	shift
	rm -rf "$DATA" && mkdir -p "$DATA" && sync
	"$dir/dataplane/sluiced" --listen "127.0.0.1:$PORT" --data "$DATA" --cores 2 "${flags[@]}" \
		>"$DATA.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
	res=$("$dir/bench/sluice-bench" --bootstrap "127.0.0.1:$PORT" --broker-pid "$pid" "$@" 2>&1 |
		grep -E '^(RESULT|TXN)' | tr '\n' ' ')
	echo "$name $label $res"
	kill -TERM "$pid"
	wait "$pid"
}

small=(--workload produce --topic t1 --partitions 1 --create --mode transactional --size 100 --inflight 1
       --batch-records 1 --txn-records 1 --warmup 1 --duration 5)
wide=(--workload produce --topic t6 --partitions 6 --create --size 1024 --connections 2 --inflight 8
      --warmup 1 --duration 5)
for _ in $(seq "$ROUNDS"); do
	for side in A B; do
		dir=$A
		[ "$side" = B ] && dir=$B
		run "$dir" "$side" txn1 -- "${small[@]}" --connections 1
		run "$dir" "$side" txn1nofsync --no-fsync -- "${small[@]}" --connections 1
		run "$dir" "$side" txn64 -- "${small[@]}" --connections 64
		run "$dir" "$side" idem -- "${wide[@]}" --mode idempotent
		run "$dir" "$side" txn1000 -- "${wide[@]}" --mode transactional --txn-records 1000
	done
done
