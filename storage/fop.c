/*
 * fop.c - file operations on the owner core's io_uring (see fop.h): a small
 * step machine per struct st_fop. Each step prepares one SQE, or two linked
 * ones (write -> fdatasync, rename -> directory fsync); when every CQE of
 * the step is in, it settles: the step is done (its bit leaves the plan),
 * resubmitted (the rest of a short write), or the operation fails (a replace
 * then cleans up its temp file). The next step is prepared at once; the
 * caller's callback runs when the plan is empty. Every SQE goes through a
 * storage/fs.h st_fs_prep_*, so the simulator's disk runs these steps too.
 * Locality: the io's core.
 */
#include "fop.h"
#include "fs.h"
#include "log_internal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <string.h>

/* Steps, run lowest bit first. */
#define FOP_PRESYNC 0x01u   /* fdatasync(presync_fd) */
#define FOP_OPEN    0x02u   /* openat(dirfd, tmp) -> fd */
#define FOP_WRITE   0x04u   /* write the rest of buf (linked to FOP_SYNC when that is planned too) */
#define FOP_SYNC    0x08u   /* fdatasync(fd) */
#define FOP_CLOSE   0x10u   /* close(fd) */
#define FOP_RENAME  0x20u   /* renameat(tmp -> name), linked to fsync(dirfd) */
#define FOP_DROP    0x40u   /* unlinkat(drop) */
#define FOP_CLEAN   0x80u   /* after a failure: close(fd) if open, unlinkat(tmp) */
#define FOP_PUNCH   0x100u  /* fallocate(fd, PUNCH_HOLE | KEEP_SIZE, pos, len): frees those blocks */

static st_fop_fault_fn fop_fault;

void st_fop_set_fault(st_fop_fault_fn fn)
{
	fop_fault = fn;
}

static uint64_t fop_user_data(struct st_fop *f, unsigned idx)
{
	assert(((uintptr_t)f & 15u) == 0 && idx < 2);
	return (((uint64_t)(uintptr_t)f | (uint64_t)idx << 2 | ST_OP_FOP) << 4) | ST_URING_TAG;
}

/* Room for a step's n SQEs, submitting what is queued first if the SQ lacks it (the submit does
 * not wait): a linked pair goes into the kernel in one submission, so its link holds. */
static struct io_uring *fop_ring(struct st_fop *f, unsigned n)
{
	struct io_uring *ring = f->io->ring;
	if (st_fs_sq_space(ring) < n)
		st_fs_submit(ring);
	assert(st_fs_sq_space(ring) >= n);
	return ring;
}

/* The test hook's verdict on SQE idx of the step: true if it failed it (its result is replaced at
 * completion). */
static bool fop_faulted(struct st_fop *f, unsigned idx, const char *what)
{
	int fault = fop_fault ? fop_fault(what) : 0;
	if (!fault)
		return false;
	f->res[idx] = -fault;
	f->faulted |= (uint8_t)(1u << idx);
	return true;
}

/* An injected fault: the SQE becomes a NOP (same chaining) that does nothing. */
static bool fop_fake(struct st_fop *f, unsigned idx, const char *what, unsigned link)
{
	if (!fop_faulted(f, idx, what))
		return false;
	st_fs_prep_nop(f->io->ring, fop_user_data(f, idx), link);
	return true;
}

static void fop_submit_step(struct st_fop *f)
{
	unsigned step = f->plan & (unsigned)-(int)f->plan; /* lowest bit */
	struct io_uring *ring;
	uint64_t ud0 = fop_user_data(f, 0), ud1 = fop_user_data(f, 1);

	f->step = (uint16_t)step;
	f->faulted = 0;
	f->res[0] = f->res[1] = 0;
	f->nops = f->ops_left = 1;
	switch (step) {
	case FOP_PRESYNC:
		ring = fop_ring(f, 1);
		if (!fop_fake(f, 0, "presync", 0))
			st_fs_prep_sync(ring, f->presync_fd, true, ud0, 0);
		return;
	case FOP_OPEN:
		ring = fop_ring(f, 1);
		if (!fop_fake(f, 0, "open", 0))
			st_fs_prep_openat(ring, f->dirfd, f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644, ud0, 0);
		return;
	case FOP_WRITE: {
		bool sync = f->plan & FOP_SYNC;
		/* A short or failed write cancels the linked fdatasync: both go again (as appends do). */
		unsigned link = sync ? ST_FS_LINK : 0;
		ring = fop_ring(f, sync ? 2 : 1);
		if (!fop_fake(f, 0, "write", link))
			st_fs_prep_write(ring, f->fd, f->buf + f->done, (unsigned)(f->len - f->done), f->pos + f->done, ud0,
			                 link);
		if (!sync)
			return;
		if (!fop_fake(f, 1, "datasync", 0))
			st_fs_prep_sync(ring, f->fd, true, ud1, 0);
		f->nops = f->ops_left = 2;
		return;
	}
	case FOP_SYNC:
		ring = fop_ring(f, 1);
		if (!fop_fake(f, 0, "datasync", 0))
			st_fs_prep_sync(ring, f->fd, true, ud0, 0);
		return;
	case FOP_CLOSE:
		ring = fop_ring(f, 1);
		/* A close still closes (Linux frees the descriptor whatever close reports). */
		fop_faulted(f, 0, "close");
		st_fs_prep_close(ring, f->fd, ud0, 0);
		return;
	case FOP_RENAME:
		ring = fop_ring(f, 2);
		/* The rename is durable once the directory is: fsync it right after, linked. */
		if (!fop_fake(f, 0, "rename", ST_FS_LINK))
			st_fs_prep_renameat(ring, f->dirfd, f->tmp, f->name, ud0, ST_FS_LINK);
		if (!fop_fake(f, 1, "dirsync", 0))
			st_fs_prep_sync(ring, f->dirfd, false, ud1, 0);
		f->nops = f->ops_left = 2;
		return;
	case FOP_DROP:
		ring = fop_ring(f, 1);
		if (!fop_fake(f, 0, "unlink", 0))
			st_fs_prep_unlinkat(ring, f->dirfd, f->drop, ud0, 0);
		return;
	case FOP_PUNCH:
		ring = fop_ring(f, 1);
		if (!fop_fake(f, 0, "punch", 0))
			st_fs_prep_fallocate(ring, f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, f->pos, f->len, ud0, 0);
		return;
	case FOP_CLEAN:
		if (f->fd >= 0) {
			/* Hard link: the temp file goes even if its close fails. */
			ring = fop_ring(f, 2);
			fop_faulted(f, 0, "close");
			st_fs_prep_close(ring, f->fd, ud0, ST_FS_HARDLINK);
			if (!fop_fake(f, 1, "unlink", 0))
				st_fs_prep_unlinkat(ring, f->dirfd, f->tmp, ud1, 0);
			f->nops = f->ops_left = 2;
			return;
		}
		ring = fop_ring(f, 1);
		f->res[0] = 0;
		if (!fop_fake(f, 1, "unlink", 0))
			st_fs_prep_unlinkat(ring, f->dirfd, f->tmp, ud1, 0);
		return;
	default:
		assert(!"fop: unknown step");
		return;
	}
}

static void fop_start(struct st_io *io, struct st_fop *f, unsigned plan, st_fop_cb cb, void *arg)
{
	assert(!f->busy && plan && cb);
	f->io = io;
	f->cb = cb;
	f->arg = arg;
	f->plan = (uint16_t)plan;
	f->err = 0;
	f->retries = 0;
	f->done = 0;
	f->renamed = false;
	f->busy = true;
	io->fops++;
	fop_submit_step(f);
}

static void fop_write(struct st_io *io, struct st_fop *f, int fd, const void *buf, size_t len, uint64_t pos,
                      unsigned plan, st_fop_cb cb, void *arg)
{
	assert(len > 0 && len <= UINT32_MAX);
	f->fd = fd;
	f->buf = buf;
	f->len = len;
	f->pos = pos;
	f->tmp = f->name = f->drop = NULL;
	f->keep = false;
	fop_start(io, f, plan, cb, arg);
}

void st_fop_write(struct st_io *io, struct st_fop *f, int fd, const void *buf, size_t len, uint64_t pos,
                  st_fop_cb cb, void *arg)
{
	fop_write(io, f, fd, buf, len, pos, FOP_WRITE, cb, arg);
}

void st_fop_write_sync(struct st_io *io, struct st_fop *f, int fd, const void *buf, size_t len, uint64_t pos,
                       st_fop_cb cb, void *arg)
{
	fop_write(io, f, fd, buf, len, pos, FOP_WRITE | FOP_SYNC, cb, arg);
}

void st_fop_create(struct st_io *io, struct st_fop *f, int dirfd, const char *name, const void *buf, size_t len,
                   st_fop_cb cb, void *arg)
{
	assert(name && len > 0 && len <= UINT32_MAX);
	f->fd = -1;
	f->dirfd = dirfd;
	f->tmp = f->name = name;   /* opened, written and (on a failure) removed under its own name */
	f->drop = NULL;
	f->buf = buf;
	f->len = len;
	f->pos = 0;
	f->presync_fd = -1;
	f->keep = false;
	fop_start(io, f, FOP_OPEN | FOP_WRITE | FOP_CLOSE, cb, arg);
}

void st_fop_close(struct st_io *io, struct st_fop *f, int fd, st_fop_cb cb, void *arg)
{
	f->fd = fd;
	f->buf = NULL;
	f->len = 0;
	f->tmp = f->name = f->drop = NULL;
	f->keep = false;
	fop_start(io, f, FOP_CLOSE, cb, arg);
}

void st_fop_close_drop(struct st_io *io, struct st_fop *f, int fd, int dirfd, const char *drop, st_fop_cb cb,
                       void *arg)
{
	assert(drop);
	f->fd = fd;
	f->dirfd = dirfd;
	f->buf = NULL;
	f->len = 0;
	f->tmp = f->name = NULL;
	f->drop = drop;
	f->keep = false;
	fop_start(io, f, (fd >= 0 ? FOP_CLOSE : 0) | FOP_DROP, cb, arg);
}

void st_fop_punch(struct st_io *io, struct st_fop *f, int fd, uint64_t pos, uint64_t len, st_fop_cb cb, void *arg)
{
	f->fd = fd;
	f->pos = pos;
	f->len = (size_t)len;
	fop_start(io, f, FOP_PUNCH, cb, arg);
}

void st_fop_datasync(struct st_io *io, struct st_fop *f, int fd, st_fop_cb cb, void *arg)
{
	f->fd = fd;
	f->buf = NULL;
	f->len = 0;
	f->tmp = f->name = f->drop = NULL;
	f->keep = false;
	fop_start(io, f, FOP_SYNC, cb, arg);
}

static void replace_start(struct st_io *io, struct st_fop *f, int dirfd, const char *tmp, const char *name,
                          const char *drop, const void *buf, size_t len, int presync_fd, bool keep, st_fop_cb cb,
                          void *arg)
{
	assert(tmp && name && len > 0 && len <= UINT32_MAX);
	f->fd = -1;
	f->dirfd = dirfd;
	f->tmp = tmp;
	f->name = name;
	f->drop = drop;
	f->buf = buf;
	f->len = len;
	f->pos = 0;
	f->presync_fd = presync_fd;
	f->keep = keep;
	unsigned plan = FOP_OPEN | FOP_WRITE | FOP_SYNC | (keep ? 0 : FOP_CLOSE) | FOP_RENAME;
	if (presync_fd >= 0)
		plan |= FOP_PRESYNC;
	if (drop)
		plan |= FOP_DROP;
	fop_start(io, f, plan, cb, arg);
}

void st_fop_replace(struct st_io *io, struct st_fop *f, int dirfd, const char *tmp, const char *name,
                    const char *drop, const void *buf, size_t len, int presync_fd, st_fop_cb cb, void *arg)
{
	replace_start(io, f, dirfd, tmp, name, drop, buf, len, presync_fd, false, cb, arg);
}

void st_fop_replace_open(struct st_io *io, struct st_fop *f, int dirfd, const char *tmp, const char *name,
                         const void *buf, size_t len, st_fop_cb cb, void *arg)
{
	replace_start(io, f, dirfd, tmp, name, NULL, buf, len, -1, true, cb, arg);
}

static void fop_fail(struct st_fop *f, int err)
{
	assert(err < 0);
	if (!f->err)
		f->err = err;
	/* A replace leaves no temp file behind; the old name is untouched (or whole, after the rename:
	 * replace_open's file then stays open, the caller's). */
	if (f->keep && f->renamed)
		f->plan = 0;
	else
		f->plan = f->tmp && f->step != FOP_CLEAN ? FOP_CLEAN : 0;
}

static bool transient(int res)
{
	return res == -EAGAIN || res == -EINTR;
}

/* Every CQE of the step is in: decide what comes next. */
static void fop_settle(struct st_fop *f)
{
	int r0 = f->res[0], r1 = f->res[1];

	switch (f->step) {
	case FOP_PRESYNC:
	case FOP_SYNC:
		if (r0 < 0 && !transient(r0))
			fop_fail(f, r0);
		else if (r0 == 0)
			f->plan &= (uint16_t)~f->step;
		break; /* transient: again */
	case FOP_OPEN:
		if (r0 < 0)
			fop_fail(f, r0);
		else {
			f->fd = r0;
			f->plan &= (uint16_t)~FOP_OPEN;
		}
		break;
	case FOP_WRITE:
		if (r0 < 0 && !transient(r0)) {
			fop_fail(f, r0);
			break;
		}
		if (r0 > 0) {
			assert(f->done + (size_t)r0 <= f->len);
			f->done += (size_t)r0;
			f->retries = 0;
		} else if (++f->retries > ST_IO_RETRIES_MAX) {
			fop_fail(f, -EIO);
			break;
		}
		if (f->done < f->len)
			break; /* the rest (and its sync) go again */
		f->plan &= (uint16_t)~FOP_WRITE;
		/* The write is whole, so the linked sync ran after it (cancelled or transient: alone next). */
		if (f->nops == 2 && r1 == 0)
			f->plan &= (uint16_t)~FOP_SYNC;
		else if (f->nops == 2 && r1 < 0 && r1 != -ECANCELED && !transient(r1))
			fop_fail(f, r1);
		break;
	case FOP_CLOSE:
		f->fd = -1; /* Linux releases the descriptor even when close reports an error */
		if (r0 < 0)
			fop_fail(f, r0);
		else
			f->plan &= (uint16_t)~FOP_CLOSE;
		break;
	case FOP_RENAME:
		f->renamed = r0 == 0;
		if (r0 < 0)
			fop_fail(f, r0);
		else if (r1 < 0)
			fop_fail(f, r1 == -ECANCELED ? -EIO : r1);
		else
			f->plan &= (uint16_t)~FOP_RENAME;
		break;
	case FOP_DROP:
		if (r0 < 0 && r0 != -ENOENT)
			fprintf(stderr, "sluice storage: cannot remove %s: %s\n", f->drop, strerror(-r0));
		f->plan &= (uint16_t)~FOP_DROP;
		break;
	case FOP_CLEAN:
		f->fd = -1;
		f->plan = 0;
		break;
	case FOP_PUNCH:
		if (r0 < 0 && !transient(r0))
			fop_fail(f, r0);
		else if (r0 == 0)
			f->plan &= (uint16_t)~FOP_PUNCH;
		break;
	}
}

void st_fop_complete(struct st_io *io, struct st_fop *f, unsigned idx, int res)
{
	assert(f->busy && f->io == io && f->ops_left > 0 && idx < 2);
	if (!(f->faulted & (1u << idx)))
		f->res[idx] = res;
	if (--f->ops_left)
		return;
	fop_settle(f);
	if (f->plan) {
		fop_submit_step(f);
		return;
	}
	f->busy = false;
	io->fops--;
	f->cb(f->arg, f->err); /* last: the callback may start the next operation on f */
}
