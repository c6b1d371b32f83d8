/*
 * call.c - a coordinator call's buffer and its plain error answers (call.h).
 * Locality: whichever core holds the call.
 */
#include <string.h>

#include "kerr.h"
#include "kmsg.h"
#include "call.h"

size_t dp_call_bytes_min(size_t frame_len, size_t body_len, size_t arena_min)
{
	/* The arena as a request's own (conn.c): what the body decodes to and the answer. */
	size_t arena = DP_ARENA_BASE_BYTES + frame_len * DP_ARENA_PER_FRAME_BYTE;
	if (arena < arena_min)
		arena = arena_min;
	if (arena > DP_ARENA_BYTES_MAX)
		arena = DP_ARENA_BYTES_MAX;
	return ((sizeof(struct dp_call) + body_len + 7) & ~(size_t)7) + arena;
}

size_t dp_call_bytes(size_t frame_len, size_t body_len)
{
	return dp_call_bytes_min(frame_len, body_len, 0);
}

bool dp_call_grow(struct dp_call *call)
{
	size_t cap = call->arena.cap;
	if (cap >= DP_ARENA_BYTES_MAX)
		return false;
	size_t want = cap > DP_ARENA_BYTES_MAX / DP_CALL_GROW_FACTOR ? DP_ARENA_BYTES_MAX : cap * DP_CALL_GROW_FACTOR;
	call->grow_bytes = (uint32_t)want;
	return true;
}

struct dp_call *dp_call_init(void *mem, size_t bytes, int16_t api_key, int16_t api_version,
                             struct kstr client_id, const void *body, size_t body_len)
{
	size_t head = (sizeof(struct dp_call) + (body ? body_len : 0) + 7) & ~(size_t)7;
	if (bytes < head)
		return NULL;
	struct dp_call *call = mem;
	memset(call, 0, sizeof(*call));
	call->hdr.api_key = api_key;
	call->hdr.api_version = api_version;
	if (body) {
		uint8_t *b = (uint8_t *)(call + 1);
		memcpy(b, body, body_len);
		call->body = b;
		call->body_len = (uint32_t)body_len;
	}
	karena_init(&call->arena, (uint8_t *)mem + head, bytes - head);
	call->hdr.client_id = (struct kstr){ NULL, -1 };
	if (client_id.len >= 0) {
		bool ok = true;
		call->hdr.client_id = dp_call_str(call, client_id.ptr, (size_t)client_id.len, &ok);
		if (!ok)
			return NULL;
	}
	return call;
}

struct kstr dp_call_str(struct dp_call *call, const char *p, size_t len, bool *ok)
{
	char *d = dp_call_alloc(call, len ? len : 1);
	if (!d) {
		*ok = false;
		return (struct kstr){ "", 0 };
	}
	if (len)
		memcpy(d, p, len);
	return (struct kstr){ d, (int32_t)len };
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

void dp_call_error(struct dp_call *call, int16_t err)
{
	switch (call->hdr.api_key) {
	/* The transaction coordinator's. */
	case KAPI_INIT_PRODUCER_ID: {
		struct InitProducerIdResponse *resp = call->resp;
		resp->ErrorCode = err;
		resp->ProducerId = -1;
		resp->ProducerEpoch = -1;
		return;
	}
	case KAPI_ADD_PARTITIONS_TO_TXN: {
		struct AddPartitionsToTxnResponse *resp = call->resp;
		for (int32_t i = 0; i < resp->ResultsByTopicV3AndBelow_n; i++) {
			struct AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult *t = &resp->ResultsByTopicV3AndBelow[i];
			for (int32_t j = 0; j < t->ResultsByPartition_n; j++)
				t->ResultsByPartition[j].PartitionErrorCode = err;
		}
		return;
	}
	case KAPI_ADD_OFFSETS_TO_TXN: ((struct AddOffsetsToTxnResponse *)call->resp)->ErrorCode = err; return;
	case KAPI_END_TXN: ((struct EndTxnResponse *)call->resp)->ErrorCode = err; return;
	case KAPI_LIST_TRANSACTIONS: ((struct ListTransactionsResponse *)call->resp)->ErrorCode = err; return;
	case KAPI_DESCRIBE_TRANSACTIONS: {
		/* Every asked id gets the error (Kafka answers per id); none if the arena is full. */
		struct DescribeTransactionsRequest *q = call->req;
		struct DescribeTransactionsResponse *resp = call->resp;
		int32_t n = q->TransactionalIds_n > 0 ? q->TransactionalIds_n : 0;
		resp->TransactionStates = dp_call_alloc(call, sizeof(*resp->TransactionStates) * (size_t)(n + 1));
		resp->TransactionStates_n = resp->TransactionStates ? n : 0;
		for (int32_t i = 0; i < resp->TransactionStates_n; i++)
			resp->TransactionStates[i] = (struct DescribeTransactionsResponse_TransactionState){
				.ErrorCode = err, .TransactionalId = q->TransactionalIds[i],
				.TransactionState = { "", 0 }, .ProducerId = -1, .ProducerEpoch = -1 };
		return;
	}
	/* The group coordinator's. */
	case KAPI_OFFSET_COMMIT: {
		struct OffsetCommitResponse *resp = call->resp;
		COMMIT_FILL_ALL(resp, err);
		return;
	}
	case KAPI_TXN_OFFSET_COMMIT: {
		struct TxnOffsetCommitResponse *resp = call->resp;
		COMMIT_FILL_ALL(resp, err);
		return;
	}
	case KAPI_OFFSET_FETCH: {
		struct OffsetFetchResponse *resp = call->resp;
		resp->ErrorCode = err;
		resp->Topics_n = 0;
		return;
	}
	case KAPI_JOIN_GROUP: {
		struct JoinGroupRequest *q = call->req;
		struct JoinGroupResponse *resp = call->resp;
		resp->ErrorCode = err;
		resp->GenerationId = -1;
		resp->ProtocolName = (struct kstr){ "", 0 };
		resp->Leader = (struct kstr){ "", 0 };
		resp->MemberId = q->MemberId.len > 0 ? q->MemberId : (struct kstr){ "", 0 };
		resp->Members_n = 0;
		return;
	}
	case KAPI_HEARTBEAT: ((struct HeartbeatResponse *)call->resp)->ErrorCode = err; return;
	case KAPI_LEAVE_GROUP: ((struct LeaveGroupResponse *)call->resp)->ErrorCode = err; return;
	case KAPI_SYNC_GROUP: {
		struct SyncGroupResponse *resp = call->resp;
		resp->ErrorCode = err;
		resp->Assignment = (struct kbytes){ (const uint8_t *)"", 0 };
		return;
	}
	case KAPI_DESCRIBE_GROUPS: {
		/* Every asked group gets the error (Kafka answers per group). */
		struct DescribeGroupsRequest *q = call->req;
		struct DescribeGroupsResponse *resp = call->resp;
		int32_t ng = q->Groups_n > 0 ? q->Groups_n : 0;
		resp->Groups = dp_call_alloc(call, sizeof(*resp->Groups) * (size_t)(ng + 1));
		resp->Groups_n = resp->Groups ? ng : 0;
		for (int32_t i = 0; i < resp->Groups_n; i++)
			resp->Groups[i] = (struct DescribeGroupsResponse_DescribedGroup){
				.ErrorCode = err, .GroupId = q->Groups[i].len >= 0 ? q->Groups[i] : (struct kstr){ "", 0 },
				.GroupState = { "", 0 }, .ProtocolType = { "", 0 }, .ProtocolData = { "", 0 },
				.AuthorizedOperations = INT32_MIN };
		return;
	}
	case KAPI_LIST_GROUPS: {
		struct ListGroupsResponse *resp = call->resp;
		resp->ErrorCode = err;
		resp->Groups_n = 0;
		return;
	}
	case KAPI_DELETE_GROUPS: {
		/* Every asked group gets the error (Kafka answers per group). */
		struct DeleteGroupsRequest *q = call->req;
		struct DeleteGroupsResponse *resp = call->resp;
		int32_t ng = q->GroupsNames_n > 0 ? q->GroupsNames_n : 0;
		resp->Results = dp_call_alloc(call, sizeof(*resp->Results) * (size_t)(ng + 1));
		resp->Results_n = resp->Results ? ng : 0;
		for (int32_t i = 0; i < resp->Results_n; i++)
			resp->Results[i] = (struct DeleteGroupsResponse_DeletableGroupResult){
				.ErrorCode = err,
				.GroupId = q->GroupsNames[i].len >= 0 ? q->GroupsNames[i] : (struct kstr){ "", 0 } };
		return;
	}
	case KAPI_OFFSET_DELETE: {
		struct OffsetDeleteResponse *resp = call->resp;
		resp->ErrorCode = err;
		resp->Topics_n = 0;
		return;
	}
	}
}
