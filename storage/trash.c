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

#include "fs.h"

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
	t->subfd = t->dirfd = -1;
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
	st_trash_tick(t);   /* the next one at once (its SQEs are queued, never completed inside) */
}

/* Unlink dirfd/name on a kernel worker (the core never waits for its blocks to be freed). */
static void unlink_async(struct st_trash *t, int dirfd, const char *name)
{
	uint32_t i = 0;
	while (st_fop_busy(&t->fop[i]))
		i++;   /* one is free: inflight < ST_TRASH_UNLINKS */
	snprintf(t->names[i], sizeof(t->names[i]), "%s", name);
	t->inflight++;
	st_fop_close_drop(t->io, &t->fop[i], -1, dirfd, t->names[i], unlinked, t);
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

void st_trash_tick(struct st_trash *t)
{
	struct dirent *e;
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
				unlink_async(t, t->dirfd, t->subname);
			}
			continue;
		}
		while ((e = st_fs_readdir(t->sub)) && dot(e->d_name))
			;
		if (e) {
			unlink_async(t, t->subfd, e->d_name);
			continue;
		}
		if (t->inflight)
			return;   /* the directory goes once its files are gone */
		sub_end(t);
	}
}

bool st_trash_busy(const struct st_trash *t)
{
	return t->inflight != 0;
}

void st_trash_fini(struct st_trash *t)
{
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
