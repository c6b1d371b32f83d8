#!/usr/bin/env bash
# group_admin.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_GROUP SLUICE_ADMIN
#
# The admin view of consumer groups (ListGroups, DescribeGroups, OffsetFetch
# and ListOffsets through `sluice-admin groups` / `sluice-admin group G`):
#  (a) while two librdkafka consumers share a 6-partition topic, the group
#      is listed as Stable "consumer" and described with both members (client
#      id, host /127.0.0.1, 3 partitions each) and every partition's owner;
#  (b) once both have left: Empty, no members, every partition committed to
#      its end (lag 0); 60 more records: the lags add up to 60;
#  (c) after a broker SIGKILL the group is reloaded from its membership
#      record: still listed (Empty, consumer) with the same offsets and lags;
#  (d) an unknown group is Dead with no members and no offsets;
#  (e) a group that only ever made simple commits (assign() users: no
#      JoinGroup) is listed from its committed offsets, Empty, no protocol.
. "$(dirname "$0")/lib.sh"
integ_init group-admin 60 "$@"
need_exe "$RDK_LOAD"
RDK_GROUP=$(abs_path "${4:-}")
ADMIN=$(abs_path "${5:-}")
need_exe "$RDK_GROUP"
need_exe "$ADMIN"
TOPIC=gadm
GROUP=gadm-g

admin() {   # OUT ARGS...: sluice-admin into $WORK/OUT, failing on a non-zero exit
	local out=$1
	shift
	guarded "$ADMIN" --bootstrap "$BOOTSTRAP" "$@" >"$WORK/$out" 2>"$WORK/$out.err" ||
		fail "sluice-admin $* exited $?: $(cat "$WORK/$out.err")"
}

# lag_sum FILE: the lags of the offset lines, added up ("-" counts as a failure).
lag_sum() {
	awk '/^offset / { for (i = 1; i <= NF; i++) if ($i ~ /^lag=/) { v = substr($i, 5); if (v == "-") bad = 1; s += v } }
	     END { if (bad) print "unknown"; else print s + 0 }' "$1"
}

start_broker --cores "${SLUICE_CORES:-3}"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 --count 600 \
	--size 50 --acks all >"$WORK/prod1.log" 2>&1 || fail "rdk_load produce exited $?"

# (a) two members; slow enough (30 ms per record) that the group stays up a while.
: >"$WORK/A.out"
: >"$WORK/B.out"
for m in A B; do
	peer=B
	[ $m = B ] && peer=A
	"$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group "$GROUP" --partitions 6 \
		--out "$WORK/$m.out" --peer "$WORK/$peer.out" --until 600 --delay-ms 30 --timeout 60 \
		>"$WORK/$m.log" 2>&1 &
	eval "P$m=\$!"
done
INTEG_CHILDREN="$PA $PB"
deadline=$((SECONDS + 30))
while :; do
	admin desc group "$GROUP"
	if grep -q "^group $GROUP state=Stable protocol_type=consumer protocol=[a-z]* members=2$" "$WORK/desc" &&
		[ "$(grep -c '^member .* host=/127\.0\.0\.1 partitions=\([^,]*,\)\{2\}[^,]*$' "$WORK/desc")" -eq 2 ] &&
		[ "$(grep -c "^offset $TOPIC [0-5] .* member=[^-]" "$WORK/desc")" -eq 6 ]; then
		break
	fi
	((SECONDS < deadline)) || fail "(a) the group never showed 2 members with 3 partitions each: $(tr '\n' ';' <"$WORK/desc")"
	kill -0 "$PA" && kill -0 "$PB" || fail "(a) a consumer ended before the group was seen split: $(tr '\n' ';' <"$WORK/desc")"
	sleep 0.3
done
log "(a) $(tr '\n' ';' <"$WORK/desc")"
grep -q '^member .* client_id=rdkafka ' "$WORK/desc" || fail "(a) members' client id is not librdkafka's default"
admin list groups
grep -qx "$GROUP state=Stable protocol_type=consumer" "$WORK/list" || fail "(a) groups: $(tr '\n' ';' <"$WORK/list")"
wait "$PA" || fail "consumer A exited $?: $(tail -n 5 "$WORK/A.log" | tr '\n' ';')"
wait "$PB" || fail "consumer B exited $?: $(tail -n 5 "$WORK/B.log" | tr '\n' ';')"
INTEG_CHILDREN=

# (b) both left: Empty, everything committed.
admin desc group "$GROUP"
grep -q "^group $GROUP state=Empty .* members=0$" "$WORK/desc" || fail "(b) $(head -n 1 "$WORK/desc")"
[ "$(grep -c "^offset $TOPIC [0-5] committed=\([0-9]*\) end=\1 lag=0 member=-$" "$WORK/desc")" -eq 6 ] ||
	fail "(b) not every partition committed to its end: $(tr '\n' ';' <"$WORK/desc")"
ends=$(awk '/^offset / { split($5, e, "="); s += e[2] } END { print s + 0 }' "$WORK/desc")
[ "$ends" -eq 600 ] || fail "(b) end offsets add up to $ends, want 600"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 --count 60 \
	--size 50 --acks all >"$WORK/prod2.log" 2>&1 || fail "rdk_load produce (2) exited $?"
admin desc group "$GROUP"
[ "$(lag_sum "$WORK/desc")" = 60 ] || fail "(b) lags add up to $(lag_sum "$WORK/desc"), want 60: $(tr '\n' ';' <"$WORK/desc")"
cp "$WORK/desc" "$WORK/desc-before"
log "(b) Empty, lag 60 after 60 more records"

# (c) after a crash the group comes back from its membership record.
kill9_broker
start_broker --cores "${SLUICE_CORES:-3}"
admin list groups
grep -qx "$GROUP state=Empty protocol_type=consumer" "$WORK/list" || fail "(c) groups: $(tr '\n' ';' <"$WORK/list")"
admin desc group "$GROUP"
grep -q "^group $GROUP state=Empty .* members=0$" "$WORK/desc" || fail "(c) $(head -n 1 "$WORK/desc")"
diff <(grep '^offset' "$WORK/desc-before") <(grep '^offset' "$WORK/desc") >/dev/null ||
	fail "(c) offsets changed across the restart: $(diff <(grep '^offset' "$WORK/desc-before") <(grep '^offset' "$WORK/desc") | tr '\n' ';')"
log "(c) after SIGKILL: $(head -n 1 "$WORK/desc"), lag $(lag_sum "$WORK/desc")"

# (d) unknown group.
admin none group no-such-group
[ "$(cat "$WORK/none")" = "group no-such-group state=Dead protocol_type=- protocol=- members=0" ] ||
	fail "(d) $(tr '\n' ';' <"$WORK/none")"

# (e) simple commits only.
guarded "$RDK_GROUP" commit --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group gadm-simple --partitions 2 \
	--offset 7 >"$WORK/simple.log" 2>&1 || fail "(e) simple commit: $(cat "$WORK/simple.log")"
admin list groups
grep -qx "gadm-simple state=Empty protocol_type=-" "$WORK/list" || fail "(e) groups: $(tr '\n' ';' <"$WORK/list")"
admin simple group gadm-simple
[ "$(grep -c "^offset $TOPIC [01] committed=7 " "$WORK/simple")" -eq 2 ] && grep -q 'state=Empty .*members=0$' "$WORK/simple" ||
	fail "(e) described: $(tr '\n' ';' <"$WORK/simple")"
stop_broker
pass "groups listed and described with members, offsets and lag, also after a crash"
