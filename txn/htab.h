/*
 * htab.h - the one open-addressing hash table behind every keyed table of
 * the broker (producer state, transactional ids, groups and their offsets,
 * the topic index): linear probing over a power-of-two array of slots, at
 * most half of them used (so every probe ends at an empty slot), and
 * deletion by backward shift (no tombstones: lookups never degrade, however
 * many keys come and go).
 *
 * The caller owns the slot layout: a slot is esize bytes (a pointer, an
 * index, or the entry itself, stored in place), and ops say which slots are
 * empty, a full slot's hash, and whether it holds a given key. The caller
 * hashes keys itself and passes the hash in, so a key is hashed once.
 *
 * Memory: txn_htab_init allocates the slots; txn_htab_resize is the only
 * other allocation, and only the caller calls it (a table sized at start-up
 * never grows: its owner refuses the entry instead, txn_htab_has_room).
 * Slot addresses stay valid until a resize, a delete (which may move
 * later entries back) or txn_htab_free.
 *
 * Iteration (txn_htab_next) meets each entry once when nothing is deleted
 * during the pass; a delete behind the cursor's back may shift another
 * entry over it (missed this pass) or, at the wrap-around, from the front to
 * the back (met twice). Never an empty or freed slot.
 *
 * Locality: whichever core owns the table; no locks, no allocation but
 * init and resize.
 */
#ifndef SLUICE_TXN_HTAB_H
#define SLUICE_TXN_HTAB_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"

#define TXN_HTAB_SLOTS_MIN 2u            /* smallest capacity (a power of two) */
#define TXN_HTAB_SLOTS_MAX (1u << 30)    /* largest: slot indexes fit a u32 with room */

struct txn_htab_ops {
	bool (*empty)(const void *slot);
	void (*clear)(void *slot);                             /* make a slot empty */
	uint64_t (*hash)(const void *ctx, const void *slot);   /* of the key a full slot holds */
	bool (*match)(const void *ctx, const void *slot, const void *key);
};

struct txn_htab {
	uint8_t *slots;                  /* cap slots of esize bytes */
	uint32_t cap;                    /* a power of two */
	uint32_t used;                   /* full slots, <= cap / 2 */
	uint32_t esize;
	const struct txn_htab_ops *ops;
	const void *ctx;                 /* passed to hash and match */
	struct txn_arena *arena;         /* the slots come from it (txn_htab_init_in); NULL: the heap */
};

/* cap: a power of two in [TXN_HTAB_SLOTS_MIN, TXN_HTAB_SLOTS_MAX]. 0 or -ENOMEM. */
int  txn_htab_init(struct txn_htab *t, uint32_t cap, uint32_t esize, const struct txn_htab_ops *ops,
                   const void *ctx);
/* The same, but every resize takes its slots from arena (NULL: the heap), -ENOMEM when it has no
 * block; the first slots come from the heap (arena.h). */
int  txn_htab_init_in(struct txn_htab *t, uint32_t cap, uint32_t esize, const struct txn_htab_ops *ops,
                      const void *ctx, struct txn_arena *arena);
void txn_htab_free(struct txn_htab *t);
/* Move every entry into cap slots (a power of two, at least twice the entries). 0 or -ENOMEM (unchanged). */
int  txn_htab_resize(struct txn_htab *t, uint32_t cap);
/* The same, the new slots from `from` (NULL: the heap) rather than the table's arena; the old ones
 * still go back where they came from. */
int  txn_htab_resize_from(struct txn_htab *t, uint32_t cap, struct txn_arena *from);
/* Remove the entry in slot s, shifting later members of its cluster back. */
void txn_htab_delete(struct txn_htab *t, void *s);
/* Empty every slot. */
void txn_htab_clear(struct txn_htab *t);
/* The next full slot at or after *cursor (start at 0), or NULL at the end. */
void *txn_htab_next(const struct txn_htab *t, uint32_t *cursor);

static inline void *txn_htab_at(const struct txn_htab *t, uint32_t i)
{
	return t->slots + (size_t)i * t->esize;
}

/* Index of the slot holding key (hash h), or of the empty slot where it would go. */
static inline uint32_t txn_htab_pos(const struct txn_htab *t, uint64_t h, const void *key)
{
	uint32_t mask = t->cap - 1, i = (uint32_t)h & mask;
	/* Bounded: at most half the slots are full, so an empty one ends the probe. */
	for (;;) {
		const void *s = txn_htab_at(t, i);
		if (t->ops->empty(s) || t->ops->match(t->ctx, s, key))
			return i;
		i = (i + 1) & mask;
	}
}

/* The slot holding key, or NULL. */
static inline void *txn_htab_find(const struct txn_htab *t, uint64_t h, const void *key)
{
	void *s = txn_htab_at(t, txn_htab_pos(t, h, key));
	return t->ops->empty(s) ? NULL : s;
}

/* May one more entry go in without passing half full? */
static inline bool txn_htab_has_room(const struct txn_htab *t)
{
	return (uint64_t)(t->used + 1) * 2 <= t->cap;
}

/*
 * The empty slot for key (hash h, absent: asserted), counted as used: the
 * caller fills it at once so that ops->hash of it is h. Needs room
 * (txn_htab_has_room), asserted.
 */
static inline void *txn_htab_insert(struct txn_htab *t, uint64_t h, const void *key)
{
	assert(txn_htab_has_room(t));
	void *s = txn_htab_at(t, txn_htab_pos(t, h, key));
	assert(t->ops->empty(s));
	t->used++;
	return s;
}

static inline uint32_t txn_htab_count(const struct txn_htab *t)
{
	return t->used;
}

#endif
