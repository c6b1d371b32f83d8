/*
 * sluice-tcp-loop: the machine's own loopback TCP throughput, one connection,
 * as a ceiling to read the broker's numbers against. A receiver thread reads
 * and discards; the main thread writes a pre-built buffer for --seconds.
 *
 * usage: sluice-tcp-loop [--seconds D] [--write-bytes B]
 * prints: RESULT tool=sluice-tcp-loop seconds=.. bytes=.. mb_per_sec=..  (MB = MiB)
 *
 * Locality: two threads; they share only the socket pair and the byte count,
 * which the receiver hands back through pthread_join (no shared memory).
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
	loop_write_bytes_default = 1 << 20,
	loop_write_bytes_max = 64 << 20,
	loop_read_bytes = 1 << 20,
};

/* Receiver state. Locality: receiver thread, until joined. */
struct loop_rx {
	int listen_fd;
	uint64_t bytes;
	int err; /* -errno */
};

static uint64_t loop_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *loop_rx_main(void *arg)
{
	struct loop_rx *rx = arg;
	static char buf[loop_read_bytes];
	int fd = accept(rx->listen_fd, NULL, NULL);
	if (fd < 0) {
		rx->err = -errno;
		return NULL;
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n > 0) {
			rx->bytes += (uint64_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rx->err = -errno;
		break;
	}
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = 2.0;
	long wbytes = loop_write_bytes_default;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--write-bytes") && i + 1 < argc)
			wbytes = atol(argv[++i]);
		else {
			fprintf(stderr, "usage: sluice-tcp-loop [--seconds D] [--write-bytes B]\n");
			return 2;
		}
	}
	if (!(seconds > 0.0 && seconds <= 3600.0) || wbytes <= 0 || wbytes > loop_write_bytes_max) {
		fprintf(stderr, "sluice-tcp-loop: bad --seconds or --write-bytes\n");
		return 2;
	}
	char *wbuf = malloc((size_t)wbytes);
	if (!wbuf)
		return 1;
	memset(wbuf, 'x', (size_t)wbytes);

	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t salen = sizeof sa;
	struct loop_rx rx = { .listen_fd = socket(AF_INET, SOCK_STREAM, 0) };
	if (rx.listen_fd < 0 || bind(rx.listen_fd, (struct sockaddr *)&sa, sizeof sa) ||
	    listen(rx.listen_fd, 1) || getsockname(rx.listen_fd, (struct sockaddr *)&sa, &salen)) {
		perror("sluice-tcp-loop: listen");
		return 1;
	}
	pthread_t th;
	if (pthread_create(&th, NULL, loop_rx_main, &rx)) {
		fprintf(stderr, "sluice-tcp-loop: pthread_create failed\n");
		return 1;
	}
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
		perror("sluice-tcp-loop: connect");
		return 1;
	}
	uint64_t t0 = loop_now_ns(), t_end = t0 + (uint64_t)(seconds * 1e9), sent = 0;
	int rc = 0;
	while (loop_now_ns() < t_end) {
		ssize_t n = write(fd, wbuf, (size_t)wbytes);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("sluice-tcp-loop: write");
			rc = 1;
			break;
		}
		sent += (uint64_t)n;
	}
	close(fd); /* EOF tells the receiver to stop; join waits for the last byte */
	pthread_join(th, NULL);
	uint64_t t1 = loop_now_ns();
	close(rx.listen_fd);
	if (rx.err) {
		fprintf(stderr, "sluice-tcp-loop: receiver: %s\n", strerror(-rx.err));
		rc = 1;
	}
	assert(rc || rx.bytes == sent);
	double secs = (double)(t1 - t0) / 1e9;
	printf("RESULT tool=sluice-tcp-loop seconds=%.3f bytes=%llu mb_per_sec=%.1f\n", secs,
	       (unsigned long long)rx.bytes, (double)rx.bytes / secs / (1024.0 * 1024.0));
	free(wbuf);
	return rc;
}
