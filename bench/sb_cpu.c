/*
 * sb_cpu.c - sluice-bench --broker-pid: the broker's CPU time from
 * /proc/PID/stat (utime + stime of all its threads, in clock ticks), sampled
 * when the measured window opens and when the run is reported, so that the
 * RESULT line can say how much broker CPU each MiB of record values cost.
 * Locality: main thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sb.h"

int sb_cpu_parse_stat(const char *text, uint64_t *ticks)
{
	/* comm (field 2) is in parentheses and may hold spaces or ')': fields count from the last ')'. */
	const char *p = strrchr(text, ')');
	if (!p)
		return -EINVAL;
	p++;
	uint64_t utime = 0, stime = 0;
	for (int field = 3; field <= 15; field++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return -EINVAL;
		const char *start = p;
		while (*p && *p != ' ' && *p != '\n')
			p++;
		if (field == 14 || field == 15) {
			char *end;
			errno = 0;
			unsigned long long v = strtoull(start, &end, 10);
			if (errno || end != p || start == p)
				return -EINVAL;
			*(field == 14 ? &utime : &stime) = v;
		}
	}
	*ticks = utime + stime;
	return 0;
}

int sb_cpu_read(int pid, uint64_t *ticks)
{
	char path[64], buf[sb_proc_stat_bytes_max];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	int err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	buf[n] = 0;
	return sb_cpu_parse_stat(buf, ticks);
}

struct sb_cpu_fig sb_cpu_fig_of(uint64_t ticks, long hz, uint64_t bytes, double secs)
{
	struct sb_cpu_fig f = { .ms = hz > 0 ? (double)ticks * 1000.0 / (double)hz : 0.0 };
	double mib = (double)bytes / 1048576.0;
	f.ms_per_mib = mib > 0 ? f.ms / mib : 0.0;
	f.pct = secs > 0 ? f.ms / 10.0 / secs : 0.0;
	return f;
}
