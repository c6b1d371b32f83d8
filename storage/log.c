/*
 * log.c - the partition log: segments, sparse indexes, recovery, and the
 * per-core io_uring group commit.
 *
 * Write path (all on the owner core, no allocation):
 *   st_log_append   assign offsets (LEO moves at once), patch baseOffset,
 *                   take a slot from the core's fixed pool, queue it on the
 *                   log's pending list, put the log on the core's dirty list;
 *   st_io_flush     per dirty log: form ONE group (a prefix of its pending
 *                   appends in one segment), prepare ONE writev at their file
 *                   position linked (IOSQE_IO_LINK) to ONE fdatasync (after a
 *                   roll, a directory fsync linked before them: the new
 *                   segment's name is durable before anything in it is acked);
 *   st_io_complete  (CQEs of file operations go to fop.c)
 *                   when the group's last CQE arrives: resubmit the rest of a
 *                   short write, or fail the partition on an error, or
 *                   advance the durable offset and call back every append in
 *                   order. One group per log is in flight at a time; appends
 *                   made meanwhile wait for the next flush after it.
 * On-disk formats: log_internal.h.
 */
#include "log_internal.h"
#include "trash.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "crc32c.h"
#include "fs.h"
#include "fop.h"

#define ST_LOG_SUFFIX ".log"
#define ST_INDEX_SUFFIX ".index"
#define ST_TINDEX_SUFFIX ".timeindex"
#define ST_SEG_NAME_DIGITS 20

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */

static void seg_name(char *buf, int64_t base, const char *suffix)
{
	snprintf(buf, ST_LOG_NAME_BYTES, "%020" PRId64 "%s", base, suffix);
}

/* *got is what was read, set on every return: on an error, what came before it. */
static int pread_full(int fd, void *buf, size_t len, uint64_t pos, size_t *got)
{
	size_t done = 0;
	int rc = 0;

	while (done < len) {
		ssize_t r = st_fs_pread(fd, (uint8_t *)buf + done, len - done, (off_t)(pos + done));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	*got = done;
	return rc;
}

static int write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = st_fs_write(fd, (const uint8_t *)buf + done, len - done);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)r;
	}
	return 0;
}

static struct st_seg *log_active(const struct st_log *log)
{
	assert(log->nsegs > 0);
	return log->segs[log->nsegs - 1];
}

/* Entries a segment of `bytes` bytes can need: one per interval, plus the first. */
static uint32_t index_cap_for(const struct st_log_config *cfg, uint64_t bytes)
{
	return (uint32_t)(bytes / cfg->index_interval_bytes + 2);
}

size_t st_log_open_bytes(const struct st_log_config *cfg)
{
	return ((sizeof(struct st_log) + 63) & ~(size_t)63) + ST_LOG_SEGMENTS_INIT * sizeof(struct st_seg *) +
	       sizeof(struct st_seg) +
	       (size_t)index_cap_for(cfg, cfg->segment_bytes) * (sizeof(struct st_index_entry) + sizeof(int64_t)) +
	       PATH_MAX;   /* its directory's name, at most */
}

/* The active segment's arrays (offset and time index) hold a full segment's entries (allocated at
 * open or roll, not per append); a sealed segment's are trimmed to its entries. */
static int seg_index_reserve(struct st_seg *seg, uint32_t cap)
{
	if (seg->index_cap >= cap)
		return 0;
	struct st_index_entry *e = realloc(seg->index, (size_t)cap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	seg->index = e;
	int64_t *t = realloc(seg->tindex, (size_t)cap * sizeof(*t));
	if (!t)
		return -ENOMEM; /* index_cap stays the smaller array's */
	seg->tindex = t;
	seg->index_cap = cap;
	return 0;
}

static void seg_index_trim(struct st_seg *seg)
{
	uint32_t cap = seg->index_n ? seg->index_n : 1;
	if (cap >= seg->index_cap)
		return;
	struct st_index_entry *e = realloc(seg->index, (size_t)cap * sizeof(*e));
	int64_t *t = e ? realloc(seg->tindex, (size_t)cap * sizeof(*t)) : NULL;

	/* keeping the larger arrays is fine if realloc cannot shrink */
	if (e)
		seg->index = e;
	if (t)
		seg->tindex = t;
	if (e && t)
		seg->index_cap = cap;
}

/* Record the batch at (base, pos), whose maxTimestamp is max_ts, in seg's sparse indexes: an
 * entry if it is due one, and its timestamp in the running maximum of the last entry. */
static void seg_index_note(struct st_seg *seg, uint32_t interval, int64_t base, uint64_t pos, int64_t max_ts)
{
	if ((!seg->index_n || pos - seg->index[seg->index_n - 1].pos >= interval) &&
	    pos <= UINT32_MAX) { /* past it: only a segment recovered from a larger configuration: scan further */
		assert(seg->index_n < seg->index_cap);
		assert(base >= seg->base && base - seg->base <= UINT32_MAX);
		assert(!seg->index_n || (uint32_t)(base - seg->base) > seg->index[seg->index_n - 1].rel);
		seg->tindex[seg->index_n] = seg->index_n ? seg->tindex[seg->index_n - 1] : INT64_MIN;
		seg->index[seg->index_n++] = (struct st_index_entry){ (uint32_t)(base - seg->base), (uint32_t)pos };
		seg->index_dirty = true;
	}
	assert(seg->index_n > 0); /* the first batch, at 0, always has one */
	if (max_ts > seg->tindex[seg->index_n - 1]) {
		seg->tindex[seg->index_n - 1] = max_ts;
		seg->index_dirty = true;
	}
}

/* Position of the last index entry at or before offset (0 if none); *base_at (if not NULL) gets the
 * base offset of the batch there. */
static uint64_t seg_index_lookup(const struct st_seg *seg, int64_t offset, int64_t *base_at)
{
	uint32_t lo = 0, hi = seg->index_n;
	int64_t rel = offset - seg->base;

	assert(rel >= 0);
	while (lo < hi) { /* first entry with rel > target */
		uint32_t mid = lo + (hi - lo) / 2;
		if ((int64_t)seg->index[mid].rel <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (base_at)
		*base_at = seg->base + (lo ? (int64_t)seg->index[lo - 1].rel : 0);
	return lo ? seg->index[lo - 1].pos : 0;
}

/* Index of the segment holding offset: the last one whose base <= offset. */
static uint32_t log_seg_find(const struct st_log *log, int64_t offset)
{
	uint32_t lo = 0, hi = log->nsegs;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (log->segs[mid]->base <= offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	assert(lo > 0);
	return lo - 1;
}

/* ------------------------------------------------------------------------ */
/* Index files                                                               */

static size_t index_bytes(const struct st_seg *seg)
{
	return ST_INDEX_HEADER_BYTES + (size_t)seg->index_n * ST_INDEX_ENTRY_BYTES;
}

static void index_encode(const struct st_seg *seg, uint8_t *buf)
{
	size_t bytes = index_bytes(seg);

	st_put_be32(buf + 0, ST_INDEX_MAGIC);
	st_put_be32(buf + 4, ST_INDEX_VERSION);
	st_put_be64(buf + 8, (uint64_t)seg->base);
	st_put_be64(buf + 16, seg->size);
	st_put_be64(buf + 24, (uint64_t)seg->end);
	st_put_be64(buf + 32, (uint64_t)seg->max_ts);
	st_put_be32(buf + 40, seg->index_n);
	for (uint32_t i = 0; i < seg->index_n; i++) {
		st_put_be32(buf + ST_INDEX_HEADER_BYTES + 8 * i, seg->index[i].rel);
		st_put_be32(buf + ST_INDEX_HEADER_BYTES + 8 * i + 4, seg->index[i].pos);
	}
	uint32_t crc = crc32c(0, buf, 44);
	st_put_be32(buf + 44, crc32c(crc, buf + ST_INDEX_HEADER_BYTES, bytes - ST_INDEX_HEADER_BYTES));
}

static size_t tindex_bytes(const struct st_seg *seg)
{
	return ST_TINDEX_HEADER_BYTES + (size_t)seg->index_n * ST_TINDEX_ENTRY_BYTES;
}

static void tindex_encode(const struct st_seg *seg, uint8_t *buf)
{
	size_t bytes = tindex_bytes(seg);

	st_put_be32(buf + 0, ST_TINDEX_MAGIC);
	st_put_be32(buf + 4, ST_TINDEX_VERSION);
	st_put_be64(buf + 8, (uint64_t)seg->base);
	st_put_be64(buf + 16, seg->size);
	st_put_be32(buf + 24, seg->index_n);
	for (uint32_t i = 0; i < seg->index_n; i++)
		st_put_be64(buf + ST_TINDEX_HEADER_BYTES + 8 * i, (uint64_t)seg->tindex[i]);
	uint32_t crc = crc32c(0, buf, 28);
	st_put_be32(buf + 28, crc32c(crc, buf + ST_TINDEX_HEADER_BYTES, bytes - ST_TINDEX_HEADER_BYTES));
}

/* Write one index file (synchronous: recovery and close). */
static int index_file_write(struct st_log *log, int64_t base, const char *suffix, const uint8_t *buf, size_t bytes)
{
	char name[ST_LOG_NAME_BYTES];

	seg_name(name, base, suffix);
	/* No fsync: the index is a cache that recovery validates (crc, log_bytes) before trusting. */
	int fd = st_fs_openat(log->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc = fd < 0 ? -errno : write_full(fd, buf, bytes);
	if (fd >= 0)
		st_fs_close(fd);
	if (rc < 0)
		fprintf(stderr, "sluice storage: %s: cannot write %s: %s (it will be rebuilt at open)\n",
		        log->dir, name, strerror(-rc));
	return rc;
}

/* Both indexes, synchronously: recovery and close (seg_seal writes through io_uring). */
static int index_write(struct st_log *log, struct st_seg *seg)
{
	size_t bytes = index_bytes(seg), tbytes = tindex_bytes(seg);
	uint8_t *buf;
	int rc;

	if (seg->ndmg || seg->damage_seen)
		return 0; /* a damaged segment is scanned at each open: its damage ranges live in memory only */
	if (!(buf = malloc(bytes > tbytes ? bytes : tbytes))) /* recovery/close only, never per append */
		return -ENOMEM;
	index_encode(seg, buf);
	rc = index_file_write(log, seg->base, ST_INDEX_SUFFIX, buf, bytes);
	if (rc == 0) {
		tindex_encode(seg, buf);
		rc = index_file_write(log, seg->base, ST_TINDEX_SUFFIX, buf, tbytes);
	}
	free(buf);
	if (rc == 0)
		seg->index_dirty = false;
	return rc;
}

/* Load and validate seg's .index against a .log of log_bytes bytes. 0 if trusted. */
static int index_load(struct st_log *log, struct st_seg *seg, uint64_t log_bytes)
{
	char name[ST_LOG_NAME_BYTES];
	struct stat st;
	uint8_t *buf = NULL;
	size_t got;
	int rc = -EBADMSG;

	seg_name(name, seg->base, ST_INDEX_SUFFIX);
	int fd = st_fs_openat(log->dirfd, name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (st_fs_fstat(fd, &st) < 0 || st.st_size < ST_INDEX_HEADER_BYTES ||
	    (st.st_size - ST_INDEX_HEADER_BYTES) % ST_INDEX_ENTRY_BYTES ||
	    st.st_size > ST_INDEX_HEADER_BYTES + (off_t)ST_LOG_INDEX_ENTRIES_MAX * ST_INDEX_ENTRY_BYTES)
		goto out;
	buf = malloc((size_t)st.st_size);
	if (!buf || pread_full(fd, buf, (size_t)st.st_size, 0, &got) < 0 || got != (size_t)st.st_size)
		goto out;
	uint32_t n = st_be32(buf + 40);
	int64_t end = (int64_t)st_be64(buf + 24);
	uint32_t crc = crc32c(crc32c(0, buf, 44), buf + ST_INDEX_HEADER_BYTES, got - ST_INDEX_HEADER_BYTES);
	if (st_be32(buf) != ST_INDEX_MAGIC || st_be32(buf + 4) != ST_INDEX_VERSION ||
	    (int64_t)st_be64(buf + 8) != seg->base || st_be64(buf + 16) != log_bytes ||
	    n != (got - ST_INDEX_HEADER_BYTES) / ST_INDEX_ENTRY_BYTES || st_be32(buf + 44) != crc ||
	    end < seg->base || (log_bytes == 0) != (end == seg->base) || (log_bytes == 0) != (n == 0))
		goto out;
	if ((rc = seg_index_reserve(seg, n)) < 0)
		goto out;
	rc = -EBADMSG;
	for (uint32_t i = 0; i < n; i++) {
		struct st_index_entry e = { st_be32(buf + 48 + 8 * i), st_be32(buf + 52 + 8 * i) };
		bool ordered = i == 0 ? (e.rel == 0 && e.pos == 0)
		                      : (e.rel > seg->index[i - 1].rel && e.pos > seg->index[i - 1].pos);
		if (!ordered || e.pos >= log_bytes || (int64_t)e.rel >= end - seg->base)
			goto out;
		seg->index[i] = e;
	}
	seg->index_n = n;
	seg->end = end;
	seg->max_ts = (int64_t)st_be64(buf + 32);
	seg->size = seg->durable_size = log_bytes;
	rc = 0;
out:
	if (rc < 0)
		seg->index_n = 0;
	free(buf);
	st_fs_close(fd);
	return rc;
}

/* Load and validate seg's .timeindex against its loaded offset index (index_load) and a .log of
 * log_bytes bytes. 0 if trusted; otherwise the segment is scanned and both are rewritten. */
static int tindex_load(struct st_log *log, struct st_seg *seg, uint64_t log_bytes)
{
	char name[ST_LOG_NAME_BYTES];
	struct stat st;
	uint8_t *buf = NULL;
	size_t got;
	int rc = -EBADMSG;
	uint64_t want = ST_TINDEX_HEADER_BYTES + (uint64_t)seg->index_n * ST_TINDEX_ENTRY_BYTES;

	seg_name(name, seg->base, ST_TINDEX_SUFFIX);
	int fd = st_fs_openat(log->dirfd, name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Its size follows from the offset index's entry count, itself bounded (index_load). */
	if (st_fs_fstat(fd, &st) < 0 || (uint64_t)st.st_size != want)
		goto out;
	buf = malloc((size_t)want);
	if (!buf || pread_full(fd, buf, (size_t)want, 0, &got) < 0 || got != (size_t)want)
		goto out;
	uint32_t crc = crc32c(crc32c(0, buf, 28), buf + ST_TINDEX_HEADER_BYTES, got - ST_TINDEX_HEADER_BYTES);
	if (st_be32(buf) != ST_TINDEX_MAGIC || st_be32(buf + 4) != ST_TINDEX_VERSION ||
	    (int64_t)st_be64(buf + 8) != seg->base || st_be64(buf + 16) != log_bytes ||
	    st_be32(buf + 24) != seg->index_n || st_be32(buf + 28) != crc)
		goto out;
	for (uint32_t i = 0; i < seg->index_n; i++) {
		int64_t t = (int64_t)st_be64(buf + ST_TINDEX_HEADER_BYTES + 8 * i);
		if (i > 0 && t < seg->tindex[i - 1])
			goto out; /* a running maximum never decreases */
		seg->tindex[i] = t;
	}
	if (seg->index_n && (seg->tindex[seg->index_n - 1] > -1 ? seg->tindex[seg->index_n - 1] : -1) != seg->max_ts)
		goto out; /* the last entry is the segment's maximum (floored at -1, as .index keeps it) */
	rc = 0;
out:
	free(buf);
	st_fs_close(fd);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Segments                                                                  */

static void seg_free(struct st_seg *seg)
{
	if (!seg)
		return;
	if (seg->fd >= 0)
		st_fs_close(seg->fd);
	if (seg->dfd >= 0)
		st_fs_close(seg->dfd);
	free(seg->index);
	free(seg->tindex);
	free(seg->dmg);
	free(seg);
}

static void seg_unlink(struct st_log *log, int64_t base)
{
	char name[ST_LOG_NAME_BYTES];

	seg_name(name, base, ST_LOG_SUFFIX);
	if (st_fs_unlinkat(log->dirfd, name, 0) < 0 && errno != ENOENT)
		fprintf(stderr, "sluice storage: %s: cannot remove %s: %s\n", log->dir, name, strerror(errno));
	seg_name(name, base, ST_INDEX_SUFFIX);
	st_fs_unlinkat(log->dirfd, name, 0); /* may not exist */
	seg_name(name, base, ST_TINDEX_SUFFIX);
	st_fs_unlinkat(log->dirfd, name, 0);
}

static void drop_start(struct st_log *log, struct st_seg_drop *d, struct st_seg *seg);

static void drop_done(void *arg, int status)
{
	struct st_seg_drop *d = arg;
	struct st_log *log = d->log;
	if (status < 0)
		fprintf(stderr, "sluice storage: %s: cannot close a removed segment's file: %s\n", log->dir,
		        strerror(-status));
	assert(d->left > 0);
	if (--d->left)
		return;
	log->drops_busy--;
	struct st_seg *next = log->io->quiescing ? NULL : log->drop_wait;
	if (next) {   /* the oldest waiting takes this drop (its fops may restart from their callback) */
		log->drop_wait = next->drop_next;
		if (!log->drop_wait)
			log->drop_wait_tail = NULL;
		drop_start(log, d, next);
	}
}

/*
 * Segment seg leaves the log: its files are closed and unlinked off the
 * thread (st_seg_drop), at once or, while every drop is busy, after the ones
 * before it (drop_wait); seg is freed now or then. Without an io_uring (the
 * tools) on the spot.
 */
static void seg_remove(struct st_log *log, struct st_seg *seg)
{
	if (!log->io) {
		seg_unlink(log, seg->base);
		seg_free(seg);
		return;
	}
	for (uint32_t i = 0; i < ST_LOG_DROPS_MAX; i++)
		if (!log->drops[i].left) {
			drop_start(log, &log->drops[i], seg);
			return;
		}
	seg->drop_next = NULL;
	if (log->drop_wait_tail)
		log->drop_wait_tail->drop_next = seg;
	else
		log->drop_wait = seg;
	log->drop_wait_tail = seg;
}

static void drop_start(struct st_log *log, struct st_seg_drop *d, struct st_seg *seg)
{
	static const char *const suffix[3] = { ST_LOG_SUFFIX, ST_INDEX_SUFFIX, ST_TINDEX_SUFFIX };
	/*
	 * The blocks are freed when the last link and the last reference are gone,
	 * in whichever call drops the last one. The descriptors go first, while the
	 * file is still linked: the direct one here (another is open: only a count
	 * moves), the other as fop[0]'s first step (io_uring runs a close inline);
	 * then fop[0]'s unlink, which io_uring always hands to a kernel worker,
	 * drops the last link, so the worker frees the blocks, not this core.
	 */
	if (seg->dfd >= 0)
		st_fs_close(seg->dfd);
	int fds[3] = { seg->fd, -1, -1 };
	for (int i = 0; i < 3; i++)
		seg_name(d->names[i], seg->base, suffix[i]);
	seg->fd = seg->dfd = -1;   /* now the drop's */
	seg_free(seg);
	d->log = log;
	d->left = 3;
	log->drops_busy++;
	for (int i = 0; i < 3; i++)
		st_fop_close_drop(log->io, &d->fop[i], fds[i], log->dirfd, d->names[i], drop_done, d);
}

/* Open (create if flags say so) segment `base`; *size_out gets its file size. */
static int seg_open(struct st_log *log, int64_t base, int flags, struct st_seg **out, uint64_t *size_out)
{
	char name[ST_LOG_NAME_BYTES];
	struct stat st;
	struct st_seg *seg = calloc(1, sizeof(*seg));

	if (!seg)
		return -ENOMEM;
	seg->base = seg->end = base;
	seg->max_ts = -1;
	seg->dfd = -1;
	seg->name_durable = true; /* at open (recovery syncs the directory itself); log_roll says otherwise */
	seg_name(name, base, ST_LOG_SUFFIX);
	seg->fd = st_fs_openat(log->dirfd, name, O_RDWR | O_CLOEXEC | flags, 0644);
	if (seg->fd < 0 || st_fs_fstat(seg->fd, &st) < 0) {
		int rc = -errno;
		fprintf(stderr, "sluice storage: %s: cannot open %s: %s\n", log->dir, name, strerror(-rc));
		seg_free(seg);
		return rc;
	}
	*size_out = (uint64_t)st.st_size;
	seg->prealloc_end = (uint64_t)st.st_size; /* what lies past it is unknown: asked for again (harmless) */
	*out = seg;
	return 0;
}

/* Direct io is off for this log from now on (logged once); the appends are the same bytes. */
static void log_dio_off(struct st_log *log, const char *why)
{
	if (!log->dio_off)
		fprintf(stderr, "sluice storage: %s: %s; its appends go through the page cache\n", log->dir, why);
	log->dio_off = true;
}

/*
 * Direct io: the active segment's second descriptor, opened O_DIRECT, for the
 * groups' whole blocks (log_prep). The block is the file system's alignment
 * (statx STATX_DIOALIGN, asked once per log: a log's segments share a file
 * system); one that says no, asks for more than ST_LOG_DIRECT_ALIGN_MAX_BYTES
 * or refuses the open (tmpfs before Linux 6.6: EINVAL) leaves the log on the
 * ordinary path, logged once; the appends are the same bytes either way.
 * Called at open and on a roll (rare; the same kind of openat as seg_open's).
 */
static void seg_open_direct(struct st_log *log, struct st_seg *seg)
{
	char name[ST_LOG_NAME_BYTES], why[ST_LOG_NAME_BYTES + 96];

	if (!log->dbuf || log->dio_off)
		return;
	seg_name(name, seg->base, ST_LOG_SUFFIX);
	if (!log->dalign) {
		uint32_t mem;
		int a = st_fs_dio_align(seg->fd, &mem);
		log->dalign = ST_LOG_DIRECT_ALIGN_BYTES; /* the buffer's block even when no write is direct */
		if (a < 0 && errno == EOPNOTSUPP) {
			snprintf(why, sizeof(why), "%s: no O_DIRECT here (statx)", name);
			log_dio_off(log, why);
			return;
		}
		if (a < 0)
			a = 0; /* statx itself failed (EPERM under an old seccomp, ENOMEM): not reported, so the
			        * default block, and a refused write (EINVAL) still falls back */
		if ((uint32_t)a > ST_LOG_DIRECT_ALIGN_MAX_BYTES || (a & (a - 1)) || mem > ST_LOG_DIRECT_ALIGN_BYTES) {
			snprintf(why, sizeof(why), "%s: O_DIRECT alignment %d bytes (buffers %u) is beyond %u (%u)", name,
			         a, mem, ST_LOG_DIRECT_ALIGN_MAX_BYTES, ST_LOG_DIRECT_ALIGN_BYTES);
			log_dio_off(log, why);
			return;
		}
		if ((uint32_t)a > log->dalign)
			log->dalign = (uint32_t)a;
	}
	seg->dfd = st_fs_openat(log->dirfd, name, O_WRONLY | O_DIRECT | O_CLOEXEC, 0);
	if (seg->dfd < 0 && (errno == EINVAL || errno == EOPNOTSUPP)) {
		snprintf(why, sizeof(why), "cannot open %s with O_DIRECT: %s", name, strerror(errno));
		log_dio_off(log, why);
	} else if (seg->dfd < 0) {
		/* Out of descriptors or memory (transient): only this segment goes the ordinary way. */
		fprintf(stderr, "sluice storage: %s: cannot open %s with O_DIRECT (%s); this segment's appends go through the page cache\n",
		        log->dir, name, strerror(errno));
	}
}

/* The direct buffer now follows seg, from its durable end: its last partial block read back. */
static int log_dbuf_prime(struct st_log *log, struct st_seg *seg)
{
	size_t got = 0;
	int rc;

	log->dseg = seg;
	log->dbase = seg->durable_size & ~(uint64_t)(log->dalign - 1);
	log->dlen = seg->durable_size - log->dbase;
	if (!log->dlen)
		return 0;
	if ((rc = pread_full(seg->fd, log->dbuf, log->dlen, log->dbase, &got)) < 0)
		return rc;
	return got == log->dlen ? 0 : -EIO;
}

static int log_segs_push(struct st_log *log, struct st_seg *seg)
{
	if (log->nsegs == log->segs_cap) {
		uint32_t cap = log->segs_cap ? 2 * log->segs_cap : ST_LOG_SEGMENTS_INIT;
		struct st_seg **s = realloc(log->segs, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		log->segs = s;
		log->segs_cap = cap;
	}
	assert(!log->nsegs || seg->base == log_active(log)->end);
	log->segs[log->nsegs++] = seg;
	return 0;
}

/* Make the directory entries of created/removed files durable (recovery only: a roll's goes
 * through io_uring, log_prep). */
static int log_sync_dir(struct st_log *log)
{
	if (st_fs_fsync(log->dirfd) < 0) {
		int rc = -errno;
		fprintf(stderr, "sluice storage: %s: fsync of directory failed: %s\n", log->dir, strerror(-rc));
		return rc;
	}
	return 0;
}

/* A sealed segment's indexes being written through the core's io_uring (seg_seal): one block, the
 * two operations (offset index, time index) and then both files' bytes. Locality: owner core. */
struct st_index_job {
	struct st_fop fop[2];     /* first: malloc's 16-byte alignment */
	struct st_log *log;       /* the log waits for it (st_log_idle); its segment may go meanwhile */
	int64_t base;             /* the segment's */
	uint32_t left;            /* operations not yet complete */
	int err;                  /* the first one's failure, 0 none */
	char name[2][ST_LOG_NAME_BYTES];
	uint8_t buf[];
};

static void seg_index_unlink(struct st_log *log, int64_t base);
static uint32_t log_seg_find(const struct st_log *log, int64_t offset);

static void index_written(void *arg, int status)
{
	struct st_index_job *j = arg;
	struct st_log *log = j->log;
	struct st_seg *seg = NULL;

	if (status < 0) {
		fprintf(stderr, "sluice storage: %s: cannot write an index of segment %020" PRId64 ": %s "
		        "(it will be rebuilt at open)\n", log->dir, j->base, strerror(-status));
		if (!j->err)
			j->err = status;
	}
	assert(j->left > 0);
	if (--j->left)
		return; /* the other file's write is still in flight */
	if (log->nsegs && log->segs[0]->base <= j->base) {
		struct st_seg *s = log->segs[log_seg_find(log, j->base)];
		seg = s->base == j->base ? s : NULL;
	}
	if (j->err)
		; /* logged above; the segment stays dirty: st_log_close writes both again */
	else if (!seg || seg->damage_seen)
		seg_index_unlink(log, j->base); /* dropped, or a read met damage, meanwhile (rare): no stale index */
	else
		seg->index_dirty = false;
	assert(log->index_writes > 0);
	log->index_writes--;
	free(j);
}

/*
 * Write a sealed segment's index once all its bytes are durable, so that a
 * trusted index never describes data that a crash could still lose. Through
 * the core's io_uring (open, write, close; no sync: recovery validates it);
 * best effort: a missing index is rebuilt at open, and one not written
 * (no memory) stays dirty for st_log_close.
 */
static void seg_seal(struct st_log *log, struct st_seg *seg)
{
	assert(seg != log_active(log) && seg->durable_size == seg->size);
	if (seg->dfd >= 0) { /* no more writes: only the ordinary descriptor stays, for reads */
		st_fs_close(seg->dfd);
		seg->dfd = -1;
	}
	if (!seg->ndmg && !seg->damage_seen) {
		size_t bytes = index_bytes(seg), tbytes = tindex_bytes(seg);
		struct st_index_job *j = malloc(sizeof(*j) + bytes + tbytes); /* once per segment, not per append */
		if (j) {
			memset(j->fop, 0, sizeof(j->fop)); /* idle operations (fop.h) */
			index_encode(seg, j->buf);
			tindex_encode(seg, j->buf + bytes);
			seg_name(j->name[0], seg->base, ST_INDEX_SUFFIX);
			seg_name(j->name[1], seg->base, ST_TINDEX_SUFFIX);
			j->log = log;
			j->base = seg->base;
			j->left = 2;
			j->err = 0;
			log->index_writes++;
			st_fop_create(log->io, &j->fop[0], log->dirfd, j->name[0], j->buf, bytes, index_written, j);
			st_fop_create(log->io, &j->fop[1], log->dirfd, j->name[1], j->buf + bytes, tbytes, index_written, j);
		}
	}
	seg_index_trim(seg);
}

/*
 * Start a new active segment at the LEO (called from append: rare). The file is
 * created here (openat: a directory entry in memory, no wait for the disk); its
 * name is made durable by a directory fsync at the head of its first group's
 * chain (log_prep), and the old segment's index is written through io_uring.
 * The old segment keeps its fd: its group may still be in flight, and readers
 * need it until retention removes it.
 */
static int log_roll(struct st_log *log)
{
	struct st_seg *old = log_active(log), *seg;
	uint64_t size;
	int rc;

	assert(old->end == log->leo && old->size > 0);
	rc = seg_open(log, log->leo, O_CREAT | O_TRUNC, &seg, &size);
	if (rc < 0)
		return rc;
	assert(size == 0);
	if ((rc = seg_index_reserve(seg, index_cap_for(&log->cfg, log->cfg.segment_bytes))) < 0) {
		seg_unlink(log, seg->base);
		seg_free(seg);
		return rc;
	}
	/* The new file's name must be durable before any append in it is acknowledged: its first
	 * group's chain starts with a directory fsync (log_prep), never a wait here. */
	seg->name_durable = !log->io->cfg.fsync;
	if ((rc = log_segs_push(log, seg)) < 0) {
		seg_unlink(log, seg->base);
		seg_free(seg);
		return rc;
	}
	seg_open_direct(log, seg);
	if (old->durable_size == old->size)
		seg_seal(log, old);
	/* else group_settle seals it once its last write (and sync) completes */
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Recovery point (log_internal.h: which bytes were durable)                 */

static void rp_encode(uint8_t *b, int64_t base, uint64_t bytes)
{
	st_put_be32(b, ST_RP_MAGIC);
	st_put_be32(b + 4, ST_RP_VERSION);
	st_put_be64(b + 8, (uint64_t)base);
	st_put_be64(b + 16, bytes);
	st_put_be32(b + 24, crc32c(0, b, 24));
}

/*
 * Open the recovery-point file and read it (rp_base -1: no valid record). Without
 * fsync nothing is durable at a known point: the file is removed, so that a later
 * run with fsync never trusts a record this one's unsynced writes went past.
 */
static int rp_open(struct st_log *log)
{
	uint8_t b[ST_RP_BYTES];
	size_t got = 0;

	log->rp_base = -1;
	log->rp_bytes = 0;
	if (!log->io->cfg.fsync) {
		if (st_fs_unlinkat(log->dirfd, ST_RP_NAME, 0) < 0 && errno != ENOENT)
			return -errno;
		return 0;
	}
	log->rp_fd = st_fs_openat(log->dirfd, ST_RP_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (log->rp_fd < 0) {
		int rc = -errno;
		fprintf(stderr, "sluice storage: %s: cannot open %s: %s\n", log->dir, ST_RP_NAME, strerror(-rc));
		return rc;
	}
	if (pread_full(log->rp_fd, b, sizeof(b), 0, &got) < 0 || got != sizeof(b) ||
	    st_be32(b) != ST_RP_MAGIC || st_be32(b + 4) != ST_RP_VERSION || st_be32(b + 24) != crc32c(0, b, 24) ||
	    (int64_t)st_be64(b + 8) < 0)
		return 0; /* none (an old log, a new file) or torn: the rules without it */
	log->rp_base = (int64_t)st_be64(b + 8);
	log->rp_bytes = st_be64(b + 16);
	return 0;
}

/* Write the recovery point now (open and close: synchronous like the rest of them). */
static int rp_write_sync(struct st_log *log, int64_t base, uint64_t bytes)
{
	rp_encode(log->rp_buf, base, bytes);
	if (st_fs_pwrite(log->rp_fd, log->rp_buf, ST_RP_BYTES, 0) != ST_RP_BYTES || st_fs_fdatasync(log->rp_fd) < 0) {
		int rc = errno ? -errno : -EIO;
		fprintf(stderr, "sluice storage: %s: cannot write %s: %s\n", log->dir, ST_RP_NAME, strerror(-rc));
		return rc;
	}
	log->rp_base = base;
	log->rp_bytes = bytes;
	return 0;
}

static void rp_synced(void *arg, int status)
{
	struct st_log *log = arg;

	if (status < 0) {
		/* The file holds the old record or the new one, both true: the next interval tries again. */
		if (!log->rp_warned)
			fprintf(stderr, "sluice storage: %s: cannot write %s: %s (recovery trusts less of the log until "
			        "it can)\n", log->dir, ST_RP_NAME, strerror(-status));
		log->rp_warned = true;
		return;
	}
	log->rp_base = log->rp_next_base;
	log->rp_bytes = log->rp_next_bytes;
}

/*
 * Record the newest synced end once it is `slack` bytes past the record, or in a
 * newer segment (whose name is durable): a write and an fdatasync of the small
 * file through the core's io_uring, one at a time per log, that no append waits
 * for. Locality: owner core.
 */
static void rp_advance(struct st_log *log, uint64_t slack)
{
	if (log->rp_fd < 0 || log->failed || st_fop_busy(&log->rp_fop))
		return;
	/* The segment the durable end lies in: the ones before it are durable whole (groups go in
	 * file order, so only the last few are not), none after it has a durable byte. A record
	 * naming a later one (the active segment after rolls while an older segment's group was
	 * still in flight: segs[nsegs - 2] is not always durable) would say those bytes were
	 * synced; a crash then left torn batches before the point, set aside as damage instead of
	 * cut (sluice-sim --seed 153 --scattered --direct). */
	uint32_t k = log->nsegs - 1;
	while (k > 0 && log->segs[k - 1]->durable_size < log->segs[k - 1]->size)
		k--;
	struct st_seg *s = log->segs[k];
	if (!s->name_durable) {
		if (k == 0)
			return;
		s = log->segs[k - 1];
	}
	if (s->base < log->rp_base || (s->base == log->rp_base && s->durable_size < log->rp_bytes + slack))
		return;
	log->rp_next_base = s->base;
	log->rp_next_bytes = s->durable_size;
	rp_encode(log->rp_buf, s->base, s->durable_size);
	st_fop_write_sync(log->io, &log->rp_fop, log->rp_fd, log->rp_buf, ST_RP_BYTES, 0, rp_synced, log);
}

/* ------------------------------------------------------------------------ */
/* Log start (DeleteRecords): the ST_LS_NAME file                            */

void st_log_start_encode(uint8_t *b, int64_t offset)
{
	st_put_be32(b, ST_LS_MAGIC);
	st_put_be32(b + 4, ST_LS_VERSION);
	st_put_be64(b + 8, (uint64_t)offset);
	st_put_be32(b + 16, crc32c(0, b, 16));
}

int st_log_start_decode(const uint8_t *b, size_t len, int64_t *offset)
{
	if (len != ST_LS_BYTES || st_be32(b) != ST_LS_MAGIC || st_be32(b + 4) != ST_LS_VERSION ||
	    st_be32(b + 16) != crc32c(0, b, 16) || (int64_t)st_be64(b + 8) < 0)
		return -EBADMSG;
	*offset = (int64_t)st_be64(b + 8);
	return 0;
}

/* Write the log-start file synchronously (open only: it may block): temp file, fdatasync, rename,
 * directory fsync, as st_log_raise_start does through the ring. */
static int ls_store_sync(struct st_log *log, int64_t offset)
{
	uint8_t b[ST_LS_BYTES];
	char tmp[PATH_MAX], name[PATH_MAX];
	int rc = 0;

	st_log_start_encode(b, offset);
	int fd = st_fs_openat(log->dirfd, ST_LS_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if ((rc = write_full(fd, b, sizeof(b))) == 0 && st_fs_fdatasync(fd) < 0)
		rc = -errno;
	st_fs_close(fd);
	snprintf(tmp, sizeof(tmp), "%s/%s", log->dir, ST_LS_TMP);
	snprintf(name, sizeof(name), "%s/%s", log->dir, ST_LS_NAME);
	if (rc == 0 && st_fs_rename(tmp, name) < 0)
		rc = -errno;
	if (rc == 0 && st_fs_fsync(log->dirfd) < 0)
		rc = -errno;
	return rc;
}

/*
 * Read the log-start file at open (synchronous, like the rest of the open). None: the start is the
 * first segment's base, as before any DeleteRecords. One that does not decode (the rename makes a
 * torn one impossible; a damaged disk is not) fails the open with -EBADMSG: the partition stays
 * offline (KAFKA_STORAGE_ERROR), as Kafka takes a log dir whose log-start checkpoint is unreadable
 * offline, rather than bringing deleted records back. A start past the recovered end (a run
 * without fsync whose tail was lost) is held to the end, in the file too.
 */
static int ls_load(struct st_log *log)
{
	uint8_t b[ST_LS_BYTES + 1];
	size_t got = 0;
	int64_t off;

	log->ls_start = 0;
	int fd = st_fs_openat(log->dirfd, ST_LS_NAME, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		int err = -errno;
		fprintf(stderr, "sluice storage: %s: cannot open %s: %s: the partition stays offline\n", log->dir,
		        ST_LS_NAME, strerror(-err));
		return err;
	}
	int rc = pread_full(fd, b, sizeof(b), 0, &got);
	st_fs_close(fd);
	if (rc < 0 || st_log_start_decode(b, got, &off) < 0) {
		fprintf(stderr, "sluice storage: %s: DAMAGED: %s (the log start DeleteRecords raised) does not %s: the "
		        "partition stays offline (KAFKA_STORAGE_ERROR) rather than serve deleted records again; removing "
		        "the file brings it back with the start at its first segment's base (%lld)\n", log->dir,
		        ST_LS_NAME, rc < 0 ? "read" : "decode", (long long)log->segs[0]->base);
		return rc < 0 ? rc : -EBADMSG;
	}
	log->ls_start = off < log->leo ? off : log->leo;
	if (off > log->leo) {
		/* The file too: records appended from here on, below the stored start, would otherwise
		 * vanish at the next open. */
		fprintf(stderr, "sluice storage: %s: log start %lld is past the recovered end %lld (a tail lost "
		        "without fsync): held to the end\n", log->dir, (long long)off, (long long)log->leo);
		if ((rc = ls_store_sync(log, log->leo)) < 0)
			fprintf(stderr, "sluice storage: %s: cannot rewrite %s: %s\n", log->dir, ST_LS_NAME, strerror(-rc));
	}
	return 0;
}

static void ls_written(void *arg, int status)
{
	struct st_log *log = arg;

	if (status == 0 && log->ls_next > log->ls_start)
		log->ls_start = log->ls_next;
	else if (status < 0)
		fprintf(stderr, "sluice storage: %s: cannot write %s: %s\n", log->dir, ST_LS_NAME, strerror(-status));
	log->ls_cb(log->ls_arg, status);
}

int st_log_raise_start(struct st_log *log, int64_t offset, void (*cb)(void *arg, int status), void *arg)
{
	if (log->failed)
		return log->failed;
	if (offset < 0 || offset > log->durable)
		return -ERANGE;
	if (offset <= st_log_start_offset(log))
		return 1;
	if (st_fop_busy(&log->ls_fop))
		return -EBUSY;
	log->ls_next = offset;
	log->ls_cb = cb;
	log->ls_arg = arg;
	st_log_start_encode(log->ls_buf, offset);
	st_fop_replace(log->io, &log->ls_fop, log->dirfd, ST_LS_TMP, ST_LS_NAME, NULL, log->ls_buf, ST_LS_BYTES, -1,
	               ls_written, log);
	return 0;
}

bool st_log_start_busy(const struct st_log *log) { return st_fop_busy(&log->ls_fop); }

/* ------------------------------------------------------------------------ */
/* Recovery scan                                                             */

/* A read window over a segment file, so small batches cost no syscall each. */
struct scan_win {
	int fd;
	uint8_t *buf;
	uint64_t pos;   /* file position of buf[0] */
	size_t len;     /* valid bytes in buf */
	uint64_t file_size;
};

/* Point *p at bytes [pos, pos+len) (len <= window capacity, inside the file). */
static int win_get(struct scan_win *w, uint64_t pos, size_t len, const uint8_t **p)
{
	assert(len <= ST_LOG_SCAN_BUF_BYTES && pos + len <= w->file_size);
	if (pos < w->pos || pos + len > w->pos + w->len) {
		size_t want = ST_LOG_SCAN_BUF_BYTES, got;
		if (want > w->file_size - pos)
			want = (size_t)(w->file_size - pos);
		int rc = pread_full(w->fd, w->buf, want, pos, &got);
		w->pos = pos;
		w->len = rc < 0 ? 0 : got;
		if (rc < 0)
			return rc;
		if (got < len)
			return -EIO; /* the file shrank under us */
	}
	*p = w->buf + (pos - w->pos);
	return 0;
}

/* CRC check of a batch too large for the window: stream it through the buffer. */
static int scan_crc_big(struct scan_win *w, uint64_t pos, uint64_t total, uint32_t want, bool *ok)
{
	uint32_t crc = 0;

	for (uint64_t at = pos + ST_BATCH_OFF_ATTRIBUTES; at < pos + total;) {
		size_t n = ST_LOG_SCAN_BUF_BYTES, got;
		if (n > pos + total - at)
			n = (size_t)(pos + total - at);
		int rc = pread_full(w->fd, w->buf, n, at, &got);
		w->len = 0; /* window contents replaced */
		if (rc < 0)
			return rc;
		if (got != n)
			return -EIO;
		crc = crc32c(crc, w->buf, n);
		at += n;
	}
	*ok = crc == want;
	return 0;
}

/* Verdict on the bytes at one position of a segment scan. */
enum scan_verdict {
	SCAN_OK,          /* a whole valid batch continuing the offsets */
	SCAN_BAD_BASE,    /* whole, CRC good, only baseOffset (outside the CRC) breaks the sequence */
	SCAN_BAD,         /* no valid batch starts here */
};

/*
 * Check the batch at pos of a size-byte segment against the expected base
 * offset next (resync: any base >= next is accepted, the batch at pos being
 * a candidate to resynchronise on). Fills *h and *total; *why says what is
 * wrong. *rc gets -errno on a read error (the verdict is then meaningless).
 */
static enum scan_verdict scan_check(struct scan_win *w, const struct st_seg *seg, uint64_t pos, uint64_t size,
                                    int64_t next, bool resync, struct st_batch_hdr *h, int *total_out,
                                    const char **why, int *rc)
{
	const uint8_t *p;
	bool ok;

	*rc = 0;
	if (size - pos < ST_BATCH_HEADER_BYTES) {
		*why = "torn batch header";
		return SCAN_BAD;
	}
	if ((*rc = win_get(w, pos, ST_BATCH_HEADER_BYTES, &p)) < 0)
		return SCAN_BAD;
	if (resync && (p[ST_BATCH_OFF_MAGIC] != ST_BATCH_MAGIC ||
	               st_be32(p + ST_BATCH_OFF_LENGTH) > size - pos - 12))
		return SCAN_BAD; /* the cheap rejections first: most positions of a resync fail here */
	int total = st_batch_parse_header(p, ST_BATCH_HEADER_BYTES, h);
	if (total < 0) {
		*why = total == -EPROTO ? "bad magic" : "bad batch header";
		return SCAN_BAD;
	}
	if ((uint64_t)total > size - pos) {
		*why = "torn batch (file ends inside it)";
		return SCAN_BAD;
	}
	if ((uint64_t)total <= ST_LOG_SCAN_BUF_BYTES) {
		if ((*rc = win_get(w, pos, (size_t)total, &p)) < 0)
			return SCAN_BAD;
		ok = st_batch_crc_ok(p, (size_t)total);
	} else if ((*rc = scan_crc_big(w, pos, (uint64_t)total, h->crc, &ok)) < 0) {
		return SCAN_BAD;
	}
	if (!ok) {
		*why = "CRC32C mismatch";
		return SCAN_BAD;
	}
	*total_out = total;
	if (resync && h->base_offset < next) {
		*why = "batch offset does not continue the previous batch";
		return SCAN_BAD;
	}
	/* The base it will have: its own on a resync, the expected one otherwise (written back if it differs). */
	int64_t base = resync ? h->base_offset : next;
	if ((uint64_t)(base - seg->base) + (uint64_t)h->last_offset_delta > UINT32_MAX) {
		*why = "segment spans more than 2^32 offsets";
		return SCAN_BAD;
	}
	if (h->base_offset != base) {
		*why = "batch offset does not continue the previous batch";
		return SCAN_BAD_BASE;
	}
	return SCAN_OK;
}

/*
 * Whether the bad batch at pos sits on a page the disk never got: zeros from
 * pos through a page boundary, and at least a whole header of them. A power
 * cut can persist later pages of the last, unsynced write and not earlier
 * ones (file systems read those as zeros): that is a torn write, and nothing
 * from there on was acknowledged (one write+fdatasync per log is in flight;
 * the next waits for it). A real header is never zeros (its length is at
 * least 49, its magic 2), so flipped bytes never look like this. Zeros only
 * inside a batch's records (a zero-filled value, or a later page lost) are
 * not told apart from damage: they are set aside, never cut, since cutting
 * would drop acknowledged batches after them if it was damage.
 */
static int scan_has_hole(struct scan_win *w, uint64_t pos, uint64_t q, bool *hole)
{
	uint64_t end = (pos / ST_LOG_PAGE_BYTES + 1) * ST_LOG_PAGE_BYTES;

	*hole = false;
	while (end - pos < ST_BATCH_HEADER_BYTES)
		end += ST_LOG_PAGE_BYTES;
	if (end > q)
		return 0; /* the valid batch at q shares that page: it was written */
	for (uint64_t at = pos; at < end;) {
		size_t n = end - at < ST_LOG_PAGE_BYTES ? (size_t)(end - at) : ST_LOG_PAGE_BYTES;
		const uint8_t *p;
		int rc = win_get(w, at, n, &p);
		if (rc < 0)
			return rc;
		for (size_t i = 0; i < n; i++)
			if (p[i])
				return 0;
		at += n;
	}
	*hole = true;
	return 0;
}

/* Record damage [pos, end) holding offsets [from, to) in seg. -EBADMSG when the table is full. */
static int seg_damage_add(struct st_log *log, struct st_seg *seg, uint64_t pos, uint64_t end, int64_t from,
                          int64_t to, const char *why)
{
	if (seg->ndmg == ST_LOG_DAMAGE_MAX) {
		fprintf(stderr, "sluice storage: %s: segment %020" PRId64 ": more than %u damaged ranges; the partition "
		        "stays offline, files untouched (restore it from a replica or backup)\n", log->dir, seg->base,
		        ST_LOG_DAMAGE_MAX);
		return -EBADMSG;
	}
	if (!seg->dmg && !(seg->dmg = malloc(ST_LOG_DAMAGE_MAX * sizeof(*seg->dmg))))
		return -ENOMEM; /* recovery only */
	seg->dmg[seg->ndmg++] = (struct st_damage){ .pos = pos, .end = end, .from = from, .to = to };
	fprintf(stderr, "sluice storage: %s: segment %020" PRId64 ": DAMAGE (%s): bytes [%" PRIu64 ", %" PRIu64
	        ") set aside, offsets [%" PRId64 ", %" PRId64 ") in them are lost; fetches of them fail with "
	        "CORRUPT_MESSAGE, the rest of the partition is served; the file is left as it is\n", log->dir,
	        seg->base, why, pos, end, from, to);
	return 0;
}

/*
 * Check seg's file batch by batch from byte 0: length, magic, CRC32C, and
 * contiguous offsets from seg->base. Fills the index, end and max_ts.
 * A bad batch followed by a valid one (found by resynchronising byte by byte)
 * is damage, set aside as a range; so is a bad end of a segment that is not
 * the tail (tail: no data after this segment), which then ends at next_base,
 * the next segment's base. A bad end of the tail segment is a torn write:
 * *good = bytes of the valid prefix, *why says what stopped it if < size.
 * A good batch whose base offset alone is wrong gets the right one written
 * back (*repaired). A bad batch at or past cut_from (the recovery point, in
 * this segment; 0 for a segment after it) is a torn write whatever follows:
 * *good stops there. Returns 0, -errno for an I/O error (nothing is cut), or
 * -EBADMSG if the damage cannot be set aside.
 */
/* seg_scan's *why for zero padding past a sealed segment's last batch (cut, nothing after dropped). */
static const char st_scan_padding[] = "zero padding past the last batch";

/* Whether bytes [pos, end) of the window's file are all zero. */
static int scan_all_zero(struct scan_win *w, uint64_t pos, uint64_t end, bool *zero)
{
	*zero = true;
	for (uint64_t at = pos; at < end && *zero;) {
		size_t n = end - at < ST_LOG_PAGE_BYTES ? (size_t)(end - at) : ST_LOG_PAGE_BYTES;
		const uint8_t *p;
		int rc = win_get(w, at, n, &p);
		if (rc < 0)
			return rc;
		for (size_t k = 0; k < n && *zero; k++)
			*zero = p[k] == 0;
		at += n;
	}
	return 0;
}

static int seg_scan(struct st_log *log, struct st_seg *seg, uint64_t size, uint8_t *buf, bool tail,
                    int64_t next_base, uint64_t cut_from, uint64_t *good, const char **why, bool *repaired)
{
	struct scan_win w = { .fd = seg->fd, .buf = buf, .file_size = size };
	uint64_t pos = 0;
	int64_t next = seg->base;

	int rc = seg_index_reserve(seg, index_cap_for(&log->cfg, size));
	if (rc < 0)
		return rc;
	seg->index_n = 0;
	seg->max_ts = -1;
	seg->ndmg = 0;
	*why = NULL;
	while (pos < size) {
		struct st_batch_hdr h;
		int total = 0;
		const char *bad;
		enum scan_verdict v = scan_check(&w, seg, pos, size, next, false, &h, &total, &bad, &rc);

		if (rc < 0)
			return rc;
		if (v == SCAN_BAD_BASE) {
			/* The broker wrote this field from the previous batch's end: put that back. */
			uint8_t be[8];
			st_put_be64(be, (uint64_t)next);
			if (st_fs_pwrite(seg->fd, be, sizeof(be), (off_t)pos) != (ssize_t)sizeof(be))
				return errno ? -errno : -EIO;
			fprintf(stderr, "sluice storage: %s: segment %020" PRId64 ": DAMAGE: batch at byte %" PRIu64
			        " had base offset %" PRId64 " instead of %" PRId64 " (its CRC is good): repaired\n",
			        log->dir, seg->base, pos, h.base_offset, next);
			h.base_offset = next;
			w.len = 0; /* the window held the old bytes */
			*repaired = true;
			v = SCAN_OK;
		}
		if (v == SCAN_BAD && !tail && next_base == next) {
			/* Zeros from the last batch's end to the file's, the next segment starting at its
			 * end offset: padding past the last batch (a block an O_DIRECT write filled out, or
			 * a size a crash made durable before its data), not damage: nothing lies there.
			 * *good stops before it; the caller cuts it and keeps the segments after it. */
			bool zero = false;
			if ((rc = scan_all_zero(&w, pos, size, &zero)) < 0)
				return rc;
			if (zero) {
				*why = st_scan_padding;
				break;
			}
		}
		if (v == SCAN_BAD && pos >= cut_from) {
			/* Past the last point known durable: the unsynced write a crash tore (log_internal.h). */
			*why = "torn write past the recovery point";
			break;
		}
		if (v == SCAN_BAD) {
			/* Torn or damaged: a valid batch further on says damage. */
			uint64_t q = pos + 1;
			struct st_batch_hdr hq;
			const char *ignored;
			for (; q < size; q++) {
				if (scan_check(&w, seg, q, size, next, true, &hq, &total, &ignored, &rc) == SCAN_OK)
					break;
				if (rc < 0)
					return rc;
			}
			bool hole = false;
			if (q < size && tail && (rc = scan_has_hole(&w, pos, q, &hole)) < 0)
				return rc;
			if (hole) {
				*why = "torn write: a page never written before written ones";
				break; /* all of it unacknowledged: cut here, as a torn tail */
			}
			if (q < size) {
				if ((rc = seg_damage_add(log, seg, pos, q, next, hq.base_offset, bad)) < 0)
					return rc;
				next = hq.base_offset;
				pos = q;
				continue; /* q is checked again below as the expected batch */
			}
			if (tail) {
				*why = bad;
				break;
			}
			if (next_base < next) {
				fprintf(stderr, "sluice storage: %s: segment %020" PRId64 " ends at offset %" PRId64
				        " past the next segment's base %" PRId64 "; the partition stays offline\n",
				        log->dir, seg->base, next, next_base);
				return -EBADMSG;
			}
			if ((rc = seg_damage_add(log, seg, pos, size, next, next_base, bad)) < 0)
				return rc;
			next = next_base;
			pos = size;
			break;
		}
		seg_index_note(seg, log->cfg.index_interval_bytes, next, pos, h.max_timestamp);
		if (h.max_timestamp > seg->max_ts)
			seg->max_ts = h.max_timestamp;
		next += (int64_t)h.last_offset_delta + 1;
		pos += (uint64_t)total;
	}
	seg->end = next;
	seg->size = seg->durable_size = pos;
	*good = pos;
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Base offsets of the "<20 digits>.log" files in the directory, sorted (malloc'd). */
static int log_list_segments(struct st_log *log, int64_t **out, uint32_t *n_out)
{
	int fd = st_fs_dup(log->dirfd);
	DIR *d = fd < 0 ? NULL : st_fs_fdopendir(fd);
	int64_t *bases = NULL;
	uint32_t n = 0, cap = 0;
	struct dirent *de;

	if (!d) {
		int rc = -errno;
		if (fd >= 0)
			st_fs_close(fd);
		return rc;
	}
	st_fs_rewinddir(d);
	while ((de = st_fs_readdir(d))) {
		const char *s = de->d_name;
		size_t len = strlen(s);
		if (len != ST_SEG_NAME_DIGITS + strlen(ST_LOG_SUFFIX) || strcmp(s + ST_SEG_NAME_DIGITS, ST_LOG_SUFFIX))
			continue;
		int64_t base = 0;
		bool digits = true;
		for (int i = 0; i < ST_SEG_NAME_DIGITS && digits; i++) {
			digits = s[i] >= '0' && s[i] <= '9' && base <= (INT64_MAX - 9) / 10;
			base = base * 10 + (s[i] - '0');
		}
		if (!digits)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : ST_LOG_SEGMENTS_INIT;
			int64_t *b = realloc(bases, cap * sizeof(*b));
			if (!b) {
				free(bases);
				st_fs_closedir(d);
				return -ENOMEM;
			}
			bases = b;
		}
		bases[n++] = base;
	}
	st_fs_closedir(d);
	if (n > 1)
		qsort(bases, n, sizeof(*bases), cmp_i64);
	*out = bases;
	*n_out = n;
	return 0;
}

/* Remove segments bases[from..n) (they follow a cut or a gap). */
static void log_drop_segments(struct st_log *log, const int64_t *bases, uint32_t from, uint32_t n,
                              const char *why)
{
	if (from >= n)
		return;
	fprintf(stderr, "sluice storage: %s: deleting %u segment(s) from %020" PRId64 " on: %s\n",
	        log->dir, n - from, bases[from], why);
	for (uint32_t i = from; i < n; i++)
		seg_unlink(log, bases[i]);
}

/* A trusted index still needs the segment's first batch to be what it says: whole, valid, at <base>. */
static bool seg_first_ok(const struct st_seg *seg, uint64_t size, uint8_t *buf)
{
	struct st_batch_hdr h;
	const char *why;
	int total, rc;
	size_t got;

	if (size == 0)
		return true;
	if (size < ST_BATCH_HEADER_BYTES || pread_full(seg->fd, buf, ST_BATCH_HEADER_BYTES, 0, &got) < 0 ||
	    got != ST_BATCH_HEADER_BYTES || (total = st_batch_parse_header(buf, got, &h)) < 0)
		return false;
	if ((uint64_t)total > ST_LOG_SCAN_BUF_BYTES) /* a huge first batch: framing and base, not its CRC */
		return (uint64_t)total <= size && h.base_offset == seg->base;
	/* A window over that batch alone: one read of its bytes, not of a whole window, per segment. */
	uint64_t span = (uint64_t)total < size ? (uint64_t)total : size;
	struct scan_win w = { .fd = seg->fd, .buf = buf, .file_size = span < ST_BATCH_HEADER_BYTES ? size : span };
	return scan_check(&w, seg, 0, size, seg->base, false, &h, &total, &why, &rc) == SCAN_OK;
}

static void seg_index_unlink(struct st_log *log, int64_t base)
{
	char name[ST_LOG_NAME_BYTES];

	seg_name(name, base, ST_INDEX_SUFFIX);
	st_fs_unlinkat(log->dirfd, name, 0); /* may not exist */
	seg_name(name, base, ST_TINDEX_SUFFIX);
	st_fs_unlinkat(log->dirfd, name, 0);
}

/* Whether segment `base` holds a valid batch anywhere (unreadable counts as yes: never cut for it). */
static bool seg_has_valid(struct st_log *log, int64_t base, uint8_t *buf)
{
	char name[ST_LOG_NAME_BYTES];
	struct stat st;
	bool found = true;

	seg_name(name, base, ST_LOG_SUFFIX);
	int fd = st_fs_openat(log->dirfd, name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0 || st_fs_fstat(fd, &st) < 0) {
		if (fd >= 0)
			st_fs_close(fd);
		return true;
	}
	uint64_t size = (uint64_t)st.st_size;
	struct st_seg tmp = { .base = base, .fd = fd };
	struct scan_win w = { .fd = fd, .buf = buf, .file_size = size };
	struct st_batch_hdr h;
	const char *why;
	int total, rc = 0;
	found = false;
	for (uint64_t q = 0; q < size && !found && rc == 0; q++)
		found = scan_check(&w, &tmp, q, size, base, q > 0, &h, &total, &why, &rc) != SCAN_BAD;
	st_fs_close(fd);
	return found || rc < 0;
}

/*
 * Index of the last segment that holds a valid batch, or -1: a torn write can
 * only be at or after it (the tail); a bad end before it is damage, since
 * valid data follows. Usually the last segment's first batch answers at once.
 */
static int64_t log_last_valid(struct st_log *log, const int64_t *bases, uint32_t n, uint8_t *buf)
{
	for (int64_t j = (int64_t)n - 1; j >= 0; j--)
		if (seg_has_valid(log, bases[j], buf))
			return j;
	return -1;
}

/* Rebuild the in-memory log from the directory; truncate a torn tail, set damage aside. Returns
 * 1 if it cut or dropped anything (st_log_open then runs it again on what it left), 0, -errno. */
static int log_recover(struct st_log *log)
{
	int64_t *bases = NULL;
	uint32_t n = 0, i;
	uint8_t *buf = NULL;
	bool changed = false;
	int rc = log_list_segments(log, &bases, &n);

	if (rc < 0)
		return rc;
	if (n == 0) {
		struct st_seg *seg;
		uint64_t size;
		free(bases);
		if ((rc = seg_open(log, 0, O_CREAT, &seg, &size)) < 0)
			return rc;
		assert(size == 0);
		if ((rc = log_segs_push(log, seg)) < 0) {
			seg_free(seg);
			return rc;
		}
		if (log->rp_fd >= 0 && (rc = rp_write_sync(log, 0, 0)) < 0)
			return rc;
		return log_sync_dir(log);
	}
	if (!(buf = malloc(ST_LOG_SCAN_BUF_BYTES))) {
		free(bases);
		return -ENOMEM;
	}
	int64_t tail_from = log_last_valid(log, bases, n, buf);
	bool rp_found = false;
	for (i = 0; i < n && !rp_found; i++)
		rp_found = bases[i] == log->rp_base;
	bool rp_stale = log->rp_base >= 0 && !rp_found;
	if (rp_stale)
		log->rp_base = -1; /* its segment is gone: nothing is known, the rules without it */
	for (i = 0; i < n; i++) {
		struct st_seg *seg;
		uint64_t size, good = 0;
		const char *why = NULL;
		bool last = i == n - 1, repaired = false;
		/* Bytes from here on were never known durable (log_internal.h, recovery-point). */
		uint64_t cut_from = log->rp_base < 0 || bases[i] < log->rp_base ? UINT64_MAX :
		                    bases[i] == log->rp_base ? log->rp_bytes : 0;

		if (i > 0 && bases[i] != log_active(log)->end) {
			if ((int64_t)i > tail_from || cut_from == 0) { /* nothing from here on was acknowledged */
				log_drop_segments(log, bases, i, n, "segment base does not continue the previous segment");
				changed = true;
				break;
			}
			fprintf(stderr, "sluice storage: %s: segment %020" PRId64 " does not continue the previous one "
			        "(which ends at offset %" PRId64 "): offsets are missing; the partition stays offline, "
			        "files untouched (restore the missing segment, or move the later ones away)\n", log->dir,
			        bases[i], log_active(log)->end);
			rc = -EBADMSG;
			goto out;
		}
		if ((rc = seg_open(log, bases[i], 0, &seg, &size)) < 0)
			goto out;
		if ((rc = log_segs_push(log, seg)) < 0) {
			seg_free(seg);
			goto out;
		}
		if (!last && !log->cfg.scan_sealed && cut_from == UINT64_MAX && index_load(log, seg, size) == 0) {
			if (tindex_load(log, seg, size) < 0) {
				/* Missing (written before the time index existed, or lost) or damaged: the scan
				 * rebuilds both from the batches. */
				fprintf(stderr, "sluice storage: %s: segment %020" PRId64 ": no valid time index, "
				        "scanning it\n", log->dir, seg->base);
			} else if (seg_first_ok(seg, size, buf)) {
				continue;
			} else {
				fprintf(stderr, "sluice storage: %s: segment %020" PRId64 ": first batch damaged, "
				        "scanning it\n", log->dir, seg->base);
			}
		}
		rc = seg_scan(log, seg, size, buf, (int64_t)i >= tail_from, last ? -1 : bases[i + 1], cut_from, &good,
		              &why, &repaired);
		/* What the scan kept is served and counted durable from now on, and may be named by the
		 * recovery point: after a crash of the process alone, the last write can still be only in
		 * the page cache (a segment trusted from its index was synced before that was written). */
		if (rc == 0 && (repaired || (log->io->cfg.fsync && good == size)) && st_fs_fdatasync(seg->fd) < 0)
			rc = -errno;
		if (rc < 0) {
			fprintf(stderr, "sluice storage: %s: cannot recover segment %020" PRId64 ": %s\n",
			        log->dir, seg->base, strerror(-rc));
			goto out;
		}
		if (good < size && why == st_scan_padding) {
			/* A sealed segment's zero padding (seg_scan): cut, the segments after it kept. */
			fprintf(stderr, "sluice storage: %s: segment %020" PRId64 ": cutting %" PRIu64
			        " byte(s) of zero padding at position %" PRIu64 "\n", log->dir, seg->base, size - good, good);
			if (st_fs_ftruncate(seg->fd, (off_t)good) < 0 || st_fs_fdatasync(seg->fd) < 0) {
				rc = -errno;
				fprintf(stderr, "sluice storage: %s: truncation failed: %s\n", log->dir, strerror(-rc));
				goto out;
			}
			size = good;
		}
		if (good < size) {
			fprintf(stderr, "sluice storage: %s: segment %020" PRId64 ": cutting %" PRIu64
			        " byte(s) at position %" PRIu64 " (%s)\n", log->dir, seg->base, size - good, good, why);
			if (st_fs_ftruncate(seg->fd, (off_t)good) < 0 || st_fs_fdatasync(seg->fd) < 0) {
				rc = -errno;
				fprintf(stderr, "sluice storage: %s: truncation failed: %s\n", log->dir, strerror(-rc));
				goto out;
			}
			log_drop_segments(log, bases, i + 1, n, "they follow a cut");
			changed = true;
			break;
		}
		if (seg->ndmg) {
			seg_index_unlink(log, seg->base); /* scanned again at every open: the ranges live in memory */
			continue;
		}
		if (!last) {
			index_write(log, seg); /* the old one was missing or stale */
			seg_index_trim(seg);
		}
	}
	if (changed && log->io->cfg.fsync)
		rc = log_sync_dir(log);
	if (rc == 0 && changed && log->rp_base >= 0) {
		/* A cut or a drop may have gone below the record: lower it to the end now synced, so that
		 * it is never ahead of the truth when new appends fill those bytes again. */
		struct st_seg *act = log_active(log);
		if (st_fs_fdatasync(act->fd) < 0)
			rc = -errno;
		else
			rc = rp_write_sync(log, act->base, act->size);
	} else if (rc == 0 && rp_stale) {
		/* A later roll could make that segment again: replace the record by one that is true of any. */
		rc = rp_write_sync(log, log_active(log)->base, 0);
	}
out:
	free(buf);
	free(bases);
	return rc < 0 ? rc : changed;
}

/* ------------------------------------------------------------------------ */
/* Log lifecycle                                                             */

/* A new partition directory's own name must be durable too. */
static int sync_parent_dir(const char *dir)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(dir, '/');
	int fd, rc = 0;

	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else
		snprintf(parent, sizeof(parent), "%.*s", slash == dir ? 1 : (int)(slash - dir), dir);
	if ((fd = st_fs_open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)) < 0 || st_fs_fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		st_fs_close(fd);
	if (rc < 0)
		fprintf(stderr, "sluice storage: %s: fsync of parent directory failed: %s\n", dir, strerror(-rc));
	return rc;
}

static void log_free(struct st_log *log)
{
	for (uint32_t i = 0; i < log->nsegs; i++)
		seg_free(log->segs[i]);
	while (log->drop_wait) {   /* only after st_io_quiesce: their files go after the next start */
		struct st_seg *seg = log->drop_wait;
		log->drop_wait = seg->drop_next;
		seg_free(seg);
	}
	free(log->segs);
	if (log->dirfd >= 0)
		st_fs_close(log->dirfd);
	if (log->rp_fd >= 0)
		st_fs_close(log->rp_fd);
	free(log->dbuf);
	free(log->dir);
	free(log);
}

/* Whether a sealed segment ends in damage (a bad end set aside to the next segment's base). */
static bool log_bad_end_before_tail(const struct st_log *log)
{
	for (uint32_t i = 0; i + 1 < log->nsegs; i++) {
		const struct st_seg *seg = log->segs[i];
		if (seg->ndmg && seg->dmg[seg->ndmg - 1].end == seg->size)
			return true;
	}
	return false;
}

int st_log_open(struct st_io *io, const char *dir, const struct st_log_config *cfg, struct st_log **out)
{
	struct st_log *log;
	int rc;

	assert(io && dir && cfg && out);
	if (cfg->segment_bytes < ST_LOG_SEGMENT_BYTES_MIN || cfg->segment_bytes > ST_LOG_SEGMENT_BYTES_MAX ||
	    cfg->index_interval_bytes == 0 ||
	    cfg->segment_bytes / cfg->index_interval_bytes + 2 > ST_LOG_INDEX_ENTRIES_MAX)
		return -EINVAL;
	bool created = st_fs_mkdir(dir, 0755) == 0;
	if (!created && errno != EEXIST)
		return -errno;
	/* 16-byte alignment frees the low bits of the pointer for the op in user_data. */
	if (!(log = aligned_alloc(64, (sizeof(*log) + 63) & ~(size_t)63)))
		return -ENOMEM;
	memset(log, 0, sizeof(*log));
	assert(((uintptr_t)log >> 59) == 0);
	log->io = io;
	log->cfg = *cfg;
	log->dirfd = -1;
	log->rp_fd = -1;
	log->keep_from = INT64_MAX;
	if (!(log->dir = strdup(dir))) {
		log_free(log);
		return -ENOMEM;
	}
	log->dirfd = st_fs_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (log->dirfd < 0) {
		rc = -errno;
		log_free(log);
		return rc;
	}
	if (created && io->cfg.fsync && (rc = sync_parent_dir(dir)) < 0) {
		log_free(log);
		return rc;
	}
	if ((rc = rp_open(log)) < 0) {
		log_free(log);
		return rc;
	}
	/* A cut can leave an earlier segment's bad end, set aside as damage since valid batches
	 * followed, with nothing valid after it, which the rules then call a torn tail: recover
	 * again from what a pass left, so that the next open finds the same log (else its LEO went
	 * back; fuzz_recovery). */
	for (int pass = 0; (rc = log_recover(log)) > 0 && log_bad_end_before_tail(log) &&
	                   pass + 1 < ST_LOG_RECOVER_PASSES_MAX; pass++) {
		for (uint32_t i = 0; i < log->nsegs; i++)
			seg_free(log->segs[i]);
		log->nsegs = 0;
	}
	if (rc < 0) {
		log_free(log);
		return rc;
	}
	/* The active segment takes appends: give its index room for a full segment now. */
	struct st_seg *act = log_active(log);
	uint64_t span = act->size > cfg->segment_bytes ? act->size : cfg->segment_bytes;
	if ((rc = seg_index_reserve(act, index_cap_for(cfg, span))) < 0) {
		log_free(log);
		return rc;
	}
	log->leo = log->durable = log_active(log)->end;
	for (uint32_t i = 0; i < log->nsegs; i++)
		assert(log->segs[i]->durable_size == log->segs[i]->size);
	if ((rc = ls_load(log)) < 0) {
		log_free(log);
		return rc;
	}
	if (io->cfg.direct) {
		if (!(log->dbuf = aligned_alloc(ST_LOG_DIRECT_ALIGN_BYTES, ST_LOG_DIRECT_BUF_BYTES))) {
			log_free(log);
			return -ENOMEM;
		}
		seg_open_direct(log, act);
		if ((rc = log_dbuf_prime(log, act)) < 0) {
			fprintf(stderr, "sluice storage: %s: cannot read back the last block of segment %020" PRId64
			        ": %s\n", dir, act->base, strerror(-rc));
			log_free(log);
			return rc;
		}
	}
	*out = log;
	return 0;
}

int st_log_cut_failed(struct st_log *log)
{
	assert(st_log_idle(log));
	if (!log->failed)
		return 0;
	/* Past durable_size lie only the writes of the failed group and of no later one (one
	 * write+fdatasync per log is in flight, from the durable end): never acknowledged. */
	for (uint32_t i = 0; i < log->nsegs; i++) {
		struct st_seg *seg = log->segs[i];
		struct stat st;
		if (st_fs_fstat(seg->fd, &st) < 0)
			return -errno;
		if ((uint64_t)st.st_size <= seg->durable_size)
			continue;
		if (st_fs_ftruncate(seg->fd, (off_t)seg->durable_size) < 0 || st_fs_fdatasync(seg->fd) < 0)
			return -errno;
	}
	return 0;
}

void st_log_close(struct st_log *log)
{
	if (!log)
		return;
	assert(st_log_idle(log));
	/* A failed log's bytes past its durable end must not come back at the next open. */
	int crc = st_log_cut_failed(log);
	if (crc < 0)
		fprintf(stderr, "sluice storage: %s: cannot cut the failed log at its durable end: %s\n", log->dir,
		        strerror(-crc));
	/* A failed log's LEO ran ahead of its file; let recovery rebuild from the bytes. */
	for (uint32_t i = 0; i < log->nsegs && !log->failed; i++)
		if (log->segs[i]->index_dirty || i == log->nsegs - 1)
			index_write(log, log->segs[i]);
	/* A clean stop knows everything is durable (idle): the next open trusts all of it. */
	struct st_seg *act = log_active(log);
	if (log->rp_fd >= 0 && !log->failed && act->name_durable &&
	    (act->base != log->rp_base || act->durable_size != log->rp_bytes))
		rp_write_sync(log, act->base, act->durable_size);
	log_free(log);
}

int st_log_delete(struct st_log *log, struct st_trash *trash)
{
	int rc = 0, fd;
	DIR *d;
	struct dirent *de;

	assert(log && st_log_idle(log));
	/* The descriptors first, while the files are still linked: no blocks are freed by these closes. */
	for (uint32_t i = 0; i < log->nsegs; i++) {
		seg_free(log->segs[i]);
		log->segs[i] = NULL;
	}
	log->nsegs = 0;
	if (trash && (rc = st_trash_put(trash, log->dir)) == 0) {
		log_free(log);   /* the trash unlinks the files, off this core (trash.h) */
		return 0;
	}
	if (trash)
		fprintf(stderr, "sluice storage: %s: cannot move into the trash: %s; removed here\n", log->dir,
		        strerror(-rc));
	rc = 0;
	/* Everything in the directory belongs to the partition (segments, indexes, snapshots). */
	if ((fd = st_fs_dup(log->dirfd)) < 0 || !(d = st_fs_fdopendir(fd))) {
		rc = -errno;
		if (fd >= 0)
			st_fs_close(fd);
	} else {
		/* Unlinking while reading a directory may skip entries (tmpfs): repeat until a pass is clean. */
		for (int pass = 0, removed = 1; removed && !rc && pass < ST_LOG_DELETE_PASSES_MAX; pass++) {
			removed = 0;
			st_fs_rewinddir(d);
			while ((de = st_fs_readdir(d))) {
				if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
					continue;
				if (st_fs_unlinkat(log->dirfd, de->d_name, 0) == 0)
					removed++;
				else if (errno != ENOENT && !rc)
					rc = -errno;
			}
		}
		st_fs_closedir(d);
	}
	if (rc == 0 && st_fs_rmdir(log->dir) < 0)
		rc = -errno;
	if (rc < 0)
		fprintf(stderr, "sluice storage: %s: delete failed: %s\n", log->dir, strerror(-rc));
	log_free(log);
	return rc;
}

void st_log_set_retention(struct st_log *log, int64_t retention_bytes, int64_t retention_ms)
{
	log->cfg.retention_bytes = retention_bytes;
	log->cfg.retention_ms = retention_ms;
}

void st_log_fault_write(struct st_log *log, int64_t offset)
{
	assert(offset >= log->durable && offset < log->leo);
	log->fault_write_at1 = offset + 1;
}

bool st_log_idle(const struct st_log *log)
{
	return !log->pend_head && !log->grp.active && !log->on_dirty && !log->index_writes &&
	       !st_fop_busy(&log->rp_fop) && !st_fop_busy(&log->ls_fop) && !log->drops_busy;   /* a FIFO: log_internal.h */
}
int st_log_failed(const struct st_log *log) { return log->failed; }
bool st_log_direct_off(const struct st_log *log) { return log->dio_off; }
int64_t st_log_start_offset(const struct st_log *log)
{
	return log->ls_start > log->segs[0]->base ? log->ls_start : log->segs[0]->base;
}
int64_t st_log_end_offset(const struct st_log *log) { return log->leo; }
int64_t st_log_base_offset(const struct st_log *log) { return log->segs[0]->base; }
void st_log_keep_from(struct st_log *log, int64_t offset) { log->keep_from = offset; }
int64_t st_log_durable_offset(const struct st_log *log) { return log->durable; }

/* ------------------------------------------------------------------------ */
/* Append and group commit                                                   */

int st_io_create(const struct st_io_config *cfg, struct io_uring *ring, struct st_io **out)
{
	struct st_io *io;

	assert(cfg && ring && out);
	if (!(io = calloc(1, sizeof(*io))) || !(io->slots = calloc(ST_IO_APPENDS_MAX, sizeof(*io->slots)))) {
		free(io);
		return -ENOMEM;
	}
	io->ring = ring;
	io->cfg = *cfg;
	for (uint32_t i = 0; i < ST_IO_APPENDS_MAX; i++)
		io->slots[i].next = i + 1 < ST_IO_APPENDS_MAX ? &io->slots[i + 1] : NULL;
	io->free = &io->slots[0];
	*out = io;
	return 0;
}

void st_io_destroy(struct st_io *io)
{
	if (!io)
		return;
	assert(io->pending == 0 && !io->dirty_head);
	free(io->slots);
	free(io);
}

int st_log_dirfd(const struct st_log *log) { return log->dirfd; }
uint32_t st_io_pending(const struct st_io *io) { return io->pending + io->fops; }
void st_io_quiesce(struct st_io *io) { io->quiescing = true; }

static void dirty_push(struct st_io *io, struct st_log *log)
{
	if (log->on_dirty)
		return;
	log->on_dirty = true;
	log->dirty_next = NULL;
	if (io->dirty_tail)
		io->dirty_tail->dirty_next = log;
	else
		io->dirty_head = log;
	io->dirty_tail = log;
}

int64_t st_log_append(struct st_log *log, uint8_t *batch, uint32_t len, uint32_t record_count, void *cookie)
{
	assert(log->io->cfg.on_append);
	return st_log_append_cb(log, batch, len, record_count, log->io->cfg.on_append, cookie);
}

int64_t st_log_append_cb(struct st_log *log, uint8_t *batch, uint32_t len, uint32_t record_count,
                         st_append_cb cb, void *cookie)
{
	struct st_io *io = log->io;
	struct st_seg *seg = log_active(log);
	struct st_slot *s;

	/* The data plane validated the batch; check the framing we rely on again here. */
	assert(cb && batch && len >= ST_BATCH_HEADER_BYTES && record_count >= 1);
	assert(st_be32(batch + ST_BATCH_OFF_LENGTH) + 12u == len);
	assert(batch[ST_BATCH_OFF_MAGIC] == ST_BATCH_MAGIC);
	assert(st_be32(batch + ST_BATCH_OFF_LAST_OFFSET_DELTA) + 1u == record_count);
	if (log->failed)
		return -EIO;
	if (!io->free)
		return -ENOBUFS;
	if (seg->size > 0 && (seg->size + len > log->cfg.segment_bytes ||
	                      (uint64_t)(log->leo - seg->base) + record_count > UINT32_MAX)) {
		int rc = log_roll(log);
		if (rc < 0)
			return rc;
		seg = log_active(log);
	}

	int64_t base = log->leo;
	assert(seg->end == base && base >= log->durable);
	st_batch_set_base_offset(batch, base);
	int64_t max_ts = (int64_t)st_be64(batch + ST_BATCH_OFF_MAX_TIMESTAMP);
	seg_index_note(seg, log->cfg.index_interval_bytes, base, seg->size, max_ts);
	if (max_ts > seg->max_ts)
		seg->max_ts = max_ts;

	s = io->free;
	io->free = s->next;
	*s = (struct st_slot){ .batch = batch, .len = len, .count = record_count, .base = base,
	                       .pos = seg->size, .seg = seg, .cb = cb, .cookie = cookie };
	seg->size += len;
	seg->end = log->leo = base + record_count;
	seg->queued++;
	if (log->pend_tail)
		log->pend_tail->next = s;
	else
		log->pend_head = s;
	log->pend_tail = s;
	io->pending++;
	/* With a group in flight, its completion puts the log back on the dirty list. */
	if (!log->grp.active)
		dirty_push(io, log);
	return base;
}

/* Take the longest prefix of pending appends in one segment (<= ST_IO_IOV_MAX) as the group. */
static void group_form(struct st_log *log)
{
	struct st_group *g = &log->grp;
	struct st_slot *s = log->pend_head, *tail = NULL;
	uint32_t n = 0;

	assert(s && !g->active);
	memset(g, 0, sizeof(*g));
	g->seg = s->seg;
	g->pos = s->pos;
	g->head = s;
	/* Direct io: a group fits the buffer beside the segment's last partial block (log_prep). */
	uint64_t room = log->dbuf ? ST_LOG_DIRECT_BUF_BYTES - log->dalign : UINT64_MAX;
	while (s && s->seg == g->seg && n < ST_IO_IOV_MAX && (n == 0 || g->total + s->len <= room)) {
		assert(s->pos == g->pos + g->total);
		assert(n == 0 || s->base == tail->base + tail->count);
		log->iov[n].iov_base = s->batch;
		log->iov[n].iov_len = s->len;
		g->total += s->len;
		g->end = s->base + s->count;
		n++;
		tail = s;
		s = s->next;
	}
	tail->next = NULL;
	log->pend_head = s;
	if (!s)
		log->pend_tail = NULL;
	g->tail = tail;
	g->n = g->iov_n = n;
	g->active = true;
	assert(g->seg->durable_size == g->pos); /* groups of a segment go in file order */
}

static uint64_t op_user_data(struct st_log *log, unsigned op)
{
	return (((uint64_t)(uintptr_t)log | op) << 4) | ST_URING_TAG;
}

/*
 * The end to which seg's space should be reserved now, or 0 when its reserve
 * still holds half a step (or preallocation is off): a step past the bytes
 * appended, never past the segment's roll size (or its one oversized batch).
 */
static uint64_t seg_prealloc_target(const struct st_log *log, const struct st_seg *seg)
{
	uint64_t step = log->io->cfg.prealloc_bytes;
	uint64_t cap = log->cfg.segment_bytes > seg->size ? log->cfg.segment_bytes : seg->size;
	uint64_t target = seg->size + step < cap ? seg->size + step : cap;

	if (!step || log->falloc_off || seg->prealloc_end >= target || seg->prealloc_end >= seg->size + step / 2)
		return 0;
	return target;
}

/* Copy the group's bytes at file positions [from, to) (within the group) to dst. */
static void group_copy(const struct st_group *g, uint64_t from, uint64_t to, uint8_t *dst)
{
	for (const struct st_slot *s = g->head; s && from < to; s = s->next) {
		uint64_t end = s->pos + s->len;
		if (end <= from)
			continue;
		uint64_t k = (end < to ? end : to) - from;
		memcpy(dst, s->batch + (from - s->pos), k);
		dst += k;
		from += k;
	}
	assert(from == to);
}

/*
 * Direct io, a group just formed: the buffer follows its segment (a new one after
 * a roll starts empty), and a group that fits (log.h: ST_LOG_DIRECT_BUF_BYTES) is
 * copied behind the segment's last partial block, to be written as whole blocks
 * O_DIRECT and a tail of less than a block through the page cache (log_prep).
 */
static void group_dio_form(struct st_log *log)
{
	struct st_group *g = &log->grp;

	if (g->seg != log->dseg) {
		assert(g->pos == 0 && g->seg->durable_size == 0);
		log->dseg = g->seg;
		log->dbase = log->dlen = 0;
	}
	assert(log->dbase + log->dlen == g->pos);
	if (g->seg->dfd < 0 || log->dio_off || g->fault || log->dlen + g->total > ST_LOG_DIRECT_BUF_BYTES)
		return; /* the ordinary writev; group_settle keeps the buffer's last block */
	group_copy(g, g->pos, g->pos + g->total, log->dbuf + log->dlen);
	uint64_t held = log->dlen + g->total;
	g->dio = true;
	g->dio_full = held & ~(uint64_t)(log->dalign - 1);
	g->dio_tail = held - g->dio_full;
	g->dio_full_done = g->dio_full == 0;
	g->dio_tail_done = g->dio_tail == 0;
}

/* Direct io, a group durable: the buffer keeps only the segment's new last partial block. */
static void group_dio_settle(struct st_log *log)
{
	struct st_group *g = &log->grp;
	uint64_t end = g->pos + g->total;
	uint64_t base = end & ~(uint64_t)(log->dalign - 1);

	assert(g->seg == log->dseg);
	if (g->dio) {
		memmove(log->dbuf, log->dbuf + g->dio_full, g->dio_tail);
	} else if (base == log->dbase) {
		group_copy(g, g->pos, end, log->dbuf + log->dlen); /* still within the same block */
	} else {
		group_copy(g, base, end, log->dbuf);                /* the block began inside the group */
	}
	log->dbase = base;
	log->dlen = end - base;
}

/* Prepare the SQEs of log's group (forming it if needed). -EBUSY if the SQ lacks room. */
static int log_prep(struct st_io *io, struct st_log *log)
{
	struct st_group *g = &log->grp;
	bool fsync = io->cfg.fsync;
	bool write = !g->active || g->written < g->total;
	struct st_seg *seg = g->active ? g->seg : log->pend_head->seg;
	bool dirsync = fsync && !seg->name_durable;
	uint64_t falloc_to = write ? seg_prealloc_target(log, seg) : 0;
	/* A direct group's two writes are one SQE each; a new group may become one: room for both. */
	unsigned writes = !write ? 0 : !g->active ? (log->dbuf ? 2u : 1u) :
	                  !g->dio ? 1u : (unsigned)!g->dio_full_done + (unsigned)!g->dio_tail_done;
	unsigned need = (unsigned)dirsync + (unsigned)(falloc_to > 0) + writes + (unsigned)fsync;

	assert(!g->active || (g->ops_left == 0 && !g->err));
	assert(need > 0);
	if (st_fs_sq_space(io->ring) < need)
		return -EBUSY;
	if (!g->active) {
		group_form(log);
		int64_t at = log->fault_write_at1 - 1;
		g->fault = at >= g->head->base && at < g->end;
		if (log->dbuf)
			group_dio_form(log);
		writes = !g->dio ? 1u : (unsigned)!g->dio_full_done + (unsigned)!g->dio_tail_done;
		need = (unsigned)dirsync + (unsigned)(falloc_to > 0) + writes + (unsigned)fsync;
	}
	/* The segment's name first: a failure cancels the write and sync linked after it. */
	if (dirsync)
		st_fs_prep_sync(io->ring, log->dirfd, false, op_user_data(log, ST_OP_DIRSYNC), ST_FS_LINK);
	/* The space ahead, before the write that needs it. A hard link: the write goes whatever it
	 * returned (a reserve is a help, never a condition), but not after a failed dirsync. */
	g->falloc = falloc_to > 0;
	if (g->falloc) {
		g->falloc_from = seg->prealloc_end;
		st_fs_prep_fallocate(io->ring, seg->fd, FALLOC_FL_KEEP_SIZE, seg->prealloc_end,
		                     falloc_to - seg->prealloc_end, op_user_data(log, ST_OP_FALLOC), ST_FS_HARDLINK);
		seg->prealloc_end = falloc_to;
	}
	/* A short or failed write cancels the linked fdatasync (-ECANCELED); we resubmit both. */
	if (write && g->dio) {
		/* Whole blocks from the aligned buffer at the aligned offset, O_DIRECT (the segment's
		 * last partial block written again, whole), then the tail through the page cache: the
		 * file's size stays the last batch's end. A short direct write is written again whole. */
		if (!g->dio_full_done)
			st_fs_prep_write(io->ring, g->seg->dfd, log->dbuf, (unsigned)g->dio_full, log->dbase,
			                 op_user_data(log, ST_OP_DWRITE), !g->dio_tail_done || fsync ? ST_FS_LINK : 0);
		if (!g->dio_tail_done)
			st_fs_prep_write(io->ring, g->seg->fd, log->dbuf + g->dio_full, (unsigned)g->dio_tail,
			                 log->dbase + g->dio_full, op_user_data(log, ST_OP_WRITE), fsync ? ST_FS_LINK : 0);
	} else if (write) {   /* a faulted group (test only) writes no byte: its completion is made EIO */
		st_fs_prep_writev(io->ring, g->seg->fd, &log->iov[g->iov_first], g->fault ? 0 : g->iov_n - g->iov_first,
		                  g->pos + g->written, op_user_data(log, ST_OP_WRITE), fsync);
	}
	/* Group commit: one fdatasync makes every append of the group durable. */
	if (fsync)
		st_fs_prep_fdatasync(io->ring, g->seg->fd, op_user_data(log, ST_OP_SYNC));
	g->ops_left = need;
	return (int)need;
}

int st_io_flush(struct st_io *io)
{
	struct st_log *log;
	int prepared = 0;

	while ((log = io->dirty_head)) {
		int n = log_prep(io, log);
		if (n < 0)
			break; /* SQ full: this log and the ones after it go in the next flush */
		io->dirty_head = log->dirty_next;
		if (!io->dirty_head)
			io->dirty_tail = NULL;
		log->dirty_next = NULL;
		log->on_dirty = false;
		prepared += n;
	}
	return prepared;
}

/* Drop the first `bytes` of the group's remaining iovecs (after a short write). */
static void group_consume(struct st_log *log, uint64_t bytes)
{
	struct st_group *g = &log->grp;

	while (bytes) {
		struct iovec *v = &log->iov[g->iov_first];
		assert(g->iov_first < g->iov_n);
		if (bytes < v->iov_len) {
			v->iov_base = (uint8_t *)v->iov_base + bytes;
			v->iov_len -= bytes;
			return;
		}
		bytes -= v->iov_len;
		g->iov_first++;
	}
}

/* Call back every append in the list with status, returning their slots. */
static void slots_finish(struct st_io *io, struct st_slot *s, int status)
{
	while (s) {
		struct st_slot *next = s->next;
		st_append_cb cb = s->cb;
		void *cookie = s->cookie;
		int64_t base = s->base;

		assert(s->seg->queued > 0);
		s->seg->queued--;
		io->pending--;
		s->next = io->free;
		io->free = s;
		cb(cookie, status, base);
		s = next;
	}
}

/* A hard write/sync error: the partition goes offline (absorbing). */
static void log_fail(struct st_io *io, struct st_log *log, int err)
{
	struct st_group *g = &log->grp;
	struct st_slot *group = g->head, *pend = log->pend_head;

	assert(err < 0 && !log->on_dirty);
	fprintf(stderr, "sluice storage: %s: %s of segment %020" PRId64 " at byte %" PRIu64
	        " failed: %s; partition is offline, its appends now fail with EIO\n", log->dir,
	        !g->seg->name_durable ? "directory fsync before the first write" :
	        g->written < g->total ? "write" : "fdatasync", g->seg->base, g->pos + g->written, strerror(-err));
	log->failed = err;
	g->active = false;
	g->head = g->tail = NULL;
	log->pend_head = log->pend_tail = NULL;
	slots_finish(io, group, err);
	slots_finish(io, pend, err);
}

/* The group's chain is fully reaped: finish it, resubmit what is missing, or fail. */
static void group_settle(struct st_io *io, struct st_log *log)
{
	struct st_group *g = &log->grp;

	if (g->err) {
		log_fail(io, log, g->err);
		return;
	}
	if (g->written < g->total || (io->cfg.fsync && (!g->synced || !g->seg->name_durable))) {
		if (++g->retries > ST_IO_RETRIES_MAX) {
			log_fail(io, log, -EIO);
			return;
		}
		dirty_push(io, log); /* st_io_flush resubmits the rest (and the sync) */
		return;
	}
	/* Durable: publish the new high watermark before acknowledging. */
	struct st_slot *done = g->head;
	assert(g->end > log->durable && g->seg->durable_size == g->pos);
	if (log->dbuf)
		group_dio_settle(log);
	g->seg->durable_size = g->pos + g->total;
	log->durable = g->end;
	if (g->seg != log_active(log) && g->seg->durable_size == g->seg->size)
		seg_seal(log, g->seg); /* its last group after a roll: rare */
	g->active = false;
	g->head = g->tail = NULL;
	if (log->pend_head)
		dirty_push(io, log);
	rp_advance(log, ST_LOG_RECOVERY_POINT_BYTES);
	/* Acknowledge only now, after the fdatasync (or write, without fsync) completed. */
	slots_finish(io, done, 0);
}

void st_io_complete(struct st_io *io, const struct io_uring_cqe *cqe)
{
	uint64_t payload = cqe->user_data >> 4;
	unsigned op = (unsigned)(payload & ST_OP_MASK);
	int res = cqe->res;

	assert((cqe->user_data & 0xf) == ST_URING_TAG);
	if (op == ST_OP_FOP) {
		st_fop_complete(io, (struct st_fop *)(uintptr_t)(payload & ~(uint64_t)15), (unsigned)(payload >> 2) & 1u,
		                res);
		return;
	}
	op = (unsigned)(payload & ST_OP_LOG_MASK);
	struct st_log *log = (struct st_log *)(uintptr_t)(payload & ~(uint64_t)ST_OP_LOG_MASK);
	struct st_group *g = &log->grp;

	assert(log && log->io == io);
	assert(g->active && g->ops_left > 0);
	g->ops_left--;
	if (op == ST_OP_FALLOC) {
		assert(g->falloc);
		if (res == -ECANCELED || res == -EAGAIN || res == -EINTR) {
			g->seg->prealloc_end = g->falloc_from; /* not done: the next group asks again */
		} else if (res < 0 && !log->falloc_off) {
			/* No file system space, or no fallocate: the appends go on without a reserve. */
			fprintf(stderr, "sluice storage: %s: preallocation of segment %020" PRId64 " failed: %s; "
			        "its segments now grow without it\n", log->dir, g->seg->base, strerror(-res));
			log->falloc_off = true;
		}
	} else if (op == ST_OP_DIRSYNC) {
		if (res == 0)
			g->seg->name_durable = true;
		else if (res != -EAGAIN && res != -EINTR && !g->err)
			g->err = res; /* the write and sync linked after it come back cancelled */
	} else if ((op == ST_OP_WRITE || op == ST_OP_DWRITE) && g->dio) {
		bool full = op == ST_OP_DWRITE;
		uint64_t want = full ? g->dio_full : g->dio_tail;
		if (res >= 0 && (uint64_t)res == want) {
			if (full)
				g->dio_full_done = true;
			else
				g->dio_tail_done = true;
			g->retries = 0;
			if (g->dio_full_done && g->dio_tail_done)
				g->written = g->total;
		} else if (res > 0) {
			/* Short (a disk filling up): the group's bytes on file so far count, and the rest goes
			 * the ordinary way, whose next write then says why (ENOSPC: the disk-full handling). */
			uint64_t on_file = log->dbase + (full ? 0 : g->dio_full) + (uint64_t)res;
			uint64_t done = on_file > g->pos ? on_file - g->pos : 0;
			group_consume(log, done);
			g->written = done;
			g->dio = false;
			g->retries = 0;
		} else if ((res == -EINVAL || res == -EOPNOTSUPP) && full) {
			/* The file system refused the aligned write after all (an alignment statx did not
			 * report): nothing of it is on file; the group and the log's later ones go the
			 * ordinary way (the tail and sync linked after it come back cancelled). */
			log_dio_off(log, res == -EINVAL ? "an O_DIRECT write was refused (EINVAL)"
			                                : "an O_DIRECT write was refused (EOPNOTSUPP)");
			st_fs_close(g->seg->dfd);
			g->seg->dfd = -1;
			g->dio = false;
		} else if (res < 0 && res != -EAGAIN && res != -EINTR && res != -ECANCELED && !g->err) {
			g->err = res;
		} /* 0, -EAGAIN, -EINTR, -ECANCELED: no progress, resubmit */
	} else if (op == ST_OP_WRITE) {
		if (g->fault) {   /* test only (st_log_fault_write): nothing was written */
			res = -EIO;
			log->fault_write_at1 = 0;
		}
		if (res > 0) {
			assert(g->written + (uint64_t)res <= g->total);
			g->written += (uint64_t)res;
			group_consume(log, (uint64_t)res);
			g->retries = 0;
		} else if (res < 0 && res != -EAGAIN && res != -EINTR && res != -ECANCELED && !g->err) {
			g->err = res;
		} /* 0, -EAGAIN, -EINTR, -ECANCELED (the dirsync before it failed): no progress, resubmit */
	} else {
		/* The link runs the sync only after the whole write succeeded. */
		if (res == 0)
			g->synced = g->written == g->total;
		else if (res != -ECANCELED && res != -EAGAIN && res != -EINTR && !g->err)
			g->err = res;
	}
	if (g->ops_left == 0)
		group_settle(io, log);
}

/* ------------------------------------------------------------------------ */
/* Reads: locate, time lookup, retention                                     */

/* Read the batch header at pos of seg; returns the batch's total size or -errno. */
/*
 * The header of the batch at pos. nowait (the owner's poll core): only from the
 * page cache, -EAGAIN when any of it is not there (the caller brings it in
 * through its ring); a file system without RWF_NOWAIT reads as before.
 */
static int seg_read_header(const struct st_seg *seg, uint64_t pos, struct st_batch_hdr *h, bool nowait)
{
	uint8_t hdr[ST_BATCH_HEADER_BYTES];
	size_t got = 0;
	int rc = 0;

	/* Recovery leaves whole batches, but a sealed segment its index vouched for was not
	 * scanned: a damaged length there can end a batch less than a header before the end
	 * (an assertion here took the broker down on a fetch; found by fuzz_segindex). */
	if (pos + ST_BATCH_HEADER_BYTES > seg->durable_size)
		return -EBADMSG;
	if (nowait) {
		ssize_t n = st_fs_pread_nowait(seg->fd, hdr, sizeof(hdr), (off_t)pos);
		if (n >= 0 && (size_t)n < sizeof(hdr))
			return -EAGAIN; /* its second page is not cached */
		if (n < 0 && errno == EAGAIN)
			return -EAGAIN;
		if (n < 0 && errno != EOPNOTSUPP)
			return -errno;
		got = n < 0 ? 0 : (size_t)n;
		nowait = n >= 0;
	}
	if (!nowait && (rc = pread_full(seg->fd, hdr, sizeof(hdr), pos, &got)) < 0)
		return rc;
	if (got != sizeof(hdr))
		return -EIO;
	rc = st_batch_parse_header(hdr, sizeof(hdr), h);
	/* Written and recovered batches were checked; a bad header now is damage. */
	if (rc < 0 || pos + (uint64_t)rc > seg->durable_size)
		return -EBADMSG;
	return rc;
}

/* The damage range set aside at byte pos of seg, or NULL (none starts there). */
static const struct st_damage *seg_damage_at(const struct st_seg *seg, uint64_t pos)
{
	for (uint32_t i = 0; i < seg->ndmg; i++)
		if (seg->dmg[i].pos == pos)
			return &seg->dmg[i];
	return NULL;
}

/*
 * A read met a bad batch that recovery did not set aside (a sealed segment
 * trusted from its index, or damage since): say so once per segment and
 * remove the index, so that the next open scans the segment and sets the
 * damage aside. Rare; one unlink on the owner core.
 */
static int seg_damage_met(struct st_log *log, struct st_seg *seg, uint64_t pos, int64_t offset)
{
	if (!seg->damage_seen) {
		seg->damage_seen = true;
		fprintf(stderr, "sluice storage: %s: segment %020" PRId64 ": DAMAGE: bad batch at byte %" PRIu64
		        " (offset %" PRId64 " expected there): reads of it fail with CORRUPT_MESSAGE; a restart scans "
		        "the segment and sets the damage aside\n", log->dir, seg->base, pos, offset);
		seg_index_unlink(log, seg->base);
	}
	return -EBADMSG;
}

/* The bytes to bring in for a lookup that met an uncached header at pos of seg (-EAGAIN). */
static int log_warm(const struct st_seg *seg, uint64_t pos, int *fd, uint64_t *at, uint32_t *len)
{
	uint64_t n = seg->durable_size - pos;
	*fd = seg->fd;
	*at = pos;
	*len = n < ST_LOG_WARM_BYTES ? (uint32_t)n : ST_LOG_WARM_BYTES;
	return -EAGAIN;
}

static int log_locate(struct st_log *log, int64_t offset, int64_t limit, uint32_t max_bytes, int *fd,
                      uint64_t *pos, uint32_t *len, bool nowait)
{
	struct st_batch_hdr h;
	int total;

	if (offset < st_log_start_offset(log) || offset > log->leo)
		return -ERANGE;
	/* Never hand out bytes whose write has not completed. */
	int64_t lim = limit < log->durable ? limit : log->durable;
	struct st_seg *seg = log->segs[log_seg_find(log, offset)];
	int64_t expect; /* base offset of the batch at p: each header must continue the last */
	uint64_t p = seg_index_lookup(seg, offset, &expect);

	*fd = seg->fd;
	*pos = p;
	*len = 0;
	if (offset >= lim)
		return 0;
	assert(offset < seg->end);
	for (;;) { /* bounded: ~index_interval_bytes of headers */
		if (p >= seg->durable_size)
			return -EIO; /* offset < durable, so its batch must be here */
		const struct st_damage *d = seg->ndmg ? seg_damage_at(seg, p) : NULL;
		if (d) {
			if (offset < d->to)
				return -EBADMSG; /* set aside at recovery: the client hears of it */
			p = d->end;
			expect = d->to;
			continue;
		}
		if ((total = seg_read_header(seg, p, &h, nowait)) == -EAGAIN)
			return log_warm(seg, p, fd, pos, len);
		if (total < 0)
			return total == -EBADMSG ? seg_damage_met(log, seg, p, expect) : total;
		if (h.base_offset != expect)
			return seg_damage_met(log, seg, p, expect);
		if (h.base_offset + h.last_offset_delta >= offset)
			break;
		p += (uint64_t)total;
		expect = h.base_offset + h.last_offset_delta + 1;
	}
	*pos = p;
	if (h.base_offset + h.last_offset_delta >= lim)
		return 0; /* the batch holding offset is not wholly below the limit */
	uint64_t end = p + (uint64_t)total; /* KIP-74: the first batch goes whole */
	expect = h.base_offset + h.last_offset_delta + 1;
	/* The range stops before damage (known or met now): a fetch from there reports it; and
	 * before a header not in the page cache (nowait): ST_LOG_LOCATE_COLD where the batch
	 * there is below lim and one could still fit max_bytes, so that the caller can bring
	 * it in and ask again (a fetch used to get only the batches whose headers happened
	 * to be cached: fewer than Kafka sends, and fewer on a busy machine). */
	int rc = 0;
	while (end < seg->durable_size && !(seg->ndmg && seg_damage_at(seg, end))) {
		int got = seg_read_header(seg, end, &h, nowait);
		if (got == -EAGAIN && expect < lim && end - p + ST_BATCH_HEADER_BYTES <= max_bytes)
			rc = ST_LOG_LOCATE_COLD;
		if (got < 0 || h.base_offset != expect)
			break;
		total = (int)(12 + (int64_t)h.batch_length);
		if (h.base_offset + h.last_offset_delta >= lim || end + (uint64_t)total - p > max_bytes)
			break;
		end += (uint64_t)total;
		expect = h.base_offset + h.last_offset_delta + 1;
	}
	assert(end - p <= UINT32_MAX);
	*len = (uint32_t)(end - p);
	return rc;
}

int st_log_locate(struct st_log *log, int64_t offset, int64_t limit, uint32_t max_bytes, int *fd,
                  uint64_t *pos, uint32_t *len)
{
	return log_locate(log, offset, limit, max_bytes, fd, pos, len, false);
}

int st_log_locate_nowait(struct st_log *log, int64_t offset, int64_t limit, uint32_t max_bytes, int *fd,
                         uint64_t *pos, uint32_t *len)
{
	return log_locate(log, offset, limit, max_bytes, fd, pos, len, true);
}

_Static_assert(ST_SCAN_RAW_BYTES >= ST_MARKER_BATCH_BYTES, "a scanned marker can be decoded");

/* As seg_read_header, also keeping the first min(total, cap) raw bytes in buf (*raw_len). */
static int seg_read_raw(const struct st_seg *seg, uint64_t pos, struct st_batch_hdr *h, uint8_t *buf, size_t cap,
                        size_t *raw_len)
{
	size_t want = seg->durable_size - pos < cap ? (size_t)(seg->durable_size - pos) : cap, got;
	int rc;

	assert(cap >= ST_BATCH_HEADER_BYTES && pos + ST_BATCH_HEADER_BYTES <= seg->durable_size);
	if ((rc = pread_full(seg->fd, buf, want, pos, &got)) < 0)
		return rc;
	if (got != want)
		return -EIO;
	rc = st_batch_parse_header(buf, got, h);
	if (rc < 0 || pos + (uint64_t)rc > seg->durable_size)
		return -EBADMSG; /* as seg_read_header: recovered batches were checked */
	*raw_len = (size_t)rc < got ? (size_t)rc : got;
	return rc;
}

int st_log_scan(struct st_log *log, int64_t from_offset, st_scan_cb cb, void *arg)
{
	struct st_batch_hdr h;
	uint8_t raw[ST_SCAN_RAW_BYTES];
	size_t raw_len;
	int64_t next; /* offset after the previous batch: they must run on without gaps */

	assert(cb);
	/* Recovery reads what is on disk, below a raised log start too (DeleteRecords): the producer
	 * state and the markers of the offsets between the last snapshot and the start are there. */
	if (from_offset < log->segs[0]->base)
		from_offset = log->segs[0]->base;
	if (from_offset >= log->durable)
		return 0;
	uint32_t i = log_seg_find(log, from_offset);
	uint64_t p = seg_index_lookup(log->segs[i], from_offset, &next);
	for (; i < log->nsegs; i++, p = 0) {
		struct st_seg *seg = log->segs[i];
		int total, rc;
		while (p < seg->durable_size) {
			const struct st_damage *d = seg->ndmg ? seg_damage_at(seg, p) : NULL;
			if (d) { /* set aside (and logged) at open: step over */
				p = d->end;
				next = d->to;
				continue;
			}
			if (seg->durable_size - p < ST_BATCH_HEADER_BYTES)
				return seg_damage_met(log, seg, p, next); /* recovery cut torn tails */
			if ((total = seg_read_raw(seg, p, &h, raw, sizeof(raw), &raw_len)) < 0)
				return total == -EBADMSG ? seg_damage_met(log, seg, p, next) : total;
			if (h.base_offset != next)
				return seg_damage_met(log, seg, p, next); /* trusted from its index, not rescanned */
			next = h.base_offset + h.last_offset_delta + 1;
			p += (uint64_t)total;
			if (next <= from_offset)
				continue; /* before the batch holding from_offset (index entries are sparse) */
			if ((rc = cb(arg, &h, raw, raw_len)) != 0)
				return rc;
		}
	}
	return 0;
}

/*
 * The first batch whose maxTimestamp >= ts_ms (Kafka's ListOffsets by time, per batch): the first
 * segment whose maximum reaches it, there the first time-index entry that does, and only that
 * entry's interval of headers (log_internal.h, <base>.timeindex). Damaged ranges are stepped over
 * (their timestamps are lost with them); batches not yet durable are not read (LEO).
 */
static int log_offset_for_time(struct st_log *log, int64_t ts_ms, int64_t *offset, int *fd, uint64_t *pos,
                               uint32_t *len, bool nowait, struct st_time_hit *hit)
{
	struct st_batch_hdr h;
	int64_t start = st_log_start_offset(log);

	*offset = log->leo;
	if (hit)
		hit->found = false;
	for (uint32_t i = 0; i < log->nsegs; i++) {
		struct st_seg *seg = log->segs[i];
		int total;
		if (i + 1 < log->nsegs && log->segs[i + 1]->base <= start)
			continue; /* wholly below the log start (DeleteRecords): searched from the start, as Kafka */
		if (seg->max_ts < ts_ms)
			continue; /* nothing in this segment is late enough */
		uint32_t lo = 0, hi = seg->index_n;
		while (lo < hi) { /* first entry whose running maximum reaches ts_ms */
			uint32_t mid = lo + (hi - lo) / 2;
			if (seg->tindex[mid] < ts_ms)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == seg->index_n)
			continue; /* only the -1 floor of max_ts reached it (batches stamped below -1) */
		uint64_t stop = lo + 1 < seg->index_n ? seg->index[lo + 1].pos : seg->size;
		uint64_t p = seg->index[lo].pos;
		int64_t expect = seg->base + seg->index[lo].rel; /* each header must continue the last */
		bool straddles = seg->base < start; /* the running maximum may come from below the start */
		if (straddles) {
			/* From the batch holding the start (if past lo's), to the segment's end: the batch
			 * found must lie at or past the start. Bounded by this one segment's headers. */
			int64_t at;
			uint64_t sp = seg_index_lookup(seg, start, &at);
			if (sp > p) {
				p = sp;
				expect = at;
			}
			stop = seg->size;
		}
		uint64_t end = stop < seg->durable_size ? stop : seg->durable_size;
		for (; p < end; p += (uint64_t)total) { /* bounded: one index interval of headers */
			const struct st_damage *d = seg->ndmg ? seg_damage_at(seg, p) : NULL;
			if (d) {
				total = 0;
				p = d->end; /* its timestamps are lost with it */
				expect = d->to;
				continue;
			}
			log->time_headers++;
			if ((total = seg_read_header(seg, p, &h, nowait)) == -EAGAIN)
				return log_warm(seg, p, fd, pos, len);
			if (total < 0)
				return 0; /* LEO; logged nowhere: reads retry; the header is checked again then */
			if (h.base_offset != expect) {
				seg_damage_met(log, seg, p, expect); /* never an offset the log does not hold */
				return 0;
			}
			expect = h.base_offset + h.last_offset_delta + 1;
			if (expect <= start)
				continue; /* wholly below the log start */
			if (h.max_timestamp >= ts_ms) {
				*offset = h.base_offset > start ? h.base_offset : start; /* in the batch: from the start */
				if (hit)
					*hit = (struct st_time_hit){ .found = true, .fd = seg->fd, .pos = p, .len = (uint32_t)total,
					                             .h = h };
				return 0;
			}
		}
		if (end < stop)
			return 0; /* it lies in bytes not yet durable: LEO, as for a batch still to come */
		if (straddles)
			continue; /* the maximum was below the start: on to the next segment */
		/* The file disagrees with the index that was trusted for it (damage since): say so, and the
		 * next open scans the segment. */
		seg_damage_met(log, seg, p, -1);
		return 0;
	}
	return 0;
}

int64_t st_log_offset_for_time(struct st_log *log, int64_t ts_ms)
{
	int64_t off = log->leo;
	int fd;
	uint64_t pos;
	uint32_t len;

	log_offset_for_time(log, ts_ms, &off, &fd, &pos, &len, false, NULL);
	return off;
}

void st_log_batch_for_time(struct st_log *log, int64_t ts_ms, struct st_time_hit *hit)
{
	int64_t off;
	int fd;
	uint64_t pos;
	uint32_t len;

	log_offset_for_time(log, ts_ms, &off, &fd, &pos, &len, false, hit);
}

int st_log_batch_for_time_nowait(struct st_log *log, int64_t ts_ms, struct st_time_hit *hit, int *fd, uint64_t *pos,
                                 uint32_t *len)
{
	int64_t off;
	return log_offset_for_time(log, ts_ms, &off, fd, pos, len, true, hit);
}

int st_log_offset_for_time_nowait(struct st_log *log, int64_t ts_ms, int64_t *offset, int *fd, uint64_t *pos,
                                  uint32_t *len)
{
	return log_offset_for_time(log, ts_ms, offset, fd, pos, len, true, NULL);
}

#define ST_READ_ALL_BYTES (4u << 20)

/* The damage range that holds offset, or NULL. */
static const struct st_damage *log_damage_covering(const struct st_log *log, int64_t offset)
{
	const struct st_seg *seg = log->segs[log_seg_find(log, offset)];

	for (uint32_t i = 0; i < seg->ndmg; i++)
		if (offset >= seg->dmg[i].from && offset < seg->dmg[i].to)
			return &seg->dmg[i];
	return NULL;
}

uint32_t st_log_damage_count(const struct st_log *log, int64_t *offsets_lost)
{
	uint32_t n = 0;
	int64_t lost = 0;

	for (uint32_t i = 0; i < log->nsegs; i++)
		for (uint32_t k = 0; k < log->segs[i]->ndmg; k++, n++)
			lost += log->segs[i]->dmg[k].to - log->segs[i]->dmg[k].from;
	if (offsets_lost)
		*offsets_lost = lost;
	return n;
}

int st_log_read_batches(struct st_log *log, st_batch_cb cb, void *arg)
{
	int64_t off = st_log_start_offset(log), end = log->leo;
	uint8_t *buf = malloc(ST_READ_ALL_BYTES);
	int rc = buf ? 0 : -ENOMEM;
	while (rc == 0 && off < end) {
		int fd;
		uint64_t pos;
		uint32_t len;
		rc = st_log_locate(log, off, end, ST_READ_ALL_BYTES, &fd, &pos, &len);
		const struct st_damage *d = rc == -EBADMSG ? log_damage_covering(log, off) : NULL;
		if (d) {
			/* Set aside at open: what follows is still read (later records supersede lost ones). */
			fprintf(stderr, "sluice storage: %s: DAMAGE: offsets [%" PRId64 ", %" PRId64 ") are unreadable "
			        "and skipped; their records are lost, the log is read on after them\n", log->dir, d->from,
			        d->to);
			off = d->to;
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		if (len == 0 || len > ST_READ_ALL_BYTES) {
			rc = len ? -EFBIG : -EIO;
			break;
		}
		if (st_fs_pread(fd, buf, len, (off_t)pos) != (ssize_t)len) {
			rc = -EIO;
			break;
		}
		for (uint32_t p = 0; p < len && rc == 0;) {
			struct st_batch_hdr h;
			int n = st_batch_parse(buf + p, len - p, &h);
			if (n <= 0) {
				rc = -EIO;   /* recovery left only whole batches: this is damage */
				break;
			}
			rc = cb(arg, buf + p, (size_t)n, &h);
			off = h.base_offset + h.last_offset_delta + 1;
			p += (uint32_t)n;
		}
	}
	free(buf);
	return rc < 0 ? rc : 0;
}

int st_log_roll(struct st_log *log)
{
	struct st_seg *active = log_active(log);
	if (active->size == 0)
		return 0;   /* already empty: nothing to roll */
	return log_roll(log);
}

int st_log_drop_before(struct st_log *log, int64_t offset)
{
	int deleted = 0;
	while (log->nsegs > 1) {
		struct st_seg *seg = log->segs[0];
		if (seg->end > offset || seg->queued || seg->durable_size != seg->size)
			break;   /* holds offsets we keep, or writes in flight: its fd stays */
		seg_remove(log, seg);
		memmove(log->segs, log->segs + 1, (log->nsegs - 1) * sizeof(*log->segs));
		log->nsegs--;
		deleted++;
	}
	return deleted;
}

int st_log_retain(struct st_log *log, int64_t now_ms)
{
	uint64_t total = 0;
	int deleted = 0;

	rp_advance(log, 1); /* the owner's timer: whatever the durable end gained since the last record */
	for (uint32_t i = 0; i < log->nsegs; i++)
		total += log->segs[i]->size;
	while (log->nsegs > 1) {
		struct st_seg *seg = log->segs[0];
		int64_t ts = seg->max_ts;
		struct stat st;

		if (seg->queued || seg->durable_size != seg->size)
			break; /* writes in flight: its fd must stay open */
		if (seg->size == 0 && st_fs_fstat(seg->fd, &st) == 0)
			ts = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
		bool by_size = log->cfg.retention_bytes >= 0 && total > (uint64_t)log->cfg.retention_bytes;
		bool by_time = log->cfg.retention_ms >= 0 && ts < now_ms - log->cfg.retention_ms;
		/* Wholly below it (DeleteRecords), and below where recovery's replay begins (its last
		 * producer snapshot, st_log_keep_from): a restart must still read what lies above it. */
		bool by_start = log->segs[1]->base <= log->ls_start && log->segs[1]->base <= log->keep_from;
		if (!by_size && !by_time && !by_start)
			break;
		total -= seg->size;
		seg_remove(log, seg);
		memmove(log->segs, log->segs + 1, (log->nsegs - 1) * sizeof(*log->segs));
		log->nsegs--;
		deleted++;
	}
	return deleted;
}

/* ---- compaction by rewrite ------------------------------------------------- */

int st_compaction_begin(struct st_log *log, struct st_compaction *k)
{
	assert(!st_compaction_busy(k));
	int64_t from = st_log_end_offset(log);
	int rc = st_log_roll(log);
	if (rc < 0)
		return rc;
	*k = (struct st_compaction){ .from = from, .queuing = true };
	return 0;
}

/* The old segments go once every rewrite write is durable and none was lost. */
static int compaction_finish(struct st_log *log, struct st_compaction *k)
{
	if (k->queuing || k->pending)
		return -EAGAIN;
	return k->failed ? -EIO : st_log_drop_before(log, k->from);
}

int st_compaction_end(struct st_log *log, struct st_compaction *k)
{
	assert(k->queuing);
	k->queuing = false;
	return compaction_finish(log, k);
}

int st_compaction_done(struct st_log *log, struct st_compaction *k, int status)
{
	assert(k->pending > 0);
	k->pending--;
	k->failed |= status < 0;
	return compaction_finish(log, k);
}
