/*
 * shard.c - the owner side of a partition: appends, reads, offsets lookups,
 * high-watermark watches, and opening/closing the partitions a core owns.
 * Locality: shard core (owner).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
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

void dp_shard_on_append(void *cookie, int status, int64_t base_offset)
{
	struct dp_core *c = dp_this_core;
	struct dp_append *a = cookie;
	assert(a->left > 0);
	if (status < 0 && !a->err) {
		DP_ERR_RL("append to partition failed: %s", strerror(-status));
		a->err = KERR_KAFKA_STORAGE_ERROR;
	}
	if (--a->left)
		return;
	/* acks=-1/1: this runs after the fdatasync covering the batch completed. */
	struct dp_msg m = { .type = DP_MSG_PRODUCE_DONE, .err = a->err, .ctx = a->ctx, .idx = a->idx };
	m.u.produce_done.base_offset = a->err ? -1 : a->base_offset;
	m.u.produce_done.log_start = st_log_start_offset(a->part->log);
	m.u.produce_done.out = a->out;
	struct dp_part *p = a->part;
	uint16_t src = a->src;
	append_put(c, a);
	dp_send(c, src, &m);
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
	}
	int64_t off = st_log_append(p->log, b, n, (uint32_t)h->last_offset_delta + 1, a);
	if (off < 0) {
		DP_ERR_RL("append failed: %s", strerror((int)-off));
		return KERR_KAFKA_STORAGE_ERROR;
	}
	a->left++;
	if (a->base_offset < 0)
		a->base_offset = off;
	if (txnl && txn_lso_open_first(p->lso, h->producer_id) < 0 &&
	    txn_lso_begin(p->lso, h->producer_id, off) < 0)
		DP_ERR("transaction index: out of memory");
	if (h->producer_id >= 0 && txn_pstate_update(p->ps, h, off, dp_wall_ms()) < 0)
		DP_ERR("producer state: out of memory");
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
	int64_t end;                  /* the read_committed range ends here (LSO) */
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

/*
 * After the records: for read_committed the aborted transactions that overlap
 * [offset, end) go 8-byte aligned behind them in the same buffer, as
 *   [records: len bytes][pad to 8][u32 count, 4 pad][count x struct txn_aborted]
 * and if they do not fit, the reply asks for a bigger buffer (need). Sends it.
 */
static void fetch_reply(struct dp_core *c, const struct dp_msg *m, struct dp_msg *out, struct dp_part *p,
                        uint32_t len, int64_t end)
{
	uint32_t cap = m->u.fetch.cap;
	if (m->u.fetch.isolation == 1 && !out->err && !out->u.fetch_done.need) {
		uint32_t at = DP_ABORTED_AT(len);
		uint32_t room = cap >= at + 8 ? (cap - at - 8) / (uint32_t)sizeof(struct txn_aborted) : 0;
		struct txn_aborted *list = (struct txn_aborted *)(void *)((uint8_t *)m->u.fetch.buf + at + 8);
		uint32_t n = len ? txn_lso_aborted(p->lso, m->u.fetch.offset, end, list, room) : 0;
		if (cap < at + 8 || n > room)
			out->u.fetch_done.need = at + 8 + (n + 16) * (uint32_t)sizeof(struct txn_aborted);
		else
			memcpy((uint8_t *)m->u.fetch.buf + at, &n, 4);
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
	fetch_reply(c, &rd->req, &rd->out, rd->part, len, rd->end);
	rd->next_free = c->read_free;
	c->read_free = rd;
	c->reads_inflight--;
}

/*
 * Reads whole stored batches into the buffer the NIC core lent; for
 * read_committed the range ends at the LSO. The tail of the log is nearly
 * always in the page cache: a non-blocking preadv2 (RWF_NOWAIT) copies it
 * at once. Bytes that are not cached are read through io_uring instead, so
 * that a consumer catching up from old segments never stalls this core's
 * appends. Only when every cold-read slot is busy does the core read with
 * a blocking pread.
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
	bool committed = m->u.fetch.isolation == 1;
	int64_t hw = st_log_durable_offset(log), start = st_log_start_offset(log);
	int64_t lso = txn_lso_get(p->lso, hw), end = committed ? lso : hw;
	int64_t off = m->u.fetch.offset;
	uint32_t len = 0, cap = m->u.fetch.cap;
	out.u.fetch_done.hw = hw;
	out.u.fetch_done.lso = lso;
	out.u.fetch_done.log_start = start;
	if (off < start || off > st_log_end_offset(log)) {
		out.err = KERR_OFFSET_OUT_OF_RANGE;
	} else if (off < end) {
		int fd;
		uint64_t pos;
		int rc = st_log_locate(log, off, end, m->u.fetch.max_bytes, &fd, &pos, &len);
		if (rc == -ERANGE) {
			out.err = KERR_OFFSET_OUT_OF_RANGE;
		} else if (rc < 0) {
			out.err = KERR_KAFKA_STORAGE_ERROR;
		} else if (len > cap) {
			out.u.fetch_done.need = len + (committed ? 4096 : 0);
		} else if (len) {
			struct iovec iov = { m->u.fetch.buf, len };
			ssize_t got = preadv2(fd, &iov, 1, (off_t)pos, RWF_NOWAIT);
			struct dp_read *rd = got == (ssize_t)len ? NULL : read_get(c);
			if (rd) {
				*rd = (struct dp_read){ .req = *m, .out = out, .part = p, .fd = fd, .pos = pos, .len = len,
				                        .done = got > 0 ? (uint32_t)got : 0, .end = end };
				c->reads_inflight++;
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
	fetch_reply(c, m, &out, p, len, end);
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
	int rc = txn_pstate_create(&p->ps);
	if (rc == 0)
		rc = txn_lso_create(&p->lso);
	if (rc == 0)
		rc = txn_lso_open_index(p->lso, p->dir, st_log_end_offset(p->log));
	return rc < 0 ? rc : txn_pstate_recover(p->ps, p->lso, p->log, p->dir, &p->snap_offset);
}

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

static void part_free(struct dp_part *p)
{
	if (p->ps)
		txn_pstate_destroy(p->ps);
	if (p->lso) {
		txn_lso_close_index(p->lso);
		txn_lso_destroy(p->lso);
	}
	free(p->allow);
	free(p->dir);
	free(p);
}

/* Open (creating or recovering) every partition of t that this core owns. */
void dp_shard_open_owned(struct dp_core *c, struct dp_topic *t, uint32_t id)
{
	const struct dp_config *cfg = &c->b->cfg;
	struct st_log_config lc = {
		.segment_bytes = cfg->segment_bytes,
		.retention_bytes = cfg->retention_bytes,
		.retention_ms = cfg->retention_ms,
		.index_interval_bytes = 4096,
	};
	for (int32_t i = 0; i < t->nparts; i++) {
		if (dp_owner_core(c->b, t->hash, i) != c->id)
			continue;
		char dir[1024];
		dp_partition_dir(cfg, dir, sizeof(dir), t->name, t->name_len, i);
		struct dp_part *p = calloc(1, sizeof(*p));
		int rc = p && (p->dir = strdup(dir)) ? st_log_open(c->io, dir, &lc, &p->log) : -ENOMEM;
		if (rc == 0) {
			rc = recover_producers(p);
			if (rc < 0)
				st_log_close(p->log);
		}
		if (rc < 0) {
			/* The partition stays offline (requests get errors); others go on. */
			DP_ERR("partition %s/%d: cannot open %s: %s", t->name, i, dir, strerror(-rc));
			if (p)
				part_free(p);
			continue;
		}
		t->parts[i] = p;
		DP_INFO("partition %s/%d opened on core %d: log start %lld, end %lld, %u producers "
		        "(snapshot at %lld)", t->name, i, c->id, (long long)st_log_start_offset(p->log),
		        (long long)st_log_end_offset(p->log), txn_pstate_count(p->ps), (long long)p->snap_offset);
	}
	(void)id;
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

/* Owner timer: retention, producer snapshots, expired watches, waiting duplicates. */
void dp_shard_timer(struct dp_core *c)
{
	/* Retention may close a segment a cold read still names by its fd: it waits for them. */
	bool retain = c->now_ms >= c->next_retention_ms && !c->reads_inflight;
	if (retain)
		c->next_retention_ms = c->now_ms + 30000;
	bool snap = c->now_ms >= c->next_snapshot_ms;
	if (snap)
		c->next_snapshot_ms = c->now_ms + c->b->cfg.producer_snapshot_ms;
	for (uint32_t id = 0; id < c->topics_end; id++) {
		struct dp_topic *t = &c->topics[id];
		if (!t->live || t->deleting)
			continue;
		for (int32_t i = 0; i < t->nparts; i++) {
			struct dp_part *p = t->parts[i];
			if (!p)
				continue;
			if (p->nwaiters)
				wake_waiters(c, p, false);
			if (p->dupwait)
				dupwait_check(p);
			if (snap)
				snapshot_producers(c, p);
			if (retain && st_log_retain(p->log, dp_wall_ms()) > 0) {
				txn_lso_trim(p->lso, st_log_start_offset(p->log));
				txn_lso_compact_index(p->lso);
				DP_INFO("partition %s/%d: retention moved log start to %lld", t->name, i,
				        (long long)st_log_start_offset(p->log));
			}
		}
	}
}

/*
 * Topic deletion waits until this core has no append in flight, so no
 * completion can refer to a closed log; new produces are refused meanwhile.
 */
static bool shard_topic_del(struct dp_core *c, struct dp_msg *m)
{
	struct dp_topic *t = dp_topic_get(c, m->topic_id, m->gen);
	if (t) {
		t->deleting = true;
		if (st_io_pending(c->io) || c->reads_inflight)
			return false;
		dp_shard_close_topic(c, t, true);
		dp_topic_remove(c, m->topic_id);
	}
	struct dp_msg ack = { .type = DP_MSG_TOPIC_DEL_ACK, .ctx = m->ctx, .idx = m->idx };
	dp_send(c, m->src, &ack);
	return true;
}

/* Returns false if the message must be retried later (kept by the caller). */
bool dp_shard_msg(struct dp_core *c, struct dp_msg *m)
{
	switch (m->type) {
	case DP_MSG_PRODUCE: shard_produce(c, m); return true;
	case DP_MSG_FETCH: shard_fetch(c, m); return true;
	case DP_MSG_WATCH: shard_watch(c, m); return true;
	case DP_MSG_LIST: shard_list(c, m); return true;
	case DP_MSG_TOPIC_ADD: {
		int rc = dp_topic_install(c, m->topic_id, m->gen, m->u.topic.name, m->u.topic.name_len,
		                          m->u.topic.nparts);
		if (rc == 0)
			dp_shard_open_owned(c, &c->topics[m->topic_id], m->topic_id);
		struct dp_msg ack = { .type = DP_MSG_TOPIC_ADD_ACK, .ctx = m->ctx, .idx = m->idx,
		                      .err = rc ? KERR_UNKNOWN_SERVER_ERROR : 0 };
		dp_send(c, m->src, &ack);
		return true;
	}
	case DP_MSG_TOPIC_DEL: return shard_topic_del(c, m);
	default:
		assert(!"not a shard message");
		return true;
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
		DP_ERR_RL("marker append failed: %s", strerror(-status));
	marker_reply(c, &mk->req, status < 0 ? KERR_KAFKA_STORAGE_ERROR : 0);
	struct dp_part *p = mk->p;
	dp_buf_put(mk);
	if (p->nwaiters)
		wake_waiters(c, p, false);   /* the LSO moved */
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
		DP_ERR_RL("marker append failed: %s", strerror((int)-off));
		dp_buf_put(mk);
		marker_reply(c, m, KERR_KAFKA_STORAGE_ERROR);
		return;
	}
	struct st_batch_hdr h;
	st_batch_parse(batch, (size_t)n, &h);
	txn_pstate_update(p->ps, &h, off, dp_wall_ms());   /* takes the marker's epoch */
	txn_lso_end(p->lso, pid, off, !m->u.txn.commit);
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
