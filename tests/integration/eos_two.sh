#!/usr/bin/env bash
# eos_two.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_EOS
#
# Exactly-once with two copiers in one group (KIP-447): two rdk_eos instances
# (transactional ids eos-two-a and eos-two-b, group eos-two-g) share the
# 6-partition input. Once the group is split between them (each one's last
# "assigned N" is followed by a commit, N_a + N_b = 6), one of them, picked at
# random, leaves mid-run (EOS2_LEAVE):
#   clean (default): SIGTERM: it commits its open transaction, closes its
#     consumer (LeaveGroup) and exits 0.
#   staged: SIGTERM with --leave-staged: it sends its offsets to the open
#     transaction and closes its consumer with them still staged; the script
#     waits until the survivor, now given those partitions, has been answered
#     UNSTABLE_OFFSET_COMMIT for one of them, and only then (SIGUSR1) lets the
#     leaver commit. A survivor that resumed from the older committed offsets
#     would copy that transaction's records twice.
#   kill: SIGKILL: it stays a member until its session (EOS2_SESSION_MS) ends
#     and its open transaction, offsets staged in it (the delay is spent
#     after they are sent), stays open until the broker times it out
#     (EOS2_TXN_TIMEOUT_MS); the survivor must wait that out, not skip it.
# The survivor's consumer is read_committed, which in librdkafka 2.0.2 sets
# RequireStable on every OffsetFetch (rdkafka_assignment.c and
# rd_kafka_committed() pass isolation.level == read_committed), and it retries
# UNSTABLE_OFFSET_COMMIT answers; its librdkafka "topic" debug log (stderr)
# shows them. It must be given all 6 partitions and copy the rest; then
# read_committed on the output must show every input record exactly once, in
# order per partition, and the group's offsets must be the input's end.
# Env knobs: EOS2_COUNT (default 80000), EOS2_BATCH (100), EOS2_DELAY_MS (25),
# EOS2_LEAVE (clean|staged|kill), EOS2_SESSION_MS (3000),
# EOS2_TXN_TIMEOUT_MS (10000).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/eos_lib.sh"
eos_init eos-two 48 "$@"
COUNT=${EOS2_COUNT:-80000}
BATCH=${EOS2_BATCH:-100}
DELAY_MS=${EOS2_DELAY_MS:-25}
LEAVE=${EOS2_LEAVE:-clean}
SESSION_MS=${EOS2_SESSION_MS:-3000}
TXN_TIMEOUT_MS=${EOS2_TXN_TIMEOUT_MS:-10000}
((TXN_TIMEOUT_MS >= 5000)) || fail "EOS2_TXN_TIMEOUT_MS must be at least 5000"
SPLIT_WAIT_S=60
LEFT_WAIT_S=60
G=eos-two-g
case "$LEAVE" in clean | staged | kill) ;; *) fail "EOS2_LEAVE must be clean, staged or kill, not '$LEAVE'" ;; esac

start_broker --cores "${SLUICE_CORES:-3}"
eos_topics "$COUNT"
COPY=(--batch "$BATCH" --offsets-delay-ms "$DELAY_MS" --idle-seconds 30 --session-ms "$SESSION_MS"
	--txn-timeout-ms "$TXN_TIMEOUT_MS" --debug topic)
[ "$LEAVE" = staged ] && COPY+=(--leave-staged)
eos_start a $G eos-two-a "${COPY[@]}"
PID_a=$EOS_PID
eos_start b $G eos-two-b "${COPY[@]}"
PID_b=$EOS_PID

# settled NAME [FROM_LINE]: N when the instance's last assignment event (from
# line FROM_LINE of its stdout on) is "assigned N" and it has committed since.
settled() {
	tail -n +"${2:-1}" "$WORK/$1.out" | awk '/^assigned/ { n = $2; c = 0 } /^revoked/ { n = ""; c = 0 } /^commit/ { c++ }
		END { if (n != "" && c > 0) print n }'
}

# committed_since_last_assign NAME: records the instance committed after its last "assigned".
committed_since_last_assign() {
	awk '/^assigned/ { s = 0 } /^commit/ { s += $3 } END { print s + 0 }' "$WORK/$1.out"
}

# unstable NAME FROM_LINE PARTS: OffsetFetch answers UNSTABLE_OFFSET_COMMIT for
# any of PARTS (a,b,c) in NAME's librdkafka debug log from line FROM_LINE on.
unstable() {
	tail -n +"$2" "$WORK/$1.err" | grep -E -c "OffsetFetchResponse: $IN \[(${3//,/|})\] .*UNSTABLE_OFFSET_COMMIT"
}

alive() {   # NAME...: fails unless each instance still runs
	local x p
	for x; do
		p=PID_$x
		kill -0 "${!p}" 2>/dev/null || { wait "${!p}"; fail "$x exited $? early: $(eos_show "$x")"; }
	done
}

deadline=$((SECONDS + SPLIT_WAIT_S))
while :; do
	na=$(settled a)
	nb=$(settled b)
	[ -n "$na" ] && [ -n "$nb" ] && ((na > 0 && nb > 0 && na + nb == PARTS)) && break
	broker_alive || fail "broker died before the group was split"
	alive a b
	((SECONDS < deadline)) || fail "the group was not split between a and b in ${SPLIT_WAIT_S}s: a: $(eos_show a) b: $(eos_show b)"
	sleep 0.05
done
log "group split: a has $na partitions, b has $nb, both committed"

if ((RANDOM % 2)); then L=a S=b; else L=b S=a; fi
PID_L=PID_$L PID_S=PID_$S
PID_L=${!PID_L} PID_S=${!PID_S}
nap=$(printf '0.%03d' $((RANDOM % 1000)))
sleep "$nap"
alive a b
parts_L=$(grep '^assigned' "$WORK/$L.out" | tail -n 1 | cut -d' ' -f3)
out_S=$(($(wc -l <"$WORK/$S.out") + 1))
err_S=$(($(wc -l <"$WORK/$S.err") + 1))
t0=$SECONDS

# wait_leaver_exit: the leaver must exit 0 having printed "left".
wait_leaver_exit() {
	local deadline=$((SECONDS + LEFT_WAIT_S))
	while kill -0 "$PID_L" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
	kill -0 "$PID_L" 2>/dev/null && fail "$L did not leave within ${LEFT_WAIT_S}s: $(eos_show "$L")"
	wait "$PID_L"
	local rc=$?
	[ "$rc" -eq 0 ] && grep -q '^left' "$WORK/$L.out" || fail "$L did not leave cleanly (status $rc): $(eos_show "$L")"
}

case "$LEAVE" in
clean)
	kill -TERM "$PID_L"
	wait_leaver_exit
	log "$L (partitions $parts_L) left cleanly, SIGTERM after split + ${nap}s: $(grep '^left' "$WORK/$L.out")"
	;;
staged)
	kill -TERM "$PID_L"
	deadline=$((SECONDS + LEFT_WAIT_S))
	until grep -q '^staged' "$WORK/$L.out"; do
		alive "$L" "$S"
		((SECONDS < deadline)) || fail "$L did not close its consumer within ${LEFT_WAIT_S}s of SIGTERM: $(eos_show "$L")"
		sleep 0.02
	done
	staged=$(grep '^staged' "$WORK/$L.out" | cut -d' ' -f2)
	log "$L (partitions $parts_L) closed its consumer with $staged records and their offsets staged in an open transaction"
	# The survivor, given those partitions, must be told their offsets are not
	# settled yet; before the broker would time the transaction out.
	deadline=$((SECONDS + TXN_TIMEOUT_MS / 1000 - 2))
	until (($(unstable "$S" "$err_S" "$parts_L") > 0)); do
		alive "$L" "$S"
		((SECONDS < deadline)) || fail "$S was not answered UNSTABLE_OFFSET_COMMIT for $L's partitions $parts_L within $((TXN_TIMEOUT_MS / 1000 - 2))s while their offsets were staged: $(tail -n +"$out_S" "$WORK/$S.out" | tr '\n' ';')"
		sleep 0.02
	done
	sleep 0.5
	n=$(unstable "$S" "$err_S" "$parts_L")
	kill -USR1 "$PID_L"
	wait_leaver_exit
	log "$S was answered UNSTABLE_OFFSET_COMMIT $n times for $parts_L before $L committed: $(grep '^left' "$WORK/$L.out")"
	;;
kill)
	kill -KILL "$PID_L"
	wait "$PID_L" 2>/dev/null
	log "$L (partitions $parts_L) SIGKILLed after split + ${nap}s; $S takes over after its session (${SESSION_MS} ms) and the dead one's open transaction, if any, times out (${TXN_TIMEOUT_MS} ms)"
	;;
esac

# The survivor must hold all partitions and copy on from there.
deadline=$((SECONDS + SPLIT_WAIT_S))
until [ "$(settled "$S" "$out_S")" = "$PARTS" ]; do
	if ! kill -0 "$PID_S" 2>/dev/null; then
		[ "$(settled "$S" "$out_S")" = "$PARTS" ] && break
		wait "$PID_S"
		fail "$S exited $? before it took all partitions over: $(eos_show "$S")"
	fi
	broker_alive || fail "broker died during the takeover"
	((SECONDS < deadline)) || fail "$S did not take all $PARTS partitions over in ${SPLIT_WAIT_S}s: $(eos_show "$S")"
	sleep 0.05
done
log "$S holds all $PARTS partitions and committed $((SECONDS - t0))s after the leave began"
eos_finish "$S" "$PID_S"
taken=$(committed_since_last_assign "$S")
log "$S: $(grep '^done' "$WORK/$S.out"); $taken records after it took all partitions; $(eos_count '^abort' a b) aborts in all"
# Informational: how long the survivor was kept off the leaver's staged offsets.
log "OffsetFetch answers UNSTABLE_OFFSET_COMMIT to $S for $parts_L after the leave: $(unstable "$S" "$err_S" "$parts_L"); transactions timed out by the broker: $(grep -c 'transaction timed out' "$BROKER_LOG")"
((taken > 0)) || fail "$S copied nothing after the takeover: the leave was not mid-run"

eos_check_output "$COUNT"
eos_check_committed $G committed
stop_broker
pass "$COUNT records copied exactly once by two instances, $L leaving mid-run ($LEAVE)"
