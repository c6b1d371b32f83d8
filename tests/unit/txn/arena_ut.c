/*
 * arena_ut.c - the buddy pool (txn/arena.h): a seeded model test (blocks never
 * overlap, hold what was written, and a pool freed whole is whole again),
 * exhaustion returns NULL, regions that are not a power of two.
 * Locality: test thread only.
 */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <string.h>

#include "arena.h"

#define UT_SLOTS 512
#define UT_ROUNDS 200000

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t ut_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct ut_held { uint8_t *p; size_t n; uint8_t fill; };

static void ut_model(size_t region)
{
	static struct ut_held h[UT_SLOTS];
	struct txn_arena a;
	uint64_t refused = 0, given = 0;

	memset(h, 0, sizeof(h));
	CU_ASSERT_FATAL(txn_arena_init(&a, region) == 0);
	for (int r = 0; r < UT_ROUNDS; r++) {
		uint32_t i = (uint32_t)(ut_rand() % UT_SLOTS);
		if (h[i].p) {
			/* What was written is still there: no other block overlapped it. */
			for (size_t k = 0; k < h[i].n; k += 61)
				CU_ASSERT_EQUAL_FATAL(h[i].p[k], h[i].fill);
			CU_ASSERT_EQUAL_FATAL(h[i].p[h[i].n - 1], h[i].fill);
			txn_arena_free(&a, h[i].p);
			h[i].p = NULL;
			continue;
		}
		size_t n = 1 + (size_t)(ut_rand() % (1u << (ut_rand() % 16)));
		uint8_t *p = txn_arena_alloc(&a, n);
		if (!p) {
			refused++;
			continue;
		}
		given++;
		CU_ASSERT_FATAL(p >= a.base && p + n <= a.base + a.bytes);
		CU_ASSERT_EQUAL((uintptr_t)(p - a.base) % TXN_ARENA_BLOCK_MIN_BYTES, 0);
		CU_ASSERT(txn_arena_block_bytes(&a, p) >= n);
		h[i] = (struct ut_held){ .p = p, .n = n, .fill = (uint8_t)(ut_rand() | 1) };
		memset(p, h[i].fill, n);
	}
	CU_ASSERT(given > UT_ROUNDS / 4);
	CU_ASSERT(refused > 0);   /* the region is small enough to run out: the NULL path ran */
	for (uint32_t i = 0; i < UT_SLOTS; i++)
		txn_arena_free(&a, h[i].p);
	CU_ASSERT_EQUAL(a.used, 0);
	/* Freed whole, the blocks merged back: the largest block fits again, and then nothing more. */
	size_t big = TXN_ARENA_BLOCK_MIN_BYTES;
	while (big * 2 <= a.bytes)
		big *= 2;
	void *p = txn_arena_alloc(&a, big);
	CU_ASSERT_PTR_NOT_NULL(p);
	if (region == big)
		CU_ASSERT_PTR_NULL(txn_arena_alloc(&a, 1));
	txn_arena_free(&a, p);
	CU_ASSERT_EQUAL(a.used, 0);
	txn_arena_fini(&a);
}

static void test_model_pow2(void) { ut_model(1u << 20); }
static void test_model_odd(void) { ut_model((1u << 20) + (3u << 14) + 64 * 5 + 17); }

/* Exhaustion: every minimum block given once, then NULL; any one freed is given again. */
static void test_exhaust(void)
{
	struct txn_arena a;
	enum { N = 1000 };
	static void *p[N];

	CU_ASSERT_FATAL(txn_arena_init(&a, (size_t)N * TXN_ARENA_BLOCK_MIN_BYTES) == 0);
	for (int i = 0; i < N; i++)
		CU_ASSERT_PTR_NOT_NULL_FATAL(p[i] = txn_arena_alloc(&a, TXN_ARENA_BLOCK_MIN_BYTES));
	CU_ASSERT_PTR_NULL(txn_arena_alloc(&a, 1));
	txn_arena_free(&a, p[417]);
	CU_ASSERT_PTR_EQUAL(txn_arena_alloc(&a, 10), p[417]);
	CU_ASSERT_PTR_NULL(txn_arena_alloc(&a, 65));   /* no two neighbours free */
	for (int i = 0; i < N; i++)
		txn_arena_free(&a, p[i]);
	CU_ASSERT_EQUAL(a.used, 0);
	CU_ASSERT_PTR_NOT_NULL(txn_arena_alloc(&a, 512 * TXN_ARENA_BLOCK_MIN_BYTES));   /* merged again */
	txn_arena_fini(&a);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("arena", NULL, NULL);
	CU_add_test(s, "seeded model, power-of-two region", test_model_pow2);
	CU_add_test(s, "seeded model, odd region", test_model_odd);
	CU_add_test(s, "exhaustion and merge", test_exhaust);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
