/*
 * log_ut.c - rate-limited log lines (dataplane/loop/log.c): a burst per window
 * per call site, then silence, and the next window's first line counts what
 * was suppressed; end to end through DP_WARN_RL into stderr.
 *
 * Locality: test thread only.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop.h"

static void test_admit(void)
{
	struct dp_log_rl rl = { 0 };
	char sfx[96];
	int written = 0;
	for (int i = 0; i < 100; i++) {
		bool ok = dp_log_rl_admit(&rl, 5000, sfx, sizeof(sfx));
		written += ok;
		if (ok && i == DP_LOG_RL_BURST - 1)
			CU_ASSERT(strstr(sfx, "suppressed for") != NULL);
		if (ok && i < DP_LOG_RL_BURST - 1)
			CU_ASSERT_EQUAL(sfx[0], 0);
	}
	CU_ASSERT_EQUAL(written, DP_LOG_RL_BURST);
	/* Still the same window: nothing. */
	CU_ASSERT_FALSE(dp_log_rl_admit(&rl, 5000 + DP_LOG_RL_WINDOW_MS - 1, sfx, sizeof(sfx)));
	/* The next window: written, with the count of what was left out. */
	CU_ASSERT_TRUE(dp_log_rl_admit(&rl, 5000 + DP_LOG_RL_WINDOW_MS, sfx, sizeof(sfx)));
	char want[64];
	snprintf(want, sizeof(want), "[%d similar lines suppressed]", 100 - DP_LOG_RL_BURST + 1);
	CU_ASSERT(strstr(sfx, want) != NULL);
	/* A quiet site is never held back. */
	struct dp_log_rl q = { 0 };
	for (int i = 0; i < 5; i++)
		CU_ASSERT_TRUE(dp_log_rl_admit(&q, (int64_t)i * DP_LOG_RL_WINDOW_MS, sfx, sizeof(sfx)));
}

static void warn_many(int n)
{
	for (int i = 0; i < n; i++)
		DP_WARN_RL("connection %d: malformed request header; closing", i);
}

static void test_end_to_end(void)
{
	char path[] = "/tmp/sluice-log-ut.XXXXXX";
	int fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	int saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	warn_many(5000);
	dp_log(DP_LOG_WARN, "an ordinary line");
	dup2(saved, STDERR_FILENO);
	close(saved);
	FILE *f = fdopen(fd, "r");
	rewind(f);
	char line[1200];
	int lines = 0, plain = 0;
	while (fgets(line, sizeof(line), f)) {
		lines++;
		plain += strstr(line, "an ordinary line") != NULL;
	}
	fclose(f);
	unlink(path);
	CU_ASSERT_EQUAL(plain, 1);
	CU_ASSERT_EQUAL(lines, DP_LOG_RL_BURST + 1);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("log", NULL, NULL);
	CU_add_test(s, "rate limit: burst, window, suppressed count", test_admit);
	CU_add_test(s, "DP_WARN_RL: 5000 lines in, a burst out", test_end_to_end);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned fails = CU_get_number_of_failures();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
