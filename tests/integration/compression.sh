#!/usr/bin/env bash
# compression.sh SLUICED RDK_LOAD SLUICE_DUMP
# Batches compressed with gzip, snappy, lz4 and zstd are accepted, stored as
# sent (sluice-dump shows the codec on disk) and served back unchanged: a
# librdkafka consumer decompresses and verifies every message.
# Then a batch flagged snappy whose records are garbage is sent over raw TCP
# (bad_client.py) to a partition of the snappy topic: it must be answered
# CORRUPT_MESSAGE and not stored, so the consumer still reads exactly what
# librdkafka wrote (issue 10: once stored, it broke every consumer of the
# partition with "Decompression failed").
. "$(dirname "$0")/lib.sh"
integ_init compression 16 "$@"
need_exe "$RDK_LOAD"
need_exe "$SLUICE_DUMP"
start_broker --cores "${SLUICE_CORES:-3}"
for codec in gzip snappy lz4 zstd; do
	guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "c-$codec" --partitions 3 \
		--count 20000 --size 1000 --acks all --compression "$codec" || fail "$codec: produce exited $?"
	guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic "c-$codec" --partitions 3 \
		--expect 20000 --timeout 60 || fail "$codec: consume exited $?"
	"$SLUICE_DUMP" "$DATA/c-$codec-0" >"$WORK/dump-$codec.txt" || fail "$codec: sluice-dump exited $?"
	grep -q "codec $codec " "$WORK/dump-$codec.txt" || fail "$codec: batches on disk are not $codec-compressed"
	log "$codec: ok ($(grep -c "codec $codec " "$WORK/dump-$codec.txt") $codec batches in partition 0)"
done

PY=$(command -v python3) || skip "python3 is not installed"
guarded "$PY" "$(dirname "$0")/bad_client.py" --port "$PORT" --max-frame-bytes 104857600 \
	--known-topic c-snappy --known-partitions 3 --only lone_snappy_garbage ||
	fail "garbage flagged snappy: not answered CORRUPT_MESSAGE"
guarded "$RDK_LOAD" consume --bootstrap "$BOOTSTRAP" --topic c-snappy --partitions 3 \
	--expect 20000 --timeout 60 || fail "c-snappy after the garbage batch: consume exited $?"
log "garbage flagged snappy: refused, the partition still reads"
stop_broker
pass "gzip, snappy, lz4 and zstd stored and served as sent; garbage flagged snappy refused"
