/*
 * log.h - a partition's durable, segmented log (interface for other folders).
 *
 * Locality: a struct st_log and the struct st_io it uses belong to one shard
 * core (the partition's owner); nothing here is thread-safe and nothing
 * needs to be.
 *
 * Batches are stored exactly as received, with only the base offset (bytes
 * 0..7, not covered by the CRC) patched. Appends (and a roll's directory
 * fsync, and a sealed segment's index) are written with io_uring
 * on the owner core's ring; a group of appends is made durable by ONE
 * fdatasync per segment (group commit). An append is reported complete
 * (callback) only after the fdatasync that covers it has completed, unless
 * the io was created with fsync disabled, in which case after its write.
 */
#ifndef SLUICE_STORAGE_LOG_H
#define SLUICE_STORAGE_LOG_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "batch.h"

struct io_uring;
struct io_uring_cqe;
struct st_batch_hdr;

#define ST_URING_TAG 2u   /* see nic/nic.h for the user_data convention */

struct st_io;    /* per-core I/O engine: SQE preparation, group commit */
struct st_log;   /* one partition */

/* Called on the owner core when an append is durable (status 0) or failed (-errno). */
typedef void (*st_append_cb)(void *arg, int status, int64_t base_offset);

struct st_io_config {
	bool fsync;                 /* false: ack after the write, no fdatasync */
	st_append_cb on_append;     /* st_log_append's callback; NULL if every append names its own */
	uint32_t prealloc_bytes;    /* reserve the active segment's space this far ahead of its end
	                             * (fallocate, FALLOC_FL_KEEP_SIZE); 0: never */
	bool direct;                /* appends written with O_DIRECT from each log's aligned buffer
	                             * (ST_LOG_DIRECT_BUF_BYTES; sluiced --direct-io) */
};

/*
 * The broker's preallocation step: each active segment keeps up to this much
 * disk space reserved past its last append, asked for in one fallocate
 * linked in front of a group's write once less than half of it is left.
 * Why: the file system then allocates extents in large runs instead of at
 * each writeback, and a full disk fails the fallocate (ignored) before the
 * append. Bounds the space a partition holds unused: at most this per
 * partition (a sealed segment keeps what was left of its last step).
 */
#define ST_LOG_PREALLOC_BYTES (8u << 20)

/*
 * The direct write path (st_io_config.direct): each open log holds one
 * buffer of this size, aligned to ST_LOG_DIRECT_ALIGN_BYTES, into which a
 * group's batches are copied behind the partly filled last block of the
 * segment, and from which the group's whole blocks are written with O_DIRECT
 * at an aligned offset (through a second descriptor of the active segment,
 * opened O_DIRECT), so that the bulk of the bytes never passes through the
 * page cache and its writeback. The rest, less than one block, is written
 * through the ordinary descriptor, so the file's size is always the last
 * batch's end (no padding: sealed segments and their indexes stay exact),
 * and it is written again, whole, by the next group's direct write. The
 * fdatasync that follows covers both, as before: durability does not change.
 * A group holds at most this less one block; a batch larger than that is
 * written the ordinary way, and so is every append of a file system that
 * refuses O_DIRECT (at open, or by statx STATX_DIOALIGN, or an O_DIRECT
 * write's EINVAL: that log goes on buffered, logged once, never offline).
 * The block is the file system's O_DIRECT alignment (statx; at least
 * ST_LOG_DIRECT_ALIGN_BYTES, which is also the guess when statx does not
 * say; above ST_LOG_DIRECT_ALIGN_MAX_BYTES, or buffer addresses aligned to
 * more than ST_LOG_DIRECT_ALIGN_BYTES, the log is buffered). Counted per partition in the
 * memory budget (sluiced --print-budget) when the flag is on. 1 MiB: a
 * librdkafka batch (batch.size 1000000) fits whole beside the last block.
 */
#define ST_LOG_DIRECT_BUF_BYTES (1u << 20)
#define ST_LOG_DIRECT_ALIGN_BYTES 4096u   /* the buffer's alignment; the O_DIRECT block, at least
                                          * (and without statx's word) */
#define ST_LOG_DIRECT_ALIGN_MAX_BYTES 65536u /* the largest block (file offsets, lengths) used */

int  st_io_create(const struct st_io_config *cfg, struct io_uring *ring, struct st_io **out);
void st_io_destroy(struct st_io *io);
/* Feed one completion whose tag is ST_URING_TAG. */
void st_io_complete(struct st_io *io, const struct io_uring_cqe *cqe);
/* Prepare SQEs for appends queued since the last call (one write+fdatasync
 * chain per dirty segment). Returns the number of SQEs prepared. */
int  st_io_flush(struct st_io *io);
/* Appends queued or in flight (for clean shutdown: loop until 0). */
uint32_t st_io_pending(const struct st_io *io);
/* Stopping: segment removals still waiting for one of their log's drops are not started (log_internal.h). */
void st_io_quiesce(struct st_io *io);

struct st_log_config {
	uint64_t segment_bytes;        /* roll the active segment beyond this size */
	int64_t  retention_bytes;      /* -1: unlimited; else delete oldest segments beyond */
	int64_t  retention_ms;         /* -1: unlimited; else delete segments older than this */
	uint32_t index_interval_bytes; /* one sparse index entry per this many log bytes */
	bool scan_sealed;              /* scan (CRC) every segment at open, not only the active one */
};

/*
 * Open (creating if needed) the partition log in dir and recover it: every
 * batch of the tail after the last clean point is checked (length, magic,
 * CRC32C); a torn tail (a bad end of the newest data, nothing valid after
 * it, or any bad batch past the recovery point: the part not known durable)
 * is truncated; damage anywhere else is set aside as a range and logged,
 * never truncated (log_internal.h); indexes are rebuilt. -EBADMSG: the
 * damage cannot be set aside (segments that do not continue each other,
 * too many ranges); the files are left as they are.
 * Synchronous; called at start-up or partition creation, not on the hot path.
 */
/* What an open log holds for itself with cfg, its active segment's index at its full
 * size included (the memory budget); each sealed segment adds its own and its trimmed index. */
size_t st_log_open_bytes(const struct st_log_config *cfg);
int  st_log_open(struct st_io *io, const char *dir, const struct st_log_config *cfg,
                 struct st_log **out);
/* Flush indexes and close (after st_io_pending() reached 0). */
void st_log_close(struct st_log *log);
/*
 * Close and remove the directory and all its files (topic deletion): with a
 * trash (trash.h), renamed into it, which unlinks the files off this core;
 * NULL, or when the rename fails, unlinked here (0.4-0.5 s per GiB on this
 * core).
 */
struct st_trash;
int  st_log_delete(struct st_log *log, struct st_trash *trash);

/* The partition directory, open for the log's life: files beside the log are made there
 * (storage/fop.h takes it). Locality: owner core. */
int  st_log_dirfd(const struct st_log *log);

/* No append of this log queued or in flight: it may be closed or deleted now. */
bool st_log_idle(const struct st_log *log);
/* 0, or the -errno of the write or sync that took the log offline (appends fail with -EIO);
 * such a log is brought back by st_log_cut_failed, closing it and opening it again. */
int  st_log_failed(const struct st_log *log);
/* With direct io configured: the log fell back to the page cache (no O_DIRECT on its file
 * system, an alignment beyond ST_LOG_DIRECT_ALIGN_MAX_BYTES, or a refused write). */
bool st_log_direct_off(const struct st_log *log);
/*
 * A failed log's segment files are cut at its durable end (ftruncate, fdatasync), so that a
 * reopen does not take back what no fdatasync covered: after a failed one the page cache still
 * holds those bytes and the disk may never get them (Linux forgets the dirty pages), and they
 * were never acknowledged (idempotent producers resend). 0 for a log that has not failed, or
 * -errno (the log stays failed; try again). Synchronous, like st_log_open; st_log_close does it
 * too. The log must be idle. Locality: shard core (owner), the probe's reopen.
 */
int  st_log_cut_failed(struct st_log *log);

int64_t st_log_start_offset(const struct st_log *log);  /* first offset kept */
/* The first segment's base: where the data on disk begins (at or below the start offset). */
int64_t st_log_base_offset(const struct st_log *log);
/*
 * Where start-up recovery's replay begins (the newest durable producer-state snapshot; -1: none,
 * the replay reads the whole log): retention does not delete, for a raised log start, a segment
 * holding offsets at or above it (retention by size or time is not bound by it, as Kafka's is
 * not). Default INT64_MAX (no bound). Locality: owner core.
 */
void st_log_keep_from(struct st_log *log, int64_t offset);
/*
 * DeleteRecords: raise the log start offset to `offset` (at most the durable end). The new start
 * is written to the partition's log-start file (ST_LS_NAME: temp file, fdatasync, rename, directory
 * fsync, through the core's io_uring) and takes effect, in memory, only once that is durable: then
 * cb(arg, 0) runs (from st_io_complete), st_log_start_offset says `offset`, reads below it are
 * refused and the next st_log_retain deletes the segments wholly below it (one straddling it
 * stays). cb(arg, -errno) if the write failed (the start is unchanged). Returns 0 (started), 1 if
 * the start is already at or past offset (nothing written, no callback), -EBUSY while an earlier
 * raise is in flight (st_log_start_busy), -ERANGE for an offset past the durable end or below 0,
 * or the log's failure. Locality: owner core.
 */
int  st_log_raise_start(struct st_log *log, int64_t offset, void (*cb)(void *arg, int status), void *arg);
bool st_log_start_busy(const struct st_log *log);
/* The log-start file's record (pure; log_ut): encode `offset`, or decode one (0, or -EBADMSG). */
void st_log_start_encode(uint8_t *buf, int64_t offset);   /* buf: ST_LOG_START_BYTES */
int  st_log_start_decode(const uint8_t *buf, size_t len, int64_t *offset);
#define ST_LOG_START_BYTES 20
int64_t st_log_end_offset(const struct st_log *log);    /* next offset to assign (LEO) */
int64_t st_log_durable_offset(const struct st_log *log);/* end of completed appends (high watermark) */

/*
 * Queue one already-validated RecordBatch v2 (batch points at its first byte,
 * len = 12 + batchLength). Assigns base offset = LEO, patches bytes 0..7 of
 * the caller's buffer IN PLACE, and queues its write. The buffer must stay
 * valid until the callback. Returns the base offset (>= 0) or -errno.
 * record_count = lastOffsetDelta + 1.
 */
int64_t st_log_append(struct st_log *log, uint8_t *batch, uint32_t len,
                      uint32_t record_count, void *cookie);
/* The same, calling cb(arg, ...) when it is durable or failed (not the io's on_append). */
int64_t st_log_append_cb(struct st_log *log, uint8_t *batch, uint32_t len,
                         uint32_t record_count, st_append_cb cb, void *arg);
/*
 * Test only (sluiced --fault-marker-write-fail): the write of the group that
 * carries offset (queued, not yet written) fails as a disk's would: it writes
 * nothing and completes with EIO, so the log fails, every append of that
 * group and after it fails, and a reopen finds none of them in the file.
 */
void st_log_fault_write(struct st_log *log, int64_t offset);
/* An open log's retention limits changed (its topic's configs altered): the next retention pass
 * keeps to them. Only these: the segment size sizes each new segment's index reservation. */
void st_log_set_retention(struct st_log *log, int64_t retention_bytes, int64_t retention_ms);

/*
 * Where to read for a fetch: whole batches starting with the batch that holds
 * `offset`, ending before `limit` (an offset: high watermark or LSO), at most
 * max_bytes except that the first batch is always included whole (KIP-74).
 * Fills *fd, *pos and *len for one contiguous range within one segment; len 0 if
 * there is nothing below limit. Returns 0, -ERANGE if offset is below the
 * log start or above the LEO, -EBADMSG if the batch holding offset is
 * damaged (set aside at recovery, or a bad header met now: logged once per
 * segment), -errno for a read error. A range stops before damage.
 */
int  st_log_locate(struct st_log *log, int64_t offset, int64_t limit, uint32_t max_bytes,
                   int *fd, uint64_t *pos, uint32_t *len);

/* First offset whose batch has max timestamp >= ts; LEO if none. Reads the headers of one index
 * interval at most (the segment's time index, log_internal.h), whatever the timestamps' order. */
int64_t st_log_offset_for_time(struct st_log *log, int64_t ts_ms);

/* Most bytes a lookup below asks its caller to bring into the page cache (its buffer's size). */
#define ST_LOG_WARM_BYTES (256u << 10)

/*
 * The same lookups for the owner's poll core, which must not wait for the disk:
 * batch headers are read only from the page cache (RWF_NOWAIT). A header that
 * is not there makes them return -EAGAIN with *fd, *pos and *len (at most
 * ST_LOG_WARM_BYTES) naming bytes from it on: the caller reads those through
 * its io_uring (into any buffer: only the page cache matters) and calls again
 * on the completion, which then finds them, or the next cold page. Otherwise
 * as above, and offset_for_time returns 0 with *offset. Locate's range also
 * stops before an uncached header: when that batch is below limit and a batch
 * could still fit max_bytes, it returns ST_LOG_LOCATE_COLD with the range
 * found so far, and the caller may bring in the bytes from *pos + *len on and
 * call again for the longer range Kafka would send, or send this one (the
 * next fetch starts after it).
 */
#define ST_LOG_LOCATE_COLD 1
int  st_log_locate_nowait(struct st_log *log, int64_t offset, int64_t limit, uint32_t max_bytes,
                          int *fd, uint64_t *pos, uint32_t *len);
int  st_log_offset_for_time_nowait(struct st_log *log, int64_t ts_ms, int64_t *offset, int *fd,
                                   uint64_t *pos, uint32_t *len);

/*
 * The batch those lookups find, for a caller that reads its records (Kafka answers the first
 * record at or after the time, not the batch): found false if none (the LEO above), else where it
 * lies (the whole batch: fd, pos, len = 12 + batchLength, durable) and its header. The fd is the
 * segment's: valid until the owner next runs retention or a delete. Locality: shard core (owner).
 */
struct st_time_hit {
	bool found;
	int fd;
	uint64_t pos;
	uint32_t len;
	struct st_batch_hdr h;
};
void st_log_batch_for_time(struct st_log *log, int64_t ts_ms, struct st_time_hit *hit);
int  st_log_batch_for_time_nowait(struct st_log *log, int64_t ts_ms, struct st_time_hit *hit, int *fd,
                                  uint64_t *pos, uint32_t *len);

/* Raw bytes of each batch st_log_scan hands over: header + enough of the first
 * record to decode a transaction marker (st_batch_marker_type). */
#define ST_SCAN_RAW_BYTES 128

/*
 * Called by st_log_scan for each batch, in offset order: its decoded header,
 * and its first raw_len = min(total size, ST_SCAN_RAW_BYTES) bytes as stored
 * (valid only during the call). Non-zero stops the scan.
 */
typedef int (*st_scan_cb)(void *arg, const struct st_batch_hdr *h, const uint8_t *raw, size_t raw_len);

/*
 * Call cb for the header of every batch from the one that holds from_offset
 * (or the first one at/after it; from the first segment's base if from_offset is
 * below it: below a raised log start too, which recovery must read) up to the end of the durable log, in order, across segments. Reads only
 * each batch's first ST_SCAN_RAW_BYTES (one pread) and skips the rest by
 * batchLength. Synchronous,
 * for start-up recovery (producer state rebuild), where the durable end is the
 * LEO; appends still in flight are not visited. Damaged ranges set aside at
 * open are stepped over. Returns 0 at the end, cb's value if it stopped the
 * scan, or -errno on a read error (-EBADMSG for a bad header the open did not
 * set aside). Locality: shard core (owner), init only.
 */
int  st_log_scan(struct st_log *log, int64_t from_offset, st_scan_cb cb, void *arg);

/*
 * Read the whole log back, batch by batch, in offset order (start-up of the
 * internal logs: __transaction_state, __consumer_offsets). cb gets each
 * whole batch; a negative return stops the walk and is returned. Synchronous
 * preads, 4 MiB at a time; a batch larger than that is -EFBIG. Damaged
 * ranges set aside at open are skipped (logged): what follows is still
 * read, so a later record of the same key supersedes a lost one.
 */
typedef int (*st_batch_cb)(void *arg, const uint8_t *batch, size_t len, const struct st_batch_hdr *h);
int  st_log_read_batches(struct st_log *log, st_batch_cb cb, void *arg);

/* Damage ranges set aside at open; *offsets_lost (if not NULL) gets the offsets they held. */
uint32_t st_log_damage_count(const struct st_log *log, int64_t *offsets_lost);

/*
 * Compaction by rewrite (internal logs): st_log_roll starts a new segment at
 * the LEO (the file is created at once; no-op if the active one is empty;
 * its directory fsync is linked before its first append); once everything
 * worth keeping has been appended again after that point and is durable,
 * st_log_drop_before deletes every whole segment that ends at or before
 * offset (never the active one, never one with writes in flight). Returns
 * 0/-errno, and the number of segments deleted.
 */
int  st_log_roll(struct st_log *log);
int  st_log_drop_before(struct st_log *log, int64_t offset);

/*
 * One such compaction in progress, for a caller that keeps the live set in
 * memory: st_compaction_begin rolls the log and remembers where the
 * rewrite starts; the caller appends every live record again, calling
 * st_compaction_queued for each write queued and st_compaction_lost for
 * each one it could not queue; st_compaction_end says the rewrite is fully
 * queued; every queued write's completion calls st_compaction_done. The old
 * segments are dropped when the last write is durable and none was lost or
 * failed; otherwise they stay (nothing is lost, the next compaction tries
 * again). end/done return the segments dropped when this call finished the
 * compaction, -EAGAIN while writes are outstanding, -EIO when it finished
 * but a write was lost (old segments kept). Locality: the log's core.
 */
struct st_compaction {
	int64_t from;                 /* LEO at the roll: the rewrite starts here */
	uint32_t pending;             /* queued rewrite writes not yet complete */
	bool queuing;                 /* between begin and end */
	bool failed;                  /* a write was lost or failed: keep the old segments */
};
int  st_compaction_begin(struct st_log *log, struct st_compaction *k);
static inline void st_compaction_queued(struct st_compaction *k) { k->pending++; }
static inline void st_compaction_lost(struct st_compaction *k) { k->failed = true; }
int  st_compaction_end(struct st_log *log, struct st_compaction *k);
int  st_compaction_done(struct st_log *log, struct st_compaction *k, int status);
static inline bool st_compaction_busy(const struct st_compaction *k) { return k->queuing || k->pending; }

/* Apply retention (size and time, now_ms) and delete the segments wholly below a raised log start
 * (st_log_raise_start); returns segments deleted. Owner core timer. */
int  st_log_retain(struct st_log *log, int64_t now_ms);

#endif
