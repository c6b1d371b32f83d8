#!/usr/bin/env bash
# group_restart.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_GROUP SLUICE_ADMIN
#
# Group membership survives a broker crash: two librdkafka consumers share
# a 6-partition topic (3 partitions each). The broker is SIGKILLed and
# restarted under them; it reloads the group (Stable, same generation,
# members and assignments) from __consumer_offsets, so the consumers'
# heartbeats and commits go on and neither sees a rebalance. Every record is
# processed and committed exactly once across the two.
. "$(dirname "$0")/lib.sh"
integ_init group-restart 63 "$@"
need_exe "$RDK_LOAD"
RDK_GROUP=$(abs_path "${4:-}")
ADMIN=$(abs_path "${5:-}")
need_exe "$RDK_GROUP"
need_exe "$ADMIN"
TOPIC=grst
GROUP=grst-g
COUNT=1200

rebalances() { grep -cE '^(assigned|revoked)' "$WORK/$1.log"; }

start_broker --cores "${SLUICE_CORES:-3}"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 --count $COUNT \
	--size 50 --acks all >"$WORK/prod.log" 2>&1 || fail "rdk_load produce exited $?"
: >"$WORK/A.out"
: >"$WORK/B.out"
for m in A B; do
	peer=B
	[ $m = B ] && peer=A
	"$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group "$GROUP" --partitions 6 \
		--out "$WORK/$m.out" --peer "$WORK/$peer.out" --until $COUNT --delay-ms 20 --timeout 90 \
		--session-ms 10000 >"$WORK/$m.log" 2>&1 &
	eval "P$m=\$!"
done
INTEG_CHILDREN="$PA $PB"
deadline=$((SECONDS + 30))
until grep -q '^assigned 3 partitions' "$WORK/A.log" && grep -q '^assigned 3 partitions' "$WORK/B.log" &&
	[ "$(wc -l <"$WORK/A.out")" -gt 20 ] && [ "$(wc -l <"$WORK/B.out")" -gt 20 ]; do
	((SECONDS < deadline)) || fail "the consumers never shared the topic: $(tail -n 3 "$WORK/A.log" "$WORK/B.log" | tr '\n' ';')"
	sleep 0.1
done
sleep 0.5   # let the Stable group's record reach the disk (it is written when the group settles)
ra=$(rebalances A)
rb=$(rebalances B)
kill9_broker
start_broker --cores "${SLUICE_CORES:-3}"
grep -q "group coordinator: .* 1 groups (1 Stable)" "$BROKER_LOG" ||
	fail "the Stable group was not reloaded: $(grep 'group coordinator:' "$BROKER_LOG" | tail -n 1)"
guarded "$ADMIN" --bootstrap "$BOOTSTRAP" group "$GROUP" >"$WORK/desc" 2>&1 || fail "sluice-admin: $(cat "$WORK/desc")"
grep -q "^group $GROUP state=Stable .* members=2$" "$WORK/desc" || fail "after the restart: $(tr '\n' ';' <"$WORK/desc")"
log "after the restart: $(head -n 1 "$WORK/desc")"
# Both go on past the restart (20 more records each) in their old assignment.
na=$(wc -l <"$WORK/A.out")
nb=$(wc -l <"$WORK/B.out")
deadline=$((SECONDS + 30))
until [ "$(wc -l <"$WORK/A.out")" -gt $((na + 20)) ] && [ "$(wc -l <"$WORK/B.out")" -gt $((nb + 20)) ]; do
	((SECONDS < deadline)) || fail "the consumers did not go on after the restart: $(tail -n 3 "$WORK/A.log" "$WORK/B.log" | tr '\n' ';')"
	sleep 0.1
done
[ "$(rebalances A)" -eq "$ra" ] && [ "$(rebalances B)" -eq "$rb" ] ||
	fail "a consumer saw a rebalance across the restart: A: $(grep -E '^(assigned|revoked)' "$WORK/A.log" | tr '\n' ';') B: $(grep -E '^(assigned|revoked)' "$WORK/B.log" | tr '\n' ';')"
wait "$PA" || fail "consumer A exited $?: $(tail -n 5 "$WORK/A.log" | tr '\n' ';')"
wait "$PB" || fail "consumer B exited $?: $(tail -n 5 "$WORK/B.log" | tr '\n' ';')"
INTEG_CHILDREN=
cat "$WORK/A.out" "$WORK/B.out" | sort >"$WORK/all"
dups=$(uniq -d "$WORK/all" | head -n 3 | tr '\n' ';')
[ -z "$dups" ] || fail "processed twice: $dups"
[ "$(wc -l <"$WORK/all")" -eq $COUNT ] || fail "processed $(wc -l <"$WORK/all") of $COUNT"
stop_broker
pass "two consumers carried on through a broker SIGKILL without a rebalance; $COUNT records exactly once"
