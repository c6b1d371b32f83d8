/*
 * control_role.c - the control core's part in core 0's loop (loop.h's
 * struct dp_role): the coordinators load their logs at start (finishing
 * interrupted work), run their timers, and close their logs at stop.
 * Locality: control core.
 */
#include "arena.h"   /* txn_arena_bytes: the group state pool's budget */
#include "coord.h"   /* struct txn_meta: the budget of the id table */
#include "control_internal.h"

static int control_start(struct dp_core *c)
{
	int rc = dp_txnc_start(c);
	if (rc < 0)
		return rc;
	return dp_group_start(c);
}

static void control_timer(struct dp_core *c)
{
	dp_txnc_timer(c);
	dp_group_timer(c);
}

static void control_stop(struct dp_core *c)
{
	dp_txnc_stop(c);
	dp_group_stop(c);
}

/* After the ring is gone: the coordinators' tables and pools (a restarted simulated machine makes new ones). */
static void control_destroy(struct dp_core *c)
{
	dp_txnc_destroy(c);
	dp_group_destroy(c);
}

/* The coordinators' tables and pools on the control core (one, whatever --cores). */
static void control_budget(const struct dp_config *cfg, struct dp_budget *bd)
{
	dp_budget_add(bd, "transactional ids", 1, (unsigned long long)cfg->txn_ids_max * txn_coord_fixed_bytes_per_id(),
	              "--transactional-ids-max entries, each with room for the longest id, allocated at start-up "
	              "(their partition lists apart)");
	dp_budget_add(bd, "transactions' partitions", 1,
	              (unsigned long long)(cfg->txn_tps_max / TXN_COORD_TPS_UNIT) * txn_coord_fixed_bytes_per_tp_unit(),
	              "--txn-partitions-max entries of open transactions' partition lists, a buddy pool");
	dp_budget_add(bd, "transactions' groups", 1, (unsigned long long)cfg->txn_groups_max * txn_coord_fixed_bytes_per_group(),
	              "--txn-groups-max entries of open transactions' group lists, a buddy pool");
	dp_budget_add(bd, "group state", 1, txn_arena_bytes((size_t)cfg->group_state_mib << 20, GRP_MEM_UNIT_BYTES),
	              "--group-state-mib: the group coordinator's groups, members and offsets, a buddy pool");
	dp_budget_add(bd, "coordinator writes", 1, (unsigned long long)DP_COORD_WRITES_MAX * dp_txnc_write_bytes(),
	              "DP_COORD_WRITES_MAX records of writes in flight");
}

const struct dp_role dp_control_role = {
	.name = "control", .start = control_start, .timer = control_timer, .stop = control_stop,
	.destroy = control_destroy,
	.budget = control_budget,
};

void dp_control_provide(struct dp_broker *b)
{
	b->services[DP_SVC_CONTROL] = (struct dp_service_at){ .core = 0, .fn = dp_control_msg };
	b->services[DP_SVC_TXN] = (struct dp_service_at){ .core = 0, .fn = dp_txnc_msg };
	dp_group_provide(b, 0);
}
