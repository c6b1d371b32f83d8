/*
 * fuzz_txn_seeds.c - writes the seed inputs of fuzz_txnlog, fuzz_offsetslog
 * and fuzz_pstate, each made by the encoders the broker writes with
 * (txn_meta_encode, grp_offset_*_encode, grp_group_value_encode after a real
 * join and sync, txn_pstate_snapshot_write after real updates, st_batch_build
 * and st_batch_build_marker), so that the fuzzers start from what is on disk
 * and mutate it into damage. Each seed is written in every mode its target
 * reads (byte 0: CRCs kept or fixed, from memory or through files).
 *
 *   fuzz_txn_seeds TXNLOG_DIR OFFSETSLOG_DIR PSTATE_DIR
 * Locality: a standalone process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "coord.h"
#include "group.h"
#include "pstate.h"

#define SEED_BYTES (64u << 10)

static uint8_t seed[SEED_BYTES];
static size_t seed_len;
static int64_t seed_next;   /* base offset of the next batch */

static void die(const char *what)
{
	fprintf(stderr, "fuzz_txn_seeds: %s\n", what);
	exit(1);
}

static void start(void)
{
	seed_len = 1;   /* byte 0: the mode, set by put */
	seed_next = 0;
}

static void put(const char *dir, const char *name, const uint8_t *modes, size_t nmodes)
{
	for (size_t i = 0; i < nmodes; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s-%u", dir, name, modes[i]);
		seed[0] = modes[i];
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(seed, 1, seed_len, f) != seed_len || fclose(f) != 0)
			die(path);
	}
}

/* One record in a batch of its own, as the coordinators write them. */
static void record(const void *key, int32_t klen, const void *val, int32_t vlen)
{
	int n = st_batch_build(seed + seed_len, sizeof(seed) - seed_len, 0, -1, -1, -1, 1700000000000 + seed_next, key,
	                       klen, val, vlen);
	if (n < 0)
		die("st_batch_build");
	st_batch_set_base_offset(seed + seed_len, seed_next++);
	seed_len += (size_t)n;
}

/* ---- __transaction_state ---- */

static void txn_record(struct txn_meta *m, enum txn_state to)
{
	static uint8_t val[8192];
	if (to != m->state)
		txn_set_state(m, to);
	m->update_ms++;
	int n = txn_meta_encode(m, val, sizeof(val));
	if (n < 0)
		die("txn_meta_encode");
	record(m->id, m->id_len, val, n);
}

static void txnlog_seeds(const char *dir)
{
	static const uint8_t modes[] = { 0, 2 };
	struct txn_coord *c;
	if (txn_coord_create(&c) < 0)
		die("txn_coord_create");
	struct txn_meta *a = txn_coord_add(c, "app-1", 5), *b = txn_coord_add(c, "app-2", 5);
	if (!a || !b)
		die("txn_coord_add");
	a->pid = 1000, a->epoch = 0, a->timeout_ms = 60000, a->update_ms = 1700000000000;
	b->pid = 1001, b->epoch = 3, b->prev_pid = 900, b->prev_epoch = 32766, b->timeout_ms = 10000;

	/* One transaction's life: Empty, Ongoing with partitions and a group, PrepareCommit, CompleteCommit. */
	start();
	txn_record(a, TXN_EMPTY);
	if (txn_meta_add_tp(a, "orders", 6, 0) < 0 || txn_meta_add_tp(a, "orders", 6, 3) < 0 ||
	    txn_meta_add_tp(a, "payments", 8, 1) < 0 || txn_meta_add_group(a, "billing", 7) < 0)
		die("txn_meta_add");
	a->start_ms = 1700000000100;
	txn_record(a, TXN_ONGOING);
	txn_record(a, TXN_PREPARE_COMMIT);
	txn_meta_clear_txn(a);
	txn_record(a, TXN_COMPLETE_COMMIT);
	put(dir, "commit", modes, sizeof(modes));

	/* Two ids, one left mid-abort (resumed at start-up), one removed by a tombstone. */
	start();
	if (txn_meta_add_tp(b, "events", 6, 7) < 0)
		die("txn_meta_add_tp");
	txn_record(b, TXN_ONGOING);
	txn_record(a, TXN_ONGOING);
	txn_record(b, TXN_PREPARE_ABORT);
	record(a->id, a->id_len, NULL, -1);
	put(dir, "abort-tombstone", modes, sizeof(modes));

	/* An epoch fence and one empty value (damage the decoder must refuse). */
	start();
	txn_record(b, TXN_COMPLETE_ABORT);
	txn_record(b, TXN_ONGOING);
	txn_record(b, TXN_PREPARE_EPOCH_FENCE);
	record("app-3", 5, "", 0);
	put(dir, "fence", modes, sizeof(modes));
	txn_coord_destroy(c);
}

/* ---- __consumer_offsets ---- */

static void offset_record(const char *g, const char *t, int32_t part, int64_t off, const char *meta, int32_t mlen,
                          int64_t pid)
{
	uint8_t key[GRP_PENDING_KEY_BYTES_MAX], val[GRP_VALUE_BYTES_MAX];
	int kn = pid < 0 ? grp_offset_key_encode(key, sizeof(key), g, strlen(g), t, strlen(t), part)
	                 : grp_pending_key_encode(key, sizeof(key), pid, g, strlen(g), t, strlen(t), part);
	int vn = grp_offset_value_encode(val, sizeof(val), off, 5, 1700000000000 + off, meta, mlen);
	if (kn < 0 || vn < 0)
		die("grp_offset encode");
	record(key, kn, val, vn);
}

static void group_record(const struct grp_group *g)
{
	static uint8_t val[16384];
	uint8_t key[GRP_GROUP_KEY_BYTES_MAX];
	int kn = grp_group_key_encode(key, sizeof(key), g->id, g->id_len);
	int vn = grp_group_value_encode(g, val, sizeof(val));
	if (kn < 0 || vn < 0)
		die("grp_group encode");
	record(key, kn, val, vn);
}

/* A Stable group: members join (one static), the leader syncs the assignments. */
static struct grp_group *stable_group(struct grp_coord *c, const char *id, uint32_t members)
{
	static struct grp_outs outs;
	struct grp_group *g = grp_get(c, id, strlen(id));
	if (!g)
		die("grp_get");
	for (uint32_t i = 0; i < members; i++) {
		struct grp_join_req q = { .member_id = "", .client_id = "rdkafka", .client_id_len = 7,
		                          .client_host = "/127.0.0.1", .client_host_len = 10,
		                          .instance_id = i == 1 ? "inst-1" : "", .instance_id_len = i == 1 ? 6 : 0,
		                          .protocol_type = "consumer", .protocol_type_len = 8,
		                          .session_ms = 10000, .rebalance_ms = 30000, .nprotocols = 2,
		                          .proto_names = { "range", "roundrobin" }, .proto_name_lens = { 5, 10 },
		                          .proto_metas = { (const uint8_t *)"\0\1topic", (const uint8_t *)"rr" },
		                          .proto_meta_lens = { 7, 2 } };
		outs.n = 0;
		if (grp_join(g, &q, (struct grp_waiter){ .ctx = g, .gen = i + 1 }, 1000 * i, &outs) < 0)
			die("grp_join");
	}
	/* The first join completed alone; the others started a rebalance: the answered ones rejoin. */
	outs.n = 0;
	for (uint32_t i = 0; i < g->nmembers && g->state == GRP_PREPARING_REBALANCE; i++) {
		struct grp_member *m = g->members[i];
		if (m->join.ctx)
			continue;
		struct grp_join_req q = { .member_id = m->id, .member_id_len = m->id_len, .client_id = "rdkafka",
		                          .client_id_len = 7, .instance_id = m->instance_id,
		                          .instance_id_len = m->instance_id_len, .protocol_type = "consumer",
		                          .protocol_type_len = 8, .session_ms = 10000, .rebalance_ms = 30000,
		                          .nprotocols = 2, .proto_names = { "range", "roundrobin" },
		                          .proto_name_lens = { 5, 10 },
		                          .proto_metas = { (const uint8_t *)"\0\1topic", (const uint8_t *)"rr" },
		                          .proto_meta_lens = { 7, 2 } };
		if (grp_join(g, &q, (struct grp_waiter){ .ctx = m, .gen = 99 }, 5000, &outs) < 0)
			die("grp_join again");
	}
	if (!g->leader || g->state != GRP_COMPLETING_REBALANCE)
		die("the rebalance did not complete");
	struct grp_assign as[4];
	uint32_t n = g->nmembers < 4 ? g->nmembers : 4;
	for (uint32_t i = 0; i < n; i++)
		as[i] = (struct grp_assign){ g->members[i]->id, g->members[i]->id_len, (const uint8_t *)"\0\1\0\0assign", 10 };
	for (uint32_t i = 0; i < g->nmembers; i++) {
		struct grp_member *m = g->members[i];
		outs.n = 0;
		bool leader = m == g->leader;
		if (grp_sync(g, m->id, m->id_len, g->generation, leader ? as : NULL, leader ? n : 0,
		             (struct grp_waiter){ .ctx = m, .gen = 100 + i }, 5001, &outs) < 0)
			die("grp_sync");
	}
	if (g->state != GRP_STABLE)
		die("the group is not Stable");
	return g;
}

static void offsetslog_seeds(const char *dir)
{
	static const uint8_t modes[] = { 0, 2 };
	struct grp_coord *c;
	if (grp_coord_create(&c) < 0)
		die("grp_coord_create");

	/* Commits, a re-commit, metadata null and not, a tombstone. */
	start();
	offset_record("grp-a", "orders", 0, 42, NULL, -1, -1);
	offset_record("grp-a", "orders", 1, 7, "client-meta", 11, -1);
	offset_record("grp-a", "orders", 0, 50, "", 0, -1);
	offset_record("grp-b", "events", 3, 1000, NULL, -1, -1);
	uint8_t key[GRP_KEY_BYTES_MAX];
	int kn = grp_offset_key_encode(key, sizeof(key), "grp-b", 5, "events", 6, 3);
	record(key, kn, NULL, -1);
	put(dir, "commits", modes, sizeof(modes));

	/* Offsets staged by transactions (one dropped by its tombstone) and a group beside them. */
	start();
	offset_record("grp-t", "orders", 2, 77, NULL, -1, 1000);
	offset_record("grp-t", "orders", 3, 78, "m", 1, 1000);
	uint8_t pkey[GRP_PENDING_KEY_BYTES_MAX];
	kn = grp_pending_key_encode(pkey, sizeof(pkey), 1000, "grp-t", 5, "orders", 6, 3);
	record(pkey, kn, NULL, -1);
	offset_record("grp-t", "orders", 2, 79, NULL, -1, -1);
	group_record(stable_group(c, "grp-t", 1));
	put(dir, "staged", modes, sizeof(modes));

	/* Group records: Stable with three members (one static), Empty, and a group tombstone. */
	start();
	group_record(stable_group(c, "grp-s", 3));
	struct grp_group *e = grp_get(c, "grp-e", 5);
	if (!e)
		die("grp_get");
	e->generation = 12;
	group_record(e);
	kn = grp_group_key_encode(key, sizeof(key), "grp-e", 5);
	record(key, kn, NULL, -1);
	put(dir, "groups", modes, sizeof(modes));
	grp_coord_destroy(c);
}

/* ---- producer-state snapshots ---- */

static void pstate_seeds(const char *dir)
{
	static const uint8_t modes[] = { 0, 2, 3 };
	static uint8_t log[16384], snap[16384];
	size_t log_len = 0, snap_len = 0;
	int64_t next = 0;
	struct txn_pstate *ps;
	if (txn_pstate_create(&ps) < 0)
		die("txn_pstate_create");
	/* pid 10 idempotent, 11 a committed transaction, 12 one left open; snapshot after 8 batches. */
	struct { int64_t pid; int16_t attr; int32_t seq; int marker; } b[] = {
		{ 10, 0, 0, -1 }, { 11, ST_BATCH_ATTR_TRANSACTIONAL, 0, -1 }, { 10, 0, 1, -1 },
		{ 11, ST_BATCH_ATTR_TRANSACTIONAL, 1, -1 }, { 11, 0, 0, 1 }, { 12, ST_BATCH_ATTR_TRANSACTIONAL, 0, -1 },
		{ 10, 0, 2, -1 }, { 13, ST_BATCH_ATTR_TRANSACTIONAL, 0, -1 }, { 13, 0, 0, 0 },
		{ 10, 0, 3, -1 }, { 12, ST_BATCH_ATTR_TRANSACTIONAL, 1, -1 }, { 14, 0, 0, -1 },
	};
	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++) {
		uint8_t *at = log + log_len;
		int n = b[i].marker >= 0 ? st_batch_build_marker(at, sizeof(log) - log_len, b[i].pid, 0, b[i].marker == 1, 0,
		                                                 1700000000000 + i)
		                         : st_batch_build(at, sizeof(log) - log_len, b[i].attr, b[i].pid, 0, b[i].seq,
		                                          1700000000000 + i, "k", 1, "value", 5);
		if (n < 0)
			die("st_batch_build");
		st_batch_set_base_offset(at, next);
		if (i < 8) {
			struct st_batch_hdr h;
			if (st_batch_parse(at, (size_t)n, &h) < 0 || txn_pstate_update(ps, &h, next, 1700000000000 + i) < 0)
				die("txn_pstate_update");
			if (i == 7 && !(snap_len = txn_pstate_snapshot_write(ps, next + 1, snap, sizeof(snap))))
				die("txn_pstate_snapshot_write");
		}
		next++;
		log_len += (size_t)n;
	}
	seed_len = 3 + snap_len + log_len;
	st_put_be16(seed + 1, (uint16_t)snap_len);
	memcpy(seed + 3, snap, snap_len);
	memcpy(seed + 3 + snap_len, log, log_len);
	put(dir, "snap-log", modes, sizeof(modes));
	/* The snapshot alone, and an empty one at 0 before the whole log. */
	seed_len = 3 + snap_len;
	put(dir, "snap", modes, 1);
	txn_pstate_destroy(ps);
	if (txn_pstate_create(&ps) < 0 || !(snap_len = txn_pstate_snapshot_write(ps, 0, snap, sizeof(snap))))
		die("txn_pstate_snapshot_write");
	seed_len = 3 + snap_len + log_len;
	st_put_be16(seed + 1, (uint16_t)snap_len);
	memcpy(seed + 3, snap, snap_len);
	memcpy(seed + 3 + snap_len, log, log_len);
	put(dir, "empty-log", modes, sizeof(modes));
	txn_pstate_destroy(ps);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: fuzz_txn_seeds TXNLOG_DIR OFFSETSLOG_DIR PSTATE_DIR\n");
		return 2;
	}
	txnlog_seeds(argv[1]);
	offsetslog_seeds(argv[2]);
	pstate_seeds(argv[3]);
	return 0;
}
