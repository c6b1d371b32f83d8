/*
 * loop.h - what every core has, and what every role (conn/, shard/,
 * control/) may use of it: the per-core state, the message types, the
 * cross-core send, buffer pools, log lines and the core's catalog copy.
 *
 * Cores: core 0 plays the control role (control/: topic catalog changes,
 * producer ids, the coordinators); data cores each are a NIC core (conn/: the
 * connections the kernel hands its listener) and an owner core (shard/: the
 * partitions that hash to it). The layout (dp_layout): with the control role
 * shared, every one of the N cores is a data core and core 0 plays control
 * beside data, as --cores 1's one core plays every role, through the same
 * code and the same rings; with it on its own core, cores 1..N-1 are the data
 * cores. broker.c gives each core its roles (struct dp_role); the loop runs
 * their hooks without knowing what they are.
 *
 * Share nothing: a core touches only its own struct dp_core. Cores talk by
 * posting struct dp_msg to the SPSC ring of the (src, dst) pair. A message
 * carries the function it runs where it arrives (fn) and, if it is a
 * request, the one its answer runs back on the sender (reply); the answer
 * carries the requester's ctx pointer back, and memory is freed by the core
 * that allocated it. dp_core's fields are grouped by the role that uses
 * them; a role touches only its own and the shared ones.
 */
#ifndef SLUICE_DP_LOOP_H
#define SLUICE_DP_LOOP_H

#include <stdint.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <assert.h>
#include <liburing.h>

#include "dp_limits.h"
#include "names.h"   /* topic and partition directory names */
#include "topicconf.h"   /* a topic's configs */
#include "read_wait.h"   /* the shard's read-slot wait queue */
#include "ring.h"

struct nic;
struct st_io;
struct st_log;
struct txn_pstate;
struct txn_lso;
struct dp_txnc;
struct txn_meta;
struct dp_grp;
struct st_codec;

/* Limits: dp_limits.h. */

/* Test only (--fault-delete-kill): where a topic delete SIGKILLs the broker. */
enum dp_fault_delete { DP_FAULT_DELETE_NONE, DP_FAULT_DELETE_MID, DP_FAULT_DELETE_INTENT };

enum dp_log_level { DP_LOG_ERROR, DP_LOG_WARN, DP_LOG_INFO, DP_LOG_DEBUG };

/* init only: parsed command line; read-only once cores start. */
struct dp_config {
	char listen_host[64];
	uint16_t listen_port;
	char advertised_host[64];
	uint16_t advertised_port;
	char data_dir[512];
	int cores;                    /* 0: one per online CPU (main.c resolves it) */
	int control_core;             /* enum dp_control_core: --control-core */
	int log_level;
	int32_t default_partitions;
	bool auto_create;
	bool fsync;
	uint32_t prealloc_bytes;          /* segment space reserved ahead of the appends (st_io_config) */
	bool direct_io;                   /* appends written O_DIRECT (st_io_config.direct; --direct-io) */
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
	uint32_t fault_call_refuse_permille; /* a coordinator call's buffer refused (call.h), N/1000 */
	uint64_t fault_seed;
	int fault_delete_kill;           /* SIGKILL during a topic delete: enum dp_fault_delete */
	int fault_txn_kill;              /* SIGKILL at a commit step: 1 after Prepare is durable,
	                                    2 after the first marker, 3 before Complete; 4 no
	                                    AddPartitions record written, SIGKILL at EndTxn */
	uint32_t fetch_aborted_max;      /* test only: below DP_FETCH_ABORTED_MAX, to make reads cut */
	int32_t fault_offsets_delay_ms;  /* hold each transactional-offset write's completion this long */
	uint32_t fault_prepare_fail;     /* the first N Prepare* writes fail: even ones refused, odd ones
	                                    reported failed at completion */
	uint32_t fault_add_fail;         /* the same for AddPartitionsToTxn's writes */
	uint32_t fault_init_fail;        /* the same for InitProducerId's writes */
	uint32_t fault_conf_sync_fail;   /* the first N config alters' files renamed, their directory sync failed */
	uint32_t fault_marker_write_fail;/* per data core, the first N markers' log writes fail once queued */
	int32_t fault_marker_delay_ms;   /* act on each durable marker this late, as a slow disk would */
	uint32_t test_producers_max;     /* test only, 0 = the limit: shrink each partition's producer state */
	uint32_t test_txn_open_max;      /* test only, 0 = the limit: shrink each partition's open transactions */
	uint32_t test_xmsg_credits;      /* test only, 0 = DP_XMSG_CREDITS: shrink cross-core credit */
	uint32_t test_appends_max;       /* test only, 0 = DP_APPENDS_MAX: shrink each core's append pool */
	uint32_t test_reads_max;         /* test only, 0 = DP_READS_MAX: shrink each core's read slots */
	uint32_t test_txn_allows_max;    /* test only, 0 = DP_TXN_ALLOWS_MAX: shrink each core's grant pool */
	uint32_t txn_state_mib;          /* per data core, the producer and transaction state pool (MiB) */
	uint32_t group_state_mib;        /* control core: the group coordinator's state pool (MiB) */
	int64_t partitions_max;          /* --partitions-max: partitions the broker holds at most */
	uint32_t test_txn_state_bytes;   /* test only, 0 = txn_state_mib: a pool of these bytes instead */
	bool print_budget;               /* --print-budget: print the memory budget and exit */
	int32_t idle_spin_us;            /* --idle-spin-us: busy-poll after the last work; -1 = main.c's default */
	int32_t txn_max_timeout_ms;
	int64_t txn_log_compact_records; /* compact __transaction_state beyond 2 records per id + this */
	int64_t txn_id_expiration_ms;    /* idle transactional ids are forgotten (tombstoned) after this */
	uint32_t txn_ids_max;            /* transactional ids tracked, <= TXN_IDS_MAX */
	uint32_t txn_tps_max;            /* partitions in all open transactions' lists (a pool) */
	uint32_t txn_groups_max;         /* groups in all open transactions' lists (a pool) */
	int64_t offsets_retention_ms; /* committed offsets of groups without members expire; -1 never */
	int32_t group_initial_delay_ms; /* an Empty group's first rebalance waits this long (Kafka's
	                                 * group.initial.rebalance.delay.ms); 0 none */
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
	DP_MSG_DELREC,          /* DeleteRecords: conn core -> owner: raise the log start */
	DP_MSG_DELREC_DONE,
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
	DP_MSG_TXN_REQ,         /* data core -> control: a transaction coordinator call (call.h) */
	DP_MSG_TXN_DONE,
	DP_MSG_TXN_ADD,         /* control -> owner: pid/epoch may write this partition in its txn */
	DP_MSG_TXN_ADD_ACK,
	DP_MSG_TXN_MARKER,      /* control or WriteTxnMarkers -> owner: append COMMIT/ABORT */
	DP_MSG_TXN_MARKER_DONE,
	DP_MSG_TXN_OPEN,        /* owner -> control, at start: a transaction open here (u.txn; answer: kept, or abort it) */
	DP_MSG_TXN_OPEN_ACK,
	DP_MSG_TXN_OPENS_DONE,  /* owner -> control, at start: every open transaction reported */
	DP_MSG_TXN_OPENS_DONE_ACK,
	DP_MSG_DESCRIBE_PRODUCERS, /* data core -> owner: list this partition's producers */
	DP_MSG_DESCRIBE_PRODUCERS_DONE,
	DP_MSG_GROUP_REQ,       /* data core -> control: a group coordinator call (call.h) */
	DP_MSG_GROUP_DONE,
	DP_MSG_GROUP_GONE,      /* data core -> control: the client of a JoinGroup/SyncGroup call left */
	DP_MSG_CREATE_PARTS,    /* data core -> control: CreatePartitions of one topic (u.topic.nparts: new count) */
	DP_MSG_CREATE_PARTS_DONE,
	DP_MSG_TOPIC_GROW,      /* control -> every data core: the topic now has u.topic.nparts partitions */
	DP_MSG_TOPIC_GROW_ACK,
	DP_MSG_ALTER_CONF,      /* data core -> control: alter a topic's configs (u.topic.conf: struct dp_topic_alter) */
	DP_MSG_ALTER_CONF_DONE,
	DP_MSG_TOPIC_CONF,      /* control -> every data core: the topic's configs are now *u.topic.conf */
	DP_MSG_TOPIC_CONF_ACK,
};

/* DP_MSG_CREATE: check everything a create checks, but create nothing (CreateTopics validateOnly). */
#define DP_F_VALIDATE_ONLY 2
/* DP_MSG_TXN_ADD: a grant of the producer's next transaction, behind its last decision's marker to
 * this partition (u.txn.coord_epoch: that decision's serial; shard.c decided_here). */
#define DP_F_TXN_AFTER 2


struct dp_topic {
	bool live;
	bool deleting;                /* delete under way: refuse produces */
	uint32_t gen;                 /* bumped when the slot is reused */
	uint32_t hash;                /* xxHash32 of the name: ownership */
	int32_t nparts;
	uint16_t name_len;
	char name[DP_TOPIC_NAME_MAX + 1];
	struct dp_part **parts;       /* [nparts]; non-NULL only for owned partitions */
	struct dp_topic_conf conf;    /* the topic's configs that change what the broker does (topicconf.h) */
	bool del_wait;                /* TOPIC_DEL taken; closed once its partitions' I/O is done */
	uint16_t del_src;             /* ... and acknowledged to this core with this ctx */
	void *del_ctx;
	dp_msg_fn del_reply;          /* ... running this */
};

/* The roles' own per-core state, defined in their folders (dp_core holds pointers). */
struct dp_req;
struct dp_read;
struct dp_conn;
struct dp_part;
struct dp_append;
struct dp_txn_allow;
struct dp_ctrl;
struct dp_pids;

struct io_uring_cqe;
struct dp_core;
struct dp_budget;

/*
 * A role's part in a core's loop. main.c gives each core the roles it plays
 * (dp_core_add_role: owner and NIC side on data cores, control on core 0);
 * the loop calls every role's hooks in that order without knowing what they
 * do. Any hook may be NULL. Locality: the core's own thread.
 */
struct dp_role {
	const char *name;
	int  (*start)(struct dp_core *c);        /* core setup; < 0 fails start-up */
	int  (*poll)(struct dp_core *c);         /* each turn, after completions: returns work done */
	int  (*settle)(struct dp_core *c, bool due); /* each turn, after messages (due: work done or a tick) */
	void (*timer)(struct dp_core *c);        /* every tick (1 ms) */
	bool (*ticking)(struct dp_core *c);      /* true: an idle core still wakes every tick */
	int  (*flush)(struct dp_core *c);        /* before the turn's io_uring_submit: returns work */
	void (*quiesce)(struct dp_core *c);      /* stop: first, before the core waits for its I/O */
	bool (*busy)(struct dp_core *c);         /* stop: the core waits (bounded) while this is true */
	void (*stop)(struct dp_core *c);         /* stop: after the wait, while the io_uring is up */
	void (*destroy)(struct dp_core *c);      /* stop: after the io_uring is gone */
	/* init only (main thread, before any core starts): its items of the memory budget (budget.c) */
	void (*budget)(const struct dp_config *cfg, struct dp_budget *bd);
};
#define DP_ROLES_MAX 4   /* roles one core plays */
#define DP_CQE_TAGS  16  /* user_data & 0xf: nic/nic.h's convention */
typedef void (*dp_cqe_fn)(struct dp_core *c, const struct io_uring_cqe *cqe);

/* One core. Everything here belongs to that core's thread. */
struct dp_marker;
struct st_trash;
struct dp_core {
	int id;
	struct dp_broker *b;
	bool is_control, is_data;
	int data_index;               /* 0..ndata-1 for data cores */
	struct io_uring ring;
	struct nic *nic;              /* conn/'s (NIC cores) */
	struct st_io *io;             /* storage I/O on this core's ring: every role's appends */
	int efd;                      /* wake-up eventfd */
	uint64_t efd_buf;
	_Atomic int sleeping;         /* written by this core, read by senders */
	/* The turn's clock (core.c's turn_clock): read once per loop iteration, so no handler reads
	 * the clock per request; dp_mono_ms() and dp_wall_ms() return these on a core's thread. */
	int64_t now_ms;               /* monotonic, ms */
	int64_t turn_us;              /* loop/: the clock at this turn's start (dp_core_step) */
	int64_t wall_ms;              /* wall clock, ms: now_ms + wall_offset_ms */
	int64_t wall_offset_ms;       /* loop/: wall minus monotonic, as last read */
	int64_t wall_sync_us;         /* loop/: when the wall clock is read again (DP_WALL_SYNC_MS) */
	int64_t idle_since_us;        /* loop/: the last turn that found work */
	int64_t next_timer_us;        /* loop/: when the roles' timers run next */
	struct io_uring *sim_ring;    /* DP_LOOP_SIM only: the simulator's disk ring for this core (seam.h) */
	const struct dp_role *roles[DP_ROLES_MAX]; /* what this core plays, in hook order */
	uint32_t nroles;
	dp_cqe_fn cqe_fn[DP_CQE_TAGS];  /* completions by tag (dp_core_on_cqe) */
	uint64_t loops, busy_loops;
	uint64_t rng;                 /* xorshift state for fault injection */

	/* Every core: its own copy of the catalog (catalog.c). */
	struct dp_topic *topics;      /* [DP_TOPICS_MAX] */
	uint32_t topics_end;          /* one past the highest live slot: walks over topics stop here */
	struct txn_htab *topic_index; /* DP_TOPIC_INDEX_SLOTS slots (never grows): uint16 topic id + 1, 0 empty */
	char *topic_texts;            /* [DP_TOPICS_MAX][DP_TOPIC_CONFIG_TEXT_BYTES_MAX]: each topic's config text
	                               * (conf.text points into its slot), so an alter never allocates */

	/* conn/ only (NIC side of a data core). */
	struct st_codec *codec;       /* data cores: decompressors for the produce-time records check */
	struct dp_conn *conns;        /* [DP_CONN_SLOTS], taken from conn_free */
	uint16_t *conn_map;           /* [DP_CONNS_MAX]: nic handle index -> slot of its open connection */
	uint16_t *conn_free;          /* [DP_CONN_SLOTS] stack of free slots */
	uint32_t conn_free_n;
	uint32_t ndraining;           /* closed slots still carrying out stashed requests */
	struct dp_conn *detached;     /* owns the requests of closed connections until they come back */
	uint64_t held_bytes;          /* all requests' held bytes on this core (dp_limits.h) */
	struct dp_req *reqs;          /* [DP_REQS_MAX] pool */
	struct dp_req *req_free;
	struct dp_req *parked;        /* fetches waiting (long poll) */
	struct dp_req *calls_again;   /* coordinator calls to send again in a larger arena (conn.c) */
	uint32_t npool_wait;          /* connections paused for the core's request pool or byte budget */
	uint32_t resume_next;         /* slot dp_conn_timer resumes waiters from (round robin) */
	uint32_t fetch_rot;           /* where fetch_round starts asking owners (round robin) */

	/* loop/: messages that did not fit in a full ring, per destination: a
	 * fixed queue of backlog_cap[dst] each (allocated at start-up), bounded
	 * by the credit of requests not yet answered (dp_limits.h). */
	struct dp_msg *backlog[DP_CORES_MAX];
	uint32_t backlog_head[DP_CORES_MAX], backlog_n[DP_CORES_MAX], backlog_cap[DP_CORES_MAX];
	uint32_t credits_out[DP_CORES_MAX]; /* requests sent to that core, not yet answered */
	uint64_t credit_refused;      /* fan-out messages refused for credit (logged at exit) */
	uint64_t credit_waits;        /* connections paused while credit was past half (conn.c) */
	uint64_t frames_waited;       /* frames that waited for room in the core's byte budget (conn.c) */
	uint64_t conns_reclaimed;     /* connections closed for the core's byte budget (conn.c) */
	uint64_t fires_dropped;       /* watch fires dropped at a full backlog (advisory) */

	/* control/ only (the control core). */
	struct dp_ctrl *ctrl;
	struct dp_pids *ctrl_pids;
	struct dp_txnc *txnc;         /* transaction coordinator (txncoord.c) */
	struct dp_grp *grp;           /* group coordinator (group.c) */

	/* shard/ only (owner side of a data core). Produce bookkeeping: free list
	 * of append records, from appends[b->appends_max] (shard_role.c, at start). */
	struct dp_append *append_free;
	struct dp_append *appends;
	uint64_t appends_refused;     /* batches refused for an empty append pool */
	/* Transaction grants (shard.c's allow lists): from allows[b->txn_allows_max]. */
	struct dp_txn_allow *allow_free;
	struct dp_txn_allow *allows;
	uint64_t allows_refused;      /* grants refused for an empty pool */
	uint64_t grants_held_back;    /* next transactions' grants refused before the last decision's marker (decided_here) */
	/* Producer tables and transaction indexes of the owned partitions (txn/arena.h): from this
	 * pool of cfg.txn_state_mib, reserved at start (shard_role.c). */
	struct txn_arena *txn_arena;
	struct st_trash *trash;       /* deleted partitions' files, removed off this core (storage/trash.h) */
	int64_t next_retention_ms;
	int64_t next_snapshot_ms;
	uint32_t snaps_inflight;      /* producer snapshots being written (<= DP_SNAPSHOTS_INFLIGHT_MAX) */
	bool snap_round_open;         /* a partition still waits for this round's snapshot */
	uint32_t ndel_wait;           /* topics with del_wait set (a flag per catalog slot: no queue) */
	struct dp_read *reads;        /* [DP_READS_MAX] cold fetch reads (shard.c) */
	struct dp_read *read_free;
	uint32_t reads_inflight;      /* retention and topic deletes wait for these */
	struct dp_read_waits read_waits; /* [DP_READ_WAITS_MAX] requests waiting for a free read slot (read.c) */
	uint64_t read_waited;         /* requests that waited there (logged at exit) */
	uint64_t read_waits_refused;  /* ... answered retriable instead, the queue full (logged at exit) */
	uint64_t blocking_reads;      /* blocking read syscalls on this core: the goal is 0 (logged at exit) */
	uint64_t cold_reads;          /* fetch reads that went to the disk (logged at exit) */
	uint64_t cold_lookups;        /* Fetch/ListOffsets header lookups read through the ring (read.c; logged at exit) */
	uint64_t cold_extends;        /* ... of them, to read a fetch's range on past its first headers */
	uint64_t state_full_refused;  /* ... how many so far */
	uint64_t aborted_cut_reads;   /* read_committed reads ended early for DP_FETCH_ABORTED_MAX (logged at exit) */
	uint64_t aborted_one_batch_reads; /* ... of them, to the first batch alone */
	uint64_t markers_applied_again; /* markers of a decision already recorded here: nothing changed (logged at exit) */
	/* Start-up's report of the open transactions to the coordinator (shard.c: dp_shard_report_opens):
	 * the cursor, over topics, their owned partitions and each one's open ones by first offset. */
	uint32_t opens_topic;
	int32_t opens_part;
	int64_t opens_after;
	bool opens_done;              /* every one reported and OPENS_DONE sent */
	bool txn_reconciled;          /* OPENS_DONE answered: the coordinator's start-up grants are all here */
	uint32_t opens_aborting;      /* aborts the coordinator asked for, not yet durable */
	bool opens_again;             /* one failed: the sweep starts over (OPENS_DONE waits for all) */
	uint64_t opens_reported, opens_aborted; /* reported; of them, aborted here as the coordinator said (logged) */
	uint32_t marker_write_faults; /* markers whose log write --fault-marker-write-fail failed so far */
	struct dp_marker *markers_held, *markers_held_tail; /* test only: durable markers acted on late
	                                 (--fault-marker-delay-ms), oldest first (shard.c) */
};

/*
 * Services other roles ask by name, not by function (so a role need not
 * include the provider's header, and a provider may later run elsewhere,
 * e.g. a coordinator on whichever broker leads its partition). The control
 * role provides them (dp_control_provide) before the cores start.
 */
enum dp_service {
	DP_SVC_CONTROL,   /* topic create/delete, idempotent InitProducerId */
	DP_SVC_TXN,       /* the transaction coordinator: a call (call.h) */
	/* The group coordinator: a service, so a handler, per kind of call (call.h). */
	DP_SVC_GROUP_JOIN,
	DP_SVC_GROUP_SYNC,
	DP_SVC_GROUP_HEARTBEAT,
	DP_SVC_GROUP_LEAVE,
	DP_SVC_GROUP_OFFSET_COMMIT,
	DP_SVC_GROUP_OFFSET_FETCH,
	DP_SVC_GROUP_TXN_OFFSET_COMMIT,
	DP_SVC_GROUP_DESCRIBE,
	DP_SVC_GROUP_LIST,
	DP_SVC_GROUP_DELETE,         /* DeleteGroups */
	DP_SVC_GROUP_OFFSET_DELETE,  /* OffsetDelete */
	DP_SVC_GROUP_GONE,   /* a JoinGroup/SyncGroup call's client left (no answer) */
	DP_SVCS
};
struct dp_service_at {
	int core;
	dp_msg_fn fn;
};

/* init only: the whole broker. */
struct dp_broker {
	struct dp_config cfg;
	int ncores, ndata, first_data;
	struct dp_core *cores[DP_CORES_MAX];
	struct dp_ring **rings;       /* [src * ncores + dst] */
	volatile sig_atomic_t *stop;
	_Atomic int *ready;           /* cores that finished setup (+1000 on failure) */
	int64_t partitions_max;       /* min(--partitions-max, what the fd budget holds) (dp_fd_budget_init) */
	bool partitions_by_flag;      /* ... and it is --partitions-max that bounds it */
	struct dp_service_at services[DP_SVCS]; /* where each service runs; read-only once cores start */
	uint32_t xmsg_credits;        /* DP_XMSG_CREDITS, or --test-xmsg-credits */
	uint32_t appends_max;         /* DP_APPENDS_MAX, or --test-appends-max */
	uint32_t txn_allows_max;      /* DP_TXN_ALLOWS_MAX, or --test-txn-allows-max */
};

/*
 * budget.c: init only. The itemised memory budget for cfg (sluiced
 * --print-budget; its total is logged at start-up): loop/'s own items, then
 * each role's (struct dp_role's budget hook), then the program's allowance.
 */
struct dp_budget;
void dp_budget_add(struct dp_budget *bd, const char *name, unsigned long long count, unsigned long long each,
                   const char *what);   /* what: a static string */
unsigned dp_budget_ndata(const struct dp_config *cfg);   /* data cores for cfg */
/*
 * Where the control role goes (--control-core). Shared: on core 0 beside a data role, so every
 * core takes appends (on a small machine a core of its own idles while the data cores saturate);
 * own: core 0 plays control only. Auto picks shared below DP_CONTROL_OWN_CORES_MIN cores.
 */
enum dp_control_core { DP_CONTROL_AUTO, DP_CONTROL_SHARED, DP_CONTROL_OWN };
/* Pure: the layout cfg asks for: how many data cores and the first of them (the rest follow). */
void dp_layout(const struct dp_config *cfg, int *ndata, int *first_data);
unsigned long long dp_budget_total(const struct dp_config *cfg, const struct dp_role *const *roles, unsigned nroles);
void dp_budget_print(const struct dp_config *cfg, const struct dp_role *const *roles, unsigned nroles, FILE *f);
/* log.c */
void dp_log_set_core(int core);   /* the calling thread's lines say "core N" */
/* The calling thread's lines take their time from these (a core's turn clock; NULL: read it). */
void dp_log_set_clock(const int64_t *now_ms, const int64_t *wall_ms);
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
/* NULL beyond DP_BUF_MAX_BYTES or without memory: every caller answers an
 * error or closes the connection, never aborts (there is no dp_buf_get). */
void *dp_buf_try_get(size_t bytes);
void  dp_buf_put(void *p);
void  dp_buf_drain(void);

/* core.c */
int  dp_core_run(struct dp_core *c);                       /* thread body: start, step until stop, stop */
/*
 * The loop in parts, for a driver that steps cores itself (the whole-broker
 * simulator, tests/sim/wsim.c, steps them all on one thread): start sets the
 * core up (< 0: failed); each step is one turn and returns the work it did
 * (0: idle); an idle core wants its next turn at dp_core_wake_us (its timer
 * when a role is ticking, else after DP_SLEEP_MAX_MS); stop tears it down.
 * Each sets dp_core_self() to c.
 */
int  dp_core_start(struct dp_core *c);
int  dp_core_step(struct dp_core *c);
int64_t dp_core_wake_us(struct dp_core *c);
void dp_core_stop(struct dp_core *c);
void dp_core_add_role(struct dp_core *c, const struct dp_role *role); /* init only */
/* A role's own SQEs: completions whose user_data & 0xf is tag go to fn (its start hook registers). */
void dp_core_on_cqe(struct dp_core *c, unsigned tag, dp_cqe_fn fn);
/* The calling core's turn clock (its monotonic ms); the clock itself off a core's thread. */
int64_t dp_mono_ms(void);
/* The calling thread's core, for callbacks that carry none (storage's append completions). */
struct dp_core *dp_core_self(void);
void dp_send(struct dp_core *c, int dst, struct dp_msg *m); /* any core, to any core: runs m->fn there */
/* Any core: may n more refusable requests go to dst (credit, dp_limits.h)? Counts a refusal. */
bool dp_send_room(struct dp_core *c, int dst, uint32_t n);
/*
 * A request: fn runs on core dst, and its answer (dp_answer) runs reply back
 * on this core. It holds one credit toward dst until that answer arrives
 * (DP_F_CREDIT, dp_limits.h), unless it is advisory (DP_F_ADVISORY: a watch,
 * whose answer may never come).
 */
/* Test only (the --fault-* flags): true with these odds per thousand, from the core's xorshift. */
static inline bool dp_fault(struct dp_core *c, uint32_t permille)
{
	if (!permille)
		return false;
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 7;
	c->rng ^= c->rng << 17;
	return c->rng % 1000 < permille;
}

static inline void dp_ask(struct dp_core *c, int dst, dp_msg_fn fn, dp_msg_fn reply, struct dp_msg *m)
{
	m->fn = fn;
	m->reply = reply;
	m->flags = (uint16_t)((m->flags & ~(DP_F_CREDIT | DP_F_ANSWER)) |
	                      (m->flags & DP_F_ADVISORY ? 0 : DP_F_CREDIT));
	dp_send(c, dst, m);
}
/* What an answer to req carries: the credit back if req held one, advisory if req was. */
static inline uint16_t dp_answer_flags(const struct dp_msg *req)
{
	return (uint16_t)((req->flags & DP_F_CREDIT ? DP_F_ANSWER : 0) | (req->flags & DP_F_ADVISORY));
}
/* The answer to req: out runs req's reply handler on the core req came from. */
static inline void dp_answer(struct dp_core *c, const struct dp_msg *req, struct dp_msg *out)
{
	uint16_t f = dp_answer_flags(req);   /* before out is written: it may be req */
	out->fn = req->reply;
	out->reply = NULL;
	out->flags = (uint16_t)((out->flags & ~(DP_F_CREDIT | DP_F_ANSWER | DP_F_ADVISORY)) | f);
	dp_send(c, req->src, out);
}
/* A request to a service wherever it runs (b->services: the role that provides it says where). */
static inline void dp_ask_service(struct dp_core *c, enum dp_service svc, dp_msg_fn reply, struct dp_msg *m)
{
	const struct dp_service_at *s = &c->b->services[svc];
	assert(s->fn);
	dp_ask(c, s->core, s->fn, reply, m);
}
/*
 * The answer to a request answered later, whose core and reply handler the
 * handler kept (an append, a topic delete, a coordinator call): it gives back
 * the credit the request held. Only for requests sent with dp_ask and not
 * advisory (every kept one is: produces, TOPIC_DEL, creates and deletes,
 * coordinator calls).
 */
static inline void dp_answer_to(struct dp_core *c, int core, dp_msg_fn reply, struct dp_msg *out)
{
	out->fn = reply;
	out->reply = NULL;
	out->flags = (uint16_t)((out->flags & ~(DP_F_CREDIT | DP_F_ADVISORY)) | DP_F_ANSWER);
	dp_send(c, core, out);
}
/* A message to a service that has no answer (so holds no credit: GROUP_GONE). */
static inline void dp_tell_service(struct dp_core *c, enum dp_service svc, struct dp_msg *m)
{
	const struct dp_service_at *s = &c->b->services[svc];
	assert(s->fn);
	m->fn = s->fn;
	m->reply = NULL;
	m->flags &= (uint16_t)~(DP_F_CREDIT | DP_F_ANSWER);
	dp_send(c, s->core, m);
}
/* init only: the capacity a backlog needs for credits requests (dp_limits.h's
 * sum); coordinator calls, and GROUP_GONE, only go to and from the control
 * core (core 0), so a backlog between two data cores needs no room for them. */
static inline uint32_t dp_backlog_msgs(uint32_t credits, bool control_pair)
{
	uint32_t lends = control_pair ? DP_REQS_MAX : 0;
	return 2u * (credits + lends + 2u) + lends + DP_BACKLOG_WATCH_MSGS;
}
static inline int dp_owner_core(const struct dp_broker *b, uint32_t hash, int32_t partition)
{
	return b->first_data + (int)((hash + (uint32_t)partition) % (uint32_t)b->ndata);
}

/* Wall-clock ms (Kafka's timestamps, expiry): the calling core's turn clock; the clock itself off a
 * core's thread. */
int64_t dp_wall_ms(void);

/* catalog.c */
int  dp_catalog_init(struct dp_core *c);
int32_t dp_topic_find(const struct dp_core *c, const char *name, size_t len); /* -1 if none */
struct dp_topic *dp_topic_get(struct dp_core *c, uint32_t id, uint32_t gen);   /* NULL if gone */
/* conf: the topic's configs (copied), NULL for none. */
int  dp_topic_install(struct dp_core *c, uint32_t id, uint32_t gen, const char *name, size_t len,
                      const struct dp_topic_conf *conf, int32_t nparts);
void dp_topic_remove(struct dp_core *c, uint32_t id);
/* An alter: t's configs become a copy of conf (its text into t's slot of c->topic_texts: never fails). */
void dp_topic_set_conf(struct dp_core *c, struct dp_topic *t, const struct dp_topic_conf *conf);
int  dp_topic_grow(struct dp_core *c, uint32_t id, uint32_t gen, int32_t nparts);
uint32_t dp_topic_hash(const char *name, size_t len);   /* ownership: dp_owner_core */
/* Pure: partitions that nofile descriptors hold beside ndata cores' connections and the rest. */
int64_t dp_fd_partitions_max(uint64_t nofile, int ndata, bool direct_io);
/* init only: raise RLIMIT_NOFILE's soft limit to the hard one and set b->partitions_max. */
void dp_fd_budget_init(struct dp_broker *b);
void dp_partition_dir(const struct dp_config *cfg, char *out, size_t cap, const char *topic,
                      size_t len, int32_t p);


#endif
