#!/usr/bin/env bash
# layout_ab.sh LABEL "SLUICED AND ITS ARGS" "EXTRA SLUICE-BENCH ARGS"
# One run of RESULTS.md's core-layout comparison (issue 15): a fresh sluiced on a fresh data dir
# under /var/tmp, sluice-bench idempotent 1 KiB, 6 partitions, 2 connections x 8 in flight,
# durable, 2 s warm-up and 6 s measured; prints the broker's CPU ticks and the RESULT line.
# SLUICE_BENCH: the sluice-bench binary (default build/bench/sluice-bench). Alternate A B A B.
label=$1; bargs=$2; wargs=$3
port=$((20000 + RANDOM % 20000)); d=$(mktemp -d /var/tmp/s7b.XXXX)
$bargs --listen 127.0.0.1:$port --data $d/data >"$d/log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "listening on" $d/log && break; sleep 0.1; done
"${SLUICE_BENCH:-build/bench/sluice-bench}" --bootstrap 127.0.0.1:$port --workload produce --mode idempotent --size 1024 \
  --partitions 6 --create --connections 2 --inflight 8 --topic t --warmup 2 --duration 6 $wargs > $d/bench 2>&1
cpu=$(awk '{print $14+$15}' /proc/$pid/stat)
kill $pid; wait $pid 2>/dev/null
echo "== $label cpu_ticks=$cpu"; grep RESULT $d/bench
rm -rf $d
