/* catalog_ut.c - the catalog's pure rules: the file-descriptor budget, internal and valid names. */
#include <CUnit/Basic.h>
#include <string.h>

#include "loop.h"

static void test_fd_budget(void)
{
	/* (nofile - min(conns, nofile / 4) - DP_FDS_RESERVED) / DP_PART_FDS */
	CU_ASSERT_EQUAL(dp_fd_partitions_max(20000, 1), (20000 - DP_CONNS_MAX - DP_FDS_RESERVED) / DP_PART_FDS);
	CU_ASSERT_EQUAL(dp_fd_partitions_max(8192, 1), (8192 - 8192 / 4 - DP_FDS_RESERVED) / DP_PART_FDS);
	CU_ASSERT_EQUAL(dp_fd_partitions_max(20000, 2), (20000 - 20000 / 4 - DP_FDS_RESERVED) / DP_PART_FDS);
	CU_ASSERT_EQUAL(dp_fd_partitions_max(1u << 20, 3),
	                ((1 << 20) - 3 * DP_CONNS_MAX - DP_FDS_RESERVED) / DP_PART_FDS);
	/* Too few descriptors for anything: no partitions, never a negative or wrapped count. */
	CU_ASSERT_EQUAL(dp_fd_partitions_max(DP_FDS_RESERVED, 1), 0);
	CU_ASSERT_EQUAL(dp_fd_partitions_max(0, 1), 0);
	/* The 10,000-partition topic of issue 10 does not fit the 20,000 descriptors of a test machine. */
	CU_ASSERT(dp_fd_partitions_max(20000, 1) < DP_PARTITIONS_MAX);
	/* More descriptors never hold fewer partitions. */
	for (uint64_t n = 0, prev = 0; n < 100000; n += 97) {
		uint64_t m = (uint64_t)dp_fd_partitions_max(n, 2);
		CU_ASSERT(m >= prev);
		prev = m;
	}
}

static void test_internal_names(void)
{
	CU_ASSERT(dp_topic_internal("__consumer_offsets", 18));
	CU_ASSERT(dp_topic_internal("__transaction_state", 19));
	CU_ASSERT(!dp_topic_internal("__consumer_offsets2", 19));
	CU_ASSERT(!dp_topic_internal("__consumer_offset", 17));
	CU_ASSERT(!dp_topic_internal("__consumer_offsets", 10));   /* a prefix is another name */
	CU_ASSERT(!dp_topic_internal("orders", 6));
	/* Both are valid topic names: refusing them is the internal rule's job. */
	CU_ASSERT(dp_topic_name_valid("__consumer_offsets", 18));
	CU_ASSERT(!dp_topic_name_valid("..", 2));
	CU_ASSERT(!dp_topic_name_valid("a/b", 3));
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("catalog", NULL, NULL);
	CU_add_test(s, "file descriptor budget", test_fd_budget);
	CU_add_test(s, "internal topic names", test_internal_names);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
