/*
 * nic_contract.h - a backend-independent checker of nic.h's event contract,
 * for the NIC tests (tests/unit/nic/ only).
 *
 * Locality: test program, one thread (the one that polls the nic).
 *
 * The test tells it every nic_send (with its return), every nic_rx_release
 * and every polled event; it checks, per connection slot:
 *   - OPEN names a slot with no open connection, under a new handle;
 *   - DATA, SENT and CLOSED name the open handle; nothing follows CLOSED;
 *   - DATA: 0 < len <= rx_buf_bytes, a buffer id not already lent out, at
 *     most rx_bufs lent at once; each released exactly once;
 *   - one SENT per nic_send that returned 0, in send order, status 0 or
 *     -ECANCELED, and once one is cancelled all later ones are too;
 *   - CLOSED only after every SENT;
 *   - nic_send returns -ENOBUFS exactly when NIC_TXQ_MAX sends await their
 *     SENT, and -ENOTCONN for a handle whose CLOSED was polled.
 * A violation is counted and the first is described in why[]; the test
 * asserts on ct_fails and prints why (with its seed).
 */
#ifndef SLUICE_NIC_CONTRACT_H
#define SLUICE_NIC_CONTRACT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nic.h"
#include "nic_backend.h"

/* Locality: test program. */
struct ct_conn {
	uint32_t handle;          /* last handle seen on this slot (0: never) */
	bool open;
	bool cancelled;           /* a SENT -ECANCELED was seen */
	void *cookies[NIC_TXQ_MAX];   /* sends awaiting SENT, FIFO */
	uint32_t ck_head, ck_n;
};

/* Locality: test program. */
struct ct {
	uint32_t conns_max, rx_bufs, rx_buf_bytes;
	struct ct_conn *conn;     /* conns_max */
	uint8_t *lent;            /* rx_bufs */
	uint32_t lent_n;
	uint64_t events, opens, closes, datas, sents, sends;
	uint32_t fails;
	char why[256];
};

static inline void ct_fail(struct ct *ct, const char *what, uint32_t handle)
{
	if (ct->fails++ == 0)
		snprintf(ct->why, sizeof(ct->why), "%s (conn %#x, event %llu)", what, handle,
			 (unsigned long long)ct->events);
}

static inline void ct_init(struct ct *ct, uint32_t conns_max, uint32_t rx_bufs, uint32_t rx_buf_bytes)
{
	memset(ct, 0, sizeof(*ct));
	ct->conns_max = conns_max;
	ct->rx_bufs = rx_bufs;
	ct->rx_buf_bytes = rx_buf_bytes;
	ct->conn = calloc(conns_max, sizeof(*ct->conn));
	ct->lent = calloc(rx_bufs, 1);
	if (!ct->conn || !ct->lent)
		abort();
}

static inline void ct_free(struct ct *ct)
{
	free(ct->conn);
	free(ct->lent);
}

static inline struct ct_conn *ct_slot(struct ct *ct, uint32_t handle)
{
	uint32_t idx = handle & (NIC_CONNS_LIMIT - 1u);
	if (idx >= ct->conns_max) {
		ct_fail(ct, "handle names a slot past conns_max", handle);
		return NULL;
	}
	return &ct->conn[idx];
}

/* Every polled event, in order. */
static inline void ct_event(struct ct *ct, const struct nic_ev *e)
{
	ct->events++;
	struct ct_conn *c = ct_slot(ct, e->conn);
	if (!c)
		return;
	if (e->kind == NIC_EV_OPEN) {
		ct->opens++;
		if (c->open)
			ct_fail(ct, "OPEN on a slot whose connection is open", e->conn);
		if (e->conn == c->handle || e->conn == 0)
			ct_fail(ct, "OPEN reuses the previous handle of the slot", e->conn);
		c->handle = e->conn;
		c->open = true;
		c->cancelled = false;
		c->ck_head = c->ck_n = 0;
		return;
	}
	if (!c->open || c->handle != e->conn) {
		ct_fail(ct, "event for a connection that is not open (after CLOSED, or stale)", e->conn);
		return;
	}
	switch (e->kind) {
	case NIC_EV_DATA:
		ct->datas++;
		if (e->len == 0 || e->len > ct->rx_buf_bytes || !e->data)
			ct_fail(ct, "DATA length out of range", e->conn);
		if (e->buf_id >= ct->rx_bufs) {
			ct_fail(ct, "DATA buffer id out of range", e->conn);
			break;
		}
		if (ct->lent[e->buf_id])
			ct_fail(ct, "DATA in a buffer the application still holds", e->conn);
		ct->lent[e->buf_id] = 1;
		ct->lent_n++;
		break;
	case NIC_EV_SENT:
		ct->sents++;
		if (c->ck_n == 0) {
			ct_fail(ct, "SENT with no send awaiting it", e->conn);
			break;
		}
		if (e->cookie != c->cookies[c->ck_head])
			ct_fail(ct, "SENT out of send order", e->conn);
		c->ck_head = (c->ck_head + 1u) % NIC_TXQ_MAX;
		c->ck_n--;
		if (e->status != 0 && e->status != -ECANCELED)
			ct_fail(ct, "SENT status neither 0 nor -ECANCELED", e->conn);
		if (c->cancelled && e->status == 0)
			ct_fail(ct, "SENT 0 after a SENT -ECANCELED", e->conn);
		if (e->status != 0)
			c->cancelled = true;
		break;
	case NIC_EV_CLOSED:
		ct->closes++;
		if (c->ck_n != 0)
			ct_fail(ct, "CLOSED before every SENT", e->conn);
		if (e->status > 0)
			ct_fail(ct, "CLOSED status positive", e->conn);
		c->open = false;
		break;
	default:
		ct_fail(ct, "unknown event kind", e->conn);
	}
}

/* nic_send(conn, ..., cookie) returned rc. */
static inline void ct_send(struct ct *ct, uint32_t conn, void *cookie, int rc)
{
	struct ct_conn *c = ct_slot(ct, conn);
	if (!c)
		return;
	bool live = c->open && c->handle == conn;
	if (!live) {
		if (rc != -ENOTCONN)
			ct_fail(ct, "nic_send on a closed handle did not return -ENOTCONN", conn);
		return;
	}
	if (rc == 0) {
		ct->sends++;
		if (c->ck_n == NIC_TXQ_MAX) {
			ct_fail(ct, "nic_send took more than NIC_TXQ_MAX unfinished sends", conn);
			return;
		}
		c->cookies[(c->ck_head + c->ck_n) % NIC_TXQ_MAX] = cookie;
		c->ck_n++;
	} else if (rc == -ENOBUFS) {
		if (c->ck_n != NIC_TXQ_MAX)
			ct_fail(ct, "-ENOBUFS with room in the send queue", conn);
	} else if (rc != -ENOTCONN) {
		ct_fail(ct, "nic_send returned an unexpected error", conn);
	}
}

/* The application gives DATA event e's buffer back. */
static inline void ct_release(struct ct *ct, const struct nic_ev *e)
{
	if (e->kind != NIC_EV_DATA || e->buf_id >= ct->rx_bufs || !ct->lent[e->buf_id]) {
		ct_fail(ct, "release of a buffer not lent out", e->conn);
		return;
	}
	ct->lent[e->buf_id] = 0;
	ct->lent_n--;
}

/* At the end: nothing open, nothing lent, nothing awaiting SENT. */
static inline void ct_quiescent(struct ct *ct)
{
	if (ct->lent_n != 0)
		ct_fail(ct, "receive buffers still lent at the end", 0);
	for (uint32_t i = 0; i < ct->conns_max; i++)
		if (ct->conn[i].open)
			ct_fail(ct, "a connection still open at the end", ct->conn[i].handle);
}

#endif
