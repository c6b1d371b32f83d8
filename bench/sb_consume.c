/*
 * sb_consume.c: sluice-bench's consumers. Each connection follows its share of
 * the partitions with Fetch v11 requests of up to --fetch-partitions idle
 * partitions each (default: all of them, one request outstanding; with
 * --fetch-partitions K, up to --inflight requests outstanding). A partition is in at most one request, since its next offset is
 * known only from the previous answer. Why all partitions in one request by
 * default: a connection's answers come back in order, so a long-polling fetch
 * of a quiet partition would hold back the answers queued behind it (up to
 * MaxWaitMs of false latency); one request with MinBytes 1 returns as soon as
 * any of its partitions has data, as Kafka's own clients fetch.
 * Answers are decoded with the generic codec (one decode per fetch, not per
 * record) and their batches walked in place: CRC
 * checked, control batches skipped, and with read_committed the batches of
 * aborted transactions skipped as Kafka's consumer does, from the answer's
 * AbortedTransactions list (README §6).
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "sb.h"
#include "sb_digest.h"

/* Partitions per fetch request on this consumer, and the request's MaxBytes. */
static int sb_cons_fetch_width(const struct sb_cons *cs)
{
	int k = cs->run->o->fetch_partitions;
	return k > 0 && k < cs->nparts ? k : cs->nparts;
}

/* One Fetch v11 for up to fetch-partitions idle partitions of this connection. */
static int sb_cons_send_fetch(struct sb_cons *cs, uint64_t now)
{
	static struct FetchRequest_FetchPartition parts[sb_partitions_max];
	struct sb_run *r = cs->run;
	const struct sb_opts *o = r->o;
	int width = sb_cons_fetch_width(cs), n = 0, start = cs->rr;
	for (int k = 0; k < cs->nparts && n < width; k++) {
		int at = (start + k) % cs->nparts;   /* rr moves below: walk from where this call began */
		struct sb_fpart *fp = &cs->parts[at];
		if (fp->busy)
			continue;
		FetchRequest_FetchPartition_init(&parts[n]);
		parts[n].Partition = fp->partition;
		parts[n].FetchOffset = fp->offset;
		parts[n].PartitionMaxBytes = o->fetch_bytes;
		n++;
		fp->busy = true;
		cs->rr = (at + 1) % cs->nparts;
	}
	if (n == 0)
		return 0;
	struct FetchRequest req;
	struct FetchRequest_FetchTopic t;
	FetchRequest_init(&req);
	FetchRequest_FetchTopic_init(&t);
	t.Topic = (struct kstr){ o->topic, (int32_t)strlen(o->topic) };
	t.Partitions_n = n;
	t.Partitions = parts;
	req.ReplicaId = -1;
	req.MaxWaitMs = o->fetch_wait_ms;
	req.MinBytes = 1;   /* answer as soon as any partition has data: no idle wait behind a quiet one */
	req.MaxBytes = sb_fetch_max_bytes(o, n);
	req.IsolationLevel = o->isolation;
	req.SessionId = 0;
	req.SessionEpoch = -1;   /* no fetch session: every fetch is a full one */
	req.Topics_n = 1;
	req.Topics = &t;
	req.ForgottenTopicsData_n = 0;
	req.RackId = (struct kstr){ "", 0 };
	struct sb_conn *c = cs->conn;
	int rc = sb_conn_put_msg(c, KAPI_FETCH, SB_V_FETCH, &kschema_FetchRequest, &req, SB_REQ_FETCH, cs, now);
	if (rc) {
		fprintf(stderr, "sluice-bench: connection %d: cannot queue a fetch (%d)\n", c->id, rc);
		return rc;
	}
	c->q[(c->qhead + c->qlen - 1) % c->qcap].fpart = n;
	cs->inflight++;
	return 0;
}

int sb_conss_pump(struct sb_run *r, uint64_t now)
{
	if (r->cons_stopping)
		return 0;
	/*
	 * With all partitions in one request (the default), only one is ever
	 * outstanding: a second one, for the partitions the first has already
	 * answered, would queue its answer behind the first's long poll.
	 */
	uint32_t window = r->o->fetch_partitions > 0 ? (uint32_t)r->o->inflight : 1;
	for (int i = 0; i < r->nconss; i++) {
		struct sb_cons *cs = &r->conss[i];
		uint32_t before = ~0u;
		while (cs->inflight < window && cs->inflight != before) {
			before = cs->inflight;
			int rc = sb_cons_send_fetch(cs, now);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Records of one uncompressed data batch at or after offset `from`. */
static int sb_cons_records(struct sb_cons *cs, const struct sb_fpart *fp, const uint8_t *bat, size_t len,
			   const struct st_batch_hdr *h, int64_t from, uint64_t now, uint64_t *n_out, uint64_t *bytes_out)
{
	struct sb_run *r = cs->run;
	const struct sb_opts *o = r->o;
	struct st_record_iter it;
	int rc = st_record_iter_init(&it, bat, len, h);
	if (rc == -ENOTSUP) {
		/* Not ours (the bench never compresses): count it, but no digest, no byte count. */
		if (!r->warned_compressed)
			fprintf(stderr, "sluice-bench: warning: compressed batches (%s) are counted, not digested\n",
				st_batch_codec_name(h->attributes));
		r->warned_compressed = true;
		r->read_all += (uint64_t)h->records_count;
		*n_out += (uint64_t)h->records_count;
		return 0;
	}
	uint64_t now_us = now / 1000u, t_measure_us = r->t_measure / 1000u;
	struct st_record rec;
	while ((rc = st_record_next(&it, &rec)) == 1) {
		if (h->base_offset + rec.offset_delta < from)
			continue;
		if (o->count && r->read_all >= o->count) {
			r->read_extra++;
			continue;
		}
		r->read_all++;
		r->checksum += sb_digest_record(fp->partition, rec.key, rec.key_len, rec.value, rec.value_len);
		uint64_t vbytes = rec.value_len > 0 ? (uint64_t)rec.value_len : 0;
		if (o->workload != SB_WL_E2E) {
			*n_out += 1;
			*bytes_out += vbytes;
			continue;
		}
		/* e2e: the value starts with its intended send time, this process's clock. */
		uint64_t stamp_us = rec.value_len >= sb_stamp_bytes ? st_be64(rec.value) : 0;
		if (stamp_us >= t_measure_us && stamp_us <= now_us)
			sb_fig_records(r, 1, vbytes, now_us - stamp_us, 1, now);
	}
	if (rc < 0) {
		fprintf(stderr, "sluice-bench: malformed record in %s-%d at offset %lld\n", o->topic, fp->partition,
			(long long)h->base_offset);
		return -EPROTO;
	}
	return 0;
}

static int sb_cmp_first_offset(const void *a, const void *b)
{
	int64_t x = ((const struct FetchResponse_AbortedTransaction *)a)->FirstOffset;
	int64_t y = ((const struct FetchResponse_AbortedTransaction *)b)->FirstOffset;
	return x < y ? -1 : x > y;
}

/* Walks the batches of one partition's answer and advances its offset past them. */
static int sb_cons_batches(struct sb_cons *cs, struct sb_fpart *fp, const struct FetchResponse_PartitionData *pd,
			   uint64_t now)
{
	static struct FetchResponse_AbortedTransaction ab[sb_aborted_max];
	static int64_t active[sb_aborted_max];  /* producers inside an aborted transaction here */
	struct sb_run *r = cs->run;
	const struct sb_opts *o = r->o;
	int nab = 0, nact = 0, ai = 0;
	if (o->isolation && pd->AbortedTransactions_n > 0) {
		if (pd->AbortedTransactions_n > sb_aborted_max) {
			fprintf(stderr, "sluice-bench: %s-%d: %d aborted transactions in one answer (limit %d)\n", o->topic,
				fp->partition, pd->AbortedTransactions_n, sb_aborted_max);
			return -E2BIG;
		}
		nab = pd->AbortedTransactions_n;
		memcpy(ab, pd->AbortedTransactions, (size_t)nab * sizeof ab[0]);
		qsort(ab, (size_t)nab, sizeof ab[0], sb_cmp_first_offset);
	}
	const uint8_t *p = pd->Records.ptr;
	size_t left = pd->Records.len > 0 ? (size_t)pd->Records.len : 0;
	uint64_t n = 0, bytes = 0;
	bool progress = false;
	while (left > 0) {
		struct st_batch_hdr h;
		int len = st_batch_parse(p, left, &h);
		if (len == -EAGAIN)
			break; /* the answer may end inside a batch */
		if (len < 0 || !st_batch_crc_ok(p, (size_t)len)) {
			fprintf(stderr, "sluice-bench: %s-%d: %s batch at offset %lld\n", o->topic, fp->partition,
				len < 0 ? "malformed" : "CRC mismatch in", (long long)h.base_offset);
			return -EPROTO;
		}
		int64_t last = h.base_offset + h.last_offset_delta;
		if (last >= fp->offset) {
			while (ai < nab && ab[ai].FirstOffset <= last) {
				int j = 0;
				while (j < nact && active[j] != ab[ai].ProducerId)
					j++;
				if (j == nact)
					active[nact++] = ab[ai].ProducerId;
				ai++;
			}
			int at = 0;
			while (at < nact && active[at] != h.producer_id)
				at++;
			if (h.attributes & ST_BATCH_ATTR_CONTROL) {
				if (at < nact) /* its marker: the aborted transaction ends here */
					active[at] = active[--nact];
			} else if (o->isolation && (h.attributes & ST_BATCH_ATTR_TRANSACTIONAL) && at < nact) {
				r->aborted_skipped += (uint64_t)h.records_count;
			} else {
				int rc = sb_cons_records(cs, fp, p, (size_t)len, &h, fp->offset, now, &n, &bytes);
				if (rc)
					return rc;
			}
			fp->offset = last + 1;
		}
		progress = true;
		p += len;
		left -= (size_t)len;
	}
	if (!progress && left > 0) {
		fprintf(stderr, "sluice-bench: %s-%d: the batch at offset %lld does not fit --fetch-bytes %d\n", o->topic,
			fp->partition, (long long)fp->offset, o->fetch_bytes);
		return -EMSGSIZE;
	}
	if (n && o->workload != SB_WL_E2E && now >= r->t_measure)
		sb_fig_records(r, n, bytes, 0, 0, now);
	return 0;
}

/* One partition's part of a fetch answer. */
static int sb_cons_partition(struct sb_cons *cs, const struct FetchResponse_PartitionData *pd, uint64_t now)
{
	struct sb_run *r = cs->run;
	const struct sb_opts *o = r->o;
	/* Connection i follows partitions i, i + n, i + 2n, ... (sb_setup.c). */
	int k = pd->PartitionIndex >= 0 ? pd->PartitionIndex / r->nconss : -1;
	struct sb_fpart *fp = k >= 0 && k < cs->nparts ? &cs->parts[k] : NULL;
	if (!fp || fp->partition != pd->PartitionIndex || !fp->busy) {
		fprintf(stderr, "sluice-bench: fetch answer for %s-%d, which was not asked for\n", o->topic,
			pd->PartitionIndex);
		return -EPROTO;
	}
	fp->busy = false;
	if (pd->ErrorCode == KERR_OFFSET_OUT_OF_RANGE && pd->LogStartOffset > fp->offset) {
		/* From the earliest offset still there (retention may have moved it past 0). */
		fprintf(stderr, "# %s-%d: starting at the log start offset %lld\n", o->topic, fp->partition,
			(long long)pd->LogStartOffset);
		fp->offset = pd->LogStartOffset;
		return 0;
	}
	if (pd->ErrorCode) {
		fprintf(stderr, "sluice-bench: fetch %s-%d at offset %lld: error %d (%s), log start %lld, high watermark %lld\n",
			o->topic, fp->partition, (long long)fp->offset, pd->ErrorCode, sb_err_name(pd->ErrorCode),
			(long long)pd->LogStartOffset, (long long)pd->HighWatermark);
		return -EIO;
	}
	fp->high_watermark = pd->HighWatermark;
	fp->last_stable = pd->LastStableOffset;
	return sb_cons_batches(cs, fp, pd, now);
}

int sb_cons_on_answer(struct sb_cons *cs, const struct sb_req *q, struct kreader *body, uint64_t now)
{
	struct sb_run *r = cs->run;
	const struct sb_opts *o = r->o;
	assert(q->kind == SB_REQ_FETCH && q->fpart > 0 && cs->inflight > 0);
	struct FetchResponse resp;
	karena_reset(&r->arena);
	int rc = FetchResponse_decode(body, SB_V_FETCH, &resp, &r->arena);
	if (rc || body->err || kr_left(body) || resp.ErrorCode) {
		fprintf(stderr, "sluice-bench: %s FetchResponse v%d on connection %d (error %d)\n",
			resp.ErrorCode ? "failed" : "malformed", SB_V_FETCH, cs->conn->id, rc ? rc : resp.ErrorCode);
		return rc || body->err || kr_left(body) ? -EPROTO : -EIO;
	}
	cs->inflight--;
	int answered = 0;
	uint64_t before = r->read_all;
	for (int32_t t = 0; t < resp.Responses_n; t++) {
		const struct FetchResponse_FetchableTopicResponse *tr = &resp.Responses[t];
		if (!sb_kstr_eq(tr->Topic, o->topic, strlen(o->topic))) {
			fprintf(stderr, "sluice-bench: fetch answer for topic %.*s, not asked for\n", tr->Topic.len > 0 ?
				tr->Topic.len : 0, tr->Topic.ptr);
			return -EPROTO;
		}
		for (int32_t i = 0; i < tr->Partitions_n; i++, answered++)
			if ((rc = sb_cons_partition(cs, &tr->Partitions[i], now)))
				return rc;
	}
	/* A full (sessionless) fetch answers every partition it asked for. */
	if (answered != q->fpart) {
		fprintf(stderr, "sluice-bench: a fetch of %d partitions was answered for %d\n", q->fpart, answered);
		return -EPROTO;
	}
	/* consume: a latency sample is a fetch round trip that brought records. */
	if (r->read_all > before && o->workload != SB_WL_E2E && now >= r->t_measure)
		sb_fig_records(r, 0, 0, (now - q->sent_ns) / 1000u, 1, now);
	return 0;
}

bool sb_conss_idle(const struct sb_run *r)
{
	for (int i = 0; i < r->nconss; i++)
		if (r->conss[i].inflight)
			return false;
	return true;
}
