/*
 * codec_ut.c - the produce-time records check (storage/records.c) and its
 * decompressors (storage/codec.c): valid batches of every codec, in every
 * framing a client may use, pass; garbage, truncation, wrong counts, bad
 * varints, bad offsets and decompression bombs fail with the right code.
 *
 * Locality: test thread only.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "codec.h"
#include "records.h"
#include "ut_batch.h"

/*
 * The check must not allocate (it runs on a poll core): this executable's own
 * malloc family interposes on every library's (zlib, LZ4F, zstd, snappy's
 * C++) and counts the calls made while `counting` is set, i.e. inside
 * st_codec_check_batch; glibc's __libc_* do the work.
 */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);
static bool counting;
static unsigned long allocs;

void *malloc(size_t n)
{
	allocs += counting;
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
	allocs += counting;
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
	allocs += counting;
	return __libc_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	allocs += counting;
	return __libc_memalign(align, n);
}

void *memalign(size_t align, size_t n)
{
	allocs += counting;
	return __libc_memalign(align, n);
}

int posix_memalign(void **p, size_t align, size_t n)
{
	allocs += counting;
	*p = __libc_memalign(align, n);
	return *p ? 0 : ENOMEM;
}

void free(void *p)
{
	__libc_free(p);
}

#define BIG (48u << 20)   /* past ST_BATCH_DECOMPRESSED_BYTES_MAX */
_Static_assert(BIG > ST_BATCH_DECOMPRESSED_BYTES_MAX + (1u << 20), "bomb size");

static struct st_codec *z;
static uint8_t *plain, *packed, *batch;   /* [BUF_BYTES] each */
#define BUF_BYTES (BIG + BIG / 4 + (1u << 20))   /* room for snappy's worst case, n + n / 6 + 32 */

enum { NONE = 0, GZIP = 1, SNAPPY = 2, LZ4 = 3, ZSTD = 4 };

/* Records section of `records` records with value_len-byte values into plain; returns its length. */
static size_t recs(int records, uint32_t value_len)
{
	struct ut_batch_spec s = { .records = records, .value_len = value_len, .first_ts = 1000 };
	uint32_t n = ut_batch(plain, BUF_BYTES, &s);
	memmove(plain, plain + ST_BATCH_HEADER_BYTES, n - ST_BATCH_HEADER_BYTES);
	return n - ST_BATCH_HEADER_BYTES;
}

/* A batch into `batch` with this header and records section; CRC filled in. Returns its size. */
static size_t mk_batch(int16_t attrs, int32_t count, int32_t lod, const uint8_t *r, size_t rlen)
{
	size_t total = ST_BATCH_HEADER_BYTES + rlen;
	CU_ASSERT_FATAL(total <= BUF_BYTES);
	memset(batch, 0, ST_BATCH_HEADER_BYTES);
	st_put_be32(batch + ST_BATCH_OFF_LENGTH, (uint32_t)(total - 12));
	st_put_be32(batch + ST_BATCH_OFF_LEADER_EPOCH, UINT32_MAX);
	batch[ST_BATCH_OFF_MAGIC] = 2;
	st_put_be16(batch + ST_BATCH_OFF_ATTRIBUTES, (uint16_t)attrs);
	st_put_be32(batch + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)lod);
	st_put_be64(batch + ST_BATCH_OFF_PRODUCER_ID, UINT64_MAX);
	st_put_be16(batch + ST_BATCH_OFF_PRODUCER_EPOCH, UINT16_MAX);
	st_put_be32(batch + ST_BATCH_OFF_BASE_SEQUENCE, UINT32_MAX);
	st_put_be32(batch + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)count);
	memmove(batch + ST_BATCH_HEADER_BYTES, r, rlen);
	st_put_be32(batch + ST_BATCH_OFF_CRC, crc32c(0, batch + ST_BATCH_OFF_ATTRIBUTES, total - ST_BATCH_OFF_ATTRIBUTES));
	return total;
}

/* Decompression budget given to check(): the per-batch limit unless a test lowers it. */
static uint32_t max_bytes = ST_BATCH_DECOMPRESSED_BYTES_MAX;

/* Check `batch` of total bytes. */
static int check(size_t total)
{
	struct st_batch_hdr h;
	int n = st_batch_parse(batch, total, &h);
	CU_ASSERT_EQUAL_FATAL(n, (int)total);
	CU_ASSERT_FATAL(st_batch_crc_ok(batch, total));
	allocs = 0;
	counting = true;
	int rc = st_codec_check_batch(z, batch, total, &h, max_bytes);
	counting = false;
	CU_ASSERT_EQUAL(allocs, 0);
	return rc;
}

/* Records section r -> codec's stream in packed; returns its length. */
static size_t gzip_pack(const uint8_t *r, size_t n, uint8_t *out, size_t cap)
{
	z_stream s = { 0 };
	CU_ASSERT_FATAL(deflateInit2(&s, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
	s.next_in = (Bytef *)r;
	s.avail_in = (uInt)n;
	s.next_out = out;
	s.avail_out = (uInt)cap;
	CU_ASSERT_FATAL(deflate(&s, Z_FINISH) == Z_STREAM_END);
	size_t len = s.total_out;
	deflateEnd(&s);
	return len;
}

static size_t snappy_raw_pack(const uint8_t *r, size_t n, uint8_t *out, size_t cap)
{
	size_t len = cap;
	CU_ASSERT_FATAL(snappy_compress((const char *)r, n, (char *)out, &len) == SNAPPY_OK);
	return len;
}

/* Xerial framing as Java's SnappyOutputStream writes it, in blocks of block bytes. */
static size_t snappy_xerial_pack(const uint8_t *r, size_t n, uint8_t *out, size_t cap, size_t block)
{
	static const uint8_t hdr[16] = { 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1 };
	size_t o = sizeof(hdr);
	memcpy(out, hdr, sizeof(hdr));
	for (size_t i = 0; i < n; i += block) {
		size_t take = n - i < block ? n - i : block;
		size_t len = cap - o - 4;
		CU_ASSERT_FATAL(snappy_compress((const char *)r + i, take, (char *)out + o + 4, &len) == SNAPPY_OK);
		st_put_be32(out + o, (uint32_t)len);
		o += 4 + len;
	}
	return o;
}

static size_t lz4_pack(const uint8_t *r, size_t n, uint8_t *out, size_t cap, LZ4F_blockSizeID_t bs,
                       LZ4F_blockMode_t mode, bool checksums)
{
	LZ4F_preferences_t prefs = { .frameInfo = { .blockSizeID = bs, .blockMode = mode,
	                                            .contentChecksumFlag = checksums ? LZ4F_contentChecksumEnabled : 0,
	                                            .blockChecksumFlag = checksums ? LZ4F_blockChecksumEnabled : 0 } };
	size_t len = LZ4F_compressFrame(out, cap, r, n, &prefs);
	CU_ASSERT_FATAL(!LZ4F_isError(len));
	return len;
}

/* zstd as librdkafka (content size known) or as a streaming writer (unknown size, big window). */
static size_t zstd_pack(const uint8_t *r, size_t n, uint8_t *out, size_t cap, bool stream)
{
	if (!stream) {
		size_t len = ZSTD_compress(out, cap, r, n, 3);
		CU_ASSERT_FATAL(!ZSTD_isError(len));
		return len;
	}
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 19);
	ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, 27);   /* a window far past the scratch */
	ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
	ZSTD_outBuffer o = { out, cap, 0 };
	ZSTD_inBuffer i = { r, n, 0 };
	size_t left;
	do {
		left = ZSTD_compressStream2(c, &o, &i, ZSTD_e_end);
		CU_ASSERT_FATAL(!ZSTD_isError(left));
	} while (left);
	ZSTD_freeCCtx(c);
	return o.pos;
}

/* Records section in plain -> `codec` stream in packed (the usual framing of each). */
static size_t pack(int codec, size_t n)
{
	switch (codec) {
	case GZIP: return gzip_pack(plain, n, packed, BUF_BYTES);
	case SNAPPY: return snappy_raw_pack(plain, n, packed, BUF_BYTES);
	case LZ4: return lz4_pack(plain, n, packed, BUF_BYTES, LZ4F_max64KB, LZ4F_blockIndependent, false);
	case ZSTD: return zstd_pack(plain, n, packed, BUF_BYTES, false);
	default: memcpy(packed, plain, n); return n;
	}
}

/* The counting itself works (else "no allocation" would prove nothing). */
static void test_alloc_counter(void)
{
	allocs = 0;
	counting = true;
	void *volatile p = malloc(16);
	free(p);
	counting = false;
	CU_ASSERT_EQUAL(allocs, 1);
}

static void test_valid_each_codec(void)
{
	for (int codec = NONE; codec <= ZSTD; codec++) {
		for (int records = 1; records <= 1000; records *= 10) {
			size_t n = recs(records, 100), c = pack(codec, n);
			CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, records, records - 1, packed, c)), 0);
			CU_ASSERT_EQUAL(st_codec_last_bytes(z), codec ? n : 0);
		}
	}
}

static void test_valid_framings(void)
{
	size_t n = recs(2000, 300);   /* ~620 KB: several windows, blocks and snappy chunks */
	size_t c;

	c = snappy_xerial_pack(plain, n, packed, BUF_BYTES, 32 << 10);
	CU_ASSERT_EQUAL(check(mk_batch(SNAPPY, 2000, 1999, packed, c)), 0);
	CU_ASSERT_EQUAL(st_codec_last_bytes(z), n);
	c = snappy_raw_pack(plain, n, packed, BUF_BYTES);
	CU_ASSERT_EQUAL(check(mk_batch(SNAPPY, 2000, 1999, packed, c)), 0);
	/* LZ4: small blocks, then the largest (4 MiB) linked with checksums, then small again:
	 * the decompressor's buffers grow within the slots set aside for them. */
	LZ4F_blockSizeID_t sizes[] = { LZ4F_max64KB, LZ4F_max4MB, LZ4F_max256KB, LZ4F_max1MB, LZ4F_max64KB };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		c = lz4_pack(plain, n, packed, BUF_BYTES, sizes[i], i & 1 ? LZ4F_blockLinked : LZ4F_blockIndependent, i & 1);
		CU_ASSERT_EQUAL(check(mk_batch(LZ4, 2000, 1999, packed, c)), 0);
	}
	c = zstd_pack(plain, n, packed, BUF_BYTES, true);
	CU_ASSERT_EQUAL(check(mk_batch(ZSTD, 2000, 1999, packed, c)), 0);
	CU_ASSERT_EQUAL(st_codec_last_bytes(z), n);

	/* Two gzip members, then trailing bytes that are not a member (ignored, as Java does). */
	size_t half = recs(4, 50) / 2, whole = recs(4, 50);
	c = gzip_pack(plain, half, packed, BUF_BYTES);
	c += gzip_pack(plain + half, whole - half, packed + c, BUF_BYTES - c);
	CU_ASSERT_EQUAL(check(mk_batch(GZIP, 4, 3, packed, c)), 0);
	memcpy(packed + c, "junk", 4);
	CU_ASSERT_EQUAL(check(mk_batch(GZIP, 4, 3, packed, c + 4)), 0);
	/* Two zstd frames. */
	c = zstd_pack(plain, half, packed, BUF_BYTES, false);
	c += zstd_pack(plain + half, whole - half, packed + c, BUF_BYTES - c, false);
	CU_ASSERT_EQUAL(check(mk_batch(ZSTD, 4, 3, packed, c)), 0);
}

static void test_garbage(void)
{
	for (int codec = GZIP; codec <= ZSTD; codec++) {
		uint8_t junk[300];
		for (unsigned i = 0; i < sizeof(junk); i++)
			junk[i] = (uint8_t)(i * 37 + codec);
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 3, 2, junk, sizeof(junk))), -EBADMSG);
		/* Plain records flagged compressed (what a broken client sends). */
		size_t n = recs(3, 20);
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 3, 2, plain, n)), -EBADMSG);
	}
	/* The Xerial magic with a block that lies about its length, and one of garbage. */
	size_t n = recs(3, 20), c = snappy_xerial_pack(plain, n, packed, BUF_BYTES, 1 << 20);
	st_put_be32(packed + 16, (uint32_t)c);
	CU_ASSERT_EQUAL(check(mk_batch(SNAPPY, 3, 2, packed, c)), -EBADMSG);
	c = snappy_xerial_pack(plain, n, packed, BUF_BYTES, 1 << 20);
	memset(packed + 21, 0xff, c - 21);
	CU_ASSERT_EQUAL(check(mk_batch(SNAPPY, 3, 2, packed, c)), -EBADMSG);
	/* zstd: a legacy (v0.5) frame, and a good frame followed by a legacy one or by junk. */
	c = zstd_pack(plain, n, packed, BUF_BYTES, false);
	packed[0] = 0x25;
	CU_ASSERT_EQUAL(check(mk_batch(ZSTD, 3, 2, packed, c)), -EBADMSG);
	size_t half = n / 2;
	c = zstd_pack(plain, half, packed, BUF_BYTES, false);
	size_t c2 = zstd_pack(plain + half, n - half, packed + c, BUF_BYTES - c, false);
	CU_ASSERT_EQUAL(check(mk_batch(ZSTD, 3, 2, packed, c + c2)), 0);
	packed[c] = 0x25;
	CU_ASSERT_EQUAL(check(mk_batch(ZSTD, 3, 2, packed, c + c2)), -EBADMSG);
	memset(packed + c, 0, c2);
	CU_ASSERT_EQUAL(check(mk_batch(ZSTD, 3, 2, packed, c + c2)), -EBADMSG);
	/* A codec id past zstd. */
	CU_ASSERT_EQUAL(check(mk_batch(5, 3, 2, plain, n)), -ENOTSUP);
}

static void test_truncated(void)
{
	for (int codec = GZIP; codec <= ZSTD; codec++) {
		size_t n = recs(50, 200), c = pack(codec, n);
		/* Cut anywhere: never accepted (snappy's length prefix says what is missing). */
		for (size_t cut = 1; cut < c; cut += c / 17 + 1)
			CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 50, 49, packed, cut)), -EBADMSG);
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 50, 49, packed, c - 1)), -EBADMSG);
	}
	/* A flipped bit in an lz4 frame's header checksum (magic 4, FLG, BD, HC). */
	size_t n = recs(5, 20), c = pack(LZ4, n);
	CU_ASSERT_EQUAL(check(mk_batch(LZ4, 5, 4, packed, c)), 0);
	packed[6] ^= 0x01;
	CU_ASSERT_EQUAL(check(mk_batch(LZ4, 5, 4, packed, c)), -EBADMSG);
}

static void test_wrong_count(void)
{
	for (int codec = NONE; codec <= ZSTD; codec++) {
		size_t n = recs(10, 30), c = pack(codec, n);
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 11, 10, packed, c)), -EBADMSG); /* fewer than said */
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 9, 8, packed, c)), -EBADMSG);   /* more than said */
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 10, 9, packed, c)), 0);
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 10, 10, packed, c)), -EBADMSG); /* delta != count - 1 */
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 10, 8, packed, c)), -EBADMSG);
	}
	/* No records at all (Kafka: "invalid reported count"), with either delta. */
	struct st_recs_check v;
	struct st_batch_hdr h = { .records_count = 0, .last_offset_delta = 0 };
	CU_ASSERT_EQUAL(st_recs_check_init(&v, &h), -EBADMSG);
	h.last_offset_delta = -1;
	CU_ASSERT_EQUAL(st_recs_check_init(&v, &h), -EBADMSG);
	CU_ASSERT_EQUAL(st_recs_check_end(&v), -EBADMSG);
}

static void test_bomb(void)
{
	/* One record whose value is all one letter: compresses ~1000x, decompresses past the limit. */
	size_t n = recs(1, BIG - 64);
	for (int codec = GZIP; codec <= ZSTD; codec++) {
		size_t c = pack(codec, n);
		CU_ASSERT(c < n / 15);   /* snappy's best is ~21x */
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 1, 0, packed, c)), -EMSGSIZE);
		CU_ASSERT(st_codec_last_bytes(z) <= ST_BATCH_DECOMPRESSED_BYTES_MAX);
	}
	/* Xerial blocks that each fit but add up past the limit. */
	size_t c = snappy_xerial_pack(plain, n, packed, BUF_BYTES, 4 << 20);
	CU_ASSERT_EQUAL(check(mk_batch(SNAPPY, 1, 0, packed, c)), -EMSGSIZE);
	/* A caller's smaller budget (what is left of a request's) bounds the work the same way. */
	n = recs(100, 1000);
	for (int codec = GZIP; codec <= ZSTD; codec++) {
		size_t c = pack(codec, n);
		max_bytes = (uint32_t)n - 1;
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 100, 99, packed, c)), -EMSGSIZE);
		CU_ASSERT(st_codec_last_bytes(z) < n);
		max_bytes = 0;
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 100, 99, packed, c)), -EMSGSIZE);
		max_bytes = (uint32_t)n;
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 100, 99, packed, c)), 0);
		CU_ASSERT_EQUAL(st_codec_last_bytes(z), n);
		max_bytes = ST_BATCH_DECOMPRESSED_BYTES_MAX;
	}
	/* Just under the limit is fine. */
	n = recs(1, ST_BATCH_DECOMPRESSED_BYTES_MAX - 64);
	CU_ASSERT(n <= ST_BATCH_DECOMPRESSED_BYTES_MAX);
	for (int codec = GZIP; codec <= ZSTD; codec++)
		CU_ASSERT_EQUAL(check(mk_batch((int16_t)codec, 1, 0, packed, pack(codec, n))), 0);
}

/* Records section builders for the framing cases below. */
static size_t put_rec(uint8_t *p, int64_t len, int64_t off, int64_t klen, int64_t vlen, int64_t hc)
{
	uint8_t body[128];
	size_t b = 0;
	body[b++] = 0;
	b += (size_t)st_varint_put(body + b, 0);
	b += (size_t)st_varint_put(body + b, off);
	b += (size_t)st_varint_put(body + b, klen);
	for (int64_t i = 0; i < klen; i++)
		body[b++] = 'k';
	b += (size_t)st_varint_put(body + b, vlen);
	for (int64_t i = 0; i < vlen; i++)
		body[b++] = 'v';
	b += (size_t)st_varint_put(body + b, hc);
	size_t n = (size_t)st_varint_put(p, len < 0 ? (int64_t)b : len);
	memcpy(p + n, body, b);
	return n + b;
}

static int plain_check(const uint8_t *r, size_t n, int count)
{
	return check(mk_batch(NONE, count, count - 1, r, n));
}

static void test_record_framing(void)
{
	uint8_t r[512];
	size_t n;

	n = put_rec(r, -1, 0, 1, 1, 0);
	CU_ASSERT_EQUAL(plain_check(r, n, 1), 0);
	n = put_rec(r, -1, 0, -1, -1, 0);              /* null key and value */
	CU_ASSERT_EQUAL(plain_check(r, n, 1), 0);
	n = put_rec(r, -1, 0, -2, 1, 0);               /* key length -2 */
	CU_ASSERT_EQUAL(plain_check(r, n, 1), -EBADMSG);
	n = put_rec(r, -1, 0, 1, -3, 0);
	CU_ASSERT_EQUAL(plain_check(r, n, 1), -EBADMSG);
	n = put_rec(r, 40, 0, 1, 1, 0);                /* length past the section */
	CU_ASSERT_EQUAL(plain_check(r, n, 1), -EBADMSG);
	n = put_rec(r, 5, 0, 1, 1, 0);                 /* length shorter than the fields */
	CU_ASSERT_EQUAL(plain_check(r, n, 1), -EBADMSG);
	n = put_rec(r, 0, 0, 1, 1, 0);
	CU_ASSERT_EQUAL(plain_check(r, n, 1), -EBADMSG);
	n = put_rec(r, -1, 1, 1, 1, 0);                /* first offset delta 1 */
	CU_ASSERT_EQUAL(plain_check(r, n, 1), -EBADMSG);
	n = put_rec(r, -1, 0, 1, 1, 0);
	n += put_rec(r + n, -1, 0, 1, 1, 0);           /* offset deltas 0, 0 */
	CU_ASSERT_EQUAL(plain_check(r, n, 2), -EBADMSG);
	n = put_rec(r, -1, 0, 1, 1, 0);
	n += put_rec(r + n, -1, 2, 1, 1, 0);           /* 0, 2: not within lastOffsetDelta 1 */
	CU_ASSERT_EQUAL(plain_check(r, n, 2), -EBADMSG);
	n = put_rec(r, -1, 0, 1, 1, -1);               /* negative header count */
	CU_ASSERT_EQUAL(plain_check(r, n, 1), -EBADMSG);
	n = put_rec(r, -1, 0, 1, 1, 1);                /* one header announced, none there */
	CU_ASSERT_EQUAL(plain_check(r, n, 1), -EBADMSG);
	n = put_rec(r, -1, 0, 1, 1, 0);
	r[n++] = 0;                                    /* a byte after the last record */
	CU_ASSERT_EQUAL(plain_check(r, n, 1), -EBADMSG);

	/* A record with headers: key "h" value "x", key "" value null; and a negative header key. */
	uint8_t body[64];
	size_t b = 0;
	body[b++] = 0;
	b += (size_t)st_varint_put(body + b, -5);      /* timestamp delta may be negative */
	b += (size_t)st_varint_put(body + b, 0);
	b += (size_t)st_varint_put(body + b, -1);
	b += (size_t)st_varint_put(body + b, 0);
	b += (size_t)st_varint_put(body + b, 2);
	b += (size_t)st_varint_put(body + b, 1);
	body[b++] = 'h';
	b += (size_t)st_varint_put(body + b, 1);
	body[b++] = 'x';
	size_t second = b;
	b += (size_t)st_varint_put(body + b, 0);
	b += (size_t)st_varint_put(body + b, -1);
	n = (size_t)st_varint_put(r, (int64_t)b);
	memcpy(r + n, body, b);
	CU_ASSERT_EQUAL(plain_check(r, n + b, 1), 0);
	r[n + second] = 1;                             /* zig-zag 1 = -1: a negative header key length */
	CU_ASSERT_EQUAL(plain_check(r, n + b, 1), -EBADMSG);

	/* Varints: a 6-byte int32 field, a 5-byte one carrying bits past 32, an unended one. */
	n = 0;
	r[n++] = 10;   /* length 5 */
	r[n++] = 0;
	r[n++] = 0;
	memcpy(r + n, "\x80\x80\x80\x80\x80\x00", 6);  /* offset delta 0 in 6 bytes */
	n += 6;
	r[0] = (uint8_t)((n - 1) << 1);
	CU_ASSERT_EQUAL(plain_check(r, n, 1), -EBADMSG);
	memcpy(r, "\x80\x80\x80\x80\x10", 5);          /* a record length with bit 32 set */
	CU_ASSERT_EQUAL(plain_check(r, 5, 1), -EBADMSG);
	memcpy(r, "\x80\x80", 2);
	CU_ASSERT_EQUAL(plain_check(r, 2, 1), -EBADMSG);
}

/* The checker gives the same answer however the section is split into feeds. */
static void test_split_feeds(void)
{
	size_t n = recs(20, 7);
	struct st_batch_hdr h = { .records_count = 20, .last_offset_delta = 19 };
	for (size_t step = 1; step <= 9; step++) {
		for (int cut_last = 0; cut_last <= 1; cut_last++) {
			struct st_recs_check v;
			size_t len = n - (size_t)cut_last;
			CU_ASSERT_EQUAL_FATAL(st_recs_check_init(&v, &h), 0);
			int rc = 0;
			for (size_t i = 0; i < len && rc == 0; i += step)
				rc = st_recs_check_feed(&v, plain + i, len - i < step ? len - i : step);
			CU_ASSERT_EQUAL(rc, 0);
			CU_ASSERT_EQUAL(st_recs_check_end(&v), cut_last ? -EBADMSG : 0);
		}
	}
}

/* st_codec_find_time on a batch of `batch` whose first timestamp is set to first_ts. */
static int find_time(size_t total, int64_t first_ts, int64_t target, int32_t *delta, int64_t *ts)
{
	struct st_batch_hdr h;
	st_put_be64(batch + ST_BATCH_OFF_FIRST_TIMESTAMP, (uint64_t)first_ts);
	CU_ASSERT_EQUAL_FATAL(st_batch_parse(batch, total, &h), (int)total);
	allocs = 0;
	counting = true;
	int rc = st_codec_find_time(z, batch, total, &h, target, max_bytes, delta, ts);
	counting = false;
	CU_ASSERT_EQUAL(allocs, 0);
	return rc;
}

/* ListOffsets by time within a batch: the first record whose timestamp (first + delta) reaches the
 * target, through every codec, with deltas that fall as well as rise. */
static void test_find_time(void)
{
	for (int codec = NONE; codec <= ZSTD; codec++) {
		size_t n = recs(1000, 100), c = pack(codec, n);   /* record i: timestamp delta i */
		size_t total = mk_batch((int16_t)codec, 1000, 999, packed, c);
		int32_t d = -7;
		int64_t ts = -7;
		CU_ASSERT_EQUAL(find_time(total, 5000, 0, &d, &ts), 0);
		CU_ASSERT(d == 0 && ts == 5000);
		CU_ASSERT_EQUAL(find_time(total, 5000, 5001, &d, &ts), 0);
		CU_ASSERT(d == 1 && ts == 5001);
		CU_ASSERT_EQUAL(find_time(total, 5000, 5777, &d, &ts), 0);
		CU_ASSERT(d == 777 && ts == 5777);
		CU_ASSERT_EQUAL(find_time(total, 5000, 5999, &d, &ts), 0);
		CU_ASSERT(d == 999 && ts == 5999);
		CU_ASSERT_EQUAL(find_time(total, 5000, 6000, &d, &ts), -ENOENT);   /* none reaches it */
		CU_ASSERT_EQUAL(find_time(total, INT64_MAX - 500, INT64_MAX, &d, &ts), 0);   /* saturates */
		CU_ASSERT(d == 500 && ts == INT64_MAX);
	}
	/* Deltas out of order: 0, 30, 10, 40, 20. The first in offset order that reaches, not the least. */
	static const int64_t deltas[] = { 0, 30, 10, 40, 20 };
	uint8_t *p = plain;
	for (int i = 0; i < 5; i++) {
		uint8_t body[32];
		size_t b = 0;
		body[b++] = 0;
		b += (size_t)st_varint_put(body + b, deltas[i]);
		b += (size_t)st_varint_put(body + b, i);
		b += (size_t)st_varint_put(body + b, -1);
		b += (size_t)st_varint_put(body + b, -1);
		b += (size_t)st_varint_put(body + b, 0);
		p += st_varint_put(p, (int64_t)b);
		memcpy(p, body, b);
		p += b;
	}
	for (int codec = NONE; codec <= ZSTD; codec++) {
		size_t c = pack(codec, (size_t)(p - plain));
		size_t total = mk_batch((int16_t)codec, 5, 4, packed, c);
		int32_t d;
		int64_t ts;
		CU_ASSERT_EQUAL(find_time(total, 100, 115, &d, &ts), 0);
		CU_ASSERT(d == 1 && ts == 130);
		CU_ASSERT_EQUAL(find_time(total, 100, 135, &d, &ts), 0);
		CU_ASSERT(d == 3 && ts == 140);
		CU_ASSERT_EQUAL(find_time(total, 100, 141, &d, &ts), -ENOENT);
	}
	/* A malformed record before the one sought is an error, not an answer. */
	size_t n = recs(3, 5);
	plain[n - 1] = 7;   /* the last record's header count: past its end */
	int32_t d;
	int64_t ts;
	CU_ASSERT_EQUAL(find_time(mk_batch(NONE, 3, 2, plain, n), 0, 2, &d, &ts), -EBADMSG);
	CU_ASSERT_EQUAL(find_time(mk_batch(NONE, 3, 2, plain, n), 0, 1, &d, &ts), 0);   /* found before it */
	CU_ASSERT(d == 1 && ts == 1);
}

/* A seek fed in pieces finds the same record, whatever the split (the byte-at-a-time path). */
static void test_find_time_split(void)
{
	size_t n = recs(20, 7);
	struct st_batch_hdr h = { .records_count = 20, .last_offset_delta = 19 };
	for (size_t step = 1; step <= 9; step++) {
		for (int64_t target = 0; target <= 20; target += 4) {
			struct st_recs_check v;
			CU_ASSERT_EQUAL_FATAL(st_recs_check_init(&v, &h), 0);
			st_recs_seek_time(&v, 1000, 1000 + target);
			int rc = 0;
			for (size_t i = 0; i < n && rc == 0; i += step)
				rc = st_recs_check_feed(&v, plain + i, n - i < step ? n - i : step);
			if (target < 20) {
				CU_ASSERT_EQUAL(rc, ST_RECS_FOUND);
				CU_ASSERT(v.found_delta == target && v.found_ts == 1000 + target);
			} else {
				CU_ASSERT_EQUAL(rc, 0);
				CU_ASSERT_EQUAL(st_recs_check_end(&v), 0);
			}
		}
	}
}

int main(void)
{
	CU_pSuite s;

	plain = malloc(BUF_BYTES);
	packed = malloc(BUF_BYTES);
	batch = malloc(BUF_BYTES);
	if (!plain || !packed || !batch || st_codec_create(&z) < 0)
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("codec", NULL, NULL);
	CU_add_test(s, "the allocation counter counts", test_alloc_counter);
	CU_add_test(s, "valid batches of each codec", test_valid_each_codec);
	CU_add_test(s, "xerial/raw snappy, lz4 block sizes, zstd streams, gzip members", test_valid_framings);
	CU_add_test(s, "garbage flagged compressed", test_garbage);
	CU_add_test(s, "truncated streams", test_truncated);
	CU_add_test(s, "record count vs header", test_wrong_count);
	CU_add_test(s, "decompression bombs", test_bomb);
	CU_add_test(s, "record framing", test_record_framing);
	CU_add_test(s, "split feeds", test_split_feeds);
	CU_add_test(s, "find a record by time, each codec", test_find_time);
	CU_add_test(s, "find a record by time, split feeds", test_find_time_split);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	st_codec_destroy(z);
	free(plain);
	free(packed);
	free(batch);
	return failed ? 1 : 0;
}
