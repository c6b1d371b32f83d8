#!/usr/bin/env bash
# group_hangup.sh SLUICED [RDK_LOAD [SLUICE_DUMP]]
#
# Issue 10 item 6: clients that send a JoinGroup with RebalanceTimeoutMs =
# INT32_MAX and hang up must not keep new connections out (before: 39 of 40
# refused, "connection slots of index N busy", for up to 24 days), a
# JoinGroup answered after its client left is dropped safely, and lines a
# client can repeat do not flood the log (before: a line per refused or bad
# connection, a million in 4 minutes): group_hangup.py does the clients; here
# the log may grow by at most a few rate-limited bursts while it runs.
. "$(dirname "$0")/lib.sh"
integ_init group-hangup 73 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
FLOODS=500

start_broker --cores "${SLUICE_CORES:-2}"
before=$(wc -l <"$BROKER_LOG")
guarded "$PY" "$(dirname "$0")/group_hangup.py" --port "$PORT" --conns 40 --floods "$FLOODS" ||
	fail "group_hangup.py failed"
broker_alive || fail "broker died"
after=$(wc -l <"$BROKER_LOG")
grown=$((after - before))
log "broker log grew by $grown lines for $FLOODS bad requests and 44 hung-up or new connections"
# One rate-limited site gives DP_LOG_RL_BURST (10) lines per 10 s window; a
# few sites and windows fit well under 100, a line per connection does not.
[ "$grown" -lt 100 ] || fail "the log grew by $grown lines: $(tail -n 3 "$BROKER_LOG" | tr '\n' ';')"
grep -q "similar lines suppressed\|suppressed for" "$BROKER_LOG" ||
	fail "no rate-limit note in the log: $(tail -n 3 "$BROKER_LOG" | tr '\n' ';')"
stop_broker
pass "new connections served after hung-up JoinGroups; log grew by $grown lines"
