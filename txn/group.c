/*
 * group.c - consumer groups (classic protocol) and committed offsets: the
 * state machine's single setter, membership and rebalances, and the
 * offset table with its log records. Pure logic, see group.h.
 * Locality: control core.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "group.h"
#include "htab.h"

static const char *const state_names[] = {
	[GRP_EMPTY] = "Empty",
	[GRP_PREPARING_REBALANCE] = "PreparingRebalance",
	[GRP_COMPLETING_REBALANCE] = "CompletingRebalance",
	[GRP_STABLE] = "Stable",
	[GRP_DEAD] = "Dead",
};

const char *grp_state_name(enum grp_state s)
{
	return (unsigned)s <= GRP_DEAD ? state_names[s] : "?";
}

/* Kafka's GroupState.validPreviousStates, a bit set per target state. */
#define B(s) (1u << (s))
static const uint32_t valid_from[] = {
	[GRP_EMPTY] = B(GRP_PREPARING_REBALANCE),
	[GRP_PREPARING_REBALANCE] = B(GRP_STABLE) | B(GRP_COMPLETING_REBALANCE) | B(GRP_EMPTY),
	[GRP_COMPLETING_REBALANCE] = B(GRP_PREPARING_REBALANCE),
	[GRP_STABLE] = B(GRP_COMPLETING_REBALANCE),
	[GRP_DEAD] = B(GRP_STABLE) | B(GRP_PREPARING_REBALANCE) | B(GRP_COMPLETING_REBALANCE) |
	             B(GRP_EMPTY) | B(GRP_DEAD),
};
#undef B

bool grp_state_move_ok(enum grp_state from, enum grp_state to)
{
	if ((unsigned)to > GRP_DEAD || (unsigned)from > GRP_DEAD)
		return false;
	return valid_from[to] & (1u << from);
}

enum grp_state grp_set_state(struct grp_group *g, enum grp_state to)
{
	g->changes++;
	enum grp_state from = g->state;
	if (!grp_state_move_ok(from, to)) {
		fprintf(stderr, "group %.*s: illegal state move %s -> %s\n", g->id_len, g->id,
		        grp_state_name(from), grp_state_name(to));
		abort();   /* a coordinator bug: never go on with a corrupt group */
	}
	g->state = to;
	return from;
}

/* ---- memory (group.h: struct grp_mem) ----------------------------------------------- */

static void *gm_alloc(struct grp_mem *mm, size_t n)
{
	if (!mm)
		return malloc(n);
	void *p = txn_arena_alloc(&mm->arena, n);
	if (!p && mm->spill && (p = malloc(n)))
		mm->spilled++;
	return p;
}

static void *gm_zalloc(struct grp_mem *mm, size_t n)
{
	void *p = gm_alloc(mm, n);
	if (p)
		memset(p, 0, n);
	return p;
}

static void gm_free(struct grp_mem *mm, void *p)
{
	txn_mem_free(mm ? &mm->arena : NULL, p);   /* a spilled block goes back to the heap */
}

/* An array of n elements of esize to hold cap: *arr grown (in place when it can), or -ENOMEM (unchanged). */
static int gm_grow(struct grp_mem *mm, void **arr, uint32_t n, uint32_t *cap, uint32_t want, size_t esize)
{
	if (want <= *cap)
		return 0;
	if (*arr && mm && txn_arena_owns(&mm->arena, *arr) && txn_arena_grow(&mm->arena, *arr, want * esize)) {
		*cap = want;
		return 0;
	}
	void *a = gm_alloc(mm, want * esize);
	if (!a)
		return -ENOMEM;
	if (n)
		memcpy(a, *arr, n * esize);
	gm_free(mm, *arr);
	*arr = a;
	*cap = want;
	return 0;
}

/* ---- pointers in the generic table (htab.h), keyed by bytes ---------------------- */

#define GRP_PTAB_SLOTS_INIT 64u   /* grows by doubling (control core, an entry at a time) */

struct ptab {
	struct txn_htab h;        /* slots: void *, NULL empty; resized within mem's pool */
	void (*key)(const void *e, const uint8_t **k, size_t *len);
	struct grp_mem *mem;
};

struct bytes_key {
	const uint8_t *p;
	size_t len;
};

static uint64_t hash_bytes(const uint8_t *p, size_t len)
{
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h ^ (h >> 29);
}

static bool pslot_empty(const void *s) { return !*(void *const *)s; }
static void pslot_clear(void *s) { *(void **)s = NULL; }
static uint64_t pslot_hash(const void *ctx, const void *s)
{
	const struct ptab *t = ctx;
	const uint8_t *k;
	size_t len;
	t->key(*(void *const *)s, &k, &len);
	return hash_bytes(k, len);
}
static bool pslot_match(const void *ctx, const void *s, const void *key)
{
	const struct ptab *t = ctx;
	const struct bytes_key *want = key;
	const uint8_t *k;
	size_t len;
	t->key(*(void *const *)s, &k, &len);
	return len == want->len && memcmp(k, want->p, len) == 0;
}
static const struct txn_htab_ops ptab_ops = { pslot_empty, pslot_clear, pslot_hash, pslot_match };

/* t stays where it is: the table's ops reach the key function through it. */
static int ptab_init(struct ptab *t, void (*key)(const void *e, const uint8_t **k, size_t *len),
                     struct grp_mem *mem)
{
	t->key = key;
	t->mem = mem;
	return txn_htab_init_in(&t->h, GRP_PTAB_SLOTS_INIT, sizeof(void *), &ptab_ops, t, mem ? &mem->arena : NULL);
}

/* Room for n more entries without a resize: the table grown (doubling) if need be, or -ENOMEM. */
static int ptab_room(struct ptab *t, uint32_t n)
{
	while ((uint64_t)(t->h.used + n) * 2 > t->h.cap) {
		if (t->h.cap >= TXN_HTAB_SLOTS_MAX)
			return -ENOMEM;
		int rc = txn_htab_resize(&t->h, t->h.cap * 2);
		if (rc < 0 && t->mem && t->mem->spill) {   /* the replay at start-up: the heap (grp_mem) */
			rc = txn_htab_resize_from(&t->h, t->h.cap * 2, NULL);
			t->mem->spilled += rc == 0;
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void *ptab_find(const struct ptab *t, const uint8_t *k, size_t len)
{
	struct bytes_key want = { k, len };
	void **s = txn_htab_find(&t->h, hash_bytes(k, len), &want);
	return s ? *s : NULL;
}

/* Insert e (its key must be absent). */
static int ptab_add(struct ptab *t, void *e)
{
	if (ptab_room(t, 1) < 0)
		return -ENOMEM;
	struct bytes_key k;
	t->key(e, &k.p, &k.len);
	*(void **)txn_htab_insert(&t->h, hash_bytes(k.p, k.len), &k) = e;
	return 0;
}

/* Remove key's entry, if any. */
static void ptab_del(struct ptab *t, const uint8_t *k, size_t len)
{
	struct bytes_key want = { k, len };
	void **s = txn_htab_find(&t->h, hash_bytes(k, len), &want);
	if (s)
		txn_htab_delete(&t->h, s);
}

static void *ptab_next(const struct ptab *t, uint32_t *cursor)
{
	void **s = txn_htab_next(&t->h, cursor);
	return s ? *s : NULL;
}

/* ---- groups ------------------------------------------------------------------------ */

struct grp_coord {
	struct ptab groups;
	struct grp_mem *mem;
};

static void group_key(const void *e, const uint8_t **k, size_t *len)
{
	const struct grp_group *g = e;
	*k = (const uint8_t *)g->id;
	*len = g->id_len;
}

int grp_coord_create_in(struct grp_coord **out, struct grp_mem *mem)
{
	struct grp_coord *c = calloc(1, sizeof(*c));   /* init only */
	if (!c)
		return -ENOMEM;
	c->mem = mem;
	if (ptab_init(&c->groups, group_key, mem) < 0) {
		free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

int grp_coord_create(struct grp_coord **out)
{
	return grp_coord_create_in(out, NULL);
}

static void member_free(struct grp_mem *mm, struct grp_member *m)
{
	for (uint32_t i = 0; i < m->nprotocols; i++)
		gm_free(mm, m->protocols[i].meta);
	gm_free(mm, m->assignment);
	gm_free(mm, m);
}

void grp_coord_destroy(struct grp_coord *c)
{
	if (!c)
		return;
	uint32_t cur = 0;
	struct grp_group *g;
	while ((g = ptab_next(&c->groups, &cur))) {
		for (uint32_t i = 0; i < g->nmembers; i++)
			member_free(c->mem, g->members[i]);
		gm_free(c->mem, g->members);
		gm_free(c->mem, g->pending);
		gm_free(c->mem, g);
	}
	txn_htab_free(&c->groups.h);
	free(c);
}

struct grp_group *grp_find(struct grp_coord *c, const char *id, size_t len)
{
	return ptab_find(&c->groups, (const uint8_t *)id, len);
}

struct grp_group *grp_get(struct grp_coord *c, const char *id, size_t len)
{
	if (len == 0 || len > GRP_ID_BYTES_MAX)
		return NULL;
	struct grp_group *g = grp_find(c, id, len);
	if (g && g->state == GRP_DEAD)
		g->state = GRP_EMPTY;   /* deleted (grp_delete): its next join makes it anew, as Kafka's */
	if (g)
		return g;
	if (ptab_room(&c->groups, 1) < 0 || !(g = gm_zalloc(c->mem, sizeof(*g))))
		return NULL;
	g->mem = c->mem;
	memcpy(g->id, id, len);
	g->id_len = (uint16_t)len;
	g->state = GRP_EMPTY;
	g->protocol = -1;
	int rc = ptab_add(&c->groups, g);   /* cannot fail: ptab_room */
	assert(rc == 0);
	(void)rc;
	return g;
}

static void group_clear_members(struct grp_group *g);

void grp_delete(struct grp_group *g)
{
	assert(g->state == GRP_EMPTY);
	group_clear_members(g);
	g->npending = 0;
	g->generation = 0;
	g->protocol = -1;
	g->protocol_type_len = g->protocol_name_len = 0;
	g->initial_until_ms = 0;
	g->initial_joined = false;
	g->empty_since_ms = 0;
	g->state = GRP_DEAD;   /* written directly: Dead is where a group ends, and grp_get revives it */
	g->changes++;
}

struct grp_group *grp_next(struct grp_coord *c, uint32_t *cursor)
{
	return ptab_next(&c->groups, cursor);
}

uint32_t grp_count(const struct grp_coord *c)
{
	return txn_htab_count(&c->groups.h);
}

struct grp_member *grp_member_find(const struct grp_group *g, const char *id, size_t len)
{
	for (uint32_t i = 0; i < g->nmembers; i++)
		if (g->members[i]->id_len == len && memcmp(g->members[i]->id, id, len) == 0)
			return g->members[i];
	return NULL;
}

static void out_add(struct grp_outs *o, enum grp_out_kind kind, int16_t err, struct grp_waiter w,
                    struct grp_member *m)
{
	if (!w.ctx)
		return;
	assert(o->n < GRP_OUTS_MAX);
	o->o[o->n++] = (struct grp_out){ .kind = kind, .err = err, .w = w, .m = err ? NULL : m };
}

static bool member_has_protocol(const struct grp_member *m, const char *name, size_t len)
{
	for (uint32_t i = 0; i < m->nprotocols; i++)
		if (m->protocols[i].name_len == len && memcmp(m->protocols[i].name, name, len) == 0)
			return true;
	return false;
}

/* Does some protocol of q suit every member but `except`? */
static bool protocols_fit(const struct grp_group *g, const struct grp_join_req *q, const struct grp_member *except)
{
	if (q->protocol_type_len == 0 || q->nprotocols == 0)
		return false;
	if (g->nmembers > (except ? 1u : 0u) && (q->protocol_type_len != g->protocol_type_len ||
	    memcmp(q->protocol_type, g->protocol_type, q->protocol_type_len) != 0))
		return false;
	for (uint32_t p = 0; p < q->nprotocols; p++) {
		bool all = true;
		for (uint32_t i = 0; i < g->nmembers && all; i++)
			if (g->members[i] != except)
				all = member_has_protocol(g->members[i], q->proto_names[p], q->proto_name_lens[p]);
		if (all)
			return true;
	}
	return false;
}

static bool protocols_same(const struct grp_member *m, const struct grp_join_req *q)
{
	if (m->nprotocols != q->nprotocols)
		return false;
	for (uint32_t i = 0; i < q->nprotocols; i++) {
		const struct grp_protocol *p = &m->protocols[i];
		if (p->name_len != q->proto_name_lens[i] || memcmp(p->name, q->proto_names[i], p->name_len) ||
		    p->meta_len != q->proto_meta_lens[i] || (p->meta_len && memcmp(p->meta, q->proto_metas[i], p->meta_len)))
			return false;
	}
	return true;
}

static int set_protocols(struct grp_mem *mm, struct grp_member *m, const struct grp_join_req *q)
{
	struct grp_protocol np[GRP_PROTOCOLS_MAX];
	memset(np, 0, sizeof(np));
	for (uint32_t i = 0; i < q->nprotocols; i++) {
		np[i].name_len = (uint16_t)q->proto_name_lens[i];
		memcpy(np[i].name, q->proto_names[i], q->proto_name_lens[i]);
		np[i].meta_len = (uint32_t)q->proto_meta_lens[i];
		np[i].meta = gm_alloc(mm, np[i].meta_len ? np[i].meta_len : 1);
		if (!np[i].meta) {
			for (uint32_t j = 0; j < i; j++)
				gm_free(mm, np[j].meta);
			return -ENOMEM;
		}
		if (np[i].meta_len)
			memcpy(np[i].meta, q->proto_metas[i], np[i].meta_len);
	}
	for (uint32_t i = 0; i < m->nprotocols; i++)
		gm_free(mm, m->protocols[i].meta);
	memcpy(m->protocols, np, sizeof(np));
	m->nprotocols = q->nprotocols;
	return 0;
}

/* m's assignment is now blk (len bytes, from gm_alloc; NULL none), its old one freed. */
static void set_assignment(struct grp_mem *mm, struct grp_member *m, uint8_t *blk, size_t len)
{
	gm_free(mm, m->assignment);
	m->assignment = blk;
	m->assignment_len = blk ? (uint32_t)len : 0;
}

/* Take m out of the group; its waiting requests get err. */
static void member_remove(struct grp_group *g, struct grp_member *m, int16_t err, struct grp_outs *o)
{
	out_add(o, GRP_OUT_JOIN, err, m->join, NULL);
	out_add(o, GRP_OUT_SYNC, err, m->sync, NULL);
	uint32_t i = 0;
	while (g->members[i] != m)
		i++;
	memmove(&g->members[i], &g->members[i + 1], (g->nmembers - i - 1) * sizeof(g->members[0]));
	g->nmembers--;
	if (g->leader == m)
		g->leader = NULL;
	member_free(g->mem, m);
}

static void prepare_rebalance(struct grp_group *g, int64_t now, int32_t initial_delay_ms, struct grp_outs *o)
{
	if (g->state == GRP_COMPLETING_REBALANCE)
		/* The leader's assignment for this generation will never come: retry the join. */
		for (uint32_t i = 0; i < g->nmembers; i++) {
			out_add(o, GRP_OUT_SYNC, KERR_REBALANCE_IN_PROGRESS, g->members[i]->sync, NULL);
			g->members[i]->sync.ctx = NULL;
		}
	int32_t timeout = 0;
	for (uint32_t i = 0; i < g->nmembers; i++)
		if (g->members[i]->rebalance_ms > timeout)
			timeout = g->members[i]->rebalance_ms;
	if (g->state == GRP_EMPTY && initial_delay_ms > 0) {
		g->initial_delay_ms = g->initial_cur_ms = initial_delay_ms;
		g->initial_left_ms = timeout > initial_delay_ms ? timeout - initial_delay_ms : 0;
		g->initial_until_ms = now + initial_delay_ms;
		g->initial_joined = false;
	}
	grp_set_state(g, GRP_PREPARING_REBALANCE);
	g->rebalance_deadline_ms = now + timeout;
}

/* Every member that is still here has rejoined (or time is up): start the new generation. */
static void complete_join(struct grp_group *g, struct grp_outs *o)
{
	for (uint32_t i = g->nmembers; i-- > 0;)
		if (!g->members[i]->join.ctx)
			member_remove(g, g->members[i], KERR_UNKNOWN_MEMBER_ID, o);
	g->generation++;
	if (g->nmembers == 0) {
		g->protocol = -1;
		g->protocol_name_len = 0;
		grp_set_state(g, GRP_EMPTY);
		return;
	}
	if (!g->leader)
		g->leader = g->members[0];   /* the first joiner still here */
	/* The first of the leader's protocols that every member supports. */
	struct grp_member *l = g->leader;
	g->protocol = -1;
	for (uint32_t p = 0; p < l->nprotocols && g->protocol < 0; p++) {
		bool all = true;
		for (uint32_t i = 0; i < g->nmembers && all; i++)
			all = member_has_protocol(g->members[i], l->protocols[p].name, l->protocols[p].name_len);
		if (all)
			g->protocol = (int32_t)p;
	}
	if (g->protocol < 0)
		g->protocol = 0;   /* cannot happen: joins are checked against every member */
	memcpy(g->protocol_name, l->protocols[g->protocol].name, l->protocols[g->protocol].name_len);
	g->protocol_name_len = l->protocols[g->protocol].name_len;
	grp_set_state(g, GRP_COMPLETING_REBALANCE);
	for (uint32_t i = 0; i < g->nmembers; i++) {
		struct grp_member *m = g->members[i];
		set_assignment(g->mem, m, NULL, 0);
		out_add(o, GRP_OUT_JOIN, KERR_NONE, m->join, m);
		m->join.ctx = NULL;
	}
}

static void try_complete_join(struct grp_group *g, int64_t now, struct grp_outs *o)
{
	if (g->state != GRP_PREPARING_REBALANCE)
		return;
	if (g->initial_until_ms && g->nmembers) {
		if (now < g->initial_until_ms)
			return;
		if (g->initial_joined && g->initial_left_ms > 0) {
			/* Kafka's next InitialDelayedJoin: the same delay, or what is left. */
			int32_t d = g->initial_delay_ms < g->initial_left_ms ? g->initial_delay_ms : g->initial_left_ms;
			g->initial_left_ms = g->initial_left_ms > g->initial_cur_ms ? g->initial_left_ms - g->initial_cur_ms : 0;
			g->initial_cur_ms = d;
			g->initial_until_ms = now + d;
			g->initial_joined = false;
			return;
		}
		g->initial_until_ms = 0;
		complete_join(g, o);
		return;
	}
	/* Everyone left during the initial delay: the group is Empty again now. */
	g->initial_until_ms = 0;
	bool all = true;
	for (uint32_t i = 0; i < g->nmembers && all; i++)
		all = g->members[i]->join.ctx != NULL;
	if (all || now >= g->rebalance_deadline_ms)
		complete_join(g, o);
}

struct grp_member *grp_static_find(const struct grp_group *g, const char *instance, size_t instance_len)
{
	if (!instance_len)
		return NULL;
	for (uint32_t i = 0; i < g->nmembers; i++)
		if (g->members[i]->instance_id_len == instance_len && !memcmp(g->members[i]->instance_id, instance, instance_len))
			return g->members[i];
	return NULL;
}

int16_t grp_fenced(const struct grp_group *g, const char *member, size_t member_len, const char *instance,
                   size_t instance_len)
{
	const struct grp_member *s = grp_static_find(g, instance, instance_len);
	return s && (s->id_len != member_len || memcmp(s->id, member, member_len)) ? KERR_FENCED_INSTANCE_ID : KERR_NONE;
}

/* A fresh member id: client id + "-" + a sequence and the time, unique within this coordinator's life. */
static uint16_t new_id(struct grp_group *g, char id[GRP_MEMBER_ID_BYTES_MAX + 1], const struct grp_join_req *q,
                       int64_t now)
{
	size_t cl = q->client_id_len > GRP_MEMBER_ID_BYTES_MAX - 40 ? GRP_MEMBER_ID_BYTES_MAX - 40 : q->client_id_len;
	memcpy(id, q->client_id, cl);
	int n = snprintf(id + cl, GRP_MEMBER_ID_BYTES_MAX + 1 - cl, "-%llu-%llx",
	                 (unsigned long long)++g->next_member_seq, (unsigned long long)now);
	return (uint16_t)(cl + (size_t)n);
}

static void member_new_id(struct grp_group *g, struct grp_member *m, const struct grp_join_req *q, int64_t now)
{
	m->id_len = new_id(g, m->id, q, now);
}

/* ---- KIP-394: ids handed out before the join that uses them ---- */

static int32_t pending_find(const struct grp_group *g, const char *id, size_t len)
{
	for (uint32_t i = 0; i < g->npending; i++)
		if (g->pending[i].id_len == len && !memcmp(g->pending[i].id, id, len))
			return (int32_t)i;
	return -1;
}

static void pending_del(struct grp_group *g, uint32_t i)
{
	g->pending[i] = g->pending[--g->npending];
}

/* A new id for a member that must join again with it; NULL without memory. */
static struct grp_pending_member *pending_add(struct grp_group *g, const struct grp_join_req *q, int64_t now)
{
	if (g->npending == g->pending_cap &&
	    gm_grow(g->mem, (void **)&g->pending, g->npending, &g->pending_cap, g->pending_cap ? g->pending_cap * 2 : 8,
	            sizeof(*g->pending)) < 0)
		return NULL;
	struct grp_pending_member *p = &g->pending[g->npending++];
	p->id_len = new_id(g, p->id, q, now);
	p->expire_ms = now + q->session_ms;
	return p;
}

/* Who the member says it is (client id) and where it connects from: kept for DescribeGroups. */
static void member_client(struct grp_member *m, const struct grp_join_req *q)
{
	m->client_id_len = (uint16_t)(q->client_id_len > GRP_NAME_BYTES_MAX ? GRP_NAME_BYTES_MAX : q->client_id_len);
	if (m->client_id_len)   /* an absent string may come as NULL: memcpy's source must not be */
		memcpy(m->client_id, q->client_id, m->client_id_len);
	m->client_host_len = (uint16_t)(q->client_host_len > GRP_HOST_BYTES_MAX ? GRP_HOST_BYTES_MAX : q->client_host_len);
	if (m->client_host_len)
		memcpy(m->client_host, q->client_host, m->client_host_len);
}

/* A new member, under the id it was given with MEMBER_ID_REQUIRED, or a fresh one. */
static struct grp_member *member_add(struct grp_group *g, const struct grp_join_req *q, int64_t now)
{
	if (g->nmembers == g->members_cap &&
	    gm_grow(g->mem, (void **)&g->members, g->nmembers, &g->members_cap, g->members_cap ? g->members_cap * 2 : 8,
	            sizeof(*g->members)) < 0)
		return NULL;
	struct grp_member *m = gm_zalloc(g->mem, sizeof(*m));
	if (!m || set_protocols(g->mem, m, q) < 0) {
		gm_free(g->mem, m);
		return NULL;
	}
	if (q->member_id_len) {
		memcpy(m->id, q->member_id, q->member_id_len);
		m->id_len = (uint16_t)q->member_id_len;
	} else {
		member_new_id(g, m, q, now);
	}
	if (q->instance_id_len)   /* a dynamic member's (null) instance id is NULL, length 0 */
		memcpy(m->instance_id, q->instance_id, q->instance_id_len);
	m->instance_id_len = (uint16_t)q->instance_id_len;
	g->members[g->nmembers++] = m;
	if (g->nmembers == 1) {
		memcpy(g->protocol_type, q->protocol_type, q->protocol_type_len);
		g->protocol_type_len = (uint16_t)q->protocol_type_len;
	}
	return m;
}

/*
 * A static member comes back (a restarted process) under a new member id:
 * the old id's waiting requests are fenced. See grp_join in group.h for
 * when this costs a rebalance.
 */
static int static_rejoin(struct grp_group *g, struct grp_member *s, const struct grp_join_req *q,
                         int32_t rebalance_ms, struct grp_waiter w, int64_t now, struct grp_outs *o)
{
	bool same = protocols_same(s, q);
	if (!same && set_protocols(g->mem, s, q) < 0)
		return -ENOMEM;   /* before anything changed: the old instance stays */
	out_add(o, GRP_OUT_JOIN, KERR_FENCED_INSTANCE_ID, s->join, NULL);
	out_add(o, GRP_OUT_SYNC, KERR_FENCED_INSTANCE_ID, s->sync, NULL);
	s->join.ctx = s->sync.ctx = NULL;
	if (s == g->leader) {
		memcpy(s->prev_id, s->id, s->id_len);
		s->prev_id_len = s->id_len;
	}
	member_new_id(g, s, q, now);
	member_client(s, q);
	g->changes++;   /* the new member id must survive a restart */
	s->session_ms = q->session_ms;
	s->rebalance_ms = rebalance_ms;
	s->last_hb_ms = now;
	if (g->state == GRP_STABLE && same) {
		/* Same generation; its SyncGroup gets the assignment it had. */
		out_add(o, GRP_OUT_JOIN, KERR_NONE, w, s);
		if (s == g->leader && w.ctx)
			o->o[o->n - 1].follower = true;
		return 0;
	}
	s->join = w;
	if (g->state != GRP_PREPARING_REBALANCE)
		prepare_rebalance(g, now, q->initial_delay_ms, o);
	try_complete_join(g, now, o);
	return 0;
}

int grp_join(struct grp_group *g, const struct grp_join_req *q, struct grp_waiter w, int64_t now,
             struct grp_outs *o)
{
	int16_t err = KERR_NONE;
	struct grp_member *m = q->member_id_len ? grp_member_find(g, q->member_id, q->member_id_len) : NULL;
	struct grp_member *s = grp_static_find(g, q->instance_id, q->instance_id_len);
	int32_t pend = !m && q->member_id_len ? pending_find(g, q->member_id, q->member_id_len) : -1;
	if (g->state == GRP_DEAD)
		err = KERR_COORDINATOR_NOT_AVAILABLE;
	else if (q->instance_id_len > GRP_NAME_BYTES_MAX)
		err = KERR_INVALID_GROUP_ID;   /* Kafka validates instance ids as it does group ids */
	else if (q->member_id_len && grp_fenced(g, q->member_id, q->member_id_len, q->instance_id, q->instance_id_len))
		err = KERR_FENCED_INSTANCE_ID;
	else if (q->session_ms < GRP_SESSION_MIN_MS || q->session_ms > GRP_SESSION_MAX_MS)
		err = KERR_INVALID_SESSION_TIMEOUT;
	else if (q->nprotocols > GRP_PROTOCOLS_MAX || q->protocol_type_len > GRP_NAME_BYTES_MAX)
		err = KERR_INCONSISTENT_GROUP_PROTOCOL;
	else if (q->member_id_len && !m && pend < 0)
		err = KERR_UNKNOWN_MEMBER_ID;
	else if (!protocols_fit(g, q, m ? m : s))
		err = KERR_INCONSISTENT_GROUP_PROTOCOL;
	else if (!m && !s && g->nmembers + g->npending - (pend >= 0) >= GRP_MEMBERS_MAX)
		err = KERR_GROUP_MAX_SIZE_REACHED;
	for (uint32_t i = 0; i < q->nprotocols && !err; i++)
		if (q->proto_name_lens[i] > GRP_NAME_BYTES_MAX)
			err = KERR_INCONSISTENT_GROUP_PROTOCOL;
	if (err) {
		out_add(o, GRP_OUT_JOIN, err, w, NULL);
		return 0;
	}
	int32_t rebalance_ms = q->rebalance_ms > 0 ? q->rebalance_ms : q->session_ms;   /* v0: none */
	if (rebalance_ms > GRP_REBALANCE_MAX_MS)
		rebalance_ms = GRP_REBALANCE_MAX_MS;
	if (!m && s)
		return static_rejoin(g, s, q, rebalance_ms, w, now, o);
	if (!m && !q->member_id_len && !q->instance_id_len && q->require_known_id) {
		struct grp_pending_member *p = pending_add(g, q, now);
		if (!p)
			return -ENOMEM;
		out_add(o, GRP_OUT_JOIN, KERR_MEMBER_ID_REQUIRED, w, NULL);
		if (w.ctx) {
			o->o[o->n - 1].member_id = p->id;
			o->o[o->n - 1].member_id_len = p->id_len;
		}
		return 0;
	}
	if (pend >= 0)
		pending_del(g, (uint32_t)pend);   /* member_add takes the id from q */
	if (!m) {
		if (!(m = member_add(g, q, now)))
			return -ENOMEM;
		member_client(m, q);
		m->session_ms = q->session_ms;
		m->rebalance_ms = rebalance_ms;
		m->last_hb_ms = now;
		m->join = w;
		if (g->state != GRP_PREPARING_REBALANCE)
			prepare_rebalance(g, now, q->initial_delay_ms, o);
		else if (g->generation == 0)
			g->initial_joined = true;   /* Kafka's newMemberAdded */
		try_complete_join(g, now, o);
		return 0;
	}
	member_client(m, q);
	m->session_ms = q->session_ms;
	m->rebalance_ms = rebalance_ms;
	m->last_hb_ms = now;
	bool same = protocols_same(m, q);
	if (!same && set_protocols(g->mem, m, q) < 0)
		return -ENOMEM;
	switch (g->state) {
	case GRP_PREPARING_REBALANCE:
		out_add(o, GRP_OUT_JOIN, KERR_REBALANCE_IN_PROGRESS, m->join, NULL);   /* superseded */
		m->join = w;
		try_complete_join(g, now, o);
		return 0;
	case GRP_COMPLETING_REBALANCE:
	case GRP_STABLE:
		if (same && (g->state == GRP_COMPLETING_REBALANCE || m != g->leader)) {
			/* Nothing changed: the current generation stands (Kafka does the same). */
			out_add(o, GRP_OUT_JOIN, KERR_NONE, w, m);
			return 0;
		}
		m->join = w;
		prepare_rebalance(g, now, 0, o);
		try_complete_join(g, now, o);
		return 0;
	default:
		out_add(o, GRP_OUT_JOIN, KERR_UNKNOWN_MEMBER_ID, w, NULL);
		return 0;
	}
}

int grp_sync(struct grp_group *g, const char *member, size_t member_len, int32_t generation,
             const struct grp_assign *a, uint32_t na, struct grp_waiter w, int64_t now,
             struct grp_outs *o)
{
	struct grp_member *m = grp_member_find(g, member, member_len);
	int16_t err = KERR_NONE;
	if (!m || g->state == GRP_DEAD || g->state == GRP_EMPTY)
		err = KERR_UNKNOWN_MEMBER_ID;
	else if (generation != g->generation)
		err = KERR_ILLEGAL_GENERATION;
	else if (g->state == GRP_PREPARING_REBALANCE)
		err = KERR_REBALANCE_IN_PROGRESS;
	if (err) {
		out_add(o, GRP_OUT_SYNC, err, w, NULL);
		return 0;
	}
	m->last_hb_ms = now;
	if (g->state == GRP_STABLE) {
		out_add(o, GRP_OUT_SYNC, KERR_NONE, w, m);
		return 0;
	}
	assert(g->state == GRP_COMPLETING_REBALANCE);
	uint8_t *blk[GRP_MEMBERS_MAX] = { NULL };   /* the leader's assignments, per member, made first */
	uint32_t blen[GRP_MEMBERS_MAX];
	if (m == g->leader) {
		for (uint32_t i = 0; i < na; i++) {
			struct grp_member *t = grp_member_find(g, a[i].member_id, a[i].member_id_len);
			if (!t)
				continue;
			uint32_t k = 0;
			while (g->members[k] != t)
				k++;
			gm_free(g->mem, blk[k]);   /* named twice: the last wins, as before */
			blk[k] = NULL;
			if (a[i].len && !(blk[k] = gm_alloc(g->mem, a[i].len))) {
				for (uint32_t j = 0; j < g->nmembers; j++)
					gm_free(g->mem, blk[j]);
				return -ENOMEM;   /* nothing changed: the leader is told to retry */
			}
			if (a[i].len)
				memcpy(blk[k], a[i].bytes, a[i].len);
			blen[k] = (uint32_t)a[i].len;
		}
	}
	out_add(o, GRP_OUT_SYNC, KERR_REBALANCE_IN_PROGRESS, m->sync, NULL);   /* superseded */
	m->sync = w;
	if (m != g->leader)
		return 0;   /* wait for the leader's */
	for (uint32_t k = 0; k < g->nmembers; k++)
		if (blk[k])
			set_assignment(g->mem, g->members[k], blk[k], blen[k]);
	grp_set_state(g, GRP_STABLE);
	for (uint32_t i = 0; i < g->nmembers; i++) {
		struct grp_member *t = g->members[i];
		out_add(o, GRP_OUT_SYNC, KERR_NONE, t->sync, t);
		t->sync.ctx = NULL;
	}
	return 0;
}

int16_t grp_heartbeat(struct grp_group *g, const char *member, size_t member_len, int32_t generation,
                      int64_t now)
{
	struct grp_member *m = grp_member_find(g, member, member_len);
	if (!m || g->state == GRP_EMPTY || g->state == GRP_DEAD)
		return KERR_UNKNOWN_MEMBER_ID;
	if (generation != g->generation)
		return KERR_ILLEGAL_GENERATION;
	m->last_hb_ms = now;
	/* CompletingRebalance: the member has its JoinGroup answer, let it sync (Kafka 2.3+). */
	return g->state == GRP_PREPARING_REBALANCE ? KERR_REBALANCE_IN_PROGRESS : KERR_NONE;
}

/* A member left or expired: the others rebalance without it. */
static void after_removal(struct grp_group *g, int64_t now, struct grp_outs *o)
{
	if (g->state == GRP_STABLE || g->state == GRP_COMPLETING_REBALANCE)
		prepare_rebalance(g, now, 0, o);
	try_complete_join(g, now, o);
}

int16_t grp_leave(struct grp_group *g, const char *member, size_t member_len, int64_t now,
                  struct grp_outs *o)
{
	struct grp_member *m = grp_member_find(g, member, member_len);
	if (!m || g->state == GRP_DEAD)
		return KERR_UNKNOWN_MEMBER_ID;
	member_remove(g, m, KERR_UNKNOWN_MEMBER_ID, o);
	after_removal(g, now, o);
	return KERR_NONE;
}

bool grp_waiter_gone(struct grp_group *g, const void *ctx, uint32_t gen, int64_t now, struct grp_outs *o)
{
	for (uint32_t i = 0; i < g->nmembers; i++) {
		struct grp_member *m = g->members[i];
		if (m->join.ctx == ctx && m->join.gen == gen) {
			out_add(o, GRP_OUT_JOIN, KERR_REBALANCE_IN_PROGRESS, m->join, NULL);
			m->join.ctx = NULL;
			try_complete_join(g, now, o);
			return true;
		}
		if (m->sync.ctx == ctx && m->sync.gen == gen) {
			out_add(o, GRP_OUT_SYNC, KERR_REBALANCE_IN_PROGRESS, m->sync, NULL);
			m->sync.ctx = NULL;
			return true;
		}
	}
	return false;
}

void grp_tick(struct grp_group *g, int64_t now, struct grp_outs *o)
{
	for (uint32_t i = g->npending; i-- > 0;)
		if (now > g->pending[i].expire_ms)
			pending_del(g, i);
	bool removed = false;
	for (uint32_t i = g->nmembers; i-- > 0;) {
		struct grp_member *m = g->members[i];
		if (m->join.ctx)
			continue;   /* waiting for the rebalance: its deadline covers it */
		int64_t limit = m->last_hb_ms + (m->sync.ctx ? m->rebalance_ms : m->session_ms);
		if (now > limit) {
			member_remove(g, m, KERR_UNKNOWN_MEMBER_ID, o);
			removed = true;
		}
	}
	if (removed)
		after_removal(g, now, o);
	else
		try_complete_join(g, now, o);
}

int16_t grp_commit_check(const struct grp_group *g, const char *member, size_t member_len,
                         int32_t generation)
{
	if (!g || g->state == GRP_EMPTY || g->state == GRP_DEAD)
		/* A group nobody is in takes simple commits (assign() + commit); a deleted one too, as
		 * Kafka's group made anew by them. */
		return generation < 0 ? KERR_NONE : KERR_ILLEGAL_GENERATION;
	if (g->state == GRP_COMPLETING_REBALANCE)
		return KERR_REBALANCE_IN_PROGRESS;
	if (!grp_member_find(g, member, member_len))
		return KERR_UNKNOWN_MEMBER_ID;
	if (generation != g->generation)
		return KERR_ILLEGAL_GENERATION;
	return KERR_NONE;
}

/* ---- committed offsets -------------------------------------------------------------- */

/*
 * Each entry is one block: the entry, its key, its metadata. The committed
 * table always has room for every staged entry and every prepared commit
 * (tab_room), so neither a staged entry's commit nor a prepared commit's
 * install needs memory once its record is durable.
 */
struct grp_offsets {
	struct ptab tab;
	struct ptab pend;             /* transactional offsets not yet committed (version-2 keys) */
	struct grp_mem *mem;
	uint32_t prepared;            /* grp_offset_prepare's fresh entries not yet installed or dropped */
};

/* Room in the committed table for n more entries besides those it must always have room for. */
static int tab_room(struct grp_offsets *t, uint32_t n)
{
	return ptab_room(&t->tab, n + txn_htab_count(&t->pend.h) + t->prepared);
}

static void offset_key(const void *e, const uint8_t **k, size_t *len)
{
	const struct grp_offset *o = e;
	*k = o->key;
	*len = o->key_len;
}

int grp_offsets_create_in(struct grp_offsets **out, struct grp_mem *mem)
{
	struct grp_offsets *t = calloc(1, sizeof(*t));   /* init only */
	if (!t)
		return -ENOMEM;
	t->mem = mem;
	if (ptab_init(&t->tab, offset_key, mem) < 0 || ptab_init(&t->pend, offset_key, mem) < 0) {
		txn_htab_free(&t->tab.h);
		free(t);
		return -ENOMEM;
	}
	*out = t;
	return 0;
}

int grp_offsets_create(struct grp_offsets **out)
{
	return grp_offsets_create_in(out, NULL);
}

static void offset_free(struct grp_offsets *t, struct grp_offset *o)
{
	gm_free(t->mem, o);   /* key and metadata are in its block */
}

void grp_offsets_destroy(struct grp_offsets *t)
{
	if (!t)
		return;
	uint32_t cur = 0;
	struct grp_offset *o;
	while ((o = ptab_next(&t->tab, &cur)))
		offset_free(t, o);
	cur = 0;
	while ((o = ptab_next(&t->pend, &cur)))
		offset_free(t, o);
	txn_htab_free(&t->tab.h);
	txn_htab_free(&t->pend.h);
	free(t);
}

uint32_t grp_offsets_count(const struct grp_offsets *t)
{
	return txn_htab_count(&t->tab.h);
}

static void be16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void be32(uint8_t *p, uint32_t v) { be16(p, (uint16_t)(v >> 16)); be16(p + 2, (uint16_t)v); }
static void be64(uint8_t *p, uint64_t v) { be32(p, (uint32_t)(v >> 32)); be32(p + 4, (uint32_t)v); }
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) << 16 | rd16(p + 2); }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) << 32 | rd32(p + 4); }

int grp_offset_key_encode(uint8_t *buf, size_t cap, const char *group, size_t glen, const char *topic,
                          size_t tlen, int32_t partition)
{
	if (glen > GRP_ID_BYTES_MAX || tlen > GRP_TOPIC_BYTES_MAX)
		return -EINVAL;
	size_t n = 2 + 2 + glen + 2 + tlen + 4;
	if (n > cap)
		return -ENOSPC;
	be16(buf, 1);
	be16(buf + 2, (uint16_t)glen);
	memcpy(buf + 4, group, glen);
	be16(buf + 4 + glen, (uint16_t)tlen);
	memcpy(buf + 6 + glen, topic, tlen);
	be32(buf + 6 + glen + tlen, (uint32_t)partition);
	return (int)n;
}

int grp_pending_key_encode(uint8_t *buf, size_t cap, int64_t pid, const char *group, size_t glen,
                           const char *topic, size_t tlen, int32_t partition)
{
	if (cap < 8)
		return -ENOSPC;
	/* The v1 key's body (after its int16 version) lands at buf + 10, behind version and pid. */
	int n = grp_offset_key_encode(buf + 8, cap - 8, group, glen, topic, tlen, partition);
	if (n < 0)
		return n;
	be16(buf, 2);
	be64(buf + 2, (uint64_t)pid);
	return n + 8;
}

/* Is k a well-formed key (version 1: committed, 2: pending)? */
static bool key_valid(const uint8_t *k, size_t len)
{
	if (len >= 18 && rd16(k) == 2) {
		k += 8;
		len -= 8;
	} else if (len < 10 || rd16(k) != 1) {
		return false;
	}
	size_t glen = rd16(k + 2);
	if (glen > GRP_ID_BYTES_MAX || 6 + glen > len)
		return false;
	size_t tlen = rd16(k + 4 + glen);
	return tlen <= GRP_TOPIC_BYTES_MAX && 10 + glen + tlen == len;
}

void grp_offset_key_parts(const struct grp_offset *o, const char **group, size_t *glen,
                          const char **topic, size_t *tlen, int32_t *partition)
{
	const uint8_t *k = o->key + (rd16(o->key) == 2 ? 8 : 0);   /* pending keys carry a pid */
	*glen = rd16(k + 2);
	*group = (const char *)k + 4;
	*tlen = rd16(k + 4 + *glen);
	*topic = (const char *)k + 6 + *glen;
	*partition = (int32_t)rd32(k + 6 + *glen + *tlen);
}

int64_t grp_pending_pid(const struct grp_offset *o)
{
	assert(rd16(o->key) == 2);
	return (int64_t)rd64(o->key + 2);
}

int grp_offset_value_encode(uint8_t *buf, size_t cap, int64_t offset, int32_t leader_epoch,
                            int64_t commit_ms, const char *meta, int32_t meta_len)
{
	if (meta_len > GRP_OFFSET_META_MAX)
		return -EINVAL;
	size_t n = 24 + (meta_len > 0 ? (size_t)meta_len : 0);
	if (n > cap)
		return -ENOSPC;
	be16(buf, 0);
	be64(buf + 2, (uint64_t)offset);
	be32(buf + 10, (uint32_t)leader_epoch);
	be64(buf + 14, (uint64_t)commit_ms);
	be16(buf + 22, (uint16_t)(meta_len < 0 ? -1 : meta_len));
	if (meta_len > 0)
		memcpy(buf + 24, meta, (size_t)meta_len);
	return (int)n;
}

/* A new entry, in no table; NULL without memory. Its metadata goes after its key, with room
 * for what the rest of the block holds (meta_cap). */
static struct grp_offset *offset_new(struct grp_offsets *t, const uint8_t *k, size_t klen, int64_t offset,
                                     int32_t epoch, int64_t commit_ms, const char *meta, int32_t meta_len)
{
	size_t ml = meta_len > 0 ? (size_t)meta_len : 0, need = sizeof(struct grp_offset) + klen + ml;
	struct grp_offset *o = gm_alloc(t->mem, need);
	if (!o)
		return NULL;
	size_t block = t->mem && txn_arena_owns(&t->mem->arena, o) ? txn_arena_block_bytes(&t->mem->arena, o) : need;
	size_t cap = block - sizeof(*o) - klen;
	*o = (struct grp_offset){ .offset = offset, .leader_epoch = epoch, .commit_ms = commit_ms,
	                          .meta_len = (int16_t)(meta_len < 0 ? -1 : meta_len), .key_len = (uint16_t)klen,
	                          .meta_cap = (uint16_t)(cap > GRP_OFFSET_META_MAX ? GRP_OFFSET_META_MAX : cap) };
	memcpy(o->key, k, klen);
	o->meta = (char *)o->key + klen;   /* fixed: a staged entry's key shrinks when it commits (end_apply) */
	if (meta)   /* NULL: room only (grp_offset_prepare) */
		memcpy(o->meta, meta, ml);
	return o;
}

/* Does the metadata of meta_len fit o's block? */
static bool offset_fits(const struct grp_offset *o, int32_t meta_len)
{
	return meta_len <= (int32_t)o->meta_cap;
}

/* o's value, in place (offset_fits). */
static void offset_set(struct grp_offset *o, int64_t offset, int32_t epoch, int64_t commit_ms, const char *meta,
                       int32_t meta_len)
{
	o->offset = offset;
	o->leader_epoch = epoch;
	o->commit_ms = commit_ms;
	o->meta_len = (int16_t)(meta_len < 0 ? -1 : meta_len);
	if (meta_len > 0)
		memmove(o->meta, meta, (size_t)meta_len);
	o->ending = false;   /* a new staged value: the end being written was for the old one */
}

/* o in tab under its key, in place of the entry there (freed; its compaction flag carried over). */
static void offset_place(struct grp_offsets *t, struct ptab *tab, struct grp_offset *o)
{
	struct bytes_key want = { o->key, o->key_len };
	void **s = txn_htab_find(&tab->h, hash_bytes(o->key, o->key_len), &want);
	if (s) {
		struct grp_offset *old = *s;
		o->compact_due = old->compact_due;
		*s = o;
		offset_free(t, old);
		return;
	}
	int rc = ptab_add(tab, o);   /* the callers made the room */
	assert(rc == 0);
	(void)rc;
}

/*
 * Store (replacing) under key k in tab (t's committed or staged table): in
 * the entry there when its block holds the metadata (so a key committed
 * again needs no memory, also with the pool spent), else in a new block.
 * 0 or -ENOMEM (nothing changed).
 */
static int put_key(struct grp_offsets *t, struct ptab *tab, const uint8_t *k, size_t klen, int64_t offset,
                   int32_t epoch, int64_t commit_ms, const char *meta, int32_t meta_len)
{
	struct grp_offset *o = ptab_find(tab, k, klen);
	if (o && offset_fits(o, meta_len)) {
		offset_set(o, offset, epoch, commit_ms, meta, meta_len);
		return 0;
	}
	if (!o && (tab == &t->pend ? ptab_room(&t->pend, 1) < 0 || tab_room(t, 1) < 0 : tab_room(t, 1) < 0))
		return -ENOMEM;
	if (!(o = offset_new(t, k, klen, offset, epoch, commit_ms, meta, meta_len)))
		return -ENOMEM;
	offset_place(t, tab, o);
	return 0;
}

/*
 * While a prepared commit is in flight no committed entry leaves the table
 * (the driver's deletes and expiry wait for its writes), and an entry is
 * only ever replaced by one with a larger block; so an entry that fits the
 * metadata at _prepare still fits at _install, and one prepared with a fresh
 * block has it.
 */
int grp_offset_prepare(struct grp_offsets *t, const char *group, size_t glen, const char *topic, size_t tlen,
                       int32_t partition, int32_t meta_len, struct grp_offset **fresh)
{
	uint8_t k[GRP_KEY_BYTES_MAX];
	int n = grp_offset_key_encode(k, sizeof(k), group, glen, topic, tlen, partition);
	*fresh = NULL;
	if (n < 0 || meta_len > GRP_OFFSET_META_MAX)
		return -EINVAL;
	const struct grp_offset *o = ptab_find(&t->tab, k, (size_t)n);
	if (!(o && offset_fits(o, meta_len))) {
		/* The block holds the key and metadata; the value comes at install. */
		if (tab_room(t, 1) < 0 || !(*fresh = offset_new(t, k, (size_t)n, -1, -1, -1, NULL, meta_len)))
			return -ENOMEM;
		t->prepared++;   /* its slot is kept from now (tab_room) */
	}
	return 0;
}

int grp_offset_install(struct grp_offsets *t, struct grp_offset *fresh, const char *group, size_t glen,
                        const char *topic, size_t tlen, int32_t partition, int64_t offset, int32_t leader_epoch,
                        int64_t commit_ms, const char *meta, int32_t meta_len)
{
	uint8_t k[GRP_KEY_BYTES_MAX];
	int n = grp_offset_key_encode(k, sizeof(k), group, glen, topic, tlen, partition);
	assert(n > 0 && (!fresh || t->prepared > 0));
	t->prepared -= fresh != NULL;   /* its kept slot is the one it takes, if it takes one */
	struct grp_offset *o = ptab_find(&t->tab, k, (size_t)n);
	if (o && offset_fits(o, meta_len)) {
		offset_set(o, offset, leader_epoch, commit_ms, meta, meta_len);
		if (fresh)
			offset_free(t, fresh);   /* another commit of the key made a larger block meanwhile */
		return 0;
	}
	if (!fresh)   /* cannot happen (see grp_offset_prepare); should it, a block now if there is one */
		return put_key(t, &t->tab, k, (size_t)n, offset, leader_epoch, commit_ms, meta, meta_len);
	offset_set(fresh, offset, leader_epoch, commit_ms, meta, meta_len);
	offset_place(t, &t->tab, fresh);
	return 0;
}

void grp_offset_drop(struct grp_offsets *t, struct grp_offset *fresh)
{
	if (!fresh)
		return;
	assert(t->prepared > 0);
	t->prepared--;
	offset_free(t, fresh);
}

int grp_offset_put(struct grp_offsets *t, const char *group, size_t glen, const char *topic, size_t tlen,
                   int32_t partition, int64_t offset, int32_t leader_epoch, int64_t commit_ms,
                   const char *meta, int32_t meta_len)
{
	uint8_t k[GRP_KEY_BYTES_MAX];
	int n = grp_offset_key_encode(k, sizeof(k), group, glen, topic, tlen, partition);
	if (n < 0 || meta_len > GRP_OFFSET_META_MAX)
		return -EINVAL;
	return put_key(t, &t->tab, k, (size_t)n, offset, leader_epoch, commit_ms, meta, meta_len);
}

int grp_pending_put(struct grp_offsets *t, const uint8_t *key, size_t klen, int64_t offset,
                    int32_t leader_epoch, int64_t commit_ms, const char *meta, int32_t meta_len)
{
	if (!key_valid(key, klen) || rd16(key) != 2 || meta_len > GRP_OFFSET_META_MAX)
		return -EINVAL;
	return put_key(t, &t->pend, key, klen, offset, leader_epoch, commit_ms, meta, meta_len);
}

int grp_pending_end_begin(struct grp_offsets *t, const uint8_t *pkey, size_t pklen)
{
	struct grp_offset *o = ptab_find(&t->pend, pkey, pklen);
	if (!o)
		return -ENOENT;
	o->ending = true;
	return 0;
}

int grp_pending_end_apply(struct grp_offsets *t, const uint8_t *pkey, size_t pklen, bool commit, int64_t offset,
                          int32_t leader_epoch, int64_t commit_ms, const char *meta, int32_t meta_len)
{
	if (!key_valid(pkey, pklen) || rd16(pkey) != 2 || meta_len > GRP_OFFSET_META_MAX)
		return -EINVAL;
	struct grp_offset *o = ptab_find(&t->pend, pkey, pklen);
	bool ending = o && o->ending;
	if (commit && ending && offset_fits(o, meta_len)) {
		/* No memory needed: into the committed entry when its block holds the metadata,
		 * else the staged entry becomes the committed one, in its own block, its key less
		 * the producer id, version 1 (the metadata after the key stays where it is). */
		ptab_del(&t->pend, pkey, pklen);
		memmove(o->key + 2, o->key + 10, pklen - 10);
		be16(o->key, 1);
		o->key_len = (uint16_t)(pklen - 8);
		struct grp_offset *cur = ptab_find(&t->tab, o->key, o->key_len);
		if (cur && offset_fits(cur, meta_len)) {
			offset_set(cur, offset, leader_epoch, commit_ms, meta, meta_len);
			offset_free(t, o);
			return 0;
		}
		offset_set(o, offset, leader_epoch, commit_ms, meta, meta_len);
		o->compact_due = false;
		offset_place(t, &t->tab, o);   /* tab_room kept a slot for it */
		return 0;
	}
	if (commit) {
		/* The committed key is the pending key less its producer id, version 1. */
		uint8_t k[GRP_KEY_BYTES_MAX];
		size_t klen = pklen - 8;
		be16(k, 1);
		memcpy(k + 2, pkey + 10, klen - 2);
		int rc = put_key(t, &t->tab, k, klen, offset, leader_epoch, commit_ms, meta, meta_len);
		if (rc < 0)
			return rc;
	}
	if (ending) {
		ptab_del(&t->pend, pkey, pklen);
		offset_free(t, o);
	}
	return 0;
}

void grp_offset_del(struct grp_offsets *t, const uint8_t *key, size_t klen)
{
	struct grp_offset *o = ptab_find(&t->tab, key, klen);
	if (!o)
		return;
	ptab_del(&t->tab, key, klen);
	offset_free(t, o);
}

void grp_pending_del(struct grp_offsets *t, const uint8_t *key, size_t klen)
{
	struct grp_offset *o = ptab_find(&t->pend, key, klen);
	if (!o)
		return;
	ptab_del(&t->pend, key, klen);
	offset_free(t, o);
}

const struct grp_offset *grp_pending_next(const struct grp_offsets *t, uint32_t *cursor)
{
	return ptab_next(&t->pend, cursor);
}

uint32_t grp_pending_count(const struct grp_offsets *t)
{
	return txn_htab_count(&t->pend.h);
}

bool grp_pending_has(const struct grp_offsets *t, const char *group, size_t glen, const char *topic,
                     size_t tlen, int32_t partition)
{
	uint32_t cur = 0;
	const struct grp_offset *o;
	while ((o = ptab_next(&t->pend, &cur))) {
		const char *g, *tp;
		size_t gl, tl;
		int32_t p;
		grp_offset_key_parts(o, &g, &gl, &tp, &tl, &p);
		if (p == partition && gl == glen && tl == tlen && !memcmp(g, group, gl) && !memcmp(tp, topic, tl))
			return true;
	}
	return false;
}

const struct grp_offset *grp_offset_get(const struct grp_offsets *t, const char *group, size_t glen,
                                        const char *topic, size_t tlen, int32_t partition)
{
	uint8_t k[GRP_KEY_BYTES_MAX];
	int n = grp_offset_key_encode(k, sizeof(k), group, glen, topic, tlen, partition);
	return n < 0 ? NULL : ptab_find(&t->tab, k, (size_t)n);
}

const struct grp_offset *grp_offset_next(const struct grp_offsets *t, uint32_t *cursor)
{
	return ptab_next(&t->tab, cursor);
}

int grp_offsets_apply_batch(struct grp_offsets *t, const uint8_t *batch, size_t len)
{
	struct st_record_iter it;
	struct st_record rec;
	if (st_batch_records(batch, len, &it) < 0)
		return -EBADMSG;
	int rc = 0, got;
	while ((got = st_record_next(&it, &rec)) == 1) {
		if (rec.key && rec.key_len >= 2 && rd16(rec.key) == 3)
			continue;   /* group metadata: grp_groups_apply_batch */
		if (!rec.key || !key_valid(rec.key, (size_t)rec.key_len)) {
			rc = -EBADMSG;
			continue;
		}
		struct ptab *tab = rd16(rec.key) == 2 ? &t->pend : &t->tab;
		if (!rec.value) {   /* tombstone */
			struct grp_offset *o = ptab_find(tab, rec.key, (size_t)rec.key_len);
			ptab_del(tab, rec.key, (size_t)rec.key_len);
			if (o)
				offset_free(t, o);
			continue;
		}
		const uint8_t *v = rec.value;
		if (rec.value_len < 24 || rd16(v) != 0) {
			rc = -EBADMSG;
			continue;
		}
		int16_t ml = (int16_t)rd16(v + 22);
		if (ml > GRP_OFFSET_META_MAX || ml < -1 || 24 + (ml > 0 ? ml : 0) != rec.value_len) {
			rc = -EBADMSG;
			continue;
		}
		if (put_key(t, tab, rec.key, (size_t)rec.key_len, (int64_t)rd64(v + 2), (int32_t)rd32(v + 10),
		            (int64_t)rd64(v + 14), (const char *)v + 24, ml) < 0)
			return -ENOMEM;
	}
	return got < 0 ? -EBADMSG : rc;
}

/* ---- group metadata records ---------------------------------------------------------- */

int grp_group_key_encode(uint8_t *buf, size_t cap, const char *group, size_t glen)
{
	if (glen > GRP_ID_BYTES_MAX)
		return -EINVAL;
	if (cap < 4 + glen)
		return -ENOSPC;
	be16(buf, 3);
	be16(buf + 2, (uint16_t)glen);
	memcpy(buf + 4, group, glen);
	return (int)(4 + glen);
}

/* The member's metadata for the group's protocol (NULL, 0 if none). */
static const struct grp_protocol *chosen(const struct grp_group *g, const struct grp_member *m)
{
	for (uint32_t p = 0; p < m->nprotocols; p++)
		if (m->protocols[p].name_len == g->protocol_name_len &&
		    !memcmp(m->protocols[p].name, g->protocol_name, g->protocol_name_len))
			return &m->protocols[p];
	return NULL;
}

size_t grp_group_value_size(const struct grp_group *g)
{
	size_t n = 2 + 1 + 4 + 2 + g->protocol_type_len + 2 + g->protocol_name_len + 2 +
	           (g->leader ? g->leader->id_len : 0) + 4;
	for (uint32_t i = 0; i < g->nmembers; i++) {
		const struct grp_member *m = g->members[i];
		const struct grp_protocol *p = chosen(g, m);
		n += 2 + m->id_len + 2 + m->instance_id_len + 2 + m->client_id_len + 2 + m->client_host_len + 4 + 4 +
		     4 + (p ? p->meta_len : 0) + 4 + m->assignment_len;
	}
	return n;
}

static uint8_t *put_str16(uint8_t *q, const char *s, uint16_t len)
{
	be16(q, len);
	memcpy(q + 2, s, len);
	return q + 2 + len;
}

static uint8_t *put_bytes32(uint8_t *q, const uint8_t *b, uint32_t len)
{
	be32(q, len);
	if (len)
		memcpy(q + 4, b, len);
	return q + 4 + len;
}

int grp_group_value_encode(const struct grp_group *g, uint8_t *buf, size_t cap)
{
	assert(g->state == GRP_STABLE || g->state == GRP_EMPTY);
	size_t need = grp_group_value_size(g);
	if (cap < need)
		return -ENOSPC;
	uint8_t *q = buf;
	be16(q, 0);
	q[2] = (uint8_t)g->state;
	be32(q + 3, (uint32_t)g->generation);
	q = put_str16(q + 7, g->protocol_type, g->protocol_type_len);
	q = put_str16(q, g->protocol_name, g->protocol_name_len);
	q = g->leader ? put_str16(q, g->leader->id, g->leader->id_len) : put_str16(q, "", 0);
	be32(q, g->nmembers);
	q += 4;
	for (uint32_t i = 0; i < g->nmembers; i++) {
		const struct grp_member *m = g->members[i];
		const struct grp_protocol *p = chosen(g, m);
		q = put_str16(q, m->id, m->id_len);
		q = put_str16(q, m->instance_id, m->instance_id_len);
		q = put_str16(q, m->client_id, m->client_id_len);
		q = put_str16(q, m->client_host, m->client_host_len);
		be32(q, (uint32_t)m->session_ms);
		be32(q + 4, (uint32_t)m->rebalance_ms);
		q = put_bytes32(q + 8, p ? p->meta : NULL, p ? p->meta_len : 0);
		q = put_bytes32(q, m->assignment, m->assignment_len);
	}
	assert((size_t)(q - buf) == need);
	return (int)need;
}

/* Bounded readers over a record value: a short or oversized field fails the cursor. */
struct vcur {
	const uint8_t *p, *end;
	bool bad;
};

static const uint8_t *take(struct vcur *v, size_t n)
{
	if (v->bad || (size_t)(v->end - v->p) < n) {
		v->bad = true;
		return NULL;
	}
	const uint8_t *at = v->p;
	v->p += n;
	return at;
}

static uint32_t take32(struct vcur *v)
{
	const uint8_t *p = take(v, 4);
	return p ? rd32(p) : 0;
}

/* A str16 of at most max bytes copied into dst (NUL-terminated); its length. */
static uint16_t take_str(struct vcur *v, char *dst, size_t max)
{
	const uint8_t *p = take(v, 2);
	uint16_t len = p ? rd16(p) : 0;
	const uint8_t *s = len > max ? (v->bad = true, NULL) : take(v, len);
	if (!s)
		return 0;
	memcpy(dst, s, len);
	dst[len] = 0;
	return len;
}

/* A bytes32 into a copy from mm (*out NULL when empty); false on damage or no memory. */
static bool take_bytes(struct grp_mem *mm, struct vcur *v, uint8_t **out, uint32_t *len, bool *nomem)
{
	*len = take32(v);
	const uint8_t *b = take(v, *len);
	*out = NULL;
	if (!b)
		return false;
	if (*len && !(*out = gm_alloc(mm, *len))) {
		*nomem = true;
		return false;
	}
	if (*len)
		memcpy(*out, b, *len);
	return true;
}

static void group_clear_members(struct grp_group *g)
{
	for (uint32_t i = 0; i < g->nmembers; i++)
		member_free(g->mem, g->members[i]);
	g->nmembers = 0;
	g->leader = NULL;
}

/* One group record: the group as it was, or -EBADMSG / -ENOMEM (then it is left Empty). */
static int group_restore(struct grp_coord *c, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
                         int64_t now)
{
	if (klen < 4 || rd16(key + 2) == 0 || 4 + (size_t)rd16(key + 2) != klen || rd16(key + 2) > GRP_ID_BYTES_MAX)
		return -EBADMSG;
	struct grp_group *g = grp_get(c, (const char *)key + 4, klen - 4);
	if (!g)
		return -ENOMEM;
	group_clear_members(g);
	g->state = GRP_EMPTY;   /* restore writes the state directly: this is not a move */
	g->protocol = -1;
	g->protocol_name_len = 0;
	if (!val) {   /* a tombstone: DeleteGroups */
		grp_delete(g);
		return 0;
	}
	struct vcur v = { val, val + vlen, false };
	const uint8_t *h = take(&v, 7);
	if (!h || rd16(h) != 0 || (h[2] != GRP_EMPTY && h[2] != GRP_STABLE))
		return -EBADMSG;
	int32_t generation = (int32_t)rd32(h + 3);
	char leader[GRP_MEMBER_ID_BYTES_MAX + 1];
	g->protocol_type_len = take_str(&v, g->protocol_type, GRP_NAME_BYTES_MAX);
	g->protocol_name_len = take_str(&v, g->protocol_name, GRP_NAME_BYTES_MAX);
	uint16_t leader_len = take_str(&v, leader, GRP_MEMBER_ID_BYTES_MAX);
	uint32_t n = take32(&v);
	if (v.bad || n > GRP_MEMBERS_MAX || (h[2] == GRP_STABLE) != (n > 0))
		return -EBADMSG;
	if (gm_grow(g->mem, (void **)&g->members, 0, &g->members_cap, n, sizeof(*g->members)) < 0)
		return -ENOMEM;
	bool nomem = false;
	for (uint32_t i = 0; i < n && !v.bad && !nomem; i++) {
		struct grp_member *m = gm_zalloc(g->mem, sizeof(*m));
		if (!m) {
			nomem = true;
			break;
		}
		g->members[g->nmembers++] = m;
		m->id_len = take_str(&v, m->id, GRP_MEMBER_ID_BYTES_MAX);
		m->instance_id_len = take_str(&v, m->instance_id, GRP_NAME_BYTES_MAX);
		m->client_id_len = take_str(&v, m->client_id, GRP_NAME_BYTES_MAX);
		m->client_host_len = take_str(&v, m->client_host, GRP_HOST_BYTES_MAX);
		m->session_ms = (int32_t)take32(&v);
		m->rebalance_ms = (int32_t)take32(&v);
		if (m->rebalance_ms > GRP_REBALANCE_MAX_MS)   /* written before the bound existed */
			m->rebalance_ms = GRP_REBALANCE_MAX_MS;
		/* Only the group's protocol is kept: the member names all of its own at its next join. */
		struct grp_protocol *p = &m->protocols[0];
		memcpy(p->name, g->protocol_name, g->protocol_name_len);
		p->name_len = g->protocol_name_len;
		m->nprotocols = 1;
		if (!take_bytes(g->mem, &v, &p->meta, &p->meta_len, &nomem) ||
		    !take_bytes(g->mem, &v, &m->assignment, &m->assignment_len, &nomem))
			break;
		if (!p->meta && !(p->meta = gm_alloc(g->mem, 1)))   /* set_protocols' invariant: meta is never NULL */
			nomem = true;
		if (m->id_len == 0 || m->session_ms < GRP_SESSION_MIN_MS || m->session_ms > GRP_SESSION_MAX_MS ||
		    m->rebalance_ms <= 0)
			v.bad = true;
		if (leader_len == m->id_len && !memcmp(leader, m->id, leader_len))
			g->leader = m;
		m->last_hb_ms = now;   /* a session from the restart to heartbeat in */
	}
	if (v.bad || nomem || v.p != v.end || (n && !g->leader)) {
		group_clear_members(g);
		g->protocol_name_len = 0;
		return nomem ? -ENOMEM : -EBADMSG;
	}
	g->generation = generation;
	g->state = (enum grp_state)h[2];
	g->protocol = n ? 0 : -1;
	g->changes = g->saved_changes = 0;   /* what is on disk */
	return 0;
}

int grp_groups_apply_batch(struct grp_coord *c, const uint8_t *batch, size_t len, int64_t now)
{
	struct st_record_iter it;
	struct st_record rec;
	if (st_batch_records(batch, len, &it) < 0)
		return -EBADMSG;
	int rc = 0, got;
	while ((got = st_record_next(&it, &rec)) == 1) {
		if (!rec.key || rec.key_len < 2 || rd16(rec.key) != 3)
			continue;   /* an offset: the offsets table's */
		int r = group_restore(c, rec.key, (size_t)rec.key_len, rec.value,
		                      rec.value ? (size_t)rec.value_len : 0, now);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			rc = r;
	}
	return got < 0 ? -EBADMSG : rc;
}
