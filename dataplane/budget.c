/*
 * budget.c - the broker's memory budget, itemised: what every fixed pool and
 * every bound that holds memory comes to for the given flags and cores.
 * `sluiced --print-budget` prints it and exits; at start-up its total is
 * logged at info level. The pools main.c allocates at start-up are sized by
 * the same names (dp_limits.h), so what it prints is what they take; the
 * bounds (held bytes, idle pool) are what the data path may take at most.
 *
 * Not in it (each grows with what the broker holds, and has its own named
 * limit): per-partition state (struct dp_part, producer state up to
 * TXN_PSTATE_PRODUCERS_MAX, transaction index up to TXN_LSO_OPEN_MAX, segment
 * indexes), the coordinators' tables beyond their ids (transactions'
 * partition lists, groups' members and offsets), and the kernel's page cache.
 * Locality: init only (main thread, before the cores start); pure.
 */
#include <stdio.h>
#include <string.h>

#include "coord.h"
#include "req.h"
#include "core.h"

#define DP_BUDGET_ITEMS_MAX     24
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

static void add(struct dp_budget *bd, const char *name, unsigned long long count, unsigned long long each,
                const char *what)
{
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

static void budget_of(const struct dp_config *cfg, struct dp_budget *bd)
{
	memset(bd, 0, sizeof(*bd));
	unsigned long long ncores = (unsigned)cfg->cores, ndata = ncores == 1 ? 1 : ncores - 1;
	uint32_t credits = cfg->test_xmsg_credits ? cfg->test_xmsg_credits : DP_XMSG_CREDITS;
	uint32_t appends = cfg->test_appends_max ? cfg->test_appends_max : DP_APPENDS_MAX;

	/* every core */
	add(bd, "rings", ncores * ncores, dp_ring_bytes(DP_RING_MSGS), "DP_RING_MSGS messages per (src, dst) pair");
	/* with --cores 1 there is no pair; else core 0 pairs with each data core both ways */
	unsigned long long cpairs = ncores == 1 ? 0 : 2 * ndata, dpairs = ncores == 1 ? 0 : ndata * (ndata - 1);
	add(bd, "backlogs, control", cpairs, (unsigned long long)dp_backlog_msgs(credits, true) * sizeof(struct dp_msg),
	    "to and from the control core: credits, lends, GROUP_GONE (dp_limits.h)");
	add(bd, "backlogs, data", dpairs, (unsigned long long)dp_backlog_msgs(credits, false) * sizeof(struct dp_msg),
	    "between two data cores: credits and watches (dp_limits.h)");
	add(bd, "catalog copies", ncores,
	    (unsigned long long)DP_TOPICS_MAX * sizeof(struct dp_topic) + DP_TOPIC_INDEX_SLOTS * sizeof(uint16_t),
	    "DP_TOPICS_MAX topics and their index, per core");
	add(bd, "idle buffer pool", ncores, DP_BUF_IDLE_BYTES_MAX, "DP_BUF_IDLE_BYTES_MAX kept free per core");
	add(bd, "io_urings", ncores, DP_URING_ENTRIES * (DP_BUDGET_SQE_BYTES + 2u * DP_BUDGET_CQE_BYTES),
	    "DP_URING_ENTRIES SQEs and twice as many CQEs per core");
	add(bd, "thread stacks", ncores, DP_BUDGET_STACK_BYTES, "one thread per core");

	/* data cores: connections and requests */
	add(bd, "connections", ndata,
	    DP_CONN_SLOTS * (sizeof(struct dp_conn) + sizeof(uint16_t)) + DP_CONNS_MAX * sizeof(uint16_t),
	    "DP_CONN_SLOTS slots and their maps per data core");
	add(bd, "request slots", ndata, (unsigned long long)DP_REQS_MAX * sizeof(struct dp_req),
	    "DP_REQS_MAX per data core");
	add(bd, "requests' held bytes", ndata, DP_CORE_HELD_BYTES_MAX,
	    "DP_CORE_HELD_BYTES_MAX of frames, arenas, fetch buffers, answers per data core");
	add(bd, "one request past it", ndata,
	    (unsigned long long)cfg->max_frame_bytes + DP_ARENA_BYTES_MAX + DP_FETCH_RESPONSE_MAX_BYTES,
	    "the request that crosses the limit: --max-frame-bytes, its arena, a fetch's MaxBytes");
	add(bd, "NIC receive buffers", ndata, (unsigned long long)DP_NIC_RX_BUFS * DP_NIC_RX_BUF_BYTES,
	    "DP_NIC_RX_BUFS of DP_NIC_RX_BUF_BYTES per data core");

	/* data cores: owner side */
	add(bd, "append records", ndata, (unsigned long long)appends * sizeof(struct dp_append),
	    "DP_APPENDS_MAX per data core");

	/* control core */
	add(bd, "transactional ids", 1, (unsigned long long)cfg->txn_ids_max * (sizeof(struct txn_meta) + 2 * sizeof(void *)),
	    "--txn-ids-max entries of the coordinator's table (their partition lists apart)");
	add(bd, "coordinator writes", 1, (unsigned long long)DP_COORD_WRITES_MAX * dp_txnc_write_bytes(),
	    "DP_COORD_WRITES_MAX records of writes in flight");

	add(bd, "program", 1, DP_BUDGET_PROGRAM_BYTES, "text, libraries, malloc's bookkeeping (allowance)");
}

unsigned long long dp_budget_total(const struct dp_config *cfg)
{
	struct dp_budget bd;
	budget_of(cfg, &bd);
	return bd.total;
}

void dp_budget_print(const struct dp_config *cfg, FILE *f)
{
	struct dp_budget bd;
	budget_of(cfg, &bd);
	int ncores = cfg->cores, ndata = ncores == 1 ? 1 : ncores - 1;
	fprintf(f, "sluiced memory budget for --cores %d (%d data core%s), --max-frame-bytes %u:\n", ncores, ndata,
	        ndata == 1 ? "" : "s", cfg->max_frame_bytes);
	for (unsigned i = 0; i < bd.n; i++)
		fprintf(f, "  %-22s %14llu B  %llu x %llu B: %s\n", bd.item[i].name, bd.item[i].bytes, bd.item[i].count,
		        bd.item[i].each, bd.item[i].what);
	fprintf(f, "  %-22s %14llu B  (%.1f MiB; what the pools hold plus what the bounds let requests take)\n", "total",
	        bd.total, (double)bd.total / (1 << 20));
}
