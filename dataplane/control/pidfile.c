/*
 * pidfile.c - the __producer_ids file's bytes (pidfile.h). Pure.
 * Locality: any thread.
 */
#include <errno.h>
#include <string.h>

#include "crc32c.h"
#include "pidfile.h"

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

void dp_pid_file_encode(uint8_t b[DP_PID_FILE_BYTES], int64_t end)
{
	memcpy(b, "SLPI", 4);
	put_be64(b + 4, (uint64_t)end);
	uint32_t crc = crc32c(0, b, 12);
	b[12] = (uint8_t)(crc >> 24), b[13] = (uint8_t)(crc >> 16), b[14] = (uint8_t)(crc >> 8), b[15] = (uint8_t)crc;
}

int dp_pid_file_decode(const uint8_t *b, size_t n, int64_t *end)
{
	if (n != DP_PID_FILE_BYTES || memcmp(b, "SLPI", 4))
		return -EBADMSG;
	uint32_t crc = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
	if (crc32c(0, b, 12) != crc)
		return -EBADMSG;
	uint64_t v = get_be64(b + 4);
	if (v > (uint64_t)DP_PID_END_MAX)   /* also every negative int64 */
		return -ERANGE;
	*end = (int64_t)v;
	return 0;
}

int64_t dp_pid_next_block(int64_t end)
{
	return end >= 0 && end <= DP_PID_END_MAX - DP_PID_BLOCK ? end + DP_PID_BLOCK : -1;
}
