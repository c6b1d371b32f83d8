/*
 * produce.c - Produce on the NIC core: decode, check each batch's framing,
 * CRC32C and records (decompressed, for gzip/snappy/lz4/zstd: codec.h) here
 * (spreading that cost over the receiving cores), route each
 * partition's bytes to its owner without copying, and fill the response as
 * owners report durable appends. Locality: NIC core.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "batch.h"
#include "codec.h"
#include "crc32c.h"
#include "kerr.h"
#include "conn_internal.h"

_Static_assert(DP_PRODUCE_DECOMPRESSED_BYTES_MAX >= ST_BATCH_DECOMPRESSED_BYTES_MAX,
               "a request's budget holds at least one largest batch");

/*
 * The records of one well-framed batch with a good CRC, as Kafka checks them
 * before it appends: a consumer must never be served a batch it cannot
 * decompress or parse (one such batch stops every consumer of the partition).
 */
static int16_t check_batch_records(struct dp_core *c, const uint8_t *p, size_t n, const struct st_batch_hdr *h,
                                   uint32_t *inflate_left)
{
	uint32_t max = *inflate_left < ST_BATCH_DECOMPRESSED_BYTES_MAX ? *inflate_left : ST_BATCH_DECOMPRESSED_BYTES_MAX;
	assert(c->codec);   /* data cores only, and only they take Produce */
	int rc = st_codec_check_batch(c->codec, p, n, h, max);
	assert(st_codec_last_bytes(c->codec) <= max);
	*inflate_left -= (uint32_t)st_codec_last_bytes(c->codec);

	switch (rc) {
	case 0: return KERR_NONE;
	case -EMSGSIZE: return KERR_MESSAGE_TOO_LARGE;   /* Kafka's RecordTooLargeException */
	case -ENOMEM:
		DP_ERR("produce: the %s decompressor ran out of its memory (a sizing bug)",
		       st_batch_codec_name(h->attributes));
		return KERR_UNKNOWN_SERVER_ERROR;
	default: return KERR_CORRUPT_MESSAGE;   /* -EBADMSG, and codec ids 5..7 (-ENOTSUP) */
	}
}

/* Validate the batches of one partition, decompressing at most *inflate_left
 * (what is left of the request's budget; lowered by what was used); returns a
 * Kafka error code. */
static int16_t check_records(struct dp_core *c, struct kbytes rec, int16_t version, const struct dp_topic_conf *tc,
                             uint32_t *nbatch, uint32_t *inflate_left)
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
		/* The topic's max.message.bytes bounds each batch whole, as Kafka's (its sizeInBytes). */
		if ((tc->set & DP_TC_MAX_MESSAGE_BYTES) && (uint64_t)n > (uint64_t)tc->max_message_bytes)
			return KERR_MESSAGE_TOO_LARGE;
		if (h.attributes & ST_BATCH_ATTR_CONTROL)
			return KERR_INVALID_RECORD;   /* clients may not write control batches */
		if ((h.attributes & ST_BATCH_ATTR_COMPRESSION) == ST_BATCH_CODEC_ZSTD && version < 7)
			return KERR_UNSUPPORTED_COMPRESSION_TYPE;   /* zstd needs Produce v7 (KIP-110) */
		int16_t err = check_batch_records(c, p, (size_t)n, &h, inflate_left);
		if (err)
			return err;
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
	if (!DP_RESP_ARRAY(r, resp, Responses, req->TopicData_n))
		return -1;
	uint32_t inflate_left = DP_PRODUCE_DECOMPRESSED_BYTES_MAX;   /* this request's decompression budget */

	for (int32_t i = 0; i < resp->Responses_n; i++) {
		struct ProduceRequest_TopicProduceData *td = &req->TopicData[i];
		struct ProduceResponse_TopicProduceResponse *tr = &resp->Responses[i];
		tr->Name = td->Name;
		if (!DP_RESP_ARRAY(r, tr, PartitionResponses, td->PartitionData_n))
			return -1;
		int32_t id;
		struct dp_topic *t = dp_topic_named(c, td->Name, &id);

		for (int32_t j = 0; j < tr->PartitionResponses_n; j++) {
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
			else if (!dp_part_known(t, pd->Index))
				pr->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
			else if (v < 3)
				pr->ErrorCode = KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT; /* magic 0/1 message sets */
			else if (req->Acks == -1 && (t->conf.set & DP_TC_MIN_INSYNC) && t->conf.min_insync_replicas > 1)
				pr->ErrorCode = KERR_NOT_ENOUGH_REPLICAS;   /* one broker: one replica in sync, as Kafka's ISR check */
			else
				pr->ErrorCode = check_records(c, pd->Records, v, &t->conf, &nbatch, &inflate_left);
			if (pr->ErrorCode)
				continue;
			/* No credit toward its owner (dp_limits.h): not appended, the client retries. */
			int owner;
			pr->ErrorCode = dp_part_route(c, t, pd->Index, KERR_NOT_ENOUGH_REPLICAS, &owner);
			if (pr->ErrorCode)
				continue;
			/*
			 * The bytes stay in this request's frame until the owner has
			 * made them durable: it writes straight from here, after
			 * patching the base offset in place.
			 */
			struct dp_msg m = dp_part_msg(r, DP_MSG_PRODUCE, id, t, pd->Index);
			m.u.produce.ptr = (void *)pd->Records.ptr;
			m.u.produce.len = (uint32_t)pd->Records.len;
			m.u.produce.nbatch = nbatch;
			m.u.produce.out = pr;   /* comes back in the reply */
			dp_ask_part(c, r, owner, dp_shard_msg, &m);
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
