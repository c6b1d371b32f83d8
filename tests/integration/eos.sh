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
. "$(dirname "$0")/eos_lib.sh"
eos_init eos 47 "$@"
COUNT=${EOS_COUNT:-200000}
KILLS=${EOS_KILLS:-5}
BATCH=${EOS_BATCH:-250}
DELAY_MS=${EOS_DELAY_MS:-25}

start_broker --cores "${SLUICE_CORES:-3}"
eos_topics "$COUNT"
COPY=(--batch "$BATCH" --txn-delay-ms "$DELAY_MS" --idle-seconds 20)

killed=0
runs=()
for ((k = 1; k <= KILLS; k++)); do
	eos_start run$k eos-g eos "${COPY[@]}"
	runs+=(run$k)
	eos_wait_commit run$k "$EOS_PID"
	nap=$(printf '%d.%03d' $((1 + RANDOM % 2)) $((RANDOM % 1000)))
	sleep "$nap"
	kill -0 "$EOS_PID" 2>/dev/null || { wait "$EOS_PID"; fail "run $k ended (status $?) before its kill: the input is too small for $KILLS kills"; }
	kill -KILL "$EOS_PID"
	wait "$EOS_PID" 2>/dev/null
	killed=$((killed + 1))
	log "run $k: SIGKILLed after first commit + ${nap}s: $(eos_count '^commit' run$k) commits, $(eos_count '^abort' run$k) aborts"
	broker_alive || fail "broker died during run $k"
done

eos_start final eos-g eos "${COPY[@]}"
eos_finish final "$EOS_PID"
log "final run: $(grep "^done" "$WORK/final.out"); $(eos_count '^abort' "${runs[@]}" final) aborts in all"
# Informational: how many kills left a transaction open that the next instance's
# InitProducerId had the broker abort (the rest died between transactions).
log "open transactions aborted by the broker for a new instance: $(grep -c "txn eos: aborting (a new instance" "$BROKER_LOG")"

eos_check_output "$COUNT"
stop_broker
pass "$COUNT records copied exactly once across $killed SIGKILLs of the copier"
