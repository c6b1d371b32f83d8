/* kcodec.h: the schema-driven Kafka message codec.
 *
 * kgen.py turns each JSON schema into a C struct plus a table of struct kfield
 * (kmsg.c). One interpreter (kcodec.c) decodes, encodes and sizes any message from
 * its table, so the rules of the format (version ranges, compact vs classic,
 * nullability, tagged fields, defaults) live in one reviewed place instead of being
 * repeated in tens of thousands of generated lines. Handlers use the typed wrappers
 * in kmsg.h (ProduceRequest_decode, ...); tests and fuzzers may walk the tables.
 */
#ifndef SLUICE_KCODEC_H
#define SLUICE_KCODEC_H

#include "kwire.h"

#define KVERSION_MAX INT16_MAX /* "N+" ranges end here */
#define KCODEC_DEPTH_MAX 8     /* nesting of structs in any schema; kgen.py checks */

/* Field types. KT_ARRAY uses kfield.elem for the element type. */
enum ktype {
	KT_BOOL,
	KT_INT8,
	KT_INT16,
	KT_UINT16,
	KT_INT32,
	KT_INT64,
	KT_FLOAT64,
	KT_UUID,
	KT_STRING,  /* struct kstr */
	KT_BYTES,   /* struct kbytes */
	KT_RECORDS, /* struct kbytes: record batches, encoded as bytes */
	KT_STRUCT,  /* embedded struct, kfield.sub */
	KT_ARRAY,   /* int32_t <Name>_n at off_n, element pointer at off */
};

/* Inclusive version range; empty when lo > hi ("none"). */
struct kvrange {
	int16_t lo, hi;
};

struct kschema;

/* any core: read-only, generated. One field of a struct, in wire order. */
struct kfield {
	const char *name;
	const struct kschema *sub; /* KT_STRUCT, or KT_ARRAY of KT_STRUCT */
	int64_t idef;              /* default of integer and bool fields */
	double fdef;               /* default of float64 fields */
	uint32_t off, off_n;       /* offsetof the value; of <Name>_n for arrays */
	uint8_t type, elem;        /* enum ktype; elem for KT_ARRAY */
	bool def_null;             /* string/bytes/array default is null ("" / empty otherwise) */
	struct kvrange versions, nullable, tagged;
	int32_t tag; /* -1 when never tagged */
};

/* any core: read-only, generated. A message, or one of its nested structs. */
struct kschema {
	const char *name;          /* "ProduceRequest", "ProduceRequest_TopicProduceData" */
	const struct kfield *fields;
	uint32_t nfields, size;    /* size: sizeof the C struct */
	int16_t api_key;           /* -1 for nested structs and data types */
	struct kvrange valid;      /* validVersions (messages only) */
	struct kvrange flexible;   /* flexibleVersions (messages only) */
};

static inline bool kv_in(struct kvrange v, int16_t version)
{
	return version >= v.lo && version <= v.hi;
}

/* any: decodes a whole message of schema s (a top-level one: nested schemas have
 * no valid versions) into out; fields absent in this version get their defaults.
 * Strings and bytes point into r's buffer; arrays come from a. Returns 0, -EBADMSG
 * (malformed, or version outside validVersions), or -ENOMEM (arena full); on error
 * out is partly filled and r->err holds the same code. Trailing bytes are left in r. */
int kcodec_decode(const struct kschema *s, struct kreader *r, int16_t version, void *out,
		  struct karena *a);
/* any: returns 0, -ENOSPC (buffer too small), or -EINVAL (null in a version where
 * the field is not nullable, version outside validVersions, bad length). Fields that
 * the version lacks are not written, whatever they hold. Tagged fields are written
 * only when they differ from their default. */
int kcodec_encode(const struct kschema *s, struct kwriter *w, int16_t version, const void *in);
/* any: exact bytes kcodec_encode writes (0 when the version is outside validVersions). */
size_t kcodec_size(const struct kschema *s, int16_t version, const void *in);
/* any: fills out (any schema, nested ones too) with every field's default, as an
 * absent field decodes: kmsg.h wraps it as <Struct>_init. */
void kcodec_defaults(const struct kschema *s, void *out);

#endif /* SLUICE_KCODEC_H */
