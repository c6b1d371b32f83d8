/*
 * batch.h - Kafka RecordBatch v2 (magic 2): header parsing, CRC check, record iteration.
 *
 * Locality: any (pure functions over caller buffers).
 *
 * Header layout (all integers big-endian; see kafka-protocol/README.md §3):
 *
 *   offset size field                 notes
 *   ------ ---- --------------------- -----------------------------------------------
 *        0    8 baseOffset            int64; the broker patches it on append
 *        8    4 batchLength           int32; bytes after this field (total - 12)
 *       12    4 partitionLeaderEpoch  int32
 *       16    1 magic                 int8; must be 2
 *       17    4 crc                   uint32; CRC-32C of bytes [21, total)
 *       21    2 attributes            int16; bits 0-2 codec, 3 ts type, 4 txn, 5 control
 *       23    4 lastOffsetDelta       int32
 *       27    8 baseTimestamp         int64 (first_timestamp below)
 *       35    8 maxTimestamp          int64
 *       43    8 producerId            int64
 *       51    2 producerEpoch         int16
 *       53    4 baseSequence          int32
 *       57    4 recordsCount          int32
 *       61    - records               recordsCount records, or their compressed stream
 *
 * The CRC leaves out bytes 0..20, so baseOffset and the leader epoch can be
 * rewritten without recomputing it.
 */
#ifndef SLUICE_STORAGE_BATCH_H
#define SLUICE_STORAGE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ST_BATCH_HEADER_BYTES 61
#define ST_BATCH_ATTR_COMPRESSION 0x07   /* codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd */
#define ST_BATCH_CODEC_ZSTD 4
#define ST_BATCH_ATTR_TIMESTAMP_TYPE 0x08
#define ST_BATCH_ATTR_TRANSACTIONAL 0x10
#define ST_BATCH_ATTR_CONTROL 0x20

/* Byte offsets of the header fields (table above). */
#define ST_BATCH_OFF_BASE_OFFSET 0
#define ST_BATCH_OFF_LENGTH 8
#define ST_BATCH_OFF_LEADER_EPOCH 12
#define ST_BATCH_OFF_MAGIC 16
#define ST_BATCH_OFF_CRC 17
#define ST_BATCH_OFF_ATTRIBUTES 21
#define ST_BATCH_OFF_LAST_OFFSET_DELTA 23
#define ST_BATCH_OFF_FIRST_TIMESTAMP 27
#define ST_BATCH_OFF_MAX_TIMESTAMP 35
#define ST_BATCH_OFF_PRODUCER_ID 43
#define ST_BATCH_OFF_PRODUCER_EPOCH 51
#define ST_BATCH_OFF_BASE_SEQUENCE 53
#define ST_BATCH_OFF_RECORDS_COUNT 57

/* batchLength counts everything after its own field: header rest (49) + records. */
#define ST_BATCH_LENGTH_MIN (ST_BATCH_HEADER_BYTES - 12)
#define ST_BATCH_MAGIC 2

/* Decoded header. Locality: any (a value type). */
struct st_batch_hdr {
	int64_t base_offset;
	int32_t batch_length;
	int32_t leader_epoch;
	int8_t magic;
	uint32_t crc;
	int16_t attributes;
	int32_t last_offset_delta;
	int64_t first_timestamp, max_timestamp;
	int64_t producer_id;
	int16_t producer_epoch;
	int32_t base_sequence;
	int32_t records_count;
};

/*
 * Parse the header at p (avail bytes available). Returns the batch's total
 * size (12 + batchLength) on success; -EAGAIN if avail is too short for the
 * header or the whole batch; -EBADMSG if the size or fields are inconsistent
 * (batchLength < 49, records_count < 0, last_offset_delta < 0); -EPROTO if
 * magic != 2 (caller maps to UNSUPPORTED_FOR_MESSAGE_FORMAT). Does not check
 * the CRC. Locality: any.
 */
int st_batch_parse(const uint8_t *p, size_t avail, struct st_batch_hdr *h);

/*
 * As st_batch_parse, but needs only the 61 header bytes: the whole batch need
 * not be in memory (recovery and fetch scans read headers alone). Returns the
 * total size, -EAGAIN if avail < 61, -EBADMSG or -EPROTO as above. Locality: any.
 */
int st_batch_parse_header(const uint8_t *p, size_t avail, struct st_batch_hdr *h);

/* CRC32C of bytes 21..end equals the stored crc. total_len >= 61. Locality: any. */
bool st_batch_crc_ok(const uint8_t *p, size_t total_len);

/* Patch baseOffset (bytes 0..7, not covered by the CRC). Locality: any. */
void st_batch_set_base_offset(uint8_t *p, int64_t base_offset);

/* Big-endian loads/stores shared by storage code and tools. Locality: any. */
static inline uint16_t st_be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t st_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t st_be64(const uint8_t *p) { return (uint64_t)st_be32(p) << 32 | st_be32(p + 4); }
static inline void st_put_be16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void st_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline void st_put_be64(uint8_t *p, uint64_t v) { st_put_be32(p, (uint32_t)(v >> 32)); st_put_be32(p + 4, (uint32_t)v); }

/*
 * Record-level zig-zag varints (§3.3). st_varint_get reads one from [p, end)
 * into *v and returns the bytes used, or -EBADMSG if truncated or longer than
 * 10 bytes. st_varint_put writes v at p (room for 10 bytes) and returns the
 * bytes written. Locality: any.
 */
int st_varint_get(const uint8_t *p, const uint8_t *end, int64_t *v);
int st_varint_put(uint8_t *p, int64_t v);

/* One record of an uncompressed batch; pointers into the batch. Locality: any (value). */
struct st_record {
	int8_t attributes;
	int64_t timestamp_delta;
	int64_t offset_delta;
	const uint8_t *key;       /* NULL when the key is null (key_len -1) */
	int32_t key_len;
	const uint8_t *value;     /* NULL when the value is null (value_len -1) */
	int32_t value_len;
	uint32_t headers_count;
	const uint8_t *headers;   /* the encoded headers, headers_len bytes */
	uint32_t headers_len;
};

/* Cursor over the records of one uncompressed batch. Locality: any (value). */
struct st_record_iter {
	const uint8_t *p, *end;
	int32_t left;             /* records still to read */
};

/*
 * Start iterating the records of the whole batch at batch (len bytes,
 * already parsed into h). Returns 0, or -ENOTSUP if the batch is compressed.
 * Locality: any.
 */
int st_record_iter_init(struct st_record_iter *it, const uint8_t *batch, size_t len,
                        const struct st_batch_hdr *h);
/*
 * Start iterating a whole stored batch of len bytes that must be exactly one
 * uncompressed batch with a good CRC (the coordinators' log records): 0, or
 * -EBADMSG. Locality: any.
 */
int st_batch_records(const uint8_t *batch, size_t len, struct st_record_iter *it);
/* Next record: 1 and *r filled, 0 at the end, -EBADMSG if malformed. Locality: any. */
int st_record_next(struct st_record_iter *it, struct st_record *r);

/*
 * Build a RecordBatch v2 of ONE record into buf (cap bytes): base offset 0,
 * partition leader epoch -1, last offset delta 0, first = max timestamp =
 * timestamp_ms; the record has offset and timestamp delta 0, no headers, and
 * key/value of key_len/value_len bytes (-1: null). The CRC is filled in.
 * Returns the total size, or -ENOSPC if it does not fit cap (or an int).
 * Locality: any.
 */
int st_batch_build(uint8_t *buf, size_t cap, int16_t attributes, int64_t producer_id, int16_t producer_epoch,
                   int32_t base_sequence, int64_t timestamp_ms, const void *key, int32_t key_len,
                   const void *value, int32_t value_len);

/* Control record types (§3.4, the key's int16 type). */
#define ST_MARKER_ABORT 0
#define ST_MARKER_COMMIT 1
/* Bytes of a marker batch: header + 1 + record length 16 (§3.4). */
#define ST_MARKER_BATCH_BYTES (ST_BATCH_HEADER_BYTES + 17)

/*
 * Build a transaction marker (control batch, attributes transactional |
 * control, base sequence -1) of pid/epoch: key = int16 version 0 + int16
 * type (ABORT 0, COMMIT 1), value = int16 version 0 + int32
 * coordinator_epoch. Returns ST_MARKER_BATCH_BYTES or -ENOSPC. Locality: any.
 */
int st_batch_build_marker(uint8_t *buf, size_t cap, int64_t producer_id, int16_t producer_epoch, bool commit,
                          int32_t coordinator_epoch, int64_t timestamp_ms);

/*
 * Type of the transaction marker at batch: ST_MARKER_COMMIT (1),
 * ST_MARKER_ABORT (0), or -EBADMSG if it is not a control batch with one
 * uncompressed record whose key holds version >= 0 and type 0 or 1. Reads
 * only what lies in [batch, batch + len): the header plus the record's first
 * bytes (ST_MARKER_BATCH_BYTES is always enough; the whole batch need not be
 * there). The CRC is not checked. Locality: any.
 */
int st_batch_marker_type(const uint8_t *batch, size_t len);
/* The same, and *coordinator_epoch from the record's value (-1 where the value is absent or
 * shorter than version + coordinator_epoch). Locality: any. */
int st_batch_marker_read(const uint8_t *batch, size_t len, int32_t *coordinator_epoch);

/* "none", "gzip", "snappy", "lz4", "zstd" or "unknown". Locality: any. */
const char *st_batch_codec_name(int16_t attributes);

#endif
