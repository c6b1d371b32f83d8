/*
 * topicconf.h - Kafka's topic configuration keys, and whether a value is one
 * Kafka would accept for its key (CreateTopics' Configs). Pure (no I/O, no
 * core state). Locality: any thread.
 */
#ifndef SLUICE_DP_TOPICCONF_H
#define SLUICE_DP_TOPICCONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * NULL when Kafka takes value (len bytes; val NULL: a null value) for topic
 * config key name, else the reason it is refused (a static string): an
 * unknown key, a null value, a value that does not parse as the key's type
 * or lies outside its range. Kafka answers each of these INVALID_CONFIG.
 */
const char *dp_topic_config_why(const char *name, size_t name_len, const char *val, size_t len);

/*
 * What sluice does with each topic config Kafka knows:
 *  - applied: stored with the topic and in effect (retention.ms, retention.bytes,
 *    segment.bytes, max.message.bytes, min.insync.replicas);
 *  - inert: stored and reported, with no effect on one broker or none in Kafka 3
 *    either (message.format.version, which Kafka 3 ignores; the replication
 *    throttles and unclean.leader.election.enable, which need a second broker;
 *    compaction's settings, which Kafka too ignores under cleanup.policy=delete,
 *    the only policy sluice takes);
 *  - same: only the value that names what sluice always does is taken
 *    (cleanup.policy=delete, compression.type=producer, ...);
 *  - none: refused, INVALID_CONFIG, with a reason that says sluice does not
 *    implement it. A client is never told a config was taken that is ignored.
 */
#define DP_TOPIC_CONFIG_VALUE_BYTES_MAX 256u   /* longest stored value; a longer one: INVALID_CONFIG */
#define DP_TOPIC_SEGMENT_BYTES_MIN      4096   /* as --segment-bytes: below, a roll per few batches */
#define DP_TOPIC_CONFIG_KEYS            31     /* the keys of tc_keys (topicconf.c) */
/* The text of a topic's configs ("name=value\n" per key set): the most all keys can take. */
#define DP_TOPIC_CONFIG_TEXT_BYTES_MAX  (DP_TOPIC_CONFIG_KEYS * (64u + DP_TOPIC_CONFIG_VALUE_BYTES_MAX + 2u))

/* The configs that change what the broker does, parsed (each: the broker's own when not set). */
struct dp_topic_conf {
	uint32_t set;                  /* DP_TC_* bits: which of the below the topic sets */
	int32_t max_message_bytes;     /* largest batch a produce may append (Kafka: MESSAGE_TOO_LARGE) */
	int32_t min_insync_replicas;   /* acks=all needs this many in sync: one broker has 1 */
	uint32_t segment_bytes;
	int64_t retention_ms, retention_bytes;
	/* The text every config was given in (dp_topic_configs_format), for DescribeConfigs: the
	 * control core's own; each data core's copy of the catalog holds a copy (catalog.c). */
	char *text;
	uint32_t text_len;
};
#define DP_TC_MAX_MESSAGE_BYTES 1u
#define DP_TC_MIN_INSYNC        2u
#define DP_TC_SEGMENT_BYTES     4u
#define DP_TC_RETENTION_MS      8u
#define DP_TC_RETENTION_BYTES   16u

/* A topic's configs as given: per key (tc_keys' order), its value, or NULL when not set. The
 * values point into the caller's bytes (a request, a file), which must outlive this. */
struct dp_topic_configs {
	const char *val[DP_TOPIC_CONFIG_KEYS];
	uint16_t len[DP_TOPIC_CONFIG_KEYS];
};

/*
 * Set one config (a later value of a key replaces an earlier one). NULL when
 * Kafka takes the value and sluice either applies it or stores it (above),
 * else the reason for INVALID_CONFIG (a static string). segment_bytes_max:
 * the broker's own --segment-bytes, which sizes each partition's memory.
 */
const char *dp_topic_configs_set(struct dp_topic_configs *tc, const char *name, size_t name_len, const char *val,
                                 size_t len, uint64_t segment_bytes_max);
/* Unset one key; false when name is not a key. */
bool dp_topic_configs_unset(struct dp_topic_configs *tc, const char *name, size_t name_len);
/* The text of tc: "name=value\n" per key set, in key order; its length (at most
 * DP_TOPIC_CONFIG_TEXT_BYTES_MAX, the size of out). */
size_t dp_topic_configs_format(const struct dp_topic_configs *tc, char *out);
/* Parse such a text (a topic's config file) into tc; NULL, or why it is not one the broker wrote. */
const char *dp_topic_configs_parse(struct dp_topic_configs *tc, const char *text, size_t len,
                                   uint64_t segment_bytes_max);
/* An alter of one topic's configs, built from AlterConfigs (replace: the keys not given go back
 * to their defaults, every op a SET) or IncrementalAlterConfigs (KIP-339's operations). */
#define DP_TC_OP_SET      0
#define DP_TC_OP_DELETE   1
#define DP_TC_OP_APPEND   2
#define DP_TC_OP_SUBTRACT 3
struct dp_topic_alter_op {
	const char *name, *val;        /* val NULL: a null value */
	uint32_t name_len, len;
	int8_t op;
};
struct dp_topic_alter {
	bool replace;
	int32_t n;
	const struct dp_topic_alter_op *ops;
};
/* Whether a names one key twice (byte for byte, as Kafka compares names): Kafka refuses such a
 * resource with INVALID_REQUEST ("Error due to duplicate config keys", ConfigAdminManager) before
 * it applies any. O(n^2): n is bounded by the caller (DP_TOPIC_CREATE_CONFIGS_MAX). */
bool dp_topic_alter_dup(const struct dp_topic_alter *a);
/*
 * Apply a to tc (the topic's configs now, parsed from its text); NULL, or the
 * reason for INVALID_CONFIG (tc is then not to be used; a names a key twice:
 * refused, see dp_topic_alter_dup). An APPEND's or a
 * SUBTRACT's result is written into scratch[key]. segment.bytes cannot change
 * once the topic exists: it sizes each partition's memory as the log opens.
 */
const char *dp_topic_configs_alter(struct dp_topic_configs *tc, const struct dp_topic_alter *a,
                                   char (*scratch)[DP_TOPIC_CONFIG_VALUE_BYTES_MAX], uint64_t segment_bytes_max);

/* The applied configs of tc (text NULL: the caller's to set). */
void dp_topic_configs_applied(const struct dp_topic_configs *tc, struct dp_topic_conf *out);
/* Key i (0 .. DP_TOPIC_CONFIG_KEYS-1): its name, and whether sluice applies it (for DescribeConfigs). */
const char *dp_topic_config_name(int i);
int dp_topic_config_find(const char *name, size_t len);   /* its index, -1 when not a key */
/* Whether DescribeConfigs lists key i: those sluice applies or stores (the others it refuses). */
bool dp_topic_config_listed(int i);
bool dp_topic_config_applied(int i);
/* Key i's value when not set, where it is not a broker flag's (NULL: an applied key, the flag's). */
const char *dp_topic_config_default(int i);
/* Key i's type as DescribeConfigs v3 reports it (Kafka's ConfigType: 1 boolean, 2 string, 3 int,
 * 5 long, 6 double, 7 list). */
int8_t dp_topic_config_type(int i);

#endif
