/*
 * pstate.h - per-partition idempotent-producer state: the sequence/epoch
 * rules of KIP-98 as Kafka 3.x applies them, and their snapshots.
 *
 * Locality: one struct txn_pstate per partition, owned by the partition's
 * shard core; no locks. Pure logic except the snapshot files: save and load
 * are synchronous (start-up, clean shutdown, tests), the periodic snapshot
 * goes through the core's io_uring (txn_pstate_snapshot_start).
 */
#ifndef SLUICE_TXN_PSTATE_H
#define SLUICE_TXN_PSTATE_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "txn_limits.h"

#define TXN_PSTATE_PRODUCERS_MAX TXN_PRODUCERS_MAX    /* producers per partition: bounds table and snapshot */

struct st_batch_hdr;

#define TXN_PSTATE_BATCHES 5          /* batches remembered per producer (max.in.flight) */

/* Metadata of one appended batch. */
struct txn_pbatch {
	int32_t first_seq, last_seq;
	int64_t first_offset, last_offset;
	int64_t max_timestamp;
};

/* One producer's state on one partition. */
struct txn_producer {
	int64_t pid;                  /* -1: free slot */
	int16_t epoch;
	uint8_t nbatches;             /* valid entries in b[] (<= TXN_PSTATE_BATCHES) */
	uint8_t newest;               /* index of the newest entry in b[] */
	struct txn_pbatch b[TXN_PSTATE_BATCHES];
	int64_t last_timestamp;       /* max timestamp of the newest batch */
	int64_t last_update_ms;       /* broker wall clock of the newest append: expiration */
	int64_t txn_first_offset;     /* open transaction's first offset here, -1 none (update keeps it) */
	int32_t coordinator_epoch;    /* of the last marker: its decision serial (txn/coord.h), -1 none */
};

enum txn_check_result {
	TXN_APPEND = 0,        /* the next batch: append it */
	TXN_DUPLICATE,         /* a retry of one of the last 5: answer with its offsets, do not write */
	TXN_ERR_EPOCH,         /* epoch older than the producer's: INVALID_PRODUCER_EPOCH */
	TXN_ERR_SEQUENCE,      /* gap, out of window, or non-zero first sequence of a new epoch */
};

struct txn_pstate;

struct txn_arena;

int  txn_pstate_create(struct txn_pstate **out);
/* The same, but the table grows in arena (the shard core's pool, arena.h; NULL: the heap), and the
 * snapshot buffer comes from it too: the growth is bounded by what the pool has left. */
int  txn_pstate_create_in(struct txn_pstate **out, struct txn_arena *arena);
/* What a new table holds before it grows (each producer grows it, to its limit). */
size_t txn_pstate_base_bytes(void);
void txn_pstate_destroy(struct txn_pstate *ps);
struct txn_producer *txn_pstate_find(struct txn_pstate *ps, int64_t pid);
uint32_t txn_pstate_count(const struct txn_pstate *ps);

/*
 * Validate a batch with producer_id >= 0 against the state. No side effects.
 * On TXN_DUPLICATE, *dup receives the original batch's metadata.
 */
enum txn_check_result txn_pstate_check(const struct txn_pstate *ps, const struct st_batch_hdr *h,
                                       struct txn_pbatch *dup);

/*
 * Room for pid: 0 when pid is known or a txn_pstate_update that adds it
 * cannot fail (the table grows here if it must), else -ENOSPC (the table
 * holds its limit of producers), -ENOBUFS (its arena, the core's pool, has
 * no block for the larger table) or -ENOMEM (no arena: the heap). The owner calls it before it
 * appends a producer's batch and refuses the batch (retriably) when it fails:
 * a batch appended without its entry would lose its deduplication. Pointers
 * from find/next stay valid only if it returned 0 for a known pid.
 */
int txn_pstate_reserve(struct txn_pstate *ps, int64_t pid);
/* Idle producers recovery dropped because the table could not hold them all (txn_pstate_recover). */
uint64_t txn_pstate_evicted(const struct txn_pstate *ps);
/* Tests only: lower the producers limit to force a full table. */
void txn_pstate_set_limit(struct txn_pstate *ps, uint32_t producers_max);

/*
 * Record a batch appended at base_offset (after TXN_APPEND, and when
 * rebuilding from the log, where no check is made). A new epoch clears the
 * remembered batches. Transactions: a transactional data batch (attribute
 * 0x10) opens one at base_offset when none is open (txn_first_offset == -1);
 * a control batch (marker, 0x20) closes it (txn_first_offset = -1) and only
 * moves epoch and time. now_ms: broker wall clock. Returns 0, or
 * txn_pstate_reserve's error (never after it returned 0 for this pid).
 */
int txn_pstate_update(struct txn_pstate *ps, const struct st_batch_hdr *h, int64_t base_offset,
                      int64_t now_ms);
/* The same for a marker (a control batch), which also records its coordinator_epoch (the
 * coordinator's decision serial, txn/coord.h) as the producer's last. */
int txn_pstate_update_marker(struct txn_pstate *ps, const struct st_batch_hdr *h, int64_t base_offset,
                             int64_t now_ms, int32_t coordinator_epoch);

/* Drop producers whose last append is older than now_ms - expiration_ms and that
 * have no open transaction (as Kafka). Returns how many. A table in an arena
 * that is left at most 1/8 full shrinks (its room goes back to the pool). */
uint32_t txn_pstate_expire(struct txn_pstate *ps, int64_t now_ms, int64_t expiration_ms);

/* Iterate: returns the next used entry at or after *cursor (start at 0), or NULL. */
struct txn_producer *txn_pstate_next(struct txn_pstate *ps, uint32_t *cursor);

/*
 * Snapshot encoding (byte table in pstate.c): the state as of log offset
 * `offset` (every batch below it is reflected). write returns the bytes
 * written (<= cap) or 0 if cap is too small (see _size); read replaces the
 * state and returns 0, or -EBADMSG on any damage (CRC, lengths, version).
 */
size_t txn_pstate_snapshot_size(const struct txn_pstate *ps);
size_t txn_pstate_snapshot_write(const struct txn_pstate *ps, int64_t offset, uint8_t *buf, size_t cap);
int    txn_pstate_snapshot_read(struct txn_pstate *ps, const uint8_t *buf, size_t len, int64_t *offset);

/*
 * Files: DIR/<offset, 20 digits>.snapshot, written atomically (temp file,
 * fdatasync, rename, directory fsync); older snapshots beyond the newest 2
 * are removed. load picks the newest valid snapshot with offset <= max_offset
 * (a damaged or too-new one is skipped, with a log line) and returns 0 with
 * *offset = its offset, or 0 with *offset = -1 and an empty state if none.
 */
int txn_pstate_snapshot_save(const struct txn_pstate *ps, const char *dir, int64_t offset);
int txn_pstate_snapshot_load(struct txn_pstate *ps, const char *dir, int64_t max_offset, int64_t *offset);

/*
 * The periodic snapshot without a wait on the poll core: the state is encoded
 * now (as of `offset`), then, on the core's io_uring (storage/fop.h), the
 * file presync_fd is fdatasync'd (-1: none; the aborted index, so that every
 * abort below offset is durable before the snapshot is: txn_lso_sync_fd),
 * the snapshot is written as txn_pstate_snapshot_save writes it (temp file,
 * fdatasync, rename, directory fsync, in dirfd: the partition directory),
 * and the oldest of the snapshots recovery found or this wrote is removed
 * so that TXN_PSTATE_KEEP_FILES stay. cb(arg, 0 or -errno, offset) runs on
 * the core from the completion. Returns 0 (started), -EBUSY (one is in
 * flight: txn_pstate_snapshot_busy) or -ENOMEM; on an error nothing started.
 * The state may change meanwhile; it is destroyed only when none is in flight.
 */
struct st_io;
typedef void (*txn_snap_cb)(void *arg, int status, int64_t offset);
int  txn_pstate_snapshot_start(struct txn_pstate *ps, struct st_io *io, int dirfd, int64_t offset, int presync_fd,
                               txn_snap_cb cb, void *arg);
bool txn_pstate_snapshot_busy(const struct txn_pstate *ps);

struct st_log;
struct txn_lso;

/*
 * Rebuild a partition's state after a restart: the newest snapshot that the
 * recovered log still covers, then every batch after it, replayed from the
 * log (a snapshot is taken at the log end, so this is a short tail, not the
 * whole log). The log's batch timestamps stand in for the broker clock of
 * replayed appends. *snap_offset: the snapshot used, -1 if none. Start-up only.
 *
 * lso (may be NULL): a fresh txn_lso (no open transactions) whose aborted
 * index the caller has already opened (txn_lso_open_index with the log's end
 * offset). The snapshot's open transactions are begun in it in ascending
 * first offset; the replay then, before updating the producer state for each
 * batch, begins a transaction at a transactional data batch whose producer
 * has none open and ends one at each COMMIT/ABORT marker (an ABORT already in
 * the loaded index, at or below txn_lso_last_marker, is not indexed twice).
 * Afterwards txn_lso_get gives the LSO and the index holds every abort.
 * A snapshot or log with more producers than the table may hold (its limit,
 * or its arena's room) is not an error: the idle producers updated longest
 * ago are dropped, as Kafka's producer expiry would drop them, and counted
 * (txn_pstate_evicted). Only when every producer held has an open
 * transaction does it fail (-ENOSPC or -ENOBUFS). Returns 0, those, -ENOMEM,
 * or -errno from the log scan.
 */
int txn_pstate_recover(struct txn_pstate *ps, struct txn_lso *lso, struct st_log *log, const char *dir,
                       int64_t *snap_offset);

#endif
