/*
 * sluice-dump - print the batches (and optionally records) of partition logs.
 *
 *   sluice-dump [--records] [--from OFFSET] PARTITION_DIR...
 *
 * Read-only: it never truncates or repairs (st_log_open does that). It reads
 * every "<20 digits>.log" in each directory in offset order and prints one
 * line per batch. Bytes where no batch parses are reported as DAMAGED up to
 * the next position where a whole batch with a good CRC starts (as the
 * broker's recovery sets them aside), and the dump goes on there; when no
 * valid batch follows, they are reported as a torn or bad tail.
 * Exit status: 0 all batches good, 1 something bad was found, 2 usage/IO.
 * Locality: a standalone process.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"

#define DUMP_SEGMENTS_MAX 1000000  /* per directory */
#define DUMP_BYTES_SHOWN_MAX 64    /* key/value bytes printed before "..." */
#define DUMP_SEG_NAME_DIGITS 20

/* Options. Locality: the process. */
struct dump_opts {
	bool records;
	int64_t from;
};

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool is_segment_name(const char *s)
{
	if (strlen(s) != DUMP_SEG_NAME_DIGITS + 4 || strcmp(s + DUMP_SEG_NAME_DIGITS, ".log"))
		return false;
	for (int i = 0; i < DUMP_SEG_NAME_DIGITS; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* Key or value: null, "printable text", or hex; long ones are cut. */
static void print_bytes(const char *label, const uint8_t *p, int32_t len)
{
	int32_t shown = len > DUMP_BYTES_SHOWN_MAX ? DUMP_BYTES_SHOWN_MAX : len;
	bool text = true;

	printf(" %s ", label);
	if (!p) {
		printf("null");
		return;
	}
	for (int32_t i = 0; i < shown && text; i++)
		text = p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\';
	if (text) {
		printf("\"%.*s\"", (int)shown, (const char *)p);
	} else {
		printf("0x");
		for (int32_t i = 0; i < shown; i++)
			printf("%02x", p[i]);
	}
	if (shown < len)
		printf("...(%d bytes)", (int)len);
}

/* COMMIT/ABORT marker of a control batch (key: version, type; value: version, coordinator epoch). */
static void print_control(const uint8_t *b, size_t len, const struct st_batch_hdr *h)
{
	struct st_record_iter it;
	struct st_record r;

	if (st_record_iter_init(&it, b, len, h) < 0 || st_record_next(&it, &r) != 1 || r.key_len < 4) {
		printf(" control(malformed)");
		return;
	}
	int type = (int16_t)st_be16(r.key + 2);
	printf(" %s", type == 0 ? "ABORT" : type == 1 ? "COMMIT" : "control");
	if (type > 1)
		printf("(type %d)", type);
	if (r.value && r.value_len >= 6)
		printf(" coordinator_epoch %" PRId32, (int32_t)st_be32(r.value + 2));
}

static bool print_records(const uint8_t *b, size_t len, const struct st_batch_hdr *h)
{
	struct st_record_iter it;
	struct st_record r;
	int rc;

	if (h->attributes & ST_BATCH_ATTR_COMPRESSION) {
		printf("    compressed (%s), %" PRId32 " records\n", st_batch_codec_name(h->attributes), h->records_count);
		return true;
	}
	st_record_iter_init(&it, b, len, h);
	while ((rc = st_record_next(&it, &r)) == 1) {
		printf("    offset %" PRId64 " ts %" PRId64, h->base_offset + r.offset_delta,
		       h->first_timestamp + r.timestamp_delta);
		print_bytes("key", r.key, r.key_len);
		print_bytes("value", r.value, r.value_len);
		printf(" headers %" PRIu32 "\n", r.headers_count);
	}
	if (rc < 0)
		printf("    malformed record\n");
	return rc == 0;
}

/* The first position after `from` where a whole batch with a good CRC starts, or size. */
static size_t dump_resync(const uint8_t *m, size_t size, size_t from)
{
	for (size_t q = from; q + ST_BATCH_HEADER_BYTES <= size; q++) {
		struct st_batch_hdr h;
		if (m[q + ST_BATCH_OFF_MAGIC] != ST_BATCH_MAGIC)
			continue; /* the cheap rejection first */
		int total = st_batch_parse(m + q, size - q, &h);
		if (total > 0 && st_batch_crc_ok(m + q, (size_t)total))
			return q;
	}
	return size;
}

/* Dump one segment file; returns true if every batch was good. */
static bool dump_segment(const char *path, const struct dump_opts *o)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	bool good = true;

	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "sluice-dump: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return false;
	}
	size_t size = (size_t)st.st_size;
	printf("segment %s size %zu\n", path, size);
	if (size == 0) {
		close(fd);
		return true;
	}
	const uint8_t *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		fprintf(stderr, "sluice-dump: %s: mmap: %s\n", path, strerror(errno));
		return false;
	}
	for (size_t pos = 0; pos < size;) {
		struct st_batch_hdr h;
		int total = st_batch_parse(m + pos, size - pos, &h);
		size_t q = total < 0 ? dump_resync(m, size, pos + 1) : size;
		if (q < size) {
			printf("  DAMAGED bytes [%zu, %zu) (%s): no batch there; next valid batch at position %zu\n", pos, q,
			       total == -EAGAIN ? "length runs past the file end" :
			       total == -EPROTO ? "magic is not 2" : "inconsistent length or fields", q);
			good = false;
			pos = q;
			continue;
		}
		if (total == -EAGAIN) {
			printf("  TORN at position %zu: %zu trailing byte(s) are not a whole batch\n", pos, size - pos);
			good = false;
			break;
		}
		if (total < 0) {
			printf("  BAD batch header at position %zu (%s)\n", pos,
			       total == -EPROTO ? "magic is not 2" : "inconsistent length or fields");
			good = false;
			break;
		}
		bool crc_ok = st_batch_crc_ok(m + pos, (size_t)total);
		good &= crc_ok;
		if (h.base_offset + h.last_offset_delta >= o->from) {
			printf("  offset %" PRId64 "..%" PRId64 " pos %zu size %d pid %" PRId64 " epoch %d seq %" PRId32,
			       h.base_offset, h.base_offset + h.last_offset_delta, pos, total, h.producer_id,
			       h.producer_epoch, h.base_sequence);
			printf(" codec %s%s%s records %" PRId32 " first_ts %" PRId64 " max_ts %" PRId64 " crc %s",
			       st_batch_codec_name(h.attributes),
			       (h.attributes & ST_BATCH_ATTR_TRANSACTIONAL) ? " transactional" : "",
			       (h.attributes & ST_BATCH_ATTR_CONTROL) ? " control" : "", h.records_count,
			       h.first_timestamp, h.max_timestamp, crc_ok ? "ok" : "BAD");
			if ((h.attributes & ST_BATCH_ATTR_CONTROL) && crc_ok &&
			    !(h.attributes & ST_BATCH_ATTR_COMPRESSION))
				print_control(m + pos, (size_t)total, &h);
			printf("\n");
			if (o->records && crc_ok)
				good &= print_records(m + pos, (size_t)total, &h);
		}
		pos += (size_t)total;
	}
	munmap((void *)m, size);
	return good;
}

static bool dump_dir(const char *dir, const struct dump_opts *o)
{
	DIR *d = opendir(dir);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	bool good = true;

	if (!d) {
		fprintf(stderr, "sluice-dump: %s: %s\n", dir, strerror(errno));
		return false;
	}
	while ((de = readdir(d)) && n < DUMP_SEGMENTS_MAX) {
		if (!is_segment_name(de->d_name))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			char **nn = realloc(names, cap * sizeof(*nn));
			if (!nn)
				break;
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(d);
	if (n > 1)
		qsort(names, n, sizeof(*names), cmp_name); /* fixed-width digits: name order is offset order */
	printf("partition %s: %zu segment(s)\n", dir, n);
	for (size_t i = 0; i < n; i++) {
		/* Skip segments wholly before --from: the next one starts at or below it. */
		bool skip = i + 1 < n && strtoll(names[i + 1], NULL, 10) <= o->from;
		if (!skip) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
			good &= dump_segment(path, o);
		}
		free(names[i]);
	}
	free(names);
	return good;
}

static void usage(void)
{
	fprintf(stderr, "usage: sluice-dump [--records] [--from OFFSET] PARTITION_DIR...\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "records", no_argument, NULL, 'r' },
		{ "from", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct dump_opts o = { .records = false, .from = 0 };
	bool good = true;
	int c;

	while ((c = getopt_long(argc, argv, "rf:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			o.records = true;
			break;
		case 'f': {
			char *end;
			errno = 0;
			o.from = strtoll(optarg, &end, 10);
			if (errno || *end || o.from < 0) {
				usage();
				return 2;
			}
			break;
		}
		default:
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind >= argc) {
		usage();
		return 2;
	}
	for (int i = optind; i < argc; i++)
		good &= dump_dir(argv[i], &o);
	return good ? 0 : 1;
}
