/*
 * bpool.h - a fixed buddy pool: one arena of `units` equal units, allocated
 * once, handed out in blocks of 2^k units (k <= max_order) and given back
 * whole. A freed block merges with its free buddy, so the arena does not
 * fragment into blocks too small for the next large request however lists
 * grow and end. It serves lists that grow to a bound far above their usual
 * size (a transaction's partitions: usually a few, at most TXN_PARTS_MAX):
 * a fixed slot per owner at the bound would cost the bound times the
 * owners; this costs what the lists hold, rounded to a power of two, within
 * one limit for all of them.
 *
 * No allocation after txn_bpool_init: a get that finds no free block large
 * enough answers NULL (the caller refuses the request retriably).
 *
 * Locality: whichever core owns the pool (the control core's coordinators);
 * no locks.
 */
#ifndef SLUICE_TXN_BPOOL_H
#define SLUICE_TXN_BPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TXN_BPOOL_ORDER_MAX 20u   /* blocks of at most 2^20 units */

struct txn_bpool {
	uint8_t *arena;               /* units x unit_bytes */
	size_t unit_bytes;
	uint32_t units, free_units;
	unsigned max_order;
	uint8_t *tag;                 /* per unit, meaningful at a block's head: order, | FREE if free */
	uint32_t *next, *prev;        /* per unit: a free head's links in its order's list */
	uint32_t head[TXN_BPOOL_ORDER_MAX + 1];   /* per order: first free block, UINT32_MAX none */
};

/* The bytes txn_bpool_init allocates (the budget). */
size_t txn_bpool_bytes(size_t unit_bytes, uint32_t units);
/* 0 or -ENOMEM. units >= 1, max_order <= TXN_BPOOL_ORDER_MAX. */
int  txn_bpool_init(struct txn_bpool *p, size_t unit_bytes, uint32_t units, unsigned max_order);
void txn_bpool_free(struct txn_bpool *p);
/* The smallest order whose block holds n units (n <= 2^max_order). */
unsigned txn_bpool_order_for(uint32_t n);
/* A block of 2^order units, or NULL if none is free (or order > max_order). Not zeroed. */
void *txn_bpool_get(struct txn_bpool *p, unsigned order);
/*
 * Grow the block at b to 2^order units in place if the units after it are
 * free (its buddies up to that order): true, else false and nothing changed
 * (get a new block, copy, put the old). Without it a list growing in a
 * full pool would hold its old block and the new one at once.
 */
bool txn_bpool_grow(struct txn_bpool *p, void *b, unsigned order);
/* Give back a block txn_bpool_get returned. */
void txn_bpool_put(struct txn_bpool *p, void *block);
/* Is b inside the arena (a block of this pool)? */
bool txn_bpool_owns(const struct txn_bpool *p, const void *b);
/* The order of the allocated block at b. */
unsigned txn_bpool_order(const struct txn_bpool *p, const void *b);

#endif
