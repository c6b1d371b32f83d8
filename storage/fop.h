/*
 * fop.h - file operations other than appends on the owner core's io_uring
 * (interface for other folders): a whole-buffer write, an fdatasync, and an
 * atomic file replace (temp file, fdatasync, rename, directory fsync).
 *
 * Locality: a struct st_fop belongs to the core whose struct st_io runs it;
 * its callback runs on that core from st_io_complete, never from the call
 * that starts it. One operation per struct st_fop at a time.
 *
 * A poll core must not wait for the disk, so the producer-state snapshot,
 * the aborted-index appends and syncs and the producer-id block go through
 * the same ring as appends: each step is an SQE, and its completion starts
 * the next. The order of durability is the synchronous one's:
 *
 *   replace: [fdatasync(presync_fd)] -> openat(tmp, O_CREAT|O_TRUNC)
 *            -> write (all of it; a short write resubmits the rest)
 *               -> fdatasync (linked)  -> close
 *            -> renameat(tmp, name)  -> fsync(dirfd) (linked)
 *            -> [unlinkat(drop)]      -> callback(0)
 *
 * so `name` appears only with its whole content durable, and the callback
 * (0) says the rename is durable too. A failure before the rename closes
 * and unlinks the temp file (best effort) and calls back with -errno; the
 * old `name` is untouched. A failure of the directory fsync after the rename
 * reports -errno: the new file may or may not survive a crash, either is a
 * whole file. The unlink of `drop` is best effort (its failure is logged,
 * not reported).
 */
#ifndef SLUICE_STORAGE_FOP_H
#define SLUICE_STORAGE_FOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct st_io;

typedef void (*st_fop_cb)(void *arg, int status);

/* One operation in flight; embed it in its owner (16-byte aligned: malloc'd or static), zeroed
 * before its first use (an idle one). Fields are the engine's; read them through the inline
 * functions below. Locality: the io's core. */
struct st_fop {
	_Alignas(16) struct st_io *io;  /* 16: the low bits of its address carry the op in user_data */
	st_fop_cb cb;
	void *arg;
	const uint8_t *buf;
	size_t len, done;          /* bytes to write, written so far */
	uint64_t pos;              /* file position of buf[0] */
	const char *tmp, *name, *drop; /* replace: names relative to dirfd (caller's memory) */
	int fd;                    /* the file written or synced; replace: the temp file, -1 closed */
	int dirfd;
	int presync_fd;            /* replace: fdatasync this first (-1: none) */
	int err;                   /* first error of the operation */
	int res[2];                /* results of the step's SQEs (second: the linked one) */
	uint32_t retries;          /* consecutive writes without progress */
	uint16_t plan;             /* steps still to run (bits, fop.c) */
	uint16_t step;             /* step of the SQEs in flight */
	uint8_t nops, ops_left;    /* SQEs of that step; CQEs still expected for them */
	uint8_t faulted;           /* test hook: which of them were injected failures */
	bool keep;                 /* replace_open: the new file stays open */
	bool renamed;              /* replace: the rename was done */
	bool busy;
};

/* Write all of buf[0, len) at pos of fd (no sync). */
void st_fop_write(struct st_io *io, struct st_fop *f, int fd, const void *buf, size_t len, uint64_t pos,
                  st_fop_cb cb, void *arg);
/* The same, with an fdatasync(fd) linked after the write: the callback (0) says the bytes are durable. */
void st_fop_write_sync(struct st_io *io, struct st_fop *f, int fd, const void *buf, size_t len, uint64_t pos,
                       st_fop_cb cb, void *arg);
/* fdatasync(fd). */
void st_fop_datasync(struct st_io *io, struct st_fop *f, int fd, st_fop_cb cb, void *arg);
/* Replace dirfd/name with buf[0, len) atomically (see the header comment). drop: NULL or a name to
 * unlink once the rename is durable; presync_fd: -1 or a file to fdatasync before anything else. */
void st_fop_replace(struct st_io *io, struct st_fop *f, int dirfd, const char *tmp, const char *name,
                    const char *drop, const void *buf, size_t len, int presync_fd, st_fop_cb cb, void *arg);

/* As st_fop_replace, but the new file stays open for writing (no close step): in the callback
 * st_fop_fd(f) is its descriptor, now the caller's, once the rename was done (status 0, or a
 * failed directory fsync after it: st_fop_renamed(f)); -1 otherwise (closed, temp file gone). */
void st_fop_replace_open(struct st_io *io, struct st_fop *f, int dirfd, const char *tmp, const char *name,
                         const void *buf, size_t len, st_fop_cb cb, void *arg);
/* Create (or truncate) dirfd/name and write buf[0, len) into it, then close it; no sync, no
 * rename (a cache that its reader validates). A failure removes the partial file. */
void st_fop_create(struct st_io *io, struct st_fop *f, int dirfd, const char *name, const void *buf, size_t len,
                   st_fop_cb cb, void *arg);
/* close(fd) (the last reference to a replaced file frees its blocks: not on the poll core). */
void st_fop_close(struct st_io *io, struct st_fop *f, int fd, st_fop_cb cb, void *arg);
/* close(fd) (fd < 0: none), then unlinkat(dirfd, drop): a file removed off the core's thread. A
 * failed close is reported and skips the unlink; the unlink is best effort (logged, not reported). */
void st_fop_close_drop(struct st_io *io, struct st_fop *f, int fd, int dirfd, const char *drop, st_fop_cb cb,
                       void *arg);

/* fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, pos, len): the range's blocks freed (on a
 * kernel worker, as every step), the file's size kept. -EOPNOTSUPP where the file system has no holes. */
void st_fop_punch(struct st_io *io, struct st_fop *f, int fd, uint64_t pos, uint64_t len, st_fop_cb cb, void *arg);
static inline bool st_fop_busy(const struct st_fop *f) { return f->busy; }
static inline int st_fop_fd(const struct st_fop *f) { return f->fd; }
static inline bool st_fop_renamed(const struct st_fop *f) { return f->renamed; }

/*
 * Test hook (unit tests and the simulator's disk): when set, called for each
 * SQE the engine prepares with its step name ("open", "write", "datasync",
 * "close", "rename", "dirsync", "unlink", "presync", "punch"); a non-zero return makes
 * that step fail with that -errno as if the kernel had returned it.
 */
typedef int (*st_fop_fault_fn)(const char *step);
void st_fop_set_fault(st_fop_fault_fn fn);

#endif
