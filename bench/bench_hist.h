/*
 * bench_hist.h: the benchmark's latency histogram (header-only, bench/ only).
 */
#ifndef SLUICE_BENCH_HIST_H
#define SLUICE_BENCH_HIST_H

#include <assert.h>
#include <stdint.h>

/*
 * Latency histogram, log-linear in microseconds: values below 2*sub are exact,
 * above that each power of two is cut into `sub` equal buckets (1/64 = 1.6 %
 * relative precision). 57 octaves cover 2^63 us, so no value is ever dropped.
 * Locality: main thread.
 */
enum {
	bench_hist_sub_bits = 6,
	bench_hist_sub = 1 << bench_hist_sub_bits,
	bench_hist_exact = 2 * bench_hist_sub,
	bench_hist_octaves = 64 - (bench_hist_sub_bits + 1),
	bench_hist_buckets = bench_hist_exact + bench_hist_octaves * bench_hist_sub,
};

struct bench_hist {
	uint64_t count;
	uint64_t sum_us;
	uint64_t max_us;
	uint64_t bucket[bench_hist_buckets];
};

static inline unsigned bench_hist_index(uint64_t v_us)
{
	if (v_us < bench_hist_exact)
		return (unsigned)v_us;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v_us);
	unsigned shift = msb - bench_hist_sub_bits;
	uint64_t mant = v_us >> shift; /* in [sub, 2*sub) */
	assert(mant >= bench_hist_sub && mant < 2 * bench_hist_sub);
	unsigned idx = bench_hist_exact + (msb - (bench_hist_sub_bits + 1)) * bench_hist_sub +
		       (unsigned)(mant - bench_hist_sub);
	assert(idx < bench_hist_buckets);
	return idx;
}

/* Lowest value that maps to bucket idx; the bucket ends where idx+1 begins. */
static inline uint64_t bench_hist_low(unsigned idx)
{
	assert(idx < bench_hist_buckets);
	if (idx < bench_hist_exact)
		return idx;
	unsigned k = idx - bench_hist_exact;
	unsigned msb = k / bench_hist_sub + bench_hist_sub_bits + 1;
	uint64_t mant = (uint64_t)(k % bench_hist_sub) + bench_hist_sub;
	return mant << (msb - bench_hist_sub_bits);
}

static inline void bench_hist_add(struct bench_hist *h, uint64_t v_us)
{
	h->bucket[bench_hist_index(v_us)]++;
	h->count++;
	h->sum_us += v_us;
	if (v_us > h->max_us)
		h->max_us = v_us;
}

/*
 * Value at quantile q (0 < q <= 1): the midpoint of the bucket holding the
 * ceil(q*count)-th smallest value, clamped to the exact maximum (and equal to
 * it when that rank is the last one).
 */
static inline double bench_hist_quantile_us(const struct bench_hist *h, double q)
{
	assert(q > 0.0 && q <= 1.0);
	if (h->count == 0)
		return 0.0;
	double want = q * (double)h->count;
	uint64_t rank = (uint64_t)want;
	if ((double)rank < want)
		rank++; /* ceil without libm */
	if (rank < 1)
		rank = 1;
	if (rank >= h->count)
		return (double)h->max_us; /* the largest value is known exactly */
	uint64_t seen = 0;
	for (unsigned i = 0; i < bench_hist_buckets; i++) {
		seen += h->bucket[i];
		if (seen < rank)
			continue;
		uint64_t lo = bench_hist_low(i);
		uint64_t hi = i + 1 < bench_hist_buckets ? bench_hist_low(i + 1) - 1 : UINT64_MAX;
		double mid = (double)lo + (double)(hi - lo) / 2.0;
		return mid > (double)h->max_us ? (double)h->max_us : mid;
	}
	assert(!"rank beyond the histogram count");
	return 0.0;
}

#endif
