/*
 * shard_internal.h - the owner side's own types (inside dataplane/shard/ only).
 * Locality: owner core.
 */
#ifndef SLUICE_DP_SHARD_INTERNAL_H
#define SLUICE_DP_SHARD_INTERNAL_H

#include "shard.h"
#include "log.h"
#include "lso.h"

/* user_data tag of the core's SQEs for cold fetch reads (dp_shard_read_complete). */
#define DP_READ_TAG             4u        /* user_data tag of cold fetch reads (shard.c) */
#define DP_LOOKUP_WARMS_MAX     16u       /* warm reads one Fetch/ListOffsets lookup waits for (read.c) */
/* ListOffsets by time reads the batch its time index found into a buffer of this size (one per
 * data core, beside the read slots) to find the record in it: twice Kafka's default
 * max.message.bytes (1048588), which librdkafka's and kafkajs's batches stay under. A larger batch
 * is answered by its header (its base offset and maxTimestamp), as the index alone would. */
#define DP_LIST_BATCH_BYTES_MAX (2u << 20)

/* Close and remove the topics whose delete waits and whose partitions are idle; returns how many. */
/* Append completions (st_log_append_cb): a produce's dp_append, a marker's dp_marker. */
void dp_shard_on_append(void *cookie, int status, int64_t base_offset);
void dp_shard_on_marker(void *cookie, int status, int64_t base_offset);
/* Shard timer, test only (--fault-marker-delay-ms): act on the held marker completions now due. */
void dp_shard_markers_due(struct dp_core *c);
int  dp_shard_deletes(struct dp_core *c);
/* Returns how many owned partitions could not be opened (they stay offline). */
int  dp_shard_open_owned(struct dp_core *c, struct dp_topic *t, uint32_t id, int32_t first);
void dp_shard_close_topic(struct dp_core *c, struct dp_topic *t, bool delete_files);
void dp_shard_timer(struct dp_core *c);
void dp_shard_report_opens(struct dp_core *c);   /* start-up: open transactions to the coordinator */
/* A cold fetch read (DP_READ_TAG) completed. */
struct io_uring_cqe;
void dp_shard_read_complete(struct dp_core *c, const struct io_uring_cqe *cqe);
/* The core's read slots, warm-read sink and ListOffsets batch buffer (read.c): made at the shard's start, freed at its
 * destroy; their bytes for the budget. */
int  dp_shard_reads_create(struct dp_core *c);
void dp_shard_reads_destroy(struct dp_core *c);
unsigned long long dp_shard_reads_bytes(void);

/* Owner core: a producer the coordinator allowed to write this partition in
 * its transaction. From the core's fixed pool (c->allows, shard_role.c), on
 * its partition's list, or on the core's free list. */
struct dp_txn_allow {
	int64_t pid;
	struct dp_txn_allow *next;
	int16_t epoch;
	int32_t after;    /* a grant of the next transaction: the decision serial it follows (shard.c decided_here), else 0 */
};

/* Every grant of a partition back to its core's pool (the partition is closed). */
void dp_shard_allow_clear(struct dp_core *c, struct dp_part *p);
/* What one partition holds before its producers, transactions and sealed segments grow it (the budget). */
unsigned long long dp_shard_partition_bytes(const struct dp_config *cfg);
/* The producer and transaction state pool of each data core (--txn-state-mib), in bytes. */
size_t dp_shard_txn_state_bytes(const struct dp_config *cfg);


/* Owner core: a parked fetch waiting for this partition's HW to move. */
struct dp_waiter {
	uint16_t core;
	dp_msg_fn reply;              /* the watch's: runs the fire on core */
	uint32_t gen;
	void *ctx;
	int64_t offset;
	int64_t deadline_ms;
	int8_t isolation;             /* 1: wait for the LSO, not the HW */
};

/* Fetch buffers: where the aborted-transaction list starts after len bytes of records (layout: shard.c). */
/* Owner core: one partition this core owns. */
struct dp_part {
	struct st_log *log;
	struct txn_pstate *ps;        /* idempotent producers on this partition */
	struct txn_lso *lso;          /* open transactions (LSO) and aborted index */
	struct dp_txn_allow *allow;   /* (pid, epoch) the coordinator added to a transaction here: a list */
	struct dp_append *dupwait;    /* duplicates acked once the original is durable */
	int64_t snap_offset;          /* offset of the newest producer-state snapshot */
	uint32_t markers_writing;     /* markers appended, not yet durable: no snapshot meanwhile */
	bool snap_due;                /* the interval's snapshot has not started yet */
	char *dir;
	int64_t notified_hw;          /* HW last reported to waiters */
	uint32_t reads;               /* cold reads in flight on this partition (a delete waits) */
	int64_t offline_ms;           /* when its log failed (disk full, I/O error); 0: online */
	int64_t probe_ms;             /* next try to bring it back (shard timer) */
	int64_t fault_hold_ms;        /* test only (--fault-marker-write-fail): no probe before a marker was
	                                 refused offline, or until then; 0 none */
	int32_t probe_backoff_ms;
	uint64_t refused;             /* appends refused while offline, logged when it is back */
	uint32_t nwaiters;
	struct dp_waiter waiters[DP_WAITERS_PER_PART];
	uint32_t ndelrec;             /* DeleteRecords waiting: only while its log's start write is in flight */
	bool delrec_busy;             /* answering them (one that arrives meanwhile only queues: shard.c) */
	struct dp_msg delrec[DP_DELREC_WAITS_PER_PART];   /* the requests, answered when it is durable */
};

/* Every core: its own copy of one catalog entry (changed only by control messages). */
/* Owner core: one partition's share of a produce request, until appended. */
struct dp_append {
	struct dp_append *next_free;
	uint16_t src;
	dp_msg_fn reply;              /* the request's: runs the answer on src */
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


/*
 * Shared by shard/'s files (shard.c: messages, appends, markers; read.c:
 * fetch reads and watches; partition.c: open, close, timer, deletes). They
 * keep the short names they had as statics in one shard.c; only shard/
 * sees them.
 */
struct dp_part *part_of(struct dp_core *c, const struct dp_msg *m, struct dp_topic **tp);
void shard_delete_records(struct dp_core *c, struct dp_msg *m);
/* The LSO as Kafka keeps it: never below the log start (a DeleteRecords past an open
 * transaction's first offset moves it up, UnifiedLog.maybeIncrementFirstUnstableOffset). */
static inline int64_t dp_part_lso(const struct dp_part *p, int64_t hw)
{
	int64_t lso = txn_lso_get(p->lso, hw), start = st_log_start_offset(p->log);
	return lso > start ? lso : start;
}
int16_t part_absent_err(struct dp_core *c, const struct dp_msg *m);   /* when part_of found none */
void reply(struct dp_core *c, const struct dp_msg *req, struct dp_msg *m, uint16_t type);
int64_t readable_end(const struct dp_part *p, int8_t isolation);
void wake_waiters(struct dp_core *c, struct dp_part *p, bool all);
void dupwait_check(struct dp_part *p);
void part_offline(struct dp_core *c, struct dp_part *p);    /* partition.c */
void shard_topic_del(struct dp_core *c, struct dp_msg *m);  /* partition.c */
void shard_fetch(struct dp_core *c, struct dp_msg *m);      /* read.c */
void shard_watch(struct dp_core *c, struct dp_msg *m);      /* read.c */
void shard_list(struct dp_core *c, struct dp_msg *m);       /* read.c */

#endif
