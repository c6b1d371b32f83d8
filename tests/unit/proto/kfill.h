/* kfill.h: test helper (tests and the fuzz seed maker only). Walks a message's field
 * table and fills every field that exists in a version with a non-default value, so
 * a round trip exercises every field of every version. */
#ifndef SLUICE_KFILL_H
#define SLUICE_KFILL_H

#include "kmsg.h"

enum kfill_mode {
	KFILL_FULL,  /* non-null values, arrays of KFILL_ARRAY_LEN elements */
	KFILL_NULLS, /* nullable strings/bytes/arrays null, other arrays empty */
};

#define KFILL_ARRAY_LEN 2

/* test thread: fills out (a struct of schema s) for `version`; fields absent in that
 * version keep their defaults. Arrays come from a. Returns 0 or -ENOMEM. */
int kfill(const struct kschema *s, int16_t version, enum kfill_mode mode, uint32_t seed,
	  void *out, struct karena *a);

/* test thread: true when a and b (structs of schema s) hold the same values. */
bool kequal(const struct kschema *s, const void *a, const void *b);

#endif
