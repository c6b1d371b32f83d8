/*
 * Unit tests for bench_hist.h: bucket mapping is monotonic and invertible, and
 * quantiles of known distributions come out within the histogram's precision.
 */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_hist.h"

static struct bench_hist h;

/* Every value maps into a bucket whose [low(i), low(i+1)) range contains it. */
static void test_index_roundtrip(void)
{
	uint64_t probes[] = { 0, 1, 127, 128, 129, 255, 256, 1000, 65535, 65536, 1u << 30,
			      (1ull << 40) + 12345, UINT64_MAX / 3, UINT64_MAX };
	for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
		uint64_t v = probes[k];
		unsigned i = bench_hist_index(v);
		CU_ASSERT_FATAL(i < bench_hist_buckets);
		CU_ASSERT(bench_hist_low(i) <= v);
		if (i + 1 < bench_hist_buckets)
			CU_ASSERT(v < bench_hist_low(i + 1));
	}
	CU_ASSERT_EQUAL(bench_hist_index(UINT64_MAX), bench_hist_buckets - 1);
}

/* Bucket lower bounds strictly increase and are exact below 128. */
static void test_low_monotonic(void)
{
	for (unsigned i = 0; i < bench_hist_exact; i++)
		CU_ASSERT_EQUAL(bench_hist_low(i), i);
	for (unsigned i = 1; i < bench_hist_buckets; i++) {
		CU_ASSERT(bench_hist_low(i) > bench_hist_low(i - 1));
		CU_ASSERT_EQUAL(bench_hist_index(bench_hist_low(i)), i);
		CU_ASSERT_EQUAL(bench_hist_index(bench_hist_low(i) - 1), i - 1);
	}
}

/* Uniform 1..100000 us: each quantile within 1.6 % of the true value. */
static void test_quantiles_uniform(void)
{
	memset(&h, 0, sizeof h);
	const uint64_t n = 100000;
	for (uint64_t v = 1; v <= n; v++)
		bench_hist_add(&h, v);
	CU_ASSERT_EQUAL(h.count, n);
	CU_ASSERT_EQUAL(h.max_us, n);
	CU_ASSERT_EQUAL(h.sum_us, n * (n + 1) / 2);
	double qs[] = { 0.5, 0.95, 0.99, 0.999 };
	for (size_t k = 0; k < 4; k++) {
		double want = qs[k] * (double)n, got = bench_hist_quantile_us(&h, qs[k]);
		CU_ASSERT(fabs(got - want) <= want / bench_hist_sub);
	}
	CU_ASSERT_DOUBLE_EQUAL(bench_hist_quantile_us(&h, 1.0), (double)n, 0.0);
}

/* A single outlier shows in p99.9 only when it is more than 0.1 % of samples. */
static void test_quantiles_outlier(void)
{
	memset(&h, 0, sizeof h);
	for (int i = 0; i < 999; i++)
		bench_hist_add(&h, 10);
	bench_hist_add(&h, 5000000);
	CU_ASSERT_DOUBLE_EQUAL(bench_hist_quantile_us(&h, 0.5), 10.0, 0.0);
	CU_ASSERT_DOUBLE_EQUAL(bench_hist_quantile_us(&h, 0.999), 10.0, 0.0);
	CU_ASSERT(bench_hist_quantile_us(&h, 1.0) == 5000000.0);
	CU_ASSERT_EQUAL(h.max_us, 5000000);
	bench_hist_add(&h, 5000000);
	CU_ASSERT(bench_hist_quantile_us(&h, 0.999) > 4900000.0);
}

static void test_empty(void)
{
	memset(&h, 0, sizeof h);
	CU_ASSERT_DOUBLE_EQUAL(bench_hist_quantile_us(&h, 0.99), 0.0, 0.0);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("bench_hist", NULL, NULL);
	CU_add_test(s, "index_roundtrip", test_index_roundtrip);
	CU_add_test(s, "low_monotonic", test_low_monotonic);
	CU_add_test(s, "quantiles_uniform", test_quantiles_uniform);
	CU_add_test(s, "quantiles_outlier", test_quantiles_outlier);
	CU_add_test(s, "empty", test_empty);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
