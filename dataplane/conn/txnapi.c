/*
 * txnapi.c - transaction APIs on the NIC core: decode into a coordinator
 * call (loop/call.h), shape the response so the coordinator only fills in
 * error codes, and send the call to the transaction coordinator
 * (InitProducerId with a transactional id, AddPartitionsToTxn,
 * AddOffsetsToTxn, EndTxn, ListTransactions, DescribeTransactions); or ask
 * owner shards directly (WriteTxnMarkers, DescribeProducers).
 * Locality: NIC core.
 */
#include <errno.h>
#include <string.h>

#include "kerr.h"
#include "conn_internal.h"

#define DP_DESCRIBE_PRODUCERS_MAX 1024        /* producers listed per partition */
#define DP_DESCRIBE_PRODUCERS_PARTS_MAX 1024  /* partitions per request */

DP_CALL_HANDLER(InitProducerId, DP_SVC_TXN, DP_MSG_TXN_REQ)

int dp_txn_init_producer(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	return InitProducerId_start(c, r, rd);
}

static int add_partitions(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct kreader crd;
	struct dp_call *call = dp_call_begin(c, r, rd, &crd);
	if (!call)
		return -1;
	struct AddPartitionsToTxnRequest *q = dp_call_alloc(call, sizeof(*q));
	struct AddPartitionsToTxnResponse *resp = dp_call_alloc(call, sizeof(*resp));
	if (!q || !resp || AddPartitionsToTxnRequest_decode(&crd, call->hdr.api_version, q, &call->arena) < 0)
		return -1;
	AddPartitionsToTxnResponse_init(resp);
	int32_t nt = q->V3AndBelowTopics_n > 0 ? q->V3AndBelowTopics_n : 0;
	resp->ResultsByTopicV3AndBelow = dp_call_alloc(call, sizeof(*resp->ResultsByTopicV3AndBelow) * (size_t)(nt + 1));
	if (!resp->ResultsByTopicV3AndBelow)
		return -1;
	resp->ResultsByTopicV3AndBelow_n = nt;
	for (int32_t i = 0; i < nt; i++) {
		struct AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *tq = &q->V3AndBelowTopics[i];
		struct AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult *tr = &resp->ResultsByTopicV3AndBelow[i];
		int32_t np = tq->Partitions_n > 0 ? tq->Partitions_n : 0;
		tr->Name = tq->Name;
		tr->ResultsByPartition = dp_call_alloc(call, sizeof(*tr->ResultsByPartition) * (size_t)(np + 1));
		if (!tr->ResultsByPartition)
			return -1;
		tr->ResultsByPartition_n = np;
		for (int32_t j = 0; j < np; j++)
			tr->ResultsByPartition[j].PartitionIndex = tq->Partitions[j];
		if (tq->Partitions_n < 0)
			tq->Partitions_n = 0;
	}
	call->req = q;
	call->resp = resp;
	dp_call_send(c, r, call, DP_SVC_TXN, DP_MSG_TXN_REQ);
	return 0;
}

DP_CALL_HANDLER(AddOffsetsToTxn, DP_SVC_TXN, DP_MSG_TXN_REQ)
DP_CALL_HANDLER(EndTxn, DP_SVC_TXN, DP_MSG_TXN_REQ)
DP_CALL_HANDLER(ListTransactions, DP_SVC_TXN, DP_MSG_TXN_REQ)
DP_CALL_HANDLER(DescribeTransactions, DP_SVC_TXN, DP_MSG_TXN_REQ)

/* ---- WriteTxnMarkers: markers written by the owners, as the coordinator does it ---- */

static int write_txn_markers(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct WriteTxnMarkersRequest *q = dp_req_alloc(r, sizeof(*q));
	struct WriteTxnMarkersResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!q || !resp || WriteTxnMarkersRequest_decode(rd, r->hdr.api_version, q, &r->arena) < 0)
		return -1;
	r->resp = resp;
	if (!DP_RESP_ARRAY(r, resp, Markers, q->Markers_n))
		return -1;
	for (int32_t i = 0; i < resp->Markers_n; i++) {
		struct WriteTxnMarkersRequest_WritableTxnMarker *mk = &q->Markers[i];
		struct WriteTxnMarkersResponse_WritableTxnMarkerResult *mr = &resp->Markers[i];
		mr->ProducerId = mk->ProducerId;
		if (!DP_RESP_ARRAY(r, mr, Topics, mk->Topics_n))
			return -1;
		for (int32_t j = 0; j < mr->Topics_n; j++) {
			struct WriteTxnMarkersRequest_WritableTxnMarkerTopic *tq = &mk->Topics[j];
			struct WriteTxnMarkersResponse_WritableTxnMarkerTopicResult *tr = &mr->Topics[j];
			tr->Name = tq->Name;
			if (!DP_RESP_ARRAY(r, tr, Partitions, tq->PartitionIndexes_n))
				return -1;
			int32_t id;
			struct dp_topic *t = dp_topic_named(c, tq->Name, &id);
			for (int32_t k = 0; k < tr->Partitions_n; k++) {
				struct WriteTxnMarkersResponse_WritableTxnMarkerPartitionResult *pr = &tr->Partitions[k];
				int32_t part = tq->PartitionIndexes[k];
				int owner;
				pr->PartitionIndex = part;
				/* no credit: not written; retriable (dp_limits.h) */
				pr->ErrorCode = dp_part_route(c, t, part, KERR_NOT_ENOUGH_REPLICAS, &owner);
				if (pr->ErrorCode)
					continue;
				struct dp_msg m = dp_part_msg(r, DP_MSG_TXN_MARKER, id, t, part);
				m.flags = DP_F_WIRE;
				m.u.txn.pid = mk->ProducerId;
				m.u.txn.epoch = mk->ProducerEpoch;
				m.u.txn.commit = mk->TransactionResult;
				/* Not the client's: the field holds the coordinator's decision serials
				 * (txn/coord.h), and 0 is "none", never taken for one already applied. */
				m.u.txn.coord_epoch = 0;
				m.u.txn.ptr = pr;
				dp_ask_part(c, r, owner, dp_shard_txn_msg, &m);
			}
		}
	}
	return 0;
}

/* ---- DescribeProducers (KIP-664): each owner lists its producers into a lent array ---- */

static int describe_producers(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct DescribeProducersRequest *q = dp_req_alloc(r, sizeof(*q));
	struct DescribeProducersResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!q || !resp || DescribeProducersRequest_decode(rd, r->hdr.api_version, q, &r->arena) < 0)
		return -1;
	r->resp = resp;
	if (!DP_RESP_ARRAY(r, resp, Topics, q->Topics_n))
		return -1;
	/* The lent arrays come from one pool buffer, sized for every partition asked. */
	size_t nparts = 0;
	for (int32_t i = 0; i < resp->Topics_n; i++)
		nparts += (size_t)dp_count(q->Topics[i].PartitionIndexes_n);
	if (nparts > DP_DESCRIBE_PRODUCERS_PARTS_MAX)
		return -1;
	struct DescribeProducersResponse_ProducerState *space =
		nparts ? dp_buf_try_get(nparts * DP_DESCRIBE_PRODUCERS_MAX * sizeof(*space)) : NULL;
	if (nparts && !space)
		return -1;   /* no memory: the connection is closed, the broker goes on */
	r->slots_mem = space;
	for (int32_t i = 0; i < resp->Topics_n; i++) {
		struct DescribeProducersRequest_TopicRequest *tq = &q->Topics[i];
		struct DescribeProducersResponse_TopicResponse *tr = &resp->Topics[i];
		tr->Name = tq->Name;
		if (!DP_RESP_ARRAY(r, tr, Partitions, tq->PartitionIndexes_n))
			return -1;
		int32_t id;
		struct dp_topic *t = dp_topic_named(c, tq->Name, &id);
		for (int32_t k = 0; k < tr->Partitions_n; k++) {
			struct DescribeProducersResponse_PartitionResponse *pr = &tr->Partitions[k];
			int32_t part = tq->PartitionIndexes[k];
			int owner;
			pr->PartitionIndex = part;
			pr->ErrorMessage = (struct kstr){ NULL, -1 };
			/* no credit: retriable (dp_limits.h) */
			pr->ErrorCode = dp_part_route(c, t, part, KERR_REQUEST_TIMED_OUT, &owner);
			if (pr->ErrorCode)
				continue;
			/* A lent array: the owner fills it and says how many (bounded). */
			pr->ActiveProducers = space;
			space += DP_DESCRIBE_PRODUCERS_MAX;
			struct dp_msg m = dp_part_msg(r, DP_MSG_DESCRIBE_PRODUCERS, id, t, part);
			m.flags = DP_F_WIRE;
			m.u.txn.ptr = pr;
			m.u.txn.cap = DP_DESCRIBE_PRODUCERS_MAX;
			dp_ask_part(c, r, owner, dp_shard_txn_msg, &m);
		}
	}
	return 0;
}

int dp_txn_handle(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	switch (r->hdr.api_key) {
	case KAPI_ADD_PARTITIONS_TO_TXN: return add_partitions(c, r, rd);
	case KAPI_ADD_OFFSETS_TO_TXN: return AddOffsetsToTxn_start(c, r, rd);
	case KAPI_END_TXN: return EndTxn_start(c, r, rd);
	case KAPI_WRITE_TXN_MARKERS: return write_txn_markers(c, r, rd);
	case KAPI_DESCRIBE_PRODUCERS: return describe_producers(c, r, rd);
	case KAPI_DESCRIBE_TRANSACTIONS: return DescribeTransactions_start(c, r, rd);
	case KAPI_LIST_TRANSACTIONS: return ListTransactions_start(c, r, rd);
	}
	return -1;
}

/* Owner answers to WriteTxnMarkers / DescribeProducers: the owner filled what it could. */
void dp_txn_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m)
{
	if (m->type == DP_MSG_TXN_MARKER_DONE) {
		struct WriteTxnMarkersResponse_WritableTxnMarkerPartitionResult *pr = m->u.txn.ptr;
		pr->ErrorCode = m->err;
	} else if (m->type == DP_MSG_DESCRIBE_PRODUCERS_DONE) {
		struct DescribeProducersResponse_PartitionResponse *pr = m->u.txn.ptr;
		pr->ErrorCode = m->err;
		pr->ActiveProducers_n = m->err ? 0 : (int32_t)m->u.txn.cap;
	}
}
