/*
 * codec_bench.c - sluice-codec-bench: what the produce-time records check
 * (storage/codec.c) costs the NIC core per batch, per codec, beside the
 * CRC32C check that was already paid for every batch. sluice-bench never
 * compresses, so this times st_codec_check_batch itself on batches shaped
 * like the clients' (record values of random letters, as Kafka's own
 * producer tool writes; librdkafka's default codec settings).
 *
 *   sluice-codec-bench [SECONDS_PER_CASE]      (default 0.5)
 *
 * Prints one line per (shape, codec): compressed bytes, microseconds per
 * batch for the CRC and for the records check, and the check's rate in
 * uncompressed MB/s. Locality: a tool (one thread).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "batch.h"
#include "codec.h"
#include "crc32c.h"

#define BENCH_BATCH_BYTES_MAX (4u << 20)

static uint8_t plain[BENCH_BATCH_BYTES_MAX], packed[2 * BENCH_BATCH_BYTES_MAX], batch[2 * BENCH_BATCH_BYTES_MAX];

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* n records of size-byte letter values and 8-byte keys, as sluice-bench lays them out. */
static size_t records(int n, int size)
{
	uint64_t x = 88172645463325252ull;
	size_t o = 0;
	for (int i = 0; i < n; i++) {
		uint8_t hdr[32];
		size_t h = 0;
		hdr[h++] = 0;
		h += (size_t)st_varint_put(hdr + h, 0);
		h += (size_t)st_varint_put(hdr + h, i);
		h += (size_t)st_varint_put(hdr + h, 8);
		int64_t body = (int64_t)h + 8 + st_varint_put(hdr + h, size) + size + 1;
		o += (size_t)st_varint_put(plain + o, body);
		memcpy(plain + o, hdr, h);
		o += h;
		for (int d = 7, v = i; d >= 0; d--, v /= 10)   /* key: i in 8 decimal digits */
			plain[o + (size_t)d] = (uint8_t)('0' + v % 10);
		o += 8;
		o += (size_t)st_varint_put(plain + o, size);
		for (int k = 0; k < size; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			plain[o++] = (uint8_t)('A' + x % 26);
		}
		plain[o++] = 0;
	}
	return o;
}

static size_t pack(int codec, size_t n)
{
	size_t c = sizeof(packed);
	switch (codec) {
	case 0:
		memcpy(packed, plain, n);
		return n;
	case 1: {
		z_stream s = { 0 };
		if (deflateInit2(&s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			exit(1);
		s.next_in = plain, s.avail_in = (uInt)n, s.next_out = packed, s.avail_out = (uInt)c;
		if (deflate(&s, Z_FINISH) != Z_STREAM_END)
			exit(1);
		c = s.total_out;
		deflateEnd(&s);
		return c;
	}
	case 2:
		if (snappy_compress((const char *)plain, n, (char *)packed, &c) != SNAPPY_OK)
			exit(1);
		return c;
	case 3: {
		LZ4F_preferences_t prefs = { .frameInfo = { .blockMode = LZ4F_blockIndependent } };
		c = LZ4F_compressFrame(packed, c, plain, n, &prefs);
		if (LZ4F_isError(c))
			exit(1);
		return c;
	}
	default:
		c = ZSTD_compress(packed, c, plain, n, 3);
		if (ZSTD_isError(c))
			exit(1);
		return c;
	}
}

static size_t mk_batch(int codec, int count, size_t rlen)
{
	size_t total = ST_BATCH_HEADER_BYTES + rlen;
	memset(batch, 0, ST_BATCH_HEADER_BYTES);
	st_put_be32(batch + ST_BATCH_OFF_LENGTH, (uint32_t)(total - 12));
	batch[ST_BATCH_OFF_MAGIC] = 2;
	st_put_be16(batch + ST_BATCH_OFF_ATTRIBUTES, (uint16_t)codec);
	st_put_be32(batch + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(count - 1));
	st_put_be64(batch + ST_BATCH_OFF_PRODUCER_ID, UINT64_MAX);
	st_put_be32(batch + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)count);
	memcpy(batch + ST_BATCH_HEADER_BYTES, packed, rlen);
	st_put_be32(batch + ST_BATCH_OFF_CRC, crc32c(0, batch + ST_BATCH_OFF_ATTRIBUTES, total - ST_BATCH_OFF_ATTRIBUTES));
	return total;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 0.5;
	static const struct { int records, size; const char *what; } shapes[] = {
		{ 16, 1000, "16 x 1000 B (Java's 16 KiB batch.size)" },
		{ 1000, 1000, "1000 x 1000 B (librdkafka's 1 MB batch.size)" },
		{ 10000, 100, "10000 x 100 B (small records, 1.2 MB)" },
	};
	struct st_codec *z;
	if (st_codec_create(&z) < 0)
		return 1;
	printf("%-46s %-6s %9s %9s %10s %10s %11s\n", "shape", "codec", "records", "sent", "crc_us", "check_us",
	       "check_MB/s");
	for (unsigned s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		size_t n = records(shapes[s].records, shapes[s].size);
		for (int codec = 0; codec <= 4; codec++) {
			size_t total = mk_batch(codec, shapes[s].records, pack(codec, n));
			struct st_batch_hdr h;
			if (st_batch_parse(batch, total, &h) != (int)total)
				return 1;
			/* The CRC the broker already checked on every batch, for scale. */
			long iters = 0;
			double t0 = now_s(), t;
			do {
				for (int i = 0; i < 16; i++)
					if (!st_batch_crc_ok(batch, total))
						return 1;
				iters += 16;
			} while ((t = now_s() - t0) < secs);
			double crc_us = t / (double)iters * 1e6;
			iters = 0;
			t0 = now_s();
			do {
				for (int i = 0; i < 4; i++)
					if (st_codec_check_batch(z, batch, total, &h, ST_BATCH_DECOMPRESSED_BYTES_MAX) != 0) {
						fprintf(stderr, "codec %d: a valid batch failed the check\n", codec);
						return 1;
					}
				iters += 4;
			} while ((t = now_s() - t0) < secs);
			double check_us = t / (double)iters * 1e6;
			printf("%-46s %-6s %9d %9zu %10.1f %10.1f %11.0f\n", shapes[s].what, st_batch_codec_name((int16_t)codec),
			       shapes[s].records, total, crc_us, check_us, (double)n / check_us);
		}
	}
	st_codec_destroy(z);
	return 0;
}
