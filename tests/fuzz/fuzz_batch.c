/* fuzz_batch.c: libFuzzer target for the record-batch parsers that client bytes
 * reach. Input: the Records bytes of one Produce partition. It walks them as
 * produce.c does (st_batch_parse, st_batch_crc_ok batch by batch), and, so that the
 * fuzzer gets past the CRC, also recomputes each batch's CRC in a copy and runs the
 * record iterator (st_batch_records, st_record_next) and st_batch_marker_type over
 * it, as the coordinators and the producer-state replay do over stored batches.
 * Beyond "no crash, no out-of-bounds read": every record the iterator returns lies
 * inside its batch. */
#include "batch.h"
#include "crc32c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_BATCH_BYTES_MAX (1u << 20)

static uint8_t fuzz_copy[FUZZ_BATCH_BYTES_MAX];

static void fuzz_check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_batch: %s\n", what);
		abort();
	}
}

static bool inside(const uint8_t *p, int64_t len, const uint8_t *lo, const uint8_t *hi)
{
	if (p == NULL)
		return len == -1 || len == 0;
	return len >= 0 && p >= lo && p + len <= hi;
}

static void fuzz_records(const uint8_t *b, size_t n)
{
	struct st_record_iter it;
	if (st_batch_records(b, n, &it) < 0)
		return;
	struct st_record rec;
	int rc;
	unsigned count = 0;
	while ((rc = st_record_next(&it, &rec)) == 1) {
		fuzz_check(inside(rec.key, rec.key_len, b, b + n), "record key outside its batch");
		fuzz_check(inside(rec.value, rec.value_len, b, b + n), "record value outside its batch");
		fuzz_check(inside(rec.headers, rec.headers_len, b, b + n), "record headers outside its batch");
		fuzz_check(++count <= n, "more records than bytes");
	}
	fuzz_check(rc == 0 || rc == -EBADMSG, "odd error from st_record_next");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > FUZZ_BATCH_BYTES_MAX)
		return 0;
	const uint8_t *p = data;
	size_t left = size;
	while (left) {
		struct st_batch_hdr h;
		int n = st_batch_parse(p, left, &h);
		if (n < 0) {
			fuzz_check(n == -EAGAIN || n == -EBADMSG || n == -EPROTO, "odd error from st_batch_parse");
			break;
		}
		fuzz_check((size_t)n <= left && n >= ST_BATCH_HEADER_BYTES, "batch size outside the input");
		struct st_batch_hdr h2;
		fuzz_check(st_batch_parse_header(p, left, &h2) == n, "parse_header disagrees with parse");
		(void)st_batch_crc_ok(p, (size_t)n);
		(void)st_batch_marker_type(p, (size_t)n);
		/* The same batch with a good CRC: what a careful client (or our own log) holds. */
		memcpy(fuzz_copy, p, (size_t)n);
		st_put_be32(fuzz_copy + ST_BATCH_OFF_CRC,
			    crc32c(0, fuzz_copy + ST_BATCH_OFF_ATTRIBUTES, (size_t)n - ST_BATCH_OFF_ATTRIBUTES));
		fuzz_check(st_batch_crc_ok(fuzz_copy, (size_t)n), "a recomputed CRC does not check");
		fuzz_records(fuzz_copy, (size_t)n);
		p += n;
		left -= (size_t)n;
	}
	return 0;
}
