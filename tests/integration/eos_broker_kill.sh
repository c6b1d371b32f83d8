#!/usr/bin/env bash
# eos_broker_kill.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_EOS SLUICE_ADMIN
#
# Exactly-once across broker crashes: one rdk_eos copier (as in eos.sh, its
# reads interleaved over the partitions with --fetch-bytes, so that every
# transaction spans several) runs while the broker is SIGKILLed and restarted
# on the same port and data dir, once per word of EOSB_KILLS, each after the
# copier committed again since the last restart:
#   sigkill: 1-2 s later, at a random point: inside an open transaction,
#     between its offsets being staged and the commit, or inside a commit;
#   commit: the moment the copier's next commit returns. EndTxn is answered
#     once PrepareCommit is durable and the markers and the staged offsets'
#     application follow, so the crash often lands between the two: the
#     restart must finish that commit, offsets included ("interrupted
#     commits/aborts resumed" in the broker log; logged per restart).
# (The broker's --fault-txn-kill points are not used: the first EndTxn after
# a restart is nearly always the copier's abort of the transaction it had
# open, whose TxnOffsetCommit the restarted broker refuses with
# ILLEGAL_GENERATION, so they would hit that abort, or its resumption.)
# The copier keeps running: librdkafka reconnects, rdk_eos retries retriable
# errors and aborts (and rewinds) on abortable ones; only if it exits (a
# fatal error) is it started again with the same transactional id, and the
# script says how often. After it is done: no transaction may be left Ongoing
# (sluice-admin transactions), the group's committed offsets (RequireStable)
# must be the input's end offsets, and read_committed on the output must show
# every input record exactly once, in order per partition; then all of that
# once more after a last SIGKILL and restart, so that offsets, staged offsets
# and transaction states are shown to be recovered from disk.
# Env knobs: EOSB_COUNT (default 60000), EOSB_KILLS ("sigkill commit commit"),
# EOSB_BATCH (100), EOSB_DELAY_MS (25), EOSB_DOWN_S (0.5: how long the broker
# stays down).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/eos_lib.sh"
eos_init eos-bk 49 "$@"
ADMIN=$(abs_path "${5:-}")
need_exe "$ADMIN"
COUNT=${EOSB_COUNT:-60000}
read -r -a KINDS <<<"${EOSB_KILLS:-sigkill commit commit}"
BATCH=${EOSB_BATCH:-100}
DELAY_MS=${EOSB_DELAY_MS:-25}
DOWN_S=${EOSB_DOWN_S:-0.5}
PROGRESS_WAIT_S=60
RESTARTS_MAX=10
G=eos-bk-g
CORES=${SLUICE_CORES:-3}
for kind in "${KINDS[@]}"; do
	case "$kind" in sigkill | commit) ;; *) fail "EOSB_KILLS: unknown kind '$kind'" ;; esac
done

# restart_broker: starts the broker and logs what it recovered.
restart_broker() {
	local from=1
	[ -f "$BROKER_LOG" ] && from=$(($(wc -l <"$BROKER_LOG") + 1))
	start_broker --cores "$CORES"
	log "recovered: $(tail -n +"$from" "$BROKER_LOG" | grep -E 'coordinator: |offsets: ' | sed 's/.*core0: //' | tr '\n' ';')"
}

# kill_on_commit: SIGKILL the broker the moment the copier prints its next
# commit (tail -f wakes on the write; a poll loop would be milliseconds late).
kill_on_commit() {
	local fd tailpid line deadline=$((SECONDS + PROGRESS_WAIT_S))
	exec {fd}< <(exec tail -n 0 -f "$WORK/run$runs.out")
	tailpid=$!
	INTEG_CHILDREN="${INTEG_CHILDREN:-} $tailpid"   # a fail below must not leave it behind
	while :; do
		if read -r -t 0.2 -u "$fd" line; then
			[[ $line == commit* ]] && break
			continue
		fi
		broker_alive || fail "broker died before kill $k"
		kill -0 "$COPIER" 2>/dev/null || break   # copier_check below restarts it
		((SECONDS < deadline)) || fail "no commit in ${PROGRESS_WAIT_S}s before kill $k: $(eos_show run$runs)"
	done
	[[ ${line:-} == commit* ]] && kill9_broker
	kill "$tailpid" 2>/dev/null
	wait "$tailpid" 2>/dev/null
	INTEG_CHILDREN=${INTEG_CHILDREN/ $tailpid/}
	exec {fd}<&-
	[ -z "$BROKER_PID" ]
}

restart_broker
eos_start_copier() {
	runs=$((runs + 1))
	eos_start run$runs $G eos-bk --batch "$BATCH" --txn-delay-ms "$DELAY_MS" --idle-seconds 60 --fetch-bytes 4096
	COPIER=$EOS_PID
}

# copier_check: restarts the copier if it exited; true while it still runs
# or was restarted, false once it finished ("done", status 0).
copier_check() {
	kill -0 "$COPIER" 2>/dev/null && return 0
	wait "$COPIER"
	local rc=$?
	if [ "$rc" -eq 0 ] && grep -q '^done' "$WORK/run$runs.out"; then
		return 1
	fi
	log "copier run $runs exited (status $rc): $(eos_show run$runs)"
	((runs < RESTARTS_MAX)) || fail "the copier had to be restarted $RESTARTS_MAX times"
	eos_start_copier
	return 0
}

commits() {   # commits of every copier run so far
	local r n=0
	for ((r = 1; r <= runs; r++)); do n=$((n + $(grep -c '^commit' "$WORK/run$r.out"))); done
	echo "$n"
}

transactions_settled() {   # LABEL: no transaction of the broker is Ongoing
	guarded "$ADMIN" --bootstrap "$BOOTSTRAP" transactions >"$WORK/txns-$1.txt" 2>"$WORK/txns-$1.err" ||
		fail "$1: sluice-admin transactions exited $?: $(tr '\n' ';' <"$WORK/txns-$1.err")"
	grep -q . "$WORK/txns-$1.txt" || fail "$1: sluice-admin lists no transaction at all"
	! grep -q 'state=Ongoing' "$WORK/txns-$1.txt" || fail "$1: a transaction is left Ongoing: $(tr '\n' ';' <"$WORK/txns-$1.txt")"
	log "$1: $(sed -e 's/ start_ms=.*//' "$WORK/txns-$1.txt" | tr '\n' ';')"
}

eos_topics "$COUNT"
runs=0
eos_start_copier
eos_wait_commit run1 "$COPIER"
for ((k = 1; k <= ${#KINDS[@]}; k++)); do
	kind=${KINDS[k - 1]}
	c0=$(commits)
	# Progress since the last restart first, so that the kill is mid-run.
	deadline=$((SECONDS + PROGRESS_WAIT_S))
	while (($(commits) <= c0)); do
		broker_alive || fail "broker died before kill $k"
		copier_check || fail "the copier finished before kill $k: the input is too small for ${#KINDS[@]} kills"
		((SECONDS < deadline)) || fail "no commit in ${PROGRESS_WAIT_S}s before kill $k: $(eos_show run$runs)"
		sleep 0.05
	done
	if [ "$kind" = sigkill ]; then
		nap=$(printf '%d.%03d' $((1 + RANDOM % 2)) $((RANDOM % 1000)))
		sleep "$nap"
		copier_check || fail "the copier finished before kill $k: the input is too small for ${#KINDS[@]} kills"
		kill9_broker
		what="SIGKILLed $nap s after a commit"
	else
		until kill_on_commit; do
			copier_check || fail "the copier finished before kill $k: the input is too small for ${#KINDS[@]} kills"
		done
		what="SIGKILLed as a commit returned"
	fi
	log "kill $k: broker $what; copier run $runs: $(eos_count '^commit' run$runs) commits, $(eos_count '^abort' run$runs) aborts, $(($(commits) - c0)) commits since the last restart"
	sleep "$DOWN_S"
	restart_broker
done

while copier_check; do
	broker_alive || fail "broker died after the last restart"
	sleep 0.2
done
all=()
for ((r = 1; r <= runs; r++)); do all+=(run$r); done
log "copier: $(grep '^done' "$WORK/run$runs.out"); $((runs - 1)) restart(s) of the copier after a fatal error; $(eos_count '^commit' "${all[@]}") commits, $(eos_count '^abort' "${all[@]}") aborts in all"
# Informational: why the copier aborted or retried (an instance's group
# generation does not survive a broker restart, so its next TxnOffsetCommit is
# refused with ILLEGAL_GENERATION, an abortable error).
log "copier errors: $(cat "$WORK"/run*.err | grep '^rdk_eos: ' | sed -E 's/ \(after [0-9]+ms\)//; s/ on broker [^ ]+//' | cut -c9-150 | sort | uniq -c | tr -s ' \n' ' ;')"

transactions_settled "after the run"
eos_check_committed $G committed-run
eos_check_output "$COUNT"

kill9_broker
restart_broker
transactions_settled "after the last restart"
eos_check_committed $G committed-restart
eos_check_output "$COUNT"
stop_broker
pass "$COUNT records copied exactly once across ${#KINDS[@]} broker crashes (${KINDS[*]}), $((runs - 1)) copier restart(s)"
