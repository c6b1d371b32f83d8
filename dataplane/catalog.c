/*
 * catalog.c - each core's copy of the topic catalog, and the start-up scan
 * of the data directory. Locality: every core owns its copy; the control
 * core changes copies only by messages (TOPIC_ADD / TOPIC_DEL).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core.h"

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

uint32_t dp_topic_hash(const char *name, size_t len)
{
	return XXH32(name, len, 0x5111ce);
}



int dp_catalog_init(struct dp_core *c)
{
	c->topics = calloc(DP_TOPICS_MAX, sizeof(*c->topics));
	c->topic_index = calloc(DP_TOPIC_INDEX_SLOTS, sizeof(*c->topic_index));
	return c->topics && c->topic_index ? 0 : -ENOMEM;
}

int32_t dp_topic_find(const struct dp_core *c, const char *name, size_t len)
{
	if (len == 0 || len > DP_TOPIC_NAME_MAX)
		return -1;
	uint32_t h = dp_topic_hash(name, len);
	for (uint32_t i = 0; i < DP_TOPIC_INDEX_SLOTS; i++) {
		uint16_t v = c->topic_index[(h + i) % DP_TOPIC_INDEX_SLOTS];
		if (v == 0)
			return -1;
		if (v == UINT16_MAX)
			continue;   /* tombstone */
		const struct dp_topic *t = &c->topics[v - 1];
		if (t->live && t->hash == h && t->name_len == len && memcmp(t->name, name, len) == 0)
			return v - 1;
	}
	return -1;
}

struct dp_topic *dp_topic_get(struct dp_core *c, uint32_t id, uint32_t gen)
{
	if (id >= DP_TOPICS_MAX)
		return NULL;
	struct dp_topic *t = &c->topics[id];
	return t->live && t->gen == gen ? t : NULL;
}

int dp_topic_install(struct dp_core *c, uint32_t id, uint32_t gen, const char *name, size_t len,
                     int32_t nparts)
{
	assert(id < DP_TOPICS_MAX && len <= DP_TOPIC_NAME_MAX && nparts > 0);
	struct dp_topic *t = &c->topics[id];
	assert(!t->live);
	t->parts = calloc((size_t)nparts, sizeof(*t->parts));
	if (!t->parts)
		return -ENOMEM;
	memcpy(t->name, name, len);
	t->name[len] = 0;
	t->name_len = (uint16_t)len;
	t->hash = dp_topic_hash(name, len);
	t->gen = gen;
	t->nparts = nparts;
	t->deleting = false;
	t->live = true;
	if (id >= c->topics_end)
		c->topics_end = id + 1;
	for (uint32_t i = 0; i < DP_TOPIC_INDEX_SLOTS; i++) {
		uint16_t *slot = &c->topic_index[(t->hash + i) % DP_TOPIC_INDEX_SLOTS];
		if (*slot == 0 || *slot == UINT16_MAX) {
			*slot = (uint16_t)(id + 1);
			return 0;
		}
	}
	assert(!"topic index full");
	return -ENOSPC;
}

void dp_topic_remove(struct dp_core *c, uint32_t id)
{
	struct dp_topic *t = &c->topics[id];
	for (uint32_t i = 0; i < DP_TOPIC_INDEX_SLOTS; i++) {
		uint16_t *slot = &c->topic_index[(t->hash + i) % DP_TOPIC_INDEX_SLOTS];
		if (*slot == id + 1) {
			*slot = UINT16_MAX;
			break;
		}
		assert(*slot != 0);
	}
	free(t->parts);
	t->parts = NULL;
	t->live = false;
	while (c->topics_end > 0 && !c->topics[c->topics_end - 1].live)
		c->topics_end--;
}

void dp_partition_dir(const struct dp_config *cfg, char *out, size_t cap, const char *topic,
                      size_t len, int32_t p)
{
	snprintf(out, cap, "%s/%.*s-%d", cfg->data_dir, (int)len, topic, p);
}
