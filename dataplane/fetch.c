/*
 * fetch.c - Fetch and ListOffsets on the NIC core. Each partition is asked
 * of its owner, which reads whole stored batches into a buffer this core
 * lent it; the bytes go out unchanged. A fetch with less than MinBytes
 * parks until an owner reports that the high watermark moved (a watch) or
 * MaxWaitMs passes. Locality: NIC core.
 */
#include <errno.h>
#include <string.h>

#include "batch.h"
#include "lso.h"
#include "kerr.h"
#include "req.h"

#define DP_FETCH_BUF_MIN_BYTES (64u * 1024)

static void fetch_send(struct dp_core *c, struct dp_req *r, uint32_t i)
{
	struct dp_fetch_part *fp = &r->fparts[i];
	struct dp_msg m = {
		.type = DP_MSG_FETCH, .ctx = r, .idx = i, .topic_id = fp->topic_id,
		.gen = fp->gen, .partition = fp->partition,
	};
	m.u.fetch.offset = fp->offset;
	m.u.fetch.buf = fp->buf;
	m.u.fetch.cap = fp->cap;
	m.u.fetch.max_bytes = fp->max_bytes;
	m.u.fetch.isolation = r->isolation;
	r->pending++;
	dp_send(c, fp->owner, &m);
}

static void fetch_round(struct dp_core *c, struct dp_req *r)
{
	for (uint32_t i = 0; i < r->nfparts; i++) {
		struct dp_fetch_part *fp = &r->fparts[i];
		if (fp->owner < 0)
			continue;   /* answered locally with an error */
		if (!fp->buf) {
			fp->cap = fp->max_bytes < DP_FETCH_BUF_MIN_BYTES ? DP_FETCH_BUF_MIN_BYTES : fp->max_bytes;
			fp->buf = dp_req_buf_get(c, r, fp->cap);
		}
		fp->out->Records = (struct kbytes){ fp->buf, 0 };
		fetch_send(c, r, i);
	}
}

int dp_fetch_start(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	int16_t v = r->hdr.api_version;
	struct FetchRequest *req = dp_req_alloc(r, sizeof(*req));
	struct FetchResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!req || !resp || FetchRequest_decode(rd, v, req, &r->arena) < 0)
		return -1;
	r->req = req;
	r->min_bytes = req->MinBytes;
	r->max_bytes = req->MaxBytes > 0 ? req->MaxBytes : INT32_MAX;
	r->isolation = req->IsolationLevel;
	r->deadline_ms = c->now_ms + (req->MaxWaitMs > 0 ? req->MaxWaitMs : 0);

	int32_t nt = req->Topics_n > 0 ? req->Topics_n : 0;
	uint32_t total = 0;
	for (int32_t i = 0; i < nt; i++)
		total += req->Topics[i].Partitions_n > 0 ? (uint32_t)req->Topics[i].Partitions_n : 0;
	resp->Responses = dp_req_alloc(r, sizeof(*resp->Responses) * (size_t)(nt + 1));
	r->fparts = dp_req_alloc(r, sizeof(*r->fparts) * (size_t)(total + 1));
	if (!resp->Responses || !r->fparts)
		return -1;
	resp->Responses_n = nt;
	resp->SessionId = 0;

	uint32_t k = 0;
	for (int32_t i = 0; i < nt; i++) {
		struct FetchRequest_FetchTopic *ft = &req->Topics[i];
		struct FetchResponse_FetchableTopicResponse *tr = &resp->Responses[i];
		int32_t np = ft->Partitions_n > 0 ? ft->Partitions_n : 0;
		tr->Topic = ft->Topic;
		tr->Partitions = dp_req_alloc(r, sizeof(*tr->Partitions) * (size_t)(np + 1));
		if (!tr->Partitions)
			return -1;
		tr->Partitions_n = np;
		int32_t id = ft->Topic.len > 0 ? dp_topic_find(c, ft->Topic.ptr, (size_t)ft->Topic.len) : -1;
		struct dp_topic *t = id >= 0 ? &c->topics[id] : NULL;
		for (int32_t j = 0; j < np; j++, k++) {
			struct FetchRequest_FetchPartition *in = &ft->Partitions[j];
			struct FetchResponse_PartitionData *out = &tr->Partitions[j];
			struct dp_fetch_part *fp = &r->fparts[k];
			out->PartitionIndex = in->Partition;
			out->HighWatermark = -1;
			out->LastStableOffset = -1;
			out->LogStartOffset = -1;
			out->DivergingEpoch.Epoch = -1;
			out->DivergingEpoch.EndOffset = -1;
			out->CurrentLeader.LeaderId = -1;
			out->CurrentLeader.LeaderEpoch = -1;
			out->SnapshotId.EndOffset = -1;
			out->SnapshotId.Epoch = -1;
			out->AbortedTransactions_n = r->isolation == 1 ? 0 : -1;
			out->PreferredReadReplica = -1;
			out->Records = (struct kbytes){ NULL, 0 };
			fp->out = out;
			fp->owner = -1;
			if (!t || in->Partition < 0 || in->Partition >= t->nparts) {
				out->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
				continue;
			}
			fp->topic_id = (uint32_t)id;
			fp->gen = t->gen;
			fp->partition = in->Partition;
			fp->owner = dp_owner_core(c->b, t->hash, in->Partition);
			fp->offset = in->FetchOffset;
			fp->max_bytes = in->PartitionMaxBytes > 0 ? (uint32_t)in->PartitionMaxBytes : 1;
		}
	}
	r->nfparts = k;
	r->resp = resp;
	fetch_round(c, r);
	return 0;
}

/* Fetch < v10 predates zstd (KIP-110): such a consumer must not get zstd batches. */
static bool has_zstd(const uint8_t *p, uint32_t len)
{
	while (len >= ST_BATCH_HEADER_BYTES) {
		struct st_batch_hdr h;
		int n = st_batch_parse_header(p, len, &h);
		if (n <= 0 || (uint32_t)n > len)
			return false;
		if ((h.attributes & ST_BATCH_ATTR_COMPRESSION) == ST_BATCH_CODEC_ZSTD)
			return true;
		p += n;
		len -= (uint32_t)n;
	}
	return false;
}

void dp_fetch_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m)
{
	struct dp_fetch_part *fp = &r->fparts[m->idx];
	struct FetchResponse_PartitionData *out = fp->out;
	if (m->u.fetch_done.need) {
		/* The first batch is larger than the buffer: lend a bigger one and ask again. */
		dp_req_buf_put(c, r, fp->buf, fp->cap);
		fp->cap = m->u.fetch_done.need;
		fp->buf = dp_req_buf_get(c, r, fp->cap);
		fetch_send(c, r, m->idx);
		return;
	}
	out->ErrorCode = m->err;
	uint32_t len = m->u.fetch_done.len;
	if (r->hdr.api_version < 10 && has_zstd(fp->buf, len)) {
		out->ErrorCode = KERR_UNSUPPORTED_COMPRESSION_TYPE;   /* consumer too old for zstd */
		len = 0;
	}
	out->HighWatermark = m->u.fetch_done.hw;
	out->LastStableOffset = m->u.fetch_done.lso;
	out->LogStartOffset = m->u.fetch_done.log_start;
	out->Records = (struct kbytes){ fp->buf, (int32_t)len };
	if (r->isolation == 1 && !m->err && m->u.fetch_done.len) {
		/* The owner put the aborted transactions after the records (shard.c). */
		uint32_t n, pos = DP_ABORTED_AT(m->u.fetch_done.len);
		memcpy(&n, fp->buf + pos, 4);
		struct FetchResponse_AbortedTransaction *at = dp_req_alloc(r, sizeof(*at) * (n + 1));
		const struct txn_aborted *src = (const void *)(fp->buf + pos + 8);
		if (at) {
			for (uint32_t i = 0; i < n; i++) {
				at[i].ProducerId = src[i].pid;
				at[i].FirstOffset = src[i].first_offset;
			}
			out->AbortedTransactions = at;
			out->AbortedTransactions_n = (int32_t)n;
		}
	}
}

#define DP_FETCH_SYNC_WAKES_MAX 3   /* rounds one call may run when local owners answer at once */

/*
 * Called when every owner has answered, or a watch woke a parked fetch.
 * Owners on this same core answer synchronously, inside dp_send(): so a
 * round holds an extra pending count until all its parts are sent, and a
 * watch that fires while we are still here only sets `woken` (in_more), to
 * be taken by the loop below instead of by a nested call.
 */
bool dp_fetch_more(struct dp_core *c, struct dp_req *r)
{
	r->in_more = true;
	for (int wakes = 0;; wakes++) {
		if (r->woken) {
			r->woken = false;
			r->gen++;   /* answers to older watches are now stale */
			r->pending++;
			fetch_round(c, r);
			if (--r->pending > 0) {
				r->in_more = false;
				return true;
			}
		}
		int64_t bytes = 0;
		bool error = false;
		for (uint32_t i = 0; i < r->nfparts; i++) {
			bytes += r->fparts[i].out->Records.len;
			error |= r->fparts[i].out->ErrorCode != 0;
		}
		if (bytes < r->min_bytes && !error && !r->final_round && c->now_ms < r->deadline_ms &&
		    wakes < DP_FETCH_SYNC_WAKES_MAX) {
			/* Park: ask each owner to tell us when what we may read passes our offset.
			 * Buffers that came back empty go back meanwhile (the next round lends
			 * new ones): a long poll, whose MaxWaitMs is the client's, holds only
			 * what it has read. */
			for (uint32_t i = 0; i < r->nfparts; i++) {
				struct dp_fetch_part *fp = &r->fparts[i];
				if (fp->buf && !fp->out->Records.len) {
					dp_req_buf_put(c, r, fp->buf, fp->cap);
					fp->buf = NULL;
					fp->out->Records = (struct kbytes){ NULL, 0 };
				}
			}
			r->gen++;
			dp_req_park(c, r);
			for (uint32_t i = 0; i < r->nfparts && r->parked; i++) {
				struct dp_fetch_part *fp = &r->fparts[i];
				if (fp->owner < 0)
					continue;
				struct dp_msg m = {
					.type = DP_MSG_WATCH, .ctx = r, .idx = i, .topic_id = fp->topic_id,
					.gen = r->gen, .partition = fp->partition,
				};
				m.u.watch.offset = fp->offset;
				m.u.watch.deadline_ms = r->deadline_ms;
				m.u.watch.topic_gen = fp->gen;
				m.u.watch.isolation = r->isolation;
				dp_send(c, fp->owner, &m);
			}
			if (r->woken)
				continue;   /* a local owner had data already: another round */
			r->in_more = false;
			return true;
		}
		break;
	}
	r->in_more = false;
	/* Response-level MaxBytes: whole partitions in order; the first data always goes. */
	int64_t sent = 0;
	for (uint32_t i = 0; i < r->nfparts; i++) {
		struct kbytes *rec = &r->fparts[i].out->Records;
		if (sent > 0 && sent + rec->len > r->max_bytes)
			rec->len = 0;
		sent += rec->len;
	}
	return false;
}

void dp_fetch_release(struct dp_core *c, struct dp_req *r)
{
	for (uint32_t i = 0; i < r->nfparts; i++)
		if (r->fparts[i].buf) {
			dp_req_buf_put(c, r, r->fparts[i].buf, r->fparts[i].cap);
			r->fparts[i].buf = NULL;
		}
	r->nfparts = 0;
}

/* ---- ListOffsets ------------------------------------------------------------ */

int dp_list_offsets_start(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	int16_t v = r->hdr.api_version;
	struct ListOffsetsRequest *req = dp_req_alloc(r, sizeof(*req));
	struct ListOffsetsResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!req || !resp || ListOffsetsRequest_decode(rd, v, req, &r->arena) < 0)
		return -1;
	r->resp = resp;
	int32_t nt = req->Topics_n > 0 ? req->Topics_n : 0;
	resp->Topics = dp_req_alloc(r, sizeof(*resp->Topics) * (size_t)(nt + 1));
	if (!resp->Topics)
		return -1;
	resp->Topics_n = nt;
	for (int32_t i = 0; i < nt; i++) {
		struct ListOffsetsRequest_ListOffsetsTopic *in = &req->Topics[i];
		struct ListOffsetsResponse_ListOffsetsTopicResponse *out = &resp->Topics[i];
		int32_t np = in->Partitions_n > 0 ? in->Partitions_n : 0;
		out->Name = in->Name;
		out->Partitions = dp_req_alloc(r, sizeof(*out->Partitions) * (size_t)(np + 1));
		int64_t *old = dp_req_alloc(r, sizeof(int64_t) * (size_t)(np + 1));
		if (!out->Partitions || !old)
			return -1;
		out->Partitions_n = np;
		int32_t id = in->Name.len > 0 ? dp_topic_find(c, in->Name.ptr, (size_t)in->Name.len) : -1;
		struct dp_topic *t = id >= 0 ? &c->topics[id] : NULL;
		for (int32_t j = 0; j < np; j++) {
			struct ListOffsetsRequest_ListOffsetsPartition *ip = &in->Partitions[j];
			struct ListOffsetsResponse_ListOffsetsPartitionResponse *op = &out->Partitions[j];
			op->PartitionIndex = ip->PartitionIndex;
			op->Timestamp = -1;
			op->Offset = -1;
			op->LeaderEpoch = -1;
			op->OldStyleOffsets = &old[j];
			op->OldStyleOffsets_n = 0;
			if (!t || ip->PartitionIndex < 0 || ip->PartitionIndex >= t->nparts) {
				op->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
				continue;
			}
			struct dp_msg m = {
				.type = DP_MSG_LIST, .ctx = r, .topic_id = (uint32_t)id, .gen = t->gen,
				.partition = ip->PartitionIndex,
			};
			m.u.list.timestamp = ip->Timestamp;
			m.u.list.isolation = req->IsolationLevel;
			m.u.list.out = op;
			r->pending++;
			dp_send(c, dp_owner_core(c->b, t->hash, ip->PartitionIndex), &m);
		}
	}
	return 0;
}

void dp_list_offsets_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m)
{
	struct ListOffsetsResponse_ListOffsetsPartitionResponse *op = m->u.list_done.out;
	op->ErrorCode = m->err;
	if (m->err)
		return;
	op->Offset = m->u.list_done.offset;
	op->Timestamp = m->u.list_done.timestamp;
	if (r->hdr.api_version == 0 && op->Offset >= 0) {
		op->OldStyleOffsets[0] = op->Offset;
		op->OldStyleOffsets_n = 1;
	}
}
