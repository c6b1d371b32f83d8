/*
 * tcp.c - the userspace Ethernet/ARP/IPv4/ICMP/TCP stack (tcp.h): pure
 * logic over frames, a clock passed in. State and lifecycles are in
 * tcp_internal.h; the RFC sections are named where each rule is applied.
 *
 * Locality: NIC core (one struct tcp_stack per data core).
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcp_internal.h"

#define NIL UINT32_MAX

/* ---- byte order and checksums (RFC 1071) ------------------------------------ */

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

static uint32_t csum_add(uint32_t sum, const uint8_t *p, uint32_t n)
{
	for (; n >= 2; p += 2, n -= 2)
		sum += rd16(p);
	if (n)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* The TCP pseudo-header (RFC 9293 3.1): addresses, protocol, TCP length. */
static uint32_t csum_pseudo(uint32_t src, uint32_t dst, uint32_t tcp_len)
{
	return (src >> 16) + (src & 0xffff) + (dst >> 16) + (dst & 0xffff) + 6u + tcp_len;
}

/* ---- states: the one setter and its table ----------------------------------- */

#define M(s) (1u << TCP_S_##s)
static const uint16_t tcp_moves[TCP_S_COUNT] = {
	[TCP_S_FREE]        = M(SYN_RCVD) | M(SYN_SENT),
	[TCP_S_SYN_SENT]    = M(ESTABLISHED) | M(CLOSED),
	[TCP_S_SYN_RCVD]    = M(ESTABLISHED) | M(CLOSED),
	[TCP_S_ESTABLISHED] = M(CLOSE_WAIT) | M(FIN_WAIT_1) | M(CLOSED),
	[TCP_S_CLOSE_WAIT]  = M(LAST_ACK) | M(CLOSED),
	[TCP_S_LAST_ACK]    = M(CLOSED),
	[TCP_S_FIN_WAIT_1]  = M(FIN_WAIT_2) | M(CLOSING) | M(TIME_WAIT) | M(CLOSED),
	[TCP_S_FIN_WAIT_2]  = M(TIME_WAIT) | M(CLOSED),
	[TCP_S_CLOSING]     = M(TIME_WAIT) | M(CLOSED),
	[TCP_S_TIME_WAIT]   = M(CLOSED),
	[TCP_S_CLOSED]      = M(FREE),
};
#undef M
_Static_assert(TCP_S_COUNT <= 16, "moves are 16-bit masks");

static void tcp_set_state(struct tcp_flow *fl, enum tcp_state to)
{
	if (!(tcp_moves[fl->state] & (1u << to))) {
		fprintf(stderr, "tcp: illegal move %u -> %u\n", fl->state, to);
		abort();
	}
	fl->state = (uint8_t)to;
}

static inline bool tcp_synced(const struct tcp_flow *fl)
{
	return fl->state >= TCP_S_ESTABLISHED && fl->state <= TCP_S_TIME_WAIT;
}

/* ---- flows: table, lists, handles ------------------------------------------- */

static inline uint32_t tcp_idx(const struct tcp_stack *s, const struct tcp_flow *fl)
{
	return (uint32_t)(fl - s->flows);
}

static inline uint32_t tcp_handle(const struct tcp_stack *s, const struct tcp_flow *fl)
{
	return tcp_idx(s, fl) | (uint32_t)(fl->gen & 0xfff) << 20;
}

static uint64_t tcp_mix(uint64_t x)
{
	x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27; x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint32_t tcp_hash(const struct tcp_stack *s, uint32_t rip, uint16_t rport, uint16_t lport)
{
	return (uint32_t)tcp_mix((uint64_t)rip << 32 | (uint32_t)rport << 16 | lport) & s->hash_mask;
}

static struct tcp_flow *tcp_lookup(struct tcp_stack *s, uint32_t rip, uint16_t rport, uint16_t lport)
{
	for (uint32_t i = s->hash[tcp_hash(s, rip, rport, lport)]; i != NIL; i = s->flows[i].hnext) {
		struct tcp_flow *fl = &s->flows[i];
		if (fl->rip == rip && fl->rport == rport && fl->lport == lport)
			return fl;
	}
	return NULL;
}

/* A handle's flow, or NULL when stale (generation moved on) or never opened. */
static struct tcp_flow *tcp_get(struct tcp_stack *s, uint32_t conn)
{
	uint32_t idx = conn & (TCP_CONNS_LIMIT - 1);
	if (idx >= s->cfg.conns_max)
		return NULL;
	struct tcp_flow *fl = &s->flows[idx];
	if (fl->state == TCP_S_FREE || !(fl->f & TCP_FF_HANDLE) || (fl->gen & 0xfff) != conn >> 20)
		return NULL;
	return fl;
}

static void tcp_tx_mark(struct tcp_stack *s, struct tcp_flow *fl)
{
	if (fl->f & TCP_FF_ON_TX)
		return;
	fl->f |= TCP_FF_ON_TX;
	fl->txnext = NIL;
	uint32_t i = tcp_idx(s, fl);
	if (s->tx_tail == NIL)
		s->tx_head = i;
	else
		s->flows[s->tx_tail].txnext = i;
	s->tx_tail = i;
}

static void tcp_ev_post(struct tcp_stack *s, struct tcp_flow *fl, uint8_t bit)
{
	/* CLOSED is the handle's last event (tcp.h): nothing after it */
	if (!(fl->f & TCP_FF_HANDLE) || ((fl->f & TCP_FF_CLOSED_EV) && bit != TCP_EVB_CLOSED))
		return;
	fl->ev |= bit;
	if (fl->f & TCP_FF_ON_EV)
		return;
	fl->f |= TCP_FF_ON_EV;
	fl->evnext = NIL;
	uint32_t i = tcp_idx(s, fl);
	if (s->ev_tail == NIL)
		s->ev_head = i;
	else
		s->flows[s->ev_tail].evnext = i;
	s->ev_tail = i;
}

static struct tcp_flow *tcp_flow_alloc(struct tcp_stack *s, uint32_t rip, uint16_t rport, uint16_t lport)
{
	if (s->free_head == NIL)
		return NULL;
	uint32_t i = s->free_head;
	struct tcp_flow *fl = &s->flows[i];
	s->free_head = fl->hnext;
	/* Keep what outlives a use of the slot: the generation, the rings, and
	 * the list flags (the list owners skip a slot whose flag they find clear
	 * or whose state says it has nothing for them). */
	uint16_t gen = fl->gen, keep = fl->f & (TCP_FF_ON_TX | TCP_FF_ON_EV);
	uint32_t txnext = fl->txnext, evnext = fl->evnext;
	uint8_t *rx = fl->rx, *tx = fl->tx;
	memset(fl, 0, sizeof(*fl));
	fl->gen = gen; fl->f = keep; fl->txnext = txnext; fl->evnext = evnext;
	fl->rx = rx; fl->tx = tx;
	fl->rip = rip; fl->rport = rport; fl->lport = lport;
	uint32_t h = tcp_hash(s, rip, rport, lport);
	fl->hnext = s->hash[h];
	s->hash[h] = i;
	fl->uprev = NIL;
	fl->unext = s->used_head;
	if (s->used_head != NIL)
		s->flows[s->used_head].uprev = i;
	s->used_head = i;
	s->used_n++;
	fl->rto_us = TCP_RTO_INIT_US;
	return fl;
}

static void tcp_flow_free(struct tcp_stack *s, struct tcp_flow *fl)
{
	assert(fl->state == TCP_S_CLOSED && !(fl->f & TCP_FF_HANDLE));
	uint32_t i = tcp_idx(s, fl);
	uint32_t *pp = &s->hash[tcp_hash(s, fl->rip, fl->rport, fl->lport)];
	while (*pp != i) {
		assert(*pp != NIL);
		pp = &s->flows[*pp].hnext;
	}
	*pp = fl->hnext;
	if (fl->uprev != NIL)
		s->flows[fl->uprev].unext = fl->unext;
	else
		s->used_head = fl->unext;
	if (fl->unext != NIL)
		s->flows[fl->unext].uprev = fl->uprev;
	s->used_n--;
	tcp_set_state(fl, TCP_S_FREE);
	fl->gen++;
	fl->ev = 0;
	fl->hnext = s->free_head;
	s->free_head = i;
	s->st.conns_closed++;
}

/* CLOSED, once per handle. */
static void tcp_post_closed(struct tcp_stack *s, struct tcp_flow *fl, int status)
{
	if (!(fl->f & TCP_FF_HANDLE) || (fl->f & TCP_FF_CLOSED_EV))
		return;
	fl->f |= TCP_FF_CLOSED_EV;
	fl->close_status = status;
	tcp_ev_post(s, fl, TCP_EVB_CLOSED);
}

/* The flow is done: CLOSED for the application (which reads what is left
 * in the ring and then lets the slot go with tcp_release), or freed now
 * when no application holds it. */
static void tcp_flow_close(struct tcp_stack *s, struct tcp_flow *fl, int status)
{
	if (fl->state != TCP_S_CLOSED)
		tcp_set_state(fl, TCP_S_CLOSED);
	fl->rto_at = fl->delack_at = fl->idle_at = 0;
	if (fl->f & TCP_FF_HANDLE)
		tcp_post_closed(s, fl, status);
	else
		tcp_flow_free(s, fl);
}

/* TIME_WAIT (RFC 9293 3.6): the application is told CLOSED now; the flow
 * stays, after tcp_release without a handle, to answer a retransmitted FIN
 * for 2*MSL. */
static void tcp_enter_time_wait(struct tcp_stack *s, struct tcp_flow *fl, uint64_t now)
{
	tcp_set_state(fl, TCP_S_TIME_WAIT);
	fl->rto_at = fl->delack_at = 0;
	fl->idle_at = now + s->cfg.time_wait_us;
	tcp_post_closed(s, fl, 0);
}

/* ---- frames ----------------------------------------------------------------- */

static uint8_t *tcp_ctl_slot(struct tcp_stack *s)
{
	if (s->ctl_n == TCP_CTLQ_MAX) {
		s->st.ctl_dropped++;   /* as a full NIC queue drops: the peer retries */
		return NULL;
	}
	return s->ctl + (size_t)((s->ctl_head + s->ctl_n) % TCP_CTLQ_MAX) * s->frame_max;
}

static void tcp_ctl_push(struct tcp_stack *s, uint32_t len)
{
	assert(len <= s->frame_max);
	s->ctl_len[(s->ctl_head + s->ctl_n) % TCP_CTLQ_MAX] = (uint16_t)len;
	s->ctl_n++;
}

static void tcp_eth(const struct tcp_stack *s, uint8_t *b, const uint8_t dst[6], uint16_t type)
{
	memcpy(b, dst, 6);
	memcpy(b + 6, s->cfg.mac, 6);
	wr16(b + 12, type);
}

/* IPv4 header (RFC 791) without options, DF set: we never fragment. */
static void tcp_ip(struct tcp_stack *s, uint8_t *ip, uint32_t dst, uint8_t proto, uint32_t payload)
{
	ip[0] = 0x45; ip[1] = 0;
	wr16(ip + 2, (uint16_t)(TCP_IP_HDR_BYTES + payload));
	wr16(ip + 4, s->ip_id++);
	wr16(ip + 6, 0x4000);
	ip[8] = TCP_EPHEMERAL_TTL; ip[9] = proto;
	wr16(ip + 10, 0);
	wr32(ip + 12, s->cfg.ip);
	wr32(ip + 16, dst);
	wr16(ip + 10, csum_fold(csum_add(0, ip, TCP_IP_HDR_BYTES)));
}

/* A whole TCP frame; the payload is already at its place (b + 54 + optlen)
 * or is copied from data. Returns the frame's length. */
static uint32_t tcp_frame(struct tcp_stack *s, uint8_t *b, const uint8_t mac[6], uint32_t dst,
			  uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack, uint8_t flags,
			  uint16_t win, const uint8_t *opt, uint32_t optlen, uint32_t len)
{
	assert(optlen % 4 == 0 && optlen <= TCP_OPT_BYTES_MAX);
	uint8_t *ip = b + TCP_ETH_HDR_BYTES, *th = ip + TCP_IP_HDR_BYTES;
	uint32_t tl = TCP_HDR_BYTES + optlen + len;
	tcp_eth(s, b, mac, 0x0800);
	tcp_ip(s, ip, dst, 6, tl);
	wr16(th, sport); wr16(th + 2, dport);
	wr32(th + 4, seq); wr32(th + 8, ack);
	th[12] = (uint8_t)((TCP_HDR_BYTES + optlen) / 4 << 4);
	th[13] = flags;
	wr16(th + 14, win);
	wr16(th + 16, 0); wr16(th + 18, 0);
	if (optlen)
		memcpy(th + TCP_HDR_BYTES, opt, optlen);
	wr16(th + 16, csum_fold(csum_add(csum_pseudo(s->cfg.ip, dst, tl), th, tl)));
	s->st.tx_frames++;
	return TCP_ETH_HDR_BYTES + TCP_IP_HDR_BYTES + tl;
}

/* ---- parsed input ----------------------------------------------------------- */

struct tcp_seg {
	uint32_t seq, ack, len, tsval, tsecr;
	uint16_t sport, dport, wnd, mss;
	uint8_t flags;
	int8_t ws;               /* -1: no window scale option */
	bool sack_perm, has_ts, has_mss;
	uint8_t nsack;           /* SACK blocks (RFC 2018 3), as sent */
	struct tcp_range sack[TCP_SACK_RCVD_MAX];
	const uint8_t *data;
	const uint8_t *mac;      /* the frame's Ethernet source */
	uint32_t src;
};

/* TCP options (RFC 9293 3.1, RFC 7323 2-3, RFC 2018 2): a malformed list
 * makes the segment malformed; unknown kinds are skipped by their length. */
static int tcp_parse_opts(struct tcp_seg *g, const uint8_t *o, uint32_t n)
{
	g->ws = -1;
	for (uint32_t i = 0; i < n;) {
		uint8_t kind = o[i];
		if (kind == 0)
			break;
		if (kind == 1) {
			i++;
			continue;
		}
		if (i + 1 >= n || o[i + 1] < 2 || i + o[i + 1] > n)
			return -EPROTO;
		uint8_t l = o[i + 1];
		if (kind == 2 && l == 4) {
			g->has_mss = true;
			g->mss = rd16(o + i + 2);
		} else if (kind == 3 && l == 3) {
			g->ws = (int8_t)(o[i + 2] > TCP_WSCALE_MAX ? TCP_WSCALE_MAX : o[i + 2]);  /* RFC 7323 2.3 */
		} else if (kind == 4 && l == 2) {
			g->sack_perm = true;
		} else if (kind == 5 && l >= 10 && (l - 2) % 8 == 0) {
			for (uint32_t b = 0; b < (uint32_t)(l - 2) / 8 && g->nsack < TCP_SACK_RCVD_MAX; b++) {
				g->sack[g->nsack].start = rd32(o + i + 2 + 8 * b);
				g->sack[g->nsack].end = rd32(o + i + 6 + 8 * b);
				g->nsack++;
			}
		} else if (kind == 8 && l == 10) {
			g->has_ts = true;
			g->tsval = rd32(o + i + 2);
			g->tsecr = rd32(o + i + 6);
		}
		i += l;
	}
	return 0;
}

/* RST for a segment no flow takes (RFC 9293 3.10.7.1). */
static void tcp_rst_reply(struct tcp_stack *s, const struct tcp_seg *g)
{
	if (g->flags & TCP_RST)
		return;
	uint8_t *b = tcp_ctl_slot(s);
	if (!b)
		return;
	uint32_t seq = 0, ack = 0;
	uint8_t flags = TCP_RST;
	if (g->flags & TCP_ACK) {
		seq = g->ack;
	} else {
		ack = g->seq + g->len + !!(g->flags & TCP_SYN) + !!(g->flags & TCP_FIN);
		flags |= TCP_ACK;
	}
	tcp_ctl_push(s, tcp_frame(s, b, g->mac, g->src, g->dport, g->sport, seq, ack, flags, 0, NULL, 0, 0));
	s->st.rst_sent++;
}

/* RST on an open flow (abort, retries spent). Its sequence number is
 * snd_max, as a pure ACK's is: after an RTO snd_nxt has gone back below
 * what the peer may hold, and an RFC 5961 peer takes only a RST at its
 * rcv_nxt (anything else in the window gets a challenge ACK we no longer
 * answer). */
static void tcp_rst_flow(struct tcp_stack *s, const struct tcp_flow *fl)
{
	uint8_t *b = tcp_ctl_slot(s);
	if (!b)
		return;
	tcp_ctl_push(s, tcp_frame(s, b, fl->mac, fl->rip, fl->lport, fl->rport, fl->snd_max, fl->rcv_nxt,
				  TCP_RST | TCP_ACK, 0, NULL, 0, 0));
	s->st.rst_sent++;
}

/* ---- the receive window ----------------------------------------------------- */

/* What the ring still has room for beyond rcv_nxt. */
static uint32_t tcp_rwnd(const struct tcp_stack *s, const struct tcp_flow *fl)
{
	uint32_t edge = fl->rx_read + s->cfg.rx_bytes;
	return TCP_SEQ_GT(edge, fl->rcv_nxt) ? edge - fl->rcv_nxt : 0;
}

/* The window field: scaled (RFC 7323 2.2), never on a SYN. */
static uint16_t tcp_wnd_field(const struct tcp_stack *s, struct tcp_flow *fl, bool syn)
{
	uint32_t w = tcp_rwnd(s, fl);
	uint32_t shift = syn ? 0 : fl->rcv_shift;
	uint32_t f = w >> shift;
	if (f > 65535)
		f = 65535;
	uint32_t edge = fl->rcv_nxt + (f << shift);
	/* RFC 9293 3.8.6.2.2: the right edge never moves left once advertised;
	 * rounding down by the scale could pull it back by less than 2^shift,
	 * so round up then (a byte past the ring is trimmed and sent again). */
	if (TCP_SEQ_LT(edge, fl->rcv_adv)) {
		uint32_t up = (fl->rcv_adv - fl->rcv_nxt + (1u << shift) - 1) >> shift;
		f = up > 65535 ? 65535 : up;
		edge = fl->rcv_nxt + (f << shift);
	}
	if (TCP_SEQ_GT(edge, fl->rcv_adv))
		fl->rcv_adv = edge;
	return (uint16_t)f;
}

/* ---- RTT and RTO (RFC 6298) -------------------------------------------------- */

static void tcp_rtt_sample(struct tcp_flow *fl, uint64_t r)
{
	if (r == 0)
		r = 1;
	/* no round trip longer than the largest RTO means anything; clamped,
	 * 7 * srtt and 4 * rttvar below stay far inside 32 bits */
	if (r > TCP_RTO_MAX_US)
		r = TCP_RTO_MAX_US;
	if (fl->srtt_us == 0) {                         /* 2.2 */
		fl->srtt_us = (uint32_t)r;
		fl->rttvar_us = (uint32_t)(r / 2);
	} else {                                        /* 2.3, alpha 1/8, beta 1/4 */
		uint64_t d = fl->srtt_us > r ? fl->srtt_us - r : r - fl->srtt_us;
		fl->rttvar_us = (uint32_t)((3ull * fl->rttvar_us + d) / 4);
		fl->srtt_us = (uint32_t)((7ull * fl->srtt_us + r) / 8);
	}
	uint64_t var4 = 4ull * fl->rttvar_us;
	uint64_t rto = (uint64_t)fl->srtt_us + (var4 > TCP_CLOCK_G_US ? var4 : TCP_CLOCK_G_US);
	if (rto < TCP_RTO_MIN_US)
		rto = TCP_RTO_MIN_US;
	if (rto > TCP_RTO_MAX_US)
		rto = TCP_RTO_MAX_US;
	fl->rto_us = (uint32_t)rto;
}

/* The RTO with the exponential backoff of 5.5 applied. */
static uint64_t tcp_rto_now(const struct tcp_flow *fl)
{
	uint64_t r = (uint64_t)fl->rto_us << fl->backoff;
	return r > TCP_RTO_MAX_US ? TCP_RTO_MAX_US : r;
}

static inline uint32_t tcp_ts_now(uint64_t now) { return (uint32_t)(now / TCP_TS_HZ_DIV); }

/* ---- negotiation ------------------------------------------------------------ */

static void tcp_negotiate(struct tcp_stack *s, struct tcp_flow *fl, const struct tcp_seg *g)
{
	uint32_t f = s->cfg.flags;
	uint32_t mss = g->has_mss ? g->mss : TCP_MSS_DEFAULT;   /* RFC 9293 3.7.1 */
	if (mss > s->mss_ours)
		mss = s->mss_ours;
	if (mss < 64)
		mss = 64;   /* a hostile 0 would stall every send; 64 bounds the segment count */
	if (g->ws >= 0 && !(f & TCP_CF_NO_WSCALE)) {   /* RFC 7323 2.2: both or neither */
		fl->ws_ok = true;
		fl->snd_shift = (uint8_t)g->ws;
		fl->rcv_shift = s->wscale_ours;
	}
	fl->sack_ok = g->sack_perm && !(f & TCP_CF_NO_SACK);
	fl->ts_ok = g->has_ts && !(f & TCP_CF_NO_TS);
	if (fl->ts_ok) {
		fl->ts_recent = g->tsval;
		mss -= 12;   /* RFC 6691: the timestamps option rides in every segment */
	}
	fl->smss = (uint16_t)mss;
	/* RFC 6928: IW = min(10*MSS, max(2*MSS, 14600)) */
	uint32_t iw = 2 * mss > 14600 ? 2 * mss : 14600;
	fl->cwnd = TCP_IW_SEGS * mss < iw ? TCP_IW_SEGS * mss : iw;
	fl->ssthresh = INT32_MAX;
	fl->irs = g->seq;
	fl->rx_read = fl->rx_end = fl->rcv_nxt = fl->rcv_adv = g->seq + 1;
}

/* RFC 6528: ISN = a 4 us clock plus a keyed function of the 4-tuple. */
static uint32_t tcp_isn(const struct tcp_stack *s, const struct tcp_flow *fl, uint64_t now)
{
	uint64_t k = tcp_mix(s->cfg.isn_secret ^ ((uint64_t)fl->rip << 32 | (uint32_t)fl->rport << 16 | fl->lport));
	return (uint32_t)(now / 4) + (uint32_t)(k ^ (k >> 32));
}

/* ---- output ----------------------------------------------------------------- */

static uint32_t tcp_syn_opts(const struct tcp_stack *s, const struct tcp_flow *fl, uint8_t *o, bool active,
			     uint64_t now)
{
	uint32_t n = 0, f = s->cfg.flags;
	bool ts = active ? !(f & TCP_CF_NO_TS) : fl->ts_ok;
	bool sack = active ? !(f & TCP_CF_NO_SACK) : fl->sack_ok;
	bool ws = active ? !(f & TCP_CF_NO_WSCALE) : fl->ws_ok;   /* RFC 7323 2.2: only in reply to one */
	if (!(f & TCP_CF_NO_MSS)) {
		o[n++] = 2; o[n++] = 4; wr16(o + n, s->mss_ours); n += 2;
	}
	if (sack && ts) {
		o[n++] = 4; o[n++] = 2;
	} else if (sack) {
		o[n++] = 1; o[n++] = 1; o[n++] = 4; o[n++] = 2;
	} else if (ts) {
		o[n++] = 1; o[n++] = 1;
	}
	if (ts) {
		o[n++] = 8; o[n++] = 10;
		wr32(o + n, tcp_ts_now(now)); wr32(o + n + 4, active ? 0 : fl->ts_recent); n += 8;
	}
	if (ws) {
		o[n++] = 1; o[n++] = 3; o[n++] = 3; o[n++] = s->wscale_ours;
	}
	assert(n % 4 == 0 && n <= TCP_OPT_BYTES_MAX);
	return n;
}

static uint32_t tcp_data_opts(const struct tcp_flow *fl, uint8_t *o, uint64_t now)
{
	uint32_t n = 0;
	if (fl->ts_ok) {
		o[n++] = 1; o[n++] = 1; o[n++] = 8; o[n++] = 10;
		wr32(o + n, tcp_ts_now(now)); wr32(o + n + 4, fl->ts_recent); n += 8;
	}
	if (fl->sack_ok && fl->ooo_n) {
		/* RFC 2018 4: the block holding the latest segment first, then the rest */
		uint32_t blocks = fl->ooo_n < TCP_SACK_BLOCKS_MAX ? fl->ooo_n : TCP_SACK_BLOCKS_MAX;
		o[n++] = 1; o[n++] = 1; o[n++] = 5; o[n++] = (uint8_t)(2 + 8 * blocks);
		uint32_t first = 0;
		for (uint32_t i = 0; i < fl->ooo_n; i++)
			if (fl->ooo[i].start == fl->sack_first)
				first = i;
		wr32(o + n, fl->ooo[first].start); wr32(o + n + 4, fl->ooo[first].end); n += 8;
		for (uint32_t i = 0, k = 1; i < fl->ooo_n && k < blocks; i++) {
			if (i == first)
				continue;
			wr32(o + n, fl->ooo[i].start); wr32(o + n + 4, fl->ooo[i].end); n += 8;
			k++;
		}
	}
	assert(n % 4 == 0 && n <= TCP_OPT_BYTES_MAX);
	return n;
}

/* The first byte at or after seq that the peer has not SACKed, and in *len
 * how many follow it unSACKed (to the next SACKed range; UINT32_MAX above
 * the highest). */
static uint32_t tcp_score_hole(const struct tcp_flow *fl, uint32_t seq, uint32_t *len)
{
	for (uint32_t i = 0; i < fl->score_n; i++) {
		const struct tcp_range *r = &fl->score[i];
		if (TCP_SEQ_LT(seq, r->start)) {
			*len = r->start - seq;
			return seq;
		}
		if (TCP_SEQ_LT(seq, r->end))
			seq = r->end;
	}
	*len = UINT32_MAX;
	return seq;
}

/* Copy send-ring bytes [seq, seq+len) to dst. */
static void tcp_tx_copy(struct tcp_stack *s, const struct tcp_flow *fl, uint8_t *dst, uint32_t seq, uint32_t len)
{
	s->st.tx_copied += len;
	uint32_t off = (seq - fl->iss - 1) & s->tx_mask;
	uint32_t a = s->cfg.tx_bytes - off < len ? s->cfg.tx_bytes - off : len;
	memcpy(dst, fl->tx + off, a);
	memcpy(dst + a, fl->tx, len - a);
}

static uint32_t tcp_seg_out(struct tcp_stack *s, struct tcp_flow *fl, uint8_t *b, uint32_t seq, uint8_t flags,
			    uint32_t len, uint64_t now)
{
	uint8_t opt[TCP_OPT_BYTES_MAX];
	uint32_t optlen = tcp_data_opts(fl, opt, now);
	uint32_t room = s->cfg.mtu - TCP_IP_HDR_BYTES - TCP_HDR_BYTES - optlen;
	if (len > room) {
		len = room;
		flags &= (uint8_t)~TCP_FIN;
	}
	if (len)
		tcp_tx_copy(s, fl, b + TCP_ETH_HDR_BYTES + TCP_IP_HDR_BYTES + TCP_HDR_BYTES + optlen, seq, len);
	uint16_t win = tcp_wnd_field(s, fl, false);
	fl->f &= (uint16_t)~(TCP_FF_ACK_NOW | TCP_FF_DELACK);
	fl->delack_at = 0;
	fl->segs_unacked = 0;
	return tcp_frame(s, b, fl->mac, fl->rip, fl->lport, fl->rport, seq, fl->rcv_nxt, flags | TCP_ACK, win,
			 opt, optlen, len);
}

static inline uint32_t tcp_min3(uint32_t a, uint32_t b, uint32_t c)
{
	uint32_t m = a < b ? a : b;
	return m < c ? m : c;
}

/* One segment of fl into b, or 0 when it has nothing (more) to send. */
static uint32_t tcp_flow_out(struct tcp_stack *s, struct tcp_flow *fl, uint8_t *b, uint64_t now)
{
	if (fl->state == TCP_S_SYN_SENT || fl->state == TCP_S_SYN_RCVD) {
		if (!(fl->f & (TCP_FF_SYN_OUT | TCP_FF_ACK_NOW)))
			return 0;
		bool active = fl->state == TCP_S_SYN_SENT;
		uint8_t opt[TCP_OPT_BYTES_MAX];
		uint32_t optlen = tcp_syn_opts(s, fl, opt, active, now);
		fl->f &= (uint16_t)~(TCP_FF_SYN_OUT | TCP_FF_ACK_NOW);
		if (fl->snd_max == fl->iss) {
			fl->snd_nxt = fl->snd_max = fl->iss + 1;
			fl->f |= TCP_FF_RTT_TIMING;
			fl->rtt_seq = fl->iss;
			fl->rtt_start_us = now;
		}
		if (!fl->rto_at)
			fl->rto_at = now + tcp_rto_now(fl);
		uint16_t win = tcp_wnd_field(s, fl, true);
		return tcp_frame(s, b, fl->mac, fl->rip, fl->lport, fl->rport, fl->iss, active ? 0 : fl->rcv_nxt,
				 active ? TCP_SYN : TCP_SYN | TCP_ACK, win, opt, optlen, 0);
	}
	if (!tcp_synced(fl) || fl->state == TCP_S_TIME_WAIT) {
		if (fl->state == TCP_S_TIME_WAIT && (fl->f & TCP_FF_ACK_NOW))
			return tcp_seg_out(s, fl, b, fl->snd_max, 0, 0, now);
		return 0;
	}
	bool fin_sent = fl->f & TCP_FF_FIN_SENT;
	if (fl->f & TCP_FF_REXMIT1) {
		/* fast retransmit / a NewReno partial ACK: the first unacknowledged segment */
		fl->f &= (uint16_t)~TCP_FF_REXMIT1;
		/* with SACK: the first hole from sack_rexmit on, no further than the
		 * next SACKed range; without, the segment at snd_una */
		uint32_t from = TCP_SEQ_GT(fl->sack_rexmit, fl->snd_una) ? fl->sack_rexmit : fl->snd_una, gap;
		uint32_t seq = tcp_score_hole(fl, from, &gap);
		/* only bytes already sent (below snd_max; snd_end once the FIN went): a
		 * retransmission never carries new data, which would not move snd_max */
		uint32_t lim = fin_sent ? fl->snd_end : fl->snd_max;
		uint32_t avail = TCP_SEQ_GT(lim, seq) ? lim - seq : 0;
		uint32_t len = tcp_min3(avail, gap, fl->smss);
		bool fin = fin_sent && seq + len == fl->snd_end;
		if (TCP_SEQ_LT(seq, fl->snd_max) && (len || fin)) {
			fl->f &= (uint16_t)~TCP_FF_RTT_TIMING;   /* Karn */
			s->st.rexmits++;
			uint32_t n = tcp_seg_out(s, fl, b, seq, fin ? TCP_FIN : 0, len, now);
			uint32_t sent = (n - TCP_ETH_HDR_BYTES - TCP_IP_HDR_BYTES) -
					(uint32_t)(b[TCP_ETH_HDR_BYTES + TCP_IP_HDR_BYTES + 12] >> 4) * 4;
			fl->sack_rexmit = seq + sent;
			return n;
		}
	}
	if (fl->f & (TCP_FF_PROBE | TCP_FF_KEEPALIVE)) {
		/* zero-window probe (RFC 9293 3.8.6.1) and keepalive (RFC 1122
		 * 4.2.3.6) alike: an old sequence number, no data; the peer's ACK
		 * carries its window and proves it is there. */
		fl->f &= (uint16_t)~(TCP_FF_PROBE | TCP_FF_KEEPALIVE);
		return tcp_seg_out(s, fl, b, fl->snd_una - 1, 0, 0, now);
	}
	uint32_t avail = TCP_SEQ_LT(fl->snd_nxt, fl->snd_end) ? fl->snd_end - fl->snd_nxt : 0;
	uint32_t edge_w = fl->snd_una + fl->snd_wnd, edge_c = fl->snd_una + fl->cwnd;
	uint32_t edge = TCP_SEQ_LT(edge_w, edge_c) ? edge_w : edge_c;
	uint32_t usable = TCP_SEQ_GT(edge, fl->snd_nxt) ? edge - fl->snd_nxt : 0;
	uint32_t len = tcp_min3(avail, usable, fl->smss);
	bool fin = (fl->f & TCP_FF_FIN_Q) && len == avail && TCP_SEQ_LEQ(fl->snd_nxt, fl->snd_end) &&
		   !(fin_sent && TCP_SEQ_GT(fl->snd_nxt, fl->snd_end));
	if (len || fin) {
		uint32_t seq = fl->snd_nxt;
		if (TCP_SEQ_LT(seq, fl->snd_max)) {
			s->st.rexmits++;   /* going back after an RTO */
		} else if (!(fl->f & TCP_FF_RTT_TIMING) && len) {
			fl->f |= TCP_FF_RTT_TIMING;
			fl->rtt_seq = seq;
			fl->rtt_start_us = now;
		}
		uint32_t n = tcp_seg_out(s, fl, b, seq, (uint8_t)((fin ? TCP_FIN : 0) | (len == avail && len ? TCP_PSH : 0)),
					 len, now);
		uint32_t sent = (n - TCP_ETH_HDR_BYTES - TCP_IP_HDR_BYTES) - (uint32_t)(b[TCP_ETH_HDR_BYTES + TCP_IP_HDR_BYTES + 12] >> 4) * 4;
		bool fin_out = b[TCP_ETH_HDR_BYTES + TCP_IP_HDR_BYTES + 13] & TCP_FIN;
		fl->snd_nxt = seq + sent + fin_out;
		if (fin_out)
			fl->f |= TCP_FF_FIN_SENT;
		if (TCP_SEQ_GT(fl->snd_nxt, fl->snd_max))
			fl->snd_max = fl->snd_nxt;
		if (!fl->rto_at)
			fl->rto_at = now + tcp_rto_now(fl);
		return n;
	}
	if (avail && fl->snd_wnd == 0 && fl->snd_una == fl->snd_max && !fl->rto_at)
		fl->rto_at = now + tcp_rto_now(fl);   /* the persist timer (RFC 9293 3.8.6.1) */
	/* A pure ACK carries snd_max, not snd_nxt: after an RTO snd_nxt has
	 * gone back below what the peer holds, and a zero-length segment
	 * before its rcv_nxt is unacceptable (RFC 9293 3.10.7.4), so its ACK
	 * would be dropped; two ends retransmitting at once would never hear
	 * each other. */
	if (fl->f & TCP_FF_ACK_NOW)
		return tcp_seg_out(s, fl, b, fl->snd_max, 0, 0, now);
	return 0;
}

static bool tcp_flow_wants(const struct tcp_flow *fl)
{
	if (fl->state == TCP_S_FREE || fl->state == TCP_S_CLOSED)
		return false;
	if (fl->f & (TCP_FF_ACK_NOW | TCP_FF_SYN_OUT | TCP_FF_REXMIT1 | TCP_FF_PROBE | TCP_FF_KEEPALIVE))
		return true;
	if (!tcp_synced(fl) || fl->state == TCP_S_TIME_WAIT)
		return false;
	uint32_t avail = TCP_SEQ_LT(fl->snd_nxt, fl->snd_end) ? fl->snd_end - fl->snd_nxt : 0;
	if ((fl->f & TCP_FF_FIN_Q) && !avail && !((fl->f & TCP_FF_FIN_SENT) && TCP_SEQ_GT(fl->snd_nxt, fl->snd_end)))
		return true;
	if (!avail)
		return false;
	uint32_t edge_w = fl->snd_una + fl->snd_wnd, edge_c = fl->snd_una + fl->cwnd;
	uint32_t edge = TCP_SEQ_LT(edge_w, edge_c) ? edge_w : edge_c;
	return TCP_SEQ_GT(edge, fl->snd_nxt) || (fl->snd_wnd == 0 && !fl->rto_at);
}

uint32_t tcp_output(struct tcp_stack *s, uint64_t now, uint8_t *buf, uint32_t cap)
{
	assert(cap >= s->frame_max);
	s->now_us = now;
	if (s->ctl_n) {
		uint32_t h = s->ctl_head, len = s->ctl_len[h];
		memcpy(buf, s->ctl + (size_t)h * s->frame_max, len);
		s->ctl_head = (h + 1) % TCP_CTLQ_MAX;
		s->ctl_n--;
		return len;
	}
	while (s->tx_head != NIL) {
		uint32_t i = s->tx_head;
		struct tcp_flow *fl = &s->flows[i];
		s->tx_head = fl->txnext;
		if (s->tx_head == NIL)
			s->tx_tail = NIL;
		fl->f &= (uint16_t)~TCP_FF_ON_TX;
		uint32_t n = tcp_flow_out(s, fl, buf, now);
		if (tcp_flow_wants(fl))
			tcp_tx_mark(s, fl);   /* round robin: one segment per flow per turn */
		if (n)
			return n;
	}
	return 0;
}

uint32_t tcp_frame_bytes_max(const struct tcp_stack *s) { return s->frame_max; }

/* ---- input: the receive side ------------------------------------------------ */

/* Insert [a, b) among the out-of-order ranges; false when that would take
 * more than TCP_OOO_MAX (the segment is dropped, the peer sends it again). */
static bool tcp_ooo_insert(struct tcp_flow *fl, uint32_t a, uint32_t b)
{
	struct tcp_range out[TCP_OOO_MAX + 1], r = { a, b };
	uint32_t n = 0;
	bool placed = false;
	for (uint32_t i = 0; i < fl->ooo_n; i++) {
		struct tcp_range e = fl->ooo[i];
		if (TCP_SEQ_LT(e.end, r.start)) {
			out[n++] = e;
		} else if (TCP_SEQ_LT(r.end, e.start)) {
			if (!placed) {
				out[n++] = r;
				placed = true;
			}
			out[n++] = e;
		} else {
			if (TCP_SEQ_LT(e.start, r.start))
				r.start = e.start;
			if (TCP_SEQ_GT(e.end, r.end))
				r.end = e.end;
		}
	}
	if (!placed)
		out[n++] = r;
	if (n > TCP_OOO_MAX)
		return false;
	memcpy(fl->ooo, out, n * sizeof(out[0]));
	fl->ooo_n = (uint8_t)n;
	fl->sack_first = r.start;
	return true;
}

static void tcp_rx_copy(struct tcp_stack *s, struct tcp_flow *fl, uint32_t seq, const uint8_t *src, uint32_t len)
{
	s->st.rx_copied += len;
	uint32_t off = (seq - fl->irs - 1) & s->rx_mask;
	uint32_t a = s->cfg.rx_bytes - off < len ? s->cfg.rx_bytes - off : len;
	memcpy(fl->rx + off, src, a);
	memcpy(fl->rx, src + a, len - a);
}

/* The peer's FIN, in order (RFC 9293 3.10.7.4 eighth). */
static void tcp_rcv_fin(struct tcp_stack *s, struct tcp_flow *fl, uint64_t now)
{
	fl->f &= (uint16_t)~TCP_FF_FIN_PEND;
	fl->rcv_nxt = fl->rx_end + 1;
	fl->f |= TCP_FF_ACK_NOW;
	tcp_ev_post(s, fl, TCP_EVB_EOF);
	bool fin_acked = (fl->f & TCP_FF_FIN_SENT) && fl->snd_una == fl->snd_end + 1;
	switch (fl->state) {
	case TCP_S_ESTABLISHED:
		tcp_set_state(fl, TCP_S_CLOSE_WAIT);
		break;
	case TCP_S_FIN_WAIT_1:
		if (fin_acked)
			tcp_enter_time_wait(s, fl, now);
		else
			tcp_set_state(fl, TCP_S_CLOSING);   /* simultaneous close */
		break;
	case TCP_S_FIN_WAIT_2:
		tcp_enter_time_wait(s, fl, now);
		break;
	default:
		break;
	}
}

static void tcp_rcv_data(struct tcp_stack *s, struct tcp_flow *fl, uint32_t seq, const uint8_t *data,
			 uint32_t len, bool fin, uint64_t now)
{
	bool fin_seen = fl->rcv_nxt != fl->rx_end;
	uint32_t fin_at = seq + len;
	if (TCP_SEQ_LT(seq, fl->rx_end)) {            /* the part we hold already */
		uint32_t d = fl->rx_end - seq;
		if (d >= len) {
			d = len;
			s->st.dup_segs++;
		}
		seq += d; data += d; len -= d;
	}
	uint32_t lim = fl->rx_read + s->cfg.rx_bytes;   /* the ring's right edge */
	if (TCP_SEQ_GT(seq + len, lim)) {
		len = TCP_SEQ_GT(lim, seq) ? lim - seq : 0;
		fin = false;
	}
	if (fin_seen) {
		fl->f |= TCP_FF_ACK_NOW;   /* a retransmitted FIN or data past it */
		return;
	}
	if (len && seq == fl->rx_end) {
		tcp_rx_copy(s, fl, seq, data, len);
		fl->rx_end = seq + len;
		bool filled = fl->ooo_n;
		while (fl->ooo_n && TCP_SEQ_LEQ(fl->ooo[0].start, fl->rx_end)) {
			if (TCP_SEQ_GT(fl->ooo[0].end, fl->rx_end))
				fl->rx_end = fl->ooo[0].end;
			memmove(fl->ooo, fl->ooo + 1, (size_t)(fl->ooo_n - 1) * sizeof(fl->ooo[0]));
			fl->ooo_n--;
		}
		fl->rcv_nxt = fl->rx_end;
		tcp_ev_post(s, fl, TCP_EVB_READABLE);
		/* RFC 5681 4.2: ACK at least every second full segment, at once
		 * when a segment fills a hole; otherwise within TCP_DELACK_US. */
		if (filled || ++fl->segs_unacked >= 2) {
			fl->f |= TCP_FF_ACK_NOW;
		} else if (!(fl->f & TCP_FF_DELACK)) {
			fl->f |= TCP_FF_DELACK;
			fl->delack_at = now + TCP_DELACK_US;
			s->st.delacks++;
		}
	} else if (len) {
		/* out of order: into the ring at its place; an immediate
		 * duplicate ACK (RFC 5681 4.2) with SACK blocks tells the sender */
		s->st.ooo_segs++;
		if (tcp_ooo_insert(fl, seq, seq + len))
			tcp_rx_copy(s, fl, seq, data, len);
		else
			s->st.ooo_dropped++;
		fl->f |= TCP_FF_ACK_NOW;
	} else if (!fin) {
		fl->f |= TCP_FF_ACK_NOW;   /* a duplicate: ACK it so a lost ACK is repaired */
	}
	if (fin) {
		fl->fin_seq = fin_at;
		fl->f |= TCP_FF_FIN_PEND;
	}
	if ((fl->f & TCP_FF_FIN_PEND) && fl->fin_seq == fl->rx_end)
		tcp_rcv_fin(s, fl, now);
	else if (fin)
		fl->f |= TCP_FF_ACK_NOW;
}

/* ---- input: the send side (RFC 9293 3.10.7.4 fifth, RFC 5681, RFC 6582) ------ */

/* A congestion window beyond what the send ring can fill means nothing;
 * the cap keeps it from growing without bound (duplicate ACKs in fast
 * recovery each add a segment). */
static inline uint32_t tcp_cwnd_capped(const struct tcp_stack *s, uint64_t cwnd)
{
	uint64_t cap = 2ull * s->cfg.tx_bytes;
	return (uint32_t)(cwnd > cap ? cap : cwnd);
}

/* false when the ACK is unacceptable: for data not yet sent, or older than
 * the largest window the peer ever offered behind snd_una (RFC 5961 5.2:
 * a blind attacker must guess within that range, and no real peer's ACK
 * can be older). The segment is dropped, an ACK sent. */
/* The scoreboard without what snd_una has passed. */
static void tcp_score_prune(struct tcp_flow *fl)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < fl->score_n; i++) {
		struct tcp_range r = fl->score[i];
		if (TCP_SEQ_LEQ(r.end, fl->snd_una))
			continue;
		if (TCP_SEQ_LT(r.start, fl->snd_una))
			r.start = fl->snd_una;
		fl->score[k++] = r;
	}
	fl->score_n = (uint8_t)k;
}

/* A SACK block into the scoreboard: merged with what it touches, kept sorted;
 * past TCP_SCORE_MAX ranges the lowest goes (the holes under the highest
 * SACKed byte still count as holes, only retransmitted a little sooner). A
 * block outside (snd_una, snd_max] or empty is ignored (RFC 2018 is advice
 * the sender may ignore; a lie can only make it retransmit sooner). */
static void tcp_score_add(struct tcp_flow *fl, struct tcp_range b)
{
	if (!TCP_SEQ_LT(b.start, b.end) || TCP_SEQ_LEQ(b.end, fl->snd_una) || TCP_SEQ_GT(b.end, fl->snd_max))
		return;
	if (TCP_SEQ_LT(b.start, fl->snd_una))
		b.start = fl->snd_una;
	struct tcp_range out[TCP_SCORE_MAX + 1];
	uint32_t n = 0;
	bool placed = false;
	for (uint32_t i = 0; i < fl->score_n; i++) {
		struct tcp_range r = fl->score[i];
		if (TCP_SEQ_LT(r.end, b.start)) {
			out[n++] = r;
		} else if (TCP_SEQ_GT(r.start, b.end)) {
			if (!placed) {
				out[n++] = b;
				placed = true;
			}
			out[n++] = r;
		} else {   /* touching or overlapping: one range */
			if (TCP_SEQ_LT(r.start, b.start))
				b.start = r.start;
			if (TCP_SEQ_GT(r.end, b.end))
				b.end = r.end;
		}
	}
	if (!placed)
		out[n++] = b;
	uint32_t drop = n > TCP_SCORE_MAX ? n - TCP_SCORE_MAX : 0;
	memcpy(fl->score, out + drop, (n - drop) * sizeof(out[0]));
	fl->score_n = (uint8_t)(n - drop);
}

/* In recovery, with SACK: is there a hole from sack_rexmit on below the highest SACKed byte? */
static bool tcp_score_next(const struct tcp_flow *fl)
{
	if (!fl->score_n)
		return false;
	uint32_t from = TCP_SEQ_GT(fl->sack_rexmit, fl->snd_una) ? fl->sack_rexmit : fl->snd_una, len;
	uint32_t h = tcp_score_hole(fl, from, &len);
	return TCP_SEQ_LT(h, fl->score[fl->score_n - 1].start);
}

static bool tcp_rcv_ack(struct tcp_stack *s, struct tcp_flow *fl, const struct tcp_seg *g, uint64_t now)
{
	if (TCP_SEQ_GT(g->ack, fl->snd_max) || TCP_SEQ_LT(g->ack, fl->snd_una - fl->max_wnd)) {
		fl->f |= TCP_FF_ACK_NOW;
		return false;
	}
	uint32_t old_wnd = fl->snd_wnd;
	/* RFC 9293 3.10.7.4 fifth (793's SND.WL1/WL2 rule): the window only
	 * from an ACK at or above snd_una, and not from an older segment; an
	 * old ACK would pull the right edge back (even shut it). */
	if (TCP_SEQ_GEQ(g->ack, fl->snd_una) &&
	    (TCP_SEQ_LT(fl->snd_wl1, g->seq) || (fl->snd_wl1 == g->seq && TCP_SEQ_LEQ(fl->snd_wl2, g->ack)))) {
		fl->snd_wnd = (uint32_t)g->wnd << fl->snd_shift;
		fl->snd_wl1 = g->seq;
		fl->snd_wl2 = g->ack;
		if (fl->snd_wnd > fl->max_wnd)
			fl->max_wnd = fl->snd_wnd;
		if (old_wnd == 0 && fl->snd_wnd && fl->snd_una == fl->snd_max) {
			fl->rto_at = 0;     /* the window opened: the persist timer is done */
			fl->backoff = 0;
		}
	}
	if (fl->sack_ok && TCP_SEQ_GEQ(g->ack, fl->snd_una)) {
		uint32_t una = fl->snd_una;
		fl->snd_una = g->ack;   /* the blocks are read against the new left edge */
		for (uint32_t i = 0; i < g->nsack; i++)
			tcp_score_add(fl, g->sack[i]);
		fl->snd_una = una;
	}
	if (TCP_SEQ_LEQ(g->ack, fl->snd_una)) {
		/* RFC 5681 2: a duplicate ACK carries no data, no SYN/FIN, the same
		 * window, and something is outstanding. */
		if (g->ack == fl->snd_una && !g->len && !(g->flags & (TCP_SYN | TCP_FIN)) && fl->snd_wnd == old_wnd &&
		    fl->snd_una != fl->snd_max) {
			if (fl->dupacks < UINT8_MAX)
				fl->dupacks++;   /* saturates: a uint8_t would wrap to 0 at 256 */
			uint32_t flight = fl->snd_max - fl->snd_una;
			if (fl->dupacks == TCP_DUPACK_THRESH && !fl->in_recovery &&
			    TCP_SEQ_GT(g->ack, fl->recover)) {   /* RFC 6582 3.2 step 2 */
				fl->ssthresh = flight / 2 > 2u * fl->smss ? flight / 2 : 2u * fl->smss;
				fl->recover = fl->snd_max;
				fl->cwnd = fl->ssthresh + 3u * fl->smss;
				fl->in_recovery = true;
				fl->f |= TCP_FF_REXMIT1;
				fl->sack_rexmit = fl->snd_una;
				s->st.fast_rexmits++;
			} else if (fl->in_recovery && tcp_score_next(fl) && !(fl->f & TCP_FF_REXMIT1)) {
				/* a segment left the network: with SACK it makes room for
				 * the next hole's retransmission (not cwnd for new data) */
				fl->f |= TCP_FF_REXMIT1;
				s->st.sack_rexmits++;
			} else if (fl->in_recovery) {
				/* step 3: inflate per extra duplicate, to the same cap */
				fl->cwnd = tcp_cwnd_capped(s, (uint64_t)fl->cwnd + fl->smss);
			}
		}
		return true;
	}
	uint32_t acked = g->ack - fl->snd_una;
	fl->snd_una = g->ack;
	tcp_score_prune(fl);
	if (TCP_SEQ_LT(fl->snd_nxt, fl->snd_una))
		fl->snd_nxt = fl->snd_una;
	fl->dupacks = 0;
	fl->backoff = 0;
	/* RTT: from the echoed timestamp (RFC 7323 4.1), else from the timed
	 * segment unless it was retransmitted (Karn, RFC 6298 3). */
	if (fl->ts_ok && g->has_ts && g->tsecr) {
		uint32_t ms = tcp_ts_now(now) - g->tsecr;
		if (ms < TCP_RTO_MAX_US / 1000)
			tcp_rtt_sample(fl, (uint64_t)ms * 1000u);
		fl->f &= (uint16_t)~TCP_FF_RTT_TIMING;
	} else if ((fl->f & TCP_FF_RTT_TIMING) && TCP_SEQ_GT(g->ack, fl->rtt_seq)) {
		tcp_rtt_sample(fl, now - fl->rtt_start_us);
		fl->f &= (uint16_t)~TCP_FF_RTT_TIMING;
	}
	if (fl->in_recovery) {
		if (TCP_SEQ_GEQ(g->ack, fl->recover)) {     /* full ACK: RFC 6582 3.2 step 3 */
			uint32_t flight = fl->snd_max - fl->snd_una;
			fl->cwnd = flight + fl->smss < fl->ssthresh ? flight + fl->smss : fl->ssthresh;
			fl->in_recovery = false;
		} else {                                     /* partial ACK: the next hole */
			if (!fl->score_n || !TCP_SEQ_GT(fl->sack_rexmit, fl->snd_una)) {
				fl->sack_rexmit = fl->snd_una;
				fl->f |= TCP_FF_REXMIT1;
			} else if (tcp_score_next(fl)) {
				/* with SACK the hole at snd_una went already this
				 * recovery: on with the next one, not that again */
				fl->f |= TCP_FF_REXMIT1;
			}
			fl->cwnd = fl->cwnd > acked ? fl->cwnd - acked : 0;
			fl->cwnd += fl->smss;
		}
	} else if (fl->cwnd < fl->ssthresh) {
		fl->cwnd += acked < fl->smss ? acked : fl->smss;              /* slow start */
	} else {
		uint32_t inc = (uint32_t)((uint64_t)fl->smss * fl->smss / fl->cwnd);
		fl->cwnd += inc ? inc : 1;                                      /* congestion avoidance */
	}
	fl->cwnd = tcp_cwnd_capped(s, fl->cwnd);
	fl->rto_at = fl->snd_una == fl->snd_max ? 0 : now + tcp_rto_now(fl);  /* RFC 6298 5.2, 5.3 */
	(void)acked;
	tcp_ev_post(s, fl, TCP_EVB_WRITABLE);
	return true;
}

/* ---- input: one segment on a flow ------------------------------------------- */

static void tcp_open_done(struct tcp_stack *s, struct tcp_flow *fl, const struct tcp_seg *g, uint64_t now)
{
	fl->snd_una = g->ack;
	if (TCP_SEQ_LT(fl->snd_nxt, fl->snd_una))
		fl->snd_nxt = fl->snd_una;
	fl->snd_end = fl->iss + 1;
	fl->snd_wl1 = g->seq;
	fl->snd_wl2 = g->ack;
	/* RFC 7323 2.2: a SYN's window is never scaled, the rest are */
	fl->snd_wnd = (uint32_t)g->wnd << ((g->flags & TCP_SYN) ? 0 : fl->snd_shift);
	fl->max_wnd = fl->snd_wnd;
	if (fl->f & TCP_FF_RTT_TIMING && fl->backoff == 0)
		tcp_rtt_sample(fl, now - fl->rtt_start_us);
	fl->f &= (uint16_t)~TCP_FF_RTT_TIMING;
	fl->rto_at = 0;
	fl->backoff = 0;
	fl->recover = fl->iss;
	tcp_set_state(fl, TCP_S_ESTABLISHED);
	fl->f |= TCP_FF_HANDLE;
	tcp_ev_post(s, fl, TCP_EVB_OPEN);
	if (s->cfg.keepalive_idle_us)
		fl->idle_at = now + s->cfg.keepalive_idle_us;
	s->st.conns_opened++;
}

static void tcp_in_syn_sent(struct tcp_stack *s, struct tcp_flow *fl, const struct tcp_seg *g, uint64_t now)
{
	bool ack_ok = (g->flags & TCP_ACK) && g->ack == fl->iss + 1;
	if ((g->flags & TCP_ACK) && !ack_ok) {
		tcp_rst_reply(s, g);
		return;
	}
	if (g->flags & TCP_RST) {
		if (ack_ok)
			tcp_flow_close(s, fl, -ECONNREFUSED);
		return;
	}
	if (!(g->flags & TCP_SYN) || !ack_ok)
		return;   /* a simultaneous open (SYN without ACK) is not a server's case */
	/* our SYN carried every option the flags allow, so the SYN-ACK's
	 * options settle them as a SYN's do for a passive open */
	tcp_negotiate(s, fl, g);
	tcp_open_done(s, fl, g, now);
	fl->f |= TCP_FF_ACK_NOW;
}

/* The peer is alive: restart the silent-peer limit, the keepalive count and
 * the FIN_WAIT_2 idle bound. Only for a segment that passed the timestamp,
 * sequence and ACK checks: out-of-window garbage (or an attacker's guesses)
 * must not keep a dead connection's flow for ever. */
static void tcp_heard(struct tcp_stack *s, struct tcp_flow *fl, uint64_t now)
{
	fl->last_rx_us = now;
	fl->probes_out = 0;
	if (fl->state == TCP_S_FIN_WAIT_2)
		fl->idle_at = now + TCP_FIN_WAIT_2_US;   /* an idle bound: the peer may still be sending */
	else if (s->cfg.keepalive_idle_us && fl->state >= TCP_S_ESTABLISHED && fl->state <= TCP_S_CLOSING)
		fl->idle_at = now + s->cfg.keepalive_idle_us;
}

static void tcp_in_flow(struct tcp_stack *s, struct tcp_flow *fl, const struct tcp_seg *g, uint64_t now)
{
	if (fl->state == TCP_S_SYN_SENT) {
		tcp_in_syn_sent(s, fl, g, now);
		return;
	}
	bool syn = g->flags & TCP_SYN, fin = g->flags & TCP_FIN, rst = g->flags & TCP_RST;
	/* PAWS (RFC 7323 5.3): an older timestamp is an old duplicate */
	if (fl->ts_ok && g->has_ts && !rst && TCP_SEQ_LT(g->tsval, fl->ts_recent)) {
		s->st.paws_drops++;
		fl->f |= TCP_FF_ACK_NOW;
		return;
	}
	/* acceptability (RFC 9293 3.10.7.4 first, the four cases) */
	uint32_t wnd = tcp_rwnd(s, fl), seglen = g->len + syn + fin;
	bool ok;
	if (seglen == 0)   /* (up to the edge we advertised: the peer's snd_max may sit there) */
		ok = TCP_SEQ_LEQ(fl->rcv_nxt, g->seq) &&
		     (TCP_SEQ_LT(g->seq, fl->rcv_nxt + wnd) || TCP_SEQ_LEQ(g->seq, fl->rcv_adv));
	else if (wnd == 0)
		ok = false;
	else
		ok = (TCP_SEQ_LEQ(fl->rcv_nxt, g->seq) && TCP_SEQ_LT(g->seq, fl->rcv_nxt + wnd)) ||
		     (TCP_SEQ_LEQ(fl->rcv_nxt, g->seq + seglen - 1) && TCP_SEQ_LT(g->seq + seglen - 1, fl->rcv_nxt + wnd));
	/* a zero window still takes the ACK and the window of a segment at
	 * rcv_nxt (RFC 9293 3.10.7.4: "if the RCV.WND is zero, no segments will
	 * be acceptable, but special allowance should be made to accept valid
	 * ACKs, URGs, and RSTs") */
	bool ack_only = !ok && wnd == 0 && g->seq == fl->rcv_nxt && (g->flags & TCP_ACK) && !rst && !syn;
	if (!ok && !ack_only) {
		if (!rst) {
			fl->f |= TCP_FF_ACK_NOW;
			s->st.dup_segs++;
		}
		return;
	}
	if (rst) {
		/* RFC 5961 3.2: only the exact sequence resets; the rest of the
		 * window gets a challenge ACK (a blind RST must guess rcv_nxt) */
		s->st.rst_rcvd++;
		if (g->seq != fl->rcv_nxt) {
			fl->f |= TCP_FF_ACK_NOW;
			s->st.challenge_acks++;
			return;
		}
		bool orderly = fl->state == TCP_S_LAST_ACK || fl->state == TCP_S_CLOSING || fl->state == TCP_S_TIME_WAIT;
		tcp_flow_close(s, fl, orderly ? 0 : -ECONNRESET);
		return;
	}
	if (syn) {
		if (fl->state == TCP_S_SYN_RCVD && g->seq == fl->irs) {
			fl->f |= TCP_FF_SYN_OUT;   /* the SYN again: our SYN-ACK was lost */
			return;
		}
		fl->f |= TCP_FF_ACK_NOW;       /* RFC 5961 4.2: a challenge ACK */
		s->st.challenge_acks++;
		return;
	}
	if (!(g->flags & TCP_ACK))
		return;
	/* RFC 7323 4.3: TS.Recent from a segment that starts at or before the
	 * edge we last acknowledged */
	if (fl->ts_ok && g->has_ts && TCP_SEQ_LEQ(g->seq, fl->rcv_nxt) && TCP_SEQ_GEQ(g->tsval, fl->ts_recent))
		fl->ts_recent = g->tsval;
	if (fl->state == TCP_S_SYN_RCVD) {
		if (!(TCP_SEQ_GT(g->ack, fl->snd_una) && TCP_SEQ_LEQ(g->ack, fl->snd_max))) {
			tcp_rst_reply(s, g);
			return;
		}
		tcp_open_done(s, fl, g, now);
	} else if (!tcp_rcv_ack(s, fl, g, now)) {
		return;
	}
	tcp_heard(s, fl, now);
	bool fin_acked = (fl->f & TCP_FF_FIN_SENT) && fl->snd_una == fl->snd_end + 1;
	switch (fl->state) {
	case TCP_S_FIN_WAIT_1:
		if (fin_acked) {
			tcp_set_state(fl, TCP_S_FIN_WAIT_2);
			/* not in RFC 9293: a peer that goes silent without its FIN
			 * would hold the flow for ever; Linux bounds it the same
			 * way (tcp_fin_timeout). Restarted by every segment. */
			fl->idle_at = now + TCP_FIN_WAIT_2_US;
		}
		break;
	case TCP_S_CLOSING:
		if (fin_acked)
			tcp_enter_time_wait(s, fl, now);
		return;
	case TCP_S_LAST_ACK:
		if (fin_acked)
			tcp_flow_close(s, fl, 0);
		return;
	case TCP_S_TIME_WAIT:
		if (fin) {   /* the peer's FIN again: our ACK was lost; restart 2*MSL */
			fl->f |= TCP_FF_ACK_NOW;
			fl->idle_at = now + s->cfg.time_wait_us;
		}
		return;
	default:
		break;
	}
	if (ack_only) {
		if (g->len || fin)
			fl->f |= TCP_FF_ACK_NOW;   /* the data found no room: say the window is 0 */
		return;
	}
	if (fl->state == TCP_S_ESTABLISHED || fl->state == TCP_S_FIN_WAIT_1 || fl->state == TCP_S_FIN_WAIT_2) {
		if (g->len || fin)
			tcp_rcv_data(s, fl, g->seq, g->data, g->len, fin, now);
	} else if (g->len || fin) {
		fl->f |= TCP_FF_ACK_NOW;   /* CLOSE_WAIT: the peer's data and FIN again */
	}
}

/* A SYN no flow holds: take a flow (the connection limit bounds a flood). */
static int tcp_passive_open(struct tcp_stack *s, const struct tcp_seg *g, uint64_t now)
{
	struct tcp_flow *fl = tcp_flow_alloc(s, g->src, g->sport, g->dport);
	if (!fl) {
		s->st.syn_dropped++;
		return -ENOBUFS;
	}
	memcpy(fl->mac, g->mac, 6);
	tcp_negotiate(s, fl, g);
	tcp_set_state(fl, TCP_S_SYN_RCVD);
	fl->f |= TCP_FF_PASSIVE | TCP_FF_SYN_OUT;
	fl->iss = tcp_isn(s, fl, now);
	fl->snd_una = fl->snd_nxt = fl->snd_max = fl->snd_end = fl->iss;
	fl->last_rx_us = now;
	tcp_tx_mark(s, fl);
	return 0;
}

static int tcp_in_tcp(struct tcp_stack *s, const uint8_t *mac, uint32_t src, uint32_t dst, const uint8_t *th,
		      uint32_t tl, uint64_t now)
{
	if (tl < TCP_HDR_BYTES)
		return -EPROTO;
	if (csum_fold(csum_add(csum_pseudo(src, dst, tl), th, tl)) != 0) {
		s->st.drop_csum++;
		return -EBADMSG;
	}
	uint32_t off = (uint32_t)(th[12] >> 4) * 4;
	if (off < TCP_HDR_BYTES || off > tl)
		return -EPROTO;
	struct tcp_seg g = {
		.sport = rd16(th), .dport = rd16(th + 2), .seq = rd32(th + 4), .ack = rd32(th + 8),
		.flags = th[13] & 0x3f, .wnd = rd16(th + 14), .data = th + off, .len = tl - off,
		.mac = mac, .src = src,
	};
	if (tcp_parse_opts(&g, th + TCP_HDR_BYTES, off - TCP_HDR_BYTES))
		return -EPROTO;
	if ((g.flags & TCP_SYN) && (g.flags & (TCP_RST | TCP_FIN)))
		return -EPROTO;   /* no legitimate stack sends these together */
	struct tcp_flow *fl = tcp_lookup(s, src, g.sport, g.dport);
	if (fl && fl->state == TCP_S_TIME_WAIT && (g.flags & (TCP_SYN | TCP_ACK | TCP_RST)) == TCP_SYN) {
		/* RFC 6191 (timestamps) and RFC 1122 4.2.2.13 (sequence numbers):
		 * a new SYN above the old incarnation ends TIME_WAIT at once */
		bool newer = fl->ts_ok && g.has_ts ? TCP_SEQ_GT(g.tsval, fl->ts_recent)
						   : TCP_SEQ_GT(g.seq, fl->rcv_nxt);
		if (!newer || (fl->f & TCP_FF_HANDLE)) {
			/* (with the application yet to see CLOSED the slot cannot go:
			 * the peer's next SYN, a second on, finds it free) */
			fl->f |= TCP_FF_ACK_NOW;
			tcp_tx_mark(s, fl);
			return 0;
		}
		tcp_flow_close(s, fl, 0);
		s->st.tw_reused++;
		fl = NULL;
	}
	/* A CLOSED flow waits only for the application's tcp_release: to the
	 * peer the connection is gone (RFC 9293 3.10.7.1, CLOSED), so it is
	 * answered as if no flow held it, a RST for anything but a RST. (A SYN
	 * too: the slot cannot take a new connection before the release, and
	 * the peer's next SYN finds it free.) */
	if (fl && fl->state == TCP_S_CLOSED) {
		tcp_rst_reply(s, &g);
		return 0;
	}
	if (!fl) {
		if (g.flags & TCP_RST)
			return 0;
		if (g.dport != s->cfg.port || (g.flags & (TCP_SYN | TCP_ACK)) != TCP_SYN) {
			tcp_rst_reply(s, &g);
			return 0;
		}
		return tcp_passive_open(s, &g, now);
	}
	tcp_in_flow(s, fl, &g, now);
	if (fl->state != TCP_S_FREE)
		tcp_tx_mark(s, fl);
	return 0;
}

/* ---- input: ARP, ICMP, IPv4, Ethernet ---------------------------------------- */

static void tcp_arp_learn(struct tcp_stack *s, uint32_t ip, const uint8_t mac[6], bool add)
{
	for (uint32_t i = 0; i < TCP_ARP_ENTRIES; i++) {
		if (s->arp[i].used && s->arp[i].ip == ip) {
			memcpy(s->arp[i].mac, mac, 6);   /* RFC 826: merge */
			return;
		}
	}
	if (!add)
		return;
	uint32_t i = s->arp_next++ % TCP_ARP_ENTRIES;   /* oldest entry goes */
	s->arp[i].used = true;
	s->arp[i].ip = ip;
	memcpy(s->arp[i].mac, mac, 6);
}

/* ARP for IPv4 over Ethernet (RFC 826). */
static int tcp_in_arp(struct tcp_stack *s, const uint8_t *a, uint32_t n)
{
	if (n < 28 || rd16(a) != 1 || rd16(a + 2) != 0x0800 || a[4] != 6 || a[5] != 4)
		return -EPROTO;
	uint16_t op = rd16(a + 6);
	uint32_t spa = rd32(a + 14), tpa = rd32(a + 24);
	bool for_us = tpa == s->cfg.ip;
	if (spa != 0)
		tcp_arp_learn(s, spa, a + 8, for_us);
	if (op != 1 || !for_us)
		return for_us ? 0 : -ENOENT;
	uint8_t *b = tcp_ctl_slot(s);
	if (!b)
		return 0;
	tcp_eth(s, b, a + 8, 0x0806);
	uint8_t *r = b + TCP_ETH_HDR_BYTES;
	wr16(r, 1); wr16(r + 2, 0x0800); r[4] = 6; r[5] = 4; wr16(r + 6, 2);
	memcpy(r + 8, s->cfg.mac, 6); wr32(r + 14, s->cfg.ip);
	memcpy(r + 18, a + 8, 6); wr32(r + 24, spa);
	tcp_ctl_push(s, TCP_ETH_HDR_BYTES + 28);
	s->st.arp_replies++;
	s->st.tx_frames++;
	return 0;
}

/* ICMP echo (RFC 792): the same identifier, sequence and data back. */
static int tcp_in_icmp(struct tcp_stack *s, const uint8_t *mac, uint32_t src, const uint8_t *m, uint32_t n)
{
	if (n < 8)
		return -EPROTO;
	if (csum_fold(csum_add(0, m, n)) != 0) {
		s->st.drop_csum++;
		return -EBADMSG;
	}
	if (m[0] != 8 || m[1] != 0)
		return 0;   /* not an echo request: nothing for a server to do */
	if (TCP_ETH_HDR_BYTES + TCP_IP_HDR_BYTES + n > s->frame_max)
		return -EPROTO;
	uint8_t *b = tcp_ctl_slot(s);
	if (!b)
		return 0;
	tcp_eth(s, b, mac, 0x0800);
	tcp_ip(s, b + TCP_ETH_HDR_BYTES, src, 1, n);
	uint8_t *r = b + TCP_ETH_HDR_BYTES + TCP_IP_HDR_BYTES;
	memcpy(r, m, n);
	r[0] = 0;
	wr16(r + 2, 0);
	wr16(r + 2, csum_fold(csum_add(0, r, n)));
	tcp_ctl_push(s, TCP_ETH_HDR_BYTES + TCP_IP_HDR_BYTES + n);
	s->st.icmp_replies++;
	s->st.tx_frames++;
	return 0;
}

int tcp_input(struct tcp_stack *s, const uint8_t *fr, uint32_t len, uint64_t now)
{
	s->now_us = now;
	s->st.rx_frames++;
	if (len < TCP_ETH_HDR_BYTES) {
		s->st.drop_eth++;
		return -EPROTO;
	}
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint16_t type = rd16(fr + 12);
	if (memcmp(fr, s->cfg.mac, 6) && memcmp(fr, bcast, 6)) {
		s->st.drop_eth++;
		return -ENOENT;
	}
	if (type == 0x0806)
		return tcp_in_arp(s, fr + TCP_ETH_HDR_BYTES, len - TCP_ETH_HDR_BYTES);
	if (type != 0x0800) {
		s->st.drop_eth++;
		return -ENOENT;
	}
	const uint8_t *ip = fr + TCP_ETH_HDR_BYTES;
	uint32_t n = len - TCP_ETH_HDR_BYTES;
	if (n < TCP_IP_HDR_BYTES) {   /* before ip[0] is read: a bare Ethernet header */
		s->st.drop_ip++;
		return -EPROTO;
	}
	uint32_t ihl = (uint32_t)(ip[0] & 0xf) * 4;
	if (ip[0] >> 4 != 4 || ihl < TCP_IP_HDR_BYTES || ihl > n) {
		s->st.drop_ip++;
		return -EPROTO;
	}
	uint32_t tot = rd16(ip + 2);
	if (tot < ihl || tot > n) {   /* shorter is padding (Ethernet's 60-byte minimum) */
		s->st.drop_ip++;
		return -EPROTO;
	}
	if (csum_fold(csum_add(0, ip, ihl)) != 0) {
		s->st.drop_csum++;
		return -EBADMSG;
	}
	/* no reassembly: a fragment (MF, or an offset) is dropped. TCP peers
	 * do path MTU discovery with DF set (RFC 1191), so none should come. */
	if (rd16(ip + 6) & 0x3fff) {
		s->st.drop_frag++;
		return -EPROTO;
	}
	uint32_t src = rd32(ip + 12), dst = rd32(ip + 16);
	if (dst != s->cfg.ip) {
		s->st.drop_ip++;
		return -ENOENT;
	}
	if (ip[9] == 1)
		return tcp_in_icmp(s, fr + 6, src, ip + ihl, tot - ihl);
	if (ip[9] != 6) {
		s->st.drop_ip++;
		return -ENOENT;
	}
	int rc = tcp_in_tcp(s, fr + 6, src, dst, ip + ihl, tot - ihl, now);
	if (rc == -EPROTO)
		s->st.drop_tcp++;
	return rc;
}

/* ---- timers ------------------------------------------------------------------ */

static void tcp_rto_fire(struct tcp_stack *s, struct tcp_flow *fl, uint64_t now)
{
	fl->rto_at = 0;
	if (fl->state == TCP_S_SYN_RCVD || fl->state == TCP_S_SYN_SENT) {
		if (fl->backoff >= TCP_SYNACK_RETRIES_MAX) {
			tcp_flow_close(s, fl, -ETIMEDOUT);   /* a half-open flow goes */
			return;
		}
		fl->backoff++;
		fl->f &= (uint16_t)~TCP_FF_RTT_TIMING;
		fl->f |= TCP_FF_SYN_OUT;
		fl->rto_at = now + tcp_rto_now(fl);
		s->st.rto_fires++;
		return;
	}
	if (!tcp_synced(fl) || fl->state == TCP_S_TIME_WAIT)
		return;
	if (fl->snd_una == fl->snd_max) {
		uint32_t avail = TCP_SEQ_LT(fl->snd_nxt, fl->snd_end) ? fl->snd_end - fl->snd_nxt : 0;
		if (avail && fl->snd_wnd == 0) {
			/* persist: probe and back off, but never give up while the
			 * peer answers (RFC 1122 4.2.2.17); a silent one goes */
			if (now - fl->last_rx_us >= TCP_ZWP_SILENT_MAX_US) {
				tcp_rst_flow(s, fl);
				tcp_flow_close(s, fl, -ETIMEDOUT);
				return;
			}
			fl->f |= TCP_FF_PROBE;
			if (fl->backoff < TCP_RETRIES_MAX)
				fl->backoff++;
			uint64_t d = tcp_rto_now(fl);
			fl->rto_at = now + (d > TCP_PERSIST_MAX_US ? TCP_PERSIST_MAX_US : d);
			s->st.probes++;
		}
		return;
	}
	/* The window closed with data out (the receiver shrank it, RFC 9293
	 * 3.8.6.2.1): nothing can be retransmitted, and a lost window update
	 * is never sent again, so probe as the persist timer does, and do not
	 * count it against the retries while the peer answers. */
	bool shut = fl->snd_wnd == 0;
	if (shut && now - fl->last_rx_us < TCP_ZWP_SILENT_MAX_US)
		fl->f |= TCP_FF_PROBE;
	else if (fl->backoff >= TCP_RETRIES_MAX || shut) {
		tcp_rst_flow(s, fl);
		tcp_flow_close(s, fl, -ETIMEDOUT);
		return;
	}
	/* RFC 5681 3.1 (eq. 4) and 6298 5.5-5.7: halve, one segment, go back,
	 * double the timer */
	uint32_t flight = fl->snd_max - fl->snd_una;
	fl->ssthresh = flight / 2 > 2u * fl->smss ? flight / 2 : 2u * fl->smss;
	fl->cwnd = fl->smss;
	fl->snd_nxt = fl->snd_una;
	fl->in_recovery = false;
	fl->score_n = 0;             /* RFC 2018 8: the receiver may have reneged */
	fl->recover = fl->snd_max;   /* RFC 6582 3.2 step 4 */
	fl->dupacks = 0;
	fl->f &= (uint16_t)~TCP_FF_RTT_TIMING;   /* Karn: no sample from a retransmission */
	if (fl->backoff < TCP_RETRIES_MAX)
		fl->backoff++;
	uint64_t d = tcp_rto_now(fl);
	fl->rto_at = now + (shut && d > TCP_PERSIST_MAX_US ? TCP_PERSIST_MAX_US : d);
	s->st.rto_fires++;
}

static void tcp_idle_fire(struct tcp_stack *s, struct tcp_flow *fl, uint64_t now)
{
	fl->idle_at = 0;
	if (fl->state == TCP_S_TIME_WAIT || fl->state == TCP_S_FIN_WAIT_2) {
		tcp_flow_close(s, fl, fl->state == TCP_S_TIME_WAIT ? 0 : -ETIMEDOUT);
		return;
	}
	if (!s->cfg.keepalive_idle_us || !tcp_synced(fl))
		return;
	if (fl->probes_out >= s->cfg.keepalive_probes) {
		tcp_rst_flow(s, fl);
		tcp_flow_close(s, fl, -ETIMEDOUT);
		return;
	}
	fl->probes_out++;
	fl->f |= TCP_FF_KEEPALIVE;
	fl->idle_at = now + s->cfg.keepalive_intvl_us;
	s->st.keepalives++;
}

void tcp_timers(struct tcp_stack *s, uint64_t now)
{
	s->now_us = now;
	for (uint32_t i = s->used_head; i != NIL;) {
		struct tcp_flow *fl = &s->flows[i];
		i = fl->unext;   /* the flow may be freed below */
		if (fl->state == TCP_S_CLOSED)
			continue;
		if (fl->delack_at && now >= fl->delack_at) {
			fl->delack_at = 0;
			fl->f |= TCP_FF_ACK_NOW;
		}
		if (fl->rto_at && now >= fl->rto_at)
			tcp_rto_fire(s, fl, now);
		if (fl->state != TCP_S_FREE && fl->state != TCP_S_CLOSED && fl->idle_at && now >= fl->idle_at)
			tcp_idle_fire(s, fl, now);
		if (fl->state != TCP_S_FREE && tcp_flow_wants(fl))
			tcp_tx_mark(s, fl);
	}
}

/* ---- the application's side --------------------------------------------------- */

int tcp_events(struct tcp_stack *s, struct tcp_ev *ev, int max)
{
	int n = 0;
	while (n < max && s->ev_head != NIL) {
		struct tcp_flow *fl = &s->flows[s->ev_head];
		if (!fl->ev || !(fl->f & TCP_FF_HANDLE)) {
			s->ev_head = fl->evnext;
			if (s->ev_head == NIL)
				s->ev_tail = NIL;
			fl->f &= (uint16_t)~TCP_FF_ON_EV;
			continue;
		}
		static const uint8_t order[] = { TCP_EVB_OPEN, TCP_EVB_READABLE, TCP_EVB_WRITABLE, TCP_EVB_EOF, TCP_EVB_CLOSED };
		static const uint8_t kind[] = { TCP_EV_OPEN, TCP_EV_READABLE, TCP_EV_WRITABLE, TCP_EV_EOF, TCP_EV_CLOSED };
		for (uint32_t k = 0; k < sizeof(order) && n < max; k++) {
			if (!(fl->ev & order[k]))
				continue;
			fl->ev &= (uint8_t)~order[k];
			ev[n++] = (struct tcp_ev){ .kind = kind[k], .conn = tcp_handle(s, fl),
						  .status = order[k] == TCP_EVB_CLOSED ? fl->close_status : 0 };
			if (order[k] == TCP_EVB_CLOSED) {
				fl->ev = 0;   /* the last event: the application releases the handle */
				break;
			}
		}
	}
	return n;
}

uint32_t tcp_recv_peek(struct tcp_stack *s, uint32_t conn, const uint8_t **data)
{
	struct tcp_flow *fl = tcp_get(s, conn);
	if (!fl)
		return 0;
	uint32_t n = fl->rx_end - fl->rx_read;   /* (0 before the handshake: both 0) */
	if (!n)
		return 0;
	uint32_t off = (fl->rx_read - fl->irs - 1) & s->rx_mask;
	*data = fl->rx + off;
	return s->cfg.rx_bytes - off < n ? s->cfg.rx_bytes - off : n;
}

void tcp_recv_consume(struct tcp_stack *s, uint32_t conn, uint32_t n)
{
	struct tcp_flow *fl = tcp_get(s, conn);
	if (!fl)
		return;
	assert(n <= fl->rx_end - fl->rx_read);
	fl->rx_read += n;
	/* RFC 9293 3.8.6.2.2 (receiver SWS avoidance): announce the opened
	 * window once it grew by a segment or half the ring */
	uint32_t edge = fl->rx_read + s->cfg.rx_bytes, grow = edge - fl->rcv_adv;
	uint32_t step = s->cfg.rx_bytes / 2 < fl->smss ? s->cfg.rx_bytes / 2 : fl->smss;
	if (tcp_synced(fl) && TCP_SEQ_GT(edge, fl->rcv_adv) && grow >= step) {
		fl->f |= TCP_FF_ACK_NOW;
		tcp_tx_mark(s, fl);
	}
}

int tcp_send(struct tcp_stack *s, uint32_t conn, const void *data, uint32_t len)
{
	struct tcp_flow *fl = tcp_get(s, conn);
	if (!fl)
		return -ENOTCONN;
	if ((fl->state != TCP_S_ESTABLISHED && fl->state != TCP_S_CLOSE_WAIT) || (fl->f & TCP_FF_FIN_Q))
		return -EPIPE;
	uint32_t used = fl->snd_end - fl->snd_una, room = s->cfg.tx_bytes - used;
	if (len > room)
		len = room;
	uint32_t off = (fl->snd_end - fl->iss - 1) & s->tx_mask;
	uint32_t a = s->cfg.tx_bytes - off < len ? s->cfg.tx_bytes - off : len;
	memcpy(fl->tx + off, data, a);
	memcpy(fl->tx, (const uint8_t *)data + a, len - a);
	fl->snd_end += len;
	if (len)
		tcp_tx_mark(s, fl);
	return (int)len;
}

uint32_t tcp_unacked(struct tcp_stack *s, uint32_t conn)
{
	struct tcp_flow *fl = tcp_get(s, conn);
	return fl && TCP_SEQ_GT(fl->snd_end, fl->snd_una) ? fl->snd_end - fl->snd_una : 0;
}

int tcp_peer(struct tcp_stack *s, uint32_t conn, uint32_t *ip, uint16_t *port)
{
	struct tcp_flow *fl = tcp_get(s, conn);
	if (!fl)
		return -ENOTCONN;
	*ip = fl->rip;
	*port = fl->rport;
	return 0;
}

void tcp_close(struct tcp_stack *s, uint32_t conn)
{
	struct tcp_flow *fl = tcp_get(s, conn);
	if (!fl || (fl->f & TCP_FF_FIN_Q))
		return;
	switch (fl->state) {
	case TCP_S_SYN_SENT:
		tcp_flow_close(s, fl, 0);
		return;
	case TCP_S_ESTABLISHED:
		tcp_set_state(fl, TCP_S_FIN_WAIT_1);
		break;
	case TCP_S_CLOSE_WAIT:
		tcp_set_state(fl, TCP_S_LAST_ACK);
		break;
	default:
		return;
	}
	fl->f |= TCP_FF_FIN_Q;
	tcp_tx_mark(s, fl);
}

void tcp_release(struct tcp_stack *s, uint32_t conn)
{
	struct tcp_flow *fl = tcp_get(s, conn);
	if (!fl)
		return;
	fl->f &= (uint16_t)~TCP_FF_HANDLE;
	fl->ev = 0;
	switch (fl->state) {
	case TCP_S_CLOSED:
		tcp_flow_free(s, fl);
		return;
	case TCP_S_TIME_WAIT:
		fl->gen++;   /* TIME_WAIT keeps the slot, not the handle */
		return;
	default:
		/* released before it closed: the peer must not wait on a
		 * connection nobody reads, so it is reset */
		if (fl->state != TCP_S_SYN_SENT)
			tcp_rst_flow(s, fl);
		tcp_flow_close(s, fl, -ECONNABORTED);
		return;
	}
}

void tcp_abort(struct tcp_stack *s, uint32_t conn)
{
	struct tcp_flow *fl = tcp_get(s, conn);
	if (!fl || fl->state == TCP_S_CLOSED)
		return;
	if (fl->state != TCP_S_SYN_SENT)
		tcp_rst_flow(s, fl);
	tcp_flow_close(s, fl, -ECONNABORTED);
}

int tcp_connect(struct tcp_stack *s, uint32_t ip, uint16_t port, uint16_t lport, const uint8_t next_hop[6],
		uint64_t now, uint32_t *conn)
{
	if (tcp_lookup(s, ip, port, lport))
		return -EADDRINUSE;
	struct tcp_flow *fl = tcp_flow_alloc(s, ip, port, lport);
	if (!fl)
		return -ENOBUFS;
	memcpy(fl->mac, next_hop, 6);
	tcp_set_state(fl, TCP_S_SYN_SENT);
	fl->f |= TCP_FF_SYN_OUT | TCP_FF_HANDLE;
	fl->iss = tcp_isn(s, fl, now);
	fl->snd_una = fl->snd_nxt = fl->snd_max = fl->snd_end = fl->iss;
	fl->smss = TCP_MSS_DEFAULT;
	tcp_tx_mark(s, fl);
	*conn = tcp_handle(s, fl);
	return 0;
}

int tcp_arp_lookup(const struct tcp_stack *s, uint32_t ip, uint8_t mac[6])
{
	for (uint32_t i = 0; i < TCP_ARP_ENTRIES; i++) {
		if (s->arp[i].used && s->arp[i].ip == ip) {
			memcpy(mac, s->arp[i].mac, 6);
			return 0;
		}
	}
	return -ENOENT;
}

void tcp_arp_resolve(struct tcp_stack *s, uint32_t ip)
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t *b = tcp_ctl_slot(s);
	if (!b)
		return;
	tcp_eth(s, b, bcast, 0x0806);
	uint8_t *r = b + TCP_ETH_HDR_BYTES;
	wr16(r, 1); wr16(r + 2, 0x0800); r[4] = 6; r[5] = 4; wr16(r + 6, 1);
	memcpy(r + 8, s->cfg.mac, 6); wr32(r + 14, s->cfg.ip);
	memset(r + 18, 0, 6); wr32(r + 24, ip);
	tcp_ctl_push(s, TCP_ETH_HDR_BYTES + 28);
	s->st.tx_frames++;
	/* the reply is learned in tcp_in_arp (it is addressed to us) */
}

const struct tcp_stats *tcp_stats(const struct tcp_stack *s) { return &s->st; }
uint32_t tcp_flows_used(const struct tcp_stack *s) { return s->used_n; }

uint32_t tcp_flows_closing(const struct tcp_stack *s)
{
	uint32_t n = 0;
	for (uint32_t i = s->used_head; i != NIL; i = s->flows[i].unext) {
		const struct tcp_flow *fl = &s->flows[i];
		/* our FIN queued or sent and not yet acknowledged: the peer has not had all of it */
		if (fl->state == TCP_S_FIN_WAIT_1 || fl->state == TCP_S_CLOSING || fl->state == TCP_S_LAST_ACK ||
		    ((fl->state == TCP_S_ESTABLISHED || fl->state == TCP_S_CLOSE_WAIT) && (fl->f & TCP_FF_FIN_Q)))
			n++;
	}
	return n;
}

/* ---- creation --------------------------------------------------------------- */

static uint32_t tcp_hash_size(uint32_t conns)
{
	uint32_t h = 1;
	while (h < 2 * conns)
		h <<= 1;
	return h;
}

size_t tcp_memory_bytes(const struct tcp_config *c)
{
	uint32_t mtu = c->mtu ? c->mtu : TCP_MTU_DEFAULT;
	/* one line per user: flows, hash heads, rings, control frames */
	return (size_t)c->conns_max * sizeof(struct tcp_flow) +
	       (size_t)tcp_hash_size(c->conns_max) * sizeof(uint32_t) +
	       (size_t)c->conns_max * ((size_t)c->rx_bytes + c->tx_bytes) +
	       (size_t)TCP_CTLQ_MAX * (TCP_ETH_HDR_BYTES + mtu);
}

int tcp_create(const struct tcp_config *cfg, struct tcp_stack **out)
{
	struct tcp_config c = *cfg;
	if (!c.mtu)
		c.mtu = TCP_MTU_DEFAULT;
	if (!c.time_wait_us)
		c.time_wait_us = TCP_TIME_WAIT_US;
	if (c.mtu < 68 + TCP_OPT_BYTES_MAX || c.mtu > TCP_MTU_MAX || c.conns_max == 0 || c.conns_max > TCP_CONNS_LIMIT ||
	    c.rx_bytes < TCP_RING_BYTES_MIN || c.rx_bytes > TCP_RING_BYTES_MAX || (c.rx_bytes & (c.rx_bytes - 1)) ||
	    c.tx_bytes < TCP_RING_BYTES_MIN || c.tx_bytes > TCP_RING_BYTES_MAX || (c.tx_bytes & (c.tx_bytes - 1)) ||
	    (c.keepalive_idle_us && !c.keepalive_intvl_us))
		return -EINVAL;
	struct tcp_stack *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = c;
	s->mss_ours = (uint16_t)(c.mtu - TCP_IP_HDR_BYTES - TCP_HDR_BYTES);
	while (s->wscale_ours < TCP_WSCALE_MAX && (65535u << s->wscale_ours) < c.rx_bytes)
		s->wscale_ours++;
	s->rx_mask = c.rx_bytes - 1;
	s->tx_mask = c.tx_bytes - 1;
	s->frame_max = TCP_ETH_HDR_BYTES + c.mtu;
	s->hash_mask = tcp_hash_size(c.conns_max) - 1;
	s->mem_bytes = (size_t)c.conns_max * ((size_t)c.rx_bytes + c.tx_bytes);
	s->flows = calloc(c.conns_max, sizeof(*s->flows));
	s->hash = malloc((size_t)(s->hash_mask + 1) * sizeof(uint32_t));
	s->ctl = malloc((size_t)TCP_CTLQ_MAX * s->frame_max);
	s->mem = malloc(s->mem_bytes);
	if (!s->flows || !s->hash || !s->ctl || !s->mem) {
		tcp_destroy(s);
		return -ENOMEM;
	}
	memset(s->hash, 0xff, (size_t)(s->hash_mask + 1) * sizeof(uint32_t));
	for (uint32_t i = 0; i < c.conns_max; i++) {
		struct tcp_flow *fl = &s->flows[i];
		fl->rx = s->mem + (size_t)i * (c.rx_bytes + c.tx_bytes);
		fl->tx = fl->rx + c.rx_bytes;
		fl->hnext = i + 1 < c.conns_max ? i + 1 : NIL;
		fl->txnext = fl->evnext = NIL;
	}
	s->free_head = 0;
	s->used_head = NIL;
	s->tx_head = s->tx_tail = s->ev_head = s->ev_tail = NIL;
	*out = s;
	return 0;
}

void tcp_destroy(struct tcp_stack *s)
{
	if (!s)
		return;
	free(s->flows);
	free(s->hash);
	free(s->ctl);
	free(s->mem);
	free(s);
}

/* ---- invariants ------------------------------------------------------------- */

#define TCP_CHECK(c) do { if (!(c)) { fprintf(stderr, "tcp_check: %s (%s:%d)\n", #c, __FILE__, __LINE__); abort(); } } while (0)

void tcp_check(const struct tcp_stack *s)
{
	uint32_t used = 0;
	for (uint32_t i = s->used_head; i != NIL; i = s->flows[i].unext) {
		const struct tcp_flow *fl = &s->flows[i];
		TCP_CHECK(++used <= s->cfg.conns_max);
		TCP_CHECK(fl->state != TCP_S_FREE && fl->state < TCP_S_COUNT);
		TCP_CHECK(tcp_lookup((struct tcp_stack *)s, fl->rip, fl->rport, fl->lport) == fl);
		TCP_CHECK(TCP_SEQ_LEQ(fl->snd_una, fl->snd_nxt) && TCP_SEQ_LEQ(fl->snd_nxt, fl->snd_max));
		if (fl->state == TCP_S_SYN_SENT || fl->state == TCP_S_SYN_RCVD)
			continue;
		if (fl->snd_end == fl->iss)
			continue;   /* closed before its handshake ended: nothing more holds */
		TCP_CHECK(TCP_SEQ_LEQ(fl->rx_read, fl->rx_end) && fl->rx_end - fl->rx_read <= s->cfg.rx_bytes);
		TCP_CHECK(fl->rcv_nxt == fl->rx_end || fl->rcv_nxt == fl->rx_end + 1);
		TCP_CHECK(fl->score_n <= TCP_SCORE_MAX);
		for (uint32_t k = 0; k < fl->score_n; k++) {
			TCP_CHECK(TCP_SEQ_LT(fl->score[k].start, fl->score[k].end));
			TCP_CHECK(TCP_SEQ_GEQ(fl->score[k].start, fl->snd_una));
			TCP_CHECK(TCP_SEQ_LEQ(fl->score[k].end, fl->snd_max));
			if (k)
				TCP_CHECK(TCP_SEQ_LT(fl->score[k - 1].end, fl->score[k].start));
		}
		TCP_CHECK(fl->ooo_n <= TCP_OOO_MAX);
		for (uint32_t k = 0; k < fl->ooo_n; k++) {
			TCP_CHECK(TCP_SEQ_LT(fl->ooo[k].start, fl->ooo[k].end));
			TCP_CHECK(TCP_SEQ_GT(fl->ooo[k].start, fl->rx_end));
			TCP_CHECK(TCP_SEQ_LEQ(fl->ooo[k].end, fl->rx_read + s->cfg.rx_bytes));
			if (k)
				TCP_CHECK(TCP_SEQ_LT(fl->ooo[k - 1].end, fl->ooo[k].start));
		}
		uint32_t fin = (fl->f & TCP_FF_FIN_SENT) ? 1 : 0;
		TCP_CHECK(TCP_SEQ_LEQ(fl->snd_max, fl->snd_end + fin));
		TCP_CHECK(TCP_SEQ_LEQ(fl->snd_una, fl->snd_end + fin));
		TCP_CHECK(fl->snd_end - fl->snd_una <= s->cfg.tx_bytes || fl->snd_una == fl->snd_end + 1);
	}
	TCP_CHECK(used == s->used_n);
	uint32_t freed = 0;
	for (uint32_t i = s->free_head; i != NIL; i = s->flows[i].hnext) {
		TCP_CHECK(s->flows[i].state == TCP_S_FREE);
		TCP_CHECK(++freed <= s->cfg.conns_max);
	}
	TCP_CHECK(freed + used == s->cfg.conns_max);
	TCP_CHECK(s->ctl_n <= TCP_CTLQ_MAX);
}
