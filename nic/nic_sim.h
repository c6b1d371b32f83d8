/*
 * nic_sim.h - the in-memory NIC backend for the simulator and tests: the
 * controls a test or the whole-broker simulator uses to play the network and
 * the clients. The broker side talks to it through nic.h, unchanged.
 *
 * Locality: one thread (the simulator's); a sim network and the nics on it
 * are never touched from two threads.
 *
 * Selection is at link time: the static library nic_sim (nic_sim_dep)
 * defines the backend-independent half of nic.h (nic_poll, nic_rx_release,
 * nic_send, nic_pause, nic_close, nic_conn_peer, nic_flush, nic_local_port,
 * nic_destroy) over memory instead of sockets; a program links it INSTEAD of
 * nic (nic_uring.c), so the io_uring path pays nothing for the choice. It
 * has no nic_uring_* functions: whatever creates the nic creates it with
 * nic_sim_create() below.
 *
 * Pure logic: no sockets, no syscalls, no clock of its own, no randomness of
 * its own. Time is what the simulator last set (nic_sim_net_set_now); every
 * random choice comes from the network's PRNG, seeded at creation, so the
 * same seed and the same sequence of calls give the same events, byte for
 * byte.
 *
 * Model. A network holds pipes: one per client connection, two bounded byte
 * streams (client->server, server->client) of pipe_bytes each. Bytes written
 * into a stream become a segment that arrives at now + a random delay (never
 * before the segment ahead of it: streams stay in order). The listener side
 * (struct nic, one per simulated core, listening on a port of the network)
 * does its work in nic_flush(), which plays the kernel's part:
 *   - accepts pipes whose connect has arrived (OPEN), or resets them when
 *     every connection slot is taken;
 *   - copies arrived client bytes into receive buffers from a fixed pool
 *     (DATA; split at a random point when short reads are on), unless the
 *     connection is paused or the pool is empty;
 *   - moves queued sends into the server->client stream, as far as the
 *     client's unread bytes leave room (a client that stops reading stalls
 *     the server's sends), cut short at a random point when partial sends are
 *     on; a buffer is reported SENT once its last byte went in;
 *   - notices the client's FIN once every byte before it was delivered (then
 *     the connection closes: CLOSED 0), and a reset once the bytes that
 *     arrived before it were delivered (CLOSED -ECONNRESET, unsent buffers
 *     SENT -ECANCELED; bytes still in flight are lost).
 * A server close (nic_close, shutdown) sends FIN after the bytes already
 * handed over, or, as a kernel does, RST when client bytes are unread: the
 * client then loses what had not arrived before the RST.
 * Events follow nic_uring's contract exactly, from the same code
 * (nic_common.h: lifecycles and the event-queue bound): OPEN first, DATA*, one SENT per accepted nic_send
 * in order, CLOSED last after every SENT; no event names a handle after its
 * CLOSED; a slot is reused only once its CLOSED was polled.
 *
 * Driving it (a simulator's step):
 *     nic_sim_net_set_now(net, t);              simulated time, never backwards
 *     clients: nic_sim_connect / _client_write / _client_read / _client_close
 *     core:    nic_flush(n); nic_poll(n, ev, max) -> the broker's handlers
 *     idle:    t = nic_sim_net_next_us(net)     jump to the next arrival
 * A crash of the simulated broker is nic_destroy(n): its clients see their
 * connections reset; a restarted broker calls nic_sim_create again.
 *
 * Tests: tests/unit/nic/nic_sim_ut.c holds it to nic_contract.h (the checks
 * nic_uring_ut applies to the io_uring backend) and to a byte-stream
 * reference model over 300 seeded fault mixes; `nic_sim_ut --seed N`
 * replays one, `--seeds N` runs more.
 */
#ifndef SLUICE_NIC_SIM_H
#define SLUICE_NIC_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "nic.h"

struct nic_sim_net;

#define NIC_SIM_PIPES_LIMIT   (1u << 20)   /* client connections a network can hold */
#define NIC_SIM_LISTENERS_MAX 64u          /* nics (simulated cores) on one network */
#define NIC_SIM_SEGS_MAX      64u          /* segments in flight per stream direction */
#define NIC_SIM_PPM           1000000u     /* probabilities below are parts per million */

/* Locality: init only. */
struct nic_sim_net_config {
	uint64_t seed;            /* the network's PRNG: every fault and split */
	uint32_t pipes_max;       /* client connections alive at once (<= NIC_SIM_PIPES_LIMIT) */
	uint32_t pipe_bytes;      /* bytes one stream direction holds: in flight + unread */
};

/*
 * Faults, seeded; all zero is a perfect network (no delay, whole reads and
 * writes). May be changed at any time (say, to let a workload finish clean).
 * Locality: simulator thread.
 */
struct nic_sim_faults {
	uint32_t delay_us_max;        /* each segment (and connect, FIN, reset) arrives after
	                                 a delay uniform in [0, delay_us_max] */
	uint32_t short_read_ppm;      /* a DATA event or client read is cut at a random point */
	uint32_t short_write_ppm;     /* a transmit or client write takes only part of its bytes */
	uint32_t reset_ppm;           /* each segment sent: the connection is reset when it
	                                 would arrive (both sides see it; bytes in flight lost) */
	uint32_t reject_ppm;          /* a connect is refused (the client sees a reset) */
};

/* Statistics of one listener. Locality: simulator thread. */
struct nic_sim_stats {
	uint64_t accepts;
	uint64_t accepts_rejected;    /* no free slot, listener gone, or reject_ppm */
	uint64_t rx_bytes;            /* delivered in DATA */
	uint64_t tx_bytes;            /* moved into server->client streams */
	uint64_t short_reads;         /* DATA cut short by the fault */
	uint64_t sends_partial;       /* transmits that left bytes of a buffer for later */
	uint64_t tx_stalls;           /* transmits that found the client's stream full */
	uint64_t rx_starved;          /* deliveries stopped for want of a receive buffer */
	uint64_t resets;              /* connections closed by a reset */
	uint64_t close_resets;        /* closes with client bytes unread: RST, not FIN */
};

/* Returns 0, -EINVAL (pipes_max or pipe_bytes 0 or too large) or -ENOMEM. Locality: init only. */
int nic_sim_net_create(const struct nic_sim_net_config *cfg, struct nic_sim_net **out);
/* Every nic on it must be destroyed first. Locality: simulator thread. */
void nic_sim_net_destroy(struct nic_sim_net *net);
void nic_sim_net_set_faults(struct nic_sim_net *net, const struct nic_sim_faults *f);
/* Simulated time in microseconds; asserts it never goes back. */
void nic_sim_net_set_now(struct nic_sim_net *net, uint64_t now_us);
uint64_t nic_sim_net_now(const struct nic_sim_net *net);
/*
 * The earliest time after now at which something is due to arrive (a
 * segment, a connect, a FIN or a reset), or UINT64_MAX when nothing is in
 * flight. A simulator with no work jumps its clock there.
 */
uint64_t nic_sim_net_next_us(const struct nic_sim_net *net);
/* The PRNG, for the simulator's own seeded choices (one stream, one seed). */
uint64_t nic_sim_net_rand(struct nic_sim_net *net);

/*
 * A listener on the network: cfg's conns_max, rx_bufs, rx_buf_bytes and port
 * (0: the network picks a free one; reuseport lets several nics share a port,
 * and each connect then picks one of them at random) are used, host is not.
 * Returns 0, -EINVAL (limits as nic_uring_create), -EADDRINUSE, -ENOSPC (over
 * NIC_SIM_LISTENERS_MAX) or -ENOMEM. Locality: init only.
 */
int nic_sim_create(const struct nic_config *cfg, struct nic_sim_net *net, struct nic **out);
/* Stop accepting and close every connection (SENT -ECANCELED, CLOSED
 * -ECANCELED follow), as nic_uring_shutdown does. */
void nic_sim_shutdown(struct nic *n);
const struct nic_sim_stats *nic_sim_stats(const struct nic *n);
/* Receive buffers held by the application (DATA polled, not yet released). */
uint32_t nic_sim_rx_held(const struct nic *n);
/* Connection slots not free (open, or CLOSED not yet polled). */
uint32_t nic_sim_conns_used(const struct nic *n);
/* The client handle at the other end of server connection conn: 0 or -ENOTCONN. */
int nic_sim_conn_client(const struct nic *n, uint32_t conn, uint32_t *client);

/*
 * Client side. A client handle names one pipe until the client closes or
 * resets it; it is never 0.
 *
 * nic_sim_connect: a connection to port; OPEN reaches the listener after the
 * delay. 0, -ECONNREFUSED (nothing listens on port), -EMFILE (pipes_max).
 */
int nic_sim_connect(struct nic_sim_net *net, uint16_t port, uint32_t *client);
/*
 * Write up to len bytes; returns how many the stream took (> 0; may be
 * short), -EAGAIN when it is full (the server is slow or paused), -EPIPE once
 * the server closed, -ECONNRESET after a reset, -ENOTCONN for a stale handle.
 */
int nic_sim_client_write(struct nic_sim_net *net, uint32_t client, const void *data, uint32_t len);
/*
 * Read what has arrived, at most cap bytes: > 0 bytes (may be short), 0 at
 * EOF (the server closed and every byte before its FIN was read), -EAGAIN
 * when nothing has arrived yet, -ECONNRESET after a reset (or a refused
 * connect) once what arrived before it was read, -ENOTCONN for a stale
 * handle.
 */
int nic_sim_client_read(struct nic_sim_net *net, uint32_t client, void *buf, uint32_t cap);
/* Orderly close: a FIN after the bytes written; unread bytes are dropped;
 * the handle is stale from now on. Stale handles are ignored. */
void nic_sim_client_close(struct nic_sim_net *net, uint32_t client);
/* Abortive close (RST): the server sees -ECONNRESET when it arrives. */
void nic_sim_client_reset(struct nic_sim_net *net, uint32_t client);
/* Reset the connection from the network (both sides see it when it arrives). */
void nic_sim_client_inject_reset(struct nic_sim_net *net, uint32_t client);

#endif
