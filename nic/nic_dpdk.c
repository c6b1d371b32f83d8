/*
 * nic_dpdk.c - nic.h over a DPDK port and the userspace TCP (nic_dpdk.h).
 *
 * Locality: nic_dpdk_init/fini init only (main thread); everything on a
 * struct nic runs on its data core, which alone touches its queue pair, its
 * mbuf pool and its TCP stack. The port's state set at init is read-only
 * after, so nothing is shared that is written.
 *
 * One turn (nic_flush, once per loop iteration):
 *   rx:      up to NIC_DPDK_RX_BURSTS bursts of frames into tcp_input; each
 *            mbuf goes back to the pool at once (the stack copies what it keeps);
 *   timers:  tcp_timers at most every NIC_DPDK_TIMER_US;
 *   events:  the stack's OPEN / READABLE / WRITABLE / EOF / CLOSED turned into
 *            slot changes, the slots to look at pushed on the dirty stack;
 *   streams: each dirty slot's received bytes copied into the nic's rx
 *            buffers (DATA events; a slot with no free buffer waits on the
 *            starved stack until nic_rx_release), its queued sends copied
 *            into the stack's send ring (SENT as soon as an entry is taken);
 *   tx:      tcp_output's frames written straight into mbufs and sent in
 *            bursts; what the queue does not take waits (bounded: one burst)
 *            and tcp_output is not asked for more until it went.
 *   faults:  test only (--dpdk-faults): frames dropped, doubled, held back
 *            behind the next one or corrupted on the way in, dropped on the
 *            way out, by a seeded generator per queue.
 *
 * Copies: every stream byte is copied twice each way (frame -> the flow's
 * ring -> rx buffer; send -> the flow's ring -> frame, again per
 * retransmission), counted in nic_dpdk_stats and logged at stop: the frames
 * are not kept as the application's buffers (no zero copy yet).
 *
 * Slot lifecycle on top of nic_common.h's: OPEN (mapped to a TCP handle) ->
 * CLOSED when the peer's EOF has been read to its end (we close too), when the
 * stack reports CLOSED (reset, timeout), or at nic_close. The TCP flow can
 * outlive its slot (our FIN still to be acknowledged, TIME_WAIT): it is then
 * "detached" (tcp_map says NIC_SLOT_NONE) and released at its CLOSED, so a
 * later connection in the same slot never sees its events.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "nic.h"
#include "nic_common.h"
#include "nic_dpdk.h"
#include "tcp.h"

#define NIC_DPDK_EAL_BYTES_MAX 4096u   /* --dpdk-eal's length */

/* per-slot flags */
#define NIC_DF_PAUSED      0x01u   /* nic_pause: received bytes stay in the stack's ring */
#define NIC_DF_EOF         0x02u   /* the peer's FIN: close once its bytes are delivered */
#define NIC_DF_ON_DIRTY    0x04u   /* listed on dirty (kept across reuse; popping re-checks) */
#define NIC_DF_ON_STARVED  0x08u

/* One connection slot. Locality: NIC core. */
struct nic_dpdk_conn {
	struct nic_slot s;       /* first (nic_common.h) */
	uint32_t tcp;            /* the stack's handle while OPEN */
	uint8_t flags;           /* NIC_DF_* */
};

/* The backend. Locality: NIC core (one per data core). */
struct nic {
	struct nic_common cm;    /* first (nic_common.h) */
	struct nic_dpdk_conn *conns;
	struct tcp_stack *tcp;
	uint32_t tcp_flows;
	uint32_t *tcp_map;       /* stack handle index -> slot, or NIC_SLOT_NONE (detached) */
	uint32_t *dirty;         /* stack of slots to service this turn */
	uint32_t dirty_n;
	uint32_t *starved;       /* slots with bytes waiting for an rx buffer */
	uint32_t starved_n;
	uint16_t port_id, queue;
	struct rte_mempool *pool;
	struct rte_mbuf *txw[NIC_DPDK_BURST];   /* frames the tx queue has not taken yet */
	uint32_t txw_n;
	struct rte_mbuf *spare;  /* an mbuf tcp_output had nothing for, kept for the next frame */
	uint8_t *lin;            /* a multi-segment frame made contiguous (frame_max bytes) */
	uint32_t frame_max;
	uint64_t timers_at_us;
	struct nic_dpdk_faults faults;   /* test only: all zero normally */
	bool faulty;
	uint64_t rng;
	struct rte_mbuf *held;   /* a received frame held back behind the next (reorder fault) */
	struct nic_dpdk_stats st;
};

_Static_assert(offsetof(struct nic, cm) == 0, "nic_poll reaches cm from struct nic");
_Static_assert(offsetof(struct nic_dpdk_conn, s) == 0, "nic_common's slot head comes first");
_Static_assert(NIC_DPDK_FLOWS_MAX <= NIC_CONNS_LIMIT, "stack handles index tcp_map");

/* Init only: the port and its pools, written before any core starts. */
static struct {
	bool eal_up, port_up;
	uint16_t port_id, queues;
	uint32_t ip;
	uint16_t mtu;
	uint8_t mac[6];
	struct nic_dpdk_faults faults;
	struct rte_mempool *pool[NIC_DPDK_QUEUES_MAX];
} nic_dpdk_port;

static uint64_t nic_dpdk_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- init ---------------------------------------------------------------- */

/* Locality: init only. */
int nic_dpdk_faults_parse(const char *s, struct nic_dpdk_faults *f)
{
	static const char *const keys[] = { "drop", "dup", "reorder", "corrupt", "txdrop", "seed" };
	memset(f, 0, sizeof(*f));
	while (*s) {
		const char *eq = strchr(s, '=');
		if (!eq)
			return -EINVAL;
		size_t klen = (size_t)(eq - s);
		char *end;
		unsigned long long v = strtoull(eq + 1, &end, 10);
		if (end == eq + 1 || (*end && *end != ','))
			return -EINVAL;
		uint32_t k = 0;
		while (k < 6 && (strlen(keys[k]) != klen || strncmp(s, keys[k], klen)))
			k++;
		if (k == 6 || (k < 5 && v > NIC_DPDK_PPM))
			return -EINVAL;
		uint32_t *ppm[] = { &f->rx_drop, &f->rx_dup, &f->rx_reorder, &f->rx_corrupt, &f->tx_drop };
		if (k < 5)
			*ppm[k] = (uint32_t)v;
		else
			f->seed = v;
		s = *end ? end + 1 : end;
	}
	return 0;
}

size_t nic_dpdk_queue_bytes(void)
{
	struct tcp_config tc = { .conns_max = NIC_DPDK_FLOWS_MAX, .rx_bytes = NIC_DPDK_TCP_RX_BYTES,
				 .tx_bytes = NIC_DPDK_TCP_TX_BYTES, .ip = 1 };
	return (size_t)NIC_DPDK_MBUFS * (NIC_DPDK_MBUF_DATA_BYTES + NIC_DPDK_MBUF_OVERHEAD) +
	       tcp_memory_bytes(&tc) + (size_t)NIC_DPDK_FLOWS_MAX * sizeof(uint32_t);
}

/* rte_eal_init on the words of args. Locality: init only. */
static int nic_dpdk_eal(const char *args_in, char *err, size_t cap)
{
	/* rte_eal_init takes argv and may keep pointers into it: a static copy */
	static char words[NIC_DPDK_EAL_BYTES_MAX];
	static char *argv[NIC_DPDK_EAL_ARGS_MAX + 2];
	const char *args = args_in ? args_in : "";
	if (strlen(args) >= sizeof(words)) {
		snprintf(err, cap, "--dpdk-eal is longer than %u bytes", NIC_DPDK_EAL_BYTES_MAX - 1);
		return -EINVAL;
	}
	memcpy(words, args, strlen(args) + 1);
	int argc = 0;
	argv[argc++] = (char *)"sluiced";
	char *save = NULL;
	for (char *w = strtok_r(words, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		if (argc == NIC_DPDK_EAL_ARGS_MAX + 1) {
			snprintf(err, cap, "--dpdk-eal has more than %u words", NIC_DPDK_EAL_ARGS_MAX);
			return -EINVAL;
		}
		argv[argc++] = w;
	}
	argv[argc] = NULL;
	int rc = rte_eal_init(argc, argv);
	if (rc < 0) {
		snprintf(err, cap, "EAL cannot start (rte_eal_init: %s)", rte_strerror(rte_errno));
		return -(rte_errno ? rte_errno : EINVAL);
	}
	nic_dpdk_port.eal_up = true;
	return 0;
}

/* Locality: init only. */
int nic_dpdk_init(const struct nic_dpdk_config *cfg, char *err, size_t cap)
{
	assert(!nic_dpdk_port.eal_up);
	if (cfg->queues == 0 || cfg->queues > NIC_DPDK_QUEUES_MAX || cfg->ip == 0) {
		snprintf(err, cap, "queues 1..%u and an --ip are needed", NIC_DPDK_QUEUES_MAX);
		return -EINVAL;
	}
	if (!cfg->eal_started) {
		int erc = nic_dpdk_eal(cfg->eal_args, err, cap);
		if (erc < 0)
			return erc;
	}
	int rc;
	uint16_t pid = cfg->port_id;
	if (!rte_eth_dev_is_valid_port(pid)) {
		snprintf(err, cap, "EAL started but has no port %u (%u ports: give a --vdev or a device)",
			 pid, rte_eth_dev_count_avail());
		return -ENODEV;
	}
	struct rte_eth_dev_info info;
	rc = rte_eth_dev_info_get(pid, &info);
	if (rc < 0) {
		snprintf(err, cap, "port %u: dev_info: %s", pid, strerror(-rc));
		return rc;
	}
	if (cfg->queues > info.max_rx_queues || cfg->queues > info.max_tx_queues) {
		snprintf(err, cap, "port %u (%s) has %u rx / %u tx queues, %u data cores need one pair each "
			 "(net_af_packet: qpairs=N)", pid, info.driver_name, info.max_rx_queues,
			 info.max_tx_queues, cfg->queues);
		return -EINVAL;
	}
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	uint64_t rss = info.flow_type_rss_offloads & (RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_TCP);
	if (cfg->queues > 1 && rss) {
		/* RSS: a flow's packets land on one queue, so on the core that owns its connection */
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf = rss;
	}
	rc = rte_eth_dev_configure(pid, cfg->queues, cfg->queues, &conf);
	if (rc < 0) {
		snprintf(err, cap, "port %u: configure: %s", pid, strerror(-rc));
		return rc;
	}
	uint16_t nrxd = NIC_DPDK_RXD, ntxd = NIC_DPDK_TXD;
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nrxd, &ntxd);
	if (rc < 0 || nrxd > NIC_DPDK_RXD || ntxd > NIC_DPDK_TXD) {
		snprintf(err, cap, "port %u: descriptors (%u rx, %u tx) beyond the pool's", pid, nrxd, ntxd);
		return rc < 0 ? rc : -EINVAL;
	}
	int sock = rte_eth_dev_socket_id(pid);
	if (sock < 0)
		sock = 0;
	for (uint16_t q = 0; q < cfg->queues; q++) {
		char name[RTE_MEMPOOL_NAMESIZE];
		snprintf(name, sizeof(name), "sluice_p%u_q%u", pid, q);
		/* no per-lcore cache: the data cores are not EAL lcores, and each pool has one user */
		struct rte_mempool *mp = rte_pktmbuf_pool_create(name, NIC_DPDK_MBUFS, 0, 0,
								 NIC_DPDK_MBUF_DATA_BYTES, sock);
		if (!mp) {
			snprintf(err, cap, "mbuf pool of %u: %s (give the EAL more memory: -m)", NIC_DPDK_MBUFS,
				 rte_strerror(rte_errno));
			return -ENOMEM;
		}
		nic_dpdk_port.pool[q] = mp;
		rc = rte_eth_rx_queue_setup(pid, q, nrxd, (unsigned)sock, NULL, mp);
		if (rc == 0)
			rc = rte_eth_tx_queue_setup(pid, q, ntxd, (unsigned)sock, NULL);
		if (rc < 0) {
			snprintf(err, cap, "port %u queue %u setup: %s", pid, q, strerror(-rc));
			return rc;
		}
	}
	rc = rte_eth_dev_start(pid);
	if (rc < 0) {
		snprintf(err, cap, "port %u: start: %s", pid, strerror(-rc));
		return rc;
	}
	nic_dpdk_port.port_up = true;
	struct rte_ether_addr mac;
	rte_eth_macaddr_get(pid, &mac);
	memcpy(nic_dpdk_port.mac, mac.addr_bytes, 6);
	nic_dpdk_port.port_id = pid;
	nic_dpdk_port.queues = cfg->queues;
	nic_dpdk_port.ip = cfg->ip;
	nic_dpdk_port.mtu = cfg->mtu ? cfg->mtu : 1500;
	nic_dpdk_port.faults = cfg->faults;
	return 0;
}

/* Locality: init only. */
void nic_dpdk_fini(void)
{
	if (nic_dpdk_port.port_up) {
		rte_eth_dev_stop(nic_dpdk_port.port_id);
		rte_eth_dev_close(nic_dpdk_port.port_id);
	}
	for (uint32_t q = 0; q < NIC_DPDK_QUEUES_MAX; q++)
		if (nic_dpdk_port.pool[q])
			rte_mempool_free(nic_dpdk_port.pool[q]);
	if (nic_dpdk_port.eal_up)
		rte_eal_cleanup();
	memset(&nic_dpdk_port, 0, sizeof(nic_dpdk_port));
}

/* No kernel socket holds the port: the userspace stack answers it alone. Init only. */
int nic_port_probe(const char *host, uint16_t port)
{
	(void)host;
	(void)port;
	return 0;
}

/* Locality: init only (on the core). */
int nic_dpdk_create(const struct nic_config *cfg, uint16_t queue, struct nic **out)
{
	if (!nic_dpdk_port.port_up || queue >= nic_dpdk_port.queues || nic_config_check(cfg) ||
	    cfg->port == 0 || cfg->rx_bufs > UINT16_MAX + 1u)
		return -EINVAL;
	struct nic *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	int rc = nic_common_init(&n->cm, cfg, sizeof(struct nic_dpdk_conn));
	if (rc < 0)
		goto fail;
	n->conns = n->cm.slots;
	n->cm.port = cfg->port;
	n->port_id = nic_dpdk_port.port_id;
	n->queue = queue;
	n->pool = nic_dpdk_port.pool[queue];
	n->tcp_flows = NIC_DPDK_FLOWS_MAX;
	n->faults = nic_dpdk_port.faults;
	n->faulty = n->faults.rx_drop || n->faults.rx_dup || n->faults.rx_reorder || n->faults.rx_corrupt ||
		    n->faults.tx_drop;
	n->rng = (n->faults.seed ^ (uint64_t)queue << 32) | 1u;
	struct tcp_config tc = {
		.ip = nic_dpdk_port.ip, .port = cfg->port, .mtu = nic_dpdk_port.mtu,
		.conns_max = n->tcp_flows, .rx_bytes = NIC_DPDK_TCP_RX_BYTES, .tx_bytes = NIC_DPDK_TCP_TX_BYTES,
	};
	/* RFC 6528's key must be secret: an off-path sender that can guess it can guess the initial
	 * sequence numbers, and inject into or reset a flow. From the kernel's generator (init only). */
	if (getrandom(&tc.isn_secret, sizeof(tc.isn_secret), 0) != (ssize_t)sizeof(tc.isn_secret)) {
		rc = errno ? -errno : -EIO;
		goto fail;
	}
	memcpy(tc.mac, nic_dpdk_port.mac, 6);
	rc = -ENOMEM;
	n->tcp_map = malloc((size_t)n->tcp_flows * sizeof(uint32_t));
	n->dirty = malloc((size_t)cfg->conns_max * sizeof(uint32_t));
	n->starved = malloc((size_t)cfg->conns_max * sizeof(uint32_t));
	if (!n->tcp_map || !n->dirty || !n->starved)
		goto fail;
	for (uint32_t i = 0; i < n->tcp_flows; i++)
		n->tcp_map[i] = NIC_SLOT_NONE;
	rc = tcp_create(&tc, &n->tcp);
	if (rc < 0)
		goto fail;
	n->frame_max = tcp_frame_bytes_max(n->tcp);
	if (n->frame_max > NIC_DPDK_MBUF_DATA_BYTES - RTE_PKTMBUF_HEADROOM) {
		rc = -EINVAL;   /* an MTU past what one mbuf holds */
		goto fail;
	}
	n->lin = malloc(n->frame_max);
	if (!n->lin)
		goto fail;
	*out = n;
	return 0;
fail:
	nic_destroy(n);
	return rc;
}

void nic_destroy(struct nic *n)
{
	if (!n)
		return;
	for (uint32_t i = 0; i < n->txw_n; i++)
		rte_pktmbuf_free(n->txw[i]);
	if (n->spare)
		rte_pktmbuf_free(n->spare);
	if (n->held)
		rte_pktmbuf_free(n->held);
	if (n->tcp)
		tcp_destroy(n->tcp);
	free(n->tcp_map);
	free(n->dirty);
	free(n->starved);
	free(n->lin);
	nic_common_free(&n->cm);
	free(n);
}

/* ---- the per-turn work --------------------------------------------------- */

static inline uint32_t nic_dpdk_tcp_idx(uint32_t tcp_handle)
{
	return tcp_handle & NIC_IDX_MASK;   /* the stack's handles have nic.h's layout */
}

static void nic_dpdk_mark(struct nic *n, uint32_t idx)
{
	struct nic_dpdk_conn *c = &n->conns[idx];
	if (c->flags & NIC_DF_ON_DIRTY)
		return;
	c->flags |= NIC_DF_ON_DIRTY;
	assert(n->dirty_n < n->cm.conns_max);
	n->dirty[n->dirty_n++] = idx;
}

/* The slot lets go of its flow: the flow finishes on its own and is released at its CLOSED. */
static void nic_dpdk_detach(struct nic *n, struct nic_dpdk_conn *c)
{
	n->tcp_map[nic_dpdk_tcp_idx(c->tcp)] = NIC_SLOT_NONE;
	c->tcp = 0;
}

static void nic_dpdk_on_event(struct nic *n, const struct tcp_ev *ev)
{
	uint32_t tidx = nic_dpdk_tcp_idx(ev->conn);
	assert(tidx < n->tcp_flows);
	uint32_t idx = n->tcp_map[tidx];
	if (ev->kind == TCP_EV_OPEN) {
		assert(idx == NIC_SLOT_NONE);
		if (n->cm.free_n == 0) {
			n->st.accepts_rejected++;
			tcp_abort(n->tcp, ev->conn);   /* released at its CLOSED */
			return;
		}
		idx = nic_slot_open(&n->cm);
		struct nic_dpdk_conn *c = &n->conns[idx];
		c->tcp = ev->conn;
		c->flags &= (uint8_t)(NIC_DF_ON_DIRTY | NIC_DF_ON_STARVED);
		n->tcp_map[tidx] = idx;
		nic_dpdk_mark(n, idx);   /* bytes may have come with the handshake's last ACK */
		return;
	}
	if (idx == NIC_SLOT_NONE) {   /* detached, or refused at OPEN */
		if (ev->kind == TCP_EV_CLOSED)
			tcp_release(n->tcp, ev->conn);
		return;
	}
	struct nic_dpdk_conn *c = &n->conns[idx];
	assert(c->s.state == NIC_CONN_OPEN && c->tcp == ev->conn);
	switch (ev->kind) {
	case TCP_EV_EOF:
		c->flags |= NIC_DF_EOF;
		/* fall through */
	case TCP_EV_READABLE:
	case TCP_EV_WRITABLE:
		nic_dpdk_mark(n, idx);
		break;
	case TCP_EV_CLOSED:
		/* reset or timed out: what was not read is lost with the connection, as with a socket */
		nic_dpdk_detach(n, c);
		tcp_release(n->tcp, ev->conn);
		nic_slot_closed(&n->cm, &c->s, idx, ev->status);
		break;
	default:
		assert(!"unknown tcp event");
	}
}

/* Received bytes into rx buffers, queued sends into the stack, the peer's EOF
 * once its bytes are out. Returns bytes moved. */
static uint64_t nic_dpdk_service(struct nic *n, uint32_t idx)
{
	struct nic_dpdk_conn *c = &n->conns[idx];
	if (c->s.state != NIC_CONN_OPEN)
		return 0;
	uint64_t moved = 0;
	bool waiting = false;   /* bytes left in the stack's ring for want of a buffer */
	while (!(c->flags & NIC_DF_PAUSED)) {
		const uint8_t *p;
		uint32_t len = tcp_recv_peek(n->tcp, c->tcp, &p);
		if (len == 0)
			break;
		if (n->cm.rx_free_n == 0) {
			waiting = true;
			break;
		}
		if (len > n->cm.rx_buf_bytes)
			len = n->cm.rx_buf_bytes;
		uint16_t bid = nic_rx_free_pop(&n->cm);
		memcpy(nic_rx_addr(&n->cm, bid), p, len);
		nic_rx_lend(&n->cm, idx, bid, len);
		tcp_recv_consume(n->tcp, c->tcp, len);   /* reopens the window */
		moved += len;
		n->st.rx_app_copied += len;
	}
	if (waiting && !(c->flags & NIC_DF_ON_STARVED)) {
		c->flags |= NIC_DF_ON_STARVED;
		n->starved[n->starved_n++] = idx;
	}
	while (c->s.tx_done != c->s.tx_tail) {
		const struct nic_tx *tx = nic_txq_at(&c->s, c->s.tx_done);
		uint32_t rest = tx->len - c->s.tx_off;
		int took = rest ? tcp_send(n->tcp, c->tcp, tx->data + c->s.tx_off, rest) : 0;
		if (took < 0) {
			/* the stack will not send (our side closed): the CLOSED event follows */
			break;
		}
		if (took == 0 && rest)
			break;   /* the send ring is full: WRITABLE brings the slot back */
		nic_txq_sent(&n->cm, &c->s, idx, 1, (uint64_t)took);
		moved += (uint64_t)took;
		n->st.tx_app_copied += (uint64_t)took;
	}
	if ((c->flags & NIC_DF_EOF) && !waiting && !(c->flags & NIC_DF_PAUSED)) {
		const uint8_t *p;
		if (tcp_recv_peek(n->tcp, c->tcp, &p) == 0) {
			/* every byte before the FIN delivered: close our side (FIN after what is
			 * queued in the stack) and end the slot, as a socket's EOF does */
			tcp_close(n->tcp, c->tcp);
			nic_dpdk_detach(n, c);
			nic_slot_closed(&n->cm, &c->s, idx, 0);
		}
	}
	return moved;
}

/* One received frame into the stack; the mbuf goes back to its pool. */
static void nic_dpdk_rx_one(struct nic *n, struct rte_mbuf *m, uint64_t now)
{
	uint32_t len = rte_pktmbuf_pkt_len(m);
	const uint8_t *fr = rte_pktmbuf_mtod(m, const uint8_t *);
	if (m->nb_segs > 1)   /* a chained frame, made contiguous (no longer than an MTU) */
		fr = len <= n->frame_max ? rte_pktmbuf_read(m, 0, len, n->lin) : NULL;
	if (!fr || tcp_input(n->tcp, fr, len, now) < 0)
		n->st.rx_dropped++;
	n->st.rx_frames++;
	n->st.rx_bytes += len;
	rte_pktmbuf_free(m);
}

/* Test only (--dpdk-faults): xorshift64, seeded per queue. */
static bool nic_dpdk_roll(struct nic *n, uint32_t ppm)
{
	if (!ppm)
		return false;
	n->rng ^= n->rng << 13;
	n->rng ^= n->rng >> 7;
	n->rng ^= n->rng << 17;
	return n->rng % NIC_DPDK_PPM < ppm;
}

/* nic_dpdk_rx_one through the link's faults. */
static void nic_dpdk_rx_faulty(struct nic *n, struct rte_mbuf *m, uint64_t now)
{
	if (nic_dpdk_roll(n, n->faults.rx_drop)) {
		n->st.fault_drops++;
		rte_pktmbuf_free(m);
		return;
	}
	if (nic_dpdk_roll(n, n->faults.rx_corrupt) && m->data_len > 0) {
		n->st.fault_corrupts++;
		uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
		d[(uint32_t)(n->rng >> 32) % m->data_len] ^= (uint8_t)(1u << (n->rng >> 24 & 7u));
	}
	if (nic_dpdk_roll(n, n->faults.rx_dup)) {
		n->st.fault_dups++;
		uint32_t len = rte_pktmbuf_pkt_len(m);
		if (m->nb_segs == 1 && tcp_input(n->tcp, rte_pktmbuf_mtod(m, const uint8_t *), len, now) < 0)
			n->st.rx_dropped++;
	}
	if (!n->held && nic_dpdk_roll(n, n->faults.rx_reorder)) {
		n->st.fault_reorders++;
		n->held = m;   /* goes in behind the next frame */
		return;
	}
	nic_dpdk_rx_one(n, m, now);
	if (n->held) {
		nic_dpdk_rx_one(n, n->held, now);
		n->held = NULL;
	}
}

/* Frames waiting in txw to the queue. */
static uint32_t nic_dpdk_tx_push(struct nic *n)
{
	if (n->txw_n == 0)
		return 0;
	uint16_t sent = rte_eth_tx_burst(n->port_id, n->queue, n->txw, (uint16_t)n->txw_n);
	if (sent < n->txw_n) {
		n->st.tx_full++;
		memmove(n->txw, n->txw + sent, (n->txw_n - sent) * sizeof(n->txw[0]));
	}
	n->txw_n -= sent;
	n->st.tx_frames += sent;
	return sent;
}

static uint32_t nic_dpdk_tx(struct nic *n, uint64_t now)
{
	uint32_t work = 0;
	for (;;) {
		if (n->txw_n == NIC_DPDK_BURST) {
			work += nic_dpdk_tx_push(n);
			if (n->txw_n == NIC_DPDK_BURST)
				break;   /* the queue is full: the stack keeps the rest */
		}
		struct rte_mbuf *m = n->spare;
		n->spare = NULL;
		if (!m && !(m = rte_pktmbuf_alloc(n->pool))) {
			n->st.tx_nombuf++;
			break;
		}
		uint8_t *buf = rte_pktmbuf_mtod(m, uint8_t *);
		uint32_t len = tcp_output(n->tcp, now, buf, rte_pktmbuf_tailroom(m));
		if (len == 0) {
			n->spare = m;
			break;
		}
		if (n->faulty && nic_dpdk_roll(n, n->faults.tx_drop)) {
			n->st.fault_drops++;   /* lost on the wire: the mbuf is the next frame's */
			n->spare = m;
			continue;
		}
		m->data_len = (uint16_t)len;
		m->pkt_len = len;
		n->txw[n->txw_n++] = m;
		n->st.tx_bytes += len;
	}
	return work + nic_dpdk_tx_push(n);
}

int nic_flush(struct nic *n)
{
	uint64_t now = nic_dpdk_now_us();
	uint32_t work = 0;
	struct rte_mbuf *pkts[NIC_DPDK_BURST];
	for (uint32_t b = 0; b < NIC_DPDK_RX_BURSTS; b++) {
		uint16_t nb = rte_eth_rx_burst(n->port_id, n->queue, pkts, NIC_DPDK_BURST);
		for (uint16_t i = 0; i < nb; i++) {
			if (n->faulty)
				nic_dpdk_rx_faulty(n, pkts[i], now);
			else
				nic_dpdk_rx_one(n, pkts[i], now);
		}
		work += nb;
		if (nb < NIC_DPDK_BURST)
			break;
	}
	if (n->held && work == 0) {   /* no frame came to pass it: it goes now (a turn late) */
		nic_dpdk_rx_one(n, n->held, now);
		n->held = NULL;
	}
	if (now - n->timers_at_us >= NIC_DPDK_TIMER_US) {
		n->timers_at_us = now;
		tcp_timers(n->tcp, now);
	}
	struct tcp_ev ev[NIC_DPDK_BURST];
	int ne;
	while ((ne = tcp_events(n->tcp, ev, (int)NIC_DPDK_BURST)) > 0) {
		for (int i = 0; i < ne; i++)
			nic_dpdk_on_event(n, &ev[i]);
		work += (uint32_t)ne;
	}
	while (n->dirty_n > 0) {
		uint32_t idx = n->dirty[--n->dirty_n];
		n->conns[idx].flags &= (uint8_t)~NIC_DF_ON_DIRTY;
		if (nic_dpdk_service(n, idx))
			work++;
	}
	work += nic_dpdk_tx(n, now);
	return (int)(work > INT32_MAX ? INT32_MAX : work);
}

/* ---- nic.h calls ---------------------------------------------------------- */

void nic_rx_release(struct nic *n, const struct nic_ev *ev)
{
	nic_rx_free_push(&n->cm, nic_rx_unlend(&n->cm, ev));
	/* a buffer is free again: the slots that waited for one get it next turn */
	while (n->starved_n > 0) {
		uint32_t idx = n->starved[--n->starved_n];
		n->conns[idx].flags &= (uint8_t)~NIC_DF_ON_STARVED;
		nic_dpdk_mark(n, idx);
	}
}

int nic_send(struct nic *n, uint32_t conn, const void *data, uint32_t len, void *cookie)
{
	uint32_t idx = nic_slot_find(&n->cm, conn);
	if (idx == NIC_SLOT_NONE)
		return -ENOTCONN;
	int rc = nic_txq_put(&n->conns[idx].s, data, len, cookie);
	if (rc == 0)
		nic_dpdk_mark(n, idx);
	return rc;
}

void nic_pause(struct nic *n, uint32_t conn, bool paused)
{
	uint32_t idx = nic_slot_find(&n->cm, conn);
	if (idx == NIC_SLOT_NONE)
		return;
	struct nic_dpdk_conn *c = &n->conns[idx];
	if (paused) {
		c->flags |= NIC_DF_PAUSED;
	} else if (c->flags & NIC_DF_PAUSED) {
		c->flags &= (uint8_t)~NIC_DF_PAUSED;
		nic_dpdk_mark(n, idx);
	}
}

int nic_conn_peer(struct nic *n, uint32_t conn, char *buf, size_t cap)
{
	uint32_t idx = nic_slot_find(&n->cm, conn);
	uint32_t ip;
	uint16_t port;
	if (idx == NIC_SLOT_NONE || tcp_peer(n->tcp, n->conns[idx].tcp, &ip, &port) < 0)
		return -ENOTCONN;
	int w = snprintf(buf, cap, "/%u.%u.%u.%u", ip >> 24, ip >> 16 & 0xffu, ip >> 8 & 0xffu, ip & 0xffu);
	return w < 0 || (size_t)w >= cap ? -ENOSPC : w;
}

void nic_close(struct nic *n, uint32_t conn)
{
	uint32_t idx = nic_slot_find(&n->cm, conn);
	if (idx == NIC_SLOT_NONE)
		return;
	struct nic_dpdk_conn *c = &n->conns[idx];
	tcp_close(n->tcp, c->tcp);   /* FIN after what the stack already took */
	nic_dpdk_detach(n, c);
	nic_slot_closed(&n->cm, &c->s, idx, 0);   /* the unsent rest: SENT -ECANCELED */
}

const struct nic_dpdk_stats *nic_dpdk_stats(struct nic *n)
{
	n->st.tcp_rexmits = tcp_stats(n->tcp)->rexmits;   /* the stack's, copied in */
	n->st.tcp_drop_csum = tcp_stats(n->tcp)->drop_csum;
	n->st.tcp_rx_copied = tcp_stats(n->tcp)->rx_copied;
	n->st.tcp_rto_fires = tcp_stats(n->tcp)->rto_fires;
	n->st.tcp_fast_rexmits = tcp_stats(n->tcp)->fast_rexmits;
	n->st.tcp_sack_rexmits = tcp_stats(n->tcp)->sack_rexmits;
	n->st.tcp_tx_copied = tcp_stats(n->tcp)->tx_copied;
	return &n->st;
}

bool nic_dpdk_draining(struct nic *n)
{
	return n->txw_n > 0 || tcp_flows_closing(n->tcp) > 0;
}

uint32_t nic_dpdk_flows_used(const struct nic *n)
{
	return tcp_flows_used(n->tcp);
}
