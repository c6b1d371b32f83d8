#!/usr/bin/env bash
# many_conns.sh SLUICED [RDK_LOAD [SLUICE_DUMP]]
# Hundreds of connections pipelining requests; answers in order on each (see many_conns.py).
. "$(dirname "$0")/lib.sh"
integ_init many-conns 14 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
ulimit -n 4096 2>/dev/null || true
start_broker --cores "${SLUICE_CORES:-3}"
guarded "$PY" "$(dirname "$0")/many_conns.py" --port "$PORT" --conns 400 || fail "many_conns.py failed"
stop_broker
pass "400 pipelining connections"
