/*
 * nic_common.h - the backend-independent half of a NIC backend (nic/ and its
 * tests only): the event queue and its bound, the connection slots with their
 * handle generations, the per-connection send queues, and the lending of
 * receive buffers. nic_uring.c (kernel sockets, nic_internal.h) and
 * nic_sim.c (in memory) are both built on it, and so is any later backend
 * (DPDK): a backend only moves bytes and says when.
 *
 * nic_common.c holds what is off the per-event path or the same in every
 * backend (config check, allocation, nic_poll, nic_local_port), compiled
 * into each backend's library. The helpers below are static inline, so a
 * backend's completion path makes no call through a pointer and no call at
 * all for the shared bookkeeping.
 *
 * How a backend is built on it:
 *   - its struct nic has struct nic_common as its FIRST member, named cm
 *     (nic_poll and nic_local_port reach it from the struct nic pointer);
 *   - its connection slot has struct nic_slot as its FIRST member, named s;
 *     nic_common_init allocates conns_max of them, slot_bytes each, at
 *     cm.slots (the backend reads them through its own typed pointer);
 *   - it queues events only through these helpers, which keep the bound.
 * Each backend _Static_asserts both offsets.
 *
 * Locality: NIC core (one backend instance per core; nothing shared).
 *
 * Lifecycles, so the invariants below can be checked:
 *
 *   connection slot:  FREE --accept: nic_slot_open--> OPEN --peer EOF / error /
 *                     nic_close--> (the backend's own closing; nic_uring:
 *                     CLOSING while its ops are in flight) --> CLOSED
 *                     (nic_slot_closed: every unsent buffer's SENT, then
 *                     CLOSED queued) --CLOSED delivered by nic_poll--> FREE
 *                     (generation bumped)
 *     A handle is idx | gen << NIC_CONN_IDX_BITS, gen 1..4095 (never 0, so
 *     no valid handle is 0); it names its slot only while the slot is OPEN
 *     with that generation (nic_slot_find), so an event or call can never
 *     reach a later connection in the same slot.
 *
 *   send queue entry (per connection ring of NIC_TXQ_MAX, monotonic counters):
 *       [tx_head, tx_done)   finished; SENT event queued, not yet delivered
 *       [tx_done, tx_tail)   not finished; tx_off bytes of entry tx_done
 *                            already went out (nic_uring: the first
 *                            tx_sending of them are in its one SENDMSG)
 *     An entry is reusable only once its SENT event was delivered, so the
 *     event queue can never hold more than NIC_TXQ_MAX SENT per slot.
 *
 *   receive buffer: with the backend (nic_uring: the kernel's buffer ring, or
 *     the free stack here in single-shot mode; nic_sim: the free stack) ->
 *     DATA event queued (nic_rx_lend) -> application -> nic_rx_release
 *     (nic_rx_unlend) -> with the backend.
 *
 * Event queue bound (why it cannot overflow): per slot at most one OPEN, one
 * CLOSED and NIC_TXQ_MAX SENT (slots and send entries are recycled only when
 * their event is delivered), plus at most rx_bufs DATA (each holds a buffer):
 *     evq_cap = conns_max * (2 + NIC_TXQ_MAX) + rx_bufs
 */
#ifndef SLUICE_NIC_COMMON_H
#define SLUICE_NIC_COMMON_H

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "nic.h"
#include "nic_backend.h"

#define NIC_TXQ_MASK  (NIC_TXQ_MAX - 1u)
#define NIC_GEN_MASK  ((1u << NIC_CONN_GEN_BITS) - 1u)
#define NIC_IDX_MASK  (NIC_CONNS_LIMIT - 1u)
#define NIC_SLOT_NONE UINT32_MAX       /* nic_slot_find: the handle names no open slot */

enum nic_conn_state {
	NIC_CONN_FREE = 0,
	NIC_CONN_OPEN,
	NIC_CONN_CLOSING,        /* nic_uring only: cancel issued, ops still in flight */
	NIC_CONN_CLOSED,         /* CLOSED queued, not yet delivered */
};

/* The shared head of every backend's connection slot. Locality: NIC core. */
struct nic_slot {
	uint16_t gen;            /* 1..4095 */
	uint8_t state;           /* enum nic_conn_state */
	uint8_t pad;
	uint32_t tx_head, tx_done, tx_tail;   /* see top of file */
	uint32_t tx_off;
	struct nic_tx *tx;       /* its ring of NIC_TXQ_MAX in cm.txq (set at init) */
};

/* What every backend's struct nic starts with. Locality: NIC core. */
struct nic_common {
	uint32_t conns_max, rx_bufs, rx_buf_bytes;
	uint16_t port;               /* the bound port */

	void *slots;                 /* conns_max backend slots, slot_bytes apart */
	size_t slot_bytes;
	uint32_t *free_slots;        /* stack */
	uint32_t free_n;
	struct nic_tx *txq;          /* conns_max send rings of NIC_TXQ_MAX entries */

	struct nic_iev *evq;         /* FIFO, see bound at top of file */
	uint32_t evq_cap, evq_head, evq_n;

	uint8_t *rx_mem;             /* rx_bufs * rx_buf_bytes */
	size_t rx_mem_bytes;
	uint8_t *rx_out;             /* per buffer: 1 while queued or with the app */
	uint32_t rx_held;            /* buffers with rx_out set */
	uint16_t *rx_free;           /* free stack, where the backend keeps buffers itself */
	uint32_t rx_free_n;
};

/* ---- nic_common.c (init only, and the two nic.h functions it defines) ---- */

/* The limits every backend takes: 0 or -EINVAL. Locality: init only. */
int nic_config_check(const struct nic_config *cfg);
/*
 * Size and allocate the shared tables for a checked cfg: conns_max slots of
 * slot_bytes (zeroed, generation 1, all free, slot 0 handed out first), the
 * send rings, the event queue at its bound, and rx_bufs receive buffers, all
 * on the free stack. 0 or -ENOMEM; on failure nic_common_free still frees
 * what was taken. Locality: init only.
 */
int nic_common_init(struct nic_common *cm, const struct nic_config *cfg, size_t slot_bytes);
void nic_common_free(struct nic_common *cm);

/* ---- handles and slots ---------------------------------------------------- */
/* The helpers that take both a slot s and its index idx want s to be slot idx
 * (the backend has it at hand, typed; recomputing it costs a multiply). */

static inline uint32_t nic_handle(uint32_t idx, uint32_t gen)
{
	return idx | gen << NIC_CONN_IDX_BITS;
}

static inline uint16_t nic_gen_next(uint16_t gen)
{
	gen = (uint16_t)((gen + 1u) & NIC_GEN_MASK);
	return gen ? gen : 1u;
}

static inline struct nic_slot *nic_slot_at(const struct nic_common *cm, uint32_t idx)
{
	assert(idx < cm->conns_max);
	return (struct nic_slot *)(void *)((uint8_t *)cm->slots + (size_t)idx * cm->slot_bytes);
}

/* The slot an application handle names, or NIC_SLOT_NONE when it is stale,
 * out of range or no longer OPEN. */
static inline uint32_t nic_slot_find(const struct nic_common *cm, uint32_t handle)
{
	uint32_t idx = handle & NIC_IDX_MASK;
	if (idx >= cm->conns_max)
		return NIC_SLOT_NONE;
	const struct nic_slot *s = nic_slot_at(cm, idx);
	if (s->gen != handle >> NIC_CONN_IDX_BITS || s->state != NIC_CONN_OPEN)
		return NIC_SLOT_NONE;
	return idx;
}

/* ---- event queue ---------------------------------------------------------- */

static inline void nic_evq_push(struct nic_common *cm, uint8_t kind, uint32_t idx, uint16_t bid,
				uint32_t len, int status)
{
	assert(cm->evq_n < cm->evq_cap); /* bound proven at the top of this file */
	uint32_t at = cm->evq_head + cm->evq_n;
	if (at >= cm->evq_cap)
		at -= cm->evq_cap;
	cm->evq[at] = (struct nic_iev){ .kind = kind, .bid = bid, .idx = idx, .len = len,
					.status = status };
	cm->evq_n++;
}

/* FREE -> OPEN on the next free slot (the caller checked free_n), OPEN
 * queued. Returns the slot index. */
static inline uint32_t nic_slot_open(struct nic_common *cm)
{
	assert(cm->free_n > 0);
	uint32_t idx = cm->free_slots[--cm->free_n];
	struct nic_slot *s = nic_slot_at(cm, idx);
	assert(s->state == NIC_CONN_FREE && s->tx_head == s->tx_tail);
	s->state = NIC_CONN_OPEN;
	s->tx_head = s->tx_done = s->tx_tail = 0;
	s->tx_off = 0;
	nic_evq_push(cm, NIC_EV_OPEN, idx, 0, 0, 0);
	return idx;
}

/* -> CLOSED once the backend holds nothing of the connection any more: every
 * unsent buffer reported (SENT -ECANCELED, in order), then CLOSED. The slot is
 * freed when nic_poll delivers CLOSED. */
static inline void nic_slot_closed(struct nic_common *cm, struct nic_slot *s, uint32_t idx,
				   int status)
{
	assert(s->state == NIC_CONN_OPEN || s->state == NIC_CONN_CLOSING);
	assert(status <= 0);
	for (; s->tx_done != s->tx_tail; s->tx_done++)
		nic_evq_push(cm, NIC_EV_SENT, idx, 0, 0, -ECANCELED);
	s->tx_off = 0;
	s->state = NIC_CONN_CLOSED;
	nic_evq_push(cm, NIC_EV_CLOSED, idx, 0, 0, status);
}

/* ---- send queue ----------------------------------------------------------- */

static inline struct nic_tx *nic_txq_at(const struct nic_slot *s, uint32_t pos)
{
	return &s->tx[pos & NIC_TXQ_MASK];
}

/* nic_send's queueing: 0, or -ENOBUFS when the ring is full. */
static inline int nic_txq_put(struct nic_slot *s, const void *data, uint32_t len, void *cookie)
{
	if (s->tx_tail - s->tx_head == NIC_TXQ_MAX)
		return -ENOBUFS;
	*nic_txq_at(s, s->tx_tail) = (struct nic_tx){ .data = data, .cookie = cookie, .len = len };
	s->tx_tail++;
	return 0;
}

/* The unfinished entries, at most max, as a gather list starting tx_off into
 * the first; *bytes their sum. Returns how many entries it covers. */
static inline uint32_t nic_txq_gather(const struct nic_slot *s, struct iovec *iov, uint32_t max,
				      uint64_t *bytes)
{
	uint32_t cnt = s->tx_tail - s->tx_done;
	if (cnt > max)
		cnt = max;
	uint64_t sum = 0;
	for (uint32_t i = 0; i < cnt; i++) {
		const struct nic_tx *tx = nic_txq_at(s, s->tx_done + i);
		uint32_t skip = i == 0 ? s->tx_off : 0;
		assert(skip <= tx->len);
		iov[i] = (struct iovec){ .iov_base = (void *)(uintptr_t)(tx->data + skip),
					 .iov_len = tx->len - skip };
		sum += tx->len - skip;
	}
	*bytes = sum;
	return cnt;
}

/* bytes of the first cnt unfinished entries went out (bytes <= their sum):
 * SENT queued for each finished one, in order; the rest goes in a later
 * transmit. Returns true when it stopped inside an entry (a partial send). */
static inline bool nic_txq_sent(struct nic_common *cm, struct nic_slot *s, uint32_t idx,
				uint32_t cnt, uint64_t bytes)
{
	uint64_t left = bytes;
	bool partial = false;
	for (uint32_t i = 0; i < cnt; i++) {
		assert(s->tx_done != s->tx_tail);
		uint64_t rest = nic_txq_at(s, s->tx_done)->len - s->tx_off;
		if (left < rest) {
			s->tx_off += (uint32_t)left;
			left = 0;
			partial = true;
			break;
		}
		left -= rest;
		s->tx_off = 0;
		s->tx_done++;
		nic_evq_push(cm, NIC_EV_SENT, idx, 0, 0, 0);
	}
	assert(left == 0);
	return partial;
}

/* ---- receive buffers ------------------------------------------------------ */

static inline uint8_t *nic_rx_addr(const struct nic_common *cm, uint32_t bid)
{
	return cm->rx_mem + (size_t)bid * cm->rx_buf_bytes;
}

/* Buffer bid holds len received bytes for slot idx: DATA queued, the buffer
 * is the application's until nic_rx_release. */
static inline void nic_rx_lend(struct nic_common *cm, uint32_t idx, uint16_t bid, uint32_t len)
{
	assert(bid < cm->rx_bufs && !cm->rx_out[bid]);
	assert(len <= cm->rx_buf_bytes);
	cm->rx_out[bid] = 1;
	cm->rx_held++;
	nic_evq_push(cm, NIC_EV_DATA, idx, bid, len, 0);
}

/* nic_rx_release's check: the buffer of a delivered DATA event comes back;
 * returns its id for the backend to reuse. */
static inline uint16_t nic_rx_unlend(struct nic_common *cm, const struct nic_ev *ev)
{
	assert(ev && ev->kind == NIC_EV_DATA);
	uint32_t bid = ev->buf_id;
	assert(bid < cm->rx_bufs);
	assert(cm->rx_out[bid]); /* double release */
	assert(ev->data == nic_rx_addr(cm, bid));
	cm->rx_out[bid] = 0;
	assert(cm->rx_held > 0);
	cm->rx_held--;
	return (uint16_t)bid;
}

static inline void nic_rx_free_push(struct nic_common *cm, uint16_t bid)
{
	assert(bid < cm->rx_bufs && cm->rx_free_n < cm->rx_bufs);
	cm->rx_free[cm->rx_free_n++] = bid;
}

static inline uint16_t nic_rx_free_pop(struct nic_common *cm)
{
	assert(cm->rx_free_n > 0);
	return cm->rx_free[--cm->rx_free_n];
}

#endif
