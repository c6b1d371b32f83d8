/* ring_ut.c - the SPSC ring: bursts, wrap-around, full/empty, and a two-thread stress run. */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ring.h"

static struct dp_ring *ring_new(uint32_t size)
{
	struct dp_ring *r = aligned_alloc(DP_CACHE_LINE, dp_ring_bytes(size));
	dp_ring_init(r, size);
	return r;
}

static void test_burst_and_wrap(void)
{
	struct dp_ring *r = ring_new(8);
	struct dp_msg in[8], out[8];
	uint32_t next_in = 0, next_out = 0;
	CU_ASSERT(dp_ring_empty(r));
	for (int round = 0; round < 100; round++) {
		unsigned want = (unsigned)(round % 5) + 1;
		for (unsigned i = 0; i < want; i++)
			in[i] = (struct dp_msg){ .idx = next_in + i };
		unsigned n = dp_ring_enqueue_burst(r, in, want);
		CU_ASSERT_EQUAL(n, want);   /* never more than 5 outstanding in 8 slots */
		next_in += n;
		unsigned got = dp_ring_dequeue_burst(r, out, 8);
		CU_ASSERT_EQUAL(got, n);
		for (unsigned i = 0; i < got; i++)
			CU_ASSERT_EQUAL(out[i].idx, next_out + i);
		next_out += got;
	}
	CU_ASSERT(dp_ring_empty(r));
	free(r);
}

static void test_full_and_empty(void)
{
	struct dp_ring *r = ring_new(4);
	struct dp_msg m[6] = { { .idx = 1 }, { .idx = 2 }, { .idx = 3 }, { .idx = 4 }, { .idx = 5 }, { .idx = 6 } };
	CU_ASSERT_EQUAL(dp_ring_enqueue_burst(r, m, 6), 4);     /* only 4 slots */
	CU_ASSERT_EQUAL(dp_ring_enqueue_burst(r, m + 4, 2), 0);
	struct dp_msg out[6];
	CU_ASSERT_EQUAL(dp_ring_dequeue_burst(r, out, 1), 1);
	CU_ASSERT_EQUAL(out[0].idx, 1);
	CU_ASSERT_EQUAL(dp_ring_enqueue_burst(r, m + 4, 2), 1);  /* one slot came free */
	CU_ASSERT_EQUAL(dp_ring_dequeue_burst(r, out, 6), 4);
	CU_ASSERT_EQUAL(out[0].idx, 2);
	CU_ASSERT_EQUAL(out[3].idx, 5);
	CU_ASSERT_EQUAL(dp_ring_dequeue_burst(r, out, 6), 0);
	CU_ASSERT(dp_ring_empty(r));
	free(r);
}

#define STRESS_MSGS 5000000u

static void *producer(void *arg)
{
	struct dp_ring *r = arg;
	struct dp_msg burst[16];
	uint32_t next = 0;
	while (next < STRESS_MSGS) {
		unsigned want = 1 + next % 16;
		if (want > STRESS_MSGS - next)
			want = STRESS_MSGS - next;
		for (unsigned i = 0; i < want; i++)
			burst[i] = (struct dp_msg){ .idx = next + i, .u.watch.offset = (int64_t)(next + i) * 3 };
		next += dp_ring_enqueue_burst(r, burst, want);
	}
	return NULL;
}

static void test_two_threads(void)
{
	struct dp_ring *r = ring_new(1024);
	pthread_t th;
	pthread_create(&th, NULL, producer, r);
	struct dp_msg out[64];
	uint32_t next = 0, bad = 0;
	while (next < STRESS_MSGS) {
		unsigned n = dp_ring_dequeue_burst(r, out, 64);
		for (unsigned i = 0; i < n; i++, next++)
			if (out[i].idx != next || out[i].u.watch.offset != (int64_t)next * 3)
				bad++;
	}
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(dp_ring_empty(r));
	free(r);
}

/*
 * A dequeue that takes nothing writes nothing, nor does an enqueue of
 * nothing or an enqueue into a full ring whose consumer has not moved: with
 * the ring's pages read-only such calls must return 0 (a store would fault:
 * the process dies with SIGSEGV and the test fails).
 */
static void test_idle_calls_write_nothing(void)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t bytes = (dp_ring_bytes(8) + (size_t)page - 1) / (size_t)page * (size_t)page;
	struct dp_ring *r = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CU_ASSERT_FATAL(r != MAP_FAILED);
	dp_ring_init(r, 8);
	struct dp_msg m[8];
	memset(m, 0, sizeof(m));
	/* one round trip, so the cached indices are not the initial zeros */
	CU_ASSERT_EQUAL(dp_ring_enqueue_burst(r, m, 3), 3);
	CU_ASSERT_EQUAL(dp_ring_dequeue_burst(r, m, 8), 3);
	CU_ASSERT_EQUAL(mprotect(r, bytes, PROT_READ), 0);
	CU_ASSERT_EQUAL(dp_ring_dequeue_burst(r, m, 8), 0);   /* empty */
	CU_ASSERT_EQUAL(dp_ring_dequeue_burst(r, m, 1), 0);
	CU_ASSERT_EQUAL(dp_ring_enqueue_burst(r, m, 0), 0);
	CU_ASSERT(dp_ring_empty(r));
	/* full, and the consumer has not moved: the producer's refresh finds the same head */
	CU_ASSERT_EQUAL(mprotect(r, bytes, PROT_READ | PROT_WRITE), 0);
	CU_ASSERT_EQUAL(dp_ring_enqueue_burst(r, m, 8), 8);
	CU_ASSERT_EQUAL(mprotect(r, bytes, PROT_READ), 0);
	CU_ASSERT_EQUAL(dp_ring_enqueue_burst(r, m, 1), 0);
	CU_ASSERT_EQUAL(mprotect(r, bytes, PROT_READ | PROT_WRITE), 0);
	CU_ASSERT_EQUAL(dp_ring_dequeue_burst(r, m, 8), 8);
	munmap(r, bytes);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("ring", NULL, NULL);
	CU_add_test(s, "burst and wrap-around", test_burst_and_wrap);
	CU_add_test(s, "full and empty", test_full_and_empty);
	CU_add_test(s, "two threads, 5M messages in order", test_two_threads);
	CU_add_test(s, "calls that move nothing write nothing", test_idle_calls_write_nothing);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
