/*
 * txncoord.c - the transaction coordinator, on the control core.
 *
 * Every state change that matters is appended to the coordinator's own log,
 * DATA/__transaction_state (one RecordBatch per change: key = transactional
 * id, value = txn_meta_encode), and acted on only once that write is
 * durable, but for AddPartitionsToTxn, answered once the owners have the
 * grant (add_partitions says why that is safe). EndTxn:
 * Prepare{Commit,Abort} is written and, once it is durable, the client
 * answered (the outcome is decided); then a marker message goes
 * to the owner shard of every partition in the transaction, and the offsets
 * it staged are ended in __consumer_offsets (group.c); each owner appends its
 * COMMIT/ABORT control batch and answers once it is durable; once all are,
 * Complete{Commit,Abort} is written, not waited for, and the producer's next
 * request, queued meanwhile, is taken; but its next AddPartitionsToTxn is
 * served as soon as the markers are sent, behind them on each owner's ring
 * (next_granted says why that is safe). Should we crash before the markers
 * are all durable, the log still says Prepare*, and the restart finishes the
 * fan-out (owners ignore a marker for a transaction they already closed).
 *
 * On start the whole log is read back (latest record per id wins); every
 * data core reports the transactions open on its partitions (open_report:
 * joined to their transaction, or aborted where the log lost it); then
 * every interrupted Prepare* fan-out is finished, and the owners of Ongoing
 * transactions are told again which producer may write where (reconciled).
 * Locality: control core.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "coord.h"
#include "kerr.h"
#include "log.h"
#include "call.h"
#include "control_internal.h"
#include "shard.h"

#define DP_TXNC_TIMER_MS   100
#define DP_TXNC_EXPIRE_SCAN 4096    /* ids examined (timeout, expiry) per timer tick: bounded work */
#define DP_TXNC_EXPIRE_LOG_MS 1000  /* one expiry line per this at most */
#define DP_TXNC_MARKER_RETRY_MS 1000     /* a marker an owner could not write is sent again after this */
_Static_assert(sizeof(struct dp_msg) <= sizeof(((struct txn_meta *)0)->queued), "queued request fits");

/* A write in flight to the coordinator log (from dp_txnc.writes, no malloc). */
/*
 * InitProducerId's new identity for an id, carried by its record's write and
 * applied to the id only once that record is durable (Kafka's pending
 * transition): until then the id keeps its durable producer id and epoch, so
 * a failed write leaves it as it was and the client's retry (or its current
 * instance) is still known. Locality: control core.
 */
struct txnc_init {
	int64_t pid, prev_pid;
	int16_t epoch, prev_epoch;
	int32_t timeout_ms;
};

struct txnc_write {
	bool step;                /* the current op waits for this write */
	bool compact;             /* a compaction rewrite */
	bool fault;               /* test only: reported failed once durable (--fault-prepare-fail) */
	bool init;                /* an InitProducerId record: ini is applied to m once durable */
	struct txnc_init ini;
	struct txn_meta *m;       /* NULL: an expiry tombstone (the id is gone) */
	uint8_t *buf;
	struct txnc_write *next_free;
};

struct pid_ix {
	int64_t pid;
	struct txn_meta *m;
};

struct dp_txnc {
	struct txn_coord *coord;
	struct txn_meta *retry_head;  /* ids with markers or a Prepare to send again (txn_meta.retry_next) */
	uint64_t marker_retries;      /* markers sent again, ever (logged, rate-limited) */
	struct dp_clog clog;          /* __transaction_state (clog.c) */
	char dir[1024];
	int64_t next_timer_ms;
	bool loaded;
	uint32_t expire_cursor;       /* expiry scan position in the id table */
	uint32_t expired;             /* ids expired and not yet logged */
	int64_t expire_log_ms;        /* last expiry line */
	uint64_t full_refused;        /* InitProducerIds refused for a full table, ever */
	uint32_t prepare_faults;      /* Prepare* writes failed by --fault-prepare-fail so far */
	uint32_t add_faults;          /* AddPartitions writes failed by --fault-add-fail so far */
	uint32_t init_faults;         /* InitProducerId writes failed by --fault-init-fail so far */
	/* Start-up's reconciliation (open_report): data cores yet to report, and what the reports met. */
	uint32_t opens_left;
	struct dp_msg done_reqs[DP_CORES_MAX];   /* the OPENS_DONEs (ndone), answered by answer_dones */
	uint32_t ndone;
	struct pid_ix *pids;          /* the loaded ids by producer id, sorted, until then (npids) */
	uint32_t npids;
	uint32_t opens_seen, opens_kept, opens_joined, opens_aborted, opens_unknown;
	/* Writes in flight, a pool fixed at start-up (DP_COORD_WRITES_MAX): an
	 * empty one fails the write as no memory would (the op answers
	 * COORDINATOR_NOT_AVAILABLE, retriable; a compaction keeps the old segments). */
	struct txnc_write *write_free;
	struct txnc_write writes[DP_COORD_WRITES_MAX];
};
size_t dp_txnc_write_bytes(void)
{
	return sizeof(struct txnc_write);
}

static struct txnc_write *write_get(struct dp_txnc *t)
{
	struct txnc_write *w = t->write_free;
	if (w)
		t->write_free = w->next_free;
	return w;
}

static void write_put(struct dp_txnc *t, struct txnc_write *w)
{
	if (!w)
		return;
	w->init = false;   /* a free record carries no pending identity (init_pending) */
	w->next_free = t->write_free;
	t->write_free = w;
}


static void txnc_step(struct dp_core *c, struct txn_meta *m);
static void prepare_again(struct dp_core *c, struct txn_meta *m);
static void begin_if_new(struct txn_meta *m);
static void fence_and_abort(struct dp_core *c, struct txn_meta *m, const char *why);
static void reconciled(struct dp_core *c);

static int16_t fenced_err(int16_t api, int16_t version)
{
	/* PRODUCER_FENCED exists from InitProducerId v4, AddPartitions/AddOffsets/EndTxn v2; older clients know 47. */
	bool new_code = api == KAPI_INIT_PRODUCER_ID ? version >= 4 : version >= 2;
	return new_code ? KERR_PRODUCER_FENCED : KERR_INVALID_PRODUCER_EPOCH;
}

static void fault_point(struct dp_core *c, int point, const char *what)
{
	if (c->b->cfg.fault_txn_kill == point) {
		DP_WARN("fault injection: SIGKILL %s", what);
		raise(SIGKILL);
	}
}

/* ---- replies ------------------------------------------------------------------ */

/* Hand call r back to its caller with its answer (call.h). */
static void reply(struct dp_core *c, struct dp_call *r)
{
	dp_call_answer(c, r, DP_MSG_TXN_DONE);
}

/* Fill the error of whatever coordinator response r carries. */
static void set_error(struct dp_call *r, int16_t err)
{
	dp_call_error(r, err);
}

/* Answer the client of the current op, if it still waits. */
static void op_answer(struct dp_core *c, struct txn_meta *m, int16_t err)
{
	struct dp_call *r = m->op_ctx;
	if (!r)
		return;
	if (err)
		set_error(r, err);
	else if (r->hdr.api_key == KAPI_INIT_PRODUCER_ID) {
		struct InitProducerIdResponse *resp = r->resp;
		resp->ProducerId = m->pid;
		resp->ProducerEpoch = m->epoch;
	}
	reply(c, r);
	m->op_ctx = NULL;
}

static void txn_request(struct dp_core *c, struct dp_msg *msg);

/* The op is over: answer (if not yet), then take the request that waited for it. */
static void op_finish(struct dp_core *c, struct txn_meta *m, int16_t err)
{
	op_answer(c, m, err);
	txn_set_drive(m, TXN_DRIVE_IDLE);
	if (m->has_queued) {
		struct dp_msg q;
		memcpy(&q, m->queued, sizeof(q));
		m->has_queued = false;
		txn_request(c, &q);
	}
}

/* ---- the log -------------------------------------------------------------------- */

/* The id's state as InitProducerId leaves it (a new or bumped identity, Empty, no transaction). */
static void init_apply(struct txn_meta *m, const struct txnc_init *ini)
{
	m->pid = ini->pid;
	m->prev_pid = ini->prev_pid;
	m->epoch = ini->epoch;
	m->prev_epoch = ini->prev_epoch;
	m->timeout_ms = ini->timeout_ms;
	txn_set_state(m, TXN_EMPTY);
	txn_meta_clear_txn(m);
}

/* ini: an InitProducerId record, written with that identity and applied to m once durable. */
static int persist_ex(struct dp_core *c, struct txn_meta *m, bool step, bool compact, const struct txnc_init *ini)
{
	struct dp_txnc *t = c->txnc;
	if (!compact)
		m->update_ms = dp_wall_ms();   /* a rewrite is no use: it must not keep the id from expiring */
	/* Test only: the first N writes of a kind fail, in turn refused and reported failed once durable. */
	bool fault = false;
	bool prep = step && m->drive == TXN_DRIVE_PREPARE, add = !compact && m->drive == TXN_DRIVE_ADD;
	bool init = step && m->drive == TXN_DRIVE_INIT;
	uint32_t *faults = prep ? &t->prepare_faults : add ? &t->add_faults : init ? &t->init_faults : NULL;
	if (faults && *faults < (prep ? c->b->cfg.fault_prepare_fail : add ? c->b->cfg.fault_add_fail :
	                         c->b->cfg.fault_init_fail)) {
		fault = (*faults)++ % 2;
		DP_WARN("fault injection: the %s write of txn %.*s fails (%s)", prep ? txn_state_name(m->state) :
		        add ? "AddPartitions" : "InitProducerId", m->id_len, m->id, fault ? "at completion" : "refused");
		if (!fault)
			return -EIO;
	}
	/* The record carries the new identity; m keeps its durable one until then (a copy of the
	 * fixed part: the value does not hold the id's name, and there is no transaction to copy). */
	struct txn_meta next;
	const struct txn_meta *rec = m;
	if (ini) {
		assert(m->ntps == 0 && m->ngroups == 0);   /* no transaction open: init_pid fences one first */
		next = *m;
		next.tps = NULL, next.groups = NULL;
		init_apply(&next, ini);
		rec = &next;
	}
	size_t vlen = txn_meta_value_size(rec);
	size_t cap = ST_BATCH_HEADER_BYTES + 64 + m->id_len + vlen;
	uint8_t *val = dp_buf_try_get(vlen);
	uint8_t *buf = dp_buf_try_get(cap);
	struct txnc_write *w = write_get(t);
	int n = val && buf && w ? txn_meta_encode(rec, val, vlen) : -ENOMEM;
	if (n < 0) {
		dp_buf_put(val);
		dp_buf_put(buf);
		write_put(t, w);
		return -ENOMEM;
	}
	/* Only the op's own record carries and applies the identity (a compaction waits for it: maybe_compact). */
	*w = (struct txnc_write){ .step = step, .compact = compact, .fault = fault, .init = ini && step, .m = m,
	                          .buf = buf };
	if (ini)
		w->ini = *ini;
	n = dp_clog_write(&t->clog, buf, cap, m->update_ms, m->id, m->id_len, val, n, dp_txnc_on_write, w);
	dp_buf_put(val);
	if (n < 0) {
		DP_ERR_RL("transaction log append failed: %s", strerror(-n));
		dp_buf_put(buf);
		write_put(t, w);
		return n;
	}
	m->writes++;
	DP_DBG("txn %.*s: %s epoch %d written", m->id_len, m->id, txn_state_name(m->state), m->epoch);
	return 0;
}

/*
 * transactional.id.expiration.ms: m has had no transaction for that long.
 * A tombstone goes to the log (so the id stays gone after a restart, and
 * compaction, which rewrites only live ids, drops its older records) and
 * the id leaves the table now: a new InitProducerId for it starts afresh,
 * its record landing after the tombstone.
 */
static int expire_id(struct dp_core *c, struct txn_meta *m)
{
	struct dp_txnc *t = c->txnc;
	size_t cap = ST_BATCH_HEADER_BYTES + 64 + m->id_len;
	uint8_t *buf = dp_buf_try_get(cap);
	struct txnc_write *w = write_get(t);
	int n = buf && w ? dp_clog_write(&t->clog, buf, cap, dp_wall_ms(), m->id, m->id_len, NULL, -1,
	                                 dp_txnc_on_write, w) : -ENOMEM;
	if (n < 0) {
		dp_buf_put(buf);
		write_put(t, w);
		return n;   /* kept: the next pass tries again */
	}
	*w = (struct txnc_write){ .m = NULL, .buf = buf };
	DP_DBG("txn %.*s: expired (pid %lld, %s)", m->id_len, m->id, (long long)m->pid, txn_state_name(m->state));
	txn_coord_remove(t->coord, m);
	return 0;
}

static int persist(struct dp_core *c, struct txn_meta *m, bool step)
{
	return persist_ex(c, m, step, false, NULL);
}

/* The identity m's InitProducerId record in flight carries, NULL if none. */
static const struct txnc_init *init_pending(struct dp_txnc *t, const struct txn_meta *m)
{
	if (m->drive != TXN_DRIVE_INIT)
		return NULL;
	for (uint32_t i = 0; i < DP_COORD_WRITES_MAX; i++)
		if (t->writes[i].init && t->writes[i].m == m)
			return &t->writes[i].ini;
	return NULL;
}

/*
 * Compaction (clog.c): every id's current state rewritten, then the old
 * segments go; a slice a timer tick (DP_CLOG_COMPACT_SLICE in flight at
 * most). The ids live at the start are flagged then (no I/O); a slice
 * rewrites flagged ones from the cursor on. Ids added meanwhile are written
 * after the start anyway. A delete meanwhile may shift a flagged id back
 * behind the cursor (htab.h), so at the end the table is looked through
 * again from the start, until none is left flagged.
 */
static void maybe_compact(struct dp_core *c)
{
	struct dp_txnc *t = c->txnc;
	struct dp_clog *l = &t->clog;
	uint32_t cur = 0;
	struct txn_meta *m = NULL;
	if (!l->compact.queuing) {
		uint32_t live = txn_coord_count(t->coord);
		if (!dp_clog_compact_begin(l, live, c->b->cfg.txn_log_compact_records))
			return;
		while ((m = txn_coord_next(t->coord, &cur)))
			m->compact_due = true;
		l->cursor = 0;
		DP_INFO("transaction log: compacting %u ids from offset %lld, %u at a time", live,
		        (long long)l->compact.from, DP_CLOG_COMPACT_SLICE);
	}
	uint32_t room = dp_clog_compact_room(l);
	cur = l->cursor;
	while (room && (m = txn_coord_next(t->coord, &cur))) {
		/* An id whose InitProducerId record is in flight waits, flagged, for a later slice
		 * (the rescan below keeps the compaction going until then): its old identity
		 * written after that record would undo it at the next start, and the new one
		 * written before it is durable would outlive a failed record the client was
		 * never answered for (its retry with the old epoch would then be fenced). */
		if (!m->compact_due || init_pending(t, m))
			continue;
		int rc = persist_ex(c, m, false, true, NULL);
		if (rc == -ENOMEM)
			break;   /* no write record or buffer free now: flagged still, the next tick */
		m->compact_due = false;
		room--;
		if (rc == 0)
			st_compaction_queued(&l->compact);
		else
			st_compaction_lost(&l->compact);   /* that id's record is only in the old segments */
	}
	if (!room || m) {
		l->cursor = cur;
		return;
	}
	for (cur = 0; (m = txn_coord_next(t->coord, &cur));)
		if (m->compact_due) {
			l->cursor = 0;   /* moved back by a delete: another pass */
			return;
		}
	dp_clog_compact_end(l);
}

/*
 * An AddOffsetsToTxn whose record was not written: its group (the last one,
 * added by that call alone) leaves the transaction again, so the client's
 * retry writes it rather than being answered at once. Kept, a restart would
 * load the transaction without the group, and its abort would not drop the
 * offsets staged meanwhile: the group coordinator then resolved them by the
 * producer's later state and applied an aborted transaction's offset (found
 * by the whole-broker simulator, tests/sim/wsim.c).
 */
static void offsets_not_written(struct txn_meta *m)
{
	assert(m->ngroups > 0);
	m->ngroups--;
}

void dp_txnc_on_write(void *cookie, int status, int64_t base_offset)
{
	struct dp_core *c = dp_core_self();
	struct txnc_write *w = cookie;
	struct txn_meta *m = w->m;
	bool step = w->step, compact = w->compact, init = w->init;
	struct txnc_init ini = w->ini;
	if (w->fault && status >= 0)
		status = -EIO;
	dp_buf_put(w->buf);
	write_put(c->txnc, w);
	if (compact)
		dp_clog_compact_done(&c->txnc->clog, status);
	if (!m) {   /* an expiry tombstone: if lost, the id comes back at a restart and expires again */
		if (status < 0)
			DP_ERR("transaction log: an expiry tombstone failed: %s", strerror(-status));
		return;
	}
	assert(m->writes > 0);
	m->writes--;
	if (status < 0) {
		DP_ERR_RL("txn %.*s: coordinator log write failed: %s", m->id_len, m->id, strerror(-status));
		/* InitProducerId: the id keeps its durable identity (nothing applied), the client retries. */
		if (step && m->drive == TXN_DRIVE_PREPARE) {
			prepare_again(c, m);
		} else if (step) {
			if (m->drive == TXN_DRIVE_OFFSETS)
				offsets_not_written(m);
			op_finish(c, m, KERR_COORDINATOR_NOT_AVAILABLE);   /* clients retry */
		}
		return;
	}
	if (init)
		init_apply(m, &ini);   /* durable: the new identity is the id's now, before the answer */
	if (step)
		txnc_step(c, m);
}

/* ---- owners --------------------------------------------------------------------- */

/*
 * Send m's message for partition i of its transaction (idx i: the answer
 * names it). The owner core follows from the topic's hash; a topic deleted
 * since needs no message: returns false then. count: one more answer to
 * await (before the send, which a local owner answers inside).
 */
static void owner_ack(struct dp_core *c, struct dp_msg *msg);

static bool tp_send(struct dp_core *c, struct txn_meta *m, const struct txn_tp *tp, uint32_t i, uint16_t type,
                    uint16_t flags, bool commit, uint32_t *count)
{
	uint32_t id, gen, hash;
	if (!dp_ctrl_topic(c, tp->topic, tp->topic_len, tp->partition, &id, &gen, &hash))
		return false;   /* deleted since: nothing to mark */
	struct dp_msg msg = { .type = type, .flags = flags, .ctx = m, .idx = i, .topic_id = id, .gen = gen,
	                      .partition = tp->partition };
	msg.u.txn.pid = m->pid;
	msg.u.txn.epoch = m->epoch;
	msg.u.txn.commit = commit;
	/* a marker: this decision's serial; a grant: the last decision's (coord.h: txn_meta.serial) */
	msg.u.txn.coord_epoch = m->serial;
	if (count)
		(*count)++;
	int owner = dp_owner_core(c->b, hash, tp->partition);
	if (!dp_send_room(c, owner, 1)) {
		/* No credit toward the owner (dp_limits.h): answered here as a write
		 * the owner could not take, so marker_retry sends it again later. */
		msg.type = (uint16_t)(type + 1);
		msg.err = KERR_NOT_ENOUGH_REPLICAS;
		msg.flags = DP_F_REFUSED;
		msg.src = (uint16_t)c->id;
		owner_ack(c, &msg);
		return true;
	}
	dp_ask(c, owner, dp_shard_txn_msg, dp_txnc_msg, &msg);
	return true;
}

/*
 * Send one message per partition of m's transaction; returns how many
 * answers are still awaited (0: none, the caller takes the next step). An
 * owner on this same core (--cores 1) answers inside dp_send, at once when
 * it has nothing to write (no open transaction there, a refused marker): so
 * the fan-out holds a count of its own until every message is sent, or such
 * an answer would take markers_left to 0 in the middle of the loop and
 * complete the transaction, which frees m->tps, and the partitions after it
 * would never get their marker.
 */
static uint32_t to_owners(struct dp_core *c, struct txn_meta *m, uint16_t type, bool commit)
{
	m->markers_left++;   /* held until the loop ends */
	for (uint32_t i = 0; i < m->ntps; i++)
		tp_send(c, m, &m->tps[i], i, type, 0, commit, &m->markers_left);
	return --m->markers_left;
}

/*
 * This transaction is complete, its record written: the next one, begun
 * while its markers were written (add_partitions), becomes the id's
 * transaction. Its record (Ongoing, its partitions) is written now, behind
 * Complete in the same log, and not waited for (add_partitions' argument,
 * unchanged). An AddPartitionsToTxn of it still waiting for grants goes on
 * as the id's op (ADD_ACKS: add_done answers it), and the request queued
 * meanwhile waits for it.
 */
static void next_install(struct dp_core *c, struct txn_meta *m)
{
	struct dp_call *r = m->next_ctx;
	txn_meta_next_install(m);
	txn_set_state(m, TXN_ONGOING);
	m->start_ms = m->next_start_ms;
	if (persist(c, m, false) < 0)
		DP_ERR_RL("txn %.*s: cannot write its next transaction's partitions; its next record will carry them",
		          m->id_len, m->id);
	if (!r) {
		op_finish(c, m, KERR_NONE);
		return;
	}
	assert(!m->op_ctx && m->next_left > 0);   /* EndTxn was answered with the markers; next_granted clears r at 0 */
	txn_set_drive(m, TXN_DRIVE_IDLE);
	txn_set_drive(m, TXN_DRIVE_ADD);
	txn_set_drive(m, TXN_DRIVE_ADD_ACKS);
	m->op_ctx = r;
	m->markers_acked = 0;
	m->grant_refused = m->next_refused;
	m->markers_left = m->next_left;
	m->next_ctx = NULL;
	m->next_left = 0;
	m->next_refused = false;
}

static void complete(struct dp_core *c, struct txn_meta *m)
{
	bool commit = m->state == TXN_PREPARE_COMMIT;
	fault_point(c, 3, "before CompleteCommit/CompleteAbort is written");
	/* Offsets staged by TxnOffsetCommit were ended with the markers (txnc_step); what is
	 * still staged was not then: a resume at start-up, before the group coordinator had
	 * loaded (the coordinator resolves them on start should this not get durable). */
	for (uint32_t i = 0; i < m->ngroups; i++)
		dp_group_txn_end(c, m->groups[i].id, m->groups[i].len, m->pid, commit, NULL);
	txn_set_state(m, commit ? TXN_COMPLETE_COMMIT : TXN_COMPLETE_ABORT);
	txn_meta_clear_txn(m);
	if (persist(c, m, false) < 0)
		DP_ERR("txn %.*s: cannot write Complete; the restart will finish it", m->id_len, m->id);
	DP_DBG("txn %.*s: %s", m->id_len, m->id, txn_state_name(m->state));
	if (m->recon_fence) {
		/* A resumed decision, and a partition held a later transaction of this producer
		 * that the log lost (open_report): that one is aborted there; the producer is
		 * fenced now, before the request queued meanwhile (its EndTxn would otherwise
		 * be taken for a retry of this one's). */
		assert(!m->next_ntps && !m->next_ctx);   /* next_may_begin: none began */
		m->recon_fence = false;
		txn_set_drive(m, TXN_DRIVE_IDLE);
		begin_if_new(m);
		fence_and_abort(c, m, "a partition held a transaction of it that the log lost");
		return;
	}
	if (m->next_ntps) {
		next_install(c, m);
		return;
	}
	op_finish(c, m, KERR_NONE);
}

/*
 * Every owner answered the grants. One that could not record its grant
 * (its core's fixed pool of them is full, dp_limits.h) refused it: the
 * client is answered COORDINATOR_NOT_AVAILABLE, as Kafka answers when it
 * cannot record a transaction's state for a moment (a failed write of the
 * transaction log); clients retry AddPartitionsToTxn on it (librdkafka and
 * the Java client both). tps_told stays put, so the retry writes the record
 * again and tells every owner again (a grant they hold is kept, not doubled).
 */
static void add_done(struct dp_core *c, struct txn_meta *m)
{
	if (m->grant_refused) {
		m->grant_refused = false;
		op_finish(c, m, KERR_COORDINATOR_NOT_AVAILABLE);
		return;
	}
	m->tps_told = m->ntps;
	op_finish(c, m, KERR_NONE);
}

/* The current op's write is durable, or all owners answered: take the next step. */
static void txnc_step(struct dp_core *c, struct txn_meta *m)
{
	switch (m->drive) {
	case TXN_DRIVE_INIT:
	case TXN_DRIVE_OFFSETS:
		op_finish(c, m, KERR_NONE);
		return;
	case TXN_DRIVE_ADD:
		txn_set_drive(m, TXN_DRIVE_ADD_ACKS);
		if (to_owners(c, m, DP_MSG_TXN_ADD, false))
			return;            /* the acks complete it */
		add_done(c, m);
		return;
	case TXN_DRIVE_ADD_ACKS:
	case TXN_DRIVE_REAUTH:     /* start-up re-authorisations answered */
		if (m->markers_left)
			return;
		add_done(c, m);
		return;
	case TXN_DRIVE_PREPARE:
		txn_set_drive(m, TXN_DRIVE_MARKERS);
		/*
		 * The outcome is decided and durable: EndTxn is answered now, as
		 * Kafka does, once the markers are sent (so that the producer's next
		 * AddPartitionsToTxn, which a connection on this core may send
		 * inside the answer, finds its grants behind them). A request for
		 * this id that arrives meanwhile waits for the markers (queued, not
		 * refused), but for that AddPartitionsToTxn (next_granted), and a
		 * crash before they are all durable is finished on restart.
		 */
		fault_point(c, 1, "after Prepare is durable, before any marker");
		/*
		 * The offsets staged by TxnOffsetCommit end now too, as Kafka writes
		 * its marker to __consumer_offsets with the others: their ends count
		 * as markers, so Complete (and the producer's next request, queued
		 * meanwhile) waits for them. Ended only at Complete, they were still
		 * being written when the next AddPartitionsToTxn was served, and that
		 * was answered CONCURRENT_TRANSACTIONS (dp_group_txn_ending): every
		 * transaction with offsets cost its successor a client back-off.
		 */
		m->markers_left++;   /* held over both fan-outs, as in to_owners */
		for (uint32_t i = 0; i < m->ngroups; i++)
			dp_group_txn_end(c, m->groups[i].id, m->groups[i].len, m->pid, m->state == TXN_PREPARE_COMMIT, m);
		(void)to_owners(c, m, DP_MSG_TXN_MARKER, m->state == TXN_PREPARE_COMMIT);
		op_answer(c, m, KERR_NONE);
		if (--m->markers_left)
			return;
		complete(c, m);
		return;
	case TXN_DRIVE_MARKERS:
		if (m->markers_left == 0)
			complete(c, m);
		return;
	case TXN_DRIVE_IDLE:
	case TXN_DRIVE_COUNT:
		break;
	}
	/* Nothing under way waits for a write or an answer: a driver bug. */
	DP_ERR("txn %.*s: a step with the driver %s", m->id_len, m->id, txn_drive_name(m->drive));
	abort();
}

/*
 * A Prepare{Commit,Abort} write failed (or could not be queued): the
 * decision stands, in memory, and is written again after
 * DP_TXNC_MARKER_RETRY_MS, on the retry list, until it is durable; then the
 * markers follow as usual. Falling back to Ongoing instead is no legal move
 * (Kafka's table has no PrepareCommit -> Ongoing), and leaving the id at
 * Prepare* with nothing under way stranded it: every later request was
 * answered CONCURRENT_TRANSACTIONS, for good. A client that waits is told
 * COORDINATOR_NOT_AVAILABLE now; its retry waits for the outcome (queued).
 */
static void prepare_again(struct dp_core *c, struct txn_meta *m)
{
	struct dp_txnc *t = c->txnc;
	op_answer(c, m, KERR_COORDINATOR_NOT_AVAILABLE);   /* clients retry */
	DP_WARN_RL("txn %.*s: %s could not be written: written again every %d ms until it is", m->id_len, m->id,
	           txn_state_name(m->state), DP_TXNC_MARKER_RETRY_MS);
	assert(m->drive == TXN_DRIVE_PREPARE && !m->retry_listed);
	m->retry_listed = true;
	m->retry_due_ms = dp_wall_ms() + DP_TXNC_MARKER_RETRY_MS;
	m->retry_next = t->retry_head;
	t->retry_head = m;
}

/*
 * As Kafka's marker channel: a marker the owner could not write (its log
 * failed, or it could not record it) is sent again until it is written, so
 * the transaction never ends with a partition that lacks its marker (the LSO
 * would stay below it for good). Its count stays outstanding meanwhile, so
 * Complete waits, and so does the next request for this transactional id.
 * The partition is flagged in m's own list and m queued once (no table that
 * could fill: an owner on this core answers a resend inside the send, so
 * sending at once would recurse for as long as it refuses).
 */
static bool marker_retry(struct dp_core *c, struct txn_meta *m, const struct dp_msg *msg)
{
	struct dp_txnc *t = c->txnc;
	int64_t now = dp_wall_ms();
	/* CONCURRENT_TRANSACTIONS: another marker for it (a client's WriteTxnMarkers) is in flight there. */
	if (msg->err != KERR_KAFKA_STORAGE_ERROR && msg->err != KERR_NOT_ENOUGH_REPLICAS &&
	    !(msg->err == KERR_CONCURRENT_TRANSACTIONS && msg->type == DP_MSG_TXN_MARKER_DONE))
		return false;
	/* A grant (TXN_ADD) is sent again when it was never sent (no credit), or
	 * when an owner refused a start-up re-authorisation (no client to tell);
	 * an owner's refusal of a client's AddPartitions is answered to it (add_done). */
	if (msg->type == DP_MSG_TXN_ADD_ACK && !(msg->flags & DP_F_REFUSED) && m->drive != TXN_DRIVE_REAUTH)
		return false;
	assert(msg->idx < m->ntps && !m->tps[msg->idx].marker_again);
	if (m->drive == TXN_DRIVE_REAUTH && (msg->flags & DP_F_REFUSED))
		m->tps[msg->idx].reauth_unsent = true;   /* holds the DONEs (answer_dones) */
	t->marker_retries++;
	DP_WARN_RL("txn %.*s: partition %d could not write its marker (error %d %s): it is sent again every "
	           "%d ms until written (%llu markers sent again so far)", m->id_len, m->id, msg->partition, msg->err,
	           kerr_name(msg->err) ?: "?",
	           DP_TXNC_MARKER_RETRY_MS, (unsigned long long)t->marker_retries);
	m->tps[msg->idx].marker_again = true;
	if (!m->retry_listed) {
		m->retry_listed = true;
		m->retry_due_ms = now + DP_TXNC_MARKER_RETRY_MS;
		m->retry_next = t->retry_head;
		t->retry_head = m;
	}
	return true;
}

/*
 * Start-up: once the coordinator has reconciled and every grant it gives
 * again has gone out, each data core's OPENS_DONE is answered, after those
 * grants (one ring, in order): from then on a transactional batch there
 * without a grant is refused for good, not told to come back (shard.c).
 */
static void answer_dones(struct dp_core *c)
{
	struct dp_txnc *t = c->txnc;
	if (!t->loaded || !t->ndone)
		return;
	for (const struct txn_meta *m = t->retry_head; m; m = m->retry_next)
		for (uint32_t i = 0; i < m->ntps; i++)
			if (m->tps[i].reauth_unsent)
				return;   /* after its resend (marker_retries) */
	for (uint32_t i = 0; i < t->ndone; i++) {
		struct dp_msg out = { .type = DP_MSG_TXN_OPENS_DONE_ACK };
		dp_answer(c, &t->done_reqs[i], &out);
	}
	t->ndone = 0;
}

/* Timer: send again the markers whose wait is over. */
static void marker_retries(struct dp_core *c, int64_t now)
{
	struct dp_txnc *t = c->txnc;
	struct txn_meta *list = t->retry_head, *next;
	t->retry_head = NULL;   /* refusals answered inside the sends below queue anew */
	for (struct txn_meta *m = list; m; m = next) {
		next = m->retry_next;
		if (m->retry_due_ms > now) {
			m->retry_next = t->retry_head;
			t->retry_head = m;
			continue;
		}
		m->retry_listed = false;
		m->retry_next = NULL;
		if (m->drive == TXN_DRIVE_PREPARE) {   /* a Prepare to write again */
			if (persist(c, m, true) < 0)
				prepare_again(c, m);
			continue;
		}
		m->markers_left++;   /* held, as in to_owners */
		for (uint32_t i = 0; i < m->ntps; i++) {
			if (!m->tps[i].marker_again)
				continue;
			m->tps[i].marker_again = false;
			m->tps[i].reauth_unsent = false;
			/* a grant refused for credit while adding partitions, else a marker */
			bool deciding = m->state == TXN_PREPARE_COMMIT || m->state == TXN_PREPARE_ABORT;
			uint16_t type = deciding ? DP_MSG_TXN_MARKER : DP_MSG_TXN_ADD;
			if (!tp_send(c, m, &m->tps[i], i, type, 0, m->state == TXN_PREPARE_COMMIT, NULL))
				m->markers_left--;   /* the topic went away: nothing to mark there */
		}
		if (--m->markers_left == 0)
			txnc_step(c, m);
	}
	answer_dones(c);
}

void dp_txnc_offsets_waiting(struct txn_meta *m)
{
	assert(m->drive == TXN_DRIVE_MARKERS);
	m->markers_left++;
}

/* A transaction's staged offsets' end (dp_group_txn_end) is durable or failed: one marker fewer to wait for. */
void dp_txnc_offsets_ended(struct dp_core *c, struct txn_meta *m)
{
	assert(m->drive == TXN_DRIVE_MARKERS && m->markers_left > 0);
	if (--m->markers_left == 0)
		txnc_step(c, m);
}

static void next_ack(struct dp_core *c, struct txn_meta *m, const struct dp_msg *msg);

static void owner_ack(struct dp_core *c, struct dp_msg *msg)
{
	struct txn_meta *m = msg->ctx;
	if (msg->type == DP_MSG_TXN_ADD_ACK && m->drive == TXN_DRIVE_MARKERS) {
		next_ack(c, m, msg);   /* a grant of the next transaction (this one's were all acked before EndTxn) */
		return;
	}
	assert(m->markers_left > 0);
	if ((msg->type == DP_MSG_TXN_MARKER_DONE || msg->type == DP_MSG_TXN_ADD_ACK) && msg->err &&
	    marker_retry(c, m, msg))
		return;
	if (msg->type == DP_MSG_TXN_ADD_ACK && msg->err == KERR_NOT_ENOUGH_REPLICAS)
		m->grant_refused = true;   /* the owner could not record it: add_done */
	if (msg->err && msg->err != KERR_UNKNOWN_TOPIC_OR_PARTITION)
		DP_WARN_RL("txn %.*s: partition %d answered error %d %s", m->id_len, m->id, msg->partition, msg->err,
		           kerr_name(msg->err) ?: "?");
	if (msg->type == DP_MSG_TXN_MARKER_DONE && m->markers_acked++ == 0)
		fault_point(c, 2, "after the first marker is durable");
	if (--m->markers_left == 0)
		txnc_step(c, m);
}

/*
 * Abort m's open transaction with a bumped epoch, so the old producer is
 * fenced. The broker hands out at most TXN_EPOCH_MAX, so the bump reaches
 * INT16_MAX at most; an epoch already there came from a hostile or foreign
 * log. It is not bumped (it would wrap negative): the abort goes at that
 * epoch, check_producer refuses it from anyone, and the next InitProducerId
 * moves the id to a new producer id with epoch 0 (init_pid), as Kafka's
 * coordinator does with an exhausted epoch (KIP-360).
 */
static void fence_and_abort(struct dp_core *c, struct txn_meta *m, const char *why)
{
	bool exhausted = m->epoch >= INT16_MAX;
	if (exhausted)
		DP_WARN("txn %.*s: epoch %d is the last: aborting (%s) at it, not bumped; the next InitProducerId "
		        "gets a new producer id", m->id_len, m->id, m->epoch, why);
	else
		DP_INFO_RL("txn %.*s: aborting (%s), epoch %d -> %d", m->id_len, m->id, why, m->epoch, m->epoch + 1);
	txn_set_state(m, TXN_PREPARE_EPOCH_FENCE);
	if (!exhausted)
		m->epoch++;   /* markers carry the new epoch: the zombie's batches are refused */
	txn_set_state(m, TXN_PREPARE_ABORT);
	m->op_ctx = NULL;   /* no client waits */
	m->markers_acked = 0;
	txn_set_drive(m, TXN_DRIVE_PREPARE);
	if (persist(c, m, true) < 0)
		prepare_again(c, m);
}

/* ---- requests --------------------------------------------------------------------- */

static void start_op(struct txn_meta *m, enum txn_drive op, struct dp_msg *msg, struct dp_call *r)
{
	m->op_ctx = r;
	m->op_core = msg->src;
	m->op_gen = msg->gen;
	m->op_version = r->hdr.api_version;
	m->markers_acked = 0;
	m->grant_refused = false;
	txn_set_drive(m, op);
}

static int16_t init_pid(struct dp_core *c, struct dp_msg *msg, struct dp_call *r)
{
	struct InitProducerIdRequest *q = r->req;
	struct dp_txnc *t = c->txnc;
	if (q->TransactionalId.len == 0 || q->TransactionalId.len > TXN_ID_BYTES_MAX)
		return KERR_INVALID_REQUEST;
	if (q->TransactionTimeoutMs <= 0 || q->TransactionTimeoutMs > c->b->cfg.txn_max_timeout_ms)
		return KERR_INVALID_TRANSACTION_TIMEOUT;
	struct txn_meta *m = txn_coord_find(t->coord, q->TransactionalId.ptr, (size_t)q->TransactionalId.len);
	if (!m && txn_coord_count(t->coord) >= c->b->cfg.txn_ids_max) {
		/* Full: a retriable answer (clients back off and retry) until idle ids
		 * expire; never more memory. */
		t->full_refused++;
		DP_WARN_RL("transaction coordinator: %u transactional ids tracked (the most): %llu InitProducerId(s) "
		           "for new ids answered COORDINATOR_LOAD_IN_PROGRESS so far", txn_coord_count(t->coord),
		           (unsigned long long)t->full_refused);
		return KERR_COORDINATOR_LOAD_IN_PROGRESS;
	}
	if (!m) {
		m = txn_coord_add(t->coord, q->TransactionalId.ptr, (size_t)q->TransactionalId.len);
		if (!m)
			return KERR_UNKNOWN_SERVER_ERROR;
	}
	if (txn_busy(m) || m->state == TXN_PREPARE_COMMIT || m->state == TXN_PREPARE_ABORT)
		return KERR_CONCURRENT_TRANSACTIONS;   /* the client retries */
	if (m->pid >= 0 && m->state != TXN_ONGOING && dp_group_txn_ending(c, m->pid))
		return KERR_CONCURRENT_TRANSACTIONS;   /* its last transaction's offsets are still ending (group.c) */
	if (q->ProducerId >= 0 && m->pid >= 0) {
		/* KIP-360: the caller says who it is; only the current instance may bump. */
		bool current = q->ProducerId == m->pid && q->ProducerEpoch == m->epoch;
		bool rolled = q->ProducerId == m->prev_pid && q->ProducerEpoch == m->prev_epoch;
		if (!current && !rolled)
			return fenced_err(KAPI_INIT_PRODUCER_ID, r->hdr.api_version);
	}
	if (m->state == TXN_ONGOING) {
		/* A new instance while a transaction is open: fence the old one, abort its
		 * transaction, and answer the new one once that is done. */
		fence_and_abort(c, m, "a new instance of the producer arrived");
		memcpy(m->queued, msg, sizeof(*msg));
		m->has_queued = true;
		return DP_ANSWER_LATER;
	}
	/* The new identity goes to the log; the id takes it once that is durable (dp_txnc_on_write). */
	struct txnc_init ini = { .pid = m->pid, .prev_pid = -1, .epoch = (int16_t)(m->epoch + 1), .prev_epoch = -1,
	                         .timeout_ms = q->TransactionTimeoutMs };
	if (m->pid < 0 || m->epoch >= TXN_EPOCH_MAX) {
		int64_t pid = dp_pid_alloc(c->ctrl_pids, c->io);
		if (pid == -ENOSPC)
			return KERR_UNKNOWN_SERVER_ERROR;   /* every id was issued (dp_pid_alloc said so) */
		if (pid < 0)
			return KERR_COORDINATOR_LOAD_IN_PROGRESS;   /* the next id block is being recorded */
		ini = (struct txnc_init){ .pid = pid, .prev_pid = m->pid, .epoch = 0, .prev_epoch = m->epoch,
		                          .timeout_ms = q->TransactionTimeoutMs };
	}
	start_op(m, TXN_DRIVE_INIT, msg, r);
	if (persist_ex(c, m, true, false, &ini) < 0) {
		m->op_ctx = NULL;   /* the caller answers with the error */
		op_finish(c, m, KERR_NONE);
		return KERR_COORDINATOR_NOT_AVAILABLE;
	}
	return DP_ANSWER_LATER;   /* answered later */
}

/*
 * May m's next transaction begin now, while this one's markers are being
 * written (add_partitions)? One AddPartitionsToTxn of it at a time, none
 * behind a request already queued (an InitProducerId goes first), and none
 * where the resumed decision is to fence the producer, or has no serial (a
 * log from before serials: owners could not tell it apart). Nor after a
 * transaction with offsets (AddOffsetsToTxn): should their end fail in the
 * offsets log, it stays staged, and a restart resolves it by the id's
 * latest state, which must then still be this transaction's; so nothing
 * later may begin (dp_group_txn_ending) until that end is durable.
 */
static bool next_may_begin(const struct txn_meta *m)
{
	return m->drive == TXN_DRIVE_MARKERS && (m->state == TXN_PREPARE_COMMIT || m->state == TXN_PREPARE_ABORT) &&
	       m->serial > 0 && !m->next_ctx && !m->has_queued && !m->recon_fence && m->ngroups == 0;
}

/* The common checks of AddPartitionsToTxn, AddOffsetsToTxn and EndTxn. */
static int16_t check_producer(struct dp_core *c, struct dp_call *r, struct kstr id, int64_t pid,
                              int16_t epoch, struct txn_meta **out)
{
	struct txn_meta *m = id.len > 0 ? txn_coord_find(c->txnc->coord, id.ptr, (size_t)id.len) : NULL;
	if (!m || m->pid != pid)
		return KERR_INVALID_PRODUCER_ID_MAPPING;
	/* INT16_MAX is never handed out (TXN_EPOCH_MAX): only a fenced or foreign producer holds it. */
	if (m->epoch != epoch || epoch >= INT16_MAX)
		return fenced_err(r->hdr.api_key, r->hdr.api_version);
	if (r->hdr.api_key == KAPI_ADD_PARTITIONS_TO_TXN && next_may_begin(m)) {
		*out = m;   /* the next transaction's first adds (add_partitions) */
		return KERR_NONE;
	}
	if (txn_busy(m) || m->state == TXN_PREPARE_COMMIT || m->state == TXN_PREPARE_ABORT ||
	    m->state == TXN_PREPARE_EPOCH_FENCE)
		return KERR_CONCURRENT_TRANSACTIONS;
	/* The last transaction's offsets are still ending (group.c): it is not complete yet. */
	if (m->state != TXN_ONGOING && dp_group_txn_ending(c, m->pid))
		return KERR_CONCURRENT_TRANSACTIONS;
	*out = m;
	return KERR_NONE;
}

/*
 * Room for extra more partitions or groups, taken before anything changes
 * (a new transaction's lists are cleared first): a full pool refuses the
 * call retriably with nothing moved. 0, or the error to answer.
 */
static int16_t lists_room(struct txn_meta *m, uint32_t tps, uint32_t groups, bool next)
{
	if (m->state != TXN_ONGOING && !next)
		txn_meta_clear_txn(m);   /* what begin_if_new would drop */
	int rc = next ? txn_meta_next_room(m, tps) : txn_meta_tps_room(m, tps);
	if (rc == 0)
		rc = txn_meta_groups_room(m, groups);
	if (rc == -ENOSPC)
		return KERR_INVALID_REQUEST;   /* over TXN_PARTS_MAX / TXN_GROUPS_MAX */
	if (rc < 0) {
		DP_INFO_RL("txn %.*s: the open transactions' %s pool is full (--txn-%s-max); refused retriably",
		           m->id_len, m->id, tps ? "partition" : "group", tps ? "partitions" : "groups");
		return KERR_COORDINATOR_NOT_AVAILABLE;   /* could not record now: retriable */
	}
	return 0;
}

static void begin_if_new(struct txn_meta *m)
{
	if (m->state != TXN_ONGOING) {
		assert(m->ntps == 0 && m->ngroups == 0);   /* lists_room cleared them */
		txn_set_state(m, TXN_ONGOING);
		m->start_ms = dp_wall_ms();
	}
}

/*
 * The producer's next transaction, begun while this one's markers are
 * being written (Prepare durable, markers sent, EndTxn answered): its
 * AddPartitionsToTxn is served now instead of waiting for those markers to
 * be durable. Its grants go to the owners behind this transaction's
 * markers (one ring per owner, in order; DP_F_TXN_AFTER where the
 * partition is in this transaction), and it is answered once they are
 * held. Its record is written only after this transaction's Complete
 * (next_install), so the log never has it Ongoing while markers of the
 * last one may be missing. Safe because:
 *  - on each partition of this transaction the marker is written before
 *    any batch under the new grant, even where this transaction has no
 *    data (shard.c shard_marker), and a log is durable as a prefix: a
 *    batch of the next transaction that survives a crash has this
 *    decision recorded before it there;
 *  - where the marker was refused (offline, no memory, no credit toward
 *    that core) the owner refuses the grant, retriably, until the marker,
 *    sent again, is written; where its write failed after the grant (the
 *    log cut at its durable end, the marker gone) the batches under the
 *    grant are told to come back until then (shard.c decided_here);
 *  - a crash before Complete is durable: the log has Prepare, and the
 *    restart resumes it; a partition holding the next transaction's data
 *    reports it open with this decision applied (or not in its list), and
 *    open_report aborts it there and fences the producer: it was told its
 *    partitions were added, and must not commit without them. A crash
 *    after Complete but before the next record: the same, from Complete.
 * EndTxn and AddOffsetsToTxn of the next transaction wait for Complete
 * (queued, txn_request).
 */
static void next_granted(struct dp_core *c, struct txn_meta *m)
{
	struct dp_call *r = m->next_ctx;
	m->next_ctx = NULL;
	if (m->next_refused) {
		m->next_refused = false;   /* as add_done: next_told stays put, the retry tells them all again */
		set_error(r, KERR_COORDINATOR_NOT_AVAILABLE);
	} else {
		m->next_told = m->next_ntps;
	}
	reply(c, r);
}

static int16_t next_begin(struct dp_core *c, struct txn_meta *m, struct dp_call *r)
{
	if (!m->next_told)
		m->next_start_ms = dp_wall_ms();   /* its first add: the transaction's timeout counts from here */
	m->next_ctx = r;
	m->next_refused = false;
	m->next_left++;   /* held until every grant is sent, as in to_owners */
	for (uint32_t i = 0; i < m->next_ntps; i++) {
		const struct txn_tp *tp = &m->next_tps[i];
		bool after = txn_meta_has_tp(m, tp->topic, tp->topic_len, tp->partition);   /* behind a marker */
		tp_send(c, m, tp, i, DP_MSG_TXN_ADD, after ? DP_F_TXN_AFTER : 0, false, &m->next_left);
	}
	if (--m->next_left == 0)
		next_granted(c, m);
	return DP_ANSWER_LATER;
}

/* An owner answered a grant of the next transaction (still in this one's MARKERS). */
static void next_ack(struct dp_core *c, struct txn_meta *m, const struct dp_msg *msg)
{
	assert(m->next_left > 0 && m->next_ctx);
	if (msg->err == KERR_NOT_ENOUGH_REPLICAS)
		m->next_refused = true;   /* could not record it, or the last decision is not recorded there */
	else if (msg->err && msg->err != KERR_UNKNOWN_TOPIC_OR_PARTITION)
		DP_WARN_RL("txn %.*s: partition %d answered error %d %s", m->id_len, m->id, msg->partition, msg->err,
		           kerr_name(msg->err) ?: "?");
	if (--m->next_left == 0)
		next_granted(c, m);
}

static int16_t add_partitions(struct dp_core *c, struct dp_msg *msg, struct dp_call *r)
{
	struct AddPartitionsToTxnRequest *q = r->req;
	struct AddPartitionsToTxnResponse *resp = r->resp;
	struct txn_meta *m;
	int16_t err = check_producer(c, r, q->V3AndBelowTransactionalId, q->V3AndBelowProducerId,
	                             q->V3AndBelowProducerEpoch, &m);
	if (err)
		return err;
	bool next = m->drive == TXN_DRIVE_MARKERS;   /* the next transaction (check_producer: next_may_begin) */
	/* Unknown partitions: Kafka adds none, and marks the rest OPERATION_NOT_ATTEMPTED. */
	/*
	 * A retry of a call that was done is answered at once; not one whose
	 * write failed: its partitions are in m->tps (and will be in the next
	 * record), but their owners were never told, so they would refuse the
	 * producer's batches. tps_told counts those that were.
	 */
	bool unknown = false, all_in = next ? m->next_told == m->next_ntps :
	                               m->state == TXN_ONGOING && m->tps_told == m->ntps;
	uint32_t fresh = 0;   /* requested partitions not in the transaction yet (duplicates counted twice) */
	for (int32_t i = 0; i < q->V3AndBelowTopics_n; i++) {
		struct AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *tq = &q->V3AndBelowTopics[i];
		for (int32_t j = 0; j < tq->Partitions_n; j++) {
			uint32_t id, gen, hash;
			bool ok = tq->Name.len > 0 &&
			          dp_ctrl_topic(c, tq->Name.ptr, (size_t)tq->Name.len, tq->Partitions[j], &id, &gen, &hash);
			resp->ResultsByTopicV3AndBelow[i].ResultsByPartition[j].PartitionErrorCode =
				ok ? 0 : KERR_UNKNOWN_TOPIC_OR_PARTITION;
			unknown |= !ok;
			bool has = ok && (next ? txn_meta_next_has_tp(m, tq->Name.ptr, (size_t)tq->Name.len, tq->Partitions[j]) :
			                         txn_meta_has_tp(m, tq->Name.ptr, (size_t)tq->Name.len, tq->Partitions[j]));
			if (ok && !has) {
				all_in = false;
				fresh++;
			}
		}
	}
	if (unknown) {
		for (int32_t i = 0; i < resp->ResultsByTopicV3AndBelow_n; i++) {
			struct AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult *t = &resp->ResultsByTopicV3AndBelow[i];
			for (int32_t j = 0; j < t->ResultsByPartition_n; j++)
				if (!t->ResultsByPartition[j].PartitionErrorCode)
					t->ResultsByPartition[j].PartitionErrorCode = KERR_OPERATION_NOT_ATTEMPTED;
		}
		reply(c, r);
		return DP_ANSWER_LATER;
	}
	if (all_in)
		return KERR_NONE;   /* a retry: everything is already in the transaction */
	if ((err = lists_room(m, fresh, 0, next)))
		return err;
	if (!next)
		begin_if_new(m);
	for (int32_t i = 0; i < q->V3AndBelowTopics_n; i++) {
		struct AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *tq = &q->V3AndBelowTopics[i];
		for (int32_t j = 0; j < tq->Partitions_n; j++)
			if ((next ? txn_meta_next_add_tp : txn_meta_add_tp)(m, tq->Name.ptr, (size_t)tq->Name.len,
			                                                    tq->Partitions[j]) < 0)
				return KERR_INVALID_REQUEST;   /* over TXN_PARTS_MAX */
	}
	if (next)
		return next_begin(c, m, r);
	start_op(m, TXN_DRIVE_ADD, msg, r);
	/*
	 * The record is written, not waited for: the owners are told and the
	 * client answered (add_done) as soon as they have the grant, so the
	 * first produce of a transaction waits for no coordinator fdatasync.
	 * Safe because:
	 *  - every later record of this id holds the whole list, and the log is
	 *    durable as a prefix, so once any later record of it is durable so
	 *    is this add: in particular the Prepare, which EndTxn waits for.
	 *    A commit or abort therefore always names every partition added;
	 *  - the one window is a crash before this record (and any later one)
	 *    is durable, with the producer's batches already on a partition.
	 *    At the restart that partition's owner reports the transaction open
	 *    (open_report): if the log still has the transaction Ongoing at that
	 *    epoch, the partition joins it, as the producer was told; if not,
	 *    the data is aborted there and the id fenced, so the producer can
	 *    neither commit without it nor be told a lost one committed.
	 *    Nothing is served before every owner has reported;
	 *  - a failed write changes nothing the client was told: the list is in
	 *    memory, and the next record (at the latest the Prepare) carries it.
	 */
	if (c->b->cfg.fault_txn_kill == 4)   /* test only: the crash always comes before the write */
		DP_WARN("fault injection: the AddPartitionsToTxn record of txn %.*s is not written", m->id_len, m->id);
	else if (persist(c, m, false) < 0) {
		m->op_ctx = NULL;   /* the caller answers with the error */
		op_finish(c, m, KERR_NONE);
		return KERR_COORDINATOR_NOT_AVAILABLE;
	}
	txnc_step(c, m);   /* the grants; the last owner's ack answers (add_done) */
	return DP_ANSWER_LATER;
}

static int16_t add_offsets(struct dp_core *c, struct dp_msg *msg, struct dp_call *r)
{
	struct AddOffsetsToTxnRequest *q = r->req;
	struct txn_meta *m;
	int16_t err = check_producer(c, r, q->TransactionalId, q->ProducerId, q->ProducerEpoch, &m);
	if (err)
		return err;
	if (q->GroupId.len <= 0)
		return KERR_INVALID_GROUP_ID;
	if (m->state == TXN_ONGOING && txn_meta_has_group(m, q->GroupId.ptr, (size_t)q->GroupId.len))
		return KERR_NONE;
	if ((err = lists_room(m, 0, 1, false)))
		return err;
	begin_if_new(m);
	if (txn_meta_add_group(m, q->GroupId.ptr, (size_t)q->GroupId.len) < 0)
		return KERR_INVALID_REQUEST;
	start_op(m, TXN_DRIVE_OFFSETS, msg, r);
	if (persist(c, m, true) < 0) {
		offsets_not_written(m);
		m->op_ctx = NULL;   /* the caller answers with the error */
		op_finish(c, m, KERR_NONE);
		return KERR_COORDINATOR_NOT_AVAILABLE;
	}
	return DP_ANSWER_LATER;
}

static int16_t end_txn(struct dp_core *c, struct dp_msg *msg, struct dp_call *r)
{
	struct EndTxnRequest *q = r->req;
	fault_point(c, 4, "at EndTxn, the AddPartitionsToTxn records never written (--fault-txn-kill add-lost)");
	struct txn_meta *m = q->TransactionalId.len > 0 ?
		txn_coord_find(c->txnc->coord, q->TransactionalId.ptr, (size_t)q->TransactionalId.len) : NULL;
	if (!m || m->pid != q->ProducerId)
		return KERR_INVALID_PRODUCER_ID_MAPPING;
	if (m->epoch != q->ProducerEpoch)
		return fenced_err(KAPI_END_TXN, r->hdr.api_version);
	if (txn_busy(m))
		return KERR_CONCURRENT_TRANSACTIONS;
	bool commit = q->Committed;
	switch (m->state) {
	case TXN_ONGOING:
		break;
	case TXN_COMPLETE_COMMIT:
		return commit ? KERR_NONE : KERR_INVALID_TXN_STATE;   /* a retry of a finished call */
	case TXN_COMPLETE_ABORT:
		return commit ? KERR_INVALID_TXN_STATE : KERR_NONE;
	case TXN_PREPARE_COMMIT:
		return commit ? KERR_CONCURRENT_TRANSACTIONS : KERR_INVALID_TXN_STATE;
	case TXN_PREPARE_ABORT:
		return commit ? KERR_INVALID_TXN_STATE : KERR_CONCURRENT_TRANSACTIONS;
	default:
		return KERR_INVALID_TXN_STATE;
	}
	txn_set_state(m, commit ? TXN_PREPARE_COMMIT : TXN_PREPARE_ABORT);
	start_op(m, TXN_DRIVE_PREPARE, msg, r);
#ifdef WSIM_PLANT_MARKER_BEFORE_PREPARE
	/* Planted bug, whole-broker simulator only (tests/sim/meson.build): EndTxn is answered and
	 * the markers go out before the Prepare record is durable. */
	if (persist(c, m, false) == 0) {
		txnc_step(c, m);
		return DP_ANSWER_LATER;
	}
#endif
	if (persist(c, m, true) < 0) {
		m->op_ctx = NULL;   /* the caller answers with the error */
		prepare_again(c, m);
		return KERR_COORDINATOR_NOT_AVAILABLE;
	}
	return DP_ANSWER_LATER;
}

/*
 * ListTransactions / DescribeTransactions: read-only views of the table.
 * An answer larger than the call's arena (its size follows the request's,
 * not the table's) is made again in a larger call (dp_call_grow); only one
 * past DP_ARENA_BYTES_MAX is answered UNKNOWN_SERVER_ERROR.
 */
static int16_t list_too_big(struct dp_call *r)
{
	if (!dp_call_grow(r))
		DP_WARN_RL("ListTransactions: the answer does not fit the largest call arena");
	((struct ListTransactionsResponse *)r->resp)->TransactionStates_n = 0;
	return KERR_UNKNOWN_SERVER_ERROR;
}

static int16_t list_transactions(struct dp_core *c, struct dp_call *r)
{
	struct ListTransactionsRequest *q = r->req;
	struct ListTransactionsResponse *resp = r->resp;
	uint32_t n = txn_coord_count(c->txnc->coord), k = 0, cur = 0;
	resp->TransactionStates = karena_alloc(&r->arena, sizeof(*resp->TransactionStates) * (n + 1));
	resp->UnknownStateFilters_n = 0;
	if (!resp->TransactionStates)
		return list_too_big(r);
	struct txn_meta *m;
	while ((m = txn_coord_next(c->txnc->coord, &cur))) {
		const char *sname = txn_state_name(m->state);
		bool keep = q->StateFilters_n <= 0 && q->ProducerIdFilters_n <= 0;
		for (int32_t i = 0; i < q->StateFilters_n; i++)
			keep |= (size_t)q->StateFilters[i].len == strlen(sname) &&
			        memcmp(q->StateFilters[i].ptr, sname, strlen(sname)) == 0;
		for (int32_t i = 0; i < q->ProducerIdFilters_n; i++)
			keep |= q->ProducerIdFilters[i] == m->pid;
		if (!keep || m->pid < 0)
			continue;
		struct ListTransactionsResponse_TransactionState *s = &resp->TransactionStates[k++];
		bool ok = true;   /* a copy: the table is the coordinator's (call.h) */
		s->TransactionalId = dp_call_str(r, m->id, (size_t)m->id_len, &ok);
		if (!ok)
			return list_too_big(r);
		s->ProducerId = m->pid;
		s->TransactionState = (struct kstr){ sname, (int32_t)strlen(sname) };
	}
	resp->TransactionStates_n = (int32_t)k;
	return KERR_NONE;
}

/*
 * The response's memory (the request's arena) ran out at entry i: the call
 * is made again in a larger one (dp_call_grow). Where it cannot be, entry i
 * and every later one are answered UNKNOWN_SERVER_ERROR rather than as
 * found with nothing in them.
 */
static int16_t describe_failed(struct dp_call *r, const struct DescribeTransactionsRequest *q,
                               struct DescribeTransactionsResponse *resp, int32_t i)
{
	if (!dp_call_grow(r))
		DP_WARN_RL("DescribeTransactions: the answer does not fit the largest call arena");
	for (; i < resp->TransactionStates_n; i++) {
		struct DescribeTransactionsResponse_TransactionState *s = &resp->TransactionStates[i];
		s->TransactionalId = q->TransactionalIds[i];
		s->ErrorCode = KERR_UNKNOWN_SERVER_ERROR;
		s->TransactionState = (struct kstr){ "", 0 };
		s->ProducerId = -1;
		s->ProducerEpoch = -1;
		s->Topics = NULL;
		s->Topics_n = 0;
	}
	return KERR_NONE;
}

static int16_t describe_transactions(struct dp_core *c, struct dp_call *r)
{
	struct DescribeTransactionsRequest *q = r->req;
	struct DescribeTransactionsResponse *resp = r->resp;
	int32_t n = q->TransactionalIds_n > 0 ? q->TransactionalIds_n : 0;
	resp->TransactionStates = karena_alloc(&r->arena, sizeof(*resp->TransactionStates) * (size_t)(n + 1));
	if (!resp->TransactionStates)
		return KERR_UNKNOWN_SERVER_ERROR;
	resp->TransactionStates_n = n;
	for (int32_t i = 0; i < n; i++) {
		struct DescribeTransactionsResponse_TransactionState *s = &resp->TransactionStates[i];
		struct kstr id = q->TransactionalIds[i];
		s->TransactionalId = id;
		s->TransactionState = (struct kstr){ "", 0 };
		struct txn_meta *m = id.len > 0 ? txn_coord_find(c->txnc->coord, id.ptr, (size_t)id.len) : NULL;
		if (!m || m->pid < 0) {
			s->ErrorCode = KERR_TRANSACTIONAL_ID_NOT_FOUND;
			s->ProducerId = -1;
			s->ProducerEpoch = -1;
			continue;
		}
		const char *sname = txn_state_name(m->state);
		s->TransactionState = (struct kstr){ sname, (int32_t)strlen(sname) };
		s->TransactionTimeoutMs = m->timeout_ms;
		s->TransactionStartTimeMs = m->state == TXN_EMPTY ? -1 : m->start_ms;
		s->ProducerId = m->pid;
		s->ProducerEpoch = m->epoch;
		/* Group the partitions by topic (tps are few; quadratic is fine here). */
		s->Topics = karena_alloc(&r->arena, sizeof(*s->Topics) * (m->ntps + 1));
		if (!s->Topics)
			return describe_failed(r, q, resp, i);
		int32_t nt = 0;
		for (uint32_t j = 0; j < m->ntps; j++) {
			struct txn_tp *tp = &m->tps[j];
			int32_t k;
			for (k = 0; k < nt; k++)
				if (s->Topics[k].Topic.len == tp->topic_len && !memcmp(s->Topics[k].Topic.ptr, tp->topic, tp->topic_len))
					break;
			if (k == nt) {
				bool ok = true;   /* a copy: the table is the coordinator's (call.h) */
				s->Topics[nt].Topic = dp_call_str(r, tp->topic, (size_t)tp->topic_len, &ok);
				if (!ok)
					return describe_failed(r, q, resp, i);
				s->Topics[nt].Partitions = karena_alloc(&r->arena, sizeof(int32_t) * (m->ntps + 1));
				if (!s->Topics[nt].Partitions)
					return describe_failed(r, q, resp, i);
				s->Topics[nt].Partitions_n = 0;
				nt++;
			}
			s->Topics[k].Partitions[s->Topics[k].Partitions_n++] = tp->partition;
		}
		s->Topics_n = nt;
	}
	return KERR_NONE;
}

/* The transactional id a coordinator request is about, if any. */
static struct kstr request_txn_id(const struct dp_call *r)
{
	switch (r->hdr.api_key) {
	case KAPI_INIT_PRODUCER_ID: return ((const struct InitProducerIdRequest *)r->req)->TransactionalId;
	case KAPI_ADD_PARTITIONS_TO_TXN: return ((const struct AddPartitionsToTxnRequest *)r->req)->V3AndBelowTransactionalId;
	case KAPI_ADD_OFFSETS_TO_TXN: return ((const struct AddOffsetsToTxnRequest *)r->req)->TransactionalId;
	case KAPI_END_TXN: return ((const struct EndTxnRequest *)r->req)->TransactionalId;
	}
	return (struct kstr){ NULL, -1 };
}

static void txn_request(struct dp_core *c, struct dp_msg *msg)
{
	struct dp_call *r = dp_call_take(msg);
	int16_t err;
	struct kstr id = request_txn_id(r);
	struct txn_meta *busy = id.len > 0 && c->txnc->loaded ?
		txn_coord_find(c->txnc->coord, id.ptr, (size_t)id.len) : NULL;
	if (busy && (busy->drive == TXN_DRIVE_PREPARE || busy->drive == TXN_DRIVE_MARKERS) && !busy->has_queued &&
	    !(r->hdr.api_key == KAPI_ADD_PARTITIONS_TO_TXN && next_may_begin(busy))) {
		/* Markers are being written: the next call waits for them instead of
		 * getting CONCURRENT_TRANSACTIONS and backing off (but for the next
		 * transaction's AddPartitionsToTxn: add_partitions). */
		memcpy(busy->queued, msg, sizeof(*msg));
		busy->has_queued = true;
		return;
	}
	if (!c->txnc->loaded) {
		err = KERR_COORDINATOR_LOAD_IN_PROGRESS;
	} else {
		switch (r->hdr.api_key) {
		case KAPI_INIT_PRODUCER_ID: err = init_pid(c, msg, r); break;
		case KAPI_ADD_PARTITIONS_TO_TXN: err = add_partitions(c, msg, r); break;
		case KAPI_ADD_OFFSETS_TO_TXN: err = add_offsets(c, msg, r); break;
		case KAPI_END_TXN: err = end_txn(c, msg, r); break;
		case KAPI_DESCRIBE_TRANSACTIONS: err = describe_transactions(c, r); break;
		case KAPI_LIST_TRANSACTIONS: err = list_transactions(c, r); break;
		default: err = KERR_INVALID_REQUEST; break;
		}
	}
	if (err == DP_ANSWER_LATER)
		return;   /* answered later, or already */
	if (err)
		set_error(r, err);
	reply(c, r);
}

/*
 * Start-up, before anything is served: a partition's owner reports a
 * transaction open there (shard.c: dp_shard_report_opens): its producer,
 * epoch, and the serial of the last decision the partition applied for it.
 * AddPartitionsToTxn is answered before its record is durable (add_partitions
 * says why that is safe), so a crash may have lost the record of a partition
 * added, and written to, since. The verdict, from the log's state:
 *  - the producer's id is Ongoing at that epoch: the data is that
 *    transaction's (an earlier one's markers were all durable before this
 *    one's first add was served); the partition joins it if it lacks it;
 *  - PrepareCommit/PrepareAbort, the partition in its list, at its epoch, and
 *    that decision not applied there yet: its own data, which the resumed
 *    fan-out closes;
 *  - anything else (Empty, Complete*, another epoch, a decision already
 *    applied there, a partition not in the decided list): a later
 *    transaction whose add was lost. It is aborted on that partition (the
 *    answer INVALID_TXN_STATE says so), and the id is fenced (reconciled):
 *    its producer, told its partition was added, must not commit the rest.
 *  - no id holds that producer id (a damaged log): aborted there.
 */
static int pid_ix_cmp(const void *a, const void *b)
{
	int64_t x = ((const struct pid_ix *)a)->pid, y = ((const struct pid_ix *)b)->pid;
	return (x > y) - (x < y);
}

static void open_report(struct dp_core *c, struct dp_msg *msg)
{
	struct dp_txnc *t = c->txnc;
	size_t nlen = 0;
	const char *name = dp_ctrl_topic_name(c, msg->topic_id, msg->gen, &nlen);
	int16_t epoch = msg->u.txn.epoch;
	int32_t last = msg->u.txn.coord_epoch;
	int16_t verdict = KERR_NONE;
	struct pid_ix key = { .pid = msg->u.txn.pid };
	const struct pid_ix *ix = name && !t->loaded ?
		bsearch(&key, t->pids, t->npids, sizeof(*t->pids), pid_ix_cmp) : NULL;
	struct txn_meta *m = ix ? ix->m : NULL;
	t->opens_seen++;
	if (!name || t->loaded) {
		verdict = KERR_NONE;   /* the topic went away; or not start-up's (cannot be): kept */
	} else if (!m) {
		t->opens_unknown++;
		verdict = KERR_INVALID_TXN_STATE;
	} else {
		bool listed = txn_meta_has_tp(m, name, nlen, msg->partition);
		bool own = false;
		if (m->state == TXN_ONGOING && epoch == m->epoch) {
			own = listed || (!m->recon_fence && txn_meta_tps_room(m, 1) == 0 &&
			                 txn_meta_add_tp(m, name, nlen, msg->partition) == 0);
			if (own && !listed) {
				m->recon_joined = true;
				t->opens_joined++;
			}
		} else if (m->state == TXN_PREPARE_COMMIT || m->state == TXN_PREPARE_ABORT) {
			own = listed && epoch == m->epoch && !(m->serial > 0 && last == m->serial);
		}
		if (own && listed)
			t->opens_kept++;
		if (!own) {
			m->recon_fence = true;
			verdict = KERR_INVALID_TXN_STATE;
		}
	}
	if (verdict)
		t->opens_aborted++;
	struct dp_msg out = { .type = DP_MSG_TXN_OPEN_ACK, .err = verdict, .topic_id = msg->topic_id, .gen = msg->gen,
	                      .partition = msg->partition };
	out.u.txn = msg->u.txn;
	dp_answer(c, msg, &out);
}

static void opens_done(struct dp_core *c, struct dp_msg *msg)
{
	struct dp_txnc *t = c->txnc;
	assert(t->opens_left > 0 && t->ndone < DP_CORES_MAX);
	t->done_reqs[t->ndone++] = *msg;   /* answered after the grants (answer_dones) */
	if (--t->opens_left == 0)
		reconciled(c);
}

void dp_txnc_msg(struct dp_core *c, struct dp_msg *m)
{
	switch (m->type) {
	case DP_MSG_TXN_REQ: txn_request(c, m); return;
	case DP_MSG_TXN_ADD_ACK:
	case DP_MSG_TXN_MARKER_DONE: owner_ack(c, m); return;
	case DP_MSG_TXN_OPEN: open_report(c, m); return;
	case DP_MSG_TXN_OPENS_DONE: opens_done(c, m); return;
	default: assert(!"not a coordinator message");
	}
}

bool dp_txnc_ready(struct dp_core *c)
{
	return c->txnc && c->txnc->loaded;
}

struct txn_meta *dp_txnc_find(struct dp_core *c, const char *id, size_t len)
{
	return c->txnc && c->txnc->loaded ? txn_coord_find(c->txnc->coord, id, len) : NULL;
}

struct txn_meta *dp_txnc_find_pid(struct dp_core *c, int64_t pid)
{
	uint32_t cur = 0;
	struct txn_meta *m;
	while (c->txnc && (m = txn_coord_next(c->txnc->coord, &cur)))
		if (m->pid == pid)
			return m;
	return NULL;
}

/*
 * A bounded slice of the id table per tick (DP_TXNC_EXPIRE_SCAN): open
 * transactions past their timeout are aborted, idle ids expire. With up to
 * TXN_IDS_MAX ids a pass takes a few seconds; Kafka looks for timed-out
 * transactions every 10 s.
 */
static void scan_ids(struct dp_core *c, int64_t now)
{
	struct dp_txnc *t = c->txnc;
	int64_t ttl = c->b->cfg.txn_id_expiration_ms;
	for (uint32_t seen = 0; seen < DP_TXNC_EXPIRE_SCAN; seen++) {
		struct txn_meta *m = txn_coord_next(t->coord, &t->expire_cursor);
		if (!m) {   /* a pass is over */
			if (t->expired && now - t->expire_log_ms >= DP_TXNC_EXPIRE_LOG_MS) {
				DP_INFO("transaction coordinator: %u transactional ids expired (unused for %lld ms), %u left",
				        t->expired, (long long)ttl, txn_coord_count(t->coord));
				t->expired = 0;
				t->expire_log_ms = now;
			}
			t->expire_cursor = 0;
			return;
		}
		if (m->state == TXN_ONGOING && !txn_busy(m) && now - m->start_ms > m->timeout_ms)
			fence_and_abort(c, m, "transaction timed out");
		/* A removal shifts later entries back: one may be missed this pass, never visited freed. */
		else if (txn_meta_expirable(m, now, ttl) && expire_id(c, m) == 0)
			t->expired++;
	}
}

void dp_txnc_timer(struct dp_core *c)
{
	struct dp_txnc *t = c->txnc;
	int64_t now = dp_wall_ms();
	if (!t || !t->loaded || now < t->next_timer_ms)
		return;   /* nothing runs before the reconciliation: timeouts would see a partial picture */
	t->next_timer_ms = now + DP_TXNC_TIMER_MS;
	marker_retries(c, now);
	maybe_compact(c);
	scan_ids(c, now);
}

/* ---- start-up ------------------------------------------------------------------- */

static int load_batch(void *arg, const uint8_t *batch, size_t len, const struct st_batch_hdr *h)
{
	struct dp_txnc *t = arg;
	t->clog.records++;
	int rc = txn_coord_apply_batch(t->coord, batch, len);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		DP_WARN("transaction log: a damaged record at offset %lld was skipped", (long long)h->base_offset);
	return 0;
}

int dp_txnc_start(struct dp_core *c)
{
	struct dp_txnc *t = calloc(1, sizeof(*t));
	if (!t || txn_coord_create_fixed(&t->coord, c->b->cfg.txn_ids_max, c->b->cfg.txn_tps_max,
	                                 c->b->cfg.txn_groups_max) < 0)   /* the id table and list pools, whole, now */
		return -ENOMEM;
	for (uint32_t i = DP_COORD_WRITES_MAX; i-- > 0;)
		write_put(t, &t->writes[i]);
	c->txnc = t;
	t->clog.name = "transaction log";
	int rc = dp_internal_log_open(c, "__transaction_state", "transaction coordinator", t->dir, sizeof(t->dir),
	                              &t->clog.log, load_batch, t);
	if (rc < 0)
		return rc;
	/* Served once every data core has reported its open transactions (open_report), which look
	 * their producers up in this index (made now: no allocation in the loop; no id comes or
	 * goes before then). */
	t->pids = calloc(txn_coord_count(t->coord) + 1, sizeof(*t->pids));
	if (!t->pids)
		return -ENOMEM;
	uint32_t cur = 0;
	struct txn_meta *m;
	while ((m = txn_coord_next(t->coord, &cur)))
		if (m->pid >= 0)
			t->pids[t->npids++] = (struct pid_ix){ m->pid, m };
	qsort(t->pids, t->npids, sizeof(*t->pids), pid_ix_cmp);
	t->opens_left = (uint32_t)c->b->ndata;
	if (t->opens_left == 0)
		reconciled(c);
	return 0;
}

/*
 * Every data core has reported its open transactions: finish what the log
 * left under way, and serve. An interrupted fan-out gets its markers again
 * (owners skip closed ones), then Complete (and a fence after it if a
 * partition held a later, lost transaction of it); an id a partition's
 * report showed to have lost a transaction is fenced and its transaction
 * aborted; the owners of the other Ongoing ones are told again which
 * producer may write where (with the partitions that joined them, written
 * to the log first).
 */
static void reconciled(struct dp_core *c)
{
	struct dp_txnc *t = c->txnc;
	free(t->pids);   /* start-up's, once */
	t->pids = NULL;
	t->npids = 0;
	uint32_t cur = 0, n = 0, resumed = 0, fenced = 0;
	struct txn_meta *m;
	while ((m = txn_coord_next(t->coord, &cur))) {
		n++;
		if (m->state == TXN_PREPARE_COMMIT || m->state == TXN_PREPARE_ABORT) {
			m->op_ctx = NULL;   /* no client waits */
			m->markers_acked = 0;
			txn_set_drive(m, TXN_DRIVE_PREPARE);
			resumed++;
			fenced += m->recon_fence;   /* once it completes */
			txnc_step(c, m);   /* the Prepare is durable: on to the markers */
		} else if (m->recon_fence) {
			m->recon_fence = m->recon_joined = false;
			if (m->state != TXN_ONGOING) {
				txn_meta_clear_txn(m);   /* a finished one's lists are empty: the lost one's partitions aborted themselves */
				begin_if_new(m);
			}
			fenced++;
			fence_and_abort(c, m, "a partition held a transaction of it that the log lost");
		} else if (m->state == TXN_ONGOING) {
			if (m->recon_joined && persist(c, m, false) < 0)
				DP_ERR("txn %.*s: cannot write the partitions that joined it; its Prepare will", m->id_len, m->id);
			m->recon_joined = false;
			txn_set_drive(m, TXN_DRIVE_REAUTH);
			if (to_owners(c, m, DP_MSG_TXN_ADD, false) == 0)   /* acks are counted and dropped */
				txnc_step(c, m);
		}
	}
	/*
	 * A log written under higher --txn-partitions-max / --txn-groups-max
	 * loads whole (refusing to start would strand its open transactions);
	 * the lists past the pools are on the heap (allocated now, before the
	 * poll loop) until their transactions end; new lists still come only
	 * from the pools.
	 */
	uint32_t over = txn_coord_lists_over(t->coord);
	if (over)
		DP_WARN("transaction coordinator: %u open transactions' partition/group lists do not fit "
		        "--txn-partitions-max %u / --txn-groups-max %u; loaded past them (raise the flags)",
		        over, c->b->cfg.txn_tps_max, c->b->cfg.txn_groups_max);
	t->loaded = true;
	answer_dones(c);
	maybe_compact(c);
	DP_INFO("transaction coordinator: %u transactional ids loaded, %u interrupted commits/aborts resumed",
	        n, resumed);
	DP_INFO("transaction coordinator: %u open transactions reported by the partitions: %u known, %u joined, "
	        "%u aborted (%u of unknown producers); %u ids fenced", t->opens_seen, t->opens_kept, t->opens_joined,
	        t->opens_aborted, t->opens_unknown, fenced);
}

void dp_txnc_stop(struct dp_core *c)
{
	if (c->txnc && c->txnc->clog.log)
		st_log_close(c->txnc->clog.log);
}

void dp_txnc_destroy(struct dp_core *c)
{
	if (!c->txnc)
		return;
	txn_coord_destroy(c->txnc->coord);
	free(c->txnc->pids);   /* stopped before every core reported */
	free(c->txnc);
	c->txnc = NULL;
}
