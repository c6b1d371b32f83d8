#!/usr/bin/env bash
# snapshot_ab.sh - produce latency across producer-state snapshot intervals,
# two sluiced builds side by side in ONE run (issue 11: nothing blocking on a
# poll core).
#
#   bench/snapshot_ab.sh --before OLD_SLUICED --after NEW_SLUICED --bench SLUICE_BENCH
#       [--partitions 1000] [--snapshot-ms 2000] [--duration 20] [--warmup 3]
#       [--rounds 2] [--rate R] [--data DIR] [--out DIR]
#
# One data core (--cores 2: one data core, one control core) owns every
# partition. An idempotent producer (sluice-bench --mode idempotent, so every
# partition has producer state to snapshot) writes round-robin over them.
# First the closed-loop maximum of the BEFORE build is measured (unless --rate
# is given); then each build in turn, A B A B..., on a fresh data directory,
# takes an open-loop load of half that maximum for --duration seconds (about
# duration / snapshot-ms snapshot intervals, each one a snapshot of every
# partition that moved). Reported: p99, p99.9 and max produce latency per run,
# and the ratio of the BEFORE's mean p99.9 to the AFTER's. Needs a disk file
# system for --data (the default is beside --out), not tmpfs: a snapshot's cost
# is its fdatasync.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

before="" after="" bench="" parts=1000 snap_ms=2000 duration=20 warmup=3 rounds=2 rate=0 data="" out=""
while (($#)); do
	case $1 in
	--before) before=$2 ;;
	--after) after=$2 ;;
	--bench) bench=$2 ;;
	--partitions) parts=$2 ;;
	--snapshot-ms) snap_ms=$2 ;;
	--duration) duration=$2 ;;
	--warmup) warmup=$2 ;;
	--rounds) rounds=$2 ;;
	--rate) rate=$2 ;;
	--data) data=$2 ;;
	--out) out=$2 ;;
	*) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
	esac
	shift 2
done
[ -x "$before" ] && [ -x "$after" ] && [ -x "$bench" ] || { echo "need --before, --after and --bench executables" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/snapshot_ab.XXXXXX)}
mkdir -p "$out"
data=${data:-$out/data}
mkdir -p "$data"
bench_fs_info "$data" "$here"
bench_fs_is_ram && echo "WARNING: $data is on $bench_fs_type: fdatasync costs nothing there" >&2

pid=""
trap 'bench_stop_sluiced "$pid"' EXIT

# run EXE LABEL RATE SECONDS: one broker, one produce run; prints its RESULT line.
run() {
	local exe=$1 label=$2 r=$3 secs=$4 line
	rm -rf "$data"
	mkdir -p "$data"
	bench_start_sluiced "$exe" "$data" "$out/$label.log" 2 1 --producer-snapshot-ms "$snap_ms" >&2
	pid=$bench_pid
	local args=(--bootstrap "$bench_bootstrap" --workload produce --mode idempotent --topic snap
		--partitions "$parts" --create --size 100 --batch-records 100 --connections 2 --inflight 8
		--warmup "$warmup" --duration "$secs" --label "$label")
	((r > 0)) && args+=(--rate "$r")
	line=$("$bench" "${args[@]}" 2>"$out/$label.err" | grep '^RESULT') ||
		{ echo "sluice-bench failed ($label): $(tail -n 3 "$out/$label.err")" >&2; exit 1; }
	bench_stop_sluiced "$pid"
	pid=""
	echo "$line"
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $parts partitions on one data core (--cores 2), snapshots every $snap_ms ms, $bench_fs_type"
if ((rate == 0)); then
	line=$(run "$before" max-before 0 10)
	max=$(bench_kv "$line" rec_per_sec)
	rate=$(awk -v m="$max" 'BEGIN { printf "%d", m / 2 }')
	echo "max (before, closed loop): $max records/s; offered load: $rate records/s (50 %)"
fi
printf '%-8s %-6s %12s %10s %10s %10s %8s\n' run build records/s p99_ms p999_ms max_ms errors
sum_a=0 sum_b=0
for ((i = 1; i <= rounds; i++)); do
	for build in before after; do
		exe=$before
		[ "$build" = after ] && exe=$after
		line=$(run "$exe" "$build-$i" "$rate" "$duration")
		p999=$(bench_kv "$line" p999_ms)
		printf '%-8s %-6s %12s %10s %10s %10s %8s\n' "$i" "$build" "$(bench_kv "$line" rec_per_sec)" \
			"$(bench_kv "$line" p99_ms)" "$p999" "$(bench_kv "$line" max_ms)" "$(bench_kv "$line" errors)"
		if [ "$build" = before ]; then sum_a=$(awk -v a="$sum_a" -v b="$p999" 'BEGIN { print a + b }')
		else sum_b=$(awk -v a="$sum_b" -v b="$p999" 'BEGIN { print a + b }'); fi
	done
done
awk -v a="$sum_a" -v b="$sum_b" -v n="$rounds" 'BEGIN {
	printf "mean p99.9: before %.3f ms, after %.3f ms; before/after = %.2f\n", a / n, b / n, (b > 0 ? a / b : 0) }'
