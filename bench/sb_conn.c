/*
 * sb_conn.c: sluice-bench's transport. One non-blocking TCP connection with a
 * send buffer, a receive buffer and the in-order queue of requests awaiting
 * their answers; plus a blocking helper for the start-up requests.
 *
 * Kafka answers the requests of a connection in the order it received them
 * (README §2.1), so the head of the queue owns the next frame; the correlation
 * id is still checked against it. Produce requests with acks=0 get no answer:
 * they leave the queue once their last byte has been written.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "batch.h"
#include "sb.h"

int sb_split_addr(const char *addr, char *host, size_t host_cap, int *port)
{
	const char *colon = strrchr(addr, ':');
	if (!colon || colon == addr || (size_t)(colon - addr) >= host_cap || !colon[1])
		return -EINVAL;
	char *end = NULL;
	long p = strtol(colon + 1, &end, 10);
	if (*end || p <= 0 || p > 65535)
		return -EINVAL;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	*port = (int)p;
	return 0;
}

static int sb_connect(const char *host, int port)
{
	char ports[16];
	snprintf(ports, sizeof ports, "%d", port);
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
	int rc = getaddrinfo(host, ports, &hints, &res);
	if (rc) {
		fprintf(stderr, "sluice-bench: %s:%d: %s\n", host, port, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	int fd = -1, err = ECONNREFUSED;
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		/* Bounds the blocking connect below (Linux applies SO_SNDTIMEO to it). */
		struct timeval tv = { .tv_sec = sb_io_timeout_ms / 1000 };
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			err = errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0) {
		fprintf(stderr, "sluice-bench: connect %s:%d: %s\n", host, port, strerror(err));
		return -err;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	struct timeval zero = { 0 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &zero, sizeof zero);
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
		err = errno;
		close(fd);
		return -err;
	}
	return fd;
}

int sb_conn_open(struct sb_conn *c, int id, const char *host, int port, size_t scap, size_t rcap, uint32_t qcap,
		 int epfd)
{
	assert(scap > 0 && rcap > 0 && qcap > 0);
	*c = (struct sb_conn){ .fd = -1, .id = id, .scap = scap, .rcap = rcap, .qcap = qcap, .next_corr = 1,
			       .epfd = epfd };
	snprintf(c->addr, sizeof c->addr, "%s:%d", host, port);
	c->sbuf = malloc(scap);
	c->rbuf = malloc(rcap);
	c->q = calloc(qcap, sizeof *c->q);
	if (!c->sbuf || !c->rbuf || !c->q) {
		fprintf(stderr, "sluice-bench: out of memory for connection %d buffers (%zu + %zu bytes)\n", id, scap,
			rcap);
		return -ENOMEM;
	}
	int fd = sb_connect(host, port);
	if (fd < 0)
		return fd;
	c->fd = fd;
	if (epfd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
			return -errno;
	}
	return 0;
}

void sb_conn_close(struct sb_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->sbuf);
	free(c->rbuf);
	free(c->q);
	c->sbuf = c->rbuf = NULL;
	c->q = NULL;
}

uint8_t *sb_conn_reserve(struct sb_conn *c, size_t n)
{
	assert(c->shead <= c->stail && c->stail <= c->scap);
	if (c->scap - c->stail >= n)
		return c->sbuf + c->stail;
	if (c->scap - (c->stail - c->shead) < n)
		return NULL;
	/* Rare: the buffer is sized so that a full window of requests fits from offset 0,
	 * and it restarts at 0 whenever everything was written. */
	memmove(c->sbuf, c->sbuf + c->shead, c->stail - c->shead);
	c->stail -= c->shead;
	c->shead = 0;
	return c->sbuf + c->stail;
}

struct sb_req *sb_conn_commit(struct sb_conn *c, size_t n, const struct sb_req *req)
{
	assert(c->stail + n <= c->scap);
	assert(c->qlen < c->qcap && "the queue is sized for the whole window");
	c->stail += n;
	c->wire_queued += n;
	struct sb_req *q = &c->q[(c->qhead + c->qlen++) % c->qcap];
	*q = *req;
	q->wire_end = c->wire_queued;
	return q;
}

int sb_conn_put_msg(struct sb_conn *c, int16_t key, int16_t ver, const struct kschema *s, const void *body,
		    enum sb_req_kind kind, void *owner, uint64_t now)
{
	static const char client_id[] = "sluice-bench";
	size_t need = 4 + 10 + sizeof client_id + 1 + kcodec_size(s, ver, body);
	if (c->qlen == c->qcap)
		return -ENOBUFS;
	uint8_t *at = sb_conn_reserve(c, need);
	if (!at)
		return -ENOBUFS;
	struct kwriter w;
	kw_init(&w, at, need);
	struct kreq_header h = { .api_key = key, .api_version = ver, .correlation_id = c->next_corr++,
				 .client_id = { client_id, sizeof client_id - 1 } };
	kw_i32(&w, 0);
	kreq_header_encode(&w, &h);
	int rc = kcodec_encode(s, &w, ver, body);
	if (rc || w.err)
		return rc ? rc : w.err;
	kw_put_i32(at, (int32_t)(kw_len(&w) - 4));
	struct sb_req q = { .kind = (uint8_t)kind, .expects_response = true, .api_key = key, .api_version = ver,
			    .corr = h.correlation_id, .sent_ns = now, .owner = owner };
	sb_conn_commit(c, kw_len(&w), &q);
	return 0;
}

static void sb_conn_want_out(struct sb_conn *c, bool on)
{
	if (c->epfd < 0 || c->epollout == on)
		return;
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };
	int rc = epoll_ctl(c->epfd, EPOLL_CTL_MOD, c->fd, &ev);
	assert(rc == 0);
	(void)rc;
	c->epollout = on;
}

int sb_conn_flush(struct sb_conn *c)
{
	if (c->shead == c->stail)
		return 0;
	ssize_t n = send(c->fd, c->sbuf + c->shead, c->stail - c->shead, MSG_NOSIGNAL);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR) {
			sb_conn_want_out(c, true);
			return 0;
		}
		int err = errno;
		fprintf(stderr, "sluice-bench: connection %d to %s: send: %s\n", c->id, c->addr, strerror(err));
		return -err;
	}
	c->shead += (size_t)n;
	c->wire_sent += (uint64_t)n;
	assert(c->wire_sent <= c->wire_queued);
	if (c->shead == c->stail)
		c->shead = c->stail = 0;
	sb_conn_want_out(c, c->shead != c->stail);
	return 0;
}

bool sb_conn_written(struct sb_conn *c, struct sb_req *out)
{
	if (c->qlen == 0)
		return false;
	struct sb_req *q = &c->q[c->qhead];
	if (q->expects_response || q->wire_end > c->wire_sent)
		return false;
	*out = *q;
	c->qhead = (c->qhead + 1) % c->qcap;
	c->qlen--;
	return true;
}

int sb_conn_read(struct sb_conn *c)
{
	/* Keep the unread part; move it to the front when the tail room runs short,
	 * which copies at most one partial frame per read. */
	if (c->rpos == c->rlen) {
		c->rpos = c->rlen = 0;
	} else if (c->rcap - c->rlen < c->rcap / 4) {
		memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
		c->rlen -= c->rpos;
		c->rpos = 0;
	}
	if (c->rlen == c->rcap)
		return -EMSGSIZE;
	ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
	if (n == 0) {
		fprintf(stderr, "sluice-bench: connection %d to %s closed by the broker\n", c->id, c->addr);
		return -ECONNRESET;
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		int err = errno;
		fprintf(stderr, "sluice-bench: connection %d to %s: recv: %s\n", c->id, c->addr, strerror(err));
		return -err;
	}
	c->rlen += (size_t)n;
	return (int)n;
}

int sb_conn_frame(struct sb_conn *c, struct sb_req *req, struct kreader *body)
{
	size_t avail = c->rlen - c->rpos;
	if (avail < 4)
		return 0;
	const uint8_t *p = c->rbuf + c->rpos;
	uint32_t size = st_be32(p);
	if (size < 4 || size > c->rcap - 4) {
		fprintf(stderr, "sluice-bench: connection %d to %s: answer of %u bytes does not fit the %zu-byte buffer%s\n",
			c->id, c->addr, size, c->rcap,
			size < 4 ? "" : " (raise --fetch-bytes, or the broker sent a batch larger than it)");
		return -EPROTO;
	}
	if (avail - 4 < size) {
		/* Make room for the whole frame now so that the next reads can complete it. */
		if (c->rcap - c->rpos < 4 + (size_t)size) {
			memmove(c->rbuf, p, avail);
			c->rlen = avail;
			c->rpos = 0;
		}
		return 0;
	}
	if (c->qlen && !c->q[c->qhead].expects_response) {
		/* An acks=0 request ahead of this answer: nothing answers those. */
		fprintf(stderr, "sluice-bench: connection %d: an answer arrived while acks=0 requests were queued\n", c->id);
		return -EPROTO;
	}
	if (c->qlen == 0) {
		fprintf(stderr, "sluice-bench: connection %d to %s: an answer to no request\n", c->id, c->addr);
		return -EPROTO;
	}
	struct sb_req *q = &c->q[c->qhead];
	kr_init(body, p + 4, size);
	int32_t corr = kr_i32(body);
	if (kapi_flexible(q->api_key, q->api_version) && q->api_key != KAPI_API_VERSIONS)
		kr_skip_tags(body);
	if (body->err || corr != q->corr) {
		fprintf(stderr, "sluice-bench: connection %d to %s: answer with correlation id %d, expected %d (api %d)\n",
			c->id, c->addr, corr, q->corr, q->api_key);
		return -EPROTO;
	}
	*req = *q;
	c->qhead = (c->qhead + 1) % c->qcap;
	c->qlen--;
	c->rpos += 4 + (size_t)size;
	return 1;
}

int sb_call(struct sb_run *r, struct sb_conn *c, int16_t key, int16_t ver, const struct kschema *rq,
	    const void *body, const struct kschema *rs, void *out)
{
	assert(c->qlen == 0 && "start-up requests run on an idle connection");
	int rc = sb_conn_put_msg(c, key, ver, rq, body, SB_REQ_SYNC, NULL, sb_now_ns());
	if (rc) {
		fprintf(stderr, "sluice-bench: encoding %s v%d failed: %d\n", rq->name, ver, rc);
		return rc;
	}
	uint64_t deadline = sb_now_ns() + (uint64_t)sb_io_timeout_ms * 1000000u;
	struct sb_req q;
	struct kreader rd;
	for (;;) {
		if ((rc = sb_conn_flush(c)) < 0)
			return rc;
		if ((rc = sb_conn_frame(c, &q, &rd)) < 0)
			return rc;
		if (rc == 1)
			break;
		uint64_t now = sb_now_ns();
		if (now >= deadline) {
			fprintf(stderr, "sluice-bench: no answer to %s from %s within %d ms\n", rq->name, c->addr,
				sb_io_timeout_ms);
			return -ETIMEDOUT;
		}
		struct pollfd pfd = { .fd = c->fd, .events = POLLIN | (c->shead != c->stail ? POLLOUT : 0) };
		int n = poll(&pfd, 1, (int)((deadline - now) / 1000000u) + 1);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0 && (pfd.revents & (POLLIN | POLLERR | POLLHUP)) && (rc = sb_conn_read(c)) < 0)
			return rc;
	}
	karena_reset(&r->arena);
	rc = kcodec_decode(rs, &rd, ver, out, &r->arena);
	if (rc || rd.err || kr_left(&rd)) {
		fprintf(stderr, "sluice-bench: malformed %s v%d from %s (%d, %zu bytes left)\n", rs->name, ver, c->addr,
			rc ? rc : rd.err, kr_left(&rd));
		return -EPROTO;
	}
	return 0;
}
