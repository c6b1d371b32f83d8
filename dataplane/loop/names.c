/*
 * names.c - topic names and partition directory names (names.h). Pure.
 * Locality: any thread.
 */
#include <string.h>

#include "names.h"

bool dp_topic_name_valid(const char *name, size_t len)
{
	if (len == 0 || len > DP_TOPIC_NAME_MAX)
		return false;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = name[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

bool dp_topic_internal(const char *name, size_t len)
{
	static const char *const internal[] = { "__consumer_offsets", "__transaction_state" };
	for (size_t i = 0; i < sizeof(internal) / sizeof(internal[0]); i++)
		if (len == strlen(internal[i]) && memcmp(name, internal[i], len) == 0)
			return true;
	return false;
}

static bool ends_with(const char *name, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);
	return len > n && memcmp(name + len - n, suffix, n) == 0;
}

enum dp_dir_name dp_dir_name_parse(const char *name, size_t len, size_t *topic_len, int32_t *partition)
{
	if (ends_with(name, len, DP_DELETE_MARK_SUFFIX))
		return DP_DIR_DELETE_MARK;
	if (ends_with(name, len, DP_DELETE_TMP_SUFFIX))
		return DP_DIR_DELETE_TMP;
	const char *dash = NULL;
	for (size_t i = 0; i < len; i++)
		if (name[i] == '-')
			dash = name + i;
	if (!dash)
		return DP_DIR_OTHER;
	size_t tlen = (size_t)(dash - name);
	if (!dp_topic_name_valid(name, tlen))
		return DP_DIR_BAD_TOPIC;
	if (dp_topic_internal(name, tlen))
		return DP_DIR_INTERNAL;
	const char *d = dash + 1, *end = name + len;
	if (d == end || (*d == '0' && end - d > 1))
		return DP_DIR_NOT_CANONICAL;
	int64_t p = 0;
	for (; d < end; d++) {
		if (*d < '0' || *d > '9')
			return DP_DIR_NOT_CANONICAL;
		p = p * 10 + (*d - '0');
		if (p >= DP_PARTITIONS_MAX)   /* before it could overflow: the limit is far below INT32_MAX */
			return DP_DIR_PARTITION_RANGE;
	}
	*topic_len = tlen;
	*partition = (int32_t)p;
	return DP_DIR_PARTITION;
}

const char *dp_dir_name_why(enum dp_dir_name k)
{
	switch (k) {
	case DP_DIR_PARTITION: return "a partition";
	case DP_DIR_OTHER: return "not a partition";
	case DP_DIR_BAD_TOPIC: return "not a valid topic name before its last '-'";
	case DP_DIR_INTERNAL: return "a coordinator log's name, never a topic";
	case DP_DIR_NOT_CANONICAL: return "its partition is not written as the broker writes it (decimal, no sign "
		                          "or leading zero): it could name the same partition as another directory";
	case DP_DIR_PARTITION_RANGE: return "its partition is past the broker's limit";
	case DP_DIR_DELETE_MARK: return "a topic delete's record";
	case DP_DIR_DELETE_TMP: return "a topic delete's record, not yet complete";
	}
	return "?";
}
