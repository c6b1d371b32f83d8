/*
 * dpdk_ut.c - the DPDK backend (nic/nic_dpdk.c) against a client TCP stack
 * (nic/tcp/) over two DPDK ring ports wired back to back (rte_eth_from_rings:
 * what one sends the other receives). Needs only the EAL with --no-huge (no
 * namespaces, no root, no NIC); skipped (77) where the EAL cannot start.
 *
 * Checks nic.h's event contract (nic_contract.h) on: a handshake (ARP answered
 * by the stack first), bytes both ways exactly, nic_pause holding bytes back
 * until resumed, the client's close (DATA then CLOSED, the flow gone), our
 * close (the client sees EOF; nic_dpdk_draining until our FIN is acked), and
 * that every mbuf is back in its pool at the end.
 *
 * Locality: test program, one thread.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_eth_ring.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "nic.h"
#include "nic_contract.h"
#include "nic_dpdk.h"
#include "tcp.h"

#define UT_SRV_IP   0xc6120001u   /* 198.18.0.1 */
#define UT_CLI_IP   0xc6120002u
#define UT_PORT     9092u
#define UT_CONNS    8u
#define UT_RXBUF    4096u
#define UT_RXBUFS   16u
#define UT_STEPS    200000        /* pump turns before a wait is a failure */

static uint16_t g_port_cli;
static struct rte_mempool *g_cli_pool;
static struct nic *g_n;
static struct tcp_stack *g_cli;
static struct ct g_ct;
static uint64_t g_now = 1000000;

/* What the server side got. */
static uint32_t g_srv_conn;
static bool g_closed;
static uint8_t *g_srv_rx;
static uint32_t g_srv_rx_n;
static bool g_hold;          /* keep DATA buffers instead of releasing them */
static struct nic_ev g_held[UT_RXBUFS];
static uint32_t g_held_n;

static void srv_release_held(void)
{
	for (uint32_t i = 0; i < g_held_n; i++) {
		ct_release(&g_ct, &g_held[i]);
		nic_rx_release(g_n, &g_held[i]);
	}
	g_held_n = 0;
}

/* The client takes what reached its port. */
static void pump_client_rx(void)
{
	struct rte_mbuf *m[32];
	uint16_t nb = rte_eth_rx_burst(g_port_cli, 0, m, 32);
	for (uint16_t i = 0; i < nb; i++) {
		tcp_input(g_cli, rte_pktmbuf_mtod(m[i], const uint8_t *), rte_pktmbuf_pkt_len(m[i]), g_now);
		rte_pktmbuf_free(m[i]);
	}
}

/* One turn of both sides. */
static void pump(void)
{
	g_now += 50;
	pump_client_rx();
	tcp_timers(g_cli, g_now);
	for (;;) {
		struct rte_mbuf *o = rte_pktmbuf_alloc(g_cli_pool);
		CU_ASSERT_FATAL(o != NULL);
		uint32_t len = tcp_output(g_cli, g_now, rte_pktmbuf_mtod(o, uint8_t *), rte_pktmbuf_tailroom(o));
		if (!len) {
			rte_pktmbuf_free(o);
			break;
		}
		o->data_len = (uint16_t)len;
		o->pkt_len = len;
		if (rte_eth_tx_burst(g_port_cli, 0, &o, 1) != 1)
			rte_pktmbuf_free(o);
	}
	nic_flush(g_n);
	struct nic_ev ev[64];
	int k = nic_poll(g_n, ev, 64);
	for (int i = 0; i < k; i++) {
		ct_event(&g_ct, &ev[i]);
		switch (ev[i].kind) {
		case NIC_EV_OPEN:
			g_srv_conn = ev[i].conn;
			g_closed = false;
			break;
		case NIC_EV_DATA:
			memcpy(g_srv_rx + g_srv_rx_n, ev[i].data, ev[i].len);
			g_srv_rx_n += ev[i].len;
			if (g_hold) {
				g_held[g_held_n++] = ev[i];
			} else {
				ct_release(&g_ct, &ev[i]);
				nic_rx_release(g_n, &ev[i]);
			}
			break;
		case NIC_EV_CLOSED:
			CU_ASSERT(ev[i].conn == g_srv_conn);
			g_closed = true;
			break;
		default:
			break;
		}
	}
}

static struct tcp_ev g_cev[64];
static int g_cev_n;
static bool cli_got(uint32_t kind)
{
	g_cev_n = tcp_events(g_cli, g_cev, 64);
	for (int i = 0; i < g_cev_n; i++)
		if (g_cev[i].kind == kind)
			return true;
	return false;
}

static uint8_t pat(uint64_t i)
{
	return (uint8_t)(i * 131u + (i >> 9));
}

static void test_streams(void)
{
	uint8_t mac_srv[6];
	struct rte_ether_addr a;
	/* the server's port is 0 (made first); the client resolves it by ARP like a kernel would */
	rte_eth_macaddr_get(0, &a);
	memcpy(mac_srv, a.addr_bytes, 6);
	tcp_arp_resolve(g_cli, UT_SRV_IP);
	uint8_t got_mac[6];
	int steps = 0;
	while (tcp_arp_lookup(g_cli, UT_SRV_IP, got_mac) != 0 && steps++ < UT_STEPS)
		pump();
	CU_ASSERT_FATAL(tcp_arp_lookup(g_cli, UT_SRV_IP, got_mac) == 0);
	CU_ASSERT(memcmp(got_mac, mac_srv, 6) == 0);

	uint32_t h;
	CU_ASSERT_FATAL(tcp_connect(g_cli, UT_SRV_IP, UT_PORT, 40000, got_mac, g_now, &h) == 0);
	for (steps = 0; !g_srv_conn && steps < UT_STEPS; steps++)
		pump();
	CU_ASSERT_FATAL(g_srv_conn != 0);
	char peer[NIC_PEER_BYTES_MAX];
	CU_ASSERT(nic_conn_peer(g_n, g_srv_conn, peer, sizeof(peer)) > 0 && !strcmp(peer, "/198.18.0.2"));

	/* client -> server: 300 KiB, more than the receive ring, so the window works */
	const uint32_t up = 300u << 10;
	static uint8_t buf[300u << 10];
	for (uint32_t i = 0; i < up; i++)
		buf[i] = pat(i);
	uint32_t sent = 0;
	for (steps = 0; g_srv_rx_n < up && steps < UT_STEPS; steps++) {
		if (sent < up) {
			int w = tcp_send(g_cli, h, buf + sent, up - sent);
			CU_ASSERT_FATAL(w >= 0);
			sent += (uint32_t)w;
		}
		pump();
		g_cev_n = tcp_events(g_cli, g_cev, 64);
	}
	CU_ASSERT_FATAL(g_srv_rx_n == up);
	CU_ASSERT(memcmp(g_srv_rx, buf, up) == 0);

	/* server -> client: 200 KiB in 50 sends */
	static uint8_t out[200u << 10];
	for (uint32_t i = 0; i < sizeof(out); i++)
		out[i] = pat(i + 7);
	uint32_t per = sizeof(out) / 50, queued = 0, got = 0;
	static uint8_t cin[200u << 10];
	for (steps = 0; got < sizeof(out) && steps < UT_STEPS; steps++) {
		while (queued < sizeof(out)) {
			int rc = nic_send(g_n, g_srv_conn, out + queued, per, out + queued);
			ct_send(&g_ct, g_srv_conn, out + queued, rc);
			if (rc)
				break;
			queued += per;
		}
		pump();
		const uint8_t *d;
		uint32_t n;
		while ((n = tcp_recv_peek(g_cli, h, &d)) > 0) {
			memcpy(cin + got, d, n);
			got += n;
			tcp_recv_consume(g_cli, h, n);
		}
		g_cev_n = tcp_events(g_cli, g_cev, 64);
	}
	CU_ASSERT_FATAL(got == sizeof(out));
	CU_ASSERT(memcmp(cin, out, sizeof(out)) == 0);
	/* the copy counters: each stream byte twice each way (no loss on the ring ports; the
	 * server's stack runs on the real clock, so a stall past its RTO on a busy machine may
	 * retransmit, which copies again: exact only without retransmissions) */
	const struct nic_dpdk_stats *st = nic_dpdk_stats(g_n);
	CU_ASSERT(st->rx_app_copied == up && st->tcp_rx_copied == up);
	CU_ASSERT(st->tx_app_copied == sizeof(out) && st->tcp_tx_copied >= sizeof(out));
	if (st->tcp_rexmits == 0)
		CU_ASSERT(st->tcp_tx_copied == sizeof(out));

	/* paused: bytes the client sends stay in the stack (no DATA), and come after resume */
	nic_pause(g_n, g_srv_conn, true);
	for (steps = 0; steps < 200; steps++)
		pump();   /* DATA already under way is allowed to land */
	uint32_t before = g_srv_rx_n;
	CU_ASSERT(tcp_send(g_cli, h, "paused!", 7) == 7);
	for (steps = 0; steps < 2000; steps++)
		pump();
	CU_ASSERT(g_srv_rx_n == before);
	nic_pause(g_n, g_srv_conn, false);
	for (steps = 0; g_srv_rx_n < before + 7 && steps < UT_STEPS; steps++)
		pump();
	CU_ASSERT(g_srv_rx_n == before + 7 && memcmp(g_srv_rx + before, "paused!", 7) == 0);

	/* rx buffers all held: the bytes wait in the stack until one comes back */
	g_hold = true;
	static uint8_t big[UT_RXBUF * (UT_RXBUFS + 4)];
	memset(big, 0x5a, sizeof(big));
	before = g_srv_rx_n;
	uint32_t bsent = 0;
	for (steps = 0; steps < 20000; steps++) {
		if (bsent < sizeof(big)) {
			int w = tcp_send(g_cli, h, big + bsent, (uint32_t)sizeof(big) - bsent);
			bsent += w > 0 ? (uint32_t)w : 0;
		}
		pump();
		g_cev_n = tcp_events(g_cli, g_cev, 64);
	}
	CU_ASSERT(g_held_n == UT_RXBUFS && g_srv_rx_n - before <= UT_RXBUF * UT_RXBUFS);
	g_hold = false;
	srv_release_held();
	for (steps = 0; g_srv_rx_n < before + sizeof(big) && steps < UT_STEPS; steps++) {
		if (bsent < sizeof(big)) {
			int w = tcp_send(g_cli, h, big + bsent, (uint32_t)sizeof(big) - bsent);
			bsent += w > 0 ? (uint32_t)w : 0;
		}
		pump();
		g_cev_n = tcp_events(g_cli, g_cev, 64);
	}
	CU_ASSERT(g_srv_rx_n == before + sizeof(big));

	/* the client closes: the server's slot closes (CLOSED after its DATA), the flow goes */
	CU_ASSERT(tcp_send(g_cli, h, "last", 4) == 4);
	tcp_close(g_cli, h);
	before = g_srv_rx_n;
	for (steps = 0; !g_closed && steps < UT_STEPS; steps++)
		pump();
	CU_ASSERT_FATAL(g_closed);
	CU_ASSERT(g_srv_rx_n == before + 4);
	for (steps = 0; nic_dpdk_flows_used(g_n) > 0 && steps < UT_STEPS; steps++)
		pump();
	CU_ASSERT(nic_dpdk_flows_used(g_n) == 0);   /* LAST_ACK -> gone: the client entered TIME_WAIT */
	CU_ASSERT(!nic_dpdk_draining(g_n));
	for (steps = 0; !cli_got(TCP_EV_CLOSED) && steps < UT_STEPS; steps++)
		pump();
	tcp_release(g_cli, h);

	/* we close: the client sees EOF; draining until our FIN is acknowledged */
	g_srv_conn = 0;
	CU_ASSERT_FATAL(tcp_connect(g_cli, UT_SRV_IP, UT_PORT, 40001, got_mac, g_now, &h) == 0);
	for (steps = 0; !g_srv_conn && steps < UT_STEPS; steps++)
		pump();
	CU_ASSERT_FATAL(g_srv_conn != 0);
	uint32_t c2 = g_srv_conn;
	CU_ASSERT(nic_send(g_n, c2, "bye", 3, (void *)"bye") == 0);
	ct_send(&g_ct, c2, (void *)"bye", 0);
	nic_close(g_n, c2);
	CU_ASSERT(nic_send(g_n, c2, "x", 1, NULL) == -ENOTCONN);
	CU_ASSERT(nic_dpdk_draining(g_n));
	bool eof = false;
	for (steps = 0; !eof && steps < UT_STEPS; steps++) {
		pump();
		eof = cli_got(TCP_EV_EOF);
	}
	CU_ASSERT(eof);
	for (steps = 0; nic_dpdk_draining(g_n) && steps < UT_STEPS; steps++)
		pump();
	CU_ASSERT(!nic_dpdk_draining(g_n));
	tcp_close(g_cli, h);
	for (steps = 0; steps < 2000; steps++)
		pump();
	ct_quiescent(&g_ct);
	CU_ASSERT(g_ct.fails == 0);
	if (g_ct.fails)
		fprintf(stderr, "contract: %s\n", g_ct.why);
}

int main(void)
{
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "--file-prefix=nicdpdkut%d", (int)getpid());
	char *eal[] = { (char *)"dpdk_ut", (char *)"-l", (char *)"0", (char *)"--no-huge", (char *)"-m", (char *)"256",
			(char *)"--no-shconf", prefix, (char *)"--no-pci", (char *)"--log-level=*:error", NULL };
	if (rte_eal_init(10, eal) < 0) {
		printf("SKIP: DPDK's EAL cannot start here\n");
		return 77;
	}
	/* two ports back to back: port 0 (ours) receives what port 1 (the client) sends */
	struct rte_ring *ab = rte_ring_create("ut_ab", 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
	struct rte_ring *ba = rte_ring_create("ut_ba", 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (!ab || !ba)
		return 1;
	int p_srv = rte_eth_from_rings("ut_srv", &ba, 1, &ab, 1, 0);
	int p_cli = rte_eth_from_rings("ut_cli", &ab, 1, &ba, 1, 0);
	if (p_srv != 0 || p_cli != 1) {
		fprintf(stderr, "ring ports %d %d\n", p_srv, p_cli);
		return 1;
	}
	g_port_cli = (uint16_t)p_cli;
	g_cli_pool = rte_pktmbuf_pool_create("ut_cli", 4095, 0, 0, NIC_DPDK_MBUF_DATA_BYTES, 0);
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	if (!g_cli_pool || rte_eth_dev_configure(g_port_cli, 1, 1, &conf) < 0 ||
	    rte_eth_rx_queue_setup(g_port_cli, 0, 512, 0, NULL, g_cli_pool) < 0 ||
	    rte_eth_tx_queue_setup(g_port_cli, 0, 512, 0, NULL) < 0 || rte_eth_dev_start(g_port_cli) < 0)
		return 1;

	char err[256];
	struct nic_dpdk_config dc = { .eal_started = true, .port_id = (uint16_t)p_srv, .queues = 1, .ip = UT_SRV_IP };
	if (nic_dpdk_init(&dc, err, sizeof(err)) < 0) {
		fprintf(stderr, "nic_dpdk_init: %s\n", err);
		return 1;
	}
	struct nic_config nc = { .port = UT_PORT, .conns_max = UT_CONNS, .rx_buf_bytes = UT_RXBUF,
				 .rx_bufs = UT_RXBUFS };
	if (nic_dpdk_create(&nc, 0, &g_n) < 0)
		return 1;
	ct_init(&g_ct, UT_CONNS, UT_RXBUFS, UT_RXBUF);
	struct rte_ether_addr cm;
	rte_eth_macaddr_get(g_port_cli, &cm);
	struct tcp_config tc = { .ip = UT_CLI_IP, .port = 1, .conns_max = 4, .rx_bytes = 1u << 17,
				 .tx_bytes = 1u << 17, .isn_secret = 42 };
	memcpy(tc.mac, cm.addr_bytes, 6);
	if (tcp_create(&tc, &g_cli) < 0)
		return 1;
	g_srv_rx = malloc(4u << 20);

	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("nic_dpdk", NULL, NULL);
	CU_add_test(s, "streams, pause, starved buffers, closes over ring ports", test_streams);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();

	nic_destroy(g_n);
	/* every mbuf is back in its pool: ring ports hand over the sender's mbufs, so
	 * what we received came from the client's pool and what we sent from ours */
	for (int i = 0; i < 32; i++)
		pump_client_rx();
	struct rte_mempool *mp = rte_mempool_lookup("sluice_p0_q0");
	unsigned avail = mp ? rte_mempool_avail_count(mp) : 0;
	unsigned cavail = rte_mempool_avail_count(g_cli_pool);
	if (avail != NIC_DPDK_MBUFS || cavail != 4095) {
		fprintf(stderr, "mbuf leak: %u of %u back in our pool, %u of 4095 in the client's\n", avail,
			NIC_DPDK_MBUFS, cavail);
		failed++;
	}
	tcp_destroy(g_cli);
	ct_free(&g_ct);
	free(g_srv_rx);
	nic_dpdk_fini();
	rte_eal_cleanup();
	return failed ? 1 : 0;
}
