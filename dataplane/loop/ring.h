/*
 * ring.h - single-producer/single-consumer ring of fixed-size messages.
 *
 * Locality: one ring per ordered pair of cores (src -> dst). Only core src
 * calls dp_ring_enqueue_burst(), only core dst calls dp_ring_dequeue_burst().
 *
 * The producer writes slots, then publishes `tail` with a release store; the
 * consumer reads `tail` with an acquire load (pairs with that release), reads
 * the slots, then publishes `head` with a release store, which the
 * producer's acquire load of `head` pairs with before it reuses slots.
 * As DPDK's rte_ring lays it out: each side's line holds what that side
 * writes, its own index and its private cached copy of the other's index,
 * so a side's writes never dirty the line the other side writes; the other
 * side's line is only read when the cached view says the ring looks full
 * (or empty). The size, read by both and written by neither, has a line of
 * its own. A dequeue that takes nothing, or a refresh that finds the same
 * index, writes nothing (no store to a line the producer reads), and so
 * does an enqueue of nothing.
 */
#ifndef SLUICE_DP_RING_H
#define SLUICE_DP_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <assert.h>

#define DP_CACHE_LINE 64

/* A message between cores: small, fixed size, copied by value. */
#define DP_F_WIRE 1   /* the request came over the wire (ctx is a struct dp_req) */
#define DP_F_REFUSED 4 /* an answer made by the sender itself: no credit to send (core.c) */
#define DP_F_LOCAL 64  /* a request a core makes of itself (shard.c's start-up abort): its answer goes nowhere */
/* Cross-core credit (dp_limits.h, loop.h's dp_ask/dp_answer), set by the loop's helpers: */
#define DP_F_CREDIT   8  /* a request holding one credit toward its destination until answered */
#define DP_F_ANSWER   16 /* the answer to a DP_F_CREDIT request: its arrival gives the credit back */
#define DP_F_ADVISORY 32 /* a watch or its fire: holds no credit, dropped at a full backlog */

struct dp_core;
struct dp_msg;
struct dp_call;
/* What a message runs on the core it reaches (SPDK's message: function + context). */
typedef void (*dp_msg_fn)(struct dp_core *c, struct dp_msg *m);

struct dp_msg {
	dp_msg_fn fn;         /* run by the destination core: the loop knows no handler */
	dp_msg_fn reply;      /* a request's: what its answer runs back on the sender (dp_answer) */
	uint16_t type;        /* enum dp_msg_type (loop.h): the handler's own sub-kind */
	uint16_t src;         /* sending core */
	int16_t  err;         /* Kafka error code in replies */
	uint16_t flags;       /* DP_F_* */
	uint32_t topic_id;    /* catalog slot */
	int32_t  partition;
	void    *ctx;         /* requester's context, returned unchanged in the reply */
	uint32_t idx;         /* requester's sub-index (partition slot in the request) */
	uint32_t gen;         /* topic generation or context generation */
	union {
		struct { void *ptr; uint32_t len; uint32_t nbatch; void *out; } produce;
		struct { int64_t base_offset, log_start; void *out; } produce_done;
		struct { int64_t offset; void *buf; uint32_t cap, max_bytes; int8_t isolation; bool min_one; } fetch;
		struct { int64_t hw, lso, log_start; uint32_t len, need; } fetch_done;
		struct { int64_t timestamp; void *out; uint32_t work_max; int8_t isolation; } list;   /* work_max: DP_LIST_WORK_BYTES_MAX's share */
		struct { int64_t offset, timestamp; void *out; } list_done;
		struct { int64_t offset; void *out; } delrec;          /* DeleteRecords: -1 the high watermark */
		struct { int64_t low; void *out; } delrec_done;        /* the log start offset after it */
		struct { int64_t offset, deadline_ms; uint32_t topic_gen; int8_t isolation; } watch;
		struct { int64_t pid; int16_t epoch; } pid;
		struct { int64_t pid; int16_t epoch; bool commit; int32_t coord_epoch; void *ptr; uint32_t cap; } txn;
		/* conf: CREATE, struct dp_topic_configs (topicconf.h; the request's, until answered);
		 * TOPIC_ADD, struct dp_topic_conf (the control core's, live while the topic is). */
		struct { const char *name; uint32_t name_len; int32_t nparts; uint32_t hash; const void *conf; } topic;
		struct { struct dp_call *call; } call;   /* a coordinator call and its answer (call.h) */
		uint8_t raw[32];
	} u;
};
_Static_assert(sizeof(struct dp_msg) <= 80, "dp_msg should stay small");

struct dp_ring {
	/* producer's line: written by the producer only */
	_Alignas(DP_CACHE_LINE) _Atomic uint32_t tail;   /* producer's index */
	uint32_t prod_head_cache;                        /* producer's view of head */
	/* consumer's line: written by the consumer only */
	_Alignas(DP_CACHE_LINE) _Atomic uint32_t head;   /* consumer's index */
	uint32_t cons_tail_cache;                        /* consumer's view of tail */
	_Alignas(DP_CACHE_LINE) uint32_t mask;           /* size - 1, size a power of two */
	struct dp_msg slot[];
};
_Static_assert(offsetof(struct dp_ring, prod_head_cache) / DP_CACHE_LINE ==
                       offsetof(struct dp_ring, tail) / DP_CACHE_LINE &&
               offsetof(struct dp_ring, cons_tail_cache) / DP_CACHE_LINE ==
                       offsetof(struct dp_ring, head) / DP_CACHE_LINE &&
               offsetof(struct dp_ring, head) / DP_CACHE_LINE != offsetof(struct dp_ring, tail) / DP_CACHE_LINE &&
               offsetof(struct dp_ring, mask) / DP_CACHE_LINE != offsetof(struct dp_ring, head) / DP_CACHE_LINE &&
               offsetof(struct dp_ring, mask) / DP_CACHE_LINE != offsetof(struct dp_ring, tail) / DP_CACHE_LINE,
               "each side's index and private cache share that side's line, and only that");

/* init only: size must be a power of two. */
static inline void dp_ring_init(struct dp_ring *r, uint32_t size)
{
	assert(size && (size & (size - 1)) == 0);
	atomic_store_explicit(&r->head, 0, memory_order_relaxed);
	atomic_store_explicit(&r->tail, 0, memory_order_relaxed);
	r->prod_head_cache = 0;
	r->cons_tail_cache = 0;
	r->mask = size - 1;
}

static inline size_t dp_ring_bytes(uint32_t size)
{
	return sizeof(struct dp_ring) + (size_t)size * sizeof(struct dp_msg);
}

/* Producer core only. Returns how many of the n messages were enqueued. */
static inline unsigned dp_ring_enqueue_burst(struct dp_ring *r, const struct dp_msg *m, unsigned n)
{
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint32_t size = r->mask + 1;
	uint32_t free_slots = size - (tail - r->prod_head_cache);
	if (free_slots < n) {
		/* acquire: pairs with the consumer's release store of head */
		uint32_t head = atomic_load_explicit(&r->head, memory_order_acquire);
		if (head != r->prod_head_cache)
			r->prod_head_cache = head;
		free_slots = size - (tail - head);
	}
	if (n > free_slots)
		n = free_slots;
	if (n == 0)
		return 0;   /* nothing to publish: no store */
	for (unsigned i = 0; i < n; i++)
		r->slot[(tail + i) & r->mask] = m[i];
	/* release: slots are written before the consumer can see the new tail */
	atomic_store_explicit(&r->tail, tail + n, memory_order_release);
	return n;
}

/* Consumer core only. Returns how many messages were copied to m (<= max). */
static inline unsigned dp_ring_dequeue_burst(struct dp_ring *r, struct dp_msg *m, unsigned max)
{
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t avail = r->cons_tail_cache - head;
	if (avail < max) {
		/* acquire: pairs with the producer's release store of tail */
		uint32_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
		if (tail != r->cons_tail_cache)
			r->cons_tail_cache = tail;
		avail = tail - head;
	}
	if (avail > max)
		avail = max;
	if (avail == 0)
		return 0;   /* took nothing: writes nothing */
	for (unsigned i = 0; i < avail; i++)
		m[i] = r->slot[(head + i) & r->mask];
	/* release: slots are read before the producer may overwrite them */
	atomic_store_explicit(&r->head, head + avail, memory_order_release);
	return avail;
}

/* Consumer core: true if nothing is waiting (re-reads the producer's tail). */
static inline int dp_ring_empty(struct dp_ring *r)
{
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	return atomic_load_explicit(&r->tail, memory_order_acquire) == head;
}

#endif
