#!/usr/bin/env bash
# idempotent.sh SLUICED RDK_LOAD [SLUICE_DUMP]
# Exactly once under retries: the broker (test-only fault injection) drops 5%
# of Produce responses and closes a connection after 0.5% of them, after the
# batches were appended, so librdkafka (enable.idempotence, acks=all,
# max.in.flight 5) really retries. 1,000,000 keyed messages over 6 partitions
# must then be read back exactly once, in order per partition.
. "$(dirname "$0")/lib.sh"
COUNT=${IDEMP_COUNT:-1000000}
integ_init idempotent 18 "$@"
need_exe "$RDK_LOAD"
start_broker --cores "${SLUICE_CORES:-3}" --fault-drop-produce 50 --fault-close-produce 5 --fault-seed 7
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic idem --partitions 6 --count "$COUNT" \
	--size 100 --acks all --idempotent --batch-messages 2000 --request-timeout-ms 500 \
	--timeout-ms 300000 ||
	fail "idempotent produce exited $?"
drops=$(grep -c "fault injection: dropping" "$BROKER_LOG" || true)
closes=$(grep -c "fault injection: closing" "$BROKER_LOG" || true)
log "fault injection: $drops responses dropped, $closes connections closed"
[ "$drops" -gt 0 ] && [ "$closes" -gt 0 ] || fail "fault injection did not fire: the test proved nothing"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic idem --partitions 6 --expect "$COUNT" \
	--timeout 240 || fail "exactly-once verification failed (rdk_load consume exited $?)"
stop_broker
pass "$COUNT idempotent messages exactly once through dropped responses and closed connections"
