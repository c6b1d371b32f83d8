/*
 * conn_internal.h - the NIC side's own types and the calls between its parts
 * (inside dataplane/conn/ only): connections, a Fetch's partitions, the
 * request handlers. Locality: NIC core (the core that owns the connection).
 */
#ifndef SLUICE_DP_CONN_INTERNAL_H
#define SLUICE_DP_CONN_INTERNAL_H

#include "kerr.h"
#include "conn.h"
#include "shard.h"

/* conn.c: the connections' parts in the loop (conn_role.c). */
struct nic_ev;
void dp_conn_event(struct dp_core *c, const struct nic_ev *ev);
void dp_conn_timer(struct dp_core *c);
void dp_conns_shutdown(struct dp_core *c);

/* NIC core: one client connection. */
struct dp_conn {
	uint32_t handle;              /* nic handle; 0 = free slot */
	bool closing;                 /* nic_close() called or peer gone */
	bool closed;                  /* NIC_EV_CLOSED seen */
	uint8_t size_buf[4];
	uint32_t size_have;
	uint8_t *frame;               /* frame being assembled (pool buffer) */
	uint32_t frame_len, frame_have;
	struct dp_req *q_head, *q_tail; /* requests in arrival order */
	uint32_t nreqs;
	uint32_t sends_inflight;
	bool paused;                  /* too many requests unfinished: reads stopped (nic_pause) */
	bool pool_wait;               /* paused for the core's empty pool (dp_conn_timer resumes it) */
	bool draining;                /* the peer left while paused: what it sent is still processed */
	bool resuming;                /* inside conn_resume: the slot must not be freed under it */
	uint32_t resume_started;      /* requests this resume started (DP_CONN_RESUME_REQS_MAX) */
	bool drain_slot;              /* counted in the core's ndraining */
	uint8_t *stash;               /* bytes received while paused, not yet framed (pool buffer) */
	uint32_t stash_len, stash_cap;
	uint32_t frame_cap;           /* bytes k->frame can take; grows as the frame arrives */
	uint64_t held_bytes;          /* held by its requests: frames, arenas, fetch buffers, answers (dp_limits.h) */
	uint64_t unsent_bytes;        /* of those, answers not yet sent */
	uint64_t buf_bytes;           /* its own buffers: the frame being read and the stash */
};

/* Per partition of a Fetch, on the NIC core. */
struct dp_fetch_part {
	struct FetchResponse_PartitionData *out;
	uint32_t topic_id, gen;
	int32_t partition;
	int owner;
	int64_t offset;
	uint32_t part_max;            /* PartitionMaxBytes, clamped to DP_FETCH_RESPONSE_MAX_BYTES */
	uint32_t max_bytes;           /* what the owner may read: part_max within the request's MaxBytes */
	uint8_t *buf;                 /* lent to the owner, freed here */
	uint32_t cap;                 /* 0: no buffer, only offsets and watermarks asked (max_bytes 0) */
	bool min_one;                 /* may read its first batch whole past max_bytes (KIP-74: first with records) */
	bool cut;                     /* records cut to MaxBytes (fetch_limit_response): more would not fit */
	bool ready;                   /* fetch_round: prepared, to be asked of its owner */
	bool deferred;                /* no credit toward its owner when asked: asked when an answer of this
	                               * request gives one back (fetch_deferred), else answered with the error */
};


/* api.c: request handlers. Return 0, or -1 to close the connection. */
int  dp_handle_request(struct dp_core *c, struct dp_req *r);
/* A part came back: update the response; returns true when the request may finish. */
void dp_handle_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m);
/* All parts are in: may start another round (long poll); false means encode now. */
bool dp_handle_more(struct dp_core *c, struct dp_req *r);
/* Encode the response into r->resp_buf; returns 0 or -errno. */
int  dp_encode_response(struct dp_core *c, struct dp_req *r);
/* Release per-request buffers (fetch buffers). */
void dp_req_release(struct dp_core *c, struct dp_req *r);

/*
 * A request's names, sorted to find those given twice in O(n log n) (a request
 * may hold millions): dup[idx] = whether names[]'s entry idx shares its kind
 * (a resource type, or 0) and name with another; names[] is left sorted (api.c).
 */
struct name_at {
	struct kstr name;
	int32_t idx;
	int32_t kind;
};
void names_mark_dups(struct name_at *names, int32_t n, bool *dup);

/* configapi.c: the names of the configs (n entries, stride bytes apart, a struct kstr Name and
 * Value at those offsets) whose value is null, after prefix and joined with ",", from r's arena:
 * {NULL, -1} when none is, len -2 when the arena is spent. */
struct kstr dp_null_values_why(struct dp_req *r, const void *configs, int32_t n, size_t stride,
                               size_t name_off, size_t value_off, const char *prefix);

/* conn.c */
void dp_req_part_done(struct dp_core *c, struct dp_req *r);
void dp_req_park(struct dp_core *c, struct dp_req *r);
void *dp_req_alloc(struct dp_req *r, size_t bytes);
/* A pool buffer held by r (counted against its connection's and core's budget), and its return. */
void *dp_req_buf_try_get(struct dp_core *c, struct dp_req *r, size_t bytes);   /* NULL if none */
void  dp_req_buf_put(struct dp_core *c, struct dp_req *r, void *p, size_t bytes);

/*
 * Response shaping: the answers whose shape follows the request, topic by
 * topic and partition by partition (Produce, Fetch, ListOffsets,
 * WriteTxnMarkers, DescribeProducers), each partition either refused here or
 * asked of its owner shard. Memory comes from the request's arena, which is
 * bounded (DP_ARENA_BYTES_MAX): a client's counts never size anything else.
 */

/* A request array's count as a response count: a null array (-1) has none. */
static inline int32_t dp_count(int32_t n)
{
	return n > 0 ? n : 0;
}

/*
 * obj->Field becomes an array of count entries (a request's count; negative
 * is none) from r's arena, and obj->Field_n its length: true, or false when
 * the arena is spent (the handler returns -1: the connection is closed). An
 * empty array takes nothing (NULL; the encoders never read it).
 */
#define DP_RESP_ARRAY(r, obj, Field, count)                                                 \
	(((obj)->Field##_n = dp_count(count)) == 0                                          \
	 ? ((obj)->Field = NULL, true)                                                      \
	 : ((obj)->Field = dp_req_alloc((r), sizeof(*(obj)->Field) * (size_t)(obj)->Field##_n)) != NULL)

/* The live topic a request names, and its catalog slot in *id; NULL (and -1)
 * when there is none (an empty or null name names none). */
static inline struct dp_topic *dp_topic_named(struct dp_core *c, struct kstr name, int32_t *id)
{
	*id = name.len > 0 ? dp_topic_find(c, name.ptr, (size_t)name.len) : -1;
	return *id >= 0 ? &c->topics[*id] : NULL;
}

/* Whether partition part of t (NULL: no such topic) exists. */
static inline bool dp_part_known(const struct dp_topic *t, int32_t part)
{
	return t && part >= 0 && part < t->nparts;
}

/*
 * Where a per-partition ask goes: KERR_NONE with its owner core in *owner and
 * credit toward it for one message; KERR_UNKNOWN_TOPIC_OR_PARTITION; or busy
 * (the API's retriable code) when there is no credit toward the owner
 * (dp_limits.h): that partition is answered busy, not queued.
 */
static inline enum kerr dp_part_route(struct dp_core *c, const struct dp_topic *t, int32_t part,
                                      enum kerr busy, int *owner)
{
	if (!dp_part_known(t, part))
		return KERR_UNKNOWN_TOPIC_OR_PARTITION;
	*owner = dp_owner_core(c->b, t->hash, part);
	return dp_send_room(c, *owner, 1) ? KERR_NONE : busy;
}

/* A per-partition ask of r about partition part of topic t (slot id). */
static inline struct dp_msg dp_part_msg(struct dp_req *r, uint16_t type, int32_t id,
                                        const struct dp_topic *t, int32_t part)
{
	return (struct dp_msg){ .type = type, .ctx = r, .topic_id = (uint32_t)id, .gen = t->gen,
	                        .partition = part };
}

/* Ask the owner (dp_part_route said there is credit); the answer comes back
 * through dp_req_complete_part, and r waits for it. */
static inline void dp_ask_part(struct dp_core *c, struct dp_req *r, int owner, dp_msg_fn fn,
                               struct dp_msg *m)
{
	r->pending++;
	dp_ask(c, owner, fn, dp_req_complete_part, m);
}

/*
 * NIC core: a coordinator call for r (loop/call.h), a pool buffer held by r
 * with r's header fields and the body rd has left copied in; *crd reads
 * that copy. The pool refusing, the call is laid out in r's own arena
 * instead (decoded from r's frame), and dp_call_send answers it here with
 * the retriable COORDINATOR_LOAD_IN_PROGRESS. NULL: not even that fits,
 * or the call could never be had (over DP_BUF_MAX_BYTES, a frame near
 * --max-frame-bytes' top): the connection is closed, as for any arena that
 * runs out. (r's own arena, sized by conn.c before the request is known,
 * is then used only by such a refusal.)
 */
struct dp_call *dp_call_begin(struct dp_core *c, struct dp_req *r, const struct kreader *rd, struct kreader *crd);
/* NIC core: send the shaped call to the service svc runs (type: DP_MSG_TXN_REQ or DP_MSG_GROUP_REQ). */
void dp_call_send(struct dp_core *c, struct dp_req *r, struct dp_call *call, enum dp_service svc, uint16_t type);
/* NIC core: the call's answer is in: r's response is the call's (encoded from it, then freed),
 * unless the coordinator asked for a larger arena (grow_bytes): then the call is sent again. */
void dp_call_done(struct dp_core *c, struct dp_req *r, const struct dp_msg *m);

/* A handler that only decodes Name##Request into a call, starts
 * Name##Response there from its schema defaults, and sends the call. */
#define DP_CALL_HANDLER(Name, svc, type)                                                   \
	static int Name##_start(struct dp_core *c, struct dp_req *r, struct kreader *rd)    \
	{                                                                                  \
		struct kreader crd;                                                        \
		struct dp_call *call = dp_call_begin(c, r, rd, &crd);                      \
		if (!call)                                                                 \
			return -1;                                                         \
		struct Name##Request *q = dp_call_alloc(call, sizeof(*q));                 \
		struct Name##Response *resp = dp_call_alloc(call, sizeof(*resp));          \
		if (!q || !resp || Name##Request_decode(&crd, call->hdr.api_version, q, &call->arena) < 0) \
			return -1;                                                         \
		Name##Response_init(resp);                                                 \
		call->req = q;                                                             \
		call->resp = resp;                                                         \
		dp_call_send(c, r, call, svc, type);                                       \
		return 0;                                                                  \
	}

/* txnapi.c */
int  dp_txn_init_producer(struct dp_core *c, struct dp_req *r, struct kreader *rd);
int  dp_txn_handle(struct dp_core *c, struct dp_req *r, struct kreader *rd);
void dp_txn_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m);

/* groupapi.c */
int  dp_group_handle(struct dp_core *c, struct dp_req *r, struct kreader *rd);
/* configapi.c: DescribeConfigs, answered on this core. */
int  dp_describe_configs(struct dp_core *c, struct dp_req *r, struct kreader *rd);
/* configapi.c: AlterConfigs and IncrementalAlterConfigs, each topic's sent to the control core;
 * dp_alter_configs_part takes its answer. */
int  dp_alter_configs(struct dp_core *c, struct dp_req *r, struct kreader *rd);
int  dp_incremental_alter_configs(struct dp_core *c, struct dp_req *r, struct kreader *rd);
void dp_alter_configs_part(struct dp_req *r, struct dp_msg *m);
/* api.c: a request's message to the control core (a create, delete, grow or alter of a topic). */
void dp_ask_control(struct dp_core *c, struct dp_req *r, uint16_t type, uint32_t idx, struct kstr name,
                    int32_t nparts, uint16_t flags, const void *conf);

/* produce.c / fetch.c */
int  dp_produce_start(struct dp_core *c, struct dp_req *r, struct kreader *rd);
void dp_produce_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m);
int  dp_fetch_start(struct dp_core *c, struct dp_req *r, struct kreader *rd);
void dp_fetch_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m);
bool dp_fetch_more(struct dp_core *c, struct dp_req *r);
void dp_fetch_release(struct dp_core *c, struct dp_req *r);
int  dp_list_offsets_start(struct dp_core *c, struct dp_req *r, struct kreader *rd);
void dp_list_offsets_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m);
int  dp_delete_records_start(struct dp_core *c, struct dp_req *r, struct kreader *rd);
void dp_delete_records_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m);

#endif
