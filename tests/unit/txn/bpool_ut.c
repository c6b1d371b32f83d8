/*
 * bpool_ut.c - the fixed buddy pool (txn/bpool.c) against a model: seeded
 * random gets, in-place grows and puts over arenas that are and are not a
 * power of two. Every live block lies inside the arena, aligned to its
 * order, overlapping no other (a per-unit owner map), and keeps the bytes
 * written to it; the free count matches the model; once all are given back
 * the arena merges whole again (its largest blocks can be taken).
 *
 * Locality: test thread only.
 */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpool.h"

#define UT_UNIT_BYTES 8u
#define UT_LIVE_MAX   64u       /* blocks held at once */
#define UT_STEPS      20000u
#define UT_MAX_ORDER  5u

struct ut_block {
	uint8_t *p;
	unsigned order;
	uint8_t fill;
};

static uint32_t ut_rand(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*s >> 33);
}

static void ut_check(struct txn_bpool *p, struct ut_block *live, unsigned nlive)
{
	static int32_t owner[1024];
	CU_ASSERT_FATAL(p->units <= 1024);
	for (uint32_t i = 0; i < p->units; i++)
		owner[i] = -1;
	uint32_t used = 0;
	for (unsigned b = 0; b < nlive; b++) {
		uint32_t o = (uint32_t)((live[b].p - p->arena) / UT_UNIT_BYTES), n = 1u << live[b].order;
		CU_ASSERT_FATAL(txn_bpool_owns(p, live[b].p) && o + n <= p->units && (o & (n - 1)) == 0);
		CU_ASSERT_EQUAL_FATAL(txn_bpool_order(p, live[b].p), live[b].order);
		for (uint32_t u = o; u < o + n; u++) {
			CU_ASSERT_EQUAL_FATAL(owner[u], -1);   /* no two blocks share a unit */
			owner[u] = (int32_t)b;
		}
		for (size_t i = 0; i < (size_t)n * UT_UNIT_BYTES; i++)
			CU_ASSERT_EQUAL_FATAL(live[b].p[i], live[b].fill);
		used += n;
	}
	CU_ASSERT_EQUAL_FATAL(p->free_units, p->units - used);
}

static void ut_run(uint32_t units, uint64_t seed)
{
	struct txn_bpool p;
	CU_ASSERT_FATAL(txn_bpool_init(&p, UT_UNIT_BYTES, units, UT_MAX_ORDER) == 0);
	struct ut_block live[UT_LIVE_MAX];
	unsigned nlive = 0;
	for (uint32_t step = 0; step < UT_STEPS; step++) {
		uint32_t r = ut_rand(&seed), op = r % 3;
		if (op == 0 && nlive < UT_LIVE_MAX) {
			unsigned order = (r >> 8) % (UT_MAX_ORDER + 2);   /* one past the max: refused */
			uint8_t *b = txn_bpool_get(&p, order);
			if (order > UT_MAX_ORDER)
				CU_ASSERT_PTR_NULL_FATAL(b);
			if (b) {
				live[nlive] = (struct ut_block){ b, order, (uint8_t)(r >> 16) };
				memset(b, live[nlive].fill, (size_t)UT_UNIT_BYTES << order);
				nlive++;
			}
		} else if (op == 1 && nlive) {
			struct ut_block *b = &live[(r >> 8) % nlive];
			unsigned to = b->order + 1 + (r >> 20) % 2;
			if (txn_bpool_grow(&p, b->p, to)) {
				CU_ASSERT_FATAL(to <= UT_MAX_ORDER);
				memset(b->p + ((size_t)UT_UNIT_BYTES << b->order), b->fill,
				       ((size_t)UT_UNIT_BYTES << to) - ((size_t)UT_UNIT_BYTES << b->order));
				b->order = to;
			}
		} else if (nlive) {
			unsigned i = (r >> 8) % nlive;
			txn_bpool_put(&p, live[i].p);
			live[i] = live[--nlive];
		}
		ut_check(&p, live, nlive);
	}
	while (nlive)
		txn_bpool_put(&p, live[--nlive].p);
	CU_ASSERT_EQUAL(p.free_units, units);
	/* Merged back whole: the arena's largest aligned blocks can all be taken. */
	uint32_t taken = 0;
	for (unsigned k = UT_MAX_ORDER + 1; k-- > 0;)
		while (txn_bpool_get(&p, k))
			taken += 1u << k;
	CU_ASSERT_EQUAL(taken, units);
	CU_ASSERT_EQUAL(p.free_units, 0);
	CU_ASSERT_PTR_NULL(txn_bpool_get(&p, 0));   /* empty: refused, never grown */
	txn_bpool_free(&p);
}

static void test_random(void)
{
	static const uint32_t sizes[] = { 1, 7, 32, 100, 129, 1000 };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (uint64_t seed = 1; seed <= 4; seed++)
			ut_run(sizes[i], seed * 7919 + i);
}

/* A full-size block needs its buddies merged back: take all, give back, take the largest. */
static void test_merge(void)
{
	struct txn_bpool p;
	CU_ASSERT_FATAL(txn_bpool_init(&p, UT_UNIT_BYTES, 1u << UT_MAX_ORDER, UT_MAX_ORDER) == 0);
	void *u[1u << UT_MAX_ORDER];
	for (unsigned i = 0; i < (1u << UT_MAX_ORDER); i++)
		CU_ASSERT_PTR_NOT_NULL_FATAL(u[i] = txn_bpool_get(&p, 0));
	CU_ASSERT_PTR_NULL(txn_bpool_get(&p, 0));
	for (unsigned i = 0; i < (1u << UT_MAX_ORDER); i += 2)   /* every other unit: no pair merges */
		txn_bpool_put(&p, u[i]);
	CU_ASSERT_PTR_NULL(txn_bpool_get(&p, 1));
	CU_ASSERT_FALSE(txn_bpool_grow(&p, u[1], 1));   /* an upper buddy cannot grow in place */
	for (unsigned i = 1; i < (1u << UT_MAX_ORDER); i += 2)
		txn_bpool_put(&p, u[i]);
	CU_ASSERT_PTR_EQUAL(txn_bpool_get(&p, UT_MAX_ORDER), p.arena);
	txn_bpool_free(&p);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("bpool", NULL, NULL);
	CU_add_test(s, "random get/grow/put vs a model", test_random);
	CU_add_test(s, "merging back to the largest block", test_merge);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
