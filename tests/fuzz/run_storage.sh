#!/usr/bin/env bash
# Builds the storage fuzzers with clang (libFuzzer + ASan + UBSan) straight from the
# sources: fuzz_recovery (the segment recovery scanner: st_log_open's scan, resync and
# damage ranges, and every reader over them) and fuzz_txnindex (the aborted-transaction
# index parser), seeds them with well-formed files (fuzz_storage_seeds), and runs each
# for FUZZ_SECONDS / 2 (default 15 s each). Exits 77 (skip) without clang, non-zero on
# a crash (the input is left as crash-* in the current directory).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
clang=${CLANG:-clang-14}
if ! command -v "$clang" >/dev/null 2>&1; then
	echo "run_storage.sh: $clang not found: skipped"
	exit 77
fi
seconds=$(( ${FUZZ_SECONDS:-30} / 2 ))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

flags=(-std=gnu11 -g -O1 -D_GNU_SOURCE -msse4.2 -Wall -Wextra -Werror -Wno-unused-parameter
	-Wno-missing-field-initializers -I"$root/storage" -I"$root/txn")
storage=("$root/storage/batch.c" "$root/storage/crc32c.c")
san=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
"$clang" "${flags[@]}" "${san[@]}" "$here/fuzz_recovery.c" "$root/storage/log.c" "${storage[@]}" -luring \
	-o "$work/fuzz_recovery"
"$clang" "${flags[@]}" "${san[@]}" "$here/fuzz_txnindex.c" "$root/txn/lso.c" "${storage[@]}" \
	-o "$work/fuzz_txnindex"
"$clang" "${flags[@]}" -I"$root/tests/unit/storage" "$here/fuzz_storage_seeds.c" "${storage[@]}" \
	-o "$work/fuzz_storage_seeds"
mkdir "$work/recovery" "$work/txnindex"
"$work/fuzz_storage_seeds" "$work/recovery" "$work/txnindex"

# libFuzzer exits 77 on a crash by default, which meson reads as "skipped": use 1.
# stderr (the recovery's log lines, several per input) goes to a file; its end is shown
# with the sanitizer's report when a run fails.
for t in recovery txnindex; do
	echo "run_storage.sh: fuzz_$t for ${seconds}s with $(ls "$work/$t" | wc -l) seeds"
	if ! "$work/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
		-print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 "$work/$t" 2>"$work/$t.log"; then
		grep -v '^sluice storage:\|^txn lso:' "$work/$t.log" | tail -n 60
		echo "run_storage.sh: fuzz_$t failed"
		exit 1
	fi
	grep -E '^stat::number_of_executed_units|DONE' "$work/$t.log" || true
done
