/*
 * broker.h - one broker's assembly from its roles, shared by sluiced (main.c)
 * and the whole-broker simulator (tests/sim/wsim.c), so that the two cannot
 * drift apart: every default and every start-up allocation is here, once.
 * Locality: init only (before the cores start, and after they stopped).
 */
#ifndef DP_BROKER_H
#define DP_BROKER_H

#include <stdio.h>

#include "loop.h"

/* Every role a core may play: the memory budget counts each one's items (budget.c). */
#define DP_BROKER_ROLES 3
extern const struct dp_role *const dp_broker_roles[DP_BROKER_ROLES];

/* *cfg = sluiced's defaults (the values its --help names). */
void dp_config_defaults(struct dp_config *cfg);

/*
 * Build b from b->cfg: the cores (their roles, catalogs, connection slots and
 * request pools), the rings between every pair, the backlogs, the pools' sizes
 * (b->xmsg_credits, appends_max, txn_allows_max: a test_* override or the
 * limit). The caller sets b->stop, b->ready and b->partitions_max (sluiced:
 * dp_fd_budget_init), then scans the data directory and starts the cores.
 * 0, or -ENOMEM (what was built is freed by dp_broker_release).
 */
int dp_broker_assemble(struct dp_broker *b);

/* Free what dp_broker_assemble built and what the cores left at their stop (the catalogs,
 * the control core's tables); b itself is the caller's. The cores must have stopped. */
void dp_broker_release(struct dp_broker *b);

#endif
