#!/usr/bin/env bash
# dpdk_ab.sh - the DPDK backend against the socket backend over the same veth
# lab (issue 13), interleaved A B A B in ONE run, as ratios. As root.
#
#   bench/dpdk_ab.sh [--rounds 2] [--duration 8] [--warmup 2] [--size 1024]
#       [--rate 20000] [--bench build/bench/sluice-bench] [--out DIR]
#
# Each round brings tools/dpdk-lab.sh up once per mode (A = sluiced-dpdk on
# net_af_packet with the userspace TCP, B = sluiced with the kernel's TCP on the
# same veth end; one data core, --no-fsync so that the NIC path, not the disk,
# is measured) and runs sluice-bench from the client namespace, idempotent,
# acks -1, 6 partitions, --size B values:
#   closed: 2 connections x 8 in flight (the most the broker takes): MiB/s and
#           per-batch ack latency p50/p99 under that load;
#   open:   --rate records/s (well under both maxima): ack latency p50/p99 at a
#           fixed load, measured from each batch's intended send time;
# each with the broker's CPU time over the measured window (--broker-pid), given
# as CPU cycles per produced KiB = CPU seconds x the clock (/proc/cpuinfo's
# "cpu MHz") / KiB of record values. That is time on a CPU times its nominal
# clock, not a hardware counter (this VM has none: perf reports cycles <not
# supported>), and it includes the DPDK core's busy-polling, which is its
# real cost. After the runs the lab goes down and the DPDK broker's stop line
# gives the bytes copied per stream byte received (produce only here, so per
# byte produced) and per byte sent.
# Reported: one line per run, then per mode the median over rounds and the
# ratio DPDK / socket of each figure (throughput > 1: DPDK faster; latency and
# cycles < 1: DPDK better).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=2 duration=8 warmup=2 size=1024 rate=20000 bench=$root/build/bench/sluice-bench out=""
while (($#)); do
	case $1 in
	--rounds) rounds=$2 ;;
	--duration) duration=$2 ;;
	--warmup) warmup=$2 ;;
	--size) size=$2 ;;
	--rate) rate=$2 ;;
	--bench) bench=$2 ;;
	--out) out=$2 ;;
	*) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
	esac
	shift 2
done
[ "$(id -u)" = 0 ] || { echo "dpdk_ab: needs root (network namespaces)" >&2; exit 2; }
[ -x "$bench" ] || { echo "dpdk_ab: no sluice-bench at $bench (--bench)" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/dpdk_ab.XXXXXX)}
mkdir -p "$out"
lab=$root/tools/dpdk-lab.sh
export DPDK_LAB_NAME=dpab$$
trap '"$lab" down >/dev/null 2>&1 || true' EXIT
mhz=$(awk -F: '/^cpu MHz/ { print $2 + 0; exit }' /proc/cpuinfo)
[ -n "$mhz" ] || { echo "dpdk_ab: no cpu MHz in /proc/cpuinfo" >&2; exit 2; }

# field NAME LINE: NAME=value from a RESULT line
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# one RESULT line of a sluice-bench produce run in the client namespace
produce() {
	local label=$1 topic=$2
	shift 2
	local pid
	pid=$(cat "/tmp/$DPDK_LAB_NAME.lab/pid")
	"$lab" exec "$bench" --bootstrap 198.18.0.1:9092 --workload produce --mode idempotent --acks -1 \
		--topic "$topic" --partitions 6 --create --size "$size" --warmup "$warmup" --duration "$duration" \
		--broker-pid "$pid" --label "$label" "$@" >"$out/$label.out" 2>"$out/$label.err" ||
		{ echo "dpdk_ab: $label failed: $(tail -3 "$out/$label.err")" >&2; exit 1; }
	grep '^RESULT' "$out/$label.out" | tail -1
}

rows=$out/rows.txt
: >"$rows"
echo "# $rounds rounds, A=dpdk B=socket, idempotent acks -1, ${size} B values, 6 partitions, --cores 1 --no-fsync;" \
	"closed: 2 conns x 8 in flight; open: $rate rec/s; ${warmup} s warm-up + ${duration} s each; clock $mhz MHz"
printf '%-5s %-6s %9s %9s %9s %9s %9s %11s %11s %9s %9s\n' round mode "MiB/s" "p50 ms" "p99 ms" \
	"open p50" "open p99" "cyc/KiB cl" "cyc/KiB op" "copy/in" "copy/out"
for r in $(seq 1 "$rounds"); do
	for mode in dpdk socket; do
		up=()
		[ "$mode" = socket ] && up=(--socket)
		"$lab" up "${up[@]}" --no-fsync --cores 1 >"$out/up-$mode-$r.txt" 2>&1 ||
			{ echo "dpdk_ab: lab up ($mode) failed: $(tail -5 "$out/up-$mode-$r.txt")" >&2; exit 1; }
		c=$(produce "closed-$mode-$r" abc --connections 2 --inflight 8)
		o=$(produce "open-$mode-$r" abo --connections 2 --inflight 8 --rate "$rate")
		# stopped first (its stop line has the copy counters), the lab then removed
		bpid=$(cat "/tmp/$DPDK_LAB_NAME.lab/pid")
		kill -TERM "$bpid"
		for _ in $(seq 1 300); do kill -0 "$bpid" 2>/dev/null || break; sleep 0.1; done
		cp "/tmp/$DPDK_LAB_NAME.lab/broker.log" "$out/broker-$mode-$r.log"
		"$lab" down >/dev/null 2>&1
		cin=- cout=-
		if [ "$mode" = dpdk ]; then
			line=$(grep "DPDK queue" "$out/broker-$mode-$r.log" | tail -1)
			cin=$(sed -n 's/.*(\([0-9.]*\) per byte in).*/\1/p' <<<"$line")
			cout=$(sed -n 's/.*(\([0-9.]*\) per byte out).*/\1/p' <<<"$line")
		fi
		awk -v r="$r" -v m="$mode" -v mhz="$mhz" -v cin="${cin:--}" -v cout="${cout:--}" \
			-v mb="$(field mb_per_sec "$c")" -v p50="$(field p50_ms "$c")" -v p99="$(field p99_ms "$c")" \
			-v o50="$(field p50_ms "$o")" -v o99="$(field p99_ms "$o")" \
			-v cc="$(field broker_cpu_ms_per_mib "$c")" -v oc="$(field broker_cpu_ms_per_mib "$o")" \
			'BEGIN { # ms per MiB -> cycles per KiB
			         printf "%-5s %-6s %9.1f %9.3f %9.3f %9.3f %9.3f %11.0f %11.0f %9s %9s\n", r, m, mb, p50, p99,
			                o50, o99, cc / 1000 * mhz * 1e6 / 1024, oc / 1000 * mhz * 1e6 / 1024, cin, cout }' |
			tee -a "$rows"
	done
done
# medians per mode and the ratios
awk '
function med(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ m = $2; n[m]++; for (k = 3; k <= 9; k++) v[m, k, n[m]] = $k; if (m == "dpdk") { ci = $10; co = $11 } }
END {
	split("MiB/s p50_ms p99_ms open_p50_ms open_p99_ms cycles_per_KiB_closed cycles_per_KiB_open", name, " ")
	printf "\nmedian over rounds      dpdk     socket   dpdk/socket\n"
	for (k = 3; k <= 9; k++) {
		for (mm in n) { delete a; for (i = 1; i <= n[mm]; i++) a[i] = v[mm, k, i]; md[mm] = med(a, n[mm]) }
		printf "%-22s %9.3f %9.3f %9.2f\n", name[k - 2], md["dpdk"], md["socket"], md["socket"] ? md["dpdk"] / md["socket"] : 0
	}
	printf "bytes copied per byte produced (DPDK backend, last round): %s in, %s per byte sent\n", ci, co
}' "$rows"
echo "# runs and broker logs in $out"
