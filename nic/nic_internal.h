/*
 * nic_internal.h - state of the io_uring socket backend (nic/ and its tests only).
 * What every backend shares (the event queue and its bound, connection
 * slots and handles, send queues, receive-buffer lending) is in
 * nic_common.h, with the lifecycles every backend keeps; limits and the
 * handle layout are in nic_backend.h. This file adds what the kernel's
 * part needs.
 *
 * Locality: everything here belongs to one NIC core; nothing is shared.
 *
 * The io_uring parts of those lifecycles:
 *
 *   connection slot:  OPEN --peer EOF / error / nic_close--> CLOSING (shutdown
 *                     and cancel issued, ops still in flight) --last CQE-->
 *                     CLOSED (fd closed, nic_slot_closed) ...
 *     A slot is reused only after every op on its fd has posted its final
 *     CQE, so a CQE can never land on the wrong connection.
 *
 *   send queue: of the unfinished entries [tx_done, tx_tail), the first
 *     tx_sending are in the one SENDMSG in flight (at most one per
 *     connection, which keeps the byte order), tx_sending_bytes in all.
 *
 *   receive buffer: in the kernel's buffer ring (multishot) or our free
 *     stack (single-shot; the armed recv holds rx_bid) -> DATA -> ... ->
 *     nic_rx_release -> back into the ring or the stack.
 */
#ifndef SLUICE_NIC_INTERNAL_H
#define SLUICE_NIC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "nic.h"
#include "nic_common.h"

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
	struct nic_slot s;       /* first (nic_common.h): gen, state, send queue counters */
	int fd;
	uint8_t flags;           /* NIC_CF_* */
	uint16_t inflight;       /* SQEs whose final CQE has not arrived */
	uint16_t rx_bid;         /* single-shot mode: buffer of the armed recv */
	int close_status;        /* reported in CLOSED */
	uint32_t tx_sending;     /* entries covered by the SENDMSG in flight */
	uint64_t tx_sending_bytes;
	struct msghdr msg;       /* must stay put while the SENDMSG is in flight */
	struct iovec iov[NIC_SEND_IOV_MAX];
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
	struct nic_common cm;        /* first (nic_common.h): slots, send queues, events, rx buffers */
	struct io_uring *ring;
	int listen_fd;
	bool multishot;              /* buffer ring + multishot recv/accept */
	bool accept_armed;
	bool shutting_down;
	uint8_t listen_inflight;     /* accept + listener cancel in flight */
	uint32_t inflight;           /* all connection ops in flight */

	struct nic_conn *conns;      /* = cm.slots, typed */
	uint32_t *dirty;             /* stack of slots flush must look at */
	uint32_t dirty_n;
	uint32_t *starved;           /* FIFO of slots waiting for rx buffers */
	uint32_t starved_head, starved_n;

	struct io_uring_buf_ring *br;    /* multishot mode */
	size_t br_bytes;
	uint32_t br_mask;

	struct nic_uring_stats stats;
};

#endif
