/*
 * buf.c - per-core buffer pool in power-of-two size classes.
 *
 * Frames, response buffers and fetch buffers come from here. A buffer goes
 * back to the free list of the core that frees it; by the rule that the
 * allocating core frees (buffers lent to another core come back in the
 * reply), that is the core it came from. The lists fill up during warm-up
 * and then serve the data path without malloc; each class keeps at most
 * DP_BUF_CLASS_IDLE_BYTES of idle memory and all classes together
 * DP_BUF_IDLE_BYTES_MAX (dp_limits.h), so what a burst of large requests
 * left behind goes back to the allocator instead of staying resident.
 *
 * Under AddressSanitizer (sluiced-asan) there is no pool: every buffer is a
 * malloc of exactly the size asked for and dp_buf_put frees it, so ASan's
 * redzones and quarantine catch an overrun past the size asked for and a
 * use after dp_buf_put, which a pooled, rounded-up buffer would hide.
 */
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "loop.h"

#if defined(__SANITIZE_ADDRESS__)
#define DP_BUF_EXACT 1
#else
#define DP_BUF_EXACT 0
#endif

#define DP_BUF_MIN_SHIFT   8                   /* 256 B */
#define DP_BUF_MAX_SHIFT   30                  /* DP_BUF_MAX_BYTES */
#define DP_BUF_CLASSES     (DP_BUF_MAX_SHIFT - DP_BUF_MIN_SHIFT + 1)
#define DP_BUF_HDR         16                  /* keeps payload 16-byte aligned */

struct buf_hdr {
	struct buf_hdr *next;
	uint32_t cls;
	uint32_t magic;
};
_Static_assert(sizeof(struct buf_hdr) <= DP_BUF_HDR, "header fits");
_Static_assert((1ull << DP_BUF_MAX_SHIFT) == DP_BUF_MAX_BYTES, "largest class");
#define DP_BUF_MAGIC 0x5b0ffe12u

/* One per thread (core). */
static _Thread_local struct {
	struct buf_hdr *free[DP_BUF_CLASSES];
	uint32_t nfree[DP_BUF_CLASSES];
	uint64_t idle_bytes;          /* in all free lists */
} pool;

static uint32_t class_of(size_t bytes)
{
	uint32_t shift = DP_BUF_MIN_SHIFT;
	while (((size_t)1 << shift) < bytes)
		shift++;
	return shift - DP_BUF_MIN_SHIFT;
}

_Static_assert(DP_BUF_MAX_BYTES == (size_t)1 << DP_BUF_MAX_SHIFT, "one name for the largest class");

void *dp_buf_try_get(size_t bytes)
{
	if (bytes > DP_BUF_MAX_BYTES)
		return NULL;
	uint32_t cls = class_of(bytes);
	struct buf_hdr *h = DP_BUF_EXACT ? NULL : pool.free[cls];
	if (DP_BUF_EXACT) {
		h = malloc(DP_BUF_HDR + bytes);
		if (!h)
			return NULL;
		h->cls = cls;
	} else if (h) {
		pool.free[cls] = h->next;
		pool.nfree[cls]--;
		pool.idle_bytes -= (size_t)1 << (cls + DP_BUF_MIN_SHIFT);
	} else {
		h = malloc(DP_BUF_HDR + ((size_t)1 << (cls + DP_BUF_MIN_SHIFT)));
		if (!h)
			return NULL;
		h->cls = cls;
	}
	h->magic = DP_BUF_MAGIC;
	return (uint8_t *)h + DP_BUF_HDR;
}

void dp_buf_put(void *p)
{
	if (!p)
		return;
	struct buf_hdr *h = (struct buf_hdr *)((uint8_t *)p - DP_BUF_HDR);
	assert(h->magic == DP_BUF_MAGIC);
	h->magic = 0;
	if (DP_BUF_EXACT) {
		free(h);
		return;
	}
	uint32_t cls = h->cls;
	size_t size = (size_t)1 << (cls + DP_BUF_MIN_SHIFT);
	if ((pool.nfree[cls] + 1) * size > DP_BUF_CLASS_IDLE_BYTES || pool.idle_bytes + size > DP_BUF_IDLE_BYTES_MAX) {
		free(h);
		return;
	}
	h->next = pool.free[cls];
	pool.free[cls] = h;
	pool.nfree[cls]++;
	pool.idle_bytes += size;
}

void dp_buf_drain(void)
{
	for (uint32_t i = 0; i < DP_BUF_CLASSES; i++)
		while (pool.free[i]) {
			struct buf_hdr *h = pool.free[i];
			pool.free[i] = h->next;
			free(h);
		}
	memset(&pool, 0, sizeof(pool));
}
