#!/usr/bin/env bash
# group_expiry.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_GROUP
#
# Session expiry: consumers A (session.timeout.ms 3000) and B share a
# 6-partition topic; A is frozen (SIGSTOP) mid-way and never heartbeats
# again. The coordinator's timer must expire A, and B must take over A's
# partitions from their committed offsets and finish the topic. A commits
# each message before writing its line and is single-threaded, so at most
# one committed offset can lack a line; no offset may be processed twice.
. "$(dirname "$0")/lib.sh"
integ_init group-expiry 42 "$@"
need_exe "$RDK_LOAD"
RDK_GROUP=$(abs_path "${4:-}")
need_exe "$RDK_GROUP"
TOPIC=gexp
GROUP=gx

start_broker --cores "${SLUICE_CORES:-3}"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 --count 600 \
	--size 50 --acks all >"$WORK/prod.log" 2>&1 || fail "rdk_load produce exited $?"
guarded "$RDK_GROUP" watermarks --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 6 >"$WORK/hw" ||
	fail "watermarks exited $?"
awk '{ for (o = 0; o < $2; o++) print $1, o }' "$WORK/hw" | sort >"$WORK/exp"
[ "$(wc -l <"$WORK/exp")" -eq 600 ] || fail "want 600 records"

: >"$WORK/A.out"
: >"$WORK/B.out"
"$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group "$GROUP" --partitions 6 \
	--out "$WORK/A.out" --session-ms 3000 --delay-ms 20 --timeout 50 >"$WORK/A.log" 2>&1 &
PA=$!
"$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group "$GROUP" --partitions 6 \
	--out "$WORK/B.out" --peer "$WORK/A.out" --until 600 --until-min 599 --idle-ms 3000 \
	--delay-ms 10 --timeout 50 \
	>"$WORK/B.log" 2>&1 &
PB=$!
INTEG_CHILDREN="$PA $PB"
# Freeze A once both consume from a split group.
deadline=$((SECONDS + 30))
until grep -q '^assigned 3 ' "$WORK/A.log" && [ -s "$WORK/B.out" ] && [ "$(wc -l <"$WORK/A.out")" -ge 20 ]; do
	((SECONDS < deadline)) || fail "A and B never shared the topic: A $(wc -l <"$WORK/A.out"), B $(wc -l <"$WORK/B.out")"
	broker_alive || fail "broker died"
	sleep 0.1
done
kill -STOP "$PA"
log "A frozen after $(wc -l <"$WORK/A.out") messages; B has $(wc -l <"$WORK/B.out")"
t0=$SECONDS
wait "$PB" || fail "consumer B exited $?: $(tail -n 5 "$WORK/B.log" | tr '\n' ';')"
kill -KILL "$PA" 2>/dev/null
wait "$PA" 2>/dev/null
broker_alive || fail "broker died"
grep -q '^assigned 6 ' "$WORK/B.log" || fail "B never took over all partitions"
grep -qE 'members expired' "$BROKER_LOG" || fail "the broker logged no session expiry"
log "B finished $((SECONDS - t0)) s after A froze; $(grep 'members expired' "$BROKER_LOG" | tail -n 1 | sed 's/.*group/group/')"
sort "$WORK/A.out" "$WORK/B.out" >"$WORK/AB"
dups=$(uniq -d "$WORK/AB" | head -n 5 | tr '\n' ';')
[ -z "$dups" ] || fail "offsets processed twice: $dups"
extra=$(comm -23 "$WORK/AB" "$WORK/exp" | wc -l)
missing=$(comm -13 "$WORK/AB" "$WORK/exp" | wc -l)
[ "$extra" -eq 0 ] && [ "$missing" -le 1 ] ||
	fail "$extra unexpected and $missing missing offsets (at most 1 may be committed by A without its line)"
if [ "$missing" -eq 1 ]; then
	# It must be the message A was committing when frozen: right after A's
	# last line in that partition, right before B's first.
	read -r mp mo < <(comm -13 "$WORK/AB" "$WORK/exp")
	{ [ "$mo" -eq 0 ] || grep -qx "$mp $((mo - 1))" "$WORK/A.out"; } &&
		[ "$(grep "^$mp " "$WORK/A.out" | tail -n 1)" = "$mp $((mo - 1))" -o "$mo" -eq 0 ] &&
		{ ! grep -q "^$mp " "$WORK/B.out" || [ "$(grep "^$mp " "$WORK/B.out" | head -n 1)" = "$mp $((mo + 1))" ]; } ||
		fail "offset $mp/$mo is missing, and it is not the one A was committing when frozen"
fi
stop_broker
pass "A expired after SIGSTOP; B finished the topic from the committed offsets ($missing in A's commit-to-write window)"
