#!/usr/bin/env bash
# credit.sh SLUICED RDK_LOAD SLUICE_DUMP
#
# Fixed pools on the data path refuse, retriably, instead of growing:
#
# CREDIT_POOL=credit (default): cross-core flow control (dp_limits.h). A
# message that does not fit its ring waits in a fixed backlog, bounded by
# credit: per pair of cores at most --test-xmsg-credits requests may be
# unanswered, where the backlog used to grow by realloc (and abort when that
# failed). Past half of it toward another data core new requests wait (the
# connection pauses), and a fan-out beyond all of it is answered with a
# retriable error (NOT_ENOUGH_REPLICAS, KAFKA_STORAGE_ERROR). Credit 1 at
# --cores 3 (a NIC core sends to the other data core): the broker must pause
# connections for credit, or refuse.
#
# CREDIT_POOL=appends: the owner's append records (DP_APPENDS_MAX), shrunk to
# 1 at --cores 2 (one data core): the second partition of a request is
# always refused (the first holds the record until durable), retriably
# NOT_ENOUGH_REPLICAS, where the pool used to grow by calloc.
#
# Either way an idempotent librdkafka producer (which retries such errors)
# must get every message acknowledged, a consumer must read each exactly
# once, whole, in order, and the broker must say at exit that it refused
# some. The brokers before the bounds have no such flags: this fails there.
. "$(dirname "$0")/lib.sh"
integ_init "credit-${CREDIT_POOL:-credit}" 64 "$@"
need_exe "$RDK_LOAD"
TOPIC=credit
COUNT=${CREDIT_COUNT:-100000}

case ${CREDIT_POOL:-credit} in
# The control role on a core of its own (--control-core own), as the cases above count
# on: with it beside a data core, --cores 2 has two data cores and one request's
# partitions split between two append pools.
credit) ARGS=(--cores 3 --test-xmsg-credits 1); SAID='connection pauses for credit' ;;
appends) ARGS=(--cores 2 --test-appends-max 1 --partitions 4); SAID='batches refused for an empty append pool' ;;
*) fail "CREDIT_POOL: credit or appends" ;;
esac
start_broker "${ARGS[@]}" --control-core own
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 12 \
	--count "$COUNT" --size 100 --acks all --idempotent || fail "rdk_load produce exited $?"
broker_alive || fail "broker died during produce"
if [ "${CREDIT_POOL:-credit}" = appends ]; then
	# One Produce naming 4 partitions: with one append record, the first
	# holds it until durable, so the other three must be refused, retriably.
	PY=$(command -v python3) || skip "python3 is not installed"
	cat >"$WORK/four.py" <<'PY'
import struct, sys, time
sys.path.insert(0, sys.argv[2])
from bad_client import Conn, kstr, kbytes, parse_produce_v7, metadata_v4_topic_errors
from fetch_limits import big_batch
topic = 'four'   # auto-created with --partitions 4
c = Conn(int(sys.argv[1]))
deadline = time.monotonic() + 30
while metadata_v4_topic_errors(c, [topic]).get(topic) != 0:
    if time.monotonic() > deadline:
        sys.exit('topic four not created')
    time.sleep(0.2)
body = kstr(None) + struct.pack('>hi', -1, 10000) + struct.pack('>i', 1) + kstr(topic) + struct.pack('>i', 4)
for p in range(4):
    body += struct.pack('>i', p) + kbytes(big_batch(b'four%d' % p, 2, 100))
res = parse_produce_v7(c.call(0, 7, body))
errs = sorted(res[(topic, p)][0] for p in range(4))
print('errors', errs)
sys.exit(0 if errs == [0, 19, 19, 19] else 1)
PY
	guarded "$PY" "$WORK/four.py" "$PORT" "$(dirname "$0")" >"$WORK/four.out" 2>&1 ||
		fail "a 4-partition Produce with one append record: want errors [0, 19, 19, 19]: $(tail -n 3 "$WORK/four.out")"
fi
stop_broker
refused=$(sed -n "s/.*[:,] \([0-9]*\) $SAID.*/\1/p" "$BROKER_LOG" | awk '{s += $1} END {print s + 0}')
if [ "${CREDIT_POOL:-credit}" = credit ]; then
	said_too=$(sed -n 's/.* \([0-9]*\) cross-core requests refused for credit.*/\1/p' "$BROKER_LOG" |
		awk '{s += $1} END {print s + 0}')
	log "credit: $refused connection pauses, $said_too requests refused"
	refused=$((refused + said_too))
fi
[ "$refused" -gt 0 ] || fail "the broker logged no refusal ($SAID)"
# Read back with the default bounds: at credit 1 rdk_load's watermark queries
# (one ListOffsets for all partitions) would be refused as often as retried.
start_broker "${ARGS[0]}" "${ARGS[1]}" --control-core own
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --partitions 12 \
	--expect "$COUNT" --timeout 240 || fail "rdk_load consume exited $?"
stop_broker
pass "$COUNT messages with ${ARGS[*]}, each read once; $refused times the bound held ($SAID), and the clients went on"
