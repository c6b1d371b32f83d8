/*
 * nic_sim.c - the in-memory NIC backend: nic.h over simulated byte streams
 * with seeded delays, short reads and writes, resets and bounded buffers.
 * The model and how a simulator drives it: nic_sim.h.
 *
 * Locality: the simulator's thread. One struct nic_sim_net per simulated
 * network; one struct nic per simulated core (a listener on it).
 *
 * Same contract as nic_uring.c, from the same code: the slots, send queues,
 * event queue and receive-buffer lending are nic_common.h's (nic_poll and
 * nic_local_port are nic_common.c's), so the lifecycles and the event-queue
 * bound written there hold here as they do for nic_uring. There are no
 * operations in flight (the "kernel" runs inside nic_flush), so a slot goes
 * OPEN -> CLOSED with no CLOSING between; receive buffers live on the free
 * stack of nic_common.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nic.h"
#include "nic_common.h"
#include "nic_sim.h"

#define NIC_SIM_NEVER UINT64_MAX
#define NIC_SIM_PIPE_BYTES_LIMIT (1u << 30)
#define NIC_SIM_PORT_FIRST 30000u          /* ports the network picks for port 0 */

_Static_assert(NIC_SIM_PIPES_LIMIT <= NIC_CONNS_LIMIT, "client handles use the conn handle layout");

/* One stretch of a stream that arrives at once. Locality: simulator thread. */
struct nic_sim_seg {
	uint64_t end;            /* stream offset just past the segment */
	uint64_t at_us;          /* arrival time */
};

/*
 * One direction of a pipe: a ring of pipe_bytes indexed by monotonic offsets.
 *   [head, arrived)   arrived, not yet read
 *   [arrived, tail)   in flight, in seg[] (arrival times never decrease)
 * Locality: simulator thread.
 */
struct nic_sim_stream {
	uint8_t *buf;
	uint64_t head, arrived, tail;
	uint64_t last_at_us;     /* arrival time of the newest segment (or FIN) */
	uint64_t fin_at_us;      /* NIC_SIM_NEVER: the writer has not closed */
	struct nic_sim_seg seg[NIC_SIM_SEGS_MAX];
	uint32_t seg_head, seg_n;
};

/*
 * Pipe lifecycle:  FREE --connect--> SYN --accept--> LIVE --server closes
 * (nic_close, FIN seen, reset, shutdown)--> ORPHAN;  SYN --rejected--> ORPHAN.
 * ORPHAN (or FREE-bound) is freed once the client side is gone as well
 * (client_close / client_reset), so a client can read the server's last
 * bytes and its EOF after the server's slot was reused.
 */
enum nic_sim_pipe_state {
	NIC_SIM_PIPE_FREE = 0,
	NIC_SIM_PIPE_SYN,
	NIC_SIM_PIPE_LIVE,
	NIC_SIM_PIPE_ORPHAN,
};

/* Locality: simulator thread. */
struct nic_sim_pipe {
	uint16_t cgen;           /* client handle generation, 1..4095 */
	uint8_t state;           /* enum nic_sim_pipe_state */
	bool client_gone;        /* client closed or reset: handle stale */
	uint64_t syn_at_us;      /* SYN: when the connect reaches the listener */
	uint64_t reset_at_us;    /* NIC_SIM_NEVER, or when a reset takes effect */
	struct nic *srv;         /* SYN: the listener; LIVE: the server side */
	uint32_t srv_idx;        /* LIVE: its connection slot */
	struct nic_sim_stream up;    /* client -> server */
	struct nic_sim_stream down;  /* server -> client */
};

/* Locality: simulator thread. */
struct nic_sim_net {
	uint64_t rng;
	uint64_t now_us;
	struct nic_sim_faults f;
	uint32_t pipes_max, pipe_bytes;
	struct nic_sim_pipe *pipes;
	uint32_t *free_pipes;    /* stack */
	uint32_t free_n;
	uint8_t *mem;            /* pipes_max * 2 * pipe_bytes */
	struct nic *listeners[NIC_SIM_LISTENERS_MAX];
	uint32_t nlisteners;
};

/* One server connection slot. Locality: simulator thread (the core's side). */
struct nic_sim_conn {
	struct nic_slot s;       /* first (nic_common.h): gen, state, send queue counters */
	bool paused;
	uint32_t pipe;
	uint32_t open_pos;       /* OPEN: its place in nic->open */
};

/* The listener, one per simulated core. Locality: simulator thread. */
struct nic {
	struct nic_common cm;        /* first (nic_common.h): slots, send queues, events, rx buffers */
	struct nic_sim_net *net;
	bool reuseport;
	bool shutting_down;
	uint32_t syn_pending;        /* pipes in SYN towards this listener */
	uint32_t cursor;             /* first of open[] nic_flush serves: rotates for fairness */

	struct nic_sim_conn *conns;  /* = cm.slots, typed */
	uint32_t *open;              /* slots in OPEN, unordered: what nic_flush visits */
	uint32_t open_n;
	uint32_t *visit;             /* nic_flush's copy of open[] (steps may close) */

	struct nic_sim_stats stats;
};

/* nic_poll and nic_local_port (nic_common.c) reach the shared half this way */
_Static_assert(offsetof(struct nic, cm) == 0, "struct nic_common comes first");
_Static_assert(offsetof(struct nic_sim_conn, s) == 0, "struct nic_slot comes first");

/* ---- PRNG and faults ------------------------------------------------------ */

/* splitmix64: one 64-bit state, every value used once; enough for choices. */
uint64_t nic_sim_net_rand(struct nic_sim_net *net)
{
	uint64_t z = (net->rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Draws only when the fault is on, so a quiet network costs no randomness. */
static bool nic_sim_roll(struct nic_sim_net *net, uint32_t ppm)
{
	return ppm > 0 && nic_sim_net_rand(net) % NIC_SIM_PPM < ppm;
}

static uint64_t nic_sim_arrival(struct nic_sim_net *net)
{
	uint64_t d = 0;
	if (net->f.delay_us_max > 0)
		d = nic_sim_net_rand(net) % ((uint64_t)net->f.delay_us_max + 1u);
	return net->now_us + d;
}

/* A cut in [1, len - 1] for len > 1, when the fault hits; else len. */
static uint64_t nic_sim_cut(struct nic_sim_net *net, uint32_t ppm, uint64_t len, bool *cut)
{
	*cut = false;
	if (len < 2 || !nic_sim_roll(net, ppm))
		return len;
	*cut = true;
	return 1u + nic_sim_net_rand(net) % (len - 1u);
}

/* ---- streams -------------------------------------------------------------- */

static void nic_sim_stream_init(struct nic_sim_stream *s, uint8_t *buf)
{
	memset(s, 0, sizeof(*s));
	s->buf = buf;
	s->fin_at_us = NIC_SIM_NEVER;
}

/* Move segments whose time has come to the arrived side. */
static void nic_sim_stream_advance(struct nic_sim_stream *s, uint64_t now_us)
{
	while (s->seg_n > 0 && s->seg[s->seg_head].at_us <= now_us) {
		assert(s->seg[s->seg_head].end > s->arrived);
		s->arrived = s->seg[s->seg_head].end;
		s->seg_head = (s->seg_head + 1u) % NIC_SIM_SEGS_MAX;
		s->seg_n--;
	}
	assert(s->head <= s->arrived && s->arrived <= s->tail);
	assert(s->seg_n > 0 || s->arrived == s->tail);
}

static uint64_t nic_sim_stream_room(const struct nic_sim_net *net, const struct nic_sim_stream *s)
{
	assert(s->tail - s->head <= net->pipe_bytes);
	return net->pipe_bytes - (s->tail - s->head);
}

/* Copy len bytes in at tail (room checked by the caller). */
static void nic_sim_stream_copy_in(const struct nic_sim_net *net, struct nic_sim_stream *s,
				   const uint8_t *data, uint64_t len)
{
	uint64_t at = s->tail % net->pipe_bytes;
	uint64_t first = len < net->pipe_bytes - at ? len : net->pipe_bytes - at;
	memcpy(s->buf + at, data, first);
	memcpy(s->buf, data + first, len - first);
	s->tail += len;
}

/* Copy len arrived bytes out at head. */
static void nic_sim_stream_copy_out(const struct nic_sim_net *net, struct nic_sim_stream *s,
				    uint8_t *dst, uint64_t len)
{
	assert(len <= s->arrived - s->head);
	uint64_t at = s->head % net->pipe_bytes;
	uint64_t first = len < net->pipe_bytes - at ? len : net->pipe_bytes - at;
	memcpy(dst, s->buf + at, first);
	memcpy(dst + first, s->buf, len - first);
	s->head += len;
}

/* Whether one more segment fits (the caller then writes and seals it). */
static bool nic_sim_stream_seg_room(const struct nic_sim_stream *s)
{
	return s->seg_n < NIC_SIM_SEGS_MAX;
}

/* Seal bytes [previous tail, tail) as one segment arriving after the delay,
 * never before the one ahead (in order); and roll the reset fault for it. */
static void nic_sim_stream_seal(struct nic_sim_net *net, struct nic_sim_pipe *p,
				struct nic_sim_stream *s)
{
	assert(s->seg_n < NIC_SIM_SEGS_MAX);
	uint64_t at = nic_sim_arrival(net);
	if (at < s->last_at_us)
		at = s->last_at_us;
	s->last_at_us = at;
	s->seg[(s->seg_head + s->seg_n) % NIC_SIM_SEGS_MAX] = (struct nic_sim_seg){ .end = s->tail,
										 .at_us = at };
	s->seg_n++;
	if (nic_sim_roll(net, net->f.reset_ppm) && at < p->reset_at_us)
		p->reset_at_us = at;
}

static void nic_sim_stream_fin(struct nic_sim_net *net, struct nic_sim_stream *s)
{
	if (s->fin_at_us != NIC_SIM_NEVER)
		return;
	uint64_t at = nic_sim_arrival(net);
	s->fin_at_us = at < s->last_at_us ? s->last_at_us : at;
	s->last_at_us = s->fin_at_us;
}

/* ---- pipes ---------------------------------------------------------------- */

static bool nic_sim_reset_due(const struct nic_sim_net *net, const struct nic_sim_pipe *p)
{
	return p->reset_at_us <= net->now_us;
}

/* A reset of the pipe, taking effect when it arrives (the earliest one wins). */
static void nic_sim_reset_on_arrival(struct nic_sim_net *net, struct nic_sim_pipe *p)
{
	uint64_t at = nic_sim_arrival(net);
	if (at < p->reset_at_us)
		p->reset_at_us = at;
}

static void nic_sim_pipe_maybe_free(struct nic_sim_net *net, struct nic_sim_pipe *p)
{
	if (!p->client_gone || p->state != NIC_SIM_PIPE_ORPHAN)
		return;
	p->state = NIC_SIM_PIPE_FREE;
	p->srv = NULL;
	assert(net->free_n < net->pipes_max);
	net->free_pipes[net->free_n++] = (uint32_t)(p - net->pipes);
}

/* The client's handle, or NULL when it is stale. */
static struct nic_sim_pipe *nic_sim_client_lookup(struct nic_sim_net *net, uint32_t client)
{
	uint32_t idx = client & NIC_IDX_MASK;
	if (idx >= net->pipes_max)
		return NULL;
	struct nic_sim_pipe *p = &net->pipes[idx];
	if (p->state == NIC_SIM_PIPE_FREE || p->client_gone || p->cgen != client >> NIC_CONN_IDX_BITS)
		return NULL;
	return p;
}

/* OPEN -> CLOSED: unsent buffers reported, CLOSED queued, the pipe let go.
 * status 0 or -ECANCELED: the client gets a FIN after what is in its stream;
 * -ECONNRESET: the pipe is reset already. */
static void nic_sim_conn_close(struct nic *n, struct nic_sim_conn *c, int status)
{
	assert(c->s.state == NIC_CONN_OPEN);
	struct nic_sim_net *net = n->net;
	uint32_t idx = (uint32_t)(c - n->conns);
	nic_slot_closed(&n->cm, &c->s, idx, status);
	assert(n->open_n > 0 && n->open[c->open_pos] == idx);
	uint32_t last = n->open[--n->open_n];
	n->open[c->open_pos] = last;
	n->conns[last].open_pos = c->open_pos;
	struct nic_sim_pipe *p = &net->pipes[c->pipe];
	assert(p->state == NIC_SIM_PIPE_LIVE && p->srv == n && p->srv_idx == idx);
	if (status != -ECONNRESET) {
		/* A kernel socket closed with client bytes unread (or still
		 * arriving) answers with RST, not FIN: the client may lose the
		 * server's last bytes, those not yet arrived when the RST does. */
		if (p->up.head != p->up.tail && !p->client_gone) {
			nic_sim_reset_on_arrival(net, p);
			n->stats.close_resets++;
		} else {
			nic_sim_stream_fin(net, &p->down);
		}
	}
	p->state = NIC_SIM_PIPE_ORPHAN;
	p->srv = NULL;
	nic_sim_pipe_maybe_free(net, p);
}

/* ---- the kernel's part, run by nic_flush ---------------------------------- */

static void nic_sim_accept(struct nic *n, struct nic_sim_pipe *p)
{
	struct nic_sim_net *net = n->net;
	assert(p->state == NIC_SIM_PIPE_SYN && p->srv == n && n->syn_pending > 0);
	n->syn_pending--;
	if (nic_sim_reset_due(net, p)) {
		p->state = NIC_SIM_PIPE_ORPHAN; /* reset before it was accepted: no OPEN */
		p->srv = NULL;
		nic_sim_pipe_maybe_free(net, p);
		return;
	}
	if (n->cm.free_n == 0 || n->shutting_down || nic_sim_roll(net, net->f.reject_ppm)) {
		/* as nic_uring: accepted and closed at once; the client sees a reset */
		n->stats.accepts_rejected++;
		p->reset_at_us = net->now_us;
		p->state = NIC_SIM_PIPE_ORPHAN;
		p->srv = NULL;
		nic_sim_pipe_maybe_free(net, p);
		return;
	}
	uint32_t idx = nic_slot_open(&n->cm);
	struct nic_sim_conn *c = &n->conns[idx];
	c->paused = false;
	c->pipe = (uint32_t)(p - net->pipes);
	assert(n->open_n < n->cm.conns_max);
	c->open_pos = n->open_n;
	n->open[n->open_n++] = idx;
	p->state = NIC_SIM_PIPE_LIVE;
	p->srv_idx = idx;
	n->stats.accepts++;
}

/* Arrived client bytes into receive buffers, one DATA each. */
static void nic_sim_deliver(struct nic *n, struct nic_sim_conn *c, struct nic_sim_pipe *p)
{
	struct nic_sim_net *net = n->net;
	uint32_t idx = (uint32_t)(c - n->conns);
	struct nic_sim_stream *s = &p->up;
	while (s->arrived > s->head) {
		if (n->cm.rx_free_n == 0) {
			n->stats.rx_starved++;
			return;
		}
		uint64_t len = s->arrived - s->head;
		if (len > n->cm.rx_buf_bytes)
			len = n->cm.rx_buf_bytes;
		bool cut;
		len = nic_sim_cut(net, net->f.short_read_ppm, len, &cut);
		n->stats.short_reads += cut;
		uint16_t bid = nic_rx_free_pop(&n->cm);
		nic_sim_stream_copy_out(net, s, nic_rx_addr(&n->cm, bid), len);
		n->stats.rx_bytes += len;
		nic_rx_lend(&n->cm, idx, bid, (uint32_t)len);
	}
}

/* One "sendmsg": up to NIC_SEND_IOV_MAX queued buffers into the client's
 * stream, as far as it has room, maybe cut short; SENT for each finished. */
static void nic_sim_transmit(struct nic *n, struct nic_sim_conn *c, struct nic_sim_pipe *p)
{
	struct nic_sim_net *net = n->net;
	uint32_t idx = (uint32_t)(c - n->conns);
	struct nic_sim_stream *s = &p->down;
	struct iovec iov[NIC_SEND_IOV_MAX];
	uint64_t want;
	uint32_t cnt = nic_txq_gather(&c->s, iov, NIC_SEND_IOV_MAX, &want);
	/* A client that closed reads nothing more: its bytes go nowhere (its
	 * FIN, on its way, closes the connection). */
	bool sink = p->client_gone;
	uint64_t take = want;
	if (!sink && want > 0) {
		uint64_t room = nic_sim_stream_room(net, s);
		if (room == 0 || !nic_sim_stream_seg_room(s)) {
			n->stats.tx_stalls++;
			return;
		}
		if (take > room)
			take = room;
		bool cut;
		take = nic_sim_cut(net, net->f.short_write_ppm, take, &cut);
	}
	if (take < want)
		n->stats.sends_partial++;
	n->stats.tx_bytes += take;
	uint64_t moved = 0;
	for (uint32_t i = 0; !sink && moved < take; i++) {
		assert(i < cnt);
		uint64_t k = take - moved < iov[i].iov_len ? take - moved : iov[i].iov_len;
		nic_sim_stream_copy_in(net, s, iov[i].iov_base, k);
		moved += k;
	}
	/* SENT for each finished buffer; the rest goes out in a later flush, in order */
	nic_txq_sent(&n->cm, &c->s, idx, cnt, take);
	if (!sink && take > 0)
		nic_sim_stream_seal(net, p, s);
}

static void nic_sim_conn_step(struct nic *n, struct nic_sim_conn *c)
{
	struct nic_sim_net *net = n->net;
	struct nic_sim_pipe *p = &net->pipes[c->pipe];
	assert(p->state == NIC_SIM_PIPE_LIVE);
	/* After a reset only what arrived before it can be read (as a kernel
	 * socket hands out its receive queue before the error); bytes still
	 * in flight are lost. */
	bool reset = nic_sim_reset_due(net, p);
	nic_sim_stream_advance(&p->up, reset ? p->reset_at_us : net->now_us);
	if (!c->paused)
		nic_sim_deliver(n, c, p);
	/* ...and the reset is seen even while paused: the next send would meet it */
	if (reset) {
		n->stats.resets++;
		nic_sim_conn_close(n, c, -ECONNRESET);
		return;
	}
	if (!c->paused) {
		/* EOF: as nic_uring, the whole connection closes (no half-close) */
		if (p->up.fin_at_us <= net->now_us && p->up.head == p->up.tail) {
			nic_sim_conn_close(n, c, 0);
			return;
		}
	}
	if (c->s.tx_done != c->s.tx_tail)
		nic_sim_transmit(n, c, p);
}

/* ---- application side (nic.h) --------------------------------------------- */

static struct nic_sim_conn *nic_conn_lookup(struct nic *n, uint32_t handle)
{
	uint32_t idx = nic_slot_find(&n->cm, handle);
	return idx == NIC_SLOT_NONE ? NULL : &n->conns[idx];
}

/* Locality: simulator thread (the core's side). */
int nic_flush(struct nic *n)
{
	assert(n);
	struct nic_sim_net *net = n->net;
	/* nothing is polled inside a flush, so the queue's growth is what it queued */
	uint32_t before = n->cm.evq_n;
	/* connects due: the scan ends once every pending one was seen */
	uint32_t syn_left = n->syn_pending;
	for (uint32_t i = 0; syn_left > 0 && i < net->pipes_max; i++) {
		struct nic_sim_pipe *p = &net->pipes[i];
		if (p->state != NIC_SIM_PIPE_SYN || p->srv != n)
			continue;
		syn_left--;
		if (p->syn_at_us <= net->now_us)
			nic_sim_accept(n, p);
	}
	/* open connections, from a rotating start so a small rx pool is shared */
	uint32_t cnt = n->open_n;
	memcpy(n->visit, n->open, cnt * sizeof(uint32_t));
	for (uint32_t k = 0; k < cnt; k++) {
		uint32_t at = (n->cursor + k) % cnt;
		struct nic_sim_conn *c = &n->conns[n->visit[at]];
		if (c->s.state == NIC_CONN_OPEN)
			nic_sim_conn_step(n, c);
	}
	n->cursor = cnt > 0 ? (n->cursor + 1u) % cnt : 0;
	return (int)(n->cm.evq_n - before);
}

/* Locality: simulator thread (the core's side). */
void nic_rx_release(struct nic *n, const struct nic_ev *ev)
{
	assert(n);
	nic_rx_free_push(&n->cm, nic_rx_unlend(&n->cm, ev));
}

/* Locality: simulator thread (the core's side). */
int nic_send(struct nic *n, uint32_t conn, const void *data, uint32_t len, void *cookie)
{
	assert(n && (data || len == 0));
	uint32_t idx = nic_slot_find(&n->cm, conn);
	if (idx == NIC_SLOT_NONE)
		return -ENOTCONN;
	return nic_txq_put(&n->conns[idx].s, data, len, cookie);
}

/* Locality: simulator thread (the core's side). */
void nic_pause(struct nic *n, uint32_t conn, bool paused)
{
	struct nic_sim_conn *c = nic_conn_lookup(n, conn);
	if (c)
		c->paused = paused;
}

/* A made-up, unique address per pipe: "/10.a.b.c" from its index. */
int nic_conn_peer(struct nic *n, uint32_t conn, char *buf, size_t cap)
{
	struct nic_sim_conn *c = nic_conn_lookup(n, conn);
	if (!c)
		return -ENOTCONN;
	int len = snprintf(buf, cap, "/10.%u.%u.%u", (c->pipe >> 16) & 255u, (c->pipe >> 8) & 255u,
			   c->pipe & 255u);
	return len < 0 || (size_t)len >= cap ? -ENOSPC : len;
}

/* Locality: simulator thread (the core's side). */
void nic_close(struct nic *n, uint32_t conn)
{
	assert(n);
	struct nic_sim_conn *c = nic_conn_lookup(n, conn);
	if (c)
		nic_sim_conn_close(n, c, 0);
}

/* ---- listener create / shutdown / destroy --------------------------------- */

static bool nic_sim_port_taken(const struct nic_sim_net *net, uint16_t port, bool reuseport)
{
	for (uint32_t i = 0; i < net->nlisteners; i++)
		if (net->listeners[i]->cm.port == port && !(reuseport && net->listeners[i]->reuseport))
			return true;
	return false;
}

/* Locality: init only. */
int nic_sim_create(const struct nic_config *cfg, struct nic_sim_net *net, struct nic **out)
{
	if (!cfg || !net || !out || nic_config_check(cfg) < 0)
		return -EINVAL;
	if (net->nlisteners == NIC_SIM_LISTENERS_MAX)
		return -ENOSPC;
	uint16_t port = cfg->port;
	if (port == 0) {
		for (port = NIC_SIM_PORT_FIRST; nic_sim_port_taken(net, port, false); port++)
			;
	} else if (nic_sim_port_taken(net, port, cfg->reuseport != 0)) {
		return -EADDRINUSE;
	}
	struct nic *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->net = net;
	n->reuseport = cfg->reuseport != 0;
	int rc = nic_common_init(&n->cm, cfg, sizeof(struct nic_sim_conn));
	n->cm.port = port;
	n->conns = n->cm.slots;
	n->open = calloc(cfg->conns_max, sizeof(uint32_t));
	n->visit = calloc(cfg->conns_max, sizeof(uint32_t));
	if (rc < 0 || !n->open || !n->visit) {
		nic_common_free(&n->cm);
		free(n->open), free(n->visit);
		free(n);
		return -ENOMEM;
	}
	net->listeners[net->nlisteners++] = n;
	*out = n;
	return 0;
}

/* Locality: simulator thread (the core's side). */
void nic_sim_shutdown(struct nic *n)
{
	assert(n);
	n->shutting_down = true; /* connects still on their way are refused */
	while (n->open_n > 0)
		nic_sim_conn_close(n, &n->conns[n->open[n->open_n - 1]], -ECANCELED);
}

/*
 * The simulated machine is gone (a crash, or the end of a run): every pipe
 * still tied to it is reset at once, as a client would find out on its next
 * send; nothing of the listener is touched afterwards. Locality: simulator
 * thread.
 */
void nic_destroy(struct nic *n)
{
	if (!n)
		return;
	struct nic_sim_net *net = n->net;
	for (uint32_t i = 0; i < net->pipes_max; i++) {
		struct nic_sim_pipe *p = &net->pipes[i];
		if ((p->state != NIC_SIM_PIPE_SYN && p->state != NIC_SIM_PIPE_LIVE) || p->srv != n)
			continue;
		if (p->reset_at_us > net->now_us)
			p->reset_at_us = net->now_us;
		p->state = NIC_SIM_PIPE_ORPHAN;
		p->srv = NULL;
		nic_sim_pipe_maybe_free(net, p);
	}
	for (uint32_t i = 0; i < net->nlisteners; i++)
		if (net->listeners[i] == n) {
			net->listeners[i] = net->listeners[--net->nlisteners];
			break;
		}
	nic_common_free(&n->cm);
	free(n->open);
	free(n->visit);
	free(n);
}

const struct nic_sim_stats *nic_sim_stats(const struct nic *n)
{
	return &n->stats;
}

uint32_t nic_sim_rx_held(const struct nic *n)
{
	return n->cm.rx_held;
}

uint32_t nic_sim_conns_used(const struct nic *n)
{
	return n->cm.conns_max - n->cm.free_n;
}

int nic_sim_conn_client(const struct nic *n, uint32_t conn, uint32_t *client)
{
	uint32_t idx = nic_slot_find(&n->cm, conn);
	if (idx == NIC_SLOT_NONE)
		return -ENOTCONN;
	const struct nic_sim_conn *c = &n->conns[idx];
	const struct nic_sim_pipe *p = &n->net->pipes[c->pipe];
	if (p->client_gone)
		return -ENOTCONN;
	*client = nic_handle(c->pipe, p->cgen);
	return 0;
}

/* ---- network --------------------------------------------------------------- */

/* Locality: init only. */
int nic_sim_net_create(const struct nic_sim_net_config *cfg, struct nic_sim_net **out)
{
	if (!cfg || !out || cfg->pipes_max == 0 || cfg->pipes_max > NIC_SIM_PIPES_LIMIT ||
	    cfg->pipe_bytes == 0 || cfg->pipe_bytes > NIC_SIM_PIPE_BYTES_LIMIT)
		return -EINVAL;
	struct nic_sim_net *net = calloc(1, sizeof(*net));
	if (!net)
		return -ENOMEM;
	net->rng = cfg->seed;
	net->pipes_max = cfg->pipes_max;
	net->pipe_bytes = cfg->pipe_bytes;
	net->pipes = calloc(net->pipes_max, sizeof(*net->pipes));
	net->free_pipes = calloc(net->pipes_max, sizeof(uint32_t));
	/* untouched pages of a large calloc are never backed: only what is used costs */
	net->mem = calloc(net->pipes_max, 2u * (size_t)net->pipe_bytes);
	if (!net->pipes || !net->free_pipes || !net->mem) {
		free(net->pipes), free(net->free_pipes), free(net->mem);
		free(net);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < net->pipes_max; i++) {
		net->pipes[i].cgen = 1;
		net->free_pipes[i] = net->pipes_max - 1 - i;
	}
	net->free_n = net->pipes_max;
	*out = net;
	return 0;
}

void nic_sim_net_destroy(struct nic_sim_net *net)
{
	if (!net)
		return;
	assert(net->nlisteners == 0); /* their pipes would point at freed memory */
	free(net->pipes);
	free(net->free_pipes);
	free(net->mem);
	free(net);
}

void nic_sim_net_set_faults(struct nic_sim_net *net, const struct nic_sim_faults *f)
{
	assert(net && f);
	assert(f->short_read_ppm <= NIC_SIM_PPM && f->short_write_ppm <= NIC_SIM_PPM &&
	       f->reset_ppm <= NIC_SIM_PPM && f->reject_ppm <= NIC_SIM_PPM);
	net->f = *f;
}

void nic_sim_net_set_now(struct nic_sim_net *net, uint64_t now_us)
{
	assert(now_us >= net->now_us); /* simulated time never goes back */
	net->now_us = now_us;
}

uint64_t nic_sim_net_now(const struct nic_sim_net *net)
{
	return net->now_us;
}

static void nic_sim_next_min(uint64_t now, uint64_t t, uint64_t *best)
{
	if (t > now && t < *best)
		*best = t;
}

static void nic_sim_stream_next(uint64_t now, const struct nic_sim_stream *s, uint64_t *best)
{
	for (uint32_t i = 0; i < s->seg_n; i++)
		nic_sim_next_min(now, s->seg[(s->seg_head + i) % NIC_SIM_SEGS_MAX].at_us, best);
	nic_sim_next_min(now, s->fin_at_us, best);
}

uint64_t nic_sim_net_next_us(const struct nic_sim_net *net)
{
	uint64_t best = NIC_SIM_NEVER, now = net->now_us;
	for (uint32_t i = 0; i < net->pipes_max; i++) {
		const struct nic_sim_pipe *p = &net->pipes[i];
		if (p->state == NIC_SIM_PIPE_FREE)
			continue;
		if (p->state == NIC_SIM_PIPE_SYN)
			nic_sim_next_min(now, p->syn_at_us, &best);
		nic_sim_next_min(now, p->reset_at_us, &best);
		nic_sim_stream_next(now, &p->up, &best);
		nic_sim_stream_next(now, &p->down, &best);
	}
	return best;
}

/* ---- client side ----------------------------------------------------------- */

int nic_sim_connect(struct nic_sim_net *net, uint16_t port, uint32_t *client)
{
	assert(net && client);
	struct nic *cand[NIC_SIM_LISTENERS_MAX];
	uint32_t nc = 0;
	for (uint32_t i = 0; i < net->nlisteners; i++)
		if (net->listeners[i]->cm.port == port)
			cand[nc++] = net->listeners[i];
	if (nc == 0)
		return -ECONNREFUSED;
	if (net->free_n == 0)
		return -EMFILE;
	/* SO_REUSEPORT: the kernel picks a listener by hash; we pick by the PRNG */
	struct nic *n = nc == 1 ? cand[0] : cand[nic_sim_net_rand(net) % nc];
	uint32_t idx = net->free_pipes[--net->free_n];
	struct nic_sim_pipe *p = &net->pipes[idx];
	assert(p->state == NIC_SIM_PIPE_FREE);
	uint8_t *mem = net->mem + (size_t)idx * 2u * net->pipe_bytes;
	nic_sim_stream_init(&p->up, mem);
	nic_sim_stream_init(&p->down, mem + net->pipe_bytes);
	p->state = NIC_SIM_PIPE_SYN;
	p->client_gone = false;
	p->srv = n;
	p->srv_idx = 0;
	p->reset_at_us = NIC_SIM_NEVER;
	p->syn_at_us = nic_sim_arrival(net);
	/* the first bytes cannot overtake the connect */
	p->up.last_at_us = p->syn_at_us;
	n->syn_pending++;
	*client = nic_handle(idx, p->cgen);
	return 0;
}

int nic_sim_client_write(struct nic_sim_net *net, uint32_t client, const void *data, uint32_t len)
{
	assert(net && (data || len == 0));
	struct nic_sim_pipe *p = nic_sim_client_lookup(net, client);
	if (!p)
		return -ENOTCONN;
	if (nic_sim_reset_due(net, p))
		return -ECONNRESET;
	if (p->down.fin_at_us <= net->now_us)
		return -EPIPE; /* the server's FIN has arrived */
	if (len == 0)
		return 0;
	if (len > INT32_MAX)
		len = INT32_MAX;
	if (p->state == NIC_SIM_PIPE_ORPHAN)
		return (int)len; /* server gone, its FIN not here yet: the bytes are lost */
	struct nic_sim_stream *s = &p->up;
	uint64_t room = nic_sim_stream_room(net, s);
	if (room == 0 || !nic_sim_stream_seg_room(s))
		return -EAGAIN;
	uint64_t take = len < room ? len : room;
	bool cut;
	take = nic_sim_cut(net, net->f.short_write_ppm, take, &cut);
	nic_sim_stream_copy_in(net, s, data, take);
	nic_sim_stream_seal(net, p, s);
	return (int)take;
}

int nic_sim_client_read(struct nic_sim_net *net, uint32_t client, void *buf, uint32_t cap)
{
	assert(net && (buf || cap == 0));
	struct nic_sim_pipe *p = nic_sim_client_lookup(net, client);
	if (!p)
		return -ENOTCONN;
	/* what arrived before a reset is still read, then the error */
	bool reset = nic_sim_reset_due(net, p);
	uint64_t upto = reset ? p->reset_at_us : net->now_us;
	struct nic_sim_stream *s = &p->down;
	nic_sim_stream_advance(s, upto);
	uint64_t len = s->arrived - s->head;
	if (len == 0) {
		if (s->fin_at_us <= upto)
			return 0;
		return reset ? -ECONNRESET : -EAGAIN;
	}
	if (cap == 0)
		return -EAGAIN;
	if (len > cap)
		len = cap;
	if (len > INT32_MAX)
		len = INT32_MAX;
	bool cut;
	len = nic_sim_cut(net, net->f.short_read_ppm, len, &cut);
	nic_sim_stream_copy_out(net, s, buf, len);
	return (int)len;
}

/* The handle goes stale; what the server sent and the client never read is dropped. */
static void nic_sim_client_leave(struct nic_sim_net *net, struct nic_sim_pipe *p)
{
	p->client_gone = true;
	p->cgen = nic_gen_next(p->cgen);
	struct nic_sim_stream *s = &p->down;
	nic_sim_stream_advance(s, net->now_us);
	s->head = s->arrived;
	nic_sim_pipe_maybe_free(net, p);
}

void nic_sim_client_close(struct nic_sim_net *net, uint32_t client)
{
	struct nic_sim_pipe *p = nic_sim_client_lookup(net, client);
	if (!p)
		return;
	nic_sim_stream_fin(net, &p->up);
	nic_sim_client_leave(net, p);
}

void nic_sim_client_reset(struct nic_sim_net *net, uint32_t client)
{
	struct nic_sim_pipe *p = nic_sim_client_lookup(net, client);
	if (!p)
		return;
	nic_sim_reset_on_arrival(net, p);
	nic_sim_client_leave(net, p);
}

void nic_sim_client_inject_reset(struct nic_sim_net *net, uint32_t client)
{
	struct nic_sim_pipe *p = nic_sim_client_lookup(net, client);
	if (p)
		nic_sim_reset_on_arrival(net, p);
}
