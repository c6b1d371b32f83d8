/*
 * sim.c - the deterministic simulator of the storage and transaction layer
 * (tests/sim/README.md).
 *
 * One thread, one seed. A simulated machine runs the REAL storage/ and txn/
 * code (st_log appends, group commit and recovery; txn_pstate's sequence and
 * epoch rules, snapshots and recovery; txn_lso's LSO and aborted index; the
 * coordinator's state table and log records from txn/coord.c) on the
 * in-memory disk of sim_disk.c. Around it, the simulator plays the broker's
 * drivers (the owner's produce and marker path as dataplane/shard.c does
 * it, a coordinator driver as dataplane/txncoord.c does it) and the clients:
 * idempotent producers, transactional producers (commits, aborts, abandoned
 * transactions, zombies with stale epochs, retries) and read_committed
 * readers. The machine crashes and restarts at random; the disk tears,
 * delays, reorders, fails and fills. Each run ends by settling every
 * transaction and checking Kafka's guarantees (check_* below). A violation
 * prints the seed; `sluice-sim --seed N` replays it exactly.
 *
 * Locality: the simulator's one thread.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <liburing.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "coord.h"
#include "crc32c.h"
#include "log.h"
#include "lso.h"
#include "pstate.h"
#include "sim_disk.h"

#ifndef ST_FS_SIM
#define ST_FS_SIM 1
#endif
#include "fs.h"

/* Limits of one run (units last). */
#define SIM_PARTS_MAX 4u
#define SIM_IDEM_MAX 3u
#define SIM_TXNP_MAX 3u
#define SIM_CLIENTS_MAX (SIM_IDEM_MAX + SIM_TXNP_MAX)
#define SIM_BATCHES_MAX 8192u         /* model batches per run */
#define SIM_TXNS_MAX 2048u            /* model transactions per run */
#define SIM_INFLIGHT_MAX 5u           /* per producer and partition (max.in.flight) */
#define SIM_EVENTS_MAX 65536u         /* completions and responses waiting to be handled */
#define SIM_ALLOW_MAX 64u
#define SIM_DUPWAIT_MAX 256u
#define SIM_BATCH_BYTES_MAX 9000u
#define SIM_READ_BYTES 65536u
#define SIM_ABORTED_MAX 256u
#define SIM_STEPS_DEFAULT 3000u
#define SIM_SETTLE_STEPS_MAX 20000u
#define SIM_VIOLATIONS_SHOWN 8u
#define SIM_TS_BASE 1000000000000LL   /* batch timestamp = base + model batch id */

enum { E_APPEND, E_RESP };
enum { K_DATA, K_MARKER, K_COORD };
enum { R_PRODUCE, R_INIT, R_ADD, R_END };
enum { OK = 0, ERR_STORAGE = 56, ERR_EPOCH = 47, ERR_SEQ = 45, ERR_TXN_STATE = 48, ERR_CONCURRENT = 51,
       ERR_FENCED = 90 };

/* ---- the model: what the clients sent and learned -------------------------- */

struct mbatch {
	int part, client, txn;       /* txn: model transaction, -1 idempotent only */
	int64_t pid;
	int16_t epoch;
	int32_t seq;
	uint32_t records, len;
	uint8_t *bytes;              /* pristine copy; each send copies it (the log patches the base) */
	int64_t acked;               /* base offset acknowledged, -1 none */
	bool zombie;
};

enum { D_NONE, D_COMMIT, D_ABORT };
struct mtxn {
	int client;
	int64_t pid;
	int16_t epoch;
	int decided;                 /* set when the coordinator's Prepare record is durable */
};

/* ---- the machine ----------------------------------------------------------- */

struct cookie {
	int kind, part, client, batch;  /* batch: model id (data) */
	uint8_t *buf;
	/* coordinator writes */
	int op_stage;
	struct txn_meta *m;
	/* markers */
	int64_t offset, pid;
	bool commit;
};

struct allow { int64_t pid; int16_t epoch; };
struct dupwait { int client, batch; int64_t offset, wait_end; };

struct part {
	char dir[64];
	struct st_log *log;
	struct txn_pstate *ps;
	struct txn_lso *lso;
	int64_t snap_offset;
	struct allow allow[SIM_ALLOW_MAX];
	uint32_t nallow;
	struct dupwait dw[SIM_DUPWAIT_MAX];
	uint32_t ndw;
	uint32_t markers_writing;    /* as struct dp_part's: no snapshot while a marker is not durable */
	int64_t max_lso;             /* largest LSO any reader saw: it must never move back */
	int64_t rpos;                /* the read_committed reader's position */
};

struct event {
	int type;
	struct cookie *ck;           /* E_APPEND */
	int status;
	int64_t base;
	/* E_RESP */
	int client, req, err, batch;
	int64_t pid;
	int16_t epoch;
	uint32_t gen;
};

enum cstate { C_NEED_INIT, C_WAIT_INIT, C_READY, C_WAIT_ADD, C_IN_TXN, C_WAIT_END };

struct client {
	bool txnl;
	char tid[16];
	enum cstate st;
	int64_t pid;
	int16_t epoch;
	int32_t next_seq[SIM_PARTS_MAX];
	int inflight[SIM_PARTS_MAX][SIM_INFLIGHT_MAX]; /* model ids in seq order */
	uint32_t ninflight[SIM_PARTS_MAX];
	bool answered[SIM_PARTS_MAX][SIM_INFLIGHT_MAX];
	int recent[SIM_PARTS_MAX][SIM_INFLIGHT_MAX];    /* last acked batches, newest last */
	uint32_t nrecent[SIM_PARTS_MAX];
	/* transactions */
	int txn;                     /* current model transaction */
	uint32_t parts_mask, target, sent;
	bool failed, commit;
	bool waiting;                /* a coordinator request is out */
	int64_t zpid;                /* a fenced instance still trying (-1 none) */
	int16_t zepoch;
	int zpart, ztxn;
	int32_t zseq;
};

static struct {
	uint64_t seed;
	bool direct;                  /* --direct: the logs' O_DIRECT append path (st_io_config.direct) */
	uint32_t dio_align;           /* --dio-align N: the disk's O_DIRECT alignment (default 4096) */
	bool dio_unreported;          /* --dio-unreported: statx does not say it (the log guesses 4096) */
	bool clean_disk;              /* this seed's disk injects no fault: no log may go offline */
	bool verbose, one, scattered;
	int plant;
	uint32_t nparts, nidem, ntxnp, steps;
	struct sim_faults faults;
	struct io_uring *ring;
	struct st_io *io;
	struct part parts[SIM_PARTS_MAX];
	struct st_log *clog;
	struct txn_coord *coord;
	int coord_txn[SIM_CLIENTS_MAX];   /* model txn the coordinator has Ongoing for a client */
	struct coord_drv {                /* the model driver's progress per client's id (not persisted) */
		uint8_t op;                   /* OP_* under way */
		bool busy;
		bool markers_sent;            /* the current Prepare's markers went out */
	} drv[SIM_CLIENTS_MAX];
	bool up;
	uint32_t gen;                /* machine incarnation: responses of a dead one are lost */
	int crash_in;                /* steps until a planned crash, -1 none */
	struct event *ev;
	uint32_t ev_head, ev_n;
	struct client cl[SIM_CLIENTS_MAX];
	struct mbatch *b;
	uint32_t nb;
	struct mtxn *t;
	uint32_t nt;
	int64_t next_pid;
	int64_t now_ms;
	bool settling;
	uint32_t violations;
	/* stats */
	uint32_t crashes, acks, commits, aborts, dups, rejected, reads;
} W;

static void violation(const char *fmt, ...)
{
	va_list ap;
	if (W.violations++ >= SIM_VIOLATIONS_SHOWN)
		return; /* the first ones tell the story; the count is in the summary */
	printf("VIOLATION seed=%" PRIu64 ": ", W.seed);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void note(const char *fmt, ...)
{
	if (!W.verbose)
		return;
	va_list ap;
	printf("[%" PRId64 "] ", W.now_ms);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void ev_push(const struct event *e)
{
	if (W.ev_n == SIM_EVENTS_MAX) {
		fprintf(stderr, "sim: event queue full\n");
		abort();
	}
	W.ev[(W.ev_head + W.ev_n++) % SIM_EVENTS_MAX] = *e;
}

static void respond(int client, int req, int err, int batch, int64_t off, int64_t pid, int16_t epoch)
{
	if (!W.up)
		return; /* the machine is down: the connection is gone */
	struct event e = { .type = E_RESP, .client = client, .req = req, .err = err, .batch = batch, .base = off,
	                   .pid = pid, .epoch = epoch, .gen = W.gen };
	ev_push(&e);
}

/* st_io's completion callback: queued, handled by the main loop (as the broker's replies go by ring). */
static void on_append(void *arg, int status, int64_t base)
{
	struct event e = { .type = E_APPEND, .ck = arg, .status = status, .base = base, .gen = W.gen };
	ev_push(&e);
}

/* ---- the owner's side (dataplane/shard.c's produce and marker paths) -------- */

static bool allow_has(struct part *p, int64_t pid, int16_t epoch)
{
	for (uint32_t i = 0; i < p->nallow; i++)
		if (p->allow[i].pid == pid && p->allow[i].epoch == epoch)
			return true;
	return false;
}

static void allow_drop(struct part *p, int64_t pid)
{
	for (uint32_t i = 0; i < p->nallow; i++)
		if (p->allow[i].pid == pid)
			p->allow[i--] = p->allow[--p->nallow];
}

static void allow_add(struct part *p, int64_t pid, int16_t epoch)
{
	allow_drop(p, pid);
	assert(p->nallow < SIM_ALLOW_MAX);
	p->allow[p->nallow++] = (struct allow){ pid, epoch };
}

static void shard_produce(int pi, int client, int id)
{
	struct part *p = &W.parts[pi];
	struct mbatch *mb = &W.b[id];
	struct st_batch_hdr h;
	struct txn_pbatch dup;

	if (st_log_failed(p->log)) {
		respond(client, R_PRODUCE, ERR_STORAGE, id, -1, 0, 0);
		return;
	}
	uint8_t *buf = malloc(mb->len);
	assert(buf);
	memcpy(buf, mb->bytes, mb->len);
	int n = st_batch_parse(buf, mb->len, &h);
	assert(n == (int)mb->len);
	(void)n;
	bool txnl = h.attributes & ST_BATCH_ATTR_TRANSACTIONAL;
	switch (txn_pstate_check(p->ps, &h, &dup)) {
	case TXN_APPEND:
		break;
	case TXN_DUPLICATE:
		free(buf);
		W.dups++;
		if (dup.last_offset >= st_log_durable_offset(p->log)) {
			assert(p->ndw < SIM_DUPWAIT_MAX);
			p->dw[p->ndw++] = (struct dupwait){ client, id, dup.first_offset, dup.last_offset + 1 };
		} else {
			respond(client, R_PRODUCE, OK, id, dup.first_offset, 0, 0);
		}
		return;
	case TXN_ERR_EPOCH:
		free(buf);
		respond(client, R_PRODUCE, ERR_EPOCH, id, -1, 0, 0);
		return;
	case TXN_ERR_SEQUENCE:
		if (W.verbose) {
			struct txn_producer *pr = txn_pstate_find(p->ps, h.producer_id);
			note("p%d: batch %d seq %d refused: producer has %u batches, newest seq %d..%d at %" PRId64, pi, id,
			     h.base_sequence, pr ? pr->nbatches : 0, pr && pr->nbatches ? pr->b[pr->newest].first_seq : -1,
			     pr && pr->nbatches ? pr->b[pr->newest].last_seq : -1,
			     pr && pr->nbatches ? pr->b[pr->newest].first_offset : -1);
		}
		free(buf);
		respond(client, R_PRODUCE, ERR_SEQ, id, -1, 0, 0);
		return;
	}
	if ((txnl && !allow_has(p, h.producer_id, h.producer_epoch)) ||
	    (!txnl && txn_lso_open_first(p->lso, h.producer_id) >= 0)) {
		free(buf);
		respond(client, R_PRODUCE, ERR_TXN_STATE, id, -1, 0, 0);
		return;
	}
	bool begins = txnl && txn_lso_open_first(p->lso, h.producer_id) < 0;
	if (txn_pstate_reserve(p->ps, h.producer_id) < 0 || (begins && txn_lso_reserve(p->lso) < 0)) {
		free(buf);
		respond(client, R_PRODUCE, ERR_STORAGE, id, -1, 0, 0);
		return;
	}
	struct cookie *ck = calloc(1, sizeof(*ck));
	*ck = (struct cookie){ .kind = K_DATA, .part = pi, .client = client, .batch = id, .buf = buf };
	int64_t off = st_log_append(p->log, buf, mb->len, h.records_count, ck);
	if (off < 0) {
		free(buf);
		free(ck);
		respond(client, R_PRODUCE, ERR_STORAGE, id, -1, 0, 0);
		return;
	}
	note("p%d: batch %d (pid %" PRId64 " epoch %d seq %d txn %d) queued at %" PRId64, pi, id, mb->pid, mb->epoch,
	     mb->seq, mb->txn, off);
	if (begins) {
		int rc = txn_lso_begin(p->lso, h.producer_id, off);
		assert(rc == 0);
		(void)rc;
	}
	int rc = txn_pstate_update(p->ps, &h, off, W.now_ms);
	assert(rc == 0);
	(void)rc;
}

/* Returns true if a marker was queued (its completion answers the coordinator), false if answered now. */
static int shard_marker(int pi, int64_t pid, int16_t epoch, bool commit, int client, struct txn_meta *m)
{
	struct part *p = &W.parts[pi];
	allow_drop(p, pid);
	if (txn_lso_open_first(p->lso, pid) < 0)
		return 0;
	struct txn_producer *pr = txn_pstate_find(p->ps, pid);
	if (pr && epoch < pr->epoch)
		return ERR_EPOCH;
	if (st_log_failed(p->log) || txn_pstate_reserve(p->ps, pid) < 0)
		return ERR_STORAGE;
	uint8_t *buf = malloc(128);
	int n = st_batch_build_marker(buf, 128, pid, epoch, commit, 0, W.now_ms);
	assert(n > 0);
	struct cookie *ck = calloc(1, sizeof(*ck));
	*ck = (struct cookie){ .kind = K_MARKER, .part = pi, .client = client, .buf = buf, .m = m };
	int64_t off = st_log_append(p->log, buf, (uint32_t)n, 1, ck);
	if (off < 0) {
		free(buf);
		free(ck);
		return ERR_STORAGE;
	}
	note("p%d: %s marker pid %" PRId64 " epoch %d queued at %" PRId64, pi, commit ? "COMMIT" : "ABORT", pid, epoch, off);
	struct st_batch_hdr h;
	st_batch_parse(buf, (size_t)n, &h);
	int rc = txn_pstate_update(p->ps, &h, off, W.now_ms);
	assert(rc == 0);
	(void)rc;
	ck->offset = off;   /* the transaction ends here when the marker is durable (marker_durable) */
	ck->pid = pid;
	ck->commit = commit;
#ifdef SIM_PLANT_LSO_AT_QUEUE
	/* Planted: the rule before the fix, the transaction ends when its marker is queued. */
	rc = txn_lso_end(p->lso, pid, off, !commit);
	assert(rc == 0);
#else
	p->markers_writing++;
#endif
	return -1;
}

static void dupwait_run(struct part *p)
{
	int64_t durable = st_log_durable_offset(p->log);
	for (uint32_t i = 0; i < p->ndw; i++)
		if (p->dw[i].wait_end <= durable) {
			respond(p->dw[i].client, R_PRODUCE, OK, p->dw[i].batch, p->dw[i].offset, 0, 0);
			p->dw[i--] = p->dw[--p->ndw];
		}
}

static void snapshot_written(void *arg, int status, int64_t offset)
{
	struct part *p = arg;
	if (status == 0) {
		note("%s: producer snapshot at %" PRId64 " durable (log durable %" PRId64 ")", p->dir, offset,
		     st_log_durable_offset(p->log));
		p->snap_offset = offset;
	}
}

/*
 * As dataplane/shard/partition.c's snapshot_producers_async (and its timer, which skips offline
 * logs): the snapshot goes through the core's io_uring (storage/fop.c on the simulated ring:
 * presync of the aborted index, temp file, write, fdatasync, close, rename, directory fsync,
 * unlink of the oldest), with its completions delayed and reordered like appends'.
 */
static void snapshot(struct part *p)
{
	int64_t end = st_log_end_offset(p->log);
	int fd;
	if (txn_pstate_snapshot_busy(p->ps))
		return;   /* the last one is still being written */
	if (txn_lso_sync_fd(p->lso, &fd) == -EAGAIN)
		return;   /* aborts still being appended: an fdatasync now would not cover them */
#ifndef SIM_PLANT_SNAPSHOT_DURING_MARKER
	if (p->markers_writing)
		return;   /* the state closed a transaction whose abort the index has not got yet */
#endif
	if (end == p->snap_offset || st_log_failed(p->log) || txn_lso_sync_fd(p->lso, &fd) < 0)
		return;
	/* Every abort below the snapshot's offset must be on disk before the snapshot is: fd first. */
	int rc = txn_pstate_snapshot_start(p->ps, W.io, st_log_dirfd(p->log), end, fd, snapshot_written, p);
	if (rc < 0)
		note("%s: producer snapshot at %" PRId64 " not started: %s", p->dir, end, strerror(-rc));
}

/* ---- the coordinator's driver (dataplane/txncoord.c's shape) ---------------- */

enum { OP_NONE, OP_INIT_FENCE, OP_INIT, OP_ADD, OP_END, OP_RESUME };
/* Stages of an op: each persist waits for its record to be durable. */
enum { S_PREPARE, S_MARKERS, S_COMPLETE, S_EMPTY, S_ONGOING };

static struct txn_meta *meta_of(int client)
{
	struct client *c = &W.cl[client];
	return txn_coord_find(W.coord, c->tid, strlen(c->tid));
}

static int client_of(const struct txn_meta *m) { return atoi(m->id + 1); }

/* The model driver keeps its own progress: txn_meta's driver fields are the real driver's
 * (control/txncoord.c, through txn_set_drive's checked table), which this model does not run. */
static struct coord_drv *drv_of(const struct txn_meta *m) { return &W.drv[client_of(m)]; }

/* Persist m as it would be with state `to`, epoch and pid; the entry changes only when durable. */
static int coord_persist(struct txn_meta *m, int stage, enum txn_state to, int64_t pid, int16_t epoch)
{
	struct txn_meta *s = malloc(sizeof(*m) + m->id_len + 1);
	memcpy(s, m, sizeof(*m) + m->id_len + 1);
	s->state = to;
	s->pid = pid;
	s->epoch = epoch;
	if (to == TXN_EMPTY)
		s->ntps = 0; /* a new epoch starts with no transaction */
	size_t vn = txn_meta_value_size(s);
	uint8_t *val = malloc(vn), *buf = malloc(vn + m->id_len + 256);
	int rc = txn_meta_encode(s, val, vn);
	assert(rc == (int)vn);
	(void)rc;
	int n = st_batch_build(buf, vn + m->id_len + 256, 0, -1, -1, -1, W.now_ms, m->id, m->id_len, val, (int32_t)vn);
	assert(n > 0);
	free(val);
	free(s);
	struct cookie *ck = calloc(1, sizeof(*ck));
	*ck = (struct cookie){ .kind = K_COORD, .client = client_of(m), .buf = buf, .op_stage = stage, .m = m };
	int64_t off = st_log_append(W.clog, buf, (uint32_t)n, 1, ck);
	if (off < 0) {
		free(buf);
		free(ck);
		return (int)off;
	}
	m->writes++;
	note("coordinator %s: %s queued at %" PRId64, m->id, txn_state_name(to), off);
	return 0;
}

static void coord_finish(struct txn_meta *m, int err)
{
	int client = client_of(m);
	int op = drv_of(m)->op;
	drv_of(m)->busy = false;
	drv_of(m)->op = OP_NONE;
	if (op == OP_RESUME || op == OP_NONE)
		return;
	respond(client, op == OP_END ? R_END : op == OP_ADD ? R_ADD : R_INIT, err, -1, -1, m->pid, m->epoch);
}

static void coord_markers(struct txn_meta *m)
{
	bool commit = m->state == TXN_PREPARE_COMMIT;
	int client = client_of(m);
	m->markers_left = 0;
	m->markers_acked = 0;
	int err = 0;
	for (uint32_t i = 0; i < m->ntps; i++) {
		int rc = shard_marker(m->tps[i].partition, m->pid, m->epoch, commit, client, m);
		if (rc < 0)
			m->markers_left++;
		else if (rc > 0 && rc != ERR_EPOCH)
			err = rc;
	}
	if (err) {
		/* A partition is offline: the machine restarts soon and recovery sends them again. */
		note("coordinator %s: marker refused (%d): resent after restart", m->id, err);
		drv_of(m)->markers_sent = false;
		return;
	}
	drv_of(m)->markers_sent = true;
	if (m->markers_left == 0)
		coord_persist(m, S_COMPLETE, commit ? TXN_COMPLETE_COMMIT : TXN_COMPLETE_ABORT, m->pid, m->epoch);
}

static void coord_marker_done(struct txn_meta *m, int status)
{
	if (status < 0) {
		drv_of(m)->markers_sent = false;
		return;
	}
	assert(m->markers_left > 0);
	if (--m->markers_left == 0 && drv_of(m)->markers_sent) {
		bool commit = m->state == TXN_PREPARE_COMMIT;
		coord_persist(m, S_COMPLETE, commit ? TXN_COMPLETE_COMMIT : TXN_COMPLETE_ABORT, m->pid, m->epoch);
	}
}

/* A coordinator record is durable (status 0) or lost: move the entry, and continue its op. */
static void coord_write_done(struct cookie *ck, int status)
{
	struct txn_meta *m = ck->m;
	int client = ck->client;
	assert(m->writes > 0);
	m->writes--;
	if (status < 0) {
		coord_finish(m, ERR_STORAGE);
		return;
	}
	/* The durable record is the truth: decode what was written. */
	struct st_batch_hdr h;
	struct st_record_iter it;
	struct st_record rec;
	int n = st_batch_parse(ck->buf, 1u << 20, &h);
	int rc = n > 0 ? st_batch_records(ck->buf, (size_t)n, &it) : -1;
	if (rc >= 0)
		rc = st_record_next(&it, &rec);
	assert(rc == 1);
	struct txn_meta *s = calloc(1, sizeof(*s) + m->id_len + 1);
	rc = txn_meta_decode(s, rec.value, (size_t)rec.value_len);
	assert(rc == 0);
	(void)rc;
	enum txn_state to = s->state;
	m->pid = s->pid;
	m->epoch = s->epoch;
	txn_meta_clear_txn(s);
	free(s);
	if (to != m->state)
		txn_set_state(m, to);
	switch (ck->op_stage) {
	case S_PREPARE:
		W.t[W.coord_txn[client]].decided = to == TXN_PREPARE_COMMIT ? D_COMMIT : D_ABORT;
		note("coordinator %s: %s durable (txn %d)", m->id, txn_state_name(to), W.coord_txn[client]);
#ifdef SIM_PLANT_MARKER_BEFORE_DURABLE
		if (drv_of(m)->markers_sent || m->markers_left)
			break; /* sent already (the planted bug) */
#endif
		coord_markers(m);
		break;
	case S_COMPLETE:
		if (to == TXN_COMPLETE_COMMIT)
			W.commits++;
		else
			W.aborts++;
		txn_meta_clear_txn(m);
		W.coord_txn[client] = -1;
		if (drv_of(m)->op == OP_INIT_FENCE) {
			/* The fenced transaction is aborted: now the new epoch's Empty (InitProducerId). */
			drv_of(m)->op = OP_INIT;
			coord_persist(m, S_EMPTY, TXN_EMPTY, m->pid, m->epoch);
			break;
		}
		coord_finish(m, OK);
		break;
	case S_EMPTY:
		coord_finish(m, OK);
		break;
	case S_ONGOING:
		for (uint32_t i = 0; i < m->ntps; i++)
			allow_add(&W.parts[m->tps[i].partition], m->pid, m->epoch);
		coord_finish(m, OK);
		break;
	}
}

static void coord_init(int client)
{
	struct client *c = &W.cl[client];
	struct txn_meta *m = meta_of(client);
	if (!m) {
		m = txn_coord_add(W.coord, c->tid, strlen(c->tid));
		assert(m);
		m->pid = -1;
		m->epoch = -1;
		m->prev_pid = -1;
		m->prev_epoch = -1;
		m->timeout_ms = 60000;
	}
	if (drv_of(m)->busy || m->state == TXN_PREPARE_COMMIT || m->state == TXN_PREPARE_ABORT) {
		respond(client, R_INIT, ERR_CONCURRENT, -1, -1, 0, 0);
		return;
	}
	drv_of(m)->busy = true;
	if (m->state == TXN_ONGOING) {
		/* Fence the old instance: abort its transaction with a bumped epoch. */
		drv_of(m)->op = OP_INIT_FENCE;
		if (coord_persist(m, S_PREPARE, TXN_PREPARE_ABORT, m->pid, (int16_t)(m->epoch + 1)) < 0)
			coord_finish(m, ERR_STORAGE);
		return;
	}
	drv_of(m)->op = OP_INIT;
	int64_t pid = m->pid < 0 ? W.next_pid++ : m->pid;
	int16_t epoch = (int16_t)(m->epoch + 1);
	if (coord_persist(m, S_EMPTY, TXN_EMPTY, pid, epoch) < 0)
		coord_finish(m, ERR_STORAGE);
}

static void coord_add(int client, int64_t pid, int16_t epoch, uint32_t mask)
{
	struct txn_meta *m = meta_of(client);
	if (!m || m->pid != pid || m->epoch != epoch) {
		respond(client, R_ADD, ERR_FENCED, -1, -1, 0, 0);
		return;
	}
	if (drv_of(m)->busy || m->state == TXN_PREPARE_COMMIT || m->state == TXN_PREPARE_ABORT) {
		respond(client, R_ADD, ERR_CONCURRENT, -1, -1, 0, 0);
		return;
	}
	if (m->state != TXN_ONGOING)
		txn_meta_clear_txn(m);
	for (uint32_t i = 0; i < W.nparts; i++)
		if ((mask & (1u << i)) && !txn_meta_has_tp(m, "t", 1, (int32_t)i))
			txn_meta_add_tp(m, "t", 1, (int32_t)i);
	drv_of(m)->busy = true;
	drv_of(m)->op = OP_ADD;
	W.coord_txn[client] = W.cl[client].txn;
	if (coord_persist(m, S_ONGOING, TXN_ONGOING, m->pid, m->epoch) < 0)
		coord_finish(m, ERR_STORAGE);
}

static void coord_end(int client, int64_t pid, int16_t epoch, bool commit)
{
	struct txn_meta *m = meta_of(client);
	if (!m || m->pid != pid || m->epoch != epoch) {
		respond(client, R_END, ERR_FENCED, -1, -1, 0, 0);
		return;
	}
	if (drv_of(m)->busy || m->state == TXN_PREPARE_COMMIT || m->state == TXN_PREPARE_ABORT) {
		respond(client, R_END, ERR_CONCURRENT, -1, -1, 0, 0);
		return;
	}
	if (m->state == TXN_COMPLETE_COMMIT || m->state == TXN_COMPLETE_ABORT) {
		/* A retry of an EndTxn that completed: the same answer, or the wrong direction. */
		respond(client, R_END, (m->state == TXN_COMPLETE_COMMIT) == commit ? OK : ERR_TXN_STATE, -1, -1, 0, 0);
		return;
	}
	if (m->state != TXN_ONGOING) {
		respond(client, R_END, ERR_TXN_STATE, -1, -1, 0, 0);
		return;
	}
	drv_of(m)->busy = true;
	drv_of(m)->op = OP_END;
	if (coord_persist(m, S_PREPARE, commit ? TXN_PREPARE_COMMIT : TXN_PREPARE_ABORT, m->pid, m->epoch) < 0) {
		coord_finish(m, ERR_STORAGE);
		return;
	}
#ifdef SIM_PLANT_MARKER_BEFORE_DURABLE
	/* Planted bug (tests/sim/README.md): the markers go out before the Prepare record is durable. */
	txn_set_state(m, commit ? TXN_PREPARE_COMMIT : TXN_PREPARE_ABORT);
	coord_markers(m);
#endif
}

/* ---- machine start and crash ------------------------------------------------ */

static const struct st_log_config log_cfg = {
	.segment_bytes = 16384, .retention_bytes = -1, .retention_ms = -1, .index_interval_bytes = 1024,
	.scan_sealed = false,
};

static int coord_load(void *arg, const uint8_t *batch, size_t len, const struct st_batch_hdr *h)
{
	if (W.verbose) {
		struct st_record_iter it;
		struct st_record rec;
		if (st_batch_records(batch, len, &it) >= 0 && st_record_next(&it, &rec) == 1 && rec.value)
			note("coordinator log at %" PRId64 ": %.*s state %d", h->base_offset, (int)rec.key_len,
			     (const char *)rec.key, ((const uint8_t *)rec.value)[22]);
	}
	return txn_coord_apply_batch(W.coord, batch, len) == -ENOMEM ? -ENOMEM : 0;
}

static void machine_start(void)
{
	/* Recovery runs on a disk without I/O errors (an open that fails would keep the partition
	 * offline, which the simulator does not model); tears and lost pages still apply. */
	struct sim_faults f = W.faults;
	f.write_eio_ppm = f.sync_eio_ppm = f.meta_eio_ppm = 0;
	if (!W.settling)
		sim_disk_set_faults(&f);
	/* A reserve of a quarter segment: about four fallocates per segment, in front of writes. */
	struct st_io_config ic = { .fsync = true, .on_append = on_append, .prealloc_bytes = log_cfg.segment_bytes / 4,
	                           .direct = W.direct };
	/* At least 4: a roll's group is a directory fsync, a fallocate, a write and an fdatasync,
	 * prepared together (storage/log.c log_prep), and one more with --direct (its whole blocks and
	 * its tail are two writes); the simulator never submits, so the depth bounds what is in flight. */
	W.ring = sim_ring_create(4 + (unsigned)W.direct + (unsigned)sim_below(30));
	int rc = st_io_create(&ic, W.ring, &W.io);
	assert(rc == 0);
	for (uint32_t i = 0; i < W.nparts; i++) {
		struct part *p = &W.parts[i];
		p->nallow = p->ndw = 0;
		p->markers_writing = 0;
		if ((rc = st_log_open(W.io, p->dir, &log_cfg, &p->log)) < 0) {
			violation("partition %u: log open failed after a crash: %s", i, strerror(-rc));
			exit(1);
		}
		rc = txn_pstate_create(&p->ps);
		assert(rc == 0);
		rc = txn_lso_create(&p->lso);
		assert(rc == 0);
		if ((rc = txn_lso_open_index(p->lso, p->dir, st_log_end_offset(p->log))) < 0 ||
		    (rc = txn_pstate_recover(p->ps, p->lso, p->log, p->dir, &p->snap_offset)) < 0) {
			violation("partition %u: producer state recovery failed: %s", i, strerror(-rc));
			exit(1);
		}
		note("%s: recovered: log end %" PRId64 ", snapshot %" PRId64 ", %u open", p->dir, st_log_end_offset(p->log),
		     p->snap_offset, txn_lso_open_count(p->lso));
		/* As recover_producers: the index's appends, syncs and rewrite go through the io_uring now. */
		txn_lso_attach_io(p->lso, W.io, st_log_dirfd(p->log));
	}
	struct st_log_config cc = log_cfg;
	cc.scan_sealed = true;
	if ((rc = st_log_open(W.io, "/sim/coord", &cc, &W.clog)) < 0) {
		violation("coordinator log open failed: %s", strerror(-rc));
		exit(1);
	}
	memset(W.drv, 0, sizeof(W.drv)); /* a restarted coordinator drives nothing yet */
	rc = txn_coord_create(&W.coord);
	assert(rc == 0);
	if ((rc = st_log_read_batches(W.clog, coord_load, NULL)) < 0) {
		violation("coordinator log read failed: %s", strerror(-rc));
		exit(1);
	}
	W.up = true;
	if (!W.settling)
		sim_disk_set_faults(&W.faults);
	/* Transactions found prepared: their markers go again, then they complete. */
	uint32_t cur = 0;
	struct txn_meta *m;
	while ((m = txn_coord_next(W.coord, &cur))) {
		if (m->state == TXN_ONGOING)
			for (uint32_t i = 0; i < m->ntps; i++)
				allow_add(&W.parts[m->tps[i].partition], m->pid, m->epoch);
		if (m->state == TXN_PREPARE_COMMIT || m->state == TXN_PREPARE_ABORT) {
			/* A Prepare the crash kept (written, not yet acknowledged) decides the transaction too. */
			int t = W.coord_txn[client_of(m)];
			assert(t >= 0);
			int d = m->state == TXN_PREPARE_COMMIT ? D_COMMIT : D_ABORT;
			if (W.t[t].decided != D_NONE && W.t[t].decided != d)
				violation("coordinator %s: transaction %d recovered as %s after it was decided otherwise", m->id, t,
				          txn_state_name(m->state));
			W.t[t].decided = d;
			drv_of(m)->busy = true;
			drv_of(m)->op = OP_RESUME;
			/* Sent a few steps later (step()), as the coordinator's log load and fan-out take a
			 * while in the broker: readers fetch in between. */
			drv_of(m)->markers_sent = false;
			m->markers_left = 0;
		}
	}
}

static void handle_event(struct event *e);
static void drain_events(uint32_t max);

static void cqe_cb(void *arg, const struct io_uring_cqe *cqe) { st_io_complete(W.io, cqe); }

static void machine_crash(void)
{
	note("CRASH");
	W.crashes++;
	sim_disk_kill();
	/* Everything in flight fails (and what its handlers queue fails too); the teardown
	 * frees memory and touches no disk. No answer of the dead machine reaches a client. */
	W.up = false;
	W.gen++;
	while (sim_ring_queued(W.ring) || st_io_pending(W.io) || W.ev_n) {
		st_io_flush(W.io);
		sim_ring_step(W.ring, 64, cqe_cb, NULL);
		drain_events(64);
	}
	for (uint32_t i = 0; i < W.nparts; i++) {
		struct part *p = &W.parts[i];
		st_log_close(p->log);
		txn_lso_close_index(p->lso);
		txn_lso_destroy(p->lso);
		txn_pstate_destroy(p->ps);
	}
	st_log_close(W.clog);
	txn_coord_destroy(W.coord);
	st_io_destroy(W.io);
	sim_ring_destroy(W.ring);
	W.up = false;
	sim_disk_restart();
}

/* ---- checks ----------------------------------------------------------------- */

struct scan_ctx { int part; int64_t *seen_at; };

static int model_id(const struct st_batch_hdr *h)
{
	int64_t id = h->first_timestamp - SIM_TS_BASE;
	return id >= 0 && id < W.nb ? (int)id : -1;
}

static int scan_one(void *arg, const uint8_t *batch, size_t len, const struct st_batch_hdr *h)
{
	struct scan_ctx *s = arg;
	if (h->attributes & ST_BATCH_ATTR_CONTROL)
		return 0;
	int id = model_id(h);
	if (id < 0 || W.b[id].part != s->part) {
		violation("partition %d: batch at %" PRId64 " is not one the clients sent", s->part, h->base_offset);
		return 0;
	}
	if (s->seen_at[id] >= 0)
		violation("partition %d: batch %d twice, at %" PRId64 " and %" PRId64 " (duplicate)", s->part, id,
		          s->seen_at[id], h->base_offset);
	else
		s->seen_at[id] = h->base_offset;
	return 0;
}

/* Every durable batch of partition pi, in order (st_log_read_batches wants no append in flight). */
static int read_log(int pi, st_batch_cb cb, void *arg)
{
	struct st_log *log = W.parts[pi].log;
	int64_t off = st_log_start_offset(log), end = st_log_durable_offset(log);
	while (off < end) {
		int fd;
		uint64_t pos;
		uint32_t len;
		int rc = st_log_locate(log, off, end, 1u << 20, &fd, &pos, &len);
		if (rc == -EBADMSG) {
			off++; /* set aside as damage at recovery: step over it, offset by offset */
			continue;
		}
		if (rc < 0)
			return rc;
		if (len == 0)
			return -EIO;
		uint8_t *buf = malloc(len);
		if (st_fs_pread(fd, buf, len, (off_t)pos) != (ssize_t)len) {
			free(buf);
			return -EIO;
		}
		struct st_batch_hdr h;
		int n;
		for (uint32_t p = 0; p < len && (n = st_batch_parse(buf + p, len - p, &h)) > 0; p += (uint32_t)n) {
			cb(arg, buf + p, (size_t)n, &h);
			off = h.base_offset + h.last_offset_delta + 1;
		}
		free(buf);
	}
	return 0;
}

/* Durability and no duplicates: every acknowledged batch is in the log, once, at its offset. */
static void check_log(void)
{
	int64_t *seen = malloc(W.nb * sizeof(*seen) + 1);
	for (uint32_t i = 0; i < W.nparts; i++) {
		for (uint32_t k = 0; k < W.nb; k++)
			seen[k] = -1;
		struct scan_ctx s = { .part = (int)i, .seen_at = seen };
		int rc = read_log((int)i, scan_one, &s);
		if (rc < 0)
			violation("partition %u: log read failed: %s", i, strerror(-rc));
		for (uint32_t k = 0; k < W.nb; k++)
			if (W.b[k].part == (int)i && W.b[k].acked >= 0 && seen[k] != W.b[k].acked)
				violation("partition %u: acknowledged batch %u (offset %" PRId64 ") %s", i, k, W.b[k].acked,
				          seen[k] < 0 ? "is lost" : "moved");
	}
	free(seen);
}

/*
 * One read_committed fetch from pos on partition pi, as a Kafka consumer
 * filters it: batches below the LSO, aborted transactions (from the index)
 * skipped until their marker. cb gets each visible data batch. Returns the
 * next position.
 */
static int cmp_aborted_first(const void *a, const void *b)
{
	const struct txn_aborted *x = a, *y = b;
	return x->first_offset < y->first_offset ? -1 : x->first_offset > y->first_offset;
}

static int64_t fetch_committed(int pi, int64_t pos, void (*cb)(int pi, int id, int64_t off))
{
	struct part *p = &W.parts[pi];
	int64_t hw = st_log_durable_offset(p->log), lso = txn_lso_get(p->lso, hw);
	if (lso < p->max_lso)
		violation("partition %d: LSO moved back from %" PRId64 " to %" PRId64, pi, p->max_lso, lso);
	else
		p->max_lso = lso;
	if (pos >= lso)
		return pos;
	int fd;
	uint64_t at;
	uint32_t len;
	int rc = st_log_locate(p->log, pos, lso, SIM_READ_BYTES, &fd, &at, &len);
	if (rc < 0 || len == 0) {
		if (rc < 0 && rc != -ERANGE)
			violation("partition %d: locate %" PRId64 ": %s", pi, pos, strerror(-rc));
		return pos;
	}
	uint8_t *buf = malloc(len);
	if (st_fs_pread(fd, buf, len, (off_t)at) != (ssize_t)len) {
		free(buf);
		return pos;
	}
	struct st_batch_hdr h;
	int n = st_batch_parse(buf, len, &h);
	int64_t first = n > 0 ? h.base_offset : pos;
	/* The offsets this read covers: its last batch's end. */
	int64_t end = first;
	for (uint32_t o = 0; o < len && (n = st_batch_parse(buf + o, len - o, &h)) > 0; o += (uint32_t)n)
		end = h.base_offset + h.last_offset_delta + 1;
	struct txn_aborted ab[SIM_ABORTED_MAX];
	uint32_t nab = txn_lso_aborted(p->lso, first, end, ab, SIM_ABORTED_MAX);
	assert(nab <= SIM_ABORTED_MAX);
	/* The index lists by marker; a consumer takes them by first offset (Kafka's priority queue). */
	qsort(ab, nab, sizeof(ab[0]), cmp_aborted_first);
	if (W.verbose)
		for (uint32_t i = 0; i < nab; i++)
			note("p%d fetch [%" PRId64 ", %" PRId64 ") lso %" PRId64 ": aborted pid %" PRId64 " [%" PRId64 ", %" PRId64 "]",
			     pi, first, end, lso, ab[i].pid, ab[i].first_offset, ab[i].last_offset);
	int64_t aborting[SIM_ABORTED_MAX];
	uint32_t naborting = 0, next_ab = 0;
	for (uint32_t o = 0; o < len && (n = st_batch_parse(buf + o, len - o, &h)) > 0; o += (uint32_t)n) {
		int64_t last = h.base_offset + h.last_offset_delta;
		while (next_ab < nab && ab[next_ab].first_offset <= last)
			aborting[naborting++] = ab[next_ab++].pid;
		bool aborted = false;
		uint32_t k;
		for (k = 0; k < naborting; k++)
			if (aborting[k] == h.producer_id)
				break;
		aborted = k < naborting;
		if (h.attributes & ST_BATCH_ATTR_CONTROL) {
			if (aborted && st_batch_marker_type(buf + o, (size_t)n) == ST_MARKER_ABORT)
				aborting[k] = aborting[--naborting];
			continue;
		}
		if ((h.attributes & ST_BATCH_ATTR_TRANSACTIONAL) && aborted)
			continue;
		int id = model_id(&h);
		if (id >= 0)
			cb(pi, id, h.base_offset);
		pos = last + 1;
	}
	free(buf);
	return end > pos ? end : pos;
}

static uint8_t *seen_live;   /* the running readers' visible batches: a second sight is a duplicate */

static void visible_live(int pi, int id, int64_t off)
{
	struct mbatch *mb = &W.b[id];
	W.reads++;
	if (mb->txn >= 0 && W.t[mb->txn].decided != D_COMMIT)
		violation("partition %d: read_committed saw batch %d at %" PRId64 " of transaction %d, %s", pi, id, off,
		          mb->txn, W.t[mb->txn].decided == D_ABORT ? "aborted" : "not committed");
	if (seen_live[id])
		violation("partition %d: read_committed saw batch %d twice (duplicate)", pi, id);
	seen_live[id] = 1;
}

static uint8_t *seen_final;

static void visible_final(int pi, int id, int64_t off)
{
	seen_final[id]++;
}

/* After settling: transactions all-or-nothing across partitions, nothing open. */
static void check_final(void)
{
	for (uint32_t i = 0; i < W.nparts; i++) {
		struct part *p = &W.parts[i];
		if (txn_lso_open_count(p->lso))
			violation("partition %u: %u transactions still open after settling", i, txn_lso_open_count(p->lso));
		int64_t pos = st_log_start_offset(p->log), hw = st_log_durable_offset(p->log);
		p->max_lso = 0;
		while (pos < hw) {
			int64_t next = fetch_committed((int)i, pos, visible_final);
			if (next <= pos)
				break;
			pos = next;
		}
	}
	int64_t *in_log = malloc(W.nb * sizeof(*in_log) + 1);
	for (uint32_t k = 0; k < W.nb; k++)
		in_log[k] = -1;
	for (uint32_t i = 0; i < W.nparts; i++) {
		struct scan_ctx s = { .part = (int)i, .seen_at = in_log };
		int64_t *tmp = malloc(W.nb * sizeof(*tmp) + 1);
		for (uint32_t k = 0; k < W.nb; k++)
			tmp[k] = -1;
		s.seen_at = tmp;
		read_log((int)i, scan_one, &s);
		for (uint32_t k = 0; k < W.nb; k++)
			if (tmp[k] >= 0)
				in_log[k] = tmp[k];
		free(tmp);
	}
	for (uint32_t k = 0; k < W.nb; k++) {
		struct mbatch *mb = &W.b[k];
		if (seen_final[k] > 1)
			violation("batch %u visible %u times", k, seen_final[k]);
		if (mb->txn < 0) {
			if (in_log[k] >= 0 && !seen_final[k])
				violation("idempotent batch %u at %" PRId64 " is in the log but not visible", k, in_log[k]);
			continue;
		}
		int d = W.t[mb->txn].decided;
		if (d == D_COMMIT && in_log[k] >= 0 && !seen_final[k])
			violation("batch %u of committed transaction %d is in the log but not visible", k, mb->txn);
		if (d == D_COMMIT && !mb->zombie && in_log[k] < 0 && mb->acked >= 0)
			violation("batch %u of committed transaction %d is missing (partial transaction)", k, mb->txn);
		if (d != D_COMMIT && seen_final[k])
			violation("batch %u of %s transaction %d is visible", k, d == D_ABORT ? "aborted" : "undecided", mb->txn);
	}
	free(in_log);
}

/* ---- clients ------------------------------------------------------------------ */

static int make_batch(int ci, int pi, int64_t pid, int16_t epoch, int32_t seq, int txn, bool zombie)
{
	if (W.nb == SIM_BATCHES_MAX)
		return -1;
	int id = (int)W.nb++;
	struct mbatch *mb = &W.b[id];
	uint32_t records = 1 + (uint32_t)sim_below(4);
	uint32_t vlen = sim_below(10) < 7 ? (uint32_t)sim_below(200) : (uint32_t)sim_below(SIM_BATCH_BYTES_MAX - 200);
	uint8_t *val = malloc(vlen + 1);
	for (uint32_t i = 0; i < vlen; i++)
		val[i] = (uint8_t)(id + i);
	uint32_t cap = vlen + 200;
	uint8_t *buf = malloc(cap);
	int n = st_batch_build(buf, cap, txn >= 0 ? ST_BATCH_ATTR_TRANSACTIONAL : 0, pid, epoch, seq,
	                       SIM_TS_BASE + id, NULL, -1, val, (int32_t)vlen);
	assert(n > 0);
	free(val);
	/* A batch of `records` offsets (one record body: the simulator reads headers only). */
	st_put_be32(buf + ST_BATCH_OFF_LAST_OFFSET_DELTA, records - 1);
	st_put_be32(buf + ST_BATCH_OFF_RECORDS_COUNT, records);
	st_put_be32(buf + ST_BATCH_OFF_CRC, crc32c(0, buf + ST_BATCH_OFF_ATTRIBUTES, (size_t)n - ST_BATCH_OFF_ATTRIBUTES));
	*mb = (struct mbatch){ .part = pi, .client = ci, .txn = txn, .pid = pid, .epoch = epoch, .seq = seq,
	                       .records = records, .len = (uint32_t)n, .bytes = buf, .acked = -1, .zombie = zombie };
	return id;
}

static void send_batch(int ci, int id)
{
	if (W.up)
		shard_produce(W.b[id].part, ci, id);
}

static int new_txn(int ci)
{
	assert(W.nt < SIM_TXNS_MAX);
	struct client *c = &W.cl[ci];
	W.t[W.nt] = (struct mtxn){ .client = ci, .pid = c->pid, .epoch = c->epoch, .decided = D_NONE };
	return (int)W.nt++;
}

static void inflight_push(struct client *c, int pi, int id)
{
	assert(c->ninflight[pi] < SIM_INFLIGHT_MAX);
	c->inflight[pi][c->ninflight[pi]] = id;
	c->answered[pi][c->ninflight[pi]] = false;
	c->ninflight[pi]++;
}

static void recent_push(struct client *c, int pi, int id)
{
	if (c->nrecent[pi] == SIM_INFLIGHT_MAX) {
		memmove(&c->recent[pi][0], &c->recent[pi][1], (SIM_INFLIGHT_MAX - 1) * sizeof(int));
		c->nrecent[pi]--;
	}
	c->recent[pi][c->nrecent[pi]++] = id;
}

static bool client_idle(const struct client *c)
{
	for (uint32_t p = 0; p < W.nparts; p++)
		if (c->ninflight[p])
			return false;
	return !c->txnl || (c->st == C_READY && !c->waiting);
}

/* Resend, in sequence order, every batch whose answer was an error or was lost. */
static bool resend_due(int ci)
{
	struct client *c = &W.cl[ci];
	bool any = false;
	for (uint32_t p = 0; p < W.nparts; p++)
		for (uint32_t k = 0; k < c->ninflight[p]; k++)
			if (c->answered[p][k]) {
				c->answered[p][k] = false;
				note("client %d: resend batch %d (%u of %u in flight)", ci, c->inflight[p][k], k, c->ninflight[p]);
				send_batch(ci, c->inflight[p][k]);
				any = true;
			}
	return any;
}

/* A retry of one of the producer's last batches, already acknowledged: it must get its offset again. */
static void probe(int ci)
{
	struct client *c = &W.cl[ci];
	int pi = (int)sim_below(W.nparts);
	uint32_t window = SIM_INFLIGHT_MAX - c->ninflight[pi];
	if (!c->nrecent[pi] || !window)
		return;
	uint32_t n = c->nrecent[pi] < window ? c->nrecent[pi] : window;
	send_batch(ci, c->recent[pi][c->nrecent[pi] - 1 - sim_below(n)]);
}

static void idem_tick(int ci)
{
	struct client *c = &W.cl[ci];
	if (resend_due(ci))
		return;
	if (sim_below(20) == 0) {
		probe(ci);
		return;
	}
	int pi = (int)sim_below(W.nparts);
	if (W.settling || c->ninflight[pi] == SIM_INFLIGHT_MAX)
		return;
	int id = make_batch(ci, pi, c->pid, c->epoch, c->next_seq[pi], -1, false);
	if (id < 0)
		return;
	c->next_seq[pi] += (int32_t)W.b[id].records;
	inflight_push(c, pi, id);
	send_batch(ci, id);
}

static void txn_reset(struct client *c)
{
	for (uint32_t p = 0; p < W.nparts; p++) {
		c->ninflight[p] = 0;
		c->nrecent[p] = 0;
		c->next_seq[p] = 0;
	}
}

static void txn_tick(int ci)
{
	struct client *c = &W.cl[ci];
	if (c->zpid >= 0 && c->st == C_READY && sim_below(8) == 0 && !W.settling) {
		/* The fenced instance sends one more batch with its stale epoch: it must be refused. */
		int id = make_batch(ci, c->zpart, c->zpid, c->zepoch, c->zseq, c->ztxn, true);
		if (id >= 0)
			send_batch(ci, id);
		c->zpid = -1;
		return;
	}
	if (c->waiting || !W.up)
		return;
	switch (c->st) {
	case C_NEED_INIT:
	case C_WAIT_INIT:
		c->st = C_WAIT_INIT;
		c->waiting = true;
		coord_init(ci);
		return;
	case C_READY:
		if (W.settling || W.nt == SIM_TXNS_MAX)
			return;
		c->txn = new_txn(ci);
		c->parts_mask = 1 + (uint32_t)sim_below((1u << W.nparts) - 1);
		c->target = 1 + (uint32_t)sim_below(6);
		c->sent = 0;
		c->failed = false;
		c->st = C_WAIT_ADD;
		__attribute__((fallthrough)); /* send the AddPartitionsToTxn */
	case C_WAIT_ADD:
		c->waiting = true;
		coord_add(ci, c->pid, c->epoch, c->parts_mask);
		return;
	case C_IN_TXN: {
		if (!c->failed && !W.settling && sim_below(100) == 0) {
			/* The producer dies mid-transaction; a new instance fences it. */
			uint32_t p = 0;
			while (!(c->parts_mask & (1u << p)))
				p++;
			c->zpid = c->pid;
			c->zepoch = c->epoch;
			c->zpart = (int)p;
			c->ztxn = c->txn;
			c->zseq = c->next_seq[p];
			note("client %d abandons transaction %d", ci, c->txn);
			txn_reset(c);
			c->st = C_NEED_INIT;
			return;
		}
		bool busy = false;
		for (uint32_t p = 0; p < W.nparts; p++)
			busy |= c->ninflight[p] > 0;
		if (!c->failed && !W.settling && c->sent < c->target) {
			if (resend_due(ci))
				return;
			int pi = (int)sim_below(W.nparts);
			if (!(c->parts_mask & (1u << pi)) || c->ninflight[pi] == SIM_INFLIGHT_MAX)
				return;
			int id = make_batch(ci, pi, c->pid, c->epoch, c->next_seq[pi], c->txn, false);
			if (id < 0)
				return;
			c->next_seq[pi] += (int32_t)W.b[id].records;
			c->sent++;
			inflight_push(c, pi, id);
			send_batch(ci, id);
			return;
		}
		if (busy && !c->failed) {
			resend_due(ci);
			return;
		}
		/* Commit only what was all acknowledged; anything else aborts. */
		c->commit = !c->failed && sim_below(4) != 0;
		c->st = C_WAIT_END;
	}
		__attribute__((fallthrough));
	case C_WAIT_END:
		c->waiting = true;
		coord_end(ci, c->pid, c->epoch, c->commit);
		return;
	}
}

static void produce_resp(int ci, const struct event *e)
{
	struct client *c = &W.cl[ci];
	struct mbatch *mb = &W.b[e->batch];
	int pi = mb->part;
	uint32_t k;
	for (k = 0; k < c->ninflight[pi]; k++)
		if (c->inflight[pi][k] == e->batch)
			break;
	if (k == c->ninflight[pi]) {
		/* A probe (retry of an acknowledged batch) or a zombie's batch. */
		if (mb->zombie) {
			if (e->err == OK)
				violation("partition %d: batch %d of fenced producer %" PRId64 " epoch %d was accepted at %" PRId64,
				          pi, e->batch, mb->pid, mb->epoch, e->base);
			else
				W.rejected++;
		} else if (mb->acked < 0) {
			/* The answer to a batch its transaction gave up on: an acknowledgment all the same. */
			if (e->err == OK)
				mb->acked = e->base;
		} else if (e->err == ERR_SEQ || e->err == ERR_EPOCH || e->err == ERR_TXN_STATE) {
			if (mb->epoch == c->epoch && mb->pid == c->pid)
				violation("partition %d: retry of acknowledged batch %d (seq %d) refused with error %d", pi,
				          e->batch, mb->seq, e->err);
		} else if (e->err == OK && e->base != mb->acked) {
			violation("partition %d: retry of batch %d got offset %" PRId64 ", first acknowledged at %" PRId64, pi,
			          e->batch, e->base, mb->acked);
		}
		return;
	}
	if (e->err == OK) {
		if (mb->acked >= 0 && mb->acked != e->base)
			violation("partition %d: batch %d acknowledged at %" PRId64 " and at %" PRId64, pi, e->batch, mb->acked,
			          e->base);
		mb->acked = e->base;
		W.acks++;
		note("client %d: batch %d acknowledged at %" PRId64, ci, e->batch, e->base);
		memmove(&c->inflight[pi][k], &c->inflight[pi][k + 1], (c->ninflight[pi] - k - 1) * sizeof(int));
		memmove(&c->answered[pi][k], &c->answered[pi][k + 1], (c->ninflight[pi] - k - 1) * sizeof(bool));
		c->ninflight[pi]--;
		recent_push(c, pi, e->batch);
		return;
	}
	/* Out of order behind an earlier batch not yet acknowledged is Kafka's answer when that one
	 * failed (the client resends both); at the head of the window, with everything before it
	 * acknowledged (so durable), it means the broker lost the producer's state. */
	if (e->err == ERR_SEQ && !c->txnl && k == 0)
		violation("partition %d: in-order retry of batch %d (pid %" PRId64 " seq %d) refused: out of order sequence",
		          pi, e->batch, mb->pid, mb->seq);
	if (c->txnl) {
		/* An abortable error: the transaction aborts, and the producer starts a new epoch after. */
		c->failed = true;
		for (uint32_t p = 0; p < W.nparts; p++)
			c->ninflight[p] = 0;
		return;
	}
	note("client %d: batch %d error %d", ci, e->batch, e->err);
	c->answered[pi][k] = true; /* retriable: resend */
}

static void coord_resp(int ci, const struct event *e)
{
	struct client *c = &W.cl[ci];
	c->waiting = false;
	if (e->err == ERR_CONCURRENT || e->err == ERR_STORAGE)
		return; /* the same request again at the next tick */
	switch (e->req) {
	case R_INIT:
		if (e->err == OK) {
			c->pid = e->pid;
			c->epoch = e->epoch;
			txn_reset(c);
			c->st = C_READY;
		}
		return;
	case R_ADD:
		c->st = e->err == OK ? C_IN_TXN : C_NEED_INIT;
		return;
	case R_END:
		if (e->err == ERR_TXN_STATE)
			violation("client %d: EndTxn(%s) of transaction %d refused: invalid transaction state", ci,
			          c->commit ? "commit" : "abort", c->txn);
		if (e->err == OK && !c->failed) {
			c->st = C_READY;
			return;
		}
		/* After a failed transaction (or a fence) a new epoch: sequences start again. */
		txn_reset(c);
		c->st = C_NEED_INIT;
		return;
	}
}

/* After a crash: what was in flight got no answer. */
static void clients_reconnect(void)
{
	for (uint32_t ci = 0; ci < W.nidem + W.ntxnp; ci++) {
		struct client *c = &W.cl[ci];
		c->waiting = false;
		if (c->txnl && c->st == C_WAIT_END && sim_below(2)) {
			/* The producer went down too: its new instance fences whatever the transaction became. */
			txn_reset(c);
			c->st = C_NEED_INIT;
			continue;
		}
		if (c->txnl && c->st == C_IN_TXN) {
			for (uint32_t p = 0; p < W.nparts; p++)
				if (c->ninflight[p])
					c->failed = true;
			if (c->failed)
				for (uint32_t p = 0; p < W.nparts; p++)
					c->ninflight[p] = 0;
			continue;
		}
		for (uint32_t p = 0; p < W.nparts; p++)
			for (uint32_t k = 0; k < c->ninflight[p]; k++)
				c->answered[p][k] = true;
	}
}

/* ---- the loop ------------------------------------------------------------------- */

static void handle_event(struct event *e)
{
	if (e->type == E_RESP) {
		if (e->gen != W.gen)
			return;
		if (e->req == R_PRODUCE)
			produce_resp(e->client, e);
		else
			coord_resp(e->client, e);
		return;
	}
	struct cookie *ck = e->ck;
	switch (ck->kind) {
	case K_DATA:
		if (W.up)
			respond(ck->client, R_PRODUCE, e->status < 0 ? ERR_STORAGE : OK, ck->batch, e->base, 0, 0);
		break;
	case K_MARKER:
#ifndef SIM_PLANT_LSO_AT_QUEUE
		assert(W.parts[ck->part].markers_writing > 0);
		W.parts[ck->part].markers_writing--;
		if (e->status == 0) {
			/* As dp_shard_on_marker: the transaction ends when its marker is durable. */
			int rc = txn_lso_end(W.parts[ck->part].lso, ck->pid, ck->offset, !ck->commit);
			assert(rc == 0);
			(void)rc;
		}
#endif
		coord_marker_done(ck->m, e->status);
		break;
	case K_COORD:
		coord_write_done(ck, e->status);
		break;
	}
	free(ck->buf);
	free(ck);
}

static void drain_events(uint32_t max)
{
	while (W.ev_n && max--) {
		struct event e = W.ev[W.ev_head];
		W.ev_head = (W.ev_head + 1) % SIM_EVENTS_MAX;
		W.ev_n--;
		handle_event(&e);
	}
}

static bool any_log_failed(void)
{
	for (uint32_t i = 0; i < W.nparts; i++)
		if (st_log_failed(W.parts[i].log))
			return true;
	return st_log_failed(W.clog) != 0;
}

/* A log that left O_DIRECT for the page cache (storage/log.c's log_dio_off). */
static bool any_log_direct_off(void)
{
	for (uint32_t i = 0; i < W.nparts; i++)
		if (st_log_direct_off(W.parts[i].log))
			return true;
	return st_log_direct_off(W.clog);
}

static bool quiet(void)
{
	if (W.ev_n || sim_ring_queued(W.ring) || st_io_pending(W.io))
		return false;
	for (uint32_t ci = 0; ci < W.nidem + W.ntxnp; ci++)
		if (!client_idle(&W.cl[ci]))
			return false;
	uint32_t cur = 0;
	struct txn_meta *m;
	while ((m = txn_coord_next(W.coord, &cur)))
		if (drv_of(m)->busy || m->state == TXN_ONGOING || m->state == TXN_PREPARE_COMMIT || m->state == TXN_PREPARE_ABORT)
			return false;
	return true;
}

static void crash_restart(void)
{
	machine_crash();
	machine_start();
	clients_reconnect();
	check_log();
}

static void step(void)
{
	W.now_ms += 1 + (int64_t)sim_below(3);
	for (uint32_t ci = 0; ci < W.nidem + W.ntxnp; ci++)
		if (sim_below(10) < 4)
			W.cl[ci].txnl ? txn_tick((int)ci) : idem_tick((int)ci);
	if (sim_below(10) < 3) {
		int pi = (int)sim_below(W.nparts);
		W.parts[pi].rpos = fetch_committed(pi, W.parts[pi].rpos, visible_live);
	}
	st_io_flush(W.io);
	sim_ring_step(W.ring, (unsigned)sim_below(5), cqe_cb, NULL);
	drain_events((uint32_t)sim_below(8));
	for (uint32_t i = 0; i < W.nparts; i++) {
		dupwait_run(&W.parts[i]);
		if (sim_below(100) < 2)
			snapshot(&W.parts[i]);
	}
	/* A coordinator whose markers were refused sends them again. */
	uint32_t cur = 0;
	struct txn_meta *m;
	while ((m = txn_coord_next(W.coord, &cur)))
		if ((m->state == TXN_PREPARE_COMMIT || m->state == TXN_PREPARE_ABORT) && !drv_of(m)->markers_sent &&
		    m->markers_left == 0 && !m->writes && sim_below(10) == 0)
			coord_markers(m);
	/* Offline is for a disk's errors: a clean disk's logs stay online (an O_DIRECT write refused
	 * for its alignment falls back to buffered writes, storage/log.c). */
	if (W.clean_disk && any_log_failed())
		violation("a log went offline on a disk that injected no fault");
	/* A disk that reports an alignment the log can take never needs the fallback: every direct
	 * write is aligned as statx says (sim_direct_align8k fails here if the report is ignored). */
	if (W.clean_disk && W.direct && !W.dio_unreported &&
	    (W.dio_align ? W.dio_align : 4096u) <= ST_LOG_DIRECT_ALIGN_MAX_BYTES && any_log_direct_off())
		violation("a log left O_DIRECT on a clean disk that reports its alignment");
	if (W.crash_in < 0 && any_log_failed())
		W.crash_in = 1 + (int)sim_below(30);
	if (W.crash_in > 0 && --W.crash_in == 0) {
		W.crash_in = -1;
		crash_restart();
	} else if (!W.settling && sim_below(1000) == 0) {
		crash_restart();
	}
}

static void run(uint64_t seed)
{
	memset(&W.parts, 0, sizeof(W.parts));
	sim_seed(seed);
	W.seed = seed;
	W.nparts = 1 + (uint32_t)sim_below(SIM_PARTS_MAX);
	W.nidem = 1 + (uint32_t)sim_below(SIM_IDEM_MAX);
	W.ntxnp = 1 + (uint32_t)sim_below(SIM_TXNP_MAX);
	uint32_t faulty = (uint32_t)sim_below(4); /* 0: a clean disk; else more faults */
	W.clean_disk = faulty == 0;
	W.faults = (struct sim_faults){
		.write_short_ppm = faulty ? 20000 : 0,
		.write_eio_ppm = faulty > 1 ? 2000 : 0,
		.sync_eio_ppm = faulty > 1 ? 2000 : 0,
		.meta_eio_ppm = faulty > 1 ? 2000 : 0,   /* a submitted create, rename or unlink (storage/fop.c) */
		.page_keep_ppm = (uint32_t)sim_below(1000000),
		.scattered = W.scattered,
		.capacity_bytes = faulty == 3 ? 200000 + sim_below(400000) : 0,
	};
	sim_disk_init(&W.faults);
	st_fs_mkdir("/sim", 0755);
	for (uint32_t i = 0; i < W.nparts; i++)
		snprintf(W.parts[i].dir, sizeof(W.parts[i].dir), "/sim/p%u", i);
	W.b = calloc(SIM_BATCHES_MAX, sizeof(*W.b));
	W.t = calloc(SIM_TXNS_MAX, sizeof(*W.t));
	W.ev = calloc(SIM_EVENTS_MAX, sizeof(*W.ev));
	seen_live = calloc(SIM_BATCHES_MAX, 1);
	seen_final = calloc(SIM_BATCHES_MAX, 1);
	W.nb = W.nt = W.ev_head = W.ev_n = 0;
	W.next_pid = 1000;
	W.now_ms = 1700000000000LL;
	W.crash_in = -1;
	W.settling = false;
	W.violations = W.crashes = W.acks = W.commits = W.aborts = W.dups = W.rejected = W.reads = 0;
	for (uint32_t ci = 0; ci < SIM_CLIENTS_MAX; ci++) {
		struct client *c = &W.cl[ci];
		memset(c, 0, sizeof(*c));
		c->txnl = ci >= W.nidem;
		snprintf(c->tid, sizeof(c->tid), "t%u", ci);
		c->pid = c->txnl ? -1 : W.next_pid++;
		c->epoch = 0;
		c->st = C_NEED_INIT;
		c->txn = -1;
		c->zpid = -1;
		W.coord_txn[ci] = -1;
	}
	machine_start();
	for (uint32_t s = 0; s < W.steps && !W.violations; s++)
		step();
	/* Settle: no new work, no faults; every transaction ends, every retry lands. */
	W.settling = true;
	sim_disk_set_faults(&(struct sim_faults){ .page_keep_ppm = W.faults.page_keep_ppm, .scattered = W.scattered });
	uint32_t s;
	for (s = 0; s < SIM_SETTLE_STEPS_MAX && !quiet(); s++)
		step();
	if (!quiet())
		violation("did not settle in %u steps", SIM_SETTLE_STEPS_MAX);
	check_log();
	check_final();
	if (W.violations || W.verbose || W.one)
		printf("seed %" PRIu64 ": %s violations=%u parts=%u idem=%u txnp=%u faults=%u batches=%u acks=%u commits=%u aborts=%u "
	       "dups=%u fenced=%u reads=%u crashes=%u\n",
	       seed, W.violations ? "FAIL" : "ok", W.violations, W.nparts, W.nidem, W.ntxnp, faulty, W.nb, W.acks, W.commits,
	       W.aborts, W.dups, W.rejected, W.reads, W.crashes);
	/* Tear down (a clean shutdown's order) so that the next seed starts from nothing. */
	while (W.ev_n || st_io_pending(W.io)) {
		st_io_flush(W.io);
		sim_ring_step(W.ring, 64, cqe_cb, NULL);
		drain_events(64);
	}
	sim_disk_kill();
	W.up = false;
	for (uint32_t i = 0; i < W.nparts; i++) {
		st_log_close(W.parts[i].log);
		txn_lso_close_index(W.parts[i].lso);
		txn_lso_destroy(W.parts[i].lso);
		txn_pstate_destroy(W.parts[i].ps);
	}
	st_log_close(W.clog);
	txn_coord_destroy(W.coord);
	st_io_destroy(W.io);
	sim_ring_destroy(W.ring);
	sim_disk_free();
	for (uint32_t k = 0; k < W.nb; k++)
		free(W.b[k].bytes);
	free(W.b);
	free(W.t);
	free(W.ev);
	free(seen_live);
	free(seen_final);
}

static void on_abort(int sig)
{
	printf("ABORT seed=%" PRIu64 " (an assertion or abort in the code under test; replay: sluice-sim --seed %" PRIu64
	       " -v)\n", W.seed, W.seed);
	fflush(stdout);
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(int argc, char **argv)
{
	uint64_t first = 1, count = 200;
	bool one = false;
	W.steps = SIM_STEPS_DEFAULT;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			first = strtoull(argv[++i], NULL, 0);
			count = 1;
			one = true;
			W.one = true;
		} else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) {
			count = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--first") && i + 1 < argc) {
			first = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
			W.steps = (uint32_t)strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--scattered")) {
			W.scattered = true;
		} else if (!strcmp(argv[i], "--direct")) {
			W.direct = true;
		} else if (!strcmp(argv[i], "--dio-align") && i + 1 < argc) {
			W.dio_align = (uint32_t)strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--dio-unreported")) {
			W.dio_unreported = true;
		} else if (!strcmp(argv[i], "-v")) {
			W.verbose = true;
		} else {
			fprintf(stderr, "usage: %s [--seed N | --first N --seeds COUNT] [--steps N] [--scattered] [--direct] [--dio-align N] [--dio-unreported] [-v]\n", argv[0]);
			return 2;
		}
	}
	if (W.dio_align & (W.dio_align - 1)) {
		fprintf(stderr, "--dio-align: a power of two\n");
		return 2;
	}
	sim_disk_set_dio(W.dio_align ? W.dio_align : 4096u, !W.dio_unreported);
	char dio_flags[64];
	snprintf(dio_flags, sizeof(dio_flags), "%s%.0u%s", W.dio_align ? " --dio-align " : "", W.dio_align,
	         W.dio_unreported ? " --dio-unreported" : "");
	signal(SIGABRT, on_abort);
	if (W.verbose)
		setvbuf(stdout, NULL, _IOLBF, 0); /* interleaved with the code's stderr in order */
	/* The code under test logs to stderr (damage found, logs offline): expected here, noise unless -v. */
	if (!W.verbose && !freopen("/dev/null", "w", stderr))
		return 2;
	uint64_t failed = 0, first_failed = 0;
	for (uint64_t s = first; s < first + count; s++) {
		run(s);
		if (W.violations && !failed++)
			first_failed = s;
		if (W.violations && !one)
			printf("replay: sluice-sim --seed %" PRIu64 "%s%s%s\n", s, W.scattered ? " --scattered" : "",
			       W.direct ? " --direct" : "", dio_flags);
	}
	if (!one)
		printf("%" PRIu64 " seeds from %" PRIu64 ": %" PRIu64 " failed%s\n", count, first, failed, failed ? "" : ", all ok");
	if (failed && !one)
		printf("first failing seed: %" PRIu64 "\n", first_failed);
	return failed ? 1 : 0;
}
