/*
 * pid.c - producer ids for idempotent producers, never reused: ids are
 * handed out from blocks, and a block is recorded on disk before any id in
 * it is given to a client. After a crash the next block starts past every
 * id that may have been issued. Locality: control core.
 *
 * File DATA/__producer_ids (written atomically: temp, fdatasync, rename, directory fsync;
 * at start-up synchronously, then ahead of need through the core's io_uring, storage/fop.h):
 *   offset  size  field
 *        0     4  magic "SLPI"
 *        4     8  next block start (int64, big-endian): no id >= this was issued
 *       12     4  CRC32C of bytes 0..11
 * Its bytes are encoded and checked in pidfile.c (pure; fuzzed by tests/fuzz/fuzz_pidfile.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fop.h"
#include "kerr.h"
#include "pidfile.h"
#include "control_internal.h"

#define DP_PID_FILE "__producer_ids"
#define DP_PID_TMP "__producer_ids.tmp"

/* The block record being written through the core's io_uring. Locality: control core. */
struct dp_pid_write {
	struct st_fop fop;
	uint8_t buf[DP_PID_FILE_BYTES];
};
#define DP_EPOCH_MAX 32766   /* Kafka bumps to a new id when the epoch would reach Short.MAX_VALUE */

/* Synchronous: start-up only (the first block, before any core runs). */
static int write_block(struct dp_pids *p, int64_t next)
{
	uint8_t b[DP_PID_FILE_BYTES];
	dp_pid_file_encode(b, next);
	int fd = openat(p->dirfd, DP_PID_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int rc = write(fd, b, sizeof(b)) == (ssize_t)sizeof(b) && fdatasync(fd) == 0 ? 0 : -EIO;
	close(fd);
	if (rc == 0 && renameat(p->dirfd, DP_PID_TMP, p->dirfd, DP_PID_FILE) < 0)
		rc = -errno;
	if (rc == 0 && fsync(p->dirfd) < 0)
		rc = -errno;
	return rc;
}

/* init only: read the next block start (a missing file starts at 0) and record the first block. */
int dp_pid_init(struct dp_pids *p, const char *dir)
{
	p->dir = dir;
	p->next = p->end = 0;
	p->writing = -1;
	if (!p->w && !(p->w = calloc(1, sizeof(*p->w))))
		return -ENOMEM;
	p->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p->dirfd < 0)
		return -errno;
	int fd = openat(p->dirfd, DP_PID_FILE, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		return -errno;
	if (fd >= 0) {
		uint8_t b[DP_PID_FILE_BYTES + 1];   /* one more: a longer file is not one record either */
		ssize_t n = read(fd, b, sizeof(b));
		close(fd);
		int64_t end;
		int drc = n < 0 ? -errno : dp_pid_file_decode(b, (size_t)n, &end);
		if (drc < 0) {
			DP_ERR("%s/%s is %s; refusing to start (ids could be reused)", dir, DP_PID_FILE,
			       drc == -ERANGE ? "not a block end the broker writes" : "damaged");
			return drc;
		}
		p->next = p->end = end;
	}
	/* The first block now, so that the control core's first InitProducerId has an id at hand. */
	int64_t block = dp_pid_next_block(p->end);
	if (block < 0) {
		DP_ERR("%s/%s: every producer id was issued; refusing to start", dir, DP_PID_FILE);
		return -ENOSPC;
	}
	int rc = write_block(p, block);
	if (rc < 0) {
		DP_ERR("cannot record producer id block: %s", strerror(-rc));
		return rc;
	}
	p->end = block;
	return 0;
}

static void block_written(void *arg, int status)
{
	struct dp_pids *p = arg;
	if (status < 0)
		DP_ERR("cannot record producer id block: %s (InitProducerId answers "
		       "COORDINATOR_LOAD_IN_PROGRESS until a write succeeds)", strerror(-status));
	else
		p->end = p->writing;   /* durable: its ids may be handed out */
	p->writing = -1;
}

int64_t dp_pid_alloc(struct dp_pids *p, struct st_io *io)
{
	/* The next block is recorded ahead, through the core's io_uring, when half of this one is gone:
	 * a block is on disk before any id in it is handed out, and no InitProducerId waits for a disk. */
	if (p->writing < 0 && p->end - p->next <= DP_PID_BLOCK / 2 && dp_pid_next_block(p->end) >= 0) {
		p->writing = dp_pid_next_block(p->end);
		dp_pid_file_encode(p->w->buf, p->writing);
		st_fop_replace(io, &p->w->fop, p->dirfd, DP_PID_TMP, DP_PID_FILE, NULL, p->w->buf, sizeof(p->w->buf), -1,
		               block_written, p);
	}
	if (p->next < p->end)
		return p->next++;
	if (p->writing >= 0 || dp_pid_next_block(p->end) >= 0)
		return -EAGAIN;   /* the next block is not durable yet (or its write failed): the client retries */
	/* No block fits below DP_PID_END_MAX: as Kafka's id manager, fatal for new ids (no retry helps),
	 * said once; epoch bumps of issued ids go on. */
	if (!p->exhausted)
		DP_ERR("every producer id was issued (the last block ends at %lld): InitProducerId for a new id "
		       "answers UNKNOWN_SERVER_ERROR from now on", (long long)p->end);
	p->exhausted = true;
	return -ENOSPC;
}

/*
 * InitProducerId without a transactional id. A request carrying its current
 * id and epoch (KIP-360, v3+) gets the same id with the epoch bumped, so the
 * producer can reset its sequences without a new identity; at the epoch
 * limit, or for an id we never issued, it gets a fresh id.
 */
void dp_pid_init_producer(struct dp_core *c, struct dp_msg *m)
{
	struct dp_pids *p = c->ctrl_pids;
	struct dp_msg r = { .type = DP_MSG_INIT_PID_DONE, .ctx = m->ctx, .idx = m->idx, .gen = m->gen };
	int64_t pid = m->u.pid.pid;
	int16_t epoch = m->u.pid.epoch;
	if (pid >= 0 && pid < p->next && epoch >= 0 && epoch < DP_EPOCH_MAX) {
		r.u.pid.pid = pid;
		r.u.pid.epoch = (int16_t)(epoch + 1);
	} else {
		int64_t pid = dp_pid_alloc(p, c->io);
		r.u.pid.pid = pid;
		r.u.pid.epoch = 0;
		if (pid < 0)   /* as Kafka without an id block: retriable; with none left: fatal */
			r.err = pid == -ENOSPC ? KERR_UNKNOWN_SERVER_ERROR : KERR_COORDINATOR_LOAD_IN_PROGRESS;
	}
	dp_answer(c, m, &r);
}
