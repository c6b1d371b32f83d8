/*
 * broker.c - one broker's assembly from its roles (broker.h): sluiced's
 * defaults and start-up allocations, used by main.c and by the simulator.
 * Locality: init only.
 */
#include <errno.h>
#include <stdlib.h>

#include "broker.h"
#include "coord.h"
#include "htab.h"
#include "conn_internal.h"   /* init only: a data core's connection slots and request pool */
#include "control.h"
#include "shard.h"
#include "log.h"      /* ST_LOG_PREALLOC_BYTES */

const struct dp_role *const dp_broker_roles[DP_BROKER_ROLES] = { &dp_shard_role, &dp_control_role, &dp_conn_role };

void dp_config_defaults(struct dp_config *cfg)
{
	*cfg = (struct dp_config){
		.listen_host = "127.0.0.1", .listen_port = 9092, .data_dir = "./data", .cores = 0,
		.log_level = DP_LOG_INFO, .default_partitions = 1, .auto_create = true, .fsync = true,
		.prealloc_bytes = ST_LOG_PREALLOC_BYTES,
		.segment_bytes = 256u << 20, .retention_bytes = -1, .retention_ms = 7LL * 24 * 3600 * 1000,
		.max_frame_bytes = DP_FRAME_BYTES_DEFAULT, .node_id = 1,
		.producer_expiration_ms = 86400000, .producer_snapshot_ms = 60000, .fault_seed = 1,
		.fetch_aborted_max = DP_FETCH_ABORTED_MAX, .txn_state_mib = DP_TXN_STATE_MIB_DEFAULT,
		.group_state_mib = DP_GROUP_STATE_MIB_DEFAULT,
		.partitions_max = DP_BROKER_PARTITIONS_DEFAULT,
		.txn_max_timeout_ms = 900000, .txn_log_compact_records = 100000,
		.txn_id_expiration_ms = TXN_ID_EXPIRATION_MS, .txn_ids_max = TXN_IDS_MAX,
		.txn_tps_max = TXN_COORD_TPS_DEFAULT, .txn_groups_max = TXN_COORD_GROUPS_DEFAULT,
		.offsets_retention_ms = 7LL * 24 * 3600 * 1000,
		.group_initial_delay_ms = DP_GROUP_INITIAL_DELAY_MS_DEFAULT, .idle_spin_us = -1,
	};
}

/* A data core's connection side: its slots, the fd map, the free list and the request pool. */
static int conn_slots_init(struct dp_core *c)
{
	c->conns = calloc(DP_CONN_SLOTS, sizeof(*c->conns));
	c->conn_map = calloc(DP_CONNS_MAX, sizeof(*c->conn_map));
	c->conn_free = calloc(DP_CONN_SLOTS, sizeof(*c->conn_free));
	c->reqs = calloc(DP_REQS_MAX, sizeof(*c->reqs));
	c->detached = calloc(1, sizeof(*c->detached));
	if (!c->conns || !c->conn_map || !c->conn_free || !c->reqs || !c->detached)
		return -ENOMEM;
	for (uint32_t k = 0; k < DP_CONN_SLOTS; k++)
		c->conn_free[k] = (uint16_t)(DP_CONN_SLOTS - 1 - k);
	c->conn_free_n = DP_CONN_SLOTS;
	c->detached->closing = c->detached->closed = true;   /* never answers, never freed */
	for (int r = DP_REQS_MAX - 1; r >= 0; r--) {
		c->reqs[r].next = c->req_free;
		c->req_free = &c->reqs[r];
	}
	return 0;
}

int dp_broker_assemble(struct dp_broker *b)
{
	const struct dp_config *cfg = &b->cfg;
	b->ncores = cfg->cores;
	dp_layout(cfg, &b->ndata, &b->first_data);
	b->rings = calloc((size_t)b->ncores * (size_t)b->ncores, sizeof(*b->rings));
	if (!b->rings)
		return -ENOMEM;
	for (int i = 0; i < b->ncores * b->ncores; i++) {
		b->rings[i] = aligned_alloc(DP_CACHE_LINE, dp_ring_bytes(DP_RING_MSGS));
		if (!b->rings[i])
			return -ENOMEM;
		dp_ring_init(b->rings[i], DP_RING_MSGS);
	}
	for (int i = 0; i < b->ncores; i++) {
		struct dp_core *c = calloc(1, sizeof(*c));
		if (!c)
			return -ENOMEM;
		b->cores[i] = c;
		c->id = i;
		c->efd = -1;
		c->rng = cfg->fault_seed * 0x9E3779B97F4A7C15ull + (uint64_t)i + 1;
		c->b = b;
		c->is_control = i == 0;
		c->is_data = i >= b->first_data;
		c->data_index = i - b->first_data;
		if (dp_catalog_init(c) < 0)
			return -ENOMEM;
		/* The roles this core plays, in the order the loop runs their hooks. */
		if (c->is_data)
			dp_core_add_role(c, &dp_shard_role);
		if (c->is_control)
			dp_core_add_role(c, &dp_control_role);
		if (c->is_data) {
			dp_core_add_role(c, &dp_conn_role);
			if (conn_slots_init(c) < 0)
				return -ENOMEM;
		}
	}
	dp_control_provide(b);
	b->xmsg_credits = cfg->test_xmsg_credits ? cfg->test_xmsg_credits : DP_XMSG_CREDITS;
	b->appends_max = cfg->test_appends_max ? cfg->test_appends_max : DP_APPENDS_MAX;   /* shard_role.c's pool */
	b->txn_allows_max = cfg->test_txn_allows_max ? cfg->test_txn_allows_max : DP_TXN_ALLOWS_MAX;   /* and its grants */
	for (int i = 0; i < b->ncores; i++)
		for (int d = 0; d < b->ncores; d++) {
			if (d == i)
				continue;
			uint32_t cap = dp_backlog_msgs(b->xmsg_credits, i == 0 || d == 0);
			b->cores[i]->backlog_cap[d] = cap;
			b->cores[i]->backlog[d] = calloc(cap, sizeof(struct dp_msg));
			if (!b->cores[i]->backlog[d])
				return -ENOMEM;
		}
	return 0;
}

void dp_broker_release(struct dp_broker *b)
{
	for (int i = 0; i < b->ncores; i++) {
		struct dp_core *c = b->cores[i];
		if (!c)
			continue;
		for (int d = 0; d < b->ncores; d++)
			free(c->backlog[d]);
		free(c->conns);
		free(c->conn_map);
		free(c->conn_free);
		free(c->reqs);
		free(c->detached);
		if (c->topics)
			for (uint32_t t = 0; t < DP_TOPICS_MAX; t++)
				free(c->topics[t].parts);
		free(c->topics);
		free(c->topic_texts);
		if (c->topic_index)
			txn_htab_free(c->topic_index);
		free(c->topic_index);
		dp_scan_release(c);
		free(c);
		b->cores[i] = NULL;
	}
	if (b->rings)
		for (int i = 0; i < b->ncores * b->ncores; i++)
			free(b->rings[i]);
	free(b->rings);
	b->rings = NULL;
}
