/*
 * nic_uring.c - the kernel-socket NIC backend driven by the core's io_uring.
 *
 * Locality: NIC core. One struct nic per data core, touched only by the
 * thread that owns the ring.
 *
 * Per connection there is at most one recv (multishot when the kernel has
 * it) and at most one SENDMSG in flight: one send at a time is what keeps
 * the byte order of queued buffers, and coalescing up to NIC_SEND_IOV_MAX of
 * them into that SENDMSG keeps the syscall-free path wide. A slot is reused
 * only after every op on its fd has posted its final CQE, so a CQE can never
 * land on the wrong connection (the generation in user_data asserts it).
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <liburing.h>

#include "nic.h"
#include "nic_internal.h"

/* nic_poll and nic_local_port (nic_common.c) reach the shared half this way */
_Static_assert(offsetof(struct nic, cm) == 0, "struct nic_common comes first");
_Static_assert(offsetof(struct nic_conn, s) == 0, "struct nic_slot comes first");

/* ---- user_data ---------------------------------------------------------- */

static uint64_t nic_ud(enum nic_op op, uint32_t idx, uint32_t gen)
{
	assert(idx < NIC_CONNS_LIMIT && gen <= NIC_GEN_MASK);
	uint64_t payload = (uint64_t)op | (uint64_t)idx << 4 | (uint64_t)gen << 24;
	return payload << 4 | NIC_URING_TAG;
}

/* ---- small helpers ------------------------------------------------------ */

static struct io_uring_sqe *nic_get_sqe(struct nic *n)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(n->ring);
	if (sqe)
		return sqe;
	/* SQ full: the only submit we do ourselves, to make room (allowed by the
	 * core loop's contract; it submits everyone's SQEs in order). */
	n->stats.sqe_full++;
	io_uring_submit(n->ring);
	return io_uring_get_sqe(n->ring);
}

static void nic_mark_dirty(struct nic *n, struct nic_conn *c)
{
	if (c->flags & NIC_CF_ON_DIRTY)
		return;
	assert(n->dirty_n < n->cm.conns_max);
	c->flags |= NIC_CF_ON_DIRTY;
	n->dirty[n->dirty_n++] = (uint32_t)(c - n->conns);
}

static void nic_mark_starved(struct nic *n, struct nic_conn *c)
{
	c->flags |= NIC_CF_RX_STARVED;
	if (c->flags & NIC_CF_ON_STARVED)
		return;
	assert(n->starved_n < n->cm.conns_max);
	c->flags |= NIC_CF_ON_STARVED;
	uint32_t at = n->starved_head + n->starved_n;
	if (at >= n->cm.conns_max)
		at -= n->cm.conns_max;
	n->starved[at] = (uint32_t)(c - n->conns);
	n->starved_n++;
}

/* Give a buffer back to whoever hands them to the kernel. */
static void nic_rx_recycle(struct nic *n, uint16_t bid)
{
	assert(bid < n->cm.rx_bufs);
	if (n->multishot) {
		io_uring_buf_ring_add(n->br, nic_rx_addr(&n->cm, bid), n->cm.rx_buf_bytes, bid,
				      (int)n->br_mask, 0);
		/* store-release of the tail: pairs with the kernel's acquire when
		 * it picks the next buffer. */
		io_uring_buf_ring_advance(n->br, 1);
	} else {
		nic_rx_free_push(&n->cm, bid);
	}
}

/* Buffers the kernel could fill right now (multishot) or that we can lend. */
static uint32_t nic_rx_avail(const struct nic *n)
{
	return n->multishot ? n->cm.rx_bufs - n->cm.rx_held : n->cm.rx_free_n;
}

/* ---- connection lifecycle ----------------------------------------------- */

static struct nic_conn *nic_conn_lookup(struct nic *n, uint32_t handle)
{
	uint32_t idx = nic_slot_find(&n->cm, handle);
	return idx == NIC_SLOT_NONE ? NULL : &n->conns[idx];
}

/* OPEN -> CLOSING. Ops in flight are cancelled; the slot finishes closing
 * when the last of them has completed (nic_conn_maybe_finish). */
static void nic_conn_begin_close(struct nic *n, struct nic_conn *c, int status)
{
	assert(c->s.state == NIC_CONN_OPEN && c->fd >= 0);
	assert(status <= 0);
	c->s.state = NIC_CONN_CLOSING;
	c->close_status = status;
	c->flags &= (uint8_t)~(NIC_CF_WANT_RECV | NIC_CF_RX_STARVED);
	/* shutdown wakes a poll-armed recv/send at once even where cancel by fd
	 * is unsupported (< 5.19); it never blocks (no SO_LINGER). */
	shutdown(c->fd, SHUT_RDWR);
	if (c->inflight > 0) {
		c->flags |= NIC_CF_WANT_CANCEL;
		nic_mark_dirty(n, c);
	}
}

/* CLOSING -> CLOSED once nothing is in flight: close the fd, report the
 * unsent buffers and queue CLOSED (the slot is freed when CLOSED is delivered). */
static void nic_conn_maybe_finish(struct nic *n, struct nic_conn *c)
{
	if (c->s.state != NIC_CONN_CLOSING || c->inflight > 0)
		return;
	assert(!(c->flags & (NIC_CF_RECV_ARMED | NIC_CF_SEND_ARMED)));
	close(c->fd);
	c->fd = -1;
	c->flags &= (uint8_t)(NIC_CF_ON_DIRTY | NIC_CF_ON_STARVED);
	nic_slot_closed(&n->cm, &c->s, (uint32_t)(c - n->conns), c->close_status);
}

/* ---- completions -------------------------------------------------------- */

static void nic_accept_complete(struct nic *n, const struct io_uring_cqe *cqe)
{
	assert(n->listen_inflight > 0);
	if (!(cqe->flags & IORING_CQE_F_MORE)) {
		/* multishot stopped (error, or single-shot mode): flush re-arms */
		n->accept_armed = false;
		n->listen_inflight--;
	}
	if (cqe->res < 0) {
		if (cqe->res != -ECANCELED)
			n->stats.accept_errors++;
		return;
	}
	int fd = cqe->res;
	if (n->cm.free_n == 0 || n->shutting_down) {
		close(fd); /* over conns_max: the client sees a reset/EOF at once */
		n->stats.accepts_rejected++;
		return;
	}
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct nic_conn *c = &n->conns[nic_slot_open(&n->cm)];
	assert(c->inflight == 0);
	c->fd = fd;
	c->flags = (uint8_t)((c->flags & (NIC_CF_ON_DIRTY | NIC_CF_ON_STARVED)) | NIC_CF_WANT_RECV);
	c->close_status = 0;
	c->tx_sending = 0;
	n->stats.accepts++;
	nic_mark_dirty(n, c);
}

static void nic_recv_complete(struct nic *n, struct nic_conn *c, const struct io_uring_cqe *cqe)
{
	uint32_t idx = (uint32_t)(c - n->conns);
	bool more = cqe->flags & IORING_CQE_F_MORE;
	int res = cqe->res;
	assert(c->flags & NIC_CF_RECV_ARMED);

	uint16_t bid = UINT16_MAX;
	if (n->multishot) {
		if (cqe->flags & IORING_CQE_F_BUFFER)
			bid = (uint16_t)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
		assert(res <= 0 || bid != UINT16_MAX);
	} else {
		assert(!more);
		bid = c->rx_bid;
	}
	if (!more) {
		c->flags &= (uint8_t)~NIC_CF_RECV_ARMED;
		c->inflight--;
		n->inflight--;
	}
	if (bid != UINT16_MAX) {
		assert(bid < n->cm.rx_bufs && !n->cm.rx_out[bid]);
		if (res > 0 && c->s.state == NIC_CONN_OPEN) {
			nic_rx_lend(&n->cm, idx, bid, (uint32_t)res);
			n->stats.rx_bytes += (uint64_t)res;
		} else {
			nic_rx_recycle(n, bid); /* closing, EOF or error: nobody wants it */
		}
	}
	if (c->s.state != NIC_CONN_OPEN)
		return;
	if (res > 0) {
		if (!more) {
			if (n->multishot)
				n->stats.rx_rearms++;
			c->flags |= NIC_CF_WANT_RECV;
			nic_mark_dirty(n, c);
		}
	} else if (res == 0) {
		nic_conn_begin_close(n, c, 0); /* orderly EOF from the peer */
	} else if (res == -ECANCELED) {
		/* nic_pause cancelled it: armed again by flush once not paused */
		c->flags |= NIC_CF_WANT_RECV;
		nic_mark_dirty(n, c);
	} else if (res == -ENOBUFS) {
		/* buffer ring ran dry: re-armed by flush once buffers come back */
		n->stats.rx_enobufs++;
		assert(!more);
		nic_mark_starved(n, c);
	} else {
		nic_conn_begin_close(n, c, res);
	}
}

static void nic_send_complete(struct nic *n, struct nic_conn *c, const struct io_uring_cqe *cqe)
{
	uint32_t idx = (uint32_t)(c - n->conns);
	int res = cqe->res;
	assert(c->flags & NIC_CF_SEND_ARMED);
	assert(!(cqe->flags & IORING_CQE_F_MORE));
	c->flags &= (uint8_t)~NIC_CF_SEND_ARMED;
	c->inflight--;
	n->inflight--;
	uint32_t sending = c->tx_sending;
	c->tx_sending = 0;
	if (res < 0) {
		if (c->s.state == NIC_CONN_OPEN)
			nic_conn_begin_close(n, c, res);
		return;
	}
	assert((uint64_t)res <= c->tx_sending_bytes);
	if (res == 0 && c->tx_sending_bytes > 0) {
		/* a stream socket never sends 0 of >0 bytes; do not spin on it */
		if (c->s.state == NIC_CONN_OPEN)
			nic_conn_begin_close(n, c, -EIO);
		return;
	}
	n->stats.tx_bytes += (uint64_t)res;
	/* partial: the rest goes out in the next SENDMSG, in order */
	if (nic_txq_sent(&n->cm, &c->s, idx, sending, (uint64_t)res))
		n->stats.sends_partial++;
	if (c->s.state == NIC_CONN_OPEN && c->s.tx_done != c->s.tx_tail)
		nic_mark_dirty(n, c);
}

/* Locality: NIC core. */
void nic_uring_complete(struct nic *n, const struct io_uring_cqe *cqe)
{
	assert(n && cqe);
	assert((cqe->user_data & 0xfu) == NIC_URING_TAG);
	uint64_t payload = cqe->user_data >> 4;
	enum nic_op op = (enum nic_op)(payload & 0xfu);
	uint32_t idx = (uint32_t)(payload >> 4) & NIC_IDX_MASK;
	uint32_t gen = (uint32_t)(payload >> 24) & NIC_GEN_MASK;

	if (op == NIC_OP_ACCEPT) {
		nic_accept_complete(n, cqe);
		return;
	}
	if (op == NIC_OP_LCANCEL) {
		assert(n->listen_inflight > 0);
		n->listen_inflight--;
		return;
	}
	assert(idx < n->cm.conns_max);
	struct nic_conn *c = &n->conns[idx];
	/* every op completes before its slot is reused, so a stale CQE is a bug */
	assert(c->s.gen == gen);
	assert(c->s.state == NIC_CONN_OPEN || c->s.state == NIC_CONN_CLOSING);
	assert(c->inflight > 0 && n->inflight > 0);
	switch (op) {
	case NIC_OP_RECV:
		nic_recv_complete(n, c, cqe);
		break;
	case NIC_OP_SEND:
		nic_send_complete(n, c, cqe);
		break;
	case NIC_OP_CANCEL:
		/* res: ops cancelled, or -ENOENT when they had already finished */
		c->inflight--;
		n->inflight--;
		break;
	default:
		assert(!"unknown nic op");
	}
	nic_conn_maybe_finish(n, c);
}

/* ---- application side --------------------------------------------------- */

/* Locality: NIC core. */
void nic_rx_release(struct nic *n, const struct nic_ev *ev)
{
	assert(n);
	nic_rx_recycle(n, nic_rx_unlend(&n->cm, ev));
}

/* Locality: NIC core. */
int nic_send(struct nic *n, uint32_t conn, const void *data, uint32_t len, void *cookie)
{
	assert(n && (data || len == 0));
	uint32_t idx = nic_slot_find(&n->cm, conn);
	if (idx == NIC_SLOT_NONE)
		return -ENOTCONN;
	int rc = nic_txq_put(&n->conns[idx].s, data, len, cookie);
	if (rc == 0 && !(n->conns[idx].flags & NIC_CF_SEND_ARMED))
		nic_mark_dirty(n, &n->conns[idx]);
	return rc;
}

/* Locality: NIC core. */
void nic_pause(struct nic *n, uint32_t conn, bool paused)
{
	struct nic_conn *c = nic_conn_lookup(n, conn);
	if (!c || paused == !!(c->flags & NIC_CF_PAUSED))
		return;
	if (!paused) {
		c->flags &= (uint8_t)~NIC_CF_PAUSED;
		if (!(c->flags & NIC_CF_RECV_ARMED))
			c->flags |= NIC_CF_WANT_RECV;
		nic_mark_dirty(n, c);
		return;
	}
	c->flags |= NIC_CF_PAUSED;
	if (!(c->flags & NIC_CF_RECV_ARMED))
		return;
	/* A multishot recv goes on until cancelled; it ends with -ECANCELED. */
	struct io_uring_sqe *sqe = nic_get_sqe(n);
	if (!sqe)
		return;   /* no room: it stays armed; what arrives is still delivered */
	uint32_t idx = (uint32_t)(c - n->conns);
	io_uring_prep_cancel64(sqe, nic_ud(NIC_OP_RECV, idx, c->s.gen), 0);
	io_uring_sqe_set_data64(sqe, nic_ud(NIC_OP_CANCEL, idx, c->s.gen));
	c->inflight++;
	n->inflight++;
}

/* Locality: NIC core. One getpeername(2): called per JoinGroup, not per request. */
int nic_conn_peer(struct nic *n, uint32_t conn, char *buf, size_t cap)
{
	struct nic_conn *c = nic_conn_lookup(n, conn);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (!c || getpeername(c->fd, (struct sockaddr *)&ss, &sl) < 0)
		return -ENOTCONN;
	char ip[INET6_ADDRSTRLEN];
	const void *a = ss.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
	                                         : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
	if (!inet_ntop(ss.ss_family, a, ip, sizeof(ip)))
		return -ENOTCONN;
	int len = snprintf(buf, cap, "/%s", ip);
	return len < 0 || (size_t)len >= cap ? -ENOSPC : len;
}

/* Locality: NIC core. */
void nic_close(struct nic *n, uint32_t conn)
{
	assert(n);
	struct nic_conn *c = nic_conn_lookup(n, conn);
	if (!c)
		return; /* already closing, or a stale handle */
	nic_conn_begin_close(n, c, 0);
	nic_conn_maybe_finish(n, c);
}

/* ---- SQE preparation ---------------------------------------------------- */

static bool nic_prep_recv(struct nic *n, struct nic_conn *c)
{
	uint32_t idx = (uint32_t)(c - n->conns);
	if (nic_rx_avail(n) == 0) {
		nic_mark_starved(n, c);
		c->flags &= (uint8_t)~NIC_CF_WANT_RECV;
		return true;
	}
	struct io_uring_sqe *sqe = nic_get_sqe(n);
	if (!sqe)
		return false;
	if (n->multishot) {
		/* len 0: each completion fills (part of) one provided buffer */
		io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = NIC_BGID;
	} else {
		c->rx_bid = nic_rx_free_pop(&n->cm);
		io_uring_prep_recv(sqe, c->fd, nic_rx_addr(&n->cm, c->rx_bid), n->cm.rx_buf_bytes, 0);
	}
	io_uring_sqe_set_data64(sqe, nic_ud(NIC_OP_RECV, idx, c->s.gen));
	c->flags = (uint8_t)((c->flags | NIC_CF_RECV_ARMED) & ~NIC_CF_WANT_RECV);
	c->inflight++;
	n->inflight++;
	return true;
}

static bool nic_prep_send(struct nic *n, struct nic_conn *c)
{
	uint32_t idx = (uint32_t)(c - n->conns);
	struct io_uring_sqe *sqe = nic_get_sqe(n);
	if (!sqe)
		return false;
	uint64_t bytes;
	uint32_t cnt = nic_txq_gather(&c->s, c->iov, NIC_SEND_IOV_MAX, &bytes);
	c->msg = (struct msghdr){ .msg_iov = c->iov, .msg_iovlen = cnt };
	/* MSG_NOSIGNAL: a peer reset is an -EPIPE completion, not a SIGPIPE */
	io_uring_prep_sendmsg(sqe, c->fd, &c->msg, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, nic_ud(NIC_OP_SEND, idx, c->s.gen));
	c->tx_sending = cnt;
	c->tx_sending_bytes = bytes;
	c->flags |= NIC_CF_SEND_ARMED;
	c->inflight++;
	n->inflight++;
	n->stats.sendmsgs++;
	return true;
}

/* Prepare what one slot needs. false: out of SQEs, come back next flush. */
static bool nic_conn_flush(struct nic *n, struct nic_conn *c, int *prepared)
{
	uint32_t idx = (uint32_t)(c - n->conns);
	if (c->s.state == NIC_CONN_CLOSING && (c->flags & NIC_CF_WANT_CANCEL)) {
		struct io_uring_sqe *sqe = nic_get_sqe(n);
		if (!sqe)
			return false;
		io_uring_prep_cancel_fd(sqe, c->fd, IORING_ASYNC_CANCEL_ALL);
		io_uring_sqe_set_data64(sqe, nic_ud(NIC_OP_CANCEL, idx, c->s.gen));
		c->flags &= (uint8_t)~NIC_CF_WANT_CANCEL;
		c->inflight++;
		n->inflight++;
		(*prepared)++;
		return true;
	}
	if (c->s.state != NIC_CONN_OPEN)
		return true;
	if ((c->flags & NIC_CF_WANT_RECV) && !(c->flags & (NIC_CF_RECV_ARMED | NIC_CF_PAUSED))) {
		uint32_t before = c->inflight;
		if (!nic_prep_recv(n, c))
			return false;
		*prepared += (int)(c->inflight - before);
	}
	if (!(c->flags & NIC_CF_SEND_ARMED) && c->s.tx_done != c->s.tx_tail) {
		if (!nic_prep_send(n, c))
			return false;
		(*prepared)++;
	}
	return true;
}

/* Locality: NIC core. */
int nic_flush(struct nic *n)
{
	assert(n);
	int prepared = 0;
	if (!n->accept_armed && !n->shutting_down && n->listen_fd >= 0) {
		struct io_uring_sqe *sqe = nic_get_sqe(n);
		if (!sqe)
			return prepared;
		if (n->multishot)
			io_uring_prep_multishot_accept(sqe, n->listen_fd, NULL, NULL,
						       SOCK_NONBLOCK | SOCK_CLOEXEC);
		else
			io_uring_prep_accept(sqe, n->listen_fd, NULL, NULL,
					     SOCK_NONBLOCK | SOCK_CLOEXEC);
		io_uring_sqe_set_data64(sqe, nic_ud(NIC_OP_ACCEPT, 0, 0));
		n->accept_armed = true;
		n->listen_inflight++;
		prepared++;
	}
	/* Starved receivers, oldest first, one per buffer now available: with
	 * multishot one recv may take many buffers, but this keeps a small pool
	 * from re-arming hundreds of recvs that would all fail -ENOBUFS again. */
	uint32_t avail = nic_rx_avail(n);
	while (n->starved_n > 0 && avail > 0) {
		uint32_t idx = n->starved[n->starved_head];
		if (++n->starved_head == n->cm.conns_max)
			n->starved_head = 0;
		n->starved_n--;
		struct nic_conn *c = &n->conns[idx];
		assert(c->flags & NIC_CF_ON_STARVED);
		c->flags &= (uint8_t)~NIC_CF_ON_STARVED;
		if (c->s.state != NIC_CONN_OPEN || !(c->flags & NIC_CF_RX_STARVED))
			continue;
		c->flags = (uint8_t)((c->flags | NIC_CF_WANT_RECV) & ~NIC_CF_RX_STARVED);
		nic_mark_dirty(n, c);
		avail--;
	}
	while (n->dirty_n > 0) {
		uint32_t idx = n->dirty[n->dirty_n - 1];
		struct nic_conn *c = &n->conns[idx];
		assert(c->flags & NIC_CF_ON_DIRTY);
		if (!nic_conn_flush(n, c, &prepared))
			break; /* SQ full even after a submit: keep it listed */
		n->dirty_n--;
		c->flags &= (uint8_t)~NIC_CF_ON_DIRTY;
	}
	return prepared;
}

/* ---- create / destroy --------------------------------------------------- */

/* host (a literal; NULL = "0.0.0.0") and port as a socket address; its length, or -EINVAL. */
static int nic_sockaddr(const char *host, uint16_t port, struct sockaddr_storage *ss)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	memset(ss, 0, sizeof(*ss));
	if (!host)
		host = "0.0.0.0";
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		return (int)sizeof(*s4);
	}
	if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		return (int)sizeof(*s6);
	}
	return -EINVAL; /* literals only: no resolver on a data core */
}

int nic_port_probe(const char *host, uint16_t port)
{
	struct sockaddr_storage ss;
	int sl = nic_sockaddr(host, port, &ss);
	if (sl < 0)
		return sl;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* SO_REUSEADDR (as the listeners have it) passes TIME_WAIT leftovers, never a listener. */
	int one = 1, rc = 0;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, (socklen_t)sl) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static int nic_listen(struct nic *n, const struct nic_config *cfg)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	int rc = nic_sockaddr(cfg->host, cfg->port, &ss);
	if (rc < 0)
		return rc;
	socklen_t sl = (socklen_t)rc;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (cfg->reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) ||
	    bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, NIC_LISTEN_BACKLOG) < 0)
		goto fail;
	sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		goto fail;
	n->cm.port = ntohs(ss.ss_family == AF_INET ? s4->sin_port : s6->sin6_port);
	n->listen_fd = fd;
	return 0;
fail:;
	int err = -errno;
	close(fd);
	return err;
}

/* Multishot recv needs 6.0; provided-buffer rings 5.19. */
static bool nic_kernel_has_multishot(void)
{
	struct utsname u;
	unsigned major = 0, minor = 0;
	if (uname(&u) != 0 || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return false;
	(void)minor;
	return major >= 6;
}

static int nic_setup_buf_ring(struct nic *n)
{
	uint32_t entries = 1;
	while (entries < n->cm.rx_bufs)
		entries <<= 1;
	n->br_bytes = (size_t)entries * sizeof(struct io_uring_buf);
	/* page aligned, as the kernel requires for the ring */
	void *p = mmap(NULL, n->br_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		n->br_bytes = 0;
		return -errno;
	}
	n->br = p;
	io_uring_buf_ring_init(n->br);
	struct io_uring_buf_reg reg = { .ring_addr = (uint64_t)(uintptr_t)p,
					.ring_entries = entries, .bgid = NIC_BGID };
	int ret = io_uring_register_buf_ring(n->ring, &reg, 0);
	if (ret < 0) {
		munmap(p, n->br_bytes);
		n->br = NULL;
		n->br_bytes = 0;
		return ret;
	}
	n->br_mask = entries - 1;
	for (uint32_t i = 0; i < n->cm.rx_bufs; i++)
		io_uring_buf_ring_add(n->br, nic_rx_addr(&n->cm, i), n->cm.rx_buf_bytes, (uint16_t)i,
				      (int)n->br_mask, (int)i);
	io_uring_buf_ring_advance(n->br, (int)n->cm.rx_bufs);
	return 0;
}

/* Locality: init only (on the NIC core's thread). */
int nic_uring_create_ex(const struct nic_config *cfg, struct io_uring *ring, unsigned flags,
			struct nic **out)
{
	if (!cfg || !ring || !out || nic_config_check(cfg) < 0)
		return -EINVAL;
	struct nic *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->ring = ring;
	n->listen_fd = -1;
	int ret = nic_common_init(&n->cm, cfg, sizeof(struct nic_conn));
	n->conns = n->cm.slots;
	n->dirty = calloc(cfg->conns_max, sizeof(uint32_t));
	n->starved = calloc(cfg->conns_max, sizeof(uint32_t));
	if (ret < 0 || !n->dirty || !n->starved) {
		ret = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < n->cm.conns_max; i++)
		n->conns[i].fd = -1;
	ret = nic_listen(n, cfg);
	if (ret < 0)
		goto fail;
	/* single-shot mode lends from the free stack nic_common_init filled */
	n->multishot = !(flags & NIC_URING_F_SINGLESHOT) && nic_kernel_has_multishot() &&
		       nic_setup_buf_ring(n) == 0;
	*out = n;
	return 0;
fail:
	nic_destroy(n);
	return ret;
}

/* Locality: init only. */
int nic_uring_create(const struct nic_config *cfg, struct io_uring *ring, struct nic **out)
{
	return nic_uring_create_ex(cfg, ring, 0, out);
}

/* Locality: NIC core. */
void nic_uring_shutdown(struct nic *n)
{
	assert(n);
	if (n->shutting_down)
		return;
	n->shutting_down = true;
	if (n->accept_armed) {
		struct io_uring_sqe *sqe = nic_get_sqe(n);
		/* without an SQE, shutdown(2) below still ends the accept */
		if (sqe) {
			io_uring_prep_cancel_fd(sqe, n->listen_fd, IORING_ASYNC_CANCEL_ALL);
			io_uring_sqe_set_data64(sqe, nic_ud(NIC_OP_LCANCEL, 0, 0));
			n->listen_inflight++;
		}
	}
	shutdown(n->listen_fd, SHUT_RDWR);
	for (uint32_t i = 0; i < n->cm.conns_max; i++) {
		struct nic_conn *c = &n->conns[i];
		if (c->s.state == NIC_CONN_OPEN) {
			nic_conn_begin_close(n, c, -ECANCELED);
			nic_conn_maybe_finish(n, c);
		}
	}
}

/* Locality: NIC core. */
uint32_t nic_uring_inflight(const struct nic *n)
{
	assert(n);
	return n->inflight + n->listen_inflight;
}

/* Locality: NIC core, or any thread once the ring has been torn down. */
void nic_destroy(struct nic *n)
{
	if (!n)
		return;
	/* Unregister only on the clean path (see nic.h); after queue_exit the
	 * ring's fd may already name something else. */
	if (n->br && n->shutting_down && nic_uring_inflight(n) == 0)
		io_uring_unregister_buf_ring(n->ring, NIC_BGID);
	if (n->conns)
		for (uint32_t i = 0; i < n->cm.conns_max; i++)
			if (n->conns[i].s.state == NIC_CONN_OPEN ||
			    n->conns[i].s.state == NIC_CONN_CLOSING)
				close(n->conns[i].fd);
	if (n->listen_fd >= 0)
		close(n->listen_fd);
	if (n->br)
		munmap(n->br, n->br_bytes);
	nic_common_free(&n->cm);
	free(n->dirty);
	free(n->starved);
	free(n);
}

