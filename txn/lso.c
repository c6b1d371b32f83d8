/*
 * lso.c - per-partition open transactions (the LSO) and the aborted
 * transaction index (read_committed fetches), see lso.h.
 *
 * Open transactions: an array in begin order. First offsets are assigned by
 * the log and only grow, so the array is also sorted by first offset and the
 * LSO is its head. An end removes any entry (memmove); lookups by pid are
 * linear, which is cheap for the handful of producers that keep a
 * transaction open on one partition at a time. An entry whose marker is
 * written but not yet durable is closing (txn_lso_close): it still holds the
 * LSO, and its producer may open its next transaction beside it, so a
 * producer has at most one open entry and one closing entry.
 *
 * Aborted index: an array sorted by last_offset (the ABORT marker's offset),
 * appended in marker order. A fetch query binary-searches the first entry
 * with last_offset >= from, then walks forward while an entry could still
 * start below `to`. Every entry with last_offset < to does; past those, only
 * the long transactions that began before `to`. To find those without
 * walking the rest, the array is cut into blocks of TXN_LSO_BLOCK_ENTRIES
 * entries, each with the smallest first offset in it (min) and in it and
 * every later block (suffix_min): the walk skips a block whose min is >= to
 * and stops at one whose suffix_min is. So one long transaction costs only
 * the queries it overlaps (and a block of entries around it), not every
 * query after it, and it stops costing anything once retention trims it.
 * An abort updates its block and lowers suffix_min of the blocks before it
 * down to its first offset (a long transaction walks back over the blocks
 * it spans); a trim, which moves the array, recomputes them all.
 *
 * Allocation: the arrays (open, aborted and its block table) grow by
 * doubling, only when a transaction begins beyond the current capacity (and
 * once at index open for the entries loaded); nothing else allocates. On a
 * shard core they come from the core's pool (arena.h, sized at start-up),
 * not malloc: a spent pool is -ENOBUFS from txn_lso_reserve. A begin reserves everything its end can
 * need: room for the open entry and for one aborted entry (the invariant
 * nab + nopen <= ab_cap <= ab_max), so an end never fails for want of room
 * and a marker once appended is always indexed. txn_lso_reserve checks that
 * room before the caller appends the transaction's first batch.
 *
 * Index file DIR/aborted.txnindex, all integers BIG-endian:
 *
 *   offset size field               notes
 *   ------ ---- ------------------- ---------------------------------------
 *        0    4 magic               "SLTA" (0x534c5441)
 *        4    2 version             1
 *        6    2 entry_bytes         28 (checked: a different layout is refused)
 *        8  n*28 entries            in marker order (last_offset strictly grows)
 *
 * Entry (28 bytes):
 *
 *   offset size field               notes
 *   ------ ---- ------------------- ---------------------------------------
 *        0    8 producer_id         >= 0
 *        8    8 first_offset        >= 0, < last_offset
 *       16    8 last_offset         offset of the ABORT marker
 *       24    4 crc                 CRC-32C of bytes [0, 24) of this entry
 *
 * Entries are appended as aborts happen (pwrite at start-up and in tests; on
 * a poll core through its io_uring, one write of up to TXN_LSO_WRITE_ENTRIES
 * at a time, so the file still grows in marker order); txn_lso_sync
 * (fdatasync) runs before every producer-state snapshot, so the index holds
 * every abort below the newest snapshot, and recovery's replay from that
 * snapshot re-adds the later ones (those above txn_lso_last_marker). At open,
 * a partial last entry is a torn append (it was above the snapshot: the
 * replay re-adds it) and is cut; entries at or past the log end are dropped
 * (the log was truncated under them); the cut is made durable before any
 * append. Damage is different: a whole entry that fails its CRC, breaks the
 * order or a field range, or a bad header in front of entries, or a missing
 * file under a non-empty log, could hide aborts below the snapshot that no
 * replay would re-add, and a cut there made aborted records visible. Then
 * nothing of the file is trusted: txn_lso_needs_rebuild says so, recovery
 * rebuilds the index from the COMMIT/ABORT markers of the whole log, and
 * txn_lso_rebuilt replaces the file with the result (atomically, as below).
 * A failed append is sticky: txn_lso_sync reports it from then on, so no
 * snapshot is taken past an abort the file lacks; so does a pending rebuild.
 *
 * Retention trims entries in memory; once the file holds many more entries
 * than memory (txn_lso_compact_index), it is rewritten with the live ones:
 * a new file next to it, synced, renamed over the old one, and the directory
 * synced (on a poll core through its io_uring: the new file stays open
 * across the rename and takes the appends made meanwhile). A crash before
 * the rename leaves the old file, which open reads as before (its dead
 * entries are trimmed again after retention).
 */
#include "lso.h"
#include "arena.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "crc32c.h"
#include "fs.h"
#include "fop.h"

/* Limits (units last). */
#define TXN_LSO_OPEN_INIT 16u                 /* open transactions at create */
#define TXN_LSO_ABORTED_INIT 64u              /* aborted entries at create */
#define TXN_LSO_ABORTED_MAX (1u << 22)        /* per partition: ~96 MiB in memory, ~112 MiB file */
#define TXN_LSO_BLOCK_ENTRIES 64u             /* aborted entries per block of the walk's skip table */
#define TXN_LSO_READ_ENTRIES 2048u            /* entries per read at open (57 KiB buffer) */
#define TXN_LSO_PATH_BYTES 4096u
#define TXN_LSO_WRITE_ENTRIES 64u             /* entries per asynchronous append write (1.8 KiB buffer) */

#define TXN_LSO_MAGIC 0x534c5441u             /* "SLTA" */
#define TXN_LSO_VERSION 1u
#define TXN_LSO_HEADER_BYTES 8u
#define TXN_LSO_ENTRY_BYTES 28u
#define TXN_LSO_ENTRY_CRC_AT 24u
#define TXN_LSO_FILE_NAME "aborted.txnindex"
#define TXN_LSO_COMPACT_MIN_DEAD 4096u        /* rewrite the file once this many entries are trimmed, */
#define TXN_LSO_COMPACT_RATIO 2u              /* and the file holds this many times the live ones */

_Static_assert(TXN_LSO_OPEN_INIT <= TXN_LSO_OPEN_MAX, "limits");
_Static_assert(TXN_LSO_ABORTED_INIT <= TXN_LSO_ABORTED_MAX, "limits");
_Static_assert((uint64_t)TXN_LSO_ABORTED_MAX * TXN_LSO_ENTRY_BYTES < (uint64_t)1 << 40, "file offsets fit");

/* Smallest first offsets of one block of aborted entries. Locality: shard core (owner). */
struct lso_block {
	int64_t min;                  /* in this block */
	int64_t suffix_min;           /* in this block and every later one */
};

/* One open transaction, or one closing: its marker is written, not yet durable. Locality: shard core (owner). */
struct lso_open {
	int64_t pid;
	int64_t first_offset;
	int64_t end_offset;           /* -1: open; else its marker's offset (txn_lso_close) */
};

/* A partition's transaction bookkeeping. Locality: shard core (owner). */
struct txn_lso {
	struct lso_open *open;        /* nopen entries, first_offset ascending (= begin order) */
	uint32_t nopen, open_cap;
	struct txn_aborted *ab;       /* nab entries, last_offset strictly ascending */
	uint32_t nab, ab_cap;         /* nab + nopen <= ab_cap: every open one may end in an abort */
	uint32_t open_max, ab_max;    /* TXN_LSO_*_MAX, or less (txn_lso_set_limits) */
	struct txn_arena *arena;      /* open, ab and blk come from it (txn_lso_create_in); NULL: the heap */
	struct lso_block *blk;        /* block k covers ab[k * TXN_LSO_BLOCK_ENTRIES, ...) up to nab */
	uint32_t blk_cap;             /* >= ab_cap / TXN_LSO_BLOCK_ENTRIES, rounded up */
	int64_t last_marker;          /* largest marker indexed (kept across trim), -1 none */
	int fd;                       /* index file, -1 when not open */
	uint64_t file_entries;        /* entries in the file: the next append goes after them */
	int file_err;                 /* first failed append (-errno), reported by sync; 0 none */
	bool rebuild;                 /* the file is damaged: rebuild from the log, then txn_lso_rebuilt */
	struct st_io *io;             /* appends go through its io_uring (txn_lso_attach_io); NULL: pwrite */
	int dirfd;                    /* with io: the directory the file is in */
	uint32_t unsent;              /* the newest entries of ab not yet handed to a write */
	uint32_t sending;             /* entries in the write in flight (wbuf) */
	struct st_fop wfop;
	struct st_fop cfop;           /* the rewrite of txn_lso_compact_index through io (then the old fd's close) */
	uint8_t *cbuf;                /* its bytes: header + the live entries */
	uint64_t rw_entries;          /* entries in the rewrite */
	uint32_t rw_unsent;           /* of those, how many were unsent when it started */
	bool rewriting;               /* the rewrite is in flight: appends wait (unsent) */
	uint8_t wbuf[TXN_LSO_WRITE_ENTRIES * TXN_LSO_ENTRY_BYTES];
	char path[TXN_LSO_PATH_BYTES];
};

static uint32_t blocks_for(uint32_t entries)
{
	return (entries + TXN_LSO_BLOCK_ENTRIES - 1) / TXN_LSO_BLOCK_ENTRIES;
}

size_t txn_lso_base_bytes(void)
{
	struct txn_lso *l = NULL;
	return sizeof(*l) + TXN_LSO_OPEN_INIT * sizeof(*l->open) + TXN_LSO_ABORTED_INIT * sizeof(*l->ab) +
	       blocks_for(TXN_LSO_ABORTED_INIT) * sizeof(*l->blk);
}

/* Locality: shard core (owner); init only. */
int txn_lso_create(struct txn_lso **out)
{
	return txn_lso_create_in(out, NULL);
}

/* Locality: shard core (owner); init only (partition open). */
int txn_lso_create_in(struct txn_lso **out, struct txn_arena *arena)
{
	struct txn_lso *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->arena = arena;
	/* The first arrays from the heap, at partition open; growth from the arena (arena.h). */
	l->open = malloc(TXN_LSO_OPEN_INIT * sizeof(*l->open));
	l->ab = malloc(TXN_LSO_ABORTED_INIT * sizeof(*l->ab));
	l->blk = malloc(blocks_for(TXN_LSO_ABORTED_INIT) * sizeof(*l->blk));
	if (!l->open || !l->ab || !l->blk) {
		txn_mem_free(arena, l->open);
		txn_mem_free(arena, l->ab);
		txn_mem_free(arena, l->blk);
		free(l);
		return -ENOMEM;
	}
	l->open_cap = TXN_LSO_OPEN_INIT;
	l->ab_cap = TXN_LSO_ABORTED_INIT;
	l->blk_cap = blocks_for(TXN_LSO_ABORTED_INIT);
	l->open_max = TXN_LSO_OPEN_MAX;
	l->ab_max = TXN_LSO_ABORTED_MAX;
	l->last_marker = -1;
	l->fd = -1;
	*out = l;
	return 0;
}

/* Locality: shard core (owner). */
void txn_lso_destroy(struct txn_lso *l)
{
	if (!l)
		return;
	txn_lso_close_index(l);
	txn_mem_free(l->arena, l->open);
	txn_mem_free(l->arena, l->ab);
	txn_mem_free(l->arena, l->blk);
	free(l);
}

/* Make room for `want` entries of `size` bytes in *arr (cap *cap, doubling up to max): a new
 * array from the arena (or the heap), the entries copied, the old one freed. -ENOBUFS when the
 * arena has no block for it (the core's pool is spent), -ENOMEM when the heap has none. */
static int grow(struct txn_arena *arena, void **arr, uint32_t *cap, uint32_t want, uint32_t max, size_t size)
{
	uint32_t c = *cap;

	if (want <= c)
		return 0;
	if (want > max)
		return -ENOMEM;
	while (c < want)
		c = c > max / 2 ? max : c * 2;
	void *p = txn_mem_alloc(arena, (size_t)c * size);
	if (!p)
		return arena ? -ENOBUFS : -ENOMEM;
	memcpy(p, *arr, (size_t)*cap * size);
	txn_mem_free(arena, *arr);
	*arr = p;
	*cap = c;
	return 0;
}

/* Room for `want` aborted entries and their blocks. */
static int grow_aborted(struct txn_lso *l, uint32_t want)
{
	int rc = grow(l->arena, (void **)&l->ab, &l->ab_cap, want, l->ab_max, sizeof(*l->ab));
	if (rc == 0)
		rc = grow(l->arena, (void **)&l->blk, &l->blk_cap, blocks_for(want), blocks_for(l->ab_max),
		          sizeof(*l->blk));
	return rc;
}

/*
 * After a trim, in a pool (arena.h): arrays left at most 1/8 used give their
 * room back (to a quarter used), since the pool is shared with the core's
 * other partitions. The reservation invariant (nab + nopen <= ab_cap) holds
 * across it; a pool without blocks for the smaller arrays keeps the larger.
 */
static void shrink_aborted(struct txn_lso *l)
{
	uint32_t need = l->nab + l->nopen, c = l->ab_cap, oc = l->open_cap;

	if (!l->arena)
		return;
	while (oc / 2 >= TXN_LSO_OPEN_INIT && (uint64_t)l->nopen * 4 <= oc / 2)
		oc /= 2;
	struct lso_open *open = oc * 2 <= l->open_cap ? txn_mem_alloc(l->arena, (size_t)oc * sizeof(*open)) : NULL;
	if (open) {
		memcpy(open, l->open, (size_t)l->nopen * sizeof(*open));
		txn_mem_free(l->arena, l->open);
		l->open = open;
		l->open_cap = oc;
	}
	while (c / 2 >= TXN_LSO_ABORTED_INIT && (uint64_t)need * 4 <= c / 2)
		c /= 2;
	if (c * 2 > l->ab_cap)
		return;
	struct txn_aborted *ab = txn_mem_alloc(l->arena, (size_t)c * sizeof(*ab));
	struct lso_block *blk = ab ? txn_mem_alloc(l->arena, blocks_for(c) * sizeof(*blk)) : NULL;
	if (!blk) {
		txn_mem_free(l->arena, ab);
		return;
	}
	memcpy(ab, l->ab, (size_t)l->nab * sizeof(*ab));
	memcpy(blk, l->blk, blocks_for(l->nab) * sizeof(*blk));
	txn_mem_free(l->arena, l->ab);
	txn_mem_free(l->arena, l->blk);
	l->ab = ab;
	l->blk = blk;
	l->ab_cap = c;
	l->blk_cap = blocks_for(c);
}

/* Append a to the aborted entries (room reserved) and fold its first offset into the blocks. */
static void aborted_push(struct txn_lso *l, const struct txn_aborted *a)
{
	uint32_t k = l->nab / TXN_LSO_BLOCK_ENTRIES;
	int64_t f = a->first_offset;

	assert(l->nab < l->ab_cap && k < l->blk_cap);
	assert(l->nab == 0 || l->ab[l->nab - 1].last_offset < a->last_offset);
	if (l->nab % TXN_LSO_BLOCK_ENTRIES == 0)
		l->blk[k] = (struct lso_block){ .min = f, .suffix_min = f };
	else if (f < l->blk[k].min)
		l->blk[k].min = l->blk[k].suffix_min = f;
	/* The blocks before it now have an entry after them that starts at f. */
	while (k-- > 0 && l->blk[k].suffix_min > f)
		l->blk[k].suffix_min = f;
	l->ab[l->nab++] = *a;
}

/* Recompute every block from the entries (after a trim moved them). */
static void blocks_rebuild(struct txn_lso *l)
{
	uint32_t nblk = blocks_for(l->nab);

	for (uint32_t k = 0; k < nblk; k++) {
		uint32_t end = (k + 1) * TXN_LSO_BLOCK_ENTRIES < l->nab ? (k + 1) * TXN_LSO_BLOCK_ENTRIES : l->nab;
		int64_t m = INT64_MAX;
		for (uint32_t i = k * TXN_LSO_BLOCK_ENTRIES; i < end; i++)
			m = l->ab[i].first_offset < m ? l->ab[i].first_offset : m;
		l->blk[k].min = m;
	}
	for (uint32_t k = nblk; k-- > 0;)
		l->blk[k].suffix_min = k + 1 < nblk && l->blk[k + 1].suffix_min < l->blk[k].min ? l->blk[k + 1].suffix_min
		                                                                              : l->blk[k].min;
}

/*
 * The walk of a query for entries that start below `to`: the first entry at
 * or after i that may (l->nab if none). Entries that end below `to` all
 * start below it; past them, a block whose entries all start at or after
 * `to` is skipped, and the walk ends at a block from which none starts
 * below `to`.
 */
static uint32_t walk_next(const struct txn_lso *l, uint32_t i, int64_t to)
{
	while (i < l->nab && l->ab[i].last_offset >= to) {
		const struct lso_block *b = &l->blk[i / TXN_LSO_BLOCK_ENTRIES];
		if (b->suffix_min >= to)
			return l->nab;
		if (b->min < to)
			return i;
		i = (i / TXN_LSO_BLOCK_ENTRIES + 1) * TXN_LSO_BLOCK_ENTRIES;
	}
	return i < l->nab ? i : l->nab;
}

/* Index of pid's entry ending at end (-1: its open one), or nopen. */
static uint32_t entry_find(const struct txn_lso *l, int64_t pid, int64_t end)
{
	uint32_t i = 0;

	while (i < l->nopen && (l->open[i].pid != pid || l->open[i].end_offset != end))
		i++;
	return i;
}

static uint32_t open_find(const struct txn_lso *l, int64_t pid)
{
	return entry_find(l, pid, -1);
}

/* Locality: shard core (owner); tests only, before any begin. */
void txn_lso_set_limits(struct txn_lso *l, uint32_t open_max, uint32_t aborted_max)
{
	assert(open_max <= TXN_LSO_OPEN_MAX && aborted_max <= TXN_LSO_ABORTED_MAX);
	assert(l->nopen == 0 && (!aborted_max || aborted_max >= l->nab));
	if (open_max)
		l->open_max = open_max;
	if (aborted_max)
		l->ab_max = aborted_max;
}

/* Locality: shard core (owner). */
int txn_lso_reserve(struct txn_lso *l)
{
	/* One more open entry, and one more aborted entry for it should it end in an abort. */
	if (l->nopen >= l->open_max || (uint64_t)l->nab + l->nopen + 1 > l->ab_max)
		return -ENOSPC;
	int rc = grow(l->arena, (void **)&l->open, &l->open_cap, l->nopen + 1, l->open_max, sizeof(*l->open));
	if (rc == 0)
		rc = grow_aborted(l, l->nab + l->nopen + 1);
	return rc;
}

/* Locality: shard core (owner). */
int txn_lso_begin(struct txn_lso *l, int64_t pid, int64_t first_offset)
{
	assert(pid >= 0 && first_offset >= 0);
	/* Offsets come from one log in order: the array stays sorted by first offset. */
	assert(l->nopen == 0 || first_offset >= l->open[l->nopen - 1].first_offset);
	if (open_find(l, pid) < l->nopen)
		return -EEXIST;
	int rc = txn_lso_reserve(l);
	if (rc < 0)
		return rc;
	l->open[l->nopen++] = (struct lso_open){ .pid = pid, .first_offset = first_offset, .end_offset = -1 };
	assert(l->nopen <= l->open_cap && (uint64_t)l->nab + l->nopen <= l->ab_cap &&
	       blocks_for(l->nab + l->nopen) <= l->blk_cap);
	return 0;
}

static void entry_encode(uint8_t *q, const struct txn_aborted *a)
{
	st_put_be64(q, (uint64_t)a->pid);
	st_put_be64(q + 8, (uint64_t)a->first_offset);
	st_put_be64(q + 16, (uint64_t)a->last_offset);
	st_put_be32(q + TXN_LSO_ENTRY_CRC_AT, crc32c(0, q, TXN_LSO_ENTRY_CRC_AT));
}

static void file_send(struct txn_lso *l);

/* The asynchronous append of l->sending entries completed. */
static void file_sent(void *arg, int status)
{
	struct txn_lso *l = arg;
	uint32_t n = l->sending;

	l->sending = 0;
	if (status < 0) {
		l->file_err = status;
		l->unsent = 0; /* later entries would leave a hole: the replay re-adds them */
		fprintf(stderr, "txn lso: %s: append failed (%s): no snapshot until reopened\n", l->path,
		        strerror(-status));
		return;
	}
	l->file_entries += n;
	file_send(l);
}

/* Hand the oldest unsent entries (up to TXN_LSO_WRITE_ENTRIES) to one write; one in flight at a time,
 * so the file grows in marker order with no hole. */
static void file_send(struct txn_lso *l)
{
	if (l->sending || !l->unsent || l->fd < 0 || l->file_err || l->rebuild || l->rewriting)
		return;   /* a rewrite switches files: what arrives meanwhile goes to the new one */
	uint32_t n = l->unsent < TXN_LSO_WRITE_ENTRIES ? l->unsent : TXN_LSO_WRITE_ENTRIES;
	uint32_t first = l->nab - l->unsent;
	for (uint32_t k = 0; k < n; k++)
		entry_encode(l->wbuf + k * TXN_LSO_ENTRY_BYTES, &l->ab[first + k]);
	l->unsent -= n;
	l->sending = n;
	uint64_t pos = TXN_LSO_HEADER_BYTES + l->file_entries * TXN_LSO_ENTRY_BYTES;
	st_fop_write(l->io, &l->wfop, l->fd, l->wbuf, (size_t)n * TXN_LSO_ENTRY_BYTES, pos, file_sent, l);
}

/* Append one entry to the file (when open and healthy); a failure becomes sticky. */
static void file_append(struct txn_lso *l, const struct txn_aborted *a)
{
	uint8_t q[TXN_LSO_ENTRY_BYTES];

	if (l->fd < 0 || l->file_err || l->rebuild)
		return; /* after a failure, later entries would leave a hole: the replay re-adds them;
		         * during a rebuild, txn_lso_rebuilt writes them all */
	if (l->io) {
		/* On a poll core: no pwrite there. The entry is the newest in ab; it goes when its turn comes. */
		l->unsent++;
		file_send(l);
		return;
	}
	entry_encode(q, a);
	off_t pos = (off_t)(TXN_LSO_HEADER_BYTES + l->file_entries * TXN_LSO_ENTRY_BYTES);
	ssize_t r;
	do
		r = st_fs_pwrite(l->fd, q, sizeof(q), pos);
	while (r < 0 && errno == EINTR);
	if (r != (ssize_t)sizeof(q)) {
		l->file_err = r < 0 ? -errno : -EIO;
		fprintf(stderr, "txn lso: %s: append failed (%s): no snapshot until reopened\n", l->path,
		        strerror(-l->file_err));
		return;
	}
	l->file_entries++;
}

/* Locality: shard core (owner). */
int txn_lso_close(struct txn_lso *l, int64_t pid, int64_t marker_offset)
{
	uint32_t i = open_find(l, pid);

	if (i == l->nopen)
		return -ENOENT;
	assert(marker_offset > l->open[i].first_offset);
	l->open[i].end_offset = marker_offset;
	return 0;
}

/* Locality: shard core (owner). */
bool txn_lso_closing(const struct txn_lso *l, int64_t pid)
{
	for (uint32_t i = 0; i < l->nopen; i++)
		if (l->open[i].pid == pid && l->open[i].end_offset >= 0)
			return true;
	return false;
}

/* Locality: shard core (owner). */
int txn_lso_end(struct txn_lso *l, int64_t pid, int64_t marker_offset, bool aborted)
{
	uint32_t i = entry_find(l, pid, marker_offset);   /* closed by this marker, else still open */

	if (i == l->nopen)
		i = open_find(l, pid);
	if (i == l->nopen)
		return -ENOENT;
	assert(marker_offset > l->open[i].first_offset);
	/* An abort at or below last_marker is already indexed (recovery replays it again). */
	if (aborted && marker_offset > l->last_marker) {
		/* Room reserved by the begin: an end never needs any (aborted_push asserts it). */
		struct txn_aborted a = { .pid = pid, .first_offset = l->open[i].first_offset, .last_offset = marker_offset };
		aborted_push(l, &a);
		l->last_marker = marker_offset;
		file_append(l, &a);
	}
	memmove(&l->open[i], &l->open[i + 1], (l->nopen - i - 1) * sizeof(*l->open));
	l->nopen--;
	return 0;
}

/* Locality: shard core (owner). */
int64_t txn_lso_open_first(const struct txn_lso *l, int64_t pid)
{
	uint32_t i = open_find(l, pid);
	return i < l->nopen ? l->open[i].first_offset : -1;
}

/* Locality: shard core (owner). */
int64_t txn_lso_open_after(const struct txn_lso *l, int64_t after, int64_t *pid)
{
	uint32_t lo = 0, hi = l->nopen;   /* the first entry with first_offset > after */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (l->open[mid].first_offset > after)
			hi = mid;
		else
			lo = mid + 1;
	}
	while (lo < l->nopen && l->open[lo].end_offset >= 0)
		lo++;   /* closing: its marker is written */
	if (lo == l->nopen)
		return -1;
	*pid = l->open[lo].pid;
	return l->open[lo].first_offset;
}

/* Locality: shard core (owner). */
int64_t txn_lso_get(const struct txn_lso *l, int64_t hw)
{
	if (l->nopen && l->open[0].first_offset < hw)
		return l->open[0].first_offset;
	return hw;
}

/* Locality: shard core (owner). */
uint32_t txn_lso_open_count(const struct txn_lso *l)
{
	return l->nopen;
}

/* Index of the first entry with last_offset >= from (binary search; nab if none). */
static uint32_t aborted_lower_bound(const struct txn_lso *l, int64_t from)
{
	uint32_t lo = 0, hi = l->nab;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (l->ab[mid].last_offset < from)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Locality: shard core (owner). */
uint32_t txn_lso_aborted(const struct txn_lso *l, int64_t from, int64_t to, struct txn_aborted *out,
                         uint32_t max)
{
	uint32_t n = 0;

	assert(max == 0 || out);
	for (uint32_t i = walk_next(l, aborted_lower_bound(l, from), to); i < l->nab; i = walk_next(l, i + 1, to)) {
		if (l->ab[i].first_offset >= to)
			continue;
		if (n < max)
			out[n] = l->ab[i];
		n++;
	}
	return n;
}

/* Sift heap[k] down in a max-heap of n first offsets. */
static void heap_down(int64_t *heap, uint32_t n, uint32_t k)
{
	for (;;) {
		uint32_t big = k, a = 2 * k + 1, b = a + 1;
		if (a < n && heap[a] > heap[big])
			big = a;
		if (b < n && heap[b] > heap[big])
			big = b;
		if (big == k)
			return;
		int64_t t = heap[k];
		heap[k] = heap[big];
		heap[big] = t;
		k = big;
	}
}

/*
 * Locality: shard core (owner).
 *
 * An entry overlaps [from, bound) iff last_offset >= from and first_offset <
 * bound, so the largest bound with at most max overlapping is the
 * (max+1)-th smallest first offset among the entries with last_offset >=
 * from (first offsets are distinct: each is a batch of its producer). The
 * walk keeps the max+1 smallest seen in a max-heap; once it is full its top
 * is the bound so far, which only falls, and the blocks (walk_next) end the walk
 * where no later entry can start below it.
 */
int64_t txn_lso_aborted_bound(const struct txn_lso *l, int64_t from, int64_t to, uint32_t max, int64_t *heap)
{
	int64_t bound = to;
	uint32_t n = 0;

	for (uint32_t i = walk_next(l, aborted_lower_bound(l, from), bound); i < l->nab;
	     i = walk_next(l, i + 1, bound)) {
		int64_t f = l->ab[i].first_offset;
		if (f >= bound)
			continue;
		if (n <= max) {
			uint32_t k = n++;
			heap[k] = f;
			while (k > 0 && heap[(k - 1) / 2] < heap[k]) { /* sift up */
				int64_t t = heap[k];
				heap[k] = heap[(k - 1) / 2];
				heap[(k - 1) / 2] = t;
				k = (k - 1) / 2;
			}
		} else {
			heap[0] = f; /* f < bound == heap[0]: it replaces the largest */
			heap_down(heap, n, 0);
		}
		if (n == max + 1)
			bound = heap[0];
	}
	return bound;
}

/* Locality: shard core (owner). */
uint32_t txn_lso_aborted_pid(const struct txn_lso *l, int64_t from, int64_t to, int64_t pid,
                             struct txn_aborted *out)
{
	for (uint32_t i = walk_next(l, aborted_lower_bound(l, from), to); i < l->nab; i = walk_next(l, i + 1, to))
		if (l->ab[i].pid == pid && l->ab[i].first_offset < to) {
			*out = l->ab[i];
			return 1;
		}
	return 0;
}

/* Locality: shard core (owner); retention timer. */
void txn_lso_trim(struct txn_lso *l, int64_t log_start)
{
	uint32_t k = 0;

	while (k < l->nab && l->ab[k].last_offset < log_start) /* sorted: the dead ones are a prefix */
		k++;
	if (!k)
		return;
	memmove(l->ab, l->ab + k, (l->nab - k) * sizeof(*l->ab));
	l->nab -= k;
	if (l->unsent > l->nab)
		l->unsent = l->nab; /* below the log start: the file need not have them */
	blocks_rebuild(l); /* the trimmed ones may have been the long ones: the walk shortens */
	shrink_aborted(l);
}

/* Locality: shard core (owner); tests (the walk's cost). */
uint32_t txn_lso_query_cost(const struct txn_lso *l, int64_t from, int64_t to)
{
	uint32_t n = 0;

	for (uint32_t i = walk_next(l, aborted_lower_bound(l, from), to); i < l->nab; i = walk_next(l, i + 1, to))
		n++;
	return n;
}

/* ---- index file ------------------------------------------------------------ */

/* Decode and check entry q against the previous one; false ends the valid prefix. */
static bool entry_decode(const uint8_t *q, const struct txn_aborted *prev, struct txn_aborted *a)
{
	if (crc32c(0, q, TXN_LSO_ENTRY_CRC_AT) != st_be32(q + TXN_LSO_ENTRY_CRC_AT))
		return false;
	a->pid = (int64_t)st_be64(q);
	a->first_offset = (int64_t)st_be64(q + 8);
	a->last_offset = (int64_t)st_be64(q + 16);
	return a->pid >= 0 && a->first_offset >= 0 && a->first_offset < a->last_offset &&
	       (!prev || prev->last_offset < a->last_offset);
}

static int pread_full(int fd, uint8_t *buf, size_t len, off_t pos)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = st_fs_pread(fd, buf + got, len - got, pos + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO; /* shrank under us: nobody else writes this file */
		got += (size_t)r;
	}
	return 0;
}

/* Load the valid prefix of n_file entries into l->ab; returns how many were kept, or -errno. */
static int64_t index_load(struct txn_lso *l, uint64_t n_file, int64_t log_end, const char **why)
{
	uint8_t *buf;
	uint64_t done = 0;

	*why = NULL;
	if (n_file > l->ab_max) {
		n_file = l->ab_max;
		*why = "more entries than the limit";
	}
	if (!n_file)
		return 0;
	int rc = grow_aborted(l, (uint32_t)n_file);
	if (rc < 0)
		return rc;   /* -ENOBUFS: more aborts than the core's pool holds; the caller says so */
	if (!(buf = malloc(TXN_LSO_READ_ENTRIES * TXN_LSO_ENTRY_BYTES)))
		return -ENOMEM;
	while (done < n_file) {
		uint64_t chunk = n_file - done < TXN_LSO_READ_ENTRIES ? n_file - done : TXN_LSO_READ_ENTRIES;
		off_t pos = (off_t)(TXN_LSO_HEADER_BYTES + done * TXN_LSO_ENTRY_BYTES);
		if ((rc = pread_full(l->fd, buf, chunk * TXN_LSO_ENTRY_BYTES, pos)) < 0) {
			free(buf);
			return rc;
		}
		for (uint64_t k = 0; k < chunk; k++, done++) {
			struct txn_aborted a;
			if (!entry_decode(buf + k * TXN_LSO_ENTRY_BYTES, l->nab ? &l->ab[l->nab - 1] : NULL, &a)) {
				/* A whole entry is wrong: damage, not a torn append (that leaves a partial one). */
				*why = "damaged entry";
				free(buf);
				return -EBADMSG;
			}
			if (a.last_offset >= log_end) {
				*why = "entries past the log end";
				free(buf);
				blocks_rebuild(l);
				return (int64_t)done;
			}
			l->ab[l->nab++] = a; /* order checked by entry_decode; blocks once at the end */
			l->last_marker = a.last_offset;
		}
	}
	free(buf);
	blocks_rebuild(l); /* one pass, where pushing one by one could walk back over every block each time */
	return (int64_t)done;
}

/* Open found damage: trust nothing of the file (it stays as it is until txn_lso_rebuilt replaces it). */
static int index_damaged(struct txn_lso *l, const char *why)
{
	fprintf(stderr, "txn lso: %s: DAMAGED (%s): the index is rebuilt from the log's markers\n", l->path, why);
	l->nab = 0;
	l->last_marker = -1;
	l->file_entries = 0;
	l->file_err = 0;
	l->rebuild = true;
	return 0;
}

/* Locality: shard core (owner); init only (start-up, partition creation). */
int txn_lso_open_index(struct txn_lso *l, const char *dir, int64_t log_end)
{
	uint8_t hdr[TXN_LSO_HEADER_BYTES];
	struct stat st;
	const char *why = NULL;
	int rc = 0;

	assert(l->fd < 0 && l->nab == 0 && log_end >= 0);
	int n = snprintf(l->path, sizeof(l->path), "%s/%s", dir, TXN_LSO_FILE_NAME);
	if (n < 0 || (size_t)n >= sizeof(l->path))
		return -ENAMETOOLONG;
	if ((l->fd = st_fs_open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
		rc = -errno;
		fprintf(stderr, "txn lso: %s: open: %s\n", l->path, strerror(-rc));
		return rc;
	}
	if (st_fs_fstat(l->fd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	uint64_t size = (uint64_t)st.st_size, keep = 0;
	bool header_ok = size >= TXN_LSO_HEADER_BYTES && pread_full(l->fd, hdr, sizeof(hdr), 0) == 0 &&
	                 st_be32(hdr) == TXN_LSO_MAGIC && st_be16(hdr + 4) == TXN_LSO_VERSION &&
	                 st_be16(hdr + 6) == TXN_LSO_ENTRY_BYTES;
	/* Entries behind a bad header, or no file at all under a non-empty log: aborts may be lost. */
	if ((!header_ok && size >= TXN_LSO_HEADER_BYTES + TXN_LSO_ENTRY_BYTES) ||
	    (size < TXN_LSO_HEADER_BYTES && log_end > 0))
		return index_damaged(l, size >= TXN_LSO_HEADER_BYTES ? "bad header" : "missing or short under a non-empty log");
	if (header_ok) {
		uint64_t n_file = (size - TXN_LSO_HEADER_BYTES) / TXN_LSO_ENTRY_BYTES;
		int64_t kept = index_load(l, n_file, log_end, &why);
		if (kept == -EBADMSG)
			return index_damaged(l, why);
		if (kept < 0) {
			rc = (int)kept;
			goto fail;
		}
		keep = (uint64_t)kept;
		if (!why && (size - TXN_LSO_HEADER_BYTES) % TXN_LSO_ENTRY_BYTES)
			why = "torn last entry";
	} else {
		if (size)
			why = "bad header";
		st_put_be32(hdr, TXN_LSO_MAGIC);
		st_put_be16(hdr + 4, TXN_LSO_VERSION);
		st_put_be16(hdr + 6, TXN_LSO_ENTRY_BYTES);
		/* Cut first: a crash between the two leaves a short file, which reads as empty. */
		if (st_fs_ftruncate(l->fd, 0) < 0) {
			rc = -errno;
			goto fail;
		}
		ssize_t w = st_fs_pwrite(l->fd, hdr, sizeof(hdr), 0);
		if (w != (ssize_t)sizeof(hdr)) {
			rc = w < 0 ? -errno : -EIO;
			goto fail;
		}
	}
	uint64_t want = TXN_LSO_HEADER_BYTES + keep * TXN_LSO_ENTRY_BYTES;
	if (want != size || !header_ok) {
		if (why)
			fprintf(stderr, "txn lso: %s: %s: keeping %" PRIu64 " entries, file cut to %" PRIu64 " bytes\n",
			        l->path, why, keep, want);
		/* Durable before any append: a lost cut could revive stale entries behind new ones. */
		if (st_fs_ftruncate(l->fd, (off_t)want) < 0 || st_fs_fdatasync(l->fd) < 0) {
			rc = -errno;
			goto fail;
		}
	}
	l->file_entries = keep;
	l->file_err = 0;
	return 0;
fail:
	fprintf(stderr, "txn lso: %s: cannot open the index: %s\n", l->path, strerror(-rc));
	st_fs_close(l->fd);
	l->fd = -1;
	l->nab = 0;
	l->last_marker = -1;
	return rc;
}

/* Locality: shard core (owner); before every producer-state snapshot. */
int txn_lso_sync(struct txn_lso *l)
{
	int fd, rc = txn_lso_sync_fd(l, &fd);
	if (rc < 0 || fd < 0)
		return rc;
	return st_fs_fdatasync(fd) < 0 ? -errno : 0;
}

/* Locality: shard core (owner). */
int txn_lso_sync_fd(const struct txn_lso *l, int *fd)
{
	*fd = -1;
	if (l->fd < 0)
		return 0;
	if (l->file_err)
		return l->file_err;
	if (l->rebuild)
		return -EBADMSG; /* the file lacks what memory holds until txn_lso_rebuilt */
	if (l->unsent || l->sending || l->rewriting)
		return -EAGAIN;  /* an fdatasync now would not cover them (or the file is being replaced) */
	*fd = l->fd;
	return 0;
}

/* Locality: shard core (owner). */
void txn_lso_attach_io(struct txn_lso *l, struct st_io *io, int dirfd)
{
	assert(!l->unsent && !l->sending && dirfd >= 0);
	l->io = io;
	l->dirfd = dirfd;
}

/* Locality: shard core (owner). */
bool txn_lso_busy(const struct txn_lso *l)
{
	return l->sending != 0 || st_fop_busy(&l->cfop);
}

static void old_closed(void *arg, int status)
{
	struct txn_lso *l = arg;
	if (status < 0)
		fprintf(stderr, "txn lso: %s: close of the replaced file: %s\n", l->path, strerror(-status));
}

/* The rewrite through io finished: switch to the new file (it stays open), or keep the old one. */
static void rewritten(void *arg, int status)
{
	struct txn_lso *l = arg;
	int nfd = st_fop_fd(&l->cfop);

	txn_mem_free(l->arena, l->cbuf);
	l->cbuf = NULL;
	l->rewriting = false;
	if (nfd < 0) {
		/* Before the rename: the old file stands, without the entries that were unsent. */
		fprintf(stderr, "txn lso: %s: rewrite failed (%s); the old file stays\n", l->path, strerror(-status));
		l->unsent += l->rw_unsent;
		if (l->unsent > l->nab)
			l->unsent = l->nab;
	} else {
		/* The name is the new file's (durable unless status says the directory fsync failed). */
		int old = l->fd;
		l->fd = nfd;
		l->file_entries = l->rw_entries;
		if (status < 0) {
			l->file_err = status;   /* as the synchronous rewrite: no snapshot until reopened */
			fprintf(stderr, "txn lso: %s: rewrite: %s: no snapshot until reopened\n", l->path, strerror(-status));
		} else {
			fprintf(stderr, "txn lso: %s: rewritten with %" PRIu64 " live entries\n", l->path, l->rw_entries);
		}
		st_fop_close(l->io, &l->cfop, old, old_closed, l);
	}
	file_send(l);
}

/* txn_lso_compact_index with io attached: the same file, written through the core's io_uring. */
static int compact_async(struct txn_lso *l)
{
	size_t len = TXN_LSO_HEADER_BYTES + (size_t)l->nab * TXN_LSO_ENTRY_BYTES;
	/* Rare (after retention trimmed thousands); from the core's pool: a spent one skips this pass. */
	if (st_fop_busy(&l->cfop) || !(l->cbuf = txn_mem_alloc(l->arena, len)))
		return st_fop_busy(&l->cfop) ? 0 : -ENOMEM;
	st_put_be32(l->cbuf, TXN_LSO_MAGIC);
	st_put_be16(l->cbuf + 4, TXN_LSO_VERSION);
	st_put_be16(l->cbuf + 6, TXN_LSO_ENTRY_BYTES);
	for (uint32_t k = 0; k < l->nab; k++)
		entry_encode(l->cbuf + TXN_LSO_HEADER_BYTES + (size_t)k * TXN_LSO_ENTRY_BYTES, &l->ab[k]);
	l->rw_entries = l->nab;
	l->rw_unsent = l->unsent;   /* they are in the new file */
	l->unsent = 0;
	l->rewriting = true;
	st_fop_replace_open(l->io, &l->cfop, l->dirfd, TXN_LSO_FILE_NAME ".new", TXN_LSO_FILE_NAME, l->cbuf, len,
	                    rewritten, l);
	return 0;
}

/* Write header + the live entries to path, synced. */
static int index_write(const struct txn_lso *l, const char *path)
{
	int fd = st_fs_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	uint8_t hdr[TXN_LSO_HEADER_BYTES], *buf = malloc(TXN_LSO_READ_ENTRIES * TXN_LSO_ENTRY_BYTES);
	int rc = buf ? 0 : -ENOMEM;
	st_put_be32(hdr, TXN_LSO_MAGIC);
	st_put_be16(hdr + 4, TXN_LSO_VERSION);
	st_put_be16(hdr + 6, TXN_LSO_ENTRY_BYTES);
	if (!rc && st_fs_pwrite(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
		rc = -EIO;
	for (uint32_t done = 0; !rc && done < l->nab;) {
		uint32_t n = l->nab - done < TXN_LSO_READ_ENTRIES ? l->nab - done : TXN_LSO_READ_ENTRIES;
		for (uint32_t k = 0; k < n; k++)
			entry_encode(buf + k * TXN_LSO_ENTRY_BYTES, &l->ab[done + k]);
		size_t len = (size_t)n * TXN_LSO_ENTRY_BYTES;
		off_t pos = (off_t)(TXN_LSO_HEADER_BYTES + (uint64_t)done * TXN_LSO_ENTRY_BYTES);
		if (st_fs_pwrite(fd, buf, len, pos) != (ssize_t)len)
			rc = -EIO;
		done += n;
	}
	if (!rc && st_fs_fdatasync(fd) < 0)
		rc = -errno;
	free(buf);
	st_fs_close(fd);
	return rc;
}

/* Replace the file with the entries in memory: a new file, synced, renamed over the old one. */
static int index_replace(struct txn_lso *l)
{
	char tmp[TXN_LSO_PATH_BYTES + 8], dir[TXN_LSO_PATH_BYTES];
	int n = snprintf(tmp, sizeof(tmp), "%s.new", l->path);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(dir, l->path, sizeof(dir));
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	int rc = index_write(l, tmp), dfd = -1, fd = -1;
	if (!rc && st_fs_rename(tmp, l->path) < 0)
		rc = -errno;
	if (rc) {
		st_fs_unlink(tmp);
		fprintf(stderr, "txn lso: %s: rewrite failed (%s); the old file stays\n", l->path, strerror(-rc));
		return rc;
	}
	/* The rename is durable once the directory is; the new name is what open reads. */
	if ((dfd = st_fs_open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)) >= 0) {
		if (st_fs_fsync(dfd) < 0)
			rc = -errno;
		st_fs_close(dfd);
	}
	if ((fd = st_fs_open(l->path, O_RDWR | O_CLOEXEC, 0)) < 0) {
		l->file_err = -errno;   /* sticky: no snapshot until the index is reopened */
		return l->file_err;
	}
	st_fs_close(l->fd);
	l->fd = fd;
	l->file_entries = l->nab;
	l->unsent = 0; /* the new file holds every entry in memory */
	return rc;
}

/* Locality: shard core (owner); after retention trimmed the entries in memory. */
int txn_lso_compact_index(struct txn_lso *l)
{
	/* Not while an append is in flight to the file being replaced: the next retention pass does it. */
	if (l->fd < 0 || l->file_err || l->rebuild || l->sending || l->rewriting ||
	    l->file_entries < (uint64_t)l->nab + TXN_LSO_COMPACT_MIN_DEAD ||
	    l->file_entries < (uint64_t)l->nab * TXN_LSO_COMPACT_RATIO)
		return 0;
	if (l->io)
		return compact_async(l);
	uint64_t dropped = l->file_entries - l->nab;
	int rc = index_replace(l);
	if (rc == 0)
		fprintf(stderr, "txn lso: %s: rewritten with %u live entries (%" PRIu64 " trimmed ones dropped)\n",
		        l->path, l->nab, dropped);
	return rc;
}

/* Locality: shard core (owner); init only. */
bool txn_lso_needs_rebuild(const struct txn_lso *l)
{
	return l->rebuild;
}

/* Locality: shard core (owner); init only, after the rebuild scan. */
int txn_lso_rebuilt(struct txn_lso *l)
{
	assert(l->rebuild && l->fd >= 0);
	l->nopen = 0; /* the replay from the snapshot opens them again */
	int rc = index_replace(l);
	if (rc < 0)
		return rc; /* still pending: no snapshot is taken (txn_lso_sync) */
	l->rebuild = false;
	fprintf(stderr, "txn lso: %s: rebuilt from the log: %u aborted transactions\n", l->path, l->nab);
	return 0;
}

/* Locality: shard core (owner). */
void txn_lso_close_index(struct txn_lso *l)
{
	assert(!txn_lso_busy(l)); /* the owner waits for it: its completion names l */
	l->unsent = 0;
	if (l->fd >= 0)
		st_fs_close(l->fd);
	l->fd = -1;
	l->file_err = 0;
}

/* Locality: shard core (owner). */
int64_t txn_lso_last_marker(const struct txn_lso *l)
{
	return l->last_marker;
}
