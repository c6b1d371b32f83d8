/*
 * sluice-nic-pingpong: what the io_uring NIC backend's own bookkeeping costs
 * per request, without the broker: one loopback connection, the client
 * writes a message, the backend (nic_uring over its own ring, driven the way
 * a data core drives it: flush, submit, reap, complete, poll) echoes it with
 * nic_send, the client reads it back; --rounds times, all on one thread.
 *
 * Wall time on a shared machine is noise; the figure to compare between two
 * builds of nic/ is the instruction count inside the backend, which for this
 * fixed exchange is the same from run to run:
 *     valgrind --tool=callgrind --toggle-collect='nic_*' sluice-nic-pingpong --rounds 5000
 * (bench/RESULTS.md has the before/after of nic_common.c).
 *
 * usage: sluice-nic-pingpong [--rounds N] [--bytes B]
 * prints: RESULT tool=sluice-nic-pingpong rounds=.. bytes=.. ns_per_round=..
 *
 * Locality: one thread (the backend's and the client's side both).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "nic.h"

enum {
	pp_ring_entries = 256,
	pp_bytes_max = 4096,          /* one receive buffer: one DATA per message */
	pp_burst = 64,
};

struct pp {
	struct io_uring ring;
	struct nic *n;
	uint8_t echo[pp_bytes_max];   /* what nic_send sends from (one message in flight) */
};

static int pp_fail(const char *what, int err)
{
	fprintf(stderr, "sluice-nic-pingpong: %s: %s\n", what, strerror(err < 0 ? -err : err));
	return 1;
}

/* One turn of a data core's loop; it waits for at least one completion. */
static int pp_turn(struct pp *p)
{
	nic_flush(p->n);
	io_uring_submit(&p->ring);
	struct io_uring_cqe *cqe;
	int rc = io_uring_wait_cqe(&p->ring, &cqe);
	if (rc < 0 && rc != -EINTR)
		return rc;
	unsigned head, seen = 0;
	io_uring_for_each_cqe(&p->ring, head, cqe) {
		nic_uring_complete(p->n, cqe);
		seen++;
	}
	io_uring_cq_advance(&p->ring, seen);
	struct nic_ev ev[pp_burst];
	int k = nic_poll(p->n, ev, pp_burst);
	for (int i = 0; i < k; i++) {
		if (ev[i].kind != NIC_EV_DATA)
			continue;
		memcpy(p->echo, ev[i].data, ev[i].len);
		rc = nic_send(p->n, ev[i].conn, p->echo, ev[i].len, NULL);
		nic_rx_release(p->n, &ev[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long rounds = 100000, bytes = 100;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--rounds") == 0)
			rounds = strtol(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--bytes") == 0)
			bytes = strtol(argv[i + 1], NULL, 10);
	}
	if (rounds < 1 || bytes < 1 || bytes > pp_bytes_max) {
		fprintf(stderr, "usage: sluice-nic-pingpong [--rounds N >= 1] [--bytes 1..%d]\n",
			pp_bytes_max);
		return 2;
	}
	static struct pp p;
	int rc = io_uring_queue_init(pp_ring_entries, &p.ring, 0);
	if (rc < 0)
		return pp_fail("io_uring_queue_init", rc);
	struct nic_config cfg = { .host = "127.0.0.1", .port = 0, .conns_max = 4,
				  .rx_buf_bytes = pp_bytes_max, .rx_bufs = 16 };
	rc = nic_uring_create(&cfg, &p.ring, &p.n);
	if (rc < 0)
		return pp_fail("nic_uring_create", rc);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(nic_local_port(p.n)) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int one = 1;
	if (fd < 0 || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return pp_fail("connect", errno);
	uint8_t msg[pp_bytes_max], back[pp_bytes_max];
	memset(msg, 'x', sizeof(msg));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long r = 0; r < rounds; r++) {
		if (write(fd, msg, (size_t)bytes) != bytes)
			return pp_fail("write", errno);
		for (long got = 0; got < bytes;) {
			rc = pp_turn(&p);
			if (rc < 0)
				return pp_fail("backend", rc);
			ssize_t k = recv(fd, back + got, (size_t)(bytes - got), MSG_DONTWAIT);
			if (k > 0)
				got += k;
			else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
				return pp_fail("recv", k == 0 ? ECONNRESET : errno);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
	printf("RESULT tool=sluice-nic-pingpong rounds=%ld bytes=%ld ns_per_round=%.0f\n", rounds, bytes,
	       ns / (double)rounds);
	close(fd);
	io_uring_queue_exit(&p.ring);
	nic_destroy(p.n);   /* after the ring is gone: nothing in flight can write into it (nic.h) */
	return 0;
}
