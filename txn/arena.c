/*
 * arena.c - the buddy allocator of arena.h.
 *
 * Invariants: the region is covered by blocks, each aligned (from base) to
 * its own size; meta[first minimum block of a block] holds its order, with
 * 0x80 set while it is on free[order]. A buddy's first minimum block is
 * always the first of some block (blocks are aligned and cover the region),
 * so its meta byte is current; the bytes inside a block are never read.
 * Locality: the owning shard core.
 */
#include "arena.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#define ARENA_FREE 0x80u

/* Links of a free block, kept in the block itself. */
struct txn_arena_free {
	struct txn_arena_free *prev, *next;
};

_Static_assert(sizeof(struct txn_arena_free) <= TXN_ARENA_BLOCK_MIN_BYTES, "a free block holds its links");

static size_t order_bytes(uint32_t k) { return (size_t)TXN_ARENA_BLOCK_MIN_BYTES << k; }
static size_t idx_of(const struct txn_arena *a, const void *p)
{
	return (size_t)((const uint8_t *)p - a->base) / TXN_ARENA_BLOCK_MIN_BYTES;
}

static void push_free(struct txn_arena *a, size_t idx, uint32_t k)
{
	struct txn_arena_free *f = (struct txn_arena_free *)(a->base + idx * TXN_ARENA_BLOCK_MIN_BYTES);
	f->prev = NULL;
	f->next = a->free[k];
	if (f->next)
		f->next->prev = f;
	a->free[k] = f;
	a->meta[idx] = (uint8_t)(k | ARENA_FREE);
}

static void unlink_free(struct txn_arena *a, struct txn_arena_free *f, uint32_t k)
{
	if (f->prev)
		f->prev->next = f->next;
	else
		a->free[k] = f->next;
	if (f->next)
		f->next->prev = f->prev;
}

/* Locality: init only. */
int txn_arena_init(struct txn_arena *a, size_t bytes)
{
	memset(a, 0, sizeof(*a));
	size_t nblk = bytes / TXN_ARENA_BLOCK_MIN_BYTES;
	if (!nblk)
		nblk = 1;
	a->bytes = nblk * TXN_ARENA_BLOCK_MIN_BYTES;
	/* Untouched pages of a large region stay virtual until a table uses them. */
	a->base = aligned_alloc(TXN_ARENA_BLOCK_MIN_BYTES, a->bytes);
	a->meta = calloc(nblk, 1);
	if (!a->base || !a->meta) {
		free(a->base);
		free(a->meta);
		memset(a, 0, sizeof(*a));
		return -ENOMEM;
	}
	/* Cover the region with the largest aligned blocks that fit, front to back. */
	for (size_t idx = 0; idx < nblk;) {
		uint32_t k = 0;
		while (k + 1 < TXN_ARENA_ORDERS_MAX && (idx & (((size_t)2 << k) - 1)) == 0 &&
		       idx + ((size_t)2 << k) <= nblk)
			k++;
		push_free(a, idx, k);
		idx += (size_t)1 << k;
	}
	return 0;
}

/* Locality: init only (shutdown). */
void txn_arena_fini(struct txn_arena *a)
{
	free(a->base);
	free(a->meta);
	memset(a, 0, sizeof(*a));
}

void *txn_arena_alloc(struct txn_arena *a, size_t n)
{
	uint32_t want = 0, k;

	assert(n > 0);
	while (want < TXN_ARENA_ORDERS_MAX && order_bytes(want) < n)
		want++;
	for (k = want; k < TXN_ARENA_ORDERS_MAX && !a->free[k]; k++)
		;
	if (k >= TXN_ARENA_ORDERS_MAX)
		return NULL;
	struct txn_arena_free *f = a->free[k];
	unlink_free(a, f, k);
	size_t idx = idx_of(a, f);
	while (k > want) { /* split: the upper half goes back free */
		k--;
		push_free(a, idx + ((size_t)1 << k), k);
	}
	a->meta[idx] = (uint8_t)want;
	a->used += order_bytes(want);
	if (a->used > a->used_peak)
		a->used_peak = a->used;
	return f;
}

size_t txn_arena_block_bytes(const struct txn_arena *a, const void *p)
{
	return order_bytes(a->meta[idx_of(a, p)] & ~ARENA_FREE);
}

void txn_arena_free(struct txn_arena *a, void *p)
{
	if (!p)
		return;
	assert((uint8_t *)p >= a->base && (uint8_t *)p < a->base + a->bytes);
	size_t idx = idx_of(a, p), nblk = a->bytes / TXN_ARENA_BLOCK_MIN_BYTES;
	uint32_t k = a->meta[idx];
	assert(!(k & ARENA_FREE) && ((uint8_t *)p - a->base) % order_bytes(k) == 0);   /* a double free */
	a->used -= order_bytes(k);
	while (k + 1 < TXN_ARENA_ORDERS_MAX) {
		size_t buddy = idx ^ ((size_t)1 << k);
		if (buddy + ((size_t)1 << k) > nblk || a->meta[buddy] != (k | ARENA_FREE))
			break;
		unlink_free(a, (struct txn_arena_free *)(a->base + buddy * TXN_ARENA_BLOCK_MIN_BYTES), k);
		idx = idx < buddy ? idx : buddy;
		k++;
	}
	push_free(a, idx, k);
}
