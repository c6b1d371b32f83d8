#!/usr/bin/env bash
# txn_id_expiry.sh SLUICED RDK_LOAD SLUICE_DUMP SLUICE_ADMIN
#
# Issue 10 item 9: transactional ids are bounded in number and expire as
# Kafka's transactional.id.expiration.ms does (txn_ids.py sends
# InitProducerId for thousands of ids over one connection):
#  (a) with --transactional-ids-max 5000, a new id beyond is answered
#      COORDINATOR_LOAD_IN_PROGRESS (retriable) and known ids are still
#      served; one id (live) is given an open transaction; sluice-admin
#      (ListTransactions, DescribeTransactions) lists every id, live as
#      Ongoing (the answer is ~40 times the request's own memory: the call
#      is sent again in a larger one; before, it was answered
#      UNKNOWN_SERVER_ERROR, and before that not at all);
#  (b) restarted with --transactional-id-expiration-ms 3000: the ids loaded
#      from __transaction_state expire (they were idle through the restart)
#      and make room: a new id is admitted again;
#  (c) memory: ROUNDS rounds of 4,800 new ids (38,400 in all), each round
#      admitted once the one before has expired: the broker's VmRSS after
#      the last round is within RSS_GROWTH_MAX_KB of the first (it grew by
#      ~10 KB per id before, with no bound);
#  (d) restarted with a 10-minute expiration (so nothing expires during the
#      check), after __transaction_state was compacted: an expired id is
#      gone (InitProducerId gives it a new producer id, epoch 0: its
#      tombstone held), and live, with its open transaction, is kept (same
#      producer id) however long it was idle.
. "$(dirname "$0")/lib.sh"
integ_init txn-id-expiry 72 "$@"
need_exe "$RDK_LOAD"
SLUICE_ADMIN=$(abs_path "${4:-}")
need_exe "$SLUICE_ADMIN"
command -v python3 >/dev/null || skip "python3 not installed"
TXN_IDS=$(abs_path "$(dirname "$0")/txn_ids.py")
MAX=5000
EXP_MS=3000
ROUNDS=8
PER_ROUND=4800
RSS_GROWTH_MAX_KB=$((24 * 1024))
WAIT_S=120
T=txe

tids() { python3 "$TXN_IDS" "$1" --port "$PORT" "${@:2}" 2>>"$WORK/txn_ids.err"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$BROKER_PID/status"; }

# one ID: "ERR PID EPOCH" of an InitProducerId for it.
one() {
	local out
	out=$(tids ids "$1") || fail "txn_ids ids $1 failed: $(tail -n 2 "$WORK/txn_ids.err")"
	echo "${out#"$1" }"
}

# (a)
start_broker --cores "${SLUICE_CORES:-2}" --transactional-ids-max $MAX --transactional-id-expiration-ms 600000 \
	--transaction-log-compact-records 4000
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic $T --partitions 1 --count 1 --acks all \
	>"$WORK/prod.log" 2>&1 || fail "rdk_load produce exited $?"
read -r err LIVE_PID LIVE_EPOCH <<<"$(one live)"
[ "$err" = 0 ] || fail "(a) InitProducerId of live answered $err"
got=$(tids begin --id live --pid "$LIVE_PID" --epoch "$LIVE_EPOCH" --topic $T)
[ "$got" = "added 0" ] || fail "(a) AddPartitionsToTxn of live: $got"
got=$(tids init --prefix a --count $((MAX - 1))) || fail "(a) txn_ids init failed: $(tail -n 2 "$WORK/txn_ids.err")"
[ "$got" = "err 0 $((MAX - 1))" ] || fail "(a) $((MAX - 1)) new ids (live is one more): $got"
got=$(tids init --prefix b --count 50)
[ "$got" = "err 14 50" ] || fail "(a) 50 ids beyond the $MAX tracked: want all COORDINATOR_LOAD_IN_PROGRESS, got $got"
read -r err A0_PID A0_EPOCH <<<"$(one a-0)"
[ "$err" = 0 ] && ((A0_EPOCH == 1)) || fail "(a) a known id while full: $err $A0_PID $A0_EPOCH"
grep -q "transactional ids tracked (the most)" "$BROKER_LOG" || fail "(a) no warning that the table is full"
timeout 60 "$SLUICE_ADMIN" --bootstrap "$BOOTSTRAP" transactions >"$WORK/admin.out" 2>"$WORK/admin.err" ||
	fail "(a) sluice-admin transactions with $MAX ids exited $?: $(tail -n 1 "$WORK/admin.err")"
n=$(grep -c ' producer_id=' "$WORK/admin.out")
((n == MAX)) || fail "(a) sluice-admin transactions listed $n ids, want $MAX"
grep -q "^live producer_id=$LIVE_PID epoch=$LIVE_EPOCH state=Ongoing .*partitions=$T-0\$" "$WORK/admin.out" ||
	fail "(a) live is not listed Ongoing in $T-0: $(grep '^live ' "$WORK/admin.out")"
log "(a) sluice-admin transactions: $n ids listed and described"
log "(a) $MAX ids tracked; 50 more answered COORDINATOR_LOAD_IN_PROGRESS; a-0 (pid $A0_PID) bumped to epoch 1; live (pid $LIVE_PID) has a transaction open"
stop_broker

# (b)
start_broker --cores "${SLUICE_CORES:-2}" --transactional-ids-max $MAX --transactional-id-expiration-ms $EXP_MS \
	--transaction-log-compact-records 4000
deadline=$((SECONDS + WAIT_S))
until [ "$(one b-0 | cut -d' ' -f1)" = 0 ]; do
	broker_alive || fail "(b) broker died"
	((SECONDS < deadline)) || fail "(b) no room for a new id ${WAIT_S}s after the restart: nothing expired"
	sleep 0.5
done
# An id leaves the table when its tombstone is queued, mid-pass; the pass logs its count at its
# end (a tick or more later): wait for the line.
log_wait 1 "transactional ids expired \(unused for $EXP_MS ms\)" || fail "(b) no expiry logged"
log "(b) after the restart the idle ids expired: $(grep 'transactional ids expired' "$BROKER_LOG" | tail -n 1 | sed 's/.*coordinator: //')"

# (c)
rss0=
peak=0
for ((r = 1; r <= ROUNDS; r++)); do
	deadline=$((SECONDS + WAIT_S))
	until got=$(tids init --prefix "r$r" --count $PER_ROUND) && [ "$got" = "err 0 $PER_ROUND" ]; do
		broker_alive || fail "(c) broker died"
		((SECONDS < deadline)) || fail "(c) round $r: not all $PER_ROUND ids admitted in ${WAIT_S}s: $got"
		sleep 0.5
	done
	rss=$(rss_kb)
	[ -n "$rss0" ] || rss0=$rss
	((rss - rss0 > peak)) && peak=$((rss - rss0))
	log "(c) round $r: $PER_ROUND new ids admitted, VmRSS $rss kB"
done
((peak <= RSS_GROWTH_MAX_KB)) ||
	fail "(c) VmRSS grew by $peak kB over $(((ROUNDS - 1) * PER_ROUND)) ids after the first round (at most $RSS_GROWTH_MAX_KB)"
log "(c) $((ROUNDS * PER_ROUND)) ids in $ROUNDS rounds: VmRSS at most $peak kB above the first round's $rss0 kB"
deadline=$((SECONDS + WAIT_S))
until grep -q "transaction log: compaction done" "$BROKER_LOG"; do
	((SECONDS < deadline)) || fail "(c) __transaction_state was never compacted"
	sleep 0.2
done
stop_broker

# (d)
start_broker --cores "${SLUICE_CORES:-2}" --transactional-id-expiration-ms 600000
read -r err pid epoch <<<"$(one a-0)"
[ "$err" = 0 ] && [ "$pid" != "$A0_PID" ] && [ "$epoch" = 0 ] ||
	fail "(d) the expired a-0 came back after the restart: pid $pid epoch $epoch (was pid $A0_PID)"
a0="pid $pid epoch $epoch"
read -r err pid epoch <<<"$(one live)"
[ "$err" = 0 ] && [ "$pid" = "$LIVE_PID" ] ||
	fail "(d) live, with its transaction open, was not kept: err $err pid $pid (was $LIVE_PID)"
log "(d) after compaction and a restart: a-0 is new ($a0, was pid $A0_PID), live kept its pid $LIVE_PID (epoch $epoch)"
stop_broker
pass "transactional ids bounded ($MAX) and expired (${EXP_MS} ms), across restarts and compaction"
