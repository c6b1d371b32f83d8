# lib.sh - shared helpers for the integration scripts (sourced, not run).
#
# Each script calls integ_init NAME SLUICED [RDK_LOAD [SLUICE_DUMP]] first. That
# makes a private temp dir ($WORK, with $DATA for the broker), installs an EXIT
# trap that always kills the broker, and picks a free port ($PORT, $BOOTSTRAP).
# On failure the logs in the temp dir are kept and the broker log tail is
# printed, and so are the tails of the files a script names in INTEG_FAIL_LOGS
# (its clients' logs); on success everything is removed. SLUICE_KEEP=1 keeps
# all, data too.
#
# Env knobs: SLUICE_CORES (broker --cores), SLUICE_LOG_LEVEL (default info),
# SLUICE_PORT_BASE (default: a per-test range inside 20000..31999),
# SLUICE_DIRECT_IO (on|off: every broker start's --direct-io; unset: the default),
# SLUICE_GROUP_DELAY_MS (--group-initial-rebalance-delay-ms, default 0; empty:
# the broker's own default, Kafka's 3000).

set -u -o pipefail

START_TIMEOUT_S=${START_TIMEOUT_S:-20}
STOP_TIMEOUT_S=${STOP_TIMEOUT_S:-15}
BROKER_PID=
BROKER_LOG=
INTEG_OK=0

log() { printf '[%s %s] %s\n' "$(date +%T)" "$INTEG_NAME" "$*" >&2; }

fail() {
	log "FAIL: $*"
	exit 1
}

skip() {
	log "SKIP: $*"
	INTEG_OK=1
	exit 77
}

abs_path() {
	[ -n "$1" ] && [ -e "$1" ] && realpath "$1" || printf '%s' "$1"
}

need_exe() {
	[ -n "$1" ] && [ -x "$1" ] || fail "not an executable: '$1' (args: sluiced rdk_load sluice-dump)"
}

integ_cleanup() {
	local rc=$?
	if [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2>/dev/null; then
		kill -KILL "$BROKER_PID" 2>/dev/null
		wait "$BROKER_PID" 2>/dev/null
	fi
	# Background helpers (producers) started by the script, by their recorded pids only.
	for p in ${INTEG_CHILDREN:-}; do
		kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	if [ "$rc" -ne 0 ] && [ "$INTEG_OK" -eq 0 ]; then
		if [ -n "$BROKER_LOG" ] && [ -f "$BROKER_LOG" ]; then
			log "broker log tail ($BROKER_LOG):"
			tail -n 40 "$BROKER_LOG" >&2
		fi
		# The script's own helpers' logs, named in INTEG_FAIL_LOGS (the last
		# lines say what each client saw when the check failed).
		local f
		for f in ${INTEG_FAIL_LOGS:-}; do
			[ -f "$f" ] || continue
			log "tail of $f ($(wc -l <"$f") lines):"
			tail -n 30 "$f" >&2
		done
		# Sanitizer reports a script sent to files (log_path=$WORK/san).
		for f in "$WORK"/san*; do
			[ -s "$f" ] || continue
			log "sanitizer report $f:"
			head -n 80 "$f" >&2
		done
		# Logs stay for the post-mortem; the data (hundreds of MB) only on request.
		[ "${SLUICE_KEEP:-0}" = 1 ] || rm -rf "$DATA"
		log "exit $rc; kept $WORK (data dir too only with SLUICE_KEEP=1)"
	elif [ "${SLUICE_KEEP:-0}" = 1 ]; then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}

# A connect() that is refused means nobody listens there; good enough for a
# fixed per-test range on a test machine.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

pick_port() {
	# A random start inside the range avoids ports a previous run left in TIME_WAIT.
	local base=$1 p
	for ((p = base + RANDOM % 100; p < base + 200; p++)); do
		if port_free "$p"; then
			PORT=$p
			BOOTSTRAP=127.0.0.1:$PORT
			return 0
		fi
	done
	fail "no free port in $base..$((base + 199))"
}

# integ_init NAME PORT_OFFSET SLUICED [RDK_LOAD [SLUICE_DUMP]]
integ_init() {
	INTEG_NAME=$1
	# meson passes build-dir-relative paths; scripts may cd, so make them absolute.
	SLUICED=$(abs_path "${3:-}")
	RDK_LOAD=$(abs_path "${4:-}")
	SLUICE_DUMP=$(abs_path "${5:-}")
	need_exe "$SLUICED"
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-integ-$INTEG_NAME.XXXXXX") || fail "mktemp"
	DATA=$WORK/data
	BROKER_LOG=$WORK/broker.log
	mkdir -p "$DATA"
	trap integ_cleanup EXIT
	trap 'exit 130' INT TERM
	# 20000..31999: below the kernel's ephemeral range (32768 up), where a client's own
	# outgoing connections could hold the port the broker is to listen on.
	pick_port "${SLUICE_PORT_BASE:-$((20000 + $2 % 60 * 200))}"
	log "work dir $WORK, port $PORT"
}

# start_broker [extra sluiced args...]: starts sluiced on $PORT/$DATA, appends
# its stderr to $BROKER_LOG, waits for "listening on" (or for a connect to
# succeed) and fails if it dies or times out.
start_broker() {
	local from
	from=1
	[ -f "$BROKER_LOG" ] && from=$(($(wc -l <"$BROKER_LOG") + 1))
	# Kafka's initial rebalance delay (3 s per new group) would only slow these
	# tests down: 0 unless SLUICE_GROUP_DELAY_MS says otherwise; set and empty, the
	# broker's default. A script's own flag, after it, wins.
	local delay=()
	[ -n "${SLUICE_GROUP_DELAY_MS-0}" ] && delay=(--group-initial-rebalance-delay-ms "${SLUICE_GROUP_DELAY_MS-0}")
	# SLUICE_DIRECT_IO=on|off: the broker's --direct-io (the O_DIRECT append path).
	[ -n "${SLUICE_DIRECT_IO:-}" ] && delay+=(--direct-io "$SLUICE_DIRECT_IO")
	echo "=== start: $SLUICED --listen $BOOTSTRAP --data $DATA ${delay[*]} $*" >>"$BROKER_LOG"
	"$SLUICED" --listen "$BOOTSTRAP" --data "$DATA" --log-level "${SLUICE_LOG_LEVEL:-info}" "${delay[@]}" "$@" \
		>>"$BROKER_LOG" 2>&1 &
	BROKER_PID=$!
	local deadline=$((SECONDS + START_TIMEOUT_S))
	while ((SECONDS < deadline)); do
		if ! kill -0 "$BROKER_PID" 2>/dev/null; then
			wait "$BROKER_PID"
			local rc=$?
			BROKER_PID=
			fail "sluiced exited with status $rc during start-up"
		fi
		if tail -n +"$from" "$BROKER_LOG" | grep -q "listening on"; then
			log "broker pid $BROKER_PID listening on $BOOTSTRAP"
			return 0
		fi
		sleep 0.1
	done
	if ! port_free "$PORT"; then
		log "WARNING: broker accepts connections but never logged 'listening on'"
		return 0
	fi
	fail "sluiced did not listen on $BOOTSTRAP within ${START_TIMEOUT_S}s"
}

broker_alive() {
	[ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2>/dev/null
}

# stop_broker: SIGTERM, wait for a clean exit; fails unless it exits 0 in time.
stop_broker() {
	[ -n "$BROKER_PID" ] || return 0
	broker_alive || { wait "$BROKER_PID"; local rc=$?; BROKER_PID=; fail "broker died before stop (status $rc)"; }
	kill -TERM "$BROKER_PID"
	local deadline=$((SECONDS + STOP_TIMEOUT_S))
	while broker_alive && ((SECONDS < deadline)); do sleep 0.1; done
	if broker_alive; then
		fail "broker did not exit within ${STOP_TIMEOUT_S}s of SIGTERM"
	fi
	wait "$BROKER_PID"
	local rc=$?
	BROKER_PID=
	[ "$rc" -eq 0 ] || fail "broker exited with status $rc after SIGTERM"
	log "broker stopped cleanly"
}

# kill9_broker: SIGKILL and reap, as a crash would.
kill9_broker() {
	[ -n "$BROKER_PID" ] || return 0
	kill -KILL "$BROKER_PID" 2>/dev/null
	wait "$BROKER_PID" 2>/dev/null
	BROKER_PID=
	echo "=== SIGKILL" >>"$BROKER_LOG"
}

# guarded CMD [ARGS...]: run CMD while watching the broker, and return CMD's
# status. If the broker exits first (crash, or a stray signal from elsewhere),
# stop CMD and fail at once with the broker's status, instead of letting a
# client wait out its own timeout against a dead port.
guarded() {
	"$@" &
	local pid=$! brc
	INTEG_CHILDREN="${INTEG_CHILDREN:-} $pid"
	while kill -0 "$pid" 2>/dev/null; do
		if ! broker_alive; then
			kill -TERM "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			wait "$BROKER_PID" 2>/dev/null
			brc=$?
			BROKER_PID=
			fail "broker exited (status $brc) during: ${*:1:2} ... ($(grep -E 'signal [0-9]+' "$BROKER_LOG" | tail -n 1))"
		fi
		sleep 0.2
	done
	wait "$pid"
}

# log_wait FROM PATTERN [SECONDS]: true once the broker log, from line FROM on, holds a line
# matching PATTERN (grep -E), false after SECONDS (default 20) or when the broker died. Lines a
# core writes after the port is up (a data core opens its partitions then; a pass of a timer
# logs at its end) need it: one grep right away races them.
log_wait() {
	local from=$1 pat=$2 deadline=$((SECONDS + ${3:-20}))
	until tail -n +"$from" "$BROKER_LOG" | grep -qE "$pat"; do
		((SECONDS < deadline)) && broker_alive || return 1
		sleep 0.1
	done
}

# Exit with the status of the script's own verdict, keeping the trap's cleanup.
pass() {
	log "PASS${1:+: $1}"
	exit 0
}

# kafkajs_ready: node_modules/kafkajs 2.2.4 (and kafkajs-snappy) in $JSDIR, installed with `npm ci`
# if missing; skips (77) without node/npm or without a network.
kafkajs_ready() {
	JSDIR=$(cd "$(dirname "$0")/kafkajs" && pwd)
	command -v node >/dev/null || skip "node is not installed"
	# kafkajs-snappy (pure JS) too: kafkajs has no snappy codec of its own.
	node -e 'process.exit(require(process.argv[1]).version === "2.2.4" ? 0 : 1)' \
		"$JSDIR/node_modules/kafkajs/package.json" 2>/dev/null &&
		[ -f "$JSDIR/node_modules/kafkajs-snappy/package.json" ] && return 0
	command -v npm >/dev/null || skip "npm is not installed"
	log "installing kafkajs with npm ci in $JSDIR"
	if ! (cd "$JSDIR" && timeout 300 npm ci --no-audit --no-fund) >"$WORK/npm.log" 2>&1; then
		cat "$WORK/npm.log" >&2
		if grep -Eqi 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH|ECONNRESET|network' "$WORK/npm.log"; then
			skip "npm ci failed: no network to the npm registry"
		fi
		# A TLS-intercepting proxy whose CA this machine does not trust: the
		# registry cannot be reached safely from here (not a defect of ours).
		if grep -Eqi 'SELF_SIGNED_CERT|UNABLE_TO_(GET|VERIFY)|CERT_HAS_EXPIRED|certificate' "$WORK/npm.log"; then
			skip "npm ci failed: the npm registry's TLS certificate is not trusted here"
		fi
		fail "npm ci failed"
	fi
}
