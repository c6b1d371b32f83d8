/*
 * produce.c - Produce on the NIC core: decode, check each batch's framing
 * and CRC32C here (spreading that cost over the receiving cores), route each
 * partition's bytes to its owner without copying, and fill the response as
 * owners report durable appends. Locality: NIC core.
 */
#include <errno.h>
#include <string.h>

#include "batch.h"
#include "crc32c.h"
#include "kerr.h"
#include "req.h"


/* Validate the batches of one partition; returns a Kafka error code. */
static int16_t check_records(struct kbytes rec, int16_t version, uint32_t *nbatch)
{
	*nbatch = 0;
	if (rec.len <= 0)
		return KERR_CORRUPT_MESSAGE;
	const uint8_t *p = rec.ptr;
	size_t left = (size_t)rec.len;
	while (left) {
		struct st_batch_hdr h;
		/* Legacy message sets keep their magic byte at the same place (16):
		 * say "old format" rather than "corrupt" even when they are short. */
		if (left > ST_BATCH_OFF_MAGIC && p[ST_BATCH_OFF_MAGIC] != 2)
			return KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT;
		int n = st_batch_parse(p, left, &h);
		if (n == -EPROTO)
			return KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT;
		if (n < 0)
			return KERR_CORRUPT_MESSAGE;
		if (!st_batch_crc_ok(p, (size_t)n))
			return KERR_CORRUPT_MESSAGE;
		if (h.attributes & ST_BATCH_ATTR_CONTROL)
			return KERR_INVALID_RECORD;   /* clients may not write control batches */
		if ((h.attributes & ST_BATCH_ATTR_COMPRESSION) == ST_BATCH_CODEC_ZSTD && version < 7)
			return KERR_UNSUPPORTED_COMPRESSION_TYPE;   /* zstd needs Produce v7 (KIP-110) */
		p += n;
		left -= (size_t)n;
		(*nbatch)++;
	}
	return KERR_NONE;
}

int dp_produce_start(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	int16_t v = r->hdr.api_version;
	struct ProduceRequest *req = dp_req_alloc(r, sizeof(*req));
	struct ProduceResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!req || !resp || ProduceRequest_decode(rd, v, req, &r->arena) < 0)
		return -1;
	r->req = req;
	r->resp = resp;
	r->no_response = req->Acks == 0;
	int32_t nt = req->TopicData_n > 0 ? req->TopicData_n : 0;
	resp->Responses = dp_req_alloc(r, sizeof(*resp->Responses) * (size_t)(nt + 1));
	if (!resp->Responses)
		return -1;
	resp->Responses_n = nt;

	for (int32_t i = 0; i < nt; i++) {
		struct ProduceRequest_TopicProduceData *td = &req->TopicData[i];
		struct ProduceResponse_TopicProduceResponse *tr = &resp->Responses[i];
		int32_t np = td->PartitionData_n > 0 ? td->PartitionData_n : 0;
		tr->Name = td->Name;
		tr->PartitionResponses = dp_req_alloc(r, sizeof(*tr->PartitionResponses) * (size_t)(np + 1));
		if (!tr->PartitionResponses)
			return -1;
		tr->PartitionResponses_n = np;
		int32_t id = td->Name.len > 0 ? dp_topic_find(c, td->Name.ptr, (size_t)td->Name.len) : -1;
		struct dp_topic *t = id >= 0 ? &c->topics[id] : NULL;

		for (int32_t j = 0; j < np; j++) {
			struct ProduceRequest_PartitionProduceData *pd = &td->PartitionData[j];
			struct ProduceResponse_PartitionProduceResponse *pr = &tr->PartitionResponses[j];
			pr->Index = pd->Index;
			pr->BaseOffset = -1;
			pr->LogAppendTimeMs = -1;
			pr->LogStartOffset = -1;
			pr->ErrorMessage = (struct kstr){ NULL, -1 };
			pr->CurrentLeader.LeaderId = -1;
			pr->CurrentLeader.LeaderEpoch = -1;
			uint32_t nbatch = 0;
			if (req->Acks != 0 && req->Acks != 1 && req->Acks != -1)
				pr->ErrorCode = KERR_INVALID_REQUIRED_ACKS;
			else if (td->Name.len > 0 && dp_topic_internal(td->Name.ptr, (size_t)td->Name.len))
				pr->ErrorCode = KERR_INVALID_TOPIC_EXCEPTION;   /* Kafka: no appends to internal topics */
			else if (!t || pd->Index < 0 || pd->Index >= t->nparts)
				pr->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
			else if (v < 3)
				pr->ErrorCode = KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT; /* magic 0/1 message sets */
			else
				pr->ErrorCode = check_records(pd->Records, v, &nbatch);
			if (pr->ErrorCode)
				continue;
			/*
			 * The bytes stay in this request's frame until the owner has
			 * made them durable: it writes straight from here, after
			 * patching the base offset in place.
			 */
			struct dp_msg m = {
				.type = DP_MSG_PRODUCE,
				.topic_id = (uint32_t)id, .gen = t->gen, .partition = pd->Index,
			};
			m.u.produce.ptr = (void *)pd->Records.ptr;
			m.u.produce.len = (uint32_t)pd->Records.len;
			m.u.produce.nbatch = nbatch;
			m.u.produce.out = pr;   /* comes back in the reply */
			m.ctx = r;
			r->pending++;
			dp_send(c, dp_owner_core(c->b, t->hash, pd->Index), &m);
		}
	}
	return 0;
}

void dp_produce_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m)
{
	struct ProduceResponse_PartitionProduceResponse *pr = m->u.produce_done.out;
	pr->ErrorCode = m->err;
	if (!m->err) {
		pr->BaseOffset = m->u.produce_done.base_offset;
		pr->LogStartOffset = m->u.produce_done.log_start;
	}
}
