/*
 * arena.h - a fixed region of memory reserved once at start-up and handed
 * out in power-of-two blocks (a buddy allocator): the per-core pool that a
 * shard core's producer tables and transaction indexes (pstate.c, lso.c,
 * through htab.c) take their arrays from, so that none of them mallocs on
 * the poll core and all of them together stay within one named, itemised
 * bound (the "producer and transaction state" budget item). When the region
 * has no block left, an allocation returns NULL and the table's reserve says
 * -ENOSPC; the owner then refuses the batch before its append.
 *
 * Blocks: TXN_ARENA_BLOCK_MIN_BYTES << k for order k, each aligned to its
 * size within the region; a free block merges with its free buddy of the
 * same order, so memory freed by one partition's shrinking or deleted table
 * is whole again for another's larger one. The order of every block is kept
 * in a byte per minimum block beside the region (no header in the block:
 * a power-of-two array takes exactly its block).
 *
 * Locality: one arena per shard core, used only by that core; no locks.
 * txn_arena_init and _fini are init-only (they allocate the region).
 */
#ifndef SLUICE_TXN_ARENA_H
#define SLUICE_TXN_ARENA_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define TXN_ARENA_BLOCK_MIN_BYTES 64u   /* smallest block (holds a free block's two links) */
#define TXN_ARENA_ORDERS_MAX 40u        /* block sizes 64 B .. 32 TiB: any region fits */

struct txn_arena_free;

struct txn_arena {
	uint8_t *base;                /* the region, bytes long */
	size_t bytes;                 /* a multiple of TXN_ARENA_BLOCK_MIN_BYTES */
	uint8_t *meta;                /* per minimum block, at a block's first: its order, | 0x80 when free */
	struct txn_arena_free *free[TXN_ARENA_ORDERS_MAX];   /* free blocks by order */
	size_t used;                  /* bytes in allocated blocks */
	size_t used_peak;
};

/* Reserve the region (bytes rounded down to TXN_ARENA_BLOCK_MIN_BYTES; at least one block). 0 or -ENOMEM. */
int   txn_arena_init(struct txn_arena *a, size_t bytes);
void  txn_arena_fini(struct txn_arena *a);
/* A block of at least n bytes (n > 0), aligned to TXN_ARENA_BLOCK_MIN_BYTES, or NULL when none is free. */
void *txn_arena_alloc(struct txn_arena *a, size_t n);
/* p from txn_arena_alloc on a, or NULL. */
void  txn_arena_free(struct txn_arena *a, void *p);
/* The usable bytes of the block p was given (>= what was asked). */
size_t txn_arena_block_bytes(const struct txn_arena *a, const void *p);

static inline int txn_arena_owns(const struct txn_arena *a, const void *p)
{
	return a && (const uint8_t *)p >= a->base && (const uint8_t *)p < a->base + a->bytes;
}

/*
 * The tables' growth: from the arena when they have one, else the heap
 * (tests, tools, the simulator). A table's first arrays come from the heap
 * at partition open (the partition's own fixed cost, in the budget's
 * "partitions" item); everything it grows to comes from the arena, so free
 * gives each block back where it came from.
 */
static inline void *txn_mem_alloc(struct txn_arena *a, size_t n)
{
	return a ? txn_arena_alloc(a, n) : malloc(n);
}

static inline void txn_mem_free(struct txn_arena *a, void *p)
{
	if (txn_arena_owns(a, p))
		txn_arena_free(a, p);
	else
		free(p);
}

#endif
