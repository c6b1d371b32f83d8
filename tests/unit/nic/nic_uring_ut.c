/*
 * nic_uring_ut.c - unit tests of the io_uring socket backend (nic/nic_uring.c)
 * against a real ring and loopback sockets on port 0.
 *
 * Locality: test program. The main thread plays the data core (owns the
 * ring, SINGLE_ISSUER); a second thread plays the clients with plain
 * blocking/poll(2) sockets and reports failures back (CUnit asserts only on
 * the main thread). Every test runs twice: multishot mode (buffer ring) and
 * the forced single-shot fallback. Every event, send and release of a
 * server also goes through nic_contract.h, the checks nic_sim_ut runs
 * against the in-memory backend.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <liburing.h>
#include <CUnit/Basic.h>

#include "nic.h"
#include "nic_internal.h"
#include "nic_contract.h"

#define UT_CONNS_MAX   512u
#define UT_RXB_MAX     2048u
#define UT_TIMEOUT_MS  20000

static unsigned g_flags; /* NIC_URING_F_* for the suite being run */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Byte i of connection c's stream: position-dependent so loss, duplication
 * and reordering all show. */
static uint8_t pat(uint32_t c, uint64_t i)
{
	uint64_t x = (i >> 2) * 0x9E3779B97F4A7C15ull + c * 0xBF58476D1CE4E5B9ull;
	x ^= x >> 29;
	return (uint8_t)(x >> (8 * (i & 3)));
}

/* ---- server side (main thread) ------------------------------------------ */

struct srv;
typedef void (*srv_ev_fn)(struct srv *s, const struct nic_ev *e);

/* Per connection app state, by slot index. */
struct app_conn {
	uint32_t handle;
	bool open;
	uint64_t rx_bytes;
	uint32_t pend[UT_RXB_MAX];    /* echo: buffer ids waiting for txq room */
	uint32_t pend_head, pend_n;
	uint32_t sent_ok, sent_cancel, sent_next_cookie;
	int closed_status;
	bool closed;
	bool order_bad;               /* an event came after CLOSED, or SENT out of order */
};

struct srv {
	struct io_uring ring;
	struct nic *n;
	srv_ev_fn on_ev;
	struct nic_ev held[UT_RXB_MAX];   /* DATA events not yet released, by buf id */
	struct app_conn *ac;              /* UT_CONNS_MAX */
	uint32_t opens, closes, datas, sents;
	uint32_t events_last_step;
	uint64_t rx_total;
	uint32_t last_open;               /* handle of the newest OPEN */
	uint32_t last_closed;
	struct ct ct;                     /* nic.h's contract, as for every backend */
};

/* The running server's contract checker (one server at a time). */
static struct ct *g_ct;

static int ut_send(struct nic *n, uint32_t conn, const void *data, uint32_t len, void *cookie)
{
	int rc = nic_send(n, conn, data, len, cookie);
	if (g_ct)
		ct_send(g_ct, conn, cookie, rc);
	return rc;
}

static void ut_rx_release(struct nic *n, const struct nic_ev *e)
{
	if (g_ct)
		ct_release(g_ct, e);
	nic_rx_release(n, e);
}

static int srv_open(struct srv *s, const char *host, uint16_t port, uint32_t conns_max,
		    uint32_t rx_bufs, uint32_t rx_buf_bytes, srv_ev_fn fn)
{
	memset(s, 0, sizeof(*s));
	assert(conns_max <= UT_CONNS_MAX && rx_bufs <= UT_RXB_MAX);
	struct io_uring_params p = { .flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
						IORING_SETUP_SINGLE_ISSUER };
	int ret = io_uring_queue_init_params(1024, &s->ring, &p);
	if (ret < 0)
		return ret;
	s->ac = calloc(UT_CONNS_MAX, sizeof(*s->ac));
	assert(s->ac);
	s->on_ev = fn;
	struct nic_config cfg = { .host = host, .port = port, .conns_max = conns_max,
				  .rx_buf_bytes = rx_buf_bytes, .rx_bufs = rx_bufs };
	ret = nic_uring_create_ex(&cfg, &s->ring, g_flags, &s->n);
	if (ret < 0) {
		io_uring_queue_exit(&s->ring);
		free(s->ac);
		return ret;
	}
	ct_init(&s->ct, conns_max, rx_bufs, rx_buf_bytes);
	g_ct = &s->ct;
	return ret;
}

static void srv_close(struct srv *s)
{
	io_uring_queue_exit(&s->ring); /* first: waits out everything in flight */
	nic_destroy(s->n);
	free(s->ac);
	if (s->ct.fails)
		fprintf(stderr, "nic contract: %u violations, first: %s\n", s->ct.fails, s->ct.why);
	CU_ASSERT_EQUAL(s->ct.fails, 0);
	ct_free(&s->ct);
	g_ct = NULL;
}

static void srv_dispatch(struct srv *s, const struct nic_ev *e)
{
	ct_event(&s->ct, e);
	struct app_conn *a = &s->ac[e->conn & (NIC_CONNS_LIMIT - 1)];
	if (e->kind != NIC_EV_OPEN && (a->closed || a->handle != e->conn))
		a->order_bad = true;
	switch (e->kind) {
	case NIC_EV_OPEN:
		memset(a, 0, sizeof(*a));
		a->handle = e->conn;
		a->open = true;
		s->opens++;
		s->last_open = e->conn;
		break;
	case NIC_EV_DATA:
		CU_ASSERT_FATAL(e->buf_id < UT_RXB_MAX);
		CU_ASSERT(e->len > 0);
		s->held[e->buf_id] = *e;
		s->datas++;
		s->rx_total += e->len;
		break;
	case NIC_EV_SENT:
		s->sents++;
		if (e->status == 0)
			a->sent_ok++;
		else
			a->sent_cancel++;
		break;
	case NIC_EV_CLOSED:
		a->closed = true;
		a->open = false;
		a->closed_status = e->status;
		s->closes++;
		s->last_closed = e->conn;
		break;
	default:
		CU_FAIL("unknown event kind");
	}
	if (s->on_ev)
		s->on_ev(s, e);
}

/* One core-loop iteration: flush, submit, wait a little, reap, poll. */
static void srv_step(struct srv *s, unsigned wait_ms)
{
	nic_flush(s->n);
	io_uring_submit(&s->ring);
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts = { .tv_sec = 0, .tv_nsec = (long long)wait_ms * 1000000 };
	(void)io_uring_wait_cqe_timeout(&s->ring, &cqe, &ts);
	unsigned head, seen = 0;
	io_uring_for_each_cqe(&s->ring, head, cqe) {
		CU_ASSERT((cqe->user_data & 0xf) == NIC_URING_TAG);
		nic_uring_complete(s->n, cqe);
		seen++;
	}
	io_uring_cq_advance(&s->ring, seen);
	struct nic_ev ev[32];
	int k;
	s->events_last_step = 0;
	while ((k = nic_poll(s->n, ev, 32)) > 0) {
		CU_ASSERT(k <= 32);
		s->events_last_step += (uint32_t)k;
		for (int i = 0; i < k; i++)
			srv_dispatch(s, &ev[i]);
	}
}

typedef bool (*srv_pred)(struct srv *s, void *arg);

static bool srv_run_until(struct srv *s, srv_pred pred, void *arg, unsigned timeout_ms)
{
	uint64_t end = now_ms() + timeout_ms;
	while (!pred(s, arg)) {
		if (now_ms() > end)
			return false;
		srv_step(s, 2);
	}
	return true;
}

static bool pred_closes(struct srv *s, void *arg)
{
	return s->closes >= *(uint32_t *)arg;
}

static bool pred_opens(struct srv *s, void *arg)
{
	return s->opens >= *(uint32_t *)arg;
}

/* Echo app: send the receive buffer itself back, release it on SENT.
 * Buffers that do not fit the connection's txq wait in order in a[].pend. */
static void echo_push(struct srv *s, struct app_conn *a)
{
	while (a->pend_n > 0) {
		uint32_t bid = a->pend[a->pend_head];
		const struct nic_ev *d = &s->held[bid];
		int ret = ut_send(s->n, a->handle, d->data, d->len, (void *)(uintptr_t)(bid + 1));
		if (ret == -ENOBUFS)
			return;
		CU_ASSERT(ret == 0 || ret == -ENOTCONN);
		if (ret != 0)
			ut_rx_release(s->n, d); /* conn going away: no SENT follows */
		a->pend_head = (a->pend_head + 1) % UT_RXB_MAX;
		a->pend_n--;
	}
}

static void echo_ev(struct srv *s, const struct nic_ev *e)
{
	struct app_conn *a = &s->ac[e->conn & (NIC_CONNS_LIMIT - 1)];
	switch (e->kind) {
	case NIC_EV_DATA:
		CU_ASSERT_FATAL(a->pend_n < UT_RXB_MAX);
		a->pend[(a->pend_head + a->pend_n) % UT_RXB_MAX] = e->buf_id;
		a->pend_n++;
		echo_push(s, a);
		break;
	case NIC_EV_SENT: {
		uint32_t bid = (uint32_t)(uintptr_t)e->cookie - 1;
		CU_ASSERT_FATAL(bid < UT_RXB_MAX);
		ut_rx_release(s->n, &s->held[bid]);
		if (a->open)
			echo_push(s, a);
		break;
	}
	case NIC_EV_CLOSED:
		/* nothing queued in the nic any more: drop what never got in */
		while (a->pend_n > 0) {
			ut_rx_release(s->n, &s->held[a->pend[a->pend_head]]);
			a->pend_head = (a->pend_head + 1) % UT_RXB_MAX;
			a->pend_n--;
		}
		break;
	default:
		break;
	}
}

/* ---- client side (second thread) ---------------------------------------- */

struct cli {
	pthread_t th;
	uint16_t port;
	int family;
	uint32_t nconns;
	uint64_t bytes;            /* per connection */
	uint32_t msg_max;          /* pipelined message size bound */
	atomic_int done;
	atomic_int go;             /* free-form handshake with the main thread */
	int fails;
	char why[160];
	uint64_t got;              /* read-side byte count (scripts that need it) */
};

static void cli_fail(struct cli *c, const char *what)
{
	if (c->fails++ == 0)
		snprintf(c->why, sizeof(c->why), "%s (errno %d)", what, errno);
}

static int cli_connect(struct cli *c)
{
	int fd = socket(c->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	if (c->family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(c->port);
		s6->sin6_addr = in6addr_loopback;
		sl = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(c->port);
		s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*s4);
	}
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void cli_start(struct cli *c, void *(*fn)(void *))
{
	atomic_store(&c->done, 0);
	int ret = pthread_create(&c->th, NULL, fn, c);
	assert(ret == 0);
}

static void cli_join(struct cli *c)
{
	pthread_join(c->th, NULL);
	if (c->fails)
		fprintf(stderr, "client: %s\n", c->why);
	CU_ASSERT_EQUAL(c->fails, 0);
}

/* Many connections, each writes `bytes` as pipelined messages of 1..msg_max
 * bytes (one write each) while reading the echo and checking every byte. */
static void *cli_echo(void *arg)
{
	struct cli *c = arg;
	uint32_t nc = c->nconns;
	int *fd = calloc(nc, sizeof(int));
	uint64_t *tx = calloc(nc, sizeof(uint64_t)), *rx = calloc(nc, sizeof(uint64_t));
	uint8_t *txb = malloc(c->bytes), *rxb = malloc(65536);
	struct pollfd *pf = calloc(nc, sizeof(*pf));
	uint32_t *rnd = calloc(nc, sizeof(uint32_t));
	assert(fd && tx && rx && txb && rxb && pf && rnd);
	for (uint32_t i = 0; i < nc; i++) {
		fd[i] = cli_connect(c);
		if (fd[i] < 0) {
			cli_fail(c, "connect");
			nc = i;
			break;
		}
		fcntl(fd[i], F_SETFL, O_NONBLOCK);
		rnd[i] = 0x12345u + i;
	}
	uint64_t end = now_ms() + UT_TIMEOUT_MS;
	uint32_t left = nc;
	while (left > 0 && c->fails == 0) {
		if (now_ms() > end) {
			cli_fail(c, "echo timed out");
			break;
		}
		for (uint32_t i = 0; i < nc; i++) {
			pf[i].fd = rx[i] < c->bytes ? fd[i] : -1;
			pf[i].events = (short)(POLLIN | (tx[i] < c->bytes ? POLLOUT : 0));
		}
		if (poll(pf, nc, 100) < 0)
			continue;
		for (uint32_t i = 0; i < nc && c->fails == 0; i++) {
			if (pf[i].revents & POLLOUT) {
				/* a burst of messages, each its own write(2) */
				for (int m = 0; m < 8 && tx[i] < c->bytes; m++) {
					rnd[i] = rnd[i] * 1103515245u + 12345u;
					uint64_t len = 1 + (rnd[i] >> 8) % c->msg_max;
					if (len > c->bytes - tx[i])
						len = c->bytes - tx[i];
					for (uint64_t k = 0; k < len; k++)
						txb[k] = pat(i, tx[i] + k);
					ssize_t w = write(fd[i], txb, len);
					if (w < 0) {
						if (errno != EAGAIN)
							cli_fail(c, "write");
						break;
					}
					tx[i] += (uint64_t)w;
				}
			}
			if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				ssize_t r = read(fd[i], rxb, 65536);
				if (r == 0 || (r < 0 && errno != EAGAIN)) {
					cli_fail(c, "echo connection ended early");
					break;
				}
				for (ssize_t k = 0; k < r; k++)
					if (rxb[k] != pat(i, rx[i] + (uint64_t)k)) {
						cli_fail(c, "echo byte mismatch");
						break;
					}
				if (r > 0) {
					rx[i] += (uint64_t)r;
					if (rx[i] == c->bytes)
						left--;
				}
			}
		}
	}
	for (uint32_t i = 0; i < nc; i++)
		close(fd[i]);
	free(fd), free(tx), free(rx), free(txb), free(rxb), free(pf), free(rnd);
	atomic_store(&c->done, 1);
	return NULL;
}

static void run_echo(uint32_t nconns, uint64_t bytes, uint32_t msg_max, uint32_t rx_bufs,
		     uint32_t rx_buf_bytes)
{
	struct srv s;
	int ret = srv_open(&s, "127.0.0.1", 0, UT_CONNS_MAX, rx_bufs, rx_buf_bytes, echo_ev);
	CU_ASSERT_FATAL(ret == 0);
	CU_ASSERT(nic_local_port(s.n) != 0);
	if (g_flags & NIC_URING_F_SINGLESHOT) {
		CU_ASSERT(!s.n->multishot);
	} else if (!s.n->multishot) {
		fprintf(stderr, "kernel refused multishot/buffer ring: fallback path tested twice\n");
	}
	struct cli c = { .port = nic_local_port(s.n), .family = AF_INET, .nconns = nconns,
			 .bytes = bytes, .msg_max = msg_max };
	cli_start(&c, cli_echo);
	CU_ASSERT(srv_run_until(&s, pred_closes, &nconns, UT_TIMEOUT_MS + 5000));
	cli_join(&c);
	CU_ASSERT_EQUAL(s.opens, nconns);
	CU_ASSERT_EQUAL(s.closes, nconns);
	CU_ASSERT_EQUAL(s.rx_total, (uint64_t)nconns * bytes);
	CU_ASSERT_EQUAL(s.n->cm.rx_held, 0);        /* every DATA buffer came back */
	CU_ASSERT_EQUAL(s.n->inflight, 0);
	CU_ASSERT_EQUAL(s.n->cm.free_n, UT_CONNS_MAX);
	for (uint32_t i = 0; i < UT_CONNS_MAX; i++) {
		CU_ASSERT(!s.ac[i].order_bad);
		if (s.ac[i].closed)
			CU_ASSERT_EQUAL(s.ac[i].closed_status, 0);
	}
	srv_close(&s);
}

static void test_echo_pipelined(void)
{
	/* 8 connections x 1 MiB of 1..3000-byte messages through 64 x 4 KiB buffers */
	run_echo(8, 1u << 20, 3000, 64, 4096);
}

static void test_echo_300_conns(void)
{
	run_echo(300, 32u << 10, 1500, 1024, 2048);
}

/* ---- large sends: several MB, partial sends, FIFO order of SENT ---------- */

#define BIG_A (6u << 20)
#define BIG_B 1u
#define BIG_C (5u << 20)

static uint8_t *g_big;

static void *cli_reader(void *arg)
{
	struct cli *c = arg;
	int fd = cli_connect(c);
	if (fd < 0) {
		cli_fail(c, "connect");
		atomic_store(&c->done, 1);
		return NULL;
	}
	usleep(200000); /* let the server's socket buffer fill: forces partial sends */
	uint8_t *b = malloc(1 << 16);
	uint64_t end = now_ms() + UT_TIMEOUT_MS;
	while (c->got < c->bytes && now_ms() < end) {
		ssize_t r = read(fd, b, 1 << 16);
		if (r <= 0) {
			cli_fail(c, "reader: early EOF");
			break;
		}
		for (ssize_t k = 0; k < r; k++)
			if (b[k] != pat(0, c->got + (uint64_t)k)) {
				cli_fail(c, "reader: byte mismatch");
				k = r;
			}
		c->got += (uint64_t)r;
		if (c->fails)
			break;
	}
	free(b);
	close(fd);
	atomic_store(&c->done, 1);
	return NULL;
}

static void large_ev(struct srv *s, const struct nic_ev *e)
{
	struct app_conn *a = &s->ac[e->conn & (NIC_CONNS_LIMIT - 1)];
	if (e->kind == NIC_EV_OPEN) {
		CU_ASSERT(ut_send(s->n, e->conn, g_big, BIG_A, (void *)1) == 0);
		CU_ASSERT(ut_send(s->n, e->conn, g_big + BIG_A, BIG_B, (void *)2) == 0);
		CU_ASSERT(ut_send(s->n, e->conn, g_big + BIG_A + BIG_B, BIG_C, (void *)3) == 0);
	} else if (e->kind == NIC_EV_SENT) {
		CU_ASSERT_EQUAL(e->status, 0);
		CU_ASSERT_EQUAL((uintptr_t)e->cookie, ++a->sent_next_cookie);
	} else if (e->kind == NIC_EV_DATA) {
		ut_rx_release(s->n, e);
	}
}

static void test_large_send(void)
{
	g_big = malloc(BIG_A + BIG_B + BIG_C);
	CU_ASSERT_FATAL(g_big != NULL);
	for (uint64_t i = 0; i < BIG_A + BIG_B + BIG_C; i++)
		g_big[i] = pat(0, i);
	struct srv s;
	CU_ASSERT_FATAL(srv_open(&s, "127.0.0.1", 0, 4, 16, 4096, large_ev) == 0);
	struct cli c = { .port = nic_local_port(s.n), .family = AF_INET,
			 .bytes = BIG_A + BIG_B + BIG_C };
	cli_start(&c, cli_reader);
	uint32_t one = 1;
	CU_ASSERT(srv_run_until(&s, pred_closes, &one, UT_TIMEOUT_MS));
	cli_join(&c);
	CU_ASSERT_EQUAL(c.got, (uint64_t)BIG_A + BIG_B + BIG_C);
	CU_ASSERT_EQUAL(s.ac[0].sent_ok, 3);
	CU_ASSERT_EQUAL(s.ac[0].sent_cancel, 0);
	CU_ASSERT(!s.ac[0].order_bad);
	CU_ASSERT(s.n->stats.sends_partial > 0);
	CU_ASSERT(s.n->stats.sendmsgs > 1);
	CU_ASSERT_EQUAL(s.n->stats.tx_bytes, (uint64_t)BIG_A + BIG_B + BIG_C);
	srv_close(&s);
	free(g_big);
}

/* ---- peer close, then stale handles and slot reuse ----------------------- */

/* A: connect, write 1000 bytes, close. Wait go=1. B: connect, wait go=2.
 * C: connect while the only slot is taken: must be closed by the server. */
static void *cli_seq(void *arg)
{
	struct cli *c = arg;
	uint8_t b[1000];
	for (int i = 0; i < 1000; i++)
		b[i] = pat(0, (uint64_t)i);
	int a = cli_connect(c);
	if (a < 0 || write(a, b, sizeof(b)) != (ssize_t)sizeof(b))
		cli_fail(c, "A");
	close(a);
	uint64_t end = now_ms() + UT_TIMEOUT_MS;
	while (atomic_load(&c->go) < 1 && now_ms() < end)
		usleep(1000);
	int bfd = cli_connect(c);
	if (bfd < 0)
		cli_fail(c, "B connect");
	while (atomic_load(&c->go) < 2 && now_ms() < end)
		usleep(1000);
	int cfd = cli_connect(c);
	if (cfd < 0) {
		cli_fail(c, "C connect");
	} else {
		struct timeval tv = { .tv_sec = 5 };
		setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		ssize_t r = read(cfd, b, 1);
		if (r > 0 || (r < 0 && errno != ECONNRESET))
			cli_fail(c, "C was not rejected");
		close(cfd);
	}
	/* B must receive "hi" (sent on the new handle) and then EOF on nic_close */
	if (bfd >= 0) {
		char hi[3] = { 0 };
		if (read(bfd, hi, 2) != 2 || strcmp(hi, "hi") != 0)
			cli_fail(c, "B did not get hi");
		if (read(bfd, hi, 1) != 0)
			cli_fail(c, "B did not see EOF");
		close(bfd);
	}
	atomic_store(&c->done, 1);
	return NULL;
}

static void release_ev(struct srv *s, const struct nic_ev *e)
{
	if (e->kind == NIC_EV_DATA) {
		for (uint32_t k = 0; k < e->len; k++)
			if (e->data[k] != pat(0, s->ac[e->conn & (NIC_CONNS_LIMIT - 1)].rx_bytes + k)) {
				CU_FAIL("received byte mismatch");
				break;
			}
		s->ac[e->conn & (NIC_CONNS_LIMIT - 1)].rx_bytes += e->len;
		ut_rx_release(s->n, e);
	}
}

static void test_peer_close_and_stale_handle(void)
{
	struct srv s;
	CU_ASSERT_FATAL(srv_open(&s, "127.0.0.1", 0, 1, 8, 256, release_ev) == 0);
	struct cli c = { .port = nic_local_port(s.n), .family = AF_INET };
	cli_start(&c, cli_seq);
	uint32_t one = 1, two = 2;
	CU_ASSERT_FATAL(srv_run_until(&s, pred_closes, &one, UT_TIMEOUT_MS));
	uint32_t a = s.last_closed;
	CU_ASSERT_EQUAL(s.ac[0].rx_bytes, 1000);       /* all DATA came before CLOSED */
	CU_ASSERT_EQUAL(s.ac[0].closed_status, 0);      /* orderly EOF */
	CU_ASSERT(!s.ac[0].order_bad);
	CU_ASSERT_EQUAL(ut_send(s.n, a, "x", 1, NULL), -ENOTCONN);
	nic_close(s.n, a);                              /* stale: no effect */
	atomic_store(&c.go, 1);
	CU_ASSERT_FATAL(srv_run_until(&s, pred_opens, &two, UT_TIMEOUT_MS));
	uint32_t b = s.last_open;
	CU_ASSERT_NOT_EQUAL(a, b);                      /* same slot, new generation */
	CU_ASSERT_EQUAL(a & (NIC_CONNS_LIMIT - 1), b & (NIC_CONNS_LIMIT - 1));
	CU_ASSERT_EQUAL(ut_send(s.n, a, "x", 1, NULL), -ENOTCONN);
	nic_close(s.n, a);                              /* must not close B */
	CU_ASSERT_EQUAL(ut_send(s.n, b, "hi", 2, (void *)7), 0);
	/* accepted sockets: TCP_NODELAY, non-blocking, close-on-exec */
	int fd = s.n->conns[b & (NIC_CONNS_LIMIT - 1)].fd, on = 0;
	socklen_t ol = sizeof(on);
	CU_ASSERT(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &ol) == 0 && on == 1);
	CU_ASSERT(fcntl(fd, F_GETFL) & O_NONBLOCK);
	CU_ASSERT(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	atomic_store(&c.go, 2);
	uint64_t end = now_ms() + UT_TIMEOUT_MS;
	while ((s.n->stats.accepts_rejected == 0 || s.ac[0].sent_ok == 0) && now_ms() < end)
		srv_step(&s, 2);
	CU_ASSERT_EQUAL(s.n->stats.accepts_rejected, 1);
	CU_ASSERT(s.ac[0].sent_ok == 1 && !s.ac[0].closed);
	nic_close(s.n, b);
	CU_ASSERT_EQUAL(ut_send(s.n, b, "x", 1, NULL), -ENOTCONN);
	CU_ASSERT(srv_run_until(&s, pred_closes, &two, UT_TIMEOUT_MS));
	CU_ASSERT_EQUAL(ut_send(s.n, b, "x", 1, NULL), -ENOTCONN);
	cli_join(&c);
	CU_ASSERT_EQUAL(s.opens, 2);
	CU_ASSERT_EQUAL(s.n->cm.rx_held, 0);
	srv_close(&s);
}

/* ---- local close with queued data ---------------------------------------- */

#define LC_BUF (1u << 20)

static void *cli_idle_then_drain(void *arg)
{
	struct cli *c = arg;
	int fd = cli_connect(c);
	if (fd < 0)
		cli_fail(c, "connect");
	uint64_t end = now_ms() + UT_TIMEOUT_MS;
	while (atomic_load(&c->go) < 1 && now_ms() < end)
		usleep(1000);
	uint8_t *b = malloc(1 << 16);
	for (;;) {
		ssize_t r = read(fd, b, 1 << 16);
		if (r <= 0)
			break; /* EOF (or reset): the server closed */
		for (ssize_t k = 0; k < r; k++)
			if (b[k] != g_big[(c->got + (uint64_t)k) % LC_BUF]) {
				cli_fail(c, "drain: byte mismatch");
				k = r;
			}
		c->got += (uint64_t)r;
	}
	free(b);
	close(fd);
	atomic_store(&c->done, 1);
	return NULL;
}

static uint32_t g_lc_events_after_closed;

static void lc_ev(struct srv *s, const struct nic_ev *e)
{
	struct app_conn *a = &s->ac[e->conn & (NIC_CONNS_LIMIT - 1)];
	if (e->kind == NIC_EV_OPEN) {
		for (uint32_t i = 0; i < NIC_TXQ_MAX; i++)
			CU_ASSERT(ut_send(s->n, e->conn, g_big, LC_BUF, (void *)(uintptr_t)(i + 1)) == 0);
		CU_ASSERT_EQUAL(ut_send(s->n, e->conn, g_big, LC_BUF, NULL), -ENOBUFS);
	} else if (e->kind == NIC_EV_SENT) {
		CU_ASSERT_EQUAL((uintptr_t)e->cookie, ++a->sent_next_cookie);
		/* once one was dropped, every later one is dropped too */
		if (a->sent_cancel - (e->status != 0) > 0)
			CU_ASSERT_EQUAL(e->status, -ECANCELED);
		CU_ASSERT(e->status == 0 || e->status == -ECANCELED);
	} else if (e->kind == NIC_EV_DATA) {
		ut_rx_release(s->n, e);
	}
	if (s->closes > 0 && e->kind != NIC_EV_CLOSED)
		g_lc_events_after_closed++;
}

static void test_local_close_queued(void)
{
	g_big = malloc(LC_BUF);
	CU_ASSERT_FATAL(g_big != NULL);
	for (uint32_t i = 0; i < LC_BUF; i++)
		g_big[i] = pat(0, i);
	g_lc_events_after_closed = 0;
	struct srv s;
	CU_ASSERT_FATAL(srv_open(&s, "127.0.0.1", 0, 4, 8, 1024, lc_ev) == 0);
	struct cli c = { .port = nic_local_port(s.n), .family = AF_INET };
	cli_start(&c, cli_idle_then_drain);
	uint32_t one = 1;
	CU_ASSERT_FATAL(srv_run_until(&s, pred_opens, &one, UT_TIMEOUT_MS));
	for (int i = 0; i < 30; i++) /* let the socket buffer fill; the client is not reading */
		srv_step(&s, 2);
	uint32_t h = s.last_open;
	CU_ASSERT(s.n->inflight > 0);
	nic_close(s.n, h);
	CU_ASSERT_EQUAL(ut_send(s.n, h, g_big, 1, NULL), -ENOTCONN);
	nic_close(s.n, h); /* twice: harmless */
	CU_ASSERT(srv_run_until(&s, pred_closes, &one, UT_TIMEOUT_MS));
	for (int i = 0; i < 10; i++)
		srv_step(&s, 1);
	atomic_store(&c.go, 1);
	cli_join(&c);
	struct app_conn *a = &s.ac[0];
	CU_ASSERT_EQUAL(a->sent_ok + a->sent_cancel, NIC_TXQ_MAX); /* every buffer reported once */
	CU_ASSERT(a->sent_cancel > 0);
	CU_ASSERT_EQUAL(s.closes, 1);
	CU_ASSERT_EQUAL(g_lc_events_after_closed, 0); /* CLOSED was the last event */
	CU_ASSERT(!a->order_bad);
	/* what the client read covers at least every buffer reported as sent */
	CU_ASSERT(c.got >= (uint64_t)a->sent_ok * LC_BUF);
	CU_ASSERT(c.got <= (uint64_t)NIC_TXQ_MAX * LC_BUF);
	CU_ASSERT_EQUAL(s.n->inflight, 0);
	srv_close(&s);
	free(g_big);
}

/* ---- receive-buffer exhaustion and recovery ------------------------------ */

#define RX_CONNS 3u
#define RX_BYTES (48u << 10)

/* Write RX_BYTES on each connection, then wait for go before closing. */
static void *cli_writer(void *arg)
{
	struct cli *c = arg;
	int fd[RX_CONNS];
	uint8_t *b = malloc(RX_BYTES);
	for (uint32_t i = 0; i < RX_CONNS; i++) {
		fd[i] = cli_connect(c);
		if (fd[i] < 0) {
			cli_fail(c, "connect");
			continue;
		}
		for (uint32_t k = 0; k < RX_BYTES; k++)
			b[k] = pat(i, k);
		/* loopback socket buffers take 48 KiB without the server reading */
		if (write(fd[i], b, RX_BYTES) != (ssize_t)RX_BYTES)
			cli_fail(c, "write");
	}
	uint64_t end = now_ms() + UT_TIMEOUT_MS;
	while (atomic_load(&c->go) < 1 && now_ms() < end)
		usleep(1000);
	for (uint32_t i = 0; i < RX_CONNS; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	free(b);
	atomic_store(&c->done, 1);
	return NULL;
}

struct rx_hold {
	struct nic_ev ev[64];
	uint32_t n, max;
	uint32_t conn_no[UT_CONNS_MAX];   /* slot -> order of OPEN, for the pattern */
	uint32_t opens;
};
static struct rx_hold g_rh;

static void hold_ev(struct srv *s, const struct nic_ev *e)
{
	uint32_t idx = e->conn & (NIC_CONNS_LIMIT - 1);
	if (e->kind == NIC_EV_OPEN) {
		g_rh.conn_no[idx] = g_rh.opens++;
	} else if (e->kind == NIC_EV_DATA) {
		struct app_conn *a = &s->ac[idx];
		for (uint32_t k = 0; k < e->len; k++)
			if (e->data[k] != pat(g_rh.conn_no[idx], a->rx_bytes + k)) {
				CU_FAIL("byte mismatch after rx starvation");
				break;
			}
		a->rx_bytes += e->len;
		CU_ASSERT_FATAL(g_rh.n < 64);
		g_rh.ev[g_rh.n++] = *e; /* hold it: the pool drains */
		if (g_rh.n > g_rh.max)
			g_rh.max = g_rh.n;
	}
}

static void test_rx_exhaustion(void)
{
	const uint32_t bufs = 4;
	memset(&g_rh, 0, sizeof(g_rh));
	struct srv s;
	CU_ASSERT_FATAL(srv_open(&s, "127.0.0.1", 0, 8, bufs, 512, hold_ev) == 0);
	struct cli c = { .port = nic_local_port(s.n), .family = AF_INET };
	cli_start(&c, cli_writer);
	uint32_t stalls = 0, quiet = 0;
	uint64_t end = now_ms() + UT_TIMEOUT_MS;
	while (s.rx_total < (uint64_t)RX_CONNS * RX_BYTES && now_ms() < end) {
		uint32_t datas = s.datas;
		srv_step(&s, 1);
		quiet = s.datas == datas ? quiet + 1 : 0;
		if (g_rh.n < bufs) {
			/* single-shot mode: a connection whose bytes all arrived keeps
			 * one buffer in its armed recv, so the app may never hold all
			 * of them; give back what it has once things go quiet */
			if (quiet < 20 || g_rh.n == 0)
				continue;
		} else {
			/* pool empty: nothing can arrive until we give buffers back */
			CU_ASSERT_EQUAL(s.n->cm.rx_held, bufs);
			datas = s.datas;
			for (int i = 0; i < 5; i++)
				srv_step(&s, 1);
			CU_ASSERT_EQUAL(s.datas, datas);
			stalls++;
		}
		for (uint32_t i = 0; i < g_rh.n; i++)
			ut_rx_release(s.n, &g_rh.ev[i]);
		g_rh.n = 0;
	}
	CU_ASSERT_EQUAL(s.rx_total, (uint64_t)RX_CONNS * RX_BYTES);
	CU_ASSERT(g_rh.max <= bufs);
	CU_ASSERT(stalls > 10);
	if (s.n->multishot)
		CU_ASSERT(s.n->stats.rx_enobufs > 0);
	for (uint32_t i = 0; i < g_rh.n; i++)
		ut_rx_release(s.n, &g_rh.ev[i]);
	g_rh.n = 0;
	atomic_store(&c.go, 1);
	uint32_t n = RX_CONNS;
	CU_ASSERT(srv_run_until(&s, pred_closes, &n, UT_TIMEOUT_MS));
	cli_join(&c);
	CU_ASSERT_EQUAL(s.n->cm.rx_held, 0);
	for (uint32_t i = 0; i < UT_CONNS_MAX; i++)
		CU_ASSERT(!s.ac[i].order_bad);
	srv_close(&s);
}

/* ---- flow control: nic_pause ---------------------------------------------- */

/* Write bytes [from, to) of connection 0's pattern to fd (blocking). */
static void pause_write(int fd, uint64_t from, uint64_t to)
{
	uint8_t b[4096];
	while (from < to) {
		uint32_t n = to - from < sizeof(b) ? (uint32_t)(to - from) : (uint32_t)sizeof(b);
		for (uint32_t k = 0; k < n; k++)
			b[k] = pat(0, from + k);
		ssize_t w = write(fd, b, n);
		CU_ASSERT_FATAL(w > 0);
		from += (uint64_t)w;
	}
}

static void pause_steps(struct srv *s, int n)
{
	for (int i = 0; i < n; i++)
		srv_step(s, 2);
}

/* Paused: nothing is delivered (bytes wait in the socket); resumed: all of it, in order. */
static void test_pause(void)
{
	struct srv s;
	CU_ASSERT_FATAL(srv_open(&s, "127.0.0.1", 0, 1, 8, 4096, release_ev) == 0);
	struct cli c = { .port = nic_local_port(s.n), .family = AF_INET };
	int fd = cli_connect(&c);
	CU_ASSERT_FATAL(fd >= 0);
	uint32_t one = 1;
	CU_ASSERT_FATAL(srv_run_until(&s, pred_opens, &one, UT_TIMEOUT_MS));
	uint32_t h = s.last_open;
	pause_write(fd, 0, 10000);
	uint64_t end = now_ms() + UT_TIMEOUT_MS;
	while (s.ac[0].rx_bytes < 10000 && now_ms() < end)
		srv_step(&s, 2);
	CU_ASSERT_EQUAL_FATAL(s.ac[0].rx_bytes, 10000);
	nic_pause(s.n, h, true);
	nic_pause(s.n, h, true);   /* idempotent */
	pause_steps(&s, 10);       /* the recv's cancel completes */
	pause_write(fd, 10000, 50000);
	pause_steps(&s, 50);       /* 100 ms: nothing may arrive */
	CU_ASSERT_EQUAL(s.ac[0].rx_bytes, 10000);
	CU_ASSERT(s.ac[0].open && !s.ac[0].closed);
	nic_pause(s.n, h, false);
	end = now_ms() + UT_TIMEOUT_MS;
	while (s.ac[0].rx_bytes < 50000 && now_ms() < end)
		srv_step(&s, 2);
	CU_ASSERT_EQUAL(s.ac[0].rx_bytes, 50000);   /* release_ev checked every byte's place */
	/* Pause, the peer closes: CLOSED comes after the resume, with every byte before it. */
	nic_pause(s.n, h, true);
	pause_steps(&s, 10);
	pause_write(fd, 50000, 60000);
	close(fd);
	pause_steps(&s, 20);
	CU_ASSERT(!s.ac[0].closed);
	nic_pause(s.n, h, false);
	CU_ASSERT(srv_run_until(&s, pred_closes, &one, UT_TIMEOUT_MS));
	CU_ASSERT_EQUAL(s.ac[0].rx_bytes, 60000);
	CU_ASSERT_EQUAL(s.ac[0].closed_status, 0);
	nic_pause(s.n, h, true);   /* stale handle: ignored */
	CU_ASSERT(!s.ac[0].order_bad);
	CU_ASSERT_EQUAL(s.n->cm.rx_held, 0);
	srv_close(&s);
}

/* ---- IPv6, SO_REUSEPORT, clean shutdown ----------------------------------- */

static void test_ipv6_echo(void)
{
	struct srv s;
	int ret = srv_open(&s, "::1", 0, 4, 16, 1024, echo_ev);
	if (ret == -EADDRNOTAVAIL || ret == -EAFNOSUPPORT) {
		fprintf(stderr, "ipv6 unavailable here (%d): test not run\n", ret);
		return;
	}
	CU_ASSERT_FATAL(ret == 0);
	struct cli c = { .port = nic_local_port(s.n), .family = AF_INET6, .nconns = 2,
			 .bytes = 100000, .msg_max = 700 };
	cli_start(&c, cli_echo);
	uint32_t two = 2;
	CU_ASSERT(srv_run_until(&s, pred_closes, &two, UT_TIMEOUT_MS));
	cli_join(&c);
	CU_ASSERT_EQUAL(s.rx_total, 200000);
	srv_close(&s);
}

static void test_reuseport_and_bad_config(void)
{
	struct io_uring r1, r2;
	CU_ASSERT_FATAL(io_uring_queue_init(64, &r1, 0) == 0);
	CU_ASSERT_FATAL(io_uring_queue_init(64, &r2, 0) == 0);
	struct nic_config cfg = { .host = "127.0.0.1", .conns_max = 4, .rx_buf_bytes = 512,
				  .rx_bufs = 4, .reuseport = 1 };
	struct nic *a = NULL, *b = NULL;
	CU_ASSERT_FATAL(nic_uring_create_ex(&cfg, &r1, g_flags, &a) == 0);
	cfg.port = nic_local_port(a);
	CU_ASSERT_EQUAL(nic_uring_create_ex(&cfg, &r2, g_flags, &b), 0); /* same port */
	/* ...which a second broker must not take as free. */
	CU_ASSERT_EQUAL(nic_port_probe(cfg.host, cfg.port), -EADDRINUSE);
	CU_ASSERT_EQUAL(nic_port_probe("localhost", cfg.port), -EINVAL);
	nic_destroy(b);
	cfg.reuseport = 0;
	b = NULL;
	CU_ASSERT_EQUAL(nic_uring_create_ex(&cfg, &r2, g_flags, &b), -EADDRINUSE);
	cfg.port = 0;
	cfg.host = "localhost"; /* literals only */
	CU_ASSERT_EQUAL(nic_uring_create_ex(&cfg, &r2, g_flags, &b), -EINVAL);
	cfg.host = "0.0.0.0";
	cfg.rx_bufs = 0;
	CU_ASSERT_EQUAL(nic_uring_create_ex(&cfg, &r2, g_flags, &b), -EINVAL);
	cfg.rx_bufs = 4;
	cfg.conns_max = NIC_CONNS_LIMIT + 1;
	CU_ASSERT_EQUAL(nic_uring_create_ex(&cfg, &r2, g_flags, &b), -EINVAL);
	cfg.conns_max = 4;
	CU_ASSERT_EQUAL(nic_uring_create_ex(&cfg, &r2, g_flags, &b), 0);
	CU_ASSERT(nic_local_port(b) != 0);
	uint16_t port = nic_local_port(a);
	io_uring_queue_exit(&r1);
	io_uring_queue_exit(&r2);
	nic_destroy(a);
	nic_destroy(b);
	CU_ASSERT_EQUAL(nic_port_probe("127.0.0.1", port), 0);   /* free once its listeners are gone */
}

static void *cli_hold_until_eof(void *arg)
{
	struct cli *c = arg;
	int fd[4];
	for (int i = 0; i < 4; i++)
		if ((fd[i] = cli_connect(c)) < 0)
			cli_fail(c, "connect");
	for (int i = 0; i < 4; i++) {
		uint8_t b[16];
		ssize_t r;
		while ((r = read(fd[i], b, sizeof(b))) > 0)
			c->got += (uint64_t)r;
		close(fd[i]);
	}
	atomic_store(&c->done, 1);
	return NULL;
}

static void test_shutdown(void)
{
	struct srv s;
	CU_ASSERT_FATAL(srv_open(&s, "127.0.0.1", 0, 8, 8, 512, release_ev) == 0);
	bool multishot = s.n->multishot;
	struct cli c = { .port = nic_local_port(s.n), .family = AF_INET };
	cli_start(&c, cli_hold_until_eof);
	uint32_t four = 4;
	CU_ASSERT_FATAL(srv_run_until(&s, pred_opens, &four, UT_TIMEOUT_MS));
	for (uint32_t i = 0; i < UT_CONNS_MAX; i++)
		if (s.ac[i].open)
			CU_ASSERT(ut_send(s.n, s.ac[i].handle, "z", 1, NULL) == 0);
	nic_uring_shutdown(s.n);
	uint64_t end = now_ms() + UT_TIMEOUT_MS;
	while ((nic_uring_inflight(s.n) > 0 || s.closes < 4) && now_ms() < end)
		srv_step(&s, 2);
	CU_ASSERT_EQUAL(nic_uring_inflight(s.n), 0);
	CU_ASSERT_EQUAL(s.closes, 4);
	CU_ASSERT_EQUAL(s.sents, 4);
	for (uint32_t i = 0; i < UT_CONNS_MAX; i++)
		if (s.ac[i].closed)
			CU_ASSERT_EQUAL(s.ac[i].closed_status, -ECANCELED);
	cli_join(&c);
	/* clean path: destroy unregisters the buffer ring, so the same ring can
	 * host a new backend in the same mode */
	nic_destroy(s.n);
	struct nic_config cfg = { .host = "127.0.0.1", .conns_max = 2, .rx_buf_bytes = 512,
				  .rx_bufs = 4 };
	CU_ASSERT_FATAL(nic_uring_create_ex(&cfg, &s.ring, g_flags, &s.n) == 0);
	CU_ASSERT_EQUAL(s.n->multishot, multishot);
	srv_close(&s);
}

/* ---- main ------------------------------------------------------------------ */

static int suite_multishot(void)
{
	g_flags = 0;
	return 0;
}

static int suite_singleshot(void)
{
	g_flags = NIC_URING_F_SINGLESHOT;
	return 0;
}

static void add_tests(CU_pSuite s)
{
	CU_add_test(s, "echo_pipelined", test_echo_pipelined);
	CU_add_test(s, "echo_300_conns", test_echo_300_conns);
	CU_add_test(s, "large_send", test_large_send);
	CU_add_test(s, "peer_close_and_stale_handle", test_peer_close_and_stale_handle);
	CU_add_test(s, "local_close_queued", test_local_close_queued);
	CU_add_test(s, "rx_exhaustion", test_rx_exhaustion);
	CU_add_test(s, "pause", test_pause);
	CU_add_test(s, "ipv6_echo", test_ipv6_echo);
	CU_add_test(s, "reuseport_and_bad_config", test_reuseport_and_bad_config);
	CU_add_test(s, "shutdown", test_shutdown);
}

int main(void)
{
	struct io_uring probe;
	if (io_uring_queue_init(8, &probe, 0) < 0) {
		fprintf(stderr, "io_uring unavailable: skipping\n");
		return 77;
	}
	io_uring_queue_exit(&probe);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	add_tests(CU_add_suite("nic_uring_multishot", suite_multishot, NULL));
	add_tests(CU_add_suite("nic_uring_singleshot", suite_singleshot, NULL));
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
