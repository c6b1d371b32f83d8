/*
 * conn.c - connections on a NIC core: framing, the in-order response queue,
 * request contexts. Locality: NIC core.
 */
#include <errno.h>
#include <string.h>

#include "nic.h"
#include "req.h"

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/*
 * A connection's slot: the nic's index for it, or the one DP_CONNS_MAX
 * above. The nic reuses an index as soon as the connection closed, while
 * our slot lives on until the requests it still has out at owner cores
 * come back (an acks=0 flood leaves many): the second slot takes the new
 * connection meanwhile.
 */
static struct dp_conn *conn_of(struct dp_core *c, uint32_t handle)
{
	struct dp_conn *k = &c->conns[handle % DP_CONNS_MAX];
	if (k->handle == handle)
		return k;
	k += DP_CONNS_MAX;
	return k->handle == handle ? k : NULL;
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
	if (r->resp_buf)
		dp_buf_put(r->resp_buf);
	r->frame = r->arena_mem = r->resp_buf = NULL;
	r->gen++;
	r->next = c->req_free;
	c->req_free = r;
}

static void conn_free_if_idle(struct dp_core *c, struct dp_conn *k)
{
	if (!k->closed || k->nreqs || k->sends_inflight || k->resuming || (k->draining && k->paused))
		return;
	if (k->frame)
		dp_buf_put(k->frame);
	if (k->stash)
		dp_buf_put(k->stash);
	if (k->pool_wait)
		c->npool_wait--;
	memset(k, 0, sizeof(*k));
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
static bool fault(struct dp_core *c, uint32_t permille)
{
	if (!permille)
		return false;
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 7;
	c->rng ^= c->rng << 17;
	return c->rng % 1000 < permille;
}

static void req_finish(struct dp_core *c, struct dp_req *r)
{
	struct dp_conn *k = r->conn;
	if (r->in_park_list)
		park_unlink(c, r);
	if (r->hdr.api_key == 0 && !r->no_response && !k->closing) {
		/* The batches are appended; now lose the answer so the client retries. */
		if (fault(c, c->b->cfg.fault_close_permille)) {
			DP_INFO("fault injection: closing connection %u after a produce", k->handle);
			conn_close(c, k, "fault injection");
		} else if (fault(c, c->b->cfg.fault_drop_permille)) {
			DP_INFO("fault injection: dropping a produce response on connection %u", k->handle);
			r->no_response = true;
		}
	}
	if (!r->no_response && !k->closing) {
		if (dp_encode_response(c, r) < 0) {
			DP_WARN_RL("cannot encode response for api %d v%d", r->hdr.api_key, r->hdr.api_version);
			r->close_after = true;
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

/* Parked fetches whose deadline passed (or whose connection went away) finish now. */
void dp_conn_timer(struct dp_core *c)
{
	/* Connections paused because the core's pool ran dry resume as requests free up anywhere. */
	for (uint32_t i = 0; c->npool_wait && c->req_free && i < DP_CONN_SLOTS; i++)
		if (c->conns[i].handle && c->conns[i].paused)
			conn_resume(c, &c->conns[i]);
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
	k->frame = NULL;
	size_t arena = DP_ARENA_BASE_BYTES + (size_t)r->frame_len * DP_ARENA_PER_FRAME_BYTE;
	r->arena_mem = dp_buf_get(arena);
	karena_init(&r->arena, r->arena_mem, arena);

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
 * (an acks=0 producer never waits for answers), and the core DP_REQS_MAX in
 * all; beyond that its reads pause (nic_pause: the socket buffer fills and
 * TCP slows the client) instead of the connection being dropped. Bytes that
 * were already on their way are kept in the stash, and the complete frame
 * that could not start stays in k->frame. Reads resume once the connection
 * is down to half its allowance (and the core has requests free).
 */
static bool can_start(const struct dp_core *c, const struct dp_conn *k)
{
	return c->req_free && k->nreqs < DP_CONN_REQS_MAX;
}

static void stash_add(struct dp_conn *k, const uint8_t *p, uint32_t n)
{
	if (!n)
		return;
	if (k->stash_len + n > k->stash_cap) {
		uint32_t cap = k->stash_cap ? k->stash_cap : 64 * 1024;
		while (cap < k->stash_len + n)
			cap *= 2;
		uint8_t *b = dp_buf_get(cap);
		if (k->stash_len)
			memcpy(b, k->stash, k->stash_len);
		if (k->stash)
			dp_buf_put(k->stash);
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
	k->pool_wait = !c->req_free;
	c->npool_wait += k->pool_wait;
	nic_pause(c->nic, k->handle, true);
	DP_DBG("connection %u: %u requests unfinished, %s; reads paused", k->handle, k->nreqs,
	       c->req_free ? "its allowance is used" : "the core's request pool is empty");
}

static void conn_data(struct dp_core *c, struct dp_conn *k, const uint8_t *p, uint32_t n);

static void conn_resume(struct dp_core *c, struct dp_conn *k)
{
	if (!k->paused || (k->closing && !k->draining) || !c->req_free || k->nreqs > DP_CONN_REQS_MAX / 2)
		return;
	k->paused = false;
	c->npool_wait -= k->pool_wait;
	k->pool_wait = false;
	/* Requests may finish synchronously in here: the slot stays until we are done with it. */
	k->resuming = true;
	uint8_t *st = k->stash;
	uint32_t len = k->stash_len;
	k->stash = NULL;
	k->stash_len = k->stash_cap = 0;
	bool ok = !(k->frame && k->frame_have == k->frame_len) || start_request(c, k) == 0;
	if (st) {
		if (ok)
			conn_data(c, k, st, len);   /* may pause again: the rest goes to a new stash */
		dp_buf_put(st);
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
		stash_add(k, p, n);
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
			k->size_have = 0;
			if ((int32_t)len < 8 || len > c->b->cfg.max_frame_bytes) {
				DP_WARN_RL("connection %u: frame size %d out of range (max %u); closing",
				        k->handle, (int32_t)len, c->b->cfg.max_frame_bytes);
				conn_close(c, k, "bad frame size");
				return;
			}
			k->frame = dp_buf_get(len);
			k->frame_len = len;
			k->frame_have = 0;
		}
		uint32_t take = k->frame_len - k->frame_have;
		if (take > n)
			take = n;
		memcpy(k->frame + k->frame_have, p, take);
		k->frame_have += take;
		p += take;
		n -= take;
		if (k->frame_have < k->frame_len)
			continue;
		if (!can_start(c, k)) {
			conn_pause(c, k);
			stash_add(k, p, n);
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
		struct dp_conn *k = &c->conns[ev->conn % DP_CONNS_MAX];
		if (k->handle)
			k += DP_CONNS_MAX;
		if (k->handle) {
			DP_WARN("connection slots of index %u busy (closed connections still finishing); refusing",
			        ev->conn % DP_CONNS_MAX);
			nic_close(c->nic, ev->conn);
			return;
		}
		memset(k, 0, sizeof(*k));
		k->handle = ev->conn;
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
