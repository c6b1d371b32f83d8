/*
 * conn.c - connections on a NIC core: framing, the in-order response queue,
 * request contexts. Locality: NIC core.
 */
#include <errno.h>
#include <string.h>

#include "kerr.h"
#include "nic.h"
#include "conn_internal.h"

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/*
 * A connection's slot: any free one, taken at NIC_EV_OPEN and found again
 * through conn_map by the nic's index. The nic reuses an index as soon as
 * the connection closed; after NIC_EV_CLOSED no event names the old handle
 * again, so the map may then point at the next connection while the old
 * slot finishes (see conn_free_if_idle).
 */
static struct dp_conn *conn_of(struct dp_core *c, uint32_t handle)
{
	struct dp_conn *k = &c->conns[c->conn_map[handle % DP_CONNS_MAX]];
	return k->handle == handle ? k : NULL;
}

/* Held bytes (dp_limits.h): r's, its connection's and the core's move together. */
/* What a frame decodes to per wire byte (dp_limits.h): each array's elements,
 * rounded up as the arena places them, within the bound, in every version. */
#define DP_ARENA_ELEM_FITS(msg, field, size, wire_min)                                                 \
	_Static_assert(((size) + KARENA_ALIGN - 1) / KARENA_ALIGN * KARENA_ALIGN <=                         \
	                       DP_ARENA_DECODE_PER_WIRE_BYTE * (size_t)(wire_min),                          \
	               #msg "." #field ": its elements decode to more per wire byte than the arena allows");
KMSG_REQUEST_ARRAYS(DP_ARENA_ELEM_FITS)

static void hold(struct dp_core *c, struct dp_req *r, int64_t delta)
{
	assert(delta >= 0 || (uint64_t)-delta <= r->held_bytes);
	r->held_bytes += (uint64_t)delta;
	r->conn->held_bytes += (uint64_t)delta;
	c->held_bytes += (uint64_t)delta;
}

/*
 * The connection's own buffers (the frame being read, the stash) count
 * against the core's budget, not against its own allowance: only resuming
 * it empties them, so they must not be what keeps it paused.
 */
static void conn_bufs(struct dp_core *c, struct dp_conn *k, int64_t delta)
{
	assert(delta >= 0 || (uint64_t)-delta <= k->buf_bytes);
	k->buf_bytes += (uint64_t)delta;
	c->held_bytes += (uint64_t)delta;
}

void *dp_req_buf_try_get(struct dp_core *c, struct dp_req *r, size_t bytes)
{
	void *p = dp_buf_try_get(bytes);
	if (p)
		hold(c, r, (int64_t)bytes);
	return p;
}

void dp_req_buf_put(struct dp_core *c, struct dp_req *r, void *p, size_t bytes)
{
	dp_buf_put(p);
	hold(c, r, -(int64_t)bytes);
}

struct dp_call *dp_call_begin(struct dp_core *c, struct dp_req *r, const struct kreader *rd, struct kreader *crd)
{
	size_t body = rd->p < rd->end ? (size_t)(rd->end - rd->p) : 0;
	size_t bytes = dp_call_bytes_min(r->frame_len, body, r->call_arena_min);
	if (bytes > DP_BUF_MAX_BYTES)
		return NULL;   /* no retry would fit: closed, as a request past DP_ARENA_BYTES_MAX is */
	void *mem = dp_fault(c, c->b->cfg.fault_call_refuse_permille) ? NULL : dp_req_buf_try_get(c, r, bytes);
	if (mem) {
		r->call = mem;   /* r holds it whatever follows: dp_req_release frees it */
		r->call_bytes = bytes;
		struct dp_call *call = dp_call_init(mem, bytes, r->hdr.api_key, r->hdr.api_version,
		                                    r->hdr.client_id, rd->p, body);
		if (!call)
			return NULL;
		call->ctx = r;
		call->gen = r->gen;
		kr_init(crd, call->body, call->body_len);
		return call;
	}
	/* Refused: shaped in what is left of r's own arena, decoded from r's frame, never sent. */
	DP_WARN_RL("connection %u: no memory for a %zu-byte coordinator call: answered COORDINATOR_LOAD_IN_PROGRESS",
	           r->conn->handle, bytes);
	size_t at = (r->arena.used + 7) & ~(size_t)7;
	size_t room = at < r->arena.cap ? (r->arena.cap - at) & ~(size_t)7 : 0;
	mem = room ? karena_alloc(&r->arena, room) : NULL;
	struct dp_call *call = mem ? dp_call_init(mem, room, r->hdr.api_key, r->hdr.api_version,
	                                          r->hdr.client_id, NULL, 0) : NULL;
	if (!call)
		return NULL;
	*crd = *rd;
	return call;
}

void dp_call_send(struct dp_core *c, struct dp_req *r, struct dp_call *call, enum dp_service svc, uint16_t type)
{
	if (!r->call) {
		/* The pool refused it (dp_call_begin): the coordinators' retriable answer, given here. */
		dp_call_error(call, KERR_COORDINATOR_LOAD_IN_PROGRESS);
		r->resp = call->resp;
		return;
	}
	assert(call == r->call);
	struct dp_msg m = { .type = type, .ctx = r, .gen = r->gen };
	m.u.call.call = call;
	r->pending++;
	dp_ask_service(c, svc, dp_req_complete_part, &m);
}

/*
 * The coordinator's answer did not fit the call's arena (call.h
 * dp_call_grow): send the request again in a larger call, decoded afresh
 * from the first call's copy of its body by the API's own handler. True if
 * it went (r waits for it); false leaves the first call and its plain error
 * as the answer: past the core's byte budget, or no buffer for it (the
 * handler then shaped a refusal in r's own arena, which is not used).
 */
static bool call_again(struct dp_core *c, struct dp_req *r, uint16_t type)
{
	struct dp_call *old = r->call;
	size_t old_bytes = r->call_bytes;
	if (c->held_bytes + old->grow_bytes > DP_CORE_HELD_BYTES_MAX) {
		/* Within the core's byte budget, as every request is: the coordinator's error stands. */
		DP_WARN_RL("connection %u: a %u-byte call for an answer larger than its request's is past the "
		           "core's byte budget: answered with the coordinator's error", r->conn->handle, old->grow_bytes);
		return false;
	}
	r->call_grows++;
	r->call = NULL;
	r->resp = NULL;   /* the new call's answer sets it (at once, from a coordinator on this core) */
	r->call_arena_min = old->grow_bytes;
	r->call_join_as = old->join_as;
	struct kreader rd;
	kr_init(&rd, old->body, old->body_len);
	int rc = type == DP_MSG_GROUP_DONE ? dp_group_handle(c, r, &rd) : dp_txn_handle(c, r, &rd);
	r->call_join_as = (struct kstr){ NULL, -1 };
	if (rc < 0 || !r->call) {
		if (r->call)
			dp_req_buf_put(c, r, r->call, r->call_bytes);
		r->call = old;
		r->call_bytes = old_bytes;
		r->resp = old->resp;
		DP_WARN_RL("connection %u: no %u-byte call for an answer larger than its request's: "
		           "answered with the coordinator's error", r->conn->handle, old->grow_bytes);
		return false;
	}
	/* Sent: the new call holds its own copy of the body (dp_call_begin); r waits for its answer. */
	dp_req_buf_put(c, r, old, old_bytes);
	return true;
}

void dp_call_done(struct dp_core *c, struct dp_req *r, const struct dp_msg *m)
{
	assert(m->u.call.call == r->call);
	r->resp = r->call->resp;   /* encoded from the call's arena; the call is freed after (dp_req_release) */
	if (!r->call->grow_bytes || r->call_grows >= DP_CALL_GROWS_MAX || r->conn->closing)
		return;
	/*
	 * Sent again at the end of the turn, not from here: a coordinator on
	 * this core answers in the middle of its own work (a rebalance's
	 * answers), which must not take a new call before it is done. r waits
	 * for it as for a part.
	 */
	r->pending++;
	r->call_again_type = m->type;
	r->call_again_next = c->calls_again;
	c->calls_again = r;
}

int dp_calls_again(struct dp_core *c)
{
	int n = 0;
	while (c->calls_again) {
		struct dp_req *r = c->calls_again;
		c->calls_again = r->call_again_next;
		r->call_again_next = NULL;
		if (!r->conn->closing)
			call_again(c, r, r->call_again_type);
		dp_req_part_done(c, r);   /* the wait dp_call_done added */
		n++;
	}
	return n;
}

/*
 * Over the core's byte budget, or past half the credit toward another data
 * core (dp_limits.h): new requests wait (their connections pause, and
 * dp_conn_timer resumes them), so that a request's fan-out finds the other
 * half free and its partitions are asked, not refused; only a request with
 * more than that for one core is refused some. Credit toward the control
 * core is left out: calls there may wait long (a JoinGroup for its
 * rebalance), and the next member's must not wait behind them.
 */
static bool credit_over(const struct dp_core *c)
{
	uint32_t half = c->b->xmsg_credits / 2;
	for (int d = c->b->first_data; d < c->b->ncores; d++)
		if (d != c->id && c->credits_out[d] > half)
			return true;
	return false;
}

static bool core_over(const struct dp_core *c)
{
	return c->held_bytes >= DP_CORE_HELD_BYTES_MAX || credit_over(c);
}

void *dp_req_alloc(struct dp_req *r, size_t bytes)
{
	void *p = karena_alloc(&r->arena, bytes);
	return p;
}

static struct dp_req *req_get(struct dp_core *c)
{
	struct dp_req *r = c->req_free;
	if (!r)
		return NULL;
	c->req_free = r->next;
	uint32_t gen = r->gen + 1;
	memset(r, 0, sizeof(*r));
	r->gen = gen;
	return r;
}

static void req_put(struct dp_core *c, struct dp_req *r)
{
	dp_req_release(c, r);
	if (r->frame)
		dp_buf_put(r->frame);
	if (r->arena_mem)
		dp_buf_put(r->arena_mem);
	if (r->resp_buf) {
		dp_buf_put(r->resp_buf);
		assert(r->conn->unsent_bytes >= r->resp_len);
		r->conn->unsent_bytes -= r->resp_len;
	}
	hold(c, r, -(int64_t)r->held_bytes);   /* the frame and the answer */
	r->frame = r->arena_mem = r->resp_buf = NULL;
	r->gen++;
	r->next = c->req_free;
	c->req_free = r;
}

/*
 * A closed connection gives its slot back as soon as it has nothing left to
 * send and nothing left to read from its stash: requests still out at
 * other cores move to the core's detached list (they come back, finish
 * there, and their answers are dropped), so a request that waits long (a
 * JoinGroup in a rebalance) never keeps a slot from the next connection.
 */
static void conn_free_if_idle(struct dp_core *c, struct dp_conn *k)
{
	if (!k->closed || k->sends_inflight || k->resuming || (k->draining && k->paused))
		return;
	/*
	 * The coordinator is told of the group requests it holds only once the
	 * slot is free: on this core (--cores 1) it answers inside dp_send, and
	 * the rebalance that completes may finish more of this connection's
	 * requests, which would come back here and free the slot a second time.
	 * What it is told is (call, generation): one finished meanwhile is not
	 * found, and ignored. A call's buffer is freed only once its answer is
	 * here, and a later call in the same buffer goes out behind this
	 * message (one ring per core pair, in order), so the pair names no
	 * other call.
	 */
	struct { struct dp_call *call; uint32_t gen; } gone[DP_CONN_REQS_MAX + 1];
	uint32_t ngone = 0;
	while (k->q_head) {
		struct dp_req *r = k->q_head;
		k->q_head = r->next;
		r->next = NULL;
		k->nreqs--;
		if (r->done) {
			req_put(c, r);
			continue;
		}
		k->held_bytes -= r->held_bytes;
		r->conn = c->detached;
		c->detached->held_bytes += r->held_bytes;
		c->detached->nreqs++;
		if ((r->hdr.api_key == KAPI_JOIN_GROUP || r->hdr.api_key == KAPI_SYNC_GROUP) && r->call) {
			/* The coordinator may hold it for a whole rebalance: ask for it back. */
			assert(ngone < sizeof(gone) / sizeof(gone[0]));
			gone[ngone].call = r->call;
			gone[ngone++].gen = r->gen;
		}
	}
	assert(k->nreqs == 0 && k->held_bytes == 0 && k->unsent_bytes == 0);
	if (k->frame)
		dp_buf_put(k->frame);
	if (k->stash)
		dp_buf_put(k->stash);
	conn_bufs(c, k, -(int64_t)k->buf_bytes);
	if (k->pool_wait)
		c->npool_wait--;
	if (k->drain_slot)
		c->ndraining--;
	uint32_t slot = (uint32_t)(k - c->conns);
	memset(k, 0, sizeof(*k));
	assert(c->conn_free_n < DP_CONN_SLOTS);
	c->conn_free[c->conn_free_n++] = (uint16_t)slot;
	for (uint32_t i = 0; i < ngone; i++) {
		struct dp_msg m = { .type = DP_MSG_GROUP_GONE, .gen = gone[i].gen };
		m.u.call.call = gone[i].call;   /* a name only: the coordinator holds the call */
		dp_tell_service(c, DP_SVC_GROUP_GONE, &m);   /* no answer, so no credit (dp_limits.h) */
	}
}

static void conn_resume(struct dp_core *c, struct dp_conn *k);

static void conn_close(struct dp_core *c, struct dp_conn *k, const char *why)
{
	k->draining = false;   /* a broken stream: nothing more of it is trusted */
	if (k->closing)
		return;
	DP_DBG("closing connection %u: %s", k->handle, why);
	k->closing = true;
	nic_close(c->nic, k->handle);
}

/*
 * Send every finished response at the head of the queue, in arrival order.
 * A response that does not fit the NIC's per-connection queue (-ENOBUFS)
 * stays at the head and is retried after the next NIC_EV_SENT.
 */
static void conn_flush(struct dp_core *c, struct dp_conn *k)
{
	while (k->q_head && k->q_head->done) {
		struct dp_req *r = k->q_head;
		if (r->resp_buf && !k->closing) {
			int rc = nic_send(c->nic, k->handle, r->resp_buf, r->resp_len, r);
			if (rc == -ENOBUFS)
				return;
			if (rc == -ENOTCONN)
				k->closing = true;   /* the nic is closing it (peer gone): stop reading what is left */
			if (rc == 0) {
				k->sends_inflight++;
				k->q_head = r->next;
				if (!k->q_head)
					k->q_tail = NULL;
				if (r->close_after)
					k->closing = true; /* close once the response is out (on SENT) */
				continue;
			}
		}
		k->q_head = r->next;
		if (!k->q_head)
			k->q_tail = NULL;
		k->nreqs--;
		bool close_after = r->close_after;
		req_put(c, r);
		if (close_after)
			conn_close(c, k, "protocol error");
	}
	if (k->paused)
		conn_resume(c, k);
	conn_free_if_idle(c, k);
}

static void park_unlink(struct dp_core *c, struct dp_req *r)
{
	for (struct dp_req **pp = &c->parked; *pp; pp = &(*pp)->park_next)
		if (*pp == r) {
			*pp = r->park_next;
			break;
		}
	r->in_park_list = false;
	r->parked = false;
}

/* Test-only: true with the given per-mille odds (xorshift64, per core, seeded). */
static void req_finish(struct dp_core *c, struct dp_req *r)
{
	struct dp_conn *k = r->conn;
	if (r->in_park_list)
		park_unlink(c, r);
	if (k == c->detached) {   /* its connection is gone: nobody to answer */
		assert(k->nreqs > 0);
		k->nreqs--;
		r->done = true;
		req_put(c, r);
		return;
	}
	if (r->hdr.api_key == KAPI_PRODUCE && !r->no_response && !k->closing) {
		/* The batches are appended; now lose the answer so the client retries. */
		if (dp_fault(c, c->b->cfg.fault_close_permille)) {
			DP_INFO("fault injection: closing connection %u after a produce", k->handle);
			conn_close(c, k, "fault injection");
		} else if (dp_fault(c, c->b->cfg.fault_drop_permille)) {
			DP_INFO("fault injection: dropping a produce response on connection %u", k->handle);
			r->no_response = true;
		}
	}
	if (!r->no_response && !k->closing) {
		if (dp_encode_response(c, r) < 0) {
			DP_WARN_RL("cannot encode response for api %d v%d", r->hdr.api_key, r->hdr.api_version);
			r->close_after = true;
		} else {
			hold(c, r, r->resp_len);
			k->unsent_bytes += r->resp_len;
		}
	}
	dp_req_release(c, r);
	r->done = true;
	conn_flush(c, k);
}

/* A part of r finished (called after the handler recorded it). */
void dp_req_part_done(struct dp_core *c, struct dp_req *r)
{
	assert(r->pending > 0);
	if (--r->pending > 0)
		return;
	if (!r->conn->closing && dp_handle_more(c, r))
		return;   /* another round started, or parked */
	req_finish(c, r);
}

/* Called by owner replies routed through core.c. */
void dp_req_complete_part(struct dp_core *c, struct dp_msg *m)
{
	struct dp_req *r = m->ctx;
	if (m->type == DP_MSG_WATCH_FIRE) {
		/* Watches are fire-and-forget: only a parked request of the same round cares. */
		if (r->gen != m->gen || !r->parked)
			return;
		r->parked = false;
		r->woken = true;
		if (r->in_more)
			return;   /* fired synchronously while parking: dp_fetch_more loops */
		if (!dp_handle_more(c, r))
			req_finish(c, r);
		return;
	}
	dp_handle_part(c, r, m);
	dp_req_part_done(c, r);
}

void dp_req_park(struct dp_core *c, struct dp_req *r)
{
	r->parked = true;
	if (r->in_park_list)
		return;
	r->in_park_list = true;
	r->park_next = c->parked;
	c->parked = r;
}

/* A frame still arriving: the bytes its buffer holds (conn_bufs), 0 if none. */
static uint64_t partial_frame_bytes(const struct dp_conn *k)
{
	return k->frame && k->frame_have < k->frame_len ? k->frame_cap : 0;
}

/*
 * The core is (nearly) out of its byte budget and connections wait for it.
 * If part of what it holds is answers some connection does not read, or
 * frames that stopped arriving (their connections wait for room to grow
 * them, conn_data), waiting will not help: close the one with the most of
 * either (at least DP_CONN_RECLAIM_MIN_BYTES), unless what closing
 * connections will give back already leaves room for one connection's
 * allowance. Many connections each sending part of a huge frame so end
 * one by one, and the others' requests go on.
 */
static void conn_reclaim(struct dp_core *c)
{
	uint64_t freeing = 0, most = 0;
	struct dp_conn *victim = NULL;
	bool partial = false;
	for (uint32_t i = 0; i < DP_CONN_SLOTS; i++) {
		struct dp_conn *k = &c->conns[i];
		if (!k->handle)
			continue;
		/* A frame counts once its connection waits for room to grow it (of any size past
		 * the first chunk: many small ones may fill the core as well as a few big ones). */
		uint64_t frame = k->pool_wait && partial_frame_bytes(k) > DP_FRAME_CHUNK_BYTES ? partial_frame_bytes(k) : 0;
		uint64_t unsent = k->unsent_bytes >= DP_CONN_RECLAIM_MIN_BYTES ? k->unsent_bytes : 0;
		if (k->closing)
			freeing += k->unsent_bytes + k->buf_bytes;
		else if (unsent > most || frame > most)
			partial = frame > unsent, most = partial ? frame : unsent, victim = k;
	}
	if (c->held_bytes - freeing + DP_CONN_HELD_BYTES_MAX <= DP_CORE_HELD_BYTES_MAX || !victim)
		return;
	c->conns_reclaimed++;
	DP_WARN_RL("connection %u %s (%llu bytes) while the core holds %llu of its %llu bytes; closing it "
	           "(%llu closed so for the core's budget)", victim->handle,
	           partial ? "holds a frame still arriving" : "does not read its answers", (unsigned long long)most,
	           (unsigned long long)c->held_bytes, (unsigned long long)DP_CORE_HELD_BYTES_MAX,
	           (unsigned long long)c->conns_reclaimed);
	conn_close(c, victim, partial ? "frame still arriving, core over its budget" :
	                                "answers not read, core over its budget");
}

/* Parked fetches whose deadline passed (or whose connection went away) finish now. */
void dp_conn_timer(struct dp_core *c)
{
	if (c->npool_wait && c->held_bytes + DP_CONN_HELD_BYTES_MAX > DP_CORE_HELD_BYTES_MAX)
		conn_reclaim(c);
	/*
	 * Connections paused for the core (its pool ran dry, or its byte budget)
	 * resume as it recovers, starting each time after the last one resumed,
	 * so that no waiter is always behind the same others.
	 */
	for (uint32_t n = 0; c->npool_wait && c->req_free && !core_over(c) && n < DP_CONN_SLOTS; n++) {
		uint32_t i = (c->resume_next + n) % DP_CONN_SLOTS;
		struct dp_conn *k = &c->conns[i];
		if (k->handle && k->paused && k->pool_wait) {
			conn_resume(c, k);
			c->resume_next = i + 1;
		}
	}
	struct dp_req **pp = &c->parked;
	while (*pp) {
		struct dp_req *r = *pp;
		if (!r->parked) {          /* woken by a watch: drop from the list */
			*pp = r->park_next;
			r->in_park_list = false;
			continue;
		}
		if (r->deadline_ms <= c->now_ms || r->conn->closing) {
			*pp = r->park_next;
			r->in_park_list = false;
			r->parked = false;
			r->final_round = true;
			if (r->conn->closing || !dp_handle_more(c, r))
				req_finish(c, r);
			continue;
		}
		pp = &r->park_next;
	}
}

static int start_request(struct dp_core *c, struct dp_conn *k)
{
	struct dp_req *r = req_get(c);
	if (!r) {   /* conn_data checks first (can_start): only a bug gets here */
		DP_ERR_RL("request pool exhausted; closing connection");
		conn_close(c, k, "request pool exhausted");
		return -1;
	}
	r->conn = k;
	r->frame = k->frame;
	r->frame_len = k->frame_len;
	conn_bufs(c, k, -(int64_t)k->frame_cap);
	hold(c, r, k->frame_cap);
	k->frame = NULL;
	k->frame_cap = 0;
	size_t arena = DP_ARENA_BASE_BYTES + (size_t)r->frame_len * DP_ARENA_PER_FRAME_BYTE;
	if (arena > DP_ARENA_BYTES_MAX)
		arena = DP_ARENA_BYTES_MAX;   /* decoding more than that fails: the request is refused */
	r->arena_mem = dp_buf_try_get(arena);
	if (!r->arena_mem) {
		/* No memory: an empty arena fails the decode, so the connection is
		 * closed (below) and the broker goes on. */
		DP_ERR_RL("connection %u: no memory for a %zu-byte request arena", k->handle, arena);
		arena = 0;
	}
	karena_init(&r->arena, r->arena_mem, arena);
	/* All of it counts: the pool's buffer is mapped (and, reused, touched)
	 * whatever this request decodes to, so many small pipelined requests
	 * pause the connection by their arenas as by their frames. */
	hold(c, r, (int64_t)arena);

	if (k->q_tail)
		k->q_tail->next = r;
	else
		k->q_head = r;
	k->q_tail = r;
	k->nreqs++;

	r->pending = 1;  /* held by us until the handler has dispatched everything */
	if (dp_handle_request(c, r) < 0) {
		/* Protocol error: the stream can no longer be trusted. Close now;
		 * parts already sent to owners still come back and are dropped. */
		r->no_response = true;
		conn_close(c, k, "protocol error");
		dp_req_part_done(c, r);
		return -1;
	}
	dp_req_part_done(c, r);
	return 0;
}

/*
 * Flow control. A connection may have DP_CONN_REQS_MAX requests unfinished
 * (an acks=0 producer never waits for answers) and hold
 * DP_CONN_HELD_BYTES_MAX (a consumer that pipelines fetches and never reads
 * the answers), and the core DP_REQS_MAX requests and
 * DP_CORE_HELD_BYTES_MAX bytes in all; beyond that its reads pause
 * (nic_pause: the socket buffer fills and TCP slows the client) instead of
 * the connection being dropped. Bytes that were already on their way are
 * kept in the stash, and the complete frame that could not start stays in
 * k->frame. Reads resume once the connection is down to half its allowance
 * (and the core has requests and bytes free).
 */
static bool can_start(const struct dp_core *c, const struct dp_conn *k)
{
	return c->req_free && !core_over(c) && k->nreqs < DP_CONN_REQS_MAX &&
	       k->held_bytes < DP_CONN_HELD_BYTES_MAX;
}

/* Paused for the core rather than for itself: dp_conn_timer resumes it. */
static void conn_wait_core(struct dp_core *c, struct dp_conn *k)
{
	if (k->pool_wait)
		return;
	k->pool_wait = true;
	c->npool_wait++;
}

static void stash_add(struct dp_core *c, struct dp_conn *k, const uint8_t *p, uint32_t n)
{
	if (!n)
		return;
	if (k->stash_len + n > k->stash_cap) {
		uint32_t cap = k->stash_cap ? k->stash_cap : 64 * 1024;
		while (cap < k->stash_len + n)
			cap *= 2;
		uint8_t *b = dp_buf_try_get(cap);
		if (!b) {
			DP_WARN_RL("connection %u: no memory for its unread bytes (%u); closing", k->handle, cap);
			conn_close(c, k, "no memory for its unread bytes");
			return;
		}
		if (k->stash_len)
			memcpy(b, k->stash, k->stash_len);
		if (k->stash)
			dp_buf_put(k->stash);
		conn_bufs(c, k, (int64_t)cap - k->stash_cap);
		k->stash = b;
		k->stash_cap = cap;
	}
	memcpy(k->stash + k->stash_len, p, n);
	k->stash_len += n;
}

static void conn_pause(struct dp_core *c, struct dp_conn *k)
{
	if (k->paused)
		return;
	k->paused = true;
	if (credit_over(c))
		c->credit_waits++;
	if (!c->req_free || core_over(c))
		conn_wait_core(c, k);
	if (!k->closed)
		nic_pause(c->nic, k->handle, true);
	DP_DBG("connection %u: %u requests unfinished holding %llu bytes, %s; reads paused", k->handle, k->nreqs,
	       (unsigned long long)k->held_bytes,
	       k->pool_wait ? "the core's requests or bytes are used up" : "its allowance is used");
}

static void conn_data(struct dp_core *c, struct dp_conn *k, const uint8_t *p, uint32_t n);

/*
 * May a frame being read take more bytes? Its buffer counts against the
 * core's budget like a request's (conn_bufs); without this check a client
 * could open many connections, send most of a huge frame on each and never
 * the rest, and the core would hold all of them (DP_CONNS_MAX times
 * --max-frame-bytes). A frame that does not fit waits, its connection
 * paused for the core (dp_conn_timer resumes it, or conn_reclaim closes
 * it). A buffer grows by at most DP_CONN_HELD_BYTES_MAX at a time, so a
 * frame waits only when the core is within one connection's allowance of
 * its budget, which is when dp_conn_timer reclaims. One frame alone on the
 * core may always grow: a --max-frame-bytes above the core's budget must
 * not wait for ever.
 */
static bool frame_room(const struct dp_core *c, const struct dp_conn *k, uint64_t more)
{
	return c->held_bytes + more <= DP_CORE_HELD_BYTES_MAX || c->held_bytes == k->buf_bytes;
}

/* The frame waits for room: reads pause, the bytes at hand go to the stash. */
static void frame_wait(struct dp_core *c, struct dp_conn *k, const uint8_t *p, uint32_t n)
{
	c->frames_waited++;
	conn_pause(c, k);
	conn_wait_core(c, k);
	stash_add(c, k, p, n);
}

static void conn_resume(struct dp_core *c, struct dp_conn *k)
{
	if (!k->paused || (k->closing && !k->draining))
		return;
	if (!c->req_free || core_over(c)) {
		conn_wait_core(c, k);
		return;
	}
	if (k->nreqs > DP_CONN_REQS_MAX / 2 || k->held_bytes > DP_CONN_HELD_BYTES_MAX / 2) {
		/* Its own allowance holds it now: its answers going out resume it (conn_flush). */
		c->npool_wait -= k->pool_wait;
		k->pool_wait = false;
		return;
	}
	k->paused = false;
	c->npool_wait -= k->pool_wait;
	k->pool_wait = false;
	/* Requests may finish synchronously in here: the slot stays until we are done with it. */
	k->resuming = true;
	k->resume_started = 0;
	uint8_t *st = k->stash;
	uint32_t len = k->stash_len, st_cap = k->stash_cap;
	k->stash = NULL;
	k->stash_len = k->stash_cap = 0;
	bool ok = !(k->frame && k->frame_have == k->frame_len) || start_request(c, k) == 0;
	if (st) {
		if (ok)
			conn_data(c, k, st, len);   /* may pause again: the rest goes to a new stash */
		dp_buf_put(st);
		conn_bufs(c, k, -(int64_t)st_cap);
	}
	k->resuming = false;
	if (!k->paused && !k->closing)
		nic_pause(c->nic, k->handle, false);
	conn_free_if_idle(c, k);
}

/* Feed received bytes into the frame assembler; dispatch complete frames. */
static void conn_data(struct dp_core *c, struct dp_conn *k, const uint8_t *p, uint32_t n)
{
	if (k->paused) {
		stash_add(c, k, p, n);
		return;
	}
	while (n && (!k->closing || k->draining)) {
		if (!k->frame) {
			uint32_t take = 4 - k->size_have;
			if (take > n)
				take = n;
			memcpy(k->size_buf + k->size_have, p, take);
			k->size_have += take;
			p += take;
			n -= take;
			if (k->size_have < 4)
				return;
			uint32_t len = be32(k->size_buf);
			if ((int32_t)len < 8 || len > c->b->cfg.max_frame_bytes) {
				DP_WARN_RL("connection %u: frame size %d out of range (max %u); closing",
				        k->handle, (int32_t)len, c->b->cfg.max_frame_bytes);
				conn_close(c, k, "bad frame size");
				return;
			}
			/* Never sized by the client's claim: the buffer grows as the bytes come. */
			uint32_t first = len < DP_FRAME_CHUNK_BYTES ? len : DP_FRAME_CHUNK_BYTES;
			if (!frame_room(c, k, first)) {
				frame_wait(c, k, p, n);   /* the size stays in size_buf for the resume */
				return;
			}
			k->size_have = 0;
			k->frame_cap = first;
			k->frame = dp_buf_try_get(k->frame_cap);
			if (!k->frame) {
				DP_WARN_RL("connection %u: no memory for its frame (%u bytes); closing", k->handle,
				           k->frame_cap);
				k->frame_cap = 0;
				conn_close(c, k, "no memory for its frame");
				return;
			}
			conn_bufs(c, k, k->frame_cap);
			k->frame_len = len;
			k->frame_have = 0;
		}
		uint32_t take = k->frame_len - k->frame_have;
		if (take > n)
			take = n;
		if (k->frame_have + take > k->frame_cap) {
			uint32_t cap = k->frame_cap;
			while (cap < k->frame_have + take)
				cap = cap > k->frame_len / 2 ? k->frame_len : cap * 2;
			if (cap - k->frame_cap > DP_CONN_HELD_BYTES_MAX)
				cap = k->frame_cap + (uint32_t)DP_CONN_HELD_BYTES_MAX;   /* frame_room's step */
			if (!frame_room(c, k, (uint64_t)cap - k->frame_cap)) {
				frame_wait(c, k, p, n);
				return;
			}
			uint8_t *b = dp_buf_try_get(cap);
			if (!b) {
				DP_WARN_RL("connection %u: no memory for its frame (%u bytes); closing", k->handle, cap);
				conn_close(c, k, "no memory for its frame");
				return;
			}
			memcpy(b, k->frame, k->frame_have);
			dp_buf_put(k->frame);
			conn_bufs(c, k, (int64_t)cap - k->frame_cap);
			k->frame = b;
			k->frame_cap = cap;
		}
		memcpy(k->frame + k->frame_have, p, take);
		k->frame_have += take;
		p += take;
		n -= take;
		if (k->frame_have < k->frame_len)
			continue;
		if (k->closed && be16(k->frame) == KAPI_FETCH) {
			/* Draining a connection that left: a Fetch has nothing to do but its answer. */
			dp_buf_put(k->frame);
			conn_bufs(c, k, -(int64_t)k->frame_cap);
			k->frame = NULL;
			k->frame_cap = 0;
			continue;
		}
		if (k->resuming && k->resume_started++ >= DP_CONN_RESUME_REQS_MAX) {
			/*
			 * One turn's share of a stash: the rest waits for the next turn
			 * (dp_conn_timer resumes it), so that a long stash, say a client's
			 * thousands of pipelined requests, never holds the loop, and a
			 * SIGTERM, for seconds.
			 */
			conn_pause(c, k);
			conn_wait_core(c, k);
			stash_add(c, k, p, n);
			return;
		}
		if (!can_start(c, k)) {
			conn_pause(c, k);
			stash_add(c, k, p, n);
			return;
		}
		if (start_request(c, k) < 0)
			return;
	}
}

void dp_conn_event(struct dp_core *c, const struct nic_ev *ev)
{
	switch (ev->kind) {
	case NIC_EV_OPEN: {
		/* The nic holds at most DP_CONNS_MAX open and at most DP_CONN_DRAINING_MAX
		 * closed ones keep a slot (NIC_EV_CLOSED): a slot is always free. */
		assert(c->conn_free_n > 0);
		uint16_t slot = c->conn_free[--c->conn_free_n];
		struct dp_conn *k = &c->conns[slot];
		assert(!k->handle);
		memset(k, 0, sizeof(*k));
		k->handle = ev->conn;
		c->conn_map[ev->conn % DP_CONNS_MAX] = slot;
		return;
	}
	case NIC_EV_DATA: {
		struct dp_conn *k = conn_of(c, ev->conn);
		if (k)
			conn_data(c, k, ev->data, ev->len);
		nic_rx_release(c->nic, ev);
		return;
	}
	case NIC_EV_SENT: {
		struct dp_conn *k = conn_of(c, ev->conn);
		struct dp_req *r = ev->cookie;
		assert(k && r);
		k->sends_inflight--;
		k->nreqs--;
		bool close_after = r->close_after;
		req_put(c, r);
		if (close_after) {
			k->closing = false;
			conn_close(c, k, "protocol error");
		}
		conn_flush(c, k);
		return;
	}
	case NIC_EV_CLOSED: {
		struct dp_conn *k = conn_of(c, ev->conn);
		if (!k)
			return;
		/*
		 * Requests it sent before it left are still carried out (an acks=0
		 * producer expects that), also those stashed while its reads were
		 * paused; their answers are dropped. Requests still out at owners
		 * come back and are dropped by conn_flush.
		 */
		k->draining = k->paused && !k->closing;
		if (k->draining && c->ndraining >= DP_CONN_DRAINING_MAX) {
			DP_WARN_RL("connection %u left while paused and %u others still drain; what it sent "
			           "and was not read yet is dropped", k->handle, c->ndraining);
			k->draining = false;
		}
		if (k->draining) {
			k->drain_slot = true;
			c->ndraining++;
		}
		k->closing = true;
		k->closed = true;
		conn_flush(c, k);
		return;
	}
	}
}

void dp_conns_shutdown(struct dp_core *c)
{
	for (uint32_t i = 0; i < DP_CONN_SLOTS; i++)
		if (c->conns[i].handle && !c->conns[i].closing)
			conn_close(c, &c->conns[i], "shutdown");
}
