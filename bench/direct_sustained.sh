#!/usr/bin/env bash
# direct_sustained.sh [PREFILL_GB] [ROUNDS] - sustained durable produce after PREFILL_GB written
# (issue 15): one data dir under /var/tmp (a disk, not tmpfs) that a prefill run (--direct-io on,
# the default) fills first; then ROUNDS x (off, on, order flipped every round) runs appending to it,
# each 2 s warm-up and 8 s measured, with the broker's CPU per MiB; and in the same run, on the same
# file system, dd of 1 GiB with oflag=direct conv=fdatasync before and after them.
# Workload: idempotent, 1 KiB records (100 a batch), 6 partitions, 2 connections x 8 in flight,
# acks=-1 (durable). SLUICED, SLUICE_BENCH: the binaries (default build/...). Removed on exit.
set -euo pipefail
prefill_gb=${1:-10}; rounds=${2:-2}
sluiced=${SLUICED:-build/dataplane/sluiced}; bench=${SLUICE_BENCH:-build/bench/sluice-bench}
d=$(mktemp -d /var/tmp/sluice-direct-sus.XXXXXX)
trap 'kill "${pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$d"' EXIT
wl=(--workload produce --mode idempotent --size 1024 --batch-records 100 --partitions 6 --create
    --connections 2 --inflight 8 --topic t)

start() { # start DIRECT
	port=$((20000 + RANDOM % 20000))
	"$sluiced" --listen 127.0.0.1:$port --data "$d/data" --direct-io "$1" >"$d/log" 2>&1 &
	pid=$!
	for _ in $(seq 300); do grep -q "listening on" "$d/log" && break; sleep 0.1; done
	grep -q "listening on" "$d/log" || { echo "direct_sustained: sluiced did not start: $(tail -n 3 "$d/log")" >&2; exit 1; }
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
ddrun() {
	local out
	out=$(dd if=/dev/zero of="$d/dd" bs=1M count=1024 oflag=direct conv=fdatasync 2>&1 | tail -n 1)
	rm -f "$d/dd"
	echo "dd O_DIRECT 1 GiB ($1): $out"
}
order() { if (($1 % 2)); then echo "off on"; else echo "on off"; fi; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
ddrun before
start on
"$bench" --bootstrap 127.0.0.1:$port "${wl[@]}" --count $((prefill_gb * 1000000000 / 1024)) --duration 3600 \
  --label prefill >"$d/bench" 2>&1 || { cat "$d/bench" >&2; exit 1; }
stop
echo "prefill ${prefill_gb} GB (--direct-io on): $(grep RESULT "$d/bench")"
echo "data dir: $(du -sh "$d/data" | cut -f1)"
for r in $(seq "$rounds"); do
	for m in $(order "$r"); do
		start "$m"
		"$bench" --bootstrap 127.0.0.1:$port "${wl[@]}" --warmup 2 --duration 8 --broker-pid "$pid" \
		  --label "written-direct-$m" >"$d/bench" 2>&1 || { cat "$d/bench" >&2; exit 1; }
		stop
		echo "written direct=$m $(grep RESULT "$d/bench")"
	done
done
ddrun after
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
