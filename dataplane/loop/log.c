/*
 * log.c - log lines: time, level, core. Locality: any (one write(2) per line).
 *
 * Lines a client can cause again and again (a malformed request, a refused
 * connection, a failed append it keeps retrying) go through dp_log_rl: per
 * call site and core, DP_LOG_RL_BURST lines per DP_LOG_RL_WINDOW_MS, the
 * rest counted, and the first line of the next window says how many of its
 * kind were suppressed. One hostile client then costs a few lines a
 * minute, not a disk full of them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "seam.h"

static _Thread_local int dp_log_core = -1;   /* the core a thread's lines name (dp_log_set_core) */

/* The calling core's turn clock (loop.h's now_ms and wall_ms): a line costs no clock read. */
static _Thread_local const int64_t *dp_log_now_ms, *dp_log_wall_ms;

void dp_log_set_core(int core)
{
	dp_log_core = core;
}

void dp_log_set_clock(const int64_t *now_ms, const int64_t *wall_ms)
{
	dp_log_now_ms = now_ms;
	dp_log_wall_ms = wall_ms;
}

static int64_t mono_ms(void)
{
	return dp_log_now_ms ? *dp_log_now_ms : dp_seam_mono_us() / 1000;
}

int dp_log_level = DP_LOG_INFO;

static void log_line(int level, const char *suffix, const char *fmt, va_list ap)
{
	static const char *names[] = { "error", "warn", "info", "debug" };
	char line[1024];
	/* the simulator's clock in its build: lines replay exactly */
	int64_t wall = dp_log_wall_ms ? *dp_log_wall_ms : dp_seam_wall_ms();
	time_t sec = (time_t)(wall / 1000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	int n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %-5s core%d: ", tm.tm_hour, tm.tm_min,
	                 tm.tm_sec, (long)(wall % 1000), names[level], dp_log_core);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	if (suffix) {
		n += snprintf(line + n, sizeof(line) - (size_t)n - 1, "%s", suffix);
		if (n > (int)sizeof(line) - 2)
			n = (int)sizeof(line) - 2;
	}
	line[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}

void dp_log(int level, const char *fmt, ...)
{
	if (level > dp_log_level)
		return;
	va_list ap;
	va_start(ap, fmt);
	log_line(level, NULL, fmt, ap);
	va_end(ap);
}

/* The decision alone, at a given time: true if the line is written (suffix says what went before). */
bool dp_log_rl_admit(struct dp_log_rl *rl, int64_t now_ms, char *suffix, size_t cap)
{
	suffix[0] = 0;
	if (!rl->lines || now_ms - rl->window_ms >= DP_LOG_RL_WINDOW_MS) {
		if (rl->suppressed)
			snprintf(suffix, cap, " [%llu similar lines suppressed]", (unsigned long long)rl->suppressed);
		rl->window_ms = now_ms;
		rl->lines = 0;
		rl->suppressed = 0;
	}
	if (rl->lines >= DP_LOG_RL_BURST) {
		rl->suppressed++;
		return false;
	}
	if (++rl->lines == DP_LOG_RL_BURST && !suffix[0])
		snprintf(suffix, cap, " [more like this suppressed for %d s]", DP_LOG_RL_WINDOW_MS / 1000);
	return true;
}

void dp_log_rl(struct dp_log_rl *rl, int level, const char *fmt, ...)
{
	if (level > dp_log_level)
		return;
	char suffix[96];
	if (!dp_log_rl_admit(rl, mono_ms(), suffix, sizeof(suffix)))
		return;
	va_list ap;
	va_start(ap, fmt);
	log_line(level, suffix[0] ? suffix : NULL, fmt, ap);
	va_end(ap);
}
