/*
 * budget.c - the broker's memory budget, itemised: what every fixed pool and
 * every bound that holds memory comes to for the given flags and cores.
 * `sluiced --print-budget` prints it and exits; at start-up its total is
 * logged at info level. loop/ counts what every core has (rings, backlogs,
 * catalog copies, the idle buffer pool, io_urings, stacks); each role counts
 * its own pools in its budget hook (struct dp_role), so this file names no
 * role. The pools are sized by the same names (dp_limits.h), so what it
 * prints is what they take; the bounds (held bytes, idle pool) are what the
 * data path may take at most.
 *
 * Per partition (the shard role's "partitions" item, --partitions-max or
 * fewer when the file descriptors hold fewer) it counts what a partition
 * holds from its open: its state, its log with the active segment's index
 * at full size, its producer table and transaction index as created. What
 * those tables grow to (producers, open and aborted transactions) is the
 * "producer/txn state" item: one pool per data core (--txn-state-mib).
 * Not in it (each grows with what the broker holds, and has its own named
 * limit): sealed segments' indexes, the group coordinator's tables
 * (members and offsets), and the kernel's page cache. The transactional
 * ids and their transactions' partition and group lists are pools of their
 * own (control role's items).
 * Locality: init only (main thread, before the cores start); pure.
 */
#include <stdio.h>
#include <string.h>

#include "loop.h"

#define DP_BUDGET_ITEMS_MAX     32
/* Text, libraries, malloc's own bookkeeping, the start-up thread: an
 * allowance (an idle --cores 3 broker is ~18 MiB resident). */
#define DP_BUDGET_PROGRAM_BYTES (32ull << 20)
#define DP_BUDGET_STACK_BYTES   (8ull << 20)   /* each core's thread stack (the default reservation) */
#define DP_BUDGET_SQE_BYTES     64u
#define DP_BUDGET_CQE_BYTES     16u

struct dp_budget_item {
	const char *name;
	unsigned long long bytes, count, each;
	const char *what;             /* a static string */
};

struct dp_budget {
	unsigned n;
	unsigned long long total;
	struct dp_budget_item item[DP_BUDGET_ITEMS_MAX];
};

void dp_budget_add(struct dp_budget *bd, const char *name, unsigned long long count, unsigned long long each,
                   const char *what)
{
	assert(bd->n < DP_BUDGET_ITEMS_MAX);   /* the items are this tree's, not a client's */
	if (bd->n == DP_BUDGET_ITEMS_MAX)
		return;
	struct dp_budget_item *it = &bd->item[bd->n++];
	it->name = name;
	it->bytes = count * each;
	it->count = count;
	it->each = each;
	it->what = what;
	bd->total += it->bytes;
}

void dp_layout(const struct dp_config *cfg, int *ndata, int *first_data)
{
	bool own = cfg->control_core == DP_CONTROL_OWN ||
	           (cfg->control_core == DP_CONTROL_AUTO && cfg->cores >= DP_CONTROL_OWN_CORES_MIN);
	if (cfg->cores == 1)
		own = false;   /* one core plays every role */
	*ndata = own ? cfg->cores - 1 : cfg->cores;
	*first_data = own ? 1 : 0;
}

unsigned dp_budget_ndata(const struct dp_config *cfg)
{
	int ndata, first;
	dp_layout(cfg, &ndata, &first);
	return (unsigned)ndata;
}

static void budget_of(const struct dp_config *cfg, const struct dp_role *const *roles, unsigned nroles,
                      struct dp_budget *bd)
{
	memset(bd, 0, sizeof(*bd));
	unsigned long long ncores = (unsigned)cfg->cores;
	uint32_t credits = cfg->test_xmsg_credits ? cfg->test_xmsg_credits : DP_XMSG_CREDITS;

	/* every core */
	dp_budget_add(bd, "rings", ncores * ncores, dp_ring_bytes(DP_RING_MSGS), "DP_RING_MSGS messages per (src, dst) pair");
	/* with --cores 1 there is no pair; else core 0 (control, and data when it shares) pairs with
	 * each other core both ways, and those others (data cores) with each other */
	unsigned long long cpairs = 2 * (ncores - 1), dpairs = ncores > 1 ? (ncores - 1) * (ncores - 2) : 0;
	dp_budget_add(bd, "backlogs, control", cpairs,
	              (unsigned long long)dp_backlog_msgs(credits, true) * sizeof(struct dp_msg),
	              "to and from the control core: credits, lends, GROUP_GONE (dp_limits.h)");
	dp_budget_add(bd, "backlogs, data", dpairs,
	              (unsigned long long)dp_backlog_msgs(credits, false) * sizeof(struct dp_msg),
	              "between two data cores: credits and watches (dp_limits.h)");
	dp_budget_add(bd, "catalog copies", ncores,
	              (unsigned long long)DP_TOPICS_MAX * sizeof(struct dp_topic) + DP_TOPIC_INDEX_SLOTS * sizeof(uint16_t),
	              "DP_TOPICS_MAX topics and their index, per core");
	/* each catalog copy's (allocated at start, dp_catalog_init), and the control core's at most (as topics take configs) */
	dp_budget_add(bd, "topic config texts", ncores + 1,
	              (unsigned long long)DP_TOPICS_MAX * DP_TOPIC_CONFIG_TEXT_BYTES_MAX,
	              "DP_TOPIC_CONFIG_TEXT_BYTES_MAX per topic (topicconf.h), per catalog copy and the control core's");
	dp_budget_add(bd, "idle buffer pool", ncores, DP_BUF_IDLE_BYTES_MAX, "DP_BUF_IDLE_BYTES_MAX kept free per core");
	dp_budget_add(bd, "io_urings", ncores, DP_URING_ENTRIES * (DP_BUDGET_SQE_BYTES + 2u * DP_BUDGET_CQE_BYTES),
	              "DP_URING_ENTRIES SQEs and twice as many CQEs per core");
	dp_budget_add(bd, "thread stacks", ncores, DP_BUDGET_STACK_BYTES, "one thread per core");

	/* each role's own */
	for (unsigned i = 0; i < nroles; i++)
		if (roles[i]->budget)
			roles[i]->budget(cfg, bd);

	dp_budget_add(bd, "program", 1, DP_BUDGET_PROGRAM_BYTES, "text, libraries, malloc's bookkeeping (allowance)");
}

unsigned long long dp_budget_total(const struct dp_config *cfg, const struct dp_role *const *roles, unsigned nroles)
{
	struct dp_budget bd;
	budget_of(cfg, roles, nroles, &bd);
	return bd.total;
}

void dp_budget_print(const struct dp_config *cfg, const struct dp_role *const *roles, unsigned nroles, FILE *f)
{
	struct dp_budget bd;
	budget_of(cfg, roles, nroles, &bd);
	int ncores = cfg->cores, ndata = (int)dp_budget_ndata(cfg);
	fprintf(f, "sluiced memory budget for --cores %d (%d data core%s), --max-frame-bytes %u:\n", ncores, ndata,
	        ndata == 1 ? "" : "s", cfg->max_frame_bytes);
	for (unsigned i = 0; i < bd.n; i++)
		fprintf(f, "  %-22s %14llu B  %llu x %llu B: %s\n", bd.item[i].name, bd.item[i].bytes, bd.item[i].count,
		        bd.item[i].each, bd.item[i].what);
	fprintf(f, "  %-22s %14llu B  (%.1f MiB; what the pools hold plus what the bounds let requests take)\n", "total",
	        bd.total, (double)bd.total / (1 << 20));
}
