/*
 * shard.c - the owner side of a partition: appends, reads, offsets lookups,
 * high-watermark watches, and opening/closing the partitions a core owns.
 * Locality: shard core (owner).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>
#include <liburing.h>

#include "batch.h"
#include "kerr.h"
#include "log.h"
#include "lso.h"
#include "pstate.h"
#include "core.h"

extern _Thread_local struct dp_core *dp_this_core;

#define DP_APPEND_CHUNK 256   /* append records taken from malloc at a time, then reused */

static struct dp_append *append_get(struct dp_core *c)
{
	if (!c->append_free) {
		/* Warm-up only: the pool grows to the peak number in flight, then stays. */
		struct dp_append *a = calloc(DP_APPEND_CHUNK, sizeof(*a));
		if (!a)
			return NULL;
		for (int i = 0; i < DP_APPEND_CHUNK; i++) {
			a[i].next_free = c->append_free;
			c->append_free = &a[i];
		}
	}
	struct dp_append *a = c->append_free;
	c->append_free = a->next_free;
	memset(a, 0, sizeof(*a));
	a->kind = DP_COOKIE_PRODUCE;
	return a;
}

static void append_put(struct dp_core *c, struct dp_append *a)
{
	a->next_free = c->append_free;
	c->append_free = a;
}

static struct dp_part *part_of(struct dp_core *c, const struct dp_msg *m, struct dp_topic **tp)
{
	struct dp_topic *t = dp_topic_get(c, m->topic_id, m->gen);
	if (tp)
		*tp = t;
	if (!t || m->partition < 0 || m->partition >= t->nparts)
		return NULL;
	return t->parts[m->partition];
}

static void reply(struct dp_core *c, const struct dp_msg *req, struct dp_msg *m, uint16_t type)
{
	m->type = type;
	m->ctx = req->ctx;
	m->idx = req->idx;
	m->gen = req->gen;
	m->topic_id = req->topic_id;
	m->partition = req->partition;
	dp_send(c, req->src, m);
}

/* Tell parked fetches whose offset is now below the high watermark. */
/* What a fetch may read up to: the high watermark, or for read_committed the LSO. */
static int64_t readable_end(const struct dp_part *p, int8_t isolation)
{
	int64_t hw = st_log_durable_offset(p->log);
	return isolation == 1 ? txn_lso_get(p->lso, hw) : hw;
}

static void wake_waiters(struct dp_core *c, struct dp_part *p, bool all)
{
	uint32_t keep = 0;
	for (uint32_t i = 0; i < p->nwaiters; i++) {
		struct dp_waiter *w = &p->waiters[i];
		if (all || readable_end(p, w->isolation) > w->offset) {
			struct dp_msg m = { .type = DP_MSG_WATCH_FIRE, .ctx = w->ctx, .gen = w->gen };
			dp_send(c, w->core, &m);
		} else if (w->deadline_ms > c->now_ms) {
			p->waiters[keep++] = *w;
		}
	}
	p->nwaiters = keep;
}

static void dupwait_check(struct dp_part *p);
static void part_offline(struct dp_core *c, struct dp_part *p);

/*
 * An append failed. A partition whose log failed is offline: that is logged
 * once (part_offline) and its refused appends only counted. Other failures
 * (no free append slot, a segment that cannot roll) are rate-limited
 * (DP_ERR_RL: a burst, then the number left unlogged).
 */
static void append_failed(struct dp_core *c, struct dp_part *p, int err)
{
	if (st_log_failed(p->log)) {
		p->refused++;
		return;
	}
	DP_ERR_RL("partition %s: append failed: %s", p->dir, strerror(-err));
}

void dp_shard_on_append(void *cookie, int status, int64_t base_offset)
{
	struct dp_core *c = dp_this_core;
	struct dp_append *a = cookie;
	struct dp_part *p = a->part;
	assert(a->left > 0);
	if (status < 0) {
		append_failed(c, p, status);
		a->err = a->err ? a->err : KERR_KAFKA_STORAGE_ERROR;
	}
	/* Offline only after this append's own count is taken: it may be on the dupwait list. */
	bool offline = status < 0 && st_log_failed(p->log) && !p->offline_ms;
	if (--a->left) {
		if (offline)
			part_offline(c, p);
		return;
	}
	/* acks=-1/1: this runs after the fdatasync covering the batch completed. */
	struct dp_msg m = { .type = DP_MSG_PRODUCE_DONE, .err = a->err, .ctx = a->ctx, .idx = a->idx };
	m.u.produce_done.base_offset = a->err ? -1 : a->base_offset;
	m.u.produce_done.log_start = st_log_start_offset(a->part->log);
	m.u.produce_done.out = a->out;
	uint16_t src = a->src;
	append_put(c, a);
	dp_send(c, src, &m);
	if (offline)
		part_offline(c, p);
	if (p->nwaiters)
		wake_waiters(c, p, false);
	if (p->dupwait)
		dupwait_check(p);
}

/*
 * A retried batch that is still on its way to the disk is answered only when
 * the original is durable: the answer "it is written" must stay true.
 */
static void dupwait_add(struct dp_part *p, struct dp_append *a, int64_t until)
{
	a->left++;
	a->dup_until = until;
	a->dup_next = p->dupwait;
	p->dupwait = a;
}

static void dupwait_check(struct dp_part *p)
{
	int64_t durable = st_log_durable_offset(p->log);
	struct dp_append *ready = NULL, **pp = &p->dupwait;
	while (*pp) {   /* detach first: the replies below may re-enter */
		struct dp_append *a = *pp;
		if (a->dup_until <= durable) {
			*pp = a->dup_next;
			a->dup_next = ready;
			ready = a;
		} else {
			pp = &a->dup_next;
		}
	}
	while (ready) {
		struct dp_append *a = ready;
		ready = a->dup_next;
		dp_shard_on_append(a, 0, a->base_offset);   /* may free a */
	}
}

static bool allow_has(const struct dp_part *p, int64_t pid, int16_t epoch)
{
	for (uint32_t i = 0; i < p->nallow; i++)
		if (p->allow[i].pid == pid)
			return p->allow[i].epoch == epoch;
	return false;
}

static int allow_set(struct dp_part *p, int64_t pid, int16_t epoch)
{
	for (uint32_t i = 0; i < p->nallow; i++)
		if (p->allow[i].pid == pid) {
			p->allow[i].epoch = epoch;
			return 0;
		}
	if (p->nallow == p->allow_cap) {
		/* Grows to the peak number of concurrent transactions on this partition. */
		uint32_t cap = p->allow_cap ? p->allow_cap * 2 : 8;
		struct dp_txn_allow *n = realloc(p->allow, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		p->allow = n;
		p->allow_cap = cap;
	}
	p->allow[p->nallow++] = (struct dp_txn_allow){ pid, epoch };
	return 0;
}

static void allow_drop(struct dp_part *p, int64_t pid)
{
	for (uint32_t i = 0; i < p->nallow; i++)
		if (p->allow[i].pid == pid) {
			p->allow[i] = p->allow[--p->nallow];
			return;
		}
}

/*
 * A producer's batch that cannot be recorded in the producer state or the
 * transaction index (a table at its limit, or no memory) is not written, and
 * answered NOT_ENOUGH_REPLICAS: clients retry it with the same sequence
 * (librdkafka: retriable, "not persisted"; no fatal idempotence error), by
 * when expiry or a marker may have made room. Rate-limited, as other
 * refused appends.
 */
static int16_t state_full(struct dp_core *c, struct dp_part *p, int err, const char *what)
{
	c->state_full_refused++;
	DP_WARN_RL("partition %s: %s full (%s): batch refused, retriable (%llu refused on this core so far)",
	           p->dir, what, err == -ENOSPC ? "at its limit" : strerror(-err),
	           (unsigned long long)c->state_full_refused);
	return KERR_NOT_ENOUGH_REPLICAS;
}

/*
 * Idempotence, on the owner core with no lock: each batch with a producer id
 * is checked against that producer's state on this partition (pstate.h), in
 * arrival order. The state is updated when the append is queued, so batches
 * pipelined behind it (up to 5 per producer) are checked against it at once.
 */
static int16_t produce_batch(struct dp_core *c, struct dp_part *p, struct dp_append *a, uint8_t *b,
                             const struct st_batch_hdr *h, uint32_t n)
{
	struct txn_pbatch dup;
	bool txnl = h->attributes & ST_BATCH_ATTR_TRANSACTIONAL;
	if (txnl && h->producer_id < 0)
		return KERR_INVALID_RECORD;
	if (st_log_failed(p->log)) {
		/* Offline: before the producer checks, whose state may hold batches that never reached the disk. */
		append_failed(c, p, st_log_failed(p->log));
		if (!p->offline_ms)
			part_offline(c, p);
		return KERR_KAFKA_STORAGE_ERROR;
	}
	if (h->producer_id >= 0) {
		switch (txn_pstate_check(p->ps, h, &dup)) {
		case TXN_APPEND:
			break;
		case TXN_DUPLICATE:
			if (a->base_offset < 0)
				a->base_offset = dup.first_offset;
			if (dup.last_offset >= st_log_durable_offset(p->log))
				dupwait_add(p, a, dup.last_offset + 1);
			return 0;
		case TXN_ERR_EPOCH:
			return KERR_INVALID_PRODUCER_EPOCH;
		case TXN_ERR_SEQUENCE:
			return KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
		}
		/*
		 * Beyond Kafka 3.x (the "torn transaction" Jepsen found): a
		 * transactional batch is taken only if the coordinator added this
		 * partition to this producer's current transaction at this epoch.
		 * The permission is withdrawn when the marker is written, so a late
		 * batch of an ended transaction cannot start a new, unknown one here.
		 */
		if (txnl && !allow_has(p, h->producer_id, h->producer_epoch))
			return KERR_INVALID_TXN_STATE;
		/* Kafka's rule: no plain batch while this producer's transaction is open here. */
		if (!txnl && txn_lso_open_first(p->lso, h->producer_id) >= 0)
			return KERR_INVALID_TXN_STATE;
		/*
		 * The batch is written only if its producer entry (deduplication)
		 * and, for a transaction's first batch here, its open entry (the
		 * LSO stays below it) are sure to be recorded: both are reserved
		 * now, so the updates after the append cannot fail.
		 */
		bool begins = txnl && txn_lso_open_first(p->lso, h->producer_id) < 0;
		int rc = txn_pstate_reserve(p->ps, h->producer_id);
		if (rc < 0)
			return state_full(c, p, rc, "producer state");
		if (begins && (rc = txn_lso_reserve(p->lso)) < 0)
			return state_full(c, p, rc, "transaction index");
	}
	int64_t off = st_log_append(p->log, b, n, (uint32_t)h->last_offset_delta + 1, a);
	if (off < 0) {
		append_failed(c, p, (int)off);
		return KERR_KAFKA_STORAGE_ERROR;
	}
	a->left++;
	if (a->base_offset < 0)
		a->base_offset = off;
	if (h->producer_id >= 0) {
		/* Reserved above: a failure here would be a broken invariant, not an operating error. */
		if (txnl && txn_lso_open_first(p->lso, h->producer_id) < 0) {
			int rc = txn_lso_begin(p->lso, h->producer_id, off);
			assert(rc == 0);
			(void)rc;
		}
		int rc = txn_pstate_update(p->ps, h, off, dp_wall_ms());
		assert(rc == 0);
		(void)rc;
	}
	return 0;
}

static void shard_produce(struct dp_core *c, struct dp_msg *m)
{
	struct dp_topic *t;
	struct dp_part *p = part_of(c, m, &t);
	struct dp_msg out = { 0 };
	out.u.produce_done.out = m->u.produce.out;
	if (!p || t->deleting) {
		out.err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		reply(c, m, &out, DP_MSG_PRODUCE_DONE);
		return;
	}
	struct dp_append *a = append_get(c);
	if (!a) {
		out.err = KERR_UNKNOWN_SERVER_ERROR;
		reply(c, m, &out, DP_MSG_PRODUCE_DONE);
		return;
	}
	a->src = m->src;
	a->ctx = m->ctx;
	a->idx = m->idx;
	a->out = m->u.produce.out;
	a->part = p;
	a->base_offset = -1;
	a->left = 1;   /* held until every batch is queued */
	uint8_t *b = m->u.produce.ptr;
	uint32_t left = m->u.produce.len;
	for (uint32_t i = 0; i < m->u.produce.nbatch && !a->err; i++) {
		struct st_batch_hdr h;
		int n = st_batch_parse(b, left, &h);
		assert(n > 0);   /* checked on the NIC core */
		a->err = produce_batch(c, p, a, b, &h, (uint32_t)n);
		b += n;
		left -= (uint32_t)n;
	}
	dp_shard_on_append(a, 0, a->base_offset);
}

/*
 * A cold fetch read: the page cache did not hold the bytes, so they are read
 * through the core's io_uring and the fetch is answered on completion; the
 * core goes on serving other partitions meanwhile. Locality: owner core.
 */
struct dp_read {
	struct dp_read *next_free;
	struct dp_msg req;            /* the fetch, for the reply */
	struct dp_msg out;            /* the reply, filled up to the read */
	struct dp_part *part;         /* safe: deletes and retention wait for reads_inflight 0 */
	int fd;
	uint64_t pos;
	uint32_t len, done;
	bool one_batch;               /* read_committed: the first batch alone (fetch_reply) */
};

static struct dp_read *read_get(struct dp_core *c)
{
	if (!c->reads) {
		if (!(c->reads = calloc(DP_READS_MAX, sizeof(*c->reads))))
			return NULL;
		for (int i = 0; i < DP_READS_MAX; i++) {
			c->reads[i].next_free = c->read_free;
			c->read_free = &c->reads[i];
		}
	}
	struct dp_read *rd = c->read_free;
	if (rd)
		c->read_free = rd->next_free;
	return rd;
}

/* The list is queried as struct txn_aborted and rewritten in place, front to back, as Kafka's. */
_Static_assert(sizeof(struct FetchResponse_AbortedTransaction) <= sizeof(struct txn_aborted),
               "in-place conversion only shrinks entries");
_Static_assert(DP_FETCH_ABORTED_BYTES >= 8 + DP_FETCH_ABORTED_MAX * sizeof(struct txn_aborted),
               "the list's room holds the most entries one answer may carry");

/*
 * The records read into buf[0, *len) are whole stored batches: returns the
 * offset after the last one, and the first one's producer id in *first_pid.
 * A header that does not parse (damage the log's recovery did not see) ends
 * the records there: *len shrinks to the batches before it.
 */
static int64_t records_next_offset(const uint8_t *buf, uint32_t *len, int64_t *first_pid)
{
	int64_t next = -1;
	uint32_t pos = 0;
	*first_pid = -1;
	while (pos < *len) {
		struct st_batch_hdr h;
		int n = st_batch_parse(buf + pos, *len - pos, &h);
		if (n <= 0) {
			DP_ERR("fetch: unparsable batch in the log after %u bytes of a read", pos);
			break;
		}
		if (pos == 0)
			*first_pid = h.producer_id;
		next = h.base_offset + h.last_offset_delta + 1;
		pos += (uint32_t)n;
	}
	*len = pos;
	return next;
}

/*
 * After the records: for read_committed the aborted transactions that overlap
 * exactly the offsets returned, [offset, next batch), go 8-byte aligned behind
 * them in the same buffer, as
 *   [records: len bytes][pad to 8][u32 count, 4 pad][count x struct FetchResponse_AbortedTransaction]
 * (the NIC core points the response at them: nothing is copied or allocated
 * there). shard_fetch cut the read so that at most DP_FETCH_ABORTED_MAX
 * overlap; with one_batch the read is the first batch alone, which more than
 * that many transactions of other producers span, and only its own
 * producer's transaction is listed, which is all a consumer needs to filter
 * it. If the list does not fit, the reply asks for a buffer that holds the
 * records and the longest list (need), so a second try always fits. Sends it.
 */
static void fetch_reply(struct dp_core *c, const struct dp_msg *m, struct dp_msg *out, struct dp_part *p,
                        uint32_t len, bool one_batch)
{
	uint32_t cap = m->u.fetch.cap;
	uint8_t *buf = m->u.fetch.buf;
	if (m->u.fetch.isolation == 1 && !out->err && !out->u.fetch_done.need && len) {
		int64_t pid, from = m->u.fetch.offset;
		int64_t next = records_next_offset(buf, &len, &pid);
		uint32_t at = DP_ABORTED_AT(len);
		uint32_t room = cap >= at + 8 ? (cap - at - 8) / (uint32_t)sizeof(struct txn_aborted) : 0;
		struct txn_aborted *list = (struct txn_aborted *)(void *)(buf + at + 8);
		uint32_t n = 0;
		if (!len) {
			out->err = KERR_KAFKA_STORAGE_ERROR;
		} else if (one_batch) {
			struct txn_aborted a;
			n = txn_lso_aborted_pid(p->lso, from, next, pid, &a);
			if (n && room)
				list[0] = a;
		} else {
			n = txn_lso_aborted(p->lso, from, next, list, room);
			assert(n <= c->b->cfg.fetch_aborted_max);   /* shard_fetch ended the read at the bound */
		}
		if (out->err) {
			len = 0;
		} else if (n > room || at + 8 > cap) {   /* the list, or its count, does not fit */
			/* Room for what was counted (a longer list found by the retry asks again),
			 * not for the longest list: that would lend ~24 KiB per partition. */
			uint32_t most = len > m->u.fetch.max_bytes ? len : m->u.fetch.max_bytes;
			out->u.fetch_done.need = DP_ABORTED_AT(most) + 8 + n * (uint32_t)sizeof(struct txn_aborted);
			assert(out->u.fetch_done.need > cap);
		} else {
			struct FetchResponse_AbortedTransaction *kt = (void *)list;
			for (uint32_t i = 0; i < n; i++) {
				struct txn_aborted a = list[i];   /* read whole before kt[i] overwrites its front */
				kt[i] = (struct FetchResponse_AbortedTransaction){ .ProducerId = a.pid,
				                                                   .FirstOffset = a.first_offset };
			}
			memcpy(buf + at, &n, 4);
		}
	}
	if (!out->u.fetch_done.need)
		out->u.fetch_done.len = len;
	reply(c, m, out, DP_MSG_FETCH_DONE);
}

/* Queue the rest of a cold read on the core's ring. */
static void read_submit(struct dp_core *c, struct dp_read *rd)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
	if (!sqe) {
		io_uring_submit(&c->ring);
		sqe = io_uring_get_sqe(&c->ring);
	}
	assert(sqe);   /* just submitted: there is room */
	io_uring_prep_read(sqe, rd->fd, (uint8_t *)rd->req.u.fetch.buf + rd->done, rd->len - rd->done,
	                   rd->pos + rd->done);
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)rd | DP_READ_TAG);
}

void dp_shard_read_complete(struct dp_core *c, const struct io_uring_cqe *cqe)
{
	struct dp_read *rd = (struct dp_read *)(uintptr_t)(cqe->user_data & ~(uint64_t)0xf);
	if (cqe->res > 0 && rd->done + (uint32_t)cqe->res < rd->len) {
		rd->done += (uint32_t)cqe->res;   /* short read: go on */
		read_submit(c, rd);
		return;
	}
	uint32_t len = rd->len;
	if (cqe->res <= 0) {
		DP_ERR_RL("fetch read failed: %s", cqe->res < 0 ? strerror(-cqe->res) : "end of file");
		rd->out.err = KERR_KAFKA_STORAGE_ERROR;
		len = 0;
	}
	fetch_reply(c, &rd->req, &rd->out, rd->part, len, rd->one_batch);
	rd->part->reads--;
	rd->next_free = c->read_free;
	c->read_free = rd;
	c->reads_inflight--;
}

/*
 * Reads whole stored batches, at most max_bytes of them (the first batch
 * whole past that only with min_one), into the buffer the NIC core lent; for
 * read_committed the range ends at the LSO, and sooner where more than
 * DP_FETCH_ABORTED_MAX aborted transactions would overlap it. The tail of
 * the log is nearly always in the page cache: a non-blocking preadv2
 * (RWF_NOWAIT) copies it at once. Bytes that are not cached are read through
 * io_uring instead, so that a consumer catching up from old segments never
 * stalls this core's appends. Only when every cold-read slot is busy does the
 * core read with a blocking pread.
 */
static void shard_fetch(struct dp_core *c, struct dp_msg *m)
{
	struct dp_msg out = { 0 };
	struct dp_part *p = part_of(c, m, NULL);
	if (!p) {
		out.err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		reply(c, m, &out, DP_MSG_FETCH_DONE);
		return;
	}
	struct st_log *log = p->log;
	bool committed = m->u.fetch.isolation == 1, one_batch = false;
	int64_t hw = st_log_durable_offset(log), start = st_log_start_offset(log);
	int64_t lso = txn_lso_get(p->lso, hw), end = committed ? lso : hw;
	int64_t off = m->u.fetch.offset;
	uint32_t len = 0, cap = m->u.fetch.cap;
	out.u.fetch_done.hw = hw;
	out.u.fetch_done.lso = lso;
	out.u.fetch_done.log_start = start;
	if (off < start || off > st_log_end_offset(log)) {
		out.err = KERR_OFFSET_OUT_OF_RANGE;
	} else if (off < end && (m->u.fetch.max_bytes || m->u.fetch.min_one)) {
		/* (With neither, only the offsets above were asked: the NIC core reads
		 * this partition later if the request's MaxBytes leaves it room.) */
		int fd;
		uint64_t pos;
		int64_t heap[DP_FETCH_ABORTED_MAX + 1];   /* 8 KiB of stack */
		uint32_t most = c->b->cfg.fetch_aborted_max;
		assert(most >= 1 && most <= DP_FETCH_ABORTED_MAX);
		int64_t limit = committed ? txn_lso_aborted_bound(p->lso, off, end, most, heap) : end;
		int rc = limit > off ? st_log_locate(log, off, limit, m->u.fetch.max_bytes, &fd, &pos, &len) : 0;
		c->aborted_cut_reads += limit < end;
		if (rc == 0 && len == 0 && limit < end) {
			/* The first batch reaches past the bound: it goes alone (fetch_reply). */
			one_batch = true;
			c->aborted_one_batch_reads++;
			rc = st_log_locate(log, off, end, 0, &fd, &pos, &len);
		}
		if (rc == -ERANGE) {
			out.err = KERR_OFFSET_OUT_OF_RANGE;
		} else if (rc == -EBADMSG) {
			/* Damaged batch (logged by storage): clients report it, where KAFKA_STORAGE_ERROR
			 * would only make them refresh metadata and retry in silence. */
			out.err = KERR_CORRUPT_MESSAGE;
		} else if (rc < 0) {
			out.err = KERR_KAFKA_STORAGE_ERROR;
		} else if (len > m->u.fetch.max_bytes && !m->u.fetch.min_one) {
			/* The first batch alone is larger than this partition may have, and
			 * only the first partition with records gets it whole (KIP-74). */
			len = 0;
		} else if (len > cap) {
			/* Only a first batch larger than the buffer (KIP-74): room for it and a list. */
			out.u.fetch_done.need = DP_ABORTED_AT(len) + (committed ? DP_FETCH_ABORTED_BYTES : 0);
		} else if (len) {
			struct iovec iov = { m->u.fetch.buf, len };
			ssize_t got = preadv2(fd, &iov, 1, (off_t)pos, RWF_NOWAIT);
			struct dp_read *rd = got == (ssize_t)len ? NULL : read_get(c);
			if (rd) {
				*rd = (struct dp_read){ .req = *m, .out = out, .part = p, .fd = fd, .pos = pos, .len = len,
				                        .done = got > 0 ? (uint32_t)got : 0, .one_batch = one_batch };
				c->reads_inflight++;
				p->reads++;
				c->cold_reads++;
				read_submit(c, rd);
				return;
			}
			if (got != (ssize_t)len)
				got = pread(fd, m->u.fetch.buf, len, (off_t)pos);
			if (got != (ssize_t)len) {
				DP_ERR_RL("fetch read failed: %s", got < 0 ? strerror(errno) : "short read");
				out.err = KERR_KAFKA_STORAGE_ERROR;
				len = 0;
			}
		}
	}
	fetch_reply(c, m, &out, p, len, one_batch);
}

static void shard_watch(struct dp_core *c, struct dp_msg *m)
{
	struct dp_msg tm = *m;
	tm.gen = m->u.watch.topic_gen;
	struct dp_part *p = part_of(c, &tm, NULL);
	bool now = !p || readable_end(p, m->u.watch.isolation) > m->u.watch.offset;
	if (!now) {
		/* One watch per (request, partition): a newer round replaces the older one. */
		uint32_t i;
		for (i = 0; i < p->nwaiters; i++)
			if (p->waiters[i].ctx == m->ctx && p->waiters[i].core == m->src)
				break;
		if (i == p->nwaiters) {
			if (p->nwaiters == DP_WAITERS_PER_PART)
				wake_waiters(c, p, false);   /* drop expired ones */
			if (p->nwaiters == DP_WAITERS_PER_PART)
				now = true;                  /* full: degrade to polling */
			else
				p->nwaiters++;
		}
		if (!now)
			p->waiters[i] = (struct dp_waiter){ .core = m->src, .gen = m->gen, .ctx = m->ctx,
			                                    .offset = m->u.watch.offset,
			                                    .deadline_ms = m->u.watch.deadline_ms,
			                                    .isolation = m->u.watch.isolation };
	}
	if (now) {
		struct dp_msg f = { .type = DP_MSG_WATCH_FIRE, .ctx = m->ctx, .gen = m->gen };
		dp_send(c, m->src, &f);
	}
}

static void shard_list(struct dp_core *c, struct dp_msg *m)
{
	struct dp_msg out = { 0 };
	out.u.list_done.out = m->u.list.out;
	struct dp_part *p = part_of(c, m, NULL);
	if (!p) {
		out.err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		reply(c, m, &out, DP_MSG_LIST_DONE);
		return;
	}
	int64_t ts = m->u.list.timestamp, hw = readable_end(p, m->u.list.isolation);
	out.u.list_done.timestamp = -1;
	if (ts == -1) {
		out.u.list_done.offset = hw;                      /* latest: HW, or LSO for read_committed */
	} else if (ts == -2) {
		out.u.list_done.offset = st_log_start_offset(p->log);
	} else if (ts < 0) {
		out.err = KERR_INVALID_REQUEST;
	} else {
		int64_t off = st_log_offset_for_time(p->log, ts);
		out.u.list_done.offset = off < hw ? off : -1;     /* -1: no record that late */
		out.u.list_done.timestamp = off < hw ? ts : -1;
	}
	reply(c, m, &out, DP_MSG_LIST_DONE);
}

static int recover_producers(struct dp_part *p)
{
	const struct dp_config *cfg = &dp_this_core->b->cfg;
	int rc = txn_pstate_create(&p->ps);
	if (rc == 0 && cfg->test_producers_max)
		txn_pstate_set_limit(p->ps, cfg->test_producers_max);
	if (rc == 0 && (rc = txn_lso_create(&p->lso)) == 0 && cfg->test_txn_open_max)
		txn_lso_set_limits(p->lso, cfg->test_txn_open_max, 0);
	if (rc == 0)
		rc = txn_lso_open_index(p->lso, p->dir, st_log_end_offset(p->log));
	if (rc == 0 && (rc = txn_pstate_recover(p->ps, p->lso, p->log, p->dir, &p->snap_offset)) == 0)
		txn_lso_attach_io(p->lso, dp_this_core->io, st_log_dirfd(p->log));   /* its writes: io_uring from now on */
	return rc;
}

/* A partition's state is in a write on the core's io_uring: it is not freed or replaced meanwhile. */
static bool part_files_busy(const struct dp_part *p)
{
	return (p->ps && txn_pstate_snapshot_busy(p->ps)) || (p->lso && txn_lso_busy(p->lso));
}

static void snapshot_written(void *arg, int status, int64_t offset)
{
	struct dp_part *p = arg;
	assert(dp_this_core->snaps_inflight > 0);
	dp_this_core->snaps_inflight--;
	if (status == 0)
		p->snap_offset = offset;   /* failures are logged by pstate; the next interval tries again */
}

/* The periodic snapshot, written through the core's io_uring (txn_pstate_snapshot_start): the timer
 * never waits for the disk. One per partition and round; due until it could start, at most
 * DP_SNAPSHOTS_INFLIGHT_MAX at a time on the core. */
static void snapshot_producers_async(struct dp_core *c, struct dp_part *p)
{
	int64_t end = st_log_end_offset(p->log);
	int fd;
	if (txn_pstate_snapshot_busy(p->ps) || c->snaps_inflight >= DP_SNAPSHOTS_INFLIGHT_MAX)
		return;   /* the last one is still being written, or the core's writes are all taken */
	if (txn_lso_sync_fd(p->lso, &fd) == -EAGAIN)
		return;   /* aborts still being appended: an fdatasync now would not cover them */
	p->snap_due = false;
	txn_pstate_expire(p->ps, dp_wall_ms(), c->b->cfg.producer_expiration_ms);
	if (end == p->snap_offset || txn_lso_sync_fd(p->lso, &fd) < 0)
		return;   /* nothing new; or the index cannot be made durable: no snapshot past its aborts */
	/* Every abort below the snapshot's offset must be on disk before the snapshot is: fd first. */
	int rc = txn_pstate_snapshot_start(p->ps, c->io, st_log_dirfd(p->log), end, fd, snapshot_written, p);
	if (rc == 0)
		c->snaps_inflight++;
	else
		DP_WARN("producer snapshot at %lld not started: %s", (long long)end, strerror(-rc));
}

/* Synchronous: clean shutdown only (the loop has stopped; nothing else waits for this core). */
static void snapshot_producers(struct dp_core *c, struct dp_part *p)
{
	int64_t end = st_log_end_offset(p->log);
	txn_pstate_expire(p->ps, dp_wall_ms(), c->b->cfg.producer_expiration_ms);
	if (end == p->snap_offset)
		return;
	/* Every abort below the snapshot's offset must be on disk before the snapshot is. */
	if (txn_lso_sync(p->lso) < 0)
		return;
	if (txn_pstate_snapshot_save(p->ps, p->dir, end) == 0)
		p->snap_offset = end;
}

/* Forget what recover_producers built (before it runs again). */
static void part_drop_recovery(struct dp_part *p)
{
	if (p->ps)
		txn_pstate_destroy(p->ps);
	if (p->lso) {
		txn_lso_close_index(p->lso);
		txn_lso_destroy(p->lso);
	}
	p->ps = NULL;
	p->lso = NULL;
}

static void part_free(struct dp_part *p)
{
	part_drop_recovery(p);
	free(p->allow);
	free(p->dir);
	free(p);
}

static struct st_log_config part_log_config(const struct dp_config *cfg)
{
	return (struct st_log_config){
		.segment_bytes = cfg->segment_bytes,
		.retention_bytes = cfg->retention_bytes,
		.retention_ms = cfg->retention_ms,
		.index_interval_bytes = 4096,
	};
}

/* Open (creating or recovering) every partition of t that this core owns. */
int dp_shard_open_owned(struct dp_core *c, struct dp_topic *t, uint32_t id)
{
	int failed = 0;
	const struct dp_config *cfg = &c->b->cfg;
	struct st_log_config lc = part_log_config(cfg);
	for (int32_t i = 0; i < t->nparts; i++) {
		if (dp_owner_core(c->b, t->hash, i) != c->id)
			continue;
		char dir[1024];
		dp_partition_dir(cfg, dir, sizeof(dir), t->name, t->name_len, i);
		struct dp_part *p = calloc(1, sizeof(*p));
		int rc = p && (p->dir = strdup(dir)) ? st_log_open(c->io, dir, &lc, &p->log) : -ENOMEM;
		if (rc == 0) {
			rc = recover_producers(p);
			if (rc == -EBADMSG) {
				/* The replay met damage in a segment trusted from its index; storage dropped
				 * that index, so a second open scans the segment and sets the damage aside. */
				st_log_close(p->log);
				p->log = NULL;
				part_drop_recovery(p);
				rc = st_log_open(c->io, dir, &lc, &p->log);
				if (rc == 0)
					rc = recover_producers(p);
			}
			if (rc < 0 && p->log)
				st_log_close(p->log);
		}
		if (rc < 0) {
			/* The partition stays offline (requests get errors); others go on. */
			DP_ERR("partition %s/%d: cannot open %s: %s", t->name, i, dir, strerror(-rc));
			if (p)
				part_free(p);
			failed++;
			continue;
		}
		t->parts[i] = p;
		int64_t lost = 0;
		uint32_t ranges = st_log_damage_count(p->log, &lost);
		if (ranges)
			DP_ERR("partition %s/%d: DAMAGED: %u range(s) holding %lld offset(s) set aside (storage log lines "
			       "above); fetches of them answer CORRUPT_MESSAGE, the rest is served", t->name, i, ranges,
			       (long long)lost);
		/* A COMMIT/ABORT marker lost in a damaged range leaves its transaction open here for good. */
		int64_t hw = st_log_durable_offset(p->log), lso = txn_lso_get(p->lso, hw);
		if (ranges && lso < hw)
			DP_WARN("partition %s/%d: %u transaction(s) open, the oldest from offset %lld: one whose marker was "
			        "in a damaged range hangs (read_committed stops there): `sluice-admin producers %s %d` "
			        "shows each open transaction's start, `sluice-admin abort-transaction %s %d PID` ends one",
			        t->name, i, txn_lso_open_count(p->lso), (long long)lso, t->name, i, t->name, i);
		DP_INFO("partition %s/%d opened on core %d: log start %lld, end %lld, %u producers "
		        "(snapshot at %lld)", t->name, i, c->id, (long long)st_log_start_offset(p->log),
		        (long long)st_log_end_offset(p->log), txn_pstate_count(p->ps), (long long)p->snap_offset);
	}
	(void)id;
	return failed;
}

void dp_shard_close_topic(struct dp_core *c, struct dp_topic *t, bool delete_files)
{
	for (int32_t i = 0; i < t->nparts; i++) {
		struct dp_part *p = t->parts[i];
		if (!p)
			continue;
		wake_waiters(c, p, true);
		assert(!p->dupwait);   /* callers wait for st_io_pending() == 0 */
		if (delete_files) {
			st_log_delete(p->log);
		} else {
			snapshot_producers(c, p);   /* a clean restart replays nothing */
			st_log_close(p->log);
		}
		part_free(p);
		t->parts[i] = NULL;
	}
}

/*
 * A partition goes offline when a write or sync of its log fails (disk full,
 * I/O error): its appends are refused with KAFKA_STORAGE_ERROR, reads of
 * what is durable go on. Retried batches waiting for an original that will
 * now never be durable are answered at once.
 */
static void part_offline(struct dp_core *c, struct dp_part *p)
{
	assert(st_log_failed(p->log));
	if (p->offline_ms)
		return;   /* already (a reply sent on the way here can re-enter with --cores 1) */
	p->offline_ms = c->now_ms > 0 ? c->now_ms : 1;
	p->probe_backoff_ms = DP_PROBE_FIRST_MS;
	p->probe_ms = c->now_ms + DP_PROBE_FIRST_MS;
	DP_ERR("partition %s is offline: %s; appends are refused until it is reopened (tried every %d s "
	       "backing off to %d s)", p->dir, strerror(-st_log_failed(p->log)), DP_PROBE_FIRST_MS / 1000,
	       DP_PROBE_MAX_MS / 1000);
	struct dp_append *w = p->dupwait;
	p->dupwait = NULL;
	while (w) {
		struct dp_append *next = w->dup_next;
		w->err = w->err ? w->err : KERR_KAFKA_STORAGE_ERROR;
		dp_shard_on_append(w, 0, w->base_offset);   /* may free w */
		w = next;
	}
}

static void part_state_free(struct dp_part *p)
{
	if (p->ps)
		txn_pstate_destroy(p->ps);
	if (p->lso) {
		txn_lso_close_index(p->lso);
		txn_lso_destroy(p->lso);
	}
	if (p->log)
		st_log_close(p->log);
	p->ps = NULL;
	p->lso = NULL;
	p->log = NULL;
}

/*
 * Try to bring an offline partition back: open its log again beside the
 * failed one (recovery cuts what the failed writes left past the last good
 * batch) and rebuild its producer state and aborted index from the disk, as
 * a restart would, since the in-memory ones took in batches that never made
 * it. Only when that worked does the new state replace the old; otherwise
 * the partition stays offline and the next try waits twice as long. After
 * ENOSPC it waits quietly for free space first. Synchronous, like opening a
 * partition at create; the coordinator's permissions (allow) are kept.
 */
static void part_probe(struct dp_core *c, struct dp_topic *t, int32_t i, struct dp_part *p)
{
	int err = st_log_failed(p->log);
	if (!st_log_idle(p->log) || p->reads || p->dupwait || part_files_busy(p)) {
		p->probe_ms = c->now_ms + 100;   /* not reachable today: failed logs take no appends */
		return;
	}
	p->probe_ms = c->now_ms + p->probe_backoff_ms;
	p->probe_backoff_ms = p->probe_backoff_ms * 2 > DP_PROBE_MAX_MS ? DP_PROBE_MAX_MS : p->probe_backoff_ms * 2;
	struct statvfs sv;
	if ((err == -ENOSPC || err == -EDQUOT) && statvfs(p->dir, &sv) == 0 &&
	    (uint64_t)sv.f_bavail * sv.f_frsize < DP_PROBE_FREE_BYTES_MIN)
		return;
	struct dp_part np = { .dir = p->dir };
	struct st_log_config lc = part_log_config(&c->b->cfg);
	int rc = st_log_open(c->io, p->dir, &lc, &np.log);
	if (rc == 0)
		rc = recover_producers(&np);
	if (rc < 0) {
		DP_WARN("partition %s/%d is still offline: reopen failed: %s; next try in %d s", t->name, i,
		        strerror(-rc), (int)((p->probe_ms - c->now_ms) / 1000));
		part_state_free(&np);
		return;
	}
	part_state_free(p);
	p->log = np.log;
	p->ps = np.ps;
	p->lso = np.lso;
	p->snap_offset = np.snap_offset;
	DP_WARN("partition %s/%d is back online after %lld ms offline (%s): log end %lld; %llu appends "
	        "were refused meanwhile", t->name, i, (long long)(c->now_ms - p->offline_ms), strerror(-err),
	        (long long)st_log_end_offset(p->log), (unsigned long long)p->refused);
	p->offline_ms = 0;
	p->refused = 0;
	wake_waiters(c, p, false);
}

/* Owner timer: retention, producer snapshots, expired watches, waiting duplicates. */
void dp_shard_timer(struct dp_core *c)
{
	/* Retention may close a segment a cold read still names by its fd: it waits for them. */
	bool retain = c->now_ms >= c->next_retention_ms && !c->reads_inflight;
	if (retain)
		c->next_retention_ms = c->now_ms + 30000;
	/* A round starts once the last one reached every partition: each gets its snapshot, however
	 * long a round takes (the interval is the least time between two of a partition's). */
	bool snap = c->now_ms >= c->next_snapshot_ms && !c->snap_round_open;
	if (snap)
		c->next_snapshot_ms = c->now_ms + c->b->cfg.producer_snapshot_ms;
	bool due = false;
	for (uint32_t id = 0; id < c->topics_end; id++) {
		struct dp_topic *t = &c->topics[id];
		if (!t->live || t->deleting)
			continue;
		for (int32_t i = 0; i < t->nparts; i++) {
			struct dp_part *p = t->parts[i];
			if (!p)
				continue;
			if (p->offline_ms || st_log_failed(p->log)) {
				if (!p->offline_ms)
					part_offline(c, p);
				if (c->now_ms >= p->probe_ms)
					part_probe(c, t, i, p);
				if (p->offline_ms)
					continue;   /* no snapshot or retention of a log that is not sound */
			}
			if (p->nwaiters)
				wake_waiters(c, p, false);
			if (p->dupwait)
				dupwait_check(p);
			if (snap)
				p->snap_due = true;
			if (p->snap_due)
				snapshot_producers_async(c, p);
			due |= p->snap_due;
			if (retain && st_log_retain(p->log, dp_wall_ms()) > 0) {
				txn_lso_trim(p->lso, st_log_start_offset(p->log));
				if (!txn_pstate_snapshot_busy(p->ps))   /* its chain syncs the index file first */
					txn_lso_compact_index(p->lso);
				DP_INFO("partition %s/%d: retention moved log start to %lld", t->name, i,
				        (long long)st_log_start_offset(p->log));
			}
		}
	}
	c->snap_round_open = due;
}

/*
 * Topic deletion waits until no append, marker or cold read of the topic's
 * partitions on this core is in flight, so no completion can refer to a
 * closed log; new produces are refused meanwhile. The wait is a flag in the
 * topic's own catalog entry (at most one delete per topic is under way, the
 * control core sees to that), so any number of topics can wait at once and
 * appends to other topics never hold a delete back.
 */
static bool topic_idle(const struct dp_topic *t)
{
	for (int32_t i = 0; i < t->nparts; i++) {
		const struct dp_part *p = t->parts[i];
		if (p && (!st_log_idle(p->log) || p->dupwait || p->reads || part_files_busy(p)))
			return false;
	}
	return true;
}

static void topic_del_finish(struct dp_core *c, uint32_t id)
{
	struct dp_topic *t = &c->topics[id];
	struct dp_msg ack = { .type = DP_MSG_TOPIC_DEL_ACK, .ctx = t->del_ctx };
	uint16_t src = t->del_src;
	t->del_wait = false;
	c->ndel_wait--;
	dp_shard_close_topic(c, t, true);
	dp_topic_remove(c, id);
	dp_send(c, src, &ack);
}

int dp_shard_deletes(struct dp_core *c)
{
	int n = 0;
	for (uint32_t id = 0; id < c->topics_end && c->ndel_wait; id++) {
		struct dp_topic *t = &c->topics[id];
		if (t->live && t->del_wait && topic_idle(t)) {
			topic_del_finish(c, id);
			n++;
		}
	}
	return n;
}

static void shard_topic_del(struct dp_core *c, struct dp_msg *m)
{
	struct dp_topic *t = dp_topic_get(c, m->topic_id, m->gen);
	if (!t) {
		struct dp_msg ack = { .type = DP_MSG_TOPIC_DEL_ACK, .ctx = m->ctx, .idx = m->idx };
		dp_send(c, m->src, &ack);
		return;
	}
	assert(!t->del_wait);   /* one delete per topic at a time (control.c) */
	t->deleting = true;
	t->del_wait = true;
	t->del_src = m->src;
	t->del_ctx = m->ctx;
	c->ndel_wait++;
	if (topic_idle(t))
		topic_del_finish(c, m->topic_id);
}

void dp_shard_msg(struct dp_core *c, struct dp_msg *m)
{
	switch (m->type) {
	case DP_MSG_PRODUCE: shard_produce(c, m); return;
	case DP_MSG_FETCH: shard_fetch(c, m); return;
	case DP_MSG_WATCH: shard_watch(c, m); return;
	case DP_MSG_LIST: shard_list(c, m); return;
	case DP_MSG_TOPIC_ADD: {
		int rc = dp_topic_install(c, m->topic_id, m->gen, m->u.topic.name, m->u.topic.name_len,
		                          m->u.topic.nparts);
		int16_t err = rc ? KERR_UNKNOWN_SERVER_ERROR : 0;
		/* A partition that cannot be opened fails the create (the control core takes it back). */
		if (rc == 0 && dp_shard_open_owned(c, &c->topics[m->topic_id], m->topic_id) > 0)
			err = KERR_KAFKA_STORAGE_ERROR;
		struct dp_msg ack = { .type = DP_MSG_TOPIC_ADD_ACK, .ctx = m->ctx, .idx = m->idx, .err = err };
		dp_send(c, m->src, &ack);
		return;
	}
	case DP_MSG_TOPIC_DEL: shard_topic_del(c, m); return;
	default:
		assert(!"not a shard message");
		return;
	}
}

/* ---- transactions on the owner ------------------------------------------------ */

/* An owner's marker append, until durable. The control batch follows the struct. */
struct dp_marker {
	uint8_t kind;             /* DP_COOKIE_MARKER: keep first */
	struct dp_msg req;        /* the request, for the reply */
	struct dp_part *p;
};

static void marker_reply(struct dp_core *c, const struct dp_msg *req, int16_t err)
{
	struct dp_msg out = { .flags = req->flags, .err = err };
	out.u.txn.ptr = req->u.txn.ptr;
	reply(c, req, &out, DP_MSG_TXN_MARKER_DONE);
}

void dp_shard_on_marker(void *cookie, int status)
{
	struct dp_core *c = dp_this_core;
	struct dp_marker *mk = cookie;
	if (status < 0)
		append_failed(c, mk->p, status);
	marker_reply(c, &mk->req, status < 0 ? KERR_KAFKA_STORAGE_ERROR : 0);
	struct dp_part *p = mk->p;
	dp_buf_put(mk);
	if (p->nwaiters)
		wake_waiters(c, p, false);   /* the LSO moved */
}

/* Test only (--fault-marker-fail): answer a marker as a failed write would, with these odds. */
static bool marker_fault(struct dp_core *c)
{
	uint32_t permille = c->b->cfg.fault_marker_fail_permille;
	if (!permille)
		return false;
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 7;
	c->rng ^= c->rng << 17;
	return c->rng % 1000 < permille;
}

/*
 * COMMIT/ABORT for pid on this partition: append the control batch, close
 * the producer's transaction here (the LSO moves past it; an abort enters
 * the aborted index), and withdraw its permission to write transactionally.
 * A marker for a transaction that is not open here (already closed by an
 * earlier marker, or one that never wrote here) writes nothing: re-sending
 * markers after a coordinator crash is harmless.
 */
static void shard_marker(struct dp_core *c, struct dp_msg *m)
{
	struct dp_topic *t;
	struct dp_part *p = part_of(c, m, &t);
	int64_t pid = m->u.txn.pid;
	if (!p) {
		marker_reply(c, m, KERR_UNKNOWN_TOPIC_OR_PARTITION);
		return;
	}
	allow_drop(p, pid);
	if (txn_lso_open_first(p->lso, pid) < 0) {
		marker_reply(c, m, 0);
		return;
	}
	struct txn_producer *pr = txn_pstate_find(p->ps, pid);
	if (pr && m->u.txn.epoch < pr->epoch) {
		marker_reply(c, m, KERR_INVALID_PRODUCER_EPOCH);
		return;
	}
	if (marker_fault(c)) {
		DP_INFO("fault injection: refusing the marker for producer %lld on %s", (long long)pid, p->dir);
		marker_reply(c, m, KERR_KAFKA_STORAGE_ERROR);
		return;
	}
	/*
	 * Both records of the marker must be sure before it is written: the
	 * transaction's end in the index needs no room (its begin reserved the
	 * aborted entry, lso.h), and the producer has an entry (it wrote this
	 * transaction's data here, and expiry keeps a producer with one open).
	 * Should the latter ever fail, the marker is refused, never written
	 * without its records.
	 */
	if (txn_pstate_reserve(p->ps, pid) < 0) {
		DP_ERR("partition %s: marker for producer %lld refused: no producer state entry", p->dir,
		       (long long)pid);
		marker_reply(c, m, KERR_KAFKA_STORAGE_ERROR);
		return;
	}
	struct dp_marker *mk = dp_buf_get(sizeof(*mk) + 128);
	uint8_t *batch = (uint8_t *)(mk + 1);
	mk->kind = DP_COOKIE_MARKER;
	mk->req = *m;
	mk->p = p;
	int n = st_batch_build_marker(batch, 128, pid, m->u.txn.epoch, m->u.txn.commit, m->u.txn.coord_epoch,
	                              dp_wall_ms());
	assert(n > 0);
	int64_t off = st_log_append(p->log, batch, (uint32_t)n, 1, mk);
	if (off < 0) {
		append_failed(c, p, (int)off);
		dp_buf_put(mk);
		marker_reply(c, m, KERR_KAFKA_STORAGE_ERROR);
		return;
	}
	struct st_batch_hdr h;
	st_batch_parse(batch, (size_t)n, &h);
	int rc = txn_pstate_update(p->ps, &h, off, dp_wall_ms());   /* takes the marker's epoch */
	assert(rc == 0);   /* reserved above */
	rc = txn_lso_end(p->lso, pid, off, !m->u.txn.commit);
	assert(rc == 0);   /* open (checked above); an end never needs room */
	(void)rc;
}

static void shard_describe_producers(struct dp_core *c, struct dp_msg *m)
{
	struct dp_msg out = { .flags = m->flags };
	struct DescribeProducersResponse_PartitionResponse *pr = m->u.txn.ptr;
	out.u.txn.ptr = pr;
	struct dp_part *p = part_of(c, m, NULL);
	if (!p) {
		out.err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
	} else {
		uint32_t cur = 0, n = 0;
		struct txn_producer *x;
		while (n < m->u.txn.cap && (x = txn_pstate_next(p->ps, &cur))) {
			struct DescribeProducersResponse_ProducerState *ps = &pr->ActiveProducers[n++];
			ps->ProducerId = x->pid;
			ps->ProducerEpoch = x->epoch;
			ps->LastSequence = x->nbatches ? x->b[x->newest].last_seq : -1;
			ps->LastTimestamp = x->last_timestamp;
			ps->CoordinatorEpoch = x->coordinator_epoch;
			ps->CurrentTxnStartOffset = txn_lso_open_first(p->lso, x->pid);
		}
		out.u.txn.cap = n;
	}
	reply(c, m, &out, DP_MSG_DESCRIBE_PRODUCERS_DONE);
}

void dp_shard_txn_msg(struct dp_core *c, struct dp_msg *m)
{
	switch (m->type) {
	case DP_MSG_TXN_ADD: {
		struct dp_part *p = part_of(c, m, NULL);
		struct dp_msg out = { .err = p ? 0 : KERR_UNKNOWN_TOPIC_OR_PARTITION };
		if (p && allow_set(p, m->u.txn.pid, m->u.txn.epoch) < 0)
			out.err = KERR_UNKNOWN_SERVER_ERROR;
		reply(c, m, &out, DP_MSG_TXN_ADD_ACK);
		return;
	}
	case DP_MSG_TXN_MARKER: shard_marker(c, m); return;
	case DP_MSG_DESCRIBE_PRODUCERS: shard_describe_producers(c, m); return;
	default: assert(!"not a transaction message");
	}
}
