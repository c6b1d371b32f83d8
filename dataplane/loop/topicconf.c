/*
 * topicconf.c - the topic configuration keys of Kafka 3.7 (LogConfig's
 * definitions), each with its type and the range Kafka validates. A value
 * Kafka would refuse is refused here with the same error, so a CreateTopics
 * that Kafka rejects is not created by sluice either. Locality: any thread.
 */
#include <assert.h>
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

/* What sluice does with a key (topicconf.h). */
enum tc_class { TC_NONE, TC_APPLIED, TC_INERT, TC_SAME };

struct tc_key {
	const char *name;
	enum tc_type type;
	int64_t min, max;              /* TC_LONG, TC_INT: the range Kafka checks (inclusive) */
	const char *const *choices;    /* TC_ENUM, TC_ENUM_LIST: NULL-terminated */
	enum tc_class cls;
	const char *same;              /* TC_SAME: the one value taken (what sluice always does); TC_INERT: Kafka's default */
	uint32_t bit;                  /* TC_APPLIED: its DP_TC_* bit */
};

static const char *const tc_cleanup[] = { "compact", "delete", NULL };
static const char *const tc_compression[] = { "uncompressed", "zstd", "lz4", "snappy", "gzip", "producer", NULL };
static const char *const tc_ts_type[] = { "CreateTime", "LogAppendTime", NULL };

#define L(n, lo) { n, TC_LONG, lo, INT64_MAX, NULL, TC_NONE, NULL, 0 }
#define I(n, lo) { n, TC_INT, lo, INT32_MAX, NULL, TC_NONE, NULL, 0 }
static const struct tc_key tc_keys[] = {
	{ "cleanup.policy", TC_ENUM_LIST, 0, 0, tc_cleanup, TC_SAME, "delete", 0 },   /* no compaction */
	{ "compression.type", TC_ENUM, 0, 0, tc_compression, TC_SAME, "producer", 0 },   /* stored as received */
	/* Compaction's own settings: inert under cleanup.policy=delete, in Kafka too (the only policy taken) */
	{ "delete.retention.ms", TC_LONG, 0, INT64_MAX, NULL, TC_INERT, "86400000", 0 },
	L("file.delete.delay.ms", 0),
	L("flush.messages", 1),
	L("flush.ms", 0),
	{ "follower.replication.throttled.replicas", TC_LIST, 0, 0, NULL, TC_INERT, NULL, 0 },   /* one broker */
	I("index.interval.bytes", 0),
	{ "leader.replication.throttled.replicas", TC_LIST, 0, 0, NULL, TC_INERT, NULL, 0 },
	L("local.retention.bytes", -2),
	L("local.retention.ms", -2),
	{ "max.compaction.lag.ms", TC_LONG, 1, INT64_MAX, NULL, TC_INERT, "9223372036854775807", 0 },
	{ "max.message.bytes", TC_INT, 0, INT32_MAX, NULL, TC_APPLIED, NULL, DP_TC_MAX_MESSAGE_BYTES },
	{ "message.downconversion.enable", TC_BOOL, 0, 0, NULL, TC_NONE, NULL, 0 },
	{ "message.format.version", TC_STRING, 0, 0, NULL, TC_INERT, NULL, 0 },   /* Kafka 3 ignores it too */
	L("message.timestamp.after.max.ms", 0),
	L("message.timestamp.before.max.ms", 0),
	L("message.timestamp.difference.max.ms", 0),
	{ "message.timestamp.type", TC_ENUM, 0, 0, tc_ts_type, TC_SAME, "CreateTime", 0 },   /* batches not rewritten */
	{ "min.cleanable.dirty.ratio", TC_DOUBLE, 0, 0, NULL, TC_INERT, "0.5", 0 },
	{ "min.compaction.lag.ms", TC_LONG, 0, INT64_MAX, NULL, TC_INERT, "0", 0 },
	{ "min.insync.replicas", TC_INT, 1, INT32_MAX, NULL, TC_APPLIED, NULL, DP_TC_MIN_INSYNC },
	{ "preallocate", TC_BOOL, 0, 0, NULL, TC_NONE, NULL, 0 },
	{ "remote.storage.enable", TC_BOOL, 0, 0, NULL, TC_SAME, "false", 0 },
	{ "retention.bytes", TC_LONG, INT64_MIN, INT64_MAX, NULL, TC_APPLIED, NULL, DP_TC_RETENTION_BYTES },
	{ "retention.ms", TC_LONG, -1, INT64_MAX, NULL, TC_APPLIED, NULL, DP_TC_RETENTION_MS },
	/* Kafka: at least a legacy record's overhead (14); sluice's own floor is checked after */
	{ "segment.bytes", TC_INT, 14, INT32_MAX, NULL, TC_APPLIED, NULL, DP_TC_SEGMENT_BYTES },
	I("segment.index.bytes", 4),
	L("segment.jitter.ms", 0),
	L("segment.ms", 1),
	{ "unclean.leader.election.enable", TC_BOOL, 0, 0, NULL, TC_INERT, NULL, 0 },   /* one broker */
};
#undef L
#undef I
_Static_assert(sizeof(tc_keys) / sizeof(tc_keys[0]) == DP_TOPIC_CONFIG_KEYS, "DP_TOPIC_CONFIG_KEYS counts tc_keys");

static const char tc_why_unknown[] = "unknown topic config name";
static const char tc_why_null[] = "null value not supported for topic configs";
static const char tc_why_type[] = "the value is not of the config's type";
static const char tc_why_range[] = "the value is outside the config's range";
static const char tc_why_choice[] = "the value is not one of the config's valid values";
static const char tc_why_none[] = "sluice does not implement this topic config";
static const char tc_why_same[] =
	"sluice implements only the value that names what it always does for this config (cleanup.policy=delete, "
	"compression.type=producer, message.timestamp.type=CreateTime, remote.storage.enable=false)";
static const char tc_why_long[] = "the value is longer than sluice stores (DP_TOPIC_CONFIG_VALUE_BYTES_MAX)";
static const char tc_why_ctl[] = "the value holds a control character";
static const char tc_why_seg_min[] = "segment.bytes is below sluice's smallest segment (DP_TOPIC_SEGMENT_BYTES_MIN)";
static const char tc_why_seg_max[] =
	"segment.bytes is above the broker's --segment-bytes, which sizes each partition's memory";
static const char tc_why_file[] = "not a config text the broker wrote";

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

int dp_topic_config_find(const char *name, size_t len)
{
	for (int i = 0; i < DP_TOPIC_CONFIG_KEYS; i++)
		if (tc_eq(name, len, tc_keys[i].name))
			return i;
	return -1;
}

const char *dp_topic_config_name(int i)
{
	return i >= 0 && i < DP_TOPIC_CONFIG_KEYS ? tc_keys[i].name : NULL;
}

const char *dp_topic_config_why(const char *name, size_t name_len, const char *val, size_t len)
{
	int i = dp_topic_config_find(name, name_len);
	if (i < 0)
		return tc_why_unknown;
	const struct tc_key *k = &tc_keys[i];
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

/* A number Kafka took (dp_topic_config_why said so): its value. */
static int64_t tc_int(const char *v, size_t len)
{
	char buf[TC_NUMBER_CHARS_MAX + 1];
	tc_trim(&v, &len);
	assert(len <= TC_NUMBER_CHARS_MAX);
	memcpy(buf, v, len);
	buf[len] = 0;
	return strtoll(buf, NULL, 10);
}

const char *dp_topic_configs_set(struct dp_topic_configs *tc, const char *name, size_t name_len, const char *val,
                                 size_t len, uint64_t segment_bytes_max)
{
	const char *why = dp_topic_config_why(name, name_len, val, len);
	if (why)
		return why;
	int i = dp_topic_config_find(name, name_len);
	const struct tc_key *k = &tc_keys[i];
	if (len > DP_TOPIC_CONFIG_VALUE_BYTES_MAX)
		return tc_why_long;
	for (size_t j = 0; j < len; j++)
		if ((unsigned char)val[j] < 0x20 || val[j] == 0x7f)
			return tc_why_ctl;   /* the stored text is one line per key */
	switch (k->cls) {
	case TC_NONE:
		return tc_why_none;
	case TC_SAME: {
		const char *v = val;
		size_t n = len;
		tc_trim(&v, &n);
		bool same = k->type == TC_BOOL ? n == strlen(k->same) && strncasecmp(v, k->same, n) == 0
		                               : tc_eq(v, n, k->same);
		if (!same)
			return tc_why_same;
		break;
	}
	case TC_APPLIED:
		if (k->bit == DP_TC_SEGMENT_BYTES) {
			int64_t b = tc_int(val, len);
			if (b < DP_TOPIC_SEGMENT_BYTES_MIN)
				return tc_why_seg_min;
			if ((uint64_t)b > segment_bytes_max)
				return tc_why_seg_max;
		}
		break;
	case TC_INERT:
		break;
	}
	tc->val[i] = val;
	tc->len[i] = (uint16_t)len;
	return NULL;
}

bool dp_topic_configs_unset(struct dp_topic_configs *tc, const char *name, size_t name_len)
{
	int i = dp_topic_config_find(name, name_len);
	if (i < 0)
		return false;
	tc->val[i] = NULL;
	tc->len[i] = 0;
	return true;
}

size_t dp_topic_configs_format(const struct dp_topic_configs *tc, char *out)
{
	size_t at = 0;
	for (int i = 0; i < DP_TOPIC_CONFIG_KEYS; i++) {
		if (!tc->val[i])
			continue;
		size_t n = strlen(tc_keys[i].name);
		assert(n < 64 && tc->len[i] <= DP_TOPIC_CONFIG_VALUE_BYTES_MAX);
		memcpy(out + at, tc_keys[i].name, n);
		at += n;
		out[at++] = '=';
		memcpy(out + at, tc->val[i], tc->len[i]);
		at += tc->len[i];
		out[at++] = '\n';
	}
	assert(at <= DP_TOPIC_CONFIG_TEXT_BYTES_MAX);
	return at;
}

const char *dp_topic_configs_parse(struct dp_topic_configs *tc, const char *text, size_t len,
                                   uint64_t segment_bytes_max)
{
	memset(tc, 0, sizeof(*tc));
	if (len > DP_TOPIC_CONFIG_TEXT_BYTES_MAX)
		return tc_why_file;
	while (len) {
		const char *nl = memchr(text, '\n', len);
		const char *eq = nl ? memchr(text, '=', (size_t)(nl - text)) : NULL;
		if (!eq)
			return tc_why_file;
		const char *why = dp_topic_configs_set(tc, text, (size_t)(eq - text), eq + 1, (size_t)(nl - eq - 1),
		                                       segment_bytes_max);
		if (why)
			return why;
		len -= (size_t)(nl + 1 - text);
		text = nl + 1;
	}
	return NULL;
}

void dp_topic_configs_applied(const struct dp_topic_configs *tc, struct dp_topic_conf *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < DP_TOPIC_CONFIG_KEYS; i++) {
		const struct tc_key *k = &tc_keys[i];
		if (k->cls != TC_APPLIED || !tc->val[i])
			continue;
		int64_t v = tc_int(tc->val[i], tc->len[i]);
		out->set |= k->bit;
		switch (k->bit) {
		case DP_TC_MAX_MESSAGE_BYTES: out->max_message_bytes = (int32_t)v; break;
		case DP_TC_MIN_INSYNC: out->min_insync_replicas = (int32_t)v; break;
		case DP_TC_SEGMENT_BYTES: out->segment_bytes = (uint32_t)v; break;
		case DP_TC_RETENTION_MS: out->retention_ms = v; break;
		case DP_TC_RETENTION_BYTES: out->retention_bytes = v < 0 ? -1 : v; break;   /* Kafka: any negative is none */
		}
	}
}

bool dp_topic_config_listed(int i)
{
	return i >= 0 && i < DP_TOPIC_CONFIG_KEYS && tc_keys[i].cls != TC_NONE;
}

bool dp_topic_config_applied(int i)
{
	return i >= 0 && i < DP_TOPIC_CONFIG_KEYS && tc_keys[i].cls == TC_APPLIED;
}

const char *dp_topic_config_default(int i)
{
	if (i < 0 || i >= DP_TOPIC_CONFIG_KEYS)
		return NULL;
	const struct tc_key *k = &tc_keys[i];
	switch (k->cls) {
	case TC_SAME: return k->same;
	case TC_INERT:
		if (k->same)
			return k->same;
		/* Kafka 3's defaults: the format of its IBP, no throttles, no unclean election */
		return k->type == TC_BOOL ? "false" : k->type == TC_LIST ? "" : "3.0-IV1";
	default: return NULL;
	}
}

int8_t dp_topic_config_type(int i)
{
	if (i < 0 || i >= DP_TOPIC_CONFIG_KEYS)
		return 0;
	switch (tc_keys[i].type) {
	case TC_BOOL: return 1;
	case TC_STRING: case TC_ENUM: return 2;
	case TC_INT: return 3;
	case TC_LONG: return 5;
	case TC_DOUBLE: return 6;
	case TC_LIST: case TC_ENUM_LIST: return 7;
	}
	return 0;
}

static const char tc_why_op[] = "not a config operation (SET 0, DELETE 1, APPEND 2, SUBTRACT 3)";
static const char tc_why_list[] = "APPEND and SUBTRACT are only for list configs";
static const char tc_why_seg_alter[] = "sluice takes segment.bytes only when a topic is created";
static const char tc_why_dup[] = "Error due to duplicate config keys";

bool dp_topic_alter_dup(const struct dp_topic_alter *a)
{
	/* AlterConfigs (replace: SETs only, none reads the key's current value) keeps a key's last
	 * value, as Kafka 2.x's Properties did; librdkafka 2.0.2's 0092 sends the described configs
	 * with the one it changes added again, and Kafka answers that NONE. */
	if (a->replace)
		return false;
	for (int32_t j = 1; j < a->n; j++)
		for (int32_t k = 0; k < j; k++)
			if (a->ops[j].name_len == a->ops[k].name_len &&
			    memcmp(a->ops[j].name, a->ops[k].name, a->ops[j].name_len) == 0)
				return true;
	return false;
}

/* Whether item (n bytes) is one of list's comma-separated items (each trimmed). */
static bool tc_list_has(const char *list, size_t len, const char *item, size_t n)
{
	while (len) {
		const char *comma = memchr(list, ',', len);
		size_t k = comma ? (size_t)(comma - list) : len;
		const char *x = list;
		size_t xl = k;
		tc_trim(&x, &xl);
		if (xl == n && memcmp(x, item, n) == 0)
			return true;
		list += comma ? k + 1 : k;
		len -= comma ? k + 1 : k;
	}
	return false;
}

/* out = cur with val's items appended (those not in it yet) or removed; its length, or -1 when too long. */
static long tc_list_op(int8_t op, const char *cur, size_t clen, const char *val, size_t vlen, char *out)
{
	size_t at = 0;
	const char *src[2] = { cur, op == DP_TC_OP_APPEND ? val : NULL };
	size_t slen[2] = { clen, vlen };
	for (int s = 0; s < 2 && src[s]; s++) {
		const char *l = src[s];
		size_t len = slen[s];
		while (len) {
			const char *comma = memchr(l, ',', len);
			size_t k = comma ? (size_t)(comma - l) : len;
			const char *x = l;
			size_t xl = k;
			tc_trim(&x, &xl);
			bool keep = xl > 0 && (s == 0 ? op == DP_TC_OP_APPEND || !tc_list_has(val, vlen, x, xl)
			                              : !tc_list_has(cur, clen, x, xl) && !tc_list_has(out, at, x, xl));
			if (keep) {
				if (at + (at ? 1 : 0) + xl > DP_TOPIC_CONFIG_VALUE_BYTES_MAX)
					return -1;
				if (at)
					out[at++] = ',';
				memcpy(out + at, x, xl);
				at += xl;
			}
			l += comma ? k + 1 : k;
			len -= comma ? k + 1 : k;
		}
	}
	return (long)at;
}

const char *dp_topic_configs_alter(struct dp_topic_configs *tc, const struct dp_topic_alter *a,
                                   char (*scratch)[DP_TOPIC_CONFIG_VALUE_BYTES_MAX], uint64_t segment_bytes_max)
{
	/* segment.bytes in effect: the topic's, else the broker's (segment_bytes_max, its flag). A
	 * client that writes back what DescribeConfigs listed sets it to the value it has: taken. */
	int seg = dp_topic_config_find("segment.bytes", 13);
	int64_t seg_was = tc->val[seg] ? tc_int(tc->val[seg], tc->len[seg]) : (int64_t)segment_bytes_max;
	/* One op per key: a second APPEND of a key would read scratch[key] while writing it. */
	if (dp_topic_alter_dup(a))
		return tc_why_dup;
	if (a->replace)
		memset(tc, 0, sizeof(*tc));
	for (int32_t j = 0; j < a->n; j++) {
		const struct dp_topic_alter_op *o = &a->ops[j];
		int i = dp_topic_config_find(o->name, o->name_len);
		const char *why = NULL;
		if (i < 0)
			return tc_why_unknown;
		switch (o->op) {
		case DP_TC_OP_SET:
			why = dp_topic_configs_set(tc, o->name, o->name_len, o->val, o->len, segment_bytes_max);
			break;
		case DP_TC_OP_DELETE:
			dp_topic_configs_unset(tc, o->name, o->name_len);
			break;
		case DP_TC_OP_APPEND:
		case DP_TC_OP_SUBTRACT: {
			const struct tc_key *k = &tc_keys[i];
			if (k->type != TC_LIST && k->type != TC_ENUM_LIST)
				return tc_why_list;
			if (!o->val)
				return tc_why_null;
			const char *cur = tc->val[i] ? tc->val[i] : dp_topic_config_default(i);
			size_t clen = tc->val[i] ? tc->len[i] : strlen(cur);
			long n = o->len > DP_TOPIC_CONFIG_VALUE_BYTES_MAX ? -1
			         : tc_list_op(o->op, cur, clen, o->val, o->len, scratch[i]);
			if (n < 0)
				return tc_why_long;
			why = dp_topic_configs_set(tc, o->name, o->name_len, scratch[i], (size_t)n, segment_bytes_max);
			break;
		}
		default:
			return tc_why_op;
		}
		if (why)
			return why;
	}
	int64_t seg_now = tc->val[seg] ? tc_int(tc->val[seg], tc->len[seg]) : (int64_t)segment_bytes_max;
	return seg_now == seg_was ? NULL : tc_why_seg_alter;
}
