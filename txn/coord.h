/*
 * coord.h - the transaction coordinator's state: one entry per
 * transactional.id, its state machine (one checked setter), and the
 * encoding of the entries in the coordinator's own log.
 *
 * Locality: control core. Pure logic: no I/O; the driver
 * (dataplane/control/txncoord.c) persists entries and fans out markers.
 */
#ifndef SLUICE_TXN_COORD_H
#define SLUICE_TXN_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txn_limits.h"   /* TXN_TOPIC_BYTES_MAX, TXN_PARTS_MAX */

#define TXN_ID_BYTES_MAX     1024     /* longer transactional ids are refused */
#define TXN_GROUPS_MAX       64       /* consumer groups in one transaction */
/* Fixed tables' list pools (arena.h): partitions in blocks of 2^k units of
 * TXN_COORD_TPS_UNIT (a transaction's first costs one unit), groups one a
 * unit. A block of the whole pool holds any list the limits allow. */
#define TXN_COORD_TPS_UNIT          4u
#define TXN_COORD_TPS_DEFAULT       65536u /* --txn-partitions-max */
#define TXN_COORD_GROUPS_DEFAULT    8192u  /* --txn-groups-max */
#define TXN_GROUP_BYTES_MAX  TXN_GROUP_ID_BYTES_MAX
#define TXN_EPOCH_MAX        32766    /* at this epoch the id moves to a new producer id */
#define TXN_TIMEOUT_MAX_MS   900000   /* Kafka's transaction.max.timeout.ms */
#define TXN_IDS_MAX          100000   /* transactional ids tracked: InitProducerId of a new one waits beyond */
#define TXN_SERIAL_MAX       INT32_MAX /* decision serials wrap to 1 past it (txn_meta.serial) */
#define TXN_ID_EXPIRATION_MS (7LL * 24 * 3600 * 1000)   /* Kafka's transactional.id.expiration.ms */

/* The states, with Kafka's numbering and names (DescribeTransactions shows them). */
enum txn_state {
	TXN_EMPTY = 0,
	TXN_ONGOING = 1,
	TXN_PREPARE_COMMIT = 2,
	TXN_PREPARE_ABORT = 3,
	TXN_COMPLETE_COMMIT = 4,
	TXN_COMPLETE_ABORT = 5,
	TXN_DEAD = 6,
	TXN_PREPARE_EPOCH_FENCE = 7,
};

/*
 * The driver's own progress for one id (dataplane/txncoord.c), not
 * persisted: what it is doing and what it waits for. One checked setter
 * (txn_set_drive) like the state's: each move is checked against
 * txn_drive_move_ok's table, and against the transaction state and the
 * answers outstanding it needs; an illegal move aborts.
 *
 *   IDLE --InitProducerId--> INIT --durable or failed--> IDLE
 *   IDLE --AddPartitions--> ADD --durable--> ADD_ACKS --all owners acked--> IDLE
 *                            `--failed----------------------------------> IDLE
 *   IDLE --AddOffsets--> OFFSETS --durable or failed--> IDLE
 *   IDLE --EndTxn, timeout, fence, start-up resume--> PREPARE
 *        PREPARE --durable--> MARKERS --all markers durable, Complete--> IDLE
 *        (a Prepare write that failed is written again: the decision stands)
 *   IDLE --start-up, an Ongoing transaction's owners told again--> REAUTH --acked--> IDLE
 *
 * In MARKERS the producer's next transaction may begin beside it (next_*
 * below): its AddPartitionsToTxn is served there, and at Complete it becomes
 * the transaction, the driver moving on to ADD_ACKS if its grants are still
 * out (txncoord.c next_install).
 */
enum txn_drive {
	TXN_DRIVE_IDLE = 0,     /* nothing under way: a request may start */
	TXN_DRIVE_INIT,         /* InitProducerId: the new epoch's record is being written */
	TXN_DRIVE_ADD,          /* AddPartitionsToTxn: the partitions' record is being written */
	TXN_DRIVE_ADD_ACKS,     /* ... durable: the owners are told, their answers awaited */
	TXN_DRIVE_OFFSETS,      /* AddOffsetsToTxn: the group's record is being written */
	TXN_DRIVE_PREPARE,      /* Prepare{Commit,Abort} is being written (again, after a failure) */
	TXN_DRIVE_MARKERS,      /* Prepare* durable: markers sent, their owners' answers awaited */
	TXN_DRIVE_REAUTH,       /* start-up: the owners of an Ongoing transaction told again */
	TXN_DRIVE_COUNT
};

struct txn_tp {
	uint16_t topic_len;
	char topic[TXN_TOPIC_BYTES_MAX + 1];
	int32_t partition;
	bool marker_again;            /* driver: its marker is to be sent again (not persisted) */
	bool reauth_unsent;           /* driver: its start-up grant is yet to be sent at all (no credit) */
};

struct txn_group {
	uint16_t len;
	char id[TXN_GROUP_BYTES_MAX + 1];
};

/*
 * One transactional id. Its address is stable while it exists. Sized by what
 * it holds, not by the limits: an idle id costs this struct plus its name
 * (the partitions and groups of a transaction are freed when it ends).
 */
struct txn_meta {
	int64_t pid, prev_pid;        /* prev: before an epoch-exhaustion roll, -1 none */
	int16_t epoch, prev_epoch;
	enum txn_state state;
	int32_t timeout_ms;
	int64_t start_ms;             /* when the current transaction began (Ongoing) */
	int64_t update_ms;
	/*
	 * The decision serial: each move into PrepareCommit/PrepareAbort takes the
	 * next one (txn_set_state), in 1..TXN_SERIAL_MAX, wrapping to 1; 0: none
	 * yet (or a log from before it was kept). Markers carry it as their
	 * coordinator_epoch and each partition keeps its producer's last one
	 * (txn_producer.coordinator_epoch), so a marker sent again after a crash
	 * is known there as applied, even once a later transaction of the same
	 * producer has data open on that partition (dataplane/shard/shard.c).
	 */
	int32_t serial;
	uint32_t ntps, tps_cap;
	struct txn_tp *tps;           /* partitions in the current transaction */
	uint32_t ngroups, groups_cap;
	struct txn_group *groups;     /* consumer groups (AddOffsetsToTxn), at most TXN_GROUPS_MAX */

	/* Driver state, not persisted. */
	enum txn_drive drive;         /* only through txn_set_drive */
	uint32_t writes;              /* log writes of this id not yet durable (their cookies point here) */
	uint32_t markers_left, markers_acked;   /* owner answers still awaited / received */
	uint32_t tps_told;            /* tps[0, tps_told) are known to their owners (AddPartitions acked) */
	/*
	 * The producer's next transaction, begun while this one's markers are
	 * written (an AddPartitionsToTxn served in TXN_DRIVE_MARKERS,
	 * txncoord.c add_partitions): its partitions, next_tps[0, next_told)
	 * granted by their owners. In no record until this transaction's
	 * Complete is written; then it becomes the transaction
	 * (txn_meta_next_install).
	 */
	uint32_t next_ntps, next_cap, next_told;
	struct txn_tp *next_tps;
	int64_t next_start_ms;        /* its first add (its start_ms once installed) */
	uint32_t next_left;           /* owner answers its grants still await */
	bool next_refused;            /* an owner could not record one (retriable, as grant_refused) */
	void *next_ctx;               /* its AddPartitionsToTxn, waiting for them */
	bool grant_refused;           /* an owner could not record this AddPartitions' grant (its pool full) */
	bool compact_due;             /* the running compaction has not rewritten it yet */
	/* Start-up's reconciliation with the partitions' reports (txncoord.c: open_report). */
	bool recon_fence;             /* a partition held data of a transaction the log lost: fence and abort */
	bool recon_joined;            /* a partition joined the open transaction: written again, told */
	void *op_ctx;                 /* requester */
	uint16_t op_core;
	uint32_t op_gen, op_idx;
	int16_t op_version;
	struct txn_meta *retry_next;  /* on the driver's list of markers to send again */
	int64_t retry_due_ms;         /* when they go (while retry_listed) */
	bool retry_listed;
	bool has_queued;              /* a request waiting for the current op */
	_Alignas(8) uint8_t queued[96]; /* the driver's message for it (opaque here) */
	struct txn_coord *coord;      /* the table it is in (its lists' pools); NULL: a copy, lists on the heap */
	uint16_t id_len;
	char id[];                    /* id_len bytes and a NUL */
};

const char *txn_state_name(enum txn_state s);

/*
 * The one way to change a state: checks the move against Kafka's table
 * (coord.c), and asserts on an illegal one. Returns the old state.
 */
enum txn_state txn_set_state(struct txn_meta *m, enum txn_state to);
bool txn_state_move_ok(enum txn_state from, enum txn_state to);

const char *txn_drive_name(enum txn_drive d);
/* The driver's table (coord.c): may it move from -> to at all? */
bool txn_drive_move_ok(enum txn_drive from, enum txn_drive to);
/*
 * May m's driver move to `to` now: a legal move, m's transaction in a state
 * that `to` works on, no owner answer outstanding (markers_left 0: every
 * move happens between fan-outs) and, into IDLE, no resend pending?
 */
bool txn_drive_ok(const struct txn_meta *m, enum txn_drive to);
/* The one way to change m->drive: aborts on a move txn_drive_ok refuses. Returns the old one. */
enum txn_drive txn_set_drive(struct txn_meta *m, enum txn_drive to);
static inline bool txn_busy(const struct txn_meta *m) { return m->drive != TXN_DRIVE_IDLE; }

struct txn_coord;

/* A table that grows as ids come (tools, tests). */
int  txn_coord_create(struct txn_coord **out);
/*
 * A table of at most ids_max ids, and at most tps_max partitions and
 * groups_max groups in all its open transactions' lists, all its memory
 * allocated now (the broker: --transactional-ids-max, --txn-partitions-max,
 * --txn-groups-max). Only a start-up replay may go past them (allocating
 * what the pools cannot hold, so a log written under higher limits still
 * loads; txn_coord_lists_over says how many lists did). tps_max is used in
 * whole units of TXN_COORD_TPS_UNIT.
 */
int  txn_coord_create_fixed(struct txn_coord **out, uint32_t ids_max, uint32_t tps_max, uint32_t groups_max);
size_t txn_coord_fixed_bytes_per_id(void);      /* what an id of a fixed table takes (the budget) */
size_t txn_coord_fixed_bytes_per_tp_unit(void); /* what TXN_COORD_TPS_UNIT partitions of the lists' pool take */
size_t txn_coord_fixed_bytes_per_group(void);   /* what a group of the lists' pool takes */
/* Fixed table: lists on the heap, past the pools (a replay of a log larger than they hold). */
uint32_t txn_coord_lists_over(const struct txn_coord *c);
void txn_coord_destroy(struct txn_coord *c);
struct txn_meta *txn_coord_find(struct txn_coord *c, const char *id, size_t len);
/* Add a new id (state Empty, epoch -1, no pid yet). NULL if out of memory, or
 * a fixed table is full. Callers bound the count. */
struct txn_meta *txn_coord_add(struct txn_coord *c, const char *id, size_t len);
void txn_coord_remove(struct txn_coord *c, struct txn_meta *m);
/* Iterate: *cursor starts at 0. */
struct txn_meta *txn_coord_next(struct txn_coord *c, uint32_t *cursor);
uint32_t txn_coord_count(const struct txn_coord *c);

/*
 * transactional.id.expiration.ms, as Kafka: may m be forgotten at now? Only
 * an id with no transaction (Empty, CompleteCommit, CompleteAbort), nothing
 * under way or waiting, last written expiration_ms or longer ago.
 */
bool txn_meta_expirable(const struct txn_meta *m, int64_t now_ms, int64_t expiration_ms);

/*
 * Partitions and groups of the current transaction. In a fixed table the
 * lists come from its pools: add and room answer -ENOMEM when the pool has
 * no block for the grown list (nothing changed: refuse the request
 * retriably), -ENOSPC past TXN_PARTS_MAX / TXN_GROUPS_MAX. room makes space
 * for extra more entries first, so that the adds after it cannot fail for
 * memory (a request's partitions are all taken or none).
 */
int  txn_meta_tps_room(struct txn_meta *m, uint32_t extra);
int  txn_meta_groups_room(struct txn_meta *m, uint32_t extra);
bool txn_meta_has_tp(const struct txn_meta *m, const char *topic, size_t len, int32_t partition);
int  txn_meta_add_tp(struct txn_meta *m, const char *topic, size_t len, int32_t partition);
bool txn_meta_has_group(const struct txn_meta *m, const char *id, size_t len);
int  txn_meta_add_group(struct txn_meta *m, const char *id, size_t len);
void txn_meta_clear_txn(struct txn_meta *m);   /* drop partitions and groups, and their memory */
/* The next transaction's partitions (next_tps): as the calls above, on that list. */
int  txn_meta_next_room(struct txn_meta *m, uint32_t extra);
bool txn_meta_next_has_tp(struct txn_meta *m, const char *topic, size_t len, int32_t partition);
int  txn_meta_next_add_tp(struct txn_meta *m, const char *topic, size_t len, int32_t partition);
/* The next transaction's list becomes the transaction's (which is empty: cleared), told as far as it was. */
void txn_meta_next_install(struct txn_meta *m);

/*
 * Log record value (key = the transactional id), big-endian:
 *   offset  size  field
 *        0     2  version (1; 0 is read too: no serial)
 *        2     8  producer id
 *       10     2  epoch
 *       12     8  previous producer id
 *       20     2  previous epoch
 *       22     1  state
 *       23     4  timeout ms
 *       27     8  start ms
 *       35     8  update ms
 *       43     4  partition count N, then N x (int16 topic length, topic bytes, int32 partition)
 *        .     4  group count G, then G x (int16 length, bytes)
 *        .     4  decision serial (version 1 only; version 0: serial 0)
 * size returns the encoded size; encode returns bytes written or -ENOSPC;
 * decode fills m (id untouched) and returns 0 or -EBADMSG.
 */
size_t txn_meta_value_size(const struct txn_meta *m);
int    txn_meta_encode(const struct txn_meta *m, uint8_t *buf, size_t cap);
int    txn_meta_decode(struct txn_meta *m, const uint8_t *buf, size_t len);

/*
 * Coordinator-log recovery: apply one stored batch (each record: key = id,
 * value = txn_meta_encode, null value = the id is gone). Later records win,
 * so applying the log in order rebuilds the table. Returns 0, or -EBADMSG
 * if a record was damaged (the others still apply).
 */
int txn_coord_apply_batch(struct txn_coord *c, const uint8_t *batch, size_t len);

#endif
