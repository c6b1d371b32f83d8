/* kcodec.c: decode, encode and size any Kafka message from its generated field table.
 *
 * Per struct, in version v of a message:
 *   - a field is "regular" when v is in its versions and it is not tagged in v; regular
 *     fields are read and written in table order;
 *   - a field is "tagged" when it has a tag and v is in its taggedVersions; it lives in
 *     the struct's tagged-field section, which every struct has in flexible versions;
 *   - any other field is absent and decodes to its default.
 * Flexible versions use compact strings, bytes and arrays (uvarint length+1).
 */
#include "kcodec.h"

#include <assert.h>

/* Per-call context: the version and whether it is a flexible one. */
struct kctx {
	int16_t v;
	bool flex;
	struct karena *a; /* decode only */
};

static const uint8_t kempty[1];

/* Wire width of the fixed-size types. */
static const uint8_t kwidth[] = {
	[KT_BOOL] = 1, [KT_INT8] = 1, [KT_INT16] = 2, [KT_UINT16] = 2,
	[KT_INT32] = 4, [KT_INT64] = 8, [KT_FLOAT64] = 8, [KT_UUID] = KWIRE_UUID_BYTES,
};

/* Size of one array element in memory. */
static size_t kelem_size(const struct kfield *f)
{
	switch (f->elem) {
	case KT_BOOL: return sizeof(bool);
	case KT_INT8: return sizeof(int8_t);
	case KT_INT16: return sizeof(int16_t);
	case KT_UINT16: return sizeof(uint16_t);
	case KT_INT32: return sizeof(int32_t);
	case KT_INT64: return sizeof(int64_t);
	case KT_FLOAT64: return sizeof(double);
	case KT_UUID: return KWIRE_UUID_BYTES;
	case KT_STRING: return sizeof(struct kstr);
	case KT_BYTES: case KT_RECORDS: return sizeof(struct kbytes);
	case KT_STRUCT: return f->sub->size;
	}
	assert(!"array of an unknown element type");
	return 1;
}

static bool ktagged(const struct kfield *f, int16_t v)
{
	return f->tag >= 0 && kv_in(f->tagged, v);
}

static bool kregular(const struct kfield *f, int16_t v)
{
	return kv_in(f->versions, v) && !ktagged(f, v);
}

/* Fixed-size values travel as their big-endian bit pattern. */
static uint64_t kload_bits(const void *at, uint8_t type)
{
	switch (type) {
	case KT_BOOL: return *(const bool *)at ? 1 : 0;
	case KT_INT8: return (uint8_t)*(const int8_t *)at;
	case KT_INT16: return (uint16_t)*(const int16_t *)at;
	case KT_UINT16: return *(const uint16_t *)at;
	case KT_INT32: return (uint32_t)*(const int32_t *)at;
	case KT_INT64: return (uint64_t)*(const int64_t *)at;
	case KT_FLOAT64: {
		uint64_t u;
		memcpy(&u, at, sizeof u);
		return u;
	}
	}
	assert(!"not a fixed-size type");
	return 0;
}

static void kstore_bits(void *at, uint8_t type, uint64_t u)
{
	switch (type) {
	case KT_BOOL: *(bool *)at = u != 0; return;
	case KT_INT8: *(int8_t *)at = (int8_t)u; return;
	case KT_INT16: *(int16_t *)at = (int16_t)u; return;
	case KT_UINT16: *(uint16_t *)at = (uint16_t)u; return;
	case KT_INT32: *(int32_t *)at = (int32_t)u; return;
	case KT_INT64: *(int64_t *)at = (int64_t)u; return;
	case KT_FLOAT64: memcpy(at, &u, sizeof u); return;
	}
	assert(!"not a fixed-size type");
}

/* Integer and bool fields as the value kgen.py wrote into kfield.idef. */
static int64_t kload_int(const void *at, uint8_t type)
{
	switch (type) {
	case KT_BOOL: return *(const bool *)at ? 1 : 0;
	case KT_INT8: return *(const int8_t *)at;
	case KT_INT16: return *(const int16_t *)at;
	case KT_UINT16: return *(const uint16_t *)at;
	case KT_INT32: return *(const int32_t *)at;
	case KT_INT64: return *(const int64_t *)at;
	}
	assert(!"not an integer type");
	return 0;
}

static int32_t kload_n(const uint8_t *base, const struct kfield *f)
{
	return *(const int32_t *)(const void *)(base + f->off_n);
}

/* Array element pointers are stored through memcpy: the member's real type is
 * "struct X *", which a void * lvalue may not alias. */
static const uint8_t *kload_ptr(const uint8_t *base, const struct kfield *f)
{
	const uint8_t *p;
	memcpy(&p, base + f->off, sizeof p);
	return p;
}

/* --- defaults --------------------------------------------------------------- */

static void kdef_struct(const struct kschema *s, uint8_t *base);

static void kdef_field(const struct kfield *f, uint8_t *base)
{
	uint8_t *at = base + f->off;
	switch (f->type) {
	case KT_FLOAT64: memcpy(at, &f->fdef, sizeof f->fdef); return;
	case KT_UUID: memset(at, 0, KWIRE_UUID_BYTES); return;
	case KT_STRING: {
		struct kstr s = { f->def_null ? NULL : "", f->def_null ? -1 : 0 };
		memcpy(at, &s, sizeof s);
		return;
	}
	case KT_BYTES: case KT_RECORDS: {
		struct kbytes b = { f->def_null ? NULL : kempty, f->def_null ? -1 : 0 };
		memcpy(at, &b, sizeof b);
		return;
	}
	case KT_STRUCT: kdef_struct(f->sub, at); return;
	case KT_ARRAY: {
		const void *none = NULL;
		*(int32_t *)(void *)(base + f->off_n) = f->def_null ? -1 : 0;
		memcpy(at, &none, sizeof none);
		return;
	}
	default: kstore_bits(at, f->type, (uint64_t)f->idef); return;
	}
}

static void kdef_struct(const struct kschema *s, uint8_t *base)
{
	for (uint32_t i = 0; i < s->nfields; i++)
		kdef_field(&s->fields[i], base);
}

void kcodec_defaults(const struct kschema *s, void *out)
{
	memset(out, 0, s->size);
	kdef_struct(s, out);
}

/* A tagged field is written only when it holds something other than its default. */
static bool kis_default_struct(const struct kschema *s, const uint8_t *base);

static bool kis_default(const struct kfield *f, const uint8_t *base)
{
	const uint8_t *at = base + f->off;
	switch (f->type) {
	case KT_FLOAT64: return memcmp(at, &f->fdef, sizeof f->fdef) == 0;
	case KT_UUID: {
		static const uint8_t zero[KWIRE_UUID_BYTES];
		return memcmp(at, zero, KWIRE_UUID_BYTES) == 0;
	}
	case KT_STRING: return ((const struct kstr *)(const void *)at)->len == (f->def_null ? -1 : 0);
	case KT_BYTES: case KT_RECORDS:
		return ((const struct kbytes *)(const void *)at)->len == (f->def_null ? -1 : 0);
	case KT_STRUCT: return kis_default_struct(f->sub, at);
	case KT_ARRAY: return kload_n(base, f) == (f->def_null ? -1 : 0);
	default: return kload_int(at, f->type) == f->idef;
	}
}

static bool kis_default_struct(const struct kschema *s, const uint8_t *base)
{
	for (uint32_t i = 0; i < s->nfields; i++)
		if (!kis_default(&s->fields[i], base))
			return false;
	return true;
}

/* --- decode ----------------------------------------------------------------- */

static void kdec_struct(struct kreader *r, const struct kschema *s, uint8_t *base,
			const struct kctx *c);

/* One value of type `type`: a field, or an array element (f is then the array). */
static void kdec_value(struct kreader *r, const struct kfield *f, uint8_t type, bool nullable,
		       uint8_t *at, const struct kctx *c)
{
	switch (type) {
	case KT_UUID: kr_uuid(r, at); return;
	case KT_STRING: {
		struct kstr s = c->flex ? kr_cnstring(r) : kr_nstring(r);
		if (s.len < 0 && !nullable)
			kr_fail(r, -EBADMSG);
		memcpy(at, &s, sizeof s);
		return;
	}
	case KT_BYTES: case KT_RECORDS: {
		struct kbytes b = c->flex ? kr_cnbytes(r) : kr_nbytes(r);
		if (b.len < 0 && !nullable)
			kr_fail(r, -EBADMSG);
		memcpy(at, &b, sizeof b);
		return;
	}
	case KT_STRUCT: kdec_struct(r, f->sub, at, c); return;
	case KT_ARRAY: assert(!"nested arrays are not in any schema"); return;
	default: kstore_bits(at, type, kr_be(r, kwidth[type])); return;
	}
}

static void kdec_field(struct kreader *r, const struct kfield *f, uint8_t *base,
		       const struct kctx *c)
{
	bool nullable = kv_in(f->nullable, c->v);
	if (f->type != KT_ARRAY) {
		kdec_value(r, f, f->type, nullable, base + f->off, c);
		return;
	}
	int32_t n = c->flex ? kr_carray_len(r) : kr_array_len(r);
	uint8_t *elems = NULL;
	if (r->err)
		return;
	if (n < 0 && !nullable) {
		kr_fail(r, -EBADMSG);
		return;
	}
	if (n > 0) {
		/* n <= bytes left in the frame (kr_array_len), so this is bounded. */
		size_t esz = kelem_size(f);
		elems = karena_alloc(c->a, (size_t)n * esz);
		if (elems == NULL) {
			kr_fail(r, -ENOMEM);
			return;
		}
		for (int32_t i = 0; i < n && r->err == 0; i++)
			kdec_value(r, f, f->elem, false, elems + (size_t)i * esz, c);
	}
	*(int32_t *)(void *)(base + f->off_n) = n;
	memcpy(base + f->off, &elems, sizeof elems);
}

static const struct kfield *kfind_tag(const struct kschema *s, uint32_t tag, int16_t v)
{
	for (uint32_t i = 0; i < s->nfields; i++)
		if ((uint32_t)s->fields[i].tag == tag && ktagged(&s->fields[i], v))
			return &s->fields[i];
	return NULL;
}

static void kdec_tags(struct kreader *r, const struct kschema *s, uint8_t *base,
		      const struct kctx *c)
{
	uint32_t n = kr_uvarint(r);
	/* Each entry takes at least two bytes, so a hostile n ends at the frame's end. */
	for (uint32_t i = 0; i < n && r->err == 0; i++) {
		uint32_t tag = kr_uvarint(r);
		uint32_t size = kr_uvarint(r);
		const uint8_t *data = kr_skip(r, size);
		const struct kfield *f = kfind_tag(s, tag, c->v);
		if (data == NULL || f == NULL)
			continue; /* error, or a tag this version does not know: skipped */
		struct kreader sub = { data, data + size, 0 };
		kdec_field(&sub, f, base, c);
		if (sub.err)
			kr_fail(r, sub.err);
	}
}

static void kdec_struct(struct kreader *r, const struct kschema *s, uint8_t *base,
			const struct kctx *c)
{
	for (uint32_t i = 0; i < s->nfields && r->err == 0; i++) {
		const struct kfield *f = &s->fields[i];
		if (kregular(f, c->v))
			kdec_field(r, f, base, c);
		else
			kdef_field(f, base); /* absent, or tagged: the tag section may set it */
	}
	if (c->flex)
		kdec_tags(r, s, base, c);
}

int kcodec_decode(const struct kschema *s, struct kreader *r, int16_t version, void *out,
		  struct karena *a)
{
	assert(s != NULL && r != NULL && out != NULL && a != NULL);
	assert(s->api_key >= -1);
	if (r->err)
		return r->err;
	if (!kv_in(s->valid, version)) {
		kr_fail(r, -EBADMSG);
		return r->err;
	}
	struct kctx c = { version, kv_in(s->flexible, version), a };
	kdec_struct(r, s, out, &c);
	assert(r->p <= r->end);
	return r->err;
}

/* --- size ------------------------------------------------------------------- */

static size_t ksize_struct(const struct kschema *s, const uint8_t *base, const struct kctx *c);

static size_t klen_size(int64_t len, bool flex, unsigned classic_width)
{
	if (flex)
		return kw_uvarint_size((uint32_t)(len + 1)) + (size_t)(len > 0 ? len : 0);
	return classic_width + (size_t)(len > 0 ? len : 0);
}

static size_t ksize_value(const struct kfield *f, uint8_t type, const uint8_t *at,
			  const struct kctx *c)
{
	switch (type) {
	case KT_STRING: return klen_size(((const struct kstr *)(const void *)at)->len, c->flex, 2);
	case KT_BYTES: case KT_RECORDS:
		return klen_size(((const struct kbytes *)(const void *)at)->len, c->flex, 4);
	case KT_STRUCT: return ksize_struct(f->sub, at, c);
	case KT_ARRAY: assert(!"nested arrays are not in any schema"); return 0;
	default: return kwidth[type];
	}
}

static size_t ksize_field(const struct kfield *f, const uint8_t *base, const struct kctx *c)
{
	if (f->type != KT_ARRAY)
		return ksize_value(f, f->type, base + f->off, c);
	int32_t n = kload_n(base, f);
	size_t total = c->flex ? kw_uvarint_size(n < 0 ? 0 : (uint32_t)n + 1) : 4;
	if (n <= 0)
		return total;
	const uint8_t *elems = kload_ptr(base, f);
	if (f->elem != KT_STRUCT && f->elem != KT_STRING && f->elem != KT_BYTES &&
	    f->elem != KT_RECORDS)
		return total + (size_t)n * kwidth[f->elem]; /* fixed-size elements */
	if (elems == NULL)
		return total; /* encode fails with -EINVAL */
	size_t esz = kelem_size(f);
	for (int32_t i = 0; i < n; i++)
		total += ksize_value(f, f->elem, elems + (size_t)i * esz, c);
	return total;
}

static size_t ksize_struct(const struct kschema *s, const uint8_t *base, const struct kctx *c)
{
	size_t total = 0;
	uint32_t ntags = 0;
	for (uint32_t i = 0; i < s->nfields; i++) {
		const struct kfield *f = &s->fields[i];
		if (kregular(f, c->v)) {
			total += ksize_field(f, base, c);
		} else if (c->flex && ktagged(f, c->v) && !kis_default(f, base)) {
			size_t len = ksize_field(f, base, c);
			total += kw_uvarint_size((uint32_t)f->tag) + kw_uvarint_size((uint32_t)len) + len;
			ntags++;
		}
	}
	if (c->flex)
		total += kw_uvarint_size(ntags);
	return total;
}

size_t kcodec_size(const struct kschema *s, int16_t version, const void *in)
{
	assert(s != NULL && in != NULL);
	if (!kv_in(s->valid, version))
		return 0;
	struct kctx c = { version, kv_in(s->flexible, version), NULL };
	return ksize_struct(s, in, &c);
}

/* --- encode ----------------------------------------------------------------- */

static void kenc_struct(struct kwriter *w, const struct kschema *s, const uint8_t *base,
			const struct kctx *c);

static void kenc_value(struct kwriter *w, const struct kfield *f, uint8_t type, bool nullable,
		       const uint8_t *at, const struct kctx *c)
{
	switch (type) {
	case KT_UUID: kw_uuid(w, at); return;
	case KT_STRING: {
		struct kstr s;
		memcpy(&s, at, sizeof s);
		if ((s.len < 0 && !nullable) || (s.len > 0 && s.ptr == NULL))
			kw_fail(w, -EINVAL);
		else if (c->flex)
			kw_cstring(w, s);
		else
			kw_string(w, s);
		return;
	}
	case KT_BYTES: case KT_RECORDS: {
		struct kbytes b;
		memcpy(&b, at, sizeof b);
		if ((b.len < 0 && !nullable) || (b.len > 0 && b.ptr == NULL))
			kw_fail(w, -EINVAL);
		else if (c->flex)
			kw_cbytes(w, b);
		else
			kw_bytes(w, b);
		return;
	}
	case KT_STRUCT: kenc_struct(w, f->sub, at, c); return;
	case KT_ARRAY: assert(!"nested arrays are not in any schema"); return;
	default: kw_be(w, kload_bits(at, type), kwidth[type]); return;
	}
}

static void kenc_field(struct kwriter *w, const struct kfield *f, const uint8_t *base,
		       const struct kctx *c)
{
	bool nullable = kv_in(f->nullable, c->v);
	if (f->type != KT_ARRAY) {
		kenc_value(w, f, f->type, nullable, base + f->off, c);
		return;
	}
	int32_t n = kload_n(base, f);
	const uint8_t *elems = kload_ptr(base, f);
	if ((n < 0 && !nullable) || n < -1 || (n > 0 && elems == NULL)) {
		kw_fail(w, -EINVAL);
		return;
	}
	if (c->flex)
		kw_carray_len(w, n);
	else
		kw_array_len(w, n);
	size_t esz = n > 0 ? kelem_size(f) : 0;
	for (int32_t i = 0; i < n && w->err == 0; i++)
		kenc_value(w, f, f->elem, false, elems + (size_t)i * esz, c);
}

static void kenc_struct(struct kwriter *w, const struct kschema *s, const uint8_t *base,
			const struct kctx *c)
{
	uint32_t ntags = 0;
	for (uint32_t i = 0; i < s->nfields && w->err == 0; i++) {
		const struct kfield *f = &s->fields[i];
		if (kregular(f, c->v))
			kenc_field(w, f, base, c);
		else if (c->flex && ktagged(f, c->v) && !kis_default(f, base))
			ntags++;
	}
	if (!c->flex)
		return;
	kw_uvarint(w, ntags);
	/* kgen.py emits tagged fields in increasing tag order, as the format requires. */
	for (uint32_t i = 0; i < s->nfields && ntags > 0 && w->err == 0; i++) {
		const struct kfield *f = &s->fields[i];
		if (!ktagged(f, c->v) || kis_default(f, base))
			continue;
		kw_uvarint(w, (uint32_t)f->tag);
		kw_uvarint(w, (uint32_t)ksize_field(f, base, c));
		kenc_field(w, f, base, c);
	}
}

int kcodec_encode(const struct kschema *s, struct kwriter *w, int16_t version, const void *in)
{
	assert(s != NULL && w != NULL && in != NULL);
	if (w->err)
		return w->err;
	if (!kv_in(s->valid, version)) {
		kw_fail(w, -EINVAL);
		return w->err;
	}
	struct kctx c = { version, kv_in(s->flexible, version), NULL };
	kenc_struct(w, s, in, &c);
	assert(w->p <= w->end);
	return w->err;
}
