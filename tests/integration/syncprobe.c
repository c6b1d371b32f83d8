/*
 * syncprobe.c - LD_PRELOAD shim for nonblock.sh: records every call that
 * waits for the disk, writes a file or moves a name (fsync, fdatasync,
 * sync_file_range, rename*, pwrite*, write to a regular file other than
 * stdin/out/err: log lines go to stderr; pread*, preadv* of a regular file
 * except preadv2 with RWF_NOWAIT, which never waits) made by a thread other than the
 * process's main one (sluiced's poll cores are its other threads) while the
 * file named by $SYNCPROBE_ARM exists.
 * Each such call appends "NAME fd=FD" to $SYNCPROBE_OUT. Start-up and
 * shutdown, where synchronous calls are allowed, run outside the window.
 *
 * Locality: any thread of the probed process; the calls it makes itself go
 * straight to the kernel (syscall), so it never probes itself.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* Both pwrite and pwrite64 (pread, pread64) are defined below: no redirection of one to the other. */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static const char *arm_path, *out_path;

__attribute__((constructor)) static void probe_init(void)
{
	arm_path = getenv("SYNCPROBE_ARM");
	out_path = getenv("SYNCPROBE_OUT");
}

static int armed(void)
{
	if (!arm_path || !out_path || syscall(SYS_gettid) == getpid())
		return 0;
	return syscall(SYS_faccessat, AT_FDCWD, arm_path, F_OK) == 0;
}

static void record(const char *name, int fd)
{
	char line[96];
	if (!armed())
		return;
	int n = snprintf(line, sizeof(line), "%s fd=%d\n", name, fd);
	long o = syscall(SYS_openat, AT_FDCWD, out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (o < 0)
		return;
	if (syscall(SYS_write, (int)o, line, (size_t)n) < 0) {
		/* nothing to do: the test then sees no line and reports what it has */
	}
	syscall(SYS_close, (int)o);
}

static int regular(int fd)
{
	struct stat st;
	return fd > 2 && syscall(SYS_fstat, fd, &st) == 0 && S_ISREG(st.st_mode);
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

int fsync(int fd) { record("fsync", fd); return NEXT(fsync)(fd); }
int fdatasync(int fd) { record("fdatasync", fd); return NEXT(fdatasync)(fd); }
int sync_file_range(int fd, off64_t off, off64_t n, unsigned int flags)
{
	record("sync_file_range", fd);
	return NEXT(sync_file_range)(fd, off, n, flags);
}
int rename(const char *a, const char *b) { record("rename", -1); return NEXT(rename)(a, b); }
int renameat(int da, const char *a, int db, const char *b)
{
	record("renameat", da);
	return NEXT(renameat)(da, a, db, b);
}
int renameat2(int da, const char *a, int db, const char *b, unsigned int flags)
{
	record("renameat2", da);
	return NEXT(renameat2)(da, a, db, b, flags);
}
ssize_t pwrite(int fd, const void *b, size_t n, off_t off) { record("pwrite", fd); return NEXT(pwrite)(fd, b, n, off); }
ssize_t pwrite64(int fd, const void *b, size_t n, off64_t off)
{
	record("pwrite64", fd);
	return NEXT(pwrite64)(fd, b, n, off);
}
ssize_t pwritev(int fd, const struct iovec *v, int n, off_t off)
{
	record("pwritev", fd);
	return NEXT(pwritev)(fd, v, n, off);
}
ssize_t write(int fd, const void *b, size_t n)
{
	if (regular(fd))
		record("write", fd);
	return NEXT(write)(fd, b, n);
}
ssize_t pread(int fd, void *b, size_t n, off_t off)
{
	if (regular(fd))
		record("pread", fd);
	return NEXT(pread)(fd, b, n, off);
}
ssize_t pread64(int fd, void *b, size_t n, off64_t off)
{
	if (regular(fd))
		record("pread64", fd);
	return NEXT(pread64)(fd, b, n, off);
}
ssize_t preadv(int fd, const struct iovec *v, int n, off_t off)
{
	if (regular(fd))
		record("preadv", fd);
	return NEXT(preadv)(fd, v, n, off);
}
ssize_t preadv2(int fd, const struct iovec *v, int n, off_t off, int flags)
{
	if (!(flags & RWF_NOWAIT) && regular(fd))
		record("preadv2", fd);
	return NEXT(preadv2)(fd, v, n, off, flags);
}
