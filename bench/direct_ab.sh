#!/usr/bin/env bash
# direct_ab.sh [ROUNDS] [PREFILL_GIB] - RESULTS.md's --direct-io comparison (issue 15).
# Durable idempotent produce (acks=-1), 6 partitions, 2 connections x 8 in flight, 16 KiB records
# in batches of 16 (256 KiB batches: the write-bandwidth case), 2 s warm-up and 8 s measured,
# with the broker's CPU per MiB (--broker-pid). Two phases, each alternating off/on ROUNDS times
# (A B A B, the order flipped every round):
#   fresh    every run on a fresh data dir (the first GB: the page cache still has room);
#   written  every run on ONE data dir that a prefill run of PREFILL_GIB GiB (--direct-io off)
#            filled first, each run appending to it (where buffered writeback had collapsed).
# SLUICED, SLUICE_BENCH: the binaries (default build/dataplane/sluiced, build/bench/sluice-bench).
# Data under /var/tmp (a disk, not tmpfs), removed on exit. Prints one line per run.
set -euo pipefail
rounds=${1:-2}; prefill_gib=${2:-4}
sluiced=${SLUICED:-build/dataplane/sluiced}; bench=${SLUICE_BENCH:-build/bench/sluice-bench}
d=$(mktemp -d /var/tmp/sluice-direct-ab.XXXXXX)
trap 'kill "${pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$d"' EXIT
wl=(--workload produce --mode idempotent --size 16384 --batch-records 16 --partitions 6 --create
    --connections 2 --inflight 8 --topic t)

start() { # start DATA_DIR DIRECT
	port=$((20000 + RANDOM % 20000))
	"$sluiced" --listen 127.0.0.1:$port --data "$1" --direct-io "$2" >"$d/log" 2>&1 &
	pid=$!
	for _ in $(seq 200); do grep -q "listening on" "$d/log" && break; sleep 0.1; done
	grep -q "listening on" "$d/log" || { echo "direct_ab: sluiced did not start: $(tail -n 3 "$d/log")" >&2; exit 1; }
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
run() { # run PHASE DATA_DIR DIRECT
	start "$2" "$3"
	"$bench" --bootstrap 127.0.0.1:$port "${wl[@]}" --warmup 2 --duration 8 --broker-pid "$pid" \
	  --label "$1-direct-$3" >"$d/bench" 2>&1 || { cat "$d/bench" >&2; exit 1; }
	stop
	echo "$1 direct=$3 $(grep RESULT "$d/bench")"
}
order() { if (($1 % 2)); then echo "on off"; else echo "off on"; fi; }

for r in $(seq "$rounds"); do
	for m in $(order "$r"); do rm -rf "$d/fresh"; run fresh "$d/fresh" "$m"; done
done
rm -rf "$d/fresh"
start "$d/written" off
"$bench" --bootstrap 127.0.0.1:$port "${wl[@]}" --count $((prefill_gib * 65536)) --duration 600 \
  --label prefill >"$d/bench" 2>&1 || { cat "$d/bench" >&2; exit 1; }
stop
echo "prefill ${prefill_gib} GiB: $(grep RESULT "$d/bench")"
for r in $(seq "$rounds"); do
	for m in $(order "$r"); do run written "$d/written" "$m"; done
done
