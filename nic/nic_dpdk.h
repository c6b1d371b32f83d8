/*
 * nic_dpdk.h - the DPDK poll-mode backend of nic.h (issue 13): one rx/tx
 * queue pair of one DPDK port per data core, frames handed to the core's own
 * userspace TCP (nic/tcp/tcp.h), its byte streams given to the application
 * through the same nic.h contract as the io_uring backend. Built only where
 * meson finds libdpdk (nic_dpdk static library, and sluiced-dpdk).
 *
 * Locality: nic_dpdk_init / nic_dpdk_fini are init only, on the main
 * thread, before any core starts and after every core stopped; what they set
 * up (the port, one mbuf pool per queue) is read-only to the cores after.
 * Each struct nic from nic_dpdk_create belongs to one data core and is the
 * only user of its queue pair and its pool, so no lock is taken anywhere.
 *
 * Memory: every mbuf pool is sized at init by the named limits below
 * (nic_dpdk_queue_bytes is the budget line); the poll path allocates nothing
 * but mbufs from its own pool, and a pool that runs dry drops a frame (TCP
 * retransmits it) instead of waiting.
 */
#ifndef SLUICE_NIC_DPDK_H
#define SLUICE_NIC_DPDK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nic.h"

#define NIC_DPDK_QUEUES_MAX      64u        /* queue pairs on the port: data cores */
#define NIC_DPDK_EAL_ARGS_MAX    64u        /* words in --dpdk-eal */
#define NIC_DPDK_RXD             1024u      /* rx descriptors per queue */
#define NIC_DPDK_TXD             1024u      /* tx descriptors per queue */
#define NIC_DPDK_BURST           32u        /* frames per rx or tx burst */
#define NIC_DPDK_RX_BURSTS       8u         /* rx bursts per nic_flush: bounded work a turn */
/* Every descriptor may hold one, plus the frames a core holds itself (a tx burst
 * that waits for room and one spare); 2^n - 1 is the ring mempool's best size. */
#define NIC_DPDK_MBUFS           4095u      /* mbufs per queue's pool */
#define NIC_DPDK_MBUF_DATA_BYTES 2176u      /* RTE_MBUF_DEFAULT_BUF_SIZE: headroom + a 2 KiB frame */
#define NIC_DPDK_MBUF_OVERHEAD   256u       /* struct rte_mbuf and the pool's per-object header */
#define NIC_DPDK_FLOWS_MAX       1024u      /* TCP flows per core, TIME_WAIT ones included */
#define NIC_DPDK_TCP_RX_BYTES    (128u << 10)  /* per flow: the receive window's ring */
#define NIC_DPDK_TCP_TX_BYTES    (128u << 10)  /* per flow: the send ring */
#define NIC_DPDK_TIMER_US        200u       /* tcp_timers at most this often (it is O(flows)) */

_Static_assert(NIC_DPDK_MBUFS >= NIC_DPDK_RXD + NIC_DPDK_TXD + 2u * NIC_DPDK_BURST + 1u,
	       "the pool covers every descriptor and what the core holds");

/*
 * Test only (--dpdk-faults): seeded faults on the link, since this kernel has
 * no netem. Odds in parts per million per frame. Received frames may be
 * dropped, handed to the stack twice, held back behind the next one
 * (reordered) or have one byte flipped (the checksums must catch it); frames
 * sent may be dropped. All zero: no fault (the default).
 */
#define NIC_DPDK_PPM 1000000u
struct nic_dpdk_faults {
	uint32_t rx_drop, rx_dup, rx_reorder, rx_corrupt, tx_drop;   /* ppm */
	uint64_t seed;
};
/* "drop=PPM,dup=PPM,reorder=PPM,corrupt=PPM,txdrop=PPM,seed=N" (any subset): 0 or -EINVAL. */
int nic_dpdk_faults_parse(const char *s, struct nic_dpdk_faults *f);

/* Init only: what --nic dpdk and its flags give. */
struct nic_dpdk_config {
	const char *eal_args;    /* --dpdk-eal: words passed to rte_eal_init */
	bool eal_started;        /* tests: the caller ran rte_eal_init (and made the port) itself */
	uint16_t port_id;        /* --dpdk-port */
	uint16_t queues;         /* one pair per data core, 1..NIC_DPDK_QUEUES_MAX */
	uint32_t ip;             /* --ip: our IPv4 address, host byte order */
	uint16_t mtu;            /* IP MTU; 0 means 1500 */
	struct nic_dpdk_faults faults;   /* test only */
};

/*
 * Start the EAL and the port: queues rx/tx queue pairs, RSS over IPv4/TCP
 * when there are several and the port has it (the PMD's fanout otherwise:
 * net_af_packet hashes flows over its qpairs), one pool per queue. 0 or a
 * negative errno; err (cap bytes) says what failed, for the start-up log and
 * the lab's skip line. Init only; once per process.
 */
int nic_dpdk_init(const struct nic_dpdk_config *cfg, char *err, size_t cap);
/* Stop and close the port, release the EAL. Init only, after every nic_destroy. */
void nic_dpdk_fini(void);

/* A data core's backend on queue pair `queue` (its data index). cfg->port is
 * the TCP port it listens on; cfg->host is ignored (the stack answers for
 * nic_dpdk_config.ip). 0, -EINVAL or -ENOMEM. Init only (on the core). */
int nic_dpdk_create(const struct nic_config *cfg, uint16_t queue, struct nic **out);

/* Bytes one queue's backend holds (mbuf pool, TCP flows and rings, the
 * shared nic tables are the caller's own line): the memory budget's line. */
size_t nic_dpdk_queue_bytes(void);

/* Counters for tests and the bench. Locality: NIC core. */
struct nic_dpdk_stats {
	uint64_t rx_frames, rx_bytes, rx_dropped;   /* dropped: multi-segment too big, or tcp_input refused */
	uint64_t tx_frames, tx_bytes;
	uint64_t tx_nombuf;      /* pool empty: tcp_output left for the next turn */
	uint64_t tx_full;        /* the tx queue took less than the burst */
	/* Copies of stream bytes (the bench's "bytes copied per byte produced"):
	 * rx: frame -> the flow's receive ring (tcp_rx_copied, the stack's) and
	 * ring -> the application's rx buffer (rx_app_copied, which is also every
	 * stream byte received, in order); tx: the application's send -> the flow's
	 * send ring (tx_app_copied, every stream byte sent) and ring -> frame
	 * (tcp_tx_copied, retransmissions included). */
	uint64_t rx_app_copied, tx_app_copied;
	uint64_t accepts_rejected;
	uint64_t fault_drops, fault_dups, fault_reorders, fault_corrupts;   /* --dpdk-faults fired */
	uint64_t tcp_rexmits, tcp_drop_csum;   /* the stack's, for the lab's fault run */
	uint64_t tcp_rto_fires, tcp_fast_rexmits, tcp_sack_rexmits;   /* the stack's: how losses were repaired */
	uint64_t tcp_rx_copied, tcp_tx_copied; /* the stack's (see above) */
};
const struct nic_dpdk_stats *nic_dpdk_stats(struct nic *n);
/* At stop: true while a closed connection's FIN is not yet acknowledged or
 * frames wait for the tx queue, so the core keeps polling (bounded by the
 * core's own stop limit) and the peers see an orderly close. */
bool nic_dpdk_draining(struct nic *n);
/* Flows the TCP holds and rx buffers the application holds (leak checks). */
uint32_t nic_dpdk_flows_used(const struct nic *n);

#endif
