/*
 * nic_internal.h - state of the io_uring socket backend (nic/ and its tests only).
 * What every backend shares (limits, handle layout, queued send and event)
 * is in nic_backend.h; nic_sim.c keeps the same lifecycles without CLOSING.
 *
 * Locality: everything here belongs to one NIC core; nothing is shared.
 *
 * Lifecycles, so the invariants below can be checked:
 *
 *   connection slot:  FREE --accept--> OPEN --peer EOF / error / nic_close-->
 *                     CLOSING (cancel issued, ops still in flight) --last CQE-->
 *                     CLOSED (fd closed, CLOSED event queued) --event delivered
 *                     by nic_poll--> FREE (generation bumped)
 *
 *   send queue entry (per connection ring of NIC_TXQ_MAX, monotonic counters):
 *       [tx_head, tx_done)   finished; SENT event queued, not yet delivered
 *       [tx_done, tx_tail)   not finished; the first tx_sending of them are in
 *                            the one SENDMSG in flight, tx_off bytes of
 *                            tx[tx_done] already went out
 *     An entry is reusable only once its SENT event was delivered, so the
 *     event queue can never hold more than NIC_TXQ_MAX SENT per slot.
 *
 *   receive buffer: in the kernel's buffer ring (or our free pool in
 *     single-shot mode) -> DATA event queued -> application -> nic_rx_release().
 *
 * Event queue bound (why it cannot overflow): per slot at most one OPEN, one
 * CLOSED and NIC_TXQ_MAX SENT (slots and send entries are recycled only when
 * their event is delivered), plus at most rx_bufs DATA (each holds a buffer):
 *     evq_cap = conns_max * (2 + NIC_TXQ_MAX) + rx_bufs
 */
#ifndef SLUICE_NIC_INTERNAL_H
#define SLUICE_NIC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "nic.h"
#include "nic_backend.h"

#define NIC_LISTEN_BACKLOG   4096       /* capped by net.core.somaxconn */
#define NIC_BGID             0x51u      /* our provided-buffer group on the shared ring */

/*
 * user_data payload (shifted left 4 above NIC_URING_TAG):
 *   bits 0..3 op, 4..23 connection index, 24..35 generation (assert only).
 */
enum nic_op {
	NIC_OP_ACCEPT = 1,
	NIC_OP_RECV,
	NIC_OP_SEND,
	NIC_OP_CANCEL,        /* cancel of a connection's ops */
	NIC_OP_LCANCEL,       /* cancel of the listener's accept (shutdown) */
};

enum nic_conn_state {
	NIC_CONN_FREE = 0,
	NIC_CONN_OPEN,
	NIC_CONN_CLOSING,
	NIC_CONN_CLOSED,
};

/* per-connection flags */
#define NIC_CF_RECV_ARMED    0x01u  /* a recv (multishot or single) is in flight */
#define NIC_CF_SEND_ARMED    0x02u  /* the one SENDMSG is in flight */
#define NIC_CF_WANT_RECV     0x04u  /* flush must arm a recv */
#define NIC_CF_WANT_CANCEL   0x08u  /* flush must prep a cancel (closing) */
#define NIC_CF_RX_STARVED    0x10u  /* recv stopped for lack of buffers */
#define NIC_CF_PAUSED        0x20u  /* nic_pause: no recv is armed until resumed */
/* "an entry for this slot sits in that list": kept across slot reuse so a
 * slot is never listed twice; the list owner re-checks state when popping. */
#define NIC_CF_ON_DIRTY      0x40u
#define NIC_CF_ON_STARVED    0x80u

/* One connection slot. Locality: NIC core. */
struct nic_conn {
	int fd;
	uint16_t gen;            /* 1..4095: never 0, so no valid handle is 0 */
	uint8_t state;           /* enum nic_conn_state */
	uint8_t flags;           /* NIC_CF_* */
	uint16_t inflight;       /* SQEs whose final CQE has not arrived */
	uint16_t rx_bid;         /* single-shot mode: buffer of the armed recv */
	int close_status;        /* reported in CLOSED */
	uint32_t tx_head, tx_done, tx_tail;   /* see top of file */
	uint32_t tx_off;
	uint32_t tx_sending;     /* entries covered by the SENDMSG in flight */
	uint64_t tx_sending_bytes;
	struct msghdr msg;       /* must stay put while the SENDMSG is in flight */
	struct iovec iov[NIC_SEND_IOV_MAX];
	struct nic_tx tx[NIC_TXQ_MAX];
};

/* Counters for tests and the bench. Locality: NIC core. */
struct nic_uring_stats {
	uint64_t accepts;
	uint64_t accepts_rejected;   /* no free slot: fd closed at once */
	uint64_t accept_errors;
	uint64_t rx_bytes;
	uint64_t rx_enobufs;         /* recv stopped because no buffer was free */
	uint64_t rx_rearms;          /* multishot recv re-armed (F_MORE clear) */
	uint64_t sendmsgs;
	uint64_t sends_partial;      /* SENDMSG that left bytes of an entry unsent */
	uint64_t tx_bytes;
	uint64_t sqe_full;           /* SQ was full: submitted to make room */
};

/* The backend. Locality: NIC core (one per data core). */
struct nic {
	struct io_uring *ring;
	int listen_fd;
	uint16_t port;
	bool multishot;              /* buffer ring + multishot recv/accept */
	bool accept_armed;
	bool shutting_down;
	uint8_t listen_inflight;     /* accept + listener cancel in flight */
	uint32_t conns_max, rx_bufs, rx_buf_bytes;
	uint32_t inflight;           /* all connection ops in flight */

	struct nic_conn *conns;
	uint32_t *free_slots;        /* stack */
	uint32_t free_n;
	uint32_t *dirty;             /* stack of slots flush must look at */
	uint32_t dirty_n;
	uint32_t *starved;           /* FIFO of slots waiting for rx buffers */
	uint32_t starved_head, starved_n;

	struct nic_iev *evq;         /* FIFO, see bound at top of file */
	uint32_t evq_cap, evq_head, evq_n;

	uint8_t *rx_mem;             /* rx_bufs * rx_buf_bytes */
	size_t rx_mem_bytes;
	uint8_t *rx_out;             /* per buffer: 1 while queued or with the app */
	uint32_t rx_held;            /* buffers with rx_out set */
	struct io_uring_buf_ring *br;    /* multishot mode */
	size_t br_bytes;
	uint32_t br_mask;
	uint16_t *rx_free;           /* single-shot mode: free pool (stack) */
	uint32_t rx_free_n;

	struct nic_uring_stats stats;
};

#endif
