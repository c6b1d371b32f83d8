/*
 * fs.h - the file operations of the storage layer (storage/log.c, and the
 * transaction files of txn/lso.c and txn/pstate.c), in one narrow interface.
 *
 * Locality: any (each call is on the core that owns the file it names).
 *
 * Two implementations, chosen when a file is compiled, never at run time:
 *   - the normal build: every st_fs_* below is a static inline call of the
 *     POSIX function of the same name, and the two submission calls prepare
 *     SQEs on the core's io_uring, exactly as the code did before this
 *     interface existed (no indirect call, no copy, nothing per byte);
 *   - -DST_FS_SIM (tests/sim only): the same names are extern functions of
 *     the deterministic simulator's disk (tests/sim/sim_disk.c), which keeps
 *     files in memory, completes submissions late and out of order, tears
 *     unsynced writes at a simulated crash, fails fdatasync and runs out of
 *     space, all from one seed.
 * The contract is POSIX's: -1 and errno for the synchronous calls; the
 * submitted operations complete through st_io_complete() with a CQE whose
 * res is a byte count or -errno. A write submitted with link set is
 * followed by the sync submitted next, which runs only if the write wrote
 * everything (else it completes -ECANCELED), as IOSQE_IO_LINK does.
 */
#ifndef SLUICE_STORAGE_FS_H
#define SLUICE_STORAGE_FS_H

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

struct io_uring;

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
static inline ssize_t st_fs_pwrite(int fd, const void *buf, size_t len, off_t pos)
{
	return pwrite(fd, buf, len, pos);
}
static inline ssize_t st_fs_write(int fd, const void *buf, size_t len) { return write(fd, buf, len); }
static inline int st_fs_fstat(int fd, struct stat *st) { return fstat(fd, st); }
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

#else /* ST_FS_SIM: tests/sim/sim_disk.c */

int st_fs_open(const char *path, int flags, mode_t mode);
int st_fs_openat(int dirfd, const char *name, int flags, mode_t mode);
int st_fs_close(int fd);
int st_fs_dup(int fd);
ssize_t st_fs_pread(int fd, void *buf, size_t len, off_t pos);
ssize_t st_fs_pwrite(int fd, const void *buf, size_t len, off_t pos);
ssize_t st_fs_write(int fd, const void *buf, size_t len);
int st_fs_fstat(int fd, struct stat *st);
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

#endif

#endif
