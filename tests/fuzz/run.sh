#!/usr/bin/env bash
# run.sh TARGET... - the one runner of the libFuzzer targets (suite 'fuzz').
#
# Builds fuzz_TARGET.c of each TARGET with clang (libFuzzer + ASan + UBSan;
# without clang, gcc + ASan + UBSan and the fallback driver fuzz_main.c)
# straight from the sources named for it below, writes its seeds with the
# seed program named for it, and runs each for FUZZ_SECONDS (else the test's
# FUZZ_TEST_SECONDS, else 30) divided among the targets given. Exits 77
# (skip) without either compiler, non-zero on a crash (the input is left as
# crash-* in the current directory).
#
# A new target is one case in target() and one test() in meson.build. An input
# that crashed a target goes into regress/TARGET/ with its fix: it runs first,
# every run (see README).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
clang=${CLANG:-clang-14}
if [ $# -eq 0 ]; then
	echo "usage: run.sh TARGET..." >&2
	exit 2
fi
# Without clang (or with FUZZ_DRIVER=fallback) each target is built with gcc, ASan
# and UBSan and linked with fuzz_main.c, a plain mutation driver that takes the same
# arguments: no coverage guidance, but the seeds and regression cases run either way.
driver=libfuzzer cc=$clang
if [ "${FUZZ_DRIVER:-}" = fallback ] || ! command -v "$clang" >/dev/null 2>&1; then
	driver=fallback cc=${FUZZ_FALLBACK_CC:-gcc}
	if ! command -v "$cc" >/dev/null 2>&1; then
		echo "run.sh: neither $clang nor $cc found: skipped"
		exit 77
	fi
	echo "run.sh: $clang not used: the fallback driver (fuzz_main.c, $cc)"
fi
# FUZZ_SECONDS from the caller wins over the test's own (FUZZ_TEST_SECONDS, set by
# meson.build: meson gives a test's env precedence over the caller's).
seconds=$(( ${FUZZ_SECONDS:-${FUZZ_TEST_SECONDS:-30}} / $# ))
vectors=${KAFKA_VECTORS:-$root/../shared/kafka-protocol/test-vectors}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

flags=(-std=gnu11 -g -O1 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter
	-Wno-missing-field-initializers)
[ "$(uname -m)" = x86_64 ] && flags+=(-msse4.2)
san=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all) driver_src=()
if [ "$driver" = fallback ]; then
	san=(-fsanitize=address,undefined -fno-sanitize-recover=all) driver_src=("$here/fuzz_main.c")
fi
storage=("$root/storage/batch.c" "$root/storage/crc32c.c")

# The targets, each named once. For TARGET it sets: srcs (what fuzz_TARGET.c is
# linked with), inc and libs; seeder (the program that writes the seeds: fuzz_X
# from fuzz_X.c, built without sanitizers) with seeder_srcs, and seed_dirs (the
# targets whose corpus directories it writes, in its argument order: one seeder
# may serve several targets); vectors=1 to add the Kafka test vectors as seeds;
# max_len (bytes of the largest input); noise (a grep pattern of the target's
# own log lines: when set, stderr goes to a file and a failure shows its end
# without them).
# kerr.h/kerr.c (the Kafka error codes and api keys by name) into $work, once.
gen_kerr() {
	[ -f "$work/kerr.h" ] && return 0
	python3 "$root/dataplane/proto/kgen.py" --kerr-header "$work/kerr.h" \
		--kerr-source "$work/kerr.c" --errors "$root/dataplane/proto/schema/errors.txt" \
		"$root"/dataplane/proto/schema/*.json
}

target() {
	inc=() libs=() vectors_too=0 noise=
	case $1 in
	request)   # the Kafka request decoders (kwire + generated kmsg)
		if [ ! -f "$work/kmsg.c" ]; then
			python3 "$root/dataplane/proto/kgen.py" --header "$work/kmsg.h" --source "$work/kmsg.c" \
				"$root"/dataplane/proto/schema/*.json
		fi
		gen_kerr   # kwire.h's enum kapi
		# Every api key the broker advertises (dataplane/conn/api.c's table) has a request
		# schema (a KAPI_ name in kerr.h), so fuzz_seeds writes a frame for each of its versions.
		keys=$(sed -n '/^} dp_apis\[\] = {/,/^};/s/^[[:space:]]*{ \(KAPI_[A-Z0-9_]*\), [0-9]*, [0-9]* },.*/\1/p' \
			"$root/dataplane/conn/api.c")
		[ -n "$keys" ] || { echo "run.sh: no api keys found in dataplane/conn/api.c's dp_apis"; exit 1; }
		for key in $keys; do
			grep -q "^	$key = [0-9]*,$" "$work/kerr.h" ||
				{ echo "run.sh: advertised api key $key has no request schema"; exit 1; }
		done
		srcs=("$root/dataplane/proto/kwire.c" "$root/dataplane/proto/kcodec.c" "$work/kmsg.c")
		inc=(-I"$root/dataplane/proto" -I"$work" -I"$root/tests/unit/proto")
		seeder=fuzz_seeds seeder_srcs=("$root/tests/unit/proto/kfill.c" "${srcs[@]}") seed_dirs=(request)
		vectors_too=1 max_len=8192 ;;
	batch)     # the record-batch parsers client bytes reach (batch walk, CRC, record iterator, markers)
		srcs=("${storage[@]}")
		inc=(-I"$root/storage")
		seeder=fuzz_batch_seeds seeder_srcs=("${storage[@]}") seed_dirs=(batch)
		max_len=65536 ;;
	records)   # the produce-side records check over every codec
		srcs=("${storage[@]}" "$root/storage/records.c" "$root/storage/codec.c")
		inc=(-I"$root/storage") libs=(-lz -lsnappy -llz4 -lzstd)
		seeder=fuzz_records_seeds seeder_srcs=("${storage[@]}") seed_dirs=(records)
		max_len=65536 ;;
	recovery)  # the segment recovery scanner and the readers over what it kept
		srcs=("$root/storage/log.c" "$root/storage/fop.c" "$root/storage/trash.c" "${storage[@]}")
		inc=(-I"$root/storage" -I"$root/txn" -I"$root/tests/unit/storage") libs=(-luring)
		seeder=fuzz_storage_seeds seeder_srcs=("${storage[@]}") seed_dirs=(recovery txnindex)
		max_len=8192 noise='^sluice storage:\|^txn lso:' ;;
	segindex)  # a sealed segment's offset index, trusted at open, and the readers that go by it
		srcs=("$root/storage/log.c" "$root/storage/fop.c" "$root/storage/trash.c" "${storage[@]}")
		inc=(-I"$root/storage" -I"$root/tests/unit/storage") libs=(-luring)
		seeder=fuzz_segindex_seeds seeder_srcs=("${srcs[@]}") seed_dirs=(segindex)
		max_len=16384 noise='^sluice storage:' ;;
	txnindex)  # the aborted-transaction index parser
		srcs=("$root/txn/lso.c" "$root/txn/arena.c" "$root/storage/fop.c" "${storage[@]}")   # fop.c: the index's writes on a poll core
		inc=(-I"$root/storage" -I"$root/txn" -I"$root/tests/unit/storage") libs=(-luring)
		seeder=fuzz_storage_seeds seeder_srcs=("${storage[@]}") seed_dirs=(recovery txnindex)
		max_len=8192 noise='^sluice storage:\|^txn lso:' ;;
	txnlog|offsetslog|pstate)   # the coordinators' logs and the producer-state snapshots
		# txnlog: __transaction_state records and their replay (txn/coord.c);
		# offsetslog: __consumer_offsets offset and group records and their replay
		# (txn/group.c); pstate: snapshots, their files and the partition's recovery
		# (txn/pstate.c with txn/lso.c over a real log).
		gen_kerr
		srcs=("$root/txn/coord.c" "$root/txn/group.c" "$root/txn/pstate.c" "$root/txn/lso.c" "$root/txn/htab.c" "$root/txn/arena.c"
			"$root/storage/log.c" "$root/storage/fop.c" "$root/storage/trash.c" "${storage[@]}" "$work/kerr.c")
		inc=(-I"$root/storage" -I"$root/txn" -I"$work") libs=(-luring)
		seeder=fuzz_txn_seeds seeder_srcs=("${srcs[@]}") seed_dirs=(txnlog offsetslog pstate)
		max_len=65536 noise='^sluice storage:\|^txn lso:\|^pstate:' ;;
	pidfile|dirnames)   # what the start-up reads besides the logs
		# pidfile: the __producer_ids file (dataplane/control/pidfile.c); dirnames: the data
		# directory's entry names the scan takes for partitions (dataplane/loop/names.c).
		srcs=("$root/dataplane/control/pidfile.c" "$root/dataplane/loop/names.c" "$root/storage/crc32c.c")
		inc=(-I"$root/dataplane/control" -I"$root/dataplane/loop" -I"$root/storage" -I"$root/txn")
		seeder=fuzz_startup_seeds seeder_srcs=("${srcs[@]}") seed_dirs=(pidfile dirnames)
		max_len=4096 ;;
	tcp)       # the userspace TCP/IP stack's packet input (nic/tcp/), frames and timers
		srcs=("$root/nic/tcp/tcp.c")
		inc=(-I"$root/nic/tcp" -I"$root/tests/unit/nic")
		seeder=fuzz_tcp_seeds seeder_srcs=() seed_dirs=(tcp)
		max_len=8192 ;;
	*)
		echo "run.sh: unknown target $1" >&2
		exit 2 ;;
	esac
}

# Request vectors become frames without the size prefix; 08 is a bare Produce v7
# body, so it gets a header v1 (key 0, version 7, correlation id 1, client "k").
add_vectors() {
	python3 - "$vectors" "$1" <<'PY'
import os, sys
src, dst = sys.argv[1], sys.argv[2]
def load(name):
    out = bytearray()
    for line in open(os.path.join(src, name)):
        if not line.startswith("#") and len(line) > 6:
            out += bytes.fromhex(line[6:])
    return bytes(out)
for name in ("01_apiversions_v3_request_librdkafka.hex", "02_apiversions_v2_request_kafkajs.hex",
             "07_produce_v7_request_transactional.hex"):
    open(os.path.join(dst, "vec-" + name[:2]), "wb").write(load(name)[4:])
hdr = bytes([0, 0, 0, 7, 0, 0, 0, 1, 0, 1]) + b"k"
open(os.path.join(dst, "vec-08"), "wb").write(hdr + load("08_kafkajs_produce_v7_body_fixture.hex"))
PY
}

# Build every target and write every seed first, so a build error shows before any fuzzing.
for t; do
	target "$t"
	"$cc" "${flags[@]}" "${san[@]}" "${inc[@]}" "$here/fuzz_$t.c" "${driver_src[@]}" "${srcs[@]}" "${libs[@]}" \
		-o "$work/fuzz_$t"
	if [ ! -x "$work/$seeder" ]; then
		"$cc" "${flags[@]}" "${inc[@]}" "$here/$seeder.c" "${seeder_srcs[@]}" "${libs[@]}" -o "$work/$seeder"
		dirs=()
		for d in "${seed_dirs[@]}"; do
			mkdir -p "$work/corpus-$d"
			dirs+=("$work/corpus-$d")
		done
		"$work/$seeder" "${dirs[@]}"
	fi
	if [ "$vectors_too" = 1 ] && [ -d "$vectors" ]; then
		add_vectors "$work/corpus-$t"
	fi
done

# libFuzzer exits 77 on a crash by default, which meson reads as "skipped": use 1.
for t; do
	target "$t"
	echo "run.sh: fuzz_$t for ${seconds}s with $(ls "$work/corpus-$t" | wc -l) seeds"
	# Inputs that failed before (regress/TARGET/, committed) run every time, before any
	# mutation: libFuzzer runs every input of every corpus directory first (and writes
	# new inputs only to the first).
	regress=()
	[ -d "$here/regress/$t" ] && regress=("$here/regress/$t")
	run=("$work/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len"
		-print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 "$work/corpus-$t" "${regress[@]}")
	if [ -z "$noise" ]; then
		"${run[@]}"
		continue
	fi
	if ! "${run[@]}" 2>"$work/$t.log"; then
		grep -v "$noise" "$work/$t.log" | tail -n 60
		echo "run.sh: fuzz_$t failed"
		exit 1
	fi
	grep -E '^stat::number_of_executed_units|DONE' "$work/$t.log" || true
done
