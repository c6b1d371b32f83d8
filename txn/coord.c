/*
 * coord.c - transaction coordinator state: the table of transactional ids,
 * the state machine's single setter, and the log record encoding.
 * Locality: control core.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "coord.h"
#include "arena.h"
#include "htab.h"

static const char *const state_names[] = {
	[TXN_EMPTY] = "Empty",
	[TXN_ONGOING] = "Ongoing",
	[TXN_PREPARE_COMMIT] = "PrepareCommit",
	[TXN_PREPARE_ABORT] = "PrepareAbort",
	[TXN_COMPLETE_COMMIT] = "CompleteCommit",
	[TXN_COMPLETE_ABORT] = "CompleteAbort",
	[TXN_DEAD] = "Dead",
	[TXN_PREPARE_EPOCH_FENCE] = "PrepareEpochFence",
};

const char *txn_state_name(enum txn_state s)
{
	return (unsigned)s < sizeof(state_names) / sizeof(state_names[0]) ? state_names[s] : "?";
}

/* Kafka's TransactionState.validPreviousStates, as a bit set per target state. */
#define B(s) (1u << (s))
static const uint32_t valid_from[] = {
	[TXN_EMPTY] = B(TXN_EMPTY) | B(TXN_COMPLETE_COMMIT) | B(TXN_COMPLETE_ABORT),
	[TXN_ONGOING] = B(TXN_ONGOING) | B(TXN_EMPTY) | B(TXN_COMPLETE_COMMIT) | B(TXN_COMPLETE_ABORT),
	[TXN_PREPARE_COMMIT] = B(TXN_ONGOING),
	[TXN_PREPARE_ABORT] = B(TXN_ONGOING) | B(TXN_PREPARE_EPOCH_FENCE),
	[TXN_COMPLETE_COMMIT] = B(TXN_PREPARE_COMMIT),
	[TXN_COMPLETE_ABORT] = B(TXN_PREPARE_ABORT),
	[TXN_DEAD] = B(TXN_EMPTY) | B(TXN_COMPLETE_COMMIT) | B(TXN_COMPLETE_ABORT),
	[TXN_PREPARE_EPOCH_FENCE] = B(TXN_ONGOING),
};
#undef B

bool txn_state_move_ok(enum txn_state from, enum txn_state to)
{
	if ((unsigned)to >= sizeof(valid_from) / sizeof(valid_from[0]) || (unsigned)from > TXN_PREPARE_EPOCH_FENCE)
		return false;
	return valid_from[to] & (1u << from);
}

enum txn_state txn_set_state(struct txn_meta *m, enum txn_state to)
{
	enum txn_state from = m->state;
	if (!txn_state_move_ok(from, to)) {
		fprintf(stderr, "txn %.*s: illegal state move %s -> %s\n", m->id_len, m->id,
		        txn_state_name(from), txn_state_name(to));
		abort();   /* a coordinator bug: never continue with a corrupt state */
	}
	m->state = to;
	if (to == TXN_PREPARE_COMMIT || to == TXN_PREPARE_ABORT)
		m->serial = m->serial >= TXN_SERIAL_MAX || m->serial < 0 ? 1 : m->serial + 1;   /* a new decision */
	return from;
}

/* ---- the driver's progress -------------------------------------------- */

static const char *const drive_names[] = {
	[TXN_DRIVE_IDLE] = "Idle",
	[TXN_DRIVE_INIT] = "Init",
	[TXN_DRIVE_ADD] = "AddPartitions",
	[TXN_DRIVE_ADD_ACKS] = "AddPartitionsAcks",
	[TXN_DRIVE_OFFSETS] = "AddOffsets",
	[TXN_DRIVE_PREPARE] = "Prepare",
	[TXN_DRIVE_MARKERS] = "Markers",
	[TXN_DRIVE_REAUTH] = "Reauthorise",
};
_Static_assert(sizeof(drive_names) / sizeof(drive_names[0]) == TXN_DRIVE_COUNT, "a name per drive state");

const char *txn_drive_name(enum txn_drive d)
{
	return (unsigned)d < TXN_DRIVE_COUNT ? drive_names[d] : "?";
}

/*
 * Per target: the drive states it may follow, and the transaction states it
 * works on (coord.h's picture). Into IDLE from anywhere busy: every op ends
 * there, done or failed, whatever the transaction's state then.
 */
#define D(s) (1u << (s))
#define S(s) (1u << (s))
static const struct {
	uint32_t from;     /* drive states, a bit each */
	uint32_t states;   /* transaction states, a bit each */
} drive_rule[] = {
	[TXN_DRIVE_IDLE] = { D(TXN_DRIVE_INIT) | D(TXN_DRIVE_ADD) | D(TXN_DRIVE_ADD_ACKS) | D(TXN_DRIVE_OFFSETS) |
	                     D(TXN_DRIVE_PREPARE) | D(TXN_DRIVE_MARKERS) | D(TXN_DRIVE_REAUTH), ~0u },
	/* Init: the id keeps its durable state until the new identity's record is durable (then Empty). */
	[TXN_DRIVE_INIT] = { D(TXN_DRIVE_IDLE), S(TXN_EMPTY) | S(TXN_COMPLETE_COMMIT) | S(TXN_COMPLETE_ABORT) },
	[TXN_DRIVE_ADD] = { D(TXN_DRIVE_IDLE), S(TXN_ONGOING) },
	[TXN_DRIVE_ADD_ACKS] = { D(TXN_DRIVE_ADD), S(TXN_ONGOING) },
	[TXN_DRIVE_OFFSETS] = { D(TXN_DRIVE_IDLE), S(TXN_ONGOING) },
	[TXN_DRIVE_PREPARE] = { D(TXN_DRIVE_IDLE), S(TXN_PREPARE_COMMIT) | S(TXN_PREPARE_ABORT) },
	[TXN_DRIVE_MARKERS] = { D(TXN_DRIVE_PREPARE), S(TXN_PREPARE_COMMIT) | S(TXN_PREPARE_ABORT) },
	[TXN_DRIVE_REAUTH] = { D(TXN_DRIVE_IDLE), S(TXN_ONGOING) },
};
#undef D
#undef S
_Static_assert(sizeof(drive_rule) / sizeof(drive_rule[0]) == TXN_DRIVE_COUNT, "a rule per drive state");

bool txn_drive_move_ok(enum txn_drive from, enum txn_drive to)
{
	if ((unsigned)to >= TXN_DRIVE_COUNT || (unsigned)from >= TXN_DRIVE_COUNT)
		return false;
	return drive_rule[to].from & (1u << from);
}

bool txn_drive_ok(const struct txn_meta *m, enum txn_drive to)
{
	if (!txn_drive_move_ok(m->drive, to) || (unsigned)m->state > TXN_PREPARE_EPOCH_FENCE)
		return false;
	if (!(drive_rule[to].states & (1u << m->state)))
		return false;
	if (m->markers_left)
		return false;   /* answers of a fan-out still due: they would land in the next step */
	return to != TXN_DRIVE_IDLE || !m->retry_listed;
}

enum txn_drive txn_set_drive(struct txn_meta *m, enum txn_drive to)
{
	enum txn_drive from = m->drive;
	if (!txn_drive_ok(m, to)) {
		fprintf(stderr, "txn %.*s: illegal driver move %s -> %s (state %s, %u answers due%s)\n", m->id_len,
		        m->id, txn_drive_name(from), txn_drive_name(to), txn_state_name(m->state), m->markers_left,
		        m->retry_listed ? ", a resend pending" : "");
		abort();   /* a coordinator bug: never continue with a corrupt driver */
	}
	m->drive = to;
	return from;
}

/* ---- the table: pointers in the generic table (htab.h), keyed by id ------- */

/*
 * Two shapes. Growing (txn_coord_create: tools, tests, the simulator): the
 * slots double and each id is its own allocation. Fixed
 * (txn_coord_create_fixed: the broker's coordinator): the slots and ids_max
 * records, each with room for the longest id, are allocated at creation,
 * so a new id on the control core's poll loop takes a free record and never
 * allocates; past ids_max txn_coord_add answers NULL (its caller refuses the
 * id retriably first). Only a start-up replay of a log that holds more ids
 * than that (the limit was lowered) goes past the pool, allocating as the
 * growing shape does.
 */
struct txn_coord {
	struct txn_htab tab;          /* slots: struct txn_meta *, NULL empty */
	uint8_t *pool;                /* fixed: pool_n records of TXN_COORD_REC_BYTES */
	uint32_t pool_n, nfree;
	uint32_t *free;               /* fixed: indexes of the free records, a stack */
	/*
	 * Fixed: the transactions' partition and group lists, from two buddy
	 * pools (arena.h) sized at creation (--txn-partitions-max,
	 * --txn-groups-max), so a list that grows on the poll loop takes a
	 * free block or is refused (txn_meta_tps_room -ENOMEM), never
	 * allocates. A start-up replay that finds a pool full puts that list on
	 * the heap instead (txn_coord_lists_over counts them).
	 */
	bool pooled;
	bool replaying;               /* inside txn_coord_apply_batch */
	struct txn_arena tps_pool, grp_pool;   /* units: TPS_UNIT_BYTES, GRP_UNIT_BYTES */
};

/* The lists' pools' units (arena.h): TXN_COORD_TPS_UNIT partitions, one
 * group, each rounded as the arena rounds a unit, so a pool of n units is
 * n x unit bytes and the budget's per-entry bytes are exact. */
#define TPS_UNIT_BYTES (TXN_COORD_TPS_UNIT * sizeof(struct txn_tp))
#define GRP_UNIT_BYTES \
	((sizeof(struct txn_group) + TXN_ARENA_UNIT_ALIGN - 1) / TXN_ARENA_UNIT_ALIGN * TXN_ARENA_UNIT_ALIGN)
_Static_assert(TPS_UNIT_BYTES % TXN_ARENA_UNIT_ALIGN == 0, "a partitions unit is not rounded by the arena");

#define TXN_COORD_SLOTS_INIT 64u   /* growing: doubles (control core, an id at a time) */
/* A fixed record: the entry and the longest id with its NUL, aligned for the next one. */
#define TXN_COORD_REC_BYTES \
	((sizeof(struct txn_meta) + TXN_ID_BYTES_MAX + 1 + _Alignof(struct txn_meta) - 1) / \
	 _Alignof(struct txn_meta) * _Alignof(struct txn_meta))

struct id_key {
	const char *p;
	size_t len;
};

static uint64_t id_hash(const char *p, size_t len)
{
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
	return h ^ (h >> 29);
}

static bool slot_empty(const void *s) { return !*(struct txn_meta *const *)s; }
static void slot_clear(void *s) { *(struct txn_meta **)s = NULL; }
static uint64_t slot_hash(const void *ctx, const void *s)
{
	(void)ctx;
	const struct txn_meta *m = *(struct txn_meta *const *)s;
	return id_hash(m->id, m->id_len);
}
static bool slot_match(const void *ctx, const void *s, const void *key)
{
	(void)ctx;
	const struct txn_meta *m = *(struct txn_meta *const *)s;
	const struct id_key *k = key;
	return m->id_len == k->len && memcmp(m->id, k->p, k->len) == 0;
}
static const struct txn_htab_ops id_ops = { slot_empty, slot_clear, slot_hash, slot_match };

static uint32_t slots_for(uint32_t ids)
{
	uint32_t cap = TXN_HTAB_SLOTS_MIN;
	while (cap / 2 < ids)   /* at most half full (txn_htab_has_room) */
		cap *= 2;
	return cap;
}

size_t txn_coord_fixed_bytes_per_id(void)
{
	return TXN_COORD_REC_BYTES + sizeof(uint32_t) + 2 * sizeof(struct txn_meta *);
}

size_t txn_coord_fixed_bytes_per_tp_unit(void)
{
	return txn_arena_bytes(TPS_UNIT_BYTES, TPS_UNIT_BYTES);
}

size_t txn_coord_fixed_bytes_per_group(void)
{
	return txn_arena_bytes(GRP_UNIT_BYTES, GRP_UNIT_BYTES);
}

int txn_coord_create_fixed(struct txn_coord **out, uint32_t ids_max, uint32_t tps_max, uint32_t groups_max)
{
	assert(ids_max >= 1 && ids_max <= TXN_HTAB_SLOTS_MAX / 2);
	assert(tps_max >= TXN_COORD_TPS_UNIT && groups_max >= 1);
	struct txn_coord *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->pool = calloc(ids_max, TXN_COORD_REC_BYTES);   /* pages are touched as ids come */
	c->free = malloc((size_t)ids_max * sizeof(*c->free));
	bool tps_ok = c->pool && c->free &&
	              txn_arena_init(&c->tps_pool, (size_t)(tps_max / TXN_COORD_TPS_UNIT) * TPS_UNIT_BYTES,
	                             TPS_UNIT_BYTES) == 0;
	bool grp_ok = tps_ok && txn_arena_init(&c->grp_pool, (size_t)groups_max * GRP_UNIT_BYTES, GRP_UNIT_BYTES) == 0;
	if (!grp_ok || txn_htab_init(&c->tab, slots_for(ids_max), sizeof(struct txn_meta *), &id_ops, NULL) < 0) {
		if (tps_ok)
			txn_arena_fini(&c->tps_pool);
		if (grp_ok)
			txn_arena_fini(&c->grp_pool);
		free(c->pool);
		free(c->free);
		free(c);
		return -ENOMEM;
	}
	c->pooled = true;
	c->pool_n = c->nfree = ids_max;
	for (uint32_t i = 0; i < ids_max; i++)
		c->free[i] = ids_max - 1 - i;   /* record 0 is taken first */
	*out = c;
	return 0;
}

int txn_coord_create(struct txn_coord **out)
{
	struct txn_coord *c = calloc(1, sizeof(*c));
	if (!c || txn_htab_init(&c->tab, TXN_COORD_SLOTS_INIT, sizeof(struct txn_meta *), &id_ops, NULL) < 0) {
		free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

static bool in_pool(const struct txn_coord *c, const struct txn_meta *m)
{
	const uint8_t *b = (const uint8_t *)m;
	return c->pool && b >= c->pool && b < c->pool + (size_t)c->pool_n * TXN_COORD_REC_BYTES;
}

static void list_free(struct txn_coord *c, struct txn_arena *pool, void *list)
{
	txn_mem_free(c && c->pooled ? pool : NULL, list);   /* the pool's block, or the heap's */
}

static void next_clear(struct txn_meta *m);

static void meta_free(struct txn_coord *c, struct txn_meta *m)
{
	txn_meta_clear_txn(m);
	next_clear(m);
	if (!in_pool(c, m)) {
		free(m);
		return;
	}
	assert(c->nfree < c->pool_n);
	c->free[c->nfree++] = (uint32_t)(((uint8_t *)m - c->pool) / TXN_COORD_REC_BYTES);
}

void txn_coord_destroy(struct txn_coord *c)
{
	if (!c)
		return;
	uint32_t cur = 0;
	for (struct txn_meta **s; (s = txn_htab_next(&c->tab, &cur));)
		meta_free(c, *s);
	txn_htab_free(&c->tab);
	if (c->pooled) {
		txn_arena_fini(&c->tps_pool);
		txn_arena_fini(&c->grp_pool);
	}
	free(c->pool);
	free(c->free);
	free(c);
}

struct txn_meta *txn_coord_find(struct txn_coord *c, const char *id, size_t len)
{
	if (len > TXN_ID_BYTES_MAX)
		return NULL;
	struct id_key k = { id, len };
	struct txn_meta **s = txn_htab_find(&c->tab, id_hash(id, len), &k);
	return s ? *s : NULL;
}

/* replay: a start-up replay, which may go past a fixed table's pool (see struct txn_coord). */
static struct txn_meta *coord_add(struct txn_coord *c, const char *id, size_t len, bool replay)
{
	assert(len <= TXN_ID_BYTES_MAX && !txn_coord_find(c, id, len));
	bool grow = !c->pool || replay;
	if (!txn_htab_has_room(&c->tab) && (!grow || txn_htab_resize(&c->tab, c->tab.cap * 2) < 0))
		return NULL;
	struct txn_meta *m;
	if (c->nfree) {
		m = (struct txn_meta *)(c->pool + (size_t)c->free[--c->nfree] * TXN_COORD_REC_BYTES);
		memset(m, 0, sizeof(*m) + len + 1);
	} else if (!grow || !(m = calloc(1, sizeof(*m) + len + 1))) {
		return NULL;
	}
	memcpy(m->id, id, len);
	m->id_len = (uint16_t)len;
	m->coord = c;
	m->pid = m->prev_pid = -1;
	m->epoch = m->prev_epoch = -1;
	m->state = TXN_EMPTY;
	struct id_key k = { id, len };
	*(struct txn_meta **)txn_htab_insert(&c->tab, id_hash(id, len), &k) = m;
	return m;
}

struct txn_meta *txn_coord_add(struct txn_coord *c, const char *id, size_t len)
{
	return coord_add(c, id, len, false);
}

void txn_coord_remove(struct txn_coord *c, struct txn_meta *m)
{
	struct id_key k = { m->id, m->id_len };
	struct txn_meta **s = txn_htab_find(&c->tab, id_hash(m->id, m->id_len), &k);
	assert(s && *s == m);
	txn_htab_delete(&c->tab, s);   /* shifts the cluster after it back: lookups never stop early */
	meta_free(c, m);
}

struct txn_meta *txn_coord_next(struct txn_coord *c, uint32_t *cursor)
{
	struct txn_meta **s = txn_htab_next(&c->tab, cursor);
	return s ? *s : NULL;
}

uint32_t txn_coord_count(const struct txn_coord *c)
{
	return txn_htab_count(&c->tab);
}

/* ---- partitions and groups of a transaction ------------------------------ */

bool txn_meta_has_tp(const struct txn_meta *m, const char *topic, size_t len, int32_t partition)
{
	for (uint32_t i = 0; i < m->ntps; i++)
		if (m->tps[i].partition == partition && m->tps[i].topic_len == len &&
		    memcmp(m->tps[i].topic, topic, len) == 0)
			return true;
	return false;
}

/*
 * Make room for need entries in a list of esize-byte entries (cap in
 * entries). Fixed table: the block grown in place if its buddies are free,
 * else a new block of the pool and the old one given back (a copy); during
 * a replay a full pool falls back to the heap.
 * Growing table: the heap, doubling from first_cap.
 */
static int list_room(struct txn_meta *m, struct txn_arena *pool, void **list, uint32_t used, uint32_t *cap,
                     uint32_t need, size_t esize, uint32_t first_cap, uint32_t max)
{
	if (need <= *cap)
		return 0;
	if (need > max)
		return -ENOSPC;
	struct txn_coord *c = m->coord;
	void *n = NULL;
	uint32_t ncap = 0;
	if (c && c->pooled) {
		size_t bytes = (size_t)need * esize;
		if (*list && txn_arena_owns(pool, *list) && txn_arena_grow(pool, *list, bytes)) {
			*cap = (uint32_t)(txn_arena_block_bytes(pool, *list) / esize);   /* in place: nothing to copy */
			return 0;
		}
		if ((n = txn_arena_alloc(pool, bytes)))
			ncap = (uint32_t)(txn_arena_block_bytes(pool, n) / esize);
		else if (!c->replaying)
			return -ENOMEM;   /* the pool is full: the caller refuses retriably */
		else if ((n = malloc((size_t)need * esize)))
			ncap = need;   /* start-up only: past the pool (txn_coord_lists_over) */
	} else {
		ncap = *cap ? *cap : first_cap;
		while (ncap < need)
			ncap *= 2;
		if (ncap > max)
			ncap = max;
		n = malloc((size_t)ncap * esize);
	}
	if (!n)
		return -ENOMEM;
	if (used)
		memcpy(n, *list, (size_t)used * esize);
	list_free(c, pool, *list);
	*list = n;
	*cap = ncap;
	return 0;
}

int txn_meta_tps_room(struct txn_meta *m, uint32_t extra)
{
	uint64_t need = (uint64_t)m->ntps + extra;
	if (need > TXN_PARTS_MAX)
		need = TXN_PARTS_MAX;   /* duplicates in a request do not count against it; txn_meta_add_tp checks */
	struct txn_coord *c = m->coord;
	void *l = m->tps;
	int rc = list_room(m, c ? &c->tps_pool : NULL, &l, m->ntps, &m->tps_cap, (uint32_t)need, sizeof(struct txn_tp),
	                   8, TXN_PARTS_MAX);
	m->tps = l;
	return rc;
}

int txn_meta_groups_room(struct txn_meta *m, uint32_t extra)
{
	uint64_t need = (uint64_t)m->ngroups + extra;
	if (need > TXN_GROUPS_MAX)
		return -ENOSPC;
	struct txn_coord *c = m->coord;
	void *l = m->groups;
	int rc = list_room(m, c ? &c->grp_pool : NULL, &l, m->ngroups, &m->groups_cap, (uint32_t)need,
	                   sizeof(struct txn_group), 1 /* mostly one group */, TXN_GROUPS_MAX);
	m->groups = l;
	return rc;
}

int txn_meta_add_tp(struct txn_meta *m, const char *topic, size_t len, int32_t partition)
{
	if (len > TXN_TOPIC_BYTES_MAX)
		return -EINVAL;
	if (txn_meta_has_tp(m, topic, len, partition))
		return 0;
	if (m->ntps == TXN_PARTS_MAX)
		return -ENOSPC;
	int rc = txn_meta_tps_room(m, 1);
	if (rc < 0)
		return rc;
	struct txn_tp *tp = &m->tps[m->ntps++];
	tp->topic_len = (uint16_t)len;
	memcpy(tp->topic, topic, len);
	tp->topic[len] = 0;
	tp->partition = partition;
	tp->marker_again = false;
	tp->reauth_unsent = false;
	return 0;
}

bool txn_meta_has_group(const struct txn_meta *m, const char *id, size_t len)
{
	for (uint32_t i = 0; i < m->ngroups; i++)
		if (m->groups[i].len == len && memcmp(m->groups[i].id, id, len) == 0)
			return true;
	return false;
}

int txn_meta_add_group(struct txn_meta *m, const char *id, size_t len)
{
	if (len > TXN_GROUP_BYTES_MAX)
		return -EINVAL;
	if (txn_meta_has_group(m, id, len))
		return 0;
	int rc = txn_meta_groups_room(m, 1);
	if (rc < 0)
		return rc;
	struct txn_group *g = &m->groups[m->ngroups++];
	g->len = (uint16_t)len;
	memcpy(g->id, id, len);
	g->id[len] = 0;
	return 0;
}

void txn_meta_clear_txn(struct txn_meta *m)
{
	/* Given back, not kept for the next transaction: most ids are idle most
	 * of the time, and a transaction's groups take a kilobyte each. */
	struct txn_coord *c = m->coord;
	list_free(c, c ? &c->tps_pool : NULL, m->tps);
	list_free(c, c ? &c->grp_pool : NULL, m->groups);
	m->tps = NULL;
	m->groups = NULL;
	m->ntps = m->tps_cap = m->tps_told = 0;
	m->ngroups = m->groups_cap = 0;
}

/* The next transaction's list and the transaction's trade places (the calls on next_tps are the ones on tps). */
static void next_swap(struct txn_meta *m)
{
	struct txn_tp *tps = m->tps;
	uint32_t n = m->ntps, cap = m->tps_cap, told = m->tps_told;
	m->tps = m->next_tps, m->ntps = m->next_ntps, m->tps_cap = m->next_cap, m->tps_told = m->next_told;
	m->next_tps = tps, m->next_ntps = n, m->next_cap = cap, m->next_told = told;
}

int txn_meta_next_room(struct txn_meta *m, uint32_t extra)
{
	next_swap(m);
	int rc = txn_meta_tps_room(m, extra);
	next_swap(m);
	return rc;
}

bool txn_meta_next_has_tp(struct txn_meta *m, const char *topic, size_t len, int32_t partition)
{
	next_swap(m);
	bool has = txn_meta_has_tp(m, topic, len, partition);
	next_swap(m);
	return has;
}

int txn_meta_next_add_tp(struct txn_meta *m, const char *topic, size_t len, int32_t partition)
{
	next_swap(m);
	int rc = txn_meta_add_tp(m, topic, len, partition);
	next_swap(m);
	return rc;
}

void txn_meta_next_install(struct txn_meta *m)
{
	assert(m->ntps == 0 && !m->tps);
	next_swap(m);
}

static void next_clear(struct txn_meta *m)
{
	struct txn_coord *c = m->coord;
	list_free(c, c ? &c->tps_pool : NULL, m->next_tps);
	m->next_tps = NULL;
	m->next_ntps = m->next_cap = m->next_told = 0;
}

bool txn_meta_expirable(const struct txn_meta *m, int64_t now_ms, int64_t expiration_ms)
{
	bool settled = m->state == TXN_EMPTY || m->state == TXN_COMPLETE_COMMIT || m->state == TXN_COMPLETE_ABORT;
	return settled && !txn_busy(m) && !m->has_queued && !m->op_ctx && m->markers_left == 0 && m->writes == 0 &&
	       now_ms - m->update_ms >= expiration_ms;
}

/* ---- log record value ------------------------------------------------------ */

#define VALUE_VERSION 1
#define VALUE_FIXED_BYTES 47   /* up to and including the partition count */

size_t txn_meta_value_size(const struct txn_meta *m)
{
	size_t n = VALUE_FIXED_BYTES + 4 + 4;   /* + group count, serial */
	for (uint32_t i = 0; i < m->ntps; i++)
		n += 2 + m->tps[i].topic_len + 4;
	for (uint32_t i = 0; i < m->ngroups; i++)
		n += 2 + m->groups[i].len;
	return n;
}

static uint8_t *put(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
	return p + bytes;
}

static uint64_t get(const uint8_t *p, int bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

int txn_meta_encode(const struct txn_meta *m, uint8_t *buf, size_t cap)
{
	size_t need = txn_meta_value_size(m);
	if (need > cap)
		return -ENOSPC;
	uint8_t *p = buf;
	p = put(p, VALUE_VERSION, 2);
	p = put(p, (uint64_t)m->pid, 8);
	p = put(p, (uint16_t)m->epoch, 2);
	p = put(p, (uint64_t)m->prev_pid, 8);
	p = put(p, (uint16_t)m->prev_epoch, 2);
	p = put(p, (uint8_t)m->state, 1);
	p = put(p, (uint32_t)m->timeout_ms, 4);
	p = put(p, (uint64_t)m->start_ms, 8);
	p = put(p, (uint64_t)m->update_ms, 8);
	p = put(p, m->ntps, 4);
	for (uint32_t i = 0; i < m->ntps; i++) {
		p = put(p, m->tps[i].topic_len, 2);
		memcpy(p, m->tps[i].topic, m->tps[i].topic_len);
		p += m->tps[i].topic_len;
		p = put(p, (uint32_t)m->tps[i].partition, 4);
	}
	p = put(p, m->ngroups, 4);
	for (uint32_t i = 0; i < m->ngroups; i++) {
		p = put(p, m->groups[i].len, 2);
		memcpy(p, m->groups[i].id, m->groups[i].len);
		p += m->groups[i].len;
	}
	p = put(p, (uint32_t)m->serial, 4);
	assert((size_t)(p - buf) == need);
	return (int)need;
}

/* Walks a value; with apply false it only checks it, so a bad record changes nothing. */
static int decode(struct txn_meta *m, const uint8_t *buf, size_t len, bool apply)
{
	uint64_t version = len >= 2 ? get(buf, 2) : UINT64_MAX;
	if (len < VALUE_FIXED_BYTES + 4 || version > VALUE_VERSION)
		return -EBADMSG;
	const uint8_t *p = buf, *end = buf + len;
	uint8_t state = p[22];
	uint32_t ntps = (uint32_t)get(p + 43, 4);
	if (state > TXN_PREPARE_EPOCH_FENCE || ntps > TXN_PARTS_MAX)
		return -EBADMSG;
	if (apply) {
		m->pid = (int64_t)get(p + 2, 8);
		m->epoch = (int16_t)get(p + 10, 2);
		m->prev_pid = (int64_t)get(p + 12, 8);
		m->prev_epoch = (int16_t)get(p + 20, 2);
		m->state = (enum txn_state)state;   /* restoring, not moving: no setter */
		m->timeout_ms = (int32_t)get(p + 23, 4);
		m->start_ms = (int64_t)get(p + 27, 8);
		m->update_ms = (int64_t)get(p + 35, 8);
		txn_meta_clear_txn(m);
	}
	p += VALUE_FIXED_BYTES;
	for (uint32_t i = 0; i < ntps; i++) {
		if (end - p < 2)
			return -EBADMSG;
		size_t tl = get(p, 2);
		if (tl > TXN_TOPIC_BYTES_MAX || (size_t)(end - p) < 2 + tl + 4)
			return -EBADMSG;
		if (apply && txn_meta_add_tp(m, (const char *)p + 2, tl, (int32_t)get(p + 2 + tl, 4)) < 0)
			return -ENOMEM;
		p += 2 + tl + 4;
	}
	if (end - p < 4)
		return -EBADMSG;
	uint32_t ng = (uint32_t)get(p, 4);
	p += 4;
	if (ng > TXN_GROUPS_MAX)
		return -EBADMSG;
	for (uint32_t i = 0; i < ng; i++) {
		if (end - p < 2)
			return -EBADMSG;
		size_t gl = get(p, 2);
		if (gl > TXN_GROUP_BYTES_MAX || (size_t)(end - p) < 2 + gl)
			return -EBADMSG;
		if (apply && txn_meta_add_group(m, (const char *)p + 2, gl) < 0)
			return -ENOMEM;
		p += 2 + gl;
	}
	int32_t serial = 0;
	if (version >= 1) {
		if (end - p < 4)
			return -EBADMSG;
		serial = (int32_t)get(p, 4);
		p += 4;
		if (serial < 0)
			return -EBADMSG;
	}
	if (p != end)
		return -EBADMSG;
	if (apply)
		m->serial = serial;
	return 0;
}

int txn_meta_decode(struct txn_meta *m, const uint8_t *buf, size_t len)
{
	int rc = decode(m, buf, len, false);
	return rc < 0 ? rc : decode(m, buf, len, true);
}

/* ---- recovery from the coordinator log ------------------------------------- */

int txn_coord_apply_batch(struct txn_coord *c, const uint8_t *batch, size_t len)
{
	struct st_record_iter it;
	struct st_record rec;
	if (st_batch_records(batch, len, &it) < 0)
		return -EBADMSG;
	int rc = 0, got;
	c->replaying = true;
	while ((got = st_record_next(&it, &rec)) == 1) {
		if (!rec.key || rec.key_len <= 0 || rec.key_len > TXN_ID_BYTES_MAX) {
			rc = -EBADMSG;
			continue;
		}
		struct txn_meta *m = txn_coord_find(c, (const char *)rec.key, (size_t)rec.key_len);
		if (!rec.value) {   /* tombstone */
			if (m)
				txn_coord_remove(c, m);
			continue;
		}
		bool fresh = !m;
		if (fresh && !(m = coord_add(c, (const char *)rec.key, (size_t)rec.key_len, true))) {
			c->replaying = false;
			return -ENOMEM;
		}
		if (txn_meta_decode(m, rec.value, (size_t)rec.value_len) < 0) {
			if (fresh)
				txn_coord_remove(c, m);
			rc = -EBADMSG;
		}
	}
	c->replaying = false;
	return got < 0 ? -EBADMSG : rc;
}

uint32_t txn_coord_lists_over(const struct txn_coord *c)
{
	uint32_t n = 0, cur = 0;
	for (struct txn_meta *const *s; (s = txn_htab_next((struct txn_htab *)&c->tab, &cur));) {
		const struct txn_meta *m = *s;
		n += (m->tps && !txn_arena_owns(&c->tps_pool, m->tps)) + (m->groups && !txn_arena_owns(&c->grp_pool, m->groups));
	}
	return c->pooled ? n : 0;
}
