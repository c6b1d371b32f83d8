/*
 * fuzz_segindex_seeds.c - writes the seed inputs of fuzz_segindex: a sealed
 * segment of well-formed batches and the offset index that st_log_open
 * itself writes for it (the index is the log's own encoding, storage/log.c
 * index_write), at several index intervals, in both modes (CRC kept, fixed).
 *
 *   fuzz_segindex_seeds DIR
 * Locality: a standalone process.
 */
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
#include "log.h"
#include "ut_batch.h"

#define SEED_BATCHES_MAX 24
#define SEED_BATCH_BYTES 512

static uint8_t seg[SEED_BATCHES_MAX * SEED_BATCH_BYTES], idx[65536], out[1 + 2 + sizeof(idx) + sizeof(seg)];

static void on_append(void *cookie, int status, int64_t base) { (void)cookie; (void)status; (void)base; }

static void die(const char *what)
{
	fprintf(stderr, "fuzz_segindex_seeds: %s\n", what);
	exit(1);
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n))
		die(path);
	close(fd);
}

static void one(struct st_io *io, const char *outdir, int batches, uint32_t interval)
{
	char dir[] = "/tmp/fuzz_segindex_seeds.XXXXXX", path[512];
	size_t n = 0;
	int64_t next = 0;
	if (!mkdtemp(dir))
		die("mkdtemp");
	for (int i = 0; i < batches; i++) {
		int recs = 1 + i % 4;
		uint32_t len = ut_batch(seg + n, SEED_BATCH_BYTES,
		                        &(struct ut_batch_spec){ .records = recs, .first_ts = 1000 + 10 * i,
		                                                 .value_len = 20 + 3 * (uint32_t)(i % 8) });
		st_batch_set_base_offset(seg + n, next);
		next += recs;
		n += len;
	}
	snprintf(path, sizeof(path), "%s/%020d.log", dir, 0);
	write_file(path, seg, n);
	snprintf(path, sizeof(path), "%s/%020" PRId64 ".log", dir, next);
	write_file(path, NULL, 0);
	struct st_log_config cfg = { .segment_bytes = 1u << 20, .retention_bytes = -1, .retention_ms = -1,
	                             .index_interval_bytes = interval };
	struct st_log *log;
	if (st_log_open(io, dir, &cfg, &log) != 0)
		die("st_log_open");
	st_log_close(log);
	snprintf(path, sizeof(path), "%s/%020d.index", dir, 0);
	FILE *f = fopen(path, "rb");
	size_t ilen = f ? fread(idx, 1, sizeof(idx), f) : 0;
	if (!f || ilen < 48)
		die("no index written");
	fclose(f);
	unlink(path);
	snprintf(path, sizeof(path), "%s/%020d.log", dir, 0);
	unlink(path);
	snprintf(path, sizeof(path), "%s/%020" PRId64 ".log", dir, next);
	unlink(path);
	rmdir(dir);
	st_put_be16(out + 1, (uint16_t)ilen);
	memcpy(out + 3, idx, ilen);
	memcpy(out + 3 + ilen, seg, n);
	for (uint8_t mode = 0; mode < 2; mode++) {
		out[0] = mode;
		snprintf(path, sizeof(path), "%s/seg-%d-%u-%u", outdir, batches, interval, mode);
		write_file(path, out, 3 + ilen + n);
	}
}

int main(int argc, char **argv)
{
	static struct io_uring ring; /* never used: open and close submit nothing */
	struct st_io *io;
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_segindex_seeds DIR\n");
		return 2;
	}
	if (st_io_create(&(struct st_io_config){ .fsync = false, .on_append = on_append }, &ring, &io) < 0)
		die("st_io_create");
	one(io, argv[1], 1, 256);
	one(io, argv[1], 12, 256);
	one(io, argv[1], 12, 64);
	one(io, argv[1], SEED_BATCHES_MAX, 1);
	return 0;
}
