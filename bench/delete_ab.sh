#!/usr/bin/env bash
# delete_ab.sh - what a large topic's delete costs the broker's other traffic,
# two sluiced builds side by side in ONE run, A B A B.
#
#   bench/delete_ab.sh --before OLD_SLUICED --after NEW_SLUICED --bench SLUICE_BENCH
#       [--mib 2048] [--rounds 2] [--data DIR]
#
# Each run starts the build with --cores 1 (one core owns everything, so a
# stall of it shows in every request) on a fresh data directory, fills a
# 1-partition topic with --mib MiB of 1 KiB records, then, while a second
# topic takes 2,000 records/s open loop with acks=all, deletes the first
# (DeleteTopics) and reports the second's produce latency over the 12 s
# window (p99, p99.9, max) and the delete's answer time. Needs a disk file
# system for --data (default: a temp dir under /var/tmp), not tmpfs. `sync`
# runs between runs, so one's writeback does not land on the next.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
before="" after="" bench="" mib=2048 rounds=2 data=""
while (($#)); do
	case $1 in
	--before) before=$2 ;;
	--after) after=$2 ;;
	--bench) bench=$2 ;;
	--mib) mib=$2 ;;
	--rounds) rounds=$2 ;;
	--data) data=$2 ;;
	*) echo "delete_ab: unknown option $1" >&2; exit 2 ;;
	esac
	shift 2
done
[ -x "$before" ] && [ -x "$after" ] && [ -x "$bench" ] || {
	echo "usage: delete_ab.sh --before OLD_SLUICED --after NEW_SLUICED --bench SLUICE_BENCH [...]" >&2
	exit 2
}
[ -n "$data" ] || data=$(mktemp -d /var/tmp/sluice-delete-ab.XXXXXX)
admin="$here/../tests/integration/admin_client.py"

one() {   # one LABEL SLUICED
	local label=$1 sluiced=$2 dir="$data/$1" port pid probe t0 t1
	rm -rf "$dir"
	mkdir -p "$dir"
	port=$((20000 + RANDOM % 20000))
	"$sluiced" --listen "127.0.0.1:$port" --data "$dir/data" --cores 1 >"$dir/broker.log" 2>&1 &
	pid=$!
	sleep 1
	"$bench" --bootstrap "127.0.0.1:$port" --topic big-0 --create --partitions 1 --size 1024 --batch-records 256 \
		--inflight 8 --count $((mib * 1024)) --duration 300 >"$dir/fill.out" 2>&1
	"$bench" --bootstrap "127.0.0.1:$port" --topic small --create --partitions 1 --size 100 --batch-records 10 \
		--rate 2000 --duration 12 >"$dir/probe.out" 2>&1 &
	probe=$!
	sleep 4
	t0=$(date +%s%N)
	python3 "$admin" delete "$port" big 0 1 >"$dir/del.out" 2>&1
	t1=$(date +%s%N)
	wait "$probe"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	printf '%-7s delete answered in %4d ms (%s); other topic: %s\n' "$label" $(((t1 - t0) / 1000000)) \
		"$(tr '\n' ' ' <"$dir/del.out" | sed 's/ $//')" \
		"$(grep -o 'p99_ms=[0-9.]* p999_ms=[0-9.]* max_ms=[0-9.]*' "$dir/probe.out")"
	rm -rf "$dir/data"
	sync
}

for r in $(seq 1 "$rounds"); do
	one "before$r" "$before"
	one "after$r" "$after"
done
