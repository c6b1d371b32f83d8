#!/usr/bin/env bash
# bench/suite.sh: sluice's standard benchmark suite in one command, and the
# limits and comparison modes built from the same pieces.
#
# Standard (default), about 5 minutes: the machine's limits (dd sequential
# write buffered, into a preallocated file and O_DIRECT, O_DSYNC writes/s,
# loopback TCP); then, against a sluiced started here
# (fresh data dir under the build dir each session), sluice-bench with acks=-1
# in closed loop: produce 1 KiB plain, idempotent, transactional and 100 B plain,
# --rounds times (a fresh broker each round), and in the last round consume
# read_uncommitted and read_committed of the transactional data just written;
# then e2e latency, open-loop produce at --rates percent of the closed-loop
# idempotent rate just measured (latency vs offered load), and librdkafka
# (sluice-rdk-bench) for what a typical application sees.
#   --limits   the limits only, the three dd writes --dd-rounds times (default
#              3 here, 1 otherwise) in turn, buffered / preallocated / O_DIRECT,
#              each figure the median of its rounds (every round in the detail).
#              Buffered writes slow down once the page cache is full of older
#              data (the kernel's writeback then paces them): --dd-mib sizes
#              each file (default 1024 MiB).
#   --compare  the chosen --workloads on two brokers, A B A B ... for --rounds
#              rounds, each figure reported as B/A (median and range of the
#              per-round ratios).
# Writes into --out: results.csv (every sluice-bench row, librdkafka as summary
# rows), limits.csv, runs.csv (one row per run: broker CPU, disk writes, noise),
# meta.txt, logs/, and, through report.py, summary.txt and report.html.
# No speed is asserted anywhere: it fails only when something did not run.
#
# usage: bench/suite.sh [--sluiced PATH] [--bench PATH] [--rdk-bench PATH] [--tcp PATH]
#          [--out DIR] [--quick] [--rounds R] [--seconds D] [--warmup W] [--cores N]
#          [--partitions P] [--broker-arg ARG]... [--bench-arg ARG]... [--data-root DIR]
#          [--rates PCT,..] [--ref-rate R] [--txn-records N] [--workloads W,..] [--keep]
#          [--connections C] [--inflight N] [--batch-records N] [--dd-mib M] [--dd-rounds R]
#          [--limits | --compare --a 'NAME=SPEC' --b 'NAME=SPEC']
#   SPEC is what makes that side differ: nothing (the default sluiced), sluiced
#   arguments ('--no-fsync', '--cores 1', '--sluiced OTHER/sluiced', together
#   with --broker-arg ones), or '--bootstrap HOST:PORT' for a broker that is
#   already running (stock Kafka, say): not started, stopped or measured here.
#   Workloads: produce-plain-1k produce-idem-1k produce-txn-1k produce-plain-100
#   consume-uncommitted consume-committed (both read the topic the latest
#   produce-* of that broker session wrote) e2e-1k open-PCT (idempotent 1 KiB at
#   PCT % of the reference rate: --ref-rate, else the median closed-loop
#   produce-idem-1k rate of the first broker) rdk-produce-1k (librdkafka).
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
cmdline="$0$(printf ' %q' "$@")"
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

sluiced="" sbench="" rdk="" tcp="" out="" data_root="" keep=0 quick=0 mode=standard
cores=$(nproc) rounds="" seconds="" warmup="" partitions=6 txn_records=1000 rates="" ref_rate=""
workloads="" spec_a="" spec_b="" conns=2 inflight=8 batch=100 dd_mib="" dd_rounds=""
broker_args=() bench_args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--sluiced) sluiced=$2; shift ;;
	--bench) sbench=$2; shift ;;
	--rdk-bench) rdk=$2; shift ;;
	--tcp) tcp=$2; shift ;;
	--out) out=$2; shift ;;
	--quick) quick=1 ;;
	--rounds) rounds=$2; shift ;;
	--seconds) seconds=$2; shift ;;
	--warmup) warmup=$2; shift ;;
	--cores) cores=$2; shift ;;
	--partitions) partitions=$2; shift ;;
	--broker-arg) broker_args+=("$2"); shift ;;
	--bench-arg) bench_args+=("$2"); shift ;;
	--data-root) data_root=$2; shift ;;
	--rates) rates=$2; shift ;;
	--ref-rate) ref_rate=$2; shift ;;
	--txn-records) txn_records=$2; shift ;;
	--connections) conns=$2; shift ;;
	--inflight) inflight=$2; shift ;;
	--batch-records) batch=$2; shift ;;
	--dd-mib) dd_mib=$2; shift ;;
	--dd-rounds) dd_rounds=$2; shift ;;
	--workloads) workloads=$2; shift ;;
	--keep) keep=1 ;;
	--limits) mode=limits ;;
	--compare) mode=compare ;;
	--a) spec_a=$2; shift ;;
	--b) spec_b=$2; shift ;;
	-h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { print }' "$0"; exit 0 ;;
	*) echo "suite.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
	esac
	shift
done

# Sizes of everything. --quick is the smoke test: a few seconds per workload.
interval=1 sync_ops=1000 tcp_seconds=3
if [ "$quick" = 1 ]; then
	: "${rounds:=1}" "${seconds:=2}" "${warmup:=1}" "${rates:=25,75}" "${dd_mib:=128}"
	sync_ops=200 tcp_seconds=1
fi
: "${dd_mib:=1024}"
[ "$mode" = limits ] && : "${dd_rounds:=3}"
: "${dd_rounds:=1}"
[[ "$dd_mib" =~ ^[1-9][0-9]*$ ]] && [[ "$dd_rounds" =~ ^[1-9][0-9]*$ ]] ||
	{ echo "suite.sh: --dd-mib and --dd-rounds take positive integers" >&2; exit 2; }
: "${rounds:=3}" "${seconds:=10}" "${warmup:=2}" "${rates:=10,25,50,75,90}"
# The load shape of closed-loop and open-loop runs: enough connections and
# requests in flight to keep sluiced's data core busy from one client process.
shape=(--connections "$conns" --inflight "$inflight" --batch-records "$batch")
per_round="produce-plain-1k,produce-idem-1k,produce-plain-100,produce-txn-1k"
last_round="consume-uncommitted,consume-committed"
once="e2e-1k"
for p in ${rates//,/ }; do once="$once,open-$p"; done
[ "$mode" = compare ] && : "${workloads:=produce-plain-1k,produce-idem-1k,produce-txn-1k,consume-committed,e2e-1k}"

# Binaries: explicit paths, else the usual build directories of this repo;
# the small tools are looked for next to sluice-bench.
for b in "$repo/build" "$repo/builddir"; do
	[ -z "$sluiced" ] && [ -x "$b/dataplane/sluiced" ] && sluiced=$b/dataplane/sluiced
	[ -z "$sbench" ] && [ -x "$b/bench/sluice-bench" ] && sbench=$b/bench/sluice-bench
done
if [ -n "$sbench" ]; then
	[ -z "$rdk" ] && [ -x "$(dirname "$sbench")/sluice-rdk-bench" ] && rdk=$(dirname "$sbench")/sluice-rdk-bench
	[ -z "$tcp" ] && [ -x "$(dirname "$sbench")/sluice-tcp-loop" ] && tcp=$(dirname "$sbench")/sluice-tcp-loop
fi
if [ "$mode" != limits ]; then
	[ -x "$sbench" ] || { echo "suite.sh: sluice-bench not found; pass --bench PATH" >&2; exit 2; }
fi

# ---- the brokers: one (standard) or two (compare) configurations -------------
# cfg_kind[i] is 'sluiced' (started here for each session) or 'external'.
# Extra sluiced arguments are kept %q-quoted and expanded with eval.
cfg_name=() cfg_kind=() cfg_exe=() cfg_cores=() cfg_args=() cfg_bootstrap=() cfg_spec=()
add_config() { # add_config NAME SPEC
	local name=$1 exe=$sluiced c=$cores bs="" a=("${broker_args[@]}") w
	local -a words
	read -ra words <<<"$2"
	[[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] || { echo "suite.sh: config name '$name': use letters, digits, _ and -" >&2; exit 2; }
	for ((w = 0; w < ${#words[@]}; w++)); do
		case "${words[w]}" in
		--bootstrap) bs=${words[w + 1]:-}; w=$((w + 1)) ;;
		--sluiced) exe=${words[w + 1]:-}; w=$((w + 1)) ;;
		--cores) c=${words[w + 1]:-}; w=$((w + 1)) ;;
		*) a+=("${words[w]}") ;;
		esac
	done
	cfg_name+=("$name") cfg_cores+=("$c") cfg_spec+=("$2") cfg_bootstrap+=("$bs")
	if [ "${#a[@]}" = 0 ]; then cfg_args+=(""); else cfg_args+=("$(printf '%q ' "${a[@]}")"); fi
	if [ -n "$bs" ]; then
		[ "${#words[@]}" = 2 ] || { echo "suite.sh: config $name: --bootstrap takes no other arguments" >&2; exit 2; }
		cfg_kind+=(external) cfg_exe+=("")
	else
		[ -x "$exe" ] || { echo "suite.sh: config $name: sluiced not found ($exe); pass --sluiced PATH" >&2; exit 2; }
		cfg_kind+=(sluiced) cfg_exe+=("$exe")
	fi
}
if [ "$mode" = compare ]; then
	for s in "$spec_a" "$spec_b"; do
		[[ "$s" == *=* ]] || { echo "suite.sh: --compare needs --a 'NAME=SPEC' and --b 'NAME=SPEC'" >&2; exit 2; }
		add_config "${s%%=*}" "${s#*=}"
	done
	[ "${cfg_name[0]}" != "${cfg_name[1]}" ] || { echo "suite.sh: A and B need different names" >&2; exit 2; }
elif [ "$mode" = standard ]; then
	add_config sluice ""
fi

# ---- work dir (broker data) and output dir -------------------------------------
# Data lives next to the build (the repo's filesystem when the build dir is in
# it), not on tmpfs, where fdatasync is free and a durable figure meaningless.
if [ -z "$data_root" ]; then
	if [ -x "$sluiced" ]; then data_root=$(dirname "$(dirname "$(readlink -f "$sluiced")")")
	else data_root=$repo/build; fi
fi
mkdir -p "$data_root"
work=$(mktemp -d "$data_root/sluice-suite.XXXXXX")
[ -n "$out" ] || out=$data_root/sluice-suite-out.$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/logs"
out=$(readlink -f "$out")
rm -f "$out"/results.csv "$out"/limits.csv "$out"/runs.csv "$out"/meta.txt "$out"/summary.txt "$out"/report.html
runid=$(date +%H%M%S)$((RANDOM % 100))

broker_pid=""
cleanup() {
	bench_stop_sluiced "$broker_pid"
	if [ "$keep" = 1 ]; then echo "kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

meta() { echo "$1: $2" >>"$out/meta.txt"; echo "$1: $2"; }
meta date "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
meta command "$cmdline"
meta mode "$mode"
meta machine "nproc=$(nproc), $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r)"
meta "load at start" "$(cut -d' ' -f1-3 /proc/loadavg) (other work skews every figure: see other_cpu_pct in runs.csv)"
bench_fs_info "$work" "$repo"
meta "data dir" "$work ($bench_fs_type, $bench_fs_dev, same filesystem as the repo: $bench_same_fs)"
if bench_fs_is_ram; then
	meta warning "the data dir is on $bench_fs_type: fdatasync costs nothing there, durable figures are not real"
fi
avail_gib=$(df -Pk "$work" | awk 'NR == 2 { printf "%d", $4 / 1048576 }')
need_gib=$([ "$quick" = 1 ] && echo 2 || echo 20)
if [ "$avail_gib" -lt "$need_gib" ]; then
	meta warning "only $avail_gib GiB free under $data_root (a session can write ~$need_gib GiB); runs may fail with a full disk"
fi
[ "$mode" = limits ] || meta settings "acks=-1, $partitions partitions, ${shape[*]}, ${seconds} s runs after a ${warmup} s warm-up, $rounds round(s), $txn_records records per transaction, open-loop rates ${rates} % of the reference"
[ "$mode" = limits ] || meta sluice-bench "$sbench ${bench_args[*]:-}"
[ "$mode" = limits ] || meta sluice-rdk-bench "${rdk:-not found (librdkafka runs skipped)}"
for i in "${!cfg_name[@]}"; do
	if [ "${cfg_kind[i]}" = external ]; then
		meta "config ${cfg_name[i]}" "external broker at ${cfg_bootstrap[i]} (not started, stopped or measured here)"
	else
		meta "config ${cfg_name[i]}" "${cfg_exe[i]} --cores ${cfg_cores[i]} --partitions $partitions ${cfg_args[i]}"
	fi
done
[ "$mode" = compare ] && meta configs "${cfg_name[0]},${cfg_name[1]}"

# ---- limits: what this machine's disk and loopback can do at all --------------
# Measured before any broker runs, in the data dir, so nothing competes.
echo "metric,value,unit,detail" >"$out/limits.csv"
if [ "$mode" != compare ]; then
	# dd into the data dir's filesystem: buffered, into a preallocated file, O_DIRECT,
	# in turn for each round (A B C A B C), each figure the median of its rounds.
	declare -A dd_vals=()
	for r in $(seq "$dd_rounds"); do
		for kind in buffered prealloc direct; do
			bench_dd_write "$work" "$dd_mib" "$kind" || exit 1
			dd_vals[$kind]="${dd_vals[$kind]:-} $bench_dd_mbps"
			echo "limit: dd $kind write, round $r: $bench_dd_mbps MB/s ($bench_dd_line)"
		done
	done
	for kind in buffered prealloc direct; do
		case $kind in
		buffered) metric=disk_buffered_write how="conv=fdatasync" ;;
		prealloc) metric=disk_prealloc_write how="conv=notrunc conv=fdatasync into a file fallocate'd (and synced) first" ;;
		direct) metric=disk_seq_write how="oflag=direct conv=fdatasync" ;;
		esac
		v=$(tr ' ' '\n' <<<"${dd_vals[$kind]}" | sort -g | awk 'NF { x[++n] = $1 } END {
			printf "%.1f", n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2 }')
		echo "$metric,$v,MB/s,dd bs=1M count=$dd_mib $how ($bench_fs_type); median of$(tr -s ' ' <<<"${dd_vals[$kind]}") MiB/s" >>"$out/limits.csv"
		echo "limit: disk sequential write, $kind: $v MB/s (median of $dd_rounds)"
	done
	bench_sync_rate "$work" "$sync_ops" || exit 1
	echo "fdatasync_rate,$bench_sync_rate,writes/s,dd bs=4k count=$sync_ops oflag=dsync" >>"$out/limits.csv"
	echo "fdatasync_ms,$bench_sync_ms,ms,one 4 KiB O_DSYNC write" >>"$out/limits.csv"
	echo "limit: $bench_sync_rate O_DSYNC 4 KiB writes/s ($bench_sync_ms ms each)"
	if [ -x "$tcp" ]; then
		bench_tcp_loop "$tcp" "$tcp_seconds" || exit 1
		echo "loopback_tcp,$bench_tcp_mbps,MB/s,sluice-tcp-loop: one connection; 1 MiB writes" >>"$out/limits.csv"
		echo "limit: loopback TCP $bench_tcp_mbps MB/s"
	else
		echo "limit: loopback TCP skipped (no sluice-tcp-loop given or found)"
	fi
fi

# ---- one broker session ---------------------------------------------------------
# session_up I TAG: config I ready at $bootstrap; a sluiced config gets a fresh
# data dir and process (so rounds do not inherit each other's data, and the
# disk holds one session's data at a time). session_down undoes it.
bootstrap="" session_log="" last_topic="" last_acked="" last_committed=""
session_up() {
	local i=$1 tag=$2
	last_topic=""
	if [ "${cfg_kind[i]}" = external ]; then bootstrap=${cfg_bootstrap[i]}; return 0; fi
	local -a extra
	eval "extra=(${cfg_args[i]})"
	session_log=$out/logs/broker-${cfg_name[i]}-$tag.log
	if ! bench_start_sluiced "${cfg_exe[i]}" "$work/data-$tag" "$session_log" "${cfg_cores[i]}" "$partitions" \
		${extra[@]+"${extra[@]}"}; then
		broker_pid=$bench_pid
		tail -n 30 "$session_log" >&2
		exit 1
	fi
	broker_pid=$bench_pid bootstrap=$bench_bootstrap
	echo "sluiced ${cfg_name[i]} ($tag): pid $broker_pid on $bootstrap"
}
session_down() {
	bench_stop_sluiced "$broker_pid"
	broker_pid=""
	[ "$keep" = 1 ] || rm -rf "$work"/data-*
}

# ---- one run ----------------------------------------------------------------------
results_header="label,workload,mode,kind,t_s,records,bytes,rec_per_s,mb_per_s,avg_ms,p50_ms,p95_ms,p99_ms,p999_ms,max_ms,errors,offered_rate,commit_p50_ms,commit_p99_ms,broker_cpu_ms_per_mib"
echo "$results_header" >"$out/results.csv"
echo "label,config,name,round,tool,workload,mode,size,offered_rate,rc,wall_s,broker_cpu_pct,broker_disk_mb_per_s,other_cpu_pct,client_cpu_s,commits,aborts,checksum,command" >"$out/runs.csv"
clk_tck=$(getconf CLK_TCK)
failures=0 ref_samples=""

# merge_csv FILE: appends FILE's rows to results.csv, mapped onto its columns by
# name (a header line may repeat; a column the tool lacks stays empty).
merge_csv() {
	awk -F, -v hdr="$results_header" 'BEGIN { n = split(hdr, want, ",") }
		$1 == "label" { delete at; for (i = 1; i <= NF; i++) at[$i] = i; next }
		NF > 1 { row = ""; for (i = 1; i <= n; i++) row = row (i > 1 ? "," : "") (want[i] in at ? $(at[want[i]]) : "")
		         print row }' "$1" >>"$out/results.csv"
}

# median LIST: the median of space-separated numbers.
median() { tr ' ' '\n' <<<"$1" | sort -g | awk 'NF { v[++n] = $1 } END {
	if (n) printf "%.1f\n", n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }'; }

# run_one I ROUND NAME: one workload against the current session's broker.
run_one() {
	local i=$1 round=$2 name=$3 cname=${cfg_name[$1]} tool=sluice-bench workload mode size=1024 rate=0
	local label="$cname.$name.r$round" topic="sb$runid-$cname-$name-r$round" line rc=0 count=""
	local limit=$((seconds * 6 + 30)) run_s=$((seconds + warmup))
	local csv="$out/logs/$label.csv" log="$out/logs/$label"
	local -a cmd=() common=(--bootstrap "$bootstrap" --partitions "$partitions" --warmup "$warmup"
		--duration "$seconds" --interval "$interval" --label "$label" --csv "$csv")
	case "$name" in
	produce-plain-1k) workload=produce mode=plain cmd=("${shape[@]}") ;;
	produce-idem-1k) workload=produce mode=idempotent cmd=("${shape[@]}") ;;
	produce-txn-1k) workload=produce mode=transactional
		cmd=("${shape[@]}" --txn-records "$txn_records" --txn-id "sb$runid-$cname-r$round") ;;
	produce-plain-100) workload=produce mode=plain size=100 cmd=("${shape[@]}") ;;
	consume-uncommitted|consume-committed) workload=consume mode=plain size=0
		if [ -z "$last_topic" ]; then
			echo "suite.sh: $label: no produce-* ran before it on this broker, nothing to read" >&2
			failures=$((failures + 1)); return 0
		fi
		topic=$last_topic count=$last_acked
		[ "$name" = consume-uncommitted ] || count=$last_committed
		cmd=(--isolation "${name#consume-}" "${shape[@]}")
		# Read exactly what the producer left (its totals, warm-up included)
		# from the earliest offsets; --duration is then only a time limit.
		if [ -n "$count" ] && [ "$count" != 0 ]; then
			common=(--bootstrap "$bootstrap" --count "$count" --duration "$limit"
				--interval "$interval" --label "$label" --csv "$csv")
			run_s=$limit
		fi ;;
	e2e-1k) workload=e2e mode=plain
		# One record in flight at a time, as Kafka's EndToEndLatency tool does:
		# the time through the broker alone, without queueing in the client.
		cmd=(--connections 1 --inflight 1 --batch-records 1) ;;
	open-*) workload=produce mode=idempotent
		if [ -z "$ref_rate" ]; then ref_rate=$(median "$ref_samples"); fi
		if [ -z "$ref_rate" ]; then
			echo "suite.sh: $label: no reference rate (run produce-idem-1k first or give --ref-rate)" >&2
			failures=$((failures + 1)); return 0
		fi
		rate=$(awk -v r="$ref_rate" -v p="${name#open-}" 'BEGIN { printf "%d", r * p / 100 + 0.5 }')
		cmd=("${shape[@]}" --rate "$rate") ;;
	rdk-produce-1k) tool=sluice-rdk-bench workload=produce mode=plain
		[ -x "$rdk" ] || { echo "suite.sh: $label skipped: no sluice-rdk-bench"; return 0; } ;;
	*) echo "suite.sh: unknown workload $name" >&2; exit 2 ;;
	esac
	# sluice-bench's own broker CPU figure (per MiB, over the measured window
	# only) for a broker started here; runs.csv's broker_cpu_pct spans the whole run.
	[ -z "$broker_pid" ] || common+=(--broker-pid "$broker_pid")
	if [ "$tool" = sluice-rdk-bench ]; then
		cmd=("$rdk" --bootstrap "$bootstrap" --topic "$topic" --partitions "$partitions" --size "$size"
			--seconds "$seconds" --warmup-seconds "$warmup" --acks all)
	elif [ "$workload" = consume ]; then
		cmd=("$sbench" --workload consume --topic "$topic" "${common[@]}" "${cmd[@]}" ${bench_args[@]+"${bench_args[@]}"})
	else
		cmd=("$sbench" --workload "$workload" --mode "$mode" --topic "$topic" --create --size "$size" --acks -1
			"${common[@]}" ${cmd[@]+"${cmd[@]}"} ${bench_args[@]+"${bench_args[@]}"})
	fi
	if [ -n "$broker_pid" ] && ! kill -0 "$broker_pid" 2>/dev/null; then
		echo "suite.sh: $label: sluiced is gone (see $session_log)" >&2
		failures=$((failures + 1)); return 0
	fi
	local c0=0 w0=0 c1=0 w1=0 b0 b1 k0 k1 t0 t1 guard
	guard=$(awk -v d="$run_s" 'BEGIN { printf "%d", d + 90 }')
	[ -z "$broker_pid" ] || { c0=$(bench_cpu_ticks "$broker_pid"); w0=$(bench_io_bytes "$broker_pid"); }
	b0=$(bench_busy_ticks) k0=$(bench_child_ticks) t0=$(date +%s.%N)
	timeout --kill-after=10 "$guard" "${cmd[@]}" >"$log.out" 2>"$log.err" || rc=$?
	t1=$(date +%s.%N) k1=$(bench_child_ticks) b1=$(bench_busy_ticks)
	[ -z "$broker_pid" ] || { c1=$(bench_cpu_ticks "$broker_pid" 2>/dev/null || echo "$c0"); w1=$(bench_io_bytes "$broker_pid"); }
	line=$(grep '^RESULT' "$log.out" | tail -n 1 || true)
	[ -n "$line" ] || [ "$rc" != 0 ] || rc=1
	# Broker CPU (100 = one core) and disk writes over the run's wall time;
	# other_cpu_pct: busy CPU neither the broker nor the client used, i.e. other
	# work on the machine plus kernel work charged to no process (jbd2, softirq).
	local stats
	stats=$(awk -v c="$((c1 - c0))" -v hz="$clk_tck" -v w="$((w1 - w0))" -v b="$((b1 - b0))" -v k="$((k1 - k0))" \
		-v t0="$t0" -v t1="$t1" -v ext="$([ -n "$broker_pid" ] && echo 0 || echo 1)" 'BEGIN {
		t = t1 - t0; o = 100 * (b - c - k) / hz / t
		if (ext) printf "%.1f,,,,%.2f", t, k / hz
		else printf "%.1f,%.0f,%.1f,%.0f,%.2f", t, 100 * c / hz / t, w / t / 1048576, o < 0 ? 0 : o, k / hz }')
	local qcmd="${cmd[*]}"
	echo "$label,$cname,$name,$round,$tool,$workload,$mode,$size,$rate,$rc,$stats,$(bench_kv "$line" commits),$(bench_kv "$line" aborts),$(bench_kv "$line" checksum),\"${qcmd//\"/\"\"}\"" >>"$out/runs.csv"
	if [ "$rc" != 0 ]; then
		echo "suite.sh: $label FAILED (exit $rc); last lines of its output:" >&2
		tail -n 5 "$log.out" "$log.err" >&2
		failures=$((failures + 1))
		return 0
	fi
	if [ "$tool" = sluice-rdk-bench ]; then
		# librdkafka's RESULT line as one summary row of results.csv.
		local k row
		row="$label,produce,plain,summary,$(bench_kv "$line" seconds),$(bench_kv "$line" records)"
		row="$row,$(($(bench_kv "$line" records) * size))"
		for k in records_per_sec mb_per_sec avg_ms p50_ms p95_ms p99_ms p999_ms max_ms errors; do
			row="$row,$(bench_kv "$line" "$k")"
		done
		echo "$row,0,,," >>"$out/results.csv"
	else
		[ -s "$csv" ] && merge_csv "$csv"
		grep -q "^$label,.*,summary," "$out/results.csv" ||
			{ echo "suite.sh: $label: no summary row in its CSV ($csv)" >&2; failures=$((failures + 1)); }
	fi
	if [ "$workload" = produce ]; then
		last_topic=$topic
		# sluice-bench's totals line on stderr (warm-up included); librdkafka has none.
		local totals
		totals=$(grep '^# totals' "$log.err" | tail -n 1 || true)
		last_acked=$(bench_kv "$totals" acked) last_committed=$(bench_kv "$totals" committed)
	fi
	[ "$name" = produce-idem-1k ] && [ "$i" = 0 ] && ref_samples="$ref_samples $(bench_kv "$line" rec_per_sec)"
	printf '  %-40s %s\n' "$label" "$(grep -v '^RESULT' "$log.out" | tail -n 1 || true)"
	return 0
}

# run_list I ROUND LIST: the comma-separated workloads, in order.
run_list() { local w; for w in ${3//,/ }; do run_one "$1" "$2" "$w"; done; }

# ---- the plan ---------------------------------------------------------------------
case "$mode" in
standard)
	if [ -n "$workloads" ]; then
		for r in $(seq "$rounds"); do session_up 0 "r$r"; run_list 0 "$r" "$workloads"; session_down; done
	else
		for r in $(seq "$rounds"); do
			session_up 0 "r$r"
			run_list 0 "$r" "$per_round"
			[ "$r" != "$rounds" ] || run_list 0 "$r" "$last_round"
			session_down
		done
		session_up 0 latency
		run_list 0 1 "$once"
		run_one 0 1 rdk-produce-1k
		session_down
	fi ;;
compare)
	for r in $(seq "$rounds"); do
		for i in 0 1; do session_up "$i" "r$r"; run_list "$i" "$r" "$workloads"; session_down; done
	done ;;
esac
meta "load at end" "$(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$ref_rate" ] || meta "open-loop reference" "$ref_rate records/s (100 %)"

python3 "$here/report.py" "$out" || { echo "suite.sh: report.py failed" >&2; exit 1; }
cat "$out/summary.txt"
echo "wrote $out/{results.csv,limits.csv,runs.csv,summary.txt,report.html}"
if [ "$failures" != 0 ]; then
	echo "suite.sh: $failures run(s) failed" >&2
	exit 1
fi
