/* log.c - log lines: time, level, core. Locality: any (one write(2) per line). */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

_Thread_local int dp_log_core = -1;
int dp_log_level = DP_LOG_INFO;

void dp_log(int level, const char *fmt, ...)
{
	static const char *names[] = { "error", "warn", "info", "debug" };
	if (level > dp_log_level)
		return;
	char line[1024];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %-5s core%d: ", tm.tm_hour, tm.tm_min,
	                 tm.tm_sec, ts.tv_nsec / 1000000, names[level], dp_log_core);
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}
