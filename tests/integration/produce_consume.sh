#!/usr/bin/env bash
# produce_consume.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# librdkafka round trip: 1,000,000 keyed 100-byte messages with acks=all into a
# 6-partition topic, then read everything back and check each message arrives
# exactly once, whole, and in producer order per partition. The broker is then
# stopped with SIGTERM (must exit 0), restarted on the same data and read
# again, so recovery after a clean shutdown is checked too.
# SLUICE_CORES=N selects --cores (default 1); with N >= 3 the broker log must
# show partitions opened on data cores 1 and 2. PC_COUNT overrides the count.
. "$(dirname "$0")/lib.sh"

CORES=${SLUICE_CORES:-1}
COUNT=${PC_COUNT:-1000000}
PARTS=6
TOPIC=pc
integ_init "produce-consume-c$CORES" $((1 + CORES)) "$@"
need_exe "$RDK_LOAD"

start_broker --cores "$CORES"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions "$PARTS" \
	--count "$COUNT" --size 100 --acks all || fail "rdk_load produce exited $?"
broker_alive || fail "broker died during produce"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions "$PARTS" \
	--expect "$COUNT" --timeout 240 || fail "rdk_load consume exited $?"

if [ "$CORES" -ge 3 ]; then
	for c in 1 2; do
		grep -Eq "opened on core $c([^0-9]|$)" "$BROKER_LOG" ||
			fail "no partition was opened on core $c (want partitions spread over data cores):
$(grep -E 'opened on core' "$BROKER_LOG" | head -n 20)"
	done
	log "partitions spread: $(grep -Eo 'opened on core [0-9]+' "$BROKER_LOG" | sort | uniq -c | tr -s ' \n' ' ')"
fi

stop_broker
start_broker --cores "$CORES"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions "$PARTS" \
	--expect "$COUNT" --timeout 240 || fail "rdk_load consume after restart exited $?"
stop_broker
pass "cores $CORES, $COUNT messages"
