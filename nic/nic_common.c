/*
 * nic_common.c - what every NIC backend shares off its per-event path, and
 * the two nic.h functions that are the same in all of them: nic_poll and
 * nic_local_port. Compiled into each backend's library (nic, nic_sim), so a
 * program that links one backend gets exactly one copy. The state, the
 * lifecycles and the event-queue bound are in nic_common.h.
 *
 * Locality: NIC core (nic_poll, nic_local_port), init only (the rest).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "nic.h"
#include "nic_common.h"

/* Locality: init only. */
int nic_config_check(const struct nic_config *cfg)
{
	if (cfg->conns_max == 0 || cfg->conns_max > NIC_CONNS_LIMIT || cfg->rx_bufs == 0 ||
	    cfg->rx_bufs > NIC_RX_BUFS_LIMIT || cfg->rx_buf_bytes == 0 ||
	    cfg->rx_buf_bytes > (uint32_t)INT32_MAX)
		return -EINVAL;
	return 0;
}

/* Locality: init only. */
int nic_common_init(struct nic_common *cm, const struct nic_config *cfg, size_t slot_bytes)
{
	assert(nic_config_check(cfg) == 0 && slot_bytes >= sizeof(struct nic_slot));
	cm->conns_max = cfg->conns_max;
	cm->rx_bufs = cfg->rx_bufs;
	cm->rx_buf_bytes = cfg->rx_buf_bytes;
	/* itemised event bound: see the top of nic_common.h */
	cm->evq_cap = cfg->conns_max * (2u + NIC_TXQ_MAX) + cfg->rx_bufs;
	cm->slot_bytes = slot_bytes;
	cm->slots = calloc(cm->conns_max, slot_bytes);
	cm->free_slots = calloc(cm->conns_max, sizeof(uint32_t));
	cm->txq = calloc((size_t)cm->conns_max * NIC_TXQ_MAX, sizeof(*cm->txq));
	cm->evq = calloc(cm->evq_cap, sizeof(*cm->evq));
	cm->rx_out = calloc(cm->rx_bufs, 1);
	cm->rx_free = calloc(cm->rx_bufs, sizeof(uint16_t));
	/* mmap, not calloc: pages no receive ever touches are never backed, and
	 * each buffer starts page-aligned when rx_buf_bytes is a page multiple */
	cm->rx_mem_bytes = (size_t)cm->rx_bufs * cm->rx_buf_bytes;
	cm->rx_mem = mmap(NULL, cm->rx_mem_bytes, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (cm->rx_mem == MAP_FAILED)
		cm->rx_mem = NULL;
	if (!cm->slots || !cm->free_slots || !cm->txq || !cm->evq || !cm->rx_out || !cm->rx_free ||
	    !cm->rx_mem)
		return -ENOMEM;
	for (uint32_t i = 0; i < cm->conns_max; i++) {
		nic_slot_at(cm, i)->gen = 1;
		nic_slot_at(cm, i)->tx = &cm->txq[(size_t)i * NIC_TXQ_MAX];
		cm->free_slots[i] = cm->conns_max - 1 - i; /* slot 0 is handed out first */
	}
	cm->free_n = cm->conns_max;
	for (uint32_t i = 0; i < cm->rx_bufs; i++)
		cm->rx_free[i] = (uint16_t)(cm->rx_bufs - 1 - i);
	cm->rx_free_n = cm->rx_bufs;
	return 0;
}

/* Locality: init only (or a simulated crash). */
void nic_common_free(struct nic_common *cm)
{
	if (cm->rx_mem)
		munmap(cm->rx_mem, cm->rx_mem_bytes);
	free(cm->slots);
	free(cm->free_slots);
	free(cm->txq);
	free(cm->evq);
	free(cm->rx_out);
	free(cm->rx_free);
	*cm = (struct nic_common){ 0 };
}

/* Locality: NIC core. */
int nic_poll(struct nic *n, struct nic_ev *ev, int max)
{
	/* every backend's struct nic starts with its struct nic_common */
	struct nic_common *cm = (struct nic_common *)(void *)n;
	assert(n && (ev || max <= 0));
	int k = 0;
	while (k < max && cm->evq_n > 0) {
		const struct nic_iev ie = cm->evq[cm->evq_head];
		if (++cm->evq_head == cm->evq_cap)
			cm->evq_head = 0;
		cm->evq_n--;
		struct nic_slot *s = nic_slot_at(cm, ie.idx);
		assert(s->state != NIC_CONN_FREE);
		struct nic_ev *e = &ev[k++];
		*e = (struct nic_ev){ .kind = ie.kind, .conn = nic_handle(ie.idx, s->gen),
				      .status = ie.status };
		switch (ie.kind) {
		case NIC_EV_OPEN:
			break;
		case NIC_EV_DATA:
			assert(cm->rx_out[ie.bid]);
			e->data = nic_rx_addr(cm, ie.bid);
			e->len = ie.len;
			e->buf_id = ie.bid;
			break;
		case NIC_EV_SENT:
			/* SENT events of a slot are queued in tx order */
			assert(s->tx_head != s->tx_done);
			e->cookie = nic_txq_at(s, s->tx_head)->cookie;
			s->tx_head++;
			break;
		case NIC_EV_CLOSED:
			/* CLOSED is the slot's last event: nothing of it is left queued */
			assert(s->state == NIC_CONN_CLOSED && s->tx_head == s->tx_tail);
			s->state = NIC_CONN_FREE;
			s->gen = nic_gen_next(s->gen);
			assert(cm->free_n < cm->conns_max);
			cm->free_slots[cm->free_n++] = ie.idx;
			break;
		default:
			assert(!"unknown event kind");
		}
	}
	return k;
}

/* Locality: any. */
uint16_t nic_local_port(const struct nic *n)
{
	assert(n);
	return ((const struct nic_common *)(const void *)n)->port;
}
