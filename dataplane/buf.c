/*
 * buf.c - per-core buffer pool in power-of-two size classes.
 *
 * Frames, response buffers and fetch buffers come from here. A buffer goes
 * back to the free list of the core that frees it; by the rule that the
 * allocating core frees (buffers lent to another core come back in the
 * reply), that is the core it came from. The lists fill up during warm-up
 * and then serve the data path without malloc; each class keeps at most
 * DP_BUF_CACHE_BYTES of idle memory.
 *
 * Under AddressSanitizer (sluiced-asan) the bytes past the size asked for
 * and whole buffers on the free lists are poisoned, so an overrun inside a
 * size class or a use after dp_buf_put is reported as if the buffer were a
 * malloc of its own.
 */
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "core.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define BUF_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define BUF_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define BUF_POISON(p, n)   ((void)(p), (void)(n))
#define BUF_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define DP_BUF_MIN_SHIFT   8                   /* 256 B */
#define DP_BUF_MAX_SHIFT   30                  /* 1 GiB */
#define DP_BUF_CLASSES     (DP_BUF_MAX_SHIFT - DP_BUF_MIN_SHIFT + 1)
#define DP_BUF_CACHE_BYTES (64u << 20)         /* idle bytes kept per class */
#define DP_BUF_HDR         16                  /* keeps payload 16-byte aligned */

struct buf_hdr {
	struct buf_hdr *next;
	uint32_t cls;
	uint32_t magic;
};
_Static_assert(sizeof(struct buf_hdr) <= DP_BUF_HDR, "header fits");
#define DP_BUF_MAGIC 0x5b0ffe12u

/* One per thread (core). */
static _Thread_local struct {
	struct buf_hdr *free[DP_BUF_CLASSES];
	uint32_t nfree[DP_BUF_CLASSES];
} pool;

static uint32_t class_of(size_t bytes)
{
	uint32_t shift = DP_BUF_MIN_SHIFT;
	while (((size_t)1 << shift) < bytes)
		shift++;
	return shift - DP_BUF_MIN_SHIFT;
}

void *dp_buf_get(size_t bytes)
{
	if (bytes > ((size_t)1 << DP_BUF_MAX_SHIFT))
		abort();   /* callers bound sizes by max frame and fetch limits */
	uint32_t cls = class_of(bytes);
	struct buf_hdr *h = pool.free[cls];
	if (h) {
		pool.free[cls] = h->next;
		pool.nfree[cls]--;
	} else {
		h = malloc(DP_BUF_HDR + ((size_t)1 << (cls + DP_BUF_MIN_SHIFT)));
		if (!h)
			abort();   /* out of memory on the data path: nothing sane to do */
		h->cls = cls;
	}
	h->magic = DP_BUF_MAGIC;
	uint8_t *p = (uint8_t *)h + DP_BUF_HDR;
	size_t cap = (size_t)1 << (cls + DP_BUF_MIN_SHIFT);
	BUF_UNPOISON(p, bytes);
	BUF_POISON(p + bytes, cap - bytes);
	return p;
}

void dp_buf_put(void *p)
{
	if (!p)
		return;
	struct buf_hdr *h = (struct buf_hdr *)((uint8_t *)p - DP_BUF_HDR);
	assert(h->magic == DP_BUF_MAGIC);
	h->magic = 0;
	uint32_t cls = h->cls;
	size_t size = (size_t)1 << (cls + DP_BUF_MIN_SHIFT);
	if ((pool.nfree[cls] + 1) * size > DP_BUF_CACHE_BYTES && pool.nfree[cls] > 0) {
		BUF_UNPOISON(p, size);
		free(h);
		return;
	}
	BUF_POISON(p, size);
	h->next = pool.free[cls];
	pool.free[cls] = h;
	pool.nfree[cls]++;
}

void dp_buf_drain(void)
{
	for (uint32_t i = 0; i < DP_BUF_CLASSES; i++)
		while (pool.free[i]) {
			struct buf_hdr *h = pool.free[i];
			pool.free[i] = h->next;
			BUF_UNPOISON((uint8_t *)h + DP_BUF_HDR, (size_t)1 << (i + DP_BUF_MIN_SHIFT));
			free(h);
		}
	memset(&pool, 0, sizeof(pool));
}
