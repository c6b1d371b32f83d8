/*
 * sb_produce.c: sluice-bench's producers. Produce requests are encoded by hand
 * into the connection's send buffer: a few header fields, then a copy of the
 * one pre-built record batch, patched (producer id, epoch, base sequence,
 * timestamps, and the 24-byte stamp and key of each record), then its CRC.
 * Each batch's content is a pure function of (producer, slot, counter, count,
 * time), which is what struct sb_batch keeps, so a retry rebuilds the very
 * same bytes without the bench holding on to any of them.
 *
 * Record value layout (the rest is a fixed filler of letters):
 *
 *   offset size field
 *        0    8 intended send time, us, CLOCK_MONOTONIC of this process (e2e latency)
 *        8    4 partition
 *       12    4 producer (connection) index
 *       16    8 counter of the record on this (producer, partition)
 *
 * so every value the run writes is distinct, and the digest of sb_digest.h
 * sees a lost, doubled or damaged record.
 *
 * Transactions (--mode transactional), per producer:
 *   IDLE -> AddPartitionsToTxn -> ADDING -> OPEN (batches) -> all answered ->
 *   EndTxn -> ENDING -> IDLE ..., and DONE once the run stops.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "crc32c.h"
#include "sb.h"
#include "sb_digest.h"

static const char sb_client_id[] = "sluice-bench";

static int sb_digits(uint64_t v)
{
	int d = 1;
	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

int sb_tpl_init(struct sb_run *r)
{
	const struct sb_opts *o = r->o;
	struct sb_tpl *t = &r->tpl;
	t->n = (uint32_t)o->batch_records;
	t->key_len = o->keys == SB_KEYS_NONE ? 0 : (uint32_t)sb_digits(o->key_count - 1);
	t->key_gap = (uint32_t)kw_varint_size(o->size) + t->key_len;
	t->attributes = o->mode == SB_MODE_TRANSACTIONAL ? ST_BATCH_ATTR_TRANSACTIONAL : 0;
	int32_t key_field = o->keys == SB_KEYS_NONE ? -1 : (int32_t)t->key_len;
	uint64_t total = ST_BATCH_HEADER_BYTES;
	for (uint32_t i = 0; i < t->n; i++) {
		uint64_t body = 1 + 1 + kw_varint_size((int32_t)i) + kw_varint_size(key_field) + t->key_len +
				kw_varint_size(o->size) + (uint64_t)o->size + 1;
		total += kw_varint_size((int32_t)body) + body;
	}
	if (total > sb_batch_bytes_max) {
		fprintf(stderr, "sluice-bench: a batch of %u records of %d bytes is %llu bytes, above the %d-byte limit\n",
			t->n, o->size, (unsigned long long)total, sb_batch_bytes_max);
		return -E2BIG;
	}
	t->buf = calloc(1, total);
	t->rec_end = calloc(t->n + 1, sizeof *t->rec_end);
	t->val_off = calloc(t->n, sizeof *t->val_off);
	if (!t->buf || !t->rec_end || !t->val_off)
		return -ENOMEM;

	uint8_t *b = t->buf;
	st_put_be64(b + ST_BATCH_OFF_BASE_OFFSET, 0);
	st_put_be32(b + ST_BATCH_OFF_LEADER_EPOCH, (uint32_t)-1);
	b[ST_BATCH_OFF_MAGIC] = ST_BATCH_MAGIC;
	st_put_be16(b + ST_BATCH_OFF_ATTRIBUTES, (uint16_t)t->attributes);
	uint8_t *p = b + ST_BATCH_HEADER_BYTES;
	t->rec_end[0] = ST_BATCH_HEADER_BYTES;
	uint64_t x = 0x9e3779b97f4a7c15u;
	for (uint32_t i = 0; i < t->n; i++) {
		int32_t body = 1 + 1 + (int32_t)kw_varint_size((int32_t)i) + (int32_t)kw_varint_size(key_field) +
			       (int32_t)t->key_len + (int32_t)kw_varint_size(o->size) + o->size + 1;
		p += st_varint_put(p, body);
		uint8_t *start = p;
		*p++ = 0;                              /* attributes */
		p += st_varint_put(p, 0);              /* timestamp delta: one time per batch */
		p += st_varint_put(p, i);              /* offset delta */
		p += st_varint_put(p, key_field);
		memset(p, '0', t->key_len);
		p += t->key_len;
		p += st_varint_put(p, o->size);
		t->val_off[i] = (uint32_t)(p - b);
		for (int k = 0; k < o->size; k++) {    /* letters, as Kafka's tool: no compression is set */
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			p[k] = (uint8_t)('A' + x % 26);
		}
		p += o->size;
		p += st_varint_put(p, 0);              /* headers */
		assert(p - start == body);
		t->rec_end[i + 1] = (uint32_t)(p - b);
	}
	assert((uint64_t)(p - b) == total);
	return 0;
}

/* Key index of a record: a function of the record alone, so that a retry rebuilds it. */
static uint64_t sb_key_index(const struct sb_opts *o, const struct sb_prod *p, int32_t partition, uint64_t counter)
{
	if (o->keys == SB_KEYS_SEQ)
		return counter % o->key_count;
	uint64_t z = o->seed ^ ((uint64_t)p->idx << 48) ^ ((uint64_t)(uint32_t)partition << 32) ^
		     (counter * 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u; /* splitmix64's finaliser */
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return (z ^ (z >> 31)) % o->key_count;
}

static void sb_key_put(uint8_t *k, uint32_t len, uint64_t v)
{
	for (uint32_t i = len; i-- > 0; v /= 10)
		k[i] = (uint8_t)('0' + v % 10);
}

/* Patches a copy of the first b->count template records for this send; returns the records' digest. */
static uint64_t sb_batch_fill(const struct sb_prod *p, const struct sb_slot *s, const struct sb_batch *b,
			      uint8_t *bat, uint32_t blen)
{
	const struct sb_run *r = p->run;
	const struct sb_tpl *t = &r->tpl;
	st_put_be32(bat + ST_BATCH_OFF_LENGTH, blen - 12);
	st_put_be32(bat + ST_BATCH_OFF_LAST_OFFSET_DELTA, b->count - 1);
	st_put_be64(bat + ST_BATCH_OFF_FIRST_TIMESTAMP, (uint64_t)b->ts_ms);
	st_put_be64(bat + ST_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)b->ts_ms);
	st_put_be64(bat + ST_BATCH_OFF_PRODUCER_ID, (uint64_t)p->pid);
	st_put_be16(bat + ST_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)p->epoch);
	st_put_be32(bat + ST_BATCH_OFF_BASE_SEQUENCE, (uint32_t)b->seq);
	st_put_be32(bat + ST_BATCH_OFF_RECORDS_COUNT, b->count);
	uint64_t ts_us = b->intended_ns / 1000u, digest = 0;
	int32_t key_len = t->key_len ? (int32_t)t->key_len : -1;
	for (uint32_t i = 0; i < b->count; i++) {
		uint8_t *v = bat + t->val_off[i];
		uint8_t *k = t->key_len ? v - t->key_gap : NULL;
		st_put_be64(v, ts_us);
		st_put_be32(v + 8, (uint32_t)s->partition);
		st_put_be32(v + 12, (uint32_t)p->idx);
		st_put_be64(v + 16, b->counter + i);
		if (k)
			sb_key_put(k, t->key_len, sb_key_index(r->o, p, s->partition, b->counter + i));
		digest += sb_digest_record(s->partition, k, key_len, v, r->o->size);
	}
	st_put_be32(bat + ST_BATCH_OFF_CRC, crc32c(0, bat + ST_BATCH_OFF_ATTRIBUTES, blen - ST_BATCH_OFF_ATTRIBUTES));
	return digest;
}

/* Appends one ProduceRequest v7 carrying batch b to the connection; the batch gets its send number. */
static int sb_prod_emit(struct sb_prod *p, const struct sb_batch *b, bool fresh, uint64_t now)
{
	struct sb_run *r = p->run;
	const struct sb_opts *o = r->o;
	struct sb_slot *s = &p->slots[b->slot];
	struct sb_conn *c = p->conn;
	assert(b->count >= 1 && b->count <= r->tpl.n);
	assert((b->seq < 0) == (p->pid < 0));
	uint32_t blen = r->tpl.rec_end[b->count];
	size_t need = 64 + sizeof sb_client_id + strlen(p->txn_id) + strlen(o->topic) + blen;
	uint8_t *at = c->qlen < c->qcap ? sb_conn_reserve(c, need) : NULL;
	if (!at) {
		fprintf(stderr, "sluice-bench: connection %d: send buffer or queue full (a bug in the window sizing)\n",
			c->id);
		return -ENOBUFS;
	}
	struct kwriter w;
	kw_init(&w, at, need);
	int32_t corr = c->next_corr++;
	kw_i32(&w, 0);                                     /* size, below */
	kw_i16(&w, KAPI_PRODUCE);
	kw_i16(&w, SB_V_PRODUCE);
	kw_i32(&w, corr);
	kw_string(&w, (struct kstr){ sb_client_id, sizeof sb_client_id - 1 });
	kw_string(&w, p->txn_id[0] ? (struct kstr){ p->txn_id, (int32_t)strlen(p->txn_id) } : (struct kstr){ NULL, -1 });
	kw_i16(&w, o->acks);
	kw_i32(&w, sb_produce_timeout_ms);
	kw_array_len(&w, 1);                               /* topics */
	kw_string(&w, (struct kstr){ o->topic, (int32_t)strlen(o->topic) });
	kw_array_len(&w, 1);                               /* partitions */
	kw_i32(&w, s->partition);
	kw_i32(&w, (int32_t)blen);                         /* records: one batch */
	uint8_t *bat = kw_reserve(&w, blen);
	assert(bat && !w.err);
	memcpy(bat, r->tpl.buf, blen);
	uint64_t digest = sb_batch_fill(p, s, b, bat, blen);
	assert((fresh || digest == b->digest) && "a retry carries the very same records");
	kw_put_i32(at, (int32_t)(kw_len(&w) - 4));

	struct sb_req q = { .kind = SB_REQ_PRODUCE, .expects_response = o->acks != 0, .api_key = KAPI_PRODUCE,
			    .api_version = SB_V_PRODUCE, .corr = corr, .sent_ns = now, .owner = p, .b = *b };
	q.b.digest = digest;
	q.b.no = s->next_no++;
	q.b.attempts = b->attempts + 1;
	sb_conn_commit(c, kw_len(&w), &q);
	p->inflight++;
	s->inflight++;
	return 0;
}

static bool sb_slot_blocked(const struct sb_slot *s)
{
	return s->resend_len > 0 || s->answered_no < s->doomed_below;
}

/*
 * Slot of the next new batch, or -1 if it must wait: round robin over the slots
 * that are not resending (one slot's retry back-off does not stall the others),
 * or, in a transaction, the transaction's own slots in turn.
 */
static int sb_prod_next_slot(const struct sb_prod *p)
{
	if (p->run->o->mode == SB_MODE_TRANSACTIONAL) {
		int si = (p->txn_first + p->txn_batches % p->txn_nslots) % p->nslots;
		return sb_slot_blocked(&p->slots[si]) ? -1 : si;
	}
	for (int k = 0; k < p->nslots; k++) {
		int si = (p->rr + k) % p->nslots;
		if (!sb_slot_blocked(&p->slots[si]))
			return si;
	}
	return -1;
}

static bool sb_prod_can_issue(const struct sb_prod *p)
{
	const struct sb_run *r = p->run;
	const struct sb_opts *o = r->o;
	if (r->stopping || p->inflight >= (uint32_t)o->inflight || (o->count && r->issued >= o->count))
		return false;
	if (o->mode == SB_MODE_TRANSACTIONAL && (p->txn != SB_TXN_OPEN || p->txn_left == 0))
		return false;
	return sb_prod_next_slot(p) >= 0;
}

static int sb_prod_new_batch(struct sb_prod *p, uint64_t intended_ns, uint64_t now)
{
	struct sb_run *r = p->run;
	const struct sb_opts *o = r->o;
	int si = sb_prod_next_slot(p);
	assert(si >= 0 && "sb_prod_can_issue said yes");
	struct sb_slot *s = &p->slots[si];
	uint64_t k = (uint64_t)o->batch_records;
	if (o->mode == SB_MODE_TRANSACTIONAL && p->txn_left < k)
		k = p->txn_left;
	if (o->count && o->count - r->issued < k)
		k = o->count - r->issued;
	assert(k > 0);
	struct sb_batch b = { .slot = (uint32_t)si, .count = (uint32_t)k, .seq = p->pid >= 0 ? s->next_seq : -1,
			      .counter = s->next_counter, .intended_ns = intended_ns, .ts_ms = sb_wall_ms() };
	/* Sequences wrap from INT32_MAX to 0 (README §3.1). */
	s->next_seq = (int32_t)(((uint32_t)s->next_seq + (uint32_t)k) & 0x7fffffffu);
	s->next_counter += k;
	r->issued += k;
	r->sched_records += k;
	if (o->mode == SB_MODE_TRANSACTIONAL) {
		p->txn_left -= k;
		p->txn_batches++;
	} else {
		p->rr = (si + 1) % p->nslots;
	}
	return sb_prod_emit(p, &b, true, now);
}

static bool sb_prod_resends(const struct sb_prod *p)
{
	for (int i = 0; i < p->nslots; i++)
		if (p->slots[i].resend_len)
			return true;
	return false;
}

/* Resends, in their order, the batches that failed with a retriable error (after a back-off). */
static int sb_prod_resend(struct sb_prod *p, uint64_t now)
{
	for (int i = 0; i < p->nslots; i++) {
		struct sb_slot *s = &p->slots[i];
		if (!s->resend_len)
			continue;
		if (now < s->resend_at_ns) {
			sb_wake_at(p->run, s->resend_at_ns);
			continue;
		}
		while (s->resend_len && p->inflight < (uint32_t)p->run->o->inflight) {
			struct sb_batch b = s->resend[s->resend_head];
			s->resend_head = (s->resend_head + 1) % (uint32_t)p->run->o->inflight;
			s->resend_len--;
			int rc = sb_prod_emit(p, &b, false, now);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static void sb_prod_acked(struct sb_prod *p, const struct sb_batch *b, uint64_t now)
{
	struct sb_run *r = p->run;
	r->acked_all += b->count;
	if (r->o->mode == SB_MODE_TRANSACTIONAL) {
		/* Counted once the transaction commits: an aborted one is invisible to read_committed. */
		p->txn_acked += b->count;
		p->txn_digest += b->digest;
	} else {
		r->committed_all += b->count;
		r->checksum += b->digest;
	}
	/* e2e: the figures are the consumer's. */
	if (b->intended_ns >= r->t_measure && r->o->workload == SB_WL_PRODUCE)
		sb_fig_records(r, b->count, (uint64_t)b->count * (uint64_t)r->o->size,
			       now > b->intended_ns ? (now - b->intended_ns) / 1000u : 0, b->count, now);
}

void sb_prod_reap_written(struct sb_prod *p, uint64_t now)
{
	struct sb_req q;
	while (sb_conn_written(p->conn, &q)) {
		assert(q.kind == SB_REQ_PRODUCE && q.owner == p);
		assert(p->inflight > 0 && p->slots[q.b.slot].inflight > 0);
		p->inflight--;
		p->slots[q.b.slot].inflight--;
		sb_prod_acked(p, &q.b, now);
	}
}

static bool sb_produce_retriable(int16_t ec)
{
	return ec == KERR_REQUEST_TIMED_OUT || ec == KERR_NOT_ENOUGH_REPLICAS ||
	       ec == KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND || ec == KERR_NETWORK_EXCEPTION ||
	       ec == KERR_LEADER_NOT_AVAILABLE || ec == KERR_UNKNOWN_TOPIC_OR_PARTITION ||
	       ec == KERR_KAFKA_STORAGE_ERROR;
}

/* ProduceResponse v7 for one topic and one partition: the partition's error code. */
static int sb_produce_parse(const struct sb_run *r, struct kreader *rd, int32_t partition, int16_t *ec)
{
	const char *topic = r->o->topic;
	bool ok = kr_i32(rd) == 1;
	ok = sb_kstr_eq(kr_string(rd), topic, strlen(topic)) && ok;
	ok = kr_i32(rd) == 1 && ok;
	ok = kr_i32(rd) == partition && ok;
	*ec = kr_i16(rd);
	(void)kr_i64(rd); /* base offset */
	(void)kr_i64(rd); /* log append time */
	(void)kr_i64(rd); /* log start offset */
	(void)kr_i32(rd); /* throttle time */
	return ok && !rd->err && kr_left(rd) == 0 ? 0 : -EPROTO;
}

static int sb_prod_on_produce(struct sb_prod *p, const struct sb_req *q, struct kreader *rd, uint64_t now)
{
	struct sb_run *r = p->run;
	struct sb_slot *s = &p->slots[q->b.slot];
	int16_t ec = 0;
	if (sb_produce_parse(r, rd, s->partition, &ec)) {
		fprintf(stderr, "sluice-bench: malformed ProduceResponse v%d for %s-%d on connection %d\n", SB_V_PRODUCE,
			r->o->topic, s->partition, p->conn->id);
		return -EPROTO;
	}
	assert(p->inflight > 0 && s->inflight > 0);
	assert(q->b.no >= s->answered_no && "a connection answers in order");
	p->inflight--;
	s->inflight--;
	s->answered_no = q->b.no + 1;
	/* DUPLICATE_SEQUENCE_NUMBER: older brokers' answer to a retry of a batch they have. */
	if (ec == KERR_NONE || ec == KERR_DUPLICATE_SEQUENCE_NUMBER) {
		sb_prod_acked(p, &q->b, now);
		return 0;
	}
	bool doomed = q->b.no < s->doomed_below;
	bool expected = ec == KERR_OUT_OF_ORDER_SEQUENCE_NUMBER && doomed && p->pid >= 0;
	if (sb_produce_retriable(ec) || expected) {
		if (q->b.attempts > sb_retries_max) {
			fprintf(stderr, "sluice-bench: produce to %s-%d: error %d (%s) after %u sends of the batch; giving up\n",
				r->o->topic, s->partition, ec, sb_err_name(ec), q->b.attempts);
			return -EIO;
		}
		if (!expected) {
			sb_fig_error(r);
			if (++r->retries_said <= sb_retries_said_max)
				fprintf(stderr, "# produce to %s-%d: retriable error %d (%s), resending base sequence %d%s\n",
					r->o->topic, s->partition, ec, sb_err_name(ec), q->b.seq,
					r->retries_said == sb_retries_said_max ? " (no more of these messages)" : "");
			/* Every batch of this slot sent after it will be refused as out of order. */
			if (s->doomed_below < s->next_no)
				s->doomed_below = s->next_no;
		}
		if (s->resend_len == 0)
			s->resend_at_ns = now + (uint64_t)sb_retry_backoff_ms * 1000000u;
		assert(s->resend_len < (uint32_t)r->o->inflight);
		s->resend[(s->resend_head + s->resend_len++) % (uint32_t)r->o->inflight] = q->b;
		return 0;
	}
	fprintf(stderr, "sluice-bench: produce to %s-%d failed: error %d (%s); producer id %lld epoch %d, "
		"base sequence %d, %u records, connection %d\n", r->o->topic, s->partition, ec, sb_err_name(ec),
		(long long)p->pid, p->epoch, q->b.seq, q->b.count, p->conn->id);
	return -EIO;
}

/* ---- transactions ---------------------------------------------------------------------- */

static int sb_txn_send_add(struct sb_prod *p, uint64_t now)
{
	static int32_t parts[sb_partitions_max];
	struct sb_run *r = p->run;
	struct AddPartitionsToTxnRequest req;
	struct AddPartitionsToTxnRequest_AddPartitionsToTxnTopic t;
	AddPartitionsToTxnRequest_init(&req);
	AddPartitionsToTxnRequest_AddPartitionsToTxnTopic_init(&t);
	for (int i = 0; i < p->txn_nslots; i++)
		parts[i] = p->slots[(p->txn_first + i) % p->nslots].partition;
	t.Name = (struct kstr){ r->o->topic, (int32_t)strlen(r->o->topic) };
	t.Partitions_n = p->txn_nslots;
	t.Partitions = parts;
	req.Transactions_n = 0;
	req.V3AndBelowTransactionalId = (struct kstr){ p->txn_id, (int32_t)strlen(p->txn_id) };
	req.V3AndBelowProducerId = p->pid;
	req.V3AndBelowProducerEpoch = p->epoch;
	req.V3AndBelowTopics_n = 1;
	req.V3AndBelowTopics = &t;
	p->txn = SB_TXN_ADDING;
	return sb_conn_put_msg(p->coord, KAPI_ADD_PARTITIONS_TO_TXN, SB_V_ADD_PARTITIONS,
			       &kschema_AddPartitionsToTxnRequest, &req, SB_REQ_ADD_PARTITIONS, p, now);
}

static int sb_txn_send_end(struct sb_prod *p, uint64_t now)
{
	struct EndTxnRequest req;
	EndTxnRequest_init(&req);
	req.TransactionalId = (struct kstr){ p->txn_id, (int32_t)strlen(p->txn_id) };
	req.ProducerId = p->pid;
	req.ProducerEpoch = p->epoch;
	req.Committed = !p->txn_abort;
	p->txn = SB_TXN_ENDING;
	p->end_sent_ns = now;
	return sb_conn_put_msg(p->coord, KAPI_END_TXN, SB_V_END_TXN, &kschema_EndTxnRequest, &req, SB_REQ_END_TXN, p,
			       now);
}

/* Opens the next transaction: its slots are the next ones in round robin, as many as it has batches. */
static int sb_txn_begin(struct sb_prod *p, uint64_t now)
{
	const struct sb_opts *o = p->run->o;
	uint64_t batches = (o->txn_records + (uint64_t)o->batch_records - 1) / (uint64_t)o->batch_records;
	p->txn_no++;
	p->txn_left = o->txn_records;
	p->txn_batches = 0;
	p->txn_first = p->rr;
	p->txn_nslots = batches < (uint64_t)p->nslots ? (int)batches : p->nslots;
	p->rr = (p->rr + p->txn_nslots) % p->nslots;
	p->txn_abort = o->abort_every && p->txn_no % o->abort_every == 0;
	p->txn_retries = 0;
	p->add_first_ns = now;
	return sb_txn_send_add(p, now);
}

/* A coordinator error that asks to try again; others end the run. */
static int sb_txn_retry_or_fail(struct sb_prod *p, const char *what, int16_t ec, uint64_t now)
{
	if ((ec == KERR_CONCURRENT_TRANSACTIONS || ec == KERR_COORDINATOR_LOAD_IN_PROGRESS ||
	     ec == KERR_COORDINATOR_NOT_AVAILABLE || ec == KERR_NOT_COORDINATOR) && ++p->txn_retries <= sb_coord_retry_max) {
		p->txn_retry_at_ns = now + (uint64_t)sb_coord_retry_ms * 1000000u;
		sb_fig_coord_retry(p->run);
		return 0;
	}
	fprintf(stderr, "sluice-bench: %s for %s (producer id %lld epoch %d, transaction %llu): error %d (%s)\n", what,
		p->txn_id, (long long)p->pid, p->epoch, (unsigned long long)p->txn_no, ec, sb_err_name(ec));
	return -EIO;
}

static int sb_txn_on_add(struct sb_prod *p, struct kreader *rd, uint64_t now)
{
	struct sb_run *r = p->run;
	struct AddPartitionsToTxnResponse resp;
	karena_reset(&r->arena);
	int rc = AddPartitionsToTxnResponse_decode(rd, SB_V_ADD_PARTITIONS, &resp, &r->arena);
	if (rc || rd->err || kr_left(rd)) {
		fprintf(stderr, "sluice-bench: malformed AddPartitionsToTxnResponse for %s\n", p->txn_id);
		return -EPROTO;
	}
	assert(p->txn == SB_TXN_ADDING);
	int answered = 0;
	int16_t ec = 0;
	for (int32_t i = 0; i < resp.ResultsByTopicV3AndBelow_n; i++)
		for (int32_t k = 0; k < resp.ResultsByTopicV3AndBelow[i].ResultsByPartition_n; k++, answered++)
			if (!ec)
				ec = resp.ResultsByTopicV3AndBelow[i].ResultsByPartition[k].PartitionErrorCode;
	if (answered != p->txn_nslots) {
		fprintf(stderr, "sluice-bench: AddPartitionsToTxn answered %d partitions of %d\n", answered, p->txn_nslots);
		return -EPROTO;
	}
	if (ec)
		return sb_txn_retry_or_fail(p, "AddPartitionsToTxn", ec, now);
	p->txn = SB_TXN_OPEN;
	p->txn_retries = 0;
	p->add_done_ns = now;
	return 0;
}

static int sb_txn_on_end(struct sb_prod *p, struct kreader *rd, uint64_t now)
{
	struct sb_run *r = p->run;
	struct EndTxnResponse resp;
	karena_reset(&r->arena);
	int rc = EndTxnResponse_decode(rd, SB_V_END_TXN, &resp, &r->arena);
	if (rc || rd->err || kr_left(rd)) {
		fprintf(stderr, "sluice-bench: malformed EndTxnResponse for %s\n", p->txn_id);
		return -EPROTO;
	}
	assert(p->txn == SB_TXN_ENDING && p->inflight == 0);
	if (resp.ErrorCode)
		return sb_txn_retry_or_fail(p, p->txn_abort ? "EndTxn(abort)" : "EndTxn(commit)", resp.ErrorCode, now);
	if (!p->txn_abort) {
		r->committed_all += p->txn_acked;
		r->checksum += p->txn_digest;
	}
	sb_fig_txn(r, !p->txn_abort, (now - p->end_sent_ns) / 1000u, p->end_sent_ns >= r->t_measure);
	if (!p->txn_abort && p->add_first_ns >= r->t_measure)
		sb_fig_txn_steps(r, (p->add_done_ns - p->add_first_ns) / 1000u, (p->end_sent_ns - p->add_done_ns) / 1000u,
				 (now - p->add_first_ns) / 1000u);
	p->txn_acked = p->txn_digest = 0;
	p->txn = SB_TXN_IDLE;
	return 0;
}

static int sb_txn_pump(struct sb_prod *p, uint64_t now)
{
	struct sb_run *r = p->run;
	if (p->txn_retry_at_ns) {
		if (now < p->txn_retry_at_ns) {
			sb_wake_at(r, p->txn_retry_at_ns);
			return 0;
		}
		p->txn_retry_at_ns = 0;
		return p->txn == SB_TXN_ADDING ? sb_txn_send_add(p, now) : sb_txn_send_end(p, now);
	}
	switch (p->txn) {
	case SB_TXN_IDLE:
		if (r->stopping || (r->o->count && r->issued >= r->o->count)) {
			p->txn = SB_TXN_DONE;
			sb_wake_at(r, now); /* no I/O follows: let the loop see that the run may be over */
			return 0;
		}
		return sb_txn_begin(p, now);
	case SB_TXN_OPEN:
		/* EndTxn only once every batch of the transaction is acknowledged. */
		if ((p->txn_left == 0 || r->stopping || (r->o->count && r->issued >= r->o->count)) && p->inflight == 0 &&
		    !sb_prod_resends(p))
			return sb_txn_send_end(p, now);
		return 0;
	default:
		return 0;
	}
}

int sb_prods_pump(struct sb_run *r, uint64_t now)
{
	const struct sb_opts *o = r->o;
	int rc = 0;
	for (int i = 0; i < r->nprods && !rc; i++) {
		rc = sb_prod_resend(&r->prods[i], now);
		if (!rc && o->mode == SB_MODE_TRANSACTIONAL)
			rc = sb_txn_pump(&r->prods[i], now);
	}
	if (rc || r->stopping)
		return rc;
	if (o->rate <= 0) {
		/* Closed loop: every window full. */
		for (int i = 0; i < r->nprods && !rc; i++)
			while (!rc && sb_prod_can_issue(&r->prods[i]))
				rc = sb_prod_new_batch(&r->prods[i], now, now);
		return rc;
	}
	/*
	 * Open loop: the batch holding record n is due at t_begin + n / rate and its
	 * latency counts from then, whenever it actually leaves; a batch that finds
	 * every window full waits, and the wait is reported as being behind.
	 */
	for (;;) {
		uint64_t due = r->t_begin + (uint64_t)((double)r->sched_records * 1e9 / o->rate);
		if (due >= r->t_end || (o->count && r->issued >= o->count))
			break;
		if (due > now) {
			r->behind_ns = 0;
			sb_wake_at(r, due);
			break;
		}
		int k = 0;
		while (k < r->nprods && !sb_prod_can_issue(&r->prods[(r->sched_rr + k) % r->nprods]))
			k++;
		if (k == r->nprods) {
			r->behind_ns = now - due;
			if (r->behind_ns > r->behind_max_ns)
				r->behind_max_ns = r->behind_ns;
			break;
		}
		struct sb_prod *p = &r->prods[(r->sched_rr + k) % r->nprods];
		r->sched_rr = (p->idx + 1) % r->nprods;
		if ((rc = sb_prod_new_batch(p, due, now)))
			break;
	}
	return rc;
}

int sb_prod_on_answer(struct sb_prod *p, const struct sb_req *q, struct kreader *body, uint64_t now)
{
	switch (q->kind) {
	case SB_REQ_PRODUCE:
		return sb_prod_on_produce(p, q, body, now);
	case SB_REQ_ADD_PARTITIONS:
		return sb_txn_on_add(p, body, now);
	case SB_REQ_END_TXN:
		return sb_txn_on_end(p, body, now);
	default:
		fprintf(stderr, "sluice-bench: unexpected answer (kind %d) on a producer connection\n", q->kind);
		return -EPROTO;
	}
}

bool sb_prods_idle(const struct sb_run *r)
{
	for (int i = 0; i < r->nprods; i++) {
		const struct sb_prod *p = &r->prods[i];
		if (p->inflight || sb_prod_resends(p) ||
		    (r->o->mode == SB_MODE_TRANSACTIONAL && p->txn != SB_TXN_DONE))
			return false;
	}
	return true;
}
