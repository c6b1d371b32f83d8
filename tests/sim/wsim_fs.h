/*
 * wsim_fs.h - forced into dataplane/control/ and dataplane/shard/ when the
 * whole-broker simulator compiles them (tests/sim/meson.build, -include):
 * the few direct file calls those files make at start-up and on the
 * control core (the producer-id file, topic directories, the data-dir scan (with its fstatat),
 * a fetch's synchronous pread) go to the in-memory disk like storage/'s do
 * through storage/fs.h. Nothing in the normal build sees this header.
 * Locality: the simulator's one thread.
 *
 * The system headers come first, so their declarations are not rewritten;
 * the macros are function-like, so only calls change.
 */
#ifndef SLUICE_WSIM_FS_H
#define SLUICE_WSIM_FS_H

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#include "fs.h"
#include "sim_disk.h"

static inline int wsim_open(const char *path, int flags, ...) { return st_fs_open(path, flags, 0644); }
static inline int wsim_openat(int dirfd, const char *name, int flags, ...)
{
	return st_fs_openat(dirfd, name, flags, 0644);
}

#define open(p, ...) wsim_open(p, __VA_ARGS__)
#define openat(d, n, ...) wsim_openat(d, n, __VA_ARGS__)
#define close(fd) st_fs_close(fd)
#define read(fd, b, n) sim_disk_read(fd, b, n)
#define write(fd, b, n) st_fs_write(fd, b, n)
#define pread(fd, b, n, pos) st_fs_pread(fd, b, n, pos)
#define fsync(fd) st_fs_fsync(fd)
#define fdatasync(fd) st_fs_fdatasync(fd)
#define mkdir(p, m) st_fs_mkdir(p, m)
#define rmdir(p) st_fs_rmdir(p)
#define renameat(d1, a, d2, b) sim_disk_renameat(d1, a, d2, b)
#define opendir(p) st_fs_opendir(p)
#define readdir(d) st_fs_readdir(d)
#define closedir(d) st_fs_closedir(d)
#define dirfd(d) sim_disk_dirfd(d)
#define fstatat(d, n, st, fl) sim_disk_fstatat(d, n, st, fl)
#define statvfs(p, sv) sim_disk_statvfs(p, sv)

#endif
