/*
 * shard.c - the owner side of a partition: the owner's messages, produce
 * validation and appends (producer state, duplicates, the transaction
 * allow-list), transaction markers, and the helpers the other shard files
 * share (read.c: fetch reads and watches; partition.c: opening, closing,
 * the timer, topic deletes). Locality: shard core (owner).
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
#include "shard_internal.h"


/* From the core's pool of b->appends_max (allocated at start-up, shard_role.c, dp_limits.h); NULL when empty. */
static struct dp_append *append_get(struct dp_core *c)
{
	if (!c->append_free)
		return NULL;
	struct dp_append *a = c->append_free;
	c->append_free = a->next_free;
	memset(a, 0, sizeof(*a));
	return a;
}

static void append_put(struct dp_core *c, struct dp_append *a)
{
	a->next_free = c->append_free;
	c->append_free = a;
}

struct dp_part *part_of(struct dp_core *c, const struct dp_msg *m, struct dp_topic **tp)
{
	struct dp_topic *t = dp_topic_get(c, m->topic_id, m->gen);
	if (tp)
		*tp = t;
	if (!t || m->partition < 0 || m->partition >= t->nparts)
		return NULL;
	return t->parts[m->partition];
}

/*
 * The error for a message whose partition part_of did not find. The empty
 * slot of a partition this core owns, of a topic still there, is one whose
 * log could not be opened at start-up: offline until a restart opens it
 * (KAFKA_STORAGE_ERROR, retriable, as Kafka answers for a partition on a
 * failed log directory), not gone. The coordinator takes a marker answered
 * UNKNOWN_TOPIC_OR_PARTITION as done (the topic was deleted); so answered,
 * a transaction ended without its marker there, and the open transaction
 * the log held when it opened at the next start kept the LSO for good
 * (wsim seed 142; 828 and 2688 before the code under them changed).
 */
int16_t part_absent_err(struct dp_core *c, const struct dp_msg *m)
{
	struct dp_topic *t = dp_topic_get(c, m->topic_id, m->gen);
	bool owned = t && !t->deleting && m->partition >= 0 && m->partition < t->nparts &&
	             dp_owner_core(c->b, t->hash, m->partition) == c->id;
	return owned ? KERR_KAFKA_STORAGE_ERROR : KERR_UNKNOWN_TOPIC_OR_PARTITION;
}

void reply(struct dp_core *c, const struct dp_msg *req, struct dp_msg *m, uint16_t type)
{
	m->type = type;
	m->ctx = req->ctx;
	m->idx = req->idx;
	m->gen = req->gen;
	m->topic_id = req->topic_id;
	m->partition = req->partition;
	dp_answer(c, req, m);
}

/* Tell parked fetches whose offset is now below the high watermark. */
/* What a fetch may read up to: the high watermark, or for read_committed the LSO. */
int64_t readable_end(const struct dp_part *p, int8_t isolation)
{
	int64_t hw = st_log_durable_offset(p->log);
	return isolation == 1 ? dp_part_lso(p, hw) : hw;
}

void wake_waiters(struct dp_core *c, struct dp_part *p, bool all)
{
	uint32_t keep = 0;
	for (uint32_t i = 0; i < p->nwaiters; i++) {
		struct dp_waiter *w = &p->waiters[i];
		if (all || readable_end(p, w->isolation) > w->offset) {
			struct dp_msg m = { .type = DP_MSG_WATCH_FIRE, .fn = w->reply, .flags = DP_F_ADVISORY, .ctx = w->ctx,
			                    .gen = w->gen };
			dp_send(c, w->core, &m);
		} else if (w->deadline_ms > c->now_ms) {
			p->waiters[keep++] = *w;
		}
	}
	p->nwaiters = keep;
}

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
	struct dp_core *c = dp_core_self();
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
	dp_msg_fn fn = a->reply;
	append_put(c, a);
	dp_answer_to(c, src, fn, &m);
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

void dupwait_check(struct dp_part *p)
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

/*
 * A partition's grants: a list (as many as transactions open here, a few
 * at a time in practice) of entries from the core's pool of
 * b->txn_allows_max, allocated at start-up (shard_role.c); nothing is
 * allocated here.
 */
static struct dp_txn_allow *allow_find(const struct dp_part *p, int64_t pid)
{
	for (struct dp_txn_allow *g = p->allow; g; g = g->next)
		if (g->pid == pid)
			return g;
	return NULL;
}

/* -ENOSPC: the core's pool is empty (the coordinator answers its client retriably). */
static int allow_set(struct dp_core *c, struct dp_part *p, int64_t pid, int16_t epoch, int32_t after)
{
	struct dp_txn_allow *old = allow_find(p, pid);
	if (old) {
		old->epoch = epoch;
		old->after = after;
		return 0;
	}
	struct dp_txn_allow *g = c->allow_free;
	if (!g) {
		c->allows_refused++;
		DP_WARN_RL("partition %s: transaction grant pool full (%u per core): AddPartitionsToTxn answered "
		           "retriably (%llu refused on this core so far)", p->dir, c->b->txn_allows_max,
		           (unsigned long long)c->allows_refused);
		return -ENOSPC;
	}
	c->allow_free = g->next;
	*g = (struct dp_txn_allow){ .pid = pid, .epoch = epoch, .after = after, .next = p->allow };
	p->allow = g;
	return 0;
}

static void allow_drop(struct dp_core *c, struct dp_part *p, int64_t pid)
{
	for (struct dp_txn_allow **gp = &p->allow; *gp; gp = &(*gp)->next)
		if ((*gp)->pid == pid) {
			struct dp_txn_allow *g = *gp;
			*gp = g->next;
			g->next = c->allow_free;
			c->allow_free = g;
			return;
		}
}

/*
 * Has this partition recorded the producer's decision serial `after`, the
 * one a grant of the next transaction must follow (DP_F_TXN_AFTER)? The
 * coordinator serves a producer's next AddPartitionsToTxn once the last
 * transaction's markers are sent, before they are durable (txncoord.c
 * next_granted); the grant comes behind the marker on this core's ring, and
 * the next transaction's batches go into the log behind it. Where the
 * marker was refused (offline, no memory), or lost after its write failed
 * (the log cut at its durable end, part_probe), the decision is not
 * recorded here, the last transaction's data may be open still, and the
 * next one's batches must wait for the marker, sent again.
 */
static bool decided_here(const struct dp_part *p, int64_t pid, int32_t after)
{
	const struct txn_producer *pr = after > 0 ? txn_pstate_find(p->ps, pid) : NULL;
	return after <= 0 || (pr && pr->coordinator_epoch == after);
}

void dp_shard_allow_clear(struct dp_core *c, struct dp_part *p)
{
	while (p->allow) {
		struct dp_txn_allow *g = p->allow;
		p->allow = g->next;
		g->next = c->allow_free;
		c->allow_free = g;
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
			return KERR_NONE;
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
		 * Until the coordinator has reconciled after a start (txn_reconciled),
		 * the grants of the transactions open across it are still to come:
		 * such a batch is told to come back (retriable), not failed.
		 */
		const struct dp_txn_allow *g = txnl ? allow_find(p, h->producer_id) : NULL;
		if (txnl && (!g || g->epoch != h->producer_epoch))
			return c->txn_reconciled ? KERR_INVALID_TXN_STATE : KERR_NOT_ENOUGH_REPLICAS;
		/* A grant of the next transaction whose last decision is not recorded here (its
		 * marker lost with a failed write): told to come back until the marker is written. */
		if (txnl && !decided_here(p, h->producer_id, g->after))
			return KERR_NOT_ENOUGH_REPLICAS;
		/*
		 * This producer's last marker here may be written and not yet
		 * durable: that transaction is closing (txn_lso_close), and a batch
		 * of its next one opens a new entry beside it, the old one holding
		 * the LSO until its marker is durable (dp_shard_on_marker).
		 */
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
	int64_t off = st_log_append_cb(p->log, b, n, (uint32_t)h->last_offset_delta + 1, dp_shard_on_append, a);
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
	return KERR_NONE;
}

static void shard_produce(struct dp_core *c, struct dp_msg *m)
{
	struct dp_topic *t;
	struct dp_part *p = part_of(c, m, &t);
	struct dp_msg out = { 0 };
	out.u.produce_done.out = m->u.produce.out;
	if (!p || t->deleting) {
		out.err = p ? KERR_UNKNOWN_TOPIC_OR_PARTITION : part_absent_err(c, m);
		reply(c, m, &out, DP_MSG_PRODUCE_DONE);
		return;
	}
	struct dp_append *a = append_get(c);
	if (!a) {
		/* Every append record in use: not written, retriable (the pool is
		 * fixed, DP_APPENDS_MAX; appends in flight give theirs back). */
		c->appends_refused++;
		DP_WARN_RL("partition %s: no append record free (%u in use): batch refused, retriable "
		           "(%llu refused on this core so far)", p->dir, c->b->appends_max,
		           (unsigned long long)c->appends_refused);
		out.err = KERR_NOT_ENOUGH_REPLICAS;
		reply(c, m, &out, DP_MSG_PRODUCE_DONE);
		return;
	}
	a->src = m->src;
	a->reply = m->reply;
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

void dp_shard_msg(struct dp_core *c, struct dp_msg *m)
{
	switch (m->type) {
	case DP_MSG_PRODUCE: shard_produce(c, m); return;
	case DP_MSG_FETCH: shard_fetch(c, m); return;
	case DP_MSG_WATCH: shard_watch(c, m); return;
	case DP_MSG_LIST: shard_list(c, m); return;
	case DP_MSG_DELREC: shard_delete_records(c, m); return;
	case DP_MSG_TOPIC_ADD: {
		int rc = dp_topic_install(c, m->topic_id, m->gen, m->u.topic.name, m->u.topic.name_len,
		                          m->u.topic.conf, m->u.topic.nparts);
		int16_t err = rc ? KERR_UNKNOWN_SERVER_ERROR : 0;
		/* A partition that cannot be opened fails the create (the control core takes it back). */
		if (rc == 0 && dp_shard_open_owned(c, &c->topics[m->topic_id], m->topic_id, 0) > 0)
			err = KERR_KAFKA_STORAGE_ERROR;
		struct dp_msg ack = { .type = DP_MSG_TOPIC_ADD_ACK, .ctx = m->ctx, .idx = m->idx, .err = err };
		dp_answer(c, m, &ack);
		return;
	}
	case DP_MSG_TOPIC_DEL: shard_topic_del(c, m); return;
	case DP_MSG_TOPIC_CONF: {
		/* This core's copy takes the altered configs; its open logs their retention (part_log_config). */
		struct dp_topic *t = dp_topic_get(c, m->topic_id, m->gen);
		/* It cannot fail (no allocation): every core takes the alter, or (deleted) none has the topic. */
		int16_t err = !t ? KERR_UNKNOWN_TOPIC_OR_PARTITION : KERR_NONE;
		if (t)
			dp_topic_set_conf(c, t, m->u.topic.conf);
		for (int32_t i = 0; t && !err && i < t->nparts; i++)
			if (t->parts[i] && t->parts[i]->log)
				st_log_set_retention(t->parts[i]->log,
				                     t->conf.set & DP_TC_RETENTION_BYTES ? t->conf.retention_bytes : c->b->cfg.retention_bytes,
				                     t->conf.set & DP_TC_RETENTION_MS ? t->conf.retention_ms : c->b->cfg.retention_ms);
		struct dp_msg ack = { .type = DP_MSG_TOPIC_CONF_ACK, .ctx = m->ctx, .idx = m->idx, .err = err };
		dp_answer(c, m, &ack);
		return;
	}
	case DP_MSG_TOPIC_GROW: {
		/* Only the new partitions are opened: the old ones carry on, with their I/O in flight. */
		struct dp_topic *t = dp_topic_get(c, m->topic_id, m->gen);
		int32_t first = t ? t->nparts : 0;
		int rc = dp_topic_grow(c, m->topic_id, m->gen, m->u.topic.nparts);
		int16_t err = rc == -ENOENT ? KERR_UNKNOWN_TOPIC_OR_PARTITION : rc ? KERR_UNKNOWN_SERVER_ERROR : 0;
		/* A new partition that cannot be opened stays offline, as at start-up; the answer says so. */
		if (rc == 0 && dp_shard_open_owned(c, t, m->topic_id, first) > 0)
			err = KERR_KAFKA_STORAGE_ERROR;
		struct dp_msg ack = { .type = DP_MSG_TOPIC_GROW_ACK, .ctx = m->ctx, .idx = m->idx, .err = err };
		dp_answer(c, m, &ack);
		return;
	}
	default:
		assert(!"not a shard message");
		return;
	}
}

/* ---- transactions on the owner ------------------------------------------------ */

/* An owner's marker append, until durable. The control batch follows the struct. */
struct dp_marker {
	struct dp_msg req;        /* the request, for the reply */
	struct dp_part *p;
	int64_t offset;           /* where the marker went */
	bool empty;               /* no data of the transaction here: only the decision is recorded */
	/* test only (--fault-marker-delay-ms): its completion, held until due_ms */
	bool held;
	int status;
	int64_t due_ms;
	struct dp_marker *held_next;
};

static void marker_reply(struct dp_core *c, const struct dp_msg *req, int16_t err)
{
	if (req->flags & DP_F_LOCAL) {   /* start-up's abort of a transaction the coordinator lost */
		assert(c->opens_aborting > 0);
		c->opens_aborting--;
		if (err) {
			DP_WARN_RL("the abort of producer %lld's open transaction on partition %d, which the transaction "
			           "coordinator has no record of, failed (error %d %s): reported again",
			           (long long)req->u.txn.pid, req->partition, err, kerr_name(err) ?: "?");
			c->opens_again = true;
		}
		return;
	}
	struct dp_msg out = { .flags = req->flags, .err = err };
	out.u.txn.ptr = req->u.txn.ptr;
	reply(c, req, &out, DP_MSG_TXN_MARKER_DONE);
}

void dp_shard_on_marker(void *cookie, int status, int64_t base_offset)
{
	struct dp_core *c = dp_core_self();
	struct dp_marker *mk = cookie;
	if (c->b->cfg.fault_marker_delay_ms > 0 && !mk->held) {
		/* Test only: acted on late, as after a slow fdatasync; still writing meanwhile. */
		mk->held = true;
		mk->status = status;
		mk->due_ms = c->now_ms + c->b->cfg.fault_marker_delay_ms;
		mk->held_next = NULL;
		if (c->markers_held_tail)
			c->markers_held_tail->held_next = mk;
		else
			c->markers_held = mk;
		c->markers_held_tail = mk;
		return;
	}
	assert(mk->p->markers_writing > 0);
	mk->p->markers_writing--;
	if (status < 0) {
		append_failed(c, mk->p, status);   /* offline: recovery rebuilds the transaction's state */
	} else {
		/*
		 * Only now does the transaction end here: until its marker is durable
		 * it holds the LSO (as Kafka holds it until the marker is below the
		 * high watermark). Ended at the append, a reader could be shown the
		 * data, and the LSO move back when a crash lost the marker (found by
		 * the simulator, tests/sim). An abort enters the aborted index now.
		 */
#ifndef WSIM_PLANT_LSO_AT_QUEUE
		int rc = mk->empty ? 0 : txn_lso_end(mk->p->lso, mk->req.u.txn.pid, mk->offset, !mk->req.u.txn.commit);
		assert(rc == 0);   /* closing since the append; shard_marker writes no second one meanwhile */
		(void)rc;
#endif
	}
	marker_reply(c, &mk->req, status < 0 ? KERR_KAFKA_STORAGE_ERROR : 0);
	struct dp_part *p = mk->p;
	dp_buf_put(mk);
	if (p->nwaiters)
		wake_waiters(c, p, false);   /* the LSO moved */
}

/* Shard timer, test only (--fault-marker-delay-ms): the held marker completions now due. */
void dp_shard_markers_due(struct dp_core *c)
{
	struct dp_marker *mk;
	while ((mk = c->markers_held) && mk->due_ms <= c->now_ms) {
		c->markers_held = mk->held_next;
		if (!c->markers_held)
			c->markers_held_tail = NULL;
		dp_shard_on_marker(mk, mk->status, mk->offset);
	}
}

/*
 * COMMIT/ABORT for pid on this partition: append the control batch, close
 * the producer's transaction in the producer state, and withdraw its
 * permission to write transactionally; once the marker is durable the
 * transaction ends in the LSO (an abort enters the aborted index).
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
		marker_reply(c, m, part_absent_err(c, m));
		return;
	}
	/*
	 * Offline (its log failed, perhaps under this very marker): the state in
	 * memory is not the log's until part_probe rebuilds it, so the marker is
	 * refused, retriably, and the coordinator sends it again until then.
	 */
	if (p->offline_ms || st_log_failed(p->log)) {
		if (p->fault_hold_ms) {   /* test only: the probe waited for this */
			DP_INFO("fault injection: partition %s refused a marker while offline", p->dir);
			p->fault_hold_ms = 0;
		}
		marker_reply(c, m, KERR_KAFKA_STORAGE_ERROR);
		return;
	}
	/*
	 * A marker of this producer is written here and not yet durable
	 * (closing; dp_shard_on_marker ends it). A second marker meanwhile (a
	 * client's WriteTxnMarkers, a re-send) would be answered before the
	 * first is durable, or end the next transaction early; it is told to
	 * come back, and then finds the first one ended.
	 * A client's WriteTxnMarkers may name any pid; a negative one has no state.
	 */
	if (pid >= 0 && txn_lso_closing(p->lso, pid)) {
		marker_reply(c, m, KERR_CONCURRENT_TRANSACTIONS);
		return;
	}
	/*
	 * A decision already recorded here: this producer's last marker carries
	 * the same serial (txn/coord.h), durable (none is closing). Sent again
	 * after a coordinator crash, or while the producer's next transaction
	 * is open here (begun behind it: txncoord.c next_granted), it must
	 * neither end that one nor take its grant: it changes nothing.
	 */
	struct txn_producer *pr = pid >= 0 ? txn_pstate_find(p->ps, pid) : NULL;
	if (pr && m->u.txn.coord_epoch > 0 && pr->coordinator_epoch == m->u.txn.coord_epoch) {
		c->markers_applied_again++;
		marker_reply(c, m, KERR_NONE);
		return;
	}
	/* Not the grant of the producer's next transaction, made behind this very marker
	 * (decided_here): the marker is sent again after its write failed and the log was cut. */
	const struct dp_txn_allow *g = pid >= 0 ? allow_find(p, pid) : NULL;
	if (!(g && m->u.txn.coord_epoch > 0 && g->after == m->u.txn.coord_epoch))
		allow_drop(c, p, pid);
	/*
	 * No data of the transaction here: the coordinator's marker is written
	 * all the same, as Kafka writes a marker to every partition of the
	 * transaction, so that the decision is recorded before the producer's
	 * next transaction writes here. Without it a crash before the
	 * coordinator's Complete was durable left the next transaction's data
	 * looking like this one's at the restart (open, this decision not
	 * applied), and the resumed marker ended it with this outcome. A
	 * client's WriteTxnMarkers (no serial) writes nothing.
	 */
	bool empty = txn_lso_open_first(p->lso, pid) < 0;
	if (empty && !(pid >= 0 && m->u.txn.coord_epoch > 0)) {
		marker_reply(c, m, KERR_NONE);
		return;
	}
	if (pr && m->u.txn.epoch < pr->epoch) {
		marker_reply(c, m, KERR_INVALID_PRODUCER_EPOCH);
		return;
	}
	if (dp_fault(c, c->b->cfg.fault_marker_fail_permille)) {   /* test only: --fault-marker-fail */
		DP_INFO("fault injection: refusing the marker for producer %lld on %s", (long long)pid, p->dir);
		marker_reply(c, m, KERR_KAFKA_STORAGE_ERROR);
		return;
	}
	/*
	 * Both records of the marker must be sure before it is written: the
	 * transaction's end in the index needs no room (its begin reserved the
	 * aborted entry, lso.h), and the producer has an entry (it wrote this
	 * transaction's data here, and expiry keeps a producer with one open;
	 * an empty marker may need a new one). Should the latter fail, the
	 * marker is refused, never written without its records, and the
	 * coordinator sends it again until there is room.
	 */
	struct dp_marker *mk = dp_buf_try_get(sizeof(*mk) + 128);
	if (!mk) {
		/* Not written: the coordinator sends it again (marker_retry). */
		DP_ERR_RL("partition %s: marker for producer %lld refused: no memory", p->dir, (long long)pid);
		marker_reply(c, m, KERR_NOT_ENOUGH_REPLICAS);
		return;
	}
	if (txn_pstate_reserve(p->ps, pid) < 0) {
		DP_ERR("partition %s: marker for producer %lld refused: no producer state entry", p->dir,
		       (long long)pid);
		dp_buf_put(mk);
		marker_reply(c, m, KERR_KAFKA_STORAGE_ERROR);
		return;
	}
	uint8_t *batch = (uint8_t *)(mk + 1);
	mk->req = *m;
	mk->p = p;
	mk->held = false;
	mk->empty = empty;
	int n = st_batch_build_marker(batch, 128, pid, m->u.txn.epoch, m->u.txn.commit, m->u.txn.coord_epoch,
	                              dp_wall_ms());
	assert(n > 0);
	int64_t off = st_log_append_cb(p->log, batch, (uint32_t)n, 1, dp_shard_on_marker, mk);
	if (off < 0) {
		append_failed(c, p, (int)off);
		dp_buf_put(mk);
		marker_reply(c, m, KERR_KAFKA_STORAGE_ERROR);
		return;
	}
	struct st_batch_hdr h;
	st_batch_parse(batch, (size_t)n, &h);
	/* takes the marker's epoch and serial */
	int rc = txn_pstate_update_marker(p->ps, &h, off, dp_wall_ms(), m->u.txn.coord_epoch);
	assert(rc == 0);   /* reserved above */
	mk->offset = off;   /* the transaction ends here when the marker is durable (dp_shard_on_marker) */
	p->markers_writing++;
#ifndef WSIM_PLANT_LSO_AT_QUEUE
	if (!empty) {
		rc = txn_lso_close(p->lso, pid, off);   /* holds the LSO; the next transaction may open beside it */
		assert(rc == 0);                         /* open: txn_lso_open_first above */
	}
#endif
	if (c->marker_write_faults < c->b->cfg.fault_marker_write_fail) {   /* test only */
		c->marker_write_faults++;
		DP_INFO("fault injection: the log write of the marker for producer %lld at %s offset %lld will fail",
		        (long long)pid, p->dir, (long long)off);
		st_log_fault_write(p->log, off);
		/* The probe waits until a marker sent again met the partition offline (at most DP_FAULT_HOLD_MS), so
		 * that the test sees that path whatever the timers' order. */
		p->fault_hold_ms = c->now_ms + DP_FAULT_HOLD_MS;
	}
#ifdef WSIM_PLANT_LSO_AT_QUEUE
	/* Planted bug, whole-broker simulator only (tests/sim/meson.build): the transaction ends for
	 * the LSO when its marker is queued, not when it is durable. */
	txn_lso_end(p->lso, pid, off, !m->u.txn.commit);
#endif
	(void)rc;
}

static void shard_describe_producers(struct dp_core *c, struct dp_msg *m)
{
	struct dp_msg out = { .flags = m->flags };
	struct DescribeProducersResponse_PartitionResponse *pr = m->u.txn.ptr;
	out.u.txn.ptr = pr;
	struct dp_part *p = part_of(c, m, NULL);
	if (!p) {
		out.err = part_absent_err(c, m);
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
		struct dp_msg out = { .err = p ? KERR_NONE : part_absent_err(c, m) };
		/* NOT_ENOUGH_REPLICAS, the owner's "could not record, retriable" (state_full): the
		 * coordinator answers the AddPartitionsToTxn retriably and tells the owners again on its retry. */
		int32_t after = m->flags & DP_F_TXN_AFTER ? m->u.txn.coord_epoch : 0;
		if (p && !decided_here(p, m->u.txn.pid, after)) {
			c->grants_held_back++;
			DP_INFO_RL("partition %s: producer %lld's last decision is not recorded here (its marker "
			           "refused): the next transaction's grant refused, retriably (%llu so far on this core)",
			           p->dir, (long long)m->u.txn.pid, (unsigned long long)c->grants_held_back);
			out.err = KERR_NOT_ENOUGH_REPLICAS;
		} else if (p && allow_set(c, p, m->u.txn.pid, m->u.txn.epoch, after) < 0) {
			out.err = KERR_NOT_ENOUGH_REPLICAS;
		}
		reply(c, m, &out, DP_MSG_TXN_ADD_ACK);
		return;
	}
	case DP_MSG_TXN_MARKER: shard_marker(c, m); return;
	case DP_MSG_DESCRIBE_PRODUCERS: shard_describe_producers(c, m); return;
	default: assert(!"not a transaction message");
	}
}

/*
 * Start-up: every transaction open on this core's partitions goes to the
 * transaction coordinator, one DP_MSG_TXN_OPEN each (its producer, epoch and
 * last decision serial here), then DP_MSG_TXN_OPENS_DONE; the coordinator
 * serves transactions only once every data core has said so. It answers
 * each: kept (its transaction knows this partition, or now does), or abort
 * it here: the coordinator has no record of that transaction, whose
 * AddPartitionsToTxn was answered before its record was durable and lost in
 * a crash (txncoord.c: open_report). Paced by the credit toward the control
 * core: the rest go on the next tick, from the cursor (no grant is given
 * before the coordinator is done, so no transaction opens meanwhile; one
 * aborted meanwhile is skipped by the cursor, which walks first offsets).
 * DONE waits until the aborts asked for are durable; a failed one starts
 * the sweep over. An offline partition (its log failed at start, or under
 * such an abort) is not reported: an open transaction there that the
 * coordinator lost stays open until a restart finds it online.
 * Locality: owner core.
 */
static void open_answer(struct dp_core *c, struct dp_msg *m)
{
	if (m->type == DP_MSG_TXN_OPENS_DONE_ACK)
		c->txn_reconciled = true;   /* after the grants it sent (one ring, in order) */
	if (m->type != DP_MSG_TXN_OPEN_ACK || m->err != KERR_INVALID_TXN_STATE)
		return;   /* kept, or the DONE's answer */
	struct dp_msg mk = { .type = DP_MSG_TXN_MARKER, .src = (uint16_t)c->id, .flags = DP_F_LOCAL,
	                     .topic_id = m->topic_id, .gen = m->gen, .partition = m->partition };
	mk.u.txn.pid = m->u.txn.pid;
	mk.u.txn.epoch = m->u.txn.epoch;   /* the open data's own: the coordinator holds none for it */
	mk.u.txn.commit = false;
	mk.u.txn.coord_epoch = 0;          /* no decision serial: not the coordinator's marker */
	c->opens_aborted++;
	c->opens_aborting++;
	DP_INFO_RL("producer %lld's open transaction on partition %d is unknown to the transaction coordinator "
	           "(its AddPartitionsToTxn lost in a crash): aborted", (long long)mk.u.txn.pid, mk.partition);
	shard_marker(c, &mk);
}

void dp_shard_report_opens(struct dp_core *c)
{
	int ctl = c->b->services[DP_SVC_TXN].core;
	for (; c->opens_topic < c->topics_end; c->opens_topic++, c->opens_part = 0) {
		uint32_t id = c->opens_topic;
		struct dp_topic *t = &c->topics[id];
		if (!t->live || t->deleting)
			continue;
		for (; c->opens_part < t->nparts; c->opens_part++, c->opens_after = -1) {
			struct dp_part *p = t->parts[c->opens_part];
			if (!p || p->offline_ms || st_log_failed(p->log))
				continue;
			int64_t pid, first;
			while ((first = txn_lso_open_after(p->lso, c->opens_after, &pid)) >= 0) {
				if (!dp_send_room(c, ctl, 1))
					return;   /* the next tick goes on from here */
				c->opens_after = first;
				const struct txn_producer *pr = pid >= 0 ? txn_pstate_find(p->ps, pid) : NULL;
				struct dp_msg m = { .type = DP_MSG_TXN_OPEN, .topic_id = id, .gen = t->gen,
				                    .partition = c->opens_part };
				m.u.txn.pid = pid;
				m.u.txn.epoch = pr ? pr->epoch : 0;
				m.u.txn.coord_epoch = pr ? pr->coordinator_epoch : 0;   /* the last decision applied here */
				c->opens_reported++;
				dp_ask_service(c, DP_SVC_TXN, open_answer, &m);
			}
		}
	}
	/* Done once every abort asked for is durable; should one have failed, all again (the
	 * coordinator's verdicts come out the same; an offline partition is left out then). */
	if (c->opens_aborting)
		return;
	if (c->opens_again) {
		c->opens_again = false;
		c->opens_topic = 0, c->opens_part = 0, c->opens_after = -1;
		return;
	}
	if (!dp_send_room(c, ctl, 1))
		return;
	c->opens_done = true;
	struct dp_msg m = { .type = DP_MSG_TXN_OPENS_DONE };
	dp_ask_service(c, DP_SVC_TXN, open_answer, &m);
}

/* ---- DeleteRecords ---------------------------------------------------------- */

static void delrec_reply(struct dp_core *c, const struct dp_msg *req, int16_t err, int64_t low)
{
	struct dp_msg out = { 0 };
	out.err = err;
	out.u.delrec_done.low = err ? -1 : low;
	out.u.delrec_done.out = req->u.delrec.out;
	reply(c, req, &out, DP_MSG_DELREC_DONE);
}

/* The offset a DeleteRecords asks for: -1 is the high watermark (Kafka's HIGH_WATERMARK_OFFSET). */
static int64_t delrec_target(const struct dp_part *p, const struct dp_msg *m)
{
	return m->u.delrec.offset == -1 ? st_log_durable_offset(p->log) : m->u.delrec.offset;
}

static void delrec_written(void *arg, int status);

/*
 * Answering a request can run the next one of the same connection at once, inside the answer
 * (when this core owns the connection too, always with --cores 1: dp_send -> req_finish ->
 * conn_resume -> start_request), and that one can be a DeleteRecords of this partition. So the
 * answers go from a copy taken off p->delrec first, and while p->delrec_busy such a nested
 * arrival only queues: the one answering starts the next write when its answers are out.
 */
static void delrec_answer(struct dp_core *c, const struct dp_msg *ans, uint32_t n, int16_t err, int64_t low)
{
	for (uint32_t i = 0; i < n; i++)
		delrec_reply(c, &ans[i], err, low);
}

/* Start the log-start write for the highest offset the waiting requests ask. */
static void delrec_start(struct dp_core *c, struct dp_part *p)
{
	struct dp_msg ans[DP_DELREC_WAITS_PER_PART];

	if (p->delrec_busy)
		return;
	p->delrec_busy = true;
	while (p->ndelrec) {
		int64_t want = -1;
		for (uint32_t i = 0; i < p->ndelrec; i++) {
			int64_t o = delrec_target(p, &p->delrec[i]);
			want = o > want ? o : want;
		}
		int rc = st_log_raise_start(p->log, want, delrec_written, p);
		if (rc == 0 || rc == -EBUSY)
			break;   /* delrec_written answers them (-EBUSY: after the write in flight) */
		/* Nothing to write (1), or it cannot be: answer them all now. */
		int16_t err = rc == 1 ? KERR_NONE : rc == -ERANGE ? KERR_OFFSET_OUT_OF_RANGE : KERR_KAFKA_STORAGE_ERROR;
		uint32_t n = p->ndelrec;
		memcpy(ans, p->delrec, n * sizeof(ans[0]));
		p->ndelrec = 0;
		delrec_answer(c, ans, n, err, st_log_start_offset(p->log));
	}
	p->delrec_busy = false;
}

/* The log-start file is durable (or failed): answer those it covers; the rest start the next write. */
static void delrec_written(void *arg, int status)
{
	struct dp_core *c = dp_core_self();
	struct dp_part *p = arg;
	struct dp_msg ans[DP_DELREC_WAITS_PER_PART];
	int64_t start = st_log_start_offset(p->log);
	uint32_t n = 0, all = p->ndelrec;

	p->delrec_busy = true;
	p->ndelrec = 0;
	for (uint32_t i = 0; i < all; i++) {
		if (status < 0 || delrec_target(p, &p->delrec[i]) <= start)
			ans[n++] = p->delrec[i];
		else
			p->delrec[p->ndelrec++] = p->delrec[i];
	}
	if (status == 0) {
		DP_INFO("partition %s: delete records moved the log start to %lld", p->dir, (long long)start);
		txn_lso_trim(p->lso, start);   /* aborted transactions wholly below it are forgotten */
	}
	delrec_answer(c, ans, n, status < 0 ? KERR_KAFKA_STORAGE_ERROR : KERR_NONE, start);
	p->delrec_busy = false;
	if (p->ndelrec)
		delrec_start(c, p);
}

/*
 * Kafka's Partition.deleteRecordsOnLeader on the partition's owner: offset -1 is the high
 * watermark; one below 0 or past the high watermark is OFFSET_OUT_OF_RANGE; else the log start
 * moves up to it (never down) and the answer, once the new start is durable (the log-start file,
 * st_log_raise_start), is the log start after it. Kafka waits for the replicas until the
 * request's TimeoutMs; a single broker answers when its own write is done. Segments wholly below
 * the new start go at the next retention pass (dp_shard_timer), as retention's do.
 */
void shard_delete_records(struct dp_core *c, struct dp_msg *m)
{
	struct dp_topic *t;
	struct dp_part *p = part_of(c, m, &t);
	if (!p || t->deleting) {
		delrec_reply(c, m, p ? KERR_UNKNOWN_TOPIC_OR_PARTITION : part_absent_err(c, m), -1);
		return;
	}
	if (p->offline_ms || st_log_failed(p->log)) {
		delrec_reply(c, m, KERR_KAFKA_STORAGE_ERROR, -1);
		return;
	}
	int64_t want = delrec_target(p, m);
	if (want < 0 || want > st_log_durable_offset(p->log)) {
		delrec_reply(c, m, KERR_OFFSET_OUT_OF_RANGE, -1);
		return;
	}
	if (want <= st_log_start_offset(p->log)) {
		delrec_reply(c, m, KERR_NONE, st_log_start_offset(p->log));
		return;
	}
	if (p->ndelrec >= DP_DELREC_WAITS_PER_PART) {
		delrec_reply(c, m, KERR_REQUEST_TIMED_OUT, -1);
		return;
	}
	/* -1 is the high watermark when it arrives, as Kafka converts it: one that kept growing
	 * under produces would otherwise never be reached by a write. */
	p->delrec[p->ndelrec] = *m;
	p->delrec[p->ndelrec++].u.delrec.offset = want;
	delrec_start(c, p);   /* queued only, while a write is in flight or answers are going out */
}
