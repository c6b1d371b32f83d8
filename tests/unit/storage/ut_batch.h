/*
 * ut_batch.h - test helpers: encode valid RecordBatch v2 bytes, temp dirs.
 *
 * Locality: test thread only.
 */
#ifndef SLUICE_UT_BATCH_H
#define SLUICE_UT_BATCH_H

#include <assert.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "crc32c.h"

/* test-vectors/05_record_batch_v2_transactional.hex (CRC32C 0x8e6582a3). */
static const char vec05[] =
	"0000  00 00 00 00 00 00 00 00 00 00 00 54 ff ff ff ff\n"
	"0010  02 8e 65 82 a3 00 10 00 00 00 02 00 00 01 8b cf\n"
	"0020  e5 68 00 00 00 01 8b cf e5 68 09 00 00 00 00 00\n"
	"0030  00 0f a0 00 00 00 00 00 00 00 00 00 03 14 00 00\n"
	"0040  00 04 6b 30 04 76 30 00 1c 00 0a 02 04 6b 31 04\n"
	"0050  76 31 02 02 68 02 78 10 00 12 04 01 04 76 32 00\n";
/* test-vectors/06_control_batch_commit.hex (CRC32C 0xa2ccea22). */
static const char vec06[] =
	"0000  00 00 00 00 00 00 00 03 00 00 00 42 ff ff ff ff\n"
	"0010  02 a2 cc ea 22 00 30 00 00 00 00 00 00 01 8b cf\n"
	"0020  e5 68 14 00 00 01 8b cf e5 68 14 00 00 00 00 00\n"
	"0030  00 0f a0 00 00 ff ff ff ff 00 00 00 01 20 00 00\n"
	"0040  00 08 00 00 00 01 0c 00 00 00 00 00 00 00\n";

/* What a test batch holds; zero fields take the defaults noted. */
struct ut_batch_spec {
	int records;          /* >= 1 */
	int64_t first_ts;     /* record i has timestamp first_ts + i */
	uint32_t value_len;   /* bytes of value per record ('a' + record index) */
	int16_t attributes;
	int64_t producer_id;  /* 0 means -1 (none) */
	int32_t base_sequence;
};

/* Encode the batch into buf (cap bytes); returns its total size. */
static inline uint32_t ut_batch(uint8_t *buf, size_t cap, const struct ut_batch_spec *s)
{
	uint8_t *p = buf + ST_BATCH_HEADER_BYTES;
	int64_t pid = s->producer_id ? s->producer_id : -1;

	for (int i = 0; i < s->records; i++) {
		uint8_t body[64];
		int n = 0;
		char key[16];
		int klen = snprintf(key, sizeof(key), "k%d", i);
		body[n++] = 0; /* attributes */
		n += st_varint_put(body + n, i); /* timestampDelta */
		n += st_varint_put(body + n, i); /* offsetDelta */
		n += st_varint_put(body + n, klen);
		memcpy(body + n, key, (size_t)klen);
		n += klen;
		n += st_varint_put(body + n, s->value_len);
		uint32_t after = 1; /* headers count */
		size_t rec_len = (size_t)n + s->value_len + after;
		assert((size_t)(p - buf) + 10 + rec_len <= cap);
		p += st_varint_put(p, (int64_t)rec_len);
		memcpy(p, body, (size_t)n);
		p += n;
		memset(p, 'a' + (i % 26), s->value_len);
		p += s->value_len;
		p += st_varint_put(p, 0); /* no headers */
	}
	uint32_t total = (uint32_t)(p - buf);
	st_put_be64(buf + ST_BATCH_OFF_BASE_OFFSET, 0);
	st_put_be32(buf + ST_BATCH_OFF_LENGTH, total - 12);
	st_put_be32(buf + ST_BATCH_OFF_LEADER_EPOCH, 0);
	buf[ST_BATCH_OFF_MAGIC] = 2;
	st_put_be16(buf + ST_BATCH_OFF_ATTRIBUTES, (uint16_t)s->attributes);
	st_put_be32(buf + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(s->records - 1));
	st_put_be64(buf + ST_BATCH_OFF_FIRST_TIMESTAMP, (uint64_t)s->first_ts);
	st_put_be64(buf + ST_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)(s->first_ts + s->records - 1));
	st_put_be64(buf + ST_BATCH_OFF_PRODUCER_ID, (uint64_t)pid);
	st_put_be16(buf + ST_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)(pid < 0 ? -1 : 0));
	st_put_be32(buf + ST_BATCH_OFF_BASE_SEQUENCE, (uint32_t)(pid < 0 ? -1 : s->base_sequence));
	st_put_be32(buf + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)s->records);
	st_put_be32(buf + ST_BATCH_OFF_CRC, crc32c(0, buf + ST_BATCH_OFF_ATTRIBUTES, total - ST_BATCH_OFF_ATTRIBUTES));
	return total;
}

/* Bytes of a hex test vector file (comment lines '#', then "OFFS  hh hh ..."). */
static inline size_t ut_hex_decode(const char *text, uint8_t *out, size_t cap)
{
	size_t n = 0;

	for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		if (*line == '#' || *line == '\n')
			continue;
		const char *q = line + 4; /* skip the offset column */
		unsigned v;
		int used;
		while (*q != '\n' && *q && sscanf(q, " %2x%n", &v, &used) == 1) {
			assert(n < cap);
			out[n++] = (uint8_t)v;
			q += used;
		}
	}
	return n;
}

static int ut_rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st; (void)flag; (void)f;
	return remove(path);
}

/* rm -rf path (test cleanup). */
static inline void ut_rmrf(const char *path)
{
	nftw(path, ut_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
