/*
 * tcp_ut.c - unit tests of the userspace TCP/IP stack (nic/tcp/tcp.c) on
 * crafted frames: the test plays the client at 198.18.0.2 (tcp_harness.h)
 * and reads every frame the stack sends back, checksums checked.
 *
 * Locality: test program, one thread; the clock is g_now, moved by hand.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <CUnit/Basic.h>

#include "tcp.h"
#include "tcp_internal.h"
#include "tcp_harness.h"

static uint64_t g_now = 1000000;

static struct tcp_stack *srv_new(uint32_t conns, uint32_t rx, uint32_t tx, uint32_t flags)
{
	struct tcp_config c = { .ip = TH_SRV_IP, .port = TH_PORT, .conns_max = conns, .rx_bytes = rx,
				.tx_bytes = tx, .isn_secret = 42, .time_wait_us = 2000000, .flags = flags };
	memcpy(c.mac, th_srv_mac, 6);
	struct tcp_stack *s = NULL;
	CU_ASSERT_FATAL(tcp_create(&c, &s) == 0);
	return s;
}

/* The client's side of one connection. */
struct cl {
	uint16_t port;
	uint32_t seq, ack;        /* next to send; next expected from the server */
	uint16_t win;
	bool ts;
	uint32_t tsval, tsecr;
};

static int seg(struct tcp_stack *s, struct cl *c, uint32_t seq, uint8_t flags, const void *data, uint32_t len)
{
	uint8_t f[TH_FRAME_MAX], opt[40];
	uint32_t ol = c->ts ? th_ts_opt(opt, c->tsval, c->tsecr) : 0;
	uint32_t n = th_tcp(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, c->port, TH_PORT, seq, c->ack, flags,
			    c->win, opt, ol, data, len);
	int rc = tcp_input(s, f, n, g_now);
	tcp_check(s);
	return rc;
}

/* Send the next len bytes (advancing c->seq). */
static int put(struct tcp_stack *s, struct cl *c, const void *data, uint32_t len)
{
	int rc = seg(s, c, c->seq, 0x10 | (len ? 0x08 : 0), data, len);
	c->seq += len;
	return rc;
}

#define PK_MAX 64
static struct th_pkt g_pk[PK_MAX];

/* Every frame the stack has to send now, parsed into g_pk. */
static int drain(struct tcp_stack *s)
{
	uint8_t f[TH_FRAME_MAX];
	int n = 0;
	uint32_t len;
	while ((len = tcp_output(s, g_now, f, sizeof(f))) > 0) {
		CU_ASSERT_FATAL(n < PK_MAX);
		th_parse(&g_pk[n], f, len);
		CU_ASSERT(g_pk[n].csum_ok);
		n++;
	}
	tcp_check(s);
	return n;
}

static int tick(struct tcp_stack *s, uint64_t us)
{
	g_now += us;
	tcp_timers(s, g_now);
	return drain(s);
}

#define EV_MAX 64
static struct tcp_ev g_ev[EV_MAX];
static int g_evn;

/* Poll events; the test's application releases a handle at its CLOSED. */
static int evs(struct tcp_stack *s)
{
	g_evn = tcp_events(s, g_ev, EV_MAX);
	for (int i = 0; i < g_evn; i++)
		if (g_ev[i].kind == TCP_EV_CLOSED)
			tcp_release(s, g_ev[i].conn);
	tcp_check(s);
	return g_evn;
}

static bool got(uint32_t conn, uint32_t kind)
{
	for (int i = 0; i < g_evn; i++)
		if (g_ev[i].conn == conn && g_ev[i].kind == kind)
			return true;
	return false;
}

static int closed_status(uint32_t conn)
{
	for (int i = 0; i < g_evn; i++)
		if (g_ev[i].conn == conn && g_ev[i].kind == TCP_EV_CLOSED)
			return g_ev[i].status;
	return 1;
}

/* SYN with the options in opts; returns the SYN-ACK parsed in g_pk[0]. */
static int syn(struct tcp_stack *s, struct cl *c, unsigned opts, uint16_t mss, uint8_t ws)
{
	uint8_t f[TH_FRAME_MAX], opt[40];
	c->tsval = 1000;
	c->ts = opts & TH_O_TS;
	uint32_t ol = th_syn_opts(opt, opts, mss, ws, c->tsval);
	uint32_t n = th_tcp(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, c->port, TH_PORT, c->seq, 0, 0x02,
			    65535, opt, ol, NULL, 0);
	int rc = tcp_input(s, f, n, g_now);
	c->seq++;
	tcp_check(s);
	return rc;
}

static uint32_t open_conn(struct tcp_stack *s, struct cl *c, unsigned opts)
{
	if (!c->seq)
		c->seq = 7000;
	if (!c->win)
		c->win = 65535;
	syn(s, c, opts, 1460, 7);
	CU_ASSERT_FATAL(drain(s) == 1);
	struct th_pkt *p = &g_pk[0];
	CU_ASSERT_FATAL(p->flags == 0x12);
	CU_ASSERT(p->ack == c->seq);
	c->ack = p->seq + 1;
	c->tsecr = p->tsval;
	c->tsval++;
	put(s, c, NULL, 0);
	CU_ASSERT(drain(s) == 0);
	CU_ASSERT_FATAL(evs(s) == 1);
	CU_ASSERT_FATAL(g_ev[0].kind == TCP_EV_OPEN);
	/* the peer nic_conn_peer prints (the DPDK backend) is the SYN's source */
	uint32_t pip = 0;
	uint16_t pport = 0;
	CU_ASSERT(tcp_peer(s, g_ev[0].conn, &pip, &pport) == 0);
	CU_ASSERT(pip == TH_CLI_IP && pport == c->port);
	CU_ASSERT(tcp_peer(s, g_ev[0].conn ^ (1u << 20), &pip, &pport) == -ENOTCONN);
	return g_ev[0].conn;
}

/* Read everything readable into out (returns bytes). */
static uint32_t app_read(struct tcp_stack *s, uint32_t conn, uint8_t *out, uint32_t cap)
{
	uint32_t got_n = 0, n;
	const uint8_t *d;
	while ((n = tcp_recv_peek(s, conn, &d)) > 0) {
		CU_ASSERT_FATAL(got_n + n <= cap);
		memcpy(out + got_n, d, n);
		tcp_recv_consume(s, conn, n);
		got_n += n;
	}
	return got_n;
}

/* ---- link layer and IP ------------------------------------------------------ */

static void test_arp(void)
{
	struct tcp_stack *s = srv_new(2, 4096, 4096, 0);
	uint8_t f[64] = { 0 };
	memset(f, 0xff, 6);
	memcpy(f + 6, th_cli_mac, 6);
	th_w16(f + 12, 0x0806);
	uint8_t *a = f + 14;
	th_w16(a, 1); th_w16(a + 2, 0x0800); a[4] = 6; a[5] = 4; th_w16(a + 6, 1);
	memcpy(a + 8, th_cli_mac, 6); th_w32(a + 14, TH_CLI_IP); th_w32(a + 24, TH_SRV_IP);
	CU_ASSERT(tcp_input(s, f, 60, g_now) == 0);
	CU_ASSERT_FATAL(drain(s) == 1);
	const uint8_t *r = g_pk[0].frame;
	CU_ASSERT(g_pk[0].ethtype == 0x0806);
	CU_ASSERT(memcmp(r, th_cli_mac, 6) == 0);
	CU_ASSERT(th_r16(r + 14 + 6) == 2);
	CU_ASSERT(memcmp(r + 14 + 8, th_srv_mac, 6) == 0);
	CU_ASSERT(th_r32(r + 14 + 14) == TH_SRV_IP);
	CU_ASSERT(th_r32(r + 14 + 24) == TH_CLI_IP);
	uint8_t mac[6];
	CU_ASSERT(tcp_arp_lookup(s, TH_CLI_IP, mac) == 0 && memcmp(mac, th_cli_mac, 6) == 0);
	/* a request for another address: no reply, not learned */
	th_w32(a + 14, TH_CLI_IP + 5);
	th_w32(a + 24, TH_SRV_IP + 1);
	CU_ASSERT(tcp_input(s, f, 60, g_now) == -ENOENT);
	CU_ASSERT(drain(s) == 0);
	CU_ASSERT(tcp_arp_lookup(s, TH_CLI_IP + 5, mac) == -ENOENT);
	/* resolving the gateway: a broadcast request, and its reply learned */
	tcp_arp_resolve(s, TH_CLI_IP + 9);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(memcmp(g_pk[0].frame, "\xff\xff\xff\xff\xff\xff", 6) == 0);
	CU_ASSERT(th_r32(g_pk[0].frame + 14 + 24) == TH_CLI_IP + 9);
	memcpy(f, th_srv_mac, 6);
	uint8_t gw[6] = { 2, 9, 9, 9, 9, 9 };
	th_w16(a + 6, 2); memcpy(a + 8, gw, 6); th_w32(a + 14, TH_CLI_IP + 9); th_w32(a + 24, TH_SRV_IP);
	CU_ASSERT(tcp_input(s, f, 60, g_now) == 0);
	CU_ASSERT(drain(s) == 0);
	CU_ASSERT(tcp_arp_lookup(s, TH_CLI_IP + 9, mac) == 0 && memcmp(mac, gw, 6) == 0);
	/* malformed */
	CU_ASSERT(tcp_input(s, f, 20, g_now) == -EPROTO);
	tcp_destroy(s);
}

static void test_ipv4_icmp(void)
{
	struct tcp_stack *s = srv_new(2, 4096, 4096, 0);
	uint8_t f[256];
	uint32_t o = th_eth_ip(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, 1, 8 + 32);
	uint8_t *m = f + o;
	memset(m, 0, 40);
	m[0] = 8; th_w16(m + 4, 0x1234); th_w16(m + 6, 7);
	for (int i = 0; i < 32; i++)
		m[8 + i] = (uint8_t)i;
	th_w16(m + 2, th_csum(m, 40, 0));
	CU_ASSERT(tcp_input(s, f, o + 40, g_now) == 0);
	CU_ASSERT_FATAL(drain(s) == 1);
	struct th_pkt *p = &g_pk[0];
	CU_ASSERT(p->proto == 1 && p->dst == TH_CLI_IP && p->len == 40);
	CU_ASSERT(p->data[0] == 0 && th_r16(p->data + 4) == 0x1234 && th_r16(p->data + 6) == 7);
	CU_ASSERT(memcmp(p->data + 8, m + 8, 32) == 0);
	/* a bad ICMP checksum, a bad IP checksum, a fragment, another address: dropped */
	m[9] ^= 1;
	CU_ASSERT(tcp_input(s, f, o + 40, g_now) == -EBADMSG);
	m[9] ^= 1;
	f[14 + 10] ^= 1;
	CU_ASSERT(tcp_input(s, f, o + 40, g_now) == -EBADMSG);
	f[14 + 10] ^= 1;
	th_w16(f + 14 + 6, 0x2000);   /* MF */
	th_w16(f + 14 + 10, 0);
	th_w16(f + 14 + 10, th_csum(f + 14, 20, 0));
	CU_ASSERT(tcp_input(s, f, o + 40, g_now) == -EPROTO);
	th_w16(f + 14 + 6, 0x0001);   /* an offset */
	th_w16(f + 14 + 10, 0);
	th_w16(f + 14 + 10, th_csum(f + 14, 20, 0));
	CU_ASSERT(tcp_input(s, f, o + 40, g_now) == -EPROTO);
	CU_ASSERT(tcp_stats(s)->drop_frag == 2);
	o = th_eth_ip(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP + 1, 1, 40);
	CU_ASSERT(tcp_input(s, f, o + 40, g_now) == -ENOENT);
	/* a frame for another MAC */
	f[0] ^= 4;
	CU_ASSERT(tcp_input(s, f, o + 40, g_now) == -ENOENT);
	/* an IPv4 frame cut at every length and placed against an unmapped page, so that
	 * a read past its end faults: dropped, down to a bare Ethernet header (fuzz_tcp
	 * found ip[0] read before the length was checked) */
	o = th_eth_ip(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, 1, 40);
	long pg = sysconf(_SC_PAGESIZE);
	uint8_t *area = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CU_ASSERT_FATAL(area != MAP_FAILED);
	CU_ASSERT_FATAL(mprotect(area + pg, (size_t)pg, PROT_NONE) == 0);
	for (uint32_t cut = 14; cut < o + 8; cut++) {
		uint8_t *g = area + pg - cut;
		memcpy(g, f, cut);
		CU_ASSERT(tcp_input(s, g, cut, g_now) == -EPROTO);
	}
	munmap(area, (size_t)pg * 2);
	/* a TCP segment with a bad checksum */
	uint32_t n = th_tcp(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, 5000, TH_PORT, 1, 0, 0x02, 1000, NULL, 0, NULL, 0);
	f[n - 1] ^= 0x40;
	CU_ASSERT(tcp_input(s, f, n, g_now) == -EBADMSG);
	CU_ASSERT(drain(s) == 0);
	CU_ASSERT(tcp_flows_used(s) == 0);
	/* a segment for a closed port gets a RST (RFC 9293 3.10.7.1) */
	n = th_tcp(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, 5000, TH_PORT + 1, 100, 0, 0x02, 1000, NULL, 0, NULL, 0);
	CU_ASSERT(tcp_input(s, f, n, g_now) == 0);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].flags == 0x14 && g_pk[0].ack == 101 && g_pk[0].seq == 0);
	tcp_destroy(s);
}

/* ---- handshake -------------------------------------------------------------- */

static void test_handshake_all_options(void)
{
	struct tcp_stack *s = srv_new(4, 1u << 20, 1u << 16, 0);
	struct cl c = { .port = 40000, .seq = 5000, .win = 65535 };
	syn(s, &c, TH_O_ALL, 1400, 7);
	CU_ASSERT_FATAL(drain(s) == 1);
	struct th_pkt *p = &g_pk[0];
	CU_ASSERT(p->flags == 0x12 && p->ack == 5001 && p->dst == TH_CLI_IP && p->dport == 40000);
	CU_ASSERT(memcmp(p->frame, th_cli_mac, 6) == 0);
	CU_ASSERT(p->has_mss && p->mss == 1460);
	CU_ASSERT(p->has_ws && p->ws == 5);          /* 65535 << 5 covers a 1 MiB ring */
	CU_ASSERT(p->sack_perm);
	CU_ASSERT(p->has_ts && p->tsecr == 1000);
	CU_ASSERT(p->win == 65535);                  /* a SYN's window is not scaled */
	c.ack = p->seq + 1;
	c.tsecr = p->tsval;
	c.tsval = 1001;
	c.win = 100;                                 /* x 128 */
	CU_ASSERT(evs(s) == 0);                      /* no handle before the handshake ends */
	put(s, &c, NULL, 0);
	CU_ASSERT(evs(s) == 1 && g_ev[0].kind == TCP_EV_OPEN);
	uint32_t h = g_ev[0].conn;
	struct tcp_flow *fl = &s->flows[h & 0xfffff];
	CU_ASSERT(fl->state == TCP_S_ESTABLISHED);
	CU_ASSERT(fl->snd_wnd == 100u << 7);
	CU_ASSERT(fl->smss == 1400 - 12);
	CU_ASSERT(fl->ts_ok && fl->sack_ok && fl->ws_ok);
	/* data segments carry the timestamp and a scaled window */
	put(s, &c, "hello", 5);
	put(s, &c, "world", 5);
	CU_ASSERT_FATAL(drain(s) == 1);              /* the second segment forces the ACK */
	CU_ASSERT(g_pk[0].ack == c.seq && g_pk[0].has_ts && g_pk[0].tsecr == 1001);
	CU_ASSERT(g_pk[0].win == ((1u << 20) - 10) >> 5);
	uint8_t buf[16];
	CU_ASSERT(app_read(s, h, buf, sizeof(buf)) == 10 && memcmp(buf, "helloworld", 10) == 0);
	tcp_destroy(s);
}

static void test_handshake_without_each_option(void)
{
	for (unsigned leave = 0; leave < 4; leave++) {
		unsigned opts = TH_O_ALL & ~(1u << leave);
		struct tcp_stack *s = srv_new(4, 1u << 18, 1u << 16, 0);
		struct cl c = { .port = 40001, .seq = 9000, .win = 65535 };
		syn(s, &c, opts, 1000, 3);
		CU_ASSERT_FATAL(drain(s) == 1);
		struct th_pkt *p = &g_pk[0];
		CU_ASSERT(p->has_mss);                       /* we always say ours */
		CU_ASSERT(p->has_ws == !!(opts & TH_O_WS));   /* the rest only in reply */
		CU_ASSERT(p->sack_perm == !!(opts & TH_O_SACK));
		CU_ASSERT(p->has_ts == !!(opts & TH_O_TS));
		c.ack = p->seq + 1;
		c.tsecr = p->tsval;
		c.win = 1000;
		put(s, &c, NULL, 0);
		CU_ASSERT_FATAL(evs(s) == 1);
		struct tcp_flow *fl = &s->flows[g_ev[0].conn & 0xfffff];
		uint32_t mss = (opts & TH_O_MSS) ? 1000 : 536;
		CU_ASSERT(fl->smss == mss - ((opts & TH_O_TS) ? 12 : 0));
		CU_ASSERT(fl->snd_wnd == ((opts & TH_O_WS) ? 1000u << 3 : 1000u));
		CU_ASSERT(fl->rcv_shift == ((opts & TH_O_WS) ? 3 : 0));
		/* without scaling our window field is capped at 65535 */
		put(s, &c, "ab", 1);
		put(s, &c, "b", 1);
		CU_ASSERT_FATAL(drain(s) == 1);
		CU_ASSERT(g_pk[0].win == ((opts & TH_O_WS) ? ((1u << 18) - 2) >> 3 : 65535));
		CU_ASSERT(g_pk[0].has_ts == !!(opts & TH_O_TS));
		tcp_destroy(s);
	}
	/* and our side leaving each out while the client offers all */
	static const uint32_t fl_of[4] = { TCP_CF_NO_MSS, TCP_CF_NO_WSCALE, TCP_CF_NO_SACK, TCP_CF_NO_TS };
	for (unsigned k = 0; k < 4; k++) {
		struct tcp_stack *s = srv_new(4, 1u << 18, 1u << 16, fl_of[k]);
		struct cl c = { .port = 40002, .seq = 1, .win = 65535 };
		syn(s, &c, TH_O_ALL, 1000, 3);
		CU_ASSERT_FATAL(drain(s) == 1);
		struct th_pkt *p = &g_pk[0];
		CU_ASSERT(p->has_mss == (k != 0));
		CU_ASSERT(p->has_ws == (k != 1));
		CU_ASSERT(p->sack_perm == (k != 2));
		CU_ASSERT(p->has_ts == (k != 3));
		tcp_destroy(s);
	}
}

static void test_synack_lost_and_ack_lost(void)
{
	struct tcp_stack *s = srv_new(4, 4096, 4096, 0);
	struct cl c = { .port = 40003, .seq = 100, .win = 65535 };
	syn(s, &c, TH_O_MSS, 1460, 0);
	CU_ASSERT(drain(s) == 1);
	uint32_t iss = g_pk[0].seq;
	/* the SYN-ACK is lost: the client's SYN again, then our timer */
	c.seq--;
	syn(s, &c, TH_O_MSS, 1460, 0);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].flags == 0x12 && g_pk[0].seq == iss);
	CU_ASSERT(tick(s, 1000000) == 1 && g_pk[0].flags == 0x12);
	CU_ASSERT(tick(s, 1000000) == 0);          /* backed off: 2 s now */
	CU_ASSERT(tick(s, 1000000) == 1);
	/* the handshake's ACK is lost but data arrives: that completes it */
	c.ack = iss + 1;
	put(s, &c, "x", 1);
	CU_ASSERT(evs(s) == 2 && g_ev[0].kind == TCP_EV_OPEN && g_ev[1].kind == TCP_EV_READABLE);
	tcp_destroy(s);
}

/* ---- receiving ------------------------------------------------------------- */

static void test_delayed_ack(void)
{
	struct tcp_stack *s = srv_new(4, 8192, 4096, 0);
	struct cl c = { .port = 40010 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	put(s, &c, "a", 1);
	CU_ASSERT(drain(s) == 0);                  /* one segment: the ACK waits */
	CU_ASSERT(tick(s, TCP_DELACK_US - 1) == 0);
	CU_ASSERT_FATAL(tick(s, 1) == 1);
	CU_ASSERT(g_pk[0].ack == c.seq && g_pk[0].len == 0);
	put(s, &c, "b", 1);
	put(s, &c, "c", 1);
	CU_ASSERT_FATAL(drain(s) == 1);            /* every second segment at once */
	CU_ASSERT(g_pk[0].ack == c.seq);
	/* an answer carries the ACK (piggybacked) */
	put(s, &c, "d", 1);
	CU_ASSERT(tcp_send(s, h, "R", 1) == 1);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].len == 1 && g_pk[0].ack == c.seq);
	CU_ASSERT(tick(s, TCP_DELACK_US) == 0);
	tcp_destroy(s);
}

static void test_reorder_sack_and_duplicates(void)
{
	struct tcp_stack *s = srv_new(4, 8192, 4096, 0);
	struct cl c = { .port = 40011 };
	uint32_t h = open_conn(s, &c, TH_O_ALL);
	uint32_t base = c.seq;
	char msg[64];
	for (int i = 0; i < 64; i++)
		msg[i] = (char)('A' + i % 26);
	/* 16..32 first: an immediate duplicate ACK with its SACK block */
	c.tsval++;
	seg(s, &c, base + 16, 0x18, msg + 16, 16);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].ack == base && g_pk[0].nsack == 1);
	CU_ASSERT(g_pk[0].sack[0][0] == base + 16 && g_pk[0].sack[0][1] == base + 32);
	/* 48..64 then: two blocks, the newest first (RFC 2018 4) */
	seg(s, &c, base + 48, 0x18, msg + 48, 16);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].nsack == 2 && g_pk[0].sack[0][0] == base + 48 && g_pk[0].sack[1][0] == base + 16);
	/* overlapping retransmissions: 8..40 overlaps both the hole and block 1 */
	seg(s, &c, base + 8, 0x18, msg + 8, 32);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].ack == base && g_pk[0].nsack == 2);
	CU_ASSERT(g_pk[0].sack[0][0] == base + 8 && g_pk[0].sack[0][1] == base + 40);
	CU_ASSERT(evs(s) == 0);
	/* 0..10 fills the first hole: ACK at once up to 40 */
	seg(s, &c, base, 0x18, msg, 10);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].ack == base + 40 && g_pk[0].nsack == 1);
	/* a duplicate of old data: ACKed again at once (a lost ACK repaired) */
	seg(s, &c, base, 0x18, msg, 10);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].ack == base + 40);
	/* 36..52 closes the last hole */
	seg(s, &c, base + 36, 0x18, msg + 36, 16);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].ack == base + 64 && g_pk[0].nsack == 0);
	uint8_t buf[128];
	CU_ASSERT(app_read(s, h, buf, sizeof(buf)) == 64);
	CU_ASSERT(memcmp(buf, msg, 64) == 0);
	CU_ASSERT(tcp_stats(s)->dup_segs >= 1);
	/* copies out of frames: what each segment brought past the in-order edge (the
	 * overlapping retransmission whole, out of order: 16 + 16 + 32 + 10, then 40..52
	 * of the last), the old duplicate nothing */
	CU_ASSERT(tcp_stats(s)->rx_copied == 16 + 16 + 32 + 10 + 12);
	tcp_destroy(s);
}

static void test_sequence_wrap(void)
{
	/* the client's data ends exactly at sequence 0, then runs past it */
	struct tcp_stack *s = srv_new(4, 4096, 4096, 0);
	struct cl c = { .port = 40014, .seq = 0xfffffffbu };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	CU_ASSERT(c.seq == 0xfffffffcu);
	put(s, &c, "wrap", 4);
	CU_ASSERT(c.seq == 0);
	uint8_t buf[16];
	CU_ASSERT(app_read(s, h, buf, sizeof(buf)) == 4 && memcmp(buf, "wrap", 4) == 0);
	put(s, &c, "past", 4);
	CU_ASSERT(app_read(s, h, buf, sizeof(buf)) == 4 && memcmp(buf, "past", 4) == 0);
	tcp_destroy(s);
}

static void test_ooo_bounded(void)
{
	struct tcp_stack *s = srv_new(4, 8192, 4096, 0);
	struct cl c = { .port = 40012 };
	uint32_t h = open_conn(s, &c, TH_O_MSS | TH_O_SACK);
	uint32_t base = c.seq;
	uint8_t d[200];
	for (int i = 0; i < 200; i++)
		d[i] = (uint8_t)(i * 7);
	/* six disjoint ranges: the fifth and sixth do not fit TCP_OOO_MAX */
	for (int k = 0; k < 6; k++)
		seg(s, &c, base + 20 + 30 * (uint32_t)k, 0x18, d + 20 + 30 * k, 10);
	CU_ASSERT(s->flows[h & 0xfffff].ooo_n == TCP_OOO_MAX);
	CU_ASSERT(tcp_stats(s)->ooo_dropped == 6 - TCP_OOO_MAX);
	drain(s);
	/* the sender fills everything in order: all bytes come out right */
	seg(s, &c, base, 0x18, d, 200);
	CU_ASSERT(s->flows[h & 0xfffff].ooo_n == 0);
	uint8_t buf[256];
	CU_ASSERT(app_read(s, h, buf, sizeof(buf)) == 200 && memcmp(buf, d, 200) == 0);
	/* beyond the window: not accepted, an ACK says where we are */
	c.seq = base + 200 + 8192 + 10;
	put(s, &c, "zz", 2);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].ack == base + 200);
	tcp_destroy(s);
}

static void test_receive_window_full(void)
{
	struct tcp_stack *s = srv_new(4, 4096, 4096, 0);
	struct cl c = { .port = 40013 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	uint8_t d[1024];
	memset(d, 'q', sizeof(d));
	for (int i = 0; i < 4; i++)
		put(s, &c, d, 1024);
	/* one ACK for the burst; the ring is full: the window is 0 */
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].ack == c.seq && g_pk[0].win == 0);
	struct tcp_flow *fl = &s->flows[h & 0xfffff];
	CU_ASSERT(fl->rx_read + 4096 - fl->rcv_nxt == 0);
	/* a byte more is refused (and ACKed with window 0) */
	put(s, &c, "x", 1);
	c.seq--;
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].win == 0 && g_pk[0].ack == c.seq);
	/* the application reads: a window update goes out */
	const uint8_t *p;
	uint32_t n = tcp_recv_peek(s, h, &p);
	CU_ASSERT(n == 4096);
	tcp_recv_consume(s, h, 2048);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].win == 2048);
	tcp_destroy(s);
}

/* ---- sending --------------------------------------------------------------- */

static void test_send_peer_window_and_zero_window_probe(void)
{
	struct tcp_stack *s = srv_new(4, 4096, 16384, 0);
	struct cl c = { .port = 40020, .win = 1000 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	uint8_t d[5000];
	for (int i = 0; i < 5000; i++)
		d[i] = (uint8_t)i;
	CU_ASSERT(tcp_send(s, h, d, 5000) == 5000);
	CU_ASSERT_FATAL(drain(s) == 1);               /* the peer's window: 1000 bytes */
	CU_ASSERT(g_pk[0].len == 1000 && g_pk[0].seq == c.ack);
	CU_ASSERT(memcmp(g_pk[0].data, d, 1000) == 0);
	/* the peer ACKs it with a zero window: nothing goes */
	c.ack += 1000;
	c.win = 0;
	put(s, &c, NULL, 0);
	CU_ASSERT(drain(s) == 0);
	/* the persist timer probes, backing off, without giving up */
	uint64_t rto = s->flows[h & 0xfffff].rto_us;
	int probes = 0;
	for (int i = 0; i < 40; i++) {
		int n = tick(s, rto / 4);
		for (int k = 0; k < n; k++) {
			CU_ASSERT(g_pk[k].len == 0 && g_pk[k].seq == c.ack - 1);
			probes++;
			put(s, &c, NULL, 0);   /* the answer: still zero */
		}
	}
	CU_ASSERT(probes >= 3 && probes < 12);        /* backed off, not every tick */
	CU_ASSERT(tcp_stats(s)->probes == (uint64_t)probes);
	CU_ASSERT(s->flows[h & 0xfffff].state == TCP_S_ESTABLISHED);
	/* the window opens: the rest flows */
	c.win = 65535;
	put(s, &c, NULL, 0);
	int n = drain(s);
	uint32_t sent = 0;
	for (int k = 0; k < n; k++) {
		CU_ASSERT(g_pk[k].seq == c.ack + sent);
		CU_ASSERT(memcmp(g_pk[k].data, d + 1000 + sent, g_pk[k].len) == 0);
		sent += g_pk[k].len;
	}
	CU_ASSERT(sent == 4000);
	c.ack += sent;
	put(s, &c, NULL, 0);
	CU_ASSERT(tcp_unacked(s, h) == 0);
	evs(s);
	CU_ASSERT(got(h, TCP_EV_WRITABLE));
	tcp_destroy(s);
}

static void test_window_shrunk_with_data_out(void)
{
	struct tcp_stack *s = srv_new(4, 4096, 16384, 0);
	struct cl c = { .port = 40023 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	uint8_t d[3000];
	memset(d, 'w', sizeof(d));
	CU_ASSERT(tcp_send(s, h, d, sizeof(d)) == (int)sizeof(d));
	CU_ASSERT(drain(s) == 3);
	/* the peer takes the first segment and shrinks its window to 0 (its
	 * ring filled); the rest is out, beyond the window */
	c.ack += 1460;
	c.win = 0;
	put(s, &c, NULL, 0);
	/* the RTO cannot resend into a zero window: it probes instead, and
	 * keeps probing while the peer answers (no -ETIMEDOUT) */
	int probes = 0;
	for (int i = 0; i < 60; i++) {
		int n = tick(s, 1000000);
		for (int k = 0; k < n; k++) {
			CU_ASSERT(g_pk[k].len == 0 && g_pk[k].seq == c.ack - 1);
			probes++;
			put(s, &c, NULL, 0);
		}
	}
	CU_ASSERT(probes >= 4);
	CU_ASSERT(s->flows[h & 0xfffff].state == TCP_S_ESTABLISHED);
	/* its window update was lost; the next probe's answer carries it */
	c.win = 65535;
	int n = 0;
	for (int i = 0; i < 120 && n == 0; i++) {
		n = tick(s, 1000000);
		if (n)
			put(s, &c, NULL, 0);
	}
	CU_ASSERT_FATAL(n == 1);
	n = drain(s);
	CU_ASSERT(n >= 1 && g_pk[0].seq == c.ack && g_pk[0].len > 0);
	tcp_destroy(s);
}

static void test_rto_backoff_karn(void)
{
	struct tcp_stack *s = srv_new(4, 4096, 16384, 0);
	struct cl c = { .port = 40021 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	struct tcp_flow *fl = &s->flows[h & 0xfffff];
	/* an RTT sample of 10 ms: SRTT 10 ms, RTO at the 200 ms floor (RFC 6298 2.4) */
	CU_ASSERT(tcp_send(s, h, "abc", 3) == 3);
	CU_ASSERT(drain(s) == 1);
	g_now += 10000;
	c.ack += 3;
	put(s, &c, NULL, 0);
	CU_ASSERT(fl->rto_us == TCP_RTO_MIN_US);
	uint32_t srtt = fl->srtt_us;
	/* lost: the RTO fires and doubles each time (RFC 6298 5.5) */
	CU_ASSERT(tcp_send(s, h, "defg", 4) == 4);
	CU_ASSERT(drain(s) == 1);
	uint32_t seq = g_pk[0].seq;
	CU_ASSERT(tick(s, TCP_RTO_MIN_US - 1) == 0);
	CU_ASSERT_FATAL(tick(s, 1) == 1);
	CU_ASSERT(g_pk[0].seq == seq && g_pk[0].len == 4);
	CU_ASSERT(tick(s, 2 * TCP_RTO_MIN_US - 1) == 0);
	CU_ASSERT(tick(s, 1) == 1);
	CU_ASSERT(tick(s, 4 * TCP_RTO_MIN_US) == 1);
	CU_ASSERT(fl->cwnd == fl->smss);
	/* the ACK of the retransmission gives no RTT sample (Karn) */
	g_now += 700000;
	c.ack += 4;
	put(s, &c, NULL, 0);
	CU_ASSERT(fl->srtt_us == srtt);
	CU_ASSERT(fl->backoff == 0 && fl->rto_at == 0);
	/* retries spent: RST and CLOSED -ETIMEDOUT */
	CU_ASSERT(tcp_send(s, h, "h", 1) == 1);
	drain(s);
	bool rst = false;
	for (int i = 0; i < 200 && !rst; i++) {
		int n = tick(s, TCP_RTO_MAX_US / 4);
		for (int k = 0; k < n; k++)
			rst |= (g_pk[k].flags & 0x04) != 0;
	}
	CU_ASSERT(rst);
	evs(s);
	CU_ASSERT(closed_status(h) == -ETIMEDOUT);
	CU_ASSERT(tcp_flows_used(s) == 0);
	tcp_destroy(s);
}

/* An RTT sample longer than TCP_RTO_MAX_US (an ACK held back for an hour,
 * no timestamps) counts as TCP_RTO_MAX_US: SRTT and RTTVAR stay bounded
 * (4 * RTTVAR in 32 bits overflowed), and a gap past 2^32 us is not taken
 * for a short one. */
static void test_rtt_sample_clamped(void)
{
	for (int k = 0; k < 2; k++) {
		struct tcp_stack *s = srv_new(4, 4096, 16384, 0);
		struct cl c = { .port = (uint16_t)(40026 + k) };
		uint32_t h = open_conn(s, &c, TH_O_MSS);
		struct tcp_flow *fl = &s->flows[h & 0xfffff];
		fl->srtt_us = 0;   /* as if the handshake gave no sample: this one is the first */
		CU_ASSERT(tcp_send(s, h, "abc", 3) == 3);
		CU_ASSERT(drain(s) == 1);
		g_now += k ? (1ull << 32) + 5000 : 3000000000ull;
		c.ack += 3;
		put(s, &c, NULL, 0);
		CU_ASSERT(tcp_unacked(s, h) == 0);
		CU_ASSERT(fl->srtt_us == TCP_RTO_MAX_US && fl->rttvar_us == TCP_RTO_MAX_US / 2);
		CU_ASSERT(fl->rto_us == TCP_RTO_MAX_US);
		/* a 10 ms sample next: the estimate comes down smoothly, bounded */
		CU_ASSERT(tcp_send(s, h, "d", 1) == 1);
		CU_ASSERT(drain(s) == 1);
		g_now += 10000;
		c.ack += 1;
		put(s, &c, NULL, 0);
		CU_ASSERT(fl->srtt_us == (7ull * TCP_RTO_MAX_US + 10000) / 8);
		CU_ASSERT(fl->rttvar_us <= TCP_RTO_MAX_US && fl->rto_us == TCP_RTO_MAX_US);
		tcp_destroy(s);
	}
}

/* An abort after an RTO: snd_nxt went back to snd_una, but the peer may
 * hold everything sent; the RST carries snd_max, where an RFC 5961 peer
 * takes it (a RST at snd_nxt would get a challenge ACK). */
static void test_abort_after_rto_rst_at_snd_max(void)
{
	struct tcp_stack *s = srv_new(4, 4096, 16384, 0);
	struct cl c = { .port = 40028 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	uint8_t d[3 * 1460];
	memset(d, 'r', sizeof(d));
	CU_ASSERT(tcp_send(s, h, d, sizeof(d)) == (int)sizeof(d));
	CU_ASSERT(drain(s) == 3);
	CU_ASSERT_FATAL(tick(s, TCP_RTO_INIT_US) == 1);   /* one segment again, from snd_una */
	CU_ASSERT(g_pk[0].seq == c.ack && g_pk[0].len == 1460);
	tcp_abort(s, h);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].flags & 0x04);
	CU_ASSERT(g_pk[0].seq == c.ack + sizeof(d) && g_pk[0].ack == c.seq);
	evs(s);
	CU_ASSERT(closed_status(h) == -ECONNABORTED);
	tcp_destroy(s);
}

static void test_fast_retransmit_newreno(void)
{
	struct tcp_stack *s = srv_new(4, 4096, 65536, 0);
	struct cl c = { .port = 40022 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	struct tcp_flow *fl = &s->flows[h & 0xfffff];
	static uint8_t d[8 * 1460];
	for (size_t i = 0; i < sizeof(d); i++)
		d[i] = (uint8_t)(i * 31);
	CU_ASSERT(tcp_send(s, h, d, sizeof(d)) == (int)sizeof(d));
	CU_ASSERT_FATAL(drain(s) == 8);                /* IW10 covers it */
	uint32_t una = c.ack;
	/* segments 0 and 3 lost: three duplicate ACKs for 0 */
	for (int i = 0; i < 3; i++)
		put(s, &c, NULL, 0);
	int k = drain(s);
	if (k != 1)
		printf("k %d seq %u len %u una %u dup %u cwnd %u\n", k, g_pk[0].seq, g_pk[0].len, una, fl->dupacks, fl->cwnd);
	CU_ASSERT_FATAL(k == 1);
	CU_ASSERT(g_pk[0].seq == una && g_pk[0].len == 1460);
	CU_ASSERT(fl->in_recovery && tcp_stats(s)->fast_rexmits == 1);
	CU_ASSERT(fl->ssthresh == 4 * 1460);
	/* a partial ACK (up to segment 3): the next hole at once (RFC 6582) */
	c.ack = una + 3 * 1460;
	put(s, &c, NULL, 0);
	CU_ASSERT_FATAL(drain(s) >= 1);
	CU_ASSERT(g_pk[0].seq == una + 3 * 1460 && g_pk[0].len == 1460);
	CU_ASSERT(memcmp(g_pk[0].data, d + 3 * 1460, 1460) == 0);
	CU_ASSERT(fl->in_recovery);
	/* the full ACK ends recovery with cwnd at ssthresh at most */
	c.ack = una + sizeof(d);
	put(s, &c, NULL, 0);
	CU_ASSERT(!fl->in_recovery && fl->cwnd <= fl->ssthresh);
	CU_ASSERT(tcp_unacked(s, h) == 0);
	tcp_destroy(s);
}

/* A pure ACK from the client carrying SACK blocks (RFC 2018 3), each [start, end). */
static void ack_sack(struct tcp_stack *s, struct cl *c, const uint32_t (*b)[2], uint32_t nb)
{
	uint8_t f[TH_FRAME_MAX], opt[40];
	uint32_t ol = c->ts ? th_ts_opt(opt, c->tsval, c->tsecr) : 0;
	opt[ol++] = 1; opt[ol++] = 1; opt[ol++] = 5; opt[ol++] = (uint8_t)(2 + 8 * nb);
	for (uint32_t i = 0; i < nb; i++) {
		th_w32(opt + ol, b[i][0]); th_w32(opt + ol + 4, b[i][1]);
		ol += 8;
	}
	uint32_t n = th_tcp(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, c->port, TH_PORT, c->seq, c->ack, 0x10,
			    c->win, opt, ol, NULL, 0);
	CU_ASSERT(tcp_input(s, f, n, g_now) == 0);
	tcp_check(s);
}

/* Send-side SACK: segments 0, 3 and 5 of 8 lost. The third duplicate ACK
 * retransmits 0; each further one, with the blocks telling what arrived,
 * retransmits the next hole (3, then 5), never a SACKed segment; once no hole
 * is left below the highest SACKed byte the duplicates only inflate cwnd, and
 * the partial ACKs do not send 3 or 5 a second time. Blocks outside
 * (snd_una, snd_max] are ignored. After an RTO the scoreboard is forgotten. */
static void test_sack_send_side(void)
{
	struct tcp_stack *s = srv_new(4, 4096, 65536, 0);
	struct cl c = { .port = 40031 };
	uint32_t h = open_conn(s, &c, TH_O_MSS | TH_O_SACK);
	struct tcp_flow *fl = &s->flows[h & 0xfffff];
	CU_ASSERT_FATAL(fl->sack_ok);
	static uint8_t d[8 * 1460];
	for (size_t i = 0; i < sizeof(d); i++)
		d[i] = (uint8_t)(i * 7);
	CU_ASSERT(tcp_send(s, h, d, sizeof(d)) == (int)sizeof(d));
	CU_ASSERT_FATAL(drain(s) == 8);
	uint32_t u = c.ack, m = 1460;
	/* what arrives: 1, 2, 4, 6, 7; each a duplicate ACK with the blocks so far */
	const uint32_t b1[][2] = { { u + m, u + 2 * m } };
	const uint32_t b2[][2] = { { u + m, u + 3 * m } };
	const uint32_t b4[][2] = { { u + 4 * m, u + 5 * m }, { u + m, u + 3 * m } };
	const uint32_t b6[][2] = { { u + 6 * m, u + 7 * m }, { u + 4 * m, u + 5 * m }, { u + m, u + 3 * m } };
	const uint32_t b7[][2] = { { u + 6 * m, u + 8 * m }, { u + 4 * m, u + 5 * m }, { u + m, u + 3 * m } };
	const uint32_t bad[][2] = { { u + 9 * m, u + 10 * m }, { u - m, u }, { u + 5 * m, u + 5 * m } };
	ack_sack(s, &c, b1, 1);
	ack_sack(s, &c, b2, 1);
	CU_ASSERT(drain(s) == 0);
	ack_sack(s, &c, b4, 2);
	CU_ASSERT_FATAL(drain(s) == 1);                       /* fast retransmit: segment 0 */
	CU_ASSERT(g_pk[0].seq == u && g_pk[0].len == m && memcmp(g_pk[0].data, d, m) == 0);
	CU_ASSERT(fl->in_recovery && fl->score_n == 2);
	ack_sack(s, &c, b6, 3);
	CU_ASSERT_FATAL(drain(s) == 1);                       /* the next hole: 3 */
	CU_ASSERT(g_pk[0].seq == u + 3 * m && g_pk[0].len == m && memcmp(g_pk[0].data, d + 3 * m, m) == 0);
	ack_sack(s, &c, b7, 3);
	CU_ASSERT_FATAL(drain(s) == 1);                       /* then 5 */
	CU_ASSERT(g_pk[0].seq == u + 5 * m && g_pk[0].len == m && memcmp(g_pk[0].data, d + 5 * m, m) == 0);
	CU_ASSERT(tcp_stats(s)->sack_rexmits == 2 && tcp_stats(s)->fast_rexmits == 1);
	uint32_t cw = fl->cwnd;
	ack_sack(s, &c, b7, 3);                               /* no hole left below 6..8 */
	CU_ASSERT(drain(s) == 0 && fl->cwnd == cw + m);
	ack_sack(s, &c, bad, 3);                              /* nothing of these is taken */
	CU_ASSERT(drain(s) == 0 && fl->score_n == 3);
	/* 0 arrived: a partial ACK to 3, whose repair is under way already */
	c.ack = u + 3 * m;
	ack_sack(s, &c, b7, 2);
	CU_ASSERT(drain(s) == 0 && fl->in_recovery && fl->score_n == 2);
	c.ack = u + 5 * m;
	ack_sack(s, &c, b7, 1);
	CU_ASSERT(drain(s) == 0 && fl->in_recovery && fl->score_n == 1);
	c.ack = u + sizeof(d);                                /* the full ACK */
	put(s, &c, NULL, 0);
	CU_ASSERT(!fl->in_recovery && fl->score_n == 0 && tcp_unacked(s, h) == 0);

	/* an RTO forgets what was SACKed (RFC 2018 8: the receiver may renege) */
	CU_ASSERT(tcp_send(s, h, d, 4 * m) == (int)(4 * m));
	CU_ASSERT_FATAL(drain(s) >= 1);                       /* cwnd after recovery: at least one */
	u = c.ack;
	const uint32_t b3[][2] = { { u + 100, u + m } };
	ack_sack(s, &c, b3, 1);
	CU_ASSERT(fl->score_n == 1);
	CU_ASSERT_FATAL(tick(s, TCP_RTO_MAX_US) >= 1);
	CU_ASSERT(g_pk[0].seq == u && fl->score_n == 0);
	tcp_destroy(s);
}

/* A storm of duplicate ACKs in fast recovery: each inflates cwnd by a
 * segment (RFC 6582 3.2 step 3) but no further than the cap a new ACK
 * meets (twice the send ring), and the count saturates instead of wrapping. */
static void test_dupack_storm_bounded(void)
{
	struct tcp_stack *s = srv_new(4, 4096, 65536, 0);
	struct cl c = { .port = 40025 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	struct tcp_flow *fl = &s->flows[h & 0xfffff];
	static uint8_t d[8 * 1460];
	memset(d, 'd', sizeof(d));
	CU_ASSERT(tcp_send(s, h, d, sizeof(d)) == (int)sizeof(d));
	CU_ASSERT_FATAL(drain(s) == 8);
	for (int i = 0; i < 3; i++)
		put(s, &c, NULL, 0);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT_FATAL(fl->in_recovery);
	for (int i = 3; i < 300; i++) {
		put(s, &c, NULL, 0);
		drain(s);
		CU_ASSERT(fl->cwnd <= 2u * 65536);
	}
	CU_ASSERT(fl->cwnd == 2u * 65536);
	CU_ASSERT(fl->dupacks == UINT8_MAX);
	CU_ASSERT(fl->in_recovery && tcp_stats(s)->fast_rexmits == 1);
	/* the full ACK still ends recovery */
	c.ack += sizeof(d);
	put(s, &c, NULL, 0);
	CU_ASSERT(!fl->in_recovery && fl->dupacks == 0 && tcp_unacked(s, h) == 0);
	tcp_destroy(s);
}

/* An ACK far below snd_una (RFC 5961 5.2): even with an in-window sequence
 * number the segment is dropped with an ACK, its data not taken, its window
 * not used. An old ACK within the peer's largest window is taken, with its
 * data, but does not move the window (RFC 9293 3.10.7.4 fifth). */
static void test_ack_below_window(void)
{
	struct tcp_stack *s = srv_new(4, 4096, 4096, 0);
	struct cl c = { .port = 40024 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	struct tcp_flow *fl = &s->flows[h & 0xfffff];
	uint32_t una = c.ack, wnd = fl->snd_wnd;
	CU_ASSERT(wnd == 65535);
	struct cl bad = c;
	bad.ack = una - (1u << 30);
	bad.win = 0;
	put(s, &bad, "evil", 4);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].flags == 0x10 && g_pk[0].ack == c.seq && g_pk[0].seq == una);
	CU_ASSERT(fl->snd_wnd == wnd);
	const uint8_t *d;
	CU_ASSERT(tcp_recv_peek(s, h, &d) == 0);
	evs(s);
	CU_ASSERT(!got(h, TCP_EV_READABLE));
	/* 100 bytes out and ACKed with data; then a newer segment whose ACK is
	 * 50 bytes old and whose window is 0 (a reordered ACK) */
	uint8_t out[100];
	memset(out, 'o', sizeof(out));
	CU_ASSERT(tcp_send(s, h, out, sizeof(out)) == 100);
	CU_ASSERT(drain(s) == 1);
	c.ack = una + 100;
	put(s, &c, "ab", 2);
	struct cl old = c;
	old.ack = una + 50;
	old.win = 0;
	put(s, &old, "ok", 2);
	c.seq = old.seq;
	CU_ASSERT(fl->snd_una == una + 100);
	CU_ASSERT(fl->snd_wnd == wnd);               /* the old ACK's zero window is not used */
	uint8_t buf[8];
	CU_ASSERT(app_read(s, h, buf, sizeof(buf)) == 4 && memcmp(buf, "abok", 4) == 0);
	/* the window still lets data go at once */
	CU_ASSERT(tcp_send(s, h, "z", 1) == 1);
	int n = drain(s);
	CU_ASSERT(n >= 1 && g_pk[n - 1].len == 1 && g_pk[n - 1].seq == una + 100);
	tcp_destroy(s);
}

/* ---- closing, RST ---------------------------------------------------------- */

/* Drive a connection into state st; returns its handle. */
static uint32_t into_state(struct tcp_stack *s, struct cl *c, enum tcp_state st)
{
	if (st == TCP_S_SYN_RCVD) {
		c->seq = 300;
		c->win = 65535;
		syn(s, c, TH_O_MSS, 1460, 0);
		CU_ASSERT(drain(s) == 1);
		c->ack = g_pk[0].seq + 1;
		return UINT32_MAX;
	}
	uint32_t h = open_conn(s, c, TH_O_MSS);
	switch (st) {
	case TCP_S_ESTABLISHED:
		break;
	case TCP_S_CLOSE_WAIT:
	case TCP_S_LAST_ACK:
		seg(s, c, c->seq++, 0x11, NULL, 0);
		drain(s);
		if (st == TCP_S_LAST_ACK) {
			tcp_close(s, h);
			CU_ASSERT(drain(s) == 1 && (g_pk[0].flags & 0x01));
		}
		break;
	case TCP_S_FIN_WAIT_1:
	case TCP_S_FIN_WAIT_2:
	case TCP_S_CLOSING:
	case TCP_S_TIME_WAIT:
		tcp_close(s, h);
		CU_ASSERT(drain(s) == 1 && (g_pk[0].flags & 0x01));
		if (st == TCP_S_FIN_WAIT_2 || st == TCP_S_TIME_WAIT) {
			c->ack++;
			put(s, c, NULL, 0);
		}
		if (st == TCP_S_CLOSING || st == TCP_S_TIME_WAIT) {
			seg(s, c, c->seq++, 0x11, NULL, 0);
			drain(s);
		}
		break;
	default:
		CU_FAIL("state");
	}
	CU_ASSERT(s->flows[h & 0xfffff].state == st);
	return h;
}

static void test_rst_every_state(void)
{
	static const enum tcp_state sts[] = { TCP_S_SYN_RCVD, TCP_S_ESTABLISHED, TCP_S_CLOSE_WAIT, TCP_S_LAST_ACK,
					       TCP_S_FIN_WAIT_1, TCP_S_FIN_WAIT_2, TCP_S_CLOSING, TCP_S_TIME_WAIT };
	for (size_t k = 0; k < sizeof(sts) / sizeof(sts[0]); k++) {
		struct tcp_stack *s = srv_new(4, 4096, 4096, 0);
		struct cl c = { .port = (uint16_t)(41000 + k) };
		uint32_t h = into_state(s, &c, sts[k]);
		evs(s);
		/* a RST in the window but not at rcv_nxt: a challenge ACK (RFC 5961 3.2) */
		seg(s, &c, c.seq + 100, 0x04, NULL, 0);
		CU_ASSERT_FATAL(drain(s) == 1);
		/* (in SYN_RCVD the SYN-ACK again stands for that ACK) */
		if (!(g_pk[0].flags == (sts[k] == TCP_S_SYN_RCVD ? 0x12 : 0x10) && g_pk[0].ack == c.seq))
			printf("state %u: flags %x ack %u want %u\n", sts[k], g_pk[0].flags, g_pk[0].ack, c.seq);
		CU_ASSERT(g_pk[0].flags == (sts[k] == TCP_S_SYN_RCVD ? 0x12 : 0x10) && g_pk[0].ack == c.seq);
		CU_ASSERT(tcp_flows_used(s) == 1);
		/* one outside the window: ignored */
		seg(s, &c, c.seq - 100000, 0x04, NULL, 0);
		CU_ASSERT(drain(s) == 0 && tcp_flows_used(s) == 1);
		/* at rcv_nxt: the flow goes */
		seg(s, &c, c.seq, 0x04, NULL, 0);
		CU_ASSERT(drain(s) == 0);
		evs(s);
		if (h != UINT32_MAX && sts[k] != TCP_S_TIME_WAIT) {
			int want = sts[k] == TCP_S_LAST_ACK || sts[k] == TCP_S_CLOSING ? 0 : -ECONNRESET;
			CU_ASSERT(closed_status(h) == want);
		}
		CU_ASSERT(tcp_flows_used(s) == 0);
		tcp_destroy(s);
	}
}

/* A flow CLOSED but not yet released is gone to the peer: its segments are
 * answered as for no flow (RST, none for a RST), and the handle sees no
 * event after CLOSED (tcp.h: CLOSED is the last one). */
static void test_closed_not_released(void)
{
	struct tcp_stack *s = srv_new(4, 4096, 4096, 0);
	struct cl c = { .port = 41100 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	CU_ASSERT(tcp_send(s, h, "abc", 3) == 3);
	CU_ASSERT(drain(s) == 1);
	seg(s, &c, c.seq, 0x04, NULL, 0);             /* reset at rcv_nxt */
	CU_ASSERT(drain(s) == 0);
	struct tcp_ev ev[8];
	int n = tcp_events(s, ev, 8);                 /* the application has not released yet */
	CU_ASSERT_FATAL(n == 1);
	CU_ASSERT(ev[0].kind == TCP_EV_CLOSED && ev[0].status == -ECONNRESET);
	/* the peer, not knowing, ACKs our data and sends more */
	c.ack += 3;
	put(s, &c, "zz", 2);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].flags == 0x04 && g_pk[0].seq == c.ack);
	CU_ASSERT(tcp_events(s, ev, 8) == 0);         /* no WRITABLE or READABLE after CLOSED */
	const uint8_t *d;
	CU_ASSERT(tcp_recv_peek(s, h, &d) == 0);
	/* a SYN for the same 4-tuple: a RST with its ACK, the slot not reused yet */
	c.seq += 1000;
	syn(s, &c, TH_O_MSS, 1460, 0);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].flags == 0x14 && g_pk[0].ack == c.seq);
	/* a RST: nothing */
	seg(s, &c, c.seq, 0x04, NULL, 0);
	CU_ASSERT(drain(s) == 0);
	CU_ASSERT(tcp_flows_used(s) == 1);
	tcp_release(s, h);
	CU_ASSERT(tcp_flows_used(s) == 0);
	CU_ASSERT(tcp_events(s, ev, 8) == 0);
	tcp_destroy(s);
}

static void test_orderly_close_both_ways(void)
{
	/* the client closes first: CLOSE_WAIT, EOF, our FIN, LAST_ACK, gone */
	struct tcp_stack *s = srv_new(4, 4096, 4096, 0);
	struct cl c = { .port = 42000 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	put(s, &c, "bye", 3);
	seg(s, &c, c.seq++, 0x11, NULL, 0);
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].ack == c.seq);              /* the FIN is ACKed at once */
	evs(s);
	CU_ASSERT(got(h, TCP_EV_READABLE) && got(h, TCP_EV_EOF));
	CU_ASSERT(tcp_send(s, h, "ok", 2) == 2);
	CU_ASSERT(tcp_flows_closing(s) == 0);
	tcp_close(s, h);
	CU_ASSERT(tcp_flows_closing(s) == 1);         /* CLOSE_WAIT, FIN queued */
	CU_ASSERT_FATAL(drain(s) == 1);
	CU_ASSERT(g_pk[0].flags == 0x19 && g_pk[0].len == 2);   /* data with the FIN */
	CU_ASSERT(tcp_flows_closing(s) == 1);         /* LAST_ACK */
	c.ack += 3;
	put(s, &c, NULL, 0);
	CU_ASSERT(tcp_flows_closing(s) == 0);
	evs(s);
	CU_ASSERT(closed_status(h) == 0);
	CU_ASSERT(tcp_flows_used(s) == 0);
	tcp_destroy(s);

	/* we close first: FIN_WAIT_1, 2, TIME_WAIT; a retransmitted FIN is ACKed again */
	s = srv_new(4, 4096, 4096, 0);
	c = (struct cl){ .port = 42001 };
	h = open_conn(s, &c, TH_O_MSS);
	tcp_close(s, h);
	CU_ASSERT(tcp_send(s, h, "x", 1) == -EPIPE);
	CU_ASSERT_FATAL(drain(s) == 1 && g_pk[0].flags == 0x11);
	CU_ASSERT(tcp_flows_closing(s) == 1);         /* FIN_WAIT_1 */
	c.ack++;
	put(s, &c, NULL, 0);
	CU_ASSERT(s->flows[h & 0xfffff].state == TCP_S_FIN_WAIT_2);
	CU_ASSERT(tcp_flows_closing(s) == 0);         /* our FIN is acknowledged */
	seg(s, &c, c.seq, 0x11, NULL, 0);
	CU_ASSERT(drain(s) == 1 && g_pk[0].ack == c.seq + 1);
	evs(s);
	CU_ASSERT(closed_status(h) == 0);
	CU_ASSERT(tcp_flows_used(s) == 1);            /* TIME_WAIT, no handle */
	CU_ASSERT(tcp_send(s, h, "x", 1) == -ENOTCONN);
	seg(s, &c, c.seq, 0x11, NULL, 0);
	CU_ASSERT(drain(s) == 1 && g_pk[0].ack == c.seq + 1);
	CU_ASSERT(tick(s, 1999999) == 0 && tcp_flows_used(s) == 1);
	tick(s, 1);
	CU_ASSERT(tcp_flows_used(s) == 0);
	tcp_destroy(s);
}

static void test_simultaneous_close(void)
{
	struct tcp_stack *s = srv_new(4, 4096, 4096, 0);
	struct cl c = { .port = 42010 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	tcp_close(s, h);
	CU_ASSERT_FATAL(drain(s) == 1 && (g_pk[0].flags & 0x01));
	/* the client's FIN crosses ours: it does not ACK our FIN */
	seg(s, &c, c.seq++, 0x11, NULL, 0);
	CU_ASSERT(s->flows[h & 0xfffff].state == TCP_S_CLOSING);
	CU_ASSERT(tcp_flows_closing(s) == 1);
	CU_ASSERT_FATAL(drain(s) == 1 && g_pk[0].ack == c.seq);
	/* then its ACK of our FIN */
	c.ack++;
	put(s, &c, NULL, 0);
	CU_ASSERT(s->flows[h & 0xfffff].state == TCP_S_TIME_WAIT);
	evs(s);
	CU_ASSERT(got(h, TCP_EV_EOF) && closed_status(h) == 0);
	/* our FIN lost in a simultaneous close: the timer sends it again */
	struct cl d = { .port = 42011 };
	h = open_conn(s, &d, TH_O_MSS);
	tcp_close(s, h);
	CU_ASSERT(drain(s) == 1);
	seg(s, &d, d.seq++, 0x11, NULL, 0);
	drain(s);
	CU_ASSERT_FATAL(tick(s, TCP_RTO_INIT_US) == 1);
	CU_ASSERT(g_pk[0].flags & 0x01);
	d.ack++;
	put(s, &d, NULL, 0);
	CU_ASSERT(s->flows[h & 0xfffff].state == TCP_S_TIME_WAIT);
	tcp_destroy(s);
}

static void test_time_wait_reuse(void)
{
	for (int ts = 0; ts < 2; ts++) {
		struct tcp_stack *s = srv_new(4, 4096, 4096, 0);
		struct cl c = { .port = 42020 };
		uint32_t h = into_state(s, &c, TCP_S_TIME_WAIT);
		(void)h;
		evs(s);
		CU_ASSERT(tcp_flows_used(s) == 1);
		uint32_t old_seq = c.seq;
		/* an old SYN (lower ISN, or with timestamps an older one): only an ACK */
		c.seq = old_seq - 1000;
		uint8_t f[TH_FRAME_MAX], opt[40];
		uint32_t ol = th_syn_opts(opt, TH_O_MSS | (ts ? TH_O_TS : 0), 1460, 0, 1);
		uint32_t n = th_tcp(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, c.port, TH_PORT, c.seq, 0, 0x02, 65535,
				    opt, ol, NULL, 0);
		CU_ASSERT(tcp_input(s, f, n, g_now) == 0);
		CU_ASSERT_FATAL(drain(s) == 1);
		CU_ASSERT(g_pk[0].flags == 0x10);
		/* a new one above it: a new connection at once (RFC 6191) */
		c.seq = ts ? old_seq - 1000 : old_seq + 100000;   /* with TS, the timestamp decides */
		ol = th_syn_opts(opt, TH_O_MSS | (ts ? TH_O_TS : 0), 1460, 0, 100000);
		n = th_tcp(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, c.port, TH_PORT, c.seq, 0, 0x02, 65535,
			   opt, ol, NULL, 0);
		if (!ts) {
			CU_ASSERT(tcp_input(s, f, n, g_now) == 0);
		} else {
			/* into_state ran without timestamps: redo it with them */
			tcp_destroy(s);
			s = srv_new(4, 4096, 4096, 0);
			c = (struct cl){ .port = 42021 };
			h = open_conn(s, &c, TH_O_MSS | TH_O_TS);
			tcp_close(s, h);
			drain(s);
			c.ack++;
			c.tsval = 5000;
			seg(s, &c, c.seq++, 0x11, NULL, 0);
			drain(s);
			evs(s);
			CU_ASSERT(s->flows[h & 0xfffff].state == TCP_S_TIME_WAIT);
			ol = th_syn_opts(opt, TH_O_MSS | TH_O_TS, 1460, 0, 4000);   /* older TS */
			n = th_tcp(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, c.port, TH_PORT, c.seq + 5, 0, 0x02,
				   65535, opt, ol, NULL, 0);
			CU_ASSERT(tcp_input(s, f, n, g_now) == 0);
			CU_ASSERT(drain(s) == 1 && g_pk[0].flags == 0x10);
			ol = th_syn_opts(opt, TH_O_MSS | TH_O_TS, 1460, 0, 6000);   /* newer TS, lower seq */
			n = th_tcp(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, c.port, TH_PORT, c.seq - 50000, 0, 0x02,
				   65535, opt, ol, NULL, 0);
			CU_ASSERT(tcp_input(s, f, n, g_now) == 0);
		}
		CU_ASSERT_FATAL(drain(s) == 1);
		CU_ASSERT(g_pk[0].flags == 0x12);
		CU_ASSERT(tcp_stats(s)->tw_reused == 1 && tcp_flows_used(s) == 1);
		tcp_destroy(s);
	}
}

static void test_syn_flood_bounded(void)
{
	struct tcp_config cfg = { .ip = TH_SRV_IP, .port = TH_PORT, .conns_max = 8, .rx_bytes = 4096, .tx_bytes = 4096 };
	struct tcp_stack *s = srv_new(8, 4096, 4096, 0);
	/* the budget's figure is what tcp_create took, allocation by
	 * allocation (flows, hash heads, rings, control frames); the stack
	 * allocates nothing after it, so that is all a flood can cost */
	size_t took = (size_t)s->cfg.conns_max * sizeof(struct tcp_flow) + (size_t)(s->hash_mask + 1) * sizeof(uint32_t) +
		      s->mem_bytes + (size_t)TCP_CTLQ_MAX * s->frame_max;
	CU_ASSERT(tcp_memory_bytes(&cfg) == took);
	int synacks = 0;
	for (uint32_t i = 0; i < 1000; i++) {
		struct cl c = { .port = (uint16_t)(10000 + i), .seq = i * 77 };
		CU_ASSERT(syn(s, &c, TH_O_MSS, 1460, 0) == (i < 8 ? 0 : -ENOBUFS));
		synacks += drain(s);
	}
	CU_ASSERT(synacks == 8);
	CU_ASSERT(tcp_flows_used(s) == 8);
	CU_ASSERT(tcp_stats(s)->syn_dropped == 992);
	/* half-open flows go after TCP_SYNACK_RETRIES_MAX unanswered SYN-ACKs */
	for (int i = 0; i < 200 && tcp_flows_used(s); i++)
		tick(s, 1000000);
	CU_ASSERT(tcp_flows_used(s) == 0);
	CU_ASSERT(evs(s) == 0);
	/* and a real client gets in afterwards */
	struct cl c = { .port = 50000 };
	open_conn(s, &c, TH_O_MSS);
	CU_ASSERT(tcp_flows_used(s) == 1);
	tcp_destroy(s);
}

static void test_keepalive(void)
{
	struct tcp_config cfg = { .ip = TH_SRV_IP, .port = TH_PORT, .conns_max = 2, .rx_bytes = 4096, .tx_bytes = 4096,
				  .keepalive_idle_us = 10000000, .keepalive_intvl_us = 1000000, .keepalive_probes = 3 };
	memcpy(cfg.mac, th_srv_mac, 6);
	struct tcp_stack *s = NULL;
	CU_ASSERT_FATAL(tcp_create(&cfg, &s) == 0);
	struct cl c = { .port = 43000 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	CU_ASSERT(tick(s, 9999999) == 0);
	CU_ASSERT_FATAL(tick(s, 1) == 1);
	CU_ASSERT(g_pk[0].seq == c.ack - 1 && g_pk[0].len == 0);
	put(s, &c, NULL, 0);                          /* the peer answers: idle again */
	CU_ASSERT(drain(s) == 0);
	CU_ASSERT(tick(s, 9999999) == 0);
	CU_ASSERT(tick(s, 1) == 1);
	CU_ASSERT(tick(s, 1000000) == 1);
	CU_ASSERT(tick(s, 1000000) == 1);
	CU_ASSERT_FATAL(tick(s, 1000000) == 1);       /* three unanswered: RST */
	CU_ASSERT(g_pk[0].flags & 0x04);
	evs(s);
	CU_ASSERT(closed_status(h) == -ETIMEDOUT);
	CU_ASSERT(tcp_flows_used(s) == 0);
	tcp_destroy(s);
}

static void test_fin_wait_2_idle_bound(void)
{
	struct tcp_stack *s = srv_new(2, 4096, 4096, 0);
	struct cl c = { .port = 43020 };
	uint32_t h = into_state(s, &c, TCP_S_FIN_WAIT_2);
	/* the peer still sends (half-close): each segment restarts the bound */
	tick(s, TCP_FIN_WAIT_2_US - 1000);
	put(s, &c, "late", 4);
	tick(s, TCP_FIN_WAIT_2_US - 1000);
	CU_ASSERT(s->flows[h & 0xfffff].state == TCP_S_FIN_WAIT_2);
	uint8_t buf[8];
	CU_ASSERT(app_read(s, h, buf, sizeof(buf)) == 4);
	/* then silence for the whole bound: the flow goes */
	tick(s, 1000);
	evs(s);
	CU_ASSERT(closed_status(h) == -ETIMEDOUT);
	CU_ASSERT(tcp_flows_used(s) == 0);
	tcp_destroy(s);
}

/* Out-of-window segments (an old sequence number, one far ahead, a stale
 * timestamp, an ACK of data never sent) are answered, but they are not the
 * peer being alive: keepalive probes still go and still give up, and the
 * FIN_WAIT_2 bound still ends the flow. */
static void garbage(struct tcp_stack *s, const struct cl *c, int k)
{
	struct cl g = *c;
	switch (k % 3) {
	case 0: g.seq = c->seq + 100000; break;   /* beyond the window */
	case 1: g.seq = c->seq - 100000; break;   /* long before it */
	default: g.ack = c->ack + 5000; break;    /* ACKs data never sent */
	}
	put(s, &g, "junk", 4);
	drain(s);
}

static void test_garbage_is_not_liveness(void)
{
	struct tcp_config cfg = { .ip = TH_SRV_IP, .port = TH_PORT, .conns_max = 2, .rx_bytes = 4096, .tx_bytes = 4096,
				  .keepalive_idle_us = 10000000, .keepalive_intvl_us = 1000000, .keepalive_probes = 3 };
	memcpy(cfg.mac, th_srv_mac, 6);
	struct tcp_stack *s = NULL;
	CU_ASSERT_FATAL(tcp_create(&cfg, &s) == 0);
	struct cl c = { .port = 43030 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	CU_ASSERT(tick(s, 9000000) == 0);
	garbage(s, &c, 0);
	CU_ASSERT_FATAL(tick(s, 1000000) == 1);       /* the probe at 10 s all the same */
	CU_ASSERT(g_pk[0].seq == c.ack - 1 && g_pk[0].len == 0);
	bool rst = false;
	for (int i = 1; i < 8 && !rst; i++) {
		garbage(s, &c, i);
		int n = tick(s, 1000000);
		for (int k = 0; k < n; k++)
			rst |= (g_pk[k].flags & 0x04) != 0;
	}
	CU_ASSERT(rst);
	evs(s);
	CU_ASSERT(closed_status(h) == -ETIMEDOUT);
	CU_ASSERT(tcp_flows_used(s) == 0);
	tcp_destroy(s);

	s = srv_new(2, 4096, 4096, 0);
	c = (struct cl){ .port = 43031 };
	h = into_state(s, &c, TCP_S_FIN_WAIT_2);
	for (int i = 0; i < 3; i++) {
		tick(s, TCP_FIN_WAIT_2_US / 4);
		garbage(s, &c, i);
	}
	CU_ASSERT(s->flows[h & 0xfffff].state == TCP_S_FIN_WAIT_2);
	tick(s, TCP_FIN_WAIT_2_US / 4);
	evs(s);
	CU_ASSERT(closed_status(h) == -ETIMEDOUT);
	CU_ASSERT(tcp_flows_used(s) == 0);
	tcp_destroy(s);
}

static void test_abort_and_stale_handles(void)
{
	struct tcp_stack *s = srv_new(2, 4096, 4096, 0);
	struct cl c = { .port = 43010 };
	uint32_t h = open_conn(s, &c, TH_O_MSS);
	tcp_abort(s, h);
	CU_ASSERT_FATAL(drain(s) == 1 && (g_pk[0].flags & 0x04) && g_pk[0].seq == c.ack);
	evs(s);
	CU_ASSERT(closed_status(h) == -ECONNABORTED);
	CU_ASSERT(tcp_send(s, h, "x", 1) == -ENOTCONN);
	const uint8_t *d;
	CU_ASSERT(tcp_recv_peek(s, h, &d) == 0);
	tcp_close(s, h);
	/* the slot comes back with another generation: the old handle stays dead */
	struct cl c2 = { .port = 43011 };
	uint32_t h2 = open_conn(s, &c2, TH_O_MSS);
	CU_ASSERT((h2 & 0xfffff) == (h & 0xfffff) && h2 != h);
	CU_ASSERT(tcp_send(s, h, "x", 1) == -ENOTCONN);
	CU_ASSERT(tcp_send(s, h2, "x", 1) == 1);
	/* an ACK for data never sent: dropped with an ACK (RFC 9293 3.10.7.4) */
	c2.ack += 1000;
	put(s, &c2, NULL, 0);
	CU_ASSERT(drain(s) >= 1);
	CU_ASSERT(tcp_unacked(s, h2) == 1);
	tcp_destroy(s);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("nic_tcp", NULL, NULL);
	CU_add_test(s, "arp", test_arp);
	CU_add_test(s, "ipv4_icmp", test_ipv4_icmp);
	CU_add_test(s, "handshake_all_options", test_handshake_all_options);
	CU_add_test(s, "handshake_without_each_option", test_handshake_without_each_option);
	CU_add_test(s, "synack_lost_and_ack_lost", test_synack_lost_and_ack_lost);
	CU_add_test(s, "delayed_ack", test_delayed_ack);
	CU_add_test(s, "reorder_sack_and_duplicates", test_reorder_sack_and_duplicates);
	CU_add_test(s, "sequence_wrap", test_sequence_wrap);
	CU_add_test(s, "ooo_bounded", test_ooo_bounded);
	CU_add_test(s, "receive_window_full", test_receive_window_full);
	CU_add_test(s, "send_peer_window_and_zero_window_probe", test_send_peer_window_and_zero_window_probe);
	CU_add_test(s, "window_shrunk_with_data_out", test_window_shrunk_with_data_out);
	CU_add_test(s, "rto_backoff_karn", test_rto_backoff_karn);
	CU_add_test(s, "rtt_sample_clamped", test_rtt_sample_clamped);
	CU_add_test(s, "abort_after_rto_rst_at_snd_max", test_abort_after_rto_rst_at_snd_max);
	CU_add_test(s, "fast_retransmit_newreno", test_fast_retransmit_newreno);
	CU_add_test(s, "sack_send_side", test_sack_send_side);
	CU_add_test(s, "ack_below_window", test_ack_below_window);
	CU_add_test(s, "dupack_storm_bounded", test_dupack_storm_bounded);
	CU_add_test(s, "rst_every_state", test_rst_every_state);
	CU_add_test(s, "closed_not_released", test_closed_not_released);
	CU_add_test(s, "orderly_close_both_ways", test_orderly_close_both_ways);
	CU_add_test(s, "simultaneous_close", test_simultaneous_close);
	CU_add_test(s, "time_wait_reuse", test_time_wait_reuse);
	CU_add_test(s, "syn_flood_bounded", test_syn_flood_bounded);
	CU_add_test(s, "keepalive", test_keepalive);
	CU_add_test(s, "fin_wait_2_idle_bound", test_fin_wait_2_idle_bound);
	CU_add_test(s, "garbage_is_not_liveness", test_garbage_is_not_liveness);
	CU_add_test(s, "abort_and_stale_handles", test_abort_and_stale_handles);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
