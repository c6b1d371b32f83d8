#!/usr/bin/env bash
# bench/modes.sh: what idempotence and transactions cost, measured as ratios
# inside one run so the machine's noise hits every mode alike.
#
# One sluiced (data dir on the repo's filesystem, fsync on), then rounds of
#   plain | idempotent | transactional 10 | 100 | 1000 records per transaction
# with librdkafka (sluice-rdk-bench, 1 KiB records, acks=all, 6 partitions),
# the modes interleaved round by round (A B C D E A B C D E ...). Reports the
# median MB/s of each mode, idempotent/plain and transactional/idempotent
# ratios with their spread over rounds, and the commit latency.
# No speed is asserted: it fails only when something did not run.
#
# usage: bench/modes.sh [--sluiced PATH] [--bench PATH] [--cores N] [--rounds R]
#                       [--seconds D] [--size B] [--quick] [--out DIR]
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
sluiced="" bench="" out="" cores=2 rounds=3 seconds=5 size=1024 warmup=1
while [ $# -gt 0 ]; do
	case "$1" in
	--sluiced) sluiced=$2; shift ;;
	--bench) bench=$2; shift ;;
	--cores) cores=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--seconds) seconds=$2; shift ;;
	--size) size=$2; shift ;;
	--out) out=$2; shift ;;
	--quick) rounds=1 seconds=1 warmup=0 ;;
	-h|--help) sed -n '2,15p' "$0"; exit 0 ;;
	*) echo "modes.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
for b in "$repo/build"; do
	[ -z "$sluiced" ] && [ -x "$b/dataplane/sluiced" ] && sluiced=$b/dataplane/sluiced
	[ -z "$bench" ] && [ -x "$b/bench/sluice-rdk-bench" ] && bench=$b/bench/sluice-rdk-bench
done
[ -x "$sluiced" ] && [ -x "$bench" ] || { echo "modes.sh: pass --sluiced and --bench" >&2; exit 2; }

work=$(mktemp -d "$(dirname "$(dirname "$(readlink -f "$sluiced")")")/sluice-modes.XXXXXX")
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
port=$((20000 + RANDOM % 12000))   # below the ephemeral ports (32768 up)
"$sluiced" --listen "127.0.0.1:$port" --data "$work/data" --cores "$cores" --partitions 6 \
	>"$work/broker.log" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q 'listening on' "$work/broker.log" && break; sleep 0.1; done
grep -q 'listening on' "$work/broker.log" || { cat "$work/broker.log" >&2; exit 1; }

modes=(plain idempotent txn10 txn100 txn1000)
declare -A args=([plain]="" [idempotent]="--idempotence" [txn10]="--transactional 10"
                 [txn100]="--transactional 100" [txn1000]="--transactional 1000")
csv=$work/modes.csv
echo "round,mode,mb_per_sec,records_per_sec,p50_ms,commit_p50_ms,commit_p99_ms" >"$csv"
kv() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p" | head -n 1; }
echo "# sluice modes bench $(date -u '+%F %T UTC'), nproc=$(nproc), $(uname -r), load $(cut -d' ' -f1 /proc/loadavg)"
echo "# sluiced --cores $cores, fsync on; sluice-rdk-bench --size $size --partitions 6 --acks all --seconds $seconds, $rounds round(s) interleaved"
for r in $(seq "$rounds"); do
	for m in "${modes[@]}"; do
		# shellcheck disable=SC2086
		line=$("$bench" --bootstrap "127.0.0.1:$port" --topic "modes-$m" --partitions 6 --size "$size" \
			--seconds "$seconds" --warmup-seconds "$warmup" --acks all ${args[$m]} 2>"$work/err" |
			grep '^RESULT') || { cat "$work/err" >&2; echo "modes.sh: $m failed" >&2; exit 1; }
		echo "$r,$m,$(kv "$line" mb_per_sec),$(kv "$line" records_per_sec),$(kv "$line" p50_ms),$(kv "$line" commit_p50_ms),$(kv "$line" commit_p99_ms)" >>"$csv"
		printf '  round %d %-11s %8.2f MB/s  commit p50 %s ms\n' "$r" "$m" "$(kv "$line" mb_per_sec)" "$(kv "$line" commit_p50_ms)"
	done
done
# Ratios per round (each against the same round's baseline), then median and spread.
awk -F, 'NR > 1 { mb[$1, $2] = $3; c50[$2] = c50[$2] " " $6; rounds[$1] = 1 }
function median(s,   n, a, i, j, t) { n = split(s, a, " ");
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
function summary(name, s,   n, a, i, lo, hi) { n = split(s, a, " "); lo = hi = a[1];
	for (i = 2; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
	printf "%-28s %.3f  (range %.3f..%.3f over %d round(s))\n", name, median(s), lo, hi, n }
END {
	split("plain idempotent txn10 txn100 txn1000", ms, " ")
	for (k = 1; k <= 5; k++) { s = ""; for (r in rounds) s = s " " mb[r, ms[k]]; printf "median %-11s %8.2f MB/s, commit p50 %s ms\n", ms[k], median(s), (ms[k] ~ /txn/ ? sprintf("%.3f", median(c50[ms[k]])) : "-") }
	s = ""; for (r in rounds) s = s " " mb[r, "idempotent"] / mb[r, "plain"]; summary("idempotent / plain", s)
	for (k = 3; k <= 5; k++) { s = ""; for (r in rounds) s = s " " mb[r, ms[k]] / mb[r, "idempotent"]; summary(ms[k] " / idempotent", s) }
}' "$csv"
if [ -n "$out" ]; then mkdir -p "$out"; cp "$csv" "$out/"; fi
echo "RESULT tool=modes.sh rounds=$rounds size=$size"
