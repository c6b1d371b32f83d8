/*
 * conn.h - the NIC side (dataplane/conn/), what other roles and the loop may
 * call. Locality: NIC core (the core that owns the connection).
 *
 * One Kafka request in flight: it owns its frame buffer and a bump arena for
 * the decoded structs; parts of it travel to owner cores as dp_msg and come
 * back. When nothing is pending the response is encoded, and responses
 * leave in arrival order. A coordinator request goes as a call (loop/call.h),
 * which owns a copy of what the coordinator needs; nothing here is lent.
 */
#ifndef SLUICE_DP_CONN_H
#define SLUICE_DP_CONN_H

#include "loop.h"
#include "call.h"
#include "kwire.h"
#include "kmsg.h"

struct dp_fetch_part;

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
	uint32_t deferred;            /* partitions refused for credit, to be asked again (fetch_deferred) */

	/* A coordinator request: its call (call.h), a pool buffer of call_bytes
	 * held by r (NULL: none, or refused and shaped in r's arena). */
	struct dp_call *call;
	size_t call_bytes;
	uint32_t call_arena_min;      /* the call being sent again: its arena at least this (grow_bytes) */
	uint8_t call_grows;           /* times it was sent again, at most DP_CALL_GROWS_MAX */
	uint16_t call_again_type;     /* on the core's calls_again list: the answer's type */
	struct dp_req *call_again_next;
	struct kstr call_join_as;     /* ... and the member id it joins as (in the call it replaces) */

	/* Produce/ListOffsets: flat slot -> response partition. */
	void **slots;
	uint32_t nslots;
	void *slots_mem;              /* pool buffer for large responses (Metadata) */
};


/* conn_role.c: main.c gives it to every data core (dp_core_add_role). */
extern const struct dp_role dp_conn_role;

/* conn.c */
void dp_req_complete_part(struct dp_core *c, struct dp_msg *m);
/* The calls whose answers asked for a larger arena, sent again (each turn, at its end): work done. */
int  dp_calls_again(struct dp_core *c);

#endif
