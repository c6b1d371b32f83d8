/*
 * lso.h - per-partition transaction bookkeeping on the owner shard: the open
 * transactions that hold the last stable offset (LSO) back, and the index of
 * aborted transactions that read_committed fetches return.
 *
 * Locality: one struct txn_lso per partition, owned by its shard core.
 */
#ifndef SLUICE_TXN_LSO_H
#define SLUICE_TXN_LSO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txn_limits.h"

#define TXN_LSO_OPEN_MAX TXN_PRODUCERS_MAX    /* open transactions per partition: = TXN_PSTATE_PRODUCERS_MAX */

/* One aborted transaction on this partition: its data [first_offset, last_offset), marker at last_offset. */
struct txn_aborted {
	int64_t pid;
	int64_t first_offset;   /* the producer's first transactional batch in it */
	int64_t last_offset;    /* offset of the ABORT marker */
};

struct txn_lso;

struct txn_arena;

int  txn_lso_create(struct txn_lso **out);
/* The same, but its arrays grow in arena (the shard core's pool, arena.h); NULL: the heap. */
int  txn_lso_create_in(struct txn_lso **out, struct txn_arena *arena);
/* What a new index holds before it grows (open and aborted entries grow it, to their limits). */
size_t txn_lso_base_bytes(void);
void txn_lso_destroy(struct txn_lso *l);

/*
 * Room for one more transaction: 0 when the next txn_lso_begin cannot fail for
 * want of room, else -ENOSPC (the limits: open transactions, or aborted
 * entries counting one for each open transaction), -ENOBUFS (the arena has
 * no block for the larger arrays) or -ENOMEM (the heap). The owner calls
 * it before it appends a transaction's first batch, and refuses the batch
 * (retriably) when it fails: a batch appended without its open entry would
 * let the LSO pass it.
 */
int  txn_lso_reserve(struct txn_lso *l);
/* pid's transaction opened here with its first batch at first_offset (offsets
 * only grow). Reserves (as txn_lso_reserve) what its end will need. Returns 0,
 * -EEXIST if pid has one open, or txn_lso_reserve's error. */
int  txn_lso_begin(struct txn_lso *l, int64_t pid, int64_t first_offset);
/* pid's open transaction got its marker at marker_offset, written, not yet
 * durable: it is closing. It still holds the LSO until txn_lso_end, but pid
 * may begin its next transaction here meanwhile. Returns 0, or -ENOENT if pid
 * has no open transaction here. */
int  txn_lso_close(struct txn_lso *l, int64_t pid, int64_t marker_offset);
/* Has pid a transaction closing here (its marker written, not yet durable)? */
bool txn_lso_closing(const struct txn_lso *l, int64_t pid);
/* pid's transaction closed by the marker at marker_offset (txn_lso_close), or
 * else its open one (recovery's replay ends it at once), ends there: the LSO
 * may pass it. An abort is recorded in the index (and appended to the index
 * file when one is open) in the room its begin reserved, so this never fails
 * for want of memory. Returns 0, or -ENOENT if pid had no such transaction. */
int  txn_lso_end(struct txn_lso *l, int64_t pid, int64_t marker_offset, bool aborted);
/* First offset of pid's open transaction (not a closing one), or -1. */
int64_t txn_lso_open_first(const struct txn_lso *l, int64_t pid);
/* The open transaction (not a closing one) with the least first offset past after: that offset
 * (its producer in *pid), or -1 if none. A cursor over the open ones that entries ending meanwhile do not upset
 * (first offsets are distinct in a log: each transaction begins at a batch of its own). */
int64_t txn_lso_open_after(const struct txn_lso *l, int64_t after, int64_t *pid);
/* The LSO: min(first offset of the oldest open transaction, hw). */
int64_t txn_lso_get(const struct txn_lso *l, int64_t hw);
/* Aborted transactions that overlap [from, to): last_offset >= from and
 * first_offset < to, in index order; copies up to max, returns how many overlap. */
uint32_t txn_lso_aborted(const struct txn_lso *l, int64_t from, int64_t to, struct txn_aborted *out,
                         uint32_t max);
/*
 * Where a read of [from, to) must end for at most max aborted transactions to
 * overlap it: the largest bound <= to such that at most max overlap
 * [from, bound) (`to` itself when no more than max overlap [from, to)). It is
 * <= from when more than max transactions, each of another producer, span
 * the offset from. heap: scratch room for max + 1 offsets.
 */
int64_t txn_lso_aborted_bound(const struct txn_lso *l, int64_t from, int64_t to, uint32_t max, int64_t *heap);
/* The first (in marker order) of pid's aborted transactions that overlap
 * [from, to), copied to *out; returns 1, or 0 if none. A range within one of
 * pid's batches overlaps at most one: a producer's transactions never overlap. */
uint32_t txn_lso_aborted_pid(const struct txn_lso *l, int64_t from, int64_t to, int64_t pid,
                             struct txn_aborted *out);
/* Forget aborted transactions wholly below the log start (after retention); in an arena, arrays left
 * at most 1/8 used shrink (their room goes back to the pool). */
void txn_lso_trim(struct txn_lso *l, int64_t log_start);
/* Tests: how many entries a query of [from, to) examines (the walk txn_lso_aborted* make). */
uint32_t txn_lso_query_cost(const struct txn_lso *l, int64_t from, int64_t to);
/* Open and closing transactions here. */
uint32_t txn_lso_open_count(const struct txn_lso *l);
/* Tests only (before any begin): lower the open and aborted limits to force a full table (0: keep). */
void txn_lso_set_limits(struct txn_lso *l, uint32_t open_max, uint32_t aborted_max);

/*
 * The persisted index, DIR/aborted.txnindex (byte table in lso.c): fixed-size
 * entries appended as aborts happen (no sync; pwrite, or io_uring below); txn_lso_sync() makes
 * them durable and is called before every producer-state snapshot, so every
 * abort below a snapshot's offset is on disk. open loads it (a torn or
 * damaged tail is cut; entries whose marker is at or past log_end are dropped,
 * their log having been truncated), and keeps the file open for appends.
 */
int  txn_lso_open_index(struct txn_lso *l, const char *dir, int64_t log_end);
/*
 * Damage in the file (a whole entry that fails its CRC or order, a bad header
 * in front of entries, no file under a non-empty log) is not cut: open loads
 * nothing and txn_lso_needs_rebuild() turns true. The caller then replays the
 * whole log's transactional batches and markers through txn_lso_begin /
 * txn_lso_end, and calls txn_lso_rebuilt(), which forgets the transactions
 * left open by that pass (the normal replay opens them again) and replaces the
 * file with the rebuilt index. Until then txn_lso_sync fails (no snapshot).
 */
bool txn_lso_needs_rebuild(const struct txn_lso *l);
int  txn_lso_rebuilt(struct txn_lso *l);
int  txn_lso_sync(struct txn_lso *l);
/*
 * On a poll core, appends go through the core's io_uring (storage/fop.h)
 * once txn_lso_attach_io is called (after recovery): one write in flight,
 * the entries in marker order, none lost when one is pending (they stay in
 * memory until their write). txn_lso_sync_fd gives the file to fdatasync
 * so that every abort indexed so far is durable (*fd -1: no file, nothing
 * to sync): 0, -EAGAIN while entries are not all written yet (try later),
 * or txn_lso_sync's errors. txn_lso_sync also says -EAGAIN then. A struct
 * txn_lso with a write in flight (txn_lso_busy) is not closed or destroyed.
 */
struct st_io;
void txn_lso_attach_io(struct txn_lso *l, struct st_io *io, int dirfd);
int  txn_lso_sync_fd(const struct txn_lso *l, int *fd);
bool txn_lso_busy(const struct txn_lso *l);
/*
 * After txn_lso_trim: rewrite the file with the live entries only, when
 * trimmed ones make up most of it (at least 4096 of them and half the file).
 * Atomic (new file, sync, rename, directory sync). Returns 0 (also when
 * nothing was due) or -errno; the old file stays on failure. With io
 * attached (txn_lso_attach_io, dirfd: the file's directory) the rewrite goes
 * through the core's io_uring and 0 means started: appends made meanwhile
 * wait in memory and go to the new file; txn_lso_sync_fd says -EAGAIN until
 * it is done; a failure before the rename keeps the old file (logged).
 */
int  txn_lso_compact_index(struct txn_lso *l);
void txn_lso_close_index(struct txn_lso *l);
/* Largest marker offset in the index, or -1: replay skips aborts already there. */
int64_t txn_lso_last_marker(const struct txn_lso *l);

#endif
