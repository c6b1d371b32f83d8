#!/usr/bin/env bash
# slow_reader.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# Issue 10 item 5: clients that pipeline Fetches with a large
# PartitionMaxBytes and never read the answers must not grow the broker
# without bound (before: 43 MB to 10 GB in 25 s). With one data core,
# 24 such clients (more than DP_CORE_HELD_BYTES_MAX / DP_CONN_HELD_BYTES_MAX)
# run for 20 s while slow_reader.py samples the broker's VmRSS and a normal
# client fetches every few seconds on a fresh connection. The RSS must stay
# under what the limits allow (dp_limits.h):
#   start + DP_CORE_HELD_BYTES_MAX + one request (a fetch buffer of
#   PartitionMaxBytes plus its answer) + DP_BUF_IDLE_BYTES_MAX idle pool
#   + DP_NIC_RX_BUFS * DP_NIC_RX_BUF_BYTES + 128 MB for the allocator,
# every normal fetch must be answered. Then the same clients long-poll at the
# end of the log instead, and normal fetches must still be answered; at last
# librdkafka reads the whole topic back.
. "$(dirname "$0")/lib.sh"
integ_init slow-reader 71 "$@"
need_exe "$RDK_LOAD"
PY=$(command -v python3) || skip "python3 is not installed"
ulimit -n 4096 2>/dev/null || true

DP=$(dirname "$0")/../../dataplane/loop/dp_limits.h
mb() { # the value of a limit in dp_limits.h, in MB (its C expression evaluated by python)
	python3 - "$DP" "$1" <<'PY' || fail "no $1 in $DP"
import re, sys
m = re.search(r'#define %s\s+(\([^/]*\)|\S+)' % sys.argv[2], open(sys.argv[1]).read())
print(eval(re.sub(r'(?<=\d)(ull|ul|u|ll)\b', '', m.group(1))) >> 20)
PY
}
CORE_MB=$(mb DP_CORE_HELD_BYTES_MAX)
CONN_MB=$(mb DP_CONN_HELD_BYTES_MAX)
IDLE_MB=$(mb DP_BUF_IDLE_BYTES_MAX)
PMB_MB=64
CONNS=$((CORE_MB / CONN_MB * 3 / 2))
log "limits: core $CORE_MB MB, connection $CONN_MB MB, idle pool $IDLE_MB MB; $CONNS clients"

start_broker --cores 2 --control-core own   # one data core, as the bounds below assume
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic big --partitions 1 --count 8000 --size 1024 \
	--acks all || fail "setup produce exited $?"
base=$(awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$BROKER_PID/status")
# One request: its fetch buffer (PartitionMaxBytes) and an answer of all 8 MB the topic holds.
bound=$((base + CORE_MB + PMB_MB + 8 + IDLE_MB + 16 + 128))
log "broker RSS $base MB after setup; bound $bound MB"
guarded "$PY" "$(dirname "$0")/slow_reader.py" --port "$PORT" --pid "$BROKER_PID" --topic big \
	--bound-mb "$bound" --conns "$CONNS" --duration "${SLOW_READER_S:-20}" \
	--partition-max-bytes $((PMB_MB << 20)) || fail "slow_reader.py failed"
# Long polls that never end on their own (MaxWaitMs INT32_MAX, a MinBytes
# never reached) at the end of the log: a parked fetch holds only what it has
# read, not its PartitionMaxBytes buffers, so normal clients are served. On a
# fresh broker: the first run's clients, gone while their reads were paused,
# are only found out as the core reclaims their answers (see the report).
# More parked PartitionMaxBytes buffers than the core's budget, were they held;
# each client parks up to DP_CONN_REQS_MAX requests (arenas and frames held).
PARK_CONNS=$((CORE_MB / PMB_MB + 4))
stop_broker
start_broker --cores 2 --control-core own   # one data core, as the bounds below assume
guarded "$PY" "$(dirname "$0")/slow_reader.py" --port "$PORT" --pid "$BROKER_PID" --topic big \
	--bound-mb "$bound" --conns "$PARK_CONNS" --duration "${SLOW_READER_PARK_S:-10}" --park-offset 8000 \
	--partition-max-bytes $((PMB_MB << 20)) || fail "slow_reader.py --park-offset failed"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic big --partitions 1 --expect 8000 \
	--timeout 60 || fail "consume after the slow readers exited $?"
stop_broker
pass "non-reading fetchers held the broker under $bound MB; normal clients served"
