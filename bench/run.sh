#!/usr/bin/env bash
# bench/run.sh: sluice's standard first measurement.
#
# Starts one sluiced on a free loopback port with a fresh data dir on a real
# filesystem (not tmpfs), measures the machine's own baselines (sequential
# O_DIRECT write with dd, small O_DSYNC writes, loopback TCP), then runs
# sluice-rdk-bench with 100 B and 1 KiB records, acks=all, 6 partitions,
# alternating the two sizes for several rounds (A B A B ...), and reports the
# median and spread of each, plus sluice's durable MB/s as a fraction of the
# disk's sequential write MB/s. No speed is asserted anywhere: the script
# fails only when something did not run.
#
# usage: bench/run.sh [--sluiced PATH] [--bench PATH] [--tcp PATH] [--cores N]
#                     [--quick] [--out DIR] [--rounds R] [--seconds D]
#                     [--warmup W] [--data-root DIR] [--broker-arg ARG ...] [--keep]
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
cmdline="$0 $*"
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

sluiced="" bench="" tcp="" out="" data_root="" keep=0 quick=0
cores=$(nproc) rounds=3 seconds=10 warmup=2 partitions=6 sizes=(100 1024)
broker_args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--sluiced) sluiced=$2; shift ;;
	--bench) bench=$2; shift ;;
	--tcp) tcp=$2; shift ;;
	--cores) cores=$2; shift ;;
	--quick) quick=1 ;;
	--out) out=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--seconds) seconds=$2; shift ;;
	--warmup) warmup=$2; shift ;;
	--data-root) data_root=$2; shift ;;
	--broker-arg) broker_args+=("$2"); shift ;;
	--keep) keep=1 ;;
	-h|--help) sed -n '2,17p' "$0"; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done

# --quick is the smoke test: one round of 2 s runs and smaller baselines.
dd_mib=1024 sync_ops=1000 tcp_seconds=3
if [ "$quick" = 1 ]; then
	rounds=1 seconds=2 warmup=1 dd_mib=256 sync_ops=200 tcp_seconds=1
fi

# Binaries: explicit paths, else the usual build directories of this repo.
for b in "$repo/build" "$repo/builddir"; do
	[ -z "$sluiced" ] && [ -x "$b/dataplane/sluiced" ] && sluiced=$b/dataplane/sluiced
	[ -z "$bench" ] && [ -x "$b/bench/sluice-rdk-bench" ] && bench=$b/bench/sluice-rdk-bench
done
[ -z "$tcp" ] && [ -n "$bench" ] && [ -x "$(dirname "$bench")/sluice-tcp-loop" ] &&
	tcp=$(dirname "$bench")/sluice-tcp-loop
[ -x "$sluiced" ] || { echo "run.sh: sluiced not found; pass --sluiced PATH" >&2; exit 2; }
[ -x "$bench" ] || { echo "run.sh: sluice-rdk-bench not found; pass --bench PATH" >&2; exit 2; }

# The data dir lives next to the build (same filesystem as the repo when the
# build dir is inside it), because tmpfs would make fdatasync free and the
# durable figure meaningless.
[ -n "$data_root" ] || data_root=$(dirname "$(dirname "$(readlink -f "$sluiced")")")
mkdir -p "$data_root"
work=$(mktemp -d "$data_root/sluice-bench.XXXXXX")
data=$work/data
mkdir -p "$data"
bench_fs_info "$work" "$repo"
fs_type=$bench_fs_type fs_dev=$bench_fs_dev same_fs=$bench_same_fs

broker_pid=""
stop_broker() {
	bench_stop_sluiced "$broker_pid"
	broker_pid=""
}
cleanup() {
	stop_broker
	if [ -n "$out" ] && [ -f "$work/broker.log" ]; then mkdir -p "$out" && cp "$work/broker.log" "$out/" || true; fi
	if [ "$keep" = 1 ]; then echo "kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
	echo "run.sh: FAILED: $*" >&2
	if [ -f "$work/broker.log" ]; then
		echo "--- last 30 lines of the sluiced log ---" >&2
		tail -n 30 "$work/broker.log" >&2
	fi
	exit 1
}


report=$work/summary.txt
say() { echo "$*" | tee -a "$report"; }

say "# sluice bench $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
say "command: $cmdline"
say "machine: nproc=$(nproc), $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), kernel $(uname -r)"
say "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every figure: see other_cpu_pct)"
say "data dir: $work ($fs_type, $fs_dev, same filesystem as the repo: $same_fs)"
if bench_fs_is_ram; then
	say "WARNING: the data dir is on $fs_type: fdatasync costs nothing there, durable figures are not real"
fi
say "sluiced: $sluiced --cores $cores --partitions $partitions ${broker_args[*]:-}"
say "bench: $bench; sizes ${sizes[*]} B, acks=all, $partitions partitions, ${seconds} s runs after a ${warmup} s warm-up, $rounds round(s)"

# ---- machine baselines, before the broker starts so nothing competes -------
bench_disk_seq "$work" "$dd_mib" || fail "baseline disk"
disk_mbps=$bench_disk_mbps
say "baseline disk: dd bs=1M count=$dd_mib oflag=direct conv=fdatasync: $disk_mbps MB/s ($bench_disk_line)"

bench_sync_rate "$work" "$sync_ops" || fail "baseline sync"
sync_rate=$bench_sync_rate
say "baseline sync: dd bs=4k count=$sync_ops oflag=dsync: $sync_rate durable writes/s ($bench_sync_ms ms each)"

tcp_mbps=""
if [ -n "$tcp" ] && [ -x "$tcp" ]; then
	bench_tcp_loop "$tcp" "$tcp_seconds" || fail "baseline loopback TCP"
	tcp_mbps=$bench_tcp_mbps
	say "baseline loopback TCP: one connection, 1 MiB writes: $tcp_mbps MB/s (sluice-tcp-loop)"
else
	say "baseline loopback TCP: skipped (no sluice-tcp-loop given or found)"
fi

# ---- the broker --------------------------------------------------------------
clk_tck=$(getconf CLK_TCK)
bench_start_sluiced "$sluiced" "$data" "$work/broker.log" "$cores" "$partitions" \
	${broker_args[@]+"${broker_args[@]}"} || { broker_pid=$bench_pid; fail "sluiced did not start"; }
broker_pid=$bench_pid bootstrap=$bench_bootstrap
say "sluiced pid $broker_pid listening on $bootstrap"


csv=$work/results.csv
echo "round,size_bytes,records,seconds,records_per_sec,mb_per_sec,steady_mb_per_sec,avg_ms,p50_ms,p95_ms,p99_ms,p999_ms,max_ms,errors,client_cpu_s,broker_cpu_pct,broker_disk_mb_per_sec,other_cpu_pct" >"$csv"
guard=$(awk -v d="$seconds" -v w="$warmup" 'BEGIN { printf "%d", d + w + 120 }')
for round in $(seq "$rounds"); do
	for size in "${sizes[@]}"; do
		kill -0 "$broker_pid" 2>/dev/null || fail "sluiced died before round $round, size $size"
		c0=$(bench_cpu_ticks "$broker_pid") w0=$(bench_io_bytes "$broker_pid") b0=$(bench_busy_ticks) t0=$(date +%s.%N)
		rc=0
		timeout "$guard" "$bench" --bootstrap "$bootstrap" --topic "bench-s$size" \
			--partitions "$partitions" --size "$size" --seconds "$seconds" \
			--warmup-seconds "$warmup" --acks all \
			>"$work/run-$round-$size.out" 2>"$work/run-$round-$size.err" || rc=$?
		t1=$(date +%s.%N)
		kill -0 "$broker_pid" 2>/dev/null || fail "sluiced died during round $round, size $size"
		c1=$(bench_cpu_ticks "$broker_pid") w1=$(bench_io_bytes "$broker_pid") b1=$(bench_busy_ticks)
		line=$(grep '^RESULT' "$work/run-$round-$size.out" || true)
		if [ "$rc" != 0 ] || [ -z "$line" ]; then
			cat "$work/run-$round-$size.out" "$work/run-$round-$size.err" >&2
			fail "sluice-rdk-bench exited $rc (round $round, size $size)"
		fi
		# other_cpu_pct: CPU that neither sluiced nor the bench used during the
		# run (100 = one core): other work on the machine, i.e. noise, plus
		# kernel work for the run charged to no process (jbd2, softirq).
		read -r bcpu bdisk ocpu < <(awk -v c="$((c1 - c0))" -v hz="$clk_tck" -v w="$((w1 - w0))" \
			-v b="$((b1 - b0))" -v cc="$(bench_kv "$line" client_cpu_s)" -v t0="$t0" -v t1="$t1" 'BEGIN {
			t = t1 - t0; o = 100 * ((b - c) / hz - cc) / t
			printf "%.0f %.1f %.0f\n", 100 * c / hz / t, w / t / 1048576, o < 0 ? 0 : o }')
		grep -v '^RESULT' "$work/run-$round-$size.out" | sed "s/^/  round $round, $size B: /" | tee -a "$report"
		grep '^sluice-rdk-bench' "$work/run-$round-$size.err" | sed 's/^/    /' | tee -a "$report" || true
		row="$round,$size"
		for k in records seconds records_per_sec mb_per_sec steady_mb_per_sec avg_ms p50_ms p95_ms p99_ms p999_ms max_ms errors client_cpu_s; do
			row="$row,$(bench_kv "$line" "$k")"
		done
		echo "$row,$bcpu,$bdisk,$ocpu" >>"$csv"
	done
done
stop_broker
say "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- summary: median, min..max and spread per size ----------------------------
# stats COLUMN SIZE: "median min max" of a results.csv column for one size.
stats() {
	awk -F, -v col="$1" -v size="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
		$2 == size { print $c }' "$csv" | sort -g |
		awk '{ v[++n] = $1 } END { m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2;
		                          printf "%s %s %s\n", m, v[1], v[n] }'
}
say ""
say "summary (medians of $rounds run(s); MB = MiB of record values; spread = (max-min)/median):"
for size in "${sizes[@]}"; do
	read -r rps rps_lo rps_hi < <(stats records_per_sec "$size")
	read -r mbps mb_lo mb_hi < <(stats mb_per_sec "$size")
	read -r p99 _ _ < <(stats p99_ms "$size")
	read -r p50 _ _ < <(stats p50_ms "$size")
	read -r bcpu _ _ < <(stats broker_cpu_pct "$size")
	read -r ccpu _ _ < <(stats client_cpu_s "$size")
	read -r bdisk _ _ < <(stats broker_disk_mb_per_sec "$size")
	read -r ocpu _ ocpu_hi < <(stats other_cpu_pct "$size")
	say "$(awk -v s="$size" -v r="$rps" -v rl="$rps_lo" -v rh="$rps_hi" -v m="$mbps" -v ml="$mb_lo" \
		-v mh="$mb_hi" -v p50="$p50" -v p99="$p99" -v d="$disk_mbps" 'BEGIN {
		spread = r > 0 ? 100 * (rh - rl) / r : 0
		frac = d > 0 ? m / d : 0
		printf "  %5d B acks=all: %.0f records/s (%.0f..%.0f, spread %.1f%%), ", s, r, rl, rh, spread
		printf "%.2f MB/s (%.2f..%.2f), p50 %.1f ms, p99 %.1f ms, ", m, ml, mh, p50, p99
		printf "%.3f of the disk sequential write figure", frac }')"
	say "        broker CPU ${bcpu}% (100% = one core), broker disk writes ${bdisk} MB/s, client CPU ${ccpu} s per run, other work ${ocpu}% (max ${ocpu_hi}%)"
done
say "  baselines: disk seq write $disk_mbps MB/s, $sync_rate O_DSYNC 4 KiB writes/s, loopback TCP ${tcp_mbps:-n/a} MB/s"
nres=$(($(wc -l <"$csv") - 1))
say "RESULT tool=run.sh runs=$nres sizes=$(IFS=,; echo "${sizes[*]}") disk_mb_per_sec=$disk_mbps tcp_mb_per_sec=${tcp_mbps:-na} fs=$fs_type"

if [ -n "$out" ]; then
	mkdir -p "$out"
	cp "$csv" "$report" "$out/"
	echo "wrote $out/results.csv and $out/summary.txt"
fi
