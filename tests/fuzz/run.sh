#!/usr/bin/env bash
# Builds the request fuzzer with clang (libFuzzer + ASan + UBSan) straight from the
# sources, seeds it with the test vectors and one encoded frame per request version,
# and runs it for FUZZ_SECONDS (default 30). Exits 77 (skip) without clang, non-zero
# on a crash (the input is left as crash-* in the current directory).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
clang=${CLANG:-clang-14}
if ! command -v "$clang" >/dev/null 2>&1; then
	echo "run.sh: $clang not found: skipped"
	exit 77
fi
seconds=${FUZZ_SECONDS:-30}
vectors=${KAFKA_VECTORS:-$root/../shared/kafka-protocol/test-vectors}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 "$root/dataplane/proto/kgen.py" --header "$work/kmsg.h" --source "$work/kmsg.c" \
	"$root"/dataplane/proto/schema/*.json
srcs=("$root/dataplane/proto/kwire.c" "$root/dataplane/proto/kcodec.c" "$work/kmsg.c")
inc=(-I"$root/dataplane/proto" -I"$work" -I"$root/tests/unit/proto")
flags=(-std=gnu11 -g -O1 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter
	-Wno-missing-field-initializers)
"$clang" "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	"${inc[@]}" "$here/fuzz_request.c" "${srcs[@]}" -o "$work/fuzz_request"
"$clang" "${flags[@]}" "${inc[@]}" "$here/fuzz_seeds.c" "$root/tests/unit/proto/kfill.c" \
	"${srcs[@]}" -o "$work/fuzz_seeds"

mkdir "$work/corpus"
"$work/fuzz_seeds" "$work/corpus"
if [ -d "$vectors" ]; then
	# Request vectors become frames without the size prefix; 08 is a bare Produce v7
	# body, so it gets a header v1 (key 0, version 7, correlation id 1, client "k").
	python3 - "$vectors" "$work/corpus" <<'PY'
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
fi

echo "run.sh: fuzzing for ${seconds}s with $(ls "$work/corpus" | wc -l) seeds"
# libFuzzer exits 77 on a crash by default, which meson reads as "skipped": use 1.
"$work/fuzz_request" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
	-max_len=8192 -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 "$work/corpus"
