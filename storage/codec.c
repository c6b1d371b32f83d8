/*
 * codec.c - per-core decompression for the produce-time records check
 * (codec.h). zlib and LZ4F allocate their states through a fixed pool of
 * slots set aside at start-up; zstd gets a static context in a workspace;
 * snappy's C API allocates nothing.
 */
#include "codec.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define LZ4F_STATIC_LINKING_ONLY     /* LZ4F_createDecompressionContext_advanced: our allocator */
#include <lz4frame.h>
#include <snappy-c.h>
#define ZSTD_STATIC_LINKING_ONLY     /* ZSTD_initStaticDCtx, ZSTD_d_stableOutBuffer */
#include <zstd.h>
#include <zstd_errors.h>
#include <zlib.h>

#include "batch.h"
#include "records.h"

/*
 * A fixed pool of memory slots for a codec's own allocations (its state and
 * its buffers); a request takes the smallest free slot that holds it. zlib
 * asks for its inflate state (~7 KiB) once and its 32 KiB window on first
 * use, then keeps both across inflateReset. LZ4F asks for its context, then
 * per frame an input and an output buffer (block size + 4, block size +
 * 128 KiB for linked blocks), freed and asked again only when a frame needs
 * bigger ones: a slot each, sized for the largest block, always fits.
 */
#define CODEC_POOL_SLOTS 3
#define ZLIB_SLOT_BYTES (64u << 10)
#define LZ4_CTX_SLOT_BYTES (16u << 10)
#define LZ4_BUF_SLOT_BYTES (ST_LZ4_BLOCK_BYTES_MAX + (128u << 10) + 64)
/* Xerial snappy framing: magic, version, compatible version; then int32 BE block lengths. */
#define XERIAL_HEADER_BYTES 16
static const uint8_t xerial_magic[8] = { 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0 };
/* A zstd context that keeps no window (its output buffer is stable): inputs are staged a block at a time. */
#define ZSTD_WORKSPACE_WINDOW_BYTES (128u << 10)
/* Gzip member magic (RFC 1952). */
#define GZIP_ID1 0x1f
#define GZIP_ID2 0x8b

struct codec_pool {
	uint8_t *slot[CODEC_POOL_SLOTS];
	size_t bytes[CODEC_POOL_SLOTS];
	bool used[CODEC_POOL_SLOTS];
	uint32_t n;
	uint32_t failed;            /* requests that found no slot (a sizing bug: see codec.h -ENOMEM) */
};

/* One NIC core's decompressors. Locality: the core that created it. */
struct st_codec {
	struct codec_pool zpool, lz4pool;
	z_stream zs;
	bool zs_ready;
	LZ4F_dctx *lz4;
	ZSTD_DCtx *zstd;
	void *zstd_ws;
	uint8_t *window;            /* [ST_CODEC_WINDOW_BYTES] gzip and lz4 output */
	uint8_t *scratch;           /* [ST_BATCH_DECOMPRESSED_BYTES_MAX] snappy blocks, zstd frames */
	uint64_t last_bytes;
	uint32_t max_bytes;         /* this batch's limit (st_codec_check_batch) */
};

static void *pool_alloc(struct codec_pool *p, size_t n)
{
	int best = -1;

	for (uint32_t i = 0; i < p->n; i++)
		if (!p->used[i] && p->bytes[i] >= n && (best < 0 || p->bytes[i] < p->bytes[best]))
			best = (int)i;
	if (best < 0) {
		p->failed++;
		return NULL;
	}
	p->used[best] = true;
	return p->slot[best];
}

static void pool_free(struct codec_pool *p, void *ptr)
{
	if (!ptr)
		return;
	for (uint32_t i = 0; i < p->n; i++)
		if (p->slot[i] == ptr) {
			assert(p->used[i]);
			p->used[i] = false;
			return;
		}
	assert(!"pointer not from this pool");
}

static int pool_init(struct codec_pool *p, const size_t *bytes, uint32_t n)
{
	assert(n <= CODEC_POOL_SLOTS);
	*p = (struct codec_pool){ .n = n };
	for (uint32_t i = 0; i < n; i++) {
		p->bytes[i] = bytes[i];
		/* 64-byte alignment is more than zlib, LZ4F or their SIMD paths ask for. */
		if (!(p->slot[i] = aligned_alloc(64, (bytes[i] + 63) & ~(size_t)63)))
			return -ENOMEM;
	}
	return 0;
}

static void pool_destroy(struct codec_pool *p)
{
	for (uint32_t i = 0; i < p->n; i++)
		free(p->slot[i]);
}

static voidpf zlib_alloc(voidpf opaque, uInt items, uInt size)
{
	return pool_alloc(opaque, (size_t)items * size);
}

static void zlib_free(voidpf opaque, voidpf ptr)
{
	pool_free(opaque, ptr);
}

static void *lz4_alloc(void *opaque, size_t n)
{
	return pool_alloc(opaque, n);
}

static void *lz4_calloc(void *opaque, size_t n)
{
	void *p = pool_alloc(opaque, n);
	if (p)
		memset(p, 0, n);
	return p;
}

static void lz4_free(void *opaque, void *ptr)
{
	pool_free(opaque, ptr);
}

int st_codec_create(struct st_codec **out)
{
	struct st_codec *z = calloc(1, sizeof(*z));
	if (!z)
		return -ENOMEM;
	static const size_t zslots[] = { ZLIB_SLOT_BYTES, ZLIB_SLOT_BYTES };
	static const size_t lslots[] = { LZ4_CTX_SLOT_BYTES, LZ4_BUF_SLOT_BYTES, LZ4_BUF_SLOT_BYTES };
	int rc = -ENOMEM;
	if (pool_init(&z->zpool, zslots, 2) < 0 || pool_init(&z->lz4pool, lslots, 3) < 0)
		goto fail;
	/* The scratch is touched only as far as a batch fills it. */
	if (!(z->window = malloc(ST_CODEC_WINDOW_BYTES)) || !(z->scratch = malloc(ST_BATCH_DECOMPRESSED_BYTES_MAX)))
		goto fail;

	z->zs.zalloc = zlib_alloc;
	z->zs.zfree = zlib_free;
	z->zs.opaque = &z->zpool;
	if (inflateInit2(&z->zs, 16 + MAX_WBITS) != Z_OK)   /* 16: gzip wrapper, not zlib's */
		goto fail;
	z->zs_ready = true;

	LZ4F_CustomMem mem = { .customAlloc = lz4_alloc, .customCalloc = lz4_calloc, .customFree = lz4_free,
	                       .opaqueState = &z->lz4pool };
	if (!(z->lz4 = LZ4F_createDecompressionContext_advanced(mem, LZ4F_VERSION)))
		goto fail;

	size_t ws = ZSTD_estimateDStreamSize(ZSTD_WORKSPACE_WINDOW_BYTES);
	if (!(z->zstd_ws = aligned_alloc(64, (ws + 63) & ~(size_t)63)) || !(z->zstd = ZSTD_initStaticDCtx(z->zstd_ws, ws)))
		goto fail;
	/* The output is the scratch, unchanged between calls: zstd decodes into it
	 * as its window, so any window a frame declares is fine; the scratch's
	 * size is what bounds the output. */
	if (ZSTD_isError(ZSTD_DCtx_setParameter(z->zstd, ZSTD_d_stableOutBuffer, 1)) ||
	    ZSTD_isError(ZSTD_DCtx_setParameter(z->zstd, ZSTD_d_windowLogMax, ZSTD_WINDOWLOG_MAX)))
		goto fail;
	*out = z;
	return 0;
fail:
	st_codec_destroy(z);
	return rc;
}

void st_codec_destroy(struct st_codec *z)
{
	if (!z)
		return;
	if (z->zs_ready)
		inflateEnd(&z->zs);
	if (z->lz4)
		LZ4F_freeDecompressionContext(z->lz4);
	free(z->zstd_ws);   /* a static context lives in its workspace */
	free(z->window);
	free(z->scratch);
	pool_destroy(&z->zpool);
	pool_destroy(&z->lz4pool);
	free(z);
}

uint64_t st_codec_last_bytes(const struct st_codec *z)
{
	return z->last_bytes;
}

/* Count n more decompressed bytes and check them; -EMSGSIZE past the limit. */
static int out_bytes(struct st_codec *z, struct st_recs_check *v, const uint8_t *p, size_t n)
{
	if (n > z->max_bytes - z->last_bytes)
		return -EMSGSIZE;
	z->last_bytes += n;
	return st_recs_check_feed(v, p, n);
}

static int check_gzip(struct st_codec *z, struct st_recs_check *v, const uint8_t *p, size_t n)
{
	z_stream *s = &z->zs;
	int rc;

	if (inflateReset(s) != Z_OK)
		return -EBADMSG;
	s->next_in = (Bytef *)p;
	s->avail_in = (uInt)n;
	for (;;) {
		s->next_out = z->window;
		s->avail_out = ST_CODEC_WINDOW_BYTES;
		int zr = inflate(s, Z_NO_FLUSH);
		if (zr == Z_MEM_ERROR)
			return -ENOMEM;
		if (zr != Z_OK && zr != Z_STREAM_END)
			return -EBADMSG;   /* corrupt, or Z_BUF_ERROR: the input ended inside a member */
		if ((rc = out_bytes(z, v, z->window, ST_CODEC_WINDOW_BYTES - s->avail_out)) != 0)
			return rc;
		if (zr == Z_STREAM_END) {
			/* Another member follows only if it starts like one. */
			if (s->avail_in < 2 || s->next_in[0] != GZIP_ID1 || s->next_in[1] != GZIP_ID2)
				return 0;
			const Bytef *next = s->next_in;
			uInt left = s->avail_in;
			if (inflateReset(s) != Z_OK)
				return -EBADMSG;
			s->next_in = (Bytef *)next;
			s->avail_in = left;
		}
	}
}

/* Decode one raw snappy block into the scratch and check it. */
static int snappy_block(struct st_codec *z, struct st_recs_check *v, const uint8_t *p, size_t n)
{
	size_t ulen;

	if (snappy_uncompressed_length((const char *)p, n, &ulen) != SNAPPY_OK)
		return -EBADMSG;
	/* The length is the block's own claim: refuse it before any work if it is too big. */
	if (ulen > z->max_bytes - z->last_bytes)
		return -EMSGSIZE;
	if (snappy_uncompress((const char *)p, n, (char *)z->scratch, &ulen) != SNAPPY_OK)
		return -EBADMSG;
	return out_bytes(z, v, z->scratch, ulen);
}

static int check_snappy(struct st_codec *z, struct st_recs_check *v, const uint8_t *p, size_t n)
{
	if (n < XERIAL_HEADER_BYTES || memcmp(p, xerial_magic, sizeof(xerial_magic)) != 0)
		return snappy_block(z, v, p, n);
	const uint8_t *end = p + n;
	p += XERIAL_HEADER_BYTES;
	while (p < end) {
		if (end - p < 4)
			return -EBADMSG;
		uint32_t blen = st_be32(p);
		p += 4;
		if (blen > (size_t)(end - p))
			return -EBADMSG;
		int rc = snappy_block(z, v, p, blen);
		if (rc != 0)
			return rc;   /* an error, or ST_RECS_FOUND */
		p += blen;
	}
	return 0;
}

static int check_lz4(struct st_codec *z, struct st_recs_check *v, const uint8_t *p, size_t n)
{
	const uint8_t *end = p + n;
	size_t hint = 1;
	uint32_t failed = z->lz4pool.failed;
	int rc;

	LZ4F_resetDecompressionContext(z->lz4);
	while (p < end) {
		size_t out = ST_CODEC_WINDOW_BYTES, in = (size_t)(end - p);
		hint = LZ4F_decompress(z->lz4, z->window, &out, p, &in, NULL);
		if (LZ4F_isError(hint))
			return z->lz4pool.failed != failed ? -ENOMEM : -EBADMSG;
		p += in;
		if ((rc = out_bytes(z, v, z->window, out)) != 0)
			return rc;
		if (hint == 0)
			return 0;   /* the frame ended: Kafka reads one, and so do we; the rest is ignored */
		if (in == 0 && out == 0)
			return -EBADMSG;   /* no progress: cannot happen with input left, but never spin */
	}
	/* The input ended inside a frame; LZ4F may still hold decoded bytes: drain them. */
	while (hint != 0) {
		size_t out = ST_CODEC_WINDOW_BYTES, in = 0;
		hint = LZ4F_decompress(z->lz4, z->window, &out, p, &in, NULL);
		if (LZ4F_isError(hint) || out == 0)
			return -EBADMSG;   /* truncated frame */
		if ((rc = out_bytes(z, v, z->window, out)) != 0)
			return rc;
	}
	return 0;
}

/*
 * A zstd frame or a skippable frame starts at p. Anything else, legacy
 * (v0.x) frames included, is refused here: libzstd would hand those to its
 * legacy decoders, which allocate and which a static context cannot use.
 */
static bool zstd_frame_start(const uint8_t *p, size_t n)
{
	if (n < 4)
		return false;
	uint32_t magic = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
	return magic == ZSTD_MAGICNUMBER || (magic & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START;
}

static int check_zstd(struct st_codec *z, struct st_recs_check *v, const uint8_t *p, size_t n)
{
	ZSTD_outBuffer out = { z->scratch, z->max_bytes, 0 };
	ZSTD_inBuffer in = { p, n, 0 };
	size_t fed = 0, hint = 0;   /* 0: at a frame's start */
	int rc;

	ZSTD_DCtx_reset(z->zstd, ZSTD_reset_session_only);
	/* Frames follow one another; skippable frames are passed over by zstd. */
	while (in.pos < in.size) {
		if (hint == 0 && !zstd_frame_start(p + in.pos, n - in.pos))
			return -EBADMSG;
		hint = ZSTD_decompressStream(z->zstd, &out, &in);
		if (ZSTD_isError(hint))
			return ZSTD_getErrorCode(hint) == ZSTD_error_dstSize_tooSmall ? -EMSGSIZE :
			       ZSTD_getErrorCode(hint) == ZSTD_error_memory_allocation ? -ENOMEM : -EBADMSG;
		/* Check what came out so far: a bad record stops the work early. */
		if ((rc = out_bytes(z, v, z->scratch + fed, out.pos - fed)) != 0)
			return rc;
		fed = out.pos;
		if (hint != 0 && out.pos == out.size)
			return -EMSGSIZE;   /* more to come and no room left */
	}
	/* hint != 0: the input ended inside a frame (or there was no frame at all). */
	return hint == 0 && in.size > 0 ? 0 : -EBADMSG;
}

/* The records of the batch through v (st_codec_check_batch's checks): 0, ST_RECS_FOUND, -errno. */
static int codec_feed(struct st_codec *z, struct st_recs_check *v, const uint8_t *batch, size_t len,
                      const struct st_batch_hdr *h, uint32_t max_bytes)
{
	const uint8_t *p = batch + ST_BATCH_HEADER_BYTES;
	size_t n = len - ST_BATCH_HEADER_BYTES;
	int codec = h->attributes & ST_BATCH_ATTR_COMPRESSION;

	assert(len >= ST_BATCH_HEADER_BYTES && len == (size_t)h->batch_length + 12);
	assert(max_bytes <= ST_BATCH_DECOMPRESSED_BYTES_MAX);
	if (codec == 0)
		return st_recs_check_feed(v, p, n);
	if (!z)
		return -ENOTSUP;
	z->last_bytes = 0;
	z->max_bytes = max_bytes;
	switch (codec) {
	case 1: return check_gzip(z, v, p, n);
	case 2: return check_snappy(z, v, p, n);
	case 3: return check_lz4(z, v, p, n);
	case ST_BATCH_CODEC_ZSTD: return check_zstd(z, v, p, n);
	default: return -ENOTSUP;
	}
}

int st_codec_check_batch(struct st_codec *z, const uint8_t *batch, size_t len, const struct st_batch_hdr *h,
                         uint32_t max_bytes)
{
	struct st_recs_check v;

	z->last_bytes = 0;
	if (st_recs_check_init(&v, h) < 0)
		return -EBADMSG;
	int rc = codec_feed(z, &v, batch, len, h, max_bytes);
	if (rc < 0)
		return rc;
	return st_recs_check_end(&v);
}

int st_codec_find_time(struct st_codec *z, const uint8_t *batch, size_t len, const struct st_batch_hdr *h,
                       int64_t target, uint32_t max_bytes, int32_t *offset_delta, int64_t *timestamp)
{
	struct st_recs_check v;

	if (st_recs_check_init(&v, h) < 0)
		return -EBADMSG;
	st_recs_seek_time(&v, h->first_timestamp, target);
	int rc = codec_feed(z, &v, batch, len, h, max_bytes);
	if (rc < 0)
		return rc;
	if (rc != ST_RECS_FOUND)
		return st_recs_check_end(&v) < 0 ? -EBADMSG : -ENOENT;
	*offset_delta = v.found_delta;
	*timestamp = v.found_ts;
	return 0;
}
