/*
 * core.c - the per-core poll loop and cross-core messaging.
 *
 * One iteration: reap io_uring completions (storage, wake-ups, and the tags
 * roles registered: NIC, cold reads), run the roles' poll hooks (the NIC
 * side takes a burst of NIC events), drain a burst from every incoming ring
 * (each message runs the handler it carries), the roles' settle hooks, their
 * timers, then prepare SQEs (storage group commits, the roles' flush: NIC
 * sends) and submit them in one io_uring_submit(). A core that found no work
 * for --idle-spin-us (dp_config.idle_spin_us) sleeps in the kernel until a completion, a wake-up
 * from another core, or a timer. The loop knows the roles only as struct
 * dp_role (loop.h). What the loop asks of the machine (the clock, the
 * io_uring, sleeping, waking another core) goes through seam.h, so the
 * whole-broker simulator can step every core on one thread (dp_core_start,
 * dp_core_step, dp_core_stop) on its virtual clock, disk and network.
 * Locality: each function runs on the core that owns c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "loop_internal.h"

static _Thread_local struct dp_core *dp_this_core;   /* dp_core_self() */

struct dp_core *dp_core_self(void)
{
	return dp_this_core;
}

static inline int64_t mono_us(void)
{
	return dp_seam_mono_us();
}

/*
 * The turn's clock: one read of the monotonic clock per loop iteration, which every timer and
 * timestamp of the turn uses (a data core spent 8 % of its time in clock_gettime when handlers
 * read the clock per batch). The wall clock is the monotonic one plus an offset read again each
 * DP_WALL_SYNC_MS, so that read is not per iteration either.
 */
static void turn_clock(struct dp_core *c)
{
	int64_t now = mono_us();
	c->turn_us = now;
	c->now_ms = now / 1000;
	if (now >= c->wall_sync_us) {
		c->wall_offset_ms = dp_seam_wall_ms() - c->now_ms;
		c->wall_sync_us = now + DP_WALL_SYNC_MS * 1000;
	}
	c->wall_ms = c->now_ms + c->wall_offset_ms;
}

int64_t dp_wall_ms(void)
{
	const struct dp_core *c = dp_this_core;
	return c ? c->wall_ms : dp_seam_wall_ms();
}

static inline struct dp_ring *ring_of(const struct dp_broker *b, int src, int dst)
{
	return b->rings[src * b->ncores + dst];
}

static inline void wake(struct dp_core *dst)
{
	dp_seam_wake(dst);
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
	assert(m->fn);
	m->src = (uint16_t)c->id;
	if (dst == c->id) {
		deliver(c, m);
		return;
	}
	assert(dst >= 0 && dst < c->b->ncores);
	if (m->flags & DP_F_CREDIT)
		c->credits_out[dst]++;   /* given back when its answer arrives (deliver) */
	if (c->backlog_n[dst] == 0 && dp_ring_enqueue_burst(ring_of(c->b, c->id, dst), m, 1) == 1) {
		wake(c->b->cores[dst]);
		return;
	}
	/* Ring full: keep order behind what is already waiting. */
	if (c->backlog_n[dst] == c->backlog_cap[dst]) {
		/* Credit bounds everything but watches (dp_limits.h); a fire is
		 * advisory: the parked fetch answers at its MaxWaitMs instead. */
		assert(m->flags & DP_F_ADVISORY);
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

/* A message runs the handler it carries: the loop does not know who it is for. */
static void deliver(struct dp_core *c, struct dp_msg *m)
{
	/* An answer gives back the credit its request held (dp_limits.h);
	 * local messages hold none. */
	if ((m->flags & DP_F_ANSWER) && m->src != c->id) {
		assert(c->credits_out[m->src] > 0);   /* one answer per request */
		c->credits_out[m->src]--;
	}
	m->fn(c, m);
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

/* One completion to its owner, by the tag in user_data's low bits. */
static void on_cqe(struct dp_core *c, const struct io_uring_cqe *cqe)
{
	unsigned tag = (unsigned)(cqe->user_data & 0xf);
	if (tag == ST_URING_TAG)
		st_io_complete(c->io, cqe);
	else if (tag == DP_CORE_TAG)
		dp_seam_arm_wakeup(c);
	else if (c->cqe_fn[tag])
		c->cqe_fn[tag](c, cqe);
	else
		assert(!"unknown completion tag");
}

static int reap(struct dp_core *c)
{
	return (int)dp_seam_reap(c, on_cqe);
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
	if (rings_idle(c) && !*c->b->stop)
		dp_seam_wait(c, max_us);
	atomic_store_explicit(&c->sleeping, 0, memory_order_relaxed);
}

void dp_core_add_role(struct dp_core *c, const struct dp_role *role)
{
	assert(c->nroles < DP_ROLES_MAX);
	c->roles[c->nroles++] = role;
}

void dp_core_on_cqe(struct dp_core *c, unsigned tag, dp_cqe_fn fn)
{
	assert(tag < DP_CQE_TAGS && tag != ST_URING_TAG && tag != DP_CORE_TAG && !c->cqe_fn[tag]);
	c->cqe_fn[tag] = fn;
}

int64_t dp_mono_ms(void)
{
	const struct dp_core *c = dp_this_core;
	return c ? c->now_ms : mono_us() / 1000;
}

static int roles_poll(struct dp_core *c)
{
	int work = 0;
	for (uint32_t i = 0; i < c->nroles; i++)
		if (c->roles[i]->poll)
			work += c->roles[i]->poll(c);
	return work;
}

static int roles_flush(struct dp_core *c)
{
	int work = 0;
	for (uint32_t i = 0; i < c->nroles; i++)
		if (c->roles[i]->flush)
			work += c->roles[i]->flush(c);
	return work;
}

static bool roles_busy(struct dp_core *c)
{
	for (uint32_t i = 0; i < c->nroles; i++)
		if (c->roles[i]->busy && c->roles[i]->busy(c))
			return true;
	return false;
}

static bool roles_ticking(struct dp_core *c)
{
	for (uint32_t i = 0; i < c->nroles; i++)
		if (c->roles[i]->ticking && c->roles[i]->ticking(c))
			return true;
	return false;
}

static int core_setup(struct dp_core *c)
{
	int rc = dp_seam_ring_init(c);
	if (rc < 0) {
		DP_ERR("io_uring setup: %s", strerror(-rc));
		return rc;
	}
	dp_seam_arm_wakeup(c);
	const struct dp_config *cfg = &c->b->cfg;
	struct st_io_config ioc = { .fsync = cfg->fsync, .prealloc_bytes = cfg->prealloc_bytes,
	                            .direct = cfg->direct_io };   /* each append names its callback */
	rc = st_io_create(&ioc, dp_seam_ring(c), &c->io);
	if (rc < 0) {
		DP_ERR("storage setup: %s", strerror(-rc));
		return rc;
	}
	for (uint32_t i = 0; i < c->nroles; i++)
		if (c->roles[i]->start && (rc = c->roles[i]->start(c)) < 0)
			return rc;
	return 0;
}

static void core_teardown(struct dp_core *c)
{
	for (uint32_t i = 0; i < c->nroles; i++)
		if (c->roles[i]->quiesce)
			c->roles[i]->quiesce(c);
	/* Let queued appends reach the disk and the roles' own I/O finish (bounded: 10 s); segment
	 * removals not yet started wait for the next start (storage/log_internal.h st_seg_drop). */
	if (c->io)
		st_io_quiesce(c->io);
	turn_clock(c);
	int64_t until = c->turn_us + 10 * 1000000;
	while (c->io && (st_io_pending(c->io) || roles_busy(c)) && c->turn_us < until) {
		turn_clock(c);   /* what completes here is stamped with its own turn's time */
		st_io_flush(c->io);
		roles_flush(c);
		dp_seam_submit(c);
		core_sleep(c, 1000);
		reap(c);
		roles_poll(c);
	}
	if (c->credit_refused || c->credit_waits || c->fires_dropped)
		DP_INFO("%llu cross-core requests refused for credit, %llu connection pauses for credit, "
		        "%llu watch fires dropped at a full backlog", (unsigned long long)c->credit_refused,
		        (unsigned long long)c->credit_waits, (unsigned long long)c->fires_dropped);
	for (uint32_t i = 0; i < c->nroles; i++)
		if (c->roles[i]->stop)
			c->roles[i]->stop(c);
	/* The ring goes first: the kernel then holds no buffer of a role's (the NIC's receive buffers). */
	dp_seam_ring_exit(c);
	for (uint32_t i = 0; i < c->nroles; i++)
		if (c->roles[i]->destroy)
			c->roles[i]->destroy(c);
	if (c->io)
		st_io_destroy(c->io);
	dp_seam_wake_close(c);
	dp_buf_drain();
}

/* The core's thread (or the simulator, for the core it steps): dp_core_self() and log lines name c. */
static inline void core_enter(struct dp_core *c)
{
	dp_this_core = c;
	dp_log_set_core(c->id);
	dp_log_set_clock(&c->now_ms, &c->wall_ms);
}

int dp_core_start(struct dp_core *c)
{
	core_enter(c);
	c->wall_sync_us = 0;   /* a restarted (simulated) machine reads the wall clock at once */
	turn_clock(c);         /* the roles' start hooks stamp what they load with it */
	int rc = core_setup(c);
	turn_clock(c);
	c->idle_since_us = c->turn_us;
	c->next_timer_us = 0;
	return rc;
}

int dp_core_step(struct dp_core *c)
{
	core_enter(c);
	turn_clock(c);
	int64_t now = c->turn_us;
	int work = reap(c);
	work += roles_poll(c);
	work += drain_rings(c);
	bool due = work || now >= c->next_timer_us;
	for (uint32_t i = 0; i < c->nroles; i++)
		if (c->roles[i]->settle)
			work += c->roles[i]->settle(c, due);
	work += flush_backlog(c);
	if (now >= c->next_timer_us) {
		c->next_timer_us = now + 1000;
		for (uint32_t i = 0; i < c->nroles; i++)
			if (c->roles[i]->timer)
				c->roles[i]->timer(c);
	}
	if (c->io)
		work += st_io_flush(c->io);
	work += roles_flush(c);
	dp_seam_submit(c);
	c->loops++;
	if (work) {
		c->busy_loops++;
		c->idle_since_us = now;
	}
	return work;
}

int64_t dp_core_wake_us(struct dp_core *c)
{
	return roles_ticking(c) ? c->next_timer_us : c->turn_us + DP_SLEEP_MAX_MS * 1000;
}

void dp_core_stop(struct dp_core *c)
{
	core_enter(c);
	core_teardown(c);
	dp_log_set_clock(NULL, NULL);   /* c may be freed next (a simulated machine's restart) */
	dp_this_core = NULL;
}

int dp_core_run(struct dp_core *c)
{
	int rc = dp_core_start(c);
	atomic_fetch_add(c->b->ready, rc < 0 ? 1000 : 1);
	if (rc < 0)
		return rc;
	while (!*c->b->stop) {
		if (!dp_core_step(c) && c->turn_us - c->idle_since_us > c->b->cfg.idle_spin_us)
			core_sleep(c, roles_ticking(c) ? 1000 : DP_SLEEP_MAX_MS * 1000);
	}
	dp_core_stop(c);
	return 0;
}
