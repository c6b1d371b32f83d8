#!/usr/bin/env bash
# Builds the records-check fuzzer (fuzz_records.c over storage/records.c and
# storage/codec.c) with clang (libFuzzer + ASan + UBSan) from the sources,
# seeds it with valid sections of every codec (fuzz_records_seeds.c) and runs
# it for FUZZ_SECONDS (default 30). Exits 77 (skip) without clang, non-zero on
# a crash (the input is left as crash-* in the current directory).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
clang=${CLANG:-clang-14}
if ! command -v "$clang" >/dev/null 2>&1; then
	echo "run_records.sh: $clang not found: skipped"
	exit 77
fi
seconds=${FUZZ_SECONDS:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

srcs=("$root/storage/batch.c" "$root/storage/crc32c.c" "$root/storage/records.c" "$root/storage/codec.c")
libs=(-lz -lsnappy -llz4 -lzstd)
flags=(-std=gnu11 -g -O1 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter
	-Wno-missing-field-initializers -I"$root/storage")
[ "$(uname -m)" = x86_64 ] && flags+=(-msse4.2)
"$clang" "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	"$here/fuzz_records.c" "${srcs[@]}" "${libs[@]}" -o "$work/fuzz_records"
"$clang" "${flags[@]}" "$here/fuzz_records_seeds.c" "$root/storage/batch.c" "$root/storage/crc32c.c" \
	"${libs[@]}" -o "$work/fuzz_records_seeds"

mkdir "$work/corpus"
"$work/fuzz_records_seeds" "$work/corpus"
echo "run_records.sh: fuzzing for ${seconds}s with $(ls "$work/corpus" | wc -l) seeds"
# libFuzzer exits 77 on a crash by default, which meson reads as "skipped": use 1.
"$work/fuzz_records" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
	-max_len=65536 -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 "$work/corpus"
