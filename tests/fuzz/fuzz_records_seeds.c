/* fuzz_records_seeds.c: writes the seed corpus of fuzz_records into DIR: for
 * each codec (and both snappy framings), a valid records section of 1, 3 and
 * 40 records in fuzz_records's input format (codec byte, count BE16, section).
 * Locality: a tool, run once per fuzzing session. */
#include "batch.h"

#include <lz4frame.h>
#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#define SEED_BYTES_MAX (64u << 10)

static uint8_t plain[SEED_BYTES_MAX], packed[2 * SEED_BYTES_MAX], out[2 * SEED_BYTES_MAX + 3];

/* n records with keys "k<i>", values of i bytes and, every third, one header. */
static size_t records(int n)
{
	size_t o = 0;
	for (int i = 0; i < n; i++) {
		uint8_t body[256];
		size_t b = 0;
		body[b++] = 0;
		b += (size_t)st_varint_put(body + b, i * 3);
		b += (size_t)st_varint_put(body + b, i);
		int kl = snprintf((char *)body + b + 1, 16, "k%d", i);
		b += (size_t)st_varint_put(body + b, kl) + (size_t)kl;
		b += (size_t)st_varint_put(body + b, i);
		memset(body + b, 'a' + i % 26, (size_t)i);
		b += (size_t)i;
		b += (size_t)st_varint_put(body + b, i % 3 == 0);
		if (i % 3 == 0) {
			b += (size_t)st_varint_put(body + b, 1);
			body[b++] = 'h';
			b += (size_t)st_varint_put(body + b, -1);
		}
		o += (size_t)st_varint_put(plain + o, (int64_t)b);
		memcpy(plain + o, body, b);
		o += b;
	}
	return o;
}

static void put(const char *dir, const char *name, int n, int codec, const uint8_t *p, size_t len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s-%d", dir, name, n);
	out[0] = (uint8_t)codec;
	st_put_be16(out + 1, (uint16_t)n);
	memcpy(out + 3, p, len);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(out, 1, len + 3, f) != len + 3 || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_records_seeds DIR\n");
		return 2;
	}
	static const int counts[] = { 1, 3, 40 };
	for (unsigned k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		int n = counts[k];
		size_t len = records(n), c;
		put(argv[1], "none", n, 0, plain, len);

		uLongf gz = sizeof(packed);
		z_stream s = { 0 };
		if (deflateInit2(&s, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			return 1;
		s.next_in = plain, s.avail_in = (uInt)len, s.next_out = packed, s.avail_out = (uInt)gz;
		if (deflate(&s, Z_FINISH) != Z_STREAM_END)
			return 1;
		put(argv[1], "gzip", n, 1, packed, s.total_out);
		deflateEnd(&s);

		c = sizeof(packed);
		if (snappy_compress((const char *)plain, len, (char *)packed, &c) != SNAPPY_OK)
			return 1;
		put(argv[1], "snappy-raw", n, 2, packed, c);
		static const uint8_t xerial[16] = { 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1 };
		memmove(packed + 20, packed, c);
		memcpy(packed, xerial, 16);
		st_put_be32(packed + 16, (uint32_t)c);
		put(argv[1], "snappy-xerial", n, 2, packed, c + 20);

		LZ4F_preferences_t prefs = { .frameInfo = { .contentChecksumFlag = LZ4F_contentChecksumEnabled } };
		c = LZ4F_compressFrame(packed, sizeof(packed), plain, len, &prefs);
		if (LZ4F_isError(c))
			return 1;
		put(argv[1], "lz4", n, 3, packed, c);

		c = ZSTD_compress(packed, sizeof(packed), plain, len, 3);
		if (ZSTD_isError(c))
			return 1;
		put(argv[1], "zstd", n, 4, packed, c);
	}
	return 0;
}
