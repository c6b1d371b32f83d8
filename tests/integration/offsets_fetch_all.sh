#!/usr/bin/env bash
# offsets_fetch_all.sh SLUICED RDK_LOAD SLUICE_DUMP SLUICE_ADMIN
#
# OffsetFetch with null topics (every offset the group committed; what
# `sluice-admin group G` sends) once the broker holds many committed offsets:
# 100 partitions' offsets in each of 11 groups. The response was sized by
# every offset the broker held (for each topic), outgrew the request's arena
# and was never answered; it must list exactly the group's own 100.
. "$(dirname "$0")/lib.sh"
integ_init offsets-fetch-all 73 "$@"
need_exe "$RDK_LOAD"
SLUICE_ADMIN=$(abs_path "${4:-}")
need_exe "$SLUICE_ADMIN"
command -v python3 >/dev/null || skip "python3 not installed"
TXN_IDS=$(abs_path "$(dirname "$0")/txn_ids.py")
T=ofa
N=100
NGROUPS=11

start_broker --cores "${SLUICE_CORES:-2}"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic $T --partitions $N --count 0 \
	>"$WORK/prod.log" 2>&1 || fail "creating $T: rdk_load exited $?"
for ((i = 1; i <= NGROUPS; i++)); do
	g=ofa-$i
	got=$(python3 "$TXN_IDS" commit --port "$PORT" --group $g --topic $T --partitions $N --offset 7) ||
		fail "OffsetCommit for $g failed"
	[ "$got" = "err 0 $N" ] || fail "OffsetCommit of $N partitions for $g: $got"
done
timeout 60 "$SLUICE_ADMIN" --bootstrap "$BOOTSTRAP" group ofa-1 >"$WORK/admin.out" 2>&1 ||
	fail "sluice-admin group ofa-1 exited $?: $(tail -n 2 "$WORK/admin.out" | tr '\n' ';')"
n=$(grep -c "^offset $T " "$WORK/admin.out")
((n == N)) || fail "sluice-admin group ofa-1 listed $n offsets, not $N: $(head -n 3 "$WORK/admin.out" | tr '\n' ';')"
grep -q "^offset $T $((N - 1)) " "$WORK/admin.out" || fail "partition $((N - 1)) missing: $(tail -n 2 "$WORK/admin.out")"
log "sluice-admin group ofa-1: $n offsets, with $((NGROUPS * N)) committed on the broker"
stop_broker
pass "OffsetFetch of every offset of a group answered with its $N of $((NGROUPS * N))"
