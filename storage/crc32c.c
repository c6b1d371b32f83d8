/*
 * crc32c.c - CRC-32C: SSE4.2 instruction when present, slice-by-8 tables otherwise.
 *
 * Reflected polynomial 0x82F63B78, init 0xFFFFFFFF, final xor 0xFFFFFFFF.
 */
#include "crc32c.h"

#include <string.h>
#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#define CRC32C_POLY_REFLECTED 0x82F63B78u

/* Slice-by-8 tables, filled once before main() by crc32c_init(); read-only afterwards. */
static uint32_t crc32c_table[8][256];
static int crc32c_have_hw;

__attribute__((constructor)) static void crc32c_init(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY_REFLECTED : c >> 1;
		crc32c_table[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++)
		for (int t = 1; t < 8; t++)
			crc32c_table[t][n] = (crc32c_table[t - 1][n] >> 8) ^
			                     crc32c_table[0][crc32c_table[t - 1][n] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc32c_have_hw = __builtin_cpu_supports("sse4.2");
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
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t c = ~crc;

	/* Byte steps until 8-aligned so the 8-byte loads below never straddle a line needlessly. */
	while (len && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		len--;
	}
	while (len >= 32) {
		uint64_t w[4];
		memcpy(w, p, 32);
		c = _mm_crc32_u64(c, w[0]);
		c = _mm_crc32_u64(c, w[1]);
		c = _mm_crc32_u64(c, w[2]);
		c = _mm_crc32_u64(c, w[3]);
		p += 32;
		len -= 32;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return ~(uint32_t)c;
}
#endif

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
	if (crc32c_have_hw)
		return crc32c_hw(crc, buf, len);
#endif
	return crc32c_sw(crc, buf, len);
}
