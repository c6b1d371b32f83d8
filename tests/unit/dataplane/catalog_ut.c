/* catalog_ut.c - the catalog's pure rules: the file-descriptor budget, internal and valid names,
 * partition directory names. */
#include <CUnit/Basic.h>
#include <errno.h>
#include <string.h>

#include "loop.h"

static void test_fd_budget(void)
{
	/* (nofile - min(conns, nofile / 4) - DP_FDS_RESERVED) / DP_PART_FDS */
	CU_ASSERT_EQUAL(dp_fd_partitions_max(20000, 1, false), (20000 - DP_CONNS_MAX - DP_FDS_RESERVED) / DP_PART_FDS);
	CU_ASSERT_EQUAL(dp_fd_partitions_max(8192, 1, false), (8192 - 8192 / 4 - DP_FDS_RESERVED) / DP_PART_FDS);
	CU_ASSERT_EQUAL(dp_fd_partitions_max(20000, 2, false), (20000 - 20000 / 4 - DP_FDS_RESERVED) / DP_PART_FDS);
	CU_ASSERT_EQUAL(dp_fd_partitions_max(1u << 20, 3, false),
	                ((1 << 20) - 3 * DP_CONNS_MAX - DP_FDS_RESERVED) / DP_PART_FDS);
	/* Too few descriptors for anything: no partitions, never a negative or wrapped count. */
	CU_ASSERT_EQUAL(dp_fd_partitions_max(DP_FDS_RESERVED, 1, false), 0);
	CU_ASSERT_EQUAL(dp_fd_partitions_max(0, 1, false), 0);
	/* --direct-io on: each partition's active segment holds one descriptor more. */
	CU_ASSERT_EQUAL(dp_fd_partitions_max(20000, 1, true),
	                (20000 - DP_CONNS_MAX - DP_FDS_RESERVED) / (DP_PART_FDS + DP_PART_DIRECT_FDS));
	/* The 10,000-partition topic of issue 10 does not fit the 20,000 descriptors of a test machine. */
	CU_ASSERT(dp_fd_partitions_max(20000, 1, false) < DP_PARTITIONS_MAX);
	/* More descriptors never hold fewer partitions. */
	for (uint64_t n = 0, prev = 0; n < 100000; n += 97) {
		uint64_t m = (uint64_t)dp_fd_partitions_max(n, 2, false);
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

/* One directory name parsed: its kind, and for a partition its topic's length and number. */
static enum dp_dir_name dir_kind(const char *name, size_t *tlen, int32_t *p)
{
	*tlen = 0, *p = -1;
	return dp_dir_name_parse(name, strlen(name), tlen, p);
}

/*
 * The start-up scan's directory names: only the spelling dp_partition_dir
 * writes is a partition. Before, strtol read "orders-05", "orders-+5" and
 * "orders- 5" as orders/5 beside "orders-5", and "__consumer_offsets-0" as a
 * user topic named after a coordinator log.
 */
static void test_dir_names(void)
{
	size_t tlen;
	int32_t p;
	CU_ASSERT_EQUAL(dir_kind("orders-5", &tlen, &p), DP_DIR_PARTITION);
	CU_ASSERT_EQUAL(tlen, 6);
	CU_ASSERT_EQUAL(p, 5);
	CU_ASSERT_EQUAL(dir_kind("my-topic-0", &tlen, &p), DP_DIR_PARTITION);   /* the last '-' */
	CU_ASSERT_EQUAL(tlen, 8);
	CU_ASSERT_EQUAL(p, 0);
	CU_ASSERT_EQUAL(dir_kind("t-9999", &tlen, &p), DP_DIR_PARTITION);
	CU_ASSERT_EQUAL(p, 9999);
	const char *not_canonical[] = { "orders-05", "orders-+5", "orders- 5", "orders-5 ", "orders-00",
		                        "orders-", "orders-0x5", "orders-5a" };
	for (size_t i = 0; i < sizeof(not_canonical) / sizeof(not_canonical[0]); i++)
		CU_ASSERT_EQUAL(dir_kind(not_canonical[i], &tlen, &p), DP_DIR_NOT_CANONICAL);
	CU_ASSERT_EQUAL(dir_kind("orders-5-", &tlen, &p), DP_DIR_NOT_CANONICAL);   /* the last '-' ends it */
	CU_ASSERT_EQUAL(dir_kind("t-10000", &tlen, &p), DP_DIR_PARTITION_RANGE);
	CU_ASSERT_EQUAL(dir_kind("t-99999999999999999999", &tlen, &p), DP_DIR_PARTITION_RANGE);
	CU_ASSERT_EQUAL(dir_kind("__consumer_offsets-0", &tlen, &p), DP_DIR_INTERNAL);
	CU_ASSERT_EQUAL(dir_kind("__transaction_state-0", &tlen, &p), DP_DIR_INTERNAL);
	/* A topic delete's record: taken for what it is, never for a topic or a skipped name. */
	CU_ASSERT_EQUAL(dir_kind("7.topic-deleting", &tlen, &p), DP_DIR_DELETE_MARK);
	CU_ASSERT_EQUAL(dir_kind("7.topic-deleting.tmp", &tlen, &p), DP_DIR_DELETE_TMP);
	CU_ASSERT_EQUAL(dir_kind("x.topic-deleting-0", &tlen, &p), DP_DIR_PARTITION);
	CU_ASSERT_EQUAL(dir_kind("-5", &tlen, &p), DP_DIR_BAD_TOPIC);
	CU_ASSERT_EQUAL(dir_kind("..-5", &tlen, &p), DP_DIR_BAD_TOPIC);
	CU_ASSERT_EQUAL(dir_kind("a b-5", &tlen, &p), DP_DIR_BAD_TOPIC);
	CU_ASSERT_EQUAL(dir_kind("__producer_ids", &tlen, &p), DP_DIR_OTHER);
	CU_ASSERT_EQUAL(dir_kind("__transaction_state", &tlen, &p), DP_DIR_OTHER);
	CU_ASSERT_EQUAL(dir_kind("lost+found", &tlen, &p), DP_DIR_OTHER);
	CU_ASSERT_EQUAL(dir_kind(".", &tlen, &p), DP_DIR_OTHER);
}

/*
 * The name index under churn: topics created and deleted many times over
 * the index's size (as a test suite or an application's temporary topics
 * do) are always found while they exist and never after, with every live
 * topic found at each step. The index deletes by backward shift: before,
 * tombstones took over every slot and each lookup of an absent name walked
 * all 8,192.
 */
static void test_index_churn(void)
{
	static struct dp_core c;
	CU_ASSERT_EQUAL_FATAL(dp_catalog_init(&c), 0);
	enum { LIVE = 300, ROUNDS = 6 * DP_TOPIC_INDEX_SLOTS };
	char name[64];
	int32_t live_name[LIVE];   /* the name number each topic id holds now, -1 none */
	for (int i = 0; i < LIVE; i++)
		live_name[i] = -1;
	uint64_t rng = 88172645463325252ull;
	for (int32_t r = 0; r < ROUNDS; r++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		uint32_t id = (uint32_t)(rng % LIVE);
		if (live_name[id] >= 0) {
			int n = snprintf(name, sizeof(name), "t-%d", live_name[id]);
			CU_ASSERT_EQUAL_FATAL(dp_topic_find(&c, name, (size_t)n), (int32_t)id);
			dp_topic_remove(&c, id);
			CU_ASSERT_EQUAL_FATAL(dp_topic_find(&c, name, (size_t)n), -1);
		}
		int n = snprintf(name, sizeof(name), "t-%d", r);
		CU_ASSERT_EQUAL_FATAL(dp_topic_find(&c, name, (size_t)n), -1);
		CU_ASSERT_EQUAL_FATAL(dp_topic_install(&c, id, (uint32_t)r, name, (size_t)n, NULL, 1), 0);
		live_name[id] = r;
		if (r % 1024 == 0)
			for (uint32_t j = 0; j < LIVE; j++)
				if (live_name[j] >= 0) {
					int m = snprintf(name, sizeof(name), "t-%d", live_name[j]);
					CU_ASSERT_EQUAL_FATAL(dp_topic_find(&c, name, (size_t)m), (int32_t)j);
				}
	}
}

/* CreatePartitions on a core's copy: the table grows, owned partitions stay where they were. */
static void test_grow(void)
{
	static struct dp_core c;
	CU_ASSERT_EQUAL_FATAL(dp_catalog_init(&c), 0);
	CU_ASSERT_EQUAL_FATAL(dp_topic_install(&c, 7, 3, "grow", 4, NULL, 2), 0);
	struct dp_topic *t = dp_topic_get(&c, 7, 3);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	struct dp_part *owned = (struct dp_part *)&c;   /* any non-NULL pointer: the table only holds it */
	t->parts[1] = owned;
	CU_ASSERT_EQUAL(dp_topic_grow(&c, 7, 4, 5), -ENOENT);   /* another generation: not this topic */
	CU_ASSERT_EQUAL(t->nparts, 2);
	CU_ASSERT_EQUAL_FATAL(dp_topic_grow(&c, 7, 3, 5), 0);
	CU_ASSERT_EQUAL(t->nparts, 5);
	CU_ASSERT_PTR_NULL(t->parts[0]);
	CU_ASSERT_PTR_EQUAL(t->parts[1], owned);
	for (int32_t i = 2; i < 5; i++)
		CU_ASSERT_PTR_NULL(t->parts[i]);
	CU_ASSERT_EQUAL(dp_topic_find(&c, "grow", 4), 7);
	t->deleting = true;
	CU_ASSERT_EQUAL(dp_topic_grow(&c, 7, 3, 6), -ENOENT);   /* a topic being deleted does not grow */
	CU_ASSERT_EQUAL(t->nparts, 5);
	t->deleting = false;
	t->parts[1] = NULL;
	dp_topic_remove(&c, 7);
}

/*
 * A topic's configs on a core's copy: install and every alter copy the text into the topic's own
 * slot of the core's preallocated texts, bounded by DP_TOPIC_CONFIG_TEXT_BYTES_MAX, so an alter on
 * a data core never allocates and cannot fail on one core while the others take it (before, it
 * malloc'd there, and a failed malloc left that core on the old configs).
 */
static void test_conf_text(void)
{
	static struct dp_core c;
	CU_ASSERT_EQUAL_FATAL(dp_catalog_init(&c), 0);
	static char big[DP_TOPIC_CONFIG_TEXT_BYTES_MAX];
	memset(big, 'x', sizeof(big));
	struct dp_topic_conf conf = { .set = DP_TC_RETENTION_MS, .retention_ms = 5, .text = "retention.ms=5\n", .text_len = 15 };
	CU_ASSERT_EQUAL_FATAL(dp_topic_install(&c, 9, 1, "conf", 4, &conf, 1), 0);
	struct dp_topic *t = dp_topic_get(&c, 9, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	char *slot = c.topic_texts + 9 * (size_t)DP_TOPIC_CONFIG_TEXT_BYTES_MAX;
	CU_ASSERT_PTR_EQUAL(t->conf.text, slot);   /* the core's own copy, not the control core's */
	CU_ASSERT_EQUAL(t->conf.text_len, 15);
	CU_ASSERT(memcmp(t->conf.text, "retention.ms=5\n", 15) == 0);
	CU_ASSERT_EQUAL(t->conf.retention_ms, 5);
	struct dp_topic_conf most = { .text = big, .text_len = sizeof(big) };
	dp_topic_set_conf(&c, t, &most);   /* the longest text fits its slot */
	CU_ASSERT_PTR_EQUAL(t->conf.text, slot);
	CU_ASSERT_EQUAL(t->conf.text_len, sizeof(big));
	CU_ASSERT(memcmp(t->conf.text, big, sizeof(big)) == 0);
	CU_ASSERT_EQUAL(t->conf.set, 0);
	struct dp_topic_conf none = { 0 };
	dp_topic_set_conf(&c, t, &none);   /* altered back to no configs */
	CU_ASSERT_PTR_NULL(t->conf.text);
	CU_ASSERT_EQUAL(t->conf.text_len, 0);
	dp_topic_remove(&c, 9);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("catalog", NULL, NULL);
	CU_add_test(s, "file descriptor budget", test_fd_budget);
	CU_add_test(s, "internal topic names", test_internal_names);
	CU_add_test(s, "partition directory names", test_dir_names);
	CU_add_test(s, "name index: create/delete churn", test_index_churn);
	CU_add_test(s, "a topic's partition table grows", test_grow);
	CU_add_test(s, "a topic's config text, in its slot", test_conf_text);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
