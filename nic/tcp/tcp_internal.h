/*
 * tcp_internal.h - the state of the userspace TCP (nic/tcp/ and its tests only).
 *
 * Locality: everything here belongs to one NIC core; nothing is shared.
 *
 * A flow's lifecycle (RFC 9293 3.3.2; LISTEN is the stack itself, which
 * takes a free flow for each acceptable SYN):
 *
 *   FREE --SYN--> SYN_RCVD --ACK of our SYN--> ESTABLISHED
 *   FREE --tcp_connect--> SYN_SENT --SYN-ACK--> ESTABLISHED
 *   ESTABLISHED --FIN--> CLOSE_WAIT --close--> LAST_ACK --ACK--> FREE
 *   ESTABLISHED --close--> FIN_WAIT_1 --ACK--> FIN_WAIT_2 --FIN--> TIME_WAIT
 *   FIN_WAIT_1 --FIN (simultaneous close)--> CLOSING --ACK--> TIME_WAIT
 *   TIME_WAIT --2*MSL, or a new SYN above it (RFC 6191)--> FREE
 *   any --RST, abort, retries spent--> FREE
 * The moves are the table tcp_moves[] in tcp.c, made only by tcp_set_state().
 * FREE happens when the flow is closed AND the application has released
 * its handle after CLOSED (or never had one): a handle never names a
 * reused flow, and the bytes left in the ring stay readable until then.
 *
 * Sequence space of a flow (all mod 2^32, compared with TCP_SEQ_LT & co):
 *   send:    iss | data from iss+1 ... snd_una <= snd_nxt <= snd_max,
 *            snd_end = after the last byte the application queued; the send
 *            ring holds [snd_una, snd_end); our FIN, once sent, has seq snd_end.
 *   receive: irs | data from irs+1 ... rx_read (the application's head)
 *            <= rx_end (in-order data end) ; rcv_nxt = rx_end + FIN seen.
 *            Out-of-order bytes sit in the receive ring at their offsets;
 *            their ranges (at most TCP_OOO_MAX, sorted, disjoint, all above
 *            rx_end) are in ooo[], which is also what SACK blocks report.
 * The receive ring holds [rx_read, rx_read + rx_bytes), so every byte of
 * the window we advertise has its place and no segment is ever buffered
 * anywhere else: that is the per-connection memory bound.
 */
#ifndef SLUICE_NIC_TCP_INTERNAL_H
#define SLUICE_NIC_TCP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tcp.h"

/* Limits and protocol constants, each named once. */
#define TCP_MTU_MAX            9000u      /* jumbo frames at most */
#define TCP_MTU_DEFAULT        1500u
#define TCP_ETH_HDR_BYTES      14u
#define TCP_IP_HDR_BYTES       20u        /* we send no IP options */
#define TCP_HDR_BYTES          20u
#define TCP_OPT_BYTES_MAX      40u        /* RFC 9293 3.1: data offset is 4 bits of words */
#define TCP_FRAME_BYTES_LIMIT  (TCP_ETH_HDR_BYTES + TCP_MTU_MAX)
#define TCP_MSS_DEFAULT        536u       /* RFC 9293 3.7.1: without the MSS option */
#define TCP_WSCALE_MAX         14u        /* RFC 7323 2.3 */
#define TCP_OOO_MAX            4u         /* out-of-order ranges held per flow */
#define TCP_SACK_BLOCKS_MAX    3u         /* fit beside the timestamps option */
#define TCP_SACK_RCVD_MAX      4u         /* SACK blocks read from one segment (RFC 2018: 4 fit alone) */
#define TCP_SCORE_MAX          4u         /* ranges the peer SACKed held per flow (the send side's scoreboard) */
#define TCP_CONNS_LIMIT        (1u << 20) /* handle = idx | gen << 20 */
#define TCP_RING_BYTES_MIN     1024u
#define TCP_RING_BYTES_MAX     (1u << 29) /* window scale 14 covers 65535 << 14 */
#define TCP_CTLQ_MAX           16u        /* ARP/ICMP/RST frames waiting for tcp_output */
#define TCP_ARP_ENTRIES        16u
#define TCP_EPHEMERAL_TTL      64u

/* Timers (microseconds). RFC 6298 2.4 asks for a 1 s minimum RTO; like
 * Linux we take 200 ms, as a broker's clients sit on LANs where 1 s would be
 * a stall of several hundred round trips for every lost tail segment. */
#define TCP_RTO_INIT_US        1000000u   /* RFC 6298 2.1 */
#define TCP_RTO_MIN_US         200000u
#define TCP_RTO_MAX_US         60000000u  /* RFC 6298 2.5 */
#define TCP_CLOCK_G_US         1000u      /* RFC 6298 clock granularity G */
#define TCP_DELACK_US          40000u     /* RFC 1122 4.2.3.2: under 500 ms */
#define TCP_TIME_WAIT_US       60000000u  /* 2*MSL as Linux takes it */
#define TCP_FIN_WAIT_2_US      60000000u  /* FIN_WAIT_2 silent this long: gone (Linux tcp_fin_timeout);
					     longer than any RTO backoff gap up to TCP_RTO_MAX_US */
#define TCP_RETRIES_MAX        12u        /* RTO backoffs before the flow is aborted */
#define TCP_SYNACK_RETRIES_MAX 5u         /* a half-open flow is freed after these */
#define TCP_PERSIST_MAX_US     60000000u  /* the longest gap between zero-window probes */
#define TCP_ZWP_SILENT_MAX_US  300000000u /* a zero window whose peer answers nothing this long: gone */
#define TCP_IW_SEGS            10u        /* RFC 6928 initial window */
#define TCP_DUPACK_THRESH      3u         /* RFC 5681 3.2 */
#define TCP_TS_HZ_DIV          1000u      /* timestamp clock: 1 ms (RFC 7323 5.4: 1 ms..1 s) */

_Static_assert(TCP_RTO_MIN_US <= TCP_RTO_INIT_US && TCP_RTO_INIT_US <= TCP_RTO_MAX_US, "RTO bounds");
_Static_assert(TCP_SACK_BLOCKS_MAX * 8 + 2 + 2 + 10 + 2 <= TCP_OPT_BYTES_MAX,
	       "SACK blocks, their kind/len, the timestamps option and NOP padding fit the option space");
_Static_assert(TCP_SACK_BLOCKS_MAX <= TCP_OOO_MAX, "SACK blocks come from the out-of-order ranges");
_Static_assert((1ull << TCP_WSCALE_MAX) * 65535u >= TCP_RING_BYTES_MAX, "the largest ring can be advertised");
_Static_assert(TCP_RETRIES_MAX < 31, "backoff shift stays defined");
_Static_assert(TCP_ZWP_SILENT_MAX_US >= 2 * TCP_PERSIST_MAX_US, "a silent peer is given two probes at the slowest");
_Static_assert(TCP_FIN_WAIT_2_US >= TCP_RTO_MAX_US && TCP_FIN_WAIT_2_US >= TCP_PERSIST_MAX_US,
	       "a peer retransmitting or probing at its slowest is not taken for gone");

#define TCP_SEQ_LT(a, b)  ((int32_t)((uint32_t)(a) - (uint32_t)(b)) < 0)
#define TCP_SEQ_LEQ(a, b) ((int32_t)((uint32_t)(a) - (uint32_t)(b)) <= 0)
#define TCP_SEQ_GT(a, b)  TCP_SEQ_LT(b, a)
#define TCP_SEQ_GEQ(a, b) TCP_SEQ_LEQ(b, a)

/* TCP header flags (RFC 9293 3.1). */
#define TCP_FIN 0x01u
#define TCP_SYN 0x02u
#define TCP_RST 0x04u
#define TCP_PSH 0x08u
#define TCP_ACK 0x10u

enum tcp_state {
	TCP_S_FREE = 0,
	TCP_S_SYN_SENT,
	TCP_S_SYN_RCVD,
	TCP_S_ESTABLISHED,
	TCP_S_CLOSE_WAIT,
	TCP_S_LAST_ACK,
	TCP_S_FIN_WAIT_1,
	TCP_S_FIN_WAIT_2,
	TCP_S_CLOSING,
	TCP_S_TIME_WAIT,
	TCP_S_CLOSED,         /* done, waiting for the application to see CLOSED */
	TCP_S_COUNT,
};

/* pending application events (bits of flow.ev) */
#define TCP_EVB_OPEN      0x01u
#define TCP_EVB_READABLE  0x02u
#define TCP_EVB_WRITABLE  0x04u
#define TCP_EVB_EOF       0x08u
#define TCP_EVB_CLOSED    0x10u

/* flow.f */
#define TCP_FF_ACK_NOW    0x0001u  /* the next output carries an ACK at once */
#define TCP_FF_DELACK     0x0002u  /* an ACK is owed, by delack_at */
#define TCP_FF_SYN_OUT    0x0004u  /* (re)send our SYN / SYN-ACK */
#define TCP_FF_FIN_Q      0x0008u  /* the application closed: FIN after the data */
#define TCP_FF_FIN_SENT   0x0010u  /* our FIN has its sequence number (data_end) */
#define TCP_FF_REXMIT1    0x0020u  /* fast retransmit: send one segment at snd_una */
#define TCP_FF_PROBE      0x0040u  /* zero-window probe due */
#define TCP_FF_KEEPALIVE  0x0080u  /* keepalive probe due */
#define TCP_FF_HANDLE     0x0200u  /* the application holds a handle */
#define TCP_FF_ON_TX      0x0400u  /* on the tx list */
#define TCP_FF_ON_EV      0x0800u  /* on the event list */
#define TCP_FF_PASSIVE    0x1000u
#define TCP_FF_RTT_TIMING 0x2000u  /* rtt_seq is being timed (Karn: cleared on rexmit) */
#define TCP_FF_FIN_PEND   0x4000u  /* the peer's FIN arrived out of order at fin_seq */
#define TCP_FF_CLOSED_EV  0x8000u  /* CLOSED was posted (once per handle) */

struct tcp_range { uint32_t start, end; };

/* One flow. Locality: NIC core. */
struct tcp_flow {
	uint8_t state;             /* enum tcp_state, set only by tcp_set_state() */
	uint8_t ev;                /* TCP_EVB_* not yet delivered */
	uint16_t f;                /* TCP_FF_* */
	uint16_t gen;
	uint16_t lport, rport;
	uint32_t rip;
	uint8_t mac[6];            /* next hop: the SYN's Ethernet source (or tcp_connect's) */
	int close_status;
	uint32_t hnext;            /* flow hash chain (UINT32_MAX ends) */
	uint32_t txnext, evnext, unext, uprev;   /* tx list, event list, used list */

	/* negotiated (RFC 9293 3.7.1, RFC 7323, RFC 2018) */
	uint16_t smss;             /* payload per segment we send (options taken off) */
	uint8_t snd_shift, rcv_shift;
	bool ws_ok, ts_ok, sack_ok;
	uint32_t ts_recent;        /* RFC 7323 4.3 */

	/* send side */
	uint32_t iss, snd_una, snd_nxt, snd_max, snd_wnd, snd_wl1, snd_wl2;
	uint32_t snd_end;          /* after the last byte queued: the send ring holds [snd_una, snd_end) */
	uint32_t max_wnd;
	uint32_t cwnd, ssthresh, recover;   /* RFC 5681 / RFC 6582 NewReno */
	uint8_t dupacks;
	bool in_recovery;
	/* RFC 2018 / 6675 (in part): what the peer SACKed above snd_una, sorted,
	 * disjoint, within (snd_una, snd_max]; at most TCP_SCORE_MAX ranges (the
	 * highest kept), cleared at an RTO. In recovery a retransmission skips
	 * what is SACKed, and each further duplicate ACK sends the next hole
	 * below the highest SACKed byte, from sack_rexmit (the end of the last
	 * one retransmitted) on, instead of waiting for a partial ACK. */
	uint8_t score_n;
	struct tcp_range score[TCP_SCORE_MAX];
	uint32_t sack_rexmit;
	uint32_t rtt_seq;          /* RTT timing without timestamps (Karn) */
	uint64_t rtt_start_us;
	uint32_t srtt_us, rttvar_us, rto_us;   /* RFC 6298; srtt 0 = no sample yet */
	uint8_t backoff;           /* RTO doublings since the last new ACK */
	uint8_t probes_out;        /* keepalive probes unanswered */

	/* receive side */
	uint32_t irs, rx_read, rx_end, rcv_nxt, fin_seq;
	uint32_t rcv_adv;          /* right edge we advertised last */
	uint8_t ooo_n, segs_unacked;
	struct tcp_range ooo[TCP_OOO_MAX];
	uint32_t sack_first;       /* start of the range the last out-of-order segment touched */

	/* timers: absolute microseconds, 0 = off */
	uint64_t rto_at;           /* retransmission, SYN-ACK, or persist (zero window) */
	uint64_t delack_at;
	uint64_t idle_at;          /* keepalive, or TIME_WAIT's end */
	uint64_t last_rx_us;

	uint8_t *rx, *tx;          /* rings: rx_bytes and tx_bytes */
};

/* The stack. Locality: NIC core (one per data core). */
struct tcp_stack {
	struct tcp_config cfg;
	uint16_t mss_ours;         /* mtu - 40 */
	uint8_t wscale_ours;
	uint32_t rx_mask, tx_mask;
	struct tcp_flow *flows;
	uint32_t *hash;            /* heads, hash_mask + 1 of them */
	uint32_t hash_mask;
	uint32_t free_head, used_head, used_n;
	uint32_t tx_head, tx_tail, ev_head, ev_tail;
	uint16_t ip_id;
	uint64_t now_us;           /* the latest clock given */
	uint32_t ctl_head, ctl_n;
	uint16_t ctl_len[TCP_CTLQ_MAX];
	uint8_t *ctl;              /* TCP_CTLQ_MAX frames of frame_max bytes */
	uint32_t frame_max;
	struct { uint32_t ip; uint8_t mac[6]; bool used; } arp[TCP_ARP_ENTRIES];
	uint32_t arp_next;
	struct tcp_stats st;
	uint8_t *mem;
	size_t mem_bytes;
};

#endif
