/*
 * crc32c.c - CRC-32C: three interleaved SSE4.2 crc32q chains joined with
 * PCLMULQDQ when the CPU has both, one crc32q chain with SSE4.2 alone,
 * slice-by-8 tables otherwise.
 *
 * Reflected polynomial 0x82F63B78, init 0xFFFFFFFF, final xor 0xFFFFFFFF.
 * Built with ISA-L (Debian's libisal-dev; meson option isal=auto), buffers of
 * CRC32C_ISAL_BYTES_MIN and more go to ISA-L's crc32_iscsi instead.
 *
 * Why three chains: crc32q takes 3 cycles to give its result but the CPU can
 * start one every cycle, so a single chain (each step needs the previous CRC)
 * runs at a third of the instruction's rate: 8 bytes per 3 cycles. Three
 * chains over three consecutive lanes of the buffer keep it busy; their CRCs
 * are then joined (crc32c_shift): the CRC of A||B is the CRC of A carried
 * through |B| zero bytes, xor the CRC of B started from zero, and carrying a
 * CRC through n zero bytes is a multiplication by x^(8n) mod P, one carry-less
 * multiply by a constant from a table plus one crc32q to reduce it.
 * sluice-crc-bench (bench/crc_bench.c) measures each implementation and
 * ISA-L's beside them; bench/RESULTS.md has the figures.
 *
 * Polynomials are held reflected, as the crc32 instruction holds them: bit i
 * of a 32-bit value is the coefficient of x^(31-i), bit i of a 64-bit value
 * that of x^(63-i).
 */
#include "crc32c.h"

#include <string.h>
#ifdef ST_HAVE_ISAL
#include <isa-l/crc.h>
#endif
#if defined(__x86_64__)
#include <nmmintrin.h>
#include <wmmintrin.h>
#endif

#define CRC32C_POLY_REFLECTED 0x82F63B78u

/*
 * Three-chain limits. A lane is a multiple of 8 bytes, at most
 * CRC32C_X3_LANE_BYTES_MAX (the join costs about as much as 8 crc32q steps,
 * under 3 % of a full block of 3 x 2 KiB). Buffers shorter than
 * CRC32C_X3_BYTES_MIN take the single chain: the join and the lane set-up
 * cost more than they save there (sluice-crc-bench's 64..256-byte rows).
 */
#define CRC32C_X3_LANE_BYTES_MAX 2048u
#define CRC32C_X3_LANES 3u
#define CRC32C_X3_BYTES_MIN 128u
#define CRC32C_X3_LANE_STEPS (CRC32C_X3_LANE_BYTES_MAX / 8u)
_Static_assert(CRC32C_X3_BYTES_MIN >= CRC32C_X3_LANES * 8u, "the three-chain path needs one 8-byte step per lane");

/* Slice-by-8 tables, filled once before main() by crc32c_init(); read-only afterwards. */
static uint32_t crc32c_table[8][256];

/*
 * Join constants for a lane of L = 8(i+1) bytes, filled by crc32c_init():
 * x^(8L-33) and x^(16L-33) mod P, which crc32c_shift() turns into carrying a
 * CRC through one lane (L bytes) or two (2L bytes) of zeros. Read-only after
 * start-up; a call touches one entry of each.
 */
static uint32_t crc32c_x3_k1[CRC32C_X3_LANE_STEPS], crc32c_x3_k2[CRC32C_X3_LANE_STEPS];

/*
 * ISA-L's crc32_iscsi (carry-less multiply folding, its version chosen by
 * ISA-L for the CPU) beats the three chains from about CRC32C_ISAL_BYTES_MIN
 * up (sluice-crc-bench on the project's Zen 5 machine: 2x in cache from 4 KiB,
 * 2.5 to 3x from memory, where it reaches the read-only rate); below, its
 * set-up costs more than it saves and the chains stay. It takes an int
 * length: longer buffers go in slices.
 */
#define CRC32C_ISAL_BYTES_MIN 512u
#define CRC32C_ISAL_SLICE_BYTES (1u << 30)

static enum crc32c_impl crc32c_chosen = CRC32C_IMPL_SW;
static int crc32c_have_sse42, crc32c_have_pclmul;

/* v * x^n mod P, one bit at a time (start-up only). */
static uint32_t crc32c_xmul(uint32_t v, unsigned n)
{
	while (n--)
		v = (v & 1) ? (v >> 1) ^ CRC32C_POLY_REFLECTED : v >> 1;
	return v;
}

__attribute__((constructor)) static void crc32c_init(void)
{
	for (uint32_t n = 0; n < 256; n++)
		crc32c_table[0][n] = crc32c_xmul(n, 8);
	for (uint32_t n = 0; n < 256; n++)
		for (int t = 1; t < 8; t++)
			crc32c_table[t][n] = (crc32c_table[t - 1][n] >> 8) ^
			                     crc32c_table[0][crc32c_table[t - 1][n] & 0xff];

	/* x^0 is the top bit; lane i+1 is 64 bits longer than lane i. */
	uint32_t k1 = crc32c_xmul(0x80000000u, 8 * 8 - 33), k2 = crc32c_xmul(0x80000000u, 16 * 8 - 33);
	for (unsigned i = 0; i < CRC32C_X3_LANE_STEPS; i++) {
		crc32c_x3_k1[i] = k1;
		crc32c_x3_k2[i] = k2;
		k1 = crc32c_xmul(k1, 64);
		k2 = crc32c_xmul(k2, 128);
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc32c_have_sse42 = __builtin_cpu_supports("sse4.2");
	crc32c_have_pclmul = __builtin_cpu_supports("pclmul");
#endif
	if (crc32c_have_sse42)
		crc32c_chosen = crc32c_have_pclmul ? CRC32C_IMPL_SSE42X3 : CRC32C_IMPL_SSE42;
#ifdef ST_HAVE_ISAL
	crc32c_chosen = CRC32C_IMPL_ISAL_MIXED;
	/* ISA-L picks its version for the CPU on the first call and stores it in a pointer:
	 * make that call here, before main(), not racing on two cores' first batches. */
	static const unsigned char probe[CRC32C_ISAL_BYTES_MIN];
	(void)crc32_iscsi((unsigned char *)probe, (int)sizeof(probe), 0);
#endif
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t c = ~crc;

	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		w = __builtin_bswap64(w);
#endif
		uint32_t lo = (uint32_t)w ^ c, hi = (uint32_t)(w >> 32);
		c = crc32c_table[7][lo & 0xff] ^ crc32c_table[6][(lo >> 8) & 0xff] ^
		    crc32c_table[5][(lo >> 16) & 0xff] ^ crc32c_table[4][lo >> 24] ^
		    crc32c_table[3][hi & 0xff] ^ crc32c_table[2][(hi >> 8) & 0xff] ^
		    crc32c_table[1][(hi >> 16) & 0xff] ^ crc32c_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = (c >> 8) ^ crc32c_table[0][(c ^ *p++) & 0xff];
	return ~c;
}

#if defined(__x86_64__)
static inline uint64_t crc32c_load64(const uint8_t *p)
{
	uint64_t w;
	memcpy(&w, p, 8);
	return w;
}

/* Steps of 1, 2 and 4 bytes until p is 8-aligned (at most three instructions). */
__attribute__((target("sse4.2"))) static inline uint32_t crc32c_align8(uint32_t c, const uint8_t **pp, size_t *len)
{
	const uint8_t *p = *pp;
	size_t n = (size_t)(-(uintptr_t)p & 7);

	if (n > *len)
		n = *len;
	if (n & 1) {
		c = _mm_crc32_u8(c, *p);
		p += 1;
	}
	if (n & 2) {
		uint16_t h;
		memcpy(&h, p, 2);
		c = _mm_crc32_u16(c, h);
		p += 2;
	}
	if (n & 4) {
		uint32_t w;
		memcpy(&w, p, 4);
		c = _mm_crc32_u32(c, w);
		p += 4;
	}
	*pp = p;
	*len -= n;
	return c;
}

/* The single chain over len bytes from p, state c (no inversions). */
__attribute__((target("sse4.2"))) static inline uint32_t crc32c_chain(uint32_t c, const uint8_t *p, size_t len)
{
	uint64_t c64 = c;

	while (len >= 32) {
		c64 = _mm_crc32_u64(c64, crc32c_load64(p));
		c64 = _mm_crc32_u64(c64, crc32c_load64(p + 8));
		c64 = _mm_crc32_u64(c64, crc32c_load64(p + 16));
		c64 = _mm_crc32_u64(c64, crc32c_load64(p + 24));
		p += 32;
		len -= 32;
	}
	while (len >= 8) {
		c64 = _mm_crc32_u64(c64, crc32c_load64(p));
		p += 8;
		len -= 8;
	}
	c = (uint32_t)c64;
	if (len & 4) {
		uint32_t w;
		memcpy(&w, p, 4);
		c = _mm_crc32_u32(c, w);
		p += 4;
	}
	if (len & 2) {
		uint16_t h;
		memcpy(&h, p, 2);
		c = _mm_crc32_u16(c, h);
		p += 2;
	}
	if (len & 1)
		c = _mm_crc32_u8(c, *p);
	return c;
}

/* The single chain as sluice had it before the three-chain path (the bench's baseline). */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t c = ~crc;

	/* Byte steps until 8-aligned so the 8-byte loads below never straddle a line needlessly. */
	while (len && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		len--;
	}
	while (len >= 32) {
		c = _mm_crc32_u64(c, crc32c_load64(p));
		c = _mm_crc32_u64(c, crc32c_load64(p + 8));
		c = _mm_crc32_u64(c, crc32c_load64(p + 16));
		c = _mm_crc32_u64(c, crc32c_load64(p + 24));
		p += 32;
		len -= 32;
	}
	while (len >= 8) {
		c = _mm_crc32_u64(c, crc32c_load64(p));
		p += 8;
		len -= 8;
	}
	while (len--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return ~(uint32_t)c;
}

/*
 * c * x^(8n) mod P, given k = x^(8n-33) mod P: the carry-less product of two
 * reflected 32-bit values is c*k*x as a reflected 64-bit value (bit 63, the
 * x^0 term, stays clear), and crc32q of that from a zero state multiplies it
 * by x^32 and reduces: c*k*x^33.
 */
__attribute__((target("sse4.2,pclmul"))) static inline uint32_t crc32c_shift(uint32_t c, uint32_t k)
{
	__m128i m = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)c), _mm_cvtsi32_si128((int)k), 0x00);
	return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(m));
}

__attribute__((target("sse4.2,pclmul"))) static uint32_t crc32c_sse42x3(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t c = ~crc;

	c = crc32c_align8(c, &p, &len);
	if (len < CRC32C_X3_BYTES_MIN)
		return ~crc32c_chain(c, p, len);
	/* Blocks of three lanes: as long as the buffer allows, then one shorter block for the rest. */
	while (len >= CRC32C_X3_LANES * 8u) {
		size_t lane = len / (CRC32C_X3_LANES * 8u) * 8u;
		if (lane > CRC32C_X3_LANE_BYTES_MAX)
			lane = CRC32C_X3_LANE_BYTES_MAX;
		const uint8_t *pb = p + lane, *pc = p + 2 * lane;
		uint64_t a = c, b = 0, d = 0;
		for (size_t i = 0; i < lane; i += 8) {
			a = _mm_crc32_u64(a, crc32c_load64(p + i));
			b = _mm_crc32_u64(b, crc32c_load64(pb + i));
			d = _mm_crc32_u64(d, crc32c_load64(pc + i));
		}
		size_t k = lane / 8u - 1;
		c = crc32c_shift((uint32_t)a, crc32c_x3_k2[k]) ^ crc32c_shift((uint32_t)b, crc32c_x3_k1[k]) ^ (uint32_t)d;
		p += CRC32C_X3_LANES * lane;
		len -= CRC32C_X3_LANES * lane;
	}
	return ~crc32c_chain(c, p, len);
}
#endif

#ifdef ST_HAVE_ISAL
/* ISA-L keeps the register as given (no inversions): invert on the way in and out. */
static uint32_t crc32c_isal(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint32_t c = ~crc;

	while (len) {
		size_t n = len < CRC32C_ISAL_SLICE_BYTES ? len : CRC32C_ISAL_SLICE_BYTES;
		c = crc32_iscsi((unsigned char *)p, (int)n, c); /* reads only; the prototype lacks const */
		p += n;
		len -= n;
	}
	return ~c;
}

/* ISA-L for long buffers, the three chains (or one) for short ones. */
static uint32_t crc32c_isal_mixed(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
	if (len < CRC32C_ISAL_BYTES_MIN && crc32c_have_sse42)
		return crc32c_have_pclmul ? crc32c_sse42x3(crc, buf, len) : crc32c_sse42(crc, buf, len);
#endif
	return crc32c_isal(crc, buf, len);
}
#endif

crc32c_fn crc32c_impl_get(enum crc32c_impl impl, const char **name)
{
	static const char *const names[CRC32C_IMPLS] = {
		[CRC32C_IMPL_SW] = "sw-slice8",
		[CRC32C_IMPL_SSE42] = "sse42",
		[CRC32C_IMPL_SSE42X3] = "sse42x3-pclmul",
		[CRC32C_IMPL_ISAL] = "isal",
		[CRC32C_IMPL_ISAL_MIXED] = "isal-mixed",
	};
	if (name)
		*name = (unsigned)impl < CRC32C_IMPLS ? names[impl] : "?";
	switch (impl) {
	case CRC32C_IMPL_SW:
		return crc32c_sw;
#if defined(__x86_64__)
	case CRC32C_IMPL_SSE42:
		return crc32c_have_sse42 ? crc32c_sse42 : NULL;
	case CRC32C_IMPL_SSE42X3:
		return crc32c_have_sse42 && crc32c_have_pclmul ? crc32c_sse42x3 : NULL;
#endif
#ifdef ST_HAVE_ISAL
	case CRC32C_IMPL_ISAL:
		return crc32c_isal;
	case CRC32C_IMPL_ISAL_MIXED:
		return crc32c_isal_mixed;
#endif
	default:
		return NULL;
	}
}

enum crc32c_impl crc32c_impl_chosen(void)
{
	return crc32c_chosen;
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
#ifdef ST_HAVE_ISAL
	return crc32c_isal_mixed(crc, buf, len);
#endif
#if defined(__x86_64__)
	if (crc32c_chosen == CRC32C_IMPL_SSE42X3)
		return crc32c_sse42x3(crc, buf, len);
	if (crc32c_chosen == CRC32C_IMPL_SSE42)
		return crc32c_sse42(crc, buf, len);
#endif
	return crc32c_sw(crc, buf, len);
}
