/*
 * req.h - one Kafka request in flight on a NIC core (internal to dataplane/).
 *
 * Locality: NIC core (the core that owns the connection). A request owns
 * its frame buffer and a bump arena for the decoded structs; parts of it
 * travel to owner cores as dp_msg and come back. When nothing is pending
 * the response is encoded, and responses leave in arrival order.
 */
#ifndef SLUICE_DP_REQ_H
#define SLUICE_DP_REQ_H

#include "core.h"

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
};

struct dp_req {
	struct dp_req *next;          /* connection queue / free list */
	struct dp_req *park_next;     /* parked long-poll list */
	uint32_t gen;                 /* bumped on reuse and on re-fetch rounds */
	struct dp_conn *conn;
	uint8_t *frame;               /* pool buffer, header + body, no size prefix */
	uint32_t frame_len;
	uint8_t *arena_mem;
	struct karena arena;
	struct kreq_header hdr;
	int pending;                  /* parts out at other cores (or local) */
	bool done;                    /* response ready (or none needed) */
	bool no_response;             /* acks=0 produce */
	bool close_after;             /* close the connection after this response */
	bool parked;
	uint8_t *resp_buf;            /* encoded response, freed on NIC_EV_SENT */
	uint32_t resp_len;
	uint64_t held_bytes;          /* counted in conn->held_bytes: frame, lent buffers, response */
	void *req;                    /* decoded request (arena) */
	void *resp;                   /* response struct (arena) */

	/* Fetch state. */
	struct dp_fetch_part *fparts;
	uint32_t nfparts;
	int64_t deadline_ms;
	int32_t min_bytes, max_bytes; /* max_bytes: MaxBytes clamped to [0, DP_FETCH_RESPONSE_MAX_BYTES] */
	int8_t isolation;
	bool final_round;
	bool woken;                   /* a watch fired: run another round */
	bool in_park_list;
	bool in_more;                 /* inside dp_fetch_more: a watch firing now only sets woken */
	uint32_t topups;              /* partitions read again with more of MaxBytes (fetch_topup) */

	/* JoinGroup: the client's address ("/127.0.0.1"), in the arena; NULL unknown. */
	const char *peer;

	/* Produce/ListOffsets: flat slot -> response partition. */
	void **slots;
	uint32_t nslots;
	void *slots_mem;              /* pool buffer for large responses (Metadata) */
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

/* conn.c */
void dp_req_part_done(struct dp_core *c, struct dp_req *r);
void dp_req_park(struct dp_core *c, struct dp_req *r);
void *dp_req_alloc(struct dp_req *r, size_t bytes);
/* A pool buffer held by r (counted against its connection's and core's budget), and its return. */
void *dp_req_buf_try_get(struct dp_core *c, struct dp_req *r, size_t bytes);   /* NULL if none */
void  dp_req_buf_put(struct dp_core *c, struct dp_req *r, void *p, size_t bytes);

/*
 * NIC core: lend a decoded request to the control core, which fills r->resp
 * and answers with a *_DONE message (type: DP_MSG_TXN_REQ or DP_MSG_GROUP_REQ).
 */
static inline void dp_lend_to_control(struct dp_core *c, struct dp_req *r, uint16_t type)
{
	struct dp_msg m = { .type = type, .ctx = r, .gen = r->gen };
	r->pending++;
	dp_send(c, 0, &m);
}

/* A handler that only decodes Name##Request, starts Name##Response from its
 * schema defaults, and lends both to the control core. */
/*
 * What a coordinator handler (txncoord.c, group.c) returns when the answer
 * comes later or was already sent: not -1, which is UNKNOWN_SERVER_ERROR and
 * must be answered now (taking it for "later" left such requests unanswered).
 */
#define DP_ANSWER_LATER INT16_MIN

#define DP_LEND_HANDLER(Name, type)                                                        \
	static int Name##_start(struct dp_core *c, struct dp_req *r, struct kreader *rd)    \
	{                                                                                  \
		struct Name##Request *q = dp_req_alloc(r, sizeof(*q));                     \
		struct Name##Response *resp = dp_req_alloc(r, sizeof(*resp));              \
		if (!q || !resp || Name##Request_decode(rd, r->hdr.api_version, q, &r->arena) < 0) \
			return -1;                                                         \
		Name##Response_init(resp);                                                 \
		r->req = q;                                                                \
		r->resp = resp;                                                            \
		dp_lend_to_control(c, r, type);                                            \
		return 0;                                                                  \
	}

/* txnapi.c */
int  dp_txn_init_producer(struct dp_core *c, struct dp_req *r);
int  dp_txn_handle(struct dp_core *c, struct dp_req *r, struct kreader *rd);
void dp_txn_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m);

/* groupapi.c */
int  dp_group_handle(struct dp_core *c, struct dp_req *r, struct kreader *rd);

/* produce.c / fetch.c */
int  dp_produce_start(struct dp_core *c, struct dp_req *r, struct kreader *rd);
void dp_produce_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m);
int  dp_fetch_start(struct dp_core *c, struct dp_req *r, struct kreader *rd);
void dp_fetch_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m);
bool dp_fetch_more(struct dp_core *c, struct dp_req *r);
void dp_fetch_release(struct dp_core *c, struct dp_req *r);
int  dp_list_offsets_start(struct dp_core *c, struct dp_req *r, struct kreader *rd);
void dp_list_offsets_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m);

#endif
