/*
 * topicconf.c - the topic configuration keys of Kafka 3.7 (LogConfig's
 * definitions), each with its type and the range Kafka validates. A value
 * Kafka would refuse is refused here with the same error, so a CreateTopics
 * that Kafka rejects is not created by sluice either. Locality: any thread.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "topicconf.h"

/* Longest value parsed as a number: INT64_MIN's 20 characters, with room for spaces. */
#define TC_NUMBER_CHARS_MAX 32

enum tc_type { TC_LONG, TC_INT, TC_BOOL, TC_DOUBLE, TC_STRING, TC_LIST, TC_ENUM, TC_ENUM_LIST };

struct tc_key {
	const char *name;
	enum tc_type type;
	int64_t min, max;              /* TC_LONG, TC_INT: the range Kafka checks (inclusive) */
	const char *const *choices;    /* TC_ENUM, TC_ENUM_LIST: NULL-terminated */
};

static const char *const tc_cleanup[] = { "compact", "delete", NULL };
static const char *const tc_compression[] = { "uncompressed", "zstd", "lz4", "snappy", "gzip", "producer", NULL };
static const char *const tc_ts_type[] = { "CreateTime", "LogAppendTime", NULL };

#define L(n, lo) { n, TC_LONG, lo, INT64_MAX, NULL }
#define I(n, lo) { n, TC_INT, lo, INT32_MAX, NULL }
static const struct tc_key tc_keys[] = {
	{ "cleanup.policy", TC_ENUM_LIST, 0, 0, tc_cleanup },
	{ "compression.type", TC_ENUM, 0, 0, tc_compression },
	L("delete.retention.ms", 0),
	L("file.delete.delay.ms", 0),
	L("flush.messages", 1),
	L("flush.ms", 0),
	{ "follower.replication.throttled.replicas", TC_LIST, 0, 0, NULL },
	I("index.interval.bytes", 0),
	{ "leader.replication.throttled.replicas", TC_LIST, 0, 0, NULL },
	L("local.retention.bytes", -2),
	L("local.retention.ms", -2),
	L("max.compaction.lag.ms", 1),
	I("max.message.bytes", 0),
	{ "message.downconversion.enable", TC_BOOL, 0, 0, NULL },
	{ "message.format.version", TC_STRING, 0, 0, NULL },
	L("message.timestamp.after.max.ms", 0),
	L("message.timestamp.before.max.ms", 0),
	L("message.timestamp.difference.max.ms", 0),
	{ "message.timestamp.type", TC_ENUM, 0, 0, tc_ts_type },
	{ "min.cleanable.dirty.ratio", TC_DOUBLE, 0, 0, NULL },
	L("min.compaction.lag.ms", 0),
	I("min.insync.replicas", 1),
	{ "preallocate", TC_BOOL, 0, 0, NULL },
	{ "remote.storage.enable", TC_BOOL, 0, 0, NULL },
	{ "retention.bytes", TC_LONG, INT64_MIN, INT64_MAX, NULL },
	L("retention.ms", -1),
	I("segment.bytes", 14),   /* Kafka: at least a legacy record's overhead */
	I("segment.index.bytes", 4),
	L("segment.jitter.ms", 0),
	L("segment.ms", 1),
	{ "unclean.leader.election.enable", TC_BOOL, 0, 0, NULL },
};
#undef L
#undef I

static const char tc_why_unknown[] = "unknown topic config name";
static const char tc_why_null[] = "null value not supported for topic configs";
static const char tc_why_type[] = "the value is not of the config's type";
static const char tc_why_range[] = "the value is outside the config's range";
static const char tc_why_choice[] = "the value is not one of the config's valid values";

static bool tc_eq(const char *a, size_t alen, const char *b)
{
	return strlen(b) == alen && memcmp(a, b, alen) == 0;
}

/* Kafka trims the value before parsing a number or a boolean. */
static void tc_trim(const char **v, size_t *len)
{
	while (*len && (**v == ' ' || **v == '\t')) {
		(*v)++;
		(*len)--;
	}
	while (*len && ((*v)[*len - 1] == ' ' || (*v)[*len - 1] == '\t'))
		(*len)--;
}

static const char *tc_number(const struct tc_key *k, const char *v, size_t len)
{
	char buf[TC_NUMBER_CHARS_MAX + 1];
	tc_trim(&v, &len);
	if (len == 0 || len > TC_NUMBER_CHARS_MAX)
		return tc_why_type;
	memcpy(buf, v, len);
	buf[len] = 0;
	char *end;
	errno = 0;
	if (k->type == TC_DOUBLE) {
		double d = strtod(buf, &end);
		if (*end || errno)
			return tc_why_type;
		return d >= 0.0 && d <= 1.0 ? NULL : tc_why_range;   /* min.cleanable.dirty.ratio */
	}
	if (buf[0] != '-' && buf[0] != '+' && (buf[0] < '0' || buf[0] > '9'))
		return tc_why_type;
	long long n = strtoll(buf, &end, 10);
	if (*end || errno == ERANGE)
		return tc_why_type;
	if (k->type == TC_INT && (n < INT32_MIN || n > INT32_MAX))
		return tc_why_type;
	return n >= k->min && n <= k->max ? NULL : tc_why_range;
}

static bool tc_choice(const char *const *choices, const char *v, size_t len)
{
	for (; *choices; choices++)
		if (tc_eq(v, len, *choices))
			return true;
	return false;
}

/* A comma-separated list, each item trimmed; Kafka's list types take an empty value. */
static const char *tc_enum_list(const char *const *choices, const char *v, size_t len)
{
	tc_trim(&v, &len);
	if (len == 0)
		return NULL;
	while (len) {
		const char *comma = memchr(v, ',', len);
		size_t n = comma ? (size_t)(comma - v) : len;
		const char *item = v;
		size_t ilen = n;
		tc_trim(&item, &ilen);
		if (!tc_choice(choices, item, ilen))
			return tc_why_choice;
		v += comma ? n + 1 : n;
		len -= comma ? n + 1 : n;
	}
	return NULL;
}

const char *dp_topic_config_why(const char *name, size_t name_len, const char *val, size_t len)
{
	const struct tc_key *k = NULL;
	for (size_t i = 0; i < sizeof(tc_keys) / sizeof(tc_keys[0]) && !k; i++)
		if (tc_eq(name, name_len, tc_keys[i].name))
			k = &tc_keys[i];
	if (!k)
		return tc_why_unknown;
	if (!val)
		return tc_why_null;
	switch (k->type) {
	case TC_LONG:
	case TC_INT:
	case TC_DOUBLE:
		return tc_number(k, val, len);
	case TC_BOOL:
		tc_trim(&val, &len);
		return len == 4 ? (strncasecmp(val, "true", 4) ? tc_why_type : NULL)
		       : len == 5 ? (strncasecmp(val, "false", 5) ? tc_why_type : NULL)
		                  : tc_why_type;
	case TC_ENUM:
		return tc_choice(k->choices, val, len) ? NULL : tc_why_choice;
	case TC_ENUM_LIST:
		return tc_enum_list(k->choices, val, len);
	case TC_STRING:
	case TC_LIST:
		return NULL;
	}
	return tc_why_type;
}
