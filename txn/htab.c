/*
 * htab.c - the generic open-addressing table (htab.h): allocation, resize,
 * backward-shift deletion, iteration.
 * Locality: whichever core owns the table.
 */
#include "htab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool pow2_in_range(uint32_t cap)
{
	return cap >= TXN_HTAB_SLOTS_MIN && cap <= TXN_HTAB_SLOTS_MAX && (cap & (cap - 1)) == 0;
}

static uint8_t *slots_alloc(struct txn_arena *arena, uint32_t cap, uint32_t esize, const struct txn_htab_ops *ops)
{
	uint8_t *s = txn_mem_alloc(arena, (size_t)cap * esize);
	if (s)
		for (uint32_t i = 0; i < cap; i++)
			ops->clear(s + (size_t)i * esize);
	return s;
}

int txn_htab_init_in(struct txn_htab *t, uint32_t cap, uint32_t esize, const struct txn_htab_ops *ops,
                     const void *ctx, struct txn_arena *arena)
{
	assert(pow2_in_range(cap) && esize > 0);
	*t = (struct txn_htab){ .cap = cap, .esize = esize, .ops = ops, .ctx = ctx, .arena = arena };
	t->slots = slots_alloc(NULL, cap, esize, ops);   /* the first slots: the heap (arena.h) */
	return t->slots ? 0 : -ENOMEM;
}

int txn_htab_init(struct txn_htab *t, uint32_t cap, uint32_t esize, const struct txn_htab_ops *ops,
                  const void *ctx)
{
	return txn_htab_init_in(t, cap, esize, ops, ctx, NULL);
}

void txn_htab_free(struct txn_htab *t)
{
	txn_mem_free(t->arena, t->slots);
	t->slots = NULL;
	t->cap = t->used = 0;
}

int txn_htab_resize(struct txn_htab *t, uint32_t cap)
{
	return txn_htab_resize_from(t, cap, t->arena);
}

int txn_htab_resize_from(struct txn_htab *t, uint32_t cap, struct txn_arena *from)
{
	assert(pow2_in_range(cap) && (uint64_t)t->used * 2 <= cap);
	struct txn_htab n = *t;
	n.cap = cap;
	if (!(n.slots = slots_alloc(from, cap, t->esize, t->ops)))
		return -ENOMEM;
	uint32_t mask = cap - 1;
	for (uint32_t i = 0; i < t->cap; i++) {
		const void *s = txn_htab_at(t, i);
		if (t->ops->empty(s))
			continue;
		/* Keys are unique: the first empty slot from its home is its place. */
		uint32_t j = (uint32_t)t->ops->hash(t->ctx, s) & mask;
		while (!t->ops->empty(txn_htab_at(&n, j)))
			j = (j + 1) & mask;
		memcpy(txn_htab_at(&n, j), s, t->esize);
	}
	txn_mem_free(t->arena, t->slots);
	*t = n;
	return 0;
}

void txn_htab_delete(struct txn_htab *t, void *s)
{
	uint32_t mask = t->cap - 1;
	size_t at = (size_t)((uint8_t *)s - t->slots);
	assert(at % t->esize == 0 && at / t->esize < t->cap && !t->ops->empty(s) && t->used > 0);
	uint32_t i = (uint32_t)(at / t->esize);
	for (uint32_t j = (i + 1) & mask; !t->ops->empty(txn_htab_at(t, j)); j = (j + 1) & mask) {
		uint32_t home = (uint32_t)t->ops->hash(t->ctx, txn_htab_at(t, j)) & mask;
		/* j's entry may fill the hole at i only if i lies on its probe path [home, j]. */
		bool on_path = i <= j ? (home <= i || home > j) : (home <= i && home > j);
		if (on_path) {
			memcpy(txn_htab_at(t, i), txn_htab_at(t, j), t->esize);
			i = j;
		}
	}
	t->ops->clear(txn_htab_at(t, i));
	t->used--;
}

void txn_htab_clear(struct txn_htab *t)
{
	for (uint32_t i = 0; i < t->cap; i++)
		t->ops->clear(txn_htab_at(t, i));
	t->used = 0;
}

void *txn_htab_next(const struct txn_htab *t, uint32_t *cursor)
{
	while (*cursor < t->cap) {
		void *s = txn_htab_at(t, (*cursor)++);
		if (!t->ops->empty(s))
			return s;
	}
	return NULL;
}
