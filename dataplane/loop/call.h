/*
 * call.h - a coordinator call: the contract between the connection side
 * (conn/) and the coordinators (control/: the transaction coordinator,
 * txncoord.c, and the group coordinator, group.c). Both include it; neither
 * includes the other's headers.
 *
 * Why a contract and not the connection's own request (struct dp_req): a
 * coordinator will later live on whichever broker leads its partition of
 * __transaction_state or __consumer_offsets, on another core or on another
 * broker. So what crosses is exactly what would cross a wire, and nothing
 * the caller or the coordinator keeps for itself:
 *   - the request header fields a coordinator reads (key, version, client id);
 *   - the decoded request, and the request bytes it points into;
 *   - the response the coordinator fills (the caller may shape it first
 *     where its shape follows the request: partition lists);
 * all inside one buffer the call owns (struct dp_call, then the body, then
 * its arena). Nothing in a call points outside it, except to static
 * strings: a name the coordinator answers with is copied into the call's
 * arena (dp_call_str), never lent from its tables, which may change (or be
 * on another machine) before the caller encodes the answer.
 *
 * The caller's ctx and gen are opaque to the coordinator: they only route
 * the answer back, as a correlation id does on a wire. A wire transport
 * would encode resp on the coordinator's side and decode it into a call on
 * the caller's; between cores of one broker the buffer itself moves. Only
 * the side that holds it touches it: the caller until it sends the call
 * and again once the answer is in, the coordinator in between (it may hold
 * it long: a JoinGroup waits for its rebalance).
 *
 * Memory: the caller takes the buffer from its own core's dp_buf pool
 * (bounded by the pool and the connection's byte budget), frees it once
 * the answer is encoded, and sizes it like a request's arena
 * (dp_limits.h). A pool that refuses gets the request the coordinators'
 * retriable COORDINATOR_LOAD_IN_PROGRESS, answered by the caller, which
 * then never sends the call. No call is copied again on the way: a
 * coordinator request is small, and holds no record data.
 *
 * Messages: DP_MSG_TXN_REQ to the transaction coordinator's service
 * (DP_SVC_TXN), DP_MSG_GROUP_REQ to one service per kind of group request
 * (DP_SVC_GROUP_*: each runs its own handler), each with u.call; the
 * answer (DP_MSG_TXN_DONE, DP_MSG_GROUP_DONE) carries the call back.
 * Locality: a call belongs to the core that holds it (see above).
 */
#ifndef SLUICE_DP_CALL_H
#define SLUICE_DP_CALL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "loop.h"
#include "kwire.h"
#include "kmsg.h"   /* the requests and responses a call carries: the Kafka schemas' */

/*
 * What a coordinator handler returns when the answer comes later or was
 * already sent: not -1, which is UNKNOWN_SERVER_ERROR and must be answered
 * now (taking it for "later" left such requests unanswered).
 */
#define DP_ANSWER_LATER INT16_MIN

struct dp_call {
	/* Routing, the transport's: the caller's context and where the answer runs. */
	void *ctx;                    /* the caller's, opaque here (returned as the answer's ctx) */
	uint32_t gen;                 /* the caller's generation of ctx */
	uint16_t src;                 /* the caller's core (dp_call_take) */
	dp_msg_fn reply;              /* what the answer runs there (dp_call_take) */
	/* The contract. */
	struct {
		int16_t api_key, api_version;
		struct kstr client_id;    /* in the call's arena */
	} hdr;
	void *req;                    /* the decoded request, in the arena */
	void *resp;                   /* the response, in the arena */
	const char *peer;             /* JoinGroup: the client's address ("/127.0.0.1"), in the arena; NULL unknown */
	uint32_t body_len;            /* request bytes after the header, copied at body (0: decoded elsewhere) */
	const uint8_t *body;
	/*
	 * Coordinator: the answer did not fit the arena (dp_call_grow). The
	 * caller sends the call again in one of grow_bytes, decoded afresh from
	 * body, at most DP_CALL_GROWS_MAX times; until then resp holds the plain
	 * error that stands if it cannot. join_as: a JoinGroup's member id, given
	 * in the answer that did not fit (in the arena; the call sent again joins
	 * as that member, and gets the current generation's answer).
	 */
	uint32_t grow_bytes;
	struct kstr join_as;
	struct karena arena;          /* the rest of the buffer */
};

/* Caller: the buffer a call needs for a request of frame_len bytes whose body is body_len of them. */
size_t dp_call_bytes(size_t frame_len, size_t body_len);
/* Caller: ... and with an arena of at least arena_min bytes (a call sent again, grow_bytes). */
size_t dp_call_bytes_min(size_t frame_len, size_t body_len, size_t arena_min);
/*
 * Caller: lay a call out in mem (bytes long, 8-byte aligned), copy the
 * header's fields and body_len bytes of body in; body NULL: the request is
 * decoded from where it lies (a refused call, answered by the caller). NULL
 * if bytes cannot hold it.
 */
struct dp_call *dp_call_init(void *mem, size_t bytes, int16_t api_key, int16_t api_version,
                             struct kstr client_id, const void *body, size_t body_len);
static inline void *dp_call_alloc(struct dp_call *call, size_t n)
{
	return karena_alloc(&call->arena, n);
}
/* A copy of p in the call's arena; *ok becomes false (and "" is returned) if it is full. */
struct kstr dp_call_str(struct dp_call *call, const char *p, size_t len, bool *ok);
/*
 * Either side: err as the answer of whatever coordinator request the call
 * carries, in the plain form (no member id, no partial result): the
 * coordinators' refusals, and the caller's when its pool refused the call.
 */
void dp_call_error(struct dp_call *call, int16_t err);
/*
 * Coordinator: the answer does not fit the call's arena. Asks the caller to
 * send the call again with DP_CALL_GROW_FACTOR times the arena (up to
 * DP_ARENA_BYTES_MAX, the bound every request's arena has); false if it is
 * that large already. The handler then answers its plain error, which the
 * client gets if the caller cannot send it again. Only for calls whose
 * second run answers the same (reads, and a JoinGroup or SyncGroup of a
 * member the first run already took: join_as).
 */
bool dp_call_grow(struct dp_call *call);

/* Coordinator: the call message m carries; notes where its answer goes. */
static inline struct dp_call *dp_call_take(const struct dp_msg *m)
{
	struct dp_call *call = m->u.call.call;
	call->src = m->src;
	call->reply = m->reply;
	return call;
}
/* Coordinator: hand the call back with its answer (type: DP_MSG_TXN_DONE or DP_MSG_GROUP_DONE). */
static inline void dp_call_answer(struct dp_core *c, struct dp_call *call, uint16_t type)
{
	struct dp_msg m = { .type = type, .ctx = call->ctx, .gen = call->gen };
	m.u.call.call = call;
	dp_answer_to(c, call->src, call->reply, &m);   /* the call's credit goes back with it */
}

#endif
