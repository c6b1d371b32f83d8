#!/usr/bin/env bash
# fuzz_wire.sh SLUICED_ASAN RDK_LOAD [SLUICE_DUMP]
#
# Hostile-client test (issue 10): tests/fuzz/wire_fuzz.py throws mutated
# requests of every advertised API and version at sluiced-asan (ASan + UBSan,
# fatal) over TCP for FUZZ_WIRE_SECONDS (default 90), and after every burst
# checks that the broker is alive, its sanitizer log is empty, its RSS is under
# FUZZ_WIRE_RSS_MB, and that a normal client is still served. Then the broker
# must stop cleanly (no leaks at exit), start again on the same data and serve
# librdkafka.
#
# Env: FUZZ_WIRE_SEED (default random; printed, and a failure prints how to
# replay it), FUZZ_WIRE_ARGS (more wire_fuzz.py options), FUZZ_WIRE_SECONDS,
# FUZZ_WIRE_RSS_MB (default 2048: ASan about doubles the broker's footprint, and
# growth without bound passes it within seconds), SLUICE_CORES (default 3).
# A longer run: FUZZ_WIRE_SECONDS=1800 meson test -C build -t 25 fuzz_wire.
# On a failure the burst that did it is kept in the work dir and replayed frame
# by frame against a fresh broker, to name the single request that does it.
. "$(dirname "$0")/lib.sh"

integ_init fuzz-wire 13 "$@"
need_exe "$RDK_LOAD"
PY=$(command -v python3) || skip "python3 is not installed"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FUZZ=$ROOT/tests/fuzz/wire_fuzz.py
# The caller's FUZZ_WIRE_SECONDS wins over the test's own (FUZZ_WIRE_TEST_SECONDS, set by
# meson, whose test env would override a caller's value of the same name).
SECONDS_FUZZ=${FUZZ_WIRE_SECONDS:-${FUZZ_WIRE_TEST_SECONDS:-90}}
RSS_MB=${FUZZ_WIRE_RSS_MB:-2048}
SEED=${FUZZ_WIRE_SEED:-$(( (RANDOM << 15 | RANDOM) ))}
MAX_FRAME=1048576   # wire_fuzz.py's MAX_FRAME_BYTES

# Every report goes to a file of its own ($WORK/san.PID); abort so the process
# dies where it happened (a plain abort() gets a stack too); the RSS cap is ASan's own backstop behind the
# fuzzer's watch.
export ASAN_OPTIONS="log_path=$WORK/san:abort_on_error=1:handle_abort=1:detect_leaks=1:quarantine_size_mb=64:hard_rss_limit_mb=$((RSS_MB + 512))"
export UBSAN_OPTIONS="log_path=$WORK/san:print_stacktrace=1:halt_on_error=1:abort_on_error=1"

sanitizer_clean() {
	local f
	for f in "$WORK"/san*; do
		[ -s "$f" ] || continue
		log "sanitizer report $f:"
		head -n 60 "$f" >&2
		return 1
	done
	return 0
}

fuzz() {
	"$PY" "$FUZZ" --port "$PORT" --pid "$BROKER_PID" --schemas "$ROOT/dataplane/proto/schema" \
		--kgen "$ROOT/dataplane/proto/kgen.py" --sanitizer-log "$WORK/san" \
		--rss-limit-mb "$RSS_MB" "$@"
}

# A failure: the sanitizer's report, then the failing burst replayed one frame
# at a time against a fresh broker on fresh data.
post_mortem() {
	sanitizer_clean
	[ -f "$WORK/burst.json" ] || return 0
	kill9_broker
	DATA=$WORK/data-replay
	mkdir -p "$DATA"
	rm -f "$WORK"/san*
	log "replaying the failing burst frame by frame on a fresh broker"
	start_broker --cores "${SLUICE_CORES:-3}" --max-frame-bytes "$MAX_FRAME" --no-fsync
	fuzz --replay "$WORK/burst.json" --one-by-one
	sleep 1
	sanitizer_clean
}

start_broker --cores "${SLUICE_CORES:-3}" --max-frame-bytes "$MAX_FRAME" --no-fsync
log "fuzzing for ${SECONDS_FUZZ}s with seed $SEED (FUZZ_WIRE_SEED=$SEED to replay)"
fuzz --seed "$SEED" --duration "$SECONDS_FUZZ" --save "$WORK/burst.json" ${FUZZ_WIRE_ARGS:-}
rc=$?
if [ "$rc" -ne 0 ]; then
	post_mortem
	fail "wire_fuzz.py failed with seed $SEED (FUZZ_WIRE_SEED=$SEED to replay)"
fi
broker_alive || fail "broker died during fuzzing (seed $SEED)"
sanitizer_clean || fail "sanitizer report during fuzzing (seed $SEED)"

# What the fuzzer left behind must not keep the broker from a clean stop, a
# restart on the same data, or serving a real client.
stop_broker
sanitizer_clean || fail "sanitizer report at shutdown, e.g. leaks (seed $SEED)"
start_broker --cores "${SLUICE_CORES:-3}" --max-frame-bytes "$MAX_FRAME" --no-fsync
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic after-fuzz --partitions 3 --count 1000 \
	--size 100 --acks all || fail "produce after fuzzing exited $? (seed $SEED)"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic after-fuzz --partitions 3 --expect 1000 \
	--timeout 60 || fail "consume after fuzzing exited $? (seed $SEED)"
stop_broker
sanitizer_clean || fail "sanitizer report after the restart (seed $SEED)"
pass "seed $SEED: ${SECONDS_FUZZ}s of hostile clients, broker alive and serving, sanitizers clean"
