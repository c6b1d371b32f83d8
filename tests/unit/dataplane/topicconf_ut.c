/* topicconf_ut.c - the topic config keys and values CreateTopics takes (dataplane/loop/topicconf.c). */
#include <CUnit/Basic.h>
#include <stdbool.h>
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

static const char *set(struct dp_topic_configs *tc, const char *k, const char *v)
{
	return dp_topic_configs_set(tc, k, strlen(k), v, v ? strlen(v) : 0, 1u << 28);
}

/* What sluice takes: the configs it applies or stores, and only the value that is its own behaviour. */
static void test_sluice_takes(void)
{
	struct dp_topic_configs tc = { 0 };
	CU_ASSERT_PTR_NULL(set(&tc, "max.message.bytes", "2000"));
	CU_ASSERT_PTR_NULL(set(&tc, "retention.ms", "-1"));
	CU_ASSERT_PTR_NULL(set(&tc, "retention.bytes", "-5"));
	CU_ASSERT_PTR_NULL(set(&tc, "segment.bytes", "4096"));
	CU_ASSERT_PTR_NULL(set(&tc, "min.insync.replicas", "2"));
	CU_ASSERT_PTR_NULL(set(&tc, "cleanup.policy", " delete "));
	CU_ASSERT_PTR_NULL(set(&tc, "compression.type", "producer"));
	CU_ASSERT_PTR_NULL(set(&tc, "message.timestamp.type", "CreateTime"));
	CU_ASSERT_PTR_NULL(set(&tc, "remote.storage.enable", "FALSE"));
	CU_ASSERT_PTR_NULL(set(&tc, "message.format.version", "3.0-IV1"));   /* stored, not applied */
	CU_ASSERT_PTR_NULL(set(&tc, "unclean.leader.election.enable", "true"));
	/* Kafka takes these; sluice does not implement them */
	CU_ASSERT_PTR_NOT_NULL(set(&tc, "cleanup.policy", "compact"));
	CU_ASSERT_PTR_NOT_NULL(set(&tc, "cleanup.policy", "compact,delete"));
	CU_ASSERT_PTR_NOT_NULL(set(&tc, "compression.type", "zstd"));
	CU_ASSERT_PTR_NOT_NULL(set(&tc, "message.timestamp.type", "LogAppendTime"));
	CU_ASSERT_PTR_NOT_NULL(set(&tc, "segment.ms", "1000"));
	CU_ASSERT_PTR_NOT_NULL(set(&tc, "preallocate", "true"));
	CU_ASSERT_PTR_NOT_NULL(set(&tc, "flush.messages", "1"));
	CU_ASSERT_PTR_NOT_NULL(set(&tc, "remote.storage.enable", "true"));
	/* sluice's own bounds */
	CU_ASSERT_PTR_NOT_NULL(set(&tc, "segment.bytes", "4095"));          /* DP_TOPIC_SEGMENT_BYTES_MIN */
	CU_ASSERT_PTR_NOT_NULL(set(&tc, "segment.bytes", "536870912"));     /* above the broker's flag */
	CU_ASSERT_PTR_NOT_NULL(set(&tc, "message.format.version", "a\nb")); /* the text is a line per key */
	static char big[DP_TOPIC_CONFIG_VALUE_BYTES_MAX + 2];
	memset(big, 'v', sizeof(big) - 1);
	CU_ASSERT_PTR_NOT_NULL(set(&tc, "message.format.version", big));
	big[DP_TOPIC_CONFIG_VALUE_BYTES_MAX] = 0;
	CU_ASSERT_PTR_NULL(set(&tc, "message.format.version", big));        /* at the limit: taken */
	CU_ASSERT_PTR_NULL(set(&tc, "message.format.version", "3.0-IV1"));  /* a later value replaces it */
	/* a refused value left the earlier one */
	struct dp_topic_conf c;
	dp_topic_configs_applied(&tc, &c);
	CU_ASSERT_EQUAL(c.set, DP_TC_MAX_MESSAGE_BYTES | DP_TC_MIN_INSYNC | DP_TC_SEGMENT_BYTES | DP_TC_RETENTION_MS |
	                       DP_TC_RETENTION_BYTES);
	CU_ASSERT_EQUAL(c.max_message_bytes, 2000);
	CU_ASSERT_EQUAL(c.min_insync_replicas, 2);
	CU_ASSERT_EQUAL(c.segment_bytes, 4096);
	CU_ASSERT_EQUAL(c.retention_ms, -1);
	CU_ASSERT_EQUAL(c.retention_bytes, -1);   /* any negative: unlimited */
}

/* The file's text round-trips, and a text the broker did not write is refused. */
static void test_text(void)
{
	struct dp_topic_configs tc = { 0 }, back;
	CU_ASSERT_PTR_NULL(set(&tc, "retention.ms", "60000"));
	CU_ASSERT_PTR_NULL(set(&tc, "max.message.bytes", "2000"));
	static char text[DP_TOPIC_CONFIG_TEXT_BYTES_MAX];
	size_t n = dp_topic_configs_format(&tc, text);
	CU_ASSERT_EQUAL(n, strlen("max.message.bytes=2000\nretention.ms=60000\n"));
	CU_ASSERT_NSTRING_EQUAL(text, "max.message.bytes=2000\nretention.ms=60000\n", n);
	CU_ASSERT_PTR_NULL(dp_topic_configs_parse(&back, text, n, 1u << 28));
	struct dp_topic_conf a, b;
	dp_topic_configs_applied(&tc, &a);
	dp_topic_configs_applied(&back, &b);
	CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof(a)), 0);
	CU_ASSERT_PTR_NOT_NULL(dp_topic_configs_parse(&back, "retention.ms=1", 14, 1u << 28));   /* no newline */
	CU_ASSERT_PTR_NOT_NULL(dp_topic_configs_parse(&back, "retention.ms\n", 13, 1u << 28));  /* no '=' */
	CU_ASSERT_PTR_NOT_NULL(dp_topic_configs_parse(&back, "segment.ms=5\n", 13, 1u << 28)); /* not one it takes */
	CU_ASSERT_PTR_NULL(dp_topic_configs_parse(&back, "", 0, 1u << 28));
	/* every key at its longest value still fits the text's bound */
	struct dp_topic_configs all = { 0 };
	static char v[DP_TOPIC_CONFIG_VALUE_BYTES_MAX];
	memset(v, '1', sizeof(v));
	for (int i = 0; i < DP_TOPIC_CONFIG_KEYS; i++) {
		all.val[i] = v;
		all.len[i] = sizeof(v);
	}
	CU_ASSERT(dp_topic_configs_format(&all, text) <= DP_TOPIC_CONFIG_TEXT_BYTES_MAX);
	CU_ASSERT_STRING_EQUAL(dp_topic_config_name(dp_topic_config_find("segment.bytes", 13)), "segment.bytes");
	CU_ASSERT_EQUAL(dp_topic_config_find("segment.byte", 12), -1);
}

static const char *alter1(struct dp_topic_configs *tc, bool replace, int8_t op, const char *k, const char *v)
{
	static char scratch[DP_TOPIC_CONFIG_KEYS][DP_TOPIC_CONFIG_VALUE_BYTES_MAX];
	struct dp_topic_alter_op o = { k, v, (uint32_t)strlen(k), v ? (uint32_t)strlen(v) : 0, op };
	struct dp_topic_alter a = { replace, 1, &o };
	return dp_topic_configs_alter(tc, &a, scratch, 1u << 28);
}

static const char *val(const struct dp_topic_configs *tc, const char *k)
{
	static char out[DP_TOPIC_CONFIG_VALUE_BYTES_MAX + 1];
	int i = dp_topic_config_find(k, strlen(k));
	if (!tc->val[i])
		return NULL;
	memcpy(out, tc->val[i], tc->len[i]);
	out[tc->len[i]] = 0;
	return out;
}

/* AlterConfigs replaces; IncrementalAlterConfigs' four operations as KIP-339 has them. */
static void test_alter(void)
{
	struct dp_topic_configs tc = { 0 };
	const char *thr = "leader.replication.throttled.replicas";
	CU_ASSERT_PTR_NULL(set(&tc, "retention.ms", "1000"));
	CU_ASSERT_PTR_NULL(alter1(&tc, false, DP_TC_OP_SET, "max.message.bytes", "2000"));
	CU_ASSERT_STRING_EQUAL(val(&tc, "retention.ms"), "1000");   /* incremental: the rest stays */
	CU_ASSERT_PTR_NULL(alter1(&tc, false, DP_TC_OP_APPEND, thr, "0:1,1:1"));
	CU_ASSERT_PTR_NULL(alter1(&tc, false, DP_TC_OP_APPEND, thr, "1:1, 2:1"));   /* no item twice */
	CU_ASSERT_STRING_EQUAL(val(&tc, thr), "0:1,1:1,2:1");
	CU_ASSERT_PTR_NULL(alter1(&tc, false, DP_TC_OP_SUBTRACT, thr, "0:1,9:9"));
	CU_ASSERT_STRING_EQUAL(val(&tc, thr), "1:1,2:1");
	CU_ASSERT_PTR_NULL(alter1(&tc, false, DP_TC_OP_APPEND, "cleanup.policy", "delete"));   /* the default's item */
	CU_ASSERT_STRING_EQUAL(val(&tc, "cleanup.policy"), "delete");
	CU_ASSERT_PTR_NOT_NULL(alter1(&tc, false, DP_TC_OP_APPEND, "cleanup.policy", "compact"));
	tc.val[dp_topic_config_find("cleanup.policy", 14)] = NULL;
	CU_ASSERT_PTR_NOT_NULL(alter1(&tc, false, DP_TC_OP_APPEND, "max.message.bytes", "1"));   /* not a list */
	CU_ASSERT_PTR_NOT_NULL(alter1(&tc, false, 7, "max.message.bytes", "1"));
	CU_ASSERT_PTR_NOT_NULL(alter1(&tc, false, DP_TC_OP_DELETE, "no.such.key", NULL));
	CU_ASSERT_PTR_NULL(alter1(&tc, false, DP_TC_OP_DELETE, "retention.ms", NULL));
	CU_ASSERT_PTR_NULL(val(&tc, "retention.ms"));
	/* segment.bytes: only the value in effect (the broker's flag when unset) */
	CU_ASSERT_PTR_NULL(alter1(&tc, false, DP_TC_OP_SET, "segment.bytes", "268435456"));
	CU_ASSERT_PTR_NOT_NULL(alter1(&tc, false, DP_TC_OP_SET, "segment.bytes", "8192"));
	struct dp_topic_configs t2 = { 0 };
	CU_ASSERT_PTR_NULL(set(&t2, "segment.bytes", "8192"));
	CU_ASSERT_PTR_NOT_NULL(alter1(&t2, true, DP_TC_OP_SET, "retention.ms", "5"));   /* replace would drop it */
	CU_ASSERT_PTR_NULL(set(&t2, "segment.bytes", "8192"));
	CU_ASSERT_PTR_NULL(set(&t2, "max.message.bytes", "7"));
	struct dp_topic_alter_op two[2] = { { "segment.bytes", "8192", 13, 4, DP_TC_OP_SET },
	                                    { "retention.ms", "5", 12, 1, DP_TC_OP_SET } };
	struct dp_topic_alter a = { true, 2, two };
	static char scratch[DP_TOPIC_CONFIG_KEYS][DP_TOPIC_CONFIG_VALUE_BYTES_MAX];
	CU_ASSERT_PTR_NULL(dp_topic_configs_alter(&t2, &a, scratch, 1u << 28));
	CU_ASSERT_PTR_NULL(val(&t2, "max.message.bytes"));   /* replaced: not given, gone */
	CU_ASSERT_STRING_EQUAL(val(&t2, "retention.ms"), "5");
	/* an APPEND past the value limit is refused */
	static char big[DP_TOPIC_CONFIG_VALUE_BYTES_MAX];
	memset(big, '1', sizeof(big) - 1);
	struct dp_topic_configs t3 = { 0 };
	CU_ASSERT_PTR_NULL(alter1(&t3, false, DP_TC_OP_APPEND, thr, big));
	CU_ASSERT_PTR_NOT_NULL(alter1(&t3, false, DP_TC_OP_APPEND, thr, "2"));
}

/*
 * A key named twice in one alter: refused whole, as Kafka's ConfigAdminManager refuses it
 * (INVALID_REQUEST, "Error due to duplicate config keys"). Before, two APPENDs of one list key
 * were taken, the second reading scratch[key] while tc_list_op wrote it (an overlapping memcpy).
 */
static void test_alter_dup(void)
{
	const char *thr = "leader.replication.throttled.replicas";
	static char scratch[DP_TOPIC_CONFIG_KEYS][DP_TOPIC_CONFIG_VALUE_BYTES_MAX];
	struct dp_topic_alter_op two[2] = { { thr, "0:1", 37, 3, DP_TC_OP_APPEND }, { thr, "1:1,0:1", 37, 7, DP_TC_OP_APPEND } };
	struct dp_topic_alter a = { false, 2, two };
	CU_ASSERT(dp_topic_alter_dup(&a));
	struct dp_topic_configs tc = { 0 };
	CU_ASSERT_PTR_NOT_NULL(dp_topic_configs_alter(&tc, &a, scratch, 1u << 28));
	struct dp_topic_alter_op sd[2] = { { "retention.ms", "1", 12, 1, DP_TC_OP_SET },
	                                   { "retention.ms", NULL, 12, 0, DP_TC_OP_DELETE } };
	struct dp_topic_alter b = { false, 2, sd };
	memset(&tc, 0, sizeof(tc));
	CU_ASSERT(dp_topic_alter_dup(&b));
	CU_ASSERT_PTR_NOT_NULL(dp_topic_configs_alter(&tc, &b, scratch, 1u << 28));
	/* distinct keys, and a name that is a prefix of another, are not duplicates */
	struct dp_topic_alter_op ok[3] = { { "retention.ms", "1", 12, 1, DP_TC_OP_SET },
	                                   { "retention.bytes", "5", 15, 1, DP_TC_OP_SET },
	                                   { thr, "0:1", 37, 3, DP_TC_OP_APPEND } };
	struct dp_topic_alter c = { false, 3, ok };
	CU_ASSERT(!dp_topic_alter_dup(&c));
	memset(&tc, 0, sizeof(tc));
	CU_ASSERT_PTR_NULL(dp_topic_configs_alter(&tc, &c, scratch, 1u << 28));
	CU_ASSERT_STRING_EQUAL(val(&tc, thr), "0:1");
	struct dp_topic_alter_op pre[2] = { { "retention.ms", "1", 12, 1, DP_TC_OP_SET },
	                                    { "retention.m", "1", 11, 1, DP_TC_OP_SET } };
	struct dp_topic_alter d = { false, 2, pre };
	CU_ASSERT(!dp_topic_alter_dup(&d));
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("topicconf", NULL, NULL);
	CU_add_test(s, "known keys and valid values", test_known_keys);
	CU_add_test(s, "unknown keys and bad values", test_refused);
	CU_add_test(s, "what sluice applies, stores or refuses", test_sluice_takes);
	CU_add_test(s, "the config file's text", test_text);
	CU_add_test(s, "AlterConfigs and IncrementalAlterConfigs", test_alter);
	CU_add_test(s, "a key twice in one alter", test_alter_dup);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
