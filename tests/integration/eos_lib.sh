# eos_lib.sh - shared parts of the exactly-once scripts (eos.sh, eos_two.sh,
# eos_broker_kill.sh); sourced after lib.sh, not run.
#
# eos_init NAME PORT_OFFSET "$@": integ_init plus $RDK_EOS (the 4th script
# argument). Topics: $IN (input, $PARTS partitions) and $OUT. Copier
# instances (rdk_eos) write WORK/LOGNAME.out and .err; their pids go on
# INTEG_CHILDREN so the EXIT trap kills them.

PARTS=6
FIRST_COMMIT_WAIT_S=30

eos_init() {
	integ_init "$@"
	need_exe "$RDK_LOAD"
	RDK_EOS=$(abs_path "${6:-}")
	need_exe "$RDK_EOS"
	IN=$1-in
	OUT=$1-out
}

# eos_topics COUNT: COUNT keyed records (rdk_load's layout) in $IN, and an empty $OUT.
eos_topics() {
	guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$IN" --partitions $PARTS --count "$1" \
		--size 100 --acks all >"$WORK/prod.log" 2>&1 || fail "rdk_load produce exited $?: $(tail -n 3 "$WORK/prod.log")"
	log "$(grep '^produce:' "$WORK/prod.log")"
	guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$OUT" --partitions $PARTS --count 0 \
		>"$WORK/prod-out.log" 2>&1 || fail "creating $OUT: rdk_load exited $?"
}

# eos_start LOGNAME GROUP TXN_ID [rdk_eos options...]: one copier instance in
# the background, its pid in EOS_PID.
eos_start() {
	local name=$1 group=$2 tid=$3
	shift 3
	"$RDK_EOS" --bootstrap "$BOOTSTRAP" --in "$IN" --out "$OUT" --group "$group" --txn-id "$tid" \
		--partitions $PARTS "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
	EOS_PID=$!
	INTEG_CHILDREN="${INTEG_CHILDREN:-} $EOS_PID"
}

eos_show() {   # LOGNAME: its last lines, on one line
	tail -n 5 "$WORK/$1.out" "$WORK/$1.err" 2>/dev/null | tr '\n' ';'
}

eos_count() {   # PATTERN LOGNAME...: lines matching PATTERN in all their stdouts
	local pat=$1 f files=()
	shift
	for f; do files+=("$WORK/$f.out"); done
	cat "${files[@]}" 2>/dev/null | grep -c -- "$pat"
}

# eos_wait_commit LOGNAME PID: wait (at most FIRST_COMMIT_WAIT_S) until the
# instance has committed a transaction; fails if it or the broker dies first.
eos_wait_commit() {
	local deadline=$((SECONDS + FIRST_COMMIT_WAIT_S))
	while ! grep -q '^commit' "$WORK/$1.out" && ((SECONDS < deadline)); do
		broker_alive || fail "broker died during $1"
		kill -0 "$2" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$2" 2>/dev/null || { wait "$2"; fail "$1 exited $? before its first commit: $(eos_show "$1")"; }
	grep -q '^commit' "$WORK/$1.out" || fail "$1 committed nothing in ${FIRST_COMMIT_WAIT_S}s: $(eos_show "$1")"
}

# eos_finish LOGNAME PID: wait for the instance to end; it must print "done" and exit 0.
eos_finish() {
	while kill -0 "$2" 2>/dev/null; do
		broker_alive || fail "broker died during $1"
		sleep 0.2
	done
	wait "$2"
	local rc=$?
	[ "$rc" -eq 0 ] && grep -q '^done' "$WORK/$1.out" || fail "$1 did not finish (status $rc): $(eos_show "$1")"
}

# eos_check_output COUNT: read_committed on $OUT holds records 0..COUNT-1
# exactly once each, in order per partition.
eos_check_output() {
	guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic "$OUT" --partitions $PARTS --expect "$1" \
		--timeout 60 >"$WORK/check.out" 2>"$WORK/check.err" ||
		fail "output check: $(cat "$WORK/check.out") $(grep -E 'FAIL|never read|after|bad|TIMEOUT' "$WORK/check.err" | head -n 10 | tr '\n' ';')"
	log "$(cat "$WORK/check.out")"
}

# eos_check_committed GROUP LOGNAME: the group's settled committed offsets are
# the input's end offsets (rdk_eos --check-committed).
eos_check_committed() {
	guarded "$RDK_EOS" --check-committed --bootstrap "$BOOTSTRAP" --in "$IN" --group "$1" --partitions $PARTS \
		>"$WORK/$2.out" 2>"$WORK/$2.err" ||
		fail "$2: committed offsets are not the input's end: $(grep -v '^%' "$WORK/$2.out" "$WORK/$2.err" | tr '\n' ';')"
	log "$2: committed offsets = end offsets on all $PARTS partitions"
}
