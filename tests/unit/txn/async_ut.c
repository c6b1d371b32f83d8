/*
 * async_ut.c - the producer-state snapshot and the aborted index's appends
 * through the core's io_uring (txn_pstate_snapshot_start, txn_lso_attach_io)
 * on a real ring in a temp dir, with failures injected at the storage steps
 * (st_fop_set_fault). What is written must read back as the synchronous
 * paths write it; a failure must leave no snapshot (and, for the index, no
 * snapshot after it). Locality: test thread only.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "fop.h"
#include "log.h"
#include "lso.h"
#include "pstate.h"

static struct io_uring ring;
static struct st_io *io;
static char dir[64];
static int dirfd_;
static const char *fail_step;

static void on_append(void *cookie, int status, int64_t base) { (void)cookie, (void)status, (void)base; }
static int fault(const char *step) { return fail_step && !strcmp(step, fail_step) ? EIO : 0; }

static void ut_setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/txn_async_ut.XXXXXX");
	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CU_ASSERT_FATAL(dirfd_ >= 0);
	CU_ASSERT_FATAL(io_uring_queue_init(8, &ring, 0) == 0);
	CU_ASSERT_FATAL(st_io_create(&(struct st_io_config){ .fsync = true, .on_append = on_append }, &ring, &io) == 0);
	fail_step = NULL;
	st_fop_set_fault(fault);
}

static void ut_teardown(void)
{
	char cmd[128];
	CU_ASSERT_EQUAL(st_io_pending(io), 0);
	st_io_destroy(io);
	io_uring_queue_exit(&ring);
	close(dirfd_);
	st_fop_set_fault(NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CU_ASSERT_EQUAL(system(cmd), 0);
}

/* Run the ring until no file operation is in flight. */
static void ut_drive(void)
{
	for (int guard = 0; st_io_pending(io) && guard < 1000; guard++) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		io_uring_submit_and_wait(&ring, 1);
		io_uring_for_each_cqe(&ring, head, cqe) {
			st_io_complete(io, cqe);
			n++;
		}
		io_uring_cq_advance(&ring, n);
	}
	CU_ASSERT_EQUAL(st_io_pending(io), 0);
}

static bool ut_exists(const char *name)
{
	struct stat st;
	return fstatat(dirfd_, name, &st, 0) == 0;
}

static struct st_batch_hdr hdr(int64_t pid, int32_t seq)
{
	return (struct st_batch_hdr){ .magic = 2, .last_offset_delta = 0, .first_timestamp = 1000, .max_timestamp = 1000,
	                              .producer_id = pid, .producer_epoch = 0, .base_sequence = seq, .records_count = 1 };
}

static int snaps, snap_status;
static int64_t snap_offset;

static void snap_cb(void *arg, int status, int64_t offset)
{
	CU_ASSERT_PTR_EQUAL(arg, &snaps);
	snaps++;
	snap_status = status;
	snap_offset = offset;
}

static void test_snapshot_async(void)
{
	struct txn_pstate *ps, *back;
	int64_t off;

	ut_setup();
	CU_ASSERT_FATAL(txn_pstate_create(&ps) == 0);
	for (int i = 0; i < 50; i++) {
		struct st_batch_hdr h = hdr(100 + i, 0);
		CU_ASSERT_EQUAL(txn_pstate_update(ps, &h, i, 5000), 0);
	}
	int sync_fd = openat(dirfd_, "index", O_RDWR | O_CREAT, 0644);
	for (int64_t o = 100; o <= 300; o += 100) {
		CU_ASSERT_EQUAL(txn_pstate_snapshot_start(ps, io, dirfd_, o, sync_fd, snap_cb, &snaps), 0);
		CU_ASSERT(txn_pstate_snapshot_busy(ps));
		CU_ASSERT_EQUAL(txn_pstate_snapshot_start(ps, io, dirfd_, o + 1, -1, snap_cb, &snaps), -EBUSY);
		/* Changes after the start are not in this snapshot. */
		struct st_batch_hdr h = hdr(900 + o, 0);
		CU_ASSERT_EQUAL(txn_pstate_update(ps, &h, o, 5000), 0);
		CU_ASSERT_EQUAL(snaps, (int)(o / 100) - 1);
		ut_drive();
		CU_ASSERT_EQUAL(snaps, (int)(o / 100));
		CU_ASSERT_EQUAL(snap_status, 0);
		CU_ASSERT_EQUAL(snap_offset, o);
		CU_ASSERT_FALSE(txn_pstate_snapshot_busy(ps));
	}
	/* The newest two stay, as the synchronous save keeps them; no temp file. */
	CU_ASSERT_FALSE(ut_exists("00000000000000000100.snapshot"));
	CU_ASSERT(ut_exists("00000000000000000200.snapshot"));
	CU_ASSERT(ut_exists("00000000000000000300.snapshot"));
	CU_ASSERT_FALSE(ut_exists("00000000000000000300.snapshot.tmp"));
	CU_ASSERT_FATAL(txn_pstate_create(&back) == 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_load(back, dir, 1000, &off), 0);
	CU_ASSERT_EQUAL(off, 300);
	CU_ASSERT_EQUAL(txn_pstate_count(back), 52);   /* 50, and those added after the first two starts */
	CU_ASSERT_PTR_NOT_NULL(txn_pstate_find(back, 1000));
	CU_ASSERT_PTR_NULL(txn_pstate_find(back, 1200));
	/* Failures: the aborted index's sync, the snapshot's own sync, the rename. No file appears,
	 * the kept ones stay. */
	static const char *steps[] = { "presync", "datasync", "rename" };
	for (int k = 0; k < 3; k++) {
		fail_step = steps[k];
		CU_ASSERT_EQUAL(txn_pstate_snapshot_start(ps, io, dirfd_, 400, sync_fd, snap_cb, &snaps), 0);
		ut_drive();
		CU_ASSERT_EQUAL(snap_status, -EIO);
		CU_ASSERT_FALSE(ut_exists("00000000000000000400.snapshot"));
		CU_ASSERT_FALSE(ut_exists("00000000000000000400.snapshot.tmp"));
		CU_ASSERT(ut_exists("00000000000000000200.snapshot"));
		CU_ASSERT(ut_exists("00000000000000000300.snapshot"));
	}
	fail_step = NULL;
	CU_ASSERT_EQUAL(txn_pstate_snapshot_start(ps, io, dirfd_, 400, -1, snap_cb, &snaps), 0);
	ut_drive();
	CU_ASSERT_EQUAL(snap_status, 0);
	CU_ASSERT_FALSE(ut_exists("00000000000000000200.snapshot"));
	CU_ASSERT(ut_exists("00000000000000000400.snapshot"));
	close(sync_fd);
	txn_pstate_destroy(back);
	txn_pstate_destroy(ps);
	ut_teardown();
}

static void test_lso_async_appends(void)
{
	struct txn_lso *l, *back;
	int fd;

	ut_setup();
	CU_ASSERT_FATAL(txn_lso_create(&l) == 0);
	CU_ASSERT_EQUAL_FATAL(txn_lso_open_index(l, dir, 0), 0);
	txn_lso_attach_io(l, io, dirfd_);
	CU_ASSERT_EQUAL(txn_lso_sync_fd(l, &fd), 0);
	CU_ASSERT(fd >= 0);
	/* More than one write's worth (64 entries), so they go in several writes, in order. */
	int64_t off = 0;
	for (int i = 0; i < 150; i++) {
		CU_ASSERT_EQUAL(txn_lso_begin(l, 1000 + i, off), 0);
		CU_ASSERT_EQUAL(txn_lso_end(l, 1000 + i, off + 2, i % 3 != 0), 0);   /* 2 of 3 abort */
		off += 3;
	}
	CU_ASSERT(txn_lso_busy(l));
	CU_ASSERT_EQUAL(txn_lso_sync_fd(l, &fd), -EAGAIN);
	CU_ASSERT_EQUAL(txn_lso_sync(l), -EAGAIN);
	ut_drive();
	CU_ASSERT_FALSE(txn_lso_busy(l));
	CU_ASSERT_EQUAL(txn_lso_sync_fd(l, &fd), 0);
	CU_ASSERT_EQUAL(txn_lso_sync(l), 0);
	uint32_t n = txn_lso_aborted(l, 0, off, NULL, 0);
	CU_ASSERT_EQUAL(n, 100);
	txn_lso_close_index(l);
	txn_lso_destroy(l);
	/* Read back as the synchronous appends write it. */
	CU_ASSERT_FATAL(txn_lso_create(&back) == 0);
	CU_ASSERT_EQUAL_FATAL(txn_lso_open_index(back, dir, off), 0);
	CU_ASSERT_FALSE(txn_lso_needs_rebuild(back));
	CU_ASSERT_EQUAL(txn_lso_aborted(back, 0, off, NULL, 0), 100);
	CU_ASSERT_EQUAL(txn_lso_last_marker(back), off - 1);
	/* A failed append is sticky: no snapshot may be taken past the abort the file lacks. */
	txn_lso_attach_io(back, io, dirfd_);
	fail_step = "write";
	CU_ASSERT_EQUAL(txn_lso_begin(back, 5, off), 0);
	CU_ASSERT_EQUAL(txn_lso_end(back, 5, off + 1, true), 0);
	ut_drive();
	CU_ASSERT_EQUAL(txn_lso_sync_fd(back, &fd), -EIO);
	CU_ASSERT_EQUAL(txn_lso_sync(back), -EIO);
	fail_step = NULL;
	CU_ASSERT_EQUAL(txn_lso_begin(back, 6, off + 2), 0);
	CU_ASSERT_EQUAL(txn_lso_end(back, 6, off + 3, true), 0);
	CU_ASSERT_FALSE(txn_lso_busy(back));   /* nothing more is written after the hole */
	CU_ASSERT_EQUAL(txn_lso_sync_fd(back, &fd), -EIO);
	txn_lso_destroy(back);
	ut_teardown();
}

/* n aborts, one producer each, from *off on (3 offsets apiece); the last marker at *off - 1. */
static void ut_aborts(struct txn_lso *l, int64_t pid0, int n, int64_t *off)
{
	for (int i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(txn_lso_begin(l, pid0 + i, *off), 0);
		CU_ASSERT_EQUAL(txn_lso_end(l, pid0 + i, *off + 2, true), 0);
		*off += 3;
	}
}

static off_t ut_size(const char *name)
{
	struct stat st;
	return fstatat(dirfd_, name, &st, 0) == 0 ? st.st_size : -1;
}

/* The rewrite after retention through io_uring: appends made meanwhile reach the new file; a
 * failure before the rename keeps the old one whole, one after it stops snapshots. */
static void test_lso_async_compaction(void)
{
	static const char *fails[] = { NULL, "rename", "dirsync" };
	for (int k = 0; k < 3; k++) {
		struct txn_lso *l, *back;
		int64_t off = 0;
		int fd;

		ut_setup();
		CU_ASSERT_FATAL(txn_lso_create(&l) == 0);
		CU_ASSERT_EQUAL_FATAL(txn_lso_open_index(l, dir, 0), 0);
		txn_lso_attach_io(l, io, dirfd_);
		ut_aborts(l, 1000, 4300, &off);
		ut_drive();
		CU_ASSERT_EQUAL(ut_size("aborted.txnindex"), 8 + 4300 * 28);
		txn_lso_trim(l, 4200 * 3);   /* 100 stay */
		CU_ASSERT_EQUAL(txn_lso_aborted(l, 0, off, NULL, 0), 100);
		fail_step = fails[k];
		CU_ASSERT_EQUAL(txn_lso_compact_index(l), 0);
		CU_ASSERT(txn_lso_busy(l));
		ut_aborts(l, 9000, 2, &off);   /* while the rewrite is in flight */
		CU_ASSERT_EQUAL(txn_lso_sync_fd(l, &fd), -EAGAIN);
		ut_drive();
		fail_step = NULL;
		CU_ASSERT_FALSE(txn_lso_busy(l));
		CU_ASSERT_FALSE(ut_exists("aborted.txnindex.new"));
		if (k == 0) {
			CU_ASSERT_EQUAL(txn_lso_sync_fd(l, &fd), 0);
			CU_ASSERT_EQUAL(ut_size("aborted.txnindex"), 8 + 102 * 28);
		} else if (k == 1) {
			CU_ASSERT_EQUAL(txn_lso_sync_fd(l, &fd), 0);   /* the old file, with the two after it */
			CU_ASSERT_EQUAL(ut_size("aborted.txnindex"), 8 + 4302 * 28);
		} else {
			CU_ASSERT_EQUAL(txn_lso_sync_fd(l, &fd), -EIO);   /* renamed, not known durable */
			CU_ASSERT_EQUAL(ut_size("aborted.txnindex"), 8 + 100 * 28);
		}
		txn_lso_destroy(l);
		CU_ASSERT_FATAL(txn_lso_create(&back) == 0);
		CU_ASSERT_EQUAL_FATAL(txn_lso_open_index(back, dir, off), 0);
		CU_ASSERT_FALSE(txn_lso_needs_rebuild(back));
		CU_ASSERT_EQUAL(txn_lso_aborted(back, 4200 * 3, off, NULL, 0), k == 2 ? 100 : 102);
		txn_lso_destroy(back);
		ut_teardown();
	}
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("async", NULL, NULL);
	CU_add_test(s, "producer snapshot through io_uring", test_snapshot_async);
	CU_add_test(s, "aborted index appends through io_uring", test_lso_async_appends);
	CU_add_test(s, "aborted index rewrite through io_uring", test_lso_async_compaction);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
