#!/usr/bin/env bash
# group_compact_many.sh SLUICED [RDK_LOAD [SLUICE_DUMP]]
#
# Compaction of __consumer_offsets with more live offsets (10,000: 10 groups x
# 1,000 partitions) than storage queues appends per core (ST_IO_APPENDS_MAX,
# 8,192) (issue 11). Before, the compaction queued one rewrite per offset in
# one turn: past 8,192 they were lost, and the compaction kept its old
# segments ("a compaction write failed"), on every try. Now the rewrites go a
# slice at a time. Checked: the compaction is done and none failed, and
# after a SIGKILL and a restart all 10,000 offsets are loaded.
. "$(dirname "$0")/lib.sh"
integ_init group-compact-many 77 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
TXN_IDS=$(abs_path "$(dirname "$0")/txn_ids.py")
ADMIN=$(abs_path "$(dirname "$0")/admin_client.py")
PARTS=1000
GROUPS_N=10
WAIT_S=120
ARGS=(--cores "${SLUICE_CORES:-2}" --transaction-log-compact-records 1000)
start_broker "${ARGS[@]}"
guarded "$PY" "$ADMIN" create "$PORT" 1 $PARTS gcm >"$WORK/create.out" 2>&1 ||
	fail "CreateTopics of $PARTS partitions failed: $(tail -n 2 "$WORK/create.out")"
# 3 rounds: 30,000 records for 10,000 live offsets, past the threshold (2 per
# live key + 1000) in the third round
for r in 1 2 3; do
	for g in $(seq 1 $GROUPS_N); do
		got=$("$PY" "$TXN_IDS" commit --port "$PORT" --group "g$g" --topic gcm-0 --partitions $PARTS --offset $r \
			2>>"$WORK/txn_ids.err") || fail "OffsetCommit failed: $(tail -n 2 "$WORK/txn_ids.err")"
		[ "$got" = "err 0 $PARTS" ] || fail "round $r, group g$g: $got"
	done
done
deadline=$((SECONDS + WAIT_S))
until grep -q "offsets log: compaction done" "$BROKER_LOG"; do
	broker_alive || fail "broker died"
	grep -q "offsets log: a compaction write failed" "$BROKER_LOG" && break
	((SECONDS < deadline)) || fail "the compaction did not finish within ${WAIT_S}s"
	sleep 0.2
done
! grep -q "offsets log: a compaction write failed" "$BROKER_LOG" ||
	fail "a compaction write was lost: $(grep 'offsets log' "$BROKER_LOG" | tail -n 2)"
log "$(grep 'offsets log: compacting' "$BROKER_LOG" | tail -n 1 | sed 's/.*core[0-9]*: //')"
log "$(grep 'offsets log: compaction done' "$BROKER_LOG" | tail -n 1 | sed 's/.*core[0-9]*: //')"
kill9_broker
start_broker "${ARGS[@]}"
want=$((GROUPS_N * PARTS))
grep -q "group coordinator: $want committed offsets loaded" "$BROKER_LOG" ||
	fail "after the restart: $(grep 'committed offsets loaded' "$BROKER_LOG" | tail -n 1) (want $want)"
stop_broker
pass "$want offsets compacted in slices, none lost; all loaded after a SIGKILL"
