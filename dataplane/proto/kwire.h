/* kwire.h: Kafka wire primitives (readers, writers, arena) and the request and
 * response headers.
 *
 * Everything a client sends is untrusted. Readers check every length against the
 * bytes that remain before using it, and their error is sticky: after the first
 * failure every read returns 0 (or a null string), so a decoder can read a whole
 * structure and check r->err once. Writers are sticky the same way (-ENOSPC) and
 * never write past w->end.
 *
 * Encodings: see /work/shared/kafka-protocol/README.md section 2. Protocol varints
 * (compact lengths, tag numbers) are unsigned; record varints are zig-zag signed.
 */
#ifndef SLUICE_KWIRE_H
#define SLUICE_KWIRE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kerr.h"   /* enum kapi: KAPI_API_VERSIONS, whose response always uses header v0 */

#define KWIRE_UVARINT_BYTES_MAX 5   /* u32: 5 groups of 7 bits */
#define KWIRE_VARLONG_BYTES_MAX 10  /* u64: 10 groups of 7 bits */
#define KWIRE_STRING_LEN_MAX 0x7fff /* int16 length, also enforced for compact strings */
#define KWIRE_UUID_BYTES 16
#define KWIRE_API_KEY_MAX 127       /* api keys are small; the table is indexed by key */
_Static_assert(KAPI_KEY_MAX <= KWIRE_API_KEY_MAX, "every api key of kerr.h fits the tables");

/* Strings and bytes point into the frame they came from: valid as long as the frame. */
/* any core: a view, owns nothing. len -1 = null; ptr is not NUL-terminated. */
struct kstr {
	const char *ptr;
	int32_t len;
};

/* any core: a view, owns nothing. len -1 = null. */
struct kbytes {
	const uint8_t *ptr;
	int32_t len;
};

/* any core: cursor over untrusted input. err: first error (-EBADMSG, or -ENOMEM
 * when a decoder's arena ran out); once set, reads return 0 and consume nothing. */
struct kreader {
	const uint8_t *p, *end;
	int err;
};

/* any core: cursor over an output buffer. err: first error (-ENOSPC on overflow,
 * -EINVAL for an unencodable value); once set, writes are dropped and p stays put. */
struct kwriter {
	uint8_t *p, *start, *end;
	int err;
};

/* any core: bump allocator over caller memory, reset per request. Decoders take
 * arrays from it so the data path never calls malloc. */
#define KARENA_ALIGN 8   /* every allocation starts at a multiple of this */
struct karena {
	uint8_t *base;
	size_t used, cap;
};

/* --- arena ------------------------------------------------------------------ */

static inline void karena_init(struct karena *a, void *mem, size_t cap)
{
	a->base = mem;
	a->used = 0;
	a->cap = cap;
}

static inline void karena_reset(struct karena *a) { a->used = 0; }

/* any core: n zeroed bytes, 8-byte aligned, or NULL when the arena is full. */
void *karena_alloc(struct karena *a, size_t n);

/* --- reader ----------------------------------------------------------------- */

static inline void kr_init(struct kreader *r, const void *buf, size_t len)
{
	r->p = buf;
	r->end = r->p + len;
	r->err = 0;
}

static inline size_t kr_left(const struct kreader *r) { return (size_t)(r->end - r->p); }

static inline void kr_fail(struct kreader *r, int err)
{
	if (r->err == 0)
		r->err = err;
}

/* True when n more bytes can be read; otherwise marks the reader failed. */
static inline bool kr_need(struct kreader *r, size_t n)
{
	if (r->err)
		return false;
	if (kr_left(r) < n) {
		r->err = -EBADMSG;
		return false;
	}
	return true;
}

static inline uint64_t kr_be(struct kreader *r, unsigned n)
{
	uint64_t v = 0;
	if (!kr_need(r, n))
		return 0;
	for (unsigned i = 0; i < n; i++)
		v = v << 8 | r->p[i];
	r->p += n;
	return v;
}

static inline int8_t kr_i8(struct kreader *r) { return (int8_t)kr_be(r, 1); }
static inline int16_t kr_i16(struct kreader *r) { return (int16_t)kr_be(r, 2); }
static inline uint16_t kr_u16(struct kreader *r) { return (uint16_t)kr_be(r, 2); }
static inline int32_t kr_i32(struct kreader *r) { return (int32_t)kr_be(r, 4); }
static inline uint32_t kr_u32(struct kreader *r) { return (uint32_t)kr_be(r, 4); }
static inline int64_t kr_i64(struct kreader *r) { return (int64_t)kr_be(r, 8); }
static inline bool kr_bool(struct kreader *r) { return kr_be(r, 1) != 0; }

static inline double kr_f64(struct kreader *r)
{
	uint64_t u = kr_be(r, 8);
	double d;
	memcpy(&d, &u, sizeof d);
	return d;
}

static inline void kr_uuid(struct kreader *r, uint8_t out[KWIRE_UUID_BYTES])
{
	if (!kr_need(r, KWIRE_UUID_BYTES)) {
		memset(out, 0, KWIRE_UUID_BYTES);
		return;
	}
	memcpy(out, r->p, KWIRE_UUID_BYTES);
	r->p += KWIRE_UUID_BYTES;
}

/* Skips n bytes (bounded); returns where they start, or NULL on error. */
static inline const uint8_t *kr_skip(struct kreader *r, size_t n)
{
	const uint8_t *at = r->p;
	if (!kr_need(r, n))
		return NULL;
	r->p += n;
	return at;
}

uint32_t kr_uvarint(struct kreader *r);
uint64_t kr_uvarlong(struct kreader *r);

static inline int32_t kr_varint(struct kreader *r)
{
	uint32_t u = kr_uvarint(r);
	return (int32_t)(u >> 1) ^ -(int32_t)(u & 1);
}

static inline int64_t kr_varlong(struct kreader *r)
{
	uint64_t u = kr_uvarlong(r);
	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* Strings: kr_string/kr_cstring reject null, kr_nstring/kr_cnstring accept it (len -1). */
struct kstr kr_nstring(struct kreader *r);  /* int16 length */
struct kstr kr_cnstring(struct kreader *r); /* uvarint length+1, 0 = null */
struct kstr kr_string(struct kreader *r);
struct kstr kr_cstring(struct kreader *r);

/* Bytes: kr_bytes/kr_cbytes reject null, kr_nbytes/kr_cnbytes accept it (len -1). */
struct kbytes kr_nbytes(struct kreader *r);  /* int32 length */
struct kbytes kr_cnbytes(struct kreader *r); /* uvarint length+1, 0 = null */
struct kbytes kr_bytes(struct kreader *r);
struct kbytes kr_cbytes(struct kreader *r);

/* Array counts, -1 = null. A count larger than the bytes left is an error (every
 * element takes at least one byte), so a hostile count never sizes an allocation. */
int32_t kr_array_len(struct kreader *r);  /* int32 count */
int32_t kr_carray_len(struct kreader *r); /* uvarint count+1, 0 = null */

/* Reads a tagged-field section and skips every field by its size. */
void kr_skip_tags(struct kreader *r);

/* --- writer ----------------------------------------------------------------- */

static inline void kw_init(struct kwriter *w, void *buf, size_t cap)
{
	w->start = w->p = buf;
	w->end = w->start + cap;
	w->err = 0;
}

static inline size_t kw_len(const struct kwriter *w) { return (size_t)(w->p - w->start); }

static inline void kw_fail(struct kwriter *w, int err)
{
	if (w->err == 0)
		w->err = err;
}

/* n bytes at the cursor to fill now or later (size prefixes), or NULL on overflow. */
static inline uint8_t *kw_reserve(struct kwriter *w, size_t n)
{
	uint8_t *at = w->p;
	if (w->err)
		return NULL;
	if ((size_t)(w->end - w->p) < n) {
		w->err = -ENOSPC;
		return NULL;
	}
	w->p += n;
	return at;
}

static inline void kw_be(struct kwriter *w, uint64_t v, unsigned n)
{
	uint8_t *at = kw_reserve(w, n);
	if (at == NULL)
		return;
	for (unsigned i = n; i-- > 0; v >>= 8)
		at[i] = (uint8_t)v;
}

/* Big-endian store into bytes reserved earlier (size prefixes). */
static inline void kw_put_i32(uint8_t *at, int32_t v)
{
	uint32_t u = (uint32_t)v;
	at[0] = (uint8_t)(u >> 24);
	at[1] = (uint8_t)(u >> 16);
	at[2] = (uint8_t)(u >> 8);
	at[3] = (uint8_t)u;
}

static inline void kw_i8(struct kwriter *w, int8_t v) { kw_be(w, (uint8_t)v, 1); }
static inline void kw_i16(struct kwriter *w, int16_t v) { kw_be(w, (uint16_t)v, 2); }
static inline void kw_u16(struct kwriter *w, uint16_t v) { kw_be(w, v, 2); }
static inline void kw_i32(struct kwriter *w, int32_t v) { kw_be(w, (uint32_t)v, 4); }
static inline void kw_u32(struct kwriter *w, uint32_t v) { kw_be(w, v, 4); }
static inline void kw_i64(struct kwriter *w, int64_t v) { kw_be(w, (uint64_t)v, 8); }
static inline void kw_bool(struct kwriter *w, bool v) { kw_be(w, v ? 1 : 0, 1); }

static inline void kw_f64(struct kwriter *w, double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof u);
	kw_be(w, u, 8);
}

static inline void kw_raw(struct kwriter *w, const void *src, size_t n)
{
	uint8_t *at = kw_reserve(w, n);
	if (at != NULL && n > 0)
		memcpy(at, src, n);
}

static inline void kw_uuid(struct kwriter *w, const uint8_t v[KWIRE_UUID_BYTES])
{
	kw_raw(w, v, KWIRE_UUID_BYTES);
}

void kw_uvarint(struct kwriter *w, uint32_t v);
void kw_uvarlong(struct kwriter *w, uint64_t v);
static inline void kw_varint(struct kwriter *w, int32_t v)
{
	kw_uvarint(w, ((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}
static inline void kw_varlong(struct kwriter *w, int64_t v)
{
	kw_uvarlong(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* Writers take null (len -1) and write it as null; whether null is allowed is the
 * caller's decision. A string longer than KWIRE_STRING_LEN_MAX fails with -EINVAL. */
void kw_string(struct kwriter *w, struct kstr s);   /* int16 length */
void kw_cstring(struct kwriter *w, struct kstr s);  /* uvarint length+1 */
void kw_bytes(struct kwriter *w, struct kbytes b);  /* int32 length */
void kw_cbytes(struct kwriter *w, struct kbytes b); /* uvarint length+1 */
static inline void kw_array_len(struct kwriter *w, int32_t n) { kw_i32(w, n < 0 ? -1 : n); }
static inline void kw_carray_len(struct kwriter *w, int32_t n)
{
	kw_uvarint(w, n < 0 ? 0 : (uint32_t)n + 1);
}
/* An empty tagged-field section. */
static inline void kw_empty_tags(struct kwriter *w) { kw_be(w, 0, 1); }

/* --- sizes ------------------------------------------------------------------ */

static inline size_t kw_uvarint_size(uint32_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static inline size_t kw_uvarlong_size(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static inline size_t kw_varint_size(int32_t v)
{
	return kw_uvarint_size(((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

static inline size_t kw_varlong_size(int64_t v)
{
	return kw_uvarlong_size(((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* --- api table (generated, in kmsg.c) --------------------------------------- */

/* any core: read-only. From the Request schema's validVersions/flexibleVersions. */
struct kapi_info {
	int16_t key;
	const char *name; /* "Produce", "Fetch", ... */
	int16_t min_version, max_version;
	int16_t flexible_min; /* -1 none */
};

/* any: NULL for an unknown key. */
const struct kapi_info *kapi_info(int16_t api_key);
/* any: false for an unknown key or a version outside the schema's range. */
bool kapi_flexible(int16_t api_key, int16_t api_version);

/* --- headers ---------------------------------------------------------------- */

/* any core: request header v1/v2. client_id points into the frame. */
struct kreq_header {
	int16_t api_key, api_version;
	int32_t correlation_id;
	struct kstr client_id;
};

/* any: reads key, version, correlation id and client id (always an int16 nullable
 * string), then, when kapi_flexible(key, version), skips the header's tagged fields.
 * Returns 0 or -EBADMSG. */
int kreq_header_decode(struct kreader *r, struct kreq_header *h);
/* any: the client side of the above (tests, bench, tools). */
void kreq_header_encode(struct kwriter *w, const struct kreq_header *h);
/* any: correlation id, plus an empty tag section when the request version was
 * flexible, except for ApiVersions (header v0 always). */
void kresp_header_encode(struct kwriter *w, int16_t api_key, int16_t api_version,
			 int32_t correlation_id);
/* any: bytes kresp_header_encode writes. */
size_t kresp_header_size(int16_t api_key, int16_t api_version);

#endif /* SLUICE_KWIRE_H */
