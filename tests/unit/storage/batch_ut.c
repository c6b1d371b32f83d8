/*
 * batch_ut.c - CRC-32C and RecordBatch v2 parsing (storage/crc32c.c, storage/batch.c).
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdlib.h>

#include "ut_batch.h"

static void test_crc32c_check_value(void)
{
	CU_ASSERT_EQUAL(crc32c(0, "123456789", 9), 0xE3069283u);
	CU_ASSERT_EQUAL(crc32c_sw(0, "123456789", 9), 0xE3069283u);
	CU_ASSERT_EQUAL(crc32c(0, "", 0), 0u);
	/* RFC 3720 B.4: 32 bytes of zeros -> 0x8A9136AA, of 0xFF -> 0x62A8AB43. */
	uint8_t b[32];
	memset(b, 0, sizeof(b));
	CU_ASSERT_EQUAL(crc32c(0, b, 32), 0x8A9136AAu);
	memset(b, 0xff, sizeof(b));
	CU_ASSERT_EQUAL(crc32c(0, b, 32), 0x62A8AB43u);
}

static void test_crc32c_hw_matches_sw(void)
{
	static uint8_t buf[4096 + 16];
	uint32_t x = 12345;

	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	/* Every alignment and many lengths, plus chaining in two pieces. */
	for (size_t off = 0; off < 16; off++)
		for (size_t len = 0; len < 300; len += 7) {
			CU_ASSERT_EQUAL(crc32c(0, buf + off, len), crc32c_sw(0, buf + off, len));
			CU_ASSERT_EQUAL(crc32c(crc32c(0, buf + off, len / 3), buf + off + len / 3, len - len / 3),
			                crc32c_sw(0, buf + off, len));
		}
	CU_ASSERT_EQUAL(crc32c(0, buf, 4096), crc32c_sw(0, buf, 4096));
}

/* CRC-32C one bit at a time, straight from the definition: the reference for every fast path. */
static uint32_t ref_crc32c(uint32_t crc, const uint8_t *p, size_t len)
{
	uint32_t c = ~crc;
	for (size_t i = 0; i < len; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
	}
	return ~c;
}

/* Known values (the check value, RFC 3720 B.4, Kafka test vector 05's batch) on each implementation. */
static void test_crc32c_impls_vectors(void)
{
	uint8_t b[256], z[48], ff[32];
	size_t n = ut_hex_decode(vec05, b, sizeof(b));
	int ran = 0;

	CU_ASSERT_EQUAL_FATAL(n, 96);
	memset(z, 0, sizeof(z));
	memset(ff, 0xff, sizeof(ff));
	for (int i = 0; i < CRC32C_IMPLS; i++) {
		const char *name;
		crc32c_fn fn = crc32c_impl_get((enum crc32c_impl)i, &name);
		if (!fn)
			continue;
		ran++;
		CU_ASSERT_EQUAL(fn(0, "123456789", 9), 0xE3069283u);
		CU_ASSERT_EQUAL(fn(0, "", 0), 0u);
		CU_ASSERT_EQUAL(fn(0, z, 32), 0x8A9136AAu);
		CU_ASSERT_EQUAL(fn(0, ff, 32), 0x62A8AB43u);
		CU_ASSERT_EQUAL(fn(0, b + 21, n - 21), 0x8e6582a3u);
		CU_ASSERT_EQUAL(fn(fn(0, b + 21, 40), b + 61, n - 61), 0x8e6582a3u);
		CU_ASSERT_EQUAL(ref_crc32c(0, b + 21, n - 21), 0x8e6582a3u);
	}
	CU_ASSERT_TRUE(ran >= 1);
	CU_ASSERT_PTR_NOT_NULL(crc32c_impl_get(crc32c_impl_chosen(), NULL));
}

/*
 * Every implementation against the bitwise reference over random lengths (up
 * to 3 x 2 KiB three-chain blocks and past them, the 128- and 512-byte
 * thresholds), random alignments and random starting CRCs, whole and split in
 * two at a random point. The seed is printed on failure.
 */
static void test_crc32c_impls_random(void)
{
	enum { BUF_BYTES = 40000 + 64, CASES = 600 };
	static uint8_t buf[BUF_BYTES];
	uint64_t x = 0x9E3779B97F4A7C15ull;
#define UT_NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)UT_NEXT();
	for (int t = 0; t < CASES; t++) {
		uint64_t r = UT_NEXT();
		size_t off = r % 64, len;
		switch (t % 4) {
		case 0: len = (r >> 8) % 1100; break;                /* single chain, x3 tail, ISA-L threshold */
		case 1: len = 6144 * ((r >> 8) % 4) + 32 + (r >> 16) % 64; break; /* near 3 x 2 KiB blocks */
		default: len = (r >> 8) % 40000; break;
		}
		uint32_t init = (uint32_t)(r >> 32), want = ref_crc32c(init, buf + off, len);
		size_t cut = len ? (size_t)(UT_NEXT() % (len + 1)) : 0;
		for (int i = 0; i < CRC32C_IMPLS; i++) {
			const char *name;
			crc32c_fn fn = crc32c_impl_get((enum crc32c_impl)i, &name);
			if (!fn)
				continue;
			uint32_t got = fn(init, buf + off, len), split = fn(fn(init, buf + off, cut), buf + off + cut, len - cut);
			if (got != want || split != want)
				printf("\n  %s: case %d len %zu off %zu cut %zu init %08x: %08x / %08x, want %08x", name, t, len,
				       off, cut, init, got, split, want);
			CU_ASSERT_EQUAL(got, want);
			CU_ASSERT_EQUAL(split, want);
		}
		CU_ASSERT_EQUAL(crc32c(init, buf + off, len), want);
	}
#undef UT_NEXT
}

static void test_vectors_crc_and_parse(void)
{
	uint8_t b[256];
	struct st_batch_hdr h;
	size_t n = ut_hex_decode(vec05, b, sizeof(b));

	CU_ASSERT_EQUAL_FATAL(n, 96);
	CU_ASSERT_EQUAL(crc32c(0, b + 21, n - 21), 0x8e6582a3u);
	CU_ASSERT_TRUE(st_batch_crc_ok(b, n));
	CU_ASSERT_EQUAL(st_batch_parse(b, n, &h), 96);
	CU_ASSERT_EQUAL(h.base_offset, 0);
	CU_ASSERT_EQUAL(h.batch_length, 84);
	CU_ASSERT_EQUAL(h.leader_epoch, -1);
	CU_ASSERT_EQUAL(h.magic, 2);
	CU_ASSERT_EQUAL(h.crc, 0x8e6582a3u);
	CU_ASSERT_EQUAL(h.attributes, ST_BATCH_ATTR_TRANSACTIONAL);
	CU_ASSERT_EQUAL(h.last_offset_delta, 2);
	CU_ASSERT_EQUAL(h.first_timestamp, 1700000000000LL);
	CU_ASSERT_EQUAL(h.max_timestamp, 1700000000009LL);
	CU_ASSERT_EQUAL(h.producer_id, 4000);
	CU_ASSERT_EQUAL(h.producer_epoch, 0);
	CU_ASSERT_EQUAL(h.base_sequence, 0);
	CU_ASSERT_EQUAL(h.records_count, 3);

	/* Records: (k0,v0), (k1,v1, header h=x, tsDelta 5), (null key, v2, tsDelta 9). */
	struct st_record_iter it;
	struct st_record r;
	CU_ASSERT_EQUAL_FATAL(st_record_iter_init(&it, b, n, &h), 0);
	CU_ASSERT_EQUAL_FATAL(st_record_next(&it, &r), 1);
	CU_ASSERT_EQUAL(r.offset_delta, 0);
	CU_ASSERT(r.key_len == 2 && !memcmp(r.key, "k0", 2) && r.value_len == 2 && !memcmp(r.value, "v0", 2));
	CU_ASSERT_EQUAL(r.headers_count, 0);
	CU_ASSERT_EQUAL_FATAL(st_record_next(&it, &r), 1);
	CU_ASSERT(r.offset_delta == 1 && r.timestamp_delta == 5 && r.headers_count == 1);
	CU_ASSERT(r.key_len == 2 && !memcmp(r.key, "k1", 2));
	CU_ASSERT_EQUAL_FATAL(st_record_next(&it, &r), 1);
	CU_ASSERT(r.offset_delta == 2 && r.timestamp_delta == 9 && r.key == NULL && r.key_len == -1);
	CU_ASSERT(r.value_len == 2 && !memcmp(r.value, "v2", 2));
	CU_ASSERT_EQUAL(st_record_next(&it, &r), 0);

	/* Patching the base offset keeps the CRC valid (bytes 0..7 are outside it). */
	st_batch_set_base_offset(b, 0x0102030405060708LL);
	CU_ASSERT_TRUE(st_batch_crc_ok(b, n));
	CU_ASSERT_EQUAL(st_batch_parse(b, n, &h), 96);
	CU_ASSERT_EQUAL(h.base_offset, 0x0102030405060708LL);

	n = ut_hex_decode(vec06, b, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(n, 78);
	CU_ASSERT_EQUAL(crc32c(0, b + 21, n - 21), 0xa2ccea22u);
	CU_ASSERT_TRUE(st_batch_crc_ok(b, n));
	CU_ASSERT_EQUAL(st_batch_parse(b, n, &h), 78);
	CU_ASSERT_EQUAL(h.base_offset, 3);
	CU_ASSERT_EQUAL(h.attributes, ST_BATCH_ATTR_TRANSACTIONAL | ST_BATCH_ATTR_CONTROL);
	CU_ASSERT_EQUAL(h.base_sequence, -1);
	CU_ASSERT_EQUAL_FATAL(st_record_iter_init(&it, b, n, &h), 0);
	CU_ASSERT_EQUAL_FATAL(st_record_next(&it, &r), 1);
	CU_ASSERT(r.key_len == 4 && st_be16(r.key + 2) == 1);  /* COMMIT */
	CU_ASSERT(r.value_len == 6 && st_be32(r.value + 2) == 0); /* coordinator epoch */
	CU_ASSERT_EQUAL(st_record_next(&it, &r), 0);
	/* A flipped bit anywhere from the attributes on breaks the CRC. */
	b[60] ^= 1;
	CU_ASSERT_FALSE(st_batch_crc_ok(b, n));
}

static void test_parse_errors(void)
{
	uint8_t b[512];
	struct st_batch_hdr h;
	uint32_t n = ut_batch(b, sizeof(b), &(struct ut_batch_spec){ .records = 3, .value_len = 10 });

	CU_ASSERT_TRUE(st_batch_crc_ok(b, n));
	CU_ASSERT_EQUAL(st_batch_parse(b, n, &h), (int)n);
	CU_ASSERT_EQUAL(st_batch_parse(b, n + 100, &h), (int)n); /* trailing bytes are not ours */
	/* Truncated: header only, whole batch missing its last byte, not even a header. */
	CU_ASSERT_EQUAL(st_batch_parse(b, n - 1, &h), -EAGAIN);
	CU_ASSERT_EQUAL(st_batch_parse(b, 60, &h), -EAGAIN);
	CU_ASSERT_EQUAL(st_batch_parse(b, 0, &h), -EAGAIN);
	CU_ASSERT_EQUAL(st_batch_parse_header(b, 61, &h), (int)n);
	/* Bad magic. */
	b[ST_BATCH_OFF_MAGIC] = 1;
	CU_ASSERT_EQUAL(st_batch_parse(b, n, &h), -EPROTO);
	b[ST_BATCH_OFF_MAGIC] = 2;
	/* Bad lengths and fields. */
	st_put_be32(b + ST_BATCH_OFF_LENGTH, 48);
	CU_ASSERT_EQUAL(st_batch_parse(b, n, &h), -EBADMSG);
	st_put_be32(b + ST_BATCH_OFF_LENGTH, (uint32_t)-5);
	CU_ASSERT_EQUAL(st_batch_parse(b, n, &h), -EBADMSG);
	st_put_be32(b + ST_BATCH_OFF_LENGTH, 0x7fffffff);
	CU_ASSERT_EQUAL(st_batch_parse(b, n, &h), -EBADMSG);
	st_put_be32(b + ST_BATCH_OFF_LENGTH, 49);
	CU_ASSERT_EQUAL(st_batch_parse(b, 61, &h), 61); /* an empty batch is well formed */
	st_put_be32(b + ST_BATCH_OFF_LENGTH, n - 12);
	st_put_be32(b + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)-1);
	CU_ASSERT_EQUAL(st_batch_parse(b, n, &h), -EBADMSG);
	st_put_be32(b + ST_BATCH_OFF_RECORDS_COUNT, 3);
	st_put_be32(b + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)-1);
	CU_ASSERT_EQUAL(st_batch_parse(b, n, &h), -EBADMSG);
	st_put_be32(b + ST_BATCH_OFF_LAST_OFFSET_DELTA, 2);
	CU_ASSERT_EQUAL(st_batch_parse(b, n, &h), (int)n);
	CU_ASSERT_TRUE(st_batch_crc_ok(b, n));
}

static void test_records_and_varints(void)
{
	uint8_t b[4096], v[10];
	struct st_batch_hdr h;
	struct st_record_iter it;
	struct st_record r;
	int64_t x;
	const int64_t samples[] = { 0, 1, -1, 63, -64, 64, 300, -300, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN };

	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		int n = st_varint_put(v, samples[i]);
		CU_ASSERT_EQUAL(st_varint_get(v, v + n, &x), n);
		CU_ASSERT_EQUAL(x, samples[i]);
		CU_ASSERT_EQUAL(st_varint_get(v, v + n - 1, &x), -EBADMSG); /* truncated */
	}
	CU_ASSERT_EQUAL(st_varint_put(v, -1), 1);
	CU_ASSERT_EQUAL(v[0], 0x01);

	uint32_t n = ut_batch(b, sizeof(b), &(struct ut_batch_spec){ .records = 7, .value_len = 100 });
	CU_ASSERT_EQUAL_FATAL(st_batch_parse(b, n, &h), (int)n);
	CU_ASSERT_EQUAL_FATAL(st_record_iter_init(&it, b, n, &h), 0);
	for (int i = 0; i < 7; i++) {
		CU_ASSERT_EQUAL_FATAL(st_record_next(&it, &r), 1);
		CU_ASSERT_EQUAL(r.offset_delta, i);
		CU_ASSERT_EQUAL(r.value_len, 100);
		CU_ASSERT_EQUAL(r.value[99], 'a' + i);
	}
	CU_ASSERT_EQUAL(st_record_next(&it, &r), 0);
	/* A record length running past the batch is malformed, not a crash. */
	CU_ASSERT_EQUAL_FATAL(st_record_iter_init(&it, b, n, &h), 0);
	b[ST_BATCH_HEADER_BYTES] = 0x7e;
	CU_ASSERT_EQUAL(st_record_next(&it, &r), -EBADMSG);
	/* Compressed batches are not iterated. */
	st_put_be16(b + ST_BATCH_OFF_ATTRIBUTES, 3);
	CU_ASSERT_EQUAL(st_batch_parse(b, n, &h), (int)n);
	CU_ASSERT_EQUAL(st_record_iter_init(&it, b, n, &h), -ENOTSUP);
	CU_ASSERT_STRING_EQUAL(st_batch_codec_name(h.attributes), "lz4");
}

/* st_batch_build_marker gives vector 06 byte for byte; st_batch_marker_type reads it back. */
static void test_build_marker(void)
{
	uint8_t v[128], b[128], d2[128];
	size_t n = ut_hex_decode(vec06, v, sizeof(v));
	const int64_t ts = 0x18bcfe56814LL;

	CU_ASSERT_EQUAL_FATAL(n, ST_MARKER_BATCH_BYTES);
	CU_ASSERT_EQUAL(st_batch_build_marker(b, n - 1, 4000, 0, true, 0, ts), -ENOSPC);
	CU_ASSERT_EQUAL_FATAL(st_batch_build_marker(b, n, 4000, 0, true, 0, ts), (int)n);
	st_batch_set_base_offset(b, 3); /* the vector was appended at offset 3 */
	CU_ASSERT_EQUAL(memcmp(b, v, n), 0);
	CU_ASSERT_EQUAL(st_batch_marker_type(v, n), ST_MARKER_COMMIT);

	/* ABORT, another producer and coordinator epoch: valid batch, fields in place. */
	struct st_batch_hdr h;
	struct st_record_iter it;
	struct st_record r;
	CU_ASSERT_EQUAL_FATAL(st_batch_build_marker(b, sizeof(b), 77, 5, false, 0x01020304, 9), (int)n);
	CU_ASSERT_TRUE(st_batch_crc_ok(b, n));
	CU_ASSERT_EQUAL_FATAL(st_batch_parse(b, n, &h), (int)n);
	CU_ASSERT(h.producer_id == 77 && h.producer_epoch == 5 && h.base_sequence == -1);
	CU_ASSERT(h.attributes == 0x30 && h.records_count == 1 && h.last_offset_delta == 0);
	CU_ASSERT(h.first_timestamp == 9 && h.max_timestamp == 9 && h.leader_epoch == -1);
	CU_ASSERT_EQUAL_FATAL(st_record_iter_init(&it, b, n, &h), 0);
	CU_ASSERT_EQUAL_FATAL(st_record_next(&it, &r), 1);
	CU_ASSERT(r.key_len == 4 && st_be16(r.key) == 0 && st_be16(r.key + 2) == 0);
	CU_ASSERT(r.value_len == 6 && st_be16(r.value) == 0 && st_be32(r.value + 2) == 0x01020304u);
	CU_ASSERT_EQUAL(st_batch_marker_type(b, n), ST_MARKER_ABORT);
	int32_t ce = 0;
	CU_ASSERT_EQUAL(st_batch_marker_read(b, n, &ce), ST_MARKER_ABORT);
	CU_ASSERT_EQUAL(ce, 0x01020304);
	CU_ASSERT_EQUAL(st_batch_marker_read(v, n, &ce), ST_MARKER_COMMIT);
	CU_ASSERT_EQUAL(ce, 0);
	/* A value cut short, or past the bytes given: no coordinator epoch (-1), the type still read. */
	CU_ASSERT_EQUAL(st_batch_marker_read(b, n - 2, &ce), ST_MARKER_ABORT);
	CU_ASSERT_EQUAL(ce, -1);
	memcpy(d2, b, n);
	d2[70] = 2 * 5;     /* value length 5 (zigzag): shorter than version + epoch */
	CU_ASSERT_EQUAL(st_batch_marker_read(d2, n, &ce), ST_MARKER_ABORT);
	CU_ASSERT_EQUAL(ce, -1);
	memcpy(d2, b, n);
	d2[65] = 2 * 60;     /* key length 60: past the end, never read beyond it */
	CU_ASSERT_EQUAL(st_batch_marker_read(d2, n, &ce), ST_MARKER_ABORT);
	CU_ASSERT_EQUAL(ce, -1);

	/* Any prefix that stops before the key's type is refused, never over-read. */
	for (size_t len = 0; len <= n; len++) {
		uint8_t *c = malloc(len ? len : 1); /* exact size: ASan sees any over-read */
		memcpy(c, v, len);
		CU_ASSERT_EQUAL(st_batch_marker_type(c, len), len >= 70 ? ST_MARKER_COMMIT : -EBADMSG);
		free(c);
	}
	/* Not a marker: data batch, compressed, two records, unknown type, negative version. */
	uint8_t d[128];
	n = ut_hex_decode(vec05, d, sizeof(d));
	CU_ASSERT_EQUAL(st_batch_marker_type(d, n), -EBADMSG);
	const struct { size_t pos; uint8_t val; } bad[] = {
		{ ST_BATCH_OFF_ATTRIBUTES + 1, 0x10 },      /* control bit off */
		{ ST_BATCH_OFF_ATTRIBUTES + 1, 0x31 },      /* gzip */
		{ ST_BATCH_OFF_RECORDS_COUNT + 3, 2 },
		{ 69, 2 },                                  /* type 2 (KRaft) */
		{ 69, 0xff },
		{ 66, 0x80 },                               /* version < 0 */
		{ 65, 4 },                                  /* key length 2 */
		{ ST_BATCH_OFF_MAGIC, 1 },
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		memcpy(b, v, ST_MARKER_BATCH_BYTES);
		b[bad[k].pos] = bad[k].val;
		CU_ASSERT_EQUAL(st_batch_marker_type(b, ST_MARKER_BATCH_BYTES), -EBADMSG);
	}
	memcpy(b, v, ST_MARKER_BATCH_BYTES);
	b[66] = 0x7f; /* a newer key version is read like version 0 (Kafka only warns) */
	CU_ASSERT_EQUAL(st_batch_marker_type(b, ST_MARKER_BATCH_BYTES), ST_MARKER_COMMIT);
}

/* st_batch_build: one record, null/empty/large key and value, exact capacity. */
static void test_build(void)
{
	static uint8_t b[1024], val[300];
	static const char key[] = "keykeykeykeykeykeykeykeykeykeykeykeykeykeykeykeykeykeykeykeykeyk";
	const struct { int32_t klen, vlen; } cases[] = { { -1, -1 }, { 0, 0 }, { 3, -1 }, { -1, 300 }, { 64, 63 } };

	for (size_t i = 0; i < sizeof(val); i++)
		val[i] = (uint8_t)i;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		int32_t kl = cases[k].klen, vl = cases[k].vlen;
		int n = st_batch_build(b, sizeof(b), 0x10, 42, 3, 17, -7, key, kl, val, vl);
		CU_ASSERT_FATAL(n > ST_BATCH_HEADER_BYTES);
		struct st_batch_hdr h;
		struct st_record_iter it;
		struct st_record r;
		CU_ASSERT_TRUE(st_batch_crc_ok(b, (size_t)n));
		CU_ASSERT_EQUAL_FATAL(st_batch_parse(b, (size_t)n, &h), n);
		CU_ASSERT(h.base_offset == 0 && h.leader_epoch == -1 && h.attributes == 0x10 && h.last_offset_delta == 0);
		CU_ASSERT(h.first_timestamp == -7 && h.max_timestamp == -7 && h.producer_id == 42);
		CU_ASSERT(h.producer_epoch == 3 && h.base_sequence == 17 && h.records_count == 1);
		CU_ASSERT_EQUAL_FATAL(st_record_iter_init(&it, b, (size_t)n, &h), 0);
		CU_ASSERT_EQUAL_FATAL(st_record_next(&it, &r), 1);
		CU_ASSERT(r.timestamp_delta == 0 && r.offset_delta == 0 && r.headers_count == 0);
		CU_ASSERT_EQUAL(r.key_len, kl);
		CU_ASSERT_EQUAL(r.key == NULL, kl < 0);
		if (kl > 0)
			CU_ASSERT_EQUAL(memcmp(r.key, key, (size_t)kl), 0);
		CU_ASSERT_EQUAL(r.value_len, vl);
		CU_ASSERT_EQUAL(r.value == NULL, vl < 0);
		if (vl > 0)
			CU_ASSERT_EQUAL(memcmp(r.value, val, (size_t)vl), 0);
		CU_ASSERT_EQUAL(st_record_next(&it, &r), 0);
		CU_ASSERT_EQUAL(st_batch_marker_type(b, (size_t)n), -EBADMSG); /* not a control batch */
		/* Exactly n bytes suffice; one fewer does not and writes nothing past cap. */
		memset(b, 0xee, sizeof(b));
		CU_ASSERT_EQUAL(st_batch_build(b, (size_t)n - 1, 0x10, 42, 3, 17, -7, key, kl, val, vl), -ENOSPC);
		CU_ASSERT_EQUAL(b[0], 0xee);
		CU_ASSERT_EQUAL(st_batch_build(b, (size_t)n, 0x10, 42, 3, 17, -7, key, kl, val, vl), n);
	}
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("batch", NULL, NULL);
	CU_add_test(s, "crc32c check value", test_crc32c_check_value);
	CU_add_test(s, "crc32c hw == sw", test_crc32c_hw_matches_sw);
	CU_add_test(s, "crc32c every implementation: known values", test_crc32c_impls_vectors);
	CU_add_test(s, "crc32c every implementation vs bitwise reference", test_crc32c_impls_random);
	CU_add_test(s, "vectors 05/06", test_vectors_crc_and_parse);
	CU_add_test(s, "parse errors", test_parse_errors);
	CU_add_test(s, "records and varints", test_records_and_varints);
	CU_add_test(s, "build marker (vector 06), marker type", test_build_marker);
	CU_add_test(s, "build one-record batch", test_build);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
