/* kfill.c: fill messages generically from their field tables (tests only). */
#include "kfill.h"

#include <assert.h>

/* Long enough that some compact lengths need a second uvarint byte (>= 127). */
#define KFILL_BYTES_MAX 300
static uint8_t kfill_bytes[KFILL_BYTES_MAX + 8];

struct kfill_ctx {
	int16_t v;
	bool flex;
	enum kfill_mode mode;
	uint32_t seed;
	struct karena *a;
	int err;
};

static uint32_t kfill_next(struct kfill_ctx *c)
{
	c->seed = c->seed * 1103515245u + 12345u;
	return c->seed >> 8;
}

static void kfill_struct(struct kfill_ctx *c, const struct kschema *s, uint8_t *base);

/* A value different from the field's default. */
static void kfill_value(struct kfill_ctx *c, const struct kfield *f, uint8_t type,
			bool nullable, uint8_t *at)
{
	uint32_t r = kfill_next(c);
	switch (type) {
	case KT_BOOL: *(bool *)at = f->idef == 0; return;
	case KT_INT8: *(int8_t *)at = (int8_t)(f->idef + 1 + (int64_t)(r % 50)); return;
	case KT_INT16: *(int16_t *)at = (int16_t)(f->idef + 1 + (int64_t)(r % 30000)); return;
	case KT_UINT16: *(uint16_t *)at = (uint16_t)(f->idef + 1 + (int64_t)(r % 60000)); return;
	case KT_INT32: *(int32_t *)at = (int32_t)(f->idef - 1 - (int64_t)r); return;
	case KT_INT64: *(int64_t *)at = f->idef + 1 + ((int64_t)r << 20); return;
	case KT_FLOAT64: *(double *)at = f->fdef + 0.5 + r; return;
	case KT_UUID:
		for (int i = 0; i < KWIRE_UUID_BYTES; i++)
			at[i] = (uint8_t)(r + (uint32_t)i * 37u + 1u);
		return;
	case KT_STRING: {
		struct kstr s = { f->name, (int32_t)strlen(f->name) };
		if (c->mode == KFILL_NULLS && nullable)
			s = (struct kstr){ NULL, -1 };
		memcpy(at, &s, sizeof s);
		return;
	}
	case KT_BYTES: case KT_RECORDS: {
		struct kbytes b = { kfill_bytes + r % 8, (int32_t)(1 + r % KFILL_BYTES_MAX) };
		if (c->mode == KFILL_NULLS && nullable)
			b = (struct kbytes){ NULL, -1 };
		memcpy(at, &b, sizeof b);
		return;
	}
	case KT_STRUCT: kfill_struct(c, f->sub, at); return;
	}
	assert(!"unexpected type");
}

static size_t kfill_elem_size(const struct kfield *f)
{
	static const size_t sizes[] = {
		[KT_BOOL] = sizeof(bool), [KT_INT8] = 1, [KT_INT16] = 2, [KT_UINT16] = 2,
		[KT_INT32] = 4, [KT_INT64] = 8, [KT_FLOAT64] = 8, [KT_UUID] = KWIRE_UUID_BYTES,
		[KT_STRING] = sizeof(struct kstr), [KT_BYTES] = sizeof(struct kbytes),
		[KT_RECORDS] = sizeof(struct kbytes),
	};
	return f->elem == KT_STRUCT ? f->sub->size : sizes[f->elem];
}

static void kfill_field(struct kfill_ctx *c, const struct kfield *f, uint8_t *base)
{
	bool nullable = kv_in(f->nullable, c->v);
	if (f->type != KT_ARRAY) {
		kfill_value(c, f, f->type, nullable, base + f->off);
		return;
	}
	int32_t n = KFILL_ARRAY_LEN;
	if (c->mode == KFILL_NULLS)
		n = nullable ? -1 : 0;
	uint8_t *elems = NULL;
	if (n > 0) {
		size_t esz = kfill_elem_size(f);
		elems = karena_alloc(c->a, (size_t)n * esz);
		if (elems == NULL) {
			c->err = -ENOMEM;
			return;
		}
		for (int32_t i = 0; i < n; i++) {
			if (f->elem == KT_STRUCT)
				kcodec_defaults(f->sub, elems + (size_t)i * esz);
			kfill_value(c, f, f->elem, false, elems + (size_t)i * esz);
		}
	}
	*(int32_t *)(void *)(base + f->off_n) = n;
	memcpy(base + f->off, &elems, sizeof elems);
}

static void kfill_struct(struct kfill_ctx *c, const struct kschema *s, uint8_t *base)
{
	for (uint32_t i = 0; i < s->nfields; i++) {
		const struct kfield *f = &s->fields[i];
		bool tagged = f->tag >= 0 && kv_in(f->tagged, c->v);
		if (kv_in(f->versions, c->v) && (!tagged || c->flex))
			kfill_field(c, f, base);
	}
}

int kfill(const struct kschema *s, int16_t version, enum kfill_mode mode, uint32_t seed,
	  void *out, struct karena *a)
{
	struct kfill_ctx c = { version, kv_in(s->flexible, version), mode, seed, a, 0 };
	for (size_t i = 0; i < sizeof kfill_bytes; i++)
		kfill_bytes[i] = (uint8_t)(i * 7 + 1);
	kcodec_defaults(s, out);
	kfill_struct(&c, s, out);
	return c.err;
}

static bool kequal_value(const struct kfield *f, uint8_t type, const uint8_t *a,
			 const uint8_t *b)
{
	switch (type) {
	case KT_STRING: {
		struct kstr x, y;
		memcpy(&x, a, sizeof x);
		memcpy(&y, b, sizeof y);
		return x.len == y.len && (x.len <= 0 || memcmp(x.ptr, y.ptr, (size_t)x.len) == 0);
	}
	case KT_BYTES: case KT_RECORDS: {
		struct kbytes x, y;
		memcpy(&x, a, sizeof x);
		memcpy(&y, b, sizeof y);
		return x.len == y.len && (x.len <= 0 || memcmp(x.ptr, y.ptr, (size_t)x.len) == 0);
	}
	case KT_STRUCT: return kequal(f->sub, a, b);
	case KT_BOOL: return *(const bool *)a == *(const bool *)b;
	case KT_INT8: return *(const int8_t *)a == *(const int8_t *)b;
	case KT_INT16: case KT_UINT16: return memcmp(a, b, 2) == 0;
	case KT_INT32: return memcmp(a, b, 4) == 0;
	case KT_INT64: case KT_FLOAT64: return memcmp(a, b, 8) == 0;
	case KT_UUID: return memcmp(a, b, KWIRE_UUID_BYTES) == 0;
	}
	return false;
}

bool kequal(const struct kschema *s, const void *va, const void *vb)
{
	const uint8_t *a = va, *b = vb;
	for (uint32_t i = 0; i < s->nfields; i++) {
		const struct kfield *f = &s->fields[i];
		if (f->type != KT_ARRAY) {
			if (!kequal_value(f, f->type, a + f->off, b + f->off))
				return false;
			continue;
		}
		int32_t na = *(const int32_t *)(const void *)(a + f->off_n);
		int32_t nb = *(const int32_t *)(const void *)(b + f->off_n);
		if (na != nb)
			return false;
		const uint8_t *ea, *eb;
		memcpy(&ea, a + f->off, sizeof ea);
		memcpy(&eb, b + f->off, sizeof eb);
		size_t esz = kfill_elem_size(f);
		for (int32_t j = 0; j < na; j++)
			if (!kequal_value(f, f->elem, ea + (size_t)j * esz, eb + (size_t)j * esz))
				return false;
	}
	return true;
}
