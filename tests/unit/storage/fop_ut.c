/*
 * fop_ut.c - file operations on the core's io_uring (storage/fop.c) on a
 * real ring in a temp dir: the atomic replace, a failure injected at each of
 * its steps (the old file stays, no temp file or descriptor is left), the
 * plain write and fdatasync. Locality: test thread only.
 */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fop.h"
#include "log_internal.h"

#define UT_RING_DEPTH 8   /* small: the engine must submit to make room */

static struct io_uring ring;
static struct st_io *io;
static char dir[64];
static int dirfd_;
static int calls, last_status;
static const char *fail_step;   /* the step the hook fails (NULL: none) */
static int fail_errno = EIO;

static void on_append(void *cookie, int status, int64_t base) { (void)cookie, (void)status, (void)base; }

static int fault(const char *step)
{
	return fail_step && strcmp(step, fail_step) == 0 ? fail_errno : 0;
}

static void done(void *arg, int status)
{
	CU_ASSERT_PTR_EQUAL(arg, &calls);
	calls++;
	last_status = status;
}

static void ut_setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/st_fop_ut.XXXXXX");
	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CU_ASSERT_FATAL(dirfd_ >= 0);
	CU_ASSERT_FATAL(io_uring_queue_init(UT_RING_DEPTH, &ring, 0) == 0);
	CU_ASSERT_FATAL(st_io_create(&(struct st_io_config){ .fsync = true, .on_append = on_append }, &ring, &io) == 0);
	calls = 0;
	last_status = 1;
	fail_step = NULL;
	fail_errno = EIO;
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

/* The core loop's part: submit, wait, hand completions to st_io_complete, until the op is done. */
static void ut_drive(const struct st_fop *f)
{
	for (int guard = 0; st_fop_busy(f) && guard < 1000; guard++) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		io_uring_submit_and_wait(&ring, 1);
		io_uring_for_each_cqe(&ring, head, cqe) {
			CU_ASSERT_EQUAL_FATAL(cqe->user_data & 0xf, ST_URING_TAG);
			st_io_complete(io, cqe);
			n++;
		}
		io_uring_cq_advance(&ring, n);
	}
	CU_ASSERT_FALSE(st_fop_busy(f));
}

/* Contents of dir/name into buf (NUL-terminated); -1 if it does not exist. */
static int ut_read(const char *name, char *buf, size_t cap)
{
	int fd = openat(dirfd_, name, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, cap - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = 0;
	return (int)n;
}

static int ut_open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	CU_ASSERT_FATAL(d != NULL);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static _Alignas(16) struct st_fop fop;   /* as embedded in its owner */

static void test_replace(void)
{
	char buf[64];
	ut_setup();
	CU_ASSERT_EQUAL(ut_read("old", buf, sizeof(buf)), -1);
	int fd = openat(dirfd_, "old", O_WRONLY | O_CREAT, 0644);
	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
	int sync_fd = openat(dirfd_, "presync", O_WRONLY | O_CREAT, 0644);
	CU_ASSERT_FATAL(sync_fd >= 0);

	st_fop_replace(io, &fop, dirfd_, "f.tmp", "f", "old", "first", 5, sync_fd, done, &calls);
	CU_ASSERT(st_fop_busy(&fop));
	CU_ASSERT_EQUAL(calls, 0);   /* never called back from the start */
	CU_ASSERT_EQUAL(st_io_pending(io), 1);
	ut_drive(&fop);
	CU_ASSERT_EQUAL(calls, 1);
	CU_ASSERT_EQUAL(last_status, 0);
	CU_ASSERT_EQUAL(ut_read("f", buf, sizeof(buf)), 5);
	CU_ASSERT_STRING_EQUAL(buf, "first");
	CU_ASSERT_EQUAL(ut_read("f.tmp", buf, sizeof(buf)), -1);
	CU_ASSERT_EQUAL(ut_read("old", buf, sizeof(buf)), -1);   /* dropped after the rename */

	/* Over an existing name, without presync or drop. */
	st_fop_replace(io, &fop, dirfd_, "f.tmp", "f", NULL, "second!", 7, -1, done, &calls);
	ut_drive(&fop);
	CU_ASSERT_EQUAL(calls, 2);
	CU_ASSERT_EQUAL(last_status, 0);
	CU_ASSERT_EQUAL(ut_read("f", buf, sizeof(buf)), 7);
	CU_ASSERT_STRING_EQUAL(buf, "second!");
	close(sync_fd);
	ut_teardown();
}

/* A failure at each step: called back once with it; the old file whole (or the new one after the
 * rename), no temp file, no descriptor left open. */
static void test_replace_failures(void)
{
	static const char *steps[] = { "presync", "open", "write", "datasync", "close", "rename", "dirsync" };
	char buf[64];

	ut_setup();
	int sync_fd = openat(dirfd_, "presync", O_WRONLY | O_CREAT, 0644);
	CU_ASSERT_FATAL(sync_fd >= 0);
	st_fop_replace(io, &fop, dirfd_, "f.tmp", "f", NULL, "old", 3, -1, done, &calls);
	ut_drive(&fop);
	CU_ASSERT_EQUAL_FATAL(last_status, 0);
	int fds = ut_open_fds();
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		calls = 0;
		fail_step = steps[i];
		fail_errno = i % 2 ? EIO : ENOSPC;
		st_fop_replace(io, &fop, dirfd_, "f.tmp", "f", "keep", "new", 3, sync_fd, done, &calls);
		ut_drive(&fop);
		CU_ASSERT_EQUAL(calls, 1);
		CU_ASSERT_EQUAL(last_status, -fail_errno);
		CU_ASSERT_EQUAL(ut_read("f", buf, sizeof(buf)), 3);
		/* Before the rename the old content stays; a failed directory fsync comes after it. */
		CU_ASSERT_STRING_EQUAL(buf, strcmp(steps[i], "dirsync") ? "old" : "new");
		CU_ASSERT_EQUAL(ut_read("f.tmp", buf, sizeof(buf)), -1);
		if (ut_open_fds() != fds)
			fprintf(stderr, "step %s: %d descriptors, want %d\n", steps[i], ut_open_fds(), fds);
		CU_ASSERT_EQUAL(ut_open_fds(), fds);
		if (!strcmp(steps[i], "dirsync")) {   /* back to the old content for the next round */
			fail_step = NULL;
			st_fop_replace(io, &fop, dirfd_, "f.tmp", "f", NULL, "old", 3, -1, done, &calls);
			ut_drive(&fop);
		}
	}
	/* A failed unlink of the dropped file is only logged. */
	int fd = openat(dirfd_, "keep", O_WRONLY | O_CREAT, 0644);
	close(fd);
	calls = 0;
	fail_step = "unlink";
	st_fop_replace(io, &fop, dirfd_, "f.tmp", "f", "keep", "new", 3, -1, done, &calls);
	ut_drive(&fop);
	CU_ASSERT_EQUAL(calls, 1);
	CU_ASSERT_EQUAL(last_status, 0);
	CU_ASSERT_EQUAL(ut_read("f", buf, sizeof(buf)), 3);
	CU_ASSERT_STRING_EQUAL(buf, "new");
	close(sync_fd);
	ut_teardown();
}

static void test_write_and_sync(void)
{
	char buf[64];
	ut_setup();
	int fd = openat(dirfd_, "w", O_RDWR | O_CREAT, 0644);
	CU_ASSERT_FATAL(fd >= 0);
	st_fop_write(io, &fop, fd, "hello", 5, 0, done, &calls);
	ut_drive(&fop);
	st_fop_write(io, &fop, fd, "world", 5, 5, done, &calls);
	ut_drive(&fop);
	CU_ASSERT_EQUAL(calls, 2);
	CU_ASSERT_EQUAL(last_status, 0);
	CU_ASSERT_EQUAL(ut_read("w", buf, sizeof(buf)), 10);
	CU_ASSERT_STRING_EQUAL(buf, "helloworld");
	st_fop_datasync(io, &fop, fd, done, &calls);
	ut_drive(&fop);
	CU_ASSERT_EQUAL(calls, 3);
	CU_ASSERT_EQUAL(last_status, 0);
	fail_step = "write";
	st_fop_write(io, &fop, fd, "xx", 2, 0, done, &calls);
	ut_drive(&fop);
	CU_ASSERT_EQUAL(last_status, -EIO);
	CU_ASSERT_EQUAL(ut_read("w", buf, sizeof(buf)), 10);
	CU_ASSERT_STRING_EQUAL(buf, "helloworld");
	fail_step = "datasync";
	st_fop_datasync(io, &fop, fd, done, &calls);
	ut_drive(&fop);
	CU_ASSERT_EQUAL(last_status, -EIO);
	/* A write to a bad descriptor fails for real, with the kernel's error. */
	fail_step = NULL;
	st_fop_write(io, &fop, -1, "xx", 2, 0, done, &calls);
	ut_drive(&fop);
	CU_ASSERT_EQUAL(last_status, -EBADF);
	close(fd);
	ut_teardown();
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("fop", NULL, NULL);
	CU_add_test(s, "atomic replace", test_replace);
	CU_add_test(s, "replace: a failure at each step", test_replace_failures);
	CU_add_test(s, "write and fdatasync", test_write_and_sync);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
