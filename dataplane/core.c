/*
 * core.c - the per-core poll loop and cross-core messaging.
 *
 * One iteration: reap io_uring completions (NIC, storage, wake-ups), take a
 * burst of NIC events, drain a burst from every incoming ring, run timers,
 * then prepare SQEs (storage group commits, NIC sends) and submit them in one
 * io_uring_submit(). A core that found no work for DP_IDLE_SPIN_US sleeps in
 * the kernel until a completion, a wake-up from another core, or a timer.
 * Locality: each function runs on the core that owns c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "log.h"
#include "nic.h"
#include "core.h"

_Thread_local struct dp_core *dp_this_core;

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t dp_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline struct dp_ring *ring_of(const struct dp_broker *b, int src, int dst)
{
	return b->rings[src * b->ncores + dst];
}

static void wake(struct dp_core *dst)
{
	/* seq_cst: orders our ring publish before reading the flag; pairs with the
	 * fence in core_sleep() between setting `sleeping` and re-checking rings. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&dst->sleeping, memory_order_relaxed)) {
		ssize_t w = write(dst->efd, &(uint64_t){ 1 }, sizeof(uint64_t));
		(void)w;
	}
}

static void deliver(struct dp_core *c, struct dp_msg *m);

bool dp_send_room(struct dp_core *c, int dst, uint32_t n)
{
	if (dst == c->id || c->credits_out[dst] + n <= c->b->xmsg_credits)
		return true;
	c->credit_refused++;
	return false;
}

/* The backlog to dst, a fixed circular queue: slot i from its head. */
static inline struct dp_msg *backlog_at(struct dp_core *c, int dst, uint32_t i)
{
	return &c->backlog[dst][(c->backlog_head[dst] + i) % c->backlog_cap[dst]];
}

void dp_send(struct dp_core *c, int dst, struct dp_msg *m)
{
	m->src = (uint16_t)c->id;
	if (dst == c->id) {
		deliver(c, m);
		return;
	}
	assert(dst >= 0 && dst < c->b->ncores);
	if (m->type % 2 == 1 && dp_msg_credited(m->type))
		c->credits_out[dst]++;   /* given back when its reply arrives (deliver) */
	if (c->backlog_n[dst] == 0 && dp_ring_enqueue_burst(ring_of(c->b, c->id, dst), m, 1) == 1) {
		wake(c->b->cores[dst]);
		return;
	}
	/* Ring full: keep order behind what is already waiting. */
	if (c->backlog_n[dst] == c->backlog_cap[dst]) {
		/* Credit bounds everything but watches (dp_limits.h); a fire is
		 * advisory: the parked fetch answers at its MaxWaitMs instead. */
		assert(m->type == DP_MSG_WATCH_FIRE || m->type == DP_MSG_WATCH);
		c->fires_dropped++;
		return;
	}
	*backlog_at(c, dst, c->backlog_n[dst]++) = *m;
}

static int flush_backlog(struct dp_core *c)
{
	int work = 0;
	for (int d = 0; d < c->b->ncores; d++) {
		uint32_t cap = c->backlog_cap[d];
		bool sent_any = false;
		while (c->backlog_n[d]) {
			/* the run from head to the array's end (or to the last message) */
			uint32_t head = c->backlog_head[d];
			uint32_t run = cap - head < c->backlog_n[d] ? cap - head : c->backlog_n[d];
			unsigned sent = dp_ring_enqueue_burst(ring_of(c->b, c->id, d), &c->backlog[d][head], run);
			if (!sent)
				break;
			c->backlog_head[d] = (head + sent) % cap;
			c->backlog_n[d] -= sent;
			sent_any = true;
			if (sent < run)
				break;
		}
		if (sent_any) {
			wake(c->b->cores[d]);
			work++;
		}
	}
	return work;
}

static void deliver(struct dp_core *c, struct dp_msg *m)
{
	if (m->src != c->id && m->type % 2 == 0 && dp_msg_credited(m->type)) {
		assert(c->credits_out[m->src] > 0);   /* one reply per request */
		c->credits_out[m->src]--;
	}
	switch (m->type) {
	case DP_MSG_PRODUCE:
	case DP_MSG_FETCH:
	case DP_MSG_WATCH:
	case DP_MSG_LIST:
	case DP_MSG_TOPIC_ADD:
	case DP_MSG_TOPIC_DEL:
		dp_shard_msg(c, m);
		return;
	case DP_MSG_TXN_ADD:
	case DP_MSG_TXN_MARKER:
	case DP_MSG_DESCRIBE_PRODUCERS:
		dp_shard_txn_msg(c, m);
		return;
	case DP_MSG_TXN_REQ:
	case DP_MSG_TXN_ADD_ACK:
		dp_txnc_msg(c, m);
		return;
	case DP_MSG_GROUP_REQ:
	case DP_MSG_GROUP_GONE:
		dp_group_msg(c, m);
		return;
	case DP_MSG_TXN_MARKER_DONE:
		if (m->flags & DP_F_WIRE)
			dp_req_complete_part(c, m);
		else
			dp_txnc_msg(c, m);
		return;
	case DP_MSG_CREATE:
	case DP_MSG_DELETE:
	case DP_MSG_TOPIC_ADD_ACK:
	case DP_MSG_TOPIC_DEL_ACK:
	case DP_MSG_INIT_PID:
		dp_control_msg(c, m);
		return;
	default:
		dp_req_complete_part(c, m);
		return;
	}
}

static int drain_rings(struct dp_core *c)
{
	struct dp_msg burst[DP_RING_BURST];
	int work = 0;
	for (int s = 0; s < c->b->ncores; s++) {
		if (s == c->id)
			continue;
		unsigned n = dp_ring_dequeue_burst(ring_of(c->b, s, c->id), burst, DP_RING_BURST);
		for (unsigned i = 0; i < n; i++)
			deliver(c, &burst[i]);
		work += (int)n;
	}
	return work;
}

static void arm_wakeup(struct dp_core *c)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
	if (!sqe) {
		io_uring_submit(&c->ring);
		sqe = io_uring_get_sqe(&c->ring);
	}
	io_uring_prep_read(sqe, c->efd, &c->efd_buf, sizeof(c->efd_buf), 0);
	io_uring_sqe_set_data64(sqe, DP_CORE_TAG);
}

static int reap(struct dp_core *c)
{
	struct io_uring_cqe *cqes[DP_CQE_BURST];
	unsigned n = io_uring_peek_batch_cqe(&c->ring, cqes, DP_CQE_BURST);
	for (unsigned i = 0; i < n; i++) {
		struct io_uring_cqe *cqe = cqes[i];
		switch (cqe->user_data & 0xf) {
		case NIC_URING_TAG: nic_uring_complete(c->nic, cqe); break;
		case ST_URING_TAG: st_io_complete(c->io, cqe); break;
		case DP_CORE_TAG: arm_wakeup(c); break;
		case DP_READ_TAG: dp_shard_read_complete(c, cqe); break;
		default: assert(!"unknown completion tag");
		}
	}
	io_uring_cq_advance(&c->ring, n);
	return (int)n;
}

static bool rings_idle(struct dp_core *c)
{
	for (int s = 0; s < c->b->ncores; s++)
		if (s != c->id && !dp_ring_empty(ring_of(c->b, s, c->id)))
			return false;
	for (int d = 0; d < c->b->ncores; d++)
		if (c->backlog_n[d])
			return false;
	return true;
}

static void core_sleep(struct dp_core *c, int64_t max_us)
{
	atomic_store_explicit(&c->sleeping, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);   /* pairs with wake() */
	if (rings_idle(c) && !*c->b->stop) {
		struct __kernel_timespec ts = { .tv_sec = max_us / 1000000, .tv_nsec = (max_us % 1000000) * 1000 };
		struct io_uring_cqe *cqe;
		io_uring_submit_and_wait_timeout(&c->ring, &cqe, 1, &ts, NULL);
	}
	atomic_store_explicit(&c->sleeping, 0, memory_order_relaxed);
}

/* Every append completion on this core, routed by the cookie's first byte. */
static void on_append(void *cookie, int status, int64_t base_offset)
{
	switch (*(const uint8_t *)cookie) {
	case DP_COOKIE_PRODUCE: dp_shard_on_append(cookie, status, base_offset); return;
	case DP_COOKIE_MARKER: dp_shard_on_marker(cookie, status); return;
	case DP_COOKIE_COORD: dp_txnc_on_write(cookie, status); return;
	case DP_COOKIE_GROUP: dp_group_on_write(cookie, status); return;
	default: assert(!"unknown append cookie");
	}
}

static int core_setup(struct dp_core *c)
{
	struct io_uring_params p = { .flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
	                                      IORING_SETUP_SINGLE_ISSUER };
	int rc = io_uring_queue_init_params(DP_URING_ENTRIES, &c->ring, &p);
	if (rc == -EINVAL) {   /* older kernels: plain ring */
		memset(&p, 0, sizeof(p));
		rc = io_uring_queue_init_params(DP_URING_ENTRIES, &c->ring, &p);
	}
	if (rc < 0) {
		DP_ERR("io_uring setup: %s", strerror(-rc));
		return rc;
	}
	c->efd = eventfd(0, EFD_CLOEXEC);
	if (c->efd < 0)
		return -errno;
	arm_wakeup(c);
	const struct dp_config *cfg = &c->b->cfg;
	struct st_io_config ioc = { .fsync = cfg->fsync, .on_append = on_append };
	rc = st_io_create(&ioc, &c->ring, &c->io);
	if (rc < 0) {
		DP_ERR("storage setup: %s", strerror(-rc));
		return rc;
	}
	if (c->is_data)
		for (uint32_t id = 0; id < c->topics_end; id++)
			if (c->topics[id].live)
				dp_shard_open_owned(c, &c->topics[id], id);
	if (c->is_control && (rc = dp_txnc_start(c)) < 0)
		return rc;
	if (c->is_control && (rc = dp_group_start(c)) < 0)
		return rc;
	if (!c->is_data)
		return 0;
	if ((rc = st_codec_create(&c->codec)) < 0) {
		DP_ERR("codec setup: %s", strerror(-rc));
		return rc;
	}
	struct nic_config nc = {
		.host = cfg->listen_host, .port = cfg->listen_port, .conns_max = DP_CONNS_MAX,
		.rx_buf_bytes = DP_NIC_RX_BUF_BYTES, .rx_bufs = DP_NIC_RX_BUFS, .reuseport = c->b->ndata > 1,
	};
	rc = nic_uring_create(&nc, &c->ring, &c->nic);
	if (rc < 0) {
		DP_ERR("cannot listen on %s:%u: %s", cfg->listen_host, cfg->listen_port, strerror(-rc));
		return rc;
	}
	return 0;
}

static void core_teardown(struct dp_core *c)
{
	if (c->is_data && c->nic)
		dp_conns_shutdown(c);
	/* Let queued appends reach the disk and cold reads finish (bounded: 10 s). */
	int64_t until = mono_us() + 10 * 1000000;
	while (c->io && (st_io_pending(c->io) || c->reads_inflight) && mono_us() < until) {
		st_io_flush(c->io);
		if (c->nic)
			nic_flush(c->nic);
		io_uring_submit(&c->ring);
		core_sleep(c, 1000);
		reap(c);
		if (c->nic) {
			struct nic_ev ev[DP_NIC_BURST];
			int n = nic_poll(c->nic, ev, DP_NIC_BURST);
			for (int i = 0; i < n; i++)
				dp_conn_event(c, &ev[i]);
		}
	}
	if (c->credit_refused || c->credit_waits || c->fires_dropped)
		DP_INFO("%llu cross-core requests refused for credit, %llu connection pauses for credit, "
		        "%llu watch fires dropped at a full backlog", (unsigned long long)c->credit_refused,
		        (unsigned long long)c->credit_waits, (unsigned long long)c->fires_dropped);
	if (c->is_data) {
		if (c->appends_refused)
			DP_INFO("%llu batches refused for an empty append pool", (unsigned long long)c->appends_refused);
		if (c->cold_reads)
			DP_INFO("%llu fetch reads missed the page cache and went through io_uring",
			        (unsigned long long)c->cold_reads);
		if (c->aborted_cut_reads)
			DP_INFO("%llu read_committed reads were cut short for their aborted lists (%llu to one batch)",
			        (unsigned long long)c->aborted_cut_reads, (unsigned long long)c->aborted_one_batch_reads);
		for (uint32_t id = 0; id < c->topics_end; id++)
			if (c->topics[id].live)
				dp_shard_close_topic(c, &c->topics[id], false);
	}
	if (c->is_control) {
		dp_txnc_stop(c);
		dp_group_stop(c);
	}
	/* The ring goes first: the kernel then holds no receive buffer of the NIC's. */
	io_uring_queue_exit(&c->ring);
	if (c->nic)
		nic_destroy(c->nic);
	if (c->io)
		st_io_destroy(c->io);
	free(c->reads);
	st_codec_destroy(c->codec);
	close(c->efd);
	dp_buf_drain();
}

int dp_core_run(struct dp_core *c)
{
	dp_this_core = c;
	dp_log_core = c->id;
	int rc = core_setup(c);
	atomic_fetch_add(c->b->ready, rc < 0 ? 1000 : 1);
	if (rc < 0)
		return rc;

	int64_t idle_since = mono_us(), next_timer_us = 0;
	c->next_snapshot_ms = idle_since / 1000 + c->b->cfg.producer_snapshot_ms;
	while (!*c->b->stop) {
		int64_t now = mono_us();
		c->now_ms = now / 1000;
		int work = reap(c);
		if (c->nic) {
			struct nic_ev ev[DP_NIC_BURST];
			int n = nic_poll(c->nic, ev, DP_NIC_BURST);
			for (int i = 0; i < n; i++)
				dp_conn_event(c, &ev[i]);
			work += n;
		}
		work += drain_rings(c);
		/* Topic deletes waiting for their partitions' I/O: after completions, and every tick. */
		if (c->ndel_wait && (work || now >= next_timer_us))
			work += dp_shard_deletes(c);
		work += flush_backlog(c);
		if (now >= next_timer_us) {
			next_timer_us = now + 1000;
			if (c->is_data) {
				dp_conn_timer(c);
				dp_shard_timer(c);
			}
			if (c->is_control) {
				dp_txnc_timer(c);
				dp_group_timer(c);
			}
		}
		if (c->io)
			work += st_io_flush(c->io);
		if (c->nic)
			work += nic_flush(c->nic);
		io_uring_submit(&c->ring);
		c->loops++;
		if (work) {
			c->busy_loops++;
			idle_since = now;
		} else if (now - idle_since > DP_IDLE_SPIN_US) {
			core_sleep(c, c->parked ? 1000 : DP_SLEEP_MAX_MS * 1000);
		}
	}
	core_teardown(c);
	return 0;
}
