/*
 * shard_role.c - the owner side's part in a data core's loop (loop.h's
 * struct dp_role): open the owned partitions at start, settle topic deletes
 * after each turn's messages, the shard timer, and at stop wait for cold
 * reads, then close the partitions. Locality: owner core.
 */
#include <stdlib.h>

#include "shard_internal.h"

static int shard_start(struct dp_core *c)
{
	dp_core_on_cqe(c, DP_READ_TAG, dp_shard_read_complete);
	for (uint32_t id = 0; id < c->topics_end; id++)
		if (c->topics[id].live)
			dp_shard_open_owned(c, &c->topics[id], id);
	c->next_snapshot_ms = dp_mono_ms() + c->b->cfg.producer_snapshot_ms;
	return 0;
}

/* Topic deletes waiting for their partitions' I/O: after completions, and every tick. */
static int shard_settle(struct dp_core *c, bool due)
{
	return c->ndel_wait && due ? dp_shard_deletes(c) : 0;
}

static bool shard_busy(struct dp_core *c)
{
	return c->reads_inflight != 0;
}

static void shard_stop(struct dp_core *c)
{
	if (c->cold_reads)
		DP_INFO("%llu fetch reads missed the page cache and went through io_uring",
		        (unsigned long long)c->cold_reads);
	if (c->aborted_cut_reads)
		DP_INFO("%llu read_committed reads were cut short for their aborted lists (%llu to one batch)",
		        (unsigned long long)c->aborted_cut_reads, (unsigned long long)c->aborted_one_batch_reads);
	for (uint32_t id = 0; id < c->topics_end; id++)
		if (c->topics[id].live)
			dp_shard_close_topic(c, &c->topics[id], false);
}

static void shard_destroy(struct dp_core *c)
{
	free(c->reads);
	c->reads = NULL;
}

const struct dp_role dp_shard_role = {
	.name = "shard", .start = shard_start, .settle = shard_settle, .timer = dp_shard_timer,
	.busy = shard_busy, .stop = shard_stop, .destroy = shard_destroy,
};
