/*
 * groupapi.c - consumer-group APIs on the NIC core: decode, shape the
 * response where its shape follows the request (OffsetCommit), and lend the
 * request to the group coordinator on the control core (JoinGroup,
 * SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
 * TxnOffsetCommit), which fills
 * the response and answers DP_MSG_GROUP_DONE, possibly much later
 * (JoinGroup and SyncGroup wait for the rebalance).
 * Locality: NIC core.
 */
#include <errno.h>
#include <string.h>

#include "kerr.h"
#include "req.h"

static void to_group_coordinator(struct dp_core *c, struct dp_req *r)
{
	struct dp_msg m = { .type = DP_MSG_GROUP_REQ, .ctx = r, .gen = r->gen };
	r->pending++;
	dp_send(c, 0, &m);
}

static int offset_commit(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct OffsetCommitRequest *q = dp_req_alloc(r, sizeof(*q));
	struct OffsetCommitResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!q || !resp || OffsetCommitRequest_decode(rd, r->hdr.api_version, q, &r->arena) < 0)
		return -1;
	OffsetCommitResponse_init(resp);
	int32_t nt = q->Topics_n > 0 ? q->Topics_n : 0;
	resp->Topics = dp_req_alloc(r, sizeof(*resp->Topics) * (size_t)(nt + 1));
	if (!resp->Topics)
		return -1;
	resp->Topics_n = nt;
	for (int32_t i = 0; i < nt; i++) {
		struct OffsetCommitRequest_OffsetCommitRequestTopic *tq = &q->Topics[i];
		struct OffsetCommitResponse_OffsetCommitResponseTopic *tr = &resp->Topics[i];
		int32_t np = tq->Partitions_n > 0 ? tq->Partitions_n : 0;
		tq->Partitions_n = np;
		tr->Name = tq->Name;
		tr->Partitions = dp_req_alloc(r, sizeof(*tr->Partitions) * (size_t)(np + 1));
		if (!tr->Partitions)
			return -1;
		tr->Partitions_n = np;
		for (int32_t j = 0; j < np; j++)
			tr->Partitions[j].PartitionIndex = tq->Partitions[j].PartitionIndex;
	}
	q->Topics_n = nt;
	r->req = q;
	r->resp = resp;
	to_group_coordinator(c, r);
	return 0;
}

/* TxnOffsetCommit: the same shape as OffsetCommit; the coordinator checks the producer too. */
static int txn_offset_commit(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct TxnOffsetCommitRequest *q = dp_req_alloc(r, sizeof(*q));
	struct TxnOffsetCommitResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!q || !resp || TxnOffsetCommitRequest_decode(rd, r->hdr.api_version, q, &r->arena) < 0)
		return -1;
	TxnOffsetCommitResponse_init(resp);
	int32_t nt = q->Topics_n > 0 ? q->Topics_n : 0;
	resp->Topics = dp_req_alloc(r, sizeof(*resp->Topics) * (size_t)(nt + 1));
	if (!resp->Topics)
		return -1;
	resp->Topics_n = nt;
	for (int32_t i = 0; i < nt; i++) {
		struct TxnOffsetCommitRequest_TxnOffsetCommitRequestTopic *tq = &q->Topics[i];
		struct TxnOffsetCommitResponse_TxnOffsetCommitResponseTopic *tr = &resp->Topics[i];
		int32_t np = tq->Partitions_n > 0 ? tq->Partitions_n : 0;
		tq->Partitions_n = np;
		tr->Name = tq->Name;
		tr->Partitions = dp_req_alloc(r, sizeof(*tr->Partitions) * (size_t)(np + 1));
		if (!tr->Partitions)
			return -1;
		tr->Partitions_n = np;
		for (int32_t j = 0; j < np; j++)
			tr->Partitions[j].PartitionIndex = tq->Partitions[j].PartitionIndex;
	}
	q->Topics_n = nt;
	r->req = q;
	r->resp = resp;
	to_group_coordinator(c, r);
	return 0;
}

#define SIMPLE(Name)                                                                       \
	static int Name##_start(struct dp_core *c, struct dp_req *r, struct kreader *rd)    \
	{                                                                                  \
		struct Name##Request *q = dp_req_alloc(r, sizeof(*q));                     \
		struct Name##Response *resp = dp_req_alloc(r, sizeof(*resp));              \
		if (!q || !resp || Name##Request_decode(rd, r->hdr.api_version, q, &r->arena) < 0) \
			return -1;                                                         \
		Name##Response_init(resp);                                                 \
		r->req = q;                                                                \
		r->resp = resp;                                                            \
		to_group_coordinator(c, r);                                                \
		return 0;                                                                  \
	}
SIMPLE(OffsetFetch)
SIMPLE(JoinGroup)
SIMPLE(Heartbeat)
SIMPLE(LeaveGroup)
SIMPLE(SyncGroup)

int dp_group_handle(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	switch (r->hdr.api_key) {
	case 8: return offset_commit(c, r, rd);
	case 9: return OffsetFetch_start(c, r, rd);
	case 11: return JoinGroup_start(c, r, rd);
	case 12: return Heartbeat_start(c, r, rd);
	case 13: return LeaveGroup_start(c, r, rd);
	case 14: return SyncGroup_start(c, r, rd);
	case 28: return txn_offset_commit(c, r, rd);
	}
	return -1;
}
