/*
 * control_internal.h - the control core's own types and the calls between
 * its parts (inside dataplane/control/ only). Locality: control core.
 */
#ifndef SLUICE_DP_CONTROL_INTERNAL_H
#define SLUICE_DP_CONTROL_INTERNAL_H

#include "control.h"
#include "log.h"   /* st_log, st_compaction, st_append_cb */

/* The services' handlers (dp_control_provide): control.c, txncoord.c, group.c. */
void dp_control_msg(struct dp_core *c, struct dp_msg *m);
void dp_txnc_msg(struct dp_core *c, struct dp_msg *m);
/* init only: the group coordinator's services (a handler per kind of call, call.h) run on core. */
void dp_group_provide(struct dp_broker *b, int core);
void dp_pid_init_producer(struct dp_core *c, struct dp_msg *m);

/* The coordinators' parts in the loop (control_role.c). */
int  dp_txnc_start(struct dp_core *c);      /* core setup: load and finish interrupted work */
size_t dp_txnc_write_bytes(void);          /* init only: one log write record of its pool (budget) */
void dp_txnc_timer(struct dp_core *c);
void dp_txnc_stop(struct dp_core *c);
void dp_txnc_destroy(struct dp_core *c);   /* after stop: frees the table and its pools */
int  dp_group_start(struct dp_core *c);     /* core setup: load committed offsets */
void dp_group_timer(struct dp_core *c);
void dp_group_stop(struct dp_core *c);
void dp_group_destroy(struct dp_core *c);   /* after stop: frees the tables */
/* The transaction log's write completions (st_log_append_cb; group.c has one per kind of write). */
void dp_txnc_on_write(void *cookie, int status, int64_t base_offset);

/* Control core: a topic create/delete waiting for every data core's ack. */
struct dp_ctrl_op {
	bool used;
	uint16_t req_core;
	dp_msg_fn req_reply;          /* the request's: runs the answer on req_core */
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
	bool exhausted;               /* no block fits below DP_PID_END_MAX: said once (pid.c) */
	struct dp_pid_write *w;       /* that write (pid.c), allocated at init */
};

/* pid.c */
int  dp_pid_init(struct dp_pids *p, const char *dir);
/* -EAGAIN: no id recorded yet (retriable); -ENOSPC: every id was issued (for good) */
int64_t dp_pid_alloc(struct dp_pids *p, struct st_io *io);

/* clog.c: a coordinator's own log (__transaction_state, __consumer_offsets). */
struct dp_clog {
	const char *name;             /* "transaction log", "offsets log": its log lines */
	struct st_log *log;
	uint64_t records;             /* records in the log (loaded + written since the last compaction began) */
	struct st_compaction compact; /* rewrite of every live key, then the old segments go */
	uint32_t cursor;              /* a compaction in slices: where the next slice looks on */
};
/*
 * A compaction's rewrites in flight at once, at most: it queues them a
 * slice a turn (the coordinator's timer), so that a log of many live keys
 * (100,000 transactional ids) neither empties the coordinator's write pool
 * (DP_COORD_WRITES_MAX), which every other write of that coordinator needs
 * meanwhile, nor storage's queue of appends per core (ST_IO_APPENDS_MAX,
 * 8192), which is shared by both coordinators' logs (and, with --cores 1,
 * the partitions). Before, one turn queued every key and past 8,192 the
 * rest were lost: the compaction kept the old segments, and failed the
 * other writes of that turn.
 */
#define DP_CLOG_COMPACT_SLICE   1024
_Static_assert(4 * DP_CLOG_COMPACT_SLICE <= DP_COORD_WRITES_MAX, "a slice leaves most of the write pool");
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
/* Append one built record batch; counts it. Returns its offset or -errno (nothing queued). */
int64_t dp_clog_append(struct dp_clog *l, uint8_t *batch, uint32_t len, st_append_cb cb, void *arg);
/* Build (key, val; val NULL: a tombstone) at buf and append it. Returns its bytes or -errno. */
int  dp_clog_write(struct dp_clog *l, uint8_t *buf, size_t cap, int64_t ts_ms, const void *key, size_t klen,
                   const uint8_t *val, int vlen, st_append_cb cb, void *arg);
/* Start a compaction if none runs and the log holds more than 2 records per live key + extra_records. */
bool dp_clog_compact_begin(struct dp_clog *l, uint64_t live, int64_t extra_records);
void dp_clog_compact_end(struct dp_clog *l);              /* every rewrite queued or lost */
/* How many rewrites this turn may queue: DP_CLOG_COMPACT_SLICE less those still in flight. */
uint32_t dp_clog_compact_room(const struct dp_clog *l);
void dp_clog_compact_done(struct dp_clog *l, int status); /* a rewrite's completion */
/*
 * A transaction of pid that staged offsets for group ended: apply (commit)
 * or drop them. waiter (or NULL): the transaction's marker fan-out, told
 * dp_txnc_offsets_waiting once per end written and dp_txnc_offsets_ended
 * once that end is durable or failed.
 */
struct txn_meta;
void dp_group_txn_end(struct dp_core *c, const char *group, size_t glen, int64_t pid, bool commit,
                      struct txn_meta *waiter);
void dp_txnc_offsets_waiting(struct txn_meta *m);
void dp_txnc_offsets_ended(struct dp_core *c, struct txn_meta *m);
/* pid has staged offsets whose end (dp_group_txn_end) is not durable yet: its next transaction waits. */
bool dp_group_txn_ending(struct dp_core *c, int64_t pid);
/* Serving: the log loaded and every partition's open transactions reconciled with it. */
bool dp_txnc_ready(struct dp_core *c);
/* The transaction coordinator's entry for a transactional id / a producer id (NULL: none). */
struct txn_meta *dp_txnc_find(struct dp_core *c, const char *id, size_t len);
struct txn_meta *dp_txnc_find_pid(struct dp_core *c, int64_t pid);
/* control.c: control core's catalog, for the coordinator */
bool dp_ctrl_topic(struct dp_core *c, const char *name, size_t len, int32_t partition,
                   uint32_t *id, uint32_t *gen, uint32_t *hash);
/* The name of the topic in catalog slot id at generation gen (len: its length), NULL if gone or going. */
const char *dp_ctrl_topic_name(struct dp_core *c, uint32_t id, uint32_t gen, size_t *len);

#endif
