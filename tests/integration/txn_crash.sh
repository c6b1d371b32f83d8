#!/usr/bin/env bash
# txn_crash.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# Coordinator crash during EndTxn. For each point of the broker's test-only
# --fault-txn-kill (after-prepare, after-first-marker, before-complete) a
# producer flushes a transaction over 6 partitions (both shard cores of
# --cores 3) and commits; the broker SIGKILLs itself at that point, and the
# producer is killed too (its retries must not finish the job for the broker).
# The broker restarts without the fault; the decision was logged (Prepare), so
# recovery must complete the commit: read_committed must then see every record
# of the transaction within 20 s (all or nothing, and here: all), and a new
# instance of the same transactional.id must init and commit afterwards.
# One more round does the same with an abort (at after-first-marker): none of
# its records may become visible, the new instance's commit must.
# Knob: TXN_CRASH_ROUNDS (default "commit:after-prepare commit:after-first-marker
# commit:before-complete abort:after-first-marker").
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-crash 34 "$@"
ROUNDS=${TXN_CRASH_ROUNDS:-commit:after-prepare commit:after-first-marker commit:before-complete abort:after-first-marker}
PARTS=6
CORES=${SLUICE_CORES:-3}

# wait_broker_death WHAT LOG_FROM_LINE FAULT_TEXT: the broker must kill itself at the fault point within 20 s.
wait_broker_death() {
	local deadline=$((SECONDS + 20)) rc
	while broker_alive && ((SECONDS < deadline)); do sleep 0.1; done
	broker_alive && fail "$1: the broker did not kill itself within 20 s (fault point never reached?)"
	wait "$BROKER_PID" 2>/dev/null
	rc=$?
	BROKER_PID=
	[ "$rc" -eq 137 ] || fail "$1: broker exited with status $rc, want 137 (SIGKILL)"
	tail -n +"$2" "$BROKER_LOG" | grep -q "fault injection: SIGKILL $3" ||
		fail "$1: no 'fault injection: SIGKILL $3' line in the broker log"
}

r=0
for round in $ROUNDS; do
	r=$((r + 1))
	end=${round%%:*}
	point=${round#*:}
	topic=tc$r
	id=tc-$r
	out=$WORK/produced-$r.txt
	log "round $r: $end, broker killed at $point"
	from=$(($(wc -l <"$BROKER_LOG" 2>/dev/null || echo 0) + 1))
	start_broker --cores "$CORES" --fault-txn-kill "$point"
	"$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id "$id" --topics "$topic" --partitions $PARTS \
		--count 10 --tag crash --plan "$end" --out "$out" --create --op-timeout-ms 20000 \
		--allow-fail >"$WORK/prod-$r.out" 2>"$WORK/prod-$r.err" &
	prod=$!
	INTEG_CHILDREN=$prod
	case $point in
	after-prepare) what="after Prepare is durable" ;;
	after-first-marker) what="after the first marker is durable" ;;
	*) what="before Complete" ;;
	esac
	wait_broker_death "round $r" "$from" "$what"
	sleep 0.3
	if kill -0 "$prod" 2>/dev/null; then
		kill -KILL "$prod"
		wait "$prod" 2>/dev/null
		log "broker killed itself; producer killed in its $end call"
	else
		wait "$prod"
		prc=$?
		log "broker killed itself; producer had exited $prc: $(grep '^txn' "$WORK/prod-$r.out")"
		[ "$prc" -eq 0 ] || [ "$prc" -eq 3 ] || fail "round $r: producer exited $prc before the $end: $(txn_show prod-$r)"
	fi
	INTEG_CHILDREN=
	n=$(grep -c "^$end " "$out" || true)
	[ "$n" -eq $((PARTS * 10)) ] || fail "round $r: $n records flushed before the $end, want $((PARTS * 10))"
	cores=$(grep -oE "partition $topic/[0-9]+ opened on core [0-9]+" "$BROKER_LOG" | awk '{print $NF}' | sort -u | tr '\n' ' ')
	[ "$CORES" -lt 3 ] || [ "$(wc -w <<<"$cores")" -ge 2 ] || fail "round $r: $topic not on both shard cores: $cores"

	start_broker --cores "$CORES"
	if [ "$end" = commit ]; then
		# Prepared to commit before the crash: recovery must finish the commit.
		expect_lines "$out" commit >"$WORK/exp-$r"
		consume_check "rc-$r" committed "$WORK/exp-$r" "$topic" $PARTS --timeout 20
	fi
	txn_run "again-$r" "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id "$id" --topics "$topic" \
		--partitions $PARTS --count 3 --tag again --plan commit --out "$out" ||
		fail "round $r: a new instance of $id could not commit after the restart: $(txn_show again-$r)"
	expect_lines "$out" commit >"$WORK/exp2-$r"
	consume_check "rc2-$r" committed "$WORK/exp2-$r" "$topic" $PARTS --timeout 20
	expect_lines "$out" commit abort >"$WORK/exp3-$r"
	consume_check "ru-$r" uncommitted "$WORK/exp3-$r" "$topic" $PARTS
	log "round $r: $end completed by recovery; transactional.id reusable"
	stop_broker
done
pass "crash during commit/abort at: $ROUNDS"
