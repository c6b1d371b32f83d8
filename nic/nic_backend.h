/*
 * nic_backend.h - what the NIC backends share (nic/ and its tests only):
 * limits, the connection-handle layout, a queued send and a queued event.
 * nic_common.h builds the shared half of every backend on these (event
 * queue, slots, send queues, with the lifecycles and the event-queue bound
 * written out at its top:
 *     evq_cap = conns_max * (2 + NIC_TXQ_MAX) + rx_bufs);
 * each backend defines its own struct nic over that: nic_internal.h
 * (io_uring) and nic_sim.c (in memory).
 *
 * Locality: NIC core (one backend instance per core; nothing shared).
 */
#ifndef SLUICE_NIC_BACKEND_H
#define SLUICE_NIC_BACKEND_H

#include <stdint.h>

#define NIC_TXQ_MAX          64u        /* queued sends per connection (power of two) */
#define NIC_SEND_IOV_MAX     16u        /* queued sends coalesced into one transmit */
#define NIC_CONN_IDX_BITS    20u        /* handle = idx | gen << 20 */
#define NIC_CONN_GEN_BITS    12u
#define NIC_CONNS_LIMIT      (1u << NIC_CONN_IDX_BITS)
#define NIC_RX_BUFS_LIMIT    32768u     /* kernel limit on buffer ring entries */

_Static_assert((NIC_TXQ_MAX & (NIC_TXQ_MAX - 1)) == 0, "txq ring indexes by mask");
_Static_assert(NIC_SEND_IOV_MAX <= NIC_TXQ_MAX, "cannot coalesce more than is queued");
_Static_assert(NIC_CONN_IDX_BITS + NIC_CONN_GEN_BITS == 32, "handle is 32 bits");
_Static_assert(NIC_RX_BUFS_LIMIT <= 65536, "buffer ids are 16 bits in the CQE and the event");

/* One queued send. Locality: NIC core. */
struct nic_tx {
	const uint8_t *data;
	void *cookie;
	uint32_t len;
};

/* Queued event, compact: pointers are rebuilt at delivery. Locality: NIC core. */
struct nic_iev {
	uint8_t kind;            /* enum nic_ev_kind */
	uint8_t pad;
	uint16_t bid;            /* DATA */
	uint32_t idx;            /* connection slot */
	uint32_t len;            /* DATA */
	int32_t status;          /* SENT / CLOSED */
};

#endif
