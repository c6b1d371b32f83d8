#!/usr/bin/env bash
# group_pool.sh SLUICED
#
# The group coordinator's state pool (--group-state-mib, dp_limits.h): a broker
# with a 1 MiB pool takes simple OffsetCommits of new keys until the pool is
# spent, then answers those COORDINATOR_NOT_AVAILABLE (15, retriable) and
# keeps running; a group committing its known keys again is still served (in
# place, no memory). After a SIGKILL and a restart the broker loads exactly
# the offsets it acknowledged: an entry is made before its record is written,
# so no durable record is missing from the table and no refused one is on
# disk. Deleting groups gives their memory back: a group's commits are taken
# again.
. "$(dirname "$0")/lib.sh"
integ_init group-pool 77 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
TXN_IDS=$(abs_path "$(dirname "$0")/txn_ids.py")
ADMIN=$(abs_path "$(dirname "$0")/admin_client.py")
PARTS=1000
ARGS=(--cores "${SLUICE_CORES:-2}" --group-state-mib 1)
start_broker "${ARGS[@]}"
guarded "$PY" "$ADMIN" create "$PORT" 1 $PARTS gp >"$WORK/create.out" 2>&1 ||
	fail "CreateTopics of $PARTS partitions failed: $(tail -n 2 "$WORK/create.out")"

# commit GROUP OFFSET: sets OK and REFUSED to the partitions answered 0 and 15.
commit() {
	local out err n
	out=$("$PY" "$TXN_IDS" commit --port "$PORT" --group "$1" --topic gp-0 --partitions $PARTS --offset "$2" \
		2>>"$WORK/txn_ids.err") || fail "OffsetCommit of $1 failed: $(tail -n 2 "$WORK/txn_ids.err")"
	OK=0 REFUSED=0
	while read -r _ err n; do
		case $err in
		0) OK=$n ;;
		15) REFUSED=$n ;;
		*) fail "OffsetCommit of $1: error $err for $n partitions" ;;
		esac
	done <<<"$out"
}

acked=0 g=0 refused_groups=0
# Two-character group names (g1..g9) first, so that deleting some of them frees blocks of the
# size a two-character group's offsets take again.
while ((refused_groups < 2)); do
	((++g <= 60)) || fail "60 groups of $PARTS offsets each were taken by a 1 MiB pool"
	commit "g$g" 1
	acked=$((acked + OK))
	((REFUSED == 0)) || refused_groups=$((refused_groups + 1))
done
((acked >= 2 * PARTS)) || fail "only $acked offsets were taken before the pool refused"
grep -q "the group state pool is full" "$BROKER_LOG" || fail "the refusals were not logged"
log "$acked offsets taken, then new keys refused (group g$g)"
broker_alive || fail "broker died"
commit g1 2
((OK == PARTS)) || fail "a known group's commit with the pool spent: $OK taken, $REFUSED refused"

kill9_broker
start_broker "${ARGS[@]}"
grep -q "group coordinator: $acked committed offsets loaded" "$BROKER_LOG" ||
	fail "after the restart: $(grep 'committed offsets loaded' "$BROKER_LOG" | tail -n 1) (want $acked)"

guarded "$PY" "$ADMIN" delgroups "$PORT" g1 g2 g3 >"$WORK/del.out" 2>&1 ||
	fail "DeleteGroups failed: $(tail -n 2 "$WORK/del.out")"
[ "$(awk '$2 != 0' "$WORK/del.out")" = "" ] || fail "DeleteGroups: $(cat "$WORK/del.out")"
commit g2 3
((OK == PARTS)) || fail "after deleting 3 groups, a group's commit: $OK taken, $REFUSED refused"
stop_broker
pass "$acked offsets in a 1 MiB pool, new keys then refused retriably, known ones taken; all loaded after a SIGKILL; deleted groups gave the room back"
