/*
 * crc_bench.c - sluice-crc-bench: CRC-32C throughput of each implementation
 * in storage/crc32c.c, of ISA-L's crc32_iscsi when the build found libisal,
 * and of a plain read of the same bytes (the memory-bandwidth limit the
 * fastest CRC can approach), over batch-sized buffers.
 *
 *   sluice-crc-bench [--seconds S] [--rounds R] [--pool-mib M] [--sizes a,b,...]
 *
 * For each buffer size (default 64 B .. 1 MiB) and each of two placements:
 *   hot   the same buffer again and again (in L1/L2: a batch the NIC core has
 *         just received and parsed)
 *   cold  consecutive buffers walking a pool of M MiB (default 256, beyond the
 *         last-level cache), so the bytes come from memory
 * every implementation runs for S seconds of this thread's CPU time (default
 * 0.1; CPU time, so that other processes' turns on a busy machine are not
 * counted as this one's) per round, R rounds
 * (default 5), in an order that rotates each round (A B C, B C A, ...) so a
 * busy machine's slow moments fall on all of them; the line shows the median
 * GB/s (10^9 bytes/s), the spread, and the ratio to the single-chain sse42
 * path (what sluice used before the three-chain path), the median of the
 * rounds' own ratios. Buffers start 3 bytes
 * past an 8-byte boundary (hot) or at every alignment in turn (cold), as
 * batches inside a request do. Before timing, every implementation is checked
 * against crc32c_sw() on each size; a mismatch exits 1.
 *
 * Locality: a tool (one thread).
 */
#include <errno.h>
#include <getopt.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "crc32c.h"

#define BENCH_IMPLS_MAX 8
#define BENCH_SIZES_MAX 32
#define BENCH_ROUNDS_MAX 99
#define BENCH_CHUNK_BYTES (32u << 20) /* bytes between clock reads */
#define BENCH_HOT_OFFSET 3

struct bench_impl {
	const char *name;
	crc32c_fn fn; /* NULL for the plain read */
};

/* The thread's CPU time: on a shared machine the wall clock also counts other people's turns. */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * The plain read: xor of every 32-byte word with AVX2 (SSE2 without it), the
 * least a CRC over the same bytes must do. Returns the fold so the loads stay.
 */
__attribute__((target("avx2"))) static uint32_t bench_read_avx2(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	__m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
	while (len >= 64) {
		a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)p));
		b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(p + 32)));
		p += 64;
		len -= 64;
	}
	a = _mm256_xor_si256(a, b);
	uint32_t r = crc ^ (uint32_t)_mm256_extract_epi32(a, 0) ^ (uint32_t)_mm256_extract_epi32(a, 5);
	while (len--)
		r ^= *p++;
	return r;
}

static uint32_t bench_read_sse2(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	__m128i a = _mm_setzero_si128();
	while (len >= 16) {
		a = _mm_xor_si128(a, _mm_loadu_si128((const __m128i *)p));
		p += 16;
		len -= 16;
	}
	uint32_t r = crc ^ (uint32_t)_mm_cvtsi128_si32(a);
	while (len--)
		r ^= *p++;
	return r;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* GB/s of fn over size-byte buffers for about secs seconds. */
static double bench_one(crc32c_fn fn, const uint8_t *pool, size_t pool_bytes, size_t size, int hot, double secs,
                        volatile uint32_t *sink)
{
	size_t per_chunk = BENCH_CHUNK_BYTES / size ? BENCH_CHUNK_BYTES / size : 1;
	size_t off = 0, bytes = 0;
	uint32_t acc = 0;
	unsigned align = 0;
	double t0 = now_s(), t;

	do {
		for (size_t i = 0; i < per_chunk; i++) {
			const uint8_t *p;
			if (hot) {
				p = pool + BENCH_HOT_OFFSET;
			} else {
				if (off + size + 8 > pool_bytes)
					off = 0;
				p = pool + off + (align++ & 7);
				off += (size + 63) & ~(size_t)63;
			}
			acc += fn(acc & 1, p, size);
		}
		bytes += per_chunk * size;
		t = now_s() - t0;
	} while (t < secs);
	*sink += acc;
	return (double)bytes / t / 1e9;
}

static int parse_sizes(const char *s, size_t *sizes)
{
	int n = 0;
	while (*s && n < BENCH_SIZES_MAX) {
		char *end;
		unsigned long v = strtoul(s, &end, 10);
		if (end == s || v == 0)
			return -1;
		if (*end == 'K' || *end == 'k')
			v <<= 10, end++;
		else if (*end == 'M' || *end == 'm')
			v <<= 20, end++;
		sizes[n++] = v;
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		s = end;
	}
	return n;
}

int main(int argc, char **argv)
{
	double secs = 0.1;
	int rounds = 5;
	size_t pool_mib = 256;
	size_t sizes[BENCH_SIZES_MAX] = {64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20};
	int nsizes = 8;
	static const struct option opts[] = {
		{"seconds", required_argument, NULL, 's'}, {"rounds", required_argument, NULL, 'r'},
		{"pool-mib", required_argument, NULL, 'p'}, {"sizes", required_argument, NULL, 'z'},
		{"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
	};
	for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		switch (c) {
		case 's':
			secs = atof(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'p':
			pool_mib = strtoul(optarg, NULL, 10);
			break;
		case 'z':
			nsizes = parse_sizes(optarg, sizes);
			break;
		default:
			fprintf(stderr, "usage: %s [--seconds S] [--rounds R] [--pool-mib M] [--sizes 1K,64K,...]\n", argv[0]);
			return c == 'h' ? 0 : 2;
		}
	}
	if (secs <= 0 || rounds < 1 || rounds > BENCH_ROUNDS_MAX || nsizes < 1 || pool_mib < 4) {
		fprintf(stderr, "crc-bench: bad arguments\n");
		return 2;
	}
	size_t biggest = 0;
	for (int i = 0; i < nsizes; i++)
		biggest = sizes[i] > biggest ? sizes[i] : biggest;
	size_t pool_bytes = pool_mib << 20;
	if (pool_bytes < 4 * biggest + 64)
		pool_bytes = 4 * biggest + 64;
	uint8_t *pool = mmap(NULL, pool_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pool == MAP_FAILED) {
		perror("crc-bench: mmap");
		return 1;
	}
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < pool_bytes; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		pool[i] = (uint8_t)x;
	}

	struct bench_impl impls[BENCH_IMPLS_MAX];
	int nimpls = 0;
	for (int i = 0; i < CRC32C_IMPLS; i++) {
		const char *name;
		crc32c_fn fn = crc32c_impl_get((enum crc32c_impl)i, &name);
		if (fn)
			impls[nimpls++] = (struct bench_impl){name, fn};
		else
			printf("# %s: not in this build or not on this CPU\n", name);
	}
	int read_at = nimpls;
	impls[nimpls++] = (struct bench_impl){"read-only",
	                                      __builtin_cpu_supports("avx2") ? bench_read_avx2 : bench_read_sse2};
	const char *chosen;
	crc32c_impl_get(crc32c_impl_chosen(), &chosen);
	printf("# crc32c() uses %s; %d round(s) of %.2f s per implementation, pool %zu MiB\n", chosen, rounds, secs,
	       pool_bytes >> 20);

	for (int s = 0; s < nsizes; s++)
		for (int i = 0; i < read_at; i++)
			for (unsigned a = 0; a < 8; a++)
				if (impls[i].fn(7, pool + a, sizes[s]) != crc32c_sw(7, pool + a, sizes[s])) {
					fprintf(stderr, "crc-bench: %s differs from crc32c_sw at %zu bytes, offset %u\n",
					        impls[i].name, sizes[s], a);
					return 1;
				}

	int base = -1;
	for (int i = 0; i < nimpls; i++)
		if (!strcmp(impls[i].name, "sse42"))
			base = i;
	volatile uint32_t sink = 0;
	printf("%-8s %-5s %-18s %8s %8s %8s %9s\n", "bytes", "place", "impl", "GB/s", "min", "max", "x_sse42");
	for (int s = 0; s < nsizes; s++)
		for (int hot = 1; hot >= 0; hot--) {
			static double gbs[BENCH_IMPLS_MAX][BENCH_ROUNDS_MAX];
			for (int r = 0; r < rounds; r++)
				for (int j = 0; j < nimpls; j++) {
					int i = (j + r) % nimpls;
					gbs[i][r] = bench_one(impls[i].fn, pool, pool_bytes, sizes[s], hot, secs, &sink);
				}
			/* The ratio is the median of each round's own ratio (the pair ran back to back). */
			double med[BENCH_IMPLS_MAX], ratio[BENCH_IMPLS_MAX][BENCH_ROUNDS_MAX];
			for (int i = 0; i < nimpls; i++)
				for (int r = 0; r < rounds && base >= 0; r++)
					ratio[i][r] = gbs[i][r] / gbs[base][r];
			for (int i = 0; i < nimpls; i++) {
				qsort(gbs[i], (size_t)rounds, sizeof(double), cmp_double);
				med[i] = gbs[i][rounds / 2];
			}
			for (int i = 0; i < nimpls; i++) {
				printf("%-8zu %-5s %-18s %8.2f %8.2f %8.2f", sizes[s], hot ? "hot" : "cold", impls[i].name,
				       med[i], gbs[i][0], gbs[i][rounds - 1]);
				if (base >= 0) {
					qsort(ratio[i], (size_t)rounds, sizeof(double), cmp_double);
					printf(" %9.2f", ratio[i][rounds / 2]);
				}
				printf("\n");
			}
		}
	return 0;
}
