/*
 * sb.h: internal header of sluice-bench (bench/sluice_bench.c and bench/sb_*.c
 * only): limits, options, the connection transport, producers, consumers and
 * the run that ties them together.
 *
 * Shape of the program: one thread, one epoll set, non-blocking sockets.
 * Every connection keeps an in-order queue of the requests it sent and is
 * waiting on (Kafka answers a connection's requests in order, so the head of
 * the queue always owns the next frame). Producers and consumers put requests
 * into a connection's send buffer; one send() per connection per loop turn
 * writes whatever accumulated, so there is no syscall per record or per batch.
 * Everything is allocated at start-up; the loop itself never calls malloc.
 *
 * Locality: everything here runs on the main thread.
 */
#ifndef SLUICE_BENCH_SB_H
#define SLUICE_BENCH_SB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_hist.h"
#include "kmsg.h"
#include "kwire.h"

/* Limits, units last. */
enum {
	sb_connections_max = 1024,
	sb_partitions_max = 4096,
	sb_inflight_max = 256,            /* requests outstanding per connection */
	sb_batch_records_max = 100000,
	sb_stamp_bytes = 24,              /* value prefix: time, partition, connection, counter */
	sb_size_min = sb_stamp_bytes,
	sb_size_max = 1 << 20,            /* record value, bytes */
	sb_batch_bytes_max = 64 << 20,    /* one batch; brokers refuse frames above ~100 MiB */
	sb_key_digits_max = 18,           /* --key-count below 10^18 */
	sb_ctl_inflight_max = 4,          /* control requests queued beside produce/fetch */
	sb_ctl_bytes = 64 << 10,          /* send-buffer room for control requests */
	sb_ctl_resp_bytes = 4 << 20,      /* receive buffer of connections without fetches */
	sb_arena_bytes = 16 << 20,        /* decoded arrays of one response (Metadata of 4096 partitions) */
	sb_produce_prefix_bytes_max = 64 + 2 * 0x7fff, /* frame size, header, client id, txn id, topic */
	sb_fetch_bytes_min = 64 << 10,
	sb_fetch_bytes_max = 64 << 20,
	sb_fetch_total_bytes_max = 64 << 20, /* MaxBytes of one fetch request */
	sb_fetch_overhead_bytes = 256 << 10, /* frame beside the records: headers, aborted transactions */
	sb_aborted_max = 4096,            /* aborted transactions listed in one fetch answer */
	sb_retries_max = 5,               /* sends of one batch after a retriable error */
	sb_retry_backoff_ms = 20,
	sb_retries_said_max = 20,         /* retriable errors told on stderr; all are counted */
	sb_coord_retry_ms = 10,           /* CONCURRENT_TRANSACTIONS and friends */
	sb_coord_retry_max = 2000,        /* 20 s of them */
	sb_io_timeout_ms = 30000,         /* a start-up request, a connect */
	sb_drain_timeout_ms = 30000,      /* the answers still due after the end */
	sb_setup_retry_ms = 100,
	sb_setup_wait_ms = 30000,         /* topic leaders, coordinators */
	sb_produce_timeout_ms = 30000,    /* ProduceRequest.TimeoutMs */
	sb_txn_timeout_ms = 60000,        /* InitProducerId.TransactionTimeoutMs */
	sb_events_max = 256,              /* epoll events per wake */
	sb_name_bytes_max = 249,          /* Kafka's topic name limit */
	sb_host_bytes_max = 256,
	sb_proc_stat_bytes_max = 4096,    /* /proc/PID/stat: 52 numbers and a comm of at most 64 bytes */
};
_Static_assert(sb_stamp_bytes == 8 + 4 + 4 + 8, "stamp: time_us, partition, connection, counter");
_Static_assert((uint64_t)sb_batch_records_max * (sb_size_max + 32) > sb_batch_bytes_max,
	       "the batch limit is checked at start-up, not implied by the others");

/* Kafka API versions used (all non-flexible, so no tagged fields); the keys are kerr.h's KAPI_*. */
enum {
	SB_V_PRODUCE = 7,
	SB_V_FETCH = 11,
	SB_V_LIST_OFFSETS = 2,
	SB_V_METADATA = 4,
	SB_V_FIND_COORDINATOR = 2,
	SB_V_API_VERSIONS = 0,
	SB_V_CREATE_TOPICS = 4,
	SB_V_INIT_PRODUCER_ID = 1,
	SB_V_ADD_PARTITIONS = 1,
	SB_V_END_TXN = 1,
};

enum sb_workload { SB_WL_PRODUCE, SB_WL_CONSUME, SB_WL_E2E };
enum sb_mode { SB_MODE_PLAIN, SB_MODE_IDEMPOTENT, SB_MODE_TRANSACTIONAL };
enum sb_keys { SB_KEYS_NONE, SB_KEYS_SEQ, SB_KEYS_RANDOM };

/* Command line. Locality: init only, read-only afterwards. */
struct sb_opts {
	const char *bootstrap;
	const char *topic;
	const char *label;
	const char *csv;
	const char *txn_prefix;
	enum sb_workload workload;
	enum sb_mode mode;
	enum sb_keys keys;
	int partitions;          /* for --create */
	int replication;
	bool create;
	int connections;
	int inflight;
	int batch_records;
	int size;                /* record value bytes */
	uint64_t key_count;
	uint64_t seed;
	uint64_t txn_records;
	uint64_t abort_every;    /* 0: never */
	int8_t isolation;        /* 0 read_uncommitted, 1 read_committed */
	double rate;             /* records/s, 0: closed loop */
	double warmup_s, duration_s, interval_s;
	uint64_t count;          /* 0: run for duration_s */
	int16_t acks;
	int fetch_bytes;         /* per partition per fetch */
	int fetch_wait_ms;
	int fetch_partitions;    /* partitions per fetch request, 0: all of the connection's */
	int broker_pid;          /* --broker-pid: whose CPU time to report, 0: none */
};

/* MaxBytes of a fetch of n partitions: what the receive buffer is sized for. Locality: any. */
static inline int32_t sb_fetch_max_bytes(const struct sb_opts *o, int n)
{
	int64_t b = (int64_t)o->fetch_bytes * n;
	return b < sb_fetch_total_bytes_max ? (int32_t)b : sb_fetch_total_bytes_max;
}

/* Kind of a queued request, i.e. who handles its answer. */
enum sb_req_kind { SB_REQ_SYNC, SB_REQ_PRODUCE, SB_REQ_FETCH, SB_REQ_ADD_PARTITIONS, SB_REQ_END_TXN };

/*
 * One produce batch as the producer remembers it while it is in flight: enough
 * to rebuild the very same bytes for a retry (the records' content is a pure
 * function of these fields). Locality: main thread.
 */
struct sb_batch {
	uint32_t slot;           /* index into the producer's slots */
	uint32_t count;          /* records */
	int32_t seq;             /* base sequence, -1 without a producer id */
	uint32_t attempts;       /* sends so far */
	uint64_t counter;        /* per-slot counter of the first record */
	uint64_t no;             /* per-slot send number of this send (a retry gets a new one) */
	uint64_t intended_ns;    /* latency origin: scheduled (open loop) or actual first send time */
	int64_t ts_ms;           /* record timestamp, wall clock */
	uint64_t digest;         /* sum of sb_digest_record over the records */
};

/* A request awaiting its answer (or, with acks=0, its last byte written). Locality: main thread. */
struct sb_req {
	uint8_t kind;            /* enum sb_req_kind */
	bool expects_response;
	int16_t api_key, api_version;
	int32_t corr;
	uint64_t sent_ns;
	uint64_t wire_end;       /* c->wire_queued after this request: written once wire_sent reaches it */
	void *owner;             /* struct sb_prod or struct sb_cons */
	int32_t fpart;           /* fetch: partitions asked for */
	struct sb_batch b;       /* produce */
};

/*
 * One TCP connection. Send buffer: bytes [shead, stail) wait for send(); it is
 * sized at start-up for every request its owner may have outstanding at once.
 * Receive buffer: [rpos, rlen) is unread; frames handed out by sb_conn_frame
 * stay valid until the next sb_conn_read. Locality: main thread.
 */
struct sb_conn {
	int fd;
	int id;
	char addr[sb_host_bytes_max + 8];
	uint8_t *sbuf;
	size_t scap, shead, stail;
	uint64_t wire_queued, wire_sent;  /* bytes ever appended / ever written */
	uint8_t *rbuf;
	size_t rcap, rpos, rlen;
	struct sb_req *q;                 /* ring of requests in send order */
	uint32_t qcap, qhead, qlen;
	int32_t next_corr;
	bool epollout;                    /* EPOLLOUT is armed */
	int epfd;
};

/*
 * The one record batch all sends copy: a 61-byte header and --batch-records
 * records whose keys and values are patched per send. Record i's value starts
 * at val_off[i]; its key, key_len bytes, ends key_gap bytes before that value.
 * A batch of k < n records is the first rec_end[k] bytes. Locality: main
 * thread, read-only after start-up.
 */
struct sb_tpl {
	uint8_t *buf;
	uint32_t *rec_end;       /* n + 1 entries */
	uint32_t *val_off;       /* n entries */
	uint32_t n;
	uint32_t key_len;        /* 0 with --keys none (the key is null) */
	uint32_t key_gap;        /* from the key's first byte to the value's */
	int16_t attributes;
};

/*
 * One (connection, partition) pair of a producer: the sequence and the record
 * counter that make the pair's batches follow each other, and the retry state.
 * A retriable error on a batch dooms every batch of the slot sent after it (the
 * broker answers them OUT_OF_ORDER_SEQUENCE_NUMBER); the failed batch and the
 * doomed ones are resent in their original order, and the slot sends nothing
 * new until they are. Locality: main thread.
 */
struct sb_slot {
	int32_t partition;
	int32_t next_seq;        /* of the next new batch, mod 2^31 */
	uint64_t next_counter;   /* of the next new record */
	uint64_t next_no;        /* send number of the next send */
	uint64_t answered_no;    /* send number of the last answered batch + 1 */
	uint64_t doomed_below;   /* sends numbered below this were behind a failed one */
	uint32_t inflight;
	struct sb_batch *resend; /* ring, capacity inflight */
	uint32_t resend_head, resend_len;
	uint64_t resend_at_ns;
};

enum sb_txn_state {
	SB_TXN_IDLE,      /* no transaction open (or none used) */
	SB_TXN_ADDING,    /* AddPartitionsToTxn sent */
	SB_TXN_OPEN,      /* producing */
	SB_TXN_ENDING,    /* EndTxn sent */
	SB_TXN_DONE,      /* stopped: no further transaction */
};

/* One producer: a connection, its slots, its producer id. Locality: main thread. */
struct sb_prod {
	struct sb_run *run;
	int idx;
	struct sb_conn *conn;    /* produce requests */
	struct sb_conn *coord;   /* AddPartitionsToTxn, EndTxn (== conn when the same broker) */
	struct sb_slot *slots;
	int nslots;
	int rr;                  /* slot of the next new batch */
	uint32_t inflight;       /* produce requests not yet answered */
	int64_t pid;
	int16_t epoch;
	char txn_id[256];
	/* transactions */
	enum sb_txn_state txn;
	uint64_t txn_no;         /* 1-based number of the current transaction */
	uint64_t txn_left;       /* records still to issue in it */
	int txn_first, txn_nslots; /* slots added to it: txn_first .. + txn_nslots - 1 (mod nslots) */
	int txn_batches;         /* batches issued in it */
	bool txn_abort;          /* this one ends with an abort */
	uint64_t txn_acked, txn_digest; /* acknowledged records of the open transaction */
	uint64_t txn_retry_at_ns;       /* resend the coordinator request at this time (0: none) */
	uint32_t txn_retries;
	uint64_t end_sent_ns;
	uint64_t add_first_ns;   /* the transaction's first AddPartitionsToTxn sent (retries after it count in) */
	uint64_t add_done_ns;    /* ... answered without error: its batches may go */
};

/* One partition as a consumer follows it. Locality: main thread. */
struct sb_fpart {
	int32_t partition;
	bool busy;               /* a fetch is outstanding */
	int64_t offset;          /* next offset to fetch */
	int64_t high_watermark, last_stable;
};

/* One consumer connection and its partitions. Locality: main thread. */
struct sb_cons {
	struct sb_run *run;
	int idx;
	struct sb_conn *conn;
	struct sb_fpart *parts;
	int nparts;
	int rr;
	uint32_t inflight;
};

/* Figures of one interval, or of the whole measured part. Locality: main thread. */
struct sb_fig {
	uint64_t records, bytes, errors, commits, aborts;
	struct bench_hist lat;    /* per record, us */
	struct bench_hist commit; /* EndTxn(commit) round trip, us */
	/* A committed transaction's steps, us: AddPartitionsToTxn from its first send to its
	 * answer (back-offs of retries included), its batches (that answer to the EndTxn
	 * sent, i.e. to the last batch acknowledged), and the whole (first send to EndTxn's answer). */
	struct bench_hist add, open, txn;
	uint64_t coord_retries;   /* coordinator answers that asked to try again (CONCURRENT_TRANSACTIONS...) */
};

/* Everything of one run. Locality: main thread. */
struct sb_run {
	const struct sb_opts *o;
	int epfd;
	struct karena arena;      /* decoded arrays of the response being handled */
	char client_id[32];
	/* topic */
	int32_t nparts;
	char leader_host[sb_host_bytes_max];
	int leader_port;
	/* participants */
	struct sb_conn *boot;
	struct sb_conn *conns[3 * sb_connections_max + 1];
	int nconns;
	struct sb_prod *prods;
	int nprods;
	struct sb_cons *conss;
	int nconss;
	struct sb_tpl tpl;
	/* clock marks, CLOCK_MONOTONIC ns */
	uint64_t t_begin, t_measure, t_end, t_stop, iv_start, iv_next;
	bool stopping;            /* issue nothing new (producers) */
	bool cons_stopping;       /* fetch nothing new (consumers) */
	uint64_t wake_ns;         /* earliest timer asked for by a pump */
	/* open loop */
	uint64_t sched_records;   /* records issued so far: the next batch is due at sched_records / rate */
	int sched_rr;             /* producer offered the next due batch first */
	uint64_t behind_ns, behind_max_ns;
	/* totals, warm-up included */
	uint64_t issued;          /* records put into new batches */
	uint64_t acked_all;       /* records acknowledged by produce answers */
	uint64_t committed_all;   /* of them, in committed transactions (or all, without transactions) */
	uint64_t read_all;        /* records read (counted up to --count) */
	uint64_t read_extra;      /* records read beyond --count */
	uint64_t checksum;        /* produce: committed; consume/e2e: read */
	uint64_t aborted_skipped; /* read_committed: records of aborted transactions skipped */
	/* figures */
	struct sb_fig iv, sum;
	uint64_t last_measured_ns;
	/* --broker-pid: the broker's CPU ticks when the measured window opened (sb_cpu.c) */
	uint64_t broker_ticks0, broker_t0;
	bool broker_sampled;
	bool warned_compressed;
	uint32_t retries_said;
};

/* ---- sb_conn.c: transport ---------------------------------------------------------- */

/* Splits "host:port"; -EINVAL if malformed. Locality: any. */
int sb_split_addr(const char *addr, char *host, size_t host_cap, int *port);
/* Connects (blocking, bounded), then makes the socket non-blocking and adds it to
 * epfd (NULL for none). Buffers as given; qcap requests. 0 or -errno. Locality: init only. */
int sb_conn_open(struct sb_conn *c, int id, const char *host, int port, size_t scap, size_t rcap, uint32_t qcap,
		 int epfd);
/* Locality: init only (end of the run). */
void sb_conn_close(struct sb_conn *c);
/* n bytes at the send buffer's tail (compacting it first if that makes room), or NULL. Locality: main thread. */
uint8_t *sb_conn_reserve(struct sb_conn *c, size_t n);
/* Appends the n bytes just written at the reserved tail and queues req (copied; its
 * corr must be the one encoded). Returns the queued entry. Locality: main thread. */
struct sb_req *sb_conn_commit(struct sb_conn *c, size_t n, const struct sb_req *req);
/* Encodes header + body of a control request with the generic codec and queues it
 * as kind. 0, -ENOBUFS (no room), -EINVAL (encoding). Locality: main thread. */
int sb_conn_put_msg(struct sb_conn *c, int16_t key, int16_t ver, const struct kschema *s, const void *body,
		    enum sb_req_kind kind, void *owner, uint64_t now);
/* send() what is queued, once. 0 or -errno (the connection is lost). Locality: main thread. */
int sb_conn_flush(struct sb_conn *c);
/* Head request if it expects no answer and is all written: popped into *out. Locality: main thread. */
bool sb_conn_written(struct sb_conn *c, struct sb_req *out);
/* recv() once. Bytes read (0: nothing now), -ECONNRESET on EOF, -EMSGSIZE if a
 * frame cannot fit the buffer, -errno. Locality: main thread. */
int sb_conn_read(struct sb_conn *c);
/* Next complete answer: 1 with the request it answers popped into *req and *body on
 * its body; 0 if none is complete; -EPROTO if it answers nothing we sent. Locality: main thread. */
int sb_conn_frame(struct sb_conn *c, struct sb_req *req, struct kreader *body);
/* Sends one control request on an otherwise idle connection and waits for the
 * answer, decoded into out with r->arena. 0, -ETIMEDOUT, -EPROTO, -errno; says why on stderr.
 * Locality: init only. */
int sb_call(struct sb_run *r, struct sb_conn *c, int16_t key, int16_t ver, const struct kschema *rq,
	    const void *body, const struct kschema *rs, void *out);

/* ---- sb_setup.c: start-up ------------------------------------------------------------ */

/* Bootstrap, versions, topic, connections, producer ids, start offsets. 0 or -errno (said why). Locality: init only. */
int sb_setup(struct sb_run *r);
/* Kafka's name of an error code, or "?". Locality: any. */
const char *sb_err_name(int16_t code);

/* ---- sb_produce.c ---------------------------------------------------------------------- */

/* Builds r->tpl. 0 or -ENOMEM/-E2BIG. Locality: init only. */
int sb_tpl_init(struct sb_run *r);
/* Issues what the window and the schedule allow: resends first, then new batches
 * (closed loop: fill every window; open loop: the batches that are due). 0 or -errno. Locality: main thread. */
int sb_prods_pump(struct sb_run *r, uint64_t now);
/* Handles an answer addressed to a producer. 0 or -errno (said why). Locality: main thread. */
int sb_prod_on_answer(struct sb_prod *p, const struct sb_req *q, struct kreader *body, uint64_t now);
/* acks=0: counts what was written as acknowledged. Locality: main thread. */
void sb_prod_reap_written(struct sb_prod *p, uint64_t now);
/* True when nothing is outstanding and no transaction is open. Locality: main thread. */
bool sb_prods_idle(const struct sb_run *r);

/* ---- sb_consume.c ---------------------------------------------------------------------- */

/* Sends fetches for idle partitions, up to the window. 0 or -errno. Locality: main thread. */
int sb_conss_pump(struct sb_run *r, uint64_t now);
/* Handles a fetch answer. 0 or -errno (said why). Locality: main thread. */
int sb_cons_on_answer(struct sb_cons *cs, const struct sb_req *q, struct kreader *body, uint64_t now);
/* True when no fetch is outstanding. Locality: main thread. */
bool sb_conss_idle(const struct sb_run *r);

/* ---- sb_cpu.c: the broker's CPU time (--broker-pid) -------------------------------------- */

/* utime + stime (clock ticks) from the text of /proc/PID/stat; -EINVAL if malformed. Locality: any. */
int sb_cpu_parse_stat(const char *text, uint64_t *ticks);
/* The same from the live file; -errno (-ENOENT: the process is gone). Locality: main thread. */
int sb_cpu_read(int pid, uint64_t *ticks);
/* CPU figures of `ticks` (at hz per second) spent on `bytes` record value bytes over secs. */
struct sb_cpu_fig {
	double ms;         /* broker CPU time */
	double ms_per_mib; /* of it per MiB (2^20 bytes) of record values, 0 without bytes */
	double pct;        /* 100 = one core busy for the whole window */
};
/* Locality: any. */
struct sb_cpu_fig sb_cpu_fig_of(uint64_t ticks, long hz, uint64_t bytes, double secs);

/* ---- sluice_bench.c: figures --------------------------------------------------------- */

/* n measured records of `bytes` value bytes in all are done; lat_samples samples of
 * latency lat_us go into the histograms (n for produce, 1 per fetch or record otherwise). Locality: main thread. */
void sb_fig_records(struct sb_run *r, uint64_t n, uint64_t bytes, uint64_t lat_us, uint64_t lat_samples, uint64_t now);
/* One retriable error. Locality: main thread. */
void sb_fig_error(struct sb_run *r);
/* One transaction ended (commit round trip in us). Locality: main thread. */
void sb_fig_txn(struct sb_run *r, bool commit, uint64_t lat_us, bool measured);
/* A measured committed transaction's steps (struct sb_fig's add, open, txn), us. Locality: main thread. */
void sb_fig_txn_steps(struct sb_run *r, uint64_t add_us, uint64_t open_us, uint64_t txn_us);
/* A coordinator answer that asked to try again. Locality: main thread. */
void sb_fig_coord_retry(struct sb_run *r);

/* CLOCK_MONOTONIC in ns. Locality: any. */
uint64_t sb_now_ns(void);
/* CLOCK_REALTIME in ms (record timestamps). Locality: any. */
int64_t sb_wall_ms(void);

static inline void sb_wake_at(struct sb_run *r, uint64_t t)
{
	if (t < r->wake_ns)
		r->wake_ns = t;
}

static inline bool sb_kstr_eq(struct kstr s, const char *c, size_t n)
{
	return s.len >= 0 && (size_t)s.len == n && memcmp(s.ptr, c, n) == 0;
}

#endif
