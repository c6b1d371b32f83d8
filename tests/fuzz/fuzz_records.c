/* fuzz_records.c: libFuzzer target for the produce-time records check
 * (storage/records.c, storage/codec.c). Input: byte 0 = codec (low 3 bits;
 * bit 7: take lastOffsetDelta from byte 3 instead of count - 1), bytes 1-2 =
 * the header's record count (BE), then the records section as sent. It is
 * wrapped in a batch header and checked; beyond "no crash, no out-of-bounds
 * access, no leak", it checks that
 *   - the answer is one of the documented ones;
 *   - for an uncompressed batch, the streaming checker gives the same answer
 *     however the section is split into feeds, and an accepted batch reads
 *     back through st_record_next as exactly count records (the parser the
 *     broker's own coordinators use agrees with the check);
 *   - never more than ST_BATCH_DECOMPRESSED_BYTES_MAX comes out of a codec. */
#include "batch.h"
#include "codec.h"
#include "crc32c.h"
#include "records.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_BATCH_BYTES_MAX (1u << 20)

static uint8_t fuzz_batch[FUZZ_BATCH_BYTES_MAX + ST_BATCH_HEADER_BYTES];
static struct st_codec *fuzz_codec;

static void fuzz_check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_records: %s\n", what);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4 || size - 3 > FUZZ_BATCH_BYTES_MAX)
		return 0;
	if (!fuzz_codec)
		fuzz_check(st_codec_create(&fuzz_codec) == 0, "st_codec_create");
	int16_t codec = data[0] & 7;
	int32_t count = (int32_t)st_be16(data + 1);
	int32_t lod = data[0] & 0x80 ? data[3] : count - 1;
	const uint8_t *recs = data + 3;
	size_t rlen = size - 3, total = ST_BATCH_HEADER_BYTES + rlen;

	uint8_t *b = fuzz_batch;
	memset(b, 0, ST_BATCH_HEADER_BYTES);
	st_put_be32(b + ST_BATCH_OFF_LENGTH, (uint32_t)(total - 12));
	b[ST_BATCH_OFF_MAGIC] = ST_BATCH_MAGIC;
	st_put_be16(b + ST_BATCH_OFF_ATTRIBUTES, (uint16_t)codec);
	st_put_be32(b + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)lod);
	st_put_be64(b + ST_BATCH_OFF_PRODUCER_ID, UINT64_MAX);
	st_put_be32(b + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)count);
	memcpy(b + ST_BATCH_HEADER_BYTES, recs, rlen);
	st_put_be32(b + ST_BATCH_OFF_CRC, crc32c(0, b + ST_BATCH_OFF_ATTRIBUTES, total - ST_BATCH_OFF_ATTRIBUTES));

	struct st_batch_hdr h;
	if (st_batch_parse(b, total, &h) != (int)total)
		return 0;
	int rc = st_codec_check_batch(fuzz_codec, b, total, &h, ST_BATCH_DECOMPRESSED_BYTES_MAX);
	fuzz_check(rc == 0 || rc == -EBADMSG || rc == -EMSGSIZE || rc == -ENOTSUP, "odd error");
	fuzz_check(st_codec_last_bytes(fuzz_codec) <= ST_BATCH_DECOMPRESSED_BYTES_MAX, "past the limit");
	fuzz_check(codec <= ST_BATCH_CODEC_ZSTD || rc != 0, "codec 5..7 accepted");
	if (codec != 0)
		return 0;

	/* The same section fed in pieces whose sizes the input's bytes choose. */
	struct st_recs_check v;
	int split = st_recs_check_init(&v, &h);
	for (size_t i = 0; i < rlen && split == 0;) {
		size_t step = 1 + recs[i] % 13;
		step = step < rlen - i ? step : rlen - i;
		split = st_recs_check_feed(&v, recs + i, step);
		i += step;
	}
	if (split == 0)
		split = st_recs_check_end(&v);
	fuzz_check(split == rc, "split feeds disagree with one feed");

	if (rc == 0) {
		struct st_record_iter it;
		struct st_record r;
		fuzz_check(st_record_iter_init(&it, b, total, &h) == 0, "iter init");
		for (int32_t i = 0; i < count; i++) {
			fuzz_check(st_record_next(&it, &r) == 1, "accepted record fails st_record_next");
			fuzz_check(r.offset_delta == i, "offset delta");
		}
		fuzz_check(st_record_next(&it, &r) == 0 && it.p == it.end, "records past count");
	}
	return 0;
}
