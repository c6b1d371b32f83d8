/*
 * recover_ut.c - txn_pstate_recover with a txn_lso: producer state, open
 * transactions (LSO) and the aborted index rebuilt from a real st_log (on a
 * real io_uring in a temp dir), with and without a snapshot and index file.
 *
 * A tiny core loop (ut_drive) plays the data core, as in storage/log_ut.c.
 * Locality: test thread only.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>

#include "log.h"
#include "lso.h"
#include "pstate.h"
#include "ut_batch.h"

#define UT_RING_DEPTH 64
#define UT_BATCHES 16
#define UT_BATCH_BYTES 256
#define UT_SNAP_AT 6       /* snapshot after batch 5 */
#define UT_LSO 3           /* pid 4's open transaction */
#define UT_INDEX_HEADER_BYTES 8
#define UT_INDEX_ENTRY_BYTES 28

static struct io_uring ring;
static struct st_io *io;
static char dir[64];
static uint8_t bufs[UT_BATCHES][UT_BATCH_BYTES]; /* appended batches outlive their write */
static int appends_done;

static const struct st_log_config cfg = {
	.segment_bytes = 1024, .retention_bytes = -1, .retention_ms = -1, .index_interval_bytes = 256,
};

static void on_append(void *cookie, int status, int64_t base)
{
	CU_ASSERT_EQUAL(status, 0);
	appends_done++;
}

static void ut_drive(void)
{
	struct io_uring_cqe *cqe;
	unsigned head, n;

	for (int guard = 0; st_io_pending(io) && guard < 100000; guard++) {
		CU_ASSERT(st_io_flush(io) >= 0);
		io_uring_submit_and_wait(&ring, 1);
		n = 0;
		io_uring_for_each_cqe(&ring, head, cqe) {
			CU_ASSERT_EQUAL_FATAL(cqe->user_data & 0xf, ST_URING_TAG);
			st_io_complete(io, cqe);
			n++;
		}
		io_uring_cq_advance(&ring, n);
	}
	CU_ASSERT_EQUAL(st_io_pending(io), 0);
}

/* The log written: one record per batch, so batch i is at offset i. */
enum ut_kind { IDEM, TXN, COMMIT, ABORT };
static const struct { enum ut_kind kind; int64_t pid; int32_t seq; } plan[] = {
	{ IDEM, 1, 0 },    /*  0 */
	{ TXN, 2, 0 },     /*  1  pid 2's transaction, committed at 7 */
	{ TXN, 3, 0 },     /*  2  pid 3's first transaction, aborted at 5 */
	{ TXN, 4, 0 },     /*  3  pid 4's transaction, still open at the end: the LSO */
	{ TXN, 2, 1 },     /*  4 */
	{ ABORT, 3, 0 },   /*  5 */
	/* ---- snapshot at 6: pids 2 and 4 open (the snapshot must reopen them), pid 3's abort synced */
	{ IDEM, 1, 1 },    /*  6 */
	{ COMMIT, 2, 0 },  /*  7 */
	{ IDEM, 1, 2 },    /*  8 */
	{ TXN, 3, 1 },     /*  9  pid 3's second transaction, aborted at 11 */
	{ TXN, 4, 1 },     /* 10  (already open: no second begin) */
	{ ABORT, 3, 0 },   /* 11 */
	{ IDEM, 5, 0 },    /* 12 */
};
#define UT_N ((int)(sizeof(plan) / sizeof(plan[0])))
#define UT_TS(i) (1000 + (int64_t)(i))
#define UT_SERIAL(i) (100 + (int32_t)(i))   /* a marker's coordinator_epoch: recovery must bring it back */
_Static_assert(UT_N <= UT_BATCHES, "buffers");

/* The expected index after recovery. */
static const struct txn_aborted want_aborted[] = { { 3, 2, 5 }, { 3, 9, 11 } };

static int ut_build(int i)
{
	const char v[] = "value";
	switch (plan[i].kind) {
	case IDEM:
	case TXN:
		return st_batch_build(bufs[i], UT_BATCH_BYTES, plan[i].kind == TXN ? ST_BATCH_ATTR_TRANSACTIONAL : 0,
		                      plan[i].pid, 0, plan[i].seq, UT_TS(i), NULL, -1, v, (int32_t)sizeof(v));
	default:
		return st_batch_build_marker(bufs[i], UT_BATCH_BYTES, plan[i].pid, 0, plan[i].kind == COMMIT, UT_SERIAL(i),
		                             UT_TS(i));
	}
}

/*
 * Write the log as the broker would, keeping a live pstate + lso (index file
 * open): check + update per batch, begin/end around markers, and the
 * snapshot at UT_SNAP_AT after syncing the index. Returns the live state.
 */
static struct txn_pstate *ut_write_log(struct txn_lso **live_lso)
{
	struct txn_pstate *ps;
	struct txn_lso *lso;
	struct st_log *log;
	char tmpl[] = "/tmp/txn_recover_ut.XXXXXX";

	CU_ASSERT_FATAL(mkdtemp(tmpl) != NULL);
	snprintf(dir, sizeof(dir), "%s/t-0", tmpl);
	CU_ASSERT_FATAL(io_uring_queue_init(UT_RING_DEPTH, &ring, 0) == 0);
	CU_ASSERT_FATAL(st_io_create(&(struct st_io_config){ .fsync = false, .on_append = on_append }, &ring, &io) == 0);
	CU_ASSERT_FATAL(st_log_open(io, dir, &cfg, &log) == 0);
	CU_ASSERT_FATAL(txn_pstate_create(&ps) == 0 && txn_lso_create(&lso) == 0);
	CU_ASSERT_FATAL(txn_lso_open_index(lso, dir, 0) == 0);
	for (int i = 0; i < UT_N; i++) {
		struct st_batch_hdr h;
		struct txn_pbatch dup;
		int len = ut_build(i);
		CU_ASSERT_FATAL(len > 0);
		CU_ASSERT_EQUAL_FATAL(st_batch_parse(bufs[i], (size_t)len, &h), len);
		if (i == UT_SNAP_AT) {
			ut_drive();
			CU_ASSERT_EQUAL(txn_lso_sync(lso), 0);
			CU_ASSERT_EQUAL_FATAL(txn_pstate_snapshot_save(ps, dir, i), 0);
		}
		if (plan[i].kind == IDEM || plan[i].kind == TXN)
			CU_ASSERT_EQUAL_FATAL(txn_pstate_check(ps, &h, &dup), TXN_APPEND);
		CU_ASSERT_EQUAL_FATAL(st_log_append(log, bufs[i], (uint32_t)len, 1, NULL), i);
		if (plan[i].kind == TXN && txn_lso_open_first(lso, plan[i].pid) < 0)
			CU_ASSERT_EQUAL(txn_lso_begin(lso, plan[i].pid, i), 0);
		if (plan[i].kind == COMMIT || plan[i].kind == ABORT)
			CU_ASSERT_EQUAL(txn_lso_end(lso, plan[i].pid, i, plan[i].kind == ABORT), 0);
		bool marker = plan[i].kind == COMMIT || plan[i].kind == ABORT;
		int rc = marker ? txn_pstate_update_marker(ps, &h, i, UT_TS(i), UT_SERIAL(i)) :
		                  txn_pstate_update(ps, &h, i, UT_TS(i)); /* replay uses batch time: match it */
		CU_ASSERT_EQUAL(rc, 0);
	}
	ut_drive();
	CU_ASSERT_EQUAL(appends_done, UT_N);
	CU_ASSERT_EQUAL(st_log_end_offset(log), UT_N);
	st_log_close(log);
	*live_lso = lso;
	return ps;
}

static void ut_cleanup(void)
{
	st_io_destroy(io);
	io_uring_queue_exit(&ring);
	char parent[64];
	snprintf(parent, sizeof(parent), "%.*s", (int)(strrchr(dir, '/') - dir), dir);
	ut_rmrf(parent);
}

static void ut_same_producer(const struct txn_producer *a, const struct txn_producer *b)
{
	CU_ASSERT_EQUAL(a->pid, b->pid);
	CU_ASSERT_EQUAL(a->epoch, b->epoch);
	CU_ASSERT_EQUAL_FATAL(a->nbatches, b->nbatches);
	CU_ASSERT_EQUAL(a->last_timestamp, b->last_timestamp);
	CU_ASSERT_EQUAL(a->last_update_ms, b->last_update_ms);
	CU_ASSERT_EQUAL(a->txn_first_offset, b->txn_first_offset);
	CU_ASSERT_EQUAL(a->coordinator_epoch, b->coordinator_epoch);
	for (int k = 0; k < a->nbatches; k++) { /* k-th newest */
		const struct txn_pbatch *x = &a->b[(a->newest + TXN_PSTATE_BATCHES - k) % TXN_PSTATE_BATCHES];
		const struct txn_pbatch *y = &b->b[(b->newest + TXN_PSTATE_BATCHES - k) % TXN_PSTATE_BATCHES];
		CU_ASSERT_EQUAL(memcmp(x, y, sizeof(*x)), 0);
	}
}

/* Same producers, same fields, and the same answers to the next batches. */
static void ut_same_state(struct txn_pstate *a, struct txn_pstate *b)
{
	uint32_t cursor = 0;

	CU_ASSERT_EQUAL_FATAL(txn_pstate_count(a), txn_pstate_count(b));
	for (struct txn_producer *p; (p = txn_pstate_next(a, &cursor));) {
		struct txn_producer *q = txn_pstate_find(b, p->pid);
		CU_ASSERT_FATAL(q != NULL);
		ut_same_producer(p, q);
	}
	for (int i = 0; i < UT_N; i++) { /* every data batch again: a duplicate with the same offsets */
		struct st_batch_hdr h;
		struct txn_pbatch da, db;
		if (plan[i].kind != IDEM && plan[i].kind != TXN)
			continue;
		CU_ASSERT_FATAL(st_batch_parse_header(bufs[i], UT_BATCH_BYTES, &h) > 0);
		CU_ASSERT_EQUAL(txn_pstate_check(a, &h, &da), TXN_DUPLICATE);
		CU_ASSERT_EQUAL(txn_pstate_check(b, &h, &db), TXN_DUPLICATE);
		CU_ASSERT(da.first_offset == i && db.first_offset == i && da.last_offset == db.last_offset);
		h.base_sequence += 5; /* a gap */
		CU_ASSERT_EQUAL(txn_pstate_check(b, &h, &db), TXN_ERR_SEQUENCE);
	}
	struct st_batch_hdr next = { .magic = 2, .producer_id = 1, .producer_epoch = 0, .base_sequence = 3 };
	struct txn_pbatch d;
	CU_ASSERT_EQUAL(txn_pstate_check(b, &next, &d), TXN_APPEND);
	CU_ASSERT_EQUAL(txn_pstate_find(b, 4)->txn_first_offset, UT_LSO);
	CU_ASSERT_EQUAL(txn_pstate_find(b, 2)->txn_first_offset, -1);
	CU_ASSERT_EQUAL(txn_pstate_find(b, 3)->txn_first_offset, -1);
	CU_ASSERT_EQUAL(txn_pstate_find(b, 1)->txn_first_offset, -1);
}

static void ut_check_lso(struct txn_lso *lso)
{
	struct txn_aborted a[4];

	CU_ASSERT_EQUAL(txn_lso_open_count(lso), 1);
	CU_ASSERT_EQUAL(txn_lso_open_first(lso, 4), UT_LSO);
	CU_ASSERT_EQUAL(txn_lso_get(lso, UT_N), UT_LSO);
	CU_ASSERT_EQUAL_FATAL(txn_lso_aborted(lso, 0, INT64_MAX, a, 4), 2);
	CU_ASSERT_EQUAL(memcmp(a, want_aborted, sizeof(want_aborted)), 0);
	CU_ASSERT_EQUAL(txn_lso_last_marker(lso), 11);
}

/*
 * Recover into a fresh pstate + lso (index opened first, as the shard does)
 * and compare with the live state. Expects snapshot `want_snap`.
 */
static void ut_recover_check(struct txn_pstate *live, int64_t want_snap, bool with_lso)
{
	struct txn_pstate *ps;
	struct txn_lso *lso = NULL;
	struct st_log *log;
	int64_t snap = -7;

	CU_ASSERT_FATAL(st_log_open(io, dir, &cfg, &log) == 0);
	CU_ASSERT_FATAL(txn_pstate_create(&ps) == 0);
	if (with_lso) {
		CU_ASSERT_FATAL(txn_lso_create(&lso) == 0);
		CU_ASSERT_FATAL(txn_lso_open_index(lso, dir, st_log_end_offset(log)) == 0);
	}
	CU_ASSERT_EQUAL_FATAL(txn_pstate_recover(ps, lso, log, dir, &snap), 0);
	CU_ASSERT_EQUAL(snap, want_snap);
	ut_same_state(live, ps);
	if (lso) {
		ut_check_lso(lso);
		CU_ASSERT_EQUAL(txn_lso_sync(lso), 0);
		txn_lso_destroy(lso);
		/* The index file now holds exactly both aborts, whatever it lacked before. */
		CU_ASSERT_FATAL(txn_lso_create(&lso) == 0);
		CU_ASSERT_FATAL(txn_lso_open_index(lso, dir, st_log_end_offset(log)) == 0);
		struct txn_aborted a[4];
		CU_ASSERT_EQUAL_FATAL(txn_lso_aborted(lso, 0, INT64_MAX, a, 4), 2);
		CU_ASSERT_EQUAL(memcmp(a, want_aborted, sizeof(want_aborted)), 0);
		txn_lso_destroy(lso);
	}
	txn_pstate_destroy(ps);
	st_log_close(log);
}

static void ut_unlink(const char *name)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	CU_ASSERT_EQUAL(unlink(path), 0);
}

static void ut_index_truncate(uint32_t entries)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/aborted.txnindex", dir);
	CU_ASSERT_EQUAL(truncate(path, UT_INDEX_HEADER_BYTES + (off_t)entries * UT_INDEX_ENTRY_BYTES), 0);
}

/* Flip one byte (at) of index entry i. */
static void ut_index_flip(uint32_t i, uint32_t at)
{
	char path[128];
	uint8_t b;
	snprintf(path, sizeof(path), "%s/aborted.txnindex", dir);
	int fd = open(path, O_RDWR);
	off_t pos = UT_INDEX_HEADER_BYTES + (off_t)i * UT_INDEX_ENTRY_BYTES + at;
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(pread(fd, &b, 1, pos), 1);
	b ^= 0x40;
	CU_ASSERT_EQUAL(pwrite(fd, &b, 1, pos), 1);
	close(fd);
}

/*
 * A snapshot whose offset falls inside a batch of the log (another log's
 * snapshot: the broker snapshots at its log end) holding a transaction
 * opened after that batch's base. The replay began at the batch holding the
 * offset, below the reopened transaction, and txn_lso_begin's order
 * assertion aborted the start-up (found by fuzz_pstate). Now the snapshot is
 * set aside and the state rebuilt from the whole log.
 */
static void ut_snapshot_inside_batch(void)
{
	static uint8_t b0[UT_BATCH_BYTES], b1[UT_BATCH_BYTES];
	char d2[80];
	struct st_log *log;
	struct txn_pstate *ps;
	struct txn_lso *lso;
	int64_t snap = -7;

	snprintf(d2, sizeof(d2), "%.*s/t-inside", (int)(strrchr(dir, '/') - dir), dir);
	CU_ASSERT_FATAL(st_log_open(io, d2, &cfg, &log) == 0);
	uint32_t n0 = ut_batch(b0, sizeof(b0), &(struct ut_batch_spec){ .records = 3, .first_ts = 10, .value_len = 4,
	                       .attributes = ST_BATCH_ATTR_TRANSACTIONAL, .producer_id = 7 });
	uint32_t n1 = ut_batch(b1, sizeof(b1), &(struct ut_batch_spec){ .records = 1, .first_ts = 20, .value_len = 4,
	                       .producer_id = 1 });
	CU_ASSERT_EQUAL_FATAL(st_log_append(log, b0, n0, 3, NULL), 0);   /* offsets 0..2 */
	CU_ASSERT_EQUAL_FATAL(st_log_append(log, b1, n1, 1, NULL), 3);
	ut_drive();
	st_log_close(log);
	/* pid 8's transaction opened at 1, a snapshot at 2: both inside batch 0 of this log. */
	CU_ASSERT_FATAL(txn_pstate_create(&ps) == 0);
	struct st_batch_hdr h = { .magic = 2, .producer_id = 8, .base_sequence = 0, .max_timestamp = 5,
	                          .attributes = ST_BATCH_ATTR_TRANSACTIONAL };
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &h, 1, 5), 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_save(ps, d2, 2), 0);
	txn_pstate_destroy(ps);

	CU_ASSERT_FATAL(st_log_open(io, d2, &cfg, &log) == 0);
	CU_ASSERT_FATAL(txn_pstate_create(&ps) == 0 && txn_lso_create(&lso) == 0);
	CU_ASSERT_FATAL(txn_lso_open_index(lso, d2, st_log_end_offset(log)) == 0);
	CU_ASSERT_EQUAL(txn_pstate_recover(ps, lso, log, d2, &snap), 0);
	CU_ASSERT_EQUAL(snap, -1);
	CU_ASSERT_PTR_NULL(txn_pstate_find(ps, 8));
	CU_ASSERT(txn_pstate_find(ps, 7) && txn_pstate_find(ps, 7)->txn_first_offset == 0);
	CU_ASSERT(txn_pstate_find(ps, 1) != NULL);
	CU_ASSERT_EQUAL(txn_lso_open_count(lso), 1);
	CU_ASSERT_EQUAL(txn_lso_get(lso, 4), 0);
	txn_lso_destroy(lso);
	txn_pstate_destroy(ps);
	st_log_close(log);
}

/*
 * Issue 11: a log (and snapshot) holding more producers than the table may
 * hold (its limit here; on a shard core also its share of the core's pool).
 * Before, the replay's txn_pstate_update failed and recovery returned
 * -ENOMEM: the partition never opened. Now idle producers are dropped oldest
 * first, as producer expiry would, and the open transactions and the LSO
 * come back whole; when only open transactions are held, -ENOSPC.
 */
static void ut_recover_bounded(uint32_t limit, int want_rc)
{
	struct txn_pstate *ps;
	struct txn_lso *lso;
	struct st_log *log;
	int64_t snap = -7;

	CU_ASSERT_FATAL(st_log_open(io, dir, &cfg, &log) == 0);
	CU_ASSERT_FATAL(txn_pstate_create(&ps) == 0 && txn_lso_create(&lso) == 0);
	txn_pstate_set_limit(ps, limit);
	CU_ASSERT_FATAL(txn_lso_open_index(lso, dir, st_log_end_offset(log)) == 0);
	int rc = txn_pstate_recover(ps, lso, log, dir, &snap);
	CU_ASSERT_EQUAL(rc, want_rc);
	if (rc == 0) {
		CU_ASSERT(txn_pstate_evicted(ps) > 0);
		CU_ASSERT(txn_pstate_count(ps) <= limit);
		ut_check_lso(lso);   /* pid 4 still open at 3 (the LSO), both aborts indexed */
		CU_ASSERT(txn_pstate_find(ps, 4) && txn_pstate_find(ps, 4)->txn_first_offset == UT_LSO);
		CU_ASSERT(txn_pstate_find(ps, 5) != NULL);   /* the newest producer is kept */
		CU_ASSERT_PTR_NULL(txn_pstate_find(ps, 2));  /* idle since its commit at 7: the oldest */
	}
	txn_lso_destroy(lso);
	txn_pstate_destroy(ps);
	st_log_close(log);
}

static void ut_raised(void *arg, int status)
{
	*(int *)arg = status;
}

static void ut_raise_start(int64_t offset)
{
	struct st_log *log;
	int status = 1;
	CU_ASSERT_FATAL(st_log_open(io, dir, &cfg, &log) == 0);
	CU_ASSERT_EQUAL_FATAL(st_log_raise_start(log, offset, ut_raised, &status), 0);
	ut_drive();
	CU_ASSERT_EQUAL(status, 0);
	CU_ASSERT_EQUAL(st_log_start_offset(log), offset);
	st_log_close(log);
}

static void test_recover(void)
{
	struct txn_lso *live_lso;
	struct txn_pstate *live = ut_write_log(&live_lso);
	char snap_name[64];

	/* The live bookkeeping is what recovery must rebuild. */
	ut_check_lso(live_lso);
	txn_lso_destroy(live_lso);
	snprintf(snap_name, sizeof(snap_name), "%020d.snapshot", UT_SNAP_AT);

	/* Snapshot + full index; then the index lacking the post-snapshot abort (an append lost in a
	 * crash: the replay re-adds it); then producer state alone. */
	ut_recover_check(live, UT_SNAP_AT, true);
	/* DeleteRecords raises the log start past pid 2's commit (7) and pid 3's second abort (11),
	 * above the snapshot: the replay still reads them from the disk (else pid 2 stays open for
	 * good, pinning the LSO, and pid 1's sequences go stale). Every check below runs with it. */
	ut_raise_start(12);
	ut_recover_check(live, UT_SNAP_AT, true);
	ut_recover_bounded(3, 0);
	ut_index_truncate(1);
	ut_recover_check(live, UT_SNAP_AT, true);
	ut_recover_check(live, UT_SNAP_AT, false);
	/* Issue 10: a damaged entry below the snapshot (pid 3's abort at 5). Cutting the file there lost
	 * that abort for good (the replay starts at 6): the index is rebuilt from the log's markers. */
	ut_index_flip(0, 17);
	ut_recover_check(live, UT_SNAP_AT, true);
	ut_index_flip(1, 3);
	ut_recover_check(live, UT_SNAP_AT, true);

	/* No snapshot: the whole log is replayed; aborts already in the index are not added twice;
	 * an empty or missing index is rebuilt whole. */
	ut_unlink(snap_name);
	ut_recover_check(live, -1, true);
	ut_recover_bounded(3, 0);
	ut_recover_bounded(1, -ENOSPC);   /* pids 2 and 3 are open together at offset 2 */
	ut_index_truncate(0);
	ut_recover_check(live, -1, true);
	ut_unlink("aborted.txnindex");
	ut_recover_check(live, -1, true);
	ut_recover_check(live, -1, false);

	/* A snapshot newer than the log (of a longer, since truncated, log) is skipped. */
	struct txn_pstate *empty;
	CU_ASSERT_FATAL(txn_pstate_create(&empty) == 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_save(empty, dir, 100), 0);
	txn_pstate_destroy(empty);
	ut_recover_check(live, -1, true);
	/* ... and removed: left on disk, it was loaded by a later start-up once the log grew past its
	 * offset again, with the producer state of batches that are gone (found by tests/sim). */
	char stale[256];
	snprintf(stale, sizeof(stale), "%s/%020d.snapshot", dir, 100);
	CU_ASSERT_NOT_EQUAL(access(stale, F_OK), 0);
	txn_pstate_destroy(live);
	ut_snapshot_inside_batch();
	ut_cleanup();
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("recover", NULL, NULL);
	CU_add_test(s, "pstate + lso from a log with transactions", test_recover);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
