/* kwire.c: Kafka wire primitives and the hand-written request/response headers. */
#include "kwire.h"

#include <assert.h>

void *karena_alloc(struct karena *a, size_t n)
{
	assert(a->used <= a->cap);
	size_t at = (a->used + KARENA_ALIGN - 1) & ~(size_t)(KARENA_ALIGN - 1);
	if (at > a->cap || n > a->cap - at)
		return NULL;
	a->used = at + n;
	memset(a->base + at, 0, n);
	return a->base + at;
}

/* --- reader ----------------------------------------------------------------- */

uint32_t kr_uvarint(struct kreader *r)
{
	uint32_t v = 0;
	for (unsigned i = 0; i < KWIRE_UVARINT_BYTES_MAX; i++) {
		if (!kr_need(r, 1))
			return 0;
		uint8_t b = *r->p++;
		/* The fifth group holds only the top 4 bits of a u32. */
		if (i == KWIRE_UVARINT_BYTES_MAX - 1 && b > 0x0f)
			break;
		v |= (uint32_t)(b & 0x7f) << (7 * i);
		if ((b & 0x80) == 0)
			return v;
	}
	kr_fail(r, -EBADMSG);
	return 0;
}

uint64_t kr_uvarlong(struct kreader *r)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < KWIRE_VARLONG_BYTES_MAX; i++) {
		if (!kr_need(r, 1))
			return 0;
		uint8_t b = *r->p++;
		if (i == KWIRE_VARLONG_BYTES_MAX - 1 && b > 0x01)
			break;
		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if ((b & 0x80) == 0)
			return v;
	}
	kr_fail(r, -EBADMSG);
	return 0;
}

static const struct kstr kstr_null = { NULL, -1 };
static const struct kbytes kbytes_null = { NULL, -1 };

/* len: -1 null, >= 0 bytes that follow; anything else or too long is an error. */
static struct kstr kr_str_body(struct kreader *r, int64_t len, bool nullable)
{
	if (r->err)
		return kstr_null;
	if (len == -1 && nullable)
		return kstr_null;
	if (len < 0 || len > KWIRE_STRING_LEN_MAX) {
		kr_fail(r, -EBADMSG);
		return kstr_null;
	}
	const uint8_t *at = kr_skip(r, (size_t)len);
	if (at == NULL)
		return kstr_null;
	return (struct kstr){ (const char *)at, (int32_t)len };
}

static struct kbytes kr_bytes_body(struct kreader *r, int64_t len, bool nullable)
{
	if (r->err)
		return kbytes_null;
	if (len == -1 && nullable)
		return kbytes_null;
	if (len < 0 || len > INT32_MAX) {
		kr_fail(r, -EBADMSG);
		return kbytes_null;
	}
	const uint8_t *at = kr_skip(r, (size_t)len);
	if (at == NULL)
		return kbytes_null;
	return (struct kbytes){ at, (int32_t)len };
}

struct kstr kr_nstring(struct kreader *r) { return kr_str_body(r, kr_i16(r), true); }
struct kstr kr_string(struct kreader *r) { return kr_str_body(r, kr_i16(r), false); }
struct kstr kr_cnstring(struct kreader *r)
{
	return kr_str_body(r, (int64_t)kr_uvarint(r) - 1, true);
}
struct kstr kr_cstring(struct kreader *r)
{
	return kr_str_body(r, (int64_t)kr_uvarint(r) - 1, false);
}

struct kbytes kr_nbytes(struct kreader *r) { return kr_bytes_body(r, kr_i32(r), true); }
struct kbytes kr_bytes(struct kreader *r) { return kr_bytes_body(r, kr_i32(r), false); }
struct kbytes kr_cnbytes(struct kreader *r)
{
	return kr_bytes_body(r, (int64_t)kr_uvarint(r) - 1, true);
}
struct kbytes kr_cbytes(struct kreader *r)
{
	return kr_bytes_body(r, (int64_t)kr_uvarint(r) - 1, false);
}

static int32_t kr_count(struct kreader *r, int64_t n)
{
	if (r->err)
		return 0;
	if (n == -1)
		return -1;
	if (n < 0 || (uint64_t)n > kr_left(r)) {
		kr_fail(r, -EBADMSG);
		return 0;
	}
	return (int32_t)n;
}

int32_t kr_array_len(struct kreader *r) { return kr_count(r, kr_i32(r)); }
int32_t kr_carray_len(struct kreader *r) { return kr_count(r, (int64_t)kr_uvarint(r) - 1); }

void kr_skip_tags(struct kreader *r)
{
	uint32_t n = kr_uvarint(r);
	/* Each field takes at least two bytes (tag, size), so the loop ends within the
	 * input whatever n says. */
	for (uint32_t i = 0; i < n && r->err == 0; i++) {
		(void)kr_uvarint(r);
		(void)kr_skip(r, kr_uvarint(r));
	}
}

/* --- writer ----------------------------------------------------------------- */

void kw_uvarint(struct kwriter *w, uint32_t v)
{
	uint8_t *at = kw_reserve(w, kw_uvarint_size(v));
	if (at == NULL)
		return;
	for (; v >= 0x80; v >>= 7)
		*at++ = (uint8_t)(v | 0x80);
	*at = (uint8_t)v;
}

void kw_uvarlong(struct kwriter *w, uint64_t v)
{
	uint8_t *at = kw_reserve(w, kw_uvarlong_size(v));
	if (at == NULL)
		return;
	for (; v >= 0x80; v >>= 7)
		*at++ = (uint8_t)(v | 0x80);
	*at = (uint8_t)v;
}

void kw_string(struct kwriter *w, struct kstr s)
{
	if (s.len > KWIRE_STRING_LEN_MAX || s.len < -1) {
		kw_fail(w, -EINVAL);
		return;
	}
	kw_i16(w, (int16_t)s.len);
	if (s.len > 0)
		kw_raw(w, s.ptr, (size_t)s.len);
}

void kw_cstring(struct kwriter *w, struct kstr s)
{
	if (s.len > KWIRE_STRING_LEN_MAX || s.len < -1) {
		kw_fail(w, -EINVAL);
		return;
	}
	kw_uvarint(w, (uint32_t)(s.len + 1));
	if (s.len > 0)
		kw_raw(w, s.ptr, (size_t)s.len);
}

void kw_bytes(struct kwriter *w, struct kbytes b)
{
	if (b.len < -1) {
		kw_fail(w, -EINVAL);
		return;
	}
	kw_i32(w, b.len);
	if (b.len > 0)
		kw_raw(w, b.ptr, (size_t)b.len);
}

void kw_cbytes(struct kwriter *w, struct kbytes b)
{
	if (b.len < -1) {
		kw_fail(w, -EINVAL);
		return;
	}
	kw_uvarint(w, (uint32_t)b.len + 1);
	if (b.len > 0)
		kw_raw(w, b.ptr, (size_t)b.len);
}

/* --- headers ---------------------------------------------------------------- */

int kreq_header_decode(struct kreader *r, struct kreq_header *h)
{
	h->api_key = kr_i16(r);
	h->api_version = kr_i16(r);
	h->correlation_id = kr_i32(r);
	/* Classic string even in header v2: a broker must read the client id before it
	 * knows whether it understands this key and version at all. */
	h->client_id = kr_nstring(r);
	if (r->err == 0 && kapi_flexible(h->api_key, h->api_version))
		kr_skip_tags(r);
	return r->err;
}

void kreq_header_encode(struct kwriter *w, const struct kreq_header *h)
{
	kw_i16(w, h->api_key);
	kw_i16(w, h->api_version);
	kw_i32(w, h->correlation_id);
	kw_string(w, h->client_id);
	if (kapi_flexible(h->api_key, h->api_version))
		kw_empty_tags(w);
}

static bool kresp_header_v1(int16_t api_key, int16_t api_version)
{
	/* ApiVersions answers in header v0 always: the client parses it before it knows
	 * what the broker supports (librdkafka would read a tag byte as ErrorCode). */
	return api_key != KAPI_API_VERSIONS && kapi_flexible(api_key, api_version);
}

void kresp_header_encode(struct kwriter *w, int16_t api_key, int16_t api_version,
			 int32_t correlation_id)
{
	kw_i32(w, correlation_id);
	if (kresp_header_v1(api_key, api_version))
		kw_empty_tags(w);
}

size_t kresp_header_size(int16_t api_key, int16_t api_version)
{
	return 4 + (kresp_header_v1(api_key, api_version) ? 1 : 0);
}
