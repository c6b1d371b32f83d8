/*
 * tcp_link_ut.c - two instances of the userspace TCP (nic/tcp/) over a
 * seeded simulated link that drops, duplicates, reorders, delays and
 * corrupts frames: a client stack opens several connections to a server
 * stack, both sides send random byte streams, read them in random chunks
 * (pausing at times, so windows fill and close), and close; every byte
 * must arrive exactly, every connection must end with CLOSED status 0, and
 * every flow must be freed once TIME_WAIT is over.
 *
 * Locality: test program, one thread; simulated time only (no timing
 * assertion can flake on a busy machine).
 *
 * A failure prints its seed:
 *     tcp_link_ut --seed N     replays seed N alone, exactly
 *     tcp_link_ut --seeds N    runs seeds 1..N (default 60)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/Basic.h>

#include "tcp.h"
#include "tcp_internal.h"
#include "tcp_harness.h"

#define LINK_FRAMES_MAX 1024u        /* frames in flight per direction (a full queue drops) */
#define LINK_CONNS      4u
#define LINK_STREAM_MAX (96u * 1024)
#define LINK_SIM_US_MAX (900ull * 1000000)   /* simulated time a seed may take */
#define LINK_STEP_US    500u

static uint64_t g_seed_first = 1, g_seeds = 60;

static uint64_t rng_next(uint64_t *x)
{
	*x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
	return *x;
}

static uint32_t rng_below(uint64_t *x, uint32_t n) { return n ? (uint32_t)(rng_next(x) % n) : 0; }

struct frame { uint64_t at; uint32_t len; uint8_t b[TH_FRAME_MAX]; };

/* One direction of the link. */
struct pipe {
	struct frame f[LINK_FRAMES_MAX];
	uint32_t n;
};

struct faults { uint32_t loss, dup, reorder, corrupt; };   /* per 1000 frames */

static void pipe_put(struct pipe *p, uint64_t *rng, const struct faults *fa, uint64_t now, const uint8_t *b,
		     uint32_t len)
{
	int copies = rng_below(rng, 1000) < fa->dup ? 2 : 1;
	if (rng_below(rng, 1000) < fa->loss)
		return;
	for (int c = 0; c < copies && p->n < LINK_FRAMES_MAX; c++) {
		struct frame *f = &p->f[p->n++];
		/* a base delay; some frames are held back, so later ones overtake them */
		f->at = now + 100 + (rng_below(rng, 1000) < fa->reorder ? rng_below(rng, 3000) : rng_below(rng, 20));
		f->len = len;
		memcpy(f->b, b, len);
		/* a flipped byte past the Ethernet header: the IP and TCP checksums
		 * must catch it. (Not in it: the NIC's FCS drops those, and a
		 * corrupted source MAC in a SYN would be a next hop learned wrong.) */
		if (rng_below(rng, 1000) < fa->corrupt)
			f->b[14 + rng_below(rng, len - 14)] ^= (uint8_t)(1 + rng_below(rng, 255));
	}
}

/* Deliver every frame due by now (in due order, ties by position). */
static void pipe_deliver(struct pipe *p, struct tcp_stack *to, uint64_t now)
{
	for (;;) {
		uint32_t best = UINT32_MAX;
		for (uint32_t i = 0; i < p->n; i++)
			if (p->f[i].at <= now && (best == UINT32_MAX || p->f[i].at < p->f[best].at))
				best = i;
		if (best == UINT32_MAX)
			return;
		static struct frame tmp;
		tmp = p->f[best];
		p->f[best] = p->f[--p->n];
		tcp_input(to, tmp.b, tmp.len, now);
	}
}

struct stream {
	uint32_t len, sent, got;
	bool closed_tx, eof, closed;
	int status;
	uint8_t data[LINK_STREAM_MAX];
};

struct side {
	struct tcp_stack *s;
	uint32_t conn[LINK_CONNS];
	bool open[LINK_CONNS];
	bool est[LINK_CONNS];           /* OPEN seen */
	struct stream tx[LINK_CONNS];   /* what this side sends on connection i */
	uint32_t pause_until_step[LINK_CONNS];
};

static struct side g_cli, g_srv;
static struct pipe g_c2s, g_s2c;

static int find_conn(const struct side *sd, uint32_t conn)
{
	for (uint32_t i = 0; i < LINK_CONNS; i++)
		if (sd->open[i] && sd->conn[i] == conn)
			return (int)i;
	return -1;
}

/* Read up to budget bytes of connection i, checked against the peer's stream. */
static bool side_read(struct side *sd, uint32_t i, struct stream *rx, uint32_t budget, uint64_t seed)
{
	const uint8_t *d;
	uint32_t avail;
	while (budget && (avail = tcp_recv_peek(sd->s, sd->conn[i], &d)) > 0) {
		uint32_t take = avail < budget ? avail : budget;
		if (rx->got + take > rx->len || memcmp(d, rx->data + rx->got, take) != 0) {
			printf("seed %" PRIu64 ": conn %u: wrong bytes at %u\n", seed, i, rx->got);
			return false;
		}
		tcp_recv_consume(sd->s, sd->conn[i], take);
		rx->got += take;
		budget -= take;
	}
	return true;
}

/* Events, reads, writes and closes. */
static bool side_step(struct side *sd, struct side *peer, uint64_t *rng, uint32_t step, uint64_t seed)
{
	struct tcp_ev ev[32];
	int n;
	while ((n = tcp_events(sd->s, ev, 32)) > 0) {
		for (int k = 0; k < n; k++) {
			int i = find_conn(sd, ev[k].conn);
			if (ev[k].kind == TCP_EV_OPEN && i < 0) {
				/* the server side: which connection is it? the client's port says */
				const struct tcp_flow *fl = &sd->s->flows[ev[k].conn & 0xfffff];
				i = fl->rport - 20000;
				if (i < 0 || i >= (int)LINK_CONNS || sd->open[i]) {
					printf("seed %" PRIu64 ": OPEN for port %u\n", seed, fl->rport);
					return false;
				}
				sd->conn[i] = ev[k].conn;
				sd->open[i] = sd->est[i] = true;
				continue;
			}
			if (i < 0) {
				if (ev[k].kind == TCP_EV_OPEN)
					continue;   /* the client's own connect */
				printf("seed %" PRIu64 ": event %u for unknown conn %#x\n", seed, ev[k].kind, ev[k].conn);
				return false;
			}
			struct stream *rx = &peer->tx[i];
			if (ev[k].kind == TCP_EV_CLOSED && !side_read(sd, i, rx, UINT32_MAX, seed))
				return false;   /* the tail, before the handle goes */
			if (ev[k].kind == TCP_EV_OPEN) {
				sd->est[i] = true;
			} else if (ev[k].kind == TCP_EV_EOF) {
				rx->eof = true;
			} else if (ev[k].kind == TCP_EV_CLOSED) {
				sd->tx[i].closed = true;
				sd->tx[i].status = ev[k].status;
				sd->open[i] = false;
				tcp_release(sd->s, ev[k].conn);
			}
		}
	}
	for (uint32_t i = 0; i < LINK_CONNS; i++) {
		if (!sd->open[i] || !sd->est[i])
			continue;
		struct stream *rx = &peer->tx[i], *tx = &sd->tx[i];
		if (step >= sd->pause_until_step[i]) {
			if (!side_read(sd, i, rx, 1 + rng_below(rng, 8192), seed))
				return false;
			if (rng_below(rng, 100) < 3)
				sd->pause_until_step[i] = step + 1 + rng_below(rng, 400);   /* a slow reader */
		}
		if (tx->sent < tx->len) {
			uint32_t want = 1 + rng_below(rng, tx->len - tx->sent);
			int r = tcp_send(sd->s, sd->conn[i], tx->data + tx->sent, want);
			if (r < 0) {
				printf("seed %" PRIu64 ": conn %u: send %d\n", seed, i, r);
				return false;
			}
			tx->sent += (uint32_t)r;
		}
		if (tx->sent == tx->len && !tx->closed_tx) {
			tcp_close(sd->s, sd->conn[i]);
			tx->closed_tx = true;
		}
	}
	return true;
}

static void drain_into(struct tcp_stack *s, struct pipe *p, uint64_t *rng, const struct faults *fa, uint64_t now)
{
	uint8_t b[TH_FRAME_MAX];
	uint32_t len;
	while ((len = tcp_output(s, now, b, sizeof(b))) > 0)
		pipe_put(p, rng, fa, now, b, len);
}

static bool run_seed(uint64_t seed)
{
	uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
	struct faults fa = { .loss = rng_below(&rng, 50), .dup = rng_below(&rng, 50), .reorder = rng_below(&rng, 200),
			     .corrupt = rng_below(&rng, 20) };
	uint32_t rx_bytes = 4096u << rng_below(&rng, 5), tx_bytes = 4096u << rng_below(&rng, 5);
	uint32_t flags_c = rng_below(&rng, 16), flags_s = rng_below(&rng, 16);
	struct tcp_config cc = { .ip = TH_CLI_IP, .port = 1, .conns_max = LINK_CONNS, .rx_bytes = rx_bytes,
				 .tx_bytes = tx_bytes, .isn_secret = seed, .time_wait_us = 2000000,
				 .mtu = (uint16_t)(rng_below(&rng, 2) ? 1500 : 576), .flags = flags_c };
	struct tcp_config sc = cc;
	sc.ip = TH_SRV_IP;
	sc.port = TH_PORT;
	sc.isn_secret = ~seed;
	sc.flags = flags_s;
	sc.rx_bytes = 4096u << rng_below(&rng, 5);
	memcpy(cc.mac, th_cli_mac, 6);
	memcpy(sc.mac, th_srv_mac, 6);
	memset(&g_cli, 0, sizeof(g_cli));
	memset(&g_srv, 0, sizeof(g_srv));
	g_c2s.n = g_s2c.n = 0;
	if (tcp_create(&cc, &g_cli.s) || tcp_create(&sc, &g_srv.s))
		return false;
	for (uint32_t i = 0; i < LINK_CONNS; i++) {
		struct stream *a = &g_cli.tx[i], *b = &g_srv.tx[i];
		a->len = rng_below(&rng, LINK_STREAM_MAX + 1);
		b->len = rng_below(&rng, LINK_STREAM_MAX + 1);
		for (uint32_t k = 0; k < a->len; k++)
			a->data[k] = (uint8_t)rng_next(&rng);
		for (uint32_t k = 0; k < b->len; k++)
			b->data[k] = (uint8_t)rng_next(&rng);
	}
	uint64_t now = 1000000;
	for (uint32_t i = 0; i < LINK_CONNS; i++) {
		if (tcp_connect(g_cli.s, TH_SRV_IP, TH_PORT, (uint16_t)(20000 + i), th_srv_mac, now, &g_cli.conn[i]))
			return false;
		g_cli.open[i] = true;
	}
	bool ok = true;
	uint32_t step = 0;
	for (; now < LINK_SIM_US_MAX && ok; now += LINK_STEP_US, step++) {
		pipe_deliver(&g_c2s, g_srv.s, now);
		pipe_deliver(&g_s2c, g_cli.s, now);
		tcp_timers(g_cli.s, now);
		tcp_timers(g_srv.s, now);
		ok = side_step(&g_cli, &g_srv, &rng, step, seed) && side_step(&g_srv, &g_cli, &rng, step, seed);
		drain_into(g_cli.s, &g_c2s, &rng, &fa, now);
		drain_into(g_srv.s, &g_s2c, &rng, &fa, now);
		tcp_check(g_cli.s);
		tcp_check(g_srv.s);
		bool done = tcp_flows_used(g_cli.s) == 0 && tcp_flows_used(g_srv.s) == 0;
		for (uint32_t i = 0; i < LINK_CONNS; i++)
			done = done && g_cli.tx[i].closed && g_srv.tx[i].closed;
		if (done)
			break;
	}
	for (uint32_t i = 0; ok && i < LINK_CONNS; i++) {
		for (int side = 0; side < 2; side++) {
			struct side *sd = side ? &g_srv : &g_cli, *peer = side ? &g_cli : &g_srv;
			struct stream *rx = &peer->tx[i];
			if (!sd->tx[i].closed || sd->tx[i].status != 0 || rx->got != rx->len || !rx->eof) {
				printf("seed %" PRIu64 ": %s conn %u: closed %d status %d got %u of %u eof %d "
				       "(loss %u dup %u reorder %u corrupt %u per 1000)\n",
				       seed, side ? "server" : "client", i, sd->tx[i].closed, sd->tx[i].status, rx->got,
				       rx->len, rx->eof, fa.loss, fa.dup, fa.reorder, fa.corrupt);
				ok = false;
			}
		}
	}
	if (ok && (tcp_flows_used(g_cli.s) || tcp_flows_used(g_srv.s))) {
		printf("seed %" PRIu64 ": flows left: client %u server %u\n", seed, tcp_flows_used(g_cli.s),
		       tcp_flows_used(g_srv.s));
		ok = false;
	}
	tcp_destroy(g_cli.s);
	tcp_destroy(g_srv.s);
	return ok;
}

static void test_seeded_link(void)
{
	uint32_t failed = 0;
	for (uint64_t seed = g_seed_first; seed < g_seed_first + g_seeds; seed++) {
		if (!run_seed(seed)) {
			printf("tcp_link_ut: seed %" PRIu64 " failed (tcp_link_ut --seed %" PRIu64 ")\n", seed, seed);
			failed++;
		}
	}
	CU_ASSERT(failed == 0);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			g_seed_first = strtoull(argv[++i], NULL, 10);
			g_seeds = 1;
		} else if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
			g_seeds = strtoull(argv[++i], NULL, 10);
		} else {
			fprintf(stderr, "usage: %s [--seed N | --seeds N]\n", argv[0]);
			return 2;
		}
	}
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("nic_tcp_link", NULL, NULL);
	CU_add_test(s, "seeded_link", test_seeded_link);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
