/*
 * bpool.c - the fixed buddy pool (bpool.h). A block of order k starts at a
 * unit index that is a multiple of 2^k; its buddy is index ^ 2^k. The
 * arena need not be a power of two: it starts as the largest aligned blocks
 * that fit, and a block whose buddy would lie past the end never merges.
 * Locality: the pool's owner core; no allocation but init.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bpool.h"

#define TAG_FREE 0x80u
#define NIL      UINT32_MAX

size_t txn_bpool_bytes(size_t unit_bytes, uint32_t units)
{
	return (size_t)units * (unit_bytes + 1 + 2 * sizeof(uint32_t));
}

static void push(struct txn_bpool *p, uint32_t o, unsigned k)
{
	p->tag[o] = (uint8_t)(TAG_FREE | k);
	p->prev[o] = NIL;
	p->next[o] = p->head[k];
	if (p->head[k] != NIL)
		p->prev[p->head[k]] = o;
	p->head[k] = o;
}

static void unlink_free(struct txn_bpool *p, uint32_t o, unsigned k)
{
	if (p->prev[o] != NIL)
		p->next[p->prev[o]] = p->next[o];
	else
		p->head[k] = p->next[o];
	if (p->next[o] != NIL)
		p->prev[p->next[o]] = p->prev[o];
	p->tag[o] = (uint8_t)k;
}

int txn_bpool_init(struct txn_bpool *p, size_t unit_bytes, uint32_t units, unsigned max_order)
{
	assert(units >= 1 && unit_bytes >= 1 && max_order <= TXN_BPOOL_ORDER_MAX);
	memset(p, 0, sizeof(*p));
	p->arena = calloc(units, unit_bytes);   /* pages are touched as blocks are used */
	p->tag = calloc(units, 1);
	p->next = malloc((size_t)units * sizeof(*p->next));
	p->prev = malloc((size_t)units * sizeof(*p->prev));
	if (!p->arena || !p->tag || !p->next || !p->prev) {
		txn_bpool_free(p);
		return -ENOMEM;
	}
	p->unit_bytes = unit_bytes;
	p->units = p->free_units = units;
	p->max_order = max_order;
	for (unsigned k = 0; k <= TXN_BPOOL_ORDER_MAX; k++)
		p->head[k] = NIL;
	for (uint32_t o = 0; o < units;) {
		unsigned k = max_order;
		while (k > 0 && ((o & ((1u << k) - 1)) || (uint64_t)o + (1u << k) > units))
			k--;
		push(p, o, k);
		o += 1u << k;
	}
	return 0;
}

void txn_bpool_free(struct txn_bpool *p)
{
	free(p->arena);
	free(p->tag);
	free(p->next);
	free(p->prev);
	memset(p, 0, sizeof(*p));
}

unsigned txn_bpool_order_for(uint32_t n)
{
	unsigned k = 0;
	while ((1ull << k) < n)
		k++;
	return k;
}

void *txn_bpool_get(struct txn_bpool *p, unsigned order)
{
	if (order > p->max_order)
		return NULL;
	unsigned k = order;
	while (k <= p->max_order && p->head[k] == NIL)
		k++;
	if (k > p->max_order)
		return NULL;
	uint32_t o = p->head[k];
	unlink_free(p, o, k);
	while (k > order) {   /* split: the upper half goes back free */
		k--;
		push(p, o + (1u << k), k);
	}
	p->tag[o] = (uint8_t)order;
	p->free_units -= 1u << order;
	return p->arena + (size_t)o * p->unit_bytes;
}

bool txn_bpool_owns(const struct txn_bpool *p, const void *b)
{
	const uint8_t *x = b;
	return p->arena && x >= p->arena && x < p->arena + (size_t)p->units * p->unit_bytes;
}

unsigned txn_bpool_order(const struct txn_bpool *p, const void *b)
{
	assert(txn_bpool_owns(p, b));
	uint32_t o = (uint32_t)(((const uint8_t *)b - p->arena) / p->unit_bytes);
	assert(!(p->tag[o] & TAG_FREE));
	return p->tag[o];
}

bool txn_bpool_grow(struct txn_bpool *p, void *b, unsigned order)
{
	uint32_t o = (uint32_t)(((uint8_t *)b - p->arena) / p->unit_bytes);
	unsigned k = txn_bpool_order(p, b);
	if (order <= k)
		return true;
	if (order > p->max_order || (o & ((1u << order) - 1)) || (uint64_t)o + (1u << order) > p->units)
		return false;
	for (unsigned j = k; j < order; j++)   /* each upper buddy whole and free */
		if (p->tag[o + (1u << j)] != (TAG_FREE | j))
			return false;
	for (unsigned j = k; j < order; j++) {
		unlink_free(p, o + (1u << j), j);
		p->tag[o + (1u << j)] = 0;   /* no longer a head */
	}
	p->tag[o] = (uint8_t)order;
	p->free_units -= (1u << order) - (1u << k);
	return true;
}

void txn_bpool_put(struct txn_bpool *p, void *block)
{
	uint32_t o = (uint32_t)(((uint8_t *)block - p->arena) / p->unit_bytes);
	unsigned k = txn_bpool_order(p, block);
	p->free_units += 1u << k;
	while (k < p->max_order) {
		uint32_t b = o ^ (1u << k);
		if ((uint64_t)b + (1u << k) > p->units || p->tag[b] != (TAG_FREE | k))
			break;
		unlink_free(p, b, k);
		p->tag[b > o ? b : o] = 0;   /* no longer a head */
		o = b < o ? b : o;
		k++;
	}
	push(p, o, k);
}
