#!/usr/bin/env bash
# group_static.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_GROUP SLUICE_ADMIN
#
# Static membership (KIP-345, librdkafka group.instance.id): two static
# consumers A and B share a 6-partition topic. A stops (a static member sends
# no LeaveGroup, so the group keeps its place) and is restarted as A2 with
# the same instance id within the session timeout: A2 gets A's partitions
# back, B sees no rebalance (no new assignment, no revoke), and every record
# is processed and committed exactly once across A, A2 and B. Then A2 is
# stopped and not restarted: after the session timeout the group rebalances
# and B takes everything.
. "$(dirname "$0")/lib.sh"
integ_init group-static 61 "$@"
need_exe "$RDK_LOAD"
RDK_GROUP=$(abs_path "${4:-}")
ADMIN=$(abs_path "${5:-}")
need_exe "$RDK_GROUP"
need_exe "$ADMIN"
TOPIC=gstat
GROUP=gstat-g
SESSION_MS=6000
COUNT=900

consumer() {   # NAME INSTANCE OUT PEER ARGS...: one static consumer in the background, pid in CPID
	local name=$1 inst=$2 out=$3 peer=$4
	shift 4
	"$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group "$GROUP" --partitions 6 \
		--out "$WORK/$out" --peer "$WORK/$peer" --instance-id "$inst" --session-ms $SESSION_MS \
		--delay-ms 20 --timeout 90 "$@" >"$WORK/$name.log" 2>&1 &
	CPID=$!
	INTEG_CHILDREN="${INTEG_CHILDREN:-} $CPID"
}

assigns() { grep -cE '^(assigned|revoked)' "$WORK/$1.log"; }

start_broker --cores "${SLUICE_CORES:-3}"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 --count $COUNT \
	--size 50 --acks all >"$WORK/prod.log" 2>&1 || fail "rdk_load produce exited $?"

: >"$WORK/A.out"
: >"$WORK/B.out"
consumer A inst-a A.out B.out --stop-shared 60
PA=$CPID
consumer B inst-b B.out A.out --until $COUNT
PB=$CPID
wait "$PA" || fail "consumer A exited $?: $(tail -n 5 "$WORK/A.log" | tr '\n' ';')"
a_parts=$(grep '^assigned' "$WORK/A.log" | tail -n 1 | cut -d: -f2)
b_before=$(assigns B)
log "A stopped after $(wc -l <"$WORK/A.out") records; A had [$a_parts], B: $(grep -E '^(assigned|revoked)' "$WORK/B.log" | tr '\n' ';')"
grep -q "LeaveGroup" "$BROKER_LOG" && log "note: the broker log mentions LeaveGroup"

# A2: same instance id, well within the session timeout. It appends to A's
# file (B's peer); its own stop count leaves out what A did.
a_done=$(wc -l <"$WORK/A.out")
consumer A2 inst-a A.out B.out --until $((COUNT - a_done))
PA2=$CPID
deadline=$((SECONDS + 20))
until grep -q '^assigned' "$WORK/A2.log"; do
	((SECONDS < deadline)) || fail "A2 got no assignment: $(tail -n 5 "$WORK/A2.log" | tr '\n' ';')"
	kill -0 "$PA2" || fail "A2 exited early: $(tail -n 5 "$WORK/A2.log" | tr '\n' ';')"
	sleep 0.1
done
a2_parts=$(grep '^assigned' "$WORK/A2.log" | head -n 1 | cut -d: -f2)
[ "$a2_parts" = "$a_parts" ] || fail "A2 got [$a2_parts], A had [$a_parts]"
guarded "$ADMIN" --bootstrap "$BOOTSTRAP" group "$GROUP" >"$WORK/desc" 2>&1 || fail "sluice-admin: $(cat "$WORK/desc")"
grep -q "^group $GROUP state=Stable .* members=2$" "$WORK/desc" &&
	grep -q '^member .* instance=inst-a ' "$WORK/desc" && grep -q '^member .* instance=inst-b ' "$WORK/desc" ||
	fail "described: $(tr '\n' ';' <"$WORK/desc")"
sleep 2   # a rebalance would reach B's log by now
[ "$(assigns B)" -eq "$b_before" ] || fail "B saw a rebalance when A2 replaced A: $(grep -E '^(assigned|revoked)' "$WORK/B.log" | tr '\n' ';')"
log "A2 took A's place with [$a2_parts]; B saw no rebalance"

# A2 and B finish the topic together; exactly once across A, A2, B.
wait "$PA2" || fail "consumer A2 exited $?: $(tail -n 5 "$WORK/A2.log" | tr '\n' ';')"
wait "$PB" || fail "consumer B exited $?: $(tail -n 5 "$WORK/B.log" | tr '\n' ';')"
INTEG_CHILDREN=
cat "$WORK/A.out" "$WORK/B.out" | sort >"$WORK/all"
dups=$(uniq -d "$WORK/all" | head -n 3 | tr '\n' ';')
[ -z "$dups" ] || fail "processed twice: $dups"
[ "$(wc -l <"$WORK/all")" -eq $COUNT ] || fail "processed $(wc -l <"$WORK/all") of $COUNT"

# Both stopped without leaving: static members stay until their sessions time out.
guarded "$ADMIN" --bootstrap "$BOOTSTRAP" group "$GROUP" >"$WORK/desc2" 2>&1 || fail "sluice-admin: $(cat "$WORK/desc2")"
grep -q "members=2$" "$WORK/desc2" || fail "static members left at close: $(head -n 1 "$WORK/desc2")"
deadline=$((SECONDS + SESSION_MS / 1000 + 10))
while ! grep -q "^group $GROUP state=Empty .* members=0$" "$WORK/desc2"; do
	((SECONDS < deadline)) || fail "static members never expired: $(head -n 1 "$WORK/desc2")"
	sleep 0.5
	guarded "$ADMIN" --bootstrap "$BOOTSTRAP" group "$GROUP" >"$WORK/desc2" 2>&1 || fail "sluice-admin: $(cat "$WORK/desc2")"
done
stop_broker
pass "a static member restarted into its old place without a rebalance; $COUNT records exactly once"
