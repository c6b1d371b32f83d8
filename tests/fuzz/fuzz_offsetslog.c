/*
 * fuzz_offsetslog.c - libFuzzer target for the group coordinator's log
 * (__consumer_offsets): the record decoders of committed offsets, offsets
 * staged by transactions and group metadata (txn/group.c
 * grp_offsets_apply_batch, grp_groups_apply_batch, group_restore) and the
 * start-up replay that applies the whole log in order to both tables
 * (dataplane/group.c load_batch).
 *
 * Input: byte 0 the mode (bit 0: keep the CRCs as they are, else each
 * batch's is fixed so mutations reach the records; bit 1: replay through a
 * log on disk, as the broker does, else straight from memory), the rest the
 * log's bytes: record batches of offset records (key version 1, or 2 for a
 * staged one), group records (key version 3) and tombstones.
 *
 * What must hold whatever the bytes: replay never crashes or fails but for
 * memory; every offset it keeps has a key and metadata within their limits;
 * every group it restores is Empty without members or Stable with a leader
 * among them, each with a session timeout the broker accepts; writing each
 * back as the driver does (grp_offset_value_encode, grp_group_value_encode)
 * and replaying that gives the same bytes again; and the restored groups
 * carry on: their members heartbeat, rejoin and expire through the checked
 * state setter.
 * Locality: the fuzzer's thread.
 */
#include "fuzz_log.h"
#include "group.h"

#define FUZZ_NOW_MS 1000000

static uint8_t fuzz_copy[FUZZ_INPUT_BYTES_MAX];
static uint8_t fuzz_val[1u << 20], fuzz_val2[1u << 20], fuzz_batch[(1u << 20) + 4096];
static struct grp_outs fuzz_outs;

struct tables {
	struct grp_offsets *offsets;
	struct grp_coord *groups;
};

static int load_batch(void *arg, const uint8_t *batch, size_t len, const struct st_batch_hdr *h)
{
	struct tables *t = arg;
	(void)h;
	int rc = grp_offsets_apply_batch(t->offsets, batch, len);
	fuzz_check(rc == 0 || rc == -EBADMSG || rc == -ENOMEM, "odd error from grp_offsets_apply_batch");
	if (rc == -ENOMEM)
		return rc;
	rc = grp_groups_apply_batch(t->groups, batch, len, FUZZ_NOW_MS);
	fuzz_check(rc == 0 || rc == -EBADMSG || rc == -ENOMEM, "odd error from grp_groups_apply_batch");
	return rc == -ENOMEM ? rc : 0;   /* as load_batch: damage is skipped, memory stops the start */
}

static int batch_of(const uint8_t *key, size_t klen, const uint8_t *val, int vlen)
{
	int bn = st_batch_build(fuzz_batch, sizeof(fuzz_batch), 0, -1, -1, -1, FUZZ_NOW_MS, key, (int32_t)klen, val,
	                        vlen);
	fuzz_check(bn > 0, "st_batch_build of a loaded record");
	return bn;
}

/* One table of offsets (committed or staged): bounds, then the driver's rewrite replays to the same. */
static void check_offsets(struct grp_offsets *t, bool staged)
{
	struct grp_offsets *t2;
	uint32_t cur = 0, n = 0;
	const struct grp_offset *o;
	fuzz_check(grp_offsets_create(&t2) == 0, "grp_offsets_create");
	while ((o = staged ? grp_pending_next(t, &cur) : grp_offset_next(t, &cur))) {
		const char *g, *tp;
		size_t gl, tl;
		int32_t part;
		grp_offset_key_parts(o, &g, &gl, &tp, &tl, &part);
		fuzz_check(gl <= GRP_ID_BYTES_MAX && tl <= GRP_TOPIC_BYTES_MAX &&
		           o->key_len == (staged ? 8 : 0) + 10 + gl + tl, "an offset key out of bounds");
		fuzz_check(o->meta_len >= -1 && o->meta_len <= GRP_OFFSET_META_MAX && (o->meta_len <= 0 || o->meta),
		           "offset metadata out of bounds");
		fuzz_check(!o->ending, "a staged offset restored as ending");
		if (staged)
			(void)grp_pending_pid(o);
		int vn = grp_offset_value_encode(fuzz_val, sizeof(fuzz_val), o->offset, o->leader_epoch, o->commit_ms,
		                                 o->meta, o->meta_len);
		fuzz_check(vn > 0, "grp_offset_value_encode of a loaded offset");
		int bn = batch_of(o->key, o->key_len, fuzz_val, vn);
		int rc = grp_offsets_apply_batch(t2, fuzz_batch, (size_t)bn);
		if (rc == -ENOMEM)
			break;
		fuzz_check(rc == 0, "a rewritten offset does not replay");
		n++;
	}
	fuzz_check(o != NULL || (staged ? grp_pending_count(t2) : grp_offsets_count(t2)) == n,
	           "the rewrite holds other offsets");
	/* Same values under the same keys. */
	cur = 0;
	while (!o && (o = staged ? grp_pending_next(t2, &cur) : grp_offset_next(t2, &cur))) {
		uint32_t c1 = 0;
		const struct grp_offset *a;
		while ((a = staged ? grp_pending_next(t, &c1) : grp_offset_next(t, &c1)))
			if (a->key_len == o->key_len && !memcmp(a->key, o->key, o->key_len))
				break;
		fuzz_check(a && a->offset == o->offset && a->leader_epoch == o->leader_epoch &&
		           a->commit_ms == o->commit_ms && a->meta_len == o->meta_len &&
		           (a->meta_len <= 0 || !memcmp(a->meta, o->meta, (size_t)a->meta_len)),
		           "a rewritten offset replays to another");
		o = NULL;
	}
	grp_offsets_destroy(t2);
}

static void check_group(const struct grp_group *g)
{
	fuzz_check(g->id_len > 0 && g->id_len <= GRP_ID_BYTES_MAX, "a group id out of bounds");
	/* Dead: its group record's tombstone was read back (DeleteGroups); it stays unlisted
	 * until a join or a commit makes it anew, as in Kafka. */
	fuzz_check(g->state == GRP_EMPTY || g->state == GRP_STABLE || g->state == GRP_DEAD,
	           "a group restored in a passing state");
	fuzz_check((g->state == GRP_STABLE) == (g->nmembers > 0), "members and state disagree");
	fuzz_check(g->nmembers <= GRP_MEMBERS_MAX && g->nmembers <= g->members_cap, "members beyond their limit");
	fuzz_check(g->protocol_type_len <= GRP_NAME_BYTES_MAX && g->protocol_name_len <= GRP_NAME_BYTES_MAX,
	           "a protocol name out of bounds");
	bool leader = false;
	for (uint32_t i = 0; i < g->nmembers; i++) {
		const struct grp_member *m = g->members[i];
		leader |= m == g->leader;
		fuzz_check(m->id_len > 0 && m->id_len <= GRP_MEMBER_ID_BYTES_MAX &&
		           m->instance_id_len <= GRP_NAME_BYTES_MAX && m->client_id_len <= GRP_NAME_BYTES_MAX &&
		           m->client_host_len <= GRP_HOST_BYTES_MAX, "a member name out of bounds");
		fuzz_check(m->session_ms >= GRP_SESSION_MIN_MS && m->session_ms <= GRP_SESSION_MAX_MS &&
		           m->rebalance_ms > 0 && m->rebalance_ms <= GRP_REBALANCE_MAX_MS, "a member timeout out of bounds");
		fuzz_check(m->nprotocols == 1 && m->protocols[0].meta != NULL, "a member without its protocol");
		fuzz_check(!m->join.ctx && !m->sync.ctx, "a member restored waiting");
	}
	fuzz_check(g->nmembers == 0 ? g->leader == NULL && g->protocol == -1 : leader && g->protocol == 0,
	           "the leader is not a member");
}

/* Each group written back (as the driver persists a Stable or Empty one) replays to the same record. */
static void check_groups(struct grp_coord *c)
{
	struct grp_coord *c2;
	uint8_t key[GRP_GROUP_KEY_BYTES_MAX];
	uint32_t cur = 0;
	struct grp_group *g;
	fuzz_check(grp_coord_create(&c2) == 0, "grp_coord_create");
	while ((g = grp_next(c, &cur))) {
		check_group(g);
		if (g->state == GRP_DEAD)
			continue;   /* deleted: never written back (group.c's save_group and compaction) */
		size_t vn = grp_group_value_size(g);
		int kn = grp_group_key_encode(key, sizeof(key), g->id, g->id_len);
		fuzz_check(kn > 0 && vn <= sizeof(fuzz_val) && grp_group_value_encode(g, fuzz_val, sizeof(fuzz_val)) == (int)vn,
		           "grp_group_value_encode of a restored group");
		int bn = batch_of(key, (size_t)kn, fuzz_val, (int)vn);
		int rc = grp_groups_apply_batch(c2, fuzz_batch, (size_t)bn, FUZZ_NOW_MS);
		if (rc == -ENOMEM)
			break;
		fuzz_check(rc == 0, "a rewritten group does not replay");
		struct grp_group *g2 = grp_find(c2, g->id, g->id_len);
		fuzz_check(g2 && grp_group_value_size(g2) == vn && grp_group_value_encode(g2, fuzz_val2, sizeof(fuzz_val2)) ==
		           (int)vn && !memcmp(fuzz_val, fuzz_val2, vn), "a rewritten group replays to another");
	}
	grp_coord_destroy(c2);
}

/* The restored groups carry on: what the first requests and timers after a restart do to them. */
static void drive_groups(struct grp_coord *c)
{
	uint32_t cur = 0;
	struct grp_group *g;
	while ((g = grp_next(c, &cur))) {
		fuzz_outs.n = 0;
		for (uint32_t i = 0; i < g->nmembers; i++) {
			struct grp_member *m = g->members[i];
			(void)grp_heartbeat(g, m->id, m->id_len, g->generation, FUZZ_NOW_MS + 1);
			(void)grp_commit_check(g, m->id, m->id_len, g->generation);
			(void)grp_fenced(g, m->id, m->id_len, m->instance_id, m->instance_id_len);
		}
		if (g->nmembers) {
			/* The first member rejoins with its group's protocol, as after a restart of the client. */
			struct grp_member *m = g->members[0];
			struct grp_join_req q = {
				.member_id = m->id, .member_id_len = m->id_len,
				.instance_id = m->instance_id, .instance_id_len = m->instance_id_len,
				.client_id = "fuzz", .client_id_len = 4,
				.protocol_type = g->protocol_type, .protocol_type_len = g->protocol_type_len,
				.session_ms = GRP_SESSION_MIN_MS, .rebalance_ms = GRP_SESSION_MIN_MS, .nprotocols = 1,
				.proto_names = { g->protocol_name }, .proto_name_lens = { g->protocol_name_len },
				.proto_metas = { (const uint8_t *)"m" }, .proto_meta_lens = { 1 },
			};
			struct grp_waiter w = { .ctx = &fuzz_outs, .gen = 1, .core = 0 };
			(void)grp_join(g, &q, w, FUZZ_NOW_MS + 2, &fuzz_outs);
		}
		/* Long after: every member is gone, and the group with them. */
		fuzz_outs.n = 0;
		grp_tick(g, FUZZ_NOW_MS + 4LL * GRP_REBALANCE_MAX_MS, &fuzz_outs);
		grp_tick(g, FUZZ_NOW_MS + 8LL * GRP_REBALANCE_MAX_MS, &fuzz_outs);
		fuzz_check(g->nmembers == 0, "restored members outlive their sessions");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char dir[FUZZ_PATH_BYTES];
	if (size < 1 || size - 1 > sizeof(fuzz_copy))
		return 0;
	if (!dir[0])
		fuzz_dir(dir, "offsetslog");
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	if (!(data[0] & 1)) {
		fuzz_fix_crcs(p, n, fuzz_copy);
		p = fuzz_copy;
	}
	struct tables t = { 0 };
	fuzz_check(grp_offsets_create(&t.offsets) == 0 && grp_coord_create(&t.groups) == 0, "create");
	int rc = fuzz_replay(dir, p, n, data[0] & 2, load_batch, &t);
	fuzz_check(rc == 0 || rc == -ENOMEM, "the replay failed");
	if (rc == 0) {
		check_offsets(t.offsets, false);
		check_offsets(t.offsets, true);
		check_groups(t.groups);
		drive_groups(t.groups);
	}
	grp_offsets_destroy(t.offsets);
	grp_coord_destroy(t.groups);
	return 0;
}
