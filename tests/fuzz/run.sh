#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (libFuzzer + ASan + UBSan) straight from
# the sources and runs each for FUZZ_SECONDS (default 30):
#   fuzz_request: request frames, seeded with the test vectors and one encoded frame
#     per api key, version and fill mode of every request schema (fuzz_seeds; it
#     fails if a key sluiced advertises has no schema, see the check below);
#   fuzz_batch: the Records bytes of a Produce partition, seeded with the record
#     batches of the test vectors and of fuzz_seeds' Produce frames.
# Exits 77 (skip) without clang, non-zero on a crash (the input is left as crash-*
# in the current directory).
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

# Every api key the broker advertises (dataplane/api.c's table) has a request schema,
# so fuzz_seeds writes a frame for each of its versions.
for key in $(sed -n '/^} dp_apis\[\] = {/,/^};/s/^[[:space:]]*{ \([0-9]*\), \([0-9]*\), \([0-9]*\) },.*/\1/p' \
		"$root/dataplane/api.c"); do
	grep -q "\"apiKey\": $key," "$root"/dataplane/proto/schema/*Request.json ||
		{ echo "run.sh: advertised api key $key has no request schema"; exit 1; }
done
srcs=("$root/dataplane/proto/kwire.c" "$root/dataplane/proto/kcodec.c" "$work/kmsg.c")
batch_srcs=("$root/storage/batch.c" "$root/storage/crc32c.c")
inc=(-I"$root/dataplane/proto" -I"$work" -I"$root/tests/unit/proto")
flags=(-std=gnu11 -g -O1 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter
	-Wno-missing-field-initializers)
"$clang" "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	"${inc[@]}" "$here/fuzz_request.c" "${srcs[@]}" -o "$work/fuzz_request"
"$clang" "${flags[@]}" "${inc[@]}" "$here/fuzz_seeds.c" "$root/tests/unit/proto/kfill.c" \
	"${srcs[@]}" -o "$work/fuzz_seeds"
"$clang" "${flags[@]}" -msse4.2 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-I"$root/storage" "$here/fuzz_batch.c" "${batch_srcs[@]}" -o "$work/fuzz_batch"

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

# fuzz_batch's seeds: the Records of every Produce frame (a valid batch is built here
# too, as fuzz_seeds fills bytes with a pattern).
mkdir "$work/batches"
python3 - "$work/corpus" "$work/batches" <<'PY'
import os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF
def varint(n):
    u, out = (n << 1) ^ (n >> 63), bytearray()
    while u >= 0x80:
        out.append(u & 0x7F | 0x80)
        u >>= 7
    return bytes(out + bytes([u]))
recs = b''
for i in range(3):
    body = b'\x00' + varint(0) + varint(i) + varint(1) + b'k' + varint(5) + b'value' + varint(1) + \
        varint(1) + b'h' + varint(1) + b'v'
    recs += varint(len(body)) + body
rest = struct.pack('>hiqqqhii', 0, 2, 0, 0, 7, 1, 0, 3) + recs
batch = struct.pack('>qiib', 0, 9 + len(rest), -1, 2) + struct.pack('>I', crc32c(rest)) + rest
open(os.path.join(dst, 'valid'), 'wb').write(batch)
open(os.path.join(dst, 'valid2'), 'wb').write(batch + batch)
for name in os.listdir(src):
    b = open(os.path.join(src, name), 'rb').read()
    i = b.find(b'\x02', 16)   # any magic-2 looking start: a cheap way to get batch-shaped bytes
    if i >= 16:
        open(os.path.join(dst, 'from-' + name), 'wb').write(b[i - 16:])
PY

# libFuzzer exits 77 on a crash by default, which meson reads as "skipped": use 1.
echo "run.sh: fuzz_request for ${seconds}s with $(ls "$work/corpus" | wc -l) seeds"
"$work/fuzz_request" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
	-max_len=8192 -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 "$work/corpus"
echo "run.sh: fuzz_batch for ${seconds}s with $(ls "$work/batches" | wc -l) seeds"
"$work/fuzz_batch" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
	-max_len=65536 -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 "$work/batches"
