/*
 * seam.h - what a core's loop asks of the machine: the clock, its io_uring
 * (set up, submit, reap completions, the eventfd wake-up read, sleep, wake
 * another core) and a fetch's cold read; seam_nic.h: the NIC a data core
 * listens on.
 *
 * Locality: each call is on the core it names (dp_seam_wake: the sender's,
 * naming the destination).
 *
 * Two implementations, chosen when a file is compiled, never at run time,
 * as storage/fs.h does:
 *   - the normal build: every dp_seam_* below is a static inline over the
 *     real io_uring, eventfd and clock_gettime, exactly what core.c,
 *     conn_role.c and shard/read.c did before the seam existed (no indirect
 *     call, nothing per message);
 *   - -DDP_LOOP_SIM (tests/sim/wsim.c only, with -DST_FS_SIM): the same
 *     names are extern functions of the whole-broker simulator, which steps
 *     every core on one thread (dp_core_step) against its virtual clock,
 *     the in-memory disk's ring (tests/sim/sim_disk.c) and the in-memory NIC
 *     (nic/nic_sim.c). There a core never sleeps and nobody needs waking:
 *     the simulator looks at every core's rings itself.
 */
#ifndef SLUICE_DP_LOOP_SEAM_H
#define SLUICE_DP_LOOP_SEAM_H

#include <stdint.h>

#include "loop.h"

#define DP_CORE_TAG 3u   /* user_data tag of the core's own SQEs (the wake-up read) */

#ifndef DP_LOOP_SIM

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <liburing.h>

static inline int64_t dp_seam_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int64_t dp_seam_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The ring storage and the roles submit on. */
static inline struct io_uring *dp_seam_ring(struct dp_core *c) { return &c->ring; }

/* Core setup: the io_uring and the wake-up eventfd; 0 or -errno. */
static inline int dp_seam_ring_init(struct dp_core *c)
{
	struct io_uring_params p = { .flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
	                                      IORING_SETUP_SINGLE_ISSUER };
	int rc = io_uring_queue_init_params(DP_URING_ENTRIES, &c->ring, &p);
	if (rc == -EINVAL) {   /* older kernels: plain ring */
		memset(&p, 0, sizeof(p));
		rc = io_uring_queue_init_params(DP_URING_ENTRIES, &c->ring, &p);
	}
	if (rc < 0)
		return rc;
	c->efd = eventfd(0, EFD_CLOEXEC);
	return c->efd < 0 ? -errno : 0;
}

/* Stop: the ring goes (the kernel then holds no buffer of a role's). */
static inline void dp_seam_ring_exit(struct dp_core *c) { io_uring_queue_exit(&c->ring); }
/* Stop, last: the wake-up eventfd. */
static inline void dp_seam_wake_close(struct dp_core *c) { close(c->efd); }

static inline void dp_seam_submit(struct dp_core *c) { io_uring_submit(&c->ring); }

/* The read of the wake-up eventfd that ends a sleep when another core writes it. */
static inline void dp_seam_arm_wakeup(struct dp_core *c)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
	if (!sqe) {
		io_uring_submit(&c->ring);
		sqe = io_uring_get_sqe(&c->ring);
	}
	io_uring_prep_read(sqe, c->efd, &c->efd_buf, sizeof(c->efd_buf), 0);
	io_uring_sqe_set_data64(sqe, DP_CORE_TAG);
}

/* A sender wakes dst if it sleeps (after publishing to dst's ring). */
static inline void dp_seam_wake(struct dp_core *dst)
{
	/* seq_cst: orders our ring publish before reading the flag; pairs with the
	 * fence in core_sleep() between setting `sleeping` and re-checking rings. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&dst->sleeping, memory_order_relaxed)) {
		ssize_t w = write(dst->efd, &(uint64_t){ 1 }, sizeof(uint64_t));
		(void)w;
	}
}

/* Sleep in the kernel until a completion, a wake-up or max_us. */
static inline void dp_seam_wait(struct dp_core *c, int64_t max_us)
{
	struct __kernel_timespec ts = { .tv_sec = max_us / 1000000, .tv_nsec = (max_us % 1000000) * 1000 };
	struct io_uring_cqe *cqe;
	io_uring_submit_and_wait_timeout(&c->ring, &cqe, 1, &ts, NULL);
}

/* Take up to DP_CQE_BURST completions, each to on(c, cqe); returns how many. */
static inline unsigned dp_seam_reap(struct dp_core *c, void (*on)(struct dp_core *c, const struct io_uring_cqe *cqe))
{
	struct io_uring_cqe *cqes[DP_CQE_BURST];
	unsigned n = io_uring_peek_batch_cqe(&c->ring, cqes, DP_CQE_BURST);
	for (unsigned i = 0; i < n; i++)
		on(c, cqes[i]);
	io_uring_cq_advance(&c->ring, n);
	return n;
}

/* Queue a read of len bytes at pos of fd into buf; its completion carries user_data. */
static inline void dp_seam_prep_read(struct dp_core *c, int fd, void *buf, uint32_t len, uint64_t pos,
                                     uint64_t user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
	if (!sqe) {
		io_uring_submit(&c->ring);
		sqe = io_uring_get_sqe(&c->ring);
	}
	assert(sqe);   /* just submitted: there is room */
	io_uring_prep_read(sqe, fd, buf, len, pos);
	io_uring_sqe_set_data64(sqe, user_data);
}

#else /* DP_LOOP_SIM: tests/sim/wsim.c */

int64_t dp_seam_mono_us(void);
int64_t dp_seam_wall_ms(void);
struct io_uring *dp_seam_ring(struct dp_core *c);
int dp_seam_ring_init(struct dp_core *c);
void dp_seam_ring_exit(struct dp_core *c);
void dp_seam_wake_close(struct dp_core *c);
void dp_seam_submit(struct dp_core *c);
void dp_seam_arm_wakeup(struct dp_core *c);
void dp_seam_wake(struct dp_core *dst);
void dp_seam_wait(struct dp_core *c, int64_t max_us);
unsigned dp_seam_reap(struct dp_core *c, void (*on)(struct dp_core *c, const struct io_uring_cqe *cqe));
void dp_seam_prep_read(struct dp_core *c, int fd, void *buf, uint32_t len, uint64_t pos, uint64_t user_data);

#endif

#endif
