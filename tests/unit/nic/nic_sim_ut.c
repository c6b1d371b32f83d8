/*
 * nic_sim_ut.c - unit tests of the in-memory NIC (nic/nic_sim.c): nic.h's
 * contract (nic_contract.h) and the byte streams, first in small scripted
 * cases, then under seeded random faults against a reference model.
 *
 * Locality: test program, one thread: it plays the clients and the core.
 *
 * The seeded test runs many seeds (each a fresh network with its own fault
 * mix); a failure prints its seed, and
 *     nic_sim_ut --seed N       replays seed N alone, exactly
 *     nic_sim_ut --seeds N      runs seeds 1..N (default 300)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/Basic.h>

#include "nic.h"
#include "nic_backend.h"
#include "nic_sim.h"
#include "nic_contract.h"

static uint64_t g_seed_first = 1, g_seeds = 300;

/* ---- small helpers ---------------------------------------------------------- */

static struct nic_sim_net *net_new(uint64_t seed, uint32_t pipes_max, uint32_t pipe_bytes)
{
	struct nic_sim_net_config nc = { .seed = seed, .pipes_max = pipes_max,
					 .pipe_bytes = pipe_bytes };
	struct nic_sim_net *net = NULL;
	CU_ASSERT_FATAL(nic_sim_net_create(&nc, &net) == 0);
	return net;
}

static struct nic *nic_new(struct nic_sim_net *net, uint16_t port, uint32_t conns_max,
			   uint32_t rx_bufs, uint32_t rx_buf_bytes)
{
	struct nic_config cfg = { .port = port, .conns_max = conns_max, .rx_bufs = rx_bufs,
				  .rx_buf_bytes = rx_buf_bytes };
	struct nic *n = NULL;
	CU_ASSERT_FATAL(nic_sim_create(&cfg, net, &n) == 0);
	return n;
}

/* Flush and poll once; events go to the checker and into ev[] (returns count). */
static int step(struct nic *n, struct ct *ct, struct nic_ev *ev, int max)
{
	nic_flush(n);
	int k = nic_poll(n, ev, max);
	for (int i = 0; i < k; i++)
		ct_event(ct, &ev[i]);
	return k;
}

/* Poll until an event of kind arrives (copied to *out); false if none in 100 steps. */
static bool wait_kind(struct nic *n, struct ct *ct, uint32_t kind, struct nic_ev *out)
{
	for (int s = 0; s < 100; s++) {
		struct nic_ev ev[1];
		if (step(n, ct, ev, 1) == 1 && ev[0].kind == kind) {
			*out = ev[0];
			return true;
		}
	}
	return false;
}

/* ---- scripted cases --------------------------------------------------------- */

static void test_basic_echo_and_close(void)
{
	struct nic_sim_net *net = net_new(1, 4, 4096);
	struct nic *n = nic_new(net, 9092, 2, 4, 64);
	struct ct ct;
	ct_init(&ct, 2, 4, 64);
	CU_ASSERT_EQUAL(nic_local_port(n), 9092);
	uint32_t cl;
	CU_ASSERT_EQUAL(nic_sim_connect(net, 9093, &cl), -ECONNREFUSED);
	CU_ASSERT_FATAL(nic_sim_connect(net, 9092, &cl) == 0);
	CU_ASSERT(cl != 0);
	CU_ASSERT_EQUAL(nic_sim_client_write(net, cl, "hello", 5), 5); /* before the accept */
	struct nic_ev open, data, ev;
	CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_OPEN, &open));
	uint32_t back = 0;
	CU_ASSERT(nic_sim_conn_client(n, open.conn, &back) == 0 && back == cl);
	char peer[NIC_PEER_BYTES_MAX];
	CU_ASSERT(nic_conn_peer(n, open.conn, peer, sizeof(peer)) > 0 && peer[0] == '/');
	CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_DATA, &data));
	CU_ASSERT(data.len == 5 && memcmp(data.data, "hello", 5) == 0);
	CU_ASSERT_EQUAL(nic_sim_rx_held(n), 1);
	ct_release(&ct, &data);
	nic_rx_release(n, &data);
	CU_ASSERT_EQUAL(nic_sim_rx_held(n), 0);
	char buf[16];
	CU_ASSERT_EQUAL(nic_sim_client_read(net, cl, buf, sizeof(buf)), -EAGAIN);
	int rc = nic_send(n, open.conn, "world", 5, (void *)1);
	ct_send(&ct, open.conn, (void *)1, rc);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_SENT, &ev));
	CU_ASSERT(ev.cookie == (void *)1 && ev.status == 0);
	CU_ASSERT_EQUAL(nic_sim_client_read(net, cl, buf, sizeof(buf)), 5);
	CU_ASSERT(memcmp(buf, "world", 5) == 0);
	/* client FIN: the connection closes (no half-close), status 0 */
	nic_sim_client_close(net, cl);
	CU_ASSERT_EQUAL(nic_sim_client_read(net, cl, buf, sizeof(buf)), -ENOTCONN);
	CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_CLOSED, &ev));
	CU_ASSERT(ev.conn == open.conn && ev.status == 0);
	rc = nic_send(n, open.conn, "x", 1, NULL);
	ct_send(&ct, open.conn, NULL, rc);
	CU_ASSERT_EQUAL(rc, -ENOTCONN);
	CU_ASSERT_EQUAL(nic_sim_conns_used(n), 0);
	CU_ASSERT_EQUAL(nic_sim_net_next_us(net), UINT64_MAX);
	ct_quiescent(&ct);
	if (ct.fails)
		fprintf(stderr, "contract: %s\n", ct.why);
	CU_ASSERT_EQUAL(ct.fails, 0);
	ct_free(&ct);
	nic_destroy(n);
	nic_sim_net_destroy(net);
}

/* Paused: no DATA, the client's stream fills (-EAGAIN) and its FIN waits;
 * resumed: every byte in order, then CLOSED. */
static void test_pause_backpressure(void)
{
	struct nic_sim_net *net = net_new(2, 2, 1000);
	struct nic *n = nic_new(net, 0, 1, 8, 256);
	struct ct ct;
	ct_init(&ct, 1, 8, 256);
	uint32_t cl;
	CU_ASSERT_FATAL(nic_sim_connect(net, nic_local_port(n), &cl) == 0);
	struct nic_ev open, ev[16];
	CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_OPEN, &open));
	nic_pause(n, open.conn, true);
	nic_pause(n, open.conn, true); /* idempotent */
	uint8_t b[1500];
	for (int i = 0; i < 1500; i++)
		b[i] = (uint8_t)(i * 7);
	CU_ASSERT_EQUAL(nic_sim_client_write(net, cl, b, 1500), 1000); /* bounded stream */
	CU_ASSERT_EQUAL(nic_sim_client_write(net, cl, b + 1000, 500), -EAGAIN);
	for (int s = 0; s < 10; s++)
		CU_ASSERT_EQUAL(step(n, &ct, ev, 16), 0);
	nic_pause(n, open.conn, false);
	uint32_t got = 0;
	bool closed = false;
	for (int s = 0; s < 50 && !closed; s++) {
		int k = step(n, &ct, ev, 16);
		for (int i = 0; i < k; i++) {
			if (ev[i].kind == NIC_EV_CLOSED) {
				CU_ASSERT_EQUAL(got, 1500); /* every byte before the FIN */
				CU_ASSERT_EQUAL(ev[i].status, 0);
				closed = true;
				continue;
			}
			CU_ASSERT_FATAL(ev[i].kind == NIC_EV_DATA);
			CU_ASSERT(memcmp(ev[i].data, b + got, ev[i].len) == 0);
			got += ev[i].len;
			ct_release(&ct, &ev[i]);
			nic_rx_release(n, &ev[i]);
		}
		if (got == 1000) {
			CU_ASSERT_EQUAL(nic_sim_client_write(net, cl, b + 1000, 500), 500);
			nic_pause(n, open.conn, true);
			nic_sim_client_close(net, cl);
			for (int q = 0; q < 10; q++) /* the FIN waits behind the pause */
				CU_ASSERT_EQUAL(step(n, &ct, ev, 16), 0);
			nic_pause(n, open.conn, false);
		}
	}
	CU_ASSERT_EQUAL(got, 1500);
	CU_ASSERT(closed);
	nic_pause(n, open.conn, true); /* stale: ignored */
	ct_quiescent(&ct);
	CU_ASSERT_EQUAL(ct.fails, 0);
	ct_free(&ct);
	nic_destroy(n);
	nic_sim_net_destroy(net);
}

/* A client that stops reading stalls the server's sends; SENT comes only as
 * its stream drains; a local close then cancels the rest, CLOSED last, and
 * the client reads what was sent, then EOF. */
static void test_stalled_reader_and_local_close(void)
{
	enum { BUF = 3000 };
	struct nic_sim_net *net = net_new(3, 2, 4096);
	struct nic *n = nic_new(net, 0, 1, 4, 256);
	struct ct ct;
	ct_init(&ct, 1, 4, 256);
	static uint8_t big[BUF];
	for (int i = 0; i < BUF; i++)
		big[i] = (uint8_t)(i * 13 + 1);
	uint32_t cl;
	CU_ASSERT_FATAL(nic_sim_connect(net, nic_local_port(n), &cl) == 0);
	struct nic_ev open, ev[NIC_TXQ_MAX + 2];
	CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_OPEN, &open));
	for (uintptr_t i = 1; i <= NIC_TXQ_MAX; i++) {
		int rc = nic_send(n, open.conn, big, BUF, (void *)i);
		ct_send(&ct, open.conn, (void *)i, rc);
		CU_ASSERT_EQUAL(rc, 0);
	}
	int rc = nic_send(n, open.conn, big, BUF, NULL);
	ct_send(&ct, open.conn, NULL, rc);
	CU_ASSERT_EQUAL(rc, -ENOBUFS);
	uint32_t ok = 0;
	for (int s = 0; s < 20; s++) {
		int k = step(n, &ct, ev, NIC_TXQ_MAX + 2);
		for (int i = 0; i < k; i++)
			ok += ev[i].kind == NIC_EV_SENT && ev[i].status == 0;
	}
	CU_ASSERT_EQUAL(ok, 1);        /* 4096 bytes of room: one buffer and a piece */
	CU_ASSERT(nic_sim_stats(n)->tx_stalls > 0);
	CU_ASSERT(nic_sim_stats(n)->sends_partial > 0);
	uint8_t rb[8192];
	uint64_t got = 0;
	for (int s = 0; s < 40; s++) {  /* drain a little: more SENT follow */
		int r = nic_sim_client_read(net, cl, rb, 1000);
		if (r > 0) {
			CU_ASSERT(memcmp(rb, big + got % BUF, 1) == 0);
			got += (uint64_t)r;
		}
		int k = step(n, &ct, ev, NIC_TXQ_MAX + 2);
		for (int i = 0; i < k; i++)
			ok += ev[i].kind == NIC_EV_SENT && ev[i].status == 0;
	}
	CU_ASSERT(ok > 1 && ok < NIC_TXQ_MAX);
	nic_close(n, open.conn);
	nic_close(n, open.conn); /* twice: harmless */
	rc = nic_send(n, open.conn, big, 1, NULL);
	CU_ASSERT_EQUAL(rc, -ENOTCONN);
	uint32_t cancelled = 0, after_closed = 0;
	bool closed = false;
	for (int s = 0; s < 5; s++) {
		int k = step(n, &ct, ev, NIC_TXQ_MAX + 2);
		for (int i = 0; i < k; i++) {
			after_closed += closed;
			cancelled += ev[i].kind == NIC_EV_SENT && ev[i].status == -ECANCELED;
			closed |= ev[i].kind == NIC_EV_CLOSED;
		}
	}
	CU_ASSERT(closed);
	CU_ASSERT_EQUAL(after_closed, 0);
	CU_ASSERT_EQUAL(ok + cancelled, NIC_TXQ_MAX); /* every buffer reported once */
	/* the client gets the bytes already handed over, in order, then EOF */
	for (;;) {
		int r = nic_sim_client_read(net, cl, rb, sizeof(rb));
		if (r <= 0) {
			CU_ASSERT_EQUAL(r, 0);
			break;
		}
		for (int i = 0; i < r; i++)
			if (rb[i] != big[(got + (uint64_t)i) % BUF]) {
				CU_FAIL("stalled reader: byte mismatch");
				break;
			}
		got += (uint64_t)r;
	}
	CU_ASSERT(got >= (uint64_t)ok * BUF && got < (uint64_t)(ok + 1) * BUF);
	CU_ASSERT_EQUAL(nic_sim_client_write(net, cl, "x", 1), -EPIPE);
	nic_sim_client_close(net, cl);
	ct_quiescent(&ct);
	if (ct.fails)
		fprintf(stderr, "contract: %s\n", ct.why);
	CU_ASSERT_EQUAL(ct.fails, 0);
	ct_free(&ct);
	nic_destroy(n);
	CU_ASSERT_EQUAL(nic_sim_net_next_us(net), UINT64_MAX);
	nic_sim_net_destroy(net);
}

/* Pool of 2 buffers held by the application: nothing arrives until one is back. */
static void test_rx_exhaustion(void)
{
	struct nic_sim_net *net = net_new(4, 2, 8192);
	struct nic *n = nic_new(net, 0, 1, 2, 100);
	struct ct ct;
	ct_init(&ct, 1, 2, 100);
	uint32_t cl;
	CU_ASSERT_FATAL(nic_sim_connect(net, nic_local_port(n), &cl) == 0);
	uint8_t b[1000];
	for (int i = 0; i < 1000; i++)
		b[i] = (uint8_t)(i ^ 0x5a);
	CU_ASSERT_EQUAL(nic_sim_client_write(net, cl, b, 1000), 1000);
	struct nic_ev held[2], ev[4];
	uint32_t nh = 0, got = 0;
	for (int s = 0; s < 200 && got < 1000; s++) {
		int k = step(n, &ct, ev, 4);
		for (int i = 0; i < k; i++) {
			if (ev[i].kind != NIC_EV_DATA)
				continue;
			CU_ASSERT_FATAL(nh < 2);
			CU_ASSERT(memcmp(ev[i].data, b + got, ev[i].len) == 0);
			got += ev[i].len;
			held[nh++] = ev[i];
		}
		if (nh == 2) {
			CU_ASSERT_EQUAL(step(n, &ct, ev, 4), 0); /* empty pool: nothing */
			for (uint32_t i = 0; i < nh; i++) {
				ct_release(&ct, &held[i]);
				nic_rx_release(n, &held[i]);
			}
			nh = 0;
		}
	}
	CU_ASSERT_EQUAL(got, 1000);
	CU_ASSERT(nic_sim_stats(n)->rx_starved > 0);
	for (uint32_t i = 0; i < nh; i++) {
		ct_release(&ct, &held[i]);
		nic_rx_release(n, &held[i]);
	}
	nic_sim_client_reset(net, cl);
	struct nic_ev c;
	CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_CLOSED, &c));
	CU_ASSERT_EQUAL(c.status, -ECONNRESET);
	ct_quiescent(&ct);
	CU_ASSERT_EQUAL(ct.fails, 0);
	ct_free(&ct);
	nic_destroy(n);
	nic_sim_net_destroy(net);
}

/* Slots full: the next client is reset; shutdown closes every connection
 * with -ECANCELED; destroy (a crash) resets the clients; bad configs. */
static void test_reject_shutdown_crash_config(void)
{
	struct nic_sim_net *net = net_new(5, 8, 512);
	struct nic *n = nic_new(net, 7000, 2, 4, 64);
	struct ct ct;
	ct_init(&ct, 2, 4, 64);
	uint32_t cl[4];
	for (int i = 0; i < 3; i++)
		CU_ASSERT_FATAL(nic_sim_connect(net, 7000, &cl[i]) == 0);
	struct nic_ev ev[8];
	for (int s = 0; s < 3; s++)
		step(n, &ct, ev, 8);
	CU_ASSERT_EQUAL(nic_sim_stats(n)->accepts, 2);
	CU_ASSERT_EQUAL(nic_sim_stats(n)->accepts_rejected, 1);
	char b[8];
	CU_ASSERT_EQUAL(nic_sim_client_read(net, cl[2], b, 8), -ECONNRESET);
	nic_sim_client_close(net, cl[2]);
	uint32_t h = 0;
	for (uint32_t i = 0; i < 2; i++)
		if (ct.conn[i].open)
			h = ct.conn[i].handle;
	int rc = nic_send(n, h, "zz", 2, (void *)9);
	ct_send(&ct, h, (void *)9, rc);
	CU_ASSERT_EQUAL(rc, 0);
	nic_sim_shutdown(n);
	uint32_t closed = 0, cancelled = 0;
	for (int s = 0; s < 3; s++) {
		int k = step(n, &ct, ev, 8);
		for (int i = 0; i < k; i++) {
			closed += ev[i].kind == NIC_EV_CLOSED && ev[i].status == -ECANCELED;
			cancelled += ev[i].kind == NIC_EV_SENT && ev[i].status == -ECANCELED;
		}
	}
	CU_ASSERT_EQUAL(closed, 2);
	CU_ASSERT_EQUAL(cancelled, 1);
	CU_ASSERT_EQUAL(nic_sim_client_read(net, cl[0], b, 8), 0); /* FIN */
	CU_ASSERT_FATAL(nic_sim_connect(net, 7000, &cl[3]) == 0);  /* still bound, not accepting */
	step(n, &ct, ev, 8);
	CU_ASSERT_EQUAL(nic_sim_client_read(net, cl[3], b, 8), -ECONNRESET);
	nic_destroy(n);
	/* a new broker on the same port; a connection, then a crash */
	n = nic_new(net, 7000, 2, 4, 64);
	ct_free(&ct);
	ct_init(&ct, 2, 4, 64);
	uint32_t c5;
	CU_ASSERT_FATAL(nic_sim_connect(net, 7000, &c5) == 0);
	struct nic_ev open;
	CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_OPEN, &open));
	nic_destroy(n);
	CU_ASSERT_EQUAL(nic_sim_client_read(net, c5, b, 8), -ECONNRESET);
	CU_ASSERT_EQUAL(nic_sim_client_write(net, c5, "a", 1), -ECONNRESET);
	CU_ASSERT_EQUAL(nic_sim_connect(net, 7000, &cl[0]), -ECONNREFUSED);
	for (int i = 0; i < 4; i++)
		nic_sim_client_close(net, cl[i]);
	nic_sim_client_close(net, c5);
	/* ports and limits */
	struct nic_config cfg = { .port = 7001, .conns_max = 1, .rx_bufs = 1, .rx_buf_bytes = 1 };
	struct nic *a = NULL, *bb = NULL;
	CU_ASSERT_FATAL(nic_sim_create(&cfg, net, &a) == 0);
	CU_ASSERT_EQUAL(nic_sim_create(&cfg, net, &bb), -EADDRINUSE);
	cfg.rx_bufs = 0;
	CU_ASSERT_EQUAL(nic_sim_create(&cfg, net, &bb), -EINVAL);
	cfg.rx_bufs = 1;
	cfg.conns_max = NIC_CONNS_LIMIT + 1;
	CU_ASSERT_EQUAL(nic_sim_create(&cfg, net, &bb), -EINVAL);
	nic_destroy(a);
	struct nic_sim_net_config nc = { .seed = 1, .pipes_max = 0, .pipe_bytes = 1 };
	struct nic_sim_net *bad = NULL;
	CU_ASSERT_EQUAL(nic_sim_net_create(&nc, &bad), -EINVAL);
	CU_ASSERT_EQUAL(ct.fails, 0);
	ct_free(&ct);
	CU_ASSERT_EQUAL(nic_sim_net_next_us(net), UINT64_MAX);
	nic_sim_net_destroy(net);
}

/* A server close with client bytes unread is a RST, as a kernel's: the
 * client reads what arrived before it, then -ECONNRESET (not EOF); with
 * nothing unread it is a FIN: the bytes, then 0. */
static void test_close_unread_is_reset(void)
{
	struct nic_sim_net *net = net_new(7, 4, 4096);
	struct nic *n = nic_new(net, 0, 2, 4, 64);
	struct ct ct;
	ct_init(&ct, 2, 4, 64);
	for (int unread = 1; unread >= 0; unread--) {
		uint32_t cl;
		CU_ASSERT_FATAL(nic_sim_connect(net, nic_local_port(n), &cl) == 0);
		struct nic_ev open, ev;
		CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_OPEN, &open));
		nic_pause(n, open.conn, true); /* what the client writes stays unread */
		if (unread)
			CU_ASSERT_EQUAL(nic_sim_client_write(net, cl, "abc", 3), 3);
		int rc = nic_send(n, open.conn, "resp", 4, (void *)5);
		ct_send(&ct, open.conn, (void *)5, rc);
		CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_SENT, &ev));
		CU_ASSERT_EQUAL(ev.status, 0);
		nic_close(n, open.conn);
		CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_CLOSED, &ev));
		CU_ASSERT_EQUAL(ev.status, 0);
		char b[8];
		CU_ASSERT_EQUAL(nic_sim_client_read(net, cl, b, sizeof(b)), 4);
		CU_ASSERT(memcmp(b, "resp", 4) == 0);
		CU_ASSERT_EQUAL(nic_sim_client_read(net, cl, b, sizeof(b)), unread ? -ECONNRESET : 0);
		CU_ASSERT_EQUAL(nic_sim_client_write(net, cl, "x", 1), unread ? -ECONNRESET : -EPIPE);
		nic_sim_client_close(net, cl);
	}
	CU_ASSERT_EQUAL(nic_sim_stats(n)->close_resets, 1);
	/* with delays: sends racing a reset; the client reads at most what was
	 * reported SENT, in order, then -ECONNRESET; the server sees it too */
	struct nic_sim_faults f = { .delay_us_max = 1000 };
	nic_sim_net_set_faults(net, &f);
	uint32_t cl;
	CU_ASSERT_FATAL(nic_sim_connect(net, nic_local_port(n), &cl) == 0);
	struct nic_ev open;
	uint64_t t = nic_sim_net_now(net);
	bool opened = false;
	for (int s = 0; s < 100 && !opened; s++) {
		nic_sim_net_set_now(net, t += 100);
		opened = wait_kind(n, &ct, NIC_EV_OPEN, &open);
	}
	CU_ASSERT_FATAL(opened);
	nic_sim_client_inject_reset(net, cl);
	uint64_t sent_ok = 0;
	int reset_status = 1;
	for (int i = 0; i < 50; i++) {
		int rc = nic_send(n, open.conn, "0123456789", 10, (void *)(uintptr_t)(i + 1));
		ct_send(&ct, open.conn, (void *)(uintptr_t)(i + 1), rc);
		nic_sim_net_set_now(net, t += 40);
		struct nic_ev evs[8];
		int k = step(n, &ct, evs, 8);
		for (int j = 0; j < k; j++) {
			sent_ok += evs[j].kind == NIC_EV_SENT && evs[j].status == 0 ? 10u : 0u;
			if (evs[j].kind == NIC_EV_CLOSED)
				reset_status = evs[j].status;
		}
	}
	CU_ASSERT_EQUAL(reset_status, -ECONNRESET);
	int rc;
	uint64_t got = 0;
	char b[64];
	while ((rc = nic_sim_client_read(net, cl, b, sizeof(b))) > 0) {
		for (int i = 0; i < rc; i++)
			if (b[i] != "0123456789"[(got + (uint64_t)i) % 10]) {
				CU_FAIL("bytes before the reset out of place");
				break;
			}
		got += (uint64_t)rc;
	}
	CU_ASSERT_EQUAL(rc, -ECONNRESET);
	CU_ASSERT(got <= sent_ok);
	nic_sim_client_close(net, cl);
	ct_quiescent(&ct);
	if (ct.fails)
		fprintf(stderr, "contract: %s\n", ct.why);
	CU_ASSERT_EQUAL(ct.fails, 0);
	ct_free(&ct);
	nic_destroy(n);
	nic_sim_net_destroy(net);
}

/* Bytes and a reset both on their way, each direction: over 64 seeds the
 * reset lands both before the bytes (lost, though the server's were
 * reported SENT and the client's write took them) and after (read, then the
 * error); never anything but those two. */
static void test_reset_races_bytes(void)
{
	uint32_t lost = 0, read = 0, srv_lost = 0, srv_read = 0;
	for (uint64_t seed = 1; seed <= 64; seed++) {
		struct nic_sim_net *net = net_new(seed, 1, 256);
		struct nic *n = nic_new(net, 0, 1, 2, 64);
		struct ct ct;
		ct_init(&ct, 1, 2, 64);
		struct nic_sim_faults f = { .delay_us_max = 1000 };
		nic_sim_net_set_faults(net, &f);
		uint32_t cl;
		CU_ASSERT_FATAL(nic_sim_connect(net, nic_local_port(n), &cl) == 0);
		nic_sim_net_set_now(net, 1000);
		struct nic_ev open, ev;
		CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_OPEN, &open));
		int rc = nic_send(n, open.conn, "0123456789", 10, (void *)1);
		ct_send(&ct, open.conn, (void *)1, rc);
		CU_ASSERT_FATAL(wait_kind(n, &ct, NIC_EV_SENT, &ev));
		CU_ASSERT_EQUAL(ev.status, 0);
		CU_ASSERT_EQUAL(nic_sim_client_write(net, cl, "abcdefghij", 10), 10);
		nic_sim_client_inject_reset(net, cl);
		nic_sim_net_set_now(net, 3000);
		/* the server: the 10 bytes then CLOSED, or CLOSED alone */
		struct nic_ev evs[4];
		int k = step(n, &ct, evs, 4);
		CU_ASSERT_FATAL(k >= 1 && evs[k - 1].kind == NIC_EV_CLOSED);
		CU_ASSERT_EQUAL(evs[k - 1].status, -ECONNRESET);
		if (k == 2) {
			srv_read++;
			CU_ASSERT(evs[0].kind == NIC_EV_DATA && evs[0].len == 10 &&
				  memcmp(evs[0].data, "abcdefghij", 10) == 0);
			ct_release(&ct, &evs[0]);
			nic_rx_release(n, &evs[0]);
		} else {
			CU_ASSERT_EQUAL(k, 1);
			srv_lost++;
		}
		char b[16];
		rc = nic_sim_client_read(net, cl, b, sizeof(b));
		if (rc == 10) {
			read++;
			CU_ASSERT(memcmp(b, "0123456789", 10) == 0);
			rc = nic_sim_client_read(net, cl, b, sizeof(b));
		} else {
			lost++;
		}
		CU_ASSERT_EQUAL(rc, -ECONNRESET);
		nic_sim_client_close(net, cl);
		CU_ASSERT_EQUAL(ct.fails, 0);
		ct_free(&ct);
		nic_destroy(n);
		nic_sim_net_destroy(net);
	}
	CU_ASSERT(lost > 0 && read > 0);
	CU_ASSERT(srv_lost > 0 && srv_read > 0);
}

/* reuseport: two listeners on one port share the connects (by the PRNG). */
static void test_reuseport(void)
{
	struct nic_sim_net *net = net_new(6, 64, 64);
	struct nic_config cfg = { .port = 9000, .conns_max = 64, .rx_bufs = 4, .rx_buf_bytes = 64,
				  .reuseport = 1 };
	struct nic *a = NULL, *b = NULL;
	CU_ASSERT_FATAL(nic_sim_create(&cfg, net, &a) == 0);
	CU_ASSERT_FATAL(nic_sim_create(&cfg, net, &b) == 0);
	uint32_t cl[40];
	for (int i = 0; i < 40; i++)
		CU_ASSERT_FATAL(nic_sim_connect(net, 9000, &cl[i]) == 0);
	struct nic_ev ev[64];
	nic_flush(a);
	nic_flush(b);
	int ka = nic_poll(a, ev, 64), kb = nic_poll(b, ev, 64);
	CU_ASSERT_EQUAL(ka + kb, 40);
	CU_ASSERT(ka > 5 && kb > 5);
	for (int i = 0; i < 40; i++)
		nic_sim_client_reset(net, cl[i]);
	nic_destroy(a);
	nic_destroy(b);
	nic_sim_net_destroy(net);
}

/* ---- seeded random faults against a reference model ------------------------- */

/*
 * The workload: clients connect (some are refused), each writes its own
 * stream (4 bytes of its id, then pat(id, i)) in pieces while reading the
 * echo; the core echoes every DATA buffer back as is (released at its
 * SENT), pauses and resumes connections, and closes some. Clients stop
 * reading for a while, reset, or are reset by the network; now and then the
 * broker crashes and restarts (nic_destroy, nic_sim_create). The reference:
 *   - the server sees a prefix of each client's stream, every byte in place
 *     (so in order, exactly once), and all of it when the client closed
 *     cleanly with nothing reset or closed by the server;
 *   - each client reads a prefix of its own stream back (the echo), and all
 *     of it when clean (a "closer" hangs up without reading it: then only
 *     the server's side is checked whole);
 *   - for a clean client, the server's SENT-ok bytes equal what it wrote;
 *   - the contract checker holds for every event; at the end nothing is
 *     open, lent or in flight.
 */
#define RS_CLIENTS      48u
#define RS_LIVE_MAX     12u      /* clients connected at once */
#define RS_CONNS_MAX    8u       /* fewer than live clients: some are refused */
#define RS_RX_BUFS      16u
#define RS_RX_BUF_BYTES 512u
#define RS_BYTES_MAX    20000u   /* a client's stream */
#define RS_STEPS        3000u    /* faulty phase */
#define RS_DRAIN_STEPS  20000u   /* clean phase: everything must finish */
#define RS_CRASH_ONE_IN 4000u    /* faulty steps per broker crash, on average */

static uint8_t pat(uint32_t id, uint64_t i)
{
	if (i < 4)
		return (uint8_t)(id >> (8 * i));
	uint64_t x = (i >> 2) * 0x9E3779B97F4A7C15ull + id * 0xBF58476D1CE4E5B9ull;
	x ^= x >> 29;
	return (uint8_t)(x >> (8 * (i & 3)));
}

/* Client id -> its state, for the reference model. Locality: test program. */
struct rs_client {
	uint32_t h;               /* handle while connected */
	bool started, done;
	bool dirty;               /* reset, refused or closed by the server: only prefixes hold */
	bool closer;              /* closes once written, without reading the echo */
	uint32_t crashes_at_connect; /* broker crashes before the client connected */
	uint32_t target;          /* bytes it will write */
	uint64_t wrote, read;
	uint32_t stall_steps;     /* not reading for this many steps */
	uint64_t srv_rx;          /* bytes the server got of this stream */
	uint64_t srv_sent_ok;     /* bytes of its echo reported SENT 0 */
	bool srv_closed_clean;    /* the server saw CLOSED 0 for it */
};

/* Server-side state by slot. Locality: test program. */
struct rs_conn {
	uint32_t handle;
	bool open;
	uint32_t id;              /* learnt from the first 4 bytes */
	uint32_t id_bytes;        /* 4: id known; 5: id was bad */
	uint64_t rx, sent_ok;     /* bytes received; echoed and reported SENT 0 */
	bool local_closed;
	uint32_t pend[RS_RX_BUFS];   /* buffers waiting for send-queue room, FIFO */
	uint32_t pend_head, pend_n;
};

struct rs {
	uint64_t seed;
	struct nic_sim_net *net;
	struct nic *n;
	struct ct ct;
	struct nic_ev held[RS_RX_BUFS];     /* lent DATA, by buffer id */
	struct rs_conn conn[RS_CONNS_MAX];
	struct rs_client cli[RS_CLIENTS];
	uint32_t started, live;
	uint32_t fails;
	char why[200];
	uint64_t trace;                     /* hash of every event: replay check */
	struct nic_sim_stats stats;         /* the listeners', summed over crashes */
	uint32_t crashes;
	uint64_t clean;                     /* clients checked whole */
};

static void rs_fail(struct rs *r, const char *what, uint32_t id)
{
	if (r->fails++ == 0)
		snprintf(r->why, sizeof(r->why), "%s (client %u)", what, id);
}

static uint64_t rs_rand(struct rs *r)
{
	return nic_sim_net_rand(r->net);
}

static bool rs_chance(struct rs *r, uint32_t per_1000)
{
	return rs_rand(r) % 1000u < per_1000;
}

static void rs_release(struct rs *r, uint32_t bid)
{
	ct_release(&r->ct, &r->held[bid]);
	nic_rx_release(r->n, &r->held[bid]);
}

static void rs_echo_push(struct rs *r, struct rs_conn *c)
{
	while (c->pend_n > 0) {
		uint32_t bid = c->pend[c->pend_head];
		const struct nic_ev *d = &r->held[bid];
		void *cookie = (void *)(uintptr_t)(bid + 1);
		int rc = nic_send(r->n, c->handle, d->data, d->len, cookie);
		ct_send(&r->ct, c->handle, cookie, rc);
		if (rc == -ENOBUFS)
			return;
		if (rc != 0)
			rs_release(r, bid); /* going away: no SENT follows */
		c->pend_head = (c->pend_head + 1u) % RS_RX_BUFS;
		c->pend_n--;
	}
}

/* The connection's counters into its client's record, once the id is known. */
static void rs_mirror(struct rs *r, const struct rs_conn *c)
{
	if (c->id_bytes != 4)
		return;
	struct rs_client *cl = &r->cli[c->id];
	cl->srv_rx = c->rx;
	cl->srv_sent_ok = c->sent_ok;
	if (cl->srv_rx > cl->wrote)
		rs_fail(r, "server read more than the client wrote", c->id);
}

static void rs_event(struct rs *r, const struct nic_ev *e)
{
	ct_event(&r->ct, e);
	r->trace = (r->trace ^ (e->kind | (uint64_t)e->conn << 8 | (uint64_t)e->len << 40 |
				(uint64_t)(uint32_t)e->status << 20)) * 0x100000001B3ull;
	uint32_t idx = e->conn & (NIC_CONNS_LIMIT - 1u);
	if (idx >= RS_CONNS_MAX) {
		rs_fail(r, "event for a slot past conns_max", idx);
		return;
	}
	struct rs_conn *c = &r->conn[idx];
	switch (e->kind) {
	case NIC_EV_OPEN:
		memset(c, 0, sizeof(*c));
		c->handle = e->conn;
		c->open = true;
		break;
	case NIC_EV_DATA: {
		for (uint32_t k = 0; k < e->len; k++)
			r->trace = (r->trace ^ e->data[k]) * 0x100000001B3ull;
		/* the stream's first 4 bytes name the client: pat(id, 0..3) */
		uint32_t k = 0;
		for (; c->id_bytes < 4 && k < e->len; k++, c->id_bytes++)
			c->id |= (uint32_t)e->data[k] << (8 * c->id_bytes);
		if (c->id_bytes == 4 && c->id >= RS_CLIENTS) {
			rs_fail(r, "server read a bad client id", c->id);
			c->id_bytes = 5; /* checked no further */
		}
		if (c->id_bytes == 4)
			for (uint32_t j = k; j < e->len; j++)
				if (e->data[j] != pat(c->id, c->rx + j)) {
					rs_fail(r, "server: byte out of place (lost, duplicated or reordered)",
						c->id);
					break;
				}
		c->rx += e->len;
		rs_mirror(r, c);
		r->held[e->buf_id] = *e;
		c->pend[(c->pend_head + c->pend_n) % RS_RX_BUFS] = e->buf_id;
		c->pend_n++;
		rs_echo_push(r, c);
		break;
	}
	case NIC_EV_SENT: {
		uint32_t bid = (uint32_t)(uintptr_t)e->cookie - 1u;
		if (bid >= RS_RX_BUFS) {
			rs_fail(r, "SENT with a cookie never sent", 0);
			break;
		}
		if (e->status == 0)
			c->sent_ok += r->held[bid].len;
		rs_mirror(r, c);
		rs_release(r, bid);
		if (c->open)
			rs_echo_push(r, c);
		break;
	}
	case NIC_EV_CLOSED:
		c->open = false;
		while (c->pend_n > 0) {
			rs_release(r, c->pend[c->pend_head]);
			c->pend_head = (c->pend_head + 1u) % RS_RX_BUFS;
			c->pend_n--;
		}
		if (c->id_bytes == 4) {
			struct rs_client *cl = &r->cli[c->id];
			if (e->status != 0 || c->local_closed)
				cl->dirty = true;
			else
				cl->srv_closed_clean = true;
		}
		break;
	}
}

static void rs_client_finish(struct rs *r, struct rs_client *cl)
{
	nic_sim_client_close(r->net, cl->h);
	cl->done = true;
	r->live--;
}

static void rs_client_step(struct rs *r, uint32_t id, bool faulty)
{
	struct rs_client *cl = &r->cli[id];
	uint8_t buf[4096];
	if (faulty && rs_chance(r, 2)) {
		cl->dirty = true;
		if (rs_chance(r, 500)) {
			nic_sim_client_reset(r->net, cl->h);
			cl->done = true;
			r->live--;
			return;
		}
		nic_sim_client_inject_reset(r->net, cl->h);
	}
	if (faulty && cl->stall_steps == 0 && rs_chance(r, 10))
		cl->stall_steps = 1 + (uint32_t)(rs_rand(r) % 200u);
	if (cl->wrote < cl->target && rs_chance(r, 500)) {
		uint32_t len = 1 + (uint32_t)(rs_rand(r) % 3000u);
		if (len > cl->target - cl->wrote)
			len = (uint32_t)(cl->target - cl->wrote);
		for (uint32_t k = 0; k < len; k++)
			buf[k] = pat(id, cl->wrote + k);
		int w = nic_sim_client_write(r->net, cl->h, buf, len);
		if (w > 0) {
			cl->wrote += (uint64_t)w;
		} else if (w == -EPIPE || w == -ECONNRESET) {
			cl->dirty = true;
			rs_client_finish(r, cl);
			return;
		} else if (w != -EAGAIN) {
			rs_fail(r, "client write: unexpected error", id);
		}
	}
	if (cl->stall_steps > 0) {
		cl->stall_steps--;
		return;
	}
	int rd = nic_sim_client_read(r->net, cl->h, buf, 1 + (uint32_t)(rs_rand(r) % sizeof(buf)));
	if (rd > 0) {
		for (int k = 0; k < rd; k++)
			if (buf[k] != pat(id, cl->read + (uint64_t)k)) {
				rs_fail(r, "client: echo byte out of place", id);
				break;
			}
		cl->read += (uint64_t)rd;
		if (cl->read > cl->wrote)
			rs_fail(r, "client read more than it wrote", id);
	} else if (rd == 0 || rd == -ECONNRESET) {
		cl->dirty = true; /* server closed (or reset) before the echo was complete */
		rs_client_finish(r, cl);
		return;
	} else if (rd != -EAGAIN) {
		rs_fail(r, "client read: unexpected error", id);
	}
	/* a closer hangs up once it wrote everything, its echo unread: the
	 * server must still get every byte before the FIN */
	if (cl->wrote == cl->target && (cl->closer || cl->read == cl->wrote))
		rs_client_finish(r, cl);
}

static void rs_core_step(struct rs *r, bool faulty)
{
	struct nic_ev ev[16];
	nic_flush(r->n);
	int k;
	while ((k = nic_poll(r->n, ev, 16)) > 0)
		for (int i = 0; i < k; i++)
			rs_event(r, &ev[i]);
	for (uint32_t i = 0; i < RS_CONNS_MAX; i++) {
		struct rs_conn *c = &r->conn[i];
		if (!c->open)
			continue;
		/* pauses are always resumed in the clean phase */
		nic_pause(r->n, c->handle, faulty && rs_chance(r, 300));
		if (faulty && !c->local_closed && rs_chance(r, 1)) {
			c->local_closed = true;
			nic_close(r->n, c->handle);
		}
	}
}

static void rs_stats_add(struct nic_sim_stats *t, const struct nic_sim_stats *st)
{
	t->accepts += st->accepts;
	t->accepts_rejected += st->accepts_rejected;
	t->rx_bytes += st->rx_bytes;
	t->tx_bytes += st->tx_bytes;
	t->short_reads += st->short_reads;
	t->sends_partial += st->sends_partial;
	t->tx_stalls += st->tx_stalls;
	t->rx_starved += st->rx_starved;
	t->resets += st->resets;
	t->close_resets += st->close_resets;
}

/* The simulated broker crashes and restarts on the same port: its nic and
 * all it lent are gone (nothing is released into the old one); clients find
 * their connections reset; new connects reach the new nic. */
static void rs_crash(struct rs *r)
{
	rs_stats_add(&r->stats, nic_sim_stats(r->n));
	nic_destroy(r->n);
	r->n = NULL;
	memset(r->conn, 0, sizeof(r->conn));
	ct_free(&r->ct);
	ct_init(&r->ct, RS_CONNS_MAX, RS_RX_BUFS, RS_RX_BUF_BYTES);
	struct nic_config cfg = { .port = 9092, .conns_max = RS_CONNS_MAX, .rx_bufs = RS_RX_BUFS,
				  .rx_buf_bytes = RS_RX_BUF_BYTES };
	if (nic_sim_create(&cfg, r->net, &r->n) != 0)
		abort(); /* the port was freed by nic_destroy */
	r->crashes++;
}

static void rs_faults(struct rs *r)
{
	/* each seed its own mix: some quiet, some harsh */
	struct nic_sim_faults f = { 0 };
	uint64_t x = rs_rand(r);
	f.delay_us_max = (uint32_t)(x % 4u == 0 ? 0 : rs_rand(r) % 2000u);
	f.short_read_ppm = (uint32_t)(rs_rand(r) % 2u ? rs_rand(r) % NIC_SIM_PPM : 0);
	f.short_write_ppm = (uint32_t)(rs_rand(r) % 2u ? rs_rand(r) % NIC_SIM_PPM : 0);
	f.reset_ppm = (uint32_t)(rs_rand(r) % 3u == 0 ? rs_rand(r) % 3000u : 0);
	f.reject_ppm = (uint32_t)(rs_rand(r) % 3u == 0 ? rs_rand(r) % 100000u : 0);
	nic_sim_net_set_faults(r->net, &f);
}

/* One seeded run; returns the event trace hash (0 on setup failure). */
static uint64_t rs_run(uint64_t seed, struct rs *r)
{
	memset(r, 0, sizeof(*r));
	r->seed = seed;
	struct nic_sim_net_config nc = { .seed = seed, .pipes_max = RS_CLIENTS,
					 .pipe_bytes = 1024u + (uint32_t)(seed % 7u) * 1024u };
	if (nic_sim_net_create(&nc, &r->net) != 0)
		return 0;
	struct nic_config cfg = { .port = 9092, .conns_max = RS_CONNS_MAX, .rx_bufs = RS_RX_BUFS,
				  .rx_buf_bytes = RS_RX_BUF_BYTES };
	if (nic_sim_create(&cfg, r->net, &r->n) != 0)
		return 0;
	ct_init(&r->ct, RS_CONNS_MAX, RS_RX_BUFS, RS_RX_BUF_BYTES);
	rs_faults(r);
	uint64_t now = 0;
	for (uint32_t s = 0; s < RS_STEPS + RS_DRAIN_STEPS && r->fails == 0 && r->ct.fails == 0; s++) {
		bool faulty = s < RS_STEPS;
		if (s == RS_STEPS) {
			struct nic_sim_faults quiet = { 0 };
			nic_sim_net_set_faults(r->net, &quiet);
		}
		if (!faulty && r->started == RS_CLIENTS && r->live == 0 && r->ct.lent_n == 0 &&
		    nic_sim_conns_used(r->n) == 0)
			break;
		/* time: a small random step, or a jump to the next arrival */
		uint64_t next = nic_sim_net_next_us(r->net);
		now += rs_rand(r) % 300u;
		if (next != UINT64_MAX && rs_chance(r, 200) && next > now)
			now = next;
		nic_sim_net_set_now(r->net, now);
		if (r->started < RS_CLIENTS && r->live < RS_LIVE_MAX && rs_chance(r, 100)) {
			struct rs_client *cl = &r->cli[r->started];
			int rc = nic_sim_connect(r->net, 9092, &cl->h);
			if (rc == 0) {
				cl->started = true;
				cl->target = 4u + (uint32_t)(rs_rand(r) % RS_BYTES_MAX);
				cl->closer = rs_chance(r, 250);
				cl->crashes_at_connect = r->crashes;
				r->started++;
				r->live++;
			} else if (rc != -EMFILE) {
				rs_fail(r, "connect failed", r->started);
			}
		}
		for (uint32_t id = 0; id < r->started; id++)
			if (!r->cli[id].done)
				rs_client_step(r, id, faulty);
		rs_core_step(r, faulty);
		if (faulty && rs_rand(r) % RS_CRASH_ONE_IN == 0)
			rs_crash(r);
	}
	if (r->fails == 0 && r->ct.fails == 0) {
		if (r->started != RS_CLIENTS || r->live != 0)
			rs_fail(r, "clean phase did not finish every client (liveness)", r->live);
		if (nic_sim_conns_used(r->n) != 0 || nic_sim_rx_held(r->n) != 0)
			rs_fail(r, "connections or buffers left at the end", 0);
		ct_quiescent(&r->ct);
		for (uint32_t id = 0; id < RS_CLIENTS && r->fails == 0; id++) {
			const struct rs_client *cl = &r->cli[id];
			if (cl->dirty)
				continue;
			/* a closer left before it could learn of a reset or a refusal
			 * that came later; but a FIN the server saw follows every byte */
			if (cl->closer && !cl->srv_closed_clean)
				continue;
			/* nor can a client always know of a crash while it was
			 * connected: it may read what arrived before, then hang up */
			if (!cl->srv_closed_clean && r->crashes > cl->crashes_at_connect)
				continue;
			if (!cl->srv_closed_clean)
				rs_fail(r, "clean client: the server did not see its orderly close", id);
			else if (cl->srv_rx != cl->wrote)
				rs_fail(r, "clean client: the server did not get every byte exactly once", id);
			else if (!cl->closer && (cl->read != cl->wrote || cl->srv_sent_ok != cl->wrote))
				rs_fail(r, "clean client: the echo (SENT 0 bytes) is not all it wrote", id);
		}
	}
	rs_stats_add(&r->stats, nic_sim_stats(r->n));
	for (uint32_t id = 0; id < RS_CLIENTS; id++)
		r->clean += !r->cli[id].dirty;
	nic_destroy(r->n);
	CU_ASSERT_EQUAL(nic_sim_net_next_us(r->net) == UINT64_MAX || r->fails > 0, true);
	nic_sim_net_destroy(r->net);
	ct_free(&r->ct);
	return r->trace ? r->trace : 1;
}

static void test_seeded_faults(void)
{
	static struct rs r;
	uint64_t faulted = 0, clean = 0, crashes = 0;
	struct nic_sim_stats tot = { 0 };
	for (uint64_t seed = g_seed_first; seed < g_seed_first + g_seeds; seed++) {
		uint64_t h = rs_run(seed, &r);
		CU_ASSERT(h != 0);
		if (r.fails || r.ct.fails) {
			fprintf(stderr, "nic_sim seed %" PRIu64 " failed: %s%s\n"
				"  replay: nic_sim_ut --seed %" PRIu64 "\n", seed,
				r.fails ? r.why : "contract: ", r.fails ? "" : r.ct.why, seed);
			CU_FAIL("seeded run failed (seed printed above)");
			return;
		}
		faulted++;
		rs_stats_add(&tot, &r.stats);
		clean += r.clean;
		crashes += r.crashes;
	}
	CU_ASSERT_EQUAL(faulted, g_seeds);
	fprintf(stderr, "nic_sim: %" PRIu64 " seeds from %" PRIu64 ": %" PRIu64 " accepts, %" PRIu64
		" rejected, %" PRIu64 " resets, %" PRIu64 " short reads, %" PRIu64 " partial sends, %"
		PRIu64 " stalled sends, %" PRIu64 " starved receives, %" PRIu64 " bytes, %" PRIu64
		" clean clients, %" PRIu64 " broker crashes\n", g_seeds, g_seed_first, tot.accepts,
		tot.accepts_rejected, tot.resets, tot.short_reads, tot.sends_partial, tot.tx_stalls,
		tot.rx_starved, tot.rx_bytes, clean, crashes);
	/* the faults the run is for did happen (a workload that never met them would pass anything) */
	if (g_seeds >= 100) {
		CU_ASSERT(tot.accepts_rejected > 0 && tot.resets > 0 && tot.short_reads > 0);
		CU_ASSERT(tot.sends_partial > 0 && tot.tx_stalls > 0 && tot.rx_starved > 0);
		CU_ASSERT(clean > tot.accepts / 4);
		CU_ASSERT(crashes > 0);
	}
}

/* Same seed, same events byte for byte; another seed, other events. */
static void test_replay_deterministic(void)
{
	static struct rs r;
	uint64_t a = rs_run(g_seed_first, &r), b = rs_run(g_seed_first, &r);
	uint64_t c = rs_run(g_seed_first + 1, &r);
	CU_ASSERT(a != 0 && a == b);
	CU_ASSERT(a != c);
}

/* ---- main --------------------------------------------------------------------- */

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
	CU_pSuite s = CU_add_suite("nic_sim", NULL, NULL);
	CU_add_test(s, "basic_echo_and_close", test_basic_echo_and_close);
	CU_add_test(s, "pause_backpressure", test_pause_backpressure);
	CU_add_test(s, "stalled_reader_and_local_close", test_stalled_reader_and_local_close);
	CU_add_test(s, "rx_exhaustion", test_rx_exhaustion);
	CU_add_test(s, "reject_shutdown_crash_config", test_reject_shutdown_crash_config);
	CU_add_test(s, "close_unread_is_reset", test_close_unread_is_reset);
	CU_add_test(s, "reset_races_bytes", test_reset_races_bytes);
	CU_add_test(s, "reuseport", test_reuseport);
	CU_add_test(s, "replay_deterministic", test_replay_deterministic);
	CU_add_test(s, "seeded_faults", test_seeded_faults);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
