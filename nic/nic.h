/*
 * nic.h - the poll-mode network interface every data core drives.
 *
 * Locality: one struct nic per data core (NIC core); never shared.
 *
 * Shape (fits both backends: kernel sockets driven by io_uring, and later
 * DPDK with a userspace TCP):
 *   - connections are byte streams identified by a 32-bit handle;
 *   - received bytes arrive in buffers the backend owns; the application
 *     reads them and gives each buffer back with nic_rx_release();
 *   - transmit takes application buffers by pointer; the backend reports
 *     NIC_EV_SENT with the caller's cookie once it no longer needs them;
 *   - everything is burst-oriented and non-blocking: nic_poll() does a
 *     bounded amount of work and returns the number of events it produced.
 *
 * Backends, chosen at link time (each a static library defining the same
 * symbols, so the broker's path has no indirection):
 *   nic      nic_uring.c: kernel sockets through the core's io_uring (the
 *            broker); its constructor and completion feed are nic_uring_*.
 *   nic_sim  nic_sim.c: an in-memory network for the simulator and tests,
 *            created with nic_sim_create() (nic_sim.h).
 * Both implement nic_rx_release, nic_send, nic_pause, nic_conn_peer,
 * nic_close, nic_flush and nic_destroy with the same event contract, over
 * one shared half (nic_common.h: event queue, connection slots, send
 * queues; nic_common.c, compiled into each, defines nic_poll and
 * nic_local_port); the nic_uring_* functions and nic_port_probe exist only
 * in nic.
 */
#ifndef SLUICE_NIC_H
#define SLUICE_NIC_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct nic;
struct io_uring;
struct io_uring_cqe;

/*
 * Each data core owns ONE io_uring shared by the NIC backend, the storage
 * engine and the core itself, so an idle core can sleep in one wait.
 * user_data convention: ((uint64_t)payload << 4) | tag, tag in the low 4 bits:
 *   NIC_URING_TAG 1 (this backend), 2 storage (ST_URING_TAG), 3 the core loop.
 * The core loop reaps CQEs and hands tag-1 ones to nic_uring_complete().
 */
#define NIC_URING_TAG 1u

enum nic_ev_kind {
	NIC_EV_OPEN = 1,   /* new connection accepted: conn is valid from now on */
	NIC_EV_DATA,       /* data/len hold received bytes; release with nic_rx_release() */
	NIC_EV_SENT,       /* cookie's buffer fully sent (or dropped: conn closed) */
	NIC_EV_CLOSED,     /* peer closed or error; last event for conn, after all SENT */
};

struct nic_ev {
	uint32_t kind;     /* enum nic_ev_kind */
	uint32_t conn;     /* connection handle (index | generation << 20) */
	const uint8_t *data;
	uint32_t len;
	uint32_t buf_id;   /* backend buffer id for NIC_EV_DATA */
	void *cookie;      /* for NIC_EV_SENT */
	int status;        /* NIC_EV_SENT/CLOSED: 0 or -errno */
};

struct nic_config {
	const char *host;        /* listen address, e.g. "127.0.0.1" */
	uint16_t port;
	uint32_t conns_max;      /* connections this core can hold */
	uint32_t rx_buf_bytes;   /* size of one receive buffer */
	uint32_t rx_bufs;        /* receive buffers in the pool */
	int reuseport;           /* several cores listen on the same port */
};

/*
 * Create the io_uring socket backend on the calling core, using the core's
 * ring (it only prepares SQEs; the core loop submits). Returns 0 or -errno.
 *
 * Ring requirements: call on the thread that submits to the ring (with
 * IORING_SETUP_SINGLE_ISSUER the buffer-ring registration must come from
 * it). Any SQ size works (when the SQ is full the backend submits to make
 * room); >= 1024 entries recommended. Kernel >= 6.0: multishot accept and
 * multishot recv with a provided-buffer ring (group id 0x51 on this ring, so
 * one nic per ring); older kernels, or a refused registration, fall back to
 * single-shot accept/recv into the backend's own pool.
 * Limits: conns_max <= 2^20, 1 <= rx_bufs <= 32768, rx_buf_bytes >= 1.
 * host: IPv4 or IPv6 literal ("0.0.0.0", "::", "::1"); NULL means "0.0.0.0".
 */
int nic_uring_create(const struct nic_config *cfg, struct io_uring *ring, struct nic **out);

/*
 * Whether host:port is free to listen on: 0, or -EADDRINUSE when any socket
 * (another broker's SO_REUSEPORT listeners too) holds it, or -errno. The
 * data cores' listeners share their port through SO_REUSEPORT, which would
 * as readily share it with a second broker started on the same address and
 * split the clients between the two; so the broker asks this once before
 * its cores listen. Init only (a blocking bind and close).
 */
int nic_port_probe(const char *host, uint16_t port);

/* nic_uring_create() with flags; NIC_URING_F_SINGLESHOT forces the fallback
 * path (single-shot accept and recv, own buffer pool), for tests. */
#define NIC_URING_F_SINGLESHOT 0x1u
int nic_uring_create_ex(const struct nic_config *cfg, struct io_uring *ring, unsigned flags,
			struct nic **out);

/* Feed one completion whose tag is NIC_URING_TAG. */
void nic_uring_complete(struct nic *n, const struct io_uring_cqe *cqe);

/*
 * Clean shutdown: stop accepting and close every connection (the usual SENT
 * -ECANCELED / CLOSED events follow). Keep looping (complete, poll, flush,
 * submit) until nic_uring_inflight() returns 0; then nic_destroy() is safe
 * while the ring lives on.
 */
void nic_uring_shutdown(struct nic *n);
/* Ops the kernel still holds for this backend (connections + listener). */
uint32_t nic_uring_inflight(const struct nic *n);

/*
 * Free the backend. In-flight receives write into backend memory, so call it
 * either after a completed nic_uring_shutdown() (inflight 0; the ring must
 * still be alive: the buffer ring is unregistered from it), or after
 * io_uring_queue_exit() on the shared ring (then the ring is not touched).
 */
void nic_destroy(struct nic *n);

/* Poll for events; returns how many were written to ev (<= max). Never blocks. */
int nic_poll(struct nic *n, struct nic_ev *ev, int max);

/* Give a NIC_EV_DATA buffer back to the backend. */
void nic_rx_release(struct nic *n, const struct nic_ev *ev);

/*
 * Queue len bytes at data for transmission on conn, in order after anything
 * already queued on it. The buffer must stay valid until NIC_EV_SENT with the
 * same cookie. Returns 0, -ENOTCONN if conn is gone (no SENT event follows),
 * or -ENOBUFS if the per-connection queue is full (retry later).
 */
int nic_send(struct nic *n, uint32_t conn, const void *data, uint32_t len, void *cookie);

/*
 * Flow control: stop (paused true) or resume receiving on conn, for a
 * connection whose requests pile up faster than they finish. While paused
 * the backend arms no receive, so bytes wait in the kernel's socket buffer
 * and TCP slows the sender down; NIC_EV_DATA already under way may still be
 * delivered. Idempotent; a stale handle is ignored.
 */
void nic_pause(struct nic *n, uint32_t conn, bool paused);

/*
 * The peer's address of conn as Kafka prints a client host: "/" + the IP
 * literal ("/127.0.0.1", "/::1"), NUL-terminated in buf (cap bytes, 48 is
 * always enough). For diagnostics (DescribeGroups), not the data path.
 * Returns the length, or -ENOTCONN / -ENOSPC.
 */
#define NIC_PEER_BYTES_MAX 48
int nic_conn_peer(struct nic *n, uint32_t conn, char *buf, size_t cap);

/* Close conn: queued sends are dropped (reported as SENT with -ECANCELED), then CLOSED. */
void nic_close(struct nic *n, uint32_t conn);

/*
 * Prepare SQEs for queued work (sends, re-armed receives/accepts). Called once
 * per loop iteration before the core submits its ring. Returns SQEs prepared.
 */
int nic_flush(struct nic *n);

/* The actual bound port (useful with port 0). */
uint16_t nic_local_port(const struct nic *n);

#endif
