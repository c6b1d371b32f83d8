/*
 * arena.c - the buddy allocator of arena.h.
 *
 * Invariants: the region is covered by blocks, each aligned (in units from
 * base) to its own size; meta[first unit of a block] holds its order, with
 * 0x80 set while it is on free[order]. A buddy's first unit is always the
 * first of some block (blocks are aligned and cover the region), so its
 * meta byte is current; the bytes inside a block are never read. The region
 * need not be a power of two: it starts as the largest aligned blocks that
 * fit, and a block whose buddy would lie past the end never merges.
 * Locality: the owning core.
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

_Static_assert(sizeof(struct txn_arena_free) <= TXN_ARENA_UNIT_ALIGN * 2 &&
               _Alignof(struct txn_arena_free) <= TXN_ARENA_UNIT_ALIGN, "a free block holds its links");
_Static_assert(TXN_ARENA_BLOCK_MIN_BYTES % TXN_ARENA_UNIT_ALIGN == 0, "the shard unit is not rounded");

static size_t unit_of(size_t unit_bytes)
{
	size_t u = (unit_bytes + TXN_ARENA_UNIT_ALIGN - 1) / TXN_ARENA_UNIT_ALIGN * TXN_ARENA_UNIT_ALIGN;
	return u < sizeof(struct txn_arena_free) ? sizeof(struct txn_arena_free) : u;
}

static size_t order_bytes(const struct txn_arena *a, uint32_t k) { return a->unit_bytes << k; }
static size_t idx_of(const struct txn_arena *a, const void *p)
{
	return (size_t)((const uint8_t *)p - a->base) / a->unit_bytes;
}

/* The smallest order whose block holds n bytes, TXN_ARENA_ORDERS_MAX if none. */
static uint32_t order_for(const struct txn_arena *a, size_t n)
{
	uint32_t k = 0;
	while (k < TXN_ARENA_ORDERS_MAX && order_bytes(a, k) < n)
		k++;
	return k;
}

static void push_free(struct txn_arena *a, size_t idx, uint32_t k)
{
	struct txn_arena_free *f = (struct txn_arena_free *)(a->base + idx * a->unit_bytes);
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

static void took(struct txn_arena *a, size_t bytes)
{
	a->used += bytes;
	if (a->used > a->used_peak)
		a->used_peak = a->used;
}

size_t txn_arena_bytes(size_t bytes, size_t unit_bytes)
{
	size_t u = unit_of(unit_bytes), n = bytes / u;
	return (n ? n : 1) * (u + 1);
}

/* Locality: init only. */
int txn_arena_init(struct txn_arena *a, size_t bytes, size_t unit_bytes)
{
	assert(unit_bytes > 0);
	memset(a, 0, sizeof(*a));
	a->unit_bytes = unit_of(unit_bytes);
	a->units = bytes / a->unit_bytes;
	if (!a->units)
		a->units = 1;
	a->bytes = a->units * a->unit_bytes;
	/* Untouched pages of a large region stay virtual until a table uses them. */
	a->base = aligned_alloc(TXN_ARENA_BLOCK_MIN_BYTES,
	                        (a->bytes + TXN_ARENA_BLOCK_MIN_BYTES - 1) / TXN_ARENA_BLOCK_MIN_BYTES *
	                                TXN_ARENA_BLOCK_MIN_BYTES);
	a->meta = calloc(a->units, 1);
	if (!a->base || !a->meta) {
		free(a->base);
		free(a->meta);
		memset(a, 0, sizeof(*a));
		return -ENOMEM;
	}
	/* Cover the region with the largest aligned blocks that fit, front to back. */
	for (size_t idx = 0; idx < a->units;) {
		uint32_t k = 0;
		while (k + 1 < TXN_ARENA_ORDERS_MAX && (idx & (((size_t)2 << k) - 1)) == 0 &&
		       idx + ((size_t)2 << k) <= a->units)
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
	uint32_t want, k;

	assert(n > 0);
	want = order_for(a, n);
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
	took(a, order_bytes(a, want));
	return f;
}

size_t txn_arena_block_bytes(const struct txn_arena *a, const void *p)
{
	return order_bytes(a, a->meta[idx_of(a, p)] & ~ARENA_FREE);
}

bool txn_arena_grow(struct txn_arena *a, void *p, size_t n)
{
	assert(txn_arena_owns(a, p));
	size_t idx = idx_of(a, p);
	uint32_t k = a->meta[idx], want = order_for(a, n);
	assert(!(k & ARENA_FREE));
	if (want <= k)
		return true;
	if (want >= TXN_ARENA_ORDERS_MAX || (idx & (((size_t)1 << want) - 1)) || idx + ((size_t)1 << want) > a->units)
		return false;
	for (uint32_t j = k; j < want; j++)   /* each upper buddy whole and free */
		if (a->meta[idx + ((size_t)1 << j)] != (j | ARENA_FREE))
			return false;
	for (uint32_t j = k; j < want; j++) {
		size_t b = idx + ((size_t)1 << j);
		unlink_free(a, (struct txn_arena_free *)(a->base + b * a->unit_bytes), j);
		a->meta[b] = 0;   /* no longer a block's first */
	}
	a->meta[idx] = (uint8_t)want;
	took(a, order_bytes(a, want) - order_bytes(a, k));
	return true;
}

void txn_arena_free(struct txn_arena *a, void *p)
{
	if (!p)
		return;
	assert(txn_arena_owns(a, p));
	size_t idx = idx_of(a, p);
	uint32_t k = a->meta[idx];
	assert(!(k & ARENA_FREE) && (idx & (((size_t)1 << k) - 1)) == 0 &&
	       (size_t)((uint8_t *)p - a->base) % a->unit_bytes == 0);   /* a double free, or not a block */
	a->used -= order_bytes(a, k);
	while (k + 1 < TXN_ARENA_ORDERS_MAX) {
		size_t buddy = idx ^ ((size_t)1 << k);
		if (buddy + ((size_t)1 << k) > a->units || a->meta[buddy] != (k | ARENA_FREE))
			break;
		unlink_free(a, (struct txn_arena_free *)(a->base + buddy * a->unit_bytes), k);
		a->meta[idx > buddy ? idx : buddy] = 0;   /* no longer a block's first */
		idx = idx < buddy ? idx : buddy;
		k++;
	}
	push_free(a, idx, k);
}
