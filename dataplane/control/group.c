/*
 * group.c - the consumer-group coordinator, on the control core: drives
 * txn/group.c (membership, rebalances, committed offsets) for the calls
 * the NIC cores send it (groupapi.c; the contract is loop/call.h), a
 * handler per kind of call (dp_group_provide), and answers each with
 * DP_MSG_GROUP_DONE once the response is filled. JoinGroup and SyncGroup
 * calls are kept until the rebalance lets them be answered, as txncoord.c
 * keeps its op_ctx; a call whose connection closed meanwhile still goes
 * back to its NIC core, which drops the answer.
 *
 * Committed offsets are appended to the coordinator's own log,
 * DATA/__consumer_offsets (one RecordBatch per partition: key = group,
 * topic, partition; value = offset, leader epoch, timestamp, metadata; a
 * null value deletes), and an OffsetCommit is answered, and the table
 * updated, only once its writes are durable. On start the log is read back
 * (latest record per key wins). The log is compacted like the transaction
 * log (maybe_compact, threshold --transaction-log-compact-records).
 *
 * TxnOffsetCommit stages offsets per (producer id, group): pending records
 * in the same log (key version 2 = version 1 plus the producer id, see
 * txn/group.h), answered once durable, invisible to OffsetFetch (which with
 * RequireStable answers UNSTABLE_OFFSET_COMMIT for them). A staged offset
 * counts as pending from the moment its write is queued (as Kafka records
 * a pending commit before its append) until its transaction's end is
 * durable: a consumer taking the partition over is never answered the
 * offset before it in between. The transaction coordinator's complete()
 * calls dp_group_txn_end: a commit writes them as committed records, then
 * tombstones the pending ones; an abort only tombstones; once durable the
 * committed offset replaces the staged one in one step. Pending records left
 * over at start are resolved from the coordinator's state for their
 * producer id (resolve_staged).
 *
 * Membership is persisted as Kafka does: whenever a group becomes Stable
 * or Empty (or a static member is replaced), its members, generation and
 * assignments go to the same log as a group record (txn/group.h), so after
 * a restart the members' heartbeats find their generation and nobody
 * rebalances. Records too large to reload (over DP_GRP_META_MAX) are not
 * written: that group rebalances after a restart instead.
 * Locality: control core.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "coord.h"
#include "group.h"
#include "kerr.h"
#include "log.h"
#include "call.h"
#include "control_internal.h"

#define DP_GRP_TIMER_MS    100
#define DP_GRP_BATCH_EXTRA 64          /* record framing around key and value */
#define DP_GRP_META_MAX    (1u << 20)  /* largest group record written (the reader takes 4 MiB batches) */
#define DP_GRP_HELD_MAX    256         /* completions --fault-offsets-delay-ms holds at once */
/* Groups one DeleteGroups deletes: each costs a pass over the offsets table on this core; names
 * past it answer INVALID_REQUEST (clients send what their caller lists: rarely more than a few). */
#define DP_GRP_DELETE_GROUPS_MAX 256
/* Committed offsets one retention pass expires at most (a fixed list on this core; the pass
 * after it comes a timer tick later while more are due), so one pass is bounded work. */
#define DP_GRP_EXPIRE_BATCH     1024

/* A write completion held back by --fault-offsets-delay-ms (test only). */
struct grp_held {
	void (*done)(void *cookie, int status);   /* what it runs once released */
	void *cookie;
	int status;
	int64_t due_ms;
};

struct dp_grp {
	struct grp_mem mem;           /* the pool of coord's and offsets' state (--group-state-mib) */
	struct grp_coord *coord;
	struct grp_offsets *offsets;
	struct dp_clog clog;          /* __consumer_offsets (clog.c) */
	char dir[1024];
	int64_t next_timer_ms;
	int64_t next_expiry_ms;       /* offset retention's next pass */
	const struct grp_offset *expire[DP_GRP_EXPIRE_BATCH];   /* that pass's offsets to expire */
	struct grp_outs outs;         /* answers released by the current call */
	uint32_t inflight;            /* offset writes not yet durable (compaction waits) */
	uint32_t compact_phase;       /* a compaction in slices: offsets, staged offsets, groups, done */
	struct grp_held held[DP_GRP_HELD_MAX];   /* FIFO from held_head, nheld long */
	uint32_t held_head, nheld;
};

struct grp_tomb_op;
/* One record written on its own: a compaction rewrite, a group's metadata, or a tombstone. */
struct grp_rewrite {
	uint8_t *buf;
	struct grp_group *g;          /* meta_written: groups are never freed */
	struct grp_tomb_op *op;       /* tomb_written: the DeleteGroups or OffsetDelete it is for */
};

/*
 * One DeleteGroups or OffsetDelete whose tombstones are queued: the table forgets each entry as
 * its tombstone is queued (as expiry does), and the call is answered once every tombstone is
 * durable, so that an answered delete survives a restart. left counts them, and one more while
 * the handler is still queuing (tomb_put).
 */
struct grp_tomb_op {
	struct dp_call *r;
	uint32_t left;
	bool failed;                  /* a tombstone's write failed: what it answered NONE becomes an error */
};

/*
 * One OffsetCommit or TxnOffsetCommit in flight: a record per partition,
 * each with its own cookie; answered once all are durable (owrite_done).
 * The same op for both, as Kafka's: a TxnOffsetCommit's record is the
 * OffsetCommit's under the producer's pending key (version 2), staged at
 * once; an OffsetCommit's is applied once durable.
 */
struct grp_owrite;
struct grp_owrite_part {
	struct grp_owrite *op;
	int16_t *err;                 /* the response partition's error code */
	struct kstr topic;            /* the offset (into the request: it lives until the answer) */
	int32_t partition;
	int64_t offset, commit_ms;
	int32_t leader_epoch;
	struct kstr meta;
	bool prepared;                /* an OffsetCommit's room, made before the write (grp_offset_prepare) */
	struct grp_offset *fresh;     /* and its new entry, if it needs one */
};

struct grp_owrite {
	struct dp_call *r;
	struct kstr group;
	int64_t pid;                  /* TxnOffsetCommit: the producer staging them; -1 OffsetCommit */
	uint16_t core;
	uint32_t gen;
	uint32_t left;
	uint8_t *buf;                 /* every partition's batch */
	uint32_t n;                   /* parts filled */
	struct grp_owrite_part parts[];
};

/*
 * The end of a transaction for one staged offset: a commit writes it as a
 * committed record and then a tombstone for the pending key (one log, so in
 * that order on replay); an abort only the tombstone. The staged entry stays
 * pending (marked ending) until both are durable; then the committed one
 * replaces it in one step (grp_pending_end_apply).
 */
struct grp_end {
	bool commit, failed;
	uint8_t left;
	uint8_t *buf;
	int64_t offset, commit_ms;
	int32_t leader_epoch;
	int32_t meta_len;
	char *meta;                   /* a pool buffer when meta_len > 0 */
	uint16_t klen;                /* the committed (v1) key */
	uint8_t key[GRP_KEY_BYTES_MAX];
	uint16_t pklen;               /* the pending (v2) key */
	uint8_t pkey[GRP_PENDING_KEY_BYTES_MAX];
	struct txn_meta *waiter;      /* the transaction whose markers wait for this end (dp_group_txn_end), or NULL */
};

/* Hand call r back to its caller with its answer (call.h). */
static void reply(struct dp_core *c, struct dp_call *r)
{
	dp_call_answer(c, r, DP_MSG_GROUP_DONE);
}

/* A copy in the call's arena: the group may change before the NIC core encodes. */
static const void *acopy(struct dp_call *r, const void *p, size_t len)
{
	void *d = karena_alloc(&r->arena, len ? len : 1);
	if (d && len)
		memcpy(d, p, len);
	return d;
}

static struct kstr astr(struct dp_call *r, const char *p, size_t len, bool *ok)
{
	const char *d = acopy(r, p, len);
	*ok &= d != NULL;
	return (struct kstr){ d ? d : "", d ? (int32_t)len : 0 };
}

/*
 * The answer does not fit the call's arena (sized by the request, while a
 * leader's member list or a listing follows the group state): the caller
 * sends the call again in a larger one (call.h dp_call_grow). The handler
 * answers err meanwhile, which stands if it cannot.
 */
static int16_t too_big(struct dp_call *r, const char *what, int16_t err)
{
	if (!dp_call_grow(r))
		DP_WARN_RL("%s: the answer does not fit the largest call arena", what);
	return err;
}

_Static_assert(GRP_MEMBER_ID_BYTES_MAX < DP_ARENA_BASE_BYTES / 2,
               "a JoinGroup's member id fits what its arena holds beyond the request (fill_join)");

/* An error answer; MEMBER_ID_REQUIRED carries the id to join again with (given_id). */
static void join_error(struct dp_call *r, int16_t err, const char *given_id, uint16_t given_len)
{
	struct JoinGroupResponse *resp = r->resp;
	bool ok = true;
	dp_call_error(r, err);
	if (given_len)
		resp->MemberId = astr(r, given_id, given_len, &ok);
	if (!ok)
		resp->ErrorCode = KERR_UNKNOWN_SERVER_ERROR;
}

/* The metadata member m sent for the group's chosen protocol (empty if none). */
static struct kbytes member_meta(struct dp_call *r, const struct grp_group *g, const struct grp_member *m, bool *ok)
{
	for (uint32_t p = 0; p < m->nprotocols; p++)
		if (m->protocols[p].name_len == g->protocol_name_len &&
		    !memcmp(m->protocols[p].name, g->protocol_name, g->protocol_name_len)) {
			const uint8_t *d = acopy(r, m->protocols[p].meta, m->protocols[p].meta_len);
			*ok &= d != NULL;
			return (struct kbytes){ d ? d : (const uint8_t *)"", d ? (int32_t)m->protocols[p].meta_len : 0 };
		}
	return (struct kbytes){ (const uint8_t *)"", 0 };
}

static void fill_join(struct dp_call *r, const struct grp_group *g, const struct grp_member *m, bool follower)
{
	struct JoinGroupResponse *resp = r->resp;
	size_t mark = r->arena.used;
	bool ok = true;
	resp->ErrorCode = KERR_NONE;
	resp->GenerationId = g->generation;
	resp->ProtocolType = astr(r, g->protocol_type, g->protocol_type_len, &ok);
	resp->ProtocolName = astr(r, g->protocol_name, g->protocol_name_len, &ok);
	resp->Leader = follower ? astr(r, m->prev_id, m->prev_id_len, &ok) : astr(r, g->leader->id, g->leader->id_len, &ok);
	resp->MemberId = astr(r, m->id, m->id_len, &ok);
	resp->Members_n = 0;
	if (m == g->leader && !follower) {
		/* Only the leader learns every member's subscription: it computes the assignment. */
		resp->Members = karena_alloc(&r->arena, sizeof(*resp->Members) * (g->nmembers + 1));
		ok &= resp->Members != NULL;
		for (uint32_t i = 0; ok && i < g->nmembers; i++) {
			const struct grp_member *x = g->members[i];
			struct JoinGroupResponse_JoinGroupResponseMember *rm = &resp->Members[i];
			rm->MemberId = astr(r, x->id, x->id_len, &ok);
			rm->GroupInstanceId = x->instance_id_len ? astr(r, x->instance_id, x->instance_id_len, &ok)
			                                         : (struct kstr){ NULL, -1 };
			rm->Metadata = member_meta(r, g, x, &ok);
		}
		resp->Members_n = (int32_t)g->nmembers;
	}
	if (!ok) {
		/*
		 * The member is in the group: the call sent again joins as it
		 * (join_as) and, the group unchanged, is answered with this
		 * generation at once (grp_join). The arena is as before this
		 * answer, so the id fits (the assertion above).
		 */
		r->arena.used = mark;
		resp->ProtocolType = (struct kstr){ "", 0 };   /* was in the arena given back (dp_call_error keeps it) */
		join_error(r, KERR_UNKNOWN_SERVER_ERROR, NULL, 0);
		if (dp_call_grow(r)) {
			bool idok = true;
			r->join_as = astr(r, m->id, m->id_len, &idok);
			if (!idok)
				r->grow_bytes = 0;
		} else {
			DP_WARN_RL("group %.*s: JoinGroup: the answer does not fit the largest call arena", g->id_len, g->id);
		}
	}
}

static void fill_sync(struct dp_call *r, const struct grp_group *g, const struct grp_member *m, int16_t err)
{
	struct SyncGroupResponse *resp = r->resp;
	resp->ErrorCode = err;
	resp->Assignment = (struct kbytes){ (const uint8_t *)"", 0 };
	if (err || !m->assignment_len)
		return;
	const uint8_t *d = acopy(r, m->assignment, m->assignment_len);
	if (!d)
		resp->ErrorCode = too_big(r, "SyncGroup", KERR_UNKNOWN_SERVER_ERROR);   /* asked again: Stable, answered at once */
	else
		resp->Assignment = (struct kbytes){ d, (int32_t)m->assignment_len };
}

/* Send every answer the last call into group g released. */
static void save_group(struct dp_core *c, struct grp_group *g, bool compaction);

/* Send every answer the last call into group g released; persist g if it settled. */
static void send_outs(struct dp_core *c, struct grp_group *g)
{
	struct grp_outs *o = &c->grp->outs;
	for (uint32_t i = 0; i < o->n; i++) {
		struct grp_out *x = &o->o[i];
		struct dp_call *r = x->w.ctx;
		if (x->kind == GRP_OUT_JOIN) {
			if (x->err)
				join_error(r, x->err, x->member_id, x->member_id_len);
			else
				fill_join(r, g, x->m, x->follower);
		} else {
			fill_sync(r, g, x->m, x->err);
		}
		reply(c, r);
	}
	o->n = 0;
	if (g->state != GRP_EMPTY)
		g->empty_since_ms = 0;
	else if (!g->empty_since_ms)
		g->empty_since_ms = dp_wall_ms();
	if ((g->state == GRP_STABLE || g->state == GRP_EMPTY) && g->changes != g->saved_changes)
		save_group(c, g, false);
}

/* ---- membership ------------------------------------------------------------------ */

static size_t klen(struct kstr k) { return k.len > 0 ? (size_t)k.len : 0; }

/* KIP-345: a request from a static member whose instance id was taken over by a newer member id. */
static int16_t fenced(const struct grp_group *g, struct kstr member, struct kstr instance)
{
	return g ? grp_fenced(g, member.ptr, klen(member), instance.ptr, klen(instance)) : KERR_NONE;
}

/*
 * The group state pool (--group-state-mib) has no block for what a request
 * needs: nothing changed, and the client is told COORDINATOR_NOT_AVAILABLE,
 * which every client retries (after finding the coordinator again), as
 * Kafka answers when it cannot record a group's state for a moment.
 */
static int16_t pool_full(struct dp_core *c, const char *what)
{
	DP_WARN_RL("%s: the group state pool is full (%llu of %llu bytes in use, --group-state-mib); refused retriably",
	           what, (unsigned long long)c->grp->mem.arena.used, (unsigned long long)c->grp->mem.arena.bytes);
	return KERR_COORDINATOR_NOT_AVAILABLE;
}

static int16_t join_group(struct dp_core *c, struct dp_msg *msg, struct dp_call *r)
{
	struct JoinGroupRequest *q = r->req;
	if (q->GroupId.len <= 0 || q->GroupId.len > GRP_ID_BYTES_MAX)
		return KERR_INVALID_GROUP_ID;
	if (q->Protocols_n <= 0 || q->Protocols_n > GRP_PROTOCOLS_MAX)
		return KERR_INCONSISTENT_GROUP_PROTOCOL;
	struct grp_group *g = grp_get(c->grp->coord, q->GroupId.ptr, (size_t)q->GroupId.len);
	if (!g)
		return pool_full(c, "JoinGroup");
	struct grp_join_req j = {
		.member_id = q->MemberId.ptr, .member_id_len = q->MemberId.len > 0 ? (size_t)q->MemberId.len : 0,
		.instance_id = q->GroupInstanceId.ptr, .instance_id_len = klen(q->GroupInstanceId),
		.require_known_id = r->hdr.api_version >= 4,
		.client_id = r->hdr.client_id.ptr, .client_id_len = r->hdr.client_id.len > 0 ? (size_t)r->hdr.client_id.len : 0,
		.client_host = r->peer ? r->peer : "", .client_host_len = r->peer ? strlen(r->peer) : 0,
		.protocol_type = q->ProtocolType.ptr,
		.protocol_type_len = q->ProtocolType.len > 0 ? (size_t)q->ProtocolType.len : 0,
		.session_ms = q->SessionTimeoutMs, .rebalance_ms = q->RebalanceTimeoutMs,
		.initial_delay_ms = c->b->cfg.group_initial_delay_ms,
		.nprotocols = (uint32_t)q->Protocols_n,
	};
	if (!j.client_id_len) {
		j.client_id = "member";
		j.client_id_len = 6;
	}
	for (int32_t i = 0; i < q->Protocols_n; i++) {
		struct JoinGroupRequest_JoinGroupRequestProtocol *p = &q->Protocols[i];
		j.proto_names[i] = p->Name.ptr;
		j.proto_name_lens[i] = p->Name.len > 0 ? (size_t)p->Name.len : 0;
		j.proto_metas[i] = p->Metadata.ptr;
		j.proto_meta_lens[i] = p->Metadata.len > 0 ? (size_t)p->Metadata.len : 0;
	}
	struct grp_waiter w = { .ctx = r, .gen = msg->gen, .core = msg->src };
	if (grp_join(g, &j, w, dp_wall_ms(), &c->grp->outs) < 0)
		return pool_full(c, "JoinGroup");
	DP_DBG("group %.*s: JoinGroup, %s generation %d, %u members", g->id_len, g->id,
	       grp_state_name(g->state), g->generation, g->nmembers);
	send_outs(c, g);
	return DP_ANSWER_LATER;
}

static int16_t sync_group(struct dp_core *c, struct dp_msg *msg, struct dp_call *r)
{
	struct SyncGroupRequest *q = r->req;
	struct grp_group *g = q->GroupId.len > 0 ? grp_find(c->grp->coord, q->GroupId.ptr, (size_t)q->GroupId.len) : NULL;
	if (!g)
		return KERR_UNKNOWN_MEMBER_ID;
	if (fenced(g, q->MemberId, q->GroupInstanceId))
		return KERR_FENCED_INSTANCE_ID;
	int32_t na = q->Assignments_n > 0 ? q->Assignments_n : 0;   /* bounded by the request's frame */
	struct grp_assign *a = karena_alloc(&r->arena, ((size_t)na + 1) * sizeof(*a));
	if (!a)
		return KERR_COORDINATOR_NOT_AVAILABLE;   /* the request arena: retriable */
	for (int32_t i = 0; i < na; i++) {
		struct SyncGroupRequest_SyncGroupRequestAssignment *x = &q->Assignments[i];
		a[i] = (struct grp_assign){ x->MemberId.ptr, x->MemberId.len > 0 ? (size_t)x->MemberId.len : 0,
		                            x->Assignment.ptr, x->Assignment.len > 0 ? (size_t)x->Assignment.len : 0 };
	}
	struct grp_waiter w = { .ctx = r, .gen = msg->gen, .core = msg->src };
	int rc = grp_sync(g, q->MemberId.ptr, q->MemberId.len > 0 ? (size_t)q->MemberId.len : 0, q->GenerationId,
	                  a, (uint32_t)na, w, dp_wall_ms(), &c->grp->outs);
	if (rc < 0)
		return pool_full(c, "SyncGroup");
	send_outs(c, g);
	return DP_ANSWER_LATER;
}

static int16_t heartbeat(struct dp_core *c, struct dp_call *r)
{
	struct HeartbeatRequest *q = r->req;
	struct grp_group *g = q->GroupId.len > 0 ? grp_find(c->grp->coord, q->GroupId.ptr, (size_t)q->GroupId.len) : NULL;
	if (!g)
		return KERR_UNKNOWN_MEMBER_ID;
	if (fenced(g, q->MemberId, q->GroupInstanceId))
		return KERR_FENCED_INSTANCE_ID;
	return grp_heartbeat(g, q->MemberId.ptr, q->MemberId.len > 0 ? (size_t)q->MemberId.len : 0, q->GenerationId,
	                     dp_wall_ms());
}

static int16_t leave_group(struct dp_core *c, struct dp_call *r)
{
	struct LeaveGroupRequest *q = r->req;
	struct LeaveGroupResponse *resp = r->resp;
	struct grp_group *g = q->GroupId.len > 0 ? grp_find(c->grp->coord, q->GroupId.ptr, (size_t)q->GroupId.len) : NULL;
	int64_t now = dp_wall_ms();
	if (r->hdr.api_version < 3) {
		int16_t err = g ? grp_leave(g, q->MemberId.ptr, q->MemberId.len > 0 ? (size_t)q->MemberId.len : 0, now,
		                            &c->grp->outs) : KERR_UNKNOWN_MEMBER_ID;
		if (g)
			send_outs(c, g);
		return err;
	}
	/* v3+ (KIP-345): a batch of members, each with its own answer. */
	int32_t n = q->Members_n > 0 ? q->Members_n : 0;
	resp->Members = karena_alloc(&r->arena, sizeof(*resp->Members) * (size_t)(n + 1));
	if (!resp->Members)
		return KERR_UNKNOWN_SERVER_ERROR;
	resp->Members_n = n;
	for (int32_t i = 0; i < n; i++) {
		struct LeaveGroupRequest_MemberIdentity *x = &q->Members[i];
		struct kstr id = x->MemberId;
		resp->Members[i].MemberId = x->MemberId;
		resp->Members[i].GroupInstanceId = x->GroupInstanceId;
		/* A static member may leave by its instance id alone (kafka-consumer-groups --delete-members). */
		const struct grp_member *s = g && !klen(id) ? grp_static_find(g, x->GroupInstanceId.ptr, klen(x->GroupInstanceId)) : NULL;
		if (s)
			id = (struct kstr){ s->id, s->id_len };
		int16_t err = !g ? KERR_UNKNOWN_MEMBER_ID : fenced(g, id, x->GroupInstanceId);
		resp->Members[i].ErrorCode = err ? err : grp_leave(g, id.ptr, klen(id), now, &c->grp->outs);
		if (g)
			send_outs(c, g);
	}
	return KERR_NONE;
}

/* ---- committed offsets ------------------------------------------------------------- */

/*
 * OffsetCommit and TxnOffsetCommit (request q, response resp of either
 * kind): refuse partitions with oversized metadata or a bad topic name in
 * their response slot, and count the others (n) and the bytes of their log
 * batches (bytes, keys of at most key_max bytes).
 */
#define COMMIT_SIZE(q, resp, key_max, n, bytes)                                                       \
	for (int32_t i_ = 0; i_ < (q)->Topics_n; i_++)                                                 \
		for (int32_t j_ = 0; j_ < (q)->Topics[i_].Partitions_n; j_++) {                        \
			int32_t meta_ = (q)->Topics[i_].Partitions[j_].CommittedMetadata.len;          \
			int32_t name_ = (q)->Topics[i_].Name.len;                                      \
			int16_t *pe_ = &(resp)->Topics[i_].Partitions[j_].ErrorCode;                   \
			if (*pe_)                                                                      \
				continue;   /* refused already (unknown topic) */                      \
			if (meta_ > GRP_OFFSET_META_MAX)                                               \
				*pe_ = KERR_OFFSET_METADATA_TOO_LARGE;                              \
			else if (name_ <= 0 || name_ > GRP_TOPIC_BYTES_MAX)                            \
				*pe_ = KERR_UNKNOWN_TOPIC_OR_PARTITION;                                \
			else {                                                                         \
				(n)++;                                                                 \
				(bytes) += ST_BATCH_HEADER_BYTES + DP_GRP_BATCH_EXTRA + (key_max) + 24 + \
				           (meta_ > 0 ? (size_t)meta_ : 0);                             \
			}                                                                              \
		}

/*
 * OffsetCommit and TxnOffsetCommit (response resp of either kind): every
 * partition not already refused on its own (unknown topic) gets err.
 */
#define COMMIT_FILL_ALL(resp, err)                                                                    \
	for (int32_t i_ = 0; i_ < (resp)->Topics_n; i_++)                                              \
		for (int32_t j_ = 0; j_ < (resp)->Topics[i_].Partitions_n; j_++)                       \
			if (!(resp)->Topics[i_].Partitions[j_].ErrorCode)                               \
				(resp)->Topics[i_].Partitions[j_].ErrorCode = (err)

static void commit_fill_all(struct OffsetCommitResponse *resp, int16_t err)
{
	COMMIT_FILL_ALL(resp, err);
}

static void tcommit_fill_all(struct TxnOffsetCommitResponse *resp, int16_t err)
{
	COMMIT_FILL_ALL(resp, err);
}

/*
 * OffsetCommit and TxnOffsetCommit (request q, response resp of either
 * kind): Kafka answers UNKNOWN_TOPIC_OR_PARTITION for each partition of a
 * topic the broker does not have (or past its partition count) before the
 * group or the producer is looked at, and commits or stages the others: an
 * offset for a topic that does not exist would otherwise be stored and
 * served back as if it meant something.
 */
#define COMMIT_UNKNOWN_TOPICS(c, q, resp)                                                             \
	for (int32_t i_ = 0; i_ < (q)->Topics_n; i_++) {                                               \
		struct kstr name_ = (q)->Topics[i_].Name;                                              \
		for (int32_t j_ = 0; j_ < (q)->Topics[i_].Partitions_n; j_++) {                        \
			uint32_t id_, gen_, hash_;                                                     \
			if (name_.len <= 0 ||                                                          \
			    !dp_ctrl_topic((c), name_.ptr, (size_t)name_.len,                          \
			                   (q)->Topics[i_].Partitions[j_].PartitionIndex, &id_, &gen_, &hash_)) \
				(resp)->Topics[i_].Partitions[j_].ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION; \
		}                                                                                      \
	}

static void rewrite_done(struct dp_core *c, struct grp_rewrite *w, int status);

static void owrite_done(struct dp_core *c, struct grp_owrite_part *p, int status);
static void end_done(struct dp_core *c, struct grp_end *w, int status);

/* Act on the oldest held completion. */
static void held_release(struct dp_grp *t)
{
	struct grp_held h = t->held[t->held_head];
	t->held_head = (t->held_head + 1) % DP_GRP_HELD_MAX;
	t->nheld--;
	h.done(h.cookie, h.status);
}

/* Release the held completions that are due, oldest first (the log's order). */
static void held_tick(struct dp_grp *t, int64_t now)
{
	while (t->nheld && t->held[t->held_head].due_ms <= now)
		held_release(t);
}

/*
 * Fault injection (--fault-offsets-delay-ms): the write is durable, but the
 * coordinator learns it late, which widens every window between a write
 * and its effect. True if done(cookie, status) is held back for later.
 */
static bool held_back(void (*done)(void *, int), void *cookie, int status, const char *what)
{
	struct dp_core *c = dp_core_self();
	int32_t delay = c->b->cfg.fault_offsets_delay_ms;
	if (delay <= 0)
		return false;
	struct dp_grp *t = c->grp;
	if (t->nheld == DP_GRP_HELD_MAX)
		held_release(t);   /* keeps the order: the oldest goes first */
	t->held[(t->held_head + t->nheld++) % DP_GRP_HELD_MAX] =
		(struct grp_held){ .done = done, .cookie = cookie, .status = status, .due_ms = dp_wall_ms() + delay };
	DP_INFO("fault injection: acting on a %s write %d ms late", what, delay);
	return true;
}

/* The log writes' completions (st_append_cb), one per kind of write: the cookie is its record. */
static void rewrite_written(void *cookie, int status, int64_t base_offset)
{
	rewrite_done(dp_core_self(), cookie, status);
}

static void expire_written(void *cookie, int status, int64_t base_offset)
{
	struct grp_rewrite *w = cookie;
	if (status < 0)   /* the offset is gone from memory; a restart may bring it back, no harm */
		DP_ERR("offsets log: an expiry tombstone failed: %s", strerror(-status));
	dp_buf_put(w->buf);
	dp_buf_put(w);
}

static void meta_written(void *cookie, int status, int64_t base_offset)
{
	struct grp_rewrite *w = cookie;
	if (status < 0) {
		DP_ERR("group %.*s: membership write failed: %s", w->g->id_len, w->g->id, strerror(-status));
		w->g->saved_changes = w->g->changes - 1;   /* written again at its next settle */
	}
	dp_buf_put(w->buf);
	dp_buf_put(w);
}

static void commit_written(void *cookie, int status, int64_t base_offset)
{
	owrite_done(dp_core_self(), cookie, status);
}

static void stage_acted(void *cookie, int status)
{
	owrite_done(dp_core_self(), cookie, status);
}

static void stage_written(void *cookie, int status, int64_t base_offset)
{
	if (!held_back(stage_acted, cookie, status, "staged-offset"))
		stage_acted(cookie, status);
}

static void end_acted(void *cookie, int status)
{
	end_done(dp_core_self(), cookie, status);
}

static void end_written(void *cookie, int status, int64_t base_offset)
{
	if (!held_back(end_acted, cookie, status, "transaction-end"))
		end_acted(cookie, status);
}

/*
 * A durable (or failed) record of an OffsetCommit or TxnOffsetCommit. A
 * commit's offset is applied now; a staged one already is (pending), and
 * stays staged after a failure: the client, told so, aborts (or its
 * transaction times out), and that end drops it.
 */
static void owrite_done(struct dp_core *c, struct grp_owrite_part *p, int status)
{
	struct grp_owrite *op = p->op;
	c->grp->inflight--;
	if (status < 0) {
		DP_ERR_RL("group %.*s: %s write failed: %s", op->group.len, op->group.ptr,
		          op->pid < 0 ? "offset commit" : "staged offset", strerror(-status));
		*p->err = KERR_KAFKA_STORAGE_ERROR;
		if (p->prepared)
			grp_offset_drop(c->grp->offsets, p->fresh);
	} else if (p->prepared) {
		/* Cannot fail: the room was made before the write. */
		if (grp_offset_install(c->grp->offsets, p->fresh, op->group.ptr, (size_t)op->group.len, p->topic.ptr,
		                       (size_t)p->topic.len, p->partition, p->offset, p->leader_epoch, p->commit_ms,
		                       p->meta.ptr, p->meta.len) < 0) {
			DP_ERR_RL("group %.*s: a durable offset commit found no room in the table (a coordinator bug); "
			          "the restart loads it", op->group.len, op->group.ptr);
			*p->err = KERR_COORDINATOR_NOT_AVAILABLE;
		}
	}
	p->prepared = false;
	p->fresh = NULL;
	if (--op->left)
		return;
	reply(c, op->r);
	dp_buf_put(op->buf);
	dp_buf_put(op);
}

/* An op for n partitions and bytes of batches (COMMIT_SIZE); NULL if out of memory. */
static struct grp_owrite *owrite_new(struct dp_msg *msg, struct dp_call *r, struct kstr group, int64_t pid,
                                     uint32_t n, size_t bytes)
{
	struct grp_owrite *op = dp_buf_try_get(sizeof(*op) + n * sizeof(op->parts[0]));
	uint8_t *buf = dp_buf_try_get(bytes);
	if (!op || !buf) {
		dp_buf_put(op);
		if (buf)
			dp_buf_put(buf);
		return NULL;
	}
	*op = (struct grp_owrite){ .r = r, .group = group, .pid = pid, .core = msg->src, .gen = msg->gen,
	                           .left = 1, .buf = buf };
	return op;
}

/*
 * OffsetCommit and TxnOffsetCommit (request q, response resp of either
 * kind): one part of op per partition not refused yet, the offset as the
 * request gives it, committed at now.
 */
#define COMMIT_PARTS(q, resp, op, now)                                                                \
	for (int32_t i_ = 0; i_ < (q)->Topics_n; i_++)                                                 \
		for (int32_t j_ = 0; j_ < (q)->Topics[i_].Partitions_n; j_++) {                        \
			int16_t *pe_ = &(resp)->Topics[i_].Partitions[j_].ErrorCode;                   \
			if (*pe_)                                                                      \
				continue;                                                              \
			(op)->parts[(op)->n++] = (struct grp_owrite_part){                             \
				.op = (op), .err = pe_,                                                  \
				.topic = (q)->Topics[i_].Name,                                           \
				.partition = (q)->Topics[i_].Partitions[j_].PartitionIndex,               \
				.offset = (q)->Topics[i_].Partitions[j_].CommittedOffset,                 \
				.leader_epoch = (q)->Topics[i_].Partitions[j_].CommittedLeaderEpoch,      \
				.commit_ms = (now), .meta = (q)->Topics[i_].Partitions[j_].CommittedMetadata }; \
		}

/*
 * Write op's parts, a batch each (room counted by COMMIT_SIZE). A
 * TxnOffsetCommit's offset is pending from before its write is durable: a
 * RequireStable OffsetFetch meanwhile must not be answered the offset
 * before it (a consumer resuming there would copy this transaction's input
 * again once it commits). Either answer waits for durability. Returns 0
 * (answered now: nothing was queued) or DP_ANSWER_LATER.
 */
static int16_t owrite_start(struct dp_core *c, struct grp_owrite *op, size_t bytes)
{
	int64_t now = dp_wall_ms();
	size_t at = 0;
	for (uint32_t k = 0; k < op->n; k++) {
		struct grp_owrite_part *p = &op->parts[k];
		uint8_t key[GRP_PENDING_KEY_BYTES_MAX], val[GRP_VALUE_BYTES_MAX];
		_Static_assert(GRP_PENDING_KEY_BYTES_MAX >= GRP_KEY_BYTES_MAX, "either key fits");
		const char *g = op->group.ptr, *tp = p->topic.ptr;
		size_t gl = (size_t)op->group.len, tl = (size_t)p->topic.len;
		int kn = op->pid < 0 ? grp_offset_key_encode(key, sizeof(key), g, gl, tp, tl, p->partition) :
		         grp_pending_key_encode(key, sizeof(key), op->pid, g, gl, tp, tl, p->partition);
		int vn = grp_offset_value_encode(val, sizeof(val), p->offset, p->leader_epoch, p->commit_ms,
		                                 p->meta.ptr, p->meta.len);
		int bn = kn < 0 || vn < 0 ? -EINVAL :
		         st_batch_build(op->buf + at, bytes - at, 0, -1, -1, -1, now, key, kn, val, vn);
		/*
		 * The table's memory is taken before the write, so that what a durable record
		 * says is always in the table: a staged offset now, a commit's entry prepared
		 * (installed once durable). Without a block in the group pool the partition is
		 * answered COORDINATOR_NOT_AVAILABLE, retriable, and nothing is written.
		 */
		int perr = 0;
		if (bn >= 0 && op->pid >= 0)
			perr = grp_pending_put(c->grp->offsets, key, (size_t)kn, p->offset, p->leader_epoch, p->commit_ms,
			                       p->meta.ptr, p->meta.len);
		else if (bn >= 0 && (perr = grp_offset_prepare(c->grp->offsets, g, gl, tp, tl, p->partition, p->meta.len,
		                                                &p->fresh)) == 0)
			p->prepared = true;
		if (perr < 0) {
			DP_WARN_RL("group %.*s: %s: the group state pool is full (--group-state-mib); refused retriably",
			           (int)gl, g, op->pid < 0 ? "offset commit" : "staged offset");
			*p->err = KERR_COORDINATOR_NOT_AVAILABLE;
			continue;
		}
		int64_t off = bn < 0 ? bn : dp_clog_append(&c->grp->clog, op->buf + at, (uint32_t)bn,
		                                              op->pid < 0 ? commit_written : stage_written, p);
		if (off < 0) {
			DP_ERR_RL("offsets log append failed: %s", strerror((int)-off));
			*p->err = KERR_KAFKA_STORAGE_ERROR;   /* a staged one stays: the client's abort drops it */
			if (p->prepared)
				grp_offset_drop(c->grp->offsets, p->fresh);
			p->prepared = false;
			p->fresh = NULL;
			continue;
		}
		at += (size_t)bn;
		op->left++;
		c->grp->inflight++;
	}
	/* The first count kept op alive until every append was queued. */
	if (--op->left == 0) {
		dp_buf_put(op->buf);
		dp_buf_put(op);
		return KERR_NONE;
	}
	return DP_ANSWER_LATER;
}

static int16_t offset_commit(struct dp_core *c, struct dp_msg *msg, struct dp_call *r)
{
	struct OffsetCommitRequest *q = r->req;
	struct OffsetCommitResponse *resp = r->resp;
	COMMIT_UNKNOWN_TOPICS(c, q, resp);
	if (q->GroupId.len <= 0 || q->GroupId.len > GRP_ID_BYTES_MAX) {
		commit_fill_all(resp, KERR_INVALID_GROUP_ID);
		return KERR_NONE;
	}
	struct grp_group *g = grp_find(c->grp->coord, q->GroupId.ptr, (size_t)q->GroupId.len);
	int16_t err = fenced(g, q->MemberId, q->GroupInstanceId);
	if (!err)
		err = grp_commit_check(g, q->MemberId.ptr, klen(q->MemberId),
		                       r->hdr.api_version == 0 ? -1 : q->GenerationIdOrMemberEpoch);
	if (err) {
		commit_fill_all(resp, err);
		return KERR_NONE;
	}
	/* Size the batches, then write one per partition that passes. */
	uint32_t n = 0;
	size_t bytes = 0;
	COMMIT_SIZE(q, resp, GRP_KEY_BYTES_MAX, n, bytes);
	if (n == 0)
		return KERR_NONE;
	struct grp_owrite *op = owrite_new(msg, r, q->GroupId, -1, n, bytes);
	if (!op) {
		commit_fill_all(resp, KERR_UNKNOWN_SERVER_ERROR);
		return KERR_NONE;
	}
	COMMIT_PARTS(q, resp, op, dp_wall_ms());
	if (r->hdr.api_version == 1) {   /* v1 alone carries a commit time per partition */
		uint32_t k = 0;   /* the parts, in COMMIT_PARTS's order */
		for (int32_t i = 0; i < q->Topics_n; i++)
			for (int32_t j = 0; j < q->Topics[i].Partitions_n; j++) {
				if (resp->Topics[i].Partitions[j].ErrorCode)
					continue;
				if (q->Topics[i].Partitions[j].CommitTimestamp >= 0)
					op->parts[k].commit_ms = q->Topics[i].Partitions[j].CommitTimestamp;
				k++;
			}
	}
	return owrite_start(c, op, bytes);
}

/* Is o an offset of group gid? */
static bool offset_in_group(const struct grp_offset *o, const char *gid, size_t glen)
{
	const char *gp, *tp;
	size_t gl, tl;
	int32_t part;
	grp_offset_key_parts(o, &gp, &gl, &tp, &tl, &part);
	return gl == glen && !memcmp(gp, gid, gl);
}

static int16_t offset_fetch(struct dp_core *c, struct dp_call *r)
{
	struct OffsetFetchRequest *q = r->req;
	struct OffsetFetchResponse *resp = r->resp;
	struct grp_offsets *tab = c->grp->offsets;
	struct kstr gid = q->GroupId;
	size_t glen = gid.len > 0 ? (size_t)gid.len : 0;
	if (q->Topics_n < 0) {
		/*
		 * Every partition the group committed (v2+), grouped by topic
		 * (quadratic, but rare). Three passes, so the response is sized by
		 * this group's offsets, not by every offset the broker holds (which
		 * soon outgrew the request's arena): count, name the topics and
		 * count their partitions, fill.
		 */
		uint32_t n = 0, nt = 0, cur = 0;
		const struct grp_offset *o;
		while ((o = grp_offset_next(tab, &cur)))
			n += offset_in_group(o, gid.ptr, glen);
		resp->Topics = karena_alloc(&r->arena, sizeof(*resp->Topics) * (n + 1));
		if (!resp->Topics)
			return too_big(r, "OffsetFetch", KERR_UNKNOWN_SERVER_ERROR);
		for (int pass = 0; pass < 2; pass++) {
			cur = 0;
			while ((o = grp_offset_next(tab, &cur))) {
				const char *gp, *tp;
				size_t gl, tl;
				int32_t part;
				if (!offset_in_group(o, gid.ptr, glen))
					continue;
				grp_offset_key_parts(o, &gp, &gl, &tp, &tl, &part);
				uint32_t t;
				for (t = 0; t < nt; t++)
					if ((size_t)resp->Topics[t].Name.len == tl && !memcmp(resp->Topics[t].Name.ptr, tp, tl))
						break;
				bool ok = true;
				if (pass == 0) {   /* name the topics, count their partitions */
					if (t == nt)
						resp->Topics[nt++].Name = astr(r, tp, tl, &ok);
					resp->Topics[t].Partitions_n++;
					if (!ok)
						return too_big(r, "OffsetFetch", KERR_UNKNOWN_SERVER_ERROR);
					continue;
				}
				struct OffsetFetchResponse_OffsetFetchResponsePartition *p =
					&resp->Topics[t].Partitions[resp->Topics[t].Partitions_n++];
				p->PartitionIndex = part;
				p->ErrorCode = q->RequireStable && grp_pending_has(tab, gid.ptr, glen, tp, tl, part) ?
				               KERR_UNSTABLE_OFFSET_COMMIT : KERR_NONE;
				p->CommittedOffset = p->ErrorCode ? -1 : o->offset;   /* Kafka sends no offset with it */
				p->CommittedLeaderEpoch = p->ErrorCode ? -1 : o->leader_epoch;
				p->Metadata = p->ErrorCode || o->meta_len < 0 ? (struct kstr){ NULL, -1 } :
				              astr(r, o->meta, (size_t)o->meta_len, &ok);
				if (!ok)
					return too_big(r, "OffsetFetch", KERR_UNKNOWN_SERVER_ERROR);
			}
			for (uint32_t t = 0; pass == 0 && t < nt; t++) {
				struct OffsetFetchResponse_OffsetFetchResponseTopic *tr = &resp->Topics[t];
				tr->Partitions = karena_alloc(&r->arena, sizeof(*tr->Partitions) * ((size_t)tr->Partitions_n + 1));
				if (!tr->Partitions)
					return too_big(r, "OffsetFetch", KERR_UNKNOWN_SERVER_ERROR);
				tr->Partitions_n = 0;   /* the fill pass counts again */
			}
		}
		resp->Topics_n = (int32_t)nt;
		return KERR_NONE;
	}
	resp->Topics = karena_alloc(&r->arena, sizeof(*resp->Topics) * (size_t)(q->Topics_n + 1));
	if (!resp->Topics)
		return too_big(r, "OffsetFetch", KERR_UNKNOWN_SERVER_ERROR);
	resp->Topics_n = q->Topics_n;
	for (int32_t i = 0; i < q->Topics_n; i++) {
		struct OffsetFetchRequest_OffsetFetchRequestTopic *tq = &q->Topics[i];
		struct OffsetFetchResponse_OffsetFetchResponseTopic *tr = &resp->Topics[i];
		int32_t np = tq->PartitionIndexes_n > 0 ? tq->PartitionIndexes_n : 0;
		tr->Name = tq->Name;
		tr->Partitions = karena_alloc(&r->arena, sizeof(*tr->Partitions) * (size_t)(np + 1));
		if (!tr->Partitions)
			return too_big(r, "OffsetFetch", KERR_UNKNOWN_SERVER_ERROR);
		tr->Partitions_n = np;
		for (int32_t j = 0; j < np; j++) {
			struct OffsetFetchResponse_OffsetFetchResponsePartition *p = &tr->Partitions[j];
			const struct grp_offset *o = tq->Name.len > 0 ?
				grp_offset_get(tab, gid.ptr, glen, tq->Name.ptr, (size_t)tq->Name.len, tq->PartitionIndexes[j]) : NULL;
			bool ok = true;
			p->PartitionIndex = tq->PartitionIndexes[j];
			/* UNSTABLE_OFFSET_COMMIT: a transaction staged an offset here and may still commit it. */
			p->ErrorCode = q->RequireStable && tq->Name.len > 0 &&
			               grp_pending_has(tab, gid.ptr, glen, tq->Name.ptr, (size_t)tq->Name.len,
			                               p->PartitionIndex) ? KERR_UNSTABLE_OFFSET_COMMIT : KERR_NONE;
			if (p->ErrorCode)
				o = NULL;   /* Kafka sends no offset with UNSTABLE_OFFSET_COMMIT: nobody may resume from it */
			p->CommittedOffset = o ? o->offset : -1;
			p->CommittedLeaderEpoch = o ? o->leader_epoch : -1;
			p->Metadata = !o ? (struct kstr){ "", 0 } :
			              o->meta_len < 0 ? (struct kstr){ NULL, -1 } : astr(r, o->meta, (size_t)o->meta_len, &ok);
			if (!ok)
				return too_big(r, "OffsetFetch", KERR_UNKNOWN_SERVER_ERROR);
		}
	}
	return KERR_NONE;
}

/* ---- transactional offsets --------------------------------------------------------- */

/* The producer checks of TxnOffsetCommit (KIP-447 for v3's member fields). */
static int16_t tcommit_check(struct dp_core *c, struct dp_call *r)
{
	struct TxnOffsetCommitRequest *q = r->req;
	int16_t v = r->hdr.api_version;
	if (q->GroupId.len <= 0 || q->GroupId.len > GRP_ID_BYTES_MAX)
		return KERR_INVALID_GROUP_ID;
	if (!dp_txnc_ready(c))
		return KERR_COORDINATOR_LOAD_IN_PROGRESS;   /* start-up: not every producer is known yet */
	struct txn_meta *m = q->TransactionalId.len > 0 ?
		dp_txnc_find(c, q->TransactionalId.ptr, (size_t)q->TransactionalId.len) : NULL;
	if (!m || m->pid != q->ProducerId)
		return KERR_INVALID_PRODUCER_ID_MAPPING;
	if (m->epoch != q->ProducerEpoch)
		return v >= 2 ? KERR_PRODUCER_FENCED : KERR_INVALID_PRODUCER_EPOCH;   /* PRODUCER_FENCED from v2 */
	if (m->state != TXN_ONGOING || !txn_meta_has_group(m, q->GroupId.ptr, (size_t)q->GroupId.len))
		return KERR_INVALID_TXN_STATE;
	if (v >= 3 && q->GenerationId >= 0) {
		struct grp_group *g = grp_find(c->grp->coord, q->GroupId.ptr, (size_t)q->GroupId.len);
		int16_t err = fenced(g, q->MemberId, q->GroupInstanceId);
		return err ? err : grp_commit_check(g, q->MemberId.ptr, klen(q->MemberId), q->GenerationId);
	}
	return KERR_NONE;
}

static int16_t txn_offset_commit(struct dp_core *c, struct dp_msg *msg, struct dp_call *r)
{
	struct TxnOffsetCommitRequest *q = r->req;
	struct TxnOffsetCommitResponse *resp = r->resp;
	COMMIT_UNKNOWN_TOPICS(c, q, resp);
	int16_t err = tcommit_check(c, r);
	if (err) {
		tcommit_fill_all(resp, err);
		return KERR_NONE;
	}
	uint32_t n = 0;
	size_t bytes = 0;
	COMMIT_SIZE(q, resp, GRP_PENDING_KEY_BYTES_MAX, n, bytes);
	if (n == 0)
		return KERR_NONE;
	struct grp_owrite *op = owrite_new(msg, r, q->GroupId, q->ProducerId, n, bytes);
	if (!op) {
		tcommit_fill_all(resp, KERR_UNKNOWN_SERVER_ERROR);
		return KERR_NONE;
	}
	if (r->hdr.api_version < 2)   /* no leader epoch before v2 */
		for (int32_t i = 0; i < q->Topics_n; i++)
			for (int32_t j = 0; j < q->Topics[i].Partitions_n; j++)
				q->Topics[i].Partitions[j].CommittedLeaderEpoch = -1;
	COMMIT_PARTS(q, resp, op, dp_wall_ms());
	return owrite_start(c, op, bytes);
}

static void end_done(struct dp_core *c, struct grp_end *w, int status)
{
	c->grp->inflight--;
	w->failed |= status < 0;
	if (--w->left)
		return;
	if (w->failed) {
		/* Still staged (and marked ending, so not ended twice): RequireStable
		 * keeps answering UNSTABLE_OFFSET_COMMIT rather than an old offset,
		 * until the restart resolves it from the log. */
		DP_ERR("offsets log: ending a transaction's staged offset failed; the restart resolves it");
	} else if (grp_pending_end_apply(c->grp->offsets, w->pkey, w->pklen, w->commit, w->offset, w->leader_epoch,
	                                 w->commit_ms, w->meta, w->meta_len) < 0) {
		DP_ERR("offsets: no memory to apply a committed transactional offset; it stays staged");
	}
	struct txn_meta *waiter = w->waiter;
	dp_buf_put(w->buf);
	dp_buf_put(w->meta);
	dp_buf_put(w);
	if (waiter)
		dp_txnc_offsets_ended(c, waiter);
}

/* Write the end of one staged offset o (see struct grp_end); o leaves the table. */
static int end_one(struct dp_core *c, const struct grp_offset *o, bool commit, struct txn_meta *waiter)
{
	struct dp_grp *t = c->grp;
	size_t cap = 2 * (ST_BATCH_HEADER_BYTES + DP_GRP_BATCH_EXTRA + GRP_PENDING_KEY_BYTES_MAX + GRP_VALUE_BYTES_MAX);
	struct grp_end *w = dp_buf_try_get(sizeof(*w));
	uint8_t *buf = dp_buf_try_get(cap);
	char *meta = o->meta_len > 0 ? dp_buf_try_get((size_t)o->meta_len) : NULL;
	if (!w || !buf || (o->meta_len > 0 && !meta)) {
		dp_buf_put(w);
		dp_buf_put(meta);
		if (buf)
			dp_buf_put(buf);
		return -ENOMEM;
	}
	if (meta)
		memcpy(meta, o->meta, (size_t)o->meta_len);
	*w = (struct grp_end){ .commit = commit, .buf = buf,
	                       .offset = o->offset, .commit_ms = o->commit_ms, .leader_epoch = o->leader_epoch,
	                       .meta_len = o->meta_len, .meta = meta };
	/* The committed key is the pending key less its producer id, version 1. */
	w->klen = (uint16_t)(o->key_len - 8);
	memcpy(w->key + 2, o->key + 10, w->klen - 2u);
	w->key[0] = 0;
	w->key[1] = 1;
	w->pklen = o->key_len;
	memcpy(w->pkey, o->key, o->key_len);
	int64_t now = dp_wall_ms();
	size_t at = 0;
	int bn[2] = { 0, 0 };
	if (commit) {
		uint8_t val[GRP_VALUE_BYTES_MAX];
		int vn = grp_offset_value_encode(val, sizeof(val), o->offset, o->leader_epoch, o->commit_ms, o->meta,
		                                 o->meta_len);
		bn[0] = vn < 0 ? vn : st_batch_build(buf, cap, 0, -1, -1, -1, now, w->key, w->klen, val, vn);
		at = bn[0] > 0 ? (size_t)bn[0] : 0;
	}
	bn[1] = st_batch_build(buf + at, cap - at, 0, -1, -1, -1, now, o->key, o->key_len, NULL, -1);
	if (bn[0] < 0 || bn[1] < 0) {
		dp_buf_put(buf);
		dp_buf_put(meta);
		dp_buf_put(w);
		return -EINVAL;
	}
	w->waiter = waiter;   /* from here on end_done runs once, and answers it */
	if (waiter)
		dp_txnc_offsets_waiting(waiter);
	w->left = 1;   /* held until both are queued */
	at = 0;
	for (int i = 0; i < 2; i++) {
		if (!bn[i])
			continue;
		int64_t off = dp_clog_append(&t->clog, buf + at, (uint32_t)bn[i], end_written, w);
		at += (size_t)bn[i];
		if (off < 0) {
			DP_ERR_RL("offsets log append failed: %s", strerror((int)-off));
			w->failed = true;
			break;
		}
		w->left++;
		t->inflight++;
	}
	bool failed = w->failed;
	t->inflight++;   /* balanced by the end_done below */
	end_done(c, w, 0);
	return failed ? -EIO : 0;
}

/*
 * End pid's staged offsets of group (NULL: of every group). Entries stay in
 * the table (marked ending) until their end is durable, so one pass: the
 * table is not changed under it (end_one changes nothing when it fails).
 */
static uint32_t end_staged(struct dp_core *c, const char *group, size_t glen, int64_t pid, bool commit,
                           struct txn_meta *waiter)
{
	struct grp_offsets *tab = c->grp->offsets;
	uint32_t ended = 0, cur = 0;
	const struct grp_offset *o;
	while ((o = grp_pending_next(tab, &cur))) {
		const char *g, *tp;
		size_t gl, tl;
		int32_t part;
		grp_offset_key_parts(o, &g, &gl, &tp, &tl, &part);
		if (o->ending || grp_pending_pid(o) != pid || (group && (gl != glen || memcmp(g, group, gl))))
			continue;
		(void)grp_pending_end_begin(tab, o->key, o->key_len);   /* o is in the table: cannot fail */
		if (end_one(c, o, commit, waiter) < 0)
			DP_ERR("offsets: could not end a staged offset of producer %lld; it stays staged until a restart",
			       (long long)pid);
		ended++;
	}
	return ended;
}

/*
 * Start-up: staged offsets whose transaction is over (the coordinator says
 * CompleteCommit, or CompleteAbort/Empty/unknown) are applied or dropped
 * now; Ongoing and Prepare* ones stay (the coordinator's resume or the
 * client ends them through dp_group_txn_end).
 */
static void resolve_staged(struct dp_core *c)
{
	uint32_t n = grp_pending_count(c->grp->offsets), np = 0, cur = 0, ended = 0;
	int64_t *pids = calloc(n + 1, sizeof(*pids));
	const struct grp_offset *o;
	if (!pids)
		return;
	while ((o = grp_pending_next(c->grp->offsets, &cur))) {
		int64_t pid = grp_pending_pid(o);
		uint32_t i;
		for (i = 0; i < np && pids[i] != pid; i++)
			;
		if (i == np)
			pids[np++] = pid;
	}
	for (uint32_t i = 0; i < np; i++) {
		struct txn_meta *m = dp_txnc_find_pid(c, pids[i]);
		enum txn_state s = m ? m->state : TXN_EMPTY;
		if (s == TXN_ONGOING || s == TXN_PREPARE_COMMIT || s == TXN_PREPARE_ABORT || s == TXN_PREPARE_EPOCH_FENCE)
			continue;
		ended += end_staged(c, NULL, 0, pids[i], s == TXN_COMPLETE_COMMIT, NULL);
	}
	free(pids);
	if (n)
		DP_INFO("offsets: %u staged offset(s) of finished transactions resolved, %u still pending", ended,
		        grp_pending_count(c->grp->offsets) - ended);   /* the resolved ones leave once durable */
}

void dp_group_txn_end(struct dp_core *c, const char *group, size_t glen, int64_t pid, bool commit,
                      struct txn_meta *waiter)
{
	if (!c->grp)
		return;   /* start-up: dp_group_start resolves from the final state */
	uint32_t n = end_staged(c, group, glen, pid, commit, waiter);
	DP_DBG("group %.*s: %u staged offset(s) of producer %lld %s", (int)glen, group, n, (long long)pid,
	       commit ? "committed" : "dropped");
}

/*
 * A transaction's end reaches the offsets log as its marker reaches a
 * partition (Kafka writes it to __consumer_offsets like any marker): until
 * it is durable the producer's next transaction must not begin. If it
 * failed, the entry stays staged and the restart resolves it from the
 * coordinator's state for pid, which must still be that transaction's
 * (a later one would apply or drop it by its own outcome; found by the
 * whole-broker simulator, tests/sim/wsim.c).
 */
bool dp_group_txn_ending(struct dp_core *c, int64_t pid)
{
	if (!c->grp)
		return false;
	uint32_t cur = 0;
	const struct grp_offset *o;
	while ((o = grp_pending_next(c->grp->offsets, &cur)))
		if (o->ending && grp_pending_pid(o) == pid)
			return true;
	return false;
}

/* ---- compaction -------------------------------------------------------------------- */

/*
 * Every commit is a new record, so the log only grows. When it holds far
 * more records than there are live keys, start a new segment, write every
 * live offset into it, and once those writes are durable drop the segments
 * before it: the newest record of each key is then always in what remains.
 * It starts only when no commit write is in flight: the table is updated
 * when a write is durable, so a rewrite taken while one is in flight could
 * carry a value older than a record it lands after (and the old segment
 * holding that record could be dropped).
 */
static void rewrite_done(struct dp_core *c, struct grp_rewrite *w, int status)
{
	dp_buf_put(w->buf);
	dp_buf_put(w);
	dp_clog_compact_done(&c->grp->clog, status);
}

/* Append one record with its own cookie, done runs once it is durable
 * (rewrite_written, meta_written or expire_written); val NULL: a tombstone. */
static int append_record(struct dp_core *c, const uint8_t *key, size_t klen, const uint8_t *val, int vn,
                         st_append_cb done, struct grp_group *g)
{
	size_t cap = ST_BATCH_HEADER_BYTES + DP_GRP_BATCH_EXTRA + klen + (vn > 0 ? (size_t)vn : 0);
	uint8_t *buf = val && vn < 0 ? NULL : dp_buf_try_get(cap);
	struct grp_rewrite *w = buf ? dp_buf_try_get(sizeof(*w)) : NULL;
	int n = w ? dp_clog_write(&c->grp->clog, buf, cap, dp_wall_ms(), key, klen, val, vn, done, w)
	          : -ENOMEM;
	if (n < 0) {
		if (buf)
			dp_buf_put(buf);
		dp_buf_put(w);
		return n;
	}
	*w = (struct grp_rewrite){ .buf = buf, .g = g };
	return 0;
}

static int rewrite_one(struct dp_core *c, const uint8_t *key, size_t klen, const struct grp_offset *o)
{
	uint8_t val[GRP_VALUE_BYTES_MAX];
	int vn = grp_offset_value_encode(val, sizeof(val), o->offset, o->leader_epoch, o->commit_ms, o->meta,
	                                 o->meta_len);
	int rc = append_record(c, key, klen, val, vn, rewrite_written, NULL);
	if (rc == 0)
		st_compaction_queued(&c->grp->clog.compact);
	return rc;
}

/*
 * g's membership as it is now (Stable or Empty), appended to the log: for
 * the group itself when it settled, or as a compaction rewrite.
 */
static void save_group(struct dp_core *c, struct grp_group *g, bool compaction)
{
	uint8_t key[GRP_GROUP_KEY_BYTES_MAX];
	size_t vsize = grp_group_value_size(g);
	g->saved_changes = g->changes;
	if (vsize > DP_GRP_META_MAX) {
		DP_WARN_RL("group %.*s: membership record of %zu bytes not written; the group rebalances after a restart",
		        g->id_len, g->id, vsize);
		if (compaction)
			st_compaction_lost(&c->grp->clog.compact);   /* its older record must not be dropped either */
		return;
	}
	uint8_t *val = dp_buf_try_get(vsize);
	int kn = grp_group_key_encode(key, sizeof(key), g->id, g->id_len);
	int vn = val ? grp_group_value_encode(g, val, vsize) : -1;
	int rc = !val ? -ENOMEM : kn < 0 || vn < 0 ? -EINVAL :
	         append_record(c, key, (size_t)kn, val, vn, compaction ? rewrite_written : meta_written, g);
	dp_buf_put(val);
	if (rc < 0) {
		DP_ERR("group %.*s: cannot write its membership: %s", g->id_len, g->id, strerror(-rc));
		g->saved_changes = g->changes - 1;
		if (compaction)
			st_compaction_lost(&c->grp->clog.compact);
	} else if (compaction) {
		st_compaction_queued(&c->grp->clog.compact);
	}
}

/* Compaction's three sets: committed offsets, staged offsets, groups. */
enum { GRP_CP_OFFSETS, GRP_CP_PENDING, GRP_CP_GROUPS, GRP_CP_DONE };

/* The next entry of set `phase` at or after *cur, and its flag (the tables lend entries const for
 * reading; they are the tables' own, and compact_due is the driver's); NULL at the end. */
static void *cp_next(struct dp_grp *t, uint32_t phase, uint32_t *cur, bool **due)
{
	if (phase == GRP_CP_GROUPS) {
		struct grp_group *g = grp_next(t->coord, cur);
		*due = g ? &g->compact_due : NULL;
		return g;
	}
	const struct grp_offset *o = phase == GRP_CP_OFFSETS ? grp_offset_next(t->offsets, cur) :
	                                                        grp_pending_next(t->offsets, cur);
	*due = o ? &((struct grp_offset *)o)->compact_due : NULL;
	return (void *)o;
}

/*
 * As the transaction log's (txncoord.c): every live key rewritten, a slice
 * a timer tick (DP_CLOG_COMPACT_SLICE in flight at most), those live at the
 * start flagged then, each set looked through again at its end (a delete
 * may shift a flagged one back). Before, one turn queued every key, and
 * past storage's 8,192 appends per core the rest were lost and the
 * compaction with them. A slice, like the start, runs only while no commit
 * write is in flight: the table takes a commit once it is durable, so a
 * rewrite from it then could carry a value older than a record it lands
 * after.
 */
static void maybe_compact(struct dp_core *c)
{
	struct dp_grp *t = c->grp;
	struct dp_clog *l = &t->clog;
	uint32_t cur;
	bool *due;
	if (t->inflight)
		return;
	if (!l->compact.queuing) {
		uint32_t live = grp_offsets_count(t->offsets) + grp_pending_count(t->offsets) + grp_count(t->coord);
		if (!dp_clog_compact_begin(l, live, c->b->cfg.txn_log_compact_records))
			return;
		for (uint32_t ph = GRP_CP_OFFSETS; ph < GRP_CP_DONE; ph++)
			for (cur = 0; cp_next(t, ph, &cur, &due);)
				*due = true;
		t->compact_phase = GRP_CP_OFFSETS;
		l->cursor = 0;
		DP_INFO("offsets log: compacting %u offsets and groups from offset %lld, %u at a time", live,
		        (long long)l->compact.from, DP_CLOG_COMPACT_SLICE);
	}
	uint32_t room = dp_clog_compact_room(l);
	while (room && t->compact_phase < GRP_CP_DONE) {
		cur = l->cursor;
		void *e = cp_next(t, t->compact_phase, &cur, &due);
		if (!e) {   /* the end of this set: any flagged one moved back goes round again */
			bool left = false;
			for (uint32_t k = 0; !left && cp_next(t, t->compact_phase, &k, &due);)
				left = *due;
			if (!left)
				t->compact_phase++;
			l->cursor = 0;
			continue;
		}
		l->cursor = cur;
		if (!*due)
			continue;
		*due = false;
		room--;
		if (t->compact_phase == GRP_CP_GROUPS) {
			struct grp_group *g = e;
			if (g->state == GRP_STABLE || g->state == GRP_EMPTY)
				save_group(c, g, true);
			else
				g->saved_changes = g->changes - 1;   /* mid-rebalance: written when it settles */
		} else {
			const struct grp_offset *o = e;
			if (rewrite_one(c, o->key, o->key_len, o) < 0)
				st_compaction_lost(&l->compact);
		}
	}
	if (t->compact_phase == GRP_CP_DONE)
		dp_clog_compact_end(l);
}

/* ---- ListGroups / DescribeGroups (admin) ------------------------------------------------ */

/* Kafka's names for the states (ListGroups filters compare them without case). */
static struct kstr state_str(enum grp_state s)
{
	const char *n = grp_state_name(s);
	return (struct kstr){ n, (int32_t)strlen(n) };
}

static bool state_wanted(const struct ListGroupsRequest *q, enum grp_state s)
{
	if (q->StatesFilter_n <= 0)
		return true;
	const char *n = grp_state_name(s);
	for (int32_t i = 0; i < q->StatesFilter_n; i++)
		if (q->StatesFilter[i].len == (int32_t)strlen(n) && !strncasecmp(q->StatesFilter[i].ptr, n, strlen(n)))
			return true;
	return false;
}

/* Is group id g already among the first n listed? */
static bool listed(const struct ListGroupsResponse *resp, uint32_t n, const char *g, size_t glen)
{
	for (uint32_t i = 0; i < n; i++)
		if ((size_t)resp->Groups[i].GroupId.len == glen && !memcmp(resp->Groups[i].GroupId.ptr, g, glen))
			return true;
	return false;
}

/*
 * Every live group, and (as Kafka does after loading its offsets topic) every
 * group that only has committed offsets: those are Empty with no protocol
 * type. Dead groups are left out. The offsets walk dedups against the list
 * so far: quadratic in groups, fine for an admin call.
 */
static int16_t list_groups(struct dp_core *c, struct dp_call *r)
{
	struct ListGroupsRequest *q = r->req;
	struct ListGroupsResponse *resp = r->resp;
	uint32_t cap = grp_count(c->grp->coord) + grp_offsets_count(c->grp->offsets), n = 0, cur = 0;
	resp->Groups = karena_alloc(&r->arena, sizeof(*resp->Groups) * (cap + 1));
	if (!resp->Groups)
		return too_big(r, "ListGroups", KERR_UNKNOWN_SERVER_ERROR);
	bool ok = true;
	struct grp_group *g;
	while ((g = grp_next(c->grp->coord, &cur)) && ok) {
		if (g->state == GRP_DEAD || !state_wanted(q, g->state))
			continue;
		resp->Groups[n].GroupId = astr(r, g->id, g->id_len, &ok);
		resp->Groups[n].ProtocolType = astr(r, g->protocol_type, g->protocol_type_len, &ok);
		resp->Groups[n++].GroupState = state_str(g->state);
	}
	const struct grp_offset *o;
	cur = 0;
	while (ok && state_wanted(q, GRP_EMPTY) && (o = grp_offset_next(c->grp->offsets, &cur))) {
		const char *gp, *tp;
		size_t gl, tl;
		int32_t part;
		grp_offset_key_parts(o, &gp, &gl, &tp, &tl, &part);
		const struct grp_group *fg = grp_find(c->grp->coord, gp, gl);
		if ((fg && fg->state != GRP_DEAD) || listed(resp, n, gp, gl))
			continue;
		resp->Groups[n].GroupId = astr(r, gp, gl, &ok);
		resp->Groups[n].ProtocolType = (struct kstr){ "", 0 };
		resp->Groups[n++].GroupState = state_str(GRP_EMPTY);
	}
	if (!ok)
		return too_big(r, "ListGroups", KERR_UNKNOWN_SERVER_ERROR);
	resp->Groups_n = (int32_t)n;
	return KERR_NONE;
}

/* Has group id g committed any offset? */
static bool has_offsets(const struct grp_offsets *t, const char *g, size_t glen)
{
	uint32_t cur = 0;
	const struct grp_offset *o;
	while ((o = grp_offset_next(t, &cur))) {
		const char *gp, *tp;
		size_t gl, tl;
		int32_t part;
		grp_offset_key_parts(o, &gp, &gl, &tp, &tl, &part);
		if (gl == glen && !memcmp(gp, g, gl))
			return true;
	}
	return false;
}

/*
 * Kafka's answers: an unknown group is Dead with no members (error NONE),
 * one with only committed offsets is Empty; the protocol (assignor) name and
 * each member's metadata and assignment are sent only while Stable.
 */
static int16_t describe_groups(struct dp_core *c, struct dp_call *r)
{
	struct DescribeGroupsRequest *q = r->req;
	struct DescribeGroupsResponse *resp = r->resp;
	int32_t ng = q->Groups_n > 0 ? q->Groups_n : 0;
	resp->Groups = karena_alloc(&r->arena, sizeof(*resp->Groups) * (size_t)(ng + 1));
	if (!resp->Groups)
		return too_big(r, "DescribeGroups", KERR_UNKNOWN_SERVER_ERROR);
	resp->Groups_n = ng;
	bool ok = true;
	for (int32_t i = 0; i < ng && ok; i++) {
		struct DescribeGroupsResponse_DescribedGroup *d = &resp->Groups[i];
		struct kstr id = q->Groups[i];
		size_t idlen = id.len > 0 ? (size_t)id.len : 0;
		struct grp_group *g = idlen ? grp_find(c->grp->coord, id.ptr, idlen) : NULL;
		d->GroupId = id.len >= 0 ? id : (struct kstr){ "", 0 };
		d->ProtocolType = d->ProtocolData = (struct kstr){ "", 0 };
		d->AuthorizedOperations = INT32_MIN;   /* not computed: sluice has no ACLs */
		if (!g || g->state == GRP_DEAD) {
			d->GroupState = state_str(!idlen || !has_offsets(c->grp->offsets, id.ptr, idlen) ? GRP_DEAD : GRP_EMPTY);
			continue;
		}
		bool stable = g->state == GRP_STABLE;
		d->GroupState = state_str(g->state);
		d->ProtocolType = astr(r, g->protocol_type, g->protocol_type_len, &ok);
		if (stable)
			d->ProtocolData = astr(r, g->protocol_name, g->protocol_name_len, &ok);
		d->Members = karena_alloc(&r->arena, sizeof(*d->Members) * (g->nmembers + 1));
		ok &= d->Members != NULL;
		for (uint32_t j = 0; ok && j < g->nmembers; j++) {
			const struct grp_member *m = g->members[j];
			struct DescribeGroupsResponse_DescribedGroupMember *dm = &d->Members[j];
			dm->MemberId = astr(r, m->id, m->id_len, &ok);
			dm->GroupInstanceId = m->instance_id_len ? astr(r, m->instance_id, m->instance_id_len, &ok)
			                                         : (struct kstr){ NULL, -1 };
			dm->ClientId = astr(r, m->client_id, m->client_id_len, &ok);
			dm->ClientHost = astr(r, m->client_host, m->client_host_len, &ok);
			dm->MemberMetadata = stable ? member_meta(r, g, m, &ok) : (struct kbytes){ (const uint8_t *)"", 0 };
			const uint8_t *a = stable ? acopy(r, m->assignment, m->assignment_len) : NULL;
			ok &= !stable || a != NULL;
			dm->MemberAssignment = (struct kbytes){ a ? a : (const uint8_t *)"", a ? (int32_t)m->assignment_len : 0 };
		}
		if (ok)
			d->Members_n = (int32_t)g->nmembers;
	}
	if (!ok)
		return too_big(r, "DescribeGroups", KERR_UNKNOWN_SERVER_ERROR);
	return KERR_NONE;
}

/* ---- DeleteGroups / OffsetDelete (admin) ------------------------------------------------ */

/* A failed tombstone write: every entry the call answered NONE for answers this instead. */
static void tomb_failed(struct dp_call *r)
{
	if (r->hdr.api_key == KAPI_DELETE_GROUPS) {
		struct DeleteGroupsResponse *resp = r->resp;
		for (int32_t i = 0; i < resp->Results_n; i++)
			if (!resp->Results[i].ErrorCode)
				resp->Results[i].ErrorCode = KERR_KAFKA_STORAGE_ERROR;
		return;
	}
	struct OffsetDeleteResponse *resp = r->resp;
	for (int32_t i = 0; i < resp->Topics_n; i++)
		for (int32_t j = 0; j < resp->Topics[i].Partitions_n; j++)
			if (!resp->Topics[i].Partitions[j].ErrorCode)
				resp->Topics[i].Partitions[j].ErrorCode = KERR_KAFKA_STORAGE_ERROR;
}

/* One of op's counts done: the last answers the call (true) and frees op. */
static bool tomb_put(struct dp_core *c, struct grp_tomb_op *op, bool reply_now)
{
	if (--op->left)
		return false;
	if (op->failed)
		tomb_failed(op->r);
	if (reply_now)
		reply(c, op->r);
	dp_buf_put(op);
	return true;
}

static void tomb_written(void *cookie, int status, int64_t base_offset)
{
	struct grp_rewrite *w = cookie;
	struct grp_tomb_op *op = w->op;
	if (status < 0) {
		DP_ERR_RL("offsets log: a delete's tombstone failed: %s", strerror(-status));
		op->failed = true;
	}
	dp_buf_put(w->buf);
	dp_buf_put(w);
	tomb_put(dp_core_self(), op, true);
}

/* Queue a tombstone for key on op's count: 0 or -errno (nothing queued). */
static int tomb_append(struct dp_core *c, const uint8_t *key, size_t klen, struct grp_tomb_op *op)
{
	size_t cap = ST_BATCH_HEADER_BYTES + DP_GRP_BATCH_EXTRA + klen;
	uint8_t *buf = dp_buf_try_get(cap);
	struct grp_rewrite *w = buf ? dp_buf_try_get(sizeof(*w)) : NULL;
	if (!w) {
		dp_buf_put(buf);
		return -ENOMEM;
	}
	*w = (struct grp_rewrite){ .buf = buf, .op = op };
	int n = dp_clog_write(&c->grp->clog, buf, cap, dp_wall_ms(), key, klen, NULL, -1, tomb_written, w);
	if (n < 0) {
		dp_buf_put(buf);
		dp_buf_put(w);
		return n;
	}
	op->left++;
	return 0;
}

/*
 * Tombstone and forget group gid's committed offsets: 0, or -errno once one could not be queued
 * (those before it are gone, the rest stay: a retry finishes). Staged offsets of open
 * transactions stay, as Kafka's removeAllOffsets leaves its pending ones. The pointers are
 * collected first (deletes move the table's slots, not its entries). One pass over the table
 * per group deleted (at most DP_GRP_DELETE_GROUPS_MAX a call).
 */
static int tomb_offsets(struct dp_core *c, const char *gid, size_t glen, struct grp_tomb_op *op)
{
	struct dp_grp *t = c->grp;
	uint32_t cap = grp_offsets_count(t->offsets), n = 0, cur = 0;
	if (!cap)
		return 0;
	const struct grp_offset **hit = dp_buf_try_get(cap * sizeof(*hit));
	const struct grp_offset *o;
	if (!hit)
		return -ENOMEM;
	while (n < cap && (o = grp_offset_next(t->offsets, &cur))) {
		const char *gp, *tp;
		size_t gl, tl;
		int32_t part;
		grp_offset_key_parts(o, &gp, &gl, &tp, &tl, &part);
		if (gl == glen && !memcmp(gp, gid, gl))
			hit[n++] = o;
	}
	int rc = 0;
	for (uint32_t i = 0; i < n && rc == 0; i++)
		if ((rc = tomb_append(c, hit[i]->key, hit[i]->key_len, op)) == 0)
			grp_offset_del(t->offsets, hit[i]->key, hit[i]->key_len);   /* the tombstone copied the key */
	dp_buf_put(hit);
	return rc;
}

/*
 * Kafka's DeleteGroups of one group: GROUP_ID_NOT_FOUND if there is none (no members and no
 * offsets, or deleted), NON_EMPTY_GROUP while it has members, else its offsets and its group
 * record are tombstoned and it is gone. An offset write still in flight is not in the table yet
 * (the table takes commits once durable): its record could land before the tombstones and come
 * back at the next start, so the delete waits for it with a retriable error, as expiry waits.
 */
static int16_t delete_group(struct dp_core *c, struct kstr id, struct grp_tomb_op *op)
{
	struct dp_grp *t = c->grp;
	size_t len = id.len > 0 ? (size_t)id.len : 0;
	if (!len)
		return KERR_INVALID_GROUP_ID;
	if (len > GRP_ID_BYTES_MAX)
		return KERR_GROUP_ID_NOT_FOUND;   /* none can be this long */
	struct grp_group *g = grp_find(t->coord, id.ptr, len);
	if ((!g || g->state == GRP_DEAD) && !has_offsets(t->offsets, id.ptr, len))
		return KERR_GROUP_ID_NOT_FOUND;
	if (g && g->state != GRP_EMPTY && g->state != GRP_DEAD)
		return KERR_NON_EMPTY_GROUP;
	if (t->inflight)
		return KERR_COORDINATOR_LOAD_IN_PROGRESS;
	if (tomb_offsets(c, id.ptr, len, op) < 0)
		return KERR_COORDINATOR_NOT_AVAILABLE;
	if (g && g->state == GRP_EMPTY) {
		uint8_t key[GRP_GROUP_KEY_BYTES_MAX];
		int kn = grp_group_key_encode(key, sizeof(key), g->id, g->id_len);
		if (kn < 0 || tomb_append(c, key, (size_t)kn, op) < 0)
			return KERR_COORDINATOR_NOT_AVAILABLE;
		grp_delete(g);
		g->saved_changes = g->changes;
	}
	DP_INFO("group %.*s deleted", (int)len, id.ptr);
	return KERR_NONE;
}

static int16_t delete_groups(struct dp_core *c, struct dp_call *r)
{
	struct DeleteGroupsRequest *q = r->req;
	struct DeleteGroupsResponse *resp = r->resp;
	int32_t ng = q->GroupsNames_n > 0 ? q->GroupsNames_n : 0;   /* the request's own entries: bounded by its frame */
	resp->Results = karena_alloc(&r->arena, sizeof(*resp->Results) * (size_t)(ng + 1));
	struct grp_tomb_op *op = resp->Results ? dp_buf_try_get(sizeof(*op)) : NULL;
	if (!op)
		return KERR_COORDINATOR_NOT_AVAILABLE;
	*op = (struct grp_tomb_op){ .r = r, .left = 1 };
	resp->Results_n = ng;
	for (int32_t i = 0; i < ng; i++) {
		struct kstr id = q->GroupsNames[i];
		resp->Results[i].GroupId = id.len >= 0 ? id : (struct kstr){ "", 0 };
		resp->Results[i].ErrorCode = i < DP_GRP_DELETE_GROUPS_MAX ? delete_group(c, id, op) : KERR_INVALID_REQUEST;
	}
	return tomb_put(c, op, false) ? KERR_NONE : DP_ANSWER_LATER;
}

/*
 * The topics a group's members subscribe to, by their subscriptions in its protocol
 * (ConsumerProtocolSubscription: int16 version, int32 count, that many int16-length names):
 * does any include topic? A subscription that does not parse counts as subscribed to
 * everything, as Kafka's unknown subscription does.
 */
static bool group_subscribed(const struct grp_group *g, struct kstr topic)
{
	for (uint32_t i = 0; i < g->nmembers; i++) {
		const struct grp_member *m = g->members[i];
		const struct grp_protocol *pr = NULL;
		for (uint32_t k = 0; k < m->nprotocols && !pr; k++)
			if (m->protocols[k].name_len == g->protocol_name_len &&
			    !memcmp(m->protocols[k].name, g->protocol_name, g->protocol_name_len))
				pr = &m->protocols[k];
		if (!pr && m->nprotocols)
			pr = &m->protocols[0];   /* mid-rebalance: none chosen yet */
		if (!pr || pr->meta_len < 6)
			return true;
		const uint8_t *p = pr->meta + 2, *end = pr->meta + pr->meta_len;
		uint32_t n = st_be32(p);
		p += 4;
		for (uint32_t k = 0; k < n; k++) {
			if (end - p < 2)
				return true;
			uint16_t l = st_be16(p);
			p += 2;
			if ((size_t)(end - p) < l)
				return true;
			if (l == (size_t)topic.len && !memcmp(p, topic.ptr, l))
				return true;
			p += l;
		}
	}
	return false;
}

/*
 * Kafka's OffsetDelete: the group's error (INVALID_GROUP_ID, GROUP_ID_NOT_FOUND; NON_EMPTY_GROUP
 * for a group with members that is not a consumer group), else per partition: unknown topics
 * UNKNOWN_TOPIC_OR_PARTITION, GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes to the topic,
 * else the committed offset, if any, tombstoned (NONE either way).
 */
static int16_t offset_delete(struct dp_core *c, struct dp_call *r)
{
	struct dp_grp *t = c->grp;
	struct OffsetDeleteRequest *q = r->req;
	struct OffsetDeleteResponse *resp = r->resp;
	size_t len = q->GroupId.len > 0 ? (size_t)q->GroupId.len : 0;
	if (!len)
		return KERR_INVALID_GROUP_ID;
	struct grp_group *g = len <= GRP_ID_BYTES_MAX ? grp_find(t->coord, q->GroupId.ptr, len) : NULL;
	if (g && g->state == GRP_DEAD)
		g = NULL;
	if (!g && (len > GRP_ID_BYTES_MAX || !has_offsets(t->offsets, q->GroupId.ptr, len)))
		return KERR_GROUP_ID_NOT_FOUND;
	bool members = g && g->state != GRP_EMPTY;
	if (members && !(g->protocol_type_len == 8 && !memcmp(g->protocol_type, "consumer", 8)))
		return KERR_NON_EMPTY_GROUP;
	if (t->inflight)
		return KERR_COORDINATOR_LOAD_IN_PROGRESS;   /* as delete_group */
	int32_t nt = q->Topics_n > 0 ? q->Topics_n : 0;
	resp->Topics = karena_alloc(&r->arena, sizeof(*resp->Topics) * (size_t)(nt + 1));
	struct grp_tomb_op *op = resp->Topics ? dp_buf_try_get(sizeof(*op)) : NULL;
	if (!op)
		return KERR_COORDINATOR_NOT_AVAILABLE;
	*op = (struct grp_tomb_op){ .r = r, .left = 1 };
	bool ok = true;
	resp->Topics_n = nt;
	for (int32_t i = 0; i < nt; i++) {
		const struct OffsetDeleteRequest_OffsetDeleteRequestTopic *it = &q->Topics[i];
		struct OffsetDeleteResponse_OffsetDeleteResponseTopic *ot = &resp->Topics[i];
		int32_t np = it->Partitions_n > 0 ? it->Partitions_n : 0;
		ot->Name = it->Name.len >= 0 ? it->Name : (struct kstr){ "", 0 };
		ot->Partitions = karena_alloc(&r->arena, sizeof(*ot->Partitions) * (size_t)(np + 1));
		ot->Partitions_n = ot->Partitions ? np : 0;
		ok &= ot->Partitions != NULL;
		bool subscribed = members && it->Name.len > 0 && group_subscribed(g, it->Name);
		for (int32_t j = 0; j < ot->Partitions_n; j++) {
			int32_t part = it->Partitions[j].PartitionIndex;
			uint32_t id, gen, hash;
			const struct grp_offset *o = NULL;
			int16_t err = KERR_NONE;
			if (it->Name.len <= 0 || !dp_ctrl_topic(c, it->Name.ptr, (size_t)it->Name.len, part, &id, &gen, &hash))
				err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
			else if (subscribed)
				err = KERR_GROUP_SUBSCRIBED_TO_TOPIC;
			else if ((o = grp_offset_get(t->offsets, q->GroupId.ptr, len, it->Name.ptr, (size_t)it->Name.len,
			                             part)) && tomb_append(c, o->key, o->key_len, op) < 0)
				err = KERR_COORDINATOR_NOT_AVAILABLE;
			else if (o)
				grp_offset_del(t->offsets, o->key, o->key_len);   /* the tombstone copied the key */
			ot->Partitions[j] = (struct OffsetDeleteResponse_OffsetDeleteResponsePartition){
				.PartitionIndex = part, .ErrorCode = err };
		}
	}
	if (!ok)
		DP_WARN_RL("OffsetDelete: the response does not fit the request arena");
	return tomb_put(c, op, false) ? KERR_NONE : DP_ANSWER_LATER;
}

/* ---- dispatch ---------------------------------------------------------------------- */

static void set_error(struct dp_call *r, int16_t err)
{
	dp_call_error(r, err);
}

/*
 * The connection of a JoinGroup or SyncGroup we hold closed: answer it now
 * (its NIC core frees it on our reply) instead of holding it for the
 * rebalance timeout. Not found: it was answered already, the reply is on
 * its way.
 */
static void waiter_gone(struct dp_core *c, struct dp_msg *msg)
{
	uint32_t cur = 0;
	struct grp_group *g;
	while ((g = grp_next(c->grp->coord, &cur)))
		if (grp_waiter_gone(g, msg->u.call.call, msg->gen, dp_wall_ms(), &c->grp->outs)) {
			DP_DBG("group %.*s: a waiting request's client left; %u members, %s", g->id_len, g->id,
			       g->nmembers, grp_state_name(g->state));
			send_outs(c, g);
			return;
		}
}

/* Answer call r with err now, unless its handler answers it later (DP_ANSWER_LATER). */
static void answer(struct dp_core *c, struct dp_call *r, int16_t err)
{
	if (err == DP_ANSWER_LATER)
		return;   /* answered later, or already */
	if (err)
		set_error(r, err);
	reply(c, r);
}

/* Each kind of call has its own handler: the message carries it (dp_group_provide). */
#define GRP_CALL(name, ...)                                                         \
	static void name##_msg(struct dp_core *c, struct dp_msg *msg)              \
	{                                                                          \
		assert(msg->type == DP_MSG_GROUP_REQ);                             \
		struct dp_call *r = dp_call_take(msg);                             \
		answer(c, r, name(__VA_ARGS__));                                   \
	}
GRP_CALL(offset_commit, c, msg, r)
GRP_CALL(offset_fetch, c, r)
GRP_CALL(join_group, c, msg, r)
GRP_CALL(heartbeat, c, r)
GRP_CALL(leave_group, c, r)
GRP_CALL(sync_group, c, msg, r)
GRP_CALL(describe_groups, c, r)
GRP_CALL(list_groups, c, r)
GRP_CALL(txn_offset_commit, c, msg, r)
GRP_CALL(delete_groups, c, r)
GRP_CALL(offset_delete, c, r)

static void waiter_gone_msg(struct dp_core *c, struct dp_msg *msg)
{
	assert(msg->type == DP_MSG_GROUP_GONE);
	waiter_gone(c, msg);
}

void dp_group_provide(struct dp_broker *b, int core)
{
	static const struct { enum dp_service svc; dp_msg_fn fn; } h[] = {
		{ DP_SVC_GROUP_JOIN, join_group_msg },
		{ DP_SVC_GROUP_SYNC, sync_group_msg },
		{ DP_SVC_GROUP_HEARTBEAT, heartbeat_msg },
		{ DP_SVC_GROUP_LEAVE, leave_group_msg },
		{ DP_SVC_GROUP_OFFSET_COMMIT, offset_commit_msg },
		{ DP_SVC_GROUP_OFFSET_FETCH, offset_fetch_msg },
		{ DP_SVC_GROUP_TXN_OFFSET_COMMIT, txn_offset_commit_msg },
		{ DP_SVC_GROUP_DESCRIBE, describe_groups_msg },
		{ DP_SVC_GROUP_LIST, list_groups_msg },
		{ DP_SVC_GROUP_DELETE, delete_groups_msg },
		{ DP_SVC_GROUP_OFFSET_DELETE, offset_delete_msg },
		{ DP_SVC_GROUP_GONE, waiter_gone_msg },
	};
	for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++)
		b->services[h[i].svc] = (struct dp_service_at){ .core = core, .fn = h[i].fn };
}

/*
 * Offset retention (Kafka's offsets.retention.ms): a committed offset goes
 * once it was not committed again for the retention time and its group has
 * had no members for as long (a group never joined, with simple commits,
 * counts as memberless). Offsets a transaction has staged for the same
 * partition stay. A tombstone per offset; the pass waits while any offset
 * write is in flight, since the table learns of those only once they are
 * durable and a tombstone behind one would erase it at the next start.
 */
static void expire_offsets(struct dp_core *c, int64_t now)
{
	struct dp_grp *t = c->grp;
	int64_t ret = c->b->cfg.offsets_retention_ms;
	if (ret < 0 || now < t->next_expiry_ms || t->inflight || st_compaction_busy(&t->clog.compact))
		return;
	t->next_expiry_ms = now + (ret / 4 < 100 ? 100 : ret / 4 > 60000 ? 60000 : ret / 4);
	uint32_t n = 0, cur = 0;
	const struct grp_offset **dead = t->expire, *o;
	while (n < DP_GRP_EXPIRE_BATCH && (o = grp_offset_next(t->offsets, &cur))) {
		const char *gp, *tp;
		size_t gl, tl;
		int32_t part;
		grp_offset_key_parts(o, &gp, &gl, &tp, &tl, &part);
		const struct grp_group *g = grp_find(t->coord, gp, gl);
		if (now - o->commit_ms <= ret || (g && (g->state != GRP_EMPTY || now - g->empty_since_ms <= ret)) ||
		    grp_pending_has(t->offsets, gp, gl, tp, tl, part))
			continue;
		dead[n++] = o;
	}
	uint32_t done = 0;
	for (; done < n; done++) {
		/* The tombstone copies the key first: deleting frees the entry. */
		if (append_record(c, dead[done]->key, dead[done]->key_len, NULL, -1, expire_written, NULL) < 0)
			break;
		grp_offset_del(t->offsets, dead[done]->key, dead[done]->key_len);
	}
	if (n == DP_GRP_EXPIRE_BATCH)
		t->next_expiry_ms = now + DP_GRP_TIMER_MS;   /* maybe more: the rest a tick later */
	if (done)
		DP_INFO("offsets: %u committed offset(s) expired (retention %lld ms)", done, (long long)ret);
}

/* Expire silent members and finish overdue rebalances. */
void dp_group_timer(struct dp_core *c)
{
	struct dp_grp *t = c->grp;
	int64_t now = dp_wall_ms();
	if (!t || now < t->next_timer_ms)
		return;
	t->next_timer_ms = now + DP_GRP_TIMER_MS;
	held_tick(t, now);
	maybe_compact(c);
	expire_offsets(c, now);
	uint32_t cur = 0;
	struct grp_group *g;
	while ((g = grp_next(t->coord, &cur))) {
		if (g->nmembers == 0 && g->npending == 0)
			continue;
		uint32_t before = g->nmembers;
		grp_tick(g, now, &t->outs);
		if (g->nmembers != before)
			DP_INFO_RL("group %.*s: %u of %u members expired, now %s", g->id_len, g->id, before - g->nmembers,
			        before, grp_state_name(g->state));
		send_outs(c, g);
	}
}

/* ---- start-up ---------------------------------------------------------------------- */

static int load_batch(void *arg, const uint8_t *batch, size_t len, const struct st_batch_hdr *h)
{
	struct dp_grp *t = arg;
	t->clog.records++;
	int rc = grp_offsets_apply_batch(t->offsets, batch, len);
	if (rc == -ENOMEM)
		return rc;
	int grc = grp_groups_apply_batch(t->coord, batch, len, dp_wall_ms());
	if (grc == -ENOMEM)
		return grc;
	rc = rc < 0 ? rc : grc;
	if (rc < 0)
		DP_WARN("offsets log: a damaged record at offset %lld was skipped", (long long)h->base_offset);
	return 0;
}

int dp_group_start(struct dp_core *c)
{
	struct dp_grp *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	c->grp = t;   /* dp_group_destroy frees what was made */
	if (txn_arena_init(&t->mem.arena, (size_t)c->b->cfg.group_state_mib << 20, GRP_MEM_UNIT_BYTES) < 0 ||
	    grp_coord_create_in(&t->coord, &t->mem) < 0 || grp_offsets_create_in(&t->offsets, &t->mem) < 0)
		return -ENOMEM;
	t->mem.spill = true;   /* the replay: past the pool, the heap (group.h) */
	t->clog.name = "offsets log";
	int rc = dp_internal_log_open(c, "__consumer_offsets", "group coordinator", t->dir, sizeof(t->dir),
	                              &t->clog.log, load_batch, t);
	t->mem.spill = false;
	if (rc < 0)
		return rc;
	if (t->mem.spilled)
		DP_WARN("group coordinator: its state from the offsets log is more than --group-state-mib %u holds: %llu "
		        "blocks came from the heap; new groups, members and offsets are refused (retriably) until it "
		        "shrinks, or start with a larger --group-state-mib", c->b->cfg.group_state_mib,
		        (unsigned long long)t->mem.spilled);
	uint32_t cur = 0, stable = 0;
	struct grp_group *g;
	while ((g = grp_next(t->coord, &cur))) {
		stable += g->state == GRP_STABLE;
		if (g->state == GRP_EMPTY)
			g->empty_since_ms = dp_wall_ms();   /* not known across restarts: counted from now */
	}
	DP_INFO("group coordinator: %u committed offsets loaded, %u staged by transactions, %u groups (%u Stable); "
	        "%.1f of %u MiB of the group state pool in use", grp_offsets_count(t->offsets),
	        grp_pending_count(t->offsets), grp_count(t->coord), stable, (double)t->mem.arena.used / (1 << 20),
	        c->b->cfg.group_state_mib);
	resolve_staged(c);
	return 0;
}

void dp_group_stop(struct dp_core *c)
{
	if (c->grp && c->grp->clog.log)
		st_log_close(c->grp->clog.log);
}

void dp_group_destroy(struct dp_core *c)
{
	if (!c->grp)
		return;
	grp_offsets_destroy(c->grp->offsets);
	grp_coord_destroy(c->grp->coord);
	txn_arena_fini(&c->grp->mem.arena);
	free(c->grp);
	c->grp = NULL;
}
