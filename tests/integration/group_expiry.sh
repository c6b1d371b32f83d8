#!/usr/bin/env bash
# group_expiry.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_GROUP
#
# Session expiry: consumers A (session.timeout.ms 3000) and B share a
# 6-partition topic; A is frozen (SIGSTOP) mid-way and never heartbeats
# again. The coordinator's timer must expire A, and B must take over A's
# partitions from their committed offsets and finish the topic. A commits
# each message before writing its line and is single-threaded, so at most
# one committed offset can lack a line; no offset may be processed twice.
#
# Whoever joins first holds all six partitions until the other joins, so
# both may have lines in every partition.
#
# Nothing here asserts a time: B stops when the two files hold all 600
# lines, or (A's commit-to-write window) 599 lines and nothing new for
# B_IDLE_MS. That wait is long (several rebalances, a stalled fetch on a
# loaded machine) so that B never stops before a 600th that is still to
# come, and the clients' deadlines are far above a loaded run (~15 s). On a
# failure the tails of A.log and B.log are printed too (INTEG_FAIL_LOGS).
. "$(dirname "$0")/lib.sh"
integ_init group-expiry 42 "$@"
need_exe "$RDK_LOAD"
RDK_GROUP=$(abs_path "${4:-}")
need_exe "$RDK_GROUP"
TOPIC=gexp
GROUP=gx
B_IDLE_MS=10000       # 599 lines and silence this long: the 600th is in A's commit-to-write window
CLIENT_TIMEOUT_S=90   # each consumer's own deadline (the meson timeout is 120 s)
JOIN_TIMEOUT_S=60     # for A and B to share the topic

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
	--out "$WORK/A.out" --session-ms 3000 --delay-ms 20 --timeout "$CLIENT_TIMEOUT_S" >"$WORK/A.log" 2>&1 &
PA=$!
"$RDK_GROUP" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --group "$GROUP" --partitions 6 \
	--out "$WORK/B.out" --peer "$WORK/A.out" --until 600 --until-min 599 --idle-ms "$B_IDLE_MS" \
	--delay-ms 10 --timeout "$CLIENT_TIMEOUT_S" \
	>"$WORK/B.log" 2>&1 &
PB=$!
INTEG_CHILDREN="$PA $PB"
INTEG_FAIL_LOGS="$WORK/A.log $WORK/B.log"
# Freeze A once both consume from a split group.
deadline=$((SECONDS + JOIN_TIMEOUT_S))
until grep -qs '^assigned 3 ' "$WORK/A.log" && [ -s "$WORK/B.out" ] && [ "$(wc -l <"$WORK/A.out")" -ge 20 ]; do
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
grep -q '^assigned 6 ' "$WORK/B.log" ||
	fail "B never took over all partitions: $(grep -E '^(assigned|revoked)' "$WORK/B.log" | tr '\n' ';')"
grep -qE 'members expired' "$BROKER_LOG" || fail "the broker logged no session expiry"
log "B finished $((SECONDS - t0)) s after A froze; $(grep 'members expired' "$BROKER_LOG" | tail -n 1 | sed 's/.*group/group/')"
sort "$WORK/A.out" "$WORK/B.out" >"$WORK/AB"
dups=$(uniq -d "$WORK/AB" | head -n 5 | tr '\n' ';')
[ -z "$dups" ] || fail "offsets processed twice: $dups (lines: A $(wc -l <"$WORK/A.out"), B $(wc -l <"$WORK/B.out"))"
extra=$(comm -23 "$WORK/AB" "$WORK/exp" | wc -l)
missing=$(comm -13 "$WORK/AB" "$WORK/exp" | wc -l)
[ "$extra" -eq 0 ] && [ "$missing" -le 1 ] ||
	fail "$extra unexpected and $missing missing offsets (at most 1 may be committed by A without its line):" \
		"$(comm -13 "$WORK/AB" "$WORK/exp" | head -n 5 | tr '\n' ';')"
if [ "$missing" -eq 1 ]; then
	# It must be the message A was committing when frozen: right after A's
	# last line in that partition, right before B's first line there past
	# it (B's lines there may start before A's: see the top).
	read -r mp mo < <(comm -13 "$WORK/AB" "$WORK/exp")
	a_last=$(awk -v p="$mp" '$1 == p' "$WORK/A.out" | tail -n 1)
	b_next=$(awk -v p="$mp" -v o="$mo" '$1 == p && $2 > o' "$WORK/B.out" | head -n 1)
	{ [ "$a_last" = "$mp $((mo - 1))" ] || { [ "$mo" -eq 0 ] && [ -z "$a_last" ]; }; } &&
		{ [ -z "$b_next" ] || [ "$b_next" = "$mp $((mo + 1))" ]; } ||
		fail "offset $mp/$mo is missing, and it is not the one A was committing when frozen" \
			"(A's last line in $mp: '$a_last'; B's first past it: '$b_next')"
fi
stop_broker
pass "A expired after SIGSTOP; B finished the topic from the committed offsets ($missing in A's commit-to-write window)"
