/*
 * tcp.h - a userspace Ethernet/ARP/IPv4/ICMP/TCP stack as pure logic: frames
 * in, frames out, a clock passed in. No DPDK, no sockets, no allocation after
 * tcp_create(), no locks (issue 13: the DPDK backend's TCP).
 *
 * Locality: one struct tcp_stack per data core (NIC core); each flow belongs
 * to the core whose rx queue RSS steers it to, so nothing here is shared.
 *
 * The contract with a backend (the DPDK one, later: nic/nic.h's interface
 * over it):
 *
 *   rx:      for each received frame: tcp_input(s, bytes, len, now_us).
 *            The stack copies what it keeps (into the flow's receive ring)
 *            and never holds the frame, so the mbuf goes back at once.
 *   tx:      after a burst of input and after tcp_timers(), drain
 *            tcp_output(s, now_us, buf, cap) into tx mbufs until it returns
 *            0; each call writes one whole Ethernet frame (checksums filled
 *            in, in software) of at most tcp_frame_bytes_max(s) bytes.
 *   timers:  tcp_timers(s, now_us) once per loop iteration (or every few
 *            hundred microseconds): retransmission, delayed ACK, persist,
 *            keepalive, TIME_WAIT. It visits every flow in use, so it is
 *            O(flows); the clock is the caller's monotonic microseconds.
 *   events:  tcp_events(s, ev, max) returns OPEN / READABLE / WRITABLE /
 *            EOF / CLOSED per connection, each connection queued at most
 *            once (the queue's bound is conns_max).
 *   streams: the receive side is a ring the stack owns per connection:
 *            tcp_recv_peek() gives the contiguous bytes at its head, the
 *            application consumes them with tcp_recv_consume() (that is
 *            nic_rx_release()'s place), which reopens the window. The send
 *            side copies into the connection's send ring with tcp_send()
 *            (accepted count returned; WRITABLE when acknowledged bytes
 *            free room), so nic_send's SENT follows at once in that backend.
 *   pausing: nic_pause is simply not consuming; the ring fills, the
 *            advertised window closes, and the peer's persist timer waits.
 *   closing: nic_close is tcp_close (FIN after what is queued) and, at
 *            CLOSED, tcp_release; tcp_abort is the reset.
 *
 * A connection handle is idx | generation << 20 like nic.h's; it is valid
 * from OPEN (or tcp_connect) until the application calls tcp_release(),
 * which it does after CLOSED once it has read what is left in the receive
 * ring (the flow may then linger in TIME_WAIT inside the stack, without a
 * handle). nic.h's CLOSED maps to the release: the backend emits the last
 * DATA, then CLOSED, then releases.
 *
 * Memory: tcp_create() takes everything: conns_max flows, each with a
 * receive ring of rx_bytes and a send ring of tx_bytes, a flow hash, and a
 * small queue of control frames (ARP, ICMP, RST). A SYN takes a flow; with
 * every flow taken a SYN is dropped (counted), so a SYN flood costs no more
 * than the connection limit, and a half-open flow is freed after
 * TCP_SYNACK_RETRIES_MAX unanswered SYN-ACKs.
 */
#ifndef SLUICE_NIC_TCP_H
#define SLUICE_NIC_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tcp_stack;

/* tcp_config.flags: leave an option out of our own SYN-ACKs and SYNs (tests
 * of "without each option"; a peer that leaves it out gets it left out anyway). */
#define TCP_CF_NO_MSS     0x1u
#define TCP_CF_NO_WSCALE  0x2u
#define TCP_CF_NO_SACK    0x4u
#define TCP_CF_NO_TS      0x8u

struct tcp_config {
	uint8_t mac[6];              /* our Ethernet address */
	uint32_t ip;                 /* our IPv4 address, host byte order */
	uint16_t port;               /* the listening port (passive opens) */
	uint16_t mtu;                /* IP MTU: 68..TCP_MTU_MAX, 0 means 1500 */
	uint32_t conns_max;          /* flows, half-open and TIME_WAIT ones included */
	uint32_t rx_bytes;           /* per-connection receive ring: power of two */
	uint32_t tx_bytes;           /* per-connection send ring: power of two */
	uint64_t isn_secret;         /* RFC 6528 key of the initial sequence numbers */
	uint32_t time_wait_us;       /* 2*MSL; 0 means TCP_TIME_WAIT_US */
	uint32_t keepalive_idle_us;  /* 0: no keepalive */
	uint32_t keepalive_intvl_us;
	uint32_t keepalive_probes;
	uint32_t flags;              /* TCP_CF_* */
};

enum tcp_ev_kind {
	TCP_EV_OPEN = 1,     /* handshake done (passive or active) */
	TCP_EV_READABLE,     /* bytes wait in the receive ring */
	TCP_EV_WRITABLE,     /* acknowledged bytes made room in the send ring */
	TCP_EV_EOF,          /* the peer's FIN: no more bytes will come */
	TCP_EV_CLOSED,       /* last event of the handle; status 0, -ECONNRESET, -ETIMEDOUT */
};

struct tcp_ev {
	uint32_t kind;       /* enum tcp_ev_kind */
	uint32_t conn;
	int status;          /* TCP_EV_CLOSED */
};

/* Counters (tests, the bench). Locality: NIC core. */
struct tcp_stats {
	uint64_t rx_frames, tx_frames;
	uint64_t drop_eth, drop_ip, drop_csum, drop_frag, drop_tcp;
	uint64_t arp_replies, icmp_replies, ctl_dropped;
	uint64_t syn_dropped;        /* SYN with every flow taken (SYN flood bound) */
	uint64_t rst_sent, rst_rcvd, challenge_acks;
	uint64_t rexmits, rto_fires, fast_rexmits, probes, keepalives;
	uint64_t sack_rexmits;       /* holes retransmitted on a duplicate ACK from the peer's SACK blocks */
	uint64_t ooo_segs, ooo_dropped, dup_segs, paws_drops;
	uint64_t delacks, tw_reused, conns_opened, conns_closed;
	/* payload bytes copied: out of received frames into receive rings (in order
	 * or into the out-of-order queue, so a duplicate kept twice counts twice),
	 * and out of send rings into frames (retransmissions included) */
	uint64_t rx_copied, tx_copied;
};

/* Init only: everything is allocated here. 0 or -EINVAL / -ENOMEM. */
int tcp_create(const struct tcp_config *cfg, struct tcp_stack **out);
void tcp_destroy(struct tcp_stack *s);

/* One received Ethernet frame. Returns 0 when it was used, or a negative
 * errno-style reason it was dropped (-EPROTO malformed, -EBADMSG checksum,
 * -ENOENT not for us, -ENOBUFS no flow free); either way the frame is free. */
int tcp_input(struct tcp_stack *s, const uint8_t *frame, uint32_t len, uint64_t now_us);

/* Next frame to send into buf (cap >= tcp_frame_bytes_max()); its length, or 0. */
uint32_t tcp_output(struct tcp_stack *s, uint64_t now_us, uint8_t *buf, uint32_t cap);
uint32_t tcp_frame_bytes_max(const struct tcp_stack *s);

/* Run the timers due at now_us (queues what they send for tcp_output). */
void tcp_timers(struct tcp_stack *s, uint64_t now_us);

/* Up to max events; returns how many. */
int tcp_events(struct tcp_stack *s, struct tcp_ev *ev, int max);

/* Contiguous received bytes at the head of the ring (0 when none: *data unset). */
uint32_t tcp_recv_peek(struct tcp_stack *s, uint32_t conn, const uint8_t **data);
/* The application is done with n bytes from the head (n <= what peek gave). */
void tcp_recv_consume(struct tcp_stack *s, uint32_t conn, uint32_t n);
/* Copy up to len bytes into the send ring; returns bytes taken or -ENOTCONN / -EPIPE. */
int tcp_send(struct tcp_stack *s, uint32_t conn, const void *data, uint32_t len);
/* Bytes queued and not yet acknowledged. */
uint32_t tcp_unacked(struct tcp_stack *s, uint32_t conn);
/* The peer's IPv4 address (host order) and port: 0, or -ENOTCONN. */
int tcp_peer(struct tcp_stack *s, uint32_t conn, uint32_t *ip, uint16_t *port);
/* Orderly close: FIN after the queued bytes. The handle stays until CLOSED. */
void tcp_close(struct tcp_stack *s, uint32_t conn);
/* Abort: RST now, CLOSED (-ECONNABORTED) follows. */
void tcp_abort(struct tcp_stack *s, uint32_t conn);
/* The application is done with conn (after CLOSED; before it, the
 * connection is reset first): the handle is dead from here on. */
void tcp_release(struct tcp_stack *s, uint32_t conn);

/* Active open (the tests' other endpoint; a broker only listens): 0 and the
 * handle in *conn, or -ENOBUFS. next_hop is the peer's (or gateway's) MAC. */
int tcp_connect(struct tcp_stack *s, uint32_t ip, uint16_t port, uint16_t lport,
		const uint8_t next_hop[6], uint64_t now_us, uint32_t *conn);

/* ARP: the address learned for ip (0 / -ENOENT); tcp_arp_resolve queues a request. */
int tcp_arp_lookup(const struct tcp_stack *s, uint32_t ip, uint8_t mac[6]);
void tcp_arp_resolve(struct tcp_stack *s, uint32_t ip);

const struct tcp_stats *tcp_stats(const struct tcp_stack *s);
/* Flows in use (any state), for leak checks. */
uint32_t tcp_flows_used(const struct tcp_stack *s);
/* Flows whose FIN the application asked for and the peer has not yet
 * acknowledged (what a stopping backend still owes its peers). O(flows). */
uint32_t tcp_flows_closing(const struct tcp_stack *s);
/* Bytes tcp_create() took, for the memory budget and the fuzz target. */
size_t tcp_memory_bytes(const struct tcp_config *cfg);
/* Assert every invariant of every flow (tests and the fuzz target). */
void tcp_check(const struct tcp_stack *s);

#endif
