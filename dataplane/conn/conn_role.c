/*
 * conn_role.c - the NIC side's part in a data core's loop (loop.h's struct
 * dp_role): the listener and the produce-time records check at start, NIC
 * events each turn, the connection timer, and at stop the connections
 * closed first and the NIC destroyed once the io_uring is gone. Locality:
 * NIC core.
 */
#include <string.h>

#include "codec.h"
#include "nic.h"
#include "conn_internal.h"
#include "seam_nic.h"

static int conn_start(struct dp_core *c)
{
	const struct dp_config *cfg = &c->b->cfg;
	int rc = st_codec_create(&c->codec);
	if (rc < 0) {
		DP_ERR("codec setup: %s", strerror(-rc));
		return rc;
	}
	struct nic_config nc = {
		.host = cfg->listen_host, .port = cfg->listen_port, .conns_max = DP_CONNS_MAX,
		.rx_buf_bytes = DP_NIC_RX_BUF_BYTES, .rx_bufs = DP_NIC_RX_BUFS, .reuseport = c->b->ndata > 1,
	};
	rc = dp_seam_nic_create(c, &nc, &c->nic);   /* the io_uring NIC, or the simulator's */
	if (rc < 0) {
		DP_ERR("cannot listen on %s:%u: %s", cfg->listen_host, cfg->listen_port, strerror(-rc));
		return rc;
	}
	return 0;
}

static int conn_poll(struct dp_core *c)
{
	if (!c->nic)
		return 0;
	struct nic_ev ev[DP_NIC_BURST];
	int n = nic_poll(c->nic, ev, DP_NIC_BURST);
	for (int i = 0; i < n; i++)
		dp_conn_event(c, &ev[i]);
	return n;
}

static int conn_flush(struct dp_core *c)
{
	int work = dp_calls_again(c);   /* first: what they answer at once is flushed with the rest */
	return work + (c->nic ? nic_flush(c->nic) : 0);
}

/* A parked fetch's deadline is checked by the timer: the core must not sleep through it. */
static bool conn_ticking(struct dp_core *c)
{
	/* paused connections resume on the timer; a polled NIC (DPDK) is looked at every tick */
	return c->parked != NULL || c->npool_wait || (c->nic && dp_seam_nic_polled());
}

/* At stop, after quiesce closed the connections: a userspace TCP still owes their FINs. */
static bool conn_busy(struct dp_core *c)
{
	return c->nic && dp_seam_nic_draining(c->nic);
}

static void conn_quiesce(struct dp_core *c)
{
	if (c->frames_waited || c->conns_reclaimed)
		DP_INFO("%llu times a frame still arriving waited for room in the core's byte budget; %llu connections "
		        "closed for that budget", (unsigned long long)c->frames_waited,
		        (unsigned long long)c->conns_reclaimed);
	if (c->nic)
		dp_conns_shutdown(c);
}

static void conn_destroy(struct dp_core *c)
{
#ifdef DP_NIC_DPDK
	if (c->nic) {
		/* the lab and the bench read these: frames, drops, bytes copied per byte moved, leaks */
		const struct nic_dpdk_stats *ds = nic_dpdk_stats(c->nic);
		DP_INFO("DPDK queue %d: rx %llu frames %llu bytes (%llu dropped), tx %llu frames %llu bytes "
		        "(%llu pool empty, %llu queue full), %llu refused at open, "
		        "%u flows still held; faults: %llu dropped %llu doubled %llu reordered %llu corrupted; "
		        "tcp: %llu retransmits %llu bad checksums (%llu timeouts, %llu fast, %llu from SACK); "
		        "copies: stream in %llu bytes, "
		        "%llu frame-to-ring + %llu ring-to-buffer (%.3f per byte in); stream out %llu bytes, "
		        "%llu send-to-ring + %llu ring-to-frame (%.3f per byte out)", c->data_index,
		        (unsigned long long)ds->rx_frames,
		        (unsigned long long)ds->rx_bytes, (unsigned long long)ds->rx_dropped,
		        (unsigned long long)ds->tx_frames, (unsigned long long)ds->tx_bytes,
		        (unsigned long long)ds->tx_nombuf, (unsigned long long)ds->tx_full,
		        (unsigned long long)ds->accepts_rejected,
		        nic_dpdk_flows_used(c->nic), (unsigned long long)ds->fault_drops,
		        (unsigned long long)ds->fault_dups, (unsigned long long)ds->fault_reorders,
		        (unsigned long long)ds->fault_corrupts, (unsigned long long)ds->tcp_rexmits,
		        (unsigned long long)ds->tcp_drop_csum, (unsigned long long)ds->tcp_rto_fires,
		        (unsigned long long)ds->tcp_fast_rexmits, (unsigned long long)ds->tcp_sack_rexmits,
		        (unsigned long long)ds->rx_app_copied,
		        (unsigned long long)ds->tcp_rx_copied, (unsigned long long)ds->rx_app_copied,
		        ds->rx_app_copied ? (double)(ds->tcp_rx_copied + ds->rx_app_copied) / (double)ds->rx_app_copied : 0.0,
		        (unsigned long long)ds->tx_app_copied, (unsigned long long)ds->tx_app_copied,
		        (unsigned long long)ds->tcp_tx_copied,
		        ds->tx_app_copied ? (double)(ds->tx_app_copied + ds->tcp_tx_copied) / (double)ds->tx_app_copied : 0.0);
	}
#endif
	if (c->nic)
		nic_destroy(c->nic);
	c->nic = NULL;
	st_codec_destroy(c->codec);
	c->codec = NULL;
}

/* The NIC side's pools and bounds, per data core (main.c allocates the slots and the request pool). */
static void conn_budget(const struct dp_config *cfg, struct dp_budget *bd)
{
	unsigned long long ndata = dp_budget_ndata(cfg);
	dp_budget_add(bd, "connections", ndata,
	              DP_CONN_SLOTS * (sizeof(struct dp_conn) + sizeof(uint16_t)) + DP_CONNS_MAX * sizeof(uint16_t),
	              "DP_CONN_SLOTS slots and their maps per data core");
	dp_budget_add(bd, "request slots", ndata, (unsigned long long)DP_REQS_MAX * sizeof(struct dp_req),
	              "DP_REQS_MAX per data core");
	dp_budget_add(bd, "requests' held bytes", ndata, DP_CORE_HELD_BYTES_MAX,
	              "DP_CORE_HELD_BYTES_MAX of frames, arenas, fetch buffers, answers per data core");
	/* Past its frame and arena, a fetch holds its MaxBytes, a coordinator request its call (call.h). */
	unsigned long long call = dp_call_bytes(cfg->max_frame_bytes, cfg->max_frame_bytes);
	dp_budget_add(bd, "one request past it", ndata,
	              (unsigned long long)cfg->max_frame_bytes + DP_ARENA_BYTES_MAX +
	              (call > DP_FETCH_RESPONSE_MAX_BYTES ? call : DP_FETCH_RESPONSE_MAX_BYTES),
	              "the request that crosses the limit: --max-frame-bytes, its arena, a fetch's MaxBytes "
	              "or a coordinator call");
	dp_budget_add(bd, "NIC receive buffers", ndata, (unsigned long long)DP_NIC_RX_BUFS * DP_NIC_RX_BUF_BYTES,
	              "DP_NIC_RX_BUFS of DP_NIC_RX_BUF_BYTES per data core");
#ifdef DP_NIC_DPDK
	dp_budget_add(bd, "DPDK queue: mbufs, TCP flows", ndata, nic_dpdk_queue_bytes(),
	              "NIC_DPDK_MBUFS mbufs, NIC_DPDK_FLOWS_MAX flows with their rings per data core");
#endif
}

const struct dp_role dp_conn_role = {
	.name = "conn", .start = conn_start, .poll = conn_poll, .timer = dp_conn_timer,
	.ticking = conn_ticking, .busy = conn_busy, .flush = conn_flush, .quiesce = conn_quiesce, .destroy = conn_destroy,
	.budget = conn_budget,
};
