/*
 * fuzz_recovery.c - libFuzzer target for the segment recovery scanner
 * (storage/log.c: st_log_open's scan, resync and damage ranges, and the
 * readers that step over them).
 *
 * Input: byte 0 picks the layout (bit 0: scan_sealed; bits 1..7: where the
 * rest is split into a sealed segment and the active one, in 1/128ths), the
 * rest is the segment bytes. Each run writes them to a fresh directory under
 * /dev/shm (or TMPDIR), opens the log, reads it every way a broker does and
 * checks what must hold whatever the bytes: offsets never go backwards, every
 * offset below the end either locates or is damage, read_batches hands over
 * only whole CRC-valid batches, and a second open of what the first left
 * gives the same end and the same damage. Lookups by time give the brute
 * force's answer over the batches a scan hands over (the first whose
 * maxTimestamp reaches the target), and the same answers after the second
 * open, whose sealed segment's time index the first one wrote and, by the
 * input's length, is then removed, damaged or cut (it is rebuilt). An input of odd length also gets a
 * recovery point (storage/log_internal.h) naming the active segment at a byte
 * count taken from its last two bytes, and opens with fsync: then no damage
 * may be set aside at or past that point (recovery cuts there). No I/O is
 * submitted: the io_uring is never touched by open, reads and close.
 * Locality: the fuzzer's thread.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "crc32c.h"
#include "log_internal.h"

#define FUZZ_PATH_BYTES 256
#define FUZZ_LOCATES_MAX 64  /* offsets located per input */
#define FUZZ_TIMES_MAX 64    /* lookups by time per input */
#define FUZZ_BATCHES_MAX 8192 /* batches kept for the brute force (more: no comparison) */

static void on_append(void *cookie, int status, int64_t base) { (void)cookie; (void)status; (void)base; }

/* Remove the run's directory and its files (flat: the log keeps no subdirectories). */
static void rm_dir(const char *d)
{
	DIR *dir = opendir(d);
	struct dirent *de;
	if (!dir)
		return;
	while ((de = readdir(dir)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(dir), de->d_name, 0);
	closedir(dir);
	rmdir(d);
}

static void write_file(const char *dir, int64_t base, const uint8_t *p, size_t n)
{
	char path[FUZZ_PATH_BYTES];
	snprintf(path, sizeof(path), "%s/%020" PRId64 ".log", dir, base);
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n))
		abort();
	close(fd);
}

struct walk {
	int64_t next;  /* every batch handed over starts at or after this */
};

static int batch_cb(void *arg, const uint8_t *b, size_t len, const struct st_batch_hdr *h)
{
	struct walk *w = arg;
	struct st_batch_hdr again;
	if (st_batch_parse(b, len, &again) != (int)len || !st_batch_crc_ok(b, len) || h->base_offset < w->next)
		abort();
	w->next = h->base_offset + h->last_offset_delta + 1;
	return 0;
}

static int scan_cb(void *arg, const struct st_batch_hdr *h, const uint8_t *raw, size_t raw_len)
{
	struct walk *w = arg;
	(void)raw;
	if (h->base_offset < w->next || raw_len < ST_BATCH_HEADER_BYTES)
		abort();
	w->next = h->base_offset + h->last_offset_delta + 1;
	return 0;
}

/* Every batch a scan hands over, for the brute force of a lookup by time. */
struct times {
	uint32_t n;
	bool over;
	int64_t base[FUZZ_BATCHES_MAX], max_ts[FUZZ_BATCHES_MAX];
};

static int times_cb(void *arg, const struct st_batch_hdr *h, const uint8_t *raw, size_t raw_len)
{
	struct times *t = arg;
	(void)raw;
	(void)raw_len;
	if (t->n == FUZZ_BATCHES_MAX) {
		t->over = true;
		return 1;
	}
	t->base[t->n] = h->base_offset;
	t->max_ts[t->n++] = h->max_timestamp;
	return 0;
}

/* The targets: extremes, then the first batches' own maxima and one past them. */
static int64_t time_target(const struct times *t, uint32_t k)
{
	if (k < 3)
		return k == 0 ? INT64_MIN : k == 1 ? 0 : INT64_MAX;
	k -= 3;
	int64_t ts = t->max_ts[(k / 2) % (t->n ? t->n : 1)];
	return k % 2 && ts < INT64_MAX ? ts + 1 : ts;
}

/* Segment 0's time index after the first open, damaged by the input's length: kept, removed, a byte
 * changed, or cut in half. */
static void damage_tindex(const char *dir, size_t size)
{
	char path[FUZZ_PATH_BYTES];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%020d.timeindex", dir, 0);
	if (stat(path, &st) < 0 || st.st_size == 0)
		return;
	switch ((size >> 1) & 3) {
	case 1:
		unlink(path);
		break;
	case 2: {
		int fd = open(path, O_RDWR);
		uint8_t c;
		off_t at = (off_t)(size * 7 % (size_t)st.st_size);
		if (fd < 0 || pread(fd, &c, 1, at) != 1)
			abort();
		c ^= 0x20;
		if (pwrite(fd, &c, 1, at) != 1)
			abort();
		close(fd);
		break;
	}
	case 3:
		if (truncate(path, st.st_size / 2) < 0)
			abort();
		break;
	default:
		break;
	}
}

/* The recovery-point file as storage writes it: segment base, durable bytes. */
static void write_rp(const char *dir, int64_t base, uint64_t bytes)
{
	char path[FUZZ_PATH_BYTES + sizeof(ST_RP_NAME) + 1];
	uint8_t b[ST_RP_BYTES];
	st_put_be32(b, ST_RP_MAGIC);
	st_put_be32(b + 4, ST_RP_VERSION);
	st_put_be64(b + 8, (uint64_t)base);
	st_put_be64(b + 16, bytes);
	st_put_be32(b + 24, crc32c(0, b, 24));
	snprintf(path, sizeof(path), "%s/%s", dir, ST_RP_NAME);
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0 || write(fd, b, sizeof(b)) != (ssize_t)sizeof(b))
		abort();
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct io_uring ring; /* never used: open, reads and close submit nothing */
	static struct st_io *io, *io_sync;
	char dir[FUZZ_PATH_BYTES];
	const char *tmp = getenv("TMPDIR");

	if (size < 1)
		return 0;
	if (!io && st_io_create(&(struct st_io_config){ .fsync = false, .on_append = on_append }, &ring, &io) < 0)
		abort();
	if (!io_sync && st_io_create(&(struct st_io_config){ .fsync = true, .on_append = on_append }, &ring,
	                             &io_sync) < 0)
		abort();
	snprintf(dir, sizeof(dir), "%s/fuzz_recovery.%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp ? tmp : "/tmp",
	         (int)getpid());
	rm_dir(dir);
	if (mkdir(dir, 0755) < 0)
		abort();
	struct st_log_config cfg = { .segment_bytes = 1u << 20, .retention_bytes = -1, .retention_ms = -1,
	                             .index_interval_bytes = 256, .scan_sealed = data[0] & 1 };
	const uint8_t *seg = data + 1;
	size_t n = size - 1, split = n * (data[0] >> 1) / 128;
	/* A sealed segment at 0 and the active one at a base taken from the bytes (often wrong: a gap). */
	write_file(dir, 0, seg, split);
	if (split < n) {
		int64_t base = 0;
		for (size_t i = 0; i < 2 && i < split; i++)
			base = base << 8 | seg[i];
		write_file(dir, split ? base : 0, seg + split, n - split);
	}
	int64_t rp_base = -1;
	uint64_t rp_bytes = 0;
	struct st_io *use = io;
	if (size & 1 && n >= 2) {
		rp_base = 0; /* the active segment's base, as above */
		for (size_t i = 0; split < n && i < 2 && i < split; i++)
			rp_base = rp_base << 8 | seg[i];
		size_t active = split < n ? n - split : split;
		rp_bytes = ((uint64_t)seg[n - 2] << 8 | seg[n - 1]) % (active + 1);
		write_rp(dir, rp_base, rp_bytes);
		use = io_sync;
	}

	struct st_log *log;
	int rc = st_log_open(use, dir, &cfg, &log);
	if (rc == 0) {
		/* Past the recovery point nothing is set aside: the first bad batch there was cut. */
		for (uint32_t i = 0; rp_base >= 0 && i < log->nsegs; i++)
			for (uint32_t k = 0; k < log->segs[i]->ndmg; k++)
				if (log->segs[i]->base > rp_base ||
				    (log->segs[i]->base == rp_base && log->segs[i]->dmg[k].pos >= rp_bytes))
					abort();
		int64_t start = st_log_start_offset(log), end = st_log_end_offset(log), lost = 0;
		uint32_t ranges = st_log_damage_count(log, &lost);
		if (start < 0 || end < start || lost < 0 || lost > end - start)
			abort();
		struct walk w = { .next = start };
		if (st_log_read_batches(log, batch_cb, &w) == 0 && w.next != end)
			abort(); /* read to the end: the last batch ends at the LEO */
		w.next = start;
		st_log_scan(log, start, scan_cb, &w);
		int64_t step = (end - start) / FUZZ_LOCATES_MAX + 1;
		for (int64_t o = start; o < end; o += step) {
			int fd;
			uint64_t pos;
			uint32_t len;
			rc = st_log_locate(log, o, end, 4096, &fd, &pos, &len);
			if (rc != 0 && rc != -EBADMSG && rc != -EIO)
				abort();
		}
		static struct times t;
		int64_t answer[FUZZ_TIMES_MAX];
		t.n = 0;
		t.over = false;
		bool brute = st_log_scan(log, start, times_cb, &t) == 0 && !t.over;
		for (uint32_t k = 0; k < FUZZ_TIMES_MAX; k++) {
			int64_t ts = time_target(&t, k), want = end;
			answer[k] = st_log_offset_for_time(log, ts);
			for (uint32_t i = 0; brute && i < t.n; i++)
				if (t.max_ts[i] >= ts) {
					want = t.base[i];
					break;
				}
			if (answer[k] < start || answer[k] > end || (brute && answer[k] != want))
				abort();
		}
		st_log_close(log);
		damage_tindex(dir, size);
		/* What the first open left (cut, repaired, indexes) opens to the same log. */
		if (st_log_open(use, dir, &cfg, &log) != 0)
			abort();
		int64_t lost2 = 0;
		if (st_log_end_offset(log) != end || st_log_start_offset(log) != start ||
		    st_log_damage_count(log, &lost2) != ranges || lost2 != lost)
			abort();
		for (uint32_t k = 0; k < FUZZ_TIMES_MAX; k++)
			if (st_log_offset_for_time(log, time_target(&t, k)) != answer[k])
				abort();
		st_log_close(log);
	} else if (rc != -EBADMSG && rc != -ENOMEM) {
		abort();
	}
	rm_dir(dir);
	return 0;
}
