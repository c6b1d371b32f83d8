# txn_lib.sh - helpers shared by the transaction scripts (txn_*.sh, kafkajs_txn.sh);
# sourced after lib.sh. The scripts get: SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN.

# txn_init NAME PORT_OFFSET "$@": integ_init plus $RDK_TXN (the 4th script argument).
txn_init() {
	local name=$1 off=$2
	shift 2
	integ_init "$name" "$off" "$@"
	RDK_TXN=$(abs_path "${4:-}")
	need_exe "$RDK_TXN"
}

# txn_run LOGNAME CMD...: run a client while watching the broker; its stdout and
# stderr go to $WORK/LOGNAME.{out,err}; returns its status.
txn_run() {
	local name=$1
	shift
	guarded "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
}

# txn_open_killed LOGNAME RDK_TXN_PRODUCE_ARGS...: run an rdk_txn produce whose
# --plan is "open", wait until it has flushed its open transaction (OPEN on
# its stdout; a generous limit, the machine may be busy), then SIGKILL it.
txn_open_killed() {
	local name=$1 pid deadline=$((SECONDS + 60))
	shift
	"$RDK_TXN" produce "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
	pid=$!
	INTEG_CHILDREN=$pid
	until grep -q '^OPEN' "$WORK/$name.out"; do
		kill -0 "$pid" 2>/dev/null || fail "the producer to be killed exited early: $(txn_show "$name")"
		((SECONDS < deadline)) || fail "the producer to be killed never flushed: $(txn_show "$name")"
		sleep 0.1
	done
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	INTEG_CHILDREN=
}

# txn_show LOGNAME: the last lines of a client's logs, for a failure message.
txn_show() {
	tail -n 15 "$WORK/$1.out" "$WORK/$1.err" 2>/dev/null | grep -v '^rdkafka .* 7 ' | tail -n 25
}

# expect_lines FILE LABEL...: the lines of an rdk_txn --out file with one of the labels.
expect_lines() {
	local f=$1 re
	shift
	re=$(IFS='|'; echo "$*")
	grep -E "^($re) " "$f" || true
}

# consume_check LOGNAME ISOLATION EXPECT_FILE TOPICS PARTITIONS [rdk_txn consume args...]
consume_check() {
	local name=$1 iso=$2 exp=$3 topics=$4 parts=$5
	shift 5
	txn_run "$name" "$RDK_TXN" consume --bootstrap "$BOOTSTRAP" --topics "$topics" \
		--partitions "$parts" --isolation "$iso" --expect "$exp" --out "$WORK/$name.read" "$@" ||
		fail "$name: read_$iso does not match $(wc -l <"$exp") expected records:
$(txn_show "$name")"
	log "$name: $(tail -n 1 "$WORK/$name.out")"
}
