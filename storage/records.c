/*
 * records.c - the streaming records checker (records.h): one small state
 * machine over the fields of a record, fed any split of the section.
 */
#include "records.h"

#include <assert.h>
#include <errno.h>

#include "batch.h"

/* Varint sizes (§3.3): int32 fields take at most 5 bytes, varlongs 10. */
#define RC_VARINT_BYTES_MAX 5
#define RC_VARLONG_BYTES_MAX 10

/* The field the next byte belongs to, in wire order. */
enum rc_state {
	RC_LENGTH,           /* varint: record body bytes (outside any record) */
	RC_ATTRIBUTES,       /* int8 */
	RC_TIMESTAMP_DELTA,  /* varlong */
	RC_OFFSET_DELTA,     /* varint */
	RC_KEY_LENGTH,       /* varint, then skip the key */
	RC_VALUE_LENGTH,     /* varint, then skip the value */
	RC_HEADERS,          /* varint: header count */
	RC_HEADER_KEY,       /* varint, then skip the header key */
	RC_HEADER_VALUE,     /* varint, then skip the header value */
	RC_END,              /* the record is read once skip reaches 0: its length must be used up */
};

static int rc_fail(struct st_recs_check *v)
{
	v->bad = true;
	return -EBADMSG;
}

int st_recs_check_init(struct st_recs_check *v, const struct st_batch_hdr *h)
{
	assert(v && h);
	*v = (struct st_recs_check){ .count = h->records_count, .state = RC_LENGTH };
	/* Kafka's validateBatch: a v2 batch holds at least one record, and its
	 * offset range (lastOffsetDelta + 1) is its record count. */
	if (h->records_count < 1 || h->last_offset_delta != h->records_count - 1)
		return rc_fail(v);
	return 0;
}

void st_recs_seek_time(struct st_recs_check *v, int64_t first_ts, int64_t target)
{
	v->seeking = true;
	v->first_ts = first_ts;
	v->seek_ts = target;
}

/* A seek: the record whose timestamp delta is ts_delta and offset delta off_delta is read. */
static void rc_seek_record(struct st_recs_check *v, int64_t ts_delta, int64_t off_delta)
{
	int64_t ts;
	if (!v->seeking || v->found)
		return;
	/* A client's deltas may overflow: such a record saturates rather than wrapping. */
	if (__builtin_add_overflow(v->first_ts, ts_delta, &ts))
		ts = ts_delta > 0 ? INT64_MAX : INT64_MIN;
	if (ts >= v->seek_ts) {
		v->found = true;
		v->found_delta = (int32_t)off_delta;   /* == seen, checked within the count */
		v->found_ts = ts;
	}
}

/* A record whose skip is done and that is at RC_END: check that it filled its length. */
static bool rc_settle(struct st_recs_check *v)
{
	if (v->state != RC_END || v->skip)
		return true;
	if (v->body_left != 0)
		return false;
	v->seen++;
	v->state = RC_LENGTH;
	return true;
}

/* Skip len bytes of key or value (-1 or more) and go on with next. */
static bool rc_bytes(struct st_recs_check *v, int64_t len, int64_t min, enum rc_state next)
{
	if (len < min || len > v->body_left)
		return false;
	v->skip = len > 0 ? len : 0;
	v->state = (uint8_t)next;
	return true;
}

/* One whole varint field of value x (zig-zag decoded): check it and move on. */
static bool rc_field(struct st_recs_check *v, int64_t x)
{
	switch (v->state) {
	case RC_LENGTH:
		if (x < 1)
			return false;
		v->body_left = x;
		v->state = RC_ATTRIBUTES;
		return true;
	case RC_TIMESTAMP_DELTA:
		v->cur_ts = x;
		v->state = RC_OFFSET_DELTA;
		return true;
	case RC_OFFSET_DELTA:
		/* Deltas run 0, 1, ...: with count == lastOffsetDelta + 1 they are
		 * increasing and the last one is lastOffsetDelta (Kafka checks inner
		 * offsets the same way for compressed batches). */
		if (x != v->seen)
			return false;
		rc_seek_record(v, v->cur_ts, x);
		v->state = RC_KEY_LENGTH;
		return true;
	case RC_KEY_LENGTH:
		return rc_bytes(v, x, -1, RC_VALUE_LENGTH);
	case RC_VALUE_LENGTH:
		return rc_bytes(v, x, -1, RC_HEADERS);
	case RC_HEADERS:
		/* Each header takes at least two bytes (two lengths). */
		if (x < 0 || x > v->body_left / 2)
			return false;
		v->headers_left = x;
		v->state = x ? RC_HEADER_KEY : RC_END;
		return true;
	case RC_HEADER_KEY:
		return rc_bytes(v, x, 0, RC_HEADER_VALUE);
	case RC_HEADER_VALUE:
		v->headers_left--;
		return rc_bytes(v, x, -1, v->headers_left ? RC_HEADER_KEY : RC_END);
	default:
		assert(!"not a varint field");
		return false;
	}
}

/*
 * One varint from [*p, end) of at most max bytes: 1 and *x (zig-zag decoded,
 * *p moved past it), 0 if end comes first, -1 if malformed (too long, or an
 * int32 field with bits past 32). The same rules as the byte-at-a-time path.
 */
static int rc_varint(const uint8_t **p, const uint8_t *end, int max, int64_t *x)
{
	const uint8_t *q = *p;
	uint64_t u = 0;

	for (int i = 0; i < max; i++) {
		if (q + i >= end)
			return 0;
		u |= (uint64_t)(q[i] & 0x7f) << (7 * i);
		if (!(q[i] & 0x80)) {
			if (max == RC_VARINT_BYTES_MAX && u > UINT32_MAX)
				return -1;
			*x = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
			*p = q + i + 1;
			return 1;
		}
	}
	return -1;
}

/*
 * Fast path, at a record's start: if the whole record lies in [p0, end),
 * check it in place and return its bytes; 0 if it does not (the caller goes
 * on byte by byte); -1 if it is malformed. It must agree with the state
 * machine on every input (fuzz_records compares the two).
 */
static long rc_whole(struct st_recs_check *v, const uint8_t *p0, const uint8_t *end)
{
	const uint8_t *p = p0, *e;
	int64_t len, x, ts_delta;
	int r = rc_varint(&p, end, RC_VARINT_BYTES_MAX, &len);

	if (r <= 0)
		return r;
	if (len < 1)
		return -1;
	if (len > end - p)
		return 0;
	e = p + len;
	p++;   /* attributes */
	if (rc_varint(&p, e, RC_VARLONG_BYTES_MAX, &ts_delta) <= 0 ||             /* timestampDelta */
	    rc_varint(&p, e, RC_VARINT_BYTES_MAX, &x) <= 0 || x != v->seen)       /* offsetDelta */
		return -1;
	int64_t off_delta = x;
	for (int f = 0; f < 2; f++) {                                             /* key, value */
		if (rc_varint(&p, e, RC_VARINT_BYTES_MAX, &x) <= 0 || x < -1 || x > e - p)
			return -1;
		p += x > 0 ? x : 0;
	}
	int64_t headers;
	if (rc_varint(&p, e, RC_VARINT_BYTES_MAX, &headers) <= 0 || headers < 0 || headers > (e - p) / 2)
		return -1;
	for (int64_t i = 0; i < headers; i++) {
		if (rc_varint(&p, e, RC_VARINT_BYTES_MAX, &x) <= 0 || x < 0 || x > e - p)
			return -1;
		p += x;
		if (rc_varint(&p, e, RC_VARINT_BYTES_MAX, &x) <= 0 || x < -1 || x > e - p)
			return -1;
		p += x > 0 ? x : 0;
	}
	if (p != e)
		return -1;
	rc_seek_record(v, ts_delta, off_delta);
	v->seen++;
	return (long)(e - p0);
}

int st_recs_check_feed(struct st_recs_check *v, const uint8_t *p, size_t n)
{
	const uint8_t *end = p + n;

	if (v->bad)
		return -EBADMSG;
	v->bytes += n;
	while (p < end) {
		if (v->found)
			return ST_RECS_FOUND;
		if (v->skip) {
			/* rc_bytes checked skip <= body_left. */
			size_t take = (size_t)(end - p) < (uint64_t)v->skip ? (size_t)(end - p) : (size_t)v->skip;
			p += take;
			v->skip -= (int64_t)take;
			v->body_left -= (int64_t)take;
			if (!rc_settle(v))
				return rc_fail(v);
			continue;
		}
		if (v->state == RC_LENGTH) {
			if (v->seen == v->count)
				return rc_fail(v);   /* bytes after the last record */
			if (v->vbytes == 0) {
				long used = rc_whole(v, p, end);
				if (used < 0)
					return rc_fail(v);
				if (used > 0) {
					p += used;
					continue;
				}
			}
		} else {
			if (v->body_left == 0)
				return rc_fail(v);   /* a field past the record's end */
			v->body_left--;
		}
		uint8_t b = *p++;
		if (v->state == RC_ATTRIBUTES) {
			v->state = RC_TIMESTAMP_DELTA;
			continue;
		}
		int max = v->state == RC_TIMESTAMP_DELTA ? RC_VARLONG_BYTES_MAX : RC_VARINT_BYTES_MAX;
		v->vacc |= (uint64_t)(b & 0x7f) << (7 * v->vbytes);
		if (++v->vbytes == max && (b & 0x80))
			return rc_fail(v);
		if (b & 0x80)
			continue;
		uint64_t u = v->vacc;
		v->vacc = 0;
		v->vbytes = 0;
		if (max == RC_VARINT_BYTES_MAX && u > UINT32_MAX)
			return rc_fail(v);   /* an int32 field whose 5th byte carries bits past 32 */
		/* An int32 field is zig-zag over 32 bits, a varlong over 64: the same formula. */
		int64_t x = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
		if (!rc_field(v, x) || !rc_settle(v))
			return rc_fail(v);
	}
	return v->found ? ST_RECS_FOUND : 0;
}

int st_recs_check_end(struct st_recs_check *v)
{
	if (v->bad || !rc_settle(v))
		return rc_fail(v);
	if (v->state != RC_LENGTH || v->vbytes || v->seen != v->count)
		return rc_fail(v);
	return 0;
}
