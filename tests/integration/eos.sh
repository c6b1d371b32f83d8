#!/usr/bin/env bash
# eos.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_EOS
#
# Exactly-once consume-transform-produce (librdkafka, rdk_eos): EOS_COUNT
# keyed records (rdk_load's layout) in a 6-partition input topic are copied
# unchanged, inside transactions that also carry the group's offsets, to the
# same partitions of an output topic. The copier is SIGKILLed at random
# points (1-3 s after each instance's first commit) EOS_KILLS times and
# restarted each time (its fixed transactional.id fences the dead one and
# aborts its open transaction); the last instance runs until the group's
# committed offsets reach the input's end. Then read_committed on the output
# must show every input record exactly once, in order per partition.
#
# Each transaction copies up to EOS_BATCH records and is held open
# EOS_DELAY_MS before its commit (the application's "work"): that bounds the
# rate (<= 10,000 records/s by default), so the input outlasts the kills, and
# most kills land inside an open transaction.
# Env knobs: EOS_COUNT (default 200000), EOS_KILLS (5), EOS_BATCH (250),
# EOS_DELAY_MS (25).
. "$(dirname "$0")/lib.sh"
integ_init eos 47 "$@"
need_exe "$RDK_LOAD"
RDK_EOS=$(abs_path "${4:-}")
need_exe "$RDK_EOS"
COUNT=${EOS_COUNT:-200000}
KILLS=${EOS_KILLS:-5}
BATCH=${EOS_BATCH:-250}
DELAY_MS=${EOS_DELAY_MS:-25}
IN=eos-in
OUT=eos-out
PARTS=6
FIRST_COMMIT_WAIT_S=30

start_broker --cores "${SLUICE_CORES:-3}"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$IN" --partitions $PARTS --count "$COUNT" \
	--size 100 --acks all >"$WORK/prod.log" 2>&1 || fail "rdk_load produce exited $?: $(tail -n 3 "$WORK/prod.log")"
log "$(grep '^produce:' "$WORK/prod.log")"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$OUT" --partitions $PARTS --count 0 \
	>"$WORK/prod-out.log" 2>&1 || fail "creating $OUT: rdk_load exited $?"

eos_start() {   # LOGNAME: one copier instance in the background, pid in EOS_PID
	"$RDK_EOS" --bootstrap "$BOOTSTRAP" --in "$IN" --out "$OUT" --group eos-g --txn-id eos \
		--partitions $PARTS --batch "$BATCH" --txn-delay-ms "$DELAY_MS" --idle-seconds 20 >"$WORK/$1.out" 2>"$WORK/$1.err" &
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
	while ! grep -q '^commit' "$WORK/run$k.out" && ((SECONDS < deadline)); do
		broker_alive || fail "broker died during run $k"
		kill -0 "$EOS_PID" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$EOS_PID" 2>/dev/null || { wait "$EOS_PID"; fail "run $k exited $? before its kill: $(eos_show run$k)"; }
	grep -q '^commit' "$WORK/run$k.out" || fail "run $k committed nothing in ${FIRST_COMMIT_WAIT_S}s: $(eos_show run$k)"
	nap=$(printf '%d.%03d' $((1 + RANDOM % 2)) $((RANDOM % 1000)))
	sleep "$nap"
	kill -0 "$EOS_PID" 2>/dev/null || { wait "$EOS_PID"; fail "run $k ended (status $?) before its kill: the input is too small for $KILLS kills"; }
	kill -KILL "$EOS_PID"
	wait "$EOS_PID" 2>/dev/null
	killed=$((killed + 1))
	log "run $k: SIGKILLed after first commit + ${nap}s: $(grep -c '^commit' "$WORK/run$k.out") commits, $(grep -c '^abort' "$WORK/run$k.out") aborts"
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
log "final run: $(grep "^done" "$WORK/final.out"); $(grep -c '^abort' "$WORK"/run*.out "$WORK/final.out" | awk -F: '{s += $2} END {print s}') aborts in all"
# Informational: how many kills left a transaction open that the next instance's
# InitProducerId had the broker abort (the rest died between transactions).
log "open transactions aborted by the broker for a new instance: $(grep -c "txn eos: aborting (a new instance" "$BROKER_LOG")"

guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic "$OUT" --partitions $PARTS --expect "$COUNT" \
	--timeout 60 >"$WORK/check.out" 2>"$WORK/check.err" ||
	fail "output check: $(cat "$WORK/check.out") $(grep -E 'FAIL|never read|after|bad|TIMEOUT' "$WORK/check.err" | head -n 10 | tr '\n' ';')"
log "$(cat "$WORK/check.out")"
stop_broker
pass "$COUNT records copied exactly once across $killed SIGKILLs of the copier"
