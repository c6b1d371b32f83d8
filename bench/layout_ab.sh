#!/usr/bin/env bash
# layout_ab.sh LABEL "SLUICED AND ITS ARGS" "EXTRA SLUICE-BENCH ARGS"
# One run of RESULTS.md's core-layout comparison (issue 15): a fresh sluiced on a fresh data dir
# under /var/tmp, sluice-bench idempotent 1 KiB, 6 partitions, 2 connections x 8 in flight,
# durable, 2 s warm-up and 6 s measured; prints the RESULT line (with the broker's CPU per MiB,
# --broker-pid). SLUICE_BENCH: the sluice-bench binary (default build/bench/sluice-bench).
# Alternate A B A B.
set -euo pipefail
label=$1; bargs=$2; wargs=${3:-}
d=$(mktemp -d /var/tmp/sluice-layout-ab.XXXXXX)
trap 'kill "${pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$d"' EXIT
port=$((20000 + RANDOM % 20000))   # a port in use makes sluiced exit, and the wait below says so
$bargs --listen 127.0.0.1:$port --data "$d/data" >"$d/log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "listening on" "$d/log" && break; sleep 0.1; done
grep -q "listening on" "$d/log" || { echo "layout_ab: sluiced did not start: $(tail -n 3 "$d/log")" >&2; exit 1; }
"${SLUICE_BENCH:-build/bench/sluice-bench}" --bootstrap 127.0.0.1:$port --workload produce --mode idempotent \
  --size 1024 --partitions 6 --create --connections 2 --inflight 8 --topic t --warmup 2 --duration 6 \
  --broker-pid "$pid" $wargs >"$d/bench" 2>&1
echo "== $label"; grep RESULT "$d/bench"
