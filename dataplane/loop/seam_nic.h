/*
 * seam_nic.h - seam.h's part for the NIC side (conn/): the listener a data
 * core creates. Normal build: nic_uring on the core's io_uring, its
 * completions by NIC_URING_TAG; -DDP_NIC_DPDK (sluiced-dpdk): the DPDK
 * backend (nic/nic_dpdk.h) on the queue pair of the core's data index, which
 * the core must poll: it has no completion to wake the core's io_uring wait;
 * -DDP_LOOP_SIM: tests/sim/wsim.c's, an in-memory nic (nic/nic_sim.c) on the
 * simulator's network. Apart from
 * seam.h so that loop/'s own files need no NIC header. Locality: NIC core.
 */
#ifndef SLUICE_DP_LOOP_SEAM_NIC_H
#define SLUICE_DP_LOOP_SEAM_NIC_H

#include "seam.h"
#include "nic.h"

#if defined(DP_NIC_DPDK) && !defined(DP_LOOP_SIM)

#include "nic_dpdk.h"

static inline int dp_seam_nic_create(struct dp_core *c, const struct nic_config *nc, struct nic **out)
{
	return nic_dpdk_create(nc, (uint16_t)c->data_index, out);
}

/* Frames arrive without a completion: an idle core sleeps a tick, not DP_SLEEP_MAX_MS. */
static inline bool dp_seam_nic_polled(void)
{
	return true;
}

/* At stop: the closed connections' FINs are still owed (the kernel sends a socket's itself). */
static inline bool dp_seam_nic_draining(struct nic *n)
{
	return nic_dpdk_draining(n);
}

#elif !defined(DP_LOOP_SIM)

static inline bool dp_seam_nic_polled(void)
{
	return false;
}

static inline bool dp_seam_nic_draining(struct nic *n)
{
	(void)n;
	return false;
}

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

static inline bool dp_seam_nic_polled(void)
{
	return false;
}

static inline bool dp_seam_nic_draining(struct nic *n)
{
	(void)n;
	return false;
}

int dp_seam_nic_create(struct dp_core *c, const struct nic_config *nc, struct nic **out);

#endif

#endif
