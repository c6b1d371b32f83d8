#!/usr/bin/env bash
# txn_compact_many.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# Compaction of __transaction_state with more live ids (IDS, 12,000) than
# the coordinator's write pool (DP_COORD_WRITES_MAX) and storage's append
# queue (ST_IO_APPENDS_MAX), 8,192 each (issue 11). Before, the compaction
# queued one rewrite per id in one turn: past 8,192 they were lost, the
# compaction kept its old segments ("a compaction write failed"), and did so
# again on every later try. Now the rewrites go a slice at a time. Checked:
# the compaction is done, none failed, InitProducerId of every id keeps being
# answered meanwhile, the old segments went, and after a SIGKILL and a
# restart every id is known with its epoch.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-compact-many 80 "$@"
command -v python3 >/dev/null || skip "python3 not installed"
TXN_IDS=$(abs_path "$(dirname "$0")/txn_ids.py")
IDS=12000
WAIT_S=120
tids() { python3 "$TXN_IDS" "$1" --port "$PORT" "${@:2}" 2>>"$WORK/txn_ids.err"; }
# every id of the round answered NONE
round() {
	local got
	got=$(tids init --prefix k --count $IDS) || fail "txn_ids init failed: $(tail -n 2 "$WORK/txn_ids.err")"
	[ "$got" = "err 0 $IDS" ] || fail "$1: InitProducerId of $IDS ids: $got"
}
# 3 rounds: each id at epoch 2, 36,000 records for 12,000 live ids, past the
# threshold (2 per live id + 1000) once the second round is in: the compaction
# starts during the third.
ARGS=(--cores "${SLUICE_CORES:-2}" --transaction-log-compact-records 1000)
start_broker "${ARGS[@]}"
segs0=
for r in 1 2 3; do
	round "round $r"
	[ -n "$segs0" ] || segs0=$(ls "$DATA/__transaction_state"/*.log | wc -l)
done
deadline=$((SECONDS + WAIT_S))
until grep -q "transaction log: compaction done" "$BROKER_LOG"; do
	broker_alive || fail "broker died"
	grep -q "transaction log: a compaction write failed" "$BROKER_LOG" && break
	((SECONDS < deadline)) || fail "the compaction did not finish within ${WAIT_S}s"
	sleep 0.2
done
! grep -q "a compaction write failed" "$BROKER_LOG" ||
	fail "a compaction write was lost: $(grep 'compact' "$BROKER_LOG" | tail -n 3)"
log "$(grep 'transaction log: compacting' "$BROKER_LOG" | tail -n 1 | sed 's/.*core[0-9]*: //')"
log "$(grep 'transaction log: compaction done' "$BROKER_LOG" | tail -n 1 | sed 's/.*core[0-9]*: //')"
round "after the compaction"   # epoch 3 (k-0: 4 next)
read -r _ err pid epoch <<<"$(tids ids k-0)"
[ "$err" = 0 ] && [ "$epoch" = 4 ] || fail "k-0 before the restart: err $err epoch $epoch (want 4)"
kill9_broker
start_broker "${ARGS[@]}"
grep -q "transaction coordinator: $IDS transactional ids loaded" "$BROKER_LOG" ||
	fail "the coordinator did not reload $IDS ids: $(grep 'transactional ids loaded' "$BROKER_LOG" | tail -n 1)"
read -r _ err pid2 epoch <<<"$(tids ids k-0)"
[ "$err" = 0 ] && [ "$pid2" = "$pid" ] && [ "$epoch" = 5 ] ||
	fail "k-0 after the restart: err $err pid $pid2 epoch $epoch (want pid $pid epoch 5: it kept 4)"
for id in k-5000 k-$((IDS - 1)); do
	read -r _ err _ epoch <<<"$(tids ids "$id")"
	[ "$err" = 0 ] && [ "$epoch" = 4 ] || fail "$id after the restart: err $err epoch $epoch (want 4: it kept 3)"
done
stop_broker
pass "$IDS ids compacted in slices, none lost; every id kept its epoch across a SIGKILL"
