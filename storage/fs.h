/*
 * fs.h - the file operations of the storage layer (storage/log.c, and the
 * transaction files of txn/lso.c and txn/pstate.c), in one narrow interface.
 *
 * Locality: any (each call is on the core that owns the file it names).
 *
 * Two implementations, chosen when a file is compiled, never at run time:
 *   - the normal build: every st_fs_* below is a static inline call of the
 *     POSIX function of the same name, and the submission calls prepare
 *     SQEs on the core's io_uring, exactly as the code did before this
 *     interface existed (no indirect call, no copy, nothing per byte);
 *   - -DST_FS_SIM (tests/sim only): the same names are extern functions of
 *     the deterministic simulator's disk (tests/sim/sim_disk.c), which keeps
 *     files in memory, completes submissions late and out of order, tears
 *     unsynced writes at a simulated crash, fails fdatasync and runs out of
 *     space, all from one seed.
 * The contract is POSIX's: -1 and errno for the synchronous calls; the
 * submitted operations complete through st_io_complete() with a CQE whose
 * res is a byte count, a descriptor (openat) or -errno. An operation
 * submitted with link ST_FS_LINK is followed by the one submitted next,
 * which runs only if this one succeeded (a write: wrote everything), else
 * it completes -ECANCELED, as IOSQE_IO_LINK does; ST_FS_HARDLINK keeps the
 * order but runs the next one whatever this one returned (IOSQE_IO_HARDLINK).
 * Every io_uring operation the storage and transaction files submit (the
 * appends in storage/log.c, the engine in storage/fop.c) goes through a
 * st_fs_prep_* here, so the simulator sees each of them.
 */
#ifndef SLUICE_STORAGE_FS_H
#define SLUICE_STORAGE_FS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

struct io_uring;

/* How a submission is chained to the next one (the link argument of st_fs_prep_*). */
#define ST_FS_LINK 1u       /* the next runs after this one, only if it succeeded */
#define ST_FS_HARDLINK 2u   /* the next runs after this one, whatever it returned */

#ifndef ST_FS_SIM

#include <assert.h>
#include <liburing.h>
#include <stdio.h>

static inline int st_fs_open(const char *path, int flags, mode_t mode) { return open(path, flags, mode); }
static inline int st_fs_openat(int dirfd, const char *name, int flags, mode_t mode)
{
	return openat(dirfd, name, flags, mode);
}
static inline int st_fs_close(int fd) { return close(fd); }
static inline int st_fs_dup(int fd) { return dup(fd); }
static inline ssize_t st_fs_pread(int fd, void *buf, size_t len, off_t pos) { return pread(fd, buf, len, pos); }
/* A read that never waits for the disk: what the page cache holds, -1/EAGAIN if none of it. */
static inline ssize_t st_fs_pread_nowait(int fd, void *buf, size_t len, off_t pos)
{
	struct iovec iov = { buf, len };
	return preadv2(fd, &iov, 1, pos, RWF_NOWAIT);
}
static inline ssize_t st_fs_pwrite(int fd, const void *buf, size_t len, off_t pos)
{
	return pwrite(fd, buf, len, pos);
}
static inline ssize_t st_fs_write(int fd, const void *buf, size_t len) { return write(fd, buf, len); }
static inline int st_fs_fstat(int fd, struct stat *st) { return fstat(fd, st); }
/*
 * O_DIRECT's alignment for fd's file (statx STATX_DIOALIGN, Linux 6.1+): what file offsets
 * and lengths must be a multiple of, in bytes, and *mem what buffer addresses must be; 0 when
 * the kernel or file system does not say; -1 with errno EOPNOTSUPP when it says the file
 * cannot do direct io, or statx's own errno.
 */
static inline int st_fs_dio_align(int fd, uint32_t *mem)
{
	*mem = 0;
#ifdef STATX_DIOALIGN
	struct statx stx;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) < 0)
		return -1;
	if (!(stx.stx_mask & STATX_DIOALIGN))
		return 0;
	if (!stx.stx_dio_offset_align) {
		errno = EOPNOTSUPP;
		return -1;
	}
	*mem = stx.stx_dio_mem_align;
	return (int)stx.stx_dio_offset_align;
#else
	(void)fd;
	return 0;
#endif
}
static inline int st_fs_ftruncate(int fd, off_t len) { return ftruncate(fd, len); }
static inline int st_fs_fsync(int fd) { return fsync(fd); }
static inline int st_fs_fdatasync(int fd) { return fdatasync(fd); }
static inline int st_fs_mkdir(const char *path, mode_t mode) { return mkdir(path, mode); }
static inline int st_fs_rmdir(const char *path) { return rmdir(path); }
static inline int st_fs_unlink(const char *path) { return unlink(path); }
static inline int st_fs_unlinkat(int dirfd, const char *name, int flags) { return unlinkat(dirfd, name, flags); }
static inline int st_fs_rename(const char *from, const char *to) { return rename(from, to); }
static inline DIR *st_fs_opendir(const char *path) { return opendir(path); }
static inline DIR *st_fs_fdopendir(int fd) { return fdopendir(fd); }
static inline struct dirent *st_fs_readdir(DIR *d) { return readdir(d); }
static inline void st_fs_rewinddir(DIR *d) { rewinddir(d); }
static inline int st_fs_closedir(DIR *d) { return closedir(d); }

/* Free submission slots on ring. */
static inline unsigned st_fs_sq_space(struct io_uring *ring) { return io_uring_sq_space_left(ring); }
/* Queue a writev of iov[0..n) at pos; link: the next submission (a sync) runs only after all of it. */
static inline void st_fs_prep_writev(struct io_uring *ring, int fd, const struct iovec *iov, unsigned n,
                                     uint64_t pos, uint64_t user_data, bool link)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	assert(sqe); /* callers check st_fs_sq_space first */
	io_uring_prep_writev(sqe, fd, iov, n, pos);
	io_uring_sqe_set_data64(sqe, user_data);
	if (link)
		sqe->flags |= IOSQE_IO_LINK;
}
/* Queue an fdatasync of fd. */
static inline void st_fs_prep_fdatasync(struct io_uring *ring, int fd, uint64_t user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	assert(sqe);
	io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data64(sqe, user_data);
}

/* Submit what is queued on ring (it does not wait for completions): frees SQ slots. */
static inline void st_fs_submit(struct io_uring *ring) { io_uring_submit(ring); }

/* The SQE for st_fs_prep_* below. */
static inline struct io_uring_sqe *st_fs_sqe(struct io_uring *ring)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	assert(sqe); /* callers check st_fs_sq_space first (or st_fs_submit) */
	return sqe;
}
/* After the prep (which clears the flags): the CQE's user_data and the chaining. */
static inline void st_fs_sqe_done(struct io_uring_sqe *sqe, uint64_t user_data, unsigned link)
{
	io_uring_sqe_set_data64(sqe, user_data);
	if (link & ST_FS_LINK)
		sqe->flags |= IOSQE_IO_LINK;
	if (link & ST_FS_HARDLINK)
		sqe->flags |= IOSQE_IO_HARDLINK;
}
/* Queue a write of buf[0, len) at pos of fd. */
static inline void st_fs_prep_write(struct io_uring *ring, int fd, const void *buf, unsigned len, uint64_t pos,
                                    uint64_t user_data, unsigned link)
{
	struct io_uring_sqe *sqe = st_fs_sqe(ring);
	io_uring_prep_write(sqe, fd, buf, len, pos);
	st_fs_sqe_done(sqe, user_data, link);
}
/* Queue an fdatasync (datasync) or fsync (a directory: the names in it) of fd. */
static inline void st_fs_prep_sync(struct io_uring *ring, int fd, bool datasync, uint64_t user_data, unsigned link)
{
	struct io_uring_sqe *sqe = st_fs_sqe(ring);
	io_uring_prep_fsync(sqe, fd, datasync ? IORING_FSYNC_DATASYNC : 0);
	st_fs_sqe_done(sqe, user_data, link);
}
/* Queue openat(dirfd, name, flags, mode); res is the new descriptor. name stays valid until done. */
static inline void st_fs_prep_openat(struct io_uring *ring, int dirfd, const char *name, int flags, mode_t mode,
                                     uint64_t user_data, unsigned link)
{
	struct io_uring_sqe *sqe = st_fs_sqe(ring);
	io_uring_prep_openat(sqe, dirfd, name, flags, mode);
	st_fs_sqe_done(sqe, user_data, link);
}
/* Queue renameat(dirfd, from, dirfd, to). */
static inline void st_fs_prep_renameat(struct io_uring *ring, int dirfd, const char *from, const char *to,
                                       uint64_t user_data, unsigned link)
{
	struct io_uring_sqe *sqe = st_fs_sqe(ring);
	io_uring_prep_renameat(sqe, dirfd, from, dirfd, to, 0);
	st_fs_sqe_done(sqe, user_data, link);
}
/* Queue unlinkat(dirfd, name, 0). */
static inline void st_fs_prep_unlinkat(struct io_uring *ring, int dirfd, const char *name, uint64_t user_data,
                                       unsigned link)
{
	struct io_uring_sqe *sqe = st_fs_sqe(ring);
	io_uring_prep_unlinkat(sqe, dirfd, name, 0);
	st_fs_sqe_done(sqe, user_data, link);
}
/* Queue fallocate(fd, mode, pos, len) (storage/log.c: FALLOC_FL_KEEP_SIZE, space reserved ahead
 * of the appends without changing the file's size). */
static inline void st_fs_prep_fallocate(struct io_uring *ring, int fd, int mode, uint64_t pos, uint64_t len,
                                        uint64_t user_data, unsigned link)
{
	struct io_uring_sqe *sqe = st_fs_sqe(ring);
	io_uring_prep_fallocate(sqe, fd, mode, (off_t)pos, (off_t)len);
	st_fs_sqe_done(sqe, user_data, link);
}
/* Queue close(fd). */
static inline void st_fs_prep_close(struct io_uring *ring, int fd, uint64_t user_data, unsigned link)
{
	struct io_uring_sqe *sqe = st_fs_sqe(ring);
	io_uring_prep_close(sqe, fd);
	st_fs_sqe_done(sqe, user_data, link);
}
/* Queue an operation that does nothing and completes 0 (an injected fault's stand-in, storage/fop.c). */
static inline void st_fs_prep_nop(struct io_uring *ring, uint64_t user_data, unsigned link)
{
	struct io_uring_sqe *sqe = st_fs_sqe(ring);
	io_uring_prep_nop(sqe);
	st_fs_sqe_done(sqe, user_data, link);
}

#else /* ST_FS_SIM: tests/sim/sim_disk.c */

int st_fs_open(const char *path, int flags, mode_t mode);
int st_fs_openat(int dirfd, const char *name, int flags, mode_t mode);
int st_fs_close(int fd);
int st_fs_dup(int fd);
ssize_t st_fs_pread(int fd, void *buf, size_t len, off_t pos);
ssize_t st_fs_pread_nowait(int fd, void *buf, size_t len, off_t pos);
ssize_t st_fs_pwrite(int fd, const void *buf, size_t len, off_t pos);
ssize_t st_fs_write(int fd, const void *buf, size_t len);
int st_fs_fstat(int fd, struct stat *st);
int st_fs_dio_align(int fd, uint32_t *mem);
int st_fs_ftruncate(int fd, off_t len);
int st_fs_fsync(int fd);
int st_fs_fdatasync(int fd);
int st_fs_mkdir(const char *path, mode_t mode);
int st_fs_rmdir(const char *path);
int st_fs_unlink(const char *path);
int st_fs_unlinkat(int dirfd, const char *name, int flags);
int st_fs_rename(const char *from, const char *to);
DIR *st_fs_opendir(const char *path);
DIR *st_fs_fdopendir(int fd);
struct dirent *st_fs_readdir(DIR *d);
void st_fs_rewinddir(DIR *d);
int st_fs_closedir(DIR *d);
unsigned st_fs_sq_space(struct io_uring *ring);
void st_fs_prep_writev(struct io_uring *ring, int fd, const struct iovec *iov, unsigned n, uint64_t pos,
                       uint64_t user_data, bool link);
void st_fs_prep_fdatasync(struct io_uring *ring, int fd, uint64_t user_data);
void st_fs_submit(struct io_uring *ring);
void st_fs_prep_write(struct io_uring *ring, int fd, const void *buf, unsigned len, uint64_t pos, uint64_t user_data,
                      unsigned link);
void st_fs_prep_sync(struct io_uring *ring, int fd, bool datasync, uint64_t user_data, unsigned link);
void st_fs_prep_openat(struct io_uring *ring, int dirfd, const char *name, int flags, mode_t mode,
                       uint64_t user_data, unsigned link);
void st_fs_prep_renameat(struct io_uring *ring, int dirfd, const char *from, const char *to, uint64_t user_data,
                         unsigned link);
void st_fs_prep_unlinkat(struct io_uring *ring, int dirfd, const char *name, uint64_t user_data, unsigned link);
void st_fs_prep_fallocate(struct io_uring *ring, int fd, int mode, uint64_t pos, uint64_t len, uint64_t user_data,
                          unsigned link);
void st_fs_prep_close(struct io_uring *ring, int fd, uint64_t user_data, unsigned link);
void st_fs_prep_nop(struct io_uring *ring, uint64_t user_data, unsigned link);

#endif

#endif
