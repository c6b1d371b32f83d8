#!/usr/bin/env bash
# run.sh - librdkafka 2.0.2's own integration tests (its tests/ folder) against a
# sluiced started here.
#
#   run.sh SLUICED [LIST]        (LIST defaults to tests.list beside this script)
#
# The source comes from Debian's source package: a deb-src entry in a private apt
# directory under the cache dir (its own sources.list, lists and archive cache), so
# the system's sources and package lists are neither read nor changed (apt still
# reads its settings in /etc/apt/apt.conf.d and dpkg's status), and `apt-get source`
# unpacks it (Debian's orig tarball has tests/). The library and its test-runner are
# built there, outside our tree, once; later runs reuse the build. Every test of
# LIST marked quick/full runs in its own test-runner process under its own time
# limit, against one broker per scenario (default: topics auto-created with 4
# partitions; noautocreate: --no-auto-create, as the runner's scenario wants). The
# script fails when any listed test fails, and skips (77) only when the mirror
# cannot be reached; a missing tool or keyring (tools/install-deps.sh installs
# them) or a signature that does not verify fails.
#
# Env: RDK_SUITE_CACHE (default $TMPDIR/sluice-rdkafka-suite), RDK_SUITE_JOBS (make
# -j, default 2), RDK_SUITE_PARALLEL (tests at a time, default 2), RDK_SUITE_ONLY (space-separated test numbers: run only those of
# the list), RDK_SUITE_LIMIT_SCALE (multiplies every time limit, default 1),
# RDK_SUITE_DEADLINE_S (seconds from the script's start, fetch and build
# included, after which the tests still running are killed and count as
# failed, those not started as not run; default 2580, below meson's 2700 s
# timeout, so that the summary is printed),
# SLUICE_CORES (default 2), SLUICE_KEEP=1 (keep the work dir).

set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../integration/lib.sh
. "$HERE/../integration/lib.sh"

RDK_VERSION=2.0.2
RDK_DEB_VERSION=2.0.2-1            # bookworm's
RDK_SUITE=bookworm
RDK_MIRROR=${RDK_SUITE_MIRROR:-http://deb.debian.org/debian}
# The broker version the runner is told: it skips tests that need a newer one.
RDK_BROKER_VERSION=3.4.0
JOBS=${RDK_SUITE_JOBS:-2}
SCALE=${RDK_SUITE_LIMIT_SCALE:-1}
# Tests run this many at a time against the broker: most of a test's time is
# spent waiting (timeouts, rebalances), not computing.
PAR=${RDK_SUITE_PARALLEL:-2}
# The tests' limits add up to far more than meson's timeout for this test
# (meson.build, 2700 s); 120 s below it leaves time to kill, stop the broker
# and say which passed.
DEADLINE_S=${RDK_SUITE_DEADLINE_S:-2580}
[[ "$DEADLINE_S" =~ ^[0-9]+$ ]] || { echo "rdkafka-suite: bad RDK_SUITE_DEADLINE_S '$DEADLINE_S'" >&2; exit 1; }
LIST=$(abs_path "${2:-$HERE/tests.list}")
[ -f "$LIST" ] || { echo "rdkafka-suite: no list file '$LIST'" >&2; exit 1; }

# The broker keeps its own default initial rebalance delay (Kafka's 3000 ms):
# 0102 depends on it (lib.sh would pass 0).
SLUICE_GROUP_DELAY_MS=
integ_init rdkafka-suite 59 "${1:-}"
CACHE=${RDK_SUITE_CACHE:-${TMPDIR:-/tmp}/sluice-rdkafka-suite}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
SRC=$CACHE/librdkafka-$RDK_VERSION

# ---- fetch ---------------------------------------------------------------------
RDK_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# fetch_failed LOG WHAT: apt's LOG says why WHAT failed. A mirror that cannot be
# reached (no route, refused, no name, timed out) skips: this machine has no
# network. Anything else fails: a signature or hash that does not verify, a
# mirror that answers but lacks the package (404, no such source), an unpack error.
fetch_failed() {
	if grep -Eqi 'GPG error|NO_PUBKEY|EXPKEYSIG|BADSIG|is not signed|signatures (couldn.t be verified|were invalid)|failed to verify signature|Clearsigned file|Hash Sum mismatch' "$1"; then
		fail "$2 failed: the source's signature or hashes do not verify (log: $1)"
	fi
	if grep -Eqi 'Could not connect|Could not resolve|Temporary failure resolving|Connection refused|Connection timed out|Connection failed|No route to host|Network is unreachable|Unable to connect' "$1"; then
		skip "$2 failed: $RDK_MIRROR cannot be reached: cannot fetch librdkafka's source"
	fi
	fail "$2 failed, and not for want of a network (log: $1)"
}
fetch_source() {
	[ -f "$SRC/.sluice-fetched" ] && return 0
	# What install-deps.sh provides is a failure when missing, not a skip.
	command -v apt-get >/dev/null || fail "apt-get is not installed: cannot fetch librdkafka's source"
	command -v dpkg-source >/dev/null ||
		fail "dpkg-source is not installed (tools/install-deps.sh installs dpkg-dev): cannot unpack librdkafka's source"
	[ -r "$RDK_KEYRING" ] ||
		fail "no $RDK_KEYRING (tools/install-deps.sh installs debian-archive-keyring): cannot verify librdkafka's source"
	local apt=$CACHE/apt
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/sources.list.d"
	echo "deb-src [signed-by=$RDK_KEYRING] $RDK_MIRROR $RDK_SUITE main" \
		>"$apt/sources.list"
	# Only our sources.list (an empty parts dir), our lists and our cache: the
	# system's apt state is left as it is. As root, apt would hand the download
	# to the _apt user, which cannot write into our directory.
	APT_OPTS=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=$apt/sources.list.d"
	          -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
	          -o "Debug::NoLocking=1" -o "APT::Sandbox::User=$(id -un)")
	log "fetching librdkafka $RDK_DEB_VERSION's source ($RDK_MIRROR $RDK_SUITE)"
	if ! apt-get "${APT_OPTS[@]}" update >"$WORK/apt-update.log" 2>&1 ||
	   grep -Eq '^E: |^W: (Failed to fetch|GPG error)|^Err:' "$WORK/apt-update.log"; then
		cat "$WORK/apt-update.log" >&2
		fetch_failed "$WORK/apt-update.log" "apt-get update of the private deb-src list"
	fi
	rm -rf "$SRC"
	if ! (cd "$CACHE" && apt-get "${APT_OPTS[@]}" source "librdkafka=$RDK_DEB_VERSION") >"$WORK/apt-source.log" 2>&1; then
		cat "$WORK/apt-source.log" >&2
		fetch_failed "$WORK/apt-source.log" "apt-get source librdkafka=$RDK_DEB_VERSION"
	fi
	[ -f "$SRC/tests/test.c" ] || fail "the unpacked source has no tests/test.c"
	touch "$SRC/.sluice-fetched"
}

# ---- build ---------------------------------------------------------------------
# Only what the tests need against a plaintext broker: no SSL, SASL or curl, so
# the build needs nothing beyond build-essential, zlib and zstd.
RDK_CONFIGURE=(--no-download --disable-ssl --disable-gssapi --disable-curl
               --enable-zlib --enable-zstd --disable-debug-symbols)
build_runner() {
	# The stamp holds the configure line: a changed one builds again.
	[ -x "$SRC/tests/test-runner" ] && [ "$(cat "$SRC/.sluice-built" 2>/dev/null)" = "${RDK_CONFIGURE[*]}" ] &&
		return 0
	local t0=$SECONDS
	log "building librdkafka $RDK_VERSION and its test-runner in $SRC (make -j$JOBS)"
	rm -f "$SRC/.sluice-built"
	(cd "$SRC" &&
		./configure "${RDK_CONFIGURE[@]}" &&
		make -j"$JOBS" libs &&
		make -C tests -j"$JOBS" test-runner) >"$CACHE/build.log" 2>&1 ||
		{ tail -n 40 "$CACHE/build.log" >&2; fail "building librdkafka's tests failed (log: $CACHE/build.log)"; }
	echo "${RDK_CONFIGURE[*]}" >"$SRC/.sluice-built"
	log "built in $((SECONDS - t0)) s"
}

fetch_source
build_runner

# ---- run -----------------------------------------------------------------------
# tests.list: "NNNN quick|full LIMIT_S [SCENARIO [retry]] [sub=NAME]" runs test
# NNNN (every non-local test of that number; -L leaves out its _local/_mock parts),
# quick with -Q, and once more after a failure where marked retry (a race in the
# test itself, fixed upstream after 2.0.2: tests.list names the fix); with sub=NAME
# only its subtests whose name holds NAME (the runner's SUBTESTS, one substring a
# runner: a number may have several such lines, each its own runner, and one of
# them passes only where a subtest of its NAME passed). "NNNN skip REASON" records
# why it, or a subtest of it, is left out. '#' starts a comment.
declare -a RUN_ID RUN_KEY RUN_SUB RUN_MODE RUN_LIMIT RUN_SCEN RUN_RETRY
while read -r line; do
	sub=
	line=${line%%#*}
	if [[ "$line" =~ ^(.*[[:space:]])sub=([^[:space:]]*)[[:space:]]*$ ]]; then
		line=${BASH_REMATCH[1]} sub=${BASH_REMATCH[2]}
		# It names the runner's files (NNNN.NAME-SCENARIO.log) and goes into a regex.
		[[ "$sub" =~ ^[A-Za-z0-9_]+$ ]] || fail "$LIST: bad subtest name '$sub' (letters, digits, _)"
	fi
	read -r id mode limit scen flag extra <<<"$line"
	[ -n "${id:-}" ] || continue
	[[ "$id" =~ ^[0-9]{4}$ ]] || fail "$LIST: bad test number '$id'"
	case "$mode" in
	skip) continue ;;
	quick|full) ;;
	*) fail "$LIST: test $id: mode '$mode' is not quick, full or skip" ;;
	esac
	[[ "$limit" =~ ^[0-9]+$ ]] || fail "$LIST: test $id: bad time limit '$limit'"
	[ -n "$scen" ] || scen=default
	case "$flag" in
	'') flag=0 ;;
	retry) flag=1 ;;
	*) fail "$LIST: test $id: '$flag' is not retry" ;;
	esac
	[ -z "$extra" ] || fail "$LIST: test $id: '$extra' after the flag"
	if [ -n "${RDK_SUITE_ONLY:-}" ] && [[ " $RDK_SUITE_ONLY " != *" $id "* ]]; then
		continue
	fi
	key=$id${sub:+.$sub}
	# One runner's files per line: the same test (and subtest) twice in a scenario would share them.
	for j in "${!RUN_KEY[@]}"; do
		[ "${RUN_KEY[$j]}-${RUN_SCEN[$j]}" != "$key-$scen" ] || fail "$LIST: test $key twice in scenario $scen"
	done
	RUN_ID+=("$id"); RUN_KEY+=("$key"); RUN_SUB+=("$sub"); RUN_MODE+=("$mode"); RUN_LIMIT+=("$limit")
	RUN_SCEN+=("$scen"); RUN_RETRY+=("$flag")
done <"$LIST"
[ ${#RUN_ID[@]} -gt 0 ] || fail "no test of $LIST to run"

# ran_one ID LOG [SUB]: the runner saw a test numbered ID pass (one skipped as not
# applicable, or a number whose tests are all local, would look like a pass), and
# with SUB a subtest whose name holds SUB (a SUBTESTS that matches none passes too).
ran_one() {
	grep -Eq "=+ Test $1_[A-Za-z0-9_]+ PASSED =+" "$2" &&
		{ [ -z "${3:-}" ] || grep -aEq "\[ [^]]*$3[^]]*: PASS \(" "$2"; }
}
# run_one I SCEN: test RUN_ID[I] in its own runner under its limit, and once more
# after a failure where the list says retry; writes its verdict (PASS/FAIL) to
# $WORK/ID-SCEN.verdict and says why on each failure (the first try's log is kept
# as ID-SCEN.try1.log).
run_one() {
	local i=$1 scen=$2
	if try_one "$i" "$scen" || [ "${RUN_RETRY[$i]}" != 1 ] || [ -f "$WORK/past-deadline" ]; then
		return 0
	fi
	mv "$WORK/${RUN_KEY[$i]}-$scen.log" "$WORK/${RUN_KEY[$i]}-$scen.try1.log"
	log "RETRY ${RUN_KEY[$i]} ($scen): its failure above is a race in the test itself (tests.list)"
	try_one "$i" "$scen"
}
try_one() {
	local i=$1 scen=$2 id=${RUN_ID[$1]} key=${RUN_KEY[$1]} sub=${RUN_SUB[$1]} q= t0=$SECONDS rc limit
	local out=$WORK/$key-$scen
	limit=$(awk -v l="${RUN_LIMIT[$i]}" -v s="$SCALE" 'BEGIN { printf "%d", l * s }')
	# At least 1 s: a small scale rounds to 0, and `timeout 0` means no limit.
	[ "$limit" -ge 1 ] || limit=1
	[ "${RUN_MODE[$i]}" = quick ] && q=-Q
	# exec: timeout is this subshell's child, where kill_group finds it, and
	# its pid is its process group's id, kept in $out.pgid for kill_tests: a
	# signal to the whole script's group (meson's, at its timeout) kills this
	# subshell before the script's trap runs, and timeout is then init's.
	# SUBTESTS is always set: empty (every subtest) where the line names none.
	(cd "$SRC/tests" &&
		TESTS=$id SUBTESTS=$sub TEST_SCENARIO=$scen TEST_KAFKA_VERSION=$RDK_BROKER_VERSION \
		RDKAFKA_TEST_CONF=$WORK/test.conf TEST_LEVEL=2 \
		LD_LIBRARY_PATH=$SRC/src:$SRC/src-cpp \
		exec timeout -k 10 "$limit" ./test-runner -L -p1 $q) >"$out.log" 2>&1 &
	echo $! >"$out.pgid"
	wait $!
	rc=$?
	rm -f "$out.pgid"
	# Passed: the runner says so, and ran (did not skip) a test of this number.
	if [ "$rc" -eq 0 ] && grep -q 'ALL TESTS PASSED' "$out.log" && ran_one "$id" "$out.log" "$sub"; then
		echo PASS >"$out.verdict"
		log "PASS $key ($scen, ${RUN_MODE[$i]}) in $((SECONDS - t0)) s"
		return 0
	fi
	echo FAIL >"$out.verdict"
	if [ -f "$WORK/past-deadline" ]; then
		log "test $key killed at the suite's deadline (RDK_SUITE_DEADLINE_S=$DEADLINE_S)"
	elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		log "test $key ran past its limit of $limit s (status $rc)"
	fi
	# The runner's own verdict lines ("### Test ... failed at ...") and the
	# line after each say why; then the log's end. One block, so that the
	# output of two tests running together does not interleave.
	{
		log "FAIL $key ($scen, ${RUN_MODE[$i]}) status $rc in $((SECONDS - t0)) s; from $out.log:"
		grep -a -A2 '^.*### Test ' "$out.log" | head -n 30
		grep -a -v '^\s*$' "$out.log" | tail -n 15
	} 2>&1 | cat >&2
	return 1
}

# kill_group P...: SIGKILL what each run_one subshell P runs: its children
# (timeout, which makes itself the leader of its own process group, so a kill
# of P alone would leave it and test-runner running for up to their limit),
# each child's group (test-runner is in timeout's), and the child itself (not
# yet a group leader before its exec).
kill_group() {
	local p c
	for p in "$@"; do
		for c in $(pgrep -P "$p"); do
			kill -KILL -- "-$c" 2>/dev/null
			kill -KILL "$c" 2>/dev/null
		done
	done
}
# kill_tests: every test still running. The subshells are stopped first, so
# that none starts its timeout after its children were looked up; then the
# groups run_one recorded (those whose subshell is gone too).
kill_tests() {
	local p f
	for p in ${INTEG_CHILDREN:-}; do kill -STOP "$p" 2>/dev/null; done
	kill_group ${INTEG_CHILDREN:-}
	for f in "$WORK"/*.pgid; do
		[ -f "$f" ] || continue
		p=$(cat "$f" 2>/dev/null)
		[[ "$p" =~ ^[0-9]+$ ]] || continue
		kill -KILL -- "-$p" 2>/dev/null
		kill -KILL "$p" 2>/dev/null
	done
}
# On any exit (failure, meson's SIGTERM at its timeout) the tests go first,
# then lib.sh's cleanup with the script's status.
rdk_cleanup() {
	local rc=$?
	kill_tests
	(exit "$rc")
	integ_cleanup
}
trap rdk_cleanup EXIT

# past_deadline: the suite's time is up; the first call that finds it so
# kills the tests P... still running (they count as failed).
past_deadline() {
	((SECONDS >= DEADLINE_S)) || return 1
	if [ ! -f "$WORK/past-deadline" ]; then
		log "the suite's deadline (RDK_SUITE_DEADLINE_S=$DEADLINE_S s) has passed: killing the tests still running"
		touch "$WORK/past-deadline"
	fi
	kill_group "$@"
	return 0
}

passed=() failed=() notrun=()
run_scenario() {
	local scen=$1 i n=0
	for i in "${!RUN_ID[@]}"; do [ "${RUN_SCEN[$i]}" = "$scen" ] && n=$((n + 1)); done
	[ "$n" -gt 0 ] || return 0
	if past_deadline; then
		for i in "${!RUN_ID[@]}"; do [ "${RUN_SCEN[$i]}" = "$scen" ] && notrun+=("${RUN_KEY[$i]}"); done
		return 0
	fi
	local args=(--cores "${SLUICE_CORES:-2}" --partitions 4)
	[ "$scen" = noautocreate ] && args+=(--no-auto-create)
	start_broker "${args[@]}"
	# The runner's timeouts, times 3: this machine is shared and slow.
	cat >"$WORK/test.conf" <<-EOF
	metadata.broker.list=$BOOTSTRAP
	test.timeout.multiplier=3
	test.topic.random=true
	EOF
	log "scenario $scen: $n tests against $BOOTSTRAP, $PAR at a time"
	# The tests' pids only: a bare wait would wait for the broker too.
	local pids=() all=() started=() p live
	# reap MAX: wait until fewer than MAX tests run; past the deadline, they are killed.
	reap() {
		while :; do
			live=()
			for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && live+=("$p"); done
			pids=("${live[@]}")
			# Only live subshells: a reaped one's pid may be someone else's by now.
			INTEG_CHILDREN="${pids[*]}"
			[ "${#pids[@]}" -lt "$1" ] && return 0
			past_deadline "${pids[@]}"
			sleep 0.5
		done
	}
	for i in "${!RUN_ID[@]}"; do
		[ "${RUN_SCEN[$i]}" = "$scen" ] || continue
		reap "$PAR"
		if past_deadline; then
			notrun+=("${RUN_KEY[$i]}")
			continue
		fi
		broker_alive || fail "the broker died (before test ${RUN_KEY[$i]})"
		run_one "$i" "$scen" &
		pids+=($!) all+=($!) started+=("$i")
		INTEG_CHILDREN="${pids[*]}"
	done
	reap 1
	for p in "${all[@]}"; do wait "$p"; done
	INTEG_CHILDREN=
	broker_alive || fail "the broker died during the $scen tests"
	for i in "${started[@]}"; do
		if [ "$(cat "$WORK/${RUN_KEY[$i]}-$scen.verdict" 2>/dev/null)" = PASS ]; then
			passed+=("${RUN_KEY[$i]}")
		else
			failed+=("${RUN_KEY[$i]}")
		fi
	done
	stop_broker
}

t0=$SECONDS
run_scenario default
run_scenario noautocreate
log "${#passed[@]} passed, ${#failed[@]} failed, ${#notrun[@]} not run (deadline) in $((SECONDS - t0)) s: passed ${passed[*]:-none}"
[ ${#failed[@]} -eq 0 ] && [ ${#notrun[@]} -eq 0 ] ||
	fail "failed: ${failed[*]:-none}; not run before the deadline: ${notrun[*]:-none}"
pass "librdkafka $RDK_VERSION tests: ${#passed[@]} passed"
