/*
 * batch.c - RecordBatch v2 header parsing, CRC check, record iteration, and
 * the one-record builder used for transaction markers (and tests).
 */
#include "batch.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "crc32c.h"

/* Zig-zag varints are at most 10 bytes (64 bits, 7 per byte). */
#define ST_VARINT_BYTES_MAX 10

int st_batch_parse_header(const uint8_t *p, size_t avail, struct st_batch_hdr *h)
{
	assert(p && h);
	if (avail < ST_BATCH_HEADER_BYTES)
		return -EAGAIN;
	h->base_offset = (int64_t)st_be64(p + ST_BATCH_OFF_BASE_OFFSET);
	h->batch_length = (int32_t)st_be32(p + ST_BATCH_OFF_LENGTH);
	h->leader_epoch = (int32_t)st_be32(p + ST_BATCH_OFF_LEADER_EPOCH);
	h->magic = (int8_t)p[ST_BATCH_OFF_MAGIC];
	h->crc = st_be32(p + ST_BATCH_OFF_CRC);
	h->attributes = (int16_t)st_be16(p + ST_BATCH_OFF_ATTRIBUTES);
	h->last_offset_delta = (int32_t)st_be32(p + ST_BATCH_OFF_LAST_OFFSET_DELTA);
	h->first_timestamp = (int64_t)st_be64(p + ST_BATCH_OFF_FIRST_TIMESTAMP);
	h->max_timestamp = (int64_t)st_be64(p + ST_BATCH_OFF_MAX_TIMESTAMP);
	h->producer_id = (int64_t)st_be64(p + ST_BATCH_OFF_PRODUCER_ID);
	h->producer_epoch = (int16_t)st_be16(p + ST_BATCH_OFF_PRODUCER_EPOCH);
	h->base_sequence = (int32_t)st_be32(p + ST_BATCH_OFF_BASE_SEQUENCE);
	h->records_count = (int32_t)st_be32(p + ST_BATCH_OFF_RECORDS_COUNT);
	/* Length first: a garbage length must not be reported as a format (magic) problem. */
	if (h->batch_length < ST_BATCH_LENGTH_MIN)
		return -EBADMSG;
	if (h->magic != ST_BATCH_MAGIC)
		return -EPROTO;
	if (h->records_count < 0 || h->last_offset_delta < 0)
		return -EBADMSG;
	/* The total (12 + batchLength) must still fit the int we return. */
	if (h->batch_length > INT32_MAX - 12)
		return -EBADMSG;
	return h->batch_length + 12;
}

int st_batch_parse(const uint8_t *p, size_t avail, struct st_batch_hdr *h)
{
	int total = st_batch_parse_header(p, avail, h);

	if (total < 0)
		return total;
	if ((size_t)total > avail)
		return -EAGAIN;
	return total;
}

bool st_batch_crc_ok(const uint8_t *p, size_t total_len)
{
	assert(total_len >= ST_BATCH_HEADER_BYTES);
	return crc32c(0, p + ST_BATCH_OFF_ATTRIBUTES, total_len - ST_BATCH_OFF_ATTRIBUTES) ==
	       st_be32(p + ST_BATCH_OFF_CRC);
}

void st_batch_set_base_offset(uint8_t *p, int64_t base_offset)
{
	assert(base_offset >= 0);
	st_put_be64(p + ST_BATCH_OFF_BASE_OFFSET, (uint64_t)base_offset);
}

int st_varint_get(const uint8_t *p, const uint8_t *end, int64_t *v)
{
	uint64_t u = 0;

	for (int i = 0; i < ST_VARINT_BYTES_MAX && p + i < end; i++) {
		u |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
			return i + 1;
		}
	}
	return -EBADMSG;
}

int st_varint_put(uint8_t *p, int64_t v)
{
	uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
	int n = 0;

	while (u >= 0x80) {
		p[n++] = (uint8_t)(u | 0x80);
		u >>= 7;
	}
	p[n++] = (uint8_t)u;
	return n;
}

int st_record_iter_init(struct st_record_iter *it, const uint8_t *batch, size_t len,
                        const struct st_batch_hdr *h)
{
	assert(len >= ST_BATCH_HEADER_BYTES && len == (size_t)h->batch_length + 12);
	if (h->attributes & ST_BATCH_ATTR_COMPRESSION)
		return -ENOTSUP;
	it->p = batch + ST_BATCH_HEADER_BYTES;
	it->end = batch + len;
	it->left = h->records_count;
	return 0;
}

/* Read one varint into *v, advancing *p; false if malformed. */
static bool rec_varint(const uint8_t **p, const uint8_t *end, int64_t *v)
{
	int n = st_varint_get(*p, end, v);

	if (n < 0)
		return false;
	*p += n;
	return true;
}

/* Read a length-prefixed byte string (-1 = null) into *b and *len, advancing *p. */
static bool rec_bytes(const uint8_t **p, const uint8_t *end, const uint8_t **b, int32_t *len)
{
	int64_t n;

	if (!rec_varint(p, end, &n) || n < -1 || n > end - *p)
		return false;
	*len = (int32_t)n;
	*b = n < 0 ? NULL : *p;
	*p += n < 0 ? 0 : n;
	return true;
}

int st_record_next(struct st_record_iter *it, struct st_record *r)
{
	int64_t len, hc;
	const uint8_t *p = it->p, *end;

	if (it->left <= 0)
		return 0;
	if (!rec_varint(&p, it->end, &len) || len < 1 || len > it->end - p)
		return -EBADMSG;
	end = p + len;
	r->attributes = (int8_t)*p++;
	if (!rec_varint(&p, end, &r->timestamp_delta) || !rec_varint(&p, end, &r->offset_delta) ||
	    !rec_bytes(&p, end, &r->key, &r->key_len) || !rec_bytes(&p, end, &r->value, &r->value_len) ||
	    !rec_varint(&p, end, &hc) || hc < 0 || hc > end - p)
		return -EBADMSG;
	r->headers_count = (uint32_t)hc;
	r->headers = p;
	r->headers_len = (uint32_t)(end - p);
	/* Walk the headers only to validate them; callers that want them re-read r->headers. */
	for (int64_t i = 0; i < hc; i++) {
		const uint8_t *b;
		int32_t n;
		if (!rec_bytes(&p, end, &b, &n) || n < 0 || !rec_bytes(&p, end, &b, &n))
			return -EBADMSG;
	}
	if (p != end)
		return -EBADMSG;
	it->p = end;
	it->left--;
	return 1;
}

const char *st_batch_codec_name(int16_t attributes)
{
	static const char *const names[] = { "none", "gzip", "snappy", "lz4", "zstd" };
	unsigned c = (unsigned)attributes & ST_BATCH_ATTR_COMPRESSION;

	return c < sizeof(names) / sizeof(names[0]) ? names[c] : "unknown";
}

/* ---- building ------------------------------------------------------------ */

/* Bytes st_varint_put uses for v. */
static int varint_len(int64_t v)
{
	uint8_t tmp[ST_VARINT_BYTES_MAX];
	return st_varint_put(tmp, v);
}

/* Write a record field of len bytes (-1: null, no bytes) at p; returns the bytes used. */
static size_t put_bytes(uint8_t *p, const void *b, int32_t len)
{
	size_t n = (size_t)st_varint_put(p, len);
	if (len > 0)
		memcpy(p + n, b, (size_t)len);
	return n + (len > 0 ? (size_t)len : 0);
}

int st_batch_build(uint8_t *buf, size_t cap, int16_t attributes, int64_t producer_id, int16_t producer_epoch,
                   int32_t base_sequence, int64_t timestamp_ms, const void *key, int32_t key_len,
                   const void *value, int32_t value_len)
{
	assert(buf && key_len >= -1 && value_len >= -1);
	assert((key_len <= 0 || key) && (value_len <= 0 || value));
	/* Record body: attributes, timestampDelta 0, offsetDelta 0, key, value, headers count 0. */
	int64_t body = 3 + varint_len(key_len) + (key_len > 0 ? key_len : 0) + varint_len(value_len) +
	               (value_len > 0 ? value_len : 0) + 1;
	int64_t total = ST_BATCH_HEADER_BYTES + varint_len(body) + body;
	if ((uint64_t)total > cap || total > INT32_MAX)
		return -ENOSPC;

	uint8_t *p = buf + ST_BATCH_HEADER_BYTES;
	p += st_varint_put(p, body);
	*p++ = 0; /* record attributes: unused in v2 */
	*p++ = 0; /* timestampDelta 0 (zig-zag 0 is one zero byte) */
	*p++ = 0; /* offsetDelta 0 */
	p += put_bytes(p, key, key_len);
	p += put_bytes(p, value, value_len);
	*p++ = 0; /* no headers */
	assert(p - buf == total);

	st_put_be64(buf + ST_BATCH_OFF_BASE_OFFSET, 0);
	st_put_be32(buf + ST_BATCH_OFF_LENGTH, (uint32_t)(total - 12));
	st_put_be32(buf + ST_BATCH_OFF_LEADER_EPOCH, UINT32_MAX); /* -1: the broker writes its own */
	buf[ST_BATCH_OFF_MAGIC] = ST_BATCH_MAGIC;
	st_put_be16(buf + ST_BATCH_OFF_ATTRIBUTES, (uint16_t)attributes);
	st_put_be32(buf + ST_BATCH_OFF_LAST_OFFSET_DELTA, 0);
	st_put_be64(buf + ST_BATCH_OFF_FIRST_TIMESTAMP, (uint64_t)timestamp_ms);
	st_put_be64(buf + ST_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)timestamp_ms);
	st_put_be64(buf + ST_BATCH_OFF_PRODUCER_ID, (uint64_t)producer_id);
	st_put_be16(buf + ST_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)producer_epoch);
	st_put_be32(buf + ST_BATCH_OFF_BASE_SEQUENCE, (uint32_t)base_sequence);
	st_put_be32(buf + ST_BATCH_OFF_RECORDS_COUNT, 1);
	/* The CRC covers attributes onwards, so it is computed last. */
	st_put_be32(buf + ST_BATCH_OFF_CRC, crc32c(0, buf + ST_BATCH_OFF_ATTRIBUTES, (size_t)total - ST_BATCH_OFF_ATTRIBUTES));
	return (int)total;
}

int st_batch_build_marker(uint8_t *buf, size_t cap, int64_t producer_id, int16_t producer_epoch, bool commit,
                          int32_t coordinator_epoch, int64_t timestamp_ms)
{
	uint8_t key[4], value[6];

	assert(producer_id >= 0);
	st_put_be16(key, 0); /* ControlRecordType key version */
	st_put_be16(key + 2, commit ? ST_MARKER_COMMIT : ST_MARKER_ABORT);
	st_put_be16(value, 0); /* EndTransactionMarker version */
	st_put_be32(value + 2, (uint32_t)coordinator_epoch);
	int n = st_batch_build(buf, cap, ST_BATCH_ATTR_TRANSACTIONAL | ST_BATCH_ATTR_CONTROL, producer_id,
	                       producer_epoch, -1, timestamp_ms, key, sizeof(key), value, sizeof(value));
	assert(n < 0 || n == ST_MARKER_BATCH_BYTES);
	return n;
}

int st_batch_marker_type(const uint8_t *batch, size_t len)
{
	int32_t ce;
	return st_batch_marker_read(batch, len, &ce);
}

int st_batch_marker_read(const uint8_t *batch, size_t len, int32_t *coordinator_epoch)
{
	struct st_batch_hdr h;
	int64_t rec_len, v;
	int total = st_batch_parse_header(batch, len, &h);

	if (total < 0 || !(h.attributes & ST_BATCH_ATTR_CONTROL) || (h.attributes & ST_BATCH_ATTR_COMPRESSION) ||
	    h.records_count != 1)
		return -EBADMSG;
	/* Everything read below lies inside both the batch and the bytes we were given. */
	const uint8_t *p = batch + ST_BATCH_HEADER_BYTES, *end = batch + ((size_t)total < len ? (size_t)total : len);
	if (!rec_varint(&p, end, &rec_len) || rec_len < 1 || p >= end)
		return -EBADMSG;
	p++; /* record attributes */
	if (!rec_varint(&p, end, &v) || !rec_varint(&p, end, &v) || !rec_varint(&p, end, &v) || v < 4 ||
	    end - p < 4)
		return -EBADMSG; /* timestampDelta, offsetDelta, then a key of at least version + type */
	int16_t version = (int16_t)st_be16(p), type = (int16_t)st_be16(p + 2);
	if (version < 0 || (type != ST_MARKER_ABORT && type != ST_MARKER_COMMIT))
		return -EBADMSG;
	/* The value: int16 version, int32 coordinator_epoch (a key longer than 4 bytes is skipped). */
	*coordinator_epoch = -1;
	if (v < end - p) {
		p += v;
		if (rec_varint(&p, end, &v) && v >= 6 && end - p >= 6)
			*coordinator_epoch = (int32_t)st_be32(p + 2);
	}
	return type;
}

int st_batch_records(const uint8_t *batch, size_t len, struct st_record_iter *it)
{
	struct st_batch_hdr h;
	int n = st_batch_parse(batch, len, &h);
	if (n < 0 || (size_t)n != len || !st_batch_crc_ok(batch, len) || st_record_iter_init(it, batch, len, &h) < 0)
		return -EBADMSG;
	return 0;
}
