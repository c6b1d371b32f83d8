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
#include "conn_internal.h"

/* The buffer lent to a partition that may get its first batch whole, or is read
 * again (fetch_topup), while the size of what it holds is unknown: larger
 * records come back as `need` and get their own. */
#define DP_FETCH_BUF_MIN_BYTES (64u * 1024)
/* A buffer could not be lent, or the owner's core had no credit left: the
 * partition gets this retriable error and the client fetches again. */
#define DP_FETCH_ERR_NO_BUFFER KERR_KAFKA_STORAGE_ERROR
#define DP_FETCH_TOPUPS_MAX    64u        /* partitions one request reads again (fetch_topup) */
_Static_assert(DP_FETCH_RESPONSE_MAX_BYTES + DP_FETCH_ABORTED_BYTES + 8 <= DP_BUF_MAX_BYTES,
               "a clamped read and its aborted list fit the largest buffer");

/*
 * What the handlers below take from the request's arena per element of the
 * request, beyond the decoded request itself (a fixed few structs come from
 * DP_ARENA_BASE_BYTES), within DP_ARENA_ANSWER_PER_WIRE_BYTE of the fewest
 * wire bytes that element takes (dp_limits.h): so that any request the frame
 * limit lets in is answered.
 */
#define DP_ARENA_ROUNDED(size) (((size) + KARENA_ALIGN - 1) / KARENA_ALIGN * KARENA_ALIGN)
_Static_assert(DP_ARENA_ROUNDED(sizeof(struct FetchResponse_FetchableTopicResponse)) <=
                       DP_ARENA_ANSWER_PER_WIRE_BYTE * KMSG_WIRE_MIN_FetchRequest_Topics,
               "a Fetch topic's answer within the arena's bound");
_Static_assert(sizeof(struct FetchResponse_PartitionData) + sizeof(struct dp_fetch_part) <=
                       DP_ARENA_ANSWER_PER_WIRE_BYTE * KMSG_WIRE_MIN_FetchRequest_Topics_Partitions,
               "a Fetch partition's answer and state within the arena's bound");
_Static_assert(DP_ARENA_ROUNDED(sizeof(struct ListOffsetsResponse_ListOffsetsTopicResponse)) <=
                       DP_ARENA_ANSWER_PER_WIRE_BYTE * KMSG_WIRE_MIN_ListOffsetsRequest_Topics,
               "a ListOffsets topic's answer within the arena's bound");
_Static_assert(sizeof(struct ListOffsetsResponse_ListOffsetsPartitionResponse) + sizeof(int64_t) <=
                       DP_ARENA_ANSWER_PER_WIRE_BYTE * KMSG_WIRE_MIN_ListOffsetsRequest_Topics_Partitions,
               "a ListOffsets partition's answer within the arena's bound");

/* A client's byte count, as the broker will use it: within [0, DP_FETCH_RESPONSE_MAX_BYTES]. */
static uint32_t fetch_clamp(int32_t bytes)
{
	return bytes <= 0 ? 0 : (uint32_t)bytes > DP_FETCH_RESPONSE_MAX_BYTES ? DP_FETCH_RESPONSE_MAX_BYTES
	                                                                   : (uint32_t)bytes;
}

/* A buffer for `bytes` of records: read_committed also needs room for the aborted list's count behind them (shard.c). */
static size_t fetch_cap(const struct dp_req *r, uint32_t bytes)
{
	return r->isolation == 1 ? DP_ABORTED_AT(bytes) + 8 : bytes;
}

/* Lend fp a buffer of cap bytes; on failure the partition is answered with a retriable error. */
static bool fetch_buf(struct dp_core *c, struct dp_req *r, struct dp_fetch_part *fp, size_t cap)
{
	fp->buf = dp_req_buf_try_get(c, r, cap);
	if (fp->buf) {
		fp->cap = (uint32_t)cap;
		return true;
	}
	DP_WARN_RL("fetch: no buffer of %zu bytes for a partition: answered with %s", cap,
	           kerr_name(DP_FETCH_ERR_NO_BUFFER));
	fp->cap = 0;
	fp->out->ErrorCode = DP_FETCH_ERR_NO_BUFFER;
	fp->out->Records = (struct kbytes){ NULL, 0 };
	return false;
}

/* Ask fp's owner; without credit toward it (dp_limits.h) the partition is
 * answered with DP_FETCH_ERR_NO_BUFFER instead and false returned. */
static bool fetch_send(struct dp_core *c, struct dp_req *r, uint32_t i)
{
	struct dp_fetch_part *fp = &r->fparts[i];
	if (!dp_send_room(c, fp->owner, 1)) {
		fp->out->ErrorCode = DP_FETCH_ERR_NO_BUFFER;
		fp->out->Records = (struct kbytes){ NULL, 0 };
		if (!fp->deferred)
			r->deferred++;
		fp->deferred = true;
		return false;
	}
	if (fp->deferred)
		r->deferred--;
	fp->deferred = false;
	struct dp_msg m = {
		.type = DP_MSG_FETCH, .ctx = r, .idx = i, .topic_id = fp->topic_id,
		.gen = fp->gen, .partition = fp->partition,
	};
	m.u.fetch.offset = fp->offset;
	m.u.fetch.buf = fp->buf;
	m.u.fetch.cap = fp->cap;
	m.u.fetch.max_bytes = fp->max_bytes;
	m.u.fetch.isolation = r->isolation;
	m.u.fetch.min_one = fp->min_one;
	r->pending++;
	dp_ask(c, fp->owner, dp_shard_msg, dp_req_complete_part, &m);
	return true;
}

/*
 * Ask every owner. What each may read: partitions in request order share
 * MaxBytes, as Kafka reads them (KIP-74), so a round never lends much more
 * than MaxBytes in all; once it is spent a partition is asked only for its
 * offsets. Only the first may read its first batch whole past its share.
 * dp_fetch_more cuts the answer to Kafka's, and reads again a partition
 * whose share went to partitions that came back with less, or that is the
 * first with records after all (fetch_topup).
 */
static void fetch_round(struct dp_core *c, struct dp_req *r)
{
	uint32_t budget = (uint32_t)r->max_bytes;
	bool first = true;
	r->deferred = 0;
	for (uint32_t i = 0; i < r->nfparts; i++) {
		struct dp_fetch_part *fp = &r->fparts[i];
		if (fp->owner < 0)
			continue;   /* answered locally with an error */
		fp->deferred = false;
		fp->max_bytes = fp->part_max < budget ? fp->part_max : budget;
		budget -= fp->max_bytes;
		fp->min_one = first;   /* later ones get it again only if those before had none */
		first = false;
		/* Buffers by share of MaxBytes, never by the number of partitions: one
		 * with no share gets none, its owner answers only its offsets, and it is
		 * read later if what came back leaves it room (fetch_topup). */
		uint32_t cap = fp->min_one && fp->max_bytes < DP_FETCH_BUF_MIN_BYTES ? DP_FETCH_BUF_MIN_BYTES
		                                                                     : fp->max_bytes;
		if (!fp->buf && cap && !fetch_buf(c, r, fp, fetch_cap(r, cap)))
			continue;
		fp->out->Records = (struct kbytes){ fp->buf, 0 };
		fp->out->AbortedTransactions_n = r->isolation == 1 ? 0 : -1;   /* the last round's pointed into buf */
		fp->cut = false;
		fp->ready = true;
	}
	/*
	 * Owners are asked starting at a point that moves on with every round:
	 * without credit toward an owner (dp_limits.h) the parts asked last are
	 * the ones refused, and in a fixed order the same partitions would be
	 * refused every time (a consumer starved of its last partitions).
	 */
	uint32_t n = r->nfparts, from = n ? c->fetch_rot++ % n : 0;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = (from + k) % n;
		if (!r->fparts[i].ready)
			continue;
		r->fparts[i].ready = false;
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
	r->max_bytes = (int32_t)fetch_clamp(req->MaxBytes);   /* before v3 the schema's default: INT32_MAX */
	r->isolation = req->IsolationLevel;
	r->deadline_ms = c->now_ms + (req->MaxWaitMs > 0 ? req->MaxWaitMs : 0);

	if (!DP_RESP_ARRAY(r, resp, Responses, req->Topics_n))
		return -1;
	int32_t nt = resp->Responses_n;
	uint32_t total = 0;
	for (int32_t i = 0; i < nt; i++)
		total += (uint32_t)dp_count(req->Topics[i].Partitions_n);
	r->fparts = dp_req_alloc(r, sizeof(*r->fparts) * (size_t)(total + 1));
	if (!r->fparts)
		return -1;
	resp->SessionId = 0;

	uint32_t k = 0;
	for (int32_t i = 0; i < nt; i++) {
		struct FetchRequest_FetchTopic *ft = &req->Topics[i];
		struct FetchResponse_FetchableTopicResponse *tr = &resp->Responses[i];
		tr->Topic = ft->Topic;
		if (!DP_RESP_ARRAY(r, tr, Partitions, ft->Partitions_n))
			return -1;
		int32_t id;
		struct dp_topic *t = dp_topic_named(c, ft->Topic, &id);
		for (int32_t j = 0; j < tr->Partitions_n; j++, k++) {
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
			if (!dp_part_known(t, in->Partition)) {
				out->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
				continue;
			}
			fp->topic_id = (uint32_t)id;
			fp->gen = t->gen;
			fp->partition = in->Partition;
			fp->owner = dp_owner_core(c->b, t->hash, in->Partition);
			fp->offset = in->FetchOffset;
			fp->part_max = fetch_clamp(in->PartitionMaxBytes);   /* its share: fetch_round */
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

/*
 * An answer from owner gave back the credit its ask held: this request's
 * partitions refused for credit toward that owner are asked now, as far as
 * credit allows. Refused for good only when none of its asks is left to give
 * one back (their error stays). Otherwise a fetch with more partitions on one
 * owner than the credit always had some of them refused, and which ones
 * depended on the order of its partitions: a client that rotates its order
 * by one each fetch, as librdkafka does, against a round that rotates by one
 * too (fetch_round), met the same partition refused every time, and a
 * read_committed consumer never read it (txn_basic_credit, 1 of ~6 runs).
 */
static void fetch_deferred(struct dp_core *c, struct dp_req *r, int owner)
{
	for (uint32_t i = 0; r->deferred && i < r->nfparts; i++) {
		struct dp_fetch_part *fp = &r->fparts[i];
		if (!fp->deferred || fp->owner != owner)
			continue;
		if (!dp_send_room(c, owner, 1))
			return;
		fp->out->ErrorCode = KERR_NONE;
		fp->out->Records = (struct kbytes){ fp->buf, 0 };
		fetch_send(c, r, i);
	}
}

void dp_fetch_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m)
{
	struct dp_fetch_part *fp = &r->fparts[m->idx];
	struct FetchResponse_PartitionData *out = fp->out;
	if (m->u.fetch_done.need) {
		/* The records (or the aborted list) do not fit: lend a bigger buffer and ask again. */
		assert(m->u.fetch_done.need > fp->cap);
		if (fp->buf)
			dp_req_buf_put(c, r, fp->buf, fp->cap);
		fp->buf = NULL;
		if (fetch_buf(c, r, fp, m->u.fetch_done.need)) {
			fp->out->Records = (struct kbytes){ fp->buf, 0 };
			fetch_send(c, r, m->idx);
		}
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
	if (r->isolation == 1 && !m->err && len) {
		/* The owner put the aborted transactions, as Kafka's structs, after the records (shard.c). */
		uint32_t n, pos = DP_ABORTED_AT(len);
		assert(pos + 8 <= fp->cap);
		memcpy(&n, fp->buf + pos, 4);
		assert(n <= DP_FETCH_ABORTED_MAX && pos + 8 + (size_t)n * sizeof(*out->AbortedTransactions) <= fp->cap);
		out->AbortedTransactions = (void *)(fp->buf + pos + 8);
		out->AbortedTransactions_n = (int32_t)n;
	}
	fetch_deferred(c, r, m->src);
}

/*
 * How much of a partition's records to send within `allow` bytes: whole
 * batches; with `first` (no partition before it had records) the first
 * batch even when it alone is larger. *next: the offset after the last kept.
 */
static uint32_t fetch_keep(const uint8_t *p, uint32_t len, uint32_t allow, bool first, int64_t *next)
{
	uint32_t pos = 0;
	*next = -1;
	while (pos < len) {
		struct st_batch_hdr h;
		int n = st_batch_parse(p + pos, len - pos, &h);
		if (n <= 0)
			break;   /* not a whole batch: send only what is before it */
		if (pos + (uint32_t)n > allow && !(first && pos == 0))
			break;
		pos += (uint32_t)n;
		*next = h.base_offset + h.last_offset_delta + 1;
	}
	return pos;
}

/* Records cut before offset next: keep the aborted transactions that still overlap them. */
static void fetch_trim_aborted(struct FetchResponse_PartitionData *out, int64_t next)
{
	int32_t k = 0;
	for (int32_t i = 0; i < out->AbortedTransactions_n; i++)
		if (out->AbortedTransactions[i].FirstOffset < next)
			out->AbortedTransactions[k++] = out->AbortedTransactions[i];
	if (out->AbortedTransactions_n > 0)
		out->AbortedTransactions_n = k;
}

/* Offset after the last whole batch in p[0, len), -1 if none. */
static int64_t records_next(const uint8_t *p, uint32_t len)
{
	int64_t next;
	fetch_keep(p, len, len, false, &next);
	return next;
}

/*
 * Response-level MaxBytes as Kafka applies it (KIP-74): partitions in
 * request order, each allowed min(PartitionMaxBytes, what is left of
 * MaxBytes), whole batches only; the first batch of the first partition with
 * records goes whole even when it alone is larger. Cuts records (and their
 * aborted lists) to that. Returns a partition that has more below its end
 * and would get more than its owner was asked to read: its share of MaxBytes
 * went to partitions before it that came back with less, or it came back
 * empty, is the first with records and was not allowed its first batch whole
 * (*min_one). *allow: what it may have. -1 if none: then the answer is Kafka's.
 */
static int32_t fetch_limit_response(struct dp_req *r, uint32_t *allow_more, bool *min_one)
{
	uint32_t left = (uint32_t)r->max_bytes;
	int32_t starved = -1;
	bool first = true;
	for (uint32_t i = 0; i < r->nfparts; i++) {
		struct dp_fetch_part *fp = &r->fparts[i];
		struct FetchResponse_PartitionData *out = fp->out;
		struct kbytes *rec = &out->Records;
		if (out->ErrorCode || fp->owner < 0)
			continue;
		uint32_t allow = fp->part_max < left ? fp->part_max : left, len = (uint32_t)rec->len;
		if (len > allow) {
			int64_t next;
			uint32_t keep = fetch_keep(rec->ptr, len, allow, first, &next);
			fp->cut |= keep < len;
			len = keep;
			rec->len = (int32_t)len;
			if (len)
				fetch_trim_aborted(out, next);
			else if (out->AbortedTransactions_n > 0)
				out->AbortedTransactions_n = 0;
		} else if (starved < 0 && !fp->cut && (fp->max_bytes < allow || (first && !len && !fp->min_one)) &&
		           (len ? records_next(rec->ptr, len) : fp->offset) <
		                   (r->isolation == 1 ? out->LastStableOffset : out->HighWatermark)) {
			starved = (int32_t)i;
			*allow_more = allow;
			*min_one = first && !len;
		}
		if (len)
			first = false;
		left = len < left ? left - len : 0;
	}
	return starved;
}

/*
 * Read partition i again with `allow` bytes, its share of MaxBytes as Kafka
 * reads partitions one after the other. Returns true when the answer is
 * still to come, false when it came at once (a local owner): then the caller
 * looks at the response again.
 */
static bool fetch_topup(struct dp_core *c, struct dp_req *r, uint32_t i, uint32_t allow, bool min_one)
{
	struct dp_fetch_part *fp = &r->fparts[i];
	r->topups++;
	fp->max_bytes = allow;
	fp->min_one |= min_one;
	/* A buffer that came with the share stays; where the records found are
	 * larger, the owner asks for their size (need), so this lends no more than
	 * DP_FETCH_BUF_MIN_BYTES ahead of what is there. */
	uint32_t cap = fp->min_one || allow > DP_FETCH_BUF_MIN_BYTES ? DP_FETCH_BUF_MIN_BYTES : allow;
	if (!fp->buf && !fetch_buf(c, r, fp, fetch_cap(r, cap)))
		return false;   /* answered with a retriable error */
	fp->out->Records = (struct kbytes){ fp->buf, 0 };
	fp->out->AbortedTransactions_n = r->isolation == 1 ? 0 : -1;
	r->pending++;   /* held: a local owner answers inside fetch_send */
	fetch_send(c, r, i);
	return --r->pending > 0;
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
	/* Every ask is answered: a partition still refused for credit keeps its error (fetch_deferred). */
	for (uint32_t i = 0; r->deferred && i < r->nfparts; i++)
		r->fparts[i].deferred = false;
	r->deferred = 0;
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
		/* Partitions that MaxBytes leaves room for are read before MinBytes is
		 * judged: Kafka would have their bytes by now. */
		uint32_t allow;
		bool min_one;
		for (int32_t s; (s = fetch_limit_response(r, &allow, &min_one)) >= 0 && r->topups < DP_FETCH_TOPUPS_MAX;)
			if (fetch_topup(c, r, (uint32_t)s, allow, min_one)) {
				r->in_more = false;
				return true;
			}
		int64_t bytes = 0;
		bool error = false;
		for (uint32_t i = 0; i < r->nfparts; i++) {
			bytes += r->fparts[i].out->Records.len;
			error |= r->fparts[i].out->ErrorCode != KERR_NONE;
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
				/* Wake on what is new since this round's read, not on what it already
				 * read: a MinBytes that what is there cannot meet would otherwise wake,
				 * re-read and park again until MaxWaitMs, two cores busy all along. */
				int64_t end = r->isolation == 1 ? fp->out->LastStableOffset : fp->out->HighWatermark;
				m.u.watch.offset = end > fp->offset ? end : fp->offset;
				m.u.watch.deadline_ms = r->deadline_ms;
				m.u.watch.topic_gen = fp->gen;
				m.u.watch.isolation = r->isolation;
				/* Without credit toward the owner no watch: the fetch answers at
				 * its MaxWaitMs. A watch holds no credit itself (advisory). */
				if (dp_send_room(c, fp->owner, 1)) {
					m.flags = DP_F_ADVISORY;
					dp_ask(c, fp->owner, dp_shard_msg, dp_req_complete_part, &m);
				}
			}
			if (r->woken)
				continue;   /* a local owner had data already: another round */
			r->in_more = false;
			return true;
		}
		break;
	}
	/* The answer is due, and cut to Kafka's by the last fetch_limit_response. */
	r->in_more = false;
	r->final_round = true;
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
	if (!DP_RESP_ARRAY(r, resp, Topics, req->Topics_n))
		return -1;
	uint64_t by_time = 0;   /* lookups by time: they share DP_LIST_WORK_BYTES_MAX */
	for (int32_t i = 0; i < resp->Topics_n; i++)
		for (int32_t j = 0; j < req->Topics[i].Partitions_n; j++)
			by_time += req->Topics[i].Partitions[j].Timestamp >= 0;
	uint32_t work = by_time ? (uint32_t)(DP_LIST_WORK_BYTES_MAX / by_time) : 0;
	if (work > DP_LIST_PART_WORK_BYTES_MAX)
		work = DP_LIST_PART_WORK_BYTES_MAX;
	for (int32_t i = 0; i < resp->Topics_n; i++) {
		struct ListOffsetsRequest_ListOffsetsTopic *in = &req->Topics[i];
		struct ListOffsetsResponse_ListOffsetsTopicResponse *out = &resp->Topics[i];
		out->Name = in->Name;
		if (!DP_RESP_ARRAY(r, out, Partitions, in->Partitions_n))
			return -1;
		int32_t np = out->Partitions_n;
		int64_t *old = np ? dp_req_alloc(r, sizeof(int64_t) * (size_t)np) : NULL;   /* v0: one offset each */
		if (np && !old)
			return -1;
		int32_t id;
		struct dp_topic *t = dp_topic_named(c, in->Name, &id);
		for (int32_t j = 0; j < np; j++) {
			struct ListOffsetsRequest_ListOffsetsPartition *ip = &in->Partitions[j];
			struct ListOffsetsResponse_ListOffsetsPartitionResponse *op = &out->Partitions[j];
			op->PartitionIndex = ip->PartitionIndex;
			op->Timestamp = -1;
			op->Offset = -1;
			op->LeaderEpoch = -1;
			op->OldStyleOffsets = &old[j];
			op->OldStyleOffsets_n = 0;
			int owner;   /* no credit: retriable (dp_limits.h) */
			op->ErrorCode = dp_part_route(c, t, ip->PartitionIndex, KERR_LEADER_NOT_AVAILABLE, &owner);
			if (op->ErrorCode)
				continue;
			struct dp_msg m = dp_part_msg(r, DP_MSG_LIST, id, t, ip->PartitionIndex);
			m.u.list.timestamp = ip->Timestamp;
			m.u.list.isolation = req->IsolationLevel;
			m.u.list.work_max = work;
			m.u.list.out = op;
			dp_ask_part(c, r, owner, dp_shard_msg, &m);
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

/* ---- DeleteRecords ------------------------------------------------------------ */

/*
 * Each partition goes to its owner (DP_MSG_DELREC, shard_delete_records), which answers once the
 * new log start is durable. An internal topic is INVALID_TOPIC_EXCEPTION, as Kafka answers
 * (ReplicaManager.deleteRecordsOnLocalLog); partitions past DP_DELREC_PARTS_MAX in all are
 * INVALID_REQUEST.
 */
int dp_delete_records_start(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	int16_t v = r->hdr.api_version;
	struct DeleteRecordsRequest *req = dp_req_alloc(r, sizeof(*req));
	struct DeleteRecordsResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!req || !resp || DeleteRecordsRequest_decode(rd, v, req, &r->arena) < 0)
		return -1;
	DeleteRecordsResponse_init(resp);
	r->resp = resp;
	if (!DP_RESP_ARRAY(r, resp, Topics, req->Topics_n))
		return -1;
	uint32_t sent = 0;
	for (int32_t i = 0; i < resp->Topics_n; i++) {
		struct DeleteRecordsRequest_DeleteRecordsTopic *in = &req->Topics[i];
		struct DeleteRecordsResponse_DeleteRecordsTopicResult *out = &resp->Topics[i];
		DeleteRecordsResponse_DeleteRecordsTopicResult_init(out);
		out->Name = in->Name;
		if (!DP_RESP_ARRAY(r, out, Partitions, in->Partitions_n))
			return -1;
		int32_t id;
		struct dp_topic *t = dp_topic_named(c, in->Name, &id);
		bool internal = in->Name.len > 0 && dp_topic_internal(in->Name.ptr, (size_t)in->Name.len);
		for (int32_t j = 0; j < out->Partitions_n; j++) {
			struct DeleteRecordsRequest_DeleteRecordsPartition *ip = &in->Partitions[j];
			struct DeleteRecordsResponse_DeleteRecordsPartitionResult *op = &out->Partitions[j];
			DeleteRecordsResponse_DeleteRecordsPartitionResult_init(op);
			op->PartitionIndex = ip->PartitionIndex;
			op->LowWatermark = -1;
			if (internal) {
				op->ErrorCode = KERR_INVALID_TOPIC_EXCEPTION;
				continue;
			}
			if (++sent > DP_DELREC_PARTS_MAX) {
				op->ErrorCode = KERR_INVALID_REQUEST;
				continue;
			}
			int owner;   /* no credit: retriable (dp_limits.h) */
			op->ErrorCode = dp_part_route(c, t, ip->PartitionIndex, KERR_REQUEST_TIMED_OUT, &owner);
			if (op->ErrorCode)
				continue;
			struct dp_msg m = dp_part_msg(r, DP_MSG_DELREC, id, t, ip->PartitionIndex);
			m.u.delrec.offset = ip->Offset;
			m.u.delrec.out = op;
			dp_ask_part(c, r, owner, dp_shard_msg, &m);
		}
	}
	return 0;
}

void dp_delete_records_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m)
{
	(void)c;
	(void)r;
	struct DeleteRecordsResponse_DeleteRecordsPartitionResult *op = m->u.delrec_done.out;
	op->ErrorCode = m->err;
	op->LowWatermark = m->err ? -1 : m->u.delrec_done.low;
}
