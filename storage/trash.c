/*
 * trash.c - a deleted partition's files removed off the poll core (trash.h).
 * Locality: the owning core.
 */
#include "trash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"

static void tick(struct st_trash *t);

static bool dot(const char *n)
{
	return !strcmp(n, ".") || !strcmp(n, "..");
}

/* A fresh name in the trash for what is put there. */
static void fresh_name(struct st_trash *t, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%llx.%llu", t->dir, (unsigned long long)t->stamp, (unsigned long long)++t->seq);
}

/* Another core directory's entries into t's, then that directory removed (init only). */
static void adopt_dir(struct st_trash *t, const char *path)
{
	DIR *d = st_fs_opendir(path);
	if (!d)
		return;
	struct dirent *e;
	char from[ST_TRASH_PATH_BYTES + 512], to[ST_TRASH_PATH_BYTES + 64];
	while ((e = st_fs_readdir(d))) {
		if (dot(e->d_name))
			continue;
		snprintf(from, sizeof(from), "%s/%s", path, e->d_name);
		fresh_name(t, to, sizeof(to));
		if (st_fs_rename(from, to) < 0)
			fprintf(stderr, "sluice storage: %s: cannot move into %s: %s\n", from, t->dir, strerror(errno));
	}
	st_fs_closedir(d);
	st_fs_rmdir(path);   /* empty now, or left for a later start */
}

void st_trash_init(struct st_trash *t, struct st_io *io, const char *data_dir, int core, uint64_t stamp,
                   bool adopt, const int *live, int nlive)
{
	memset(t, 0, sizeof(*t));
	t->io = io;
	t->stamp = stamp;
	t->subfd = t->dirfd = t->pfd = -1;
	char top[ST_TRASH_PATH_BYTES - 16];
	snprintf(top, sizeof(top), "%s/%s", data_dir, ST_TRASH_DIR);
	snprintf(t->dir, sizeof(t->dir), "%s/%d", top, core);
	if ((st_fs_mkdir(top, 0755) < 0 && errno != EEXIST) || (st_fs_mkdir(t->dir, 0755) < 0 && errno != EEXIST)) {
		fprintf(stderr, "sluice storage: %s: cannot make the trash directory: %s; deleted partitions are "
		        "removed on the core\n", t->dir, strerror(errno));
		return;
	}
	if ((t->dirfd = st_fs_open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)) < 0) {
		fprintf(stderr, "sluice storage: %s: cannot open the trash directory: %s; deleted partitions are "
		        "removed on the core\n", t->dir, strerror(errno));
		return;
	}
	t->made = true;
	t->pending = true;   /* what an earlier run left */
	if (!adopt)
		return;
	DIR *d = st_fs_opendir(top);
	struct dirent *e;
	while (d && (e = st_fs_readdir(d))) {
		char *end;
		long k = strtol(e->d_name, &end, 10);
		bool ours = *end == 0 && end != e->d_name && k == core;
		for (int i = 0; i < nlive && !ours; i++)
			ours = *end == 0 && end != e->d_name && k == live[i];
		if (dot(e->d_name) || ours)
			continue;
		char path[ST_TRASH_PATH_BYTES + 256];
		snprintf(path, sizeof(path), "%s/%s", top, e->d_name);
		adopt_dir(t, path);
	}
	if (d)
		st_fs_closedir(d);
}

int st_trash_put(struct st_trash *t, const char *path)
{
	if (!t->made)
		return -ENOENT;
	char to[ST_TRASH_PATH_BYTES + 64];
	fresh_name(t, to, sizeof(to));
	if (st_fs_rename(path, to) < 0)
		return -errno;
	t->pending = true;
	t->again = true;   /* a pass over the top directory under way may have passed it */
	return 0;
}

static void unlinked(void *arg, int status)
{
	struct st_trash *t = arg;
	t->inflight--;
	if (status < 0)
		t->failures++;
	else
		t->files_removed++;
	tick(t);   /* the next one at once (its SQEs are queued, never completed inside) */
}

/* Close fd (-1: none) and unlink dirfd/name on a kernel worker (the core never waits for the blocks). */
static void unlink_async(struct st_trash *t, int fd, int dirfd, const char *name)
{
	uint32_t i = 0;
	while (st_fop_busy(&t->fop[i]))
		i++;   /* one is free: inflight < ST_TRASH_UNLINKS */
	snprintf(t->names[i], sizeof(t->names[i]), "%s", name);
	t->inflight++;
	st_fop_close_drop(t->io, &t->fop[i], fd, dirfd, t->names[i], unlinked, t);
}

/* The punched file closed and unlinked. */
static void dropped(void *arg, int status)
{
	struct st_trash *t = arg;
	t->punching = false;
	if (status < 0)
		t->failures++;
	else
		t->files_removed++;
	tick(t);
}

static void punched(void *arg, int status)
{
	struct st_trash *t = arg;
	t->punches++;
	if (status < 0 && !t->pfailed) {
		t->pfailed = true;   /* no holes here (or a failure): the unlink frees the rest at once */
		if (status != -EOPNOTSUPP)
			fprintf(stderr, "sluice storage: %s/%s/%s: punch failed: %s; unlinked whole\n", t->dir, t->subname,
			        t->pname, strerror(-status));
	}
	t->pnext_ms = t->now_ms + ST_TRASH_PUNCH_GAP_MS;
}

/* The large file's next step, when it is due: a punch from its end, or its unlink once empty. */
static void punch_next(struct st_trash *t)
{
	if (!t->punching || st_fop_busy(&t->punch) || t->now_ms < t->pnext_ms)
		return;
	if (t->pfailed || t->pend == 0) {
		int fd = t->pfd;
		t->pfd = -1;   /* the fop closes it */
		st_fop_close_drop(t->io, &t->punch, fd, t->pdirfd, t->pname, dropped, t);
		return;
	}
	uint64_t len = t->pend > ST_TRASH_PUNCH_BYTES ? ST_TRASH_PUNCH_BYTES : t->pend;
	t->pend -= len;
	st_fop_punch(t->io, &t->punch, t->pfd, t->pend, len, punched, t);
}

/*
 * One file of the entry being emptied: unlinked, or, when it holds more than
 * ST_TRASH_PUNCH_BYTES, punched first (trash.h). false: it is large and the
 * punch is busy with another, so it waits (held).
 */
static bool file_take(struct st_trash *t, const char *name)
{
	int fd = st_fs_openat(t->subfd, name, O_WRONLY | O_CLOEXEC, 0);
	struct stat st;
	uint64_t held = fd >= 0 && st_fs_fstat(fd, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
	if (held <= ST_TRASH_PUNCH_BYTES) {
		unlink_async(t, fd, t->subfd, name);
		return true;
	}
	if (t->punching) {
		st_fs_close(fd);
		return false;
	}
	uint64_t size = (uint64_t)st.st_size > held ? (uint64_t)st.st_size : held;   /* blocks past the size too */
	t->punching = true;
	t->pfailed = false;
	t->pfd = fd;
	t->pdirfd = t->subfd;
	t->pend = (size + 4095) & ~(uint64_t)4095;
	t->pnext_ms = t->now_ms;
	snprintf(t->pname, sizeof(t->pname), "%s", name);
	punch_next(t);
	return true;
}

/* The entry being emptied is done with: removed once empty, another pass, or left for a later start. */
static void sub_end(struct st_trash *t)
{
	char path[ST_TRASH_PATH_BYTES + 256];
	snprintf(path, sizeof(path), "%s/%s", t->dir, t->subname);
	if (st_fs_rmdir(path) == 0) {
		t->dirs_removed++;
	} else if (errno == ENOTEMPTY && ++t->sub_passes < ST_TRASH_PASSES_MAX) {
		st_fs_rewinddir(t->sub);   /* a readdir that skipped entries while they went (tmpfs) */
		return;
	} else if (errno != ENOENT) {
		t->failures++;   /* left: the next start tries again */
	}
	st_fs_closedir(t->sub);   /* its descriptor was a duplicate of subfd */
	st_fs_close(t->subfd);
	t->sub = NULL;
	t->subfd = -1;
}

void st_trash_tick(struct st_trash *t, int64_t now_ms)
{
	t->now_ms = now_ms;
	tick(t);
}

static void tick(struct st_trash *t)
{
	struct dirent *e;
	punch_next(t);
	while (t->pending && t->inflight < ST_TRASH_UNLINKS) {
		if (t->sub_file) {
			if (t->inflight)
				return;   /* its unlink is under way */
			t->sub_file = false;
			continue;
		}
		if (!t->sub) {
			if (!t->top) {
				int fd = st_fs_dup(t->dirfd);
				if (fd < 0 || !(t->top = st_fs_fdopendir(fd))) {
					if (fd >= 0)
						st_fs_close(fd);
					t->failures++;
					t->pending = false;   /* the next put tries again */
					return;
				}
				st_fs_rewinddir(t->top);   /* the duplicate shares dirfd's offset, left at the last pass's end */
				t->again = false;
			}
			while ((e = st_fs_readdir(t->top)) && dot(e->d_name))
				;
			if (!e) {   /* the end of a pass: another if something came in meanwhile */
				st_fs_closedir(t->top);
				t->top = NULL;
				if (!t->again)
					t->pending = false;
				continue;
			}
			snprintf(t->subname, sizeof(t->subname), "%s", e->d_name);
			t->sub_passes = 0;
			t->subfd = st_fs_openat(t->dirfd, t->subname, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
			int dup = t->subfd < 0 ? -1 : st_fs_dup(t->subfd);
			if (dup >= 0 && !(t->sub = st_fs_fdopendir(dup)))
				st_fs_close(dup);
			if (!t->sub) {
				if (t->subfd >= 0)
					st_fs_close(t->subfd);
				t->subfd = -1;
				t->sub_file = true;   /* a file (or a directory that would not open): unlinked whole */
				unlink_async(t, -1, t->dirfd, t->subname);
			}
			continue;
		}
		if (t->has_held) {
			if (t->punching || !file_take(t, t->held))
				return;   /* the punch is still busy with another */
			t->has_held = false;
			continue;
		}
		while ((e = st_fs_readdir(t->sub)) && dot(e->d_name))
			;
		if (e) {
			if (!file_take(t, e->d_name)) {
				snprintf(t->held, sizeof(t->held), "%s", e->d_name);
				t->has_held = true;
				return;
			}
			continue;
		}
		if (t->inflight || t->punching)
			return;   /* the directory goes once its files are gone */
		sub_end(t);
	}
}

bool st_trash_busy(const struct st_trash *t)
{
	return t->inflight != 0 || st_fop_busy(&t->punch);
}

void st_trash_fini(struct st_trash *t)
{
	if (t->pfd >= 0)
		st_fs_close(t->pfd);   /* between two punches: the rest after the next start */
	t->pfd = -1;
	t->punching = false;
	if (t->sub) {
		st_fs_closedir(t->sub);
		st_fs_close(t->subfd);
		t->sub = NULL;
		t->subfd = -1;
	}
	if (t->top)
		st_fs_closedir(t->top);
	t->top = NULL;
	if (t->dirfd >= 0)
		st_fs_close(t->dirfd);
	t->dirfd = -1;
	t->made = t->pending = false;
}
