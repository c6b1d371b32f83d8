/*
 * read.c - the owner side of a fetch: reads of stored batches into the
 * buffer the connection's core lent (from the page cache, or cold through
 * the core's io_uring), high-watermark watches of parked fetches, and
 * ListOffsets lookups. Moved from shard.c unchanged. Locality: shard core
 * (owner).
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
#include "codec.h"
#include "fs.h"
#include "kerr.h"
#include "log.h"
#include "lso.h"
#include "pstate.h"
#include "shard_internal.h"
#include "seam.h"


/*
 * A cold fetch read: the page cache did not hold the bytes, so they are read
 * through the core's io_uring and the fetch is answered on completion; the
 * core goes on serving other partitions meanwhile. Or a warm read (warm): a
 * lookup (st_log_*_nowait) met a batch header not in the page cache, so the
 * bytes from there are read the same way, into the core's sink, and the
 * request runs again on completion. Locality: owner core.
 */
struct dp_read {
	_Alignas(16) struct dp_read *next_free;   /* 16: the low bits of its address carry DP_READ_TAG */
	struct dp_msg req;            /* the fetch, for the reply */
	struct dp_msg out;            /* the reply, filled up to the read */
	struct dp_part *part;         /* safe: deletes and retention wait for reads_inflight 0 */
	int fd;
	uint64_t pos;
	uint32_t len, done;
	bool one_batch;               /* read_committed: the first batch alone (fetch_reply) */
	bool warm;                    /* a lookup's warm read: resume(req) on completion */
	uint8_t warms;                /* warm reads this request waited for, this one included */
	lookup_resume_fn resume;
};

_Static_assert(DP_LOOKUP_WARMS_MAX <= UINT8_MAX, "dp_read.warms holds the count");
_Static_assert(DP_LIST_PART_WORK_BYTES_MAX <= ST_BATCH_DECOMPRESSED_BYTES_MAX, "a lookup decompresses within the codec's bound");
_Static_assert(DP_LIST_BATCH_BYTES_MAX <= DP_LIST_PART_WORK_BYTES_MAX, "a lone lookup may read a whole buffer");

/*
 * The core's DP_READS_MAX read slots (fewer free with --test-reads-max) and,
 * behind them, the warm-read sink: where warm reads put their bytes (only
 * their effect on the page cache matters, so the core's reads share it:
 * nothing reads it back), ListOffsets' batch buffer, and the
 * DP_READ_WAITS_MAX requests that may wait for a slot. One block, allocated
 * at the shard's start (shard_role.c), never on the data path.
 */
unsigned long long dp_shard_reads_bytes(void)
{
	return (unsigned long long)DP_READS_MAX * sizeof(struct dp_read) + ST_LOG_WARM_BYTES + DP_LIST_BATCH_BYTES_MAX +
	       (unsigned long long)DP_READ_WAITS_MAX * sizeof(struct dp_read_wait);
}

static uint8_t *warm_sink(struct dp_core *c) { return (uint8_t *)(c->reads + DP_READS_MAX); }
/* ListOffsets' batch buffer: read and walked within one call (list_in_batch), so one per core. */
static uint8_t *list_buf(struct dp_core *c) { return warm_sink(c) + ST_LOG_WARM_BYTES; }

_Static_assert((ST_LOG_WARM_BYTES + DP_LIST_BATCH_BYTES_MAX) % _Alignof(struct dp_read_wait) == 0,
               "the wait queue behind the buffers is aligned");

int dp_shard_reads_create(struct dp_core *c)
{
	if (!(c->reads = calloc(1, (size_t)dp_shard_reads_bytes())))
		return -ENOMEM;
	c->read_waits = (struct dp_read_waits){ .v = (struct dp_read_wait *)(void *)(list_buf(c) + DP_LIST_BATCH_BYTES_MAX),
	                                        .cap = DP_READ_WAITS_MAX };
	uint32_t slots = c->b->cfg.test_reads_max ? c->b->cfg.test_reads_max : DP_READS_MAX;
	for (int i = (int)slots; i-- > 0;) {
		c->reads[i].next_free = c->read_free;
		c->read_free = &c->reads[i];
	}
	return 0;
}

void dp_shard_reads_destroy(struct dp_core *c)
{
	free(c->reads);
	c->reads = NULL;
	c->read_free = NULL;
	c->read_waits = (struct dp_read_waits){ 0 };
}

static struct dp_read *read_get(struct dp_core *c)
{
	struct dp_read *rd = c->read_free;
	if (rd)
		c->read_free = rd->next_free;
	return rd;
}

static void read_put(struct dp_core *c, struct dp_read *rd)
{
	rd->part->reads--;
	rd->next_free = c->read_free;
	c->read_free = rd;
	c->reads_inflight--;
}

/*
 * No read slot is free: m waits in the core's FIFO and runs again,
 * resume(m, warms), when a slot is given back (read_waits_run). With the
 * queue full (DP_READ_WAITS_MAX, dp_limits.h) it is answered retriable at
 * once instead: never a blocking read.
 */
static void read_wait(struct dp_core *c, const struct dp_msg *m, unsigned warms, lookup_resume_fn resume)
{
	struct dp_read_wait w = { .req = *m, .resume = resume, .warms = (uint8_t)warms };
	if (dp_read_wait_push(&c->read_waits, &w)) {
		c->read_waited++;
		return;
	}
	c->read_waits_refused++;
	DP_ERR_RL("%s: every read slot busy and %u requests waiting: answered retriable",
	          m->type == DP_MSG_FETCH ? "fetch" : "list offsets", c->read_waits.n);
	struct dp_msg out = { 0 };
	if (m->type == DP_MSG_FETCH) {
		out.err = KERR_KAFKA_STORAGE_ERROR;   /* as for a buffer not lent (conn/fetch.c) */
		out.u.fetch_done.hw = out.u.fetch_done.lso = out.u.fetch_done.log_start = -1;
		reply(c, m, &out, DP_MSG_FETCH_DONE);
	} else {
		assert(m->type == DP_MSG_LIST);
		out.err = KERR_LEADER_NOT_AVAILABLE;  /* as for no credit toward the owner (conn/fetch.c) */
		out.u.list_done.out = m->u.list.out;
		out.u.list_done.offset = out.u.list_done.timestamp = -1;
		reply(c, m, &out, DP_MSG_LIST_DONE);
	}
}

/* A slot was given back: the oldest waiting requests run again while slots are free (one that
 * finds none queues again, at the back, and ends this). */
static void read_waits_run(struct dp_core *c)
{
	struct dp_read_wait w;
	while (c->read_free && dp_read_wait_pop(&c->read_waits, &w))
		w.resume(c, &w.req, w.warms);
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
	uint8_t *dst = rd->warm ? warm_sink(c) : (uint8_t *)rd->req.u.fetch.buf + rd->done;
	dp_seam_prep_read(c, rd->fd, dst, rd->len - rd->done, rd->pos + rd->done, (uint64_t)(uintptr_t)rd | DP_READ_TAG);
}

void dp_shard_read_complete(struct dp_core *c, const struct io_uring_cqe *cqe)
{
	struct dp_read *rd = (struct dp_read *)(uintptr_t)(cqe->user_data & ~(uint64_t)0xf);
	if (rd->warm) {
		/* Whatever it read is cached now (a short or failed read too: the lookup meets the
		 * rest, or the error, again, and after DP_LOOKUP_WARMS_MAX reads it synchronously). */
		struct dp_msg req = rd->req;
		unsigned warms = rd->warms;
		lookup_resume_fn resume = rd->resume;
		if (cqe->res < 0)
			DP_ERR_RL("lookup read failed: %s", strerror(-cqe->res));
		read_put(c, rd);
		resume(c, &req, warms);
		read_waits_run(c);
		return;
	}
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
	read_put(c, rd);
	read_waits_run(c);
}

/*
 * A lookup met a batch header outside the page cache: read [pos, pos + len) of
 * fd through the ring and run the request again on completion (true); with no
 * slot free the request waits for one, or is answered retriable with the wait
 * queue full (read_wait; true as well: it is taken care of). false: this
 * request already waited DP_LOOKUP_WARMS_MAX times (its pages keep leaving
 * the cache), or wait is false and no slot is free: the caller goes on
 * without (a blocking lookup is counted in blocking_reads).
 */
static bool lookup_warm(struct dp_core *c, struct dp_msg *m, struct dp_part *p, int fd, uint64_t pos,
                        uint32_t len, unsigned warms, lookup_resume_fn resume, bool wait)
{
	if (warms >= DP_LOOKUP_WARMS_MAX || !len)
		return false;
	struct dp_read *rd = read_get(c);
	if (!rd) {
		if (wait)
			read_wait(c, m, warms, resume);
		return wait;
	}
	*rd = (struct dp_read){ .req = *m, .part = p, .fd = fd, .pos = pos, .len = len, .warm = true,
	                        .warms = (uint8_t)(warms + 1), .resume = resume };
	c->reads_inflight++;
	p->reads++;
	c->cold_lookups++;
	read_submit(c, rd);
	return true;
}

static void fetch_run(struct dp_core *c, struct dp_msg *m, unsigned warms);

/*
 * st_log_locate from the page cache; 1: the request waits for a warm read
 * (lookup_warm). A range that stopped before a header not in the page cache
 * (ST_LOG_LOCATE_COLD) brings the bytes from there in and runs again, so that
 * the answer is what Kafka sends whatever the page cache holds; after
 * DP_LOOKUP_WARMS_MAX warm reads, or with no slot free, the range goes as it
 * is (the next fetch starts after it): never a blocking read for more. A
 * lookup whose first header is not cached waits for a slot (lookup_warm);
 * only once its warm reads are spent does it read with blocking reads,
 * counted (blocking_reads).
 */
static int fetch_locate(struct dp_core *c, struct dp_msg *m, struct dp_part *p, int64_t off, int64_t limit,
                        uint32_t max_bytes, int *fd, uint64_t *pos, uint32_t *len, unsigned warms)
{
	int rc = st_log_locate_nowait(p->log, off, limit, max_bytes, fd, pos, len);
	if (rc == ST_LOG_LOCATE_COLD) {
		uint32_t room = max_bytes - *len;   /* more than a header: log.h */
		if (lookup_warm(c, m, p, *fd, *pos + *len, room < ST_LOG_WARM_BYTES ? room : ST_LOG_WARM_BYTES, warms,
		                fetch_run, false)) {
			c->cold_extends++;
			return 1;
		}
		return 0;
	}
	if (rc != -EAGAIN)
		return rc;
	if (lookup_warm(c, m, p, *fd, *pos, *len, warms, fetch_run, true))
		return 1;
	c->blocking_reads++;
	return st_log_locate(p->log, off, limit, max_bytes, fd, pos, len);
}

/*
 * Reads whole stored batches, at most max_bytes of them (the first batch
 * whole past that only with min_one), into the buffer the NIC core lent; for
 * read_committed the range ends at the LSO, and sooner where more than
 * DP_FETCH_ABORTED_MAX aborted transactions would overlap it. The tail of
 * the log is nearly always in the page cache: a non-blocking preadv2
 * (RWF_NOWAIT) copies it at once. Bytes that are not cached are read through
 * io_uring instead, so that a consumer catching up from old segments never
 * stalls this core's appends; when every read slot is busy the fetch waits for
 * one (read_wait) and runs again. Finding the range reads batch headers the
 * same way: from the page cache, else a warm read and the fetch runs again
 * (fetch_locate). warms: the warm reads it waited for so far.
 */
void shard_fetch(struct dp_core *c, struct dp_msg *m) { fetch_run(c, m, 0); }

static void fetch_run(struct dp_core *c, struct dp_msg *m, unsigned warms)
{
	struct dp_msg out = { 0 };
	struct dp_part *p = part_of(c, m, NULL);
	if (!p) {
		out.err = part_absent_err(c, m);
		reply(c, m, &out, DP_MSG_FETCH_DONE);
		return;
	}
	struct st_log *log = p->log;
	bool committed = m->u.fetch.isolation == 1, one_batch = false;
	int64_t hw = st_log_durable_offset(log), start = st_log_start_offset(log);
	int64_t lso = dp_part_lso(p, hw), end = committed ? lso : hw;
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
		int rc = limit > off ? fetch_locate(c, m, p, off, limit, m->u.fetch.max_bytes, &fd, &pos, &len, warms) : 0;
		if (rc == 1)
			return;   /* runs again when its warm read completes */
		if (rc == 0 && len == 0 && limit < end) {
			/* The first batch reaches past the bound: it goes alone (fetch_reply). */
			if ((rc = fetch_locate(c, m, p, off, end, 0, &fd, &pos, &len, warms)) == 1)
				return;
			one_batch = true;
			c->aborted_one_batch_reads++;
		}
		c->aborted_cut_reads += limit < end;
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
			if (got != (ssize_t)len && !rd) {
				read_wait(c, m, warms, fetch_run);   /* runs again when a slot is free */
				return;
			}
			if (rd) {
				*rd = (struct dp_read){ .req = *m, .out = out, .part = p, .fd = fd, .pos = pos, .len = len,
				                        .done = got > 0 ? (uint32_t)got : 0, .one_batch = one_batch };
				c->reads_inflight++;
				p->reads++;
				c->cold_reads++;
				read_submit(c, rd);
				return;
			}
		}
	}
	fetch_reply(c, m, &out, p, len, one_batch);
}

void shard_watch(struct dp_core *c, struct dp_msg *m)
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
			p->waiters[i] = (struct dp_waiter){ .core = m->src, .reply = m->reply, .gen = m->gen, .ctx = m->ctx,
			                                    .offset = m->u.watch.offset,
			                                    .deadline_ms = m->u.watch.deadline_ms,
			                                    .isolation = m->u.watch.isolation };
	}
	if (now) {
		struct dp_msg f = { .type = DP_MSG_WATCH_FIRE, .ctx = m->ctx, .gen = m->gen };
		dp_answer(c, m, &f);
	}
}

static void list_run(struct dp_core *c, struct dp_msg *m, unsigned warms);

void shard_list(struct dp_core *c, struct dp_msg *m) { list_run(c, m, 0); }

/*
 * The record Kafka answers for ListOffsets by time in the batch the time index found (its
 * LogSegment.findOffsetByTimestamp): the first whose timestamp is >= ts, with that timestamp; in a
 * LogAppendTime batch every record bears the batch's maxTimestamp, so the first one. The batch is
 * read as a lookup reads headers: from the page cache, else a warm read of it and the request runs
 * again (1), waiting for a slot if none is free, with blocking reads (counted) only once
 * its warm reads are spent or the file system has no non-blocking read (lookup_warm). A batch over
 * DP_LIST_BATCH_BYTES_MAX or over the request's share of work (work_max: bytes read, and bytes
 * decompressed, dp_limits.h), one that no longer reads back whole with its CRC, or one whose
 * records do not bear out its maxTimestamp is answered by its header.
 */
static int list_in_batch(struct dp_core *c, struct dp_msg *m, struct dp_part *p, const struct st_time_hit *hit,
                         int64_t ts, unsigned warms, int64_t *offset, int64_t *timestamp)
{
	const struct st_batch_hdr *h = &hit->h;
	*offset = h->base_offset;
	*timestamp = h->max_timestamp;
	uint32_t work = m->u.list.work_max;
	if ((h->attributes & ST_BATCH_ATTR_TIMESTAMP_TYPE) || hit->len > DP_LIST_BATCH_BYTES_MAX || hit->len > work)
		return 0;
	uint8_t *buf = list_buf(c);
	ssize_t n = st_fs_pread_nowait(hit->fd, buf, hit->len, (off_t)hit->pos);
	bool nowait_unsupported = n < 0 && errno == EOPNOTSUPP;
	if (n < 0 && errno != EAGAIN && !nowait_unsupported) {
		DP_ERR_RL("list offsets: batch read failed: %s", strerror(errno));
		return 0;
	}
	if (n < (ssize_t)hit->len && !nowait_unsupported) {
		uint32_t done = n > 0 ? (uint32_t)n : 0, left = hit->len - done;
		if (lookup_warm(c, m, p, hit->fd, hit->pos + done, left < ST_LOG_WARM_BYTES ? left : ST_LOG_WARM_BYTES,
		                warms, list_run, true))
			return 1;
	}
	if (n < (ssize_t)hit->len) {
		c->blocking_reads++;
		size_t got = 0;
		while (got < hit->len) {
			ssize_t r = st_fs_pread(hit->fd, buf + got, hit->len - got, (off_t)(hit->pos + got));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				DP_ERR_RL("list offsets: batch read failed: %s", r < 0 ? strerror(errno) : "end of file");
				return 0;
			}
			got += (size_t)r;
		}
	}
	struct st_batch_hdr bh;
	if (st_batch_parse(buf, hit->len, &bh) != (int)hit->len || bh.base_offset != h->base_offset ||
	    !st_batch_crc_ok(buf, hit->len)) {
		DP_ERR_RL("list offsets: the batch at offset %lld does not read back whole", (long long)h->base_offset);
		return 0;
	}
	int32_t delta;
	int64_t rts;
	int rc = st_codec_find_time(c->codec, buf, hit->len, &bh, ts, work, &delta, &rts);
	if (rc == 0) {
		*offset = h->base_offset + delta;
		*timestamp = rts;
	} else if (rc != -ENOENT && rc != -EMSGSIZE) {   /* -EMSGSIZE: past the request's share */
		DP_ERR_RL("list offsets: the records of the batch at offset %lld: %s", (long long)h->base_offset,
		          strerror(-rc));
	}
	return 0;
}

/* ListOffsets of one partition; a lookup by time reads headers as fetch_locate does, then the batch. */
static void list_run(struct dp_core *c, struct dp_msg *m, unsigned warms)
{
	struct dp_msg out = { 0 };
	out.u.list_done.out = m->u.list.out;
	struct dp_part *p = part_of(c, m, NULL);
	if (!p) {
		out.err = part_absent_err(c, m);
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
		struct st_time_hit hit;
		int fd;
		uint64_t pos;
		uint32_t len;
		if (st_log_batch_for_time_nowait(p->log, ts, &hit, &fd, &pos, &len) == -EAGAIN) {
			if (lookup_warm(c, m, p, fd, pos, len, warms, list_run, true))
				return;   /* runs again when its warm read completes */
			c->blocking_reads++;
			st_log_batch_for_time(p->log, ts, &hit);
		}
		out.u.list_done.offset = -1;                      /* -1: no record that late */
		if (hit.found && hit.h.base_offset < hw) {
			int64_t off, rts;
			if (list_in_batch(c, m, p, &hit, ts, warms, &off, &rts))
				return;   /* runs again when its warm read completes */
			if (off < st_log_start_offset(p->log)) {
				/* A batch straddling the log start (DeleteRecords): the answer is never below it. */
				off = st_log_start_offset(p->log);
				rts = hit.h.max_timestamp;
			}
			out.u.list_done.offset = off;
			out.u.list_done.timestamp = rts;
		}
	}
	reply(c, m, &out, DP_MSG_LIST_DONE);
}
