/*
 * call_ut.c - a coordinator call (loop/call.h) holds everything it carries:
 * the request is decoded from the call's own copy of the bytes, so the
 * caller's frame may change or go once the call is made; a call that does
 * not fit is refused; and the plain error answers stay inside the call.
 */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

#include "kerr.h"
#include "call.h"

/* Does [p, p + n) lie inside the call's buffer (or is it one of the static "" answers)? */
static bool inside(const struct dp_call *call, size_t bytes, const void *p, size_t n)
{
	const uint8_t *b = (const uint8_t *)call, *q = p;
	return (n == 0 && q && *q == 0) || (q >= b && q + n <= b + bytes);
}

/* A JoinGroup v5 body as a client sends it, in buf; returns its length. */
static size_t join_body(uint8_t *buf, size_t cap)
{
	struct JoinGroupRequest q;
	JoinGroupRequest_init(&q);
	struct JoinGroupRequest_JoinGroupRequestProtocol p[2] = {
		{ .Name = { "range", 5 }, .Metadata = { (const uint8_t *)"\0\1meta", 6 } },
		{ .Name = { "roundrobin", 10 }, .Metadata = { (const uint8_t *)"xy", 2 } },
	};
	q.GroupId = (struct kstr){ "g1", 2 };
	q.SessionTimeoutMs = 10000;
	q.RebalanceTimeoutMs = 30000;
	q.MemberId = (struct kstr){ "m-1", 3 };
	q.GroupInstanceId = (struct kstr){ "inst", 4 };
	q.ProtocolType = (struct kstr){ "consumer", 8 };
	q.Protocols_n = 2;
	q.Protocols = p;
	struct kwriter w;
	kw_init(&w, buf, cap);
	CU_ASSERT_EQUAL_FATAL(JoinGroupRequest_encode(&w, 5, &q), 0);
	CU_ASSERT_EQUAL_FATAL(w.err, 0);
	return (size_t)(w.p - w.start);
}

static void test_self_contained(void)
{
	uint8_t frame[512];
	char client[] = "client-7";
	size_t n = join_body(frame, sizeof(frame));
	size_t bytes = dp_call_bytes(n + 32, n);
	CU_ASSERT(bytes >= sizeof(struct dp_call) + n + DP_ARENA_BASE_BYTES);
	void *mem = malloc(bytes);
	struct dp_call *call = dp_call_init(mem, bytes, KAPI_JOIN_GROUP, 5, (struct kstr){ client, 8 }, frame, n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(call);
	struct kreader rd;
	kr_init(&rd, call->body, call->body_len);
	struct JoinGroupRequest *q = dp_call_alloc(call, sizeof(*q));
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	CU_ASSERT_EQUAL_FATAL(JoinGroupRequest_decode(&rd, 5, q, &call->arena), 0);
	/* The caller's bytes are gone: nothing the call carries changes. */
	memset(frame, 0xa5, sizeof(frame));
	memset(client, 'z', sizeof(client) - 1);
	CU_ASSERT_EQUAL(call->hdr.api_key, KAPI_JOIN_GROUP);
	CU_ASSERT_EQUAL(call->hdr.api_version, 5);
	CU_ASSERT(call->hdr.client_id.len == 8 && !memcmp(call->hdr.client_id.ptr, "client-7", 8));
	CU_ASSERT(inside(call, bytes, call->hdr.client_id.ptr, 8));
	CU_ASSERT(q->GroupId.len == 2 && !memcmp(q->GroupId.ptr, "g1", 2));
	CU_ASSERT(inside(call, bytes, q->GroupId.ptr, 2));
	CU_ASSERT(q->MemberId.len == 3 && !memcmp(q->MemberId.ptr, "m-1", 3));
	CU_ASSERT(q->GroupInstanceId.len == 4 && !memcmp(q->GroupInstanceId.ptr, "inst", 4));
	CU_ASSERT_EQUAL_FATAL(q->Protocols_n, 2);
	CU_ASSERT(inside(call, bytes, q->Protocols, 2 * sizeof(*q->Protocols)));
	CU_ASSERT(q->Protocols[1].Name.len == 10 && !memcmp(q->Protocols[1].Name.ptr, "roundrobin", 10));
	CU_ASSERT(q->Protocols[0].Metadata.len == 6 && !memcmp(q->Protocols[0].Metadata.ptr, "\0\1meta", 6));
	CU_ASSERT(inside(call, bytes, q->Protocols[0].Metadata.ptr, 6));
	CU_ASSERT_EQUAL(q->SessionTimeoutMs, 10000);

	/* The plain error answer: the member id echoed from the call's request, nothing outside it. */
	struct JoinGroupResponse *resp = dp_call_alloc(call, sizeof(*resp));
	JoinGroupResponse_init(resp);
	call->req = q;
	call->resp = resp;
	dp_call_error(call, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	CU_ASSERT_EQUAL(resp->ErrorCode, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	CU_ASSERT_EQUAL(resp->GenerationId, -1);
	CU_ASSERT(resp->MemberId.len == 3 && inside(call, bytes, resp->MemberId.ptr, 3));
	CU_ASSERT_EQUAL(resp->Members_n, 0);

	/* A copy of the coordinator's own string lands in the call, and a full arena says so. */
	bool ok = true;
	char table[] = "txn-id-1";
	struct kstr s = dp_call_str(call, table, 8, &ok);
	table[0] = 'X';
	CU_ASSERT(ok && s.len == 8 && !memcmp(s.ptr, "txn-id-1", 8) && inside(call, bytes, s.ptr, 8));
	s = dp_call_str(call, table, bytes, &ok);
	CU_ASSERT(!ok && s.len == 0);
	free(mem);
}

static void test_too_small(void)
{
	uint8_t body[64] = { 0 };
	_Alignas(8) uint8_t mem[sizeof(struct dp_call) + 64];
	/* No room for the body copy: refused, not written past. */
	CU_ASSERT_PTR_NULL(dp_call_init(mem, sizeof(struct dp_call) + 8, KAPI_HEARTBEAT, 0, (struct kstr){ NULL, -1 },
	                                body, sizeof(body)));
	/* No room for the client id in the arena: refused too. */
	CU_ASSERT_PTR_NULL(dp_call_init(mem, sizeof(mem), KAPI_HEARTBEAT, 0, (struct kstr){ "a-long-client-id", 16 },
	                                body, sizeof(body)));
	/* Decoded from where it lies (a refused call): no body copy needed. */
	struct dp_call *call = dp_call_init(mem, sizeof(mem), KAPI_HEARTBEAT, 0, (struct kstr){ NULL, -1 }, NULL, 0);
	CU_ASSERT_PTR_NOT_NULL(call);
	if (call) {
		CU_ASSERT_EQUAL(call->body_len, 0);
		CU_ASSERT_EQUAL(call->hdr.client_id.len, -1);
	}
}

/* OffsetCommit: a partition already refused on its own keeps its error; the others get the call's. */
static void test_commit_error(void)
{
	size_t bytes = dp_call_bytes(0, 0);
	void *mem = malloc(bytes);
	struct dp_call *call = dp_call_init(mem, bytes, KAPI_OFFSET_COMMIT, 8, (struct kstr){ NULL, -1 }, NULL, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(call);
	struct OffsetCommitResponse *resp = dp_call_alloc(call, sizeof(*resp));
	OffsetCommitResponse_init(resp);
	resp->Topics = dp_call_alloc(call, sizeof(*resp->Topics));
	resp->Topics_n = 1;
	resp->Topics[0].Partitions = dp_call_alloc(call, 3 * sizeof(*resp->Topics[0].Partitions));
	resp->Topics[0].Partitions_n = 3;
	resp->Topics[0].Partitions[1].ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
	call->resp = resp;
	dp_call_error(call, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	CU_ASSERT_EQUAL(resp->Topics[0].Partitions[0].ErrorCode, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	CU_ASSERT_EQUAL(resp->Topics[0].Partitions[1].ErrorCode, KERR_UNKNOWN_TOPIC_OR_PARTITION);
	CU_ASSERT_EQUAL(resp->Topics[0].Partitions[2].ErrorCode, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	free(mem);
}

/* DescribeGroups and DescribeTransactions: each asked one is answered, with its name from the call. */
static void test_describe_error(void)
{
	size_t bytes = dp_call_bytes(0, 0);
	void *mem = malloc(bytes);
	struct dp_call *call = dp_call_init(mem, bytes, KAPI_DESCRIBE_GROUPS, 5, (struct kstr){ NULL, -1 }, NULL, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(call);
	struct DescribeGroupsRequest *q = dp_call_alloc(call, sizeof(*q));
	struct DescribeGroupsResponse *resp = dp_call_alloc(call, sizeof(*resp));
	bool ok = true;
	q->Groups = dp_call_alloc(call, 2 * sizeof(*q->Groups));
	q->Groups[0] = dp_call_str(call, "ga", 2, &ok);
	q->Groups[1] = dp_call_str(call, "gb", 2, &ok);
	q->Groups_n = 2;
	DescribeGroupsResponse_init(resp);
	call->req = q;
	call->resp = resp;
	dp_call_error(call, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	CU_ASSERT_EQUAL_FATAL(resp->Groups_n, 2);
	CU_ASSERT(inside(call, bytes, resp->Groups, 2 * sizeof(*resp->Groups)));
	CU_ASSERT_EQUAL(resp->Groups[1].ErrorCode, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	CU_ASSERT(resp->Groups[1].GroupId.len == 2 && !memcmp(resp->Groups[1].GroupId.ptr, "gb", 2));

	call = dp_call_init(mem, bytes, KAPI_DESCRIBE_TRANSACTIONS, 0, (struct kstr){ NULL, -1 }, NULL, 0);
	struct DescribeTransactionsRequest *tq = dp_call_alloc(call, sizeof(*tq));
	struct DescribeTransactionsResponse *tresp = dp_call_alloc(call, sizeof(*tresp));
	tq->TransactionalIds = dp_call_alloc(call, sizeof(*tq->TransactionalIds));
	tq->TransactionalIds[0] = dp_call_str(call, "t1", 2, &ok);
	tq->TransactionalIds_n = 1;
	call->req = tq;
	call->resp = tresp;
	dp_call_error(call, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	CU_ASSERT_EQUAL_FATAL(tresp->TransactionStates_n, 1);
	CU_ASSERT_EQUAL(tresp->TransactionStates[0].ErrorCode, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	CU_ASSERT_EQUAL(tresp->TransactionStates[0].ProducerId, -1);
	CU_ASSERT(tresp->TransactionStates[0].TransactionalId.len == 2);
	CU_ASSERT(ok);
	free(mem);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("call", NULL, NULL);
	CU_add_test(s, "a call holds what it carries", test_self_contained);
	CU_add_test(s, "a call that does not fit is refused", test_too_small);
	CU_add_test(s, "OffsetCommit's plain error", test_commit_error);
	CU_add_test(s, "Describe*'s plain error per name", test_describe_error);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
