/*
 * pstate.c - per-partition idempotent-producer state (KIP-98 sequence and
 * epoch rules as Kafka 3.7 applies them) and its snapshots.
 *
 * Table: the generic open-addressing table (htab.h), producers stored in
 * place (on a shard core it grows in the core's pool, arena.h, and shrinks
 * after expiry), keyed by producer id (pid -1 marks a free slot), hashed with a
 * 64-bit finalizer so consecutive pids spread. It doubles when more than
 * half full, so a probe ends quickly and a free slot always exists. Allocation happens only when a NEW producer does
 * not fit (txn_pstate_reserve, which the owner calls before it appends a
 * producer's batch, and txn_pstate_update) and at create/snapshot read:
 * checking or updating a known producer never allocates. Deletion (expiry)
 * shifts the following cluster back instead of leaving tombstones (htab.c),
 * so lookups never degrade. Pointers from find/next stay valid until the next reserve or
 * update that inserts a producer, expire, snapshot read or destroy.
 *
 * Transactions: update keeps txn_first_offset (the open transaction's first
 * offset on this partition) from the batch attributes, so snapshots carry the
 * open transactions; recover rebuilds a struct txn_lso (lso.c) from them and
 * from the replayed tail.
 *
 * Snapshot encoding (txn_pstate_snapshot_write/read), all integers
 * BIG-endian:
 *
 *   offset size field               notes
 *   ------ ---- ------------------- ---------------------------------------
 *        0    4 magic               "SLPS" (0x534c5053)
 *        4    2 version             1
 *        6    4 entry_count         n (<= TXN_PSTATE_PRODUCERS_MAX)
 *       10    8 offset              log offset the state reflects (>= 0)
 *       18  n*E entries             E = 199 bytes each, layout below
 *   18+n*E    4 crc                 CRC-32C of bytes [0, 18 + n*E)
 *
 * Entry (E = 39 + 5 * 32 = 199 bytes, fixed size):
 *
 *   offset size field               notes
 *   ------ ---- ------------------- ---------------------------------------
 *        0    8 producer_id         >= 0, unique in the snapshot
 *        8    2 epoch
 *       10    1 nbatches            <= TXN_PSTATE_BATCHES
 *       11    8 txn_first_offset    -1 none
 *       19    4 coordinator_epoch   -1 none
 *       23    8 last_timestamp
 *       31    8 last_update_ms
 *       39 5*32 batches             oldest first; the first nbatches are valid,
 *                                   the rest zero. Each: first_seq i32,
 *                                   last_seq i32, first_offset i64,
 *                                   last_offset i64, max_timestamp i64
 *
 * A file is exactly 22 + n*E bytes; any other length, a bad magic, version
 * or CRC, or an out-of-range field is -EBADMSG. Files: <dir>/<offset, 20
 * digits>.snapshot, written as <name>.tmp then renamed.
 */
#include "pstate.h"
#include "log.h"
#include "lso.h"
#include "htab.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
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
#define TXN_PSTATE_SLOTS_INIT 16u              /* table slots at create (power of two) */
#define TXN_PSTATE_SLOTS_MAX (2 * TXN_PSTATE_PRODUCERS_MAX) /* load stays <= 1/2 */
_Static_assert(TXN_LSO_OPEN_MAX == TXN_PSTATE_PRODUCERS_MAX, "a producer has at most one open transaction");
#define TXN_PSTATE_KEEP_FILES 2u               /* snapshots kept by save */
#define TXN_PSTATE_LOAD_TRIES_MAX 64u          /* damaged snapshots skipped before giving up */
#define TXN_PSTATE_PATH_BYTES 4096u

#define TXN_SNAP_MAGIC 0x534c5053u             /* "SLPS" */
#define TXN_SNAP_VERSION 1u
#define TXN_SNAP_HEADER_BYTES 18u
#define TXN_SNAP_BATCH_BYTES 32u
#define TXN_SNAP_ENTRY_FIXED_BYTES 39u
#define TXN_SNAP_ENTRY_BYTES (TXN_SNAP_ENTRY_FIXED_BYTES + TXN_PSTATE_BATCHES * TXN_SNAP_BATCH_BYTES)
#define TXN_SNAP_CRC_BYTES 4u
#define TXN_SNAP_BYTES_MAX \
	(TXN_SNAP_HEADER_BYTES + (uint64_t)TXN_PSTATE_PRODUCERS_MAX * TXN_SNAP_ENTRY_BYTES + TXN_SNAP_CRC_BYTES)
#define TXN_SNAP_DIGITS 20
#define TXN_SNAP_SUFFIX ".snapshot"
#define TXN_SNAP_TMP_SUFFIX ".snapshot.tmp"

_Static_assert(TXN_SNAP_ENTRY_BYTES == 199, "entry layout in the table above");
_Static_assert((TXN_PSTATE_SLOTS_INIT & (TXN_PSTATE_SLOTS_INIT - 1)) == 0, "power of two");
_Static_assert((TXN_PSTATE_SLOTS_MAX & (TXN_PSTATE_SLOTS_MAX - 1)) == 0, "power of two");
_Static_assert(TXN_PSTATE_BATCHES < 256, "nbatches is a u8");
_Static_assert(TXN_SNAP_BYTES_MAX < (uint64_t)1 << 31, "a snapshot fits one read");

#define TXN_SNAP_NAME_BYTES (TXN_SNAP_DIGITS + sizeof(TXN_SNAP_TMP_SUFFIX))

/* One snapshot being written through the core's io_uring (txn_pstate_snapshot_start): the state
 * encoded when it started, and the file names relative to the partition directory. Its buffer
 * is kept for the next snapshot and grows only when a larger one needs it. Locality: shard core. */
struct snap_job {
	struct st_fop fop;            /* first: 16-byte aligned like the malloc'd job */
	uint8_t *buf;
	size_t cap;
	int64_t offset;
	int64_t drop_offset;          /* the snapshot this one pushes out of the kept ones, -1 none */
	txn_snap_cb cb;
	void *arg;
	char tmp[TXN_SNAP_NAME_BYTES], name[TXN_SNAP_NAME_BYTES], drop[TXN_SNAP_NAME_BYTES];
};

/* The table. Locality: shard core (owner of the partition). */
struct txn_pstate {
	struct txn_htab tab;          /* slots: struct txn_producer in place, pid -1 free */
	uint32_t max;                 /* TXN_PSTATE_PRODUCERS_MAX, or less (txn_pstate_set_limit) */
	struct txn_arena *arena;      /* the slots it grows to and the snapshot buffer come from it; NULL: the heap */
	uint64_t evicted;             /* idle producers dropped by recovery for want of room */
	struct snap_job *job;         /* allocated at create (its buffer by the first snapshot) */
	int64_t kept[TXN_PSTATE_KEEP_FILES]; /* snapshot files on disk, newest first (-1: none): recovery
	                                      * finds them, each asynchronous snapshot shifts them */
};

/* ------------------------------------------------------------------------ */
/* Table                                                                     */

/* splitmix64's finalizer: every input bit affects every output bit. */
static uint64_t pid_hash(int64_t pid)
{
	uint64_t x = (uint64_t)pid;

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static bool slot_empty(const void *s) { return ((const struct txn_producer *)s)->pid < 0; }
static void slot_clear(void *s) { ((struct txn_producer *)s)->pid = -1; }
static uint64_t slot_hash(const void *ctx, const void *s)
{
	(void)ctx;
	return pid_hash(((const struct txn_producer *)s)->pid);
}
static bool slot_match(const void *ctx, const void *s, const void *key)
{
	(void)ctx;
	return ((const struct txn_producer *)s)->pid == *(const int64_t *)key;
}
static const struct txn_htab_ops producer_ops = { slot_empty, slot_clear, slot_hash, slot_match };

static struct txn_producer *table_find(const struct txn_pstate *ps, int64_t pid)
{
	return txn_htab_find(&ps->tab, pid_hash(pid), &pid);
}

size_t txn_pstate_base_bytes(void)
{
	/* the table at create, and the snapshot job the first snapshot allocates (its buffer grows with the producers) */
	return sizeof(struct txn_pstate) + TXN_PSTATE_SLOTS_INIT * sizeof(struct txn_producer) + sizeof(struct snap_job) +
	       TXN_SNAP_HEADER_BYTES + TXN_SNAP_CRC_BYTES;
}

/* Locality: shard core (owner); init only. */
int txn_pstate_create(struct txn_pstate **out)
{
	return txn_pstate_create_in(out, NULL);
}

/* Locality: shard core (owner); init only (partition open). */
int txn_pstate_create_in(struct txn_pstate **out, struct txn_arena *arena)
{
	struct txn_pstate *ps = calloc(1, sizeof(*ps));

	if (!ps || txn_htab_init_in(&ps->tab, TXN_PSTATE_SLOTS_INIT, sizeof(struct txn_producer), &producer_ops,
	                            NULL, arena) < 0) {
		free(ps);
		return -ENOMEM;
	}
	/* The snapshot job now, at open (counted in txn_pstate_base_bytes), not on the poll core later. */
	if (!(ps->job = calloc(1, sizeof(*ps->job)))) {
		txn_htab_free(&ps->tab);
		free(ps);
		return -ENOMEM;
	}
	ps->max = TXN_PSTATE_PRODUCERS_MAX;
	ps->arena = arena;
	for (uint32_t k = 0; k < TXN_PSTATE_KEEP_FILES; k++)
		ps->kept[k] = -1;
	*out = ps;
	return 0;
}

/* Locality: shard core (owner); tests only. */
void txn_pstate_set_limit(struct txn_pstate *ps, uint32_t producers_max)
{
	assert(producers_max >= 1 && producers_max <= TXN_PSTATE_PRODUCERS_MAX);
	ps->max = producers_max;
}

/* Locality: shard core (owner). */
void txn_pstate_destroy(struct txn_pstate *ps)
{
	if (!ps)
		return;
	assert(!txn_pstate_snapshot_busy(ps)); /* the owner waits for it: its completion names ps */
	if (ps->job)
		txn_mem_free(ps->arena, ps->job->buf);
	free(ps->job);
	txn_htab_free(&ps->tab);
	free(ps);
}

/* Locality: shard core (owner). */
struct txn_producer *txn_pstate_find(struct txn_pstate *ps, int64_t pid)
{
	assert(pid >= 0);
	return table_find(ps, pid);
}

/* Locality: shard core (owner). */
uint32_t txn_pstate_count(const struct txn_pstate *ps) { return txn_htab_count(&ps->tab); }

/* Locality: shard core (owner). */
struct txn_producer *txn_pstate_next(struct txn_pstate *ps, uint32_t *cursor)
{
	return txn_htab_next(&ps->tab, cursor);
}

/* ------------------------------------------------------------------------ */
/* Sequence rules                                                            */

/* seq + n in Kafka's sequence space: INT32_MAX is followed by 0. */
static int32_t seq_add(int32_t seq, int64_t n)
{
	int64_t s = (int64_t)seq + n;

	assert(seq >= 0 && n >= 0 && n <= INT32_MAX);
	return (int32_t)(s > INT32_MAX ? s - INT32_MAX - 1 : s);
}

static const struct txn_pbatch *newest_batch(const struct txn_producer *p)
{
	return p->nbatches ? &p->b[p->newest] : NULL;
}

/* Locality: shard core (owner). */
enum txn_check_result txn_pstate_check(const struct txn_pstate *ps, const struct st_batch_hdr *h,
                                       struct txn_pbatch *dup)
{
	assert(h->producer_id >= 0 && h->last_offset_delta >= 0);
	/* A producer's batch without a sequence is malformed; Kafka never accepts it either. */
	if (h->base_sequence < 0)
		return TXN_ERR_SEQUENCE;
	const struct txn_producer *p = table_find(ps, h->producer_id);
	int32_t first = h->base_sequence, last = seq_add(first, h->last_offset_delta);

	if (!p)
		return TXN_APPEND; /* unknown or expired: Kafka >= 2.5 accepts any sequence */
	assert(p->nbatches <= TXN_PSTATE_BATCHES);
	if (h->producer_epoch == p->epoch) {
#ifdef SIM_PLANT_DEDUP_WINDOW
		/* Planted bug, simulator builds only (tests/sim/README.md): one remembered batch is never matched. */
		for (uint32_t i = 0; i + 1 < p->nbatches; i++) {
#else
		for (uint32_t i = 0; i < p->nbatches; i++) {
#endif
			if (p->b[i].first_seq == first && p->b[i].last_seq == last) {
				*dup = p->b[i]; /* a retry: answer with the original's offsets */
				return TXN_DUPLICATE;
			}
		}
	}
	if (h->producer_epoch < p->epoch)
		return TXN_ERR_EPOCH;
	if (h->producer_epoch > p->epoch)
		return first == 0 ? TXN_APPEND : TXN_ERR_SEQUENCE;
	/* Same epoch: exactly the next sequence (0 when nothing is remembered, as in Kafka). */
	const struct txn_pbatch *nb = newest_batch(p);
	int32_t want = nb ? seq_add(nb->last_seq, 1) : 0;
	return first == want ? TXN_APPEND : TXN_ERR_SEQUENCE;
}

/* Locality: shard core (owner). */
int txn_pstate_reserve(struct txn_pstate *ps, int64_t pid)
{
	assert(pid >= 0);
	if (table_find(ps, pid))
		return 0;
	if (txn_htab_count(&ps->tab) >= ps->max)
		return -ENOSPC;
	if (!txn_htab_has_room(&ps->tab)) { /* the only allocation: a new producer that does not fit */
		assert(ps->tab.cap * 2 <= TXN_PSTATE_SLOTS_MAX);
		int rc = txn_htab_resize(&ps->tab, ps->tab.cap * 2);
		return rc == -ENOMEM && ps->arena ? -ENOBUFS : rc;   /* the core's pool is spent */
	}
	return 0;
}

/* Locality: shard core (owner). */
int txn_pstate_update(struct txn_pstate *ps, const struct st_batch_hdr *h, int64_t base_offset,
                      int64_t now_ms)
{
	assert(h->producer_id >= 0 && h->last_offset_delta >= 0 && base_offset >= 0);
	int rc = txn_pstate_reserve(ps, h->producer_id);
	if (rc < 0)
		return rc;
	struct txn_producer *p = table_find(ps, h->producer_id);

	if (!p) {
		assert(txn_htab_count(&ps->tab) < ps->max);
		p = txn_htab_insert(&ps->tab, pid_hash(h->producer_id), &h->producer_id);
		*p = (struct txn_producer){ .pid = h->producer_id, .epoch = h->producer_epoch,
		                            .txn_first_offset = -1, .coordinator_epoch = -1 };
	}
	if (p->epoch != h->producer_epoch) {
		p->epoch = h->producer_epoch; /* a new epoch starts a new sequence space */
		p->nbatches = 0;
		p->newest = 0;
	}
	p->last_timestamp = h->max_timestamp;
	p->last_update_ms = now_ms;
	if (h->attributes & ST_BATCH_ATTR_CONTROL) {
		p->txn_first_offset = -1; /* a marker (COMMIT or ABORT) closes the transaction */
		return 0;                 /* markers carry no sequence: only epoch and time move */
	}
	if ((h->attributes & ST_BATCH_ATTR_TRANSACTIONAL) && p->txn_first_offset < 0)
		p->txn_first_offset = base_offset; /* the transaction's first batch on this partition */
	if (h->base_sequence < 0)
		return 0; /* rebuilding from a log with such a batch: nothing to remember */
	if (p->nbatches)
		p->newest = (uint8_t)((p->newest + 1) % TXN_PSTATE_BATCHES);
	if (p->nbatches < TXN_PSTATE_BATCHES)
		p->nbatches++; /* else the newest overwrites the oldest */
	p->b[p->newest] = (struct txn_pbatch){
		.first_seq = h->base_sequence,
		.last_seq = seq_add(h->base_sequence, h->last_offset_delta),
		.first_offset = base_offset,
		.last_offset = base_offset + h->last_offset_delta,
		.max_timestamp = h->max_timestamp,
	};
	return 0;
}

int txn_pstate_update_marker(struct txn_pstate *ps, const struct st_batch_hdr *h, int64_t base_offset,
                             int64_t now_ms, int32_t coordinator_epoch)
{
	assert(h->attributes & ST_BATCH_ATTR_CONTROL);
	int rc = txn_pstate_update(ps, h, base_offset, now_ms);
	if (rc == 0)
		table_find(ps, h->producer_id)->coordinator_epoch = coordinator_epoch;
	return rc;
}

/* Locality: shard core (owner). */
uint32_t txn_pstate_expire(struct txn_pstate *ps, int64_t now_ms, int64_t expiration_ms)
{
	uint32_t n = 0;

	/*
	 * A deletion may shift a later entry into slot i, so i is examined again.
	 * Entries shifted from the wrapped start of the table into its end were
	 * already kept once and are simply kept again.
	 */
	for (uint32_t i = 0; i < ps->tab.cap;) {
		struct txn_producer *p = txn_htab_at(&ps->tab, i);
		/* As Kafka: a producer with an open transaction stays (its marker must still find it). */
		if (p->pid >= 0 && p->txn_first_offset < 0 && p->last_update_ms < now_ms - expiration_ms) {
			txn_htab_delete(&ps->tab, p);
			n++;
		} else {
			i++;
		}
	}
	/* In a pool the table's room is shared with the core's other partitions: a table that expiry
	 * left at most 1/8 full gives the rest back (to a quarter full; a pool without a block for
	 * the smaller table keeps the larger one). */
	uint32_t cap = ps->tab.cap;
	while (cap > TXN_PSTATE_SLOTS_INIT && (uint64_t)txn_htab_count(&ps->tab) * 8 <= cap / 2)
		cap /= 2;
	if (ps->tab.arena && cap * 2 <= ps->tab.cap && !txn_pstate_snapshot_busy(ps))
		(void)txn_htab_resize(&ps->tab, cap);
	return n;
}

/* ------------------------------------------------------------------------ */
/* Snapshot encoding                                                         */

/* Locality: shard core (owner). */
size_t txn_pstate_snapshot_size(const struct txn_pstate *ps)
{
	return TXN_SNAP_HEADER_BYTES + (size_t)txn_htab_count(&ps->tab) * TXN_SNAP_ENTRY_BYTES + TXN_SNAP_CRC_BYTES;
}

/* Locality: shard core (owner). */
size_t txn_pstate_snapshot_write(const struct txn_pstate *ps, int64_t offset, uint8_t *buf, size_t cap)
{
	size_t size = txn_pstate_snapshot_size(ps);
	uint8_t *q = buf + TXN_SNAP_HEADER_BYTES;

	assert(offset >= 0);
	if (cap < size)
		return 0;
	st_put_be32(buf, TXN_SNAP_MAGIC);
	st_put_be16(buf + 4, TXN_SNAP_VERSION);
	st_put_be32(buf + 6, txn_htab_count(&ps->tab));
	st_put_be64(buf + 10, (uint64_t)offset);
	uint32_t cur = 0;
	for (const struct txn_producer *p; (p = txn_htab_next(&ps->tab, &cur));) {
		memset(q, 0, TXN_SNAP_ENTRY_BYTES);
		st_put_be64(q, (uint64_t)p->pid);
		st_put_be16(q + 8, (uint16_t)p->epoch);
		q[10] = p->nbatches;
		st_put_be64(q + 11, (uint64_t)p->txn_first_offset);
		st_put_be32(q + 19, (uint32_t)p->coordinator_epoch);
		st_put_be64(q + 23, (uint64_t)p->last_timestamp);
		st_put_be64(q + 31, (uint64_t)p->last_update_ms);
		uint8_t *bq = q + TXN_SNAP_ENTRY_FIXED_BYTES;
		for (uint32_t k = 0; k < p->nbatches; k++, bq += TXN_SNAP_BATCH_BYTES) {
			/* oldest first: the newest is k = nbatches - 1 */
			const struct txn_pbatch *b =
				&p->b[(p->newest + TXN_PSTATE_BATCHES + 1 + k - p->nbatches) % TXN_PSTATE_BATCHES];
			st_put_be32(bq, (uint32_t)b->first_seq);
			st_put_be32(bq + 4, (uint32_t)b->last_seq);
			st_put_be64(bq + 8, (uint64_t)b->first_offset);
			st_put_be64(bq + 16, (uint64_t)b->last_offset);
			st_put_be64(bq + 24, (uint64_t)b->max_timestamp);
		}
		q += TXN_SNAP_ENTRY_BYTES;
	}
	assert((size_t)(q - buf) == size - TXN_SNAP_CRC_BYTES);
	st_put_be32(q, crc32c(0, buf, (size_t)(q - buf)));
	return size;
}

/*
 * Decode one entry of the snapshot at `offset` into *p; false if a field is
 * out of range. Every batch below the offset is reflected and none at or
 * above it, so a remembered batch or an open transaction's first offset at
 * or past it is damage: recovery would begin that transaction in the LSO
 * ahead of batches it then replays, and the LSO asserts its order.
 */
static bool snap_entry_decode(const uint8_t *q, int64_t offset, struct txn_producer *p)
{
	*p = (struct txn_producer){
		.pid = (int64_t)st_be64(q),
		.epoch = (int16_t)st_be16(q + 8),
		.nbatches = q[10],
		.txn_first_offset = (int64_t)st_be64(q + 11),
		.coordinator_epoch = (int32_t)st_be32(q + 19),
		.last_timestamp = (int64_t)st_be64(q + 23),
		.last_update_ms = (int64_t)st_be64(q + 31),
	};
	if (p->pid < 0 || p->nbatches > TXN_PSTATE_BATCHES || p->txn_first_offset < -1 || p->txn_first_offset >= offset)
		return false;
	const uint8_t *bq = q + TXN_SNAP_ENTRY_FIXED_BYTES;
	for (uint32_t k = 0; k < p->nbatches; k++, bq += TXN_SNAP_BATCH_BYTES) {
		struct txn_pbatch *b = &p->b[k];
		*b = (struct txn_pbatch){
			.first_seq = (int32_t)st_be32(bq),
			.last_seq = (int32_t)st_be32(bq + 4),
			.first_offset = (int64_t)st_be64(bq + 8),
			.last_offset = (int64_t)st_be64(bq + 16),
			.max_timestamp = (int64_t)st_be64(bq + 24),
		};
		if (b->first_seq < 0 || b->last_seq < 0 || b->first_offset < 0 || b->last_offset < b->first_offset ||
		    b->last_offset >= offset || (k && b->first_offset <= p->b[k - 1].last_offset))
			return false;
	}
	p->newest = p->nbatches ? (uint8_t)(p->nbatches - 1) : 0;
	return true;
}

/*
 * Recovery only: room for pid when the table is at its limit or the core's
 * pool is spent (a log or snapshot with more producers than this broker now
 * holds). As Kafka's producer expiry would (producer.id.expiration.ms), the
 * idle producers (no open transaction here) updated longest ago are dropped:
 * each pass drops those in the oldest eighth of the idle ones' time span (at
 * least the oldest one), so a big excess costs few passes. Their
 * deduplication is lost, as after expiry. A producer with an open
 * transaction is never dropped (its marker must find it, and the LSO
 * counts it): when only such remain, -ENOSPC or -ENOBUFS, and the partition
 * does not open (logged by the caller).
 */
static int make_room(struct txn_pstate *ps, int64_t pid)
{
	int rc;

	while ((rc = txn_pstate_reserve(ps, pid)) == -ENOSPC || rc == -ENOBUFS) {
		int64_t lo = INT64_MAX, hi = INT64_MIN;
		uint32_t cur = 0;
		for (const struct txn_producer *p; (p = txn_htab_next(&ps->tab, &cur));)
			if (p->txn_first_offset < 0) {
				lo = p->last_update_ms < lo ? p->last_update_ms : lo;
				hi = p->last_update_ms > hi ? p->last_update_ms : hi;
			}
		if (lo > hi)
			return rc;   /* every producer held has an open transaction */
		int64_t cut = lo + (int64_t)(((uint64_t)hi - (uint64_t)lo) / 8);
		uint32_t before = txn_htab_count(&ps->tab);
		for (uint32_t i = 0; i < ps->tab.cap;) {   /* as txn_pstate_expire: a delete shifts into slot i */
			struct txn_producer *p = txn_htab_at(&ps->tab, i);
			if (p->pid >= 0 && p->txn_first_offset < 0 && p->last_update_ms <= cut)
				txn_htab_delete(&ps->tab, p);
			else
				i++;
		}
		ps->evicted += before - txn_htab_count(&ps->tab);
	}
	return rc;
}

uint64_t txn_pstate_evicted(const struct txn_pstate *ps) { return ps->evicted; }

/* Locality: shard core (owner). */
int txn_pstate_snapshot_read(struct txn_pstate *ps, const uint8_t *buf, size_t len, int64_t *offset)
{
	if (len < TXN_SNAP_HEADER_BYTES + TXN_SNAP_CRC_BYTES || st_be32(buf) != TXN_SNAP_MAGIC ||
	    st_be16(buf + 4) != TXN_SNAP_VERSION)
		return -EBADMSG;
	uint32_t n = st_be32(buf + 6);
	int64_t off = (int64_t)st_be64(buf + 10);
	/* The count is bounded before it sizes anything: the length must match it exactly. */
	if (n > TXN_PSTATE_PRODUCERS_MAX ||
	    (uint64_t)len != TXN_SNAP_HEADER_BYTES + (uint64_t)n * TXN_SNAP_ENTRY_BYTES + TXN_SNAP_CRC_BYTES)
		return -EBADMSG;
	if (crc32c(0, buf, len - TXN_SNAP_CRC_BYTES) != st_be32(buf + len - TXN_SNAP_CRC_BYTES) || off < 0)
		return -EBADMSG;

	/* Decode into a fresh table; the old state stays untouched on damage. */
	struct txn_htab tmp;
	uint32_t cap = TXN_PSTATE_SLOTS_INIT;
	while (cap / 2 < n)
		cap *= 2;
	if (txn_htab_init(&tmp, cap, sizeof(struct txn_producer), &producer_ops, NULL) < 0)
		return -ENOMEM;
	const uint8_t *q = buf + TXN_SNAP_HEADER_BYTES;
	for (uint32_t i = 0; i < n; i++, q += TXN_SNAP_ENTRY_BYTES) {
		struct txn_producer p;
		if (!snap_entry_decode(q, off, &p) || txn_htab_find(&tmp, pid_hash(p.pid), &p.pid)) { /* or a pid twice */
			txn_htab_free(&tmp);
			return -EBADMSG;
		}
		*(struct txn_producer *)txn_htab_insert(&tmp, pid_hash(p.pid), &p.pid) = p;
	}
	if (!ps->arena && n <= ps->max) {
		txn_htab_free(&ps->tab);
		ps->tab = tmp;
		*offset = off;
		return 0;
	}
	/* The table's room is bounded (a pool, or a lowered limit): take the entries in, one by one,
	 * evicting idle ones as recovery does (make_room) when the room runs out. */
	txn_htab_clear(&ps->tab);
	uint32_t cur = 0;
	int rc = 0;
	for (const struct txn_producer *e; rc == 0 && (e = txn_htab_next(&tmp, &cur));) {
		if ((rc = make_room(ps, e->pid)) == 0)
			*(struct txn_producer *)txn_htab_insert(&ps->tab, pid_hash(e->pid), &e->pid) = *e;
	}
	txn_htab_free(&tmp);
	if (rc < 0) {
		txn_htab_clear(&ps->tab);
		return rc;
	}
	*offset = off;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Snapshot files                                                            */

/* Offset of a "<20 digits>.snapshot" name, or -1 for any other name. */
static int64_t snap_name_offset(const char *name)
{
	int64_t v = 0;

	for (int i = 0; i < TXN_SNAP_DIGITS; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		if (v > (INT64_MAX - (name[i] - '0')) / 10)
			return -1;
		v = v * 10 + (name[i] - '0');
	}
	return strcmp(name + TXN_SNAP_DIGITS, TXN_SNAP_SUFFIX) == 0 ? v : -1;
}

static bool snap_path(char *buf, const char *dir, int64_t offset, const char *suffix)
{
	int n = snprintf(buf, TXN_PSTATE_PATH_BYTES, "%s/%0*" PRId64 "%s", dir, TXN_SNAP_DIGITS, offset, suffix);
	return n > 0 && (size_t)n < TXN_PSTATE_PATH_BYTES;
}

static int write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t r = st_fs_write(fd, buf, len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += r;
		len -= (size_t)r;
	}
	return 0;
}

static int sync_dir(const char *dir)
{
	int fd = st_fs_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (st_fs_fsync(fd) < 0)
		rc = -errno;
	st_fs_close(fd);
	return rc;
}

/*
 * After writing the snapshot at `offset`: keep the newest TXN_PSTATE_KEEP_FILES
 * snapshots at or below it, and remove those above it (they describe a log
 * that was since truncated: loading them later would be wrong) and leftover
 * temp files. Two passes over the directory, no allocation.
 */
static void snap_prune(const char *dir, int64_t offset, int64_t keep[TXN_PSTATE_KEEP_FILES])
{
	char path[TXN_PSTATE_PATH_BYTES];
	struct dirent *de;
	DIR *d = st_fs_opendir(dir);

	if (!d) {
		fprintf(stderr, "pstate: %s: cannot list for pruning: %s\n", dir, strerror(errno));
		return;
	}
	for (uint32_t k = 0; k < TXN_PSTATE_KEEP_FILES; k++)
		keep[k] = -1;
	while ((de = st_fs_readdir(d))) { /* keep[] = the largest offsets <= offset, descending */
		int64_t o = snap_name_offset(de->d_name);
		if (o < 0 || o > offset)
			continue;
		for (uint32_t k = 0; k < TXN_PSTATE_KEEP_FILES; k++) {
			if (o == keep[k])
				break;
			if (o > keep[k]) {
				memmove(&keep[k + 1], &keep[k], (TXN_PSTATE_KEEP_FILES - 1 - k) * sizeof(keep[0]));
				keep[k] = o;
				break;
			}
		}
	}
	st_fs_rewinddir(d);
	while ((de = st_fs_readdir(d))) {
		int64_t o = snap_name_offset(de->d_name);
		size_t nl = strlen(de->d_name), tl = strlen(TXN_SNAP_TMP_SUFFIX);
		bool tmp = nl > tl && strcmp(de->d_name + nl - tl, TXN_SNAP_TMP_SUFFIX) == 0;
		bool kept = false;
		for (uint32_t k = 0; k < TXN_PSTATE_KEEP_FILES; k++)
			kept |= o == keep[k];
		if ((o < 0 && !tmp) || (o >= 0 && kept))
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= sizeof(path))
			continue;
		if (st_fs_unlink(path) < 0 && errno != ENOENT)
			fprintf(stderr, "pstate: %s: cannot remove: %s\n", path, strerror(errno));
	}
	st_fs_closedir(d);
}

/* Locality: shard core (owner); synchronous, off the hot path (start-up, timer, shutdown). */
int txn_pstate_snapshot_save(const struct txn_pstate *ps, const char *dir, int64_t offset)
{
	char tmp[TXN_PSTATE_PATH_BYTES], path[TXN_PSTATE_PATH_BYTES];
	size_t size = txn_pstate_snapshot_size(ps);
	uint8_t *buf;
	int fd, rc;

	assert(offset >= 0);
	if (!snap_path(tmp, dir, offset, TXN_SNAP_TMP_SUFFIX) || !snap_path(path, dir, offset, TXN_SNAP_SUFFIX))
		return -ENAMETOOLONG;
	if (!(buf = malloc(size)))
		return -ENOMEM;
	size_t n = txn_pstate_snapshot_write(ps, offset, buf, size);
	assert(n == size);
	if ((fd = st_fs_open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
		rc = -errno;
		free(buf);
		fprintf(stderr, "pstate: %s: open: %s\n", tmp, strerror(-rc));
		return rc;
	}
	rc = write_all(fd, buf, n);
	free(buf);
	/* Durable content before the rename makes the name visible: never a short file under it. */
	if (rc == 0 && st_fs_fdatasync(fd) < 0)
		rc = -errno;
	if (st_fs_close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && st_fs_rename(tmp, path) < 0)
		rc = -errno;
	if (rc == 0)
		rc = sync_dir(dir); /* the rename itself */
	if (rc < 0) {
		fprintf(stderr, "pstate: %s: save failed: %s\n", path, strerror(-rc));
		st_fs_unlink(tmp);
		return rc;
	}
	int64_t keep[TXN_PSTATE_KEEP_FILES];
	snap_prune(dir, offset, keep);
	return 0;
}

/* ---- asynchronous snapshots ---------------------------------------------------- */

bool txn_pstate_snapshot_busy(const struct txn_pstate *ps)
{
	return ps->job && st_fop_busy(&ps->job->fop);
}

static void snap_done(void *arg, int status)
{
	struct txn_pstate *ps = arg;
	struct snap_job *j = ps->job;

	if (status < 0) {
		fprintf(stderr, "pstate: snapshot %s: save failed: %s\n", j->name, strerror(-status));
	} else if (ps->kept[0] != j->offset) {
		/* Newest first; the one pushed out was unlinked by the operation (drop). */
		memmove(&ps->kept[1], &ps->kept[0], (TXN_PSTATE_KEEP_FILES - 1) * sizeof(ps->kept[0]));
		ps->kept[0] = j->offset;
	}
	j->cb(j->arg, status, j->offset);
}

/* Locality: shard core (owner); the periodic snapshot, on a poll core: nothing here waits. */
int txn_pstate_snapshot_start(struct txn_pstate *ps, struct st_io *io, int dirfd, int64_t offset, int presync_fd,
                              txn_snap_cb cb, void *arg)
{
	assert(offset >= 0 && cb);
	if (txn_pstate_snapshot_busy(ps))
		return -EBUSY;
	if (!ps->job && !(ps->job = calloc(1, sizeof(*ps->job))))
		return -ENOMEM;
	struct snap_job *j = ps->job;
	size_t size = txn_pstate_snapshot_size(ps);
	if (size > j->cap) {
		/* From the core's pool like the table (a spent pool: this round is skipped, the next tries again). */
		uint8_t *b = txn_mem_alloc(ps->arena, size);
		if (!b)
			return -ENOMEM;
		txn_mem_free(ps->arena, j->buf);
		j->buf = b;
		j->cap = ps->arena ? txn_arena_block_bytes(ps->arena, b) : size;
	}
	size_t n = txn_pstate_snapshot_write(ps, offset, j->buf, j->cap);
	assert(n == size);
	snprintf(j->tmp, sizeof(j->tmp), "%0*" PRId64 "%s", TXN_SNAP_DIGITS, offset, TXN_SNAP_TMP_SUFFIX);
	snprintf(j->name, sizeof(j->name), "%0*" PRId64 "%s", TXN_SNAP_DIGITS, offset, TXN_SNAP_SUFFIX);
	/* Keep the newest TXN_PSTATE_KEEP_FILES as save does: this one and the newest before it. */
	int64_t drop = ps->kept[0] == offset ? -1 : ps->kept[TXN_PSTATE_KEEP_FILES - 1]; /* a rewrite keeps all */
	if (drop >= 0 && drop != offset)
		snprintf(j->drop, sizeof(j->drop), "%0*" PRId64 "%s", TXN_SNAP_DIGITS, drop, TXN_SNAP_SUFFIX);
	j->offset = offset;
	j->drop_offset = drop;
	j->cb = cb;
	j->arg = arg;
	st_fop_replace(io, &j->fop, dirfd, j->tmp, j->name, drop >= 0 && drop != offset ? j->drop : NULL, j->buf, n,
	               presync_fd, snap_done, ps);
	return 0;
}

/* Read and decode one snapshot file. -EBADMSG for damage, -errno for I/O. */
static int snap_load_file(struct txn_pstate *ps, const char *path, int64_t want)
{
	struct stat st;
	int64_t off;
	int rc = 0;
	int fd = st_fs_open(path, O_RDONLY | O_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (st_fs_fstat(fd, &st) < 0) {
		rc = -errno;
		st_fs_close(fd);
		return rc;
	}
	/* Bound the size before allocating: a damaged inode must not ask for gigabytes. */
	if (st.st_size < (off_t)(TXN_SNAP_HEADER_BYTES + TXN_SNAP_CRC_BYTES) ||
	    (uint64_t)st.st_size > TXN_SNAP_BYTES_MAX) {
		st_fs_close(fd);
		return -EBADMSG;
	}
	size_t len = (size_t)st.st_size, got = 0;
	uint8_t *buf = malloc(len);
	if (!buf) {
		st_fs_close(fd);
		return -ENOMEM;
	}
	while (got < len) {
		ssize_t r = st_fs_pread(fd, buf + got, len - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? -errno : -EBADMSG; /* shrank under us */
			break;
		}
		got += (size_t)r;
	}
	st_fs_close(fd);
	if (rc == 0)
		rc = txn_pstate_snapshot_read(ps, buf, len, &off);
	if (rc == 0 && off != want) { /* the name and the content disagree: state may be wrong */
		txn_htab_clear(&ps->tab);
		rc = -EBADMSG;
	}
	free(buf);
	return rc;
}

/*
 * Remove every snapshot above log_end and make the removal durable. Such a
 * snapshot was taken at a log end whose tail a crash then cut (a snapshot is
 * taken at the end of the appends queued, before they are durable): it
 * describes batches that are gone. Skipping it at load is not enough: once
 * the log grows past its offset again, a later start-up would take it and
 * replay only the batches after it, with the lost ones' producer state and
 * open transactions (found by the simulator, tests/sim: an aborted
 * transaction's data turned committed). Init only.
 */
static int snap_drop_above(const char *dir, int64_t log_end)
{
	char path[TXN_PSTATE_PATH_BYTES];
	struct dirent *de;
	bool removed = false;
	int rc = 0;
	DIR *d = st_fs_opendir(dir);

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = st_fs_readdir(d))) {
		int64_t o = snap_name_offset(de->d_name);
		if (o <= log_end || !snap_path(path, dir, o, TXN_SNAP_SUFFIX))
			continue;
		fprintf(stderr, "pstate: %s: above the log end %" PRId64 ": removed\n", path, log_end);
		if (st_fs_unlink(path) < 0 && errno != ENOENT) {
			rc = -errno;
			break;
		}
		removed = true;
	}
	st_fs_closedir(d);
	/* Durable before the log can grow past it again. */
	if (rc == 0 && removed)
		rc = sync_dir(dir);
	return rc;
}

/* Locality: shard core (owner); init only (start-up recovery). */
int txn_pstate_snapshot_load(struct txn_pstate *ps, const char *dir, int64_t max_offset, int64_t *offset)
{
	char path[TXN_PSTATE_PATH_BYTES];
	int64_t bound = max_offset;

	/* Newest first, one directory pass per candidate: no list to allocate, and damaged
	 * snapshots are rare (each costs one pass). */
	for (uint32_t tries = 0; tries < TXN_PSTATE_LOAD_TRIES_MAX && bound >= 0; tries++) {
		DIR *d = st_fs_opendir(dir);
		struct dirent *de;
		int64_t best = -1;
		if (!d) {
			if (errno == ENOENT)
				break; /* no directory: no snapshot yet */
			int rc = -errno;
			fprintf(stderr, "pstate: %s: cannot list: %s\n", dir, strerror(-rc));
			return rc;
		}
		while ((de = st_fs_readdir(d))) {
			int64_t o = snap_name_offset(de->d_name);
			if (o > max_offset && tries == 0)
				fprintf(stderr, "pstate: %s/%s: above offset %" PRId64 ", skipped\n", dir, de->d_name,
				        max_offset);
			if (o >= 0 && o <= bound && o > best)
				best = o;
		}
		st_fs_closedir(d);
		if (best < 0)
			break;
		if (!snap_path(path, dir, best, TXN_SNAP_SUFFIX))
			return -ENAMETOOLONG;
		int rc = snap_load_file(ps, path, best);
		if (rc == 0) {
			*offset = best;
			return 0;
		}
		if (rc == -ENOMEM)
			return rc;
		/* The log can rebuild what an older snapshot lacks: fall back rather than fail. */
		fprintf(stderr, "pstate: %s: unusable (%s), trying an older one\n", path, strerror(-rc));
		bound = best - 1;
	}
	txn_htab_clear(&ps->tab);
	*offset = -1;
	return 0;
}

/* ---- recovery --------------------------------------------------------------- */

/* What the replay updates. Locality: shard core (owner), init only. */
struct replay {
	struct txn_pstate *ps;  /* NULL: transactions only (the aborted index's rebuild) */
	struct txn_lso *lso;   /* NULL: producer state only */
};

/* One batch of the log tail: transactions first (they read the state before it), then pstate. */
static int replay_batch(void *arg, const struct st_batch_hdr *h, const uint8_t *raw, size_t raw_len)
{
	struct replay *r = arg;

	if (h->producer_id < 0)
		return 0;
	int32_t serial = -1;   /* a marker's coordinator_epoch: the decision serial (txn/coord.h) */
	int type = (h->attributes & ST_BATCH_ATTR_CONTROL) ? st_batch_marker_read(raw, raw_len, &serial) : -1;
	if (r->lso && (h->attributes & ST_BATCH_ATTR_CONTROL)) {
		if (type < 0) {
			fprintf(stderr, "pstate: control batch at %" PRId64 " is not a COMMIT/ABORT marker, skipped\n",
			        h->base_offset);
		} else {
			/* -ENOENT: no data of this transaction here (or below the log start): nothing to close. An
			 * abort already in the loaded index is not added twice (txn_lso_end checks last_marker). */
			int rc = txn_lso_end(r->lso, h->producer_id, h->base_offset, type == ST_MARKER_ABORT);
			if (rc < 0 && rc != -ENOENT)
				return rc;
		}
	} else if (r->lso && (h->attributes & ST_BATCH_ATTR_TRANSACTIONAL) &&
	           txn_lso_open_first(r->lso, h->producer_id) < 0) {
		int rc = txn_lso_begin(r->lso, h->producer_id, h->base_offset);
		if (rc < 0)
			return rc;
	}
	if (r->ps) {
		/* More producers than the table may hold: the idle ones updated longest ago go (make_room). */
		int rc = make_room(r->ps, h->producer_id);
		if (rc == 0)
			rc = type >= 0 ? txn_pstate_update_marker(r->ps, h, h->base_offset, h->max_timestamp, serial) :
			                 txn_pstate_update(r->ps, h, h->base_offset, h->max_timestamp);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int cmp_first_offset(const void *a, const void *b)
{
	int64_t x = (*(const struct txn_producer *const *)a)->txn_first_offset;
	int64_t y = (*(const struct txn_producer *const *)b)->txn_first_offset;
	return (x > y) - (x < y);
}

/* Open, in ascending first offset (the lso's order), the transactions the snapshot holds. */
static int reopen_snapshot_txns(struct txn_pstate *ps, struct txn_lso *lso)
{
	struct txn_producer **open = malloc(((size_t)txn_htab_count(&ps->tab) + 1) * sizeof(*open));
	uint32_t n = 0, cursor = 0;
	int rc = 0;

	if (!open)
		return -ENOMEM;
	for (struct txn_producer *p; (p = txn_pstate_next(ps, &cursor));)
		if (p->txn_first_offset >= 0)
			open[n++] = p;
	assert(n <= txn_htab_count(&ps->tab));
	qsort(open, n, sizeof(*open), cmp_first_offset);
	for (uint32_t i = 0; i < n && rc == 0; i++)
		rc = txn_lso_begin(lso, open[i]->pid, open[i]->txn_first_offset);
	free(open);
	return rc;
}

/* The base offset of the first batch a scan hands over (then stops it). */
static int first_base(void *arg, const struct st_batch_hdr *h, const uint8_t *raw, size_t raw_len)
{
	(void)raw;
	(void)raw_len;
	*(int64_t *)arg = h->base_offset;
	return 1;
}

/* Locality: shard core (owner); init only (start-up recovery). */
int txn_pstate_recover(struct txn_pstate *ps, struct txn_lso *lso, struct st_log *log, const char *dir,
                       int64_t *snap_offset)
{
	struct replay r = { .ps = ps, .lso = lso };
	int64_t snap = -1;
	int rc = txn_pstate_snapshot_load(ps, dir, st_log_end_offset(log), &snap);

	if (rc == 0)
		rc = snap_drop_above(dir, st_log_end_offset(log));
	if (rc < 0)
		return rc;
	if (snap >= 0) {
		/*
		 * The broker snapshots at its log end, between batches. A snapshot whose offset
		 * falls inside a batch of this log describes another log: the replay would begin
		 * at that batch, below the transactions the snapshot opened, and the LSO asserts
		 * its order (found by fuzz_pstate). Rebuild from the log instead.
		 */
		int64_t first = -1;
		if ((rc = st_log_scan(log, snap, first_base, &first)) < 0)
			return rc;
		if (first >= 0 && first < snap) {
			fprintf(stderr, "pstate: %s: the snapshot at %" PRId64 " falls inside the batch at %" PRId64
			        ": not this log's, rebuilt from the log\n", dir, snap, first);
			txn_htab_clear(&ps->tab);
			snap = -1;
		}
	}
	/* The files the asynchronous snapshots keep count of (and none above the log end: a log cut
	 * under them makes them wrong; snap_drop_above removed them). Start-up only: this lists the
	 * directory. */
	snap_prune(dir, st_log_end_offset(log), ps->kept);
	if (lso && txn_lso_needs_rebuild(lso)) {
		/* The index file was damaged: every abort from the markers of the whole log. */
		struct replay markers = { .ps = NULL, .lso = lso };
		if ((rc = st_log_scan(log, st_log_base_offset(log), replay_batch, &markers)) < 0 ||
		    (rc = txn_lso_rebuilt(lso)) < 0)
			return rc;
	}
	assert(!lso || txn_lso_open_count(lso) == 0);
	if (lso && (rc = reopen_snapshot_txns(ps, lso)) < 0)
		return rc;
	*snap_offset = snap;
	return st_log_scan(log, snap >= 0 ? snap : st_log_base_offset(log), replay_batch, &r);
}
