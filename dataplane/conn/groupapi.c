/*
 * groupapi.c - consumer-group APIs on the NIC core: decode, shape the
 * response where its shape follows the request (OffsetCommit), and lend the
 * request to the group coordinator on the control core (JoinGroup,
 * SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
 * TxnOffsetCommit, DescribeGroups, ListGroups), which fills
 * the response and answers DP_MSG_GROUP_DONE, possibly much later
 * (JoinGroup and SyncGroup wait for the rebalance).
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
#define COMMIT_HANDLER(Msg, fn)                                                               \
	static int fn(struct dp_core *c, struct dp_req *r, struct kreader *rd)                  \
	{                                                                                      \
		struct Msg##Request *q = dp_req_alloc(r, sizeof(*q));                         \
		struct Msg##Response *resp = dp_req_alloc(r, sizeof(*resp));                  \
		if (!q || !resp || Msg##Request_decode(rd, r->hdr.api_version, q, &r->arena) < 0) \
			return -1;                                                             \
		Msg##Response_init(resp);                                                     \
		int32_t nt = q->Topics_n > 0 ? q->Topics_n : 0;                                \
		resp->Topics = dp_req_alloc(r, sizeof(*resp->Topics) * (size_t)(nt + 1));     \
		if (!resp->Topics)                                                             \
			return -1;                                                             \
		resp->Topics_n = nt;                                                           \
		for (int32_t i = 0; i < nt; i++) {                                             \
			int32_t np = q->Topics[i].Partitions_n > 0 ? q->Topics[i].Partitions_n : 0; \
			q->Topics[i].Partitions_n = np;                                        \
			resp->Topics[i].Name = q->Topics[i].Name;                              \
			resp->Topics[i].Partitions =                                           \
				dp_req_alloc(r, sizeof(*resp->Topics[i].Partitions) * (size_t)(np + 1)); \
			if (!resp->Topics[i].Partitions)                                       \
				return -1;                                                     \
			resp->Topics[i].Partitions_n = np;                                     \
			for (int32_t j = 0; j < np; j++)                                       \
				resp->Topics[i].Partitions[j].PartitionIndex =                 \
					q->Topics[i].Partitions[j].PartitionIndex;             \
		}                                                                              \
		q->Topics_n = nt;                                                              \
		r->req = q;                                                                    \
		r->resp = resp;                                                                \
		dp_lend_to_control(c, r, DP_MSG_GROUP_REQ);                                   \
		return 0;                                                                      \
	}
COMMIT_HANDLER(OffsetCommit, offset_commit)
COMMIT_HANDLER(TxnOffsetCommit, txn_offset_commit)

DP_LEND_HANDLER(OffsetFetch, DP_MSG_GROUP_REQ)
DP_LEND_HANDLER(JoinGroup, DP_MSG_GROUP_REQ)
DP_LEND_HANDLER(DescribeGroups, DP_MSG_GROUP_REQ)
DP_LEND_HANDLER(ListGroups, DP_MSG_GROUP_REQ)
DP_LEND_HANDLER(Heartbeat, DP_MSG_GROUP_REQ)
DP_LEND_HANDLER(LeaveGroup, DP_MSG_GROUP_REQ)
DP_LEND_HANDLER(SyncGroup, DP_MSG_GROUP_REQ)

int dp_group_handle(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	switch (r->hdr.api_key) {
	case KAPI_OFFSET_COMMIT: return offset_commit(c, r, rd);
	case KAPI_OFFSET_FETCH: return OffsetFetch_start(c, r, rd);
	case KAPI_JOIN_GROUP: {
		/* The member's address, for DescribeGroups: only the NIC core knows the connection. */
		char *peer = dp_req_alloc(r, NIC_PEER_BYTES_MAX);
		if (peer && nic_conn_peer(c->nic, r->conn->handle, peer, NIC_PEER_BYTES_MAX) > 0)
			r->peer = peer;
		return JoinGroup_start(c, r, rd);
	}
	case KAPI_DESCRIBE_GROUPS: return DescribeGroups_start(c, r, rd);
	case KAPI_LIST_GROUPS: return ListGroups_start(c, r, rd);
	case KAPI_HEARTBEAT: return Heartbeat_start(c, r, rd);
	case KAPI_LEAVE_GROUP: return LeaveGroup_start(c, r, rd);
	case KAPI_SYNC_GROUP: return SyncGroup_start(c, r, rd);
	case KAPI_TXN_OFFSET_COMMIT: return txn_offset_commit(c, r, rd);
	}
	return -1;
}
