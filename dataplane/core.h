/*
 * core.h - the data plane's per-core state (internal to dataplane/).
 *
 * Cores: with --cores N > 1, core 0 is the control core (topic catalog
 * changes, later the coordinators) and cores 1..N-1 are data cores: each is
 * a NIC core (owns the connections the kernel hands its listener) and a
 * shard core (owns the partitions that hash to it). With --cores 1 the one
 * core plays every role, through the same code and the same rings.
 *
 * Share nothing: a core touches only its own struct dp_core. Cores talk by
 * posting struct dp_msg to the SPSC ring of the (src, dst) pair; the reply
 * carries the requester's ctx pointer back, and memory is freed by the core
 * that allocated it.
 */
#ifndef SLUICE_DP_CORE_H
#define SLUICE_DP_CORE_H

#include <stdint.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <signal.h>
#include <assert.h>
#include <liburing.h>

#include "dp_limits.h"
#include "ring.h"
#include "kwire.h"
#include "kmsg.h"

struct nic;
struct st_io;
struct st_log;
struct txn_pstate;
struct txn_lso;
struct dp_txnc;
struct txn_meta;
struct dp_grp;
struct st_codec;

/* Owner core: a producer the coordinator allowed to write this partition in its transaction. */
struct dp_txn_allow {
	int64_t pid;
	int16_t epoch;
};

/* Limits: dp_limits.h. Tags of the core's own SQEs: */
#define DP_CORE_TAG             3u        /* user_data tag of the core's own SQEs */
#define DP_READ_TAG             4u        /* user_data tag of cold fetch reads (shard.c) */

enum dp_log_level { DP_LOG_ERROR, DP_LOG_WARN, DP_LOG_INFO, DP_LOG_DEBUG };

/* init only: parsed command line; read-only once cores start. */
struct dp_config {
	char listen_host[64];
	uint16_t listen_port;
	char advertised_host[64];
	uint16_t advertised_port;
	char data_dir[512];
	int cores;
	int log_level;
	int32_t default_partitions;
	bool auto_create;
	bool fsync;
	uint64_t segment_bytes;
	int64_t retention_bytes;
	int64_t retention_ms;
	uint32_t max_frame_bytes;
	int32_t node_id;
	int64_t producer_expiration_ms;  /* idle idempotent producers are forgotten after this */
	int64_t producer_snapshot_ms;    /* producer-state snapshot interval per partition */
	/* Test-only fault injection (off by default): after a Produce is appended,
	 * drop its response, or close the connection, with these per-mille odds. */
	uint32_t fault_drop_permille, fault_close_permille;
	uint32_t fault_marker_fail_permille; /* a marker answered as a failed write (not written), N/1000 */
	uint64_t fault_seed;
	int fault_txn_kill;              /* SIGKILL at a commit step: 1 after Prepare is durable,
	                                    2 after the first marker, 3 before Complete */
	uint32_t fetch_aborted_max;      /* test only: below DP_FETCH_ABORTED_MAX, to make reads cut */
	int32_t fault_offsets_delay_ms;  /* hold each transactional-offset write's completion this long */
	uint32_t test_producers_max;     /* test only, 0 = the limit: shrink each partition's producer state */
	uint32_t test_txn_open_max;      /* test only, 0 = the limit: shrink each partition's open transactions */
	int32_t txn_max_timeout_ms;
	int64_t txn_log_compact_records; /* compact __transaction_state beyond 2 records per id + this */
	int64_t txn_id_expiration_ms;    /* idle transactional ids are forgotten (tombstoned) after this */
	uint32_t txn_ids_max;            /* transactional ids tracked, <= TXN_IDS_MAX */
	int64_t offsets_retention_ms; /* committed offsets of groups without members expire; -1 never */
};

enum dp_msg_type {
	DP_MSG_PRODUCE = 1,     /* conn core -> owner: append batches */
	DP_MSG_PRODUCE_DONE,    /* owner -> conn core */
	DP_MSG_FETCH,           /* conn core -> owner: read into the lent buffer */
	DP_MSG_FETCH_DONE,
	DP_MSG_WATCH,           /* conn core -> owner: tell me when HW passes offset */
	DP_MSG_WATCH_FIRE,
	DP_MSG_LIST,            /* ListOffsets */
	DP_MSG_LIST_DONE,
	DP_MSG_CREATE,          /* data core -> control: create topic */
	DP_MSG_CREATE_DONE,
	DP_MSG_DELETE,          /* data core -> control: delete topic */
	DP_MSG_DELETE_DONE,
	DP_MSG_TOPIC_ADD,       /* control -> every data core */
	DP_MSG_TOPIC_ADD_ACK,
	DP_MSG_TOPIC_DEL,
	DP_MSG_TOPIC_DEL_ACK,
	DP_MSG_INIT_PID,        /* data core -> control: InitProducerId (idempotent) */
	DP_MSG_INIT_PID_DONE,
	DP_MSG_TXN_REQ,         /* data core -> control: a coordinator request (req lent until the reply) */
	DP_MSG_TXN_DONE,
	DP_MSG_TXN_ADD,         /* control -> owner: pid/epoch may write this partition in its txn */
	DP_MSG_TXN_ADD_ACK,
	DP_MSG_TXN_MARKER,      /* control or WriteTxnMarkers -> owner: append COMMIT/ABORT */
	DP_MSG_TXN_MARKER_DONE,
	DP_MSG_DESCRIBE_PRODUCERS, /* data core -> owner: list this partition's producers */
	DP_MSG_DESCRIBE_PRODUCERS_DONE,
	DP_MSG_GROUP_REQ,       /* data core -> control: a group request (req lent until the reply) */
	DP_MSG_GROUP_DONE,
	DP_MSG_GROUP_GONE,      /* data core -> control: a lent JoinGroup/SyncGroup's client left */
};

/* DP_MSG_CREATE: check everything a create checks, but create nothing (CreateTopics validateOnly). */
#define DP_F_VALIDATE_ONLY 2

/* What an append's cookie is: the first byte of every cookie given to st_log_append. */
enum dp_cookie_kind {
	DP_COOKIE_PRODUCE = 1,   /* struct dp_append (shard.c) */
	DP_COOKIE_MARKER,        /* struct dp_marker (shard.c) */
	DP_COOKIE_COORD,         /* coordinator log write (txncoord.c) */
	DP_COOKIE_GROUP,         /* committed-offset write (group.c) */
};

/* Owner core: a parked fetch waiting for this partition's HW to move. */
struct dp_waiter {
	uint16_t core;
	uint32_t gen;
	void *ctx;
	int64_t offset;
	int64_t deadline_ms;
	int8_t isolation;             /* 1: wait for the LSO, not the HW */
};

/* Fetch buffers: where the aborted-transaction list starts after len bytes of records (layout: shard.c). */
#define DP_ABORTED_AT(len) (((len) + 7u) & ~7u)

/* Owner core: one partition this core owns. */
struct dp_part {
	struct st_log *log;
	struct txn_pstate *ps;        /* idempotent producers on this partition */
	struct txn_lso *lso;          /* open transactions (LSO) and aborted index */
	struct dp_txn_allow *allow;   /* (pid, epoch) the coordinator added to a transaction here */
	uint32_t nallow, allow_cap;
	struct dp_append *dupwait;    /* duplicates acked once the original is durable */
	int64_t snap_offset;          /* offset of the newest producer-state snapshot */
	bool snap_due;                /* the interval's snapshot has not started yet */
	char *dir;
	int64_t notified_hw;          /* HW last reported to waiters */
	uint32_t reads;               /* cold reads in flight on this partition (a delete waits) */
	int64_t offline_ms;           /* when its log failed (disk full, I/O error); 0: online */
	int64_t probe_ms;             /* next try to bring it back (shard timer) */
	int32_t probe_backoff_ms;
	uint64_t refused;             /* appends refused while offline, logged when it is back */
	uint32_t nwaiters;
	struct dp_waiter waiters[DP_WAITERS_PER_PART];
};

/* Every core: its own copy of one catalog entry (changed only by control messages). */
struct dp_topic {
	bool live;
	bool deleting;                /* delete under way: refuse produces */
	uint32_t gen;                 /* bumped when the slot is reused */
	uint32_t hash;                /* xxHash32 of the name: ownership */
	int32_t nparts;
	uint16_t name_len;
	char name[DP_TOPIC_NAME_MAX + 1];
	struct dp_part **parts;       /* [nparts]; non-NULL only for owned partitions */
	bool del_wait;                /* TOPIC_DEL taken; closed once its partitions' I/O is done */
	uint16_t del_src;             /* ... and acknowledged to this core with this ctx */
	void *del_ctx;
};

struct dp_req;
struct dp_read;
struct nic_ev;
struct dp_ctrl;

/* NIC core: one client connection. */
struct dp_conn {
	uint32_t handle;              /* nic handle; 0 = free slot */
	bool closing;                 /* nic_close() called or peer gone */
	bool closed;                  /* NIC_EV_CLOSED seen */
	uint8_t size_buf[4];
	uint32_t size_have;
	uint8_t *frame;               /* frame being assembled (pool buffer) */
	uint32_t frame_len, frame_have;
	struct dp_req *q_head, *q_tail; /* requests in arrival order */
	uint32_t nreqs;
	uint32_t sends_inflight;
	bool paused;                  /* too many requests unfinished: reads stopped (nic_pause) */
	bool pool_wait;               /* paused for the core's empty pool (dp_conn_timer resumes it) */
	bool draining;                /* the peer left while paused: what it sent is still processed */
	bool resuming;                /* inside conn_resume: the slot must not be freed under it */
	bool drain_slot;              /* counted in the core's ndraining */
	uint8_t *stash;               /* bytes received while paused, not yet framed (pool buffer) */
	uint32_t stash_len, stash_cap;
	uint32_t frame_cap;           /* bytes k->frame can take; grows as the frame arrives */
	uint64_t held_bytes;          /* held by its requests: frames, arenas, fetch buffers, answers (dp_limits.h) */
	uint64_t unsent_bytes;        /* of those, answers not yet sent */
	uint64_t buf_bytes;           /* its own buffers: the frame being read and the stash */
};

/* Control core: a topic create/delete waiting for every data core's ack. */
struct dp_ctrl_op {
	bool used;
	uint16_t req_core;
	void *req_ctx;
	uint32_t req_idx, req_gen;
	uint32_t topic_id;
	uint32_t acks_left;
	int16_t err;
	uint16_t reply_type;
	bool removing;                /* a delete, or a failed create taken back: free the slot at the end */
};

/* Control core: the producer-id allocator (pid.c). */
struct dp_pid_write;
struct dp_pids {
	const char *dir;
	int64_t next, end;            /* ids [next, end) are recorded and unused */
	int dirfd;                    /* the data directory, where the file lives */
	int64_t writing;              /* the block end being recorded (io_uring), -1 none */
	struct dp_pid_write *w;       /* that write (pid.c), allocated at init */
};

/* One core. Everything here belongs to that core's thread. */
struct dp_core {
	int id;
	struct dp_broker *b;
	bool is_control, is_data;
	int data_index;               /* 0..ndata-1 for data cores */
	struct io_uring ring;
	struct nic *nic;
	struct st_io *io;
	int efd;                      /* wake-up eventfd */
	uint64_t efd_buf;
	_Atomic int sleeping;         /* written by this core, read by senders */
	int64_t now_ms;
	uint64_t loops, busy_loops;
	uint64_t rng;                 /* xorshift state for fault injection */

	struct dp_topic *topics;      /* [DP_TOPICS_MAX] */
	uint32_t topics_end;          /* one past the highest live slot: walks over topics stop here */
	uint16_t *topic_index;        /* [DP_TOPIC_INDEX_SLOTS] topic id + 1, 0 empty */

	struct st_codec *codec;       /* data cores: decompressors for the produce-time records check */
	struct dp_conn *conns;        /* [DP_CONN_SLOTS], taken from conn_free */
	uint16_t *conn_map;           /* [DP_CONNS_MAX]: nic handle index -> slot of its open connection */
	uint16_t *conn_free;          /* [DP_CONN_SLOTS] stack of free slots */
	uint32_t conn_free_n;
	uint32_t ndraining;           /* closed slots still carrying out stashed requests */
	struct dp_conn detached;      /* owns the requests of closed connections until they come back */
	uint64_t held_bytes;          /* all requests' held bytes on this core (dp_limits.h) */
	struct dp_req *reqs;          /* [DP_REQS_MAX] pool */
	struct dp_req *req_free;
	struct dp_req *parked;        /* fetches waiting (long poll) */
	uint32_t npool_wait;          /* connections paused for the core's request pool or byte budget */
	uint32_t resume_next;         /* slot dp_conn_timer resumes waiters from (round robin) */

	/* Messages that did not fit in a full ring, per destination. */
	struct dp_msg *backlog[DP_CORES_MAX];
	uint32_t backlog_n[DP_CORES_MAX], backlog_cap[DP_CORES_MAX];

	/* Control core only. */
	struct dp_ctrl *ctrl;
	struct dp_pids ctrl_pids;
	struct dp_txnc *txnc;         /* transaction coordinator (txncoord.c) */
	struct dp_grp *grp;           /* group coordinator (group.c) */

	/* Owner side produce bookkeeping: free list of append groups. */
	struct dp_append *append_free;
	int64_t next_retention_ms;
	int64_t next_snapshot_ms;
	uint32_t snaps_inflight;      /* producer snapshots being written (<= DP_SNAPSHOTS_INFLIGHT_MAX) */
	bool snap_round_open;         /* a partition still waits for this round's snapshot */
	uint32_t ndel_wait;           /* topics with del_wait set (a flag per catalog slot: no queue) */
	struct dp_read *reads;        /* [DP_READS_MAX] cold fetch reads (shard.c) */
	struct dp_read *read_free;
	uint32_t reads_inflight;      /* retention and topic deletes wait for these */
	uint64_t cold_reads;          /* fetch reads that went to the disk (logged at exit) */
	uint64_t state_full_refused;  /* ... how many so far */
	uint64_t aborted_cut_reads;   /* read_committed reads ended early for DP_FETCH_ABORTED_MAX (logged at exit) */
	uint64_t aborted_one_batch_reads; /* ... of them, to the first batch alone */
};

/* init only: the whole broker. */
struct dp_broker {
	struct dp_config cfg;
	int ncores, ndata, first_data;
	struct dp_core *cores[DP_CORES_MAX];
	struct dp_ring **rings;       /* [src * ncores + dst] */
	volatile sig_atomic_t *stop;
	_Atomic int *ready;           /* cores that finished setup (+1000 on failure) */
	int64_t partitions_max;       /* what the fd budget holds (dp_fd_budget_init) */
};

/* Owner core: one partition's share of a produce request, until appended. */
struct dp_append {
	uint8_t kind;                 /* DP_COOKIE_PRODUCE: keep first */
	struct dp_append *next_free;
	uint16_t src;
	void *ctx;
	uint32_t idx;
	uint32_t left;                /* batches not yet durable */
	int16_t err;
	int64_t base_offset;
	struct dp_part *part;
	void *out;                    /* requester's response slot, echoed back */
	struct dp_append *dup_next;   /* on the partition's dupwait list */
	int64_t dup_until;            /* reply once the durable offset reaches this */
};

/* log.c */
extern _Thread_local int dp_log_core;
extern int dp_log_level;
void dp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define DP_ERR(...)  dp_log(DP_LOG_ERROR, __VA_ARGS__)
#define DP_WARN(...) dp_log(DP_LOG_WARN, __VA_ARGS__)
#define DP_INFO(...) do { if (dp_log_level >= DP_LOG_INFO) dp_log(DP_LOG_INFO, __VA_ARGS__); } while (0)
#define DP_DBG(...)  do { if (dp_log_level >= DP_LOG_DEBUG) dp_log(DP_LOG_DEBUG, __VA_ARGS__); } while (0)
/*
 * Rate-limited lines (log.c): for anything a client can make us log
 * repeatedly. State per call site and core (thread-local, no sharing).
 */
struct dp_log_rl {
	int64_t window_ms;            /* start of the current window */
	uint32_t lines;               /* written in it */
	uint64_t suppressed;          /* not written since the window began */
};
void dp_log_rl(struct dp_log_rl *rl, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool dp_log_rl_admit(struct dp_log_rl *rl, int64_t now_ms, char *suffix, size_t cap); /* log.c's rule, for tests */
#define DP_LOG_RL(level, ...) do {                                                   \
		static _Thread_local struct dp_log_rl dp_rl_;                        \
		if (dp_log_level >= (level))                                         \
			dp_log_rl(&dp_rl_, (level), __VA_ARGS__);                    \
	} while (0)
#define DP_ERR_RL(...)  DP_LOG_RL(DP_LOG_ERROR, __VA_ARGS__)
#define DP_WARN_RL(...) DP_LOG_RL(DP_LOG_WARN, __VA_ARGS__)
#define DP_INFO_RL(...) DP_LOG_RL(DP_LOG_INFO, __VA_ARGS__)

/* buf.c: per-core size-class pool (any core, for its own buffers). */
void *dp_buf_get(size_t bytes);        /* aborts beyond DP_BUF_MAX_BYTES or without memory */
void *dp_buf_try_get(size_t bytes);    /* NULL instead: for sizes a client chose */
void  dp_buf_put(void *p);
void  dp_buf_drain(void);

/* core.c */
int  dp_core_run(struct dp_core *c);                       /* thread body */
void dp_send(struct dp_core *c, int dst, struct dp_msg *m); /* any core, to any core */
static inline int dp_owner_core(const struct dp_broker *b, uint32_t hash, int32_t partition)
{
	return b->first_data + (int)((hash + (uint32_t)partition) % (uint32_t)b->ndata);
}

int64_t dp_wall_ms(void);

/* catalog.c */
int  dp_catalog_init(struct dp_core *c);
int32_t dp_topic_find(const struct dp_core *c, const char *name, size_t len); /* -1 if none */
struct dp_topic *dp_topic_get(struct dp_core *c, uint32_t id, uint32_t gen);   /* NULL if gone */
int  dp_topic_install(struct dp_core *c, uint32_t id, uint32_t gen, const char *name, size_t len,
                      int32_t nparts);
void dp_topic_remove(struct dp_core *c, uint32_t id);
bool dp_topic_name_valid(const char *name, size_t len);
/* The coordinators' own logs: never a user topic (created, auto-created or produced to). */
bool dp_topic_internal(const char *name, size_t len);
/* Pure: partitions that nofile descriptors hold beside ndata cores' connections and the rest. */
int64_t dp_fd_partitions_max(uint64_t nofile, int ndata);
/* init only: raise RLIMIT_NOFILE's soft limit to the hard one and set b->partitions_max. */
void dp_fd_budget_init(struct dp_broker *b);
int  dp_scan_data_dir(struct dp_broker *b);              /* init only: recovered topics */
void dp_partition_dir(const struct dp_config *cfg, char *out, size_t cap, const char *topic,
                      size_t len, int32_t p);

/* shard.c: owner-side handlers */
void dp_shard_msg(struct dp_core *c, struct dp_msg *m);
/* Close and remove the topics whose delete waits and whose partitions are idle; returns how many. */
int  dp_shard_deletes(struct dp_core *c);
/* Returns how many owned partitions could not be opened (they stay offline). */
int  dp_shard_open_owned(struct dp_core *c, struct dp_topic *t, uint32_t id);
void dp_shard_close_topic(struct dp_core *c, struct dp_topic *t, bool delete_files);
void dp_shard_on_append(void *cookie, int status, int64_t base_offset);
void dp_shard_timer(struct dp_core *c);
/* A cold fetch read (DP_READ_TAG) completed. */
struct io_uring_cqe;
void dp_shard_read_complete(struct dp_core *c, const struct io_uring_cqe *cqe);

/* pid.c: control core */
int  dp_pid_init(struct dp_pids *p, const char *dir);
int64_t dp_pid_alloc(struct dp_pids *p, struct st_io *io);   /* -EAGAIN: no id recorded yet (retriable) */
void dp_pid_init_producer(struct dp_core *c, struct dp_msg *m);

/* txncoord.c: control core */
/*
 * Control core setup: open a coordinator's own log DATA/name (created if
 * missing; its path into dir) and hand every stored batch to load (see
 * st_log_read_batches). Returns 0 or -errno, logged as `what`'s failure.
 */
struct st_batch_hdr;
int  dp_internal_log_open(struct dp_core *c, const char *name, const char *what, char *dir, size_t dir_cap,
                          struct st_log **log,
                          int (*load)(void *arg, const uint8_t *batch, size_t len, const struct st_batch_hdr *h),
                          void *arg);
int  dp_txnc_start(struct dp_core *c);      /* core setup: load and finish interrupted work */
void dp_txnc_msg(struct dp_core *c, struct dp_msg *m);
void dp_txnc_on_write(void *cookie, int status);
void dp_txnc_timer(struct dp_core *c);
void dp_txnc_stop(struct dp_core *c);
uint32_t dp_topic_hash(const char *name, size_t len);
/* group.c: control core, the group coordinator */
int  dp_group_start(struct dp_core *c);     /* core setup: load committed offsets */
void dp_group_msg(struct dp_core *c, struct dp_msg *m);
void dp_group_on_write(void *cookie, int status);
void dp_group_timer(struct dp_core *c);
void dp_group_stop(struct dp_core *c);
/* A transaction of pid that staged offsets for group ended: apply (commit) or drop them. */
void dp_group_txn_end(struct dp_core *c, const char *group, size_t glen, int64_t pid, bool commit);
/* The transaction coordinator's entry for a transactional id / a producer id (NULL: none). */
struct txn_meta *dp_txnc_find(struct dp_core *c, const char *id, size_t len);
struct txn_meta *dp_txnc_find_pid(struct dp_core *c, int64_t pid);
/* control.c: control core's catalog, for the coordinator */
bool dp_ctrl_topic(struct dp_core *c, const char *name, size_t len, int32_t partition,
                   uint32_t *id, uint32_t *gen, uint32_t *hash);

/* shard.c: transactions on the owner */
void dp_shard_txn_msg(struct dp_core *c, struct dp_msg *m);
void dp_shard_on_marker(void *cookie, int status);

/* control.c */
void dp_control_msg(struct dp_core *c, struct dp_msg *m);

/* conn.c */
void dp_conn_event(struct dp_core *c, const struct nic_ev *ev);
void dp_req_complete_part(struct dp_core *c, struct dp_msg *m);
void dp_conn_timer(struct dp_core *c);
void dp_conns_shutdown(struct dp_core *c);

#endif
