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
#include <sys/resource.h>
#include <xxhash.h>

#include "htab.h"
#include "loop.h"

int64_t dp_fd_partitions_max(uint64_t nofile, int ndata, bool direct_io)
{
	uint64_t conns = (uint64_t)ndata * DP_CONNS_MAX;
	if (conns > nofile / 4)
		conns = nofile / 4;
	if (nofile <= conns + DP_FDS_RESERVED)
		return 0;
	return (int64_t)((nofile - conns - DP_FDS_RESERVED) / (DP_PART_FDS + (direct_io ? DP_PART_DIRECT_FDS : 0)));
}

void dp_fd_budget_init(struct dp_broker *b)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		DP_WARN("getrlimit(RLIMIT_NOFILE): %s; assuming 1024 descriptors", strerror(errno));
		rl.rlim_cur = rl.rlim_max = 1024;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit up = { rl.rlim_max, rl.rlim_max };
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl.rlim_cur = rl.rlim_max;
		else
			DP_WARN("cannot raise the file descriptor limit from %llu to %llu: %s",
			        (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, strerror(errno));
	}
	uint64_t nofile = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX / 2 : (uint64_t)rl.rlim_cur;
	b->partitions_max = dp_fd_partitions_max(nofile, b->ndata, b->cfg.direct_io);
	b->partitions_by_flag = b->cfg.partitions_max < b->partitions_max;
	if (b->partitions_by_flag)
		b->partitions_max = b->cfg.partitions_max;
	DP_INFO("file descriptor limit %llu: room for %lld partitions%s", (unsigned long long)nofile,
	        (long long)b->partitions_max, b->partitions_by_flag ? " (--partitions-max)" : "");
}

uint32_t dp_topic_hash(const char *name, size_t len)
{
	return XXH32(name, len, 0x5111ce);
}



/*
 * The name index: the generic table (txn/htab.h) of topic id + 1 (0 empty),
 * sized once for DP_TOPICS_MAX at half load, so it never grows and an
 * install always has room; a removal shifts the cluster back (no
 * tombstones to pile up as topics come and go). ctx: the core, whose
 * topics the slots name.
 */
_Static_assert((DP_TOPIC_INDEX_SLOTS & (DP_TOPIC_INDEX_SLOTS - 1)) == 0, "index slots: a power of two");
_Static_assert(DP_TOPICS_MAX < UINT16_MAX, "topic id + 1 fits a slot");

struct topic_key {
	const char *name;
	size_t len;
	uint32_t hash;
};

static bool index_empty(const void *s) { return *(const uint16_t *)s == 0; }
static void index_clear(void *s) { *(uint16_t *)s = 0; }
static uint64_t index_hash(const void *ctx, const void *s)
{
	const struct dp_core *c = ctx;
	return c->topics[*(const uint16_t *)s - 1].hash;
}
static bool index_match(const void *ctx, const void *s, const void *key)
{
	const struct dp_core *c = ctx;
	const struct topic_key *k = key;
	const struct dp_topic *t = &c->topics[*(const uint16_t *)s - 1];
	return t->hash == k->hash && t->name_len == k->len && memcmp(t->name, k->name, k->len) == 0;
}
static const struct txn_htab_ops index_ops = { index_empty, index_clear, index_hash, index_match };

int dp_catalog_init(struct dp_core *c)
{
	c->topics = calloc(DP_TOPICS_MAX, sizeof(*c->topics));
	c->topic_index = calloc(1, sizeof(*c->topic_index));
	/* Each topic's config text at its bound (budget.c counts it): pages are touched as topics take configs. */
	c->topic_texts = calloc(DP_TOPICS_MAX, DP_TOPIC_CONFIG_TEXT_BYTES_MAX);
	if (!c->topics || !c->topic_index || !c->topic_texts ||
	    txn_htab_init(c->topic_index, DP_TOPIC_INDEX_SLOTS, sizeof(uint16_t), &index_ops, c) < 0)
		return -ENOMEM;
	return 0;
}

int32_t dp_topic_find(const struct dp_core *c, const char *name, size_t len)
{
	if (len == 0 || len > DP_TOPIC_NAME_MAX)
		return -1;
	struct topic_key k = { name, len, dp_topic_hash(name, len) };
	const uint16_t *v = txn_htab_find(c->topic_index, k.hash, &k);
	return v ? *v - 1 : -1;
}

struct dp_topic *dp_topic_get(struct dp_core *c, uint32_t id, uint32_t gen)
{
	if (id >= DP_TOPICS_MAX)
		return NULL;
	struct dp_topic *t = &c->topics[id];
	return t->live && t->gen == gen ? t : NULL;
}

int dp_topic_install(struct dp_core *c, uint32_t id, uint32_t gen, const char *name, size_t len,
                     const struct dp_topic_conf *conf, int32_t nparts)
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
	dp_topic_set_conf(c, t, conf ? conf : &(struct dp_topic_conf){ 0 });   /* this core's copy, for DescribeConfigs */
	t->deleting = false;
	t->live = true;
	if (id >= c->topics_end)
		c->topics_end = id + 1;
	struct topic_key k = { t->name, len, t->hash };
	assert(txn_htab_has_room(c->topic_index));   /* at most DP_TOPICS_MAX: half the slots */
	*(uint16_t *)txn_htab_insert(c->topic_index, k.hash, &k) = (uint16_t)(id + 1);
	return 0;
}

/*
 * CreatePartitions: the topic's partition table grows to nparts; the new
 * slots are empty until the owner opens them. The table is swapped whole
 * (nothing else holds it across a loop iteration). -ENOENT: not this topic
 * any more (deleted, its slot reused); -ENOMEM: the old table stays.
 */
int dp_topic_grow(struct dp_core *c, uint32_t id, uint32_t gen, int32_t nparts)
{
	struct dp_topic *t = dp_topic_get(c, id, gen);
	if (!t || t->deleting)
		return -ENOENT;
	assert(nparts > t->nparts && nparts <= DP_PARTITIONS_MAX);
	struct dp_part **parts = calloc((size_t)nparts, sizeof(*parts));
	if (!parts)
		return -ENOMEM;
	memcpy(parts, t->parts, sizeof(*parts) * (size_t)t->nparts);
	free(t->parts);
	t->parts = parts;
	t->nparts = nparts;
	return 0;
}

void dp_topic_set_conf(struct dp_core *c, struct dp_topic *t, const struct dp_topic_conf *conf)
{
	assert(conf->text_len <= DP_TOPIC_CONFIG_TEXT_BYTES_MAX);
	char *text = c->topic_texts + (size_t)(t - c->topics) * DP_TOPIC_CONFIG_TEXT_BYTES_MAX;
	if (conf->text_len)
		memcpy(text, conf->text, conf->text_len);
	t->conf = *conf;
	t->conf.text = conf->text_len ? text : NULL;
}

void dp_topic_remove(struct dp_core *c, uint32_t id)
{
	struct dp_topic *t = &c->topics[id];
	struct topic_key k = { t->name, t->name_len, t->hash };
	uint16_t *slot = txn_htab_find(c->topic_index, k.hash, &k);
	assert(slot && *slot == id + 1);
	txn_htab_delete(c->topic_index, slot);
	free(t->parts);
	t->parts = NULL;
	t->conf.text = NULL;
	t->conf.text_len = 0;
	t->live = false;
	while (c->topics_end > 0 && !c->topics[c->topics_end - 1].live)
		c->topics_end--;
}

void dp_partition_dir(const struct dp_config *cfg, char *out, size_t cap, const char *topic,
                      size_t len, int32_t p)
{
	snprintf(out, cap, "%s/%.*s-%d", cfg->data_dir, (int)len, topic, p);
}
