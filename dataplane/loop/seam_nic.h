/*
 * seam_nic.h - seam.h's part for the NIC side (conn/): the listener a data
 * core creates. Normal build: nic_uring on the core's io_uring, its
 * completions by NIC_URING_TAG; -DDP_LOOP_SIM: tests/sim/wsim.c's, an
 * in-memory nic (nic/nic_sim.c) on the simulator's network. Apart from
 * seam.h so that loop/'s own files need no NIC header. Locality: NIC core.
 */
#ifndef SLUICE_DP_LOOP_SEAM_NIC_H
#define SLUICE_DP_LOOP_SEAM_NIC_H

#include "seam.h"
#include "nic.h"

#ifndef DP_LOOP_SIM

static inline void dp_seam_nic_cqe(struct dp_core *c, const struct io_uring_cqe *cqe)
{
	nic_uring_complete(c->nic, cqe);
}

/* A data core's listener on the core's ring; its completions come back by NIC_URING_TAG. */
static inline int dp_seam_nic_create(struct dp_core *c, const struct nic_config *nc, struct nic **out)
{
	int rc = nic_uring_create(nc, &c->ring, out);
	if (rc == 0)
		dp_core_on_cqe(c, NIC_URING_TAG, dp_seam_nic_cqe);
	return rc;
}

#else /* DP_LOOP_SIM: tests/sim/wsim.c */

int dp_seam_nic_create(struct dp_core *c, const struct nic_config *nc, struct nic **out);

#endif

#endif
