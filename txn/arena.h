/*
 * arena.h - a fixed region of memory reserved once at start-up and handed
 * out in power-of-two blocks of units (a buddy allocator), the one pool that
 * txn/ tables take memory from instead of malloc on a poll core:
 *   - per shard core, the producer tables and transaction indexes (pstate.c,
 *     lso.c, through htab.c), units of TXN_ARENA_BLOCK_MIN_BYTES, within the
 *     "producer and transaction state" budget item (--txn-state-mib);
 *   - on the control core, the transactions' partition and group lists
 *     (coord.c), units of a few list entries (--txn-partitions-max,
 *     --txn-groups-max), which grow in place when the blocks after them are
 *     free (txn_arena_grow), so a list growing in a full pool does not need
 *     its old block and the new one at once.
 * Lists and tables grow to a bound far above their usual size: a fixed slot
 * per owner at the bound would cost the bound times the owners; this costs
 * what they hold, rounded to a power of two, within one limit for all.
 * When the region has no block left an allocation returns NULL and the
 * caller refuses the request retriably (the owner before its append, the
 * coordinator with a retriable error).
 *
 * Blocks: unit_bytes << k for order k, each aligned to its size within the
 * region (in units from base); a free block merges with its free buddy of
 * the same order, so memory freed by one owner's shrinking or deleted table
 * is whole again for another's larger one. The order of every block is kept
 * in a byte per unit beside the region (no header in the block: a
 * power-of-two array takes exactly its block).
 *
 * Locality: one arena per owning core, used only by that core; no locks.
 * txn_arena_init and _fini are init-only (they allocate the region).
 */
#ifndef SLUICE_TXN_ARENA_H
#define SLUICE_TXN_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define TXN_ARENA_BLOCK_MIN_BYTES 64u   /* the shard core's unit (a table's smallest array) */
#define TXN_ARENA_UNIT_ALIGN      8u    /* units are rounded up to it: a free block holds its two links */
#define TXN_ARENA_ORDERS_MAX      40u   /* blocks of 1 .. 2^39 units: any region fits */

struct txn_arena_free;

struct txn_arena {
	uint8_t *base;                /* the region, bytes long */
	size_t unit_bytes;            /* the smallest block, a multiple of TXN_ARENA_UNIT_ALIGN */
	size_t units;                 /* the region's units */
	size_t bytes;                 /* units x unit_bytes */
	uint8_t *meta;                /* per unit, at a block's first: its order, | 0x80 when free */
	struct txn_arena_free *free[TXN_ARENA_ORDERS_MAX];   /* free blocks by order */
	size_t used;                  /* bytes in allocated blocks */
	size_t used_peak;
};

/* The bytes txn_arena_init(a, bytes, unit_bytes) allocates, the region and its
 * per-unit byte (the budget). */
size_t txn_arena_bytes(size_t bytes, size_t unit_bytes);
/* Reserve the region: bytes rounded down to whole units (at least one) of
 * unit_bytes (> 0, rounded up to TXN_ARENA_UNIT_ALIGN). 0 or -ENOMEM. */
int   txn_arena_init(struct txn_arena *a, size_t bytes, size_t unit_bytes);
void  txn_arena_fini(struct txn_arena *a);
/* A block of at least n bytes (n > 0), aligned to TXN_ARENA_UNIT_ALIGN, or NULL when none is free. Not zeroed. */
void *txn_arena_alloc(struct txn_arena *a, size_t n);
/*
 * Grow the block at p to hold n bytes in place if the blocks after it are
 * its free buddies up to that size: true (also when it already holds n),
 * else false and nothing changed (the caller allocates, copies and frees).
 */
bool  txn_arena_grow(struct txn_arena *a, void *p, size_t n);
/* p from txn_arena_alloc on a, or NULL. */
void  txn_arena_free(struct txn_arena *a, void *p);
/* The usable bytes of the block p was given (>= what was asked). */
size_t txn_arena_block_bytes(const struct txn_arena *a, const void *p);

static inline bool txn_arena_owns(const struct txn_arena *a, const void *p)
{
	return a && a->base && (const uint8_t *)p >= a->base && (const uint8_t *)p < a->base + a->bytes;
}

/*
 * The tables' growth: from the arena when they have one, else the heap
 * (tests, tools, the simulator, a coordinator's replay past its pool). A
 * shard table's first arrays come from the heap at partition open (the
 * partition's own fixed cost, in the budget's "partitions" item); everything
 * it grows to comes from the arena, so free gives each block back where it
 * came from.
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
