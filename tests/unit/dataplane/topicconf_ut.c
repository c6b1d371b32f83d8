/* topicconf_ut.c - the topic config keys and values CreateTopics takes (dataplane/loop/topicconf.c). */
#include <CUnit/Basic.h>
#include <string.h>

#include "topicconf.h"

static const char *why(const char *k, const char *v)
{
	return dp_topic_config_why(k, strlen(k), v, v ? strlen(v) : 0);
}

static void test_known_keys(void)
{
	CU_ASSERT_PTR_NULL(why("retention.ms", "86400000"));
	CU_ASSERT_PTR_NULL(why("retention.ms", "-1"));
	CU_ASSERT_PTR_NULL(why("retention.bytes", "-1"));
	CU_ASSERT_PTR_NULL(why("segment.bytes", "1048576"));
	CU_ASSERT_PTR_NULL(why("cleanup.policy", "compact,delete"));
	CU_ASSERT_PTR_NULL(why("cleanup.policy", "delete"));
	CU_ASSERT_PTR_NULL(why("max.message.bytes", " 1000000 "));   /* Kafka trims numbers */
	CU_ASSERT_PTR_NULL(why("min.insync.replicas", "1"));
	CU_ASSERT_PTR_NULL(why("compression.type", "zstd"));
	CU_ASSERT_PTR_NULL(why("preallocate", "TRUE"));
	CU_ASSERT_PTR_NULL(why("min.cleanable.dirty.ratio", "0.5"));
	CU_ASSERT_PTR_NULL(why("message.timestamp.type", "LogAppendTime"));
}

static void test_refused(void)
{
	CU_ASSERT_PTR_NOT_NULL(why("no.such.config", "1"));
	CU_ASSERT_PTR_NOT_NULL(why("retention.m", "1"));          /* a prefix is not the key */
	CU_ASSERT_PTR_NOT_NULL(why("retention.ms", NULL));        /* null value */
	CU_ASSERT_PTR_NOT_NULL(why("retention.ms", "-2"));        /* below Kafka's -1 */
	CU_ASSERT_PTR_NOT_NULL(why("retention.ms", "ten"));
	CU_ASSERT_PTR_NOT_NULL(why("retention.ms", ""));
	CU_ASSERT_PTR_NOT_NULL(why("retention.ms", "99999999999999999999"));   /* past INT64 */
	CU_ASSERT_PTR_NOT_NULL(why("segment.bytes", "13"));       /* below a legacy record's overhead */
	CU_ASSERT_PTR_NOT_NULL(why("segment.bytes", "4294967296"));   /* an int */
	CU_ASSERT_PTR_NOT_NULL(why("min.insync.replicas", "0"));
	CU_ASSERT_PTR_NOT_NULL(why("cleanup.policy", "delete,forever"));
	CU_ASSERT_PTR_NOT_NULL(why("compression.type", "brotli"));
	CU_ASSERT_PTR_NOT_NULL(why("preallocate", "yes"));
	CU_ASSERT_PTR_NOT_NULL(why("min.cleanable.dirty.ratio", "1.5"));
	CU_ASSERT_PTR_NOT_NULL(why("max.message.bytes", "12x"));
	/* a key with a NUL inside is not the key before it */
	CU_ASSERT_PTR_NOT_NULL(dp_topic_config_why("retention.ms\0x", 14, "1", 1));
	/* a long value is refused without reading past it */
	static char big[100000];
	memset(big, '1', sizeof(big));
	CU_ASSERT_PTR_NOT_NULL(dp_topic_config_why("retention.ms", 12, big, sizeof(big)));
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("topicconf", NULL, NULL);
	CU_add_test(s, "known keys and valid values", test_known_keys);
	CU_add_test(s, "unknown keys and bad values", test_refused);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
