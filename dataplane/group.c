/*
 * group.c - the consumer-group coordinator, on the control core: drives
 * txn/group.c (membership, rebalances, committed offsets) for the requests
 * the NIC cores lend it (groupapi.c), and answers each with
 * DP_MSG_GROUP_DONE once the response is filled. JoinGroup and SyncGroup
 * are kept until the rebalance lets them be answered, as txncoord.c keeps
 * its op_ctx; a request whose connection closed meanwhile still comes back
 * to its NIC core, which drops the answer.
 *
 * Committed offsets are appended to the coordinator's own log,
 * DATA/__consumer_offsets (one RecordBatch per partition: key = group,
 * topic, partition; value = offset, leader epoch, timestamp, metadata; a
 * null value deletes), and an OffsetCommit is answered, and the table
 * updated, only once its writes are durable. On start the log is read back
 * (latest record per key wins).
 *
 * Membership is not persisted (Kafka does persist it): after a restart the
 * members' heartbeats get UNKNOWN_MEMBER_ID and they simply rejoin, which
 * costs one rebalance and loses nothing, as offsets are durable.
 * Locality: control core.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "group.h"
#include "kerr.h"
#include "log.h"
#include "req.h"

#define DP_GRP_TIMER_MS    100
#define DP_GRP_BATCH_EXTRA 64          /* record framing around key and value */

struct dp_grp {
	struct grp_coord *coord;
	struct grp_offsets *offsets;
	struct st_log *log;
	char dir[1024];
	int64_t next_timer_ms;
	struct grp_outs outs;         /* answers released by the current call */
};

/* One OffsetCommit in flight: its partition writes, each with its own cookie. */
struct grp_commit;
struct grp_commit_part {
	uint8_t kind;                 /* DP_COOKIE_GROUP: keep first */
	struct grp_commit *op;
	struct OffsetCommitRequest_OffsetCommitRequestTopic *tq;
	struct OffsetCommitRequest_OffsetCommitRequestPartition *pq;
	int16_t *err;                 /* the response partition's error code */
	int64_t commit_ms;
};

struct grp_commit {
	struct dp_core *c;
	struct dp_req *r;
	uint16_t core;
	uint32_t gen;
	uint32_t left;
	uint8_t *buf;                 /* every partition's batch */
	struct grp_commit_part parts[];
};

static void reply(struct dp_core *c, uint16_t core, void *ctx, uint32_t gen)
{
	struct dp_msg m = { .type = DP_MSG_GROUP_DONE, .ctx = ctx, .gen = gen };
	dp_send(c, core, &m);
}

/* A copy in the request's arena: the group may change before the NIC core encodes. */
static const void *acopy(struct dp_req *r, const void *p, size_t len)
{
	void *d = karena_alloc(&r->arena, len ? len : 1);
	if (d && len)
		memcpy(d, p, len);
	return d;
}

static struct kstr astr(struct dp_req *r, const char *p, size_t len, bool *ok)
{
	const char *d = acopy(r, p, len);
	*ok &= d != NULL;
	return (struct kstr){ d ? d : "", d ? (int32_t)len : 0 };
}

static void join_error(struct dp_req *r, int16_t err)
{
	struct JoinGroupRequest *q = r->req;
	struct JoinGroupResponse *resp = r->resp;
	resp->ErrorCode = err;
	resp->GenerationId = -1;
	resp->ProtocolName = (struct kstr){ "", 0 };
	resp->Leader = (struct kstr){ "", 0 };
	resp->MemberId = q->MemberId.len > 0 ? q->MemberId : (struct kstr){ "", 0 };
	resp->Members_n = 0;
}

static void fill_join(struct dp_req *r, const struct grp_group *g, const struct grp_member *m)
{
	struct JoinGroupResponse *resp = r->resp;
	bool ok = true;
	resp->ErrorCode = 0;
	resp->GenerationId = g->generation;
	resp->ProtocolType = astr(r, g->protocol_type, g->protocol_type_len, &ok);
	resp->ProtocolName = astr(r, g->protocol_name, g->protocol_name_len, &ok);
	resp->Leader = astr(r, g->leader->id, g->leader->id_len, &ok);
	resp->MemberId = astr(r, m->id, m->id_len, &ok);
	resp->Members_n = 0;
	if (m == g->leader) {
		/* Only the leader learns every member's subscription: it computes the assignment. */
		resp->Members = karena_alloc(&r->arena, sizeof(*resp->Members) * (g->nmembers + 1));
		ok &= resp->Members != NULL;
		for (uint32_t i = 0; ok && i < g->nmembers; i++) {
			const struct grp_member *x = g->members[i];
			struct JoinGroupResponse_JoinGroupResponseMember *rm = &resp->Members[i];
			rm->MemberId = astr(r, x->id, x->id_len, &ok);
			rm->GroupInstanceId = (struct kstr){ NULL, -1 };
			rm->Metadata = (struct kbytes){ (const uint8_t *)"", 0 };
			for (uint32_t p = 0; p < x->nprotocols; p++)
				if (x->protocols[p].name_len == g->protocol_name_len &&
				    !memcmp(x->protocols[p].name, g->protocol_name, g->protocol_name_len)) {
					const uint8_t *d = acopy(r, x->protocols[p].meta, x->protocols[p].meta_len);
					ok &= d != NULL;
					rm->Metadata = (struct kbytes){ d, (int32_t)x->protocols[p].meta_len };
				}
		}
		resp->Members_n = (int32_t)g->nmembers;
	}
	if (!ok) {
		DP_WARN("group %.*s: JoinGroup response does not fit the request arena", g->id_len, g->id);
		join_error(r, KERR_UNKNOWN_SERVER_ERROR);
	}
}

static void fill_sync(struct dp_req *r, const struct grp_group *g, const struct grp_member *m, int16_t err)
{
	struct SyncGroupResponse *resp = r->resp;
	resp->ErrorCode = err;
	resp->Assignment = (struct kbytes){ (const uint8_t *)"", 0 };
	if (err || !m->assignment_len)
		return;
	const uint8_t *d = acopy(r, m->assignment, m->assignment_len);
	if (!d)
		resp->ErrorCode = KERR_UNKNOWN_SERVER_ERROR;
	else
		resp->Assignment = (struct kbytes){ d, (int32_t)m->assignment_len };
}

/* Send every answer the last call into group g released. */
static void send_outs(struct dp_core *c, const struct grp_group *g)
{
	struct grp_outs *o = &c->grp->outs;
	for (uint32_t i = 0; i < o->n; i++) {
		struct grp_out *x = &o->o[i];
		struct dp_req *r = x->w.ctx;
		if (x->kind == GRP_OUT_JOIN) {
			if (x->err)
				join_error(r, x->err);
			else
				fill_join(r, g, x->m);
		} else {
			fill_sync(r, g, x->m, x->err);
		}
		reply(c, x->w.core, r, x->w.gen);
	}
	o->n = 0;
}

/* ---- membership ------------------------------------------------------------------ */

static int16_t join_group(struct dp_core *c, struct dp_msg *msg, struct dp_req *r)
{
	struct JoinGroupRequest *q = r->req;
	if (q->GroupId.len <= 0 || q->GroupId.len > GRP_ID_BYTES_MAX)
		return 24;   /* INVALID_GROUP_ID */
	if (q->Protocols_n <= 0 || q->Protocols_n > GRP_PROTOCOLS_MAX)
		return GRP_ERR_INCONSISTENT_PROTOCOL;
	struct grp_group *g = grp_get(c->grp->coord, q->GroupId.ptr, (size_t)q->GroupId.len);
	if (!g)
		return KERR_UNKNOWN_SERVER_ERROR;
	struct grp_join_req j = {
		.member_id = q->MemberId.ptr, .member_id_len = q->MemberId.len > 0 ? (size_t)q->MemberId.len : 0,
		.client_id = r->hdr.client_id.ptr, .client_id_len = r->hdr.client_id.len > 0 ? (size_t)r->hdr.client_id.len : 0,
		.protocol_type = q->ProtocolType.ptr,
		.protocol_type_len = q->ProtocolType.len > 0 ? (size_t)q->ProtocolType.len : 0,
		.session_ms = q->SessionTimeoutMs, .rebalance_ms = q->RebalanceTimeoutMs,
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
		return KERR_UNKNOWN_SERVER_ERROR;
	DP_DBG("group %.*s: JoinGroup, %s generation %d, %u members", g->id_len, g->id,
	       grp_state_name(g->state), g->generation, g->nmembers);
	send_outs(c, g);
	return -1;
}

static int16_t sync_group(struct dp_core *c, struct dp_msg *msg, struct dp_req *r)
{
	struct SyncGroupRequest *q = r->req;
	struct grp_group *g = q->GroupId.len > 0 ? grp_find(c->grp->coord, q->GroupId.ptr, (size_t)q->GroupId.len) : NULL;
	if (!g)
		return GRP_ERR_UNKNOWN_MEMBER_ID;
	int32_t na = q->Assignments_n > 0 ? q->Assignments_n : 0;
	struct grp_assign *a = calloc((size_t)na + 1, sizeof(*a));
	if (!a)
		return KERR_UNKNOWN_SERVER_ERROR;
	for (int32_t i = 0; i < na; i++) {
		struct SyncGroupRequest_SyncGroupRequestAssignment *x = &q->Assignments[i];
		a[i] = (struct grp_assign){ x->MemberId.ptr, x->MemberId.len > 0 ? (size_t)x->MemberId.len : 0,
		                            x->Assignment.ptr, x->Assignment.len > 0 ? (size_t)x->Assignment.len : 0 };
	}
	struct grp_waiter w = { .ctx = r, .gen = msg->gen, .core = msg->src };
	int rc = grp_sync(g, q->MemberId.ptr, q->MemberId.len > 0 ? (size_t)q->MemberId.len : 0, q->GenerationId,
	                  a, (uint32_t)na, w, dp_wall_ms(), &c->grp->outs);
	free(a);
	if (rc < 0)
		return KERR_UNKNOWN_SERVER_ERROR;
	send_outs(c, g);
	return -1;
}

static int16_t heartbeat(struct dp_core *c, struct dp_req *r)
{
	struct HeartbeatRequest *q = r->req;
	struct grp_group *g = q->GroupId.len > 0 ? grp_find(c->grp->coord, q->GroupId.ptr, (size_t)q->GroupId.len) : NULL;
	if (!g)
		return GRP_ERR_UNKNOWN_MEMBER_ID;
	return grp_heartbeat(g, q->MemberId.ptr, q->MemberId.len > 0 ? (size_t)q->MemberId.len : 0, q->GenerationId,
	                     dp_wall_ms());
}

static int16_t leave_group(struct dp_core *c, struct dp_req *r)
{
	struct LeaveGroupRequest *q = r->req;
	struct LeaveGroupResponse *resp = r->resp;
	struct grp_group *g = q->GroupId.len > 0 ? grp_find(c->grp->coord, q->GroupId.ptr, (size_t)q->GroupId.len) : NULL;
	int64_t now = dp_wall_ms();
	if (r->hdr.api_version < 3) {
		int16_t err = g ? grp_leave(g, q->MemberId.ptr, q->MemberId.len > 0 ? (size_t)q->MemberId.len : 0, now,
		                            &c->grp->outs) : GRP_ERR_UNKNOWN_MEMBER_ID;
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
		resp->Members[i].MemberId = x->MemberId;
		resp->Members[i].GroupInstanceId = x->GroupInstanceId;
		resp->Members[i].ErrorCode = g ? grp_leave(g, x->MemberId.ptr, x->MemberId.len > 0 ? (size_t)x->MemberId.len : 0,
		                                           now, &c->grp->outs) : GRP_ERR_UNKNOWN_MEMBER_ID;
		if (g)
			send_outs(c, g);
	}
	return 0;
}

/* ---- committed offsets ------------------------------------------------------------- */

static void commit_fill_all(struct OffsetCommitResponse *resp, int16_t err)
{
	for (int32_t i = 0; i < resp->Topics_n; i++)
		for (int32_t j = 0; j < resp->Topics[i].Partitions_n; j++)
			resp->Topics[i].Partitions[j].ErrorCode = err;
}

void dp_group_on_write(void *cookie, int status)
{
	struct grp_commit_part *p = cookie;
	struct grp_commit *op = p->op;
	struct dp_core *c = op->c;
	struct OffsetCommitRequest *q = op->r->req;
	if (status < 0) {
		DP_ERR("group %.*s: offset commit write failed: %s", q->GroupId.len, q->GroupId.ptr, strerror(-status));
		*p->err = KERR_KAFKA_STORAGE_ERROR;
	} else if (grp_offset_put(c->grp->offsets, q->GroupId.ptr, (size_t)q->GroupId.len, p->tq->Name.ptr,
	                          (size_t)p->tq->Name.len, p->pq->PartitionIndex, p->pq->CommittedOffset,
	                          p->pq->CommittedLeaderEpoch, p->commit_ms, p->pq->CommittedMetadata.ptr,
	                          p->pq->CommittedMetadata.len) < 0) {
		*p->err = KERR_UNKNOWN_SERVER_ERROR;
	}
	if (--op->left)
		return;
	reply(c, op->core, op->r, op->gen);
	dp_buf_put(op->buf);
	free(op);
}

static int16_t offset_commit(struct dp_core *c, struct dp_msg *msg, struct dp_req *r)
{
	struct OffsetCommitRequest *q = r->req;
	struct OffsetCommitResponse *resp = r->resp;
	if (q->GroupId.len <= 0 || q->GroupId.len > GRP_ID_BYTES_MAX) {
		commit_fill_all(resp, 24);
		return 0;
	}
	struct grp_group *g = grp_find(c->grp->coord, q->GroupId.ptr, (size_t)q->GroupId.len);
	int16_t err = grp_commit_check(g, q->MemberId.ptr, q->MemberId.len > 0 ? (size_t)q->MemberId.len : 0,
	                               r->hdr.api_version == 0 ? -1 : q->GenerationIdOrMemberEpoch);
	if (err) {
		commit_fill_all(resp, err);
		return 0;
	}
	/* Size the batches, then write one per partition that passes. */
	uint32_t n = 0;
	size_t bytes = 0;
	for (int32_t i = 0; i < q->Topics_n; i++)
		for (int32_t j = 0; j < q->Topics[i].Partitions_n; j++) {
			struct OffsetCommitRequest_OffsetCommitRequestPartition *pq = &q->Topics[i].Partitions[j];
			int16_t *pe = &resp->Topics[i].Partitions[j].ErrorCode;
			if (pq->CommittedMetadata.len > GRP_OFFSET_META_MAX)
				*pe = GRP_ERR_OFFSET_METADATA_TOO_LARGE;
			else if (q->Topics[i].Name.len <= 0 || q->Topics[i].Name.len > GRP_TOPIC_BYTES_MAX)
				*pe = KERR_UNKNOWN_TOPIC_OR_PARTITION;
			else {
				n++;
				bytes += ST_BATCH_HEADER_BYTES + DP_GRP_BATCH_EXTRA + GRP_KEY_BYTES_MAX + 24 +
				         (pq->CommittedMetadata.len > 0 ? (size_t)pq->CommittedMetadata.len : 0);
			}
		}
	if (n == 0)
		return 0;
	struct grp_commit *op = malloc(sizeof(*op) + n * sizeof(op->parts[0]));
	uint8_t *buf = dp_buf_get(bytes);
	if (!op || !buf) {
		free(op);
		if (buf)
			dp_buf_put(buf);
		commit_fill_all(resp, KERR_UNKNOWN_SERVER_ERROR);
		return 0;
	}
	*op = (struct grp_commit){ .c = c, .r = r, .core = msg->src, .gen = msg->gen, .left = n + 1, .buf = buf };
	int64_t now = dp_wall_ms();
	uint32_t k = 0;
	size_t at = 0;
	for (int32_t i = 0; i < q->Topics_n; i++)
		for (int32_t j = 0; j < q->Topics[i].Partitions_n; j++) {
			struct OffsetCommitRequest_OffsetCommitRequestTopic *tq = &q->Topics[i];
			struct OffsetCommitRequest_OffsetCommitRequestPartition *pq = &tq->Partitions[j];
			int16_t *pe = &resp->Topics[i].Partitions[j].ErrorCode;
			if (*pe)
				continue;
			int64_t ts = r->hdr.api_version == 1 && pq->CommitTimestamp >= 0 ? pq->CommitTimestamp : now;
			uint8_t key[GRP_KEY_BYTES_MAX], val[GRP_VALUE_BYTES_MAX];
			int kn = grp_offset_key_encode(key, sizeof(key), q->GroupId.ptr, (size_t)q->GroupId.len,
			                               tq->Name.ptr, (size_t)tq->Name.len, pq->PartitionIndex);
			int vn = grp_offset_value_encode(val, sizeof(val), pq->CommittedOffset, pq->CommittedLeaderEpoch, ts,
			                                 pq->CommittedMetadata.ptr, pq->CommittedMetadata.len);
			int bn = kn < 0 || vn < 0 ? -EINVAL :
			         st_batch_build(buf + at, bytes - at, 0, -1, -1, -1, now, key, kn, val, vn);
			struct grp_commit_part *p = &op->parts[k++];
			*p = (struct grp_commit_part){ .kind = DP_COOKIE_GROUP, .op = op, .tq = tq, .pq = pq, .err = pe,
			                               .commit_ms = ts };
			int64_t off = bn < 0 ? bn : st_log_append(c->grp->log, buf + at, (uint32_t)bn, 1, p);
			if (off < 0) {
				DP_ERR("offsets log append failed: %s", strerror((int)-off));
				*pe = KERR_KAFKA_STORAGE_ERROR;
				op->left--;
				continue;
			}
			at += (size_t)bn;
		}
	/* The extra count keeps op alive until every append is queued. */
	if (--op->left == 0) {
		dp_buf_put(buf);
		free(op);
		return 0;
	}
	return -1;
}

static int16_t offset_fetch(struct dp_core *c, struct dp_req *r)
{
	struct OffsetFetchRequest *q = r->req;
	struct OffsetFetchResponse *resp = r->resp;
	struct grp_offsets *tab = c->grp->offsets;
	struct kstr gid = q->GroupId;
	size_t glen = gid.len > 0 ? (size_t)gid.len : 0;
	if (q->Topics_n < 0) {
		/* Every partition the group committed (v2+): grouped by topic, quadratic but rare. */
		uint32_t cap = grp_offsets_count(tab), cur = 0, nt = 0;
		resp->Topics = karena_alloc(&r->arena, sizeof(*resp->Topics) * (cap + 1));
		if (!resp->Topics)
			return KERR_UNKNOWN_SERVER_ERROR;
		const struct grp_offset *o;
		while ((o = grp_offset_next(tab, &cur))) {
			const char *gp, *tp;
			size_t gl, tl;
			int32_t part;
			grp_offset_key_parts(o, &gp, &gl, &tp, &tl, &part);
			if (gl != glen || memcmp(gp, gid.ptr, gl))
				continue;
			uint32_t t;
			for (t = 0; t < nt; t++)
				if ((size_t)resp->Topics[t].Name.len == tl && !memcmp(resp->Topics[t].Name.ptr, tp, tl))
					break;
			bool ok = true;
			if (t == nt) {
				resp->Topics[nt].Name = astr(r, tp, tl, &ok);
				resp->Topics[nt].Partitions = karena_alloc(&r->arena, sizeof(*resp->Topics[nt].Partitions) * (cap + 1));
				if (!ok || !resp->Topics[nt].Partitions)
					return KERR_UNKNOWN_SERVER_ERROR;
				nt++;
			}
			struct OffsetFetchResponse_OffsetFetchResponsePartition *p =
				&resp->Topics[t].Partitions[resp->Topics[t].Partitions_n++];
			p->PartitionIndex = part;
			p->CommittedOffset = o->offset;
			p->CommittedLeaderEpoch = o->leader_epoch;
			p->Metadata = o->meta_len < 0 ? (struct kstr){ NULL, -1 } : astr(r, o->meta, (size_t)o->meta_len, &ok);
			if (!ok)
				return KERR_UNKNOWN_SERVER_ERROR;
		}
		resp->Topics_n = (int32_t)nt;
		return 0;
	}
	resp->Topics = karena_alloc(&r->arena, sizeof(*resp->Topics) * (size_t)(q->Topics_n + 1));
	if (!resp->Topics)
		return KERR_UNKNOWN_SERVER_ERROR;
	resp->Topics_n = q->Topics_n;
	for (int32_t i = 0; i < q->Topics_n; i++) {
		struct OffsetFetchRequest_OffsetFetchRequestTopic *tq = &q->Topics[i];
		struct OffsetFetchResponse_OffsetFetchResponseTopic *tr = &resp->Topics[i];
		int32_t np = tq->PartitionIndexes_n > 0 ? tq->PartitionIndexes_n : 0;
		tr->Name = tq->Name;
		tr->Partitions = karena_alloc(&r->arena, sizeof(*tr->Partitions) * (size_t)(np + 1));
		if (!tr->Partitions)
			return KERR_UNKNOWN_SERVER_ERROR;
		tr->Partitions_n = np;
		for (int32_t j = 0; j < np; j++) {
			struct OffsetFetchResponse_OffsetFetchResponsePartition *p = &tr->Partitions[j];
			const struct grp_offset *o = tq->Name.len > 0 ?
				grp_offset_get(tab, gid.ptr, glen, tq->Name.ptr, (size_t)tq->Name.len, tq->PartitionIndexes[j]) : NULL;
			bool ok = true;
			p->PartitionIndex = tq->PartitionIndexes[j];
			p->CommittedOffset = o ? o->offset : -1;
			p->CommittedLeaderEpoch = o ? o->leader_epoch : -1;
			p->Metadata = !o ? (struct kstr){ "", 0 } :
			              o->meta_len < 0 ? (struct kstr){ NULL, -1 } : astr(r, o->meta, (size_t)o->meta_len, &ok);
			if (!ok)
				return KERR_UNKNOWN_SERVER_ERROR;
		}
	}
	return 0;
}

/* ---- dispatch ---------------------------------------------------------------------- */

static void set_error(struct dp_req *r, int16_t err)
{
	switch (r->hdr.api_key) {
	case 8: commit_fill_all(r->resp, err); return;
	case 9: {
		struct OffsetFetchResponse *resp = r->resp;
		resp->ErrorCode = err;
		resp->Topics_n = 0;
		return;
	}
	case 11: join_error(r, err); return;
	case 12: ((struct HeartbeatResponse *)r->resp)->ErrorCode = err; return;
	case 13: ((struct LeaveGroupResponse *)r->resp)->ErrorCode = err; return;
	case 14: fill_sync(r, NULL, NULL, err); return;
	}
}

void dp_group_msg(struct dp_core *c, struct dp_msg *msg)
{
	assert(msg->type == DP_MSG_GROUP_REQ);
	struct dp_req *r = msg->ctx;
	int16_t err;
	switch (r->hdr.api_key) {
	case 8: err = offset_commit(c, msg, r); break;
	case 9: err = offset_fetch(c, r); break;
	case 11: err = join_group(c, msg, r); break;
	case 12: err = heartbeat(c, r); break;
	case 13: err = leave_group(c, r); break;
	case 14: err = sync_group(c, msg, r); break;
	default: err = KERR_INVALID_REQUEST; break;
	}
	if (err < 0)
		return;   /* answered later, or already */
	if (err)
		set_error(r, err);
	reply(c, msg->src, r, msg->gen);
}

/* Expire silent members and finish overdue rebalances. */
void dp_group_timer(struct dp_core *c)
{
	struct dp_grp *t = c->grp;
	int64_t now = dp_wall_ms();
	if (!t || now < t->next_timer_ms)
		return;
	t->next_timer_ms = now + DP_GRP_TIMER_MS;
	uint32_t cur = 0;
	struct grp_group *g;
	while ((g = grp_next(t->coord, &cur))) {
		if (g->nmembers == 0)
			continue;
		uint32_t before = g->nmembers;
		grp_tick(g, now, &t->outs);
		if (g->nmembers != before)
			DP_INFO("group %.*s: %u of %u members expired, now %s", g->id_len, g->id, before - g->nmembers,
			        before, grp_state_name(g->state));
		send_outs(c, g);
	}
}

/* ---- start-up ---------------------------------------------------------------------- */

static int load_batch(void *arg, const uint8_t *batch, size_t len, const struct st_batch_hdr *h)
{
	struct dp_grp *t = arg;
	int rc = grp_offsets_apply_batch(t->offsets, batch, len);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		DP_WARN("offsets log: a damaged record at offset %lld was skipped", (long long)h->base_offset);
	return 0;
}

int dp_group_start(struct dp_core *c)
{
	struct dp_grp *t = calloc(1, sizeof(*t));
	if (!t || grp_coord_create(&t->coord) < 0 || grp_offsets_create(&t->offsets) < 0)
		return -ENOMEM;
	c->grp = t;
	snprintf(t->dir, sizeof(t->dir), "%s/__consumer_offsets", c->b->cfg.data_dir);
	struct st_log_config lc = { .segment_bytes = 64u << 20, .retention_bytes = -1, .retention_ms = -1,
	                            .index_interval_bytes = 4096 };
	mkdir(t->dir, 0755);
	int rc = st_log_open(c->io, t->dir, &lc, &t->log);
	if (rc < 0 || (rc = st_log_read_batches(t->log, load_batch, t)) < 0) {
		DP_ERR("group coordinator log %s: %s", t->dir, strerror(-rc));
		return rc;
	}
	DP_INFO("group coordinator: %u committed offsets loaded", grp_offsets_count(t->offsets));
	return 0;
}

void dp_group_stop(struct dp_core *c)
{
	if (c->grp && c->grp->log)
		st_log_close(c->grp->log);
}
