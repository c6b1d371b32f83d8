/*
 * log_internal.h - storage-folder internals of the partition log: on-disk
 * formats, limits and the structs behind struct st_io / struct st_log.
 * Only storage/ (and its unit tests and tools/) include this.
 *
 * ---------------------------------------------------------------------------
 * Directory of one partition:   <dir>/<base>.log   <dir>/<base>.index
 *                               <dir>/<base>.timeindex
 * <base> is the segment's base offset (offset of its first batch) written as
 * 20 decimal digits with leading zeros ("%020" PRId64), so names sort in
 * offset order.
 *
 * <base>.log - the batches exactly as received, back to back, with only
 * baseOffset (bytes 0..7, outside the CRC) patched by the broker. No file
 * header, no padding: byte 0 is the first batch. Batch layout: batch.h.
 * Invariants: batch i+1 starts where batch i ends; batch i+1's baseOffset ==
 * batch i's baseOffset + lastOffsetDelta + 1; the first batch's baseOffset
 * == <base>; segment k+1's <base> == segment k's end offset.
 *
 * <base>.index - sparse offset index, written when a rolled (sealed)
 * segment's last write (and fdatasync) completed, at close, and after a
 * recovery scan rebuilt it; never fsynced (recovery validates it). All
 * integers BIG-endian (like the batches).
 *
 *   offset size field          notes
 *   ------ ---- -------------- --------------------------------------------
 *        0    4 magic          "SLIX" (0x534c4958)
 *        4    4 version        1
 *        8    8 base_offset    must equal <base>
 *       16    8 log_bytes      size of <base>.log this index describes
 *       24    8 end_offset     offset after the segment's last batch
 *       32    8 max_timestamp  largest batch maxTimestamp, -1 if none
 *       40    4 entry_count    n
 *       44    4 crc            CRC-32C of bytes 0..43 followed by the entries
 *       48  8*n entries        n x { uint32 relative offset, uint32 position }
 *
 * Entry (rel, pos): the batch whose baseOffset is <base> + rel starts at byte
 * pos of the .log. The first batch always has an entry (0, 0); later batches
 * get one when they start >= index_interval_bytes after the previous entry's
 * position, so a lookup scans at most ~index_interval_bytes of headers.
 * Both fields strictly increase. An index is trusted at recovery only when
 * magic, version, base, crc and entry order are valid AND log_bytes equals
 * the .log's size AND the segment's first batch is whole and valid (length,
 * magic, CRC32C, baseOffset == <base>); otherwise the segment is scanned and
 * the index rewritten. The last (active) segment is always scanned, and so
 * is every segment of a log opened with scan_sealed (the coordinators' logs).
 * A segment with damage (below) never has an index: it is scanned each open.
 *
 * <base>.timeindex - sparse time index, beside the offset index: one entry
 * per offset-index entry, written with it (same moments, same io_uring
 * path, no fsync) and trusted with it: a segment whose .index is trusted
 * but whose .timeindex is missing or does not validate is scanned, and both
 * are rewritten. Big-endian:
 *
 *   offset size field          notes
 *   ------ ---- -------------- --------------------------------------------
 *        0    4 magic          "SLTI" (0x534c5449)
 *        4    4 version        1
 *        8    8 base_offset    must equal <base>
 *       16    8 log_bytes      size of <base>.log this index describes
 *       24    4 entry_count    n, must equal the .index's
 *       28    4 crc            CRC-32C of bytes 0..27 followed by the entries
 *       32  8*n entries        n x { int64 max timestamp so far }
 *
 * Entry i: the largest batch maxTimestamp of the segment's batches that lie
 * before offset-index entry i+1's position (to the segment's end for the
 * last): a running maximum, so entries never decrease, and the last one,
 * floored at -1, is the .index's max_timestamp. A lookup by time (Kafka's
 * ListOffsets: the first batch whose maxTimestamp >= target) takes the first
 * segment whose max_timestamp reaches the target, the first entry i there
 * whose value does (binary search), and reads only the headers from entry
 * i's position to entry i+1's: every batch before lies under an entry
 * below the target. So one lookup reads at most one index interval of
 * headers, whatever the timestamps' order within and across batches.
 *
 * Recovery tells a torn write from damage. A torn write can only be the end
 * of the newest data: a bad batch after which no valid batch follows, in the
 * last segment holding a valid batch; or there, a bad batch whose start lies
 * on a page of zeros (zeros from it through a page boundary, a header's worth
 * at least) before valid batches: a power cut kept later pages of the last,
 * unsynced write and not an earlier one, so nothing from there on was
 * acknowledged. It is cut (ftruncate), with the segments after it (they hold
 * no valid batch). Anything else is damage: the scanner resynchronises on the next
 * position where a valid batch starts (parses, fits, CRC32C good, baseOffset
 * at or above the expected one) and sets the bytes in between aside as a
 * damage range {bytes [pos, end), offsets [from, to)} of that segment
 * (struct st_damage, in memory only, rebuilt by the scan at every open);
 * damage running to the end of a sealed segment ends at the next segment's
 * base. Nothing is cut or deleted for damage. A fetch that starts in a
 * damaged range fails (-EBADMSG: CORRUPT_MESSAGE), one that runs into it
 * stops before it, everything else is served. A batch that is whole with a
 * good CRC but whose baseOffset (outside the CRC) breaks the sequence has the
 * one value it can have (the previous batch's end) written back. A segment
 * whose base does not continue the previous one (offsets missing between
 * them) makes the open fail (-EBADMSG): the partition stays offline, its
 * files untouched, rather than served with a hole nobody set aside.
 * A cut can leave a sealed segment's bad end, set aside as damage because
 * valid batches followed, with nothing valid after it: the rules then make it
 * a torn tail. So a recovery that cut or dropped anything while a sealed
 * segment ends in damage runs again on what it left (at most
 * ST_LOG_RECOVER_PASSES_MAX passes): the next open finds the same log, and
 * the LEO never goes back between two opens.
 *
 * recovery-point - which bytes were durable (Kafka's recovery point, per
 * partition): "segment <base> held <bytes> bytes that an fdatasync covered".
 * Overwritten in place (pwrite at 0, then fdatasync, through the core's
 * io_uring: never waited for by an append) after a group's fdatasync once
 * the durable end moved ST_LOG_RECOVERY_POINT_BYTES past the last record or
 * into a newer segment, from st_log_retain (the owner's timer) whenever it
 * lags, and at st_log_close; a new log's is {0, 0}. Big-endian:
 *
 *   offset size field          notes
 *   ------ ---- -------------- --------------------------------------------
 *        0    4 magic          "SLRP" (0x534c5250)
 *        4    4 version        1
 *        8    8 base           a segment's base offset (file name)
 *       16    8 bytes          bytes [0, bytes) of that segment were durable
 *       24    4 crc            CRC-32C of bytes 0..23
 *
 * It only ever names bytes whose fdatasync completed (recovery fdatasyncs
 * every segment it scanned, since after a crash of the process alone the
 * last write may still be only in the page cache), and a recovery that
 * cuts or drops anything writes it again (synchronously, at open) at the
 * synced end, so it is never ahead of the truth; it lags by at most one
 * interval. Everything after it is where the unsynced writes of a crash can
 * lie (one write+fdatasync per log is in flight, and it starts at the
 * durable end): recovery checks it batch by batch and cuts at the first bad
 * batch (Kafka's recovery of the segments past its recovery point), with
 * the later segments; nothing cut was acknowledged unless damage struck
 * there within the last interval, the price Kafka pays too. Before the
 * point, the rules above apply unchanged (a bad batch with valid ones after
 * it is damage, set aside). A missing or torn record (bad magic, version or
 * CRC), one naming a segment that is not there, and a log without fsync
 * (which removes it at open) leave only the rules above: never worse than
 * without it.
 * ---------------------------------------------------------------------------
 */
#ifndef SLUICE_STORAGE_LOG_INTERNAL_H
#define SLUICE_STORAGE_LOG_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "batch.h"
#include "fop.h"
#include "log.h"

#define ST_INDEX_MAGIC 0x534c4958u          /* "SLIX" */
#define ST_INDEX_VERSION 1u
#define ST_INDEX_HEADER_BYTES 48
#define ST_INDEX_ENTRY_BYTES 8
#define ST_TINDEX_MAGIC 0x534c5449u         /* "SLTI" */
#define ST_TINDEX_VERSION 1u
#define ST_TINDEX_HEADER_BYTES 32
#define ST_TINDEX_ENTRY_BYTES 8
#define ST_RP_MAGIC 0x534c5250u             /* "SLRP" */
#define ST_RP_VERSION 1u
#define ST_RP_BYTES 28
#define ST_RP_NAME "recovery-point"
/* The log start offset raised past the first segment's base (DeleteRecords): magic, version,
 * offset (be64), crc32c of the 16 bytes before it. Replaced whole (temp file, rename). */
#define ST_LS_MAGIC 0x534c4c53u             /* "SLLS" */
#define ST_LS_VERSION 1u
#define ST_LS_BYTES ST_LOG_START_BYTES
#define ST_LS_NAME "log-start-offset"
#define ST_LS_TMP "log-start-offset.tmp"

/* Limits (units last). */
#define ST_IO_APPENDS_MAX 8192u          /* appends queued or in flight per core (slot pool) */
#define ST_IO_IOV_MAX 256u               /* iovecs in one group's writev; more waits for the next group */
#define ST_IO_RETRIES_MAX 64u            /* consecutive writes without progress before failing */
#define ST_LOG_INDEX_ENTRIES_MAX (1u << 22) /* per segment: bounds segment_bytes / index_interval_bytes */
#define ST_LOG_SEGMENT_BYTES_MIN 1024u
#define ST_LOG_SEGMENT_BYTES_MAX 0xffffffffu /* index positions are uint32 */
#define ST_LOG_SCAN_BUF_BYTES (1u << 20) /* recovery read window; larger batches are CRC'd in chunks */
#define ST_LOG_SEGMENTS_INIT 16u         /* initial segment table capacity (doubles on roll) */
#define ST_LOG_NAME_BYTES 32u            /* "<20 digits>.timeindex" + NUL */
#define ST_LOG_DELETE_PASSES_MAX 16      /* directory passes of st_log_delete */
#define ST_LOG_DAMAGE_MAX 64u            /* damage ranges set aside per segment; more fails the open */
#define ST_LOG_PAGE_BYTES 4096u          /* unit in which a power cut loses writes (torn-write holes) */
#define ST_LOG_RECOVERY_POINT_BYTES (1u << 20) /* durable growth that rewrites the recovery point */
#define ST_LOG_RECOVER_PASSES_MAX 4       /* recovery passes at open: again while a pass cut something */

_Static_assert(ST_IO_IOV_MAX <= 1024, "writev takes at most IOV_MAX (1024) iovecs");

/* One sparse index entry, in host order in memory. Locality: shard core (owner). */
struct st_index_entry {
	uint32_t rel;   /* batch base offset - segment base */
	uint32_t pos;   /* byte position in the .log */
};

/* Damaged bytes of a segment set aside at recovery (see the header comment). Locality: shard core (owner). */
struct st_damage {
	uint64_t pos, end;        /* bytes [pos, end) of the .log; a valid batch (or the file end) is at end */
	int64_t from, to;         /* the offsets that lay there: lost */
};

/* One segment file and its index. Locality: shard core (owner). */
struct st_seg {
	int64_t base;             /* base offset (file name) */
	int64_t end;              /* offset after the last batch appended (queued included) */
	int64_t max_ts;           /* largest batch maxTimestamp, -1 if no batch */
	uint64_t size;            /* bytes appended (queued included): next write position */
	uint64_t durable_size;    /* bytes whose write (and sync) completed: readers stop here */
	int fd;
	bool index_dirty;         /* in-memory index newer than the .index file */
	uint32_t queued;          /* appends of this segment queued or in flight */
	bool name_durable;        /* its directory entry is synced: false after a roll until the dirsync */
	uint64_t prealloc_end;    /* file space reserved (asked for) up to here; the file size at open */
	int dfd;                  /* the same file opened O_DIRECT (the active segment, direct io), or -1 */
	struct st_index_entry *index;
	int64_t *tindex;          /* the time index: entry i beside index[i] (header comment) */
	uint32_t index_n, index_cap; /* both arrays' */
	struct st_damage *dmg;    /* ndmg ranges, ascending; set by the recovery scan only */
	uint32_t ndmg;
	bool damage_seen;         /* a read met damage the scan did not know (trusted index): logged once */
	struct st_seg *drop_next; /* removed from the log, waiting for a free st_seg_drop (FIFO) */
};

/* One append, from st_log_append until its callback. Locality: shard core (owner). */
struct st_slot {
	struct st_slot *next;     /* free list, a log's pending list or its group */
	uint8_t *batch;
	uint32_t len;
	uint32_t count;           /* records (lastOffsetDelta + 1) */
	int64_t base;
	uint64_t pos;             /* file position in seg */
	struct st_seg *seg;
	st_append_cb cb;          /* called with cookie at the end */
	void *cookie;
};

/*
 * The write+sync chain of one log: a prefix of its pending appends that lie
 * in one segment, written by ONE writev at their (contiguous) file position
 * and covered by ONE fdatasync linked after it. Locality: shard core (owner).
 */
struct st_group {
	struct st_slot *head, *tail;
	uint32_t n;
	struct st_seg *seg;
	uint64_t pos;             /* file position of the first byte */
	uint64_t total;           /* bytes to write */
	uint64_t written;         /* bytes the kernel reported written so far */
	int64_t end;              /* offset after the group's last batch */
	uint32_t iov_n, iov_first;/* iovecs in use; first one not fully written */
	uint32_t ops_left;        /* CQEs still expected for the submitted chain */
	uint32_t retries;         /* consecutive submissions without progress */
	int err;                  /* first hard error (-errno), 0 if none */
	bool active;              /* formed: in flight or waiting to be resubmitted */
	bool synced;              /* the fdatasync covering every byte completed */
	bool fault;               /* test only (st_log_fault_write): its write writes nothing and fails EIO */
	bool falloc;              /* its chain has a fallocate in front of the write (log_prep) */
	uint64_t falloc_from;     /* the segment's prealloc_end before it (back there if it was cancelled) */
	bool dio;                 /* written from the log's direct buffer: whole blocks O_DIRECT, then the tail */
	uint64_t dio_full;        /* bytes of the buffer written O_DIRECT (whole blocks, from dbuf[0]) */
	uint64_t dio_tail;        /* bytes after them written through the ordinary descriptor (< a block) */
	bool dio_full_done, dio_tail_done; /* each write completed whole (a short one is written again) */
};

/* Per-core I/O engine. Locality: shard core (one per core). */
struct st_io {
	struct io_uring *ring;
	struct st_io_config cfg;
	struct st_slot *free;              /* free slots */
	struct st_slot *slots;             /* ST_IO_APPENDS_MAX, allocated at create */
	struct st_log *dirty_head, *dirty_tail; /* logs with SQEs to prepare, FIFO */
	uint32_t pending;                  /* appends queued or in flight */
	uint32_t fops;                     /* file operations (fop.h) in flight */
	bool quiescing;                    /* stopping (st_io_quiesce): removals waiting for a drop stay waiting */
};

/*
 * A segment being removed (retention, DeleteRecords, a compaction's old
 * segments): its three files unlinked through io_uring (fop.h), after its
 * descriptors are closed, so the owner core never waits in unlink (or a
 * last close) while the file system frees a large file's blocks (log.c,
 * seg_remove). ST_LOG_DROPS_MAX per log at once; a removal that finds every
 * one busy waits, its segment out of the log but its files still open, in
 * the log's FIFO (drop_wait), for the next to finish: a bulk retention or a
 * compaction of many segments never unlinks on the core. A non-empty FIFO
 * means both drops are busy (st_log_idle waits for them), except once the
 * core stops (st_io_quiesce): then no new drop starts, so a stop waits for
 * two drops per log at most, and the close only closes the waiting
 * segments' descriptors; their files are removed after the next start
 * (they lie below the log start, or are due for retention again).
 * Locality: the log's core.
 */
#define ST_LOG_DROPS_MAX 2u
struct st_seg_drop {
	struct st_fop fop[3];              /* .log (its descriptor closed first), .index, .timeindex */
	struct st_log *log;
	uint8_t left;                      /* of fop[] still running; 0: free */
	char names[3][ST_LOG_NAME_BYTES];
};

/* One partition. Locality: shard core (owner). */
struct st_log {
	struct st_io *io;
	struct st_log_config cfg;
	char *dir;
	int dirfd;
	struct st_seg **segs;              /* oldest first; segs[nsegs-1] is active */
	uint32_t nsegs, segs_cap;
	int64_t leo;                       /* next offset to assign */
	int64_t durable;                   /* end of completed appends (high watermark) */
	int failed;                        /* -errno once a write failed; absorbing */
	struct st_slot *pend_head, *pend_tail; /* queued, not yet in a group */
	struct st_group grp;
	struct st_log *dirty_next;
	bool on_dirty;
	uint32_t index_writes;             /* sealed segments' indexes being written (seg_seal) */
	int rp_fd;                         /* the recovery-point file, -1 without fsync */
	struct st_fop rp_fop;              /* its write+fdatasync in flight (st_log_idle waits) */
	int64_t rp_base;                   /* what the file holds: segment base, -1 nothing valid */
	uint64_t rp_bytes;                 /* and its durable bytes */
	int64_t rp_next_base;              /* what the write in flight says */
	uint64_t rp_next_bytes;
	bool rp_warned;                    /* a failed write was logged (once: the next ones try again quietly) */
	bool falloc_off;                   /* a fallocate failed: logged once, no more asked */
	uint8_t rp_buf[ST_RP_BYTES];
	int64_t ls_start;                  /* the log start offset the log-start file holds (0: none); the
	                                      start is the larger of it and segs[0]->base */
	int64_t ls_next;                   /* what the replace in flight writes */
	struct st_fop ls_fop;              /* its replace in flight (st_log_idle waits) */
	st_fop_cb ls_cb;                   /* the caller's, when it is durable (st_log_raise_start) */
	void *ls_arg;
	uint8_t ls_buf[ST_LS_BYTES];
	int64_t keep_from;                 /* st_log_keep_from: segments holding offsets at or above it are
	                                      not deleted for the log start (INT64_MAX: no bound) */
	int64_t fault_write_at1;           /* test only: 1 + the offset whose write is to fail, 0 none */
	uint64_t time_headers;             /* batch headers read by lookups by time (tests: the bound) */
	uint8_t *dbuf;                     /* direct io: ST_LOG_DIRECT_BUF_BYTES, block-aligned; else NULL */
	struct st_seg *dseg;               /* the segment whose bytes [dbase, dbase + dlen) dbuf holds */
	uint64_t dbase;                    /* block-aligned file position of dbuf[0] */
	uint64_t dlen;                     /* bytes held: dseg's last partial block (a group's, in flight) */
	bool dio_off;                      /* the file system refused direct io (statx, a write's EINVAL):
	                                    * every segment of this log buffered from now on */
	uint32_t dalign;                   /* the direct block (log.h), 0 until the first O_DIRECT open */
	struct st_seg_drop drops[ST_LOG_DROPS_MAX];
	uint32_t drops_busy;               /* of drops[] in flight (st_log_idle waits) */
	struct st_seg *drop_wait, *drop_wait_tail; /* removed segments waiting for one (st_seg.drop_next) */
	struct iovec iov[ST_IO_IOV_MAX];
};

/* user_data payload: the log pointer (64-byte aligned) with the op in bits 0..2; or, for
 * ST_OP_FOP (bits 0..1 both set), a struct st_fop (16-byte aligned) with the SQE's place in
 * its step in bit 2. */
#define ST_OP_WRITE 0u
#define ST_OP_SYNC 1u
#define ST_OP_DIRSYNC 2u                   /* fsync of the directory after a roll, linked before the write */
#define ST_OP_FOP 3u
#define ST_OP_MASK 3u                      /* what tells ST_OP_FOP from the log's ops */
#define ST_OP_FALLOC 4u                    /* the segment's preallocation, linked before the write */
#define ST_OP_DWRITE 5u                    /* direct io: the group's whole blocks, O_DIRECT */
#define ST_OP_LOG_MASK 7u                  /* the log's ops */

struct st_fop;
/* fop.c: one CQE of a file operation. */
void st_fop_complete(struct st_io *io, struct st_fop *f, unsigned idx, int res);

/* Number of segments (tests, tools). Locality: shard core (owner). */
static inline uint32_t st_log_segment_count(const struct st_log *log) { return log->nsegs; }

#endif
