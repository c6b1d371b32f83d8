/*
 * sim_disk.c - the simulator's in-memory disk (model: sim_disk.h), and the
 * storage/fs.h functions built on it under -DST_FS_SIM.
 *
 * Locality: the simulator's one thread. Tables are small and searched
 * linearly: a run holds tens of files, and the simulator values plain,
 * obviously deterministic code over speed (no pointer ever decides an order).
 */
#include "sim_disk.h"

#ifndef ST_FS_SIM
#define ST_FS_SIM 1
#endif
#include "fs.h"

#include <assert.h>
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_INODES_MAX 16384u
#define SIM_NAMES_MAX 16384u
#define SIM_FDS_MAX 8192u
#define SIM_FD_BASE 1000            /* simulated fds are SIM_FD_BASE + index: never a real fd's number */
#define SIM_PATH_BYTES 128u
#define SIM_PAGE_BYTES 4096u        /* = ST_LOG_PAGE_BYTES: the unit a crash keeps or loses */
#define SIM_DIRECT_ALIGN_BYTES 4096u /* O_DIRECT: what a transfer's address, offset and length must be a
                                      * multiple of (ext4 on a 4 KiB-sector disk; EINVAL otherwise), unless
                                      * sim_disk_set_dio says otherwise */
#define SIM_RING_DEPTH_MAX 256u
#define SIM_RING_OPS_MAX 1024u      /* queued + submitted operations not yet completed */

/* ------------------------------------------------------------------------ */
/* Random numbers: splitmix64, one stream for the whole run.                 */

static uint64_t rng_state;

void sim_seed(uint64_t seed) { rng_state = seed * 0x9e3779b97f4a7c15ull + 1; }

uint64_t sim_rand(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ------------------------------------------------------------------------ */
/* Files, names, descriptors                                                 */

struct sim_ino {
	bool used, dir;
	uint8_t *cur;             /* what reads see (page cache) */
	size_t cur_len, cur_cap;
	uint8_t *dur;             /* what a crash keeps */
	size_t dur_len;
	uint64_t dirty_lo, dirty_hi; /* bytes written since the last sync (one covering range) */
	uint64_t alloc_len;       /* space reserved by fallocate(FALLOC_FL_KEEP_SIZE): counted as used
	                           * up to here past cur_len, and a write below it needs no more */
};

/* The space a file holds: its bytes, or its reserve if that goes further. */
static uint64_t ino_space(const struct sim_ino *f) { return f->alloc_len > f->cur_len ? f->alloc_len : f->cur_len; }

struct sim_name {
	char path[SIM_PATH_BYTES];
	int ino;
};

/* One journalled change of a name: create/replace (ino >= 0) or remove (ino -1) path. */
struct sim_jop {
	char path[SIM_PATH_BYTES];
	int ino;
};

struct sim_fd {
	bool used;
	int ino;
	char path[SIM_PATH_BYTES];
	uint64_t pos;             /* for st_fs_write */
	bool direct;              /* opened O_DIRECT: every transfer block-aligned (address, offset, length) */
};

struct sim_dirstream {
	int fd;
	uint32_t n, i;
	char (*names)[SIM_PATH_BYTES];
	struct dirent de;
};

/* What a queued submission does (storage/fs.h's st_fs_prep_*). */
enum sim_op_kind { OP_WRITE, OP_SYNC, OP_OPENAT, OP_RENAMEAT, OP_UNLINKAT, OP_CLOSE, OP_NOP, OP_FALLOCATE };

struct sim_op {
	uint32_t id;
	uint32_t after;           /* id of the op this one is chained behind, 0 none */
	enum sim_op_kind kind;
	bool link, hard;          /* chained to the next: ST_FS_LINK (cancelled by a failure) / ST_FS_HARDLINK */
	bool cancel;              /* an earlier op of its chain failed: completes -ECANCELED */
	bool submitted;           /* st_fs_submit has passed it to the "kernel": no SQ slot any more */
	int fd;                   /* write, sync, close; the directory of openat/renameat/unlinkat */
	int flags;                /* openat */
	char name[SIM_PATH_BYTES], name2[SIM_PATH_BYTES]; /* openat/unlinkat; renameat from, to */
	struct iovec *iov;
	unsigned n;
	uint64_t pos, ud;
	uint64_t len;             /* fallocate */
};

struct sim_ring {
	unsigned depth, nops, unsubmitted;
	struct sim_op ops[SIM_RING_OPS_MAX];
	uint32_t last_id;         /* id of the last submission (the next one chains behind it if linked) */
	bool last_link;
};

/* O_DIRECT's alignment of file offsets and lengths, and whether st_fs_dio_align (statx
 * STATX_DIOALIGN) reports it; buffer addresses need the same, at most 4 KiB (a page, as
 * block devices' logical blocks up to 4 KiB ask in practice). */
static uint32_t dio_align = SIM_DIRECT_ALIGN_BYTES;
static bool dio_reported = true;

static uint32_t dio_mem_align(void) { return dio_align < SIM_DIRECT_ALIGN_BYTES ? dio_align : SIM_DIRECT_ALIGN_BYTES; }

void sim_disk_set_dio(uint32_t align, bool reported)
{
	dio_align = align;
	dio_reported = reported;
}

static struct {
	struct sim_faults f;
	bool dead;
	struct sim_ino ino[SIM_INODES_MAX];
	struct sim_name names[SIM_NAMES_MAX];   /* the namespace reads see */
	uint32_t nnames;
	struct sim_name base[SIM_NAMES_MAX];    /* the namespace at the last restart */
	uint32_t nbase;
	struct sim_jop *journal;                /* changes since, in order */
	uint32_t njournal, journal_cap, forced; /* journal[0..forced) survive a crash */
	struct sim_fd fds[SIM_FDS_MAX];
	uint32_t next_id;
} D;

static int fail(int e)
{
	errno = e;
	return -1;
}

static int ino_new(bool dir)
{
	for (uint32_t i = 0; i < SIM_INODES_MAX; i++)
		if (!D.ino[i].used) {
			memset(&D.ino[i], 0, sizeof(D.ino[i]));
			D.ino[i].used = true;
			D.ino[i].dir = dir;
			return (int)i;
		}
	fprintf(stderr, "sim_disk: out of inodes\n");
	abort();
}

static int name_find(const struct sim_name *ns, uint32_t n, const char *path)
{
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(ns[i].path, path))
			return (int)i;
	return -1;
}

/* Set (ino >= 0) or remove (ino -1) path in namespace ns. */
static void ns_apply(struct sim_name *ns, uint32_t *n, const char *path, int ino)
{
	int i = name_find(ns, *n, path);
	if (ino < 0) {
		if (i >= 0)
			ns[i] = ns[--*n];
		return;
	}
	if (i < 0) {
		if (*n == SIM_NAMES_MAX) {
			fprintf(stderr, "sim_disk: more than %u names\n", SIM_NAMES_MAX);
			abort();
		}
		i = (int)(*n)++;
		snprintf(ns[i].path, SIM_PATH_BYTES, "%s", path);
	}
	ns[i].ino = ino;
}

static void name_set(const char *path, int ino)
{
	ns_apply(D.names, &D.nnames, path, ino);
	if (D.njournal == D.journal_cap) {
		D.journal_cap = D.journal_cap ? 2 * D.journal_cap : 256;
		D.journal = realloc(D.journal, D.journal_cap * sizeof(*D.journal));
		assert(D.journal);
	}
	struct sim_jop *j = &D.journal[D.njournal++];
	snprintf(j->path, SIM_PATH_BYTES, "%s", path);
	j->ino = ino;
}

static int lookup(const char *path)
{
	int i = name_find(D.names, D.nnames, path);
	return i < 0 ? -1 : D.names[i].ino;
}

static bool parent_is_dir(const char *path)
{
	char p[SIM_PATH_BYTES];
	const char *slash = strrchr(path, '/');
	if (!slash || slash == path)
		return true; /* the root */
	snprintf(p, sizeof(p), "%.*s", (int)(slash - path), path);
	int ino = lookup(p);
	return ino >= 0 && D.ino[ino].dir;
}

static struct sim_fd *fd_get(int fd)
{
	if (fd < SIM_FD_BASE || fd >= SIM_FD_BASE + (int)SIM_FDS_MAX || !D.fds[fd - SIM_FD_BASE].used)
		return NULL;
	return &D.fds[fd - SIM_FD_BASE];
}

static int fd_new(int ino, const char *path)
{
	char p[SIM_PATH_BYTES]; /* path may be another descriptor's (st_fs_dup): copied before D changes */
	snprintf(p, sizeof(p), "%s", path);
	for (uint32_t i = 0; i < SIM_FDS_MAX; i++)
		if (!D.fds[i].used) {
			D.fds[i] = (struct sim_fd){ .used = true, .ino = ino };
			memcpy(D.fds[i].path, p, sizeof(p));
			return SIM_FD_BASE + (int)i;
		}
	return fail(EMFILE);
}

uint64_t sim_disk_used_bytes(void)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < D.nnames; i++)
		sum += ino_space(&D.ino[D.names[i].ino]);
	return sum;
}

void sim_disk_set_capacity(uint64_t bytes) { D.f.capacity_bytes = bytes; }

void sim_disk_set_faults(const struct sim_faults *f)
{
	D.f = *f;
	if (!D.f.capacity_bytes)
		D.f.capacity_bytes = UINT64_MAX / 2;
}

/* Write len bytes at pos of ino's cache, at most what the capacity leaves. Returns bytes written or -errno. */
static ssize_t ino_write(int ino, const struct iovec *iov, unsigned n, uint64_t pos, size_t want)
{
	struct sim_ino *f = &D.ino[ino];
	size_t total = 0;
	for (unsigned i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (want > total)
		want = total;
	uint64_t end = pos + want, have = ino_space(f);
	if (end > have) {
		uint64_t used = sim_disk_used_bytes(), grow = end - have;
		if (used + grow > D.f.capacity_bytes) {
			uint64_t room = D.f.capacity_bytes > used ? D.f.capacity_bytes - used : 0;
			if (pos + room <= have && pos >= have)
				return -ENOSPC;
			end = have + room;
			if (end <= pos)
				return -ENOSPC;
			want = (size_t)(end - pos);
		}
	}
	if (end > f->cur_cap) {
		size_t cap = f->cur_cap ? f->cur_cap : 4096;
		while (cap < end)
			cap *= 2;
		f->cur = realloc(f->cur, cap);
		assert(f->cur);
		memset(f->cur + f->cur_cap, 0, cap - f->cur_cap);
		f->cur_cap = cap;
	}
	size_t done = 0;
	for (unsigned i = 0; i < n && done < want; i++) {
		size_t k = iov[i].iov_len < want - done ? iov[i].iov_len : want - done;
		memcpy(f->cur + pos + done, iov[i].iov_base, k);
		done += k;
	}
	if (end > f->cur_len)
		f->cur_len = end;
	if (f->dirty_lo == f->dirty_hi) {
		f->dirty_lo = pos;
		f->dirty_hi = end;
	} else {
		if (pos < f->dirty_lo)
			f->dirty_lo = pos;
		if (end > f->dirty_hi)
			f->dirty_hi = end;
	}
	return (ssize_t)want;
}

/* fdatasync: the cache becomes the platter, or (fault) the dirty pages are dropped unwritten. */
static int ino_sync(int ino)
{
	struct sim_ino *f = &D.ino[ino];
	if (sim_chance_ppm(D.f.sync_eio_ppm)) {
		/* fsyncgate: the dirty pages are marked clean and never written, so no later sync
		 * writes them either. The disk keeps what it had there, and zeros past its old end
		 * (the length may reach it); the page cache still serves the lost bytes to reads. */
		if (!f->dir && f->cur_len > f->dur_len) {
			f->dur = realloc(f->dur, f->cur_len);
			assert(f->dur);
			memset(f->dur + f->dur_len, 0, f->cur_len - f->dur_len);
			f->dur_len = f->cur_len;
		}
		f->dirty_lo = f->dirty_hi = 0;
		return -EIO;
	}
	if (f->dir) {
		D.forced = D.njournal;
		return 0;
	}
	f->dur = realloc(f->dur, f->cur_len ? f->cur_len : 1);
	assert(f->dur);
	/* Bytes outside the dirty range and below both lengths are equal already, except
	 * after a dropped (failed) sync: copy only the dirty range and what the length changed. */
	if (f->cur_len > f->dur_len)
		memcpy(f->dur + f->dur_len, f->cur + f->dur_len, f->cur_len - f->dur_len);
	uint64_t hi = f->dirty_hi < f->cur_len ? f->dirty_hi : f->cur_len;
	if (f->dirty_lo < hi)
		memcpy(f->dur + f->dirty_lo, f->cur + f->dirty_lo, hi - f->dirty_lo);
	f->dur_len = f->cur_len;
	f->dirty_lo = f->dirty_hi = 0;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Machine life                                                              */

void sim_disk_init(const struct sim_faults *f)
{
	sim_disk_free();
	D.f = *f;
	if (!D.f.capacity_bytes)
		D.f.capacity_bytes = UINT64_MAX / 2;
	int root = ino_new(true);
	ns_apply(D.names, &D.nnames, "/", root);
	ns_apply(D.base, &D.nbase, "/", root);
}

void sim_disk_free(void)
{
	for (uint32_t i = 0; i < SIM_INODES_MAX; i++) {
		free(D.ino[i].cur);
		free(D.ino[i].dur);
	}
	free(D.journal);
	memset(&D, 0, sizeof(D));
}

void sim_disk_kill(void) { D.dead = true; }
bool sim_disk_dead(void) { return D.dead; }

/* What the crash leaves of one file: the platter, plus each unsynced page the seed keeps. */
static void ino_crash(struct sim_ino *f)
{
	if (f->dir)
		return;
	size_t len = f->dur_len;
	uint8_t *out = malloc(f->cur_len > len ? f->cur_len + 1 : len + 1);
	assert(out);
	memcpy(out, f->dur, f->dur_len);
	if (f->cur_len > len)
		memset(out + len, 0, f->cur_len - len);
	if (f->cur_len < f->dur_len && sim_below(2))
		len = f->cur_len; /* an unsynced truncate reached the disk */
	uint64_t lo = f->dirty_lo, hi = f->dirty_hi;
	if (f->cur_len > f->dur_len) {
		if (lo == hi || f->dur_len < lo)
			lo = f->dur_len;
		if (f->cur_len > hi)
			hi = f->cur_len;
	}
	uint64_t first = lo / SIM_PAGE_BYTES * SIM_PAGE_BYTES;
	if (!D.f.scattered) {
		/* In order: a prefix of the unsynced pages, the last one torn at a sector (512 bytes). */
		uint64_t pages = (hi - first + SIM_PAGE_BYTES - 1) / SIM_PAGE_BYTES;
		uint64_t keep = sim_chance_ppm(D.f.page_keep_ppm) ? sim_below(pages + 1) : 0;
		uint64_t e = first + keep * SIM_PAGE_BYTES;
		if (keep && sim_below(2))
			e -= SIM_PAGE_BYTES - 512 * (1 + sim_below(SIM_PAGE_BYTES / 512 - 1));
		if (e > f->cur_len)
			e = f->cur_len;
		if (e > first) {
			memcpy(out + first, f->cur + first, e - first);
			if (e > len)
				len = e;
		}
	}
	for (uint64_t p = first; D.f.scattered && p < hi; p += SIM_PAGE_BYTES) {
		if (!sim_chance_ppm(D.f.page_keep_ppm))
			continue;
		uint64_t e = p + SIM_PAGE_BYTES;
		if (e > f->cur_len)
			e = f->cur_len;
		if (p >= e)
			continue;
		memcpy(out + p, f->cur + p, e - p);
		if (e > len)
			len = e;
	}
	free(f->dur);
	free(f->cur);
	f->dur = out;
	f->dur_len = len;
	f->cur = malloc(len ? len : 1);
	assert(f->cur);
	memcpy(f->cur, out, len);
	f->cur_len = f->cur_cap = len;
	f->dirty_lo = f->dirty_hi = 0;
}

void sim_disk_restart(void)
{
	assert(D.dead);
	/* Names: every forced change, then a seeded prefix of the rest (ordered metadata). */
	uint32_t keep = D.forced + (uint32_t)sim_below(D.njournal - D.forced + 1);
	for (uint32_t i = 0; i < keep; i++)
		ns_apply(D.base, &D.nbase, D.journal[i].path, D.journal[i].ino);
	memcpy(D.names, D.base, D.nbase * sizeof(D.base[0]));
	D.nnames = D.nbase;
	D.njournal = D.forced = 0;
	/* Files: torn pages; files no name holds any more are freed. */
	static bool live[SIM_INODES_MAX];
	memset(live, 0, sizeof(live));
	for (uint32_t i = 0; i < D.nnames; i++)
		live[D.names[i].ino] = true;
	for (uint32_t i = 0; i < SIM_INODES_MAX; i++) {
		struct sim_ino *f = &D.ino[i];
		if (!f->used)
			continue;
		if (!live[i]) {
			free(f->cur);
			free(f->dur);
			memset(f, 0, sizeof(*f));
			continue;
		}
		ino_crash(f);
	}
	memset(D.fds, 0, sizeof(D.fds));
	D.dead = false;
}

/* ------------------------------------------------------------------------ */
/* storage/fs.h, synchronous calls                                           */

static int open_path(const char *path, int flags)
{
	if (D.dead)
		return fail(EIO);
	int ino = lookup(path);
	if (ino < 0) {
		if (!(flags & O_CREAT))
			return fail(ENOENT);
		if (!parent_is_dir(path))
			return fail(ENOENT);
		ino = ino_new(false);
		name_set(path, ino);
	} else if ((flags & O_CREAT) && (flags & O_EXCL)) {
		return fail(EEXIST);
	}
	if ((flags & O_DIRECTORY) && !D.ino[ino].dir)
		return fail(ENOTDIR);
	if ((flags & O_TRUNC) && !D.ino[ino].dir && D.ino[ino].cur_len) {
		struct sim_ino *f = &D.ino[ino];
		f->cur_len = 0;
		f->dirty_lo = f->dirty_hi = 0;
	}
	if ((flags & O_DIRECT) && D.ino[ino].dir)
		return fail(EINVAL);
	int fd = fd_new(ino, path);
	if (fd >= 0)
		fd_get(fd)->direct = (flags & O_DIRECT) != 0;
	return fd;
}

/*
 * O_DIRECT, as the kernel checks it: a misaligned buffer, offset or length is EINVAL.
 * What such a write does to the disk is modelled as a buffered one's: it bypasses the
 * page cache, but its data (and the file size it extends) is durable only after an
 * fdatasync, a crash tears what no sync covered page by page, and a failed sync loses
 * it as it loses dirty pages (ino_sync). So the log's durability rules are tested as
 * they stand; what the model adds is that every direct transfer is aligned.
 */
static bool direct_ok(const struct sim_fd *d, const struct iovec *iov, unsigned n, uint64_t pos)
{
	if (!d->direct)
		return true;
	if (pos % dio_align)
		return false;
	for (unsigned i = 0; i < n; i++)
		if ((uintptr_t)iov[i].iov_base % dio_mem_align() || iov[i].iov_len % dio_align)
			return false;
	return true;
}

static int at_path(int dirfd, const char *name, char *out)
{
	struct sim_fd *d = fd_get(dirfd);
	if (!d || !D.ino[d->ino].dir)
		return fail(EBADF);
	if ((size_t)snprintf(out, SIM_PATH_BYTES, "%s/%s", d->path, name) >= SIM_PATH_BYTES)
		return fail(ENAMETOOLONG);
	return 0;
}

int st_fs_open(const char *path, int flags, mode_t mode) { return open_path(path, flags); }

int st_fs_openat(int dirfd, const char *name, int flags, mode_t mode)
{
	char p[SIM_PATH_BYTES];
	if (D.dead)
		return fail(EIO);
	if (at_path(dirfd, name, p) < 0)
		return -1;
	return open_path(p, flags);
}

int st_fs_close(int fd)
{
	struct sim_fd *f = fd_get(fd);
	if (!f)
		return fail(EBADF);
	f->used = false;
	return D.dead ? fail(EIO) : 0;
}

int st_fs_dup(int fd)
{
	struct sim_fd *f = fd_get(fd);
	if (D.dead)
		return fail(EIO);
	if (!f)
		return fail(EBADF);
	bool direct = f->direct;
	int nfd = fd_new(f->ino, f->path);
	if (nfd >= 0)
		fd_get(nfd)->direct = direct;
	return nfd;
}

ssize_t st_fs_pread(int fd, void *buf, size_t len, off_t pos)
{
	struct sim_fd *d = fd_get(fd);
	if (D.dead)
		return fail(EIO);
	if (!d)
		return fail(EBADF);
	struct sim_ino *f = &D.ino[d->ino];
	if (f->dir)
		return fail(EISDIR);
	struct iovec v = { .iov_base = buf, .iov_len = len };
	if (!direct_ok(d, &v, 1, (uint64_t)pos))
		return fail(EINVAL);
	if ((uint64_t)pos >= f->cur_len)
		return 0;
	size_t n = f->cur_len - (size_t)pos < len ? f->cur_len - (size_t)pos : len;
	memcpy(buf, f->cur + pos, n);
	return (ssize_t)n;
}

/* The simulated disk is memory: every read finds its bytes "cached". */
ssize_t st_fs_pread_nowait(int fd, void *buf, size_t len, off_t pos) { return st_fs_pread(fd, buf, len, pos); }

ssize_t st_fs_pwrite(int fd, const void *buf, size_t len, off_t pos)
{
	struct sim_fd *d = fd_get(fd);
	if (D.dead)
		return fail(EIO);
	if (!d || D.ino[d->ino].dir)
		return fail(EBADF);
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };
	if (!direct_ok(d, &v, 1, (uint64_t)pos))
		return fail(EINVAL);
	if (sim_chance_ppm(D.f.write_eio_ppm))
		return fail(EIO);
	ssize_t r = ino_write(d->ino, &v, 1, (uint64_t)pos, len);
	return r < 0 ? fail((int)-r) : r;
}

ssize_t st_fs_write(int fd, const void *buf, size_t len)
{
	struct sim_fd *d = fd_get(fd);
	ssize_t r = st_fs_pwrite(fd, buf, len, d ? (off_t)d->pos : 0);
	if (r > 0)
		d->pos += (uint64_t)r;
	return r;
}

long sim_disk_read(int fd, void *buf, unsigned long len)
{
	struct sim_fd *d = fd_get(fd);
	ssize_t r = st_fs_pread(fd, buf, len, d ? (off_t)d->pos : 0);
	if (r > 0)
		d->pos += (uint64_t)r;
	return r;
}

int sim_disk_renameat(int olddirfd, const char *from, int newdirfd, const char *to)
{
	char a[SIM_PATH_BYTES], b[SIM_PATH_BYTES];
	if (D.dead)
		return fail(EIO);
	if (at_path(olddirfd, from, a) < 0 || at_path(newdirfd, to, b) < 0)
		return -1;
	return st_fs_rename(a, b);
}

int sim_disk_statvfs(const char *path, struct statvfs *sv)
{
	(void)path;
	(void)sv;
	return fail(ENOSYS);
}

int sim_disk_dirfd(DIR *dir) { return ((struct sim_dirstream *)dir)->fd; }

int sim_disk_fstatat(int dirfd, const char *name, struct stat *st, int flags)
{
	(void)flags;   /* the in-memory disk has no links: following one or not is the same */
	char path[SIM_PATH_BYTES];
	if (at_path(dirfd, name, path) < 0)
		return -1;
	int fd = open_path(path, O_RDONLY);
	if (fd < 0)
		return -1;
	int rc = st_fs_fstat(fd, st);
	st_fs_close(fd);
	return rc;
}

int st_fs_dio_align(int fd, uint32_t *mem)
{
	*mem = 0;
	struct sim_fd *d = fd_get(fd);
	if (D.dead)
		return fail(EIO);
	if (!d)
		return fail(EBADF);
	if (D.ino[d->ino].dir)
		return fail(EOPNOTSUPP);
	if (!dio_reported)
		return 0;
	*mem = dio_mem_align();
	return (int)dio_align;
}

int st_fs_fstat(int fd, struct stat *st)
{
	struct sim_fd *d = fd_get(fd);
	if (D.dead)
		return fail(EIO);
	if (!d)
		return fail(EBADF);
	memset(st, 0, sizeof(*st));
	st->st_mode = D.ino[d->ino].dir ? S_IFDIR | 0755 : S_IFREG | 0644;
	st->st_size = (off_t)D.ino[d->ino].cur_len;
	st->st_ino = (ino_t)d->ino + 1;
	return 0;
}

int st_fs_ftruncate(int fd, off_t len)
{
	struct sim_fd *d = fd_get(fd);
	if (D.dead)
		return fail(EIO);
	if (!d || D.ino[d->ino].dir)
		return fail(EBADF);
	struct sim_ino *f = &D.ino[d->ino];
	if ((size_t)len > f->cur_len) {
		size_t grow = (size_t)len - f->cur_len;
		uint8_t *z = calloc(1, grow);
		struct iovec zv = { .iov_base = z, .iov_len = grow };
		ssize_t r = ino_write(d->ino, &zv, 1, f->cur_len, grow);
		free(z);
		return r == (ssize_t)grow ? 0 : fail(ENOSPC);
	}
	f->cur_len = (size_t)len;
	f->alloc_len = 0; /* a truncate frees every block past the new size, the reserve too */
	if (f->dirty_hi > f->cur_len)
		f->dirty_hi = f->cur_len;
	if (f->dirty_lo > f->dirty_hi)
		f->dirty_lo = f->dirty_hi;
	return 0;
}

int st_fs_fdatasync(int fd)
{
	struct sim_fd *d = fd_get(fd);
	if (D.dead)
		return fail(EIO);
	if (!d)
		return fail(EBADF);
	int rc = ino_sync(d->ino);
	return rc < 0 ? fail(-rc) : 0;
}

int st_fs_fsync(int fd) { return st_fs_fdatasync(fd); }

int st_fs_mkdir(const char *path, mode_t mode)
{
	if (D.dead)
		return fail(EIO);
	if (lookup(path) >= 0)
		return fail(EEXIST);
	if (!parent_is_dir(path))
		return fail(ENOENT);
	name_set(path, ino_new(true));
	return 0;
}

static bool dir_empty(const char *path)
{
	size_t l = strlen(path);
	for (uint32_t i = 0; i < D.nnames; i++)
		if (!strncmp(D.names[i].path, path, l) && D.names[i].path[l] == '/')
			return false;
	return true;
}

int st_fs_rmdir(const char *path)
{
	if (D.dead)
		return fail(EIO);
	int ino = lookup(path);
	if (ino < 0)
		return fail(ENOENT);
	if (!D.ino[ino].dir)
		return fail(ENOTDIR);
	if (!dir_empty(path))
		return fail(ENOTEMPTY);
	name_set(path, -1);
	return 0;
}

int st_fs_unlink(const char *path)
{
	if (D.dead)
		return fail(EIO);
	int ino = lookup(path);
	if (ino < 0)
		return fail(ENOENT);
	if (D.ino[ino].dir)
		return fail(EISDIR);
	name_set(path, -1);
	return 0;
}

int st_fs_unlinkat(int dirfd, const char *name, int flags)
{
	char p[SIM_PATH_BYTES];
	if (D.dead)
		return fail(EIO);
	if (at_path(dirfd, name, p) < 0)
		return -1;
	return st_fs_unlink(p);
}

int st_fs_rename(const char *from, const char *to)
{
	if (D.dead)
		return fail(EIO);
	int ino = lookup(from);
	if (ino < 0)
		return fail(ENOENT);
	if (!parent_is_dir(to))
		return fail(ENOENT);
	name_set(to, ino);
	name_set(from, -1);
	return 0;
}

static int name_cmp(const void *a, const void *b) { return strcmp(a, b); }

DIR *st_fs_fdopendir(int fd)
{
	struct sim_fd *d = fd_get(fd);
	if (D.dead) {
		errno = EIO;
		return NULL;
	}
	if (!d || !D.ino[d->ino].dir) {
		errno = d ? ENOTDIR : EBADF;
		return NULL;
	}
	size_t l = strlen(d->path);
	uint32_t n = 2;
	for (uint32_t i = 0; i < D.nnames; i++) {
		const char *p = D.names[i].path;
		n += !strncmp(p, d->path, l) && p[l] == '/' && !strchr(p + l + 1, '/');
	}
	struct sim_dirstream *s = calloc(1, sizeof(*s));
	assert(s);
	s->names = calloc(n, sizeof(*s->names));
	assert(s->names);
	s->fd = fd;
	snprintf(s->names[s->n++], SIM_PATH_BYTES, ".");
	snprintf(s->names[s->n++], SIM_PATH_BYTES, "..");
	for (uint32_t i = 0; i < D.nnames; i++) {
		const char *p = D.names[i].path;
		if (strncmp(p, d->path, l) || p[l] != '/' || strchr(p + l + 1, '/'))
			continue;
		snprintf(s->names[s->n++], SIM_PATH_BYTES, "%s", p + l + 1);
	}
	assert(s->n == n);
	/* A directory's order is the file system's: sorted, then shuffled by the seed. */
	qsort(s->names, s->n, sizeof(*s->names), name_cmp);
	for (uint32_t i = s->n; i > 1; i--) {
		uint32_t j = (uint32_t)sim_below(i);
		char t[SIM_PATH_BYTES];
		memcpy(t, s->names[i - 1], SIM_PATH_BYTES);
		memcpy(s->names[i - 1], s->names[j], SIM_PATH_BYTES);
		memcpy(s->names[j], t, SIM_PATH_BYTES);
	}
	return (DIR *)s;
}

DIR *st_fs_opendir(const char *path)
{
	int fd = open_path(path, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return NULL;
	DIR *d = st_fs_fdopendir(fd);
	if (!d)
		st_fs_close(fd);
	return d;
}

struct dirent *st_fs_readdir(DIR *dir)
{
	struct sim_dirstream *s = (struct sim_dirstream *)dir;
	if (s->i == s->n)
		return NULL;
	memset(&s->de, 0, sizeof(s->de));
	snprintf(s->de.d_name, sizeof(s->de.d_name), "%s", s->names[s->i++]);
	return &s->de;
}

void st_fs_rewinddir(DIR *dir)
{
	((struct sim_dirstream *)dir)->i = 0;
}

int st_fs_closedir(DIR *dir)
{
	struct sim_dirstream *s = (struct sim_dirstream *)dir;
	int rc = st_fs_close(s->fd);
	free(s->names);
	free(s);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* storage/fs.h, submissions: a seeded, reordering completion queue          */

struct io_uring *sim_ring_create(unsigned depth)
{
	struct sim_ring *r = calloc(1, sizeof(*r));
	assert(r && depth > 0 && depth <= SIM_RING_DEPTH_MAX);
	r->depth = depth;
	return (struct io_uring *)r;
}

void sim_ring_destroy(struct io_uring *ring)
{
	struct sim_ring *r = (struct sim_ring *)ring;
	for (unsigned i = 0; i < r->nops; i++)
		free(r->ops[i].iov);
	free(r);
}

unsigned sim_ring_queued(const struct io_uring *ring) { return ((const struct sim_ring *)ring)->nops; }

unsigned st_fs_sq_space(struct io_uring *ring)
{
	struct sim_ring *r = (struct sim_ring *)ring;
	return r->depth - r->unsubmitted;
}

/* The queued operations go to the "kernel": their SQ slots are free, they still complete late. */
void st_fs_submit(struct io_uring *ring)
{
	struct sim_ring *r = (struct sim_ring *)ring;
	for (unsigned i = 0; i < r->nops; i++)
		r->ops[i].submitted = true;
	r->unsubmitted = 0;
}

static struct sim_op *op_push(struct sim_ring *r, enum sim_op_kind kind, uint64_t user_data, unsigned link)
{
	assert(r->unsubmitted < r->depth); /* callers check st_fs_sq_space */
	if (r->nops == SIM_RING_OPS_MAX) {
		fprintf(stderr, "sim_disk: more than %u operations in flight\n", SIM_RING_OPS_MAX);
		abort();
	}
	struct sim_op *o = &r->ops[r->nops++];
	memset(o, 0, sizeof(*o));
	r->unsubmitted++;
	o->id = ++D.next_id;
	o->after = r->last_link ? r->last_id : 0;
	o->kind = kind;
	o->ud = user_data;
	o->link = (link & ST_FS_LINK) != 0;
	o->hard = (link & ST_FS_HARDLINK) != 0;
	r->last_id = o->id;
	r->last_link = o->link || o->hard;
	return o;
}

static void op_iov(struct sim_op *o, int fd, const struct iovec *iov, unsigned n, uint64_t pos)
{
	/* The kernel copies the iovec array at submission; the buffers must stay until completion. */
	o->iov = malloc(n * sizeof(*iov));
	assert(o->iov);
	memcpy(o->iov, iov, n * sizeof(*iov));
	o->n = n;
	o->fd = fd;
	o->pos = pos;
}

void st_fs_prep_writev(struct io_uring *ring, int fd, const struct iovec *iov, unsigned n, uint64_t pos,
                       uint64_t user_data, bool link)
{
	struct sim_op *o = op_push((struct sim_ring *)ring, OP_WRITE, user_data, link ? ST_FS_LINK : 0);
	op_iov(o, fd, iov, n, pos);
}

void st_fs_prep_write(struct io_uring *ring, int fd, const void *buf, unsigned len, uint64_t pos, uint64_t user_data,
                      unsigned link)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };
	op_iov(op_push((struct sim_ring *)ring, OP_WRITE, user_data, link), fd, &v, 1, pos);
}

void st_fs_prep_fdatasync(struct io_uring *ring, int fd, uint64_t user_data)
{
	op_push((struct sim_ring *)ring, OP_SYNC, user_data, 0)->fd = fd;
}

/* fdatasync and fsync are one here: a file's sync copies its cache, a directory's forces the journal. */
void st_fs_prep_sync(struct io_uring *ring, int fd, bool datasync, uint64_t user_data, unsigned link)
{
	op_push((struct sim_ring *)ring, OP_SYNC, user_data, link)->fd = fd;
}

/* Names are copied now: the kernel reads them at submission (the callers' stay valid anyway). */
void st_fs_prep_openat(struct io_uring *ring, int dirfd, const char *name, int flags, mode_t mode,
                       uint64_t user_data, unsigned link)
{
	struct sim_op *o = op_push((struct sim_ring *)ring, OP_OPENAT, user_data, link);
	o->fd = dirfd;
	o->flags = flags;
	snprintf(o->name, SIM_PATH_BYTES, "%s", name);
}

void st_fs_prep_renameat(struct io_uring *ring, int dirfd, const char *from, const char *to, uint64_t user_data,
                         unsigned link)
{
	struct sim_op *o = op_push((struct sim_ring *)ring, OP_RENAMEAT, user_data, link);
	o->fd = dirfd;
	snprintf(o->name, SIM_PATH_BYTES, "%s", from);
	snprintf(o->name2, SIM_PATH_BYTES, "%s", to);
}

void st_fs_prep_unlinkat(struct io_uring *ring, int dirfd, const char *name, uint64_t user_data, unsigned link)
{
	struct sim_op *o = op_push((struct sim_ring *)ring, OP_UNLINKAT, user_data, link);
	o->fd = dirfd;
	snprintf(o->name, SIM_PATH_BYTES, "%s", name);
}

/* The mode is FALLOC_FL_KEEP_SIZE (the only one storage/log.c asks for): space, not bytes. */
void st_fs_prep_fallocate(struct io_uring *ring, int fd, int mode, uint64_t pos, uint64_t len, uint64_t user_data,
                          unsigned link)
{
	struct sim_op *o = op_push((struct sim_ring *)ring, OP_FALLOCATE, user_data, link);
	assert(mode == FALLOC_FL_KEEP_SIZE);
	o->fd = fd;
	o->pos = pos;
	o->len = len;
}

void st_fs_prep_close(struct io_uring *ring, int fd, uint64_t user_data, unsigned link)
{
	op_push((struct sim_ring *)ring, OP_CLOSE, user_data, link)->fd = fd;
}

void st_fs_prep_nop(struct io_uring *ring, uint64_t user_data, unsigned link)
{
	op_push((struct sim_ring *)ring, OP_NOP, user_data, link);
}

static bool op_waiting(const struct sim_ring *r, const struct sim_op *o)
{
	if (!o->after)
		return false;
	for (unsigned i = 0; i < r->nops; i++)
		if (r->ops[i].id == o->after)
			return true;
	return false;
}

static size_t op_bytes(const struct sim_op *o)
{
	size_t total = 0;
	for (unsigned i = 0; i < o->n; i++)
		total += o->iov[i].iov_len;
	return total;
}

/* A synchronous fs.h call's result as a CQE's. */
static int cqe_res(int rc) { return rc < 0 ? -errno : rc; }

static int op_run(struct sim_ring *r, struct sim_op *o)
{
	if (D.dead)
		return -EIO;
	if (o->cancel)
		return -ECANCELED;
	switch (o->kind) {
	case OP_NOP:
		return 0;
	case OP_CLOSE:
		return cqe_res(st_fs_close(o->fd));
	case OP_OPENAT:
	case OP_RENAMEAT:
	case OP_UNLINKAT: {
		/* Names go to the ordered journal (name_set): durable with the next directory fsync. */
		if (sim_chance_ppm(D.f.meta_eio_ppm))
			return -EIO;
		if (o->kind == OP_OPENAT)
			return cqe_res(st_fs_openat(o->fd, o->name, o->flags, 0644));
		if (o->kind == OP_UNLINKAT)
			return cqe_res(st_fs_unlinkat(o->fd, o->name, 0));
		char from[SIM_PATH_BYTES], to[SIM_PATH_BYTES];
		if (at_path(o->fd, o->name, from) < 0 || at_path(o->fd, o->name2, to) < 0)
			return -errno;
		return cqe_res(st_fs_rename(from, to));
	}
	case OP_FALLOCATE: {
		/* All or nothing (-ENOSPC), as ext4 answers a reserve the free space cannot hold; the
		 * metadata fault stands for a file system that has no fallocate. */
		struct sim_fd *d = fd_get(o->fd);
		if (!d)
			return -EBADF;
		if (D.ino[d->ino].dir)
			return -ENODEV;
		if (sim_chance_ppm(D.f.meta_eio_ppm))
			return -EOPNOTSUPP;
		struct sim_ino *f = &D.ino[d->ino];
		uint64_t end = o->pos + o->len, have = ino_space(f);
		if (end > have && sim_disk_used_bytes() + (end - have) > D.f.capacity_bytes)
			return -ENOSPC;
		if (end > f->alloc_len)
			f->alloc_len = end;
		return 0;
	}
	case OP_SYNC:
	case OP_WRITE:
		break;
	}
	struct sim_fd *d = fd_get(o->fd);
	if (!d)
		return -EBADF;
	if (o->kind == OP_SYNC)
		return ino_sync(d->ino);
	if (D.ino[d->ino].dir)
		return -EISDIR;
	if (!direct_ok(d, o->iov, o->n, o->pos))
		return -EINVAL;
	if (sim_chance_ppm(D.f.write_eio_ppm))
		return -EIO;
	size_t total = op_bytes(o), want = total;
	if (total > 1 && sim_chance_ppm(D.f.write_short_ppm)) {
		want = 1 + (size_t)sim_below(total - 1);
		if (d->direct) /* a direct write stops at a block boundary (perhaps before the first) */
			want -= want % SIM_DIRECT_ALIGN_BYTES;
	}
	return (int)ino_write(d->ino, o->iov, o->n, o->pos, want);
}

unsigned sim_ring_step(struct io_uring *ring, unsigned max, sim_cqe_cb cb, void *arg)
{
	struct sim_ring *r = (struct sim_ring *)ring;
	unsigned done = 0;

	while (done < max && r->nops) {
		unsigned ready[SIM_RING_OPS_MAX], nready = 0;
		for (unsigned i = 0; i < r->nops; i++)
			if (!op_waiting(r, &r->ops[i]))
				ready[nready++] = i;
		assert(nready > 0);
		unsigned k = ready[sim_below(nready)];
		struct sim_op o = r->ops[k];
		memmove(&r->ops[k], &r->ops[k + 1], (r->nops - k - 1) * sizeof(r->ops[0]));
		r->nops--;
		if (!o.submitted)
			r->unsubmitted--;
		int res = op_run(r, &o);
		/* A chain stops at a failure (IOSQE_IO_LINK: a short write is one) unless the link is hard;
		 * a cancelled op cancels the rest of its chain whatever its link. */
		bool failed = res < 0 || (o.kind == OP_WRITE && res != (int)op_bytes(&o));
		if ((o.link && failed) || (o.cancel && (o.link || o.hard)))
			for (unsigned i = 0; i < r->nops; i++)
				if (r->ops[i].after == o.id)
					r->ops[i].cancel = true;
		free(o.iov);
		struct io_uring_cqe cqe = { .user_data = o.ud, .res = res };
		cb(arg, &cqe);
		done++;
	}
	return done;
}
