/*
 * arena_ut.c - the one buddy pool (txn/arena.h) against a model: seeded
 * random allocations of byte sizes, in-place grows and frees, over regions
 * that are and are not a power of two and units of the shard core's 64 B and
 * of the coordinator lists' odd sizes. After every step each live block lies
 * inside the region, aligned to its size, overlapping no other (a per-unit
 * owner map), holds what was asked (txn_arena_block_bytes) and the bytes
 * written to it; used matches the model and used_peak its maximum; a grow
 * that is refused changes nothing. Exhaustion answers NULL; once all is
 * given back the region merges whole again (its largest blocks can be
 * taken). txn_mem_alloc/_free without an arena use the heap, and free gives
 * a heap block back to the heap even with one; txn_arena_bytes is what the
 * budget prints.
 *
 * Locality: test thread only.
 */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"

#define UT_LIVE_MAX   64u       /* blocks held at once */
#define UT_STEPS      6000u
#define UT_UNITS_MAX  1024u     /* the owner map */

struct ut_block {
	uint8_t *p;
	size_t bytes;                 /* the block's usable bytes, as the model has it */
	uint8_t fill;
};

static uint32_t ut_rand(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*s >> 33);
}

static void ut_check(struct txn_arena *a, struct ut_block *live, unsigned nlive, size_t peak)
{
	static int32_t owner[UT_UNITS_MAX];
	CU_ASSERT_FATAL(a->units <= UT_UNITS_MAX);
	for (size_t i = 0; i < a->units; i++)
		owner[i] = -1;
	size_t used = 0;
	for (unsigned b = 0; b < nlive; b++) {
		size_t o = (size_t)(live[b].p - a->base) / a->unit_bytes, n = live[b].bytes / a->unit_bytes;
		CU_ASSERT_FATAL(txn_arena_owns(a, live[b].p) && (size_t)(live[b].p - a->base) % a->unit_bytes == 0);
		CU_ASSERT_FATAL(n * a->unit_bytes == live[b].bytes && (n & (n - 1)) == 0);   /* 2^k units */
		CU_ASSERT_FATAL(o + n <= a->units && (o & (n - 1)) == 0);                   /* aligned to its size */
		CU_ASSERT_EQUAL_FATAL(txn_arena_block_bytes(a, live[b].p), live[b].bytes);
		for (size_t u = o; u < o + n; u++) {
			CU_ASSERT_EQUAL_FATAL(owner[u], -1);   /* no two blocks share a unit */
			owner[u] = (int32_t)b;
		}
		for (size_t i = 0; i < live[b].bytes; i += 61)   /* a sample, and the last byte */
			CU_ASSERT_EQUAL_FATAL(live[b].p[i], live[b].fill);
		CU_ASSERT_EQUAL_FATAL(live[b].p[live[b].bytes - 1], live[b].fill);
		used += live[b].bytes;
	}
	CU_ASSERT_EQUAL_FATAL(a->used, used);
	CU_ASSERT_EQUAL_FATAL(a->used_peak, peak);
}

/* What the largest aligned blocks of a region of units units add up to: all of it. */
static void ut_take_all(struct txn_arena *a)
{
	size_t taken = 0;
	for (unsigned k = TXN_ARENA_ORDERS_MAX; k-- > 0;)
		if (((size_t)1 << k) <= a->units)
			while (txn_arena_alloc(a, a->unit_bytes << k))
				taken += (size_t)1 << k;
	CU_ASSERT_EQUAL(taken, a->units);
	CU_ASSERT_EQUAL(a->used, a->bytes);
	CU_ASSERT_PTR_NULL(txn_arena_alloc(a, 1));   /* empty: refused, never grown */
}

/* Returns how many allocations the region refused. */
static uint64_t ut_run(size_t unit_bytes, size_t units, uint64_t seed)
{
	struct txn_arena a;
	CU_ASSERT_FATAL(txn_arena_init(&a, units * unit_bytes, unit_bytes) == 0);
	CU_ASSERT_EQUAL_FATAL(a.unit_bytes, unit_bytes);
	CU_ASSERT_EQUAL_FATAL(a.units, units);
	struct ut_block live[UT_LIVE_MAX];
	unsigned nlive = 0;
	size_t peak = 0;
	uint64_t refused = 0, grown = 0, kept = 0;
	for (uint32_t step = 0; step < UT_STEPS; step++) {
		uint32_t r = ut_rand(&seed), op = r % 3;
		if (op == 0 && nlive < UT_LIVE_MAX) {
			/* Any byte size up to 64 units, most of them small. */
			size_t n = 1 + ut_rand(&seed) % (unit_bytes << ((r >> 8) % 7));
			uint8_t *b = txn_arena_alloc(&a, n);
			if (!b) {
				refused++;
			} else {
				size_t bytes = unit_bytes;
				while (bytes < n)
					bytes *= 2;
				CU_ASSERT_FATAL((uintptr_t)b % TXN_ARENA_UNIT_ALIGN == 0);
				live[nlive] = (struct ut_block){ b, bytes, (uint8_t)(r >> 16) };
				memset(b, live[nlive].fill, bytes);
				nlive++;
			}
		} else if (op == 1 && nlive) {
			struct ut_block *b = &live[(r >> 8) % nlive];
			size_t to = b->bytes * (2u << ((r >> 20) % 2)) - (r >> 24) % unit_bytes;   /* 2x or 4x, not exact */
			size_t old = b->bytes;
			if (txn_arena_grow(&a, b->p, to)) {
				grown++;
				size_t bytes = old;
				while (bytes < to)
					bytes *= 2;
				memset(b->p + old, b->fill, bytes - old);
				b->bytes = bytes;
			} else {
				kept++;
			}
			CU_ASSERT_TRUE(txn_arena_grow(&a, b->p, b->bytes / 2 + 1));   /* already holds it */
		} else if (nlive) {
			unsigned i = (r >> 8) % nlive;
			txn_arena_free(&a, live[i].p);
			live[i] = live[--nlive];
		}
		size_t used = 0;
		for (unsigned b = 0; b < nlive; b++)
			used += live[b].bytes;
		if (used > peak)
			peak = used;
		ut_check(&a, live, nlive, peak);
	}
	CU_ASSERT(units == 1 || grown > 0);
	CU_ASSERT(kept > 0);
	while (nlive)
		txn_arena_free(&a, live[--nlive].p);
	CU_ASSERT_EQUAL(a.used, 0);
	ut_take_all(&a);
	txn_arena_fini(&a);
	return refused;
}

static void test_random(void)
{
	/* 64: the shard core's unit; 1040: four partitions of a transaction; 264: a group (rounded). */
	static const size_t unit_bytes[] = { TXN_ARENA_BLOCK_MIN_BYTES, 1040, 264 };
	static const size_t units[] = { 1, 7, 32, 100, 129, 1000 };
	for (unsigned u = 0; u < sizeof(unit_bytes) / sizeof(unit_bytes[0]); u++) {
		uint64_t refused = 0;
		for (unsigned i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			for (uint64_t seed = 1; seed <= 3; seed++)
				refused += ut_run(unit_bytes[u], units[i], seed * 7919 + i * 31 + u);
		CU_ASSERT(refused > 0);   /* the small regions ran out: the NULL path ran */
	}
}

/* Units are rounded to TXN_ARENA_UNIT_ALIGN, and at least a free block's links; the region to whole units. */
static void test_rounding(void)
{
	struct txn_arena a;
	CU_ASSERT_FATAL(txn_arena_init(&a, 1000, 258) == 0);
	CU_ASSERT_EQUAL(a.unit_bytes, 264);
	CU_ASSERT_EQUAL(a.units, 3);
	CU_ASSERT_EQUAL(a.bytes, 3 * 264);
	CU_ASSERT_EQUAL(txn_arena_bytes(1000, 258), 3 * (264 + 1));   /* region and a byte per unit */
	txn_arena_fini(&a);
	CU_ASSERT_FATAL(txn_arena_init(&a, 10, 1) == 0);   /* a region smaller than a unit: one unit */
	CU_ASSERT(a.unit_bytes >= 2 * sizeof(void *) && a.units == 1);
	CU_ASSERT_EQUAL(txn_arena_bytes(10, 1), a.bytes + 1);
	CU_ASSERT_PTR_NOT_NULL(txn_arena_alloc(&a, 1));
	CU_ASSERT_PTR_NULL(txn_arena_alloc(&a, 1));
	txn_arena_fini(&a);
	CU_ASSERT_EQUAL(txn_arena_bytes(128u << 20, TXN_ARENA_BLOCK_MIN_BYTES),
	                (128u << 20) + (128u << 20) / TXN_ARENA_BLOCK_MIN_BYTES);
}

/* Exhaustion and merging: take every unit, give back every other (no pair merges), then the rest. */
static void test_merge(void)
{
	enum { N = 1u << 5, U = TXN_ARENA_BLOCK_MIN_BYTES };
	struct txn_arena a;
	uint8_t *u[N];
	CU_ASSERT_FATAL(txn_arena_init(&a, N * U, U) == 0);
	for (unsigned i = 0; i < N; i++)
		CU_ASSERT_PTR_NOT_NULL_FATAL(u[i] = txn_arena_alloc(&a, U));
	CU_ASSERT_PTR_NULL(txn_arena_alloc(&a, 1));
	for (unsigned i = 0; i < N; i += 2)
		txn_arena_free(&a, u[i]);
	CU_ASSERT_PTR_NULL(txn_arena_alloc(&a, U + 1));          /* no two neighbours free */
	CU_ASSERT_FALSE(txn_arena_grow(&a, u[1], 2 * U));        /* an upper buddy cannot grow */
	CU_ASSERT_EQUAL(txn_arena_block_bytes(&a, u[1]), U);     /* and is unchanged */
	uint8_t *q = txn_arena_alloc(&a, 10);                    /* a freed unit is given again */
	CU_ASSERT_FATAL(q && (size_t)(q - a.base) / U % 2 == 0);
	unsigned e = (unsigned)((size_t)(q - a.base) / U);
	CU_ASSERT_FALSE(txn_arena_grow(&a, q, 2 * U));           /* its buddy is held */
	txn_arena_free(&a, u[e + 1]);
	CU_ASSERT_TRUE(txn_arena_grow(&a, q, 2 * U));            /* now free: in place */
	CU_ASSERT_EQUAL(txn_arena_block_bytes(&a, q), 2 * U);
	CU_ASSERT_EQUAL(a.used, (N / 2) * U + U);                /* the odd ones left, and q's second unit */
	CU_ASSERT_FALSE(txn_arena_grow(&a, q, 4 * U));           /* the next pair is not free */
	txn_arena_free(&a, q);
	for (unsigned i = 1; i < N; i += 2)
		if (i != e + 1)
			txn_arena_free(&a, u[i]);
	CU_ASSERT_EQUAL(a.used, 0);
	CU_ASSERT_EQUAL(a.used_peak, a.bytes);
	CU_ASSERT_PTR_EQUAL(txn_arena_alloc(&a, a.bytes), a.base);   /* merged whole */
	txn_arena_fini(&a);
}

/* Without an arena the heap; with one, a heap block (a table's first) still goes back to the heap. */
static void test_mem_fallback(void)
{
	struct txn_arena a;
	CU_ASSERT_FATAL(txn_arena_init(&a, 4 * TXN_ARENA_BLOCK_MIN_BYTES, TXN_ARENA_BLOCK_MIN_BYTES) == 0);
	void *h = txn_mem_alloc(NULL, 100), *p = txn_mem_alloc(&a, 100);
	CU_ASSERT_FATAL(h && p);
	CU_ASSERT_FALSE(txn_arena_owns(&a, h));
	CU_ASSERT_TRUE(txn_arena_owns(&a, p));
	CU_ASSERT_FALSE(txn_arena_owns(NULL, p));
	CU_ASSERT_EQUAL(a.used, 2 * TXN_ARENA_BLOCK_MIN_BYTES);
	CU_ASSERT_PTR_NULL(txn_mem_alloc(&a, 3 * TXN_ARENA_BLOCK_MIN_BYTES));   /* the arena's refusal, no heap */
	txn_mem_free(&a, h);
	txn_mem_free(&a, p);
	txn_mem_free(&a, NULL);
	CU_ASSERT_EQUAL(a.used, 0);
	txn_arena_fini(&a);
	struct txn_arena none = { 0 };   /* an arena never initialised owns nothing */
	CU_ASSERT_FALSE(txn_arena_owns(&none, &none));
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("arena", NULL, NULL);
	CU_add_test(s, "random alloc/grow/free vs a model", test_random);
	CU_add_test(s, "unit and region rounding, the budget's bytes", test_rounding);
	CU_add_test(s, "exhaustion, grow in place, merging back whole", test_merge);
	CU_add_test(s, "heap fallback", test_mem_fallback);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
