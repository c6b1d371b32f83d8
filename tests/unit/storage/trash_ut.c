/*
 * trash_ut.c - the trash (storage/trash.c) on a real ring in a temp dir: a
 * partition directory put there is gone from its name at once and emptied
 * through io_uring, at most ST_TRASH_UNLINKS unlinks in flight, however many
 * files it holds; what a stop left is emptied after the next init; a core's
 * trash that no core owns any more is adopted; a file put there goes too.
 * Locality: test thread only.
 */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log_internal.h"
#include "trash.h"

#define UT_RING_DEPTH 8   /* small: the engine must submit to make room */
#define UT_FILES      50  /* far more than ST_TRASH_UNLINKS */

static struct io_uring ring;
static struct st_io *io;
static char dir[64];
static uint32_t peak;

static void on_append(void *cookie, int status, int64_t base) { (void)cookie, (void)status, (void)base; }

static void ut_setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/st_trash_ut.XXXXXX");
	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	CU_ASSERT_FATAL(io_uring_queue_init(UT_RING_DEPTH, &ring, 0) == 0);
	CU_ASSERT_FATAL(st_io_create(&(struct st_io_config){ .fsync = true, .on_append = on_append }, &ring, &io) == 0);
}

static void ut_teardown(void)
{
	char cmd[128];
	st_io_destroy(io);
	io_uring_queue_exit(&ring);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CU_ASSERT_EQUAL(system(cmd), 0);
}

static int64_t ut_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for at least one completion and hand every one in to the engine. */
static void ut_reap(void)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	io_uring_submit_and_wait(&ring, 1);
	io_uring_for_each_cqe(&ring, head, cqe) {
		st_io_complete(io, cqe);
		n++;
	}
	io_uring_cq_advance(&ring, n);
}

/* The core loop's part: tick, submit, hand completions back, until the trash is idle and empty. */
static void ut_drive(struct st_trash *t)
{
	int64_t deadline = ut_now_ms() + 20000;
	while ((t->pending || t->punching || st_trash_busy(t)) && ut_now_ms() < deadline) {
		st_trash_tick(t, ut_now_ms());
		if (t->inflight > peak)
			peak = t->inflight;
		st_io_flush(io);
		if (!st_trash_busy(t)) {
			usleep(200);   /* a punch waits its gap */
			continue;
		}
		ut_reap();
	}
	CU_ASSERT_FALSE(st_trash_busy(t));
	CU_ASSERT_FALSE(t->pending);
	CU_ASSERT_FALSE(t->punching);
}

/* A directory under dir holding n files of a few bytes. */
static void make_part(const char *name, int n)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	CU_ASSERT_FATAL(mkdir(path, 0755) == 0);
	for (int i = 0; i < n; i++) {
		char f[300];
		snprintf(f, sizeof(f), "%s/%020d.log", path, i);
		int fd = open(f, O_WRONLY | O_CREAT, 0644);
		CU_ASSERT_FATAL(fd >= 0);
		CU_ASSERT_EQUAL(write(fd, "data", 4), 4);
		close(fd);
	}
}

static int entries(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static void test_put_and_sweep(void)
{
	ut_setup();
	struct st_trash t;
	st_trash_init(&t, io, dir, 3, 77, false, NULL, 0);
	CU_ASSERT_FATAL(t.made);
	ut_drive(&t);   /* nothing there yet */
	make_part("orders-0", UT_FILES);
	make_part("orders-1", 1);
	char p0[256], p1[256], trash[256];
	snprintf(p0, sizeof(p0), "%s/orders-0", dir);
	snprintf(p1, sizeof(p1), "%s/orders-1", dir);
	snprintf(trash, sizeof(trash), "%s/%s/3", dir, ST_TRASH_DIR);
	CU_ASSERT_EQUAL(st_trash_put(&t, p0), 0);
	CU_ASSERT_EQUAL(st_trash_put(&t, p1), 0);
	/* Gone from their names at once, nothing unlinked yet (that is the ticks' work). */
	CU_ASSERT_EQUAL(entries(p0), -1);
	CU_ASSERT_EQUAL(entries(p1), -1);
	CU_ASSERT_EQUAL(entries(trash), 2);
	CU_ASSERT_EQUAL(t.files_removed, 0);
	peak = 0;
	ut_drive(&t);
	CU_ASSERT_EQUAL(entries(trash), 0);
	CU_ASSERT_EQUAL(t.files_removed, UT_FILES + 1);
	CU_ASSERT_EQUAL(t.dirs_removed, 2);
	CU_ASSERT_EQUAL(t.failures, 0);
	CU_ASSERT(peak >= 2 && peak <= ST_TRASH_UNLINKS);   /* in parallel, and bounded */
	/* A file put there goes too. */
	char f[256];
	snprintf(f, sizeof(f), "%s/loose", dir);
	int fd = open(f, O_WRONLY | O_CREAT, 0644);
	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
	CU_ASSERT_EQUAL(st_trash_put(&t, f), 0);
	ut_drive(&t);
	CU_ASSERT_EQUAL(entries(trash), 0);
	CU_ASSERT_EQUAL(access(f, F_OK), -1);
	CU_ASSERT_EQUAL(st_trash_put(&t, f), -ENOENT);   /* gone already */
	st_trash_fini(&t);
	ut_teardown();
}

/* A stop with the trash not yet empty: the next init empties it; an orphaned core's trash is adopted. */
static void test_restart_and_adopt(void)
{
	ut_setup();
	struct st_trash t;
	st_trash_init(&t, io, dir, 1, 10, false, NULL, 0);
	make_part("a-0", 5);
	char p[256];
	snprintf(p, sizeof(p), "%s/a-0", dir);
	CU_ASSERT_EQUAL(st_trash_put(&t, p), 0);
	st_trash_fini(&t);   /* stopped before any tick */
	/* Core 5's trash from a run with more cores, holding a partition too. */
	struct st_trash t5;
	st_trash_init(&t5, io, dir, 5, 11, false, NULL, 0);
	make_part("b-0", 3);
	snprintf(p, sizeof(p), "%s/b-0", dir);
	CU_ASSERT_EQUAL(st_trash_put(&t5, p), 0);
	st_trash_fini(&t5);
	/* Restart: cores 1 and 2; core 1 adopts core 5's, not core 2's. */
	struct st_trash t2;
	st_trash_init(&t2, io, dir, 2, 12, false, NULL, 0);
	make_part("c-0", 2);
	snprintf(p, sizeof(p), "%s/c-0", dir);
	CU_ASSERT_EQUAL(st_trash_put(&t2, p), 0);
	int live[2] = { 1, 2 };
	st_trash_init(&t, io, dir, 1, 13, true, live, 2);
	char d5[256], d2[256];
	snprintf(d5, sizeof(d5), "%s/%s/5", dir, ST_TRASH_DIR);
	snprintf(d2, sizeof(d2), "%s/%s/2", dir, ST_TRASH_DIR);
	CU_ASSERT_EQUAL(entries(d5), -1);   /* adopted and removed */
	CU_ASSERT_EQUAL(entries(d2), 1);    /* core 2's own */
	ut_drive(&t);
	CU_ASSERT_EQUAL(t.files_removed, 5 + 3);
	CU_ASSERT_EQUAL(t.dirs_removed, 2);
	ut_drive(&t2);
	CU_ASSERT_EQUAL(t2.files_removed, 2);
	CU_ASSERT_EQUAL(entries(d2), 0);
	st_trash_fini(&t);
	st_trash_fini(&t2);
	ut_teardown();
}

/* A file of n MiB of written data in dir/name. */
static void make_big(const char *name, int mib)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	CU_ASSERT_FATAL(fd >= 0);
	static char buf[1 << 20];
	memset(buf, 'x', sizeof(buf));
	for (int i = 0; i < mib; i++)
		CU_ASSERT_EQUAL_FATAL(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	close(fd);
}

/*
 * Files past ST_TRASH_PUNCH_BYTES are punched a step at a time, one at a time
 * (a second large one waits), then unlinked; a stop between two punches leaves
 * the file for the next start, which finishes it.
 */
static void test_punch(void)
{
	ut_setup();
	struct st_trash t;
	st_trash_init(&t, io, dir, 1, 20, false, NULL, 0);
	make_part("big-0", 2);
	make_big("big-0/a.log", 40);   /* 3 punches of 16 MiB */
	make_big("big-0/b.log", 20);   /* 2 */
	char p[256];
	snprintf(p, sizeof(p), "%s/big-0", dir);
	CU_ASSERT_EQUAL(st_trash_put(&t, p), 0);
	ut_drive(&t);
	CU_ASSERT_EQUAL(t.files_removed, 2 + 2);
	CU_ASSERT_EQUAL(t.dirs_removed, 1);
	CU_ASSERT_EQUAL(t.failures, 0);
	CU_ASSERT(t.punches >= 5);   /* a file system without holes fails the first: then 2 */
	char trash[256];
	snprintf(trash, sizeof(trash), "%s/%s/1", dir, ST_TRASH_DIR);
	CU_ASSERT_EQUAL(entries(trash), 0);
	/* Stopped after the first punch of a large file: the next start finishes it. */
	make_part("big-1", 0);
	make_big("big-1/c.log", 40);
	snprintf(p, sizeof(p), "%s/big-1", dir);
	CU_ASSERT_EQUAL(st_trash_put(&t, p), 0);
	uint64_t before = t.punches;
	for (int guard = 0; t.punches == before && guard < 100000; guard++) {
		st_trash_tick(&t, ut_now_ms());
		st_io_flush(io);
		if (st_trash_busy(&t))
			ut_reap();
	}
	CU_ASSERT_EQUAL(t.punches, before + 1);
	CU_ASSERT_FALSE(st_trash_busy(&t));
	st_trash_fini(&t);
	CU_ASSERT_EQUAL(entries(trash), 1);
	st_trash_init(&t, io, dir, 1, 21, false, NULL, 0);
	ut_drive(&t);
	CU_ASSERT_EQUAL(t.files_removed, 1);
	CU_ASSERT_EQUAL(entries(trash), 0);
	st_trash_fini(&t);
	ut_teardown();
}

static int punch_unsupported(const char *step)
{
	return strcmp(step, "punch") == 0 ? EOPNOTSUPP : 0;
}

/* A file system without holes (the punch fails): the large file is unlinked whole after the first try. */
static void test_punch_unsupported(void)
{
	ut_setup();
	st_fop_set_fault(punch_unsupported);
	struct st_trash t;
	st_trash_init(&t, io, dir, 1, 30, false, NULL, 0);
	make_part("nohole-0", 0);
	make_big("nohole-0/a.log", 40);
	char p[256];
	snprintf(p, sizeof(p), "%s/nohole-0", dir);
	CU_ASSERT_EQUAL(st_trash_put(&t, p), 0);
	ut_drive(&t);
	CU_ASSERT_EQUAL(t.punches, 1);
	CU_ASSERT_EQUAL(t.files_removed, 1);
	CU_ASSERT_EQUAL(t.dirs_removed, 1);
	CU_ASSERT_EQUAL(t.failures, 0);
	CU_ASSERT_EQUAL(access(p, F_OK), -1);
	st_trash_fini(&t);
	st_fop_set_fault(NULL);
	ut_teardown();
}

int main(void)
{
	CU_pSuite s;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("trash", NULL, NULL);
	CU_add_test(s, "put: gone from its name at once, emptied through io_uring, bounded", test_put_and_sweep);
	CU_add_test(s, "a stop leaves it for the next start; an orphaned core's trash adopted", test_restart_and_adopt);
	CU_add_test(s, "large files: punched a step at a time, one at a time, finished after a restart", test_punch);
	CU_add_test(s, "large files where the punch is not supported: unlinked whole", test_punch_unsupported);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned fails = CU_get_number_of_failures();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
