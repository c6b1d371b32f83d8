#!/usr/bin/env bash
# kafkajs_eos.sh SLUICED RDK_LOAD SLUICE_DUMP
#
# Exactly-once consume-transform-produce with kafkajs 2.2.4 (kafkajs/eos.js,
# the twin of eos.sh/rdk_eos): KJS_EOS_COUNT keyed records (rdk_load's
# layout) in a 6-partition input topic are copied unchanged, in transactions
# that also carry the group's offsets (transaction.sendOffsets), to the same
# partitions of an output topic. The copier is SIGKILLed at a random point
# (0.3-2 s after each instance's first commit) KJS_EOS_KILLS times and
# restarted each time (its fixed transactionalId fences the dead one and has
# the broker abort its open transaction); the last instance runs until the
# group's committed offsets reach the input's end. Then read_committed on the
# output must show every input record exactly once, in order per partition.
#
# Each transaction copies up to KJS_EOS_CHUNK records and is held open
# KJS_EOS_DELAY_MS before its commit: that bounds the rate (about 2,000
# records/s by default on 2 cores), so the input outlasts the kills, and most
# kills land inside an open transaction. Each instance also aborts its first
# transaction and every KJS_EOS_ABORT_EVERY-th after it on purpose, after the
# transaction's sendOffsets: the copier rewinds (consumer.seek to the
# group's committed offset; with eachBatchAutoResolve off kafkajs would also
# refetch from the last resolved offset by itself), so the broker must have
# dropped the aborted transaction's staged offsets, or records go missing.
# Env knobs: KJS_EOS_COUNT (default 24000), KJS_EOS_KILLS (4),
# KJS_EOS_CHUNK (100), KJS_EOS_DELAY_MS (25), KJS_EOS_ABORT_EVERY (10, 0: none).
# Skipped (77) without node/npm, as kafkajs.sh.
. "$(dirname "$0")/lib.sh"
integ_init kafkajs-eos 43 "$@"
need_exe "$RDK_LOAD"
kafkajs_ready
COUNT=${KJS_EOS_COUNT:-24000}
KILLS=${KJS_EOS_KILLS:-4}
CHUNK=${KJS_EOS_CHUNK:-100}
DELAY_MS=${KJS_EOS_DELAY_MS:-25}
ABORT_EVERY=${KJS_EOS_ABORT_EVERY:-10}
IN=kjs-eos-in
OUT=kjs-eos-out
PARTS=6
FIRST_COMMIT_WAIT_S=30
export KAFKAJS_NO_PARTITIONER_WARNING=1

start_broker --cores "${SLUICE_CORES:-3}"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$IN" --partitions $PARTS --count "$COUNT" \
	--size 100 --acks all >"$WORK/prod.log" 2>&1 || fail "rdk_load produce exited $?: $(tail -n 3 "$WORK/prod.log")"
log "$(grep '^produce:' "$WORK/prod.log")"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$OUT" --partitions $PARTS --count 0 \
	>"$WORK/prod-out.log" 2>&1 || fail "creating $OUT: rdk_load exited $?"

eos_start() {   # LOGNAME: one copier instance in the background, pid in EOS_PID
	env -C "$JSDIR" node eos.js "$BOOTSTRAP" "$IN" "$OUT" kjs-eos-g kjs-eos $PARTS "$CHUNK" "$DELAY_MS" 20 "$ABORT_EVERY" \
		>"$WORK/$1.out" 2>"$WORK/$1.err" &
	EOS_PID=$!
	INTEG_CHILDREN="${INTEG_CHILDREN:-} $EOS_PID"
}

eos_show() {
	tail -n 5 "$WORK/$1.out" "$WORK/$1.err" 2>/dev/null | tr '\n' ';'
}

killed=0
for ((k = 1; k <= KILLS; k++)); do
	eos_start run$k
	deadline=$((SECONDS + FIRST_COMMIT_WAIT_S))
	while ! grep -qs '^commit' "$WORK/run$k.out" && ((SECONDS < deadline)); do
		broker_alive || fail "broker died during run $k"
		kill -0 "$EOS_PID" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$EOS_PID" 2>/dev/null || { wait "$EOS_PID"; fail "run $k exited $? before its kill: $(eos_show run$k)"; }
	grep -q '^commit' "$WORK/run$k.out" || fail "run $k committed nothing in ${FIRST_COMMIT_WAIT_S}s: $(eos_show run$k)"
	nap=$(printf '%d.%03d' $((RANDOM % 2)) $((300 + RANDOM % 700)))
	sleep "$nap"
	kill -0 "$EOS_PID" 2>/dev/null || { wait "$EOS_PID"; fail "run $k ended (status $?) before its kill: the input is too small for $KILLS kills"; }
	kill -KILL "$EOS_PID"
	wait "$EOS_PID" 2>/dev/null
	killed=$((killed + 1))
	log "run $k: SIGKILLed after first commit + ${nap}s: $(grep -c '^commit' "$WORK/run$k.out") commits, $(grep -c '^abort' "$WORK/run$k.out") aborts, last: $(grep '^commit' "$WORK/run$k.out" | tail -n 1)"
	broker_alive || fail "broker died during run $k"
done

eos_start final
while kill -0 "$EOS_PID" 2>/dev/null; do
	broker_alive || fail "broker died during the final run"
	sleep 0.2
done
wait "$EOS_PID"
rc=$?
[ "$rc" -eq 0 ] && grep -q '^done' "$WORK/final.out" || fail "final run did not finish (status $rc): $(eos_show final)"
log "final run: $(grep -c '^commit' "$WORK/final.out") commits; $(grep "^done" "$WORK/final.out"); $(cat "$WORK"/run*.out "$WORK/final.out" | grep -c '^abort') aborts in all"
# The deliberate aborts must have happened (the final instance makes the most).
((ABORT_EVERY == 0)) || grep -q '^rewind' "$WORK/final.out" || fail "final run aborted nothing on purpose: $(eos_show final)"
# Informational: how many kills left a transaction open that the next instance's
# InitProducerId had the broker abort (the rest died between transactions).
log "open transactions aborted by the broker for a new instance: $(grep -c "txn kjs-eos: aborting (a new instance" "$BROKER_LOG")"

guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic "$OUT" --partitions $PARTS --expect "$COUNT" \
	--timeout 60 >"$WORK/check.out" 2>"$WORK/check.err" ||
	fail "output check: $(cat "$WORK/check.out") $(grep -E 'FAIL|never read|after|bad|TIMEOUT' "$WORK/check.err" | head -n 10 | tr '\n' ';')"
log "$(cat "$WORK/check.out")"
stop_broker
pass "$COUNT records copied exactly once by kafkajs across $killed SIGKILLs of the copier"
