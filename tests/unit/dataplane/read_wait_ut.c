/* read_wait_ut.c - the read-slot wait queue: FIFO order across wrap-around, full and empty. */
#include <CUnit/Basic.h>
#include <string.h>

#include "read_wait.h"

static void resume_a(struct dp_core *c, struct dp_msg *m, unsigned warms) { (void)c, (void)m, (void)warms; }
static void resume_b(struct dp_core *c, struct dp_msg *m, unsigned warms) { (void)c, (void)m, (void)warms; }

static struct dp_read_wait wait_of(uint32_t i)
{
	return (struct dp_read_wait){ .req = { .idx = i, .u.fetch.offset = 1000 + (int64_t)i }, .resume = i % 2 ? resume_b : resume_a,
	                              .warms = (uint8_t)(i % 3) };
}

static void test_fifo_wrap(void)
{
	struct dp_read_wait v[5];
	struct dp_read_waits q = { .v = v, .cap = 5 };
	struct dp_read_wait w;
	uint32_t next_in = 0, next_out = 0;
	CU_ASSERT_FALSE(dp_read_wait_pop(&q, &w));
	for (int round = 0; round < 50; round++) {
		unsigned want = (unsigned)(round % 4) + 1;   /* never more than 4 outstanding in 5 */
		for (unsigned i = 0; i < want; i++) {
			struct dp_read_wait in = wait_of(next_in++);
			CU_ASSERT_TRUE(dp_read_wait_push(&q, &in));
		}
		CU_ASSERT_EQUAL(q.n, want);
		while (dp_read_wait_pop(&q, &w)) {
			struct dp_read_wait e = wait_of(next_out++);
			CU_ASSERT_EQUAL(w.req.idx, e.req.idx);
			CU_ASSERT_EQUAL(w.req.u.fetch.offset, e.req.u.fetch.offset);
			CU_ASSERT_PTR_EQUAL(w.resume, e.resume);
			CU_ASSERT_EQUAL(w.warms, e.warms);
		}
		CU_ASSERT_EQUAL(q.n, 0);
	}
	CU_ASSERT_EQUAL(next_in, next_out);
	CU_ASSERT(q.head < q.cap);
}

static void test_full(void)
{
	struct dp_read_wait v[3];
	struct dp_read_waits q = { .v = v, .cap = 3 };
	struct dp_read_wait w;
	for (uint32_t i = 0; i < 3; i++) {
		w = wait_of(i);
		CU_ASSERT_TRUE(dp_read_wait_push(&q, &w));
	}
	w = wait_of(99);
	CU_ASSERT_FALSE(dp_read_wait_push(&q, &w));   /* full: refused, nothing overwritten */
	CU_ASSERT_EQUAL(q.n, 3);
	CU_ASSERT_TRUE(dp_read_wait_pop(&q, &w));
	CU_ASSERT_EQUAL(w.req.idx, 0);
	w = wait_of(3);
	CU_ASSERT_TRUE(dp_read_wait_push(&q, &w));     /* room again after one left */
	for (uint32_t i = 1; i <= 3; i++) {
		CU_ASSERT_TRUE(dp_read_wait_pop(&q, &w));
		CU_ASSERT_EQUAL(w.req.idx, i);
	}
	CU_ASSERT_FALSE(dp_read_wait_pop(&q, &w));
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	CU_pSuite s = CU_add_suite("read_wait", NULL, NULL);
	CU_add_test(s, "fifo across wrap-around", test_fifo_wrap);
	CU_add_test(s, "full and empty", test_full);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
