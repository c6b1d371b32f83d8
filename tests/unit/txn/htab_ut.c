/*
 * htab_ut.c - the generic open-addressing table (txn/htab.c) against a
 * reference model: seeded random inserts, deletes, lookups, resizes and
 * iterations, under a good hash and under one that piles every key into a
 * few homes (long clusters that wrap around the end, where backward-shift
 * deletion goes wrong if it goes wrong at all). After every step the table
 * must hold exactly the model's keys, each reachable from its home.
 *
 * Locality: test thread only.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "htab.h"

#define UT_KEYS 512              /* the key universe: 1..UT_KEYS */
#define UT_STEPS 6000            /* random operations per run */
#define UT_CHECK_EVERY 4         /* steps between whole-table checks (each step checks its key) */
#define UT_SEEDS 8               /* runs per hash */

struct ut_slot {
	uint32_t key;                /* 0: empty */
	uint32_t val;
};

static int ut_bad_hash;          /* 1: every key homes in one of 4 slots near the end */

static uint64_t ut_hash_key(uint32_t key)
{
	if (ut_bad_hash)
		return 0xfffffffcu + key % 4;   /* & mask: the last slots; clusters wrap to the front */
	uint64_t x = key * 0x9e3779b97f4a7c15ull;
	return x ^ (x >> 29);
}

static bool ut_empty(const void *s) { return ((const struct ut_slot *)s)->key == 0; }
static void ut_clear(void *s) { ((struct ut_slot *)s)->key = 0; }
static uint64_t ut_hash(const void *ctx, const void *s)
{
	(void)ctx;
	return ut_hash_key(((const struct ut_slot *)s)->key);
}
static bool ut_match(const void *ctx, const void *s, const void *key)
{
	(void)ctx;
	return ((const struct ut_slot *)s)->key == *(const uint32_t *)key;
}
static const struct txn_htab_ops ut_ops = { ut_empty, ut_clear, ut_hash, ut_match };

static uint64_t ut_rng;
static uint32_t ut_rand(uint32_t n)
{
	ut_rng ^= ut_rng << 13;
	ut_rng ^= ut_rng >> 7;
	ut_rng ^= ut_rng << 17;
	return (uint32_t)(ut_rng % n);
}

/* The table holds exactly the model: same count, every model key found with its value, nothing else. */
static bool ut_same(const struct txn_htab *t, const uint32_t *model, uint32_t n)
{
	if (txn_htab_count(t) != n)
		return false;
	for (uint32_t k = 1; k <= UT_KEYS; k++) {
		const struct ut_slot *s = txn_htab_find(t, ut_hash_key(k), &k);
		if ((s != NULL) != (model[k] != 0) || (s && s->val != model[k]))
			return false;
	}
	uint32_t cur = 0, seen = 0;
	for (const struct ut_slot *s; (s = txn_htab_next(t, &cur));)
		if (s->key < 1 || s->key > UT_KEYS || model[s->key] != s->val || ++seen > n)
			return false;
	return seen == n;
}

static void ut_run(uint64_t seed)
{
	static uint32_t model[UT_KEYS + 1];
	memset(model, 0, sizeof(model));
	uint32_t n = 0;
	ut_rng = seed * 0x2545f4914f6cdd1dull + 1;
	struct txn_htab t;
	CU_ASSERT_EQUAL_FATAL(txn_htab_init(&t, 4, sizeof(struct ut_slot), &ut_ops, NULL), 0);
	for (int step = 0; step < UT_STEPS; step++) {
		uint32_t k = 1 + ut_rand(UT_KEYS), op = ut_rand(100);
		struct ut_slot *s = txn_htab_find(&t, ut_hash_key(k), &k);
		if ((s != NULL) != (model[k] != 0)) {
			fprintf(stderr, "\nseed %llu step %d: key %u found %d, model %u\n", (unsigned long long)seed,
			        step, k, s != NULL, model[k]);
			CU_FAIL_FATAL("find disagrees with the model");
		}
		if (op < 45) {                       /* insert or overwrite */
			uint32_t v = 1 + ut_rand(1u << 30);
			if (s) {
				s->val = v;
			} else {
				if (!txn_htab_has_room(&t)) {
					CU_ASSERT_FATAL((uint64_t)(n + 1) * 2 > t.cap);
					if (t.cap >= 4 * UT_KEYS)
						continue;
					CU_ASSERT_EQUAL_FATAL(txn_htab_resize(&t, t.cap * 2), 0);
				}
				s = txn_htab_insert(&t, ut_hash_key(k), &k);
				*s = (struct ut_slot){ .key = k, .val = v };
				n++;
			}
			model[k] = v;
		} else if (op < 90) {                /* delete */
			if (s) {
				txn_htab_delete(&t, s);
				model[k] = 0;
				n--;
			}
		} else if (op < 93) {                /* shrink to the least that holds them, or grow */
			uint32_t cap = TXN_HTAB_SLOTS_MIN;
			while ((uint64_t)cap < 2ull * n)
				cap *= 2;
			if (ut_rand(2))
				cap *= 2;
			CU_ASSERT_EQUAL_FATAL(txn_htab_resize(&t, cap), 0);
		} else if (op < 94) {                /* delete everything met in one pass, as expiry does */
			for (uint32_t i = 0; i < t.cap;) {
				struct ut_slot *x = txn_htab_at(&t, i);
				if (x->key && x->val % 3 == 0) {
					model[x->key] = 0;
					n--;
					txn_htab_delete(&t, x);   /* i again: a later entry may have shifted into it */
				} else {
					i++;
				}
			}
		}
		if ((op >= 90 || step % UT_CHECK_EVERY == 0) && !ut_same(&t, model, n)) {
			fprintf(stderr, "\nseed %llu (bad hash %d) step %d op %u key %u: table and model differ\n",
			        (unsigned long long)seed, ut_bad_hash, step, op, k);
			CU_FAIL_FATAL("table and model differ");
		}
		CU_ASSERT_FATAL((uint64_t)t.used * 2 <= t.cap);
	}
	txn_htab_clear(&t);
	CU_ASSERT_EQUAL(txn_htab_count(&t), 0);
	uint32_t cur = 0;
	CU_ASSERT_PTR_NULL(txn_htab_next(&t, &cur));
	txn_htab_free(&t);
}

static void test_random_good_hash(void)
{
	ut_bad_hash = 0;
	for (uint64_t seed = 1; seed <= UT_SEEDS; seed++)
		ut_run(seed);
}

static void test_random_clustered(void)
{
	ut_bad_hash = 1;
	for (uint64_t seed = 1; seed <= UT_SEEDS; seed++)
		ut_run(seed);
	ut_bad_hash = 0;
}

/* A table sized once and never resized refuses the entry past half full, and keeps working. */
static void test_fixed(void)
{
	struct txn_htab t;
	CU_ASSERT_EQUAL_FATAL(txn_htab_init(&t, 8, sizeof(struct ut_slot), &ut_ops, NULL), 0);
	for (uint32_t k = 1; k <= 4; k++) {
		CU_ASSERT_FATAL(txn_htab_has_room(&t));
		*(struct ut_slot *)txn_htab_insert(&t, ut_hash_key(k), &k) = (struct ut_slot){ k, k };
	}
	CU_ASSERT_FALSE(txn_htab_has_room(&t));
	for (int round = 0; round < 1000; round++) {   /* churn: no tombstones pile up */
		uint32_t old = 1 + (uint32_t)round % 4;
		struct ut_slot *s = txn_htab_find(&t, ut_hash_key(old), &old);
		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		txn_htab_delete(&t, s);
		CU_ASSERT_PTR_NULL(txn_htab_find(&t, ut_hash_key(old), &old));
		*(struct ut_slot *)txn_htab_insert(&t, ut_hash_key(old), &old) = (struct ut_slot){ old, old };
	}
	CU_ASSERT_EQUAL(txn_htab_count(&t), 4);
	txn_htab_free(&t);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("htab", NULL, NULL);
	CU_add_test(s, "random ops vs a model, good hash", test_random_good_hash);
	CU_add_test(s, "random ops vs a model, clusters that wrap", test_random_clustered);
	CU_add_test(s, "fixed capacity: refuses past half, churns", test_fixed);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
