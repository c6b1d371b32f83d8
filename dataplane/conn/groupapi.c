/*
 * groupapi.c - consumer-group APIs on the NIC core: decode into a
 * coordinator call (loop/call.h), shape the response where its shape
 * follows the request (OffsetCommit), and send the call to the group
 * coordinator's service for its kind (JoinGroup, SyncGroup, Heartbeat,
 * LeaveGroup, OffsetCommit, OffsetFetch, TxnOffsetCommit, DescribeGroups,
 * ListGroups, DeleteGroups, OffsetDelete), which fills the response and answers DP_MSG_GROUP_DONE,
 * possibly much later (JoinGroup and SyncGroup wait for the rebalance).
 * Locality: NIC core.
 */
#include <errno.h>
#include <string.h>

#include "kerr.h"
#include "nic.h"
#include "conn_internal.h"

/*
 * OffsetCommit and TxnOffsetCommit: the response mirrors the request's
 * topics and partitions, so it is shaped here and the coordinator only fills
 * in the error codes.
 */
#define COMMIT_HANDLER(Msg, fn, svc)                                                          \
	static int fn(struct dp_core *c, struct dp_req *r, struct kreader *rd)                  \
	{                                                                                      \
		struct kreader crd;                                                            \
		struct dp_call *call = dp_call_begin(c, r, rd, &crd);                          \
		if (!call)                                                                     \
			return -1;                                                             \
		struct Msg##Request *q = dp_call_alloc(call, sizeof(*q));                     \
		struct Msg##Response *resp = dp_call_alloc(call, sizeof(*resp));              \
		if (!q || !resp || Msg##Request_decode(&crd, call->hdr.api_version, q, &call->arena) < 0) \
			return -1;                                                             \
		Msg##Response_init(resp);                                                     \
		int32_t nt = q->Topics_n > 0 ? q->Topics_n : 0;                                \
		resp->Topics = dp_call_alloc(call, sizeof(*resp->Topics) * (size_t)(nt + 1)); \
		if (!resp->Topics)                                                             \
			return -1;                                                             \
		resp->Topics_n = nt;                                                           \
		for (int32_t i = 0; i < nt; i++) {                                             \
			int32_t np = q->Topics[i].Partitions_n > 0 ? q->Topics[i].Partitions_n : 0; \
			q->Topics[i].Partitions_n = np;                                        \
			resp->Topics[i].Name = q->Topics[i].Name;                              \
			resp->Topics[i].Partitions =                                           \
				dp_call_alloc(call, sizeof(*resp->Topics[i].Partitions) * (size_t)(np + 1)); \
			if (!resp->Topics[i].Partitions)                                       \
				return -1;                                                     \
			resp->Topics[i].Partitions_n = np;                                     \
			for (int32_t j = 0; j < np; j++)                                       \
				resp->Topics[i].Partitions[j].PartitionIndex =                 \
					q->Topics[i].Partitions[j].PartitionIndex;             \
		}                                                                              \
		q->Topics_n = nt;                                                              \
		call->req = q;                                                                 \
		call->resp = resp;                                                             \
		dp_call_send(c, r, call, (svc), DP_MSG_GROUP_REQ);                             \
		return 0;                                                                      \
	}
COMMIT_HANDLER(OffsetCommit, offset_commit, DP_SVC_GROUP_OFFSET_COMMIT)
COMMIT_HANDLER(TxnOffsetCommit, txn_offset_commit, DP_SVC_GROUP_TXN_OFFSET_COMMIT)

DP_CALL_HANDLER(OffsetFetch, DP_SVC_GROUP_OFFSET_FETCH, DP_MSG_GROUP_REQ)
DP_CALL_HANDLER(DescribeGroups, DP_SVC_GROUP_DESCRIBE, DP_MSG_GROUP_REQ)
DP_CALL_HANDLER(ListGroups, DP_SVC_GROUP_LIST, DP_MSG_GROUP_REQ)
DP_CALL_HANDLER(DeleteGroups, DP_SVC_GROUP_DELETE, DP_MSG_GROUP_REQ)
DP_CALL_HANDLER(OffsetDelete, DP_SVC_GROUP_OFFSET_DELETE, DP_MSG_GROUP_REQ)
DP_CALL_HANDLER(Heartbeat, DP_SVC_GROUP_HEARTBEAT, DP_MSG_GROUP_REQ)
DP_CALL_HANDLER(LeaveGroup, DP_SVC_GROUP_LEAVE, DP_MSG_GROUP_REQ)
DP_CALL_HANDLER(SyncGroup, DP_SVC_GROUP_SYNC, DP_MSG_GROUP_REQ)

static int join_group(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct kreader crd;
	struct dp_call *call = dp_call_begin(c, r, rd, &crd);
	if (!call)
		return -1;
	struct JoinGroupRequest *q = dp_call_alloc(call, sizeof(*q));
	struct JoinGroupResponse *resp = dp_call_alloc(call, sizeof(*resp));
	if (!q || !resp || JoinGroupRequest_decode(&crd, call->hdr.api_version, q, &call->arena) < 0)
		return -1;
	JoinGroupResponse_init(resp);
	if (r->call_join_as.len > 0) {
		/* Sent again (conn.c call_again): the first answer gave it this member id. */
		bool ok = true;
		q->MemberId = dp_call_str(call, r->call_join_as.ptr, (size_t)r->call_join_as.len, &ok);
		if (!ok)
			return -1;
	}
	/* The member's address, for DescribeGroups: only the NIC core knows the connection. */
	char *peer = dp_call_alloc(call, NIC_PEER_BYTES_MAX);
	if (peer && nic_conn_peer(c->nic, r->conn->handle, peer, NIC_PEER_BYTES_MAX) > 0)
		call->peer = peer;
	call->req = q;
	call->resp = resp;
	dp_call_send(c, r, call, DP_SVC_GROUP_JOIN, DP_MSG_GROUP_REQ);
	return 0;
}

int dp_group_handle(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	switch (r->hdr.api_key) {
	case KAPI_OFFSET_COMMIT: return offset_commit(c, r, rd);
	case KAPI_OFFSET_FETCH: return OffsetFetch_start(c, r, rd);
	case KAPI_JOIN_GROUP: return join_group(c, r, rd);
	case KAPI_DESCRIBE_GROUPS: return DescribeGroups_start(c, r, rd);
	case KAPI_LIST_GROUPS: return ListGroups_start(c, r, rd);
	case KAPI_DELETE_GROUPS: return DeleteGroups_start(c, r, rd);
	case KAPI_OFFSET_DELETE: return OffsetDelete_start(c, r, rd);
	case KAPI_HEARTBEAT: return Heartbeat_start(c, r, rd);
	case KAPI_LEAVE_GROUP: return LeaveGroup_start(c, r, rd);
	case KAPI_SYNC_GROUP: return SyncGroup_start(c, r, rd);
	case KAPI_TXN_OFFSET_COMMIT: return txn_offset_commit(c, r, rd);
	}
	return -1;
}
