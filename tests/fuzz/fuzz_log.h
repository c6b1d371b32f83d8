/*
 * fuzz_log.h - what the coordinator-log and producer-state fuzz targets
 * share: a scratch directory per process, segment files written from the
 * input, CRCs fixed so the fuzzer gets past them, and the replay of the
 * bytes either straight from memory or through the log as the broker reads
 * its internal logs at start-up (dataplane/control.c dp_internal_log_open:
 * st_log_open with every segment scanned, then st_log_read_batches).
 *
 * Locality: the fuzzer's thread (static state, one process per target).
 */
#ifndef SLUICE_FUZZ_LOG_H
#define SLUICE_FUZZ_LOG_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "crc32c.h"
#include "log.h"

#define FUZZ_PATH_BYTES 256
#define FUZZ_INPUT_BYTES_MAX (1u << 20)   /* above every target's -max_len */

static inline void fuzz_check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz: %s\n", what);
		abort();
	}
}

/* DIR for this process and target: /dev/shm when writable (no disk I/O), else TMPDIR or /tmp. */
static inline void fuzz_dir(char *dir, const char *name)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, FUZZ_PATH_BYTES, "%s/fuzz_%s.%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp ? tmp : "/tmp",
	         name, (int)getpid());
}

/* Remove a directory and its files (flat: neither the log nor the snapshots keep subdirectories). */
static inline void fuzz_rm_dir(const char *d)
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

static inline void fuzz_write_file(const char *path, const uint8_t *p, size_t n)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	fuzz_check(fd >= 0 && (n == 0 || write(fd, p, n) == (ssize_t)n), "cannot write a scratch file");
	close(fd);
}

/*
 * Copy [p, p + n) into out and give every batch the walk can frame a good
 * CRC, so that mutations reach the record decoders behind it (damage the CRC
 * catches is fuzz_recovery's). The walk stops at the first bytes that are
 * not a batch; they are copied as they are.
 */
static inline void fuzz_fix_crcs(const uint8_t *p, size_t n, uint8_t *out)
{
	size_t at = 0;
	memcpy(out, p, n);
	while (at < n) {
		struct st_batch_hdr h;
		int len = st_batch_parse(out + at, n - at, &h);
		if (len < 0)
			break;
		st_put_be32(out + at + ST_BATCH_OFF_CRC,
		            crc32c(0, out + at + ST_BATCH_OFF_ATTRIBUTES, (size_t)len - ST_BATCH_OFF_ATTRIBUTES));
		at += (size_t)len;
	}
}

static inline void fuzz_on_append(void *cookie, int status, int64_t base) { (void)cookie; (void)status; (void)base; }

/* The storage context of the log opens: open, reads and close submit nothing to its ring. */
static inline struct st_io *fuzz_io(void)
{
	static struct io_uring ring;
	static struct st_io *io;
	if (!io && st_io_create(&(struct st_io_config){ .fsync = false, .on_append = fuzz_on_append }, &ring, &io) < 0)
		abort();
	return io;
}

/*
 * Feed the batches in [p, p + n) to cb as the broker's start-up does.
 * via_log false: walk them in memory, each framed batch handed over whole
 * (CRC unchecked: the decoders check it). via_log true: write them as the
 * one segment of a log in dir and open and read it with the internal logs'
 * configuration. Returns what st_log_read_batches or cb returned, or 0.
 */
static inline int fuzz_replay(const char *dir, const uint8_t *p, size_t n, bool via_log, st_batch_cb cb, void *arg)
{
	if (!via_log) {
		size_t at = 0;
		while (at < n) {
			struct st_batch_hdr h;
			int len = st_batch_parse(p + at, n - at, &h);
			if (len < 0)
				return 0;
			int rc = cb(arg, p + at, (size_t)len, &h);
			if (rc < 0)
				return rc;
			at += (size_t)len;
		}
		return 0;
	}
	char path[FUZZ_PATH_BYTES + 32];
	fuzz_rm_dir(dir);
	fuzz_check(mkdir(dir, 0755) == 0, "cannot make the scratch directory");
	snprintf(path, sizeof(path), "%s/%020d.log", dir, 0);
	fuzz_write_file(path, p, n);
	struct st_log_config lc = { .segment_bytes = 64u << 20, .retention_bytes = -1, .retention_ms = -1,
	                            .index_interval_bytes = 4096, .scan_sealed = true };
	struct st_log *log;
	int rc = st_log_open(fuzz_io(), dir, &lc, &log);
	if (rc == 0) {
		rc = st_log_read_batches(log, cb, arg);
		st_log_close(log);
	} else {
		fuzz_check(rc == -EBADMSG || rc == -ENOMEM, "odd error from st_log_open");
		rc = 0;
	}
	fuzz_rm_dir(dir);
	return rc;
}

#endif
