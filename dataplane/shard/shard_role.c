/*
 * shard_role.c - the owner side's part in a data core's loop (loop.h's
 * struct dp_role): the append pool, the grant pool, the read slots and the
 * owned partitions at start, settle topic deletes
 * after each turn's messages, the shard timer, and at stop wait for cold
 * reads, then close the partitions. Locality: owner core.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "arena.h"
#include "trash.h"
#include "shard_internal.h"

static int shard_start(struct dp_core *c)
{
	/* The append records, fixed here (b->appends_max, dp_limits.h): none is taken on the data path. */
	c->appends = calloc(c->b->appends_max, sizeof(*c->appends));
	if (!c->appends)
		return -ENOMEM;
	for (uint32_t k = c->b->appends_max; k-- > 0;) {
		c->appends[k].next_free = c->append_free;
		c->append_free = &c->appends[k];
	}
	/* The transaction grants, fixed here too (b->txn_allows_max, dp_limits.h). */
	c->allows = calloc(c->b->txn_allows_max, sizeof(*c->allows));
	if (!c->allows)
		return -ENOMEM;
	for (uint32_t k = c->b->txn_allows_max; k-- > 0;) {
		c->allows[k].next = c->allow_free;
		c->allow_free = &c->allows[k];
	}
	/* The producer and transaction state pool (txn/arena.h): the partitions' tables grow in it,
	 * never by malloc on this core. Reserved whole; its pages are touched as tables use them. */
	if (!(c->txn_arena = calloc(1, sizeof(*c->txn_arena))) ||
	    txn_arena_init(c->txn_arena, dp_shard_txn_state_bytes(&c->b->cfg), TXN_ARENA_BLOCK_MIN_BYTES) < 0) {
		free(c->txn_arena);
		c->txn_arena = NULL;
		return -ENOMEM;
	}
	/* The trash: a deleted partition's files are unlinked from it on kernel workers (trash.h). The
	 * first data core adopts the trash of cores a run with more of them left. */
	if (!(c->trash = calloc(1, sizeof(*c->trash))))
		return -ENOMEM;
	int live[DP_CORES_MAX];
	for (int k = 0; k < c->b->ndata; k++)
		live[k] = c->b->first_data + k;
	st_trash_init(c->trash, c->io, c->b->cfg.data_dir, c->id, (uint64_t)dp_wall_ms(), c->id == c->b->first_data,
	              live, c->b->ndata);
	/* The read slots and the warm-read sink, fixed here too (DP_READS_MAX, ST_LOG_WARM_BYTES). */
	if (dp_shard_reads_create(c) < 0)
		return -ENOMEM;
	dp_core_on_cqe(c, DP_READ_TAG, dp_shard_read_complete);
	for (uint32_t id = 0; id < c->topics_end; id++)
		if (c->topics[id].live)
			dp_shard_open_owned(c, &c->topics[id], id, 0);
	c->next_snapshot_ms = dp_mono_ms() + c->b->cfg.producer_snapshot_ms;
	/* The open transactions go to the coordinator from the first tick (dp_shard_report_opens). */
	c->opens_topic = 0, c->opens_part = 0, c->opens_after = -1, c->opens_done = false;
	c->opens_aborting = 0, c->opens_again = false, c->txn_reconciled = false;
	return 0;
}

/* Topic deletes waiting for their partitions' I/O: after completions, and every tick. */
static int shard_settle(struct dp_core *c, bool due)
{
	return c->ndel_wait && due ? dp_shard_deletes(c) : 0;
}

static bool shard_busy(struct dp_core *c)
{
	return c->reads_inflight != 0 || c->read_waits.n != 0 || (c->trash && st_trash_busy(c->trash));
}

static void shard_stop(struct dp_core *c)
{
	if (c->appends_refused)
		DP_INFO("%llu batches refused for an empty append pool", (unsigned long long)c->appends_refused);
	if (c->markers_applied_again)
		DP_INFO("%llu markers of a decision already recorded here changed nothing",
		        (unsigned long long)c->markers_applied_again);
	if (c->grants_held_back)
		DP_INFO("%llu grants of a next transaction held back: the producer's last decision was not recorded "
		        "here yet", (unsigned long long)c->grants_held_back);
	if (c->opens_aborted)
		DP_INFO("%llu of the %llu transactions open here at start-up were unknown to the coordinator, and aborted",
		        (unsigned long long)c->opens_aborted, (unsigned long long)c->opens_reported);
	if (c->allows_refused)
		DP_INFO("%llu transaction grants refused for an empty grant pool", (unsigned long long)c->allows_refused);
	if (c->txn_arena)
		DP_INFO("producer and transaction state pool: %zu of %zu bytes at most in use",
		        c->txn_arena->used_peak, c->txn_arena->bytes);
	if (c->cold_reads)
		DP_INFO("%llu fetch reads missed the page cache and went through io_uring",
		        (unsigned long long)c->cold_reads);
	if (c->cold_lookups)
		DP_INFO("%llu lookups met batch headers outside the page cache and read them through io_uring "
		        "(%llu to read a fetch's range on past its first headers)",
		        (unsigned long long)c->cold_lookups, (unsigned long long)c->cold_extends);
	if (c->read_waited || c->read_waits_refused)
		DP_INFO("%llu fetch and list offsets requests waited for a read slot (%llu answered retriable, "
		        "the wait queue full)", (unsigned long long)c->read_waited, (unsigned long long)c->read_waits_refused);
	DP_INFO("%llu blocking reads on the poll core", (unsigned long long)c->blocking_reads);
	if (c->aborted_cut_reads)
		DP_INFO("%llu read_committed reads were cut short for their aborted lists (%llu to one batch)",
		        (unsigned long long)c->aborted_cut_reads, (unsigned long long)c->aborted_one_batch_reads);
	if (c->trash && (c->trash->files_removed || c->trash->failures))
		DP_INFO("trash: %llu files and %llu directories of deleted partitions removed (%llu punches), %llu failures",
		        (unsigned long long)c->trash->files_removed, (unsigned long long)c->trash->dirs_removed,
		        (unsigned long long)c->trash->punches, (unsigned long long)c->trash->failures);
	for (uint32_t id = 0; id < c->topics_end; id++)
		if (c->topics[id].live)
			dp_shard_close_topic(c, &c->topics[id], false);
}

static void shard_destroy(struct dp_core *c)
{
	if (c->trash)
		st_trash_fini(c->trash);   /* what is left is emptied after the next start */
	free(c->trash);
	c->trash = NULL;
	dp_shard_reads_destroy(c);
	free(c->appends);
	c->appends = NULL;
	c->append_free = NULL;
	free(c->allows);
	c->allows = NULL;
	c->allow_free = NULL;
	if (c->txn_arena)
		txn_arena_fini(c->txn_arena);   /* after stop closed every partition that used it */
	free(c->txn_arena);
	c->txn_arena = NULL;
}

size_t dp_shard_txn_state_bytes(const struct dp_config *cfg)
{
	return cfg->test_txn_state_bytes ? cfg->test_txn_state_bytes : (size_t)cfg->txn_state_mib << 20;
}

static void shard_budget(const struct dp_config *cfg, struct dp_budget *bd)
{
	uint32_t appends = cfg->test_appends_max ? cfg->test_appends_max : DP_APPENDS_MAX;
	dp_budget_add(bd, "append records", dp_budget_ndata(cfg), (unsigned long long)appends * sizeof(struct dp_append),
	              "DP_APPENDS_MAX per data core");
	/* As many partitions as the file descriptors let the broker hold (catalog.c), at start-up's limit. */
	struct rlimit rl;
	uint64_t nofile = getrlimit(RLIMIT_NOFILE, &rl) < 0 ? 1024 : rl.rlim_max == RLIM_INFINITY ? UINT64_MAX / 2 :
	                  (uint64_t)rl.rlim_max;
	int64_t parts = dp_fd_partitions_max(nofile, (int)dp_budget_ndata(cfg), cfg->direct_io);
	if (cfg->partitions_max < parts)
		parts = cfg->partitions_max;
	dp_budget_add(bd, "partitions", (unsigned long long)parts,
	              dp_shard_partition_bytes(cfg),
	              "--partitions-max, or fewer if the descriptors hold fewer: each its state, log and full active indexes, and "
	              "with --direct-io on its ST_LOG_DIRECT_BUF_BYTES write buffer (its producers and transactions in the pool below; sealed segments apart)");
	unsigned long long pool = dp_shard_txn_state_bytes(cfg);
	dp_budget_add(bd, "producer/txn state", dp_budget_ndata(cfg), txn_arena_bytes(pool, TXN_ARENA_BLOCK_MIN_BYTES),
	              "--txn-state-mib per data core: what partitions' producer tables and open and aborted "
	              "transactions grow to (and a byte per 64 B block)");
	dp_budget_add(bd, "read slots", dp_budget_ndata(cfg), dp_shard_reads_bytes(),
	              "DP_READS_MAX cold and warm reads in flight, the ST_LOG_WARM_BYTES sink, the "
	              "DP_LIST_BATCH_BYTES_MAX ListOffsets batch buffer and DP_READ_WAITS_MAX requests waiting "
	              "for a slot, per data core");
	uint32_t allows = cfg->test_txn_allows_max ? cfg->test_txn_allows_max : DP_TXN_ALLOWS_MAX;
	dp_budget_add(bd, "transaction grants", dp_budget_ndata(cfg),
	              (unsigned long long)allows * sizeof(struct dp_txn_allow),
	              "DP_TXN_ALLOWS_MAX (partition, producer) grants per data core");
}

const struct dp_role dp_shard_role = {
	.name = "shard", .start = shard_start, .settle = shard_settle, .timer = dp_shard_timer,
	.busy = shard_busy, .stop = shard_stop, .destroy = shard_destroy, .budget = shard_budget,
};
