/*
 * trash_punch.c - sluice-trash-bench: what removing a large file costs the
 * fdatasyncs of another file on the same file system, unlinked whole or
 * punched a step at a time first (storage/trash.h's choice).
 *
 *   sluice-trash-bench DIR MODE MIB [STEP_MIB GAP_MS]
 *
 * Writes DIR/big (MIB MiB, fdatasync'd), starts a probe thread that appends
 * 4 KiB and fdatasyncs DIR/probe every 2 ms, then removes DIR/big: MODE
 * "unlink" at once, "punch" STEP_MIB at a time from its end (fallocate
 * PUNCH_HOLE | KEEP_SIZE) with GAP_MS between, then unlinks it. Prints the
 * removal's duration and the probe's worst and mean fdatasync latency during
 * it, beside the worst before it (the baseline). The machine is noisy: run
 * the modes alternately (A B A B) with `sync` between.
 */
#include <stdbool.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static double worst_ms, sum_ms;
static long probes;
static char probe_path[4096];

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void *probe(void *arg)
{
	(void)arg;
	int fd = open(probe_path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
	char b[4096];
	memset(b, 1, sizeof(b));
	while (fd >= 0 && !stop) {
		double t0 = now_ms();
		if (write(fd, b, sizeof(b)) != (ssize_t)sizeof(b) || fdatasync(fd) < 0)
			break;
		double d = now_ms() - t0;
		worst_ms = d > worst_ms ? d : worst_ms;
		sum_ms += d;
		probes++;
		usleep(2000);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4 || (strcmp(argv[2], "unlink") && strcmp(argv[2], "punch")) || (!strcmp(argv[2], "punch") && argc < 6)) {
		fprintf(stderr, "usage: sluice-trash-bench DIR unlink|punch MIB [STEP_MIB GAP_MS]\n");
		return 2;
	}
	bool punch = !strcmp(argv[2], "punch");
	size_t size = (size_t)atol(argv[3]) << 20, step = punch ? (size_t)atol(argv[4]) << 20 : 0;
	int gap_ms = punch ? atoi(argv[5]) : 0;
	char big[4096];
	snprintf(big, sizeof(big), "%s/big", argv[1]);
	snprintf(probe_path, sizeof(probe_path), "%s/probe", argv[1]);
	int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char *b = malloc(1 << 20);
	if (fd < 0 || !b || (punch && step == 0)) {
		perror("sluice-trash-bench");
		return 1;
	}
	memset(b, 7, 1 << 20);
	for (size_t o = 0; o < size; o += 1 << 20)
		if (write(fd, b, 1 << 20) != 1 << 20) {
			perror("write");
			return 1;
		}
	fdatasync(fd);
	close(fd);
	sleep(1);
	pthread_t th;
	pthread_create(&th, NULL, probe, NULL);
	usleep(500000);
	double base = worst_ms;
	worst_ms = sum_ms = 0;
	probes = 0;
	double t0 = now_ms();
	if (punch) {
		fd = open(big, O_WRONLY);
		for (size_t end = size; fd >= 0 && end > 0;) {
			size_t start = end > step ? end - step : 0;
			if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)start, (off_t)(end - start)) < 0) {
				perror("fallocate");
				break;
			}
			end = start;
			usleep((useconds_t)gap_ms * 1000);
		}
		if (fd >= 0)
			close(fd);
	}
	unlink(big);
	double t1 = now_ms();
	usleep(800000);
	stop = 1;
	pthread_join(th, NULL);
	printf("%s: removal %.0f ms; probe fdatasync worst %.1f ms, mean %.2f ms (before: worst %.1f ms)\n",
	       punch ? "punch" : "unlink", t1 - t0, worst_ms, probes ? sum_ms / (double)probes : 0.0, base);
	free(b);
	unlink(probe_path);
	return 0;
}
