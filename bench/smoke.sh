#!/usr/bin/env bash
# bench/smoke.sh - tests of sluice-bench against a real sluiced (meson suite 'bench').
#
#   smoke.sh smoke         SLUICED BENCH
#       every workload for ~2 s: produce plain/idempotent/transactional, consume
#       uncommitted/committed, e2e, an open-loop run; checks the output format
#       (interval, summary, RESULT, CSV) and that each run did something.
#   smoke.sh validate-idem SLUICED BENCH VERIFY
#       idempotent produce of N records; sluice-bench consume and librdkafka
#       (sluice-rdk-verify) must both read N records with the producer's checksum.
#   smoke.sh validate-txn  SLUICED BENCH VERIFY ADMIN
#       transactional produce with --abort-every; read_committed must see exactly
#       the committed records (count and checksum, both consumers), read_uncommitted
#       all of them, and sluice-admin must list no Ongoing transaction.
#
# Each invocation starts its own sluiced on a free port with a private data dir
# and always kills that broker, by PID, on exit. No speed is asserted.
# SLUICE_KEEP=1 keeps the work dir.

set -u -o pipefail

cmd=${1:-}
SLUICED=$(realpath "${2:-}" 2>/dev/null) || true
BENCH=$(realpath "${3:-}" 2>/dev/null) || true
VERIFY=$(realpath "${4:-}" 2>/dev/null) || true
ADMIN=$(realpath "${5:-}" 2>/dev/null) || true
BROKER_PID=
OK=0

log() { printf '[%s sb-%s] %s\n' "$(date +%T)" "$cmd" "$*" >&2; }
fail() {
	log "FAIL: $*"
	exit 1
}

cleanup() {
	local rc=$?
	if [ -n "$BROKER_PID" ]; then
		kill -KILL "$BROKER_PID" 2>/dev/null
		wait "$BROKER_PID" 2>/dev/null
	fi
	if [ "$rc" -ne 0 ] && [ "$OK" -eq 0 ]; then
		[ -f "$WORK/broker.log" ] && { log "broker log tail:"; tail -n 30 "$WORK/broker.log" >&2; }
		rm -rf "$WORK/data"
		log "exit $rc; logs kept in $WORK"
	elif [ "${SLUICE_KEEP:-0}" = 1 ]; then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}

[ -x "$SLUICED" ] && [ -x "$BENCH" ] || { echo "usage: smoke.sh CMD SLUICED BENCH [VERIFY [ADMIN]]" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench-$cmd.XXXXXX") || exit 1
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_broker() {
	local p
	for ((p = 30000 + RANDOM % 9000, n = 0; n < 200; p++, n++)); do
		port_free "$p" && break
	done
	port_free "$p" || fail "no free port"
	B=127.0.0.1:$p
	mkdir -p "$WORK/data"
	"$SLUICED" --listen "$B" --data "$WORK/data" --cores 2 --log-level info >"$WORK/broker.log" 2>&1 &
	BROKER_PID=$!
	for ((n = 0; n < 200; n++)); do
		kill -0 "$BROKER_PID" 2>/dev/null || { wait "$BROKER_PID"; BROKER_PID=; fail "sluiced exited during start-up"; }
		grep -q "listening on" "$WORK/broker.log" && { log "broker pid $BROKER_PID on $B"; return 0; }
		sleep 0.1
	done
	fail "sluiced did not start listening on $B"
}

# run NAME ARGS...: sluice-bench against the broker; stdout in NAME.out, stderr in NAME.err.
run() {
	local name=$1
	shift
	log "sluice-bench $*"
	timeout 50 "$BENCH" --bootstrap "$B" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
	local rc=$?
	kill -0 "$BROKER_PID" 2>/dev/null || fail "the broker died during $name"
	if [ "$rc" -ne 0 ]; then
		cat "$WORK/$name.out" "$WORK/$name.err" >&2
		fail "$name: sluice-bench exited $rc"
	fi
	grep '^RESULT ' "$WORK/$name.out" >&2
}

# field NAME KEY: a key=value of NAME's RESULT line.
field() { grep '^RESULT ' "$WORK/$1.out" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# total NAME KEY: a key=value of NAME's "# totals" line (stderr).
total() { grep '^# totals' "$WORK/$1.err" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

num='[0-9]+(\.[0-9]+)?'
check_format() {
	local name=$1 verb=$2
	grep -Eq "^[0-9]+ records $verb, $num records/sec \($num MB/sec\), $num ms avg latency, $num ms max latency\.$" \
		"$WORK/$name.out" || fail "$name: no interval line in the expected format"
	grep -Eq "^[0-9]+ records $verb, $num records/sec \($num MB/sec\), $num ms avg latency, $num ms max latency, $num ms 50th, $num ms 95th, $num ms 99th, $num ms 99\.9th\.$" \
		"$WORK/$name.out" || fail "$name: no summary line in the expected format"
	grep -Eq "^RESULT label=[^ ]+ workload=(produce|consume|e2e) mode=(plain|idempotent|transactional|-) records=[0-9]+ bytes=[0-9]+ seconds=$num rec_per_sec=$num mb_per_sec=$num avg_ms=$num p50_ms=$num p95_ms=$num p99_ms=$num p999_ms=$num max_ms=$num errors=[0-9]+ offered_rate=$num commits=[0-9]+ aborts=[0-9]+ commit_p50_ms=$num commit_p99_ms=$num checksum=[0-9a-f]{16}( broker_cpu_ms=$num broker_cpu_ms_per_mib=$num broker_cpu_pct=$num)?$" \
		"$WORK/$name.out" || fail "$name: RESULT line not in the expected format"
	[ "$(field "$name" records)" -gt 0 ] || fail "$name: no records measured"
}

smoke() {
	start_broker
	local csv=$WORK/runs.csv
	run plain --topic sp --create --duration 2 --interval 0.5 --csv "$csv" --label smoke-plain
	check_format plain sent
	[ "$(field plain errors)" = 0 ] || fail "plain: errors"
	[ "$(head -n 1 "$csv")" = "label,workload,mode,kind,t_s,records,bytes,rec_per_s,mb_per_s,avg_ms,p50_ms,p95_ms,p99_ms,p999_ms,max_ms,errors,offered_rate,commit_p50_ms,commit_p99_ms,broker_cpu_ms_per_mib" ] ||
		fail "CSV header"
	grep -q '^smoke-plain,produce,plain,interval,' "$csv" || fail "CSV: no interval row"
	grep -q '^smoke-plain,produce,plain,summary,' "$csv" || fail "CSV: no summary row"
	awk -F, 'NF != 20 { exit 1 }' "$csv" || fail "CSV: a row without 20 columns"
	awk -F, '$4 == "summary" && $20 != "" { exit 1 }' "$csv" || fail "CSV: a broker CPU figure without --broker-pid"

	# --broker-pid: the broker's CPU over the window, per MiB, in the RESULT line and the summary row.
	run idem --topic si --create --mode idempotent --duration 2 --interval 0.5 --connections 2 --keys random --csv "$csv" \
		--broker-pid "$BROKER_PID"
	check_format idem sent
	awk -v v="$(field idem broker_cpu_ms_per_mib)" 'BEGIN { exit !(v > 0) }' ||
		fail "idem: no positive broker_cpu_ms_per_mib with --broker-pid"
	grep -Eq "^broker pid $BROKER_PID: $num ms CPU, $num ms per MB sent, $num % of a core\.$" "$WORK/idem.out" ||
		fail "idem: no broker CPU line"
	awk -F, '$1 == "produce-idempotent" && $4 == "summary" && $20 > 0 { ok = 1 } END { exit !ok }' "$csv" ||
		fail "CSV: no broker_cpu_ms_per_mib in the summary row"
	"$BENCH" --bootstrap "$B" --topic si --broker-pid 2147483646 >/dev/null 2>&1 && fail "--broker-pid of no process accepted"
	[ "$(grep -c '^produce-idempotent,' "$csv")" -ge 2 ] || fail "CSV: rows of the second run not appended"
	[ "$(grep -c '^label,' "$csv")" = 1 ] || fail "CSV: header written twice"

	run txn --topic st --create --mode transactional --duration 2 --interval 0.5 --txn-records 300 --abort-every 4 \
		--txn-id smoke-txn --connections 2
	check_format txn sent
	[ "$(field txn commits)" -gt 0 ] && [ "$(field txn aborts)" -gt 0 ] || fail "txn: commits and aborts expected"
	# the transaction breakdown: one TXN line, the same commits, and no step of a committed one takes 0 ms
	grep -Eq "^TXN label=[^ ]+ commits=[0-9]+ commits_per_sec=$num add_p50_ms=$num add_p99_ms=$num produce_p50_ms=$num produce_p99_ms=$num end_p50_ms=$num end_p99_ms=$num txn_p50_ms=$num txn_p99_ms=$num coord_retries=[0-9]+$" \
		"$WORK/txn.out" || fail "txn: TXN line not in the expected format"
	txnf() { grep '^TXN ' "$WORK/txn.out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
	[ "$(txnf commits)" = "$(field txn commits)" ] || fail "txn: TXN commits $(txnf commits), RESULT $(field txn commits)"
	for k in add_p50_ms produce_p50_ms end_p50_ms txn_p50_ms; do
		awk -v v="$(txnf $k)" 'BEGIN { exit !(v > 0) }' || fail "txn: $k is $(txnf $k)"
	done
	! grep -q '^TXN ' "$WORK/idem.out" || fail "idem: a TXN line in an idempotent run"

	run cu --topic st --workload consume --duration 2 --interval 0.5
	check_format cu read
	run cc --topic st --workload consume --isolation committed --duration 2 --interval 0.5
	check_format cc read
	[ "$(total cc aborted_skipped)" -gt 0 ] || fail "read_committed skipped no aborted record"

	run e2e --topic se --create --workload e2e --mode idempotent --duration 2 --interval 0.5
	check_format e2e read
	[ "$(total e2e read)" = "$(total e2e acked)" ] || fail "e2e: read $(total e2e read) of $(total e2e acked) records"
	[ "$(field e2e checksum)" = "$(total e2e checksum)" ] || fail "e2e: checksum"

	run open --topic so --create --rate 20000 --duration 2 --interval 0.5 --batch-records 50
	check_format open sent
	[ "$(field open offered_rate)" = 20000 ] || fail "open loop: offered_rate"
	grep -q '^# open loop at 20000 records/s: behind_ms=' "$WORK/open.err" || fail "open loop: no behind_ms report"
}

# Validation helpers: what sluice-bench acknowledged vs what two consumers read.
verify() { # verify NAME TOPIC ISOLATION
	log "sluice-rdk-verify --topic $2 --isolation $3"
	timeout 50 "$VERIFY" --bootstrap "$B" --topic "$2" --isolation "$3" >"$WORK/$1.out" 2>"$WORK/$1.err" ||
		{ cat "$WORK/$1.err" >&2; fail "sluice-rdk-verify $2 $3"; }
	cat "$WORK/$1.out" >&2
}
vfield() { tr ' ' '\n' <"$WORK/$1.out" | sed -n "s/^$2=//p"; }

validate_idem() {
	[ -x "$VERIFY" ] || fail "no sluice-rdk-verify"
	start_broker
	local n=60000
	run prod --topic vi --create --partitions 4 --mode idempotent --count $n --connections 3 --keys seq \
		--batch-records 70
	[ "$(total prod acked)" = $n ] || fail "producer acked $(total prod acked) of $n"
	local sum
	sum=$(field prod checksum)
	run cons --topic vi --workload consume --count $n --duration 30
	[ "$(total cons read)" = $n ] && [ "$(field cons checksum)" = "$sum" ] ||
		fail "sluice-bench consume: $(total cons read) records, checksum $(field cons checksum), expected $n, $sum"
	verify rdk vi uncommitted
	[ "$(vfield rdk records)" = $n ] && [ "$(vfield rdk checksum)" = "$sum" ] ||
		fail "librdkafka read $(vfield rdk records) records, checksum $(vfield rdk checksum); expected $n, $sum"
}

validate_txn() {
	[ -x "$VERIFY" ] && [ -x "$ADMIN" ] || fail "no sluice-rdk-verify or sluice-admin"
	start_broker
	local n=60000
	run prod --topic vt --create --partitions 4 --mode transactional --count $n --connections 2 --txn-records 1000 \
		--abort-every 3 --txn-id val-txn --batch-records 100
	local acked committed sum
	acked=$(total prod acked)
	committed=$(total prod committed)
	sum=$(field prod checksum)
	[ "$acked" = $n ] || fail "producer acked $acked of $n"
	[ "$(field prod aborts)" -gt 0 ] && [ "$committed" -lt "$acked" ] && [ "$committed" -gt 0 ] ||
		fail "expected some aborted transactions: committed $committed of $acked"
	verify rdkc vt committed
	[ "$(vfield rdkc records)" = "$committed" ] && [ "$(vfield rdkc checksum)" = "$sum" ] ||
		fail "read_committed: $(vfield rdkc records) records, checksum $(vfield rdkc checksum); expected $committed, $sum"
	verify rdku vt uncommitted
	[ "$(vfield rdku records)" = "$acked" ] || fail "read_uncommitted: $(vfield rdku records) records, expected $acked"
	run cons --topic vt --workload consume --isolation committed --count "$committed" --duration 30
	[ "$(field cons checksum)" = "$sum" ] && [ "$(total cons read_beyond_count)" = 0 ] ||
		fail "sluice-bench read_committed: checksum $(field cons checksum), expected $sum"
	timeout 30 "$ADMIN" --bootstrap "$B" transactions >"$WORK/txns.out" 2>&1 || { cat "$WORK/txns.out" >&2; fail "sluice-admin"; }
	cat "$WORK/txns.out" >&2
	grep -q '^val-txn-0 ' "$WORK/txns.out" && grep -q '^val-txn-1 ' "$WORK/txns.out" ||
		fail "sluice-admin does not list the run's transactional ids"
	! grep -q 'state=Ongoing' "$WORK/txns.out" || fail "a transaction is still Ongoing after the run"
}

case "$cmd" in
smoke) smoke ;;
validate-idem) validate_idem ;;
validate-txn) validate_txn ;;
*) fail "unknown command '$cmd'" ;;
esac
OK=1
log PASS
