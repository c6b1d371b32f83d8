/*
 * dump_ut.c - tools/sluice-dump run on a partition written by st_log.
 * argv[1] is the sluice-dump executable. Locality: test thread only.
 */
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <liburing.h>
#include <sys/wait.h>

#include "log_internal.h"
#include "ut_batch.h"

#define UT_OUT_BYTES_MAX (1 << 16)

static const char *dump_exe;
static char dir[64];
static char out[UT_OUT_BYTES_MAX];

static void on_append(void *cookie, int status, int64_t base)
{
	CU_ASSERT_EQUAL(status, 0);
	(void)cookie; (void)base;
}

/* Run sluice-dump with args; output into out; returns the exit status. */
static int run_dump(const char *args)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "'%s' %s '%s' 2>&1", dump_exe, args, dir);
	FILE *f = popen(cmd, "r");
	CU_ASSERT_FATAL(f != NULL);
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	int st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_dump(void)
{
	struct io_uring ring;
	struct st_io *io;
	struct st_log *log;
	static uint8_t b05[128], b06[128], b3[1024];
	char tmpl[] = "/tmp/st_dump_ut.XXXXXX";

	CU_ASSERT_FATAL(mkdtemp(tmpl) != NULL);
	snprintf(dir, sizeof(dir), "%s/p-0", tmpl);
	CU_ASSERT_FATAL(io_uring_queue_init(8, &ring, 0) == 0);
	CU_ASSERT_FATAL(st_io_create(&(struct st_io_config){ .fsync = true, .on_append = on_append }, &ring, &io) == 0);
	CU_ASSERT_FATAL(st_log_open(io, dir, &(struct st_log_config){ .segment_bytes = 1 << 20,
	                .retention_bytes = -1, .retention_ms = -1, .index_interval_bytes = 4096 }, &log) == 0);
	size_t n05 = ut_hex_decode(vec05, b05, sizeof(b05)), n06 = ut_hex_decode(vec06, b06, sizeof(b06));
	uint32_t n3 = ut_batch(b3, sizeof(b3), &(struct ut_batch_spec){ .records = 2, .first_ts = 7, .value_len = 3 });
	b3[ST_BATCH_HEADER_BYTES + 8] = 0;  /* not a text byte: record 0's value is shown in hex */
	st_put_be32(b3 + ST_BATCH_OFF_CRC, crc32c(0, b3 + 21, n3 - 21));
	CU_ASSERT_EQUAL(st_log_append(log, b05, (uint32_t)n05, 3, NULL), 0);
	CU_ASSERT_EQUAL(st_log_append(log, b06, (uint32_t)n06, 1, NULL), 3);
	CU_ASSERT_EQUAL(st_log_append(log, b3, n3, 2, NULL), 4);
	while (st_io_pending(io)) {
		struct io_uring_cqe *cqe;
		st_io_flush(io);
		io_uring_submit_and_wait(&ring, 1);
		while (io_uring_peek_cqe(&ring, &cqe) == 0) {
			st_io_complete(io, cqe);
			io_uring_cqe_seen(&ring, cqe);
		}
	}
	st_log_close(log);
	st_io_destroy(io);
	io_uring_queue_exit(&ring);

	CU_ASSERT_EQUAL(run_dump(""), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "1 segment(s)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "offset 0..2 pos 0 size 96 pid 4000 epoch 0 seq 0 codec none transactional records 3"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "first_ts 1700000000000 max_ts 1700000000009 crc ok"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "offset 3..3 pos 96 size 78"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "transactional control records 1"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "COMMIT coordinator_epoch 0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "offset 4..5 pos 174"));
	CU_ASSERT_PTR_NULL(strstr(out, "key ")); /* no records without --records */

	CU_ASSERT_EQUAL(run_dump("--records"), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "    offset 0 ts 1700000000000 key \"k0\" value \"v0\" headers 0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "    offset 1 ts 1700000000005 key \"k1\" value \"v1\" headers 1"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "    offset 2 ts 1700000000009 key null value \"v2\" headers 0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "    offset 4 ts 7 key \"k0\" value 0x006161 headers 0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "    offset 5 ts 8 key \"k1\" value \"bbb\" headers 0"));

	CU_ASSERT_EQUAL(run_dump("--from 3"), 0);
	CU_ASSERT_PTR_NULL(strstr(out, "offset 0..2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "offset 3..3"));

	/* Damage the control batch's magic: reported, and the batch after it is still dumped. */
	char path[128];
	snprintf(path, sizeof(path), "%s/00000000000000000000.log", dir);
	int fd = open(path, O_RDWR);
	CU_ASSERT_FATAL(fd >= 0);
	uint8_t c = 7, two = 2;
	CU_ASSERT(pwrite(fd, &c, 1, 96 + 16) == 1);
	CU_ASSERT_EQUAL(run_dump(""), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "DAMAGED bytes [96, 174) (magic is not 2)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "offset 4..5 pos 174"));
	CU_ASSERT(pwrite(fd, &two, 1, 96 + 16) == 1);
	CU_ASSERT_EQUAL(run_dump(""), 0);

	/* Corrupt the control batch's record and tear the tail: reported, exit 1. */
	c = 0x55;
	CU_ASSERT(pwrite(fd, &c, 1, 96 + 70) == 1);
	CU_ASSERT(ftruncate(fd, 96 + 78 + 30) == 0);
	close(fd);
	CU_ASSERT_EQUAL(run_dump(""), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "offset 3..3 pos 96 size 78"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "crc BAD"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "TORN at position 174: 30 trailing byte(s)"));
	CU_ASSERT_EQUAL(run_dump("--bogus"), 2);
	if (!getenv("UT_KEEP")) ut_rmrf(tmpl);
}

int main(int argc, char **argv)
{
	CU_pSuite s;

	if (argc < 2) {
		fprintf(stderr, "usage: dump_ut PATH_TO_SLUICE_DUMP\n");
		return 2;
	}
	dump_exe = argv[1];
	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("sluice-dump", NULL, NULL);
	CU_add_test(s, "dump a written partition", test_dump);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
