/*
 * pstate_ut.c - idempotent-producer state (txn/pstate.c): the Kafka 3.7
 * sequence/epoch rules, the producer table, snapshots and snapshot files.
 *
 * Locality: test thread only.
 */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "crc32c.h"
#include "arena.h"
#include "pstate.h"

#define UT_ENTRY_BYTES 199   /* snapshot layout, pstate.c */
#define UT_HEADER_BYTES 18

/* A data batch header of records records from pid/epoch starting at seq. */
static struct st_batch_hdr hdr(int64_t pid, int16_t epoch, int32_t seq, int32_t records)
{
	return (struct st_batch_hdr){
		.magic = 2, .last_offset_delta = records - 1, .first_timestamp = 1000 + (int64_t)seq,
		.max_timestamp = 1000 + (int64_t)seq + records - 1, .producer_id = pid, .producer_epoch = epoch,
		.base_sequence = seq, .records_count = records,
	};
}

static struct txn_pstate *ut_new(void)
{
	struct txn_pstate *ps = NULL;
	CU_ASSERT_FATAL(txn_pstate_create(&ps) == 0 && ps);
	return ps;
}

/* Check, expect APPEND, and record at base_offset. */
static void ut_append(struct txn_pstate *ps, struct st_batch_hdr h, int64_t base_offset, int64_t now)
{
	struct txn_pbatch dup;
	CU_ASSERT_EQUAL(txn_pstate_check(ps, &h, &dup), TXN_APPEND);
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &h, base_offset, now), 0);
}

static enum txn_check_result ut_check(struct txn_pstate *ps, struct st_batch_hdr h)
{
	struct txn_pbatch dup;
	return txn_pstate_check(ps, &h, &dup);
}

static void test_unknown_and_next(void)
{
	struct txn_pstate *ps = ut_new();

	/* Kafka >= 2.5: an unknown producer starts at any sequence. */
	CU_ASSERT_EQUAL(ut_check(ps, hdr(7, 0, 1234, 3)), TXN_APPEND);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(7, 3, 0, 1)), TXN_APPEND);
	ut_append(ps, hdr(7, 0, 1234, 3), 100, 1);
	CU_ASSERT_EQUAL(txn_pstate_count(ps), 1);
	struct txn_producer *p = txn_pstate_find(ps, 7);
	CU_ASSERT_FATAL(p != NULL);
	CU_ASSERT_EQUAL(p->epoch, 0);
	CU_ASSERT_EQUAL(p->nbatches, 1);
	CU_ASSERT_EQUAL(p->b[p->newest].first_seq, 1234);
	CU_ASSERT_EQUAL(p->b[p->newest].last_seq, 1236);
	CU_ASSERT_EQUAL(p->b[p->newest].first_offset, 100);
	CU_ASSERT_EQUAL(p->b[p->newest].last_offset, 102);
	CU_ASSERT_EQUAL(p->b[p->newest].max_timestamp, 1000 + 1236);
	CU_ASSERT_EQUAL(p->last_timestamp, 1000 + 1236);
	CU_ASSERT_EQUAL(p->last_update_ms, 1);
	CU_ASSERT_EQUAL(p->txn_first_offset, -1);
	CU_ASSERT_EQUAL(p->coordinator_epoch, -1);
	CU_ASSERT_PTR_NULL(txn_pstate_find(ps, 8));

	/* The next sequence is appended; a gap, a step back or a restart at 0 is not. */
	CU_ASSERT_EQUAL(ut_check(ps, hdr(7, 0, 1238, 1)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(7, 0, 1236, 1)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(7, 0, 0, 1)), TXN_ERR_SEQUENCE);
	ut_append(ps, hdr(7, 0, 1237, 2), 103, 2);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(7, 0, 1239, 1)), TXN_APPEND);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(7, 0, 1240, 1)), TXN_ERR_SEQUENCE);
	/* A negative sequence from a producer is malformed. */
	CU_ASSERT_EQUAL(ut_check(ps, hdr(7, 0, -1, 1)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(9, 0, -1, 1)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 7)->nbatches, 2);
	txn_pstate_destroy(ps);
}

/* Each of the last 5 batches is a duplicate with its own offsets; the 6th-oldest is out of window. */
static void test_duplicate_window(void)
{
	struct txn_pstate *ps = ut_new();
	struct txn_pbatch dup;

	for (int i = 0; i < 7; i++) /* batch i: seqs 3i..3i+2 at offsets 10i..10i+2 */
		ut_append(ps, hdr(42, 5, 3 * i, 3), 10 * i, i);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 42)->nbatches, TXN_PSTATE_BATCHES);
	for (int i = 2; i < 7; i++) {
		struct st_batch_hdr h = hdr(42, 5, 3 * i, 3);
		memset(&dup, 0xa5, sizeof(dup));
		CU_ASSERT_EQUAL(txn_pstate_check(ps, &h, &dup), TXN_DUPLICATE);
		CU_ASSERT_EQUAL(dup.first_seq, 3 * i);
		CU_ASSERT_EQUAL(dup.last_seq, 3 * i + 2);
		CU_ASSERT_EQUAL(dup.first_offset, 10 * i);
		CU_ASSERT_EQUAL(dup.last_offset, 10 * i + 2);
		CU_ASSERT_EQUAL(dup.max_timestamp, 1000 + 3 * i + 2);
	}
	/* Older than the window: OUT_OF_ORDER_SEQUENCE, as in Kafka. */
	CU_ASSERT_EQUAL(ut_check(ps, hdr(42, 5, 3, 3)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(42, 5, 0, 3)), TXN_ERR_SEQUENCE);
	/* Only an exact [first, last] match is a duplicate. */
	CU_ASSERT_EQUAL(ut_check(ps, hdr(42, 5, 18, 2)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(42, 5, 19, 2)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(42, 5, 21, 1)), TXN_APPEND);
	/* A duplicate needs the same epoch: an older one is fenced, a newer one starts at 0. */
	CU_ASSERT_EQUAL(ut_check(ps, hdr(42, 4, 18, 3)), TXN_ERR_EPOCH);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(42, 6, 18, 3)), TXN_ERR_SEQUENCE);
	/* A check has no side effects. */
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 42)->b[txn_pstate_find(ps, 42)->newest].last_seq, 20);
	txn_pstate_destroy(ps);
}

static void test_epochs(void)
{
	struct txn_pstate *ps = ut_new();

	ut_append(ps, hdr(1, 3, 0, 2), 0, 0);
	ut_append(ps, hdr(1, 3, 2, 2), 2, 0);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 2, 4, 1)), TXN_ERR_EPOCH);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 2, 0, 1)), TXN_ERR_EPOCH);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 4, 5, 1)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 4, 4, 1)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 4, 0, 1)), TXN_APPEND);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 100, 0, 7)), TXN_APPEND);

	/* The bump: old batches are forgotten, a retry of them is fenced. */
	ut_append(ps, hdr(1, 4, 0, 3), 4, 1);
	struct txn_producer *p = txn_pstate_find(ps, 1);
	CU_ASSERT_EQUAL(p->epoch, 4);
	CU_ASSERT_EQUAL(p->nbatches, 1);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 3, 2, 2)), TXN_ERR_EPOCH);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 3, 0, 2)), TXN_ERR_EPOCH);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 4, 0, 2)), TXN_ERR_SEQUENCE); /* not the same range */
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 4, 0, 3)), TXN_DUPLICATE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 4, 3, 1)), TXN_APPEND);

	/* A control batch (marker) moves epoch and time but no sequence. */
	struct st_batch_hdr m = hdr(1, 4, -1, 1);
	m.attributes = ST_BATCH_ATTR_CONTROL | ST_BATCH_ATTR_TRANSACTIONAL;
	m.max_timestamp = 777;
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &m, 7, 9), 0);
	p = txn_pstate_find(ps, 1);
	CU_ASSERT_EQUAL(p->nbatches, 1);
	CU_ASSERT_EQUAL(p->last_timestamp, 777);
	CU_ASSERT_EQUAL(p->last_update_ms, 9);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 4, 3, 1)), TXN_APPEND);
	m.base_sequence = 3; /* even with a sequence, a marker is not a data batch */
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &m, 7, 9), 0);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 1)->nbatches, 1);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 4, 3, 1)), TXN_APPEND);
	m.base_sequence = -1;
	m.producer_epoch = 5; /* an aborting marker with a bumped epoch clears the batches */
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &m, 8, 10), 0);
	p = txn_pstate_find(ps, 1);
	CU_ASSERT_EQUAL(p->epoch, 5);
	CU_ASSERT_EQUAL(p->nbatches, 0);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 4, 3, 1)), TXN_ERR_EPOCH);
	/* Same epoch, nothing remembered: Kafka expects sequence 0 (lastSeq -1 + 1). */
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 5, 3, 1)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 5, 0, 1)), TXN_APPEND);
	/* A marker from an unknown producer creates its entry. */
	m.producer_id = 2;
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &m, 9, 11), 0);
	CU_ASSERT_EQUAL(txn_pstate_count(ps), 2);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 2)->nbatches, 0);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 2)->txn_first_offset, -1);
	txn_pstate_destroy(ps);
}

static void test_wrap(void)
{
	struct txn_pstate *ps = ut_new();
	struct txn_pbatch dup;

	/* A batch ending exactly at INT32_MAX: the next one starts at 0. */
	ut_append(ps, hdr(5, 0, INT32_MAX - 4, 5), 0, 0);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 5)->b[0].last_seq, INT32_MAX);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(5, 0, INT32_MAX, 1)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(5, 0, 1, 1)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(5, 0, INT32_MAX - 4, 5)), TXN_DUPLICATE);
	ut_append(ps, hdr(5, 0, 0, 2), 5, 0);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(5, 0, 2, 1)), TXN_APPEND);

	/* A batch that itself wraps: INT32_MAX-1, INT32_MAX, 0, 1. */
	ut_append(ps, hdr(6, 0, INT32_MAX - 1, 4), 10, 0);
	struct txn_producer *p = txn_pstate_find(ps, 6);
	CU_ASSERT_EQUAL(p->b[p->newest].first_seq, INT32_MAX - 1);
	CU_ASSERT_EQUAL(p->b[p->newest].last_seq, 1);
	struct st_batch_hdr h = hdr(6, 0, INT32_MAX - 1, 4);
	CU_ASSERT_EQUAL(txn_pstate_check(ps, &h, &dup), TXN_DUPLICATE);
	CU_ASSERT_EQUAL(dup.first_offset, 10);
	CU_ASSERT_EQUAL(dup.last_offset, 13);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(6, 0, 0, 1)), TXN_ERR_SEQUENCE);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(6, 0, 2, 1)), TXN_APPEND);
	/* Largest batch: INT32_MAX + 1 records end just before where they started. */
	ut_append(ps, hdr(8, 0, 10, INT32_MAX), 100, 0);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 8)->b[0].last_seq, 8);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(8, 0, 9, 1)), TXN_APPEND);
	txn_pstate_destroy(ps);
}

/* Producers on one partition are independent. */
static void test_many_producers(void)
{
	struct txn_pstate *ps = ut_new();
	int64_t off = 0;

	for (int round = 0; round < 8; round++)
		for (int64_t pid = 0; pid < 4; pid++) {
			ut_append(ps, hdr(pid, (int16_t)pid, (int32_t)(100 * pid + 2 * round), 2), off, round);
			off += 2;
		}
	CU_ASSERT_EQUAL(txn_pstate_count(ps), 4);
	for (int64_t pid = 0; pid < 4; pid++) {
		CU_ASSERT_EQUAL(ut_check(ps, hdr(pid, (int16_t)pid, (int32_t)(100 * pid + 16), 1)), TXN_APPEND);
		CU_ASSERT_EQUAL(ut_check(ps, hdr(pid, (int16_t)pid, (int32_t)(100 * pid + 14), 2)), TXN_DUPLICATE);
		CU_ASSERT_EQUAL(ut_check(ps, hdr(pid, (int16_t)pid, (int32_t)(100 * ((pid + 1) % 4) + 16), 1)),
		                TXN_ERR_SEQUENCE);
	}
	struct txn_pbatch dup;
	struct st_batch_hdr h = hdr(2, 2, 200 + 6, 2); /* round 3 of pid 2: offset (3*4 + 2) * 2 */
	CU_ASSERT_EQUAL(txn_pstate_check(ps, &h, &dup), TXN_DUPLICATE);
	CU_ASSERT_EQUAL(dup.first_offset, 28);
	CU_ASSERT_EQUAL(ut_check(ps, hdr(1, 0, 116, 1)), TXN_ERR_EPOCH);
	uint32_t cursor = 0, n = 0;
	int seen = 0;
	for (struct txn_producer *p; (p = txn_pstate_next(ps, &cursor));)
		n++, seen |= 1 << p->pid;
	CU_ASSERT_EQUAL(n, 4);
	CU_ASSERT_EQUAL(seen, 0xf);
	txn_pstate_destroy(ps);
}

/* Spread-out and clustered pids, so both sparse and dense probe paths occur. */
static int64_t ut_pid(int i)
{
	return i % 2 ? (int64_t)i * 1000003 + ((int64_t)i << 40) : i;
}

static void test_growth_and_expire(void)
{
	struct txn_pstate *ps = ut_new();
	const int n = 10000;

	for (int i = 0; i < n; i++) /* last_update_ms = i % 3 */
		ut_append(ps, hdr(ut_pid(i), 1, i, 1), i, i % 3);
	CU_ASSERT_EQUAL_FATAL(txn_pstate_count(ps), (uint32_t)n);
	for (int i = 0; i < n; i++) {
		struct txn_producer *p = txn_pstate_find(ps, ut_pid(i));
		CU_ASSERT_FATAL(p != NULL);
		CU_ASSERT_EQUAL(p->b[0].first_offset, i);
		CU_ASSERT_EQUAL(ut_check(ps, hdr(ut_pid(i), 1, i + 1, 1)), TXN_APPEND);
		CU_ASSERT_EQUAL(ut_check(ps, hdr(ut_pid(i), 1, i + 2, 1)), TXN_ERR_SEQUENCE);
	}
	CU_ASSERT_PTR_NULL(txn_pstate_find(ps, (int64_t)n * 1000003 + 7));
	/* An update of a known producer does not move it (no allocation, no rehash). */
	struct txn_producer *p0 = txn_pstate_find(ps, ut_pid(17));
	ut_append(ps, hdr(ut_pid(17), 1, 18, 1), n, 5);
	CU_ASSERT_PTR_EQUAL(txn_pstate_find(ps, ut_pid(17)), p0);

	/* Expire those last updated at 0 and 1 (older than 2 - 0); pid 17 was refreshed. */
	CU_ASSERT_EQUAL(txn_pstate_expire(ps, 100, 1000), 0);
	uint32_t gone = txn_pstate_expire(ps, 2, 0);
	uint32_t want = 0;
	for (int i = 0; i < n; i++)
		want += i % 3 != 2 && i != 17;
	CU_ASSERT_EQUAL(gone, want);
	CU_ASSERT_EQUAL(txn_pstate_count(ps), (uint32_t)n - want);
	for (int i = 0; i < n; i++) {
		bool kept = i % 3 == 2 || i == 17;
		struct txn_producer *p = txn_pstate_find(ps, ut_pid(i));
		CU_ASSERT_EQUAL(p != NULL, kept);
		/* An expired producer is unknown again: any sequence starts it. */
		CU_ASSERT_EQUAL(ut_check(ps, hdr(ut_pid(i), 1, i + 1000, 1)), kept ? TXN_ERR_SEQUENCE : TXN_APPEND);
	}
	uint32_t cursor = 0, seen = 0;
	while (txn_pstate_next(ps, &cursor))
		seen++;
	CU_ASSERT_EQUAL(seen, txn_pstate_count(ps));
	/* Re-insert the expired ones, then expire everything. */
	for (int i = 0; i < n; i++)
		if (!txn_pstate_find(ps, ut_pid(i)))
			ut_append(ps, hdr(ut_pid(i), 1, 77, 1), i, 50);
	CU_ASSERT_EQUAL(txn_pstate_count(ps), (uint32_t)n);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, ut_pid(3))->b[0].first_seq, 77);
	CU_ASSERT_EQUAL(txn_pstate_expire(ps, 1000, 10), (uint32_t)n);
	CU_ASSERT_EQUAL(txn_pstate_count(ps), 0);
	cursor = 0;
	CU_ASSERT_PTR_NULL(txn_pstate_next(ps, &cursor));
	txn_pstate_destroy(ps);
}

/*
 * Small tables at the 50% limit (8 producers in 16 slots) with random pids:
 * clusters that wrap past the table end are common, so expiring a random
 * subset exercises every case of the backward-shift deletion.
 */
static void test_expire_dense(void)
{
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	for (int trial = 0; trial < 3000; trial++) {
		struct txn_pstate *ps = ut_new();
		int64_t pids[8];
		bool old[8];
		uint32_t want = 0;
		for (int i = 0; i < 8; i++) {
			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17; /* xorshift64 */
			pids[i] = (int64_t)(rng >> 1) % (trial % 2 ? 64 : INT64_MAX); /* dense ids too */
			bool dup = false;
			for (int k = 0; k < i; k++)
				dup |= pids[k] == pids[i];
			if (dup) { /* keep them distinct */
				i--;
				continue;
			}
			old[i] = (rng >> 40) & 1;
			want += old[i];
			ut_append(ps, hdr(pids[i], 0, 0, 1), i, old[i] ? 0 : 10);
		}
		CU_ASSERT_EQUAL(txn_pstate_count(ps), 8);
		CU_ASSERT_EQUAL(txn_pstate_expire(ps, 10, 5), want);
		for (int i = 0; i < 8; i++)
			CU_ASSERT_EQUAL(txn_pstate_find(ps, pids[i]) != NULL, !old[i]);
		txn_pstate_destroy(ps);
	}
}

/* A state worth snapshotting: wrapped rings, epochs, markers, issue-4 fields. */
static struct txn_pstate *ut_rich_state(void)
{
	struct txn_pstate *ps = ut_new();
	int64_t off = 0;

	for (int i = 0; i < 8; i++, off += 2)
		ut_append(ps, hdr(11, 2, 2 * i, 2), off, 100 + i);
	const int32_t seq12[] = { INT32_MAX - 2, 0, 3 }; /* the first ends at INT32_MAX */
	for (int i = 0; i < 3; i++, off += 3)
		ut_append(ps, hdr(12, 0, seq12[i], 3), off, 200 + i);
	ut_append(ps, hdr(13, 7, 0, 1), off++, 300);
	struct st_batch_hdr m = hdr(14, 9, -1, 1);
	m.attributes = ST_BATCH_ATTR_CONTROL;
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &m, off++, 400), 0);
	for (int64_t pid = 1000; pid < 1100; pid++)
		ut_append(ps, hdr(pid << 20, -1 + (int16_t)(pid % 3), (int32_t)pid, 1), off++, pid);
	txn_pstate_find(ps, 12)->txn_first_offset = 16;
	txn_pstate_find(ps, 12)->coordinator_epoch = 3;
	return ps;
}

static void ut_same_producer(const struct txn_producer *a, const struct txn_producer *b)
{
	CU_ASSERT_EQUAL(a->pid, b->pid);
	CU_ASSERT_EQUAL(a->epoch, b->epoch);
	CU_ASSERT_EQUAL_FATAL(a->nbatches, b->nbatches);
	CU_ASSERT_EQUAL(a->last_timestamp, b->last_timestamp);
	CU_ASSERT_EQUAL(a->last_update_ms, b->last_update_ms);
	CU_ASSERT_EQUAL(a->txn_first_offset, b->txn_first_offset);
	CU_ASSERT_EQUAL(a->coordinator_epoch, b->coordinator_epoch);
	for (int k = 0; k < a->nbatches; k++) { /* k-th newest */
		const struct txn_pbatch *x = &a->b[(a->newest + TXN_PSTATE_BATCHES - k) % TXN_PSTATE_BATCHES];
		const struct txn_pbatch *y = &b->b[(b->newest + TXN_PSTATE_BATCHES - k) % TXN_PSTATE_BATCHES];
		CU_ASSERT_EQUAL(memcmp(x, y, sizeof(*x)), 0);
	}
}

static void ut_same_state(struct txn_pstate *a, struct txn_pstate *b)
{
	uint32_t cursor = 0;

	CU_ASSERT_EQUAL_FATAL(txn_pstate_count(a), txn_pstate_count(b));
	for (struct txn_producer *p; (p = txn_pstate_next(a, &cursor));) {
		struct txn_producer *q = txn_pstate_find(b, p->pid);
		CU_ASSERT_FATAL(q != NULL);
		ut_same_producer(p, q);
	}
}

static size_t ut_snap(struct txn_pstate *ps, int64_t offset, uint8_t **buf)
{
	size_t size = txn_pstate_snapshot_size(ps);
	*buf = malloc(size);
	CU_ASSERT_FATAL(*buf != NULL);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_write(ps, offset, *buf, size - 1), 0);
	CU_ASSERT_EQUAL_FATAL(txn_pstate_snapshot_write(ps, offset, *buf, size), size);
	return size;
}

static void test_snapshot_round_trip(void)
{
	struct txn_pstate *a = ut_rich_state(), *b = ut_new();
	uint8_t *buf;
	int64_t off = -5;
	size_t size = ut_snap(a, 1234, &buf);

	CU_ASSERT_EQUAL(size, 18 + 104 * UT_ENTRY_BYTES + 4);
	CU_ASSERT_EQUAL(memcmp(buf, "SLPS", 4), 0);
	ut_append(b, hdr(99, 0, 0, 1), 0, 0); /* replaced by the read */
	CU_ASSERT_EQUAL_FATAL(txn_pstate_snapshot_read(b, buf, size, &off), 0);
	CU_ASSERT_EQUAL(off, 1234);
	CU_ASSERT_PTR_NULL(txn_pstate_find(b, 99));
	ut_same_state(a, b);
	/* Same decisions afterwards. */
	struct txn_pstate *s[2] = { a, b };
	for (int k = 0; k < 2; k++) {
		struct txn_pbatch dup;
		struct st_batch_hdr h = hdr(11, 2, 6, 2);
		CU_ASSERT_EQUAL(txn_pstate_check(s[k], &h, &dup), TXN_DUPLICATE);
		CU_ASSERT_EQUAL(dup.first_offset, 6);
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(11, 2, 4, 2)), TXN_ERR_SEQUENCE); /* 6th oldest */
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(11, 2, 16, 1)), TXN_APPEND);
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(11, 1, 16, 1)), TXN_ERR_EPOCH);
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(12, 0, INT32_MAX - 2, 3)), TXN_DUPLICATE);
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(12, 0, 0, 3)), TXN_DUPLICATE);
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(12, 0, 3, 3)), TXN_DUPLICATE);
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(12, 0, 6, 1)), TXN_APPEND);
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(12, 0, 7, 1)), TXN_ERR_SEQUENCE);
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(14, 9, 0, 1)), TXN_APPEND);
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(14, 9, 1, 1)), TXN_ERR_SEQUENCE);
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(1050 << 20, -1, 1051, 1)), TXN_APPEND); /* epoch -1 */
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(1052 << 20, 0, 1053, 1)), TXN_ERR_EPOCH); /* epoch 1 */
		CU_ASSERT_EQUAL(ut_check(s[k], hdr(1051 << 20, 1, 1052, 1)), TXN_ERR_SEQUENCE); /* epoch 0 */
	}
	/* The read table works on: updates, growth, a second snapshot byte-identical in size. */
	ut_append(b, hdr(11, 2, 16, 1), 5000, 1);
	for (int64_t pid = 5000; pid < 6000; pid++)
		ut_append(b, hdr(pid, 0, 0, 1), pid, 1);
	CU_ASSERT_EQUAL(txn_pstate_count(b), 1104);
	CU_ASSERT_EQUAL(ut_check(b, hdr(11, 2, 16, 1)), TXN_DUPLICATE);

	/* An empty state round-trips too. */
	struct txn_pstate *e = ut_new();
	uint8_t ebuf[32];
	CU_ASSERT_EQUAL(txn_pstate_snapshot_write(e, 0, ebuf, sizeof(ebuf)), 22);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, ebuf, 22, &off), 0);
	CU_ASSERT_EQUAL(off, 0);
	CU_ASSERT_EQUAL(txn_pstate_count(b), 0);
	txn_pstate_destroy(e);
	free(buf);
	txn_pstate_destroy(a);
	txn_pstate_destroy(b);
}

/* Rewrite the CRC so that field checks, not the CRC, must catch the damage. */
static void ut_fix_crc(uint8_t *buf, size_t len)
{
	st_put_be32(buf + len - 4, crc32c(0, buf, len - 4));
}

static void test_snapshot_damage(void)
{
	struct txn_pstate *a = ut_rich_state(), *b = ut_new();
	uint8_t *buf;
	int64_t off = -5;
	size_t size = ut_snap(a, 777, &buf);   /* above every batch of the state */
	uint8_t *copy = malloc(size);

	CU_ASSERT_FATAL(copy != NULL);
	ut_append(b, hdr(99, 0, 0, 1), 0, 0);
	/* Every flipped byte is caught, and the old state survives. */
	for (size_t i = 0; i < size; i++) {
		memcpy(copy, buf, size);
		copy[i] ^= 0x10;
		CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, copy, size, &off), -EBADMSG);
	}
	/* Every truncation (and an extension) is caught; a reader past len would trip ASan. */
	for (size_t len = 0; len < size; len++) {
		uint8_t *t = malloc(len ? len : 1);
		memcpy(t, buf, len);
		CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, t, len, &off), -EBADMSG);
		free(t);
	}
	memcpy(copy, buf, size);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, copy, size - 1, &off), -EBADMSG);
	CU_ASSERT_EQUAL(off, -5);
	CU_ASSERT_EQUAL(txn_pstate_count(b), 1);
	CU_ASSERT(txn_pstate_find(b, 99) != NULL);

	/* Damage behind a valid CRC: huge count, count/length mismatch, version, field ranges. */
	uint8_t hdr_only[22];
	memcpy(hdr_only, buf, 18);
	st_put_be32(hdr_only + 6, 0xffffffffu);
	ut_fix_crc(hdr_only, 22);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, hdr_only, 22, &off), -EBADMSG);
	st_put_be32(hdr_only + 6, 1);
	ut_fix_crc(hdr_only, 22);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, hdr_only, 22, &off), -EBADMSG);
	struct { size_t at; uint8_t v; } bad[] = {
		{ 5, 2 },                              /* version 2 */
		{ 10, 0x80 },                          /* negative offset */
		{ 18, 0x80 },                          /* negative pid in entry 0 */
		{ 18 + 10, TXN_PSTATE_BATCHES + 1 },   /* nbatches */
		{ 18 + 11, 0x80 },                     /* txn_first_offset < -1 */
		{ 18 + 39, 0x80 },                     /* first_seq < 0 */
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		memcpy(copy, buf, size);
		copy[bad[k].at] = bad[k].v;
		if (bad[k].at == 18 + 39) /* entry 0 must hold a batch for this one */
			copy[18 + 10] = copy[18 + 10] ? copy[18 + 10] : 1;
		ut_fix_crc(copy, size);
		CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, copy, size, &off), -EBADMSG);
	}
	/* The same pid twice. */
	memcpy(copy, buf, size);
	memcpy(copy + 18 + UT_ENTRY_BYTES, copy + 18, 8);
	ut_fix_crc(copy, size);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, copy, size, &off), -EBADMSG);
	CU_ASSERT_EQUAL(txn_pstate_count(b), 1);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, buf, size, &off), 0); /* the original is fine */
	CU_ASSERT_EQUAL(off, 777);
	free(copy);
	free(buf);
	txn_pstate_destroy(a);
	txn_pstate_destroy(b);
}

/*
 * A snapshot at offset O reflects the batches below O and none at or above it:
 * a remembered batch ending at or past O, or an open transaction starting
 * there, is damage behind a valid CRC. Read as good, recovery began that
 * transaction in the LSO ahead of the batches it then replayed and the
 * broker aborted at start-up (txn_lso_end's order assertion; found by
 * fuzz_pstate, its input is tests/fuzz/regress/pstate/).
 */
static void test_snapshot_past_offset(void)
{
	struct txn_pstate *a = ut_new(), *b = ut_new();
	uint8_t *buf;
	int64_t off = -5;

	ut_append(a, hdr(5, 0, 0, 3), 0, 1);   /* offsets 0..2 */
	size_t size = ut_snap(a, 2, &buf);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, buf, size, &off), -EBADMSG);
	free(buf);
	size = ut_snap(a, 3, &buf);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, buf, size, &off), 0);
	CU_ASSERT_EQUAL(off, 3);
	free(buf);

	struct st_batch_hdr t = hdr(6, 0, 0, 1);
	t.attributes = ST_BATCH_ATTR_TRANSACTIONAL;
	ut_append(a, t, 10, 2);   /* opens at 10 */
	size = ut_snap(a, 10, &buf);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, buf, size, &off), -EBADMSG);
	free(buf);
	txn_pstate_find(a, 6)->nbatches = 0;   /* the open transaction alone is damage too */
	size = ut_snap(a, 10, &buf);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, buf, size, &off), -EBADMSG);
	CU_ASSERT_EQUAL(off, 3);
	free(buf);
	size = ut_snap(a, 11, &buf);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_read(b, buf, size, &off), 0);
	CU_ASSERT_EQUAL(txn_pstate_find(b, 6)->txn_first_offset, 10);
	free(buf);
	txn_pstate_destroy(a);
	txn_pstate_destroy(b);
}

/* ------------------------------------------------------------------------ */
/* Files                                                                     */

/* Transactions: a transactional batch opens one (first batch only), a marker closes it;
 * snapshots keep it; expiry spares a producer with one open. */
static void test_transactions(void)
{
	struct txn_pstate *ps = ut_new(), *b = ut_new();
	struct st_batch_hdr h = hdr(1, 0, 0, 2);

	ut_append(ps, h, 0, 10); /* idempotent, not transactional */
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 1)->txn_first_offset, -1);
	h = hdr(1, 0, 2, 3);
	h.attributes = ST_BATCH_ATTR_TRANSACTIONAL;
	ut_append(ps, h, 5, 11);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 1)->txn_first_offset, 5);
	h = hdr(1, 0, 5, 1);
	h.attributes = ST_BATCH_ATTR_TRANSACTIONAL;
	ut_append(ps, h, 9, 12); /* later batches of the same transaction keep its first offset */
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 1)->txn_first_offset, 5);
	h = hdr(2, 3, 0, 1);
	h.attributes = ST_BATCH_ATTR_TRANSACTIONAL;
	ut_append(ps, h, 10, 13); /* a new producer whose first batch is transactional */
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 2)->txn_first_offset, 10);

	/* The snapshot keeps both open transactions. */
	uint8_t *buf;
	int64_t off;
	size_t n = ut_snap(ps, 11, &buf);
	CU_ASSERT_EQUAL_FATAL(txn_pstate_snapshot_read(b, buf, n, &off), 0);
	free(buf);
	CU_ASSERT_EQUAL(txn_pstate_find(b, 1)->txn_first_offset, 5);
	CU_ASSERT_EQUAL(txn_pstate_find(b, 2)->txn_first_offset, 10);
	ut_same_state(ps, b);

	/* Expiry passes over producers with an open transaction (their marker must find them). */
	CU_ASSERT_EQUAL(txn_pstate_expire(b, 1000, 10), 0);
	CU_ASSERT_EQUAL(txn_pstate_count(b), 2);

	/* A marker (COMMIT or ABORT alike: the header does not say) closes it; the next opens anew. */
	struct st_batch_hdr m = hdr(1, 0, -1, 1);
	m.attributes = ST_BATCH_ATTR_CONTROL | ST_BATCH_ATTR_TRANSACTIONAL;
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &m, 11, 14), 0);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 1)->txn_first_offset, -1);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 2)->txn_first_offset, 10);
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &m, 12, 15), 0); /* a marker with nothing open: no change */
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 1)->txn_first_offset, -1);
	h = hdr(1, 0, 6, 1);
	h.attributes = ST_BATCH_ATTR_TRANSACTIONAL;
	ut_append(ps, h, 13, 16);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 1)->txn_first_offset, 13);
	/* A marker with a bumped epoch (coordinator abort on timeout) closes it too. */
	m.producer_epoch = 1;
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &m, 14, 17), 0);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 1)->txn_first_offset, -1);
	CU_ASSERT_EQUAL(txn_pstate_find(ps, 1)->epoch, 1);
	m.producer_id = 2;
	m.producer_epoch = 3;
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &m, 15, 18), 0);
	CU_ASSERT_EQUAL(txn_pstate_expire(ps, 1000, 10), 2); /* nothing open now: both go */
	txn_pstate_destroy(ps);
	txn_pstate_destroy(b);
}

static char tdir[64];

static void ut_path(char *buf, size_t cap, int64_t offset, const char *suffix)
{
	snprintf(buf, cap, "%s/%020" PRId64 "%s", tdir, offset, suffix);
}

static bool ut_exists(int64_t offset)
{
	char path[128];
	struct stat st;
	ut_path(path, sizeof(path), offset, ".snapshot");
	return stat(path, &st) == 0;
}

static int ut_file_count(void)
{
	DIR *d = opendir(tdir);
	int n = 0;
	for (struct dirent *de; d && (de = readdir(d));)
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static void ut_flip(int64_t offset, off_t pos)
{
	char path[128];
	uint8_t c;
	ut_path(path, sizeof(path), offset, ".snapshot");
	int fd = open(path, O_RDWR);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(pread(fd, &c, 1, pos) == 1);
	c ^= 1;
	CU_ASSERT_FATAL(pwrite(fd, &c, 1, pos) == 1);
	close(fd);
}

static void test_snapshot_files(void)
{
	char tmpl[] = "/tmp/pstate_ut.XXXXXX";
	struct txn_pstate *a = ut_new(), *b = ut_new();
	int64_t off;

	CU_ASSERT_FATAL(mkdtemp(tmpl) != NULL);
	snprintf(tdir, sizeof(tdir), "%s", tmpl);

	/* Nothing there: empty state, offset -1 (also for a missing directory). */
	ut_append(b, hdr(99, 0, 0, 1), 0, 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_load(b, tdir, 1000, &off), 0);
	CU_ASSERT_EQUAL(off, -1);
	CU_ASSERT_EQUAL(txn_pstate_count(b), 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_load(b, "/tmp/pstate_ut.missing/x", 1000, &off), 0);
	CU_ASSERT_EQUAL(off, -1);

	/* State grows between snapshots at 100, 200, 300: only the newest 2 stay. */
	ut_append(a, hdr(1, 0, 0, 1), 0, 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_save(a, tdir, 100), 0);
	ut_append(a, hdr(2, 0, 0, 1), 1, 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_save(a, tdir, 200), 0);
	ut_append(a, hdr(3, 0, 0, 1), 2, 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_save(a, tdir, 300), 0);
	CU_ASSERT(!ut_exists(100) && ut_exists(200) && ut_exists(300));
	CU_ASSERT_EQUAL(ut_file_count(), 2);

	/* Newest valid wins. */
	CU_ASSERT_EQUAL(txn_pstate_snapshot_load(b, tdir, 1000, &off), 0);
	CU_ASSERT_EQUAL(off, 300);
	ut_same_state(a, b);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_load(b, tdir, 300, &off), 0);
	CU_ASSERT_EQUAL(off, 300);
	/* Too new for the log (it was truncated below it): skipped. */
	CU_ASSERT_EQUAL(txn_pstate_snapshot_load(b, tdir, 299, &off), 0);
	CU_ASSERT_EQUAL(off, 200);
	CU_ASSERT_EQUAL(txn_pstate_count(b), 2);
	CU_ASSERT_PTR_NULL(txn_pstate_find(b, 3));
	CU_ASSERT_EQUAL(txn_pstate_snapshot_load(b, tdir, 199, &off), 0);
	CU_ASSERT_EQUAL(off, -1);
	CU_ASSERT_EQUAL(txn_pstate_count(b), 0);

	/* A damaged newest falls back to the older one; a name/content mismatch is damage too. */
	ut_flip(300, 40);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_load(b, tdir, 1000, &off), 0);
	CU_ASSERT_EQUAL(off, 200);
	CU_ASSERT_EQUAL(txn_pstate_count(b), 2);
	char from[128], to[128];
	ut_path(from, sizeof(from), 200, ".snapshot");
	ut_path(to, sizeof(to), 250, ".snapshot");
	CU_ASSERT_FATAL(rename(from, to) == 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_load(b, tdir, 1000, &off), 0);
	CU_ASSERT_EQUAL(off, -1);
	CU_ASSERT_EQUAL(txn_pstate_count(b), 0);
	/* Truncated and empty files, and junk names, are skipped without harm. */
	ut_path(from, sizeof(from), 250, ".snapshot");
	CU_ASSERT_FATAL(truncate(from, 17) == 0);
	ut_path(from, sizeof(from), 260, ".snapshot");
	close(open(from, O_WRONLY | O_CREAT, 0644));
	ut_path(from, sizeof(from), 1, ".snapshotx");
	close(open(from, O_WRONLY | O_CREAT, 0644));
	ut_append(b, hdr(99, 0, 0, 1), 0, 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_load(b, tdir, 1000, &off), 0);
	CU_ASSERT_EQUAL(off, -1);
	CU_ASSERT_EQUAL(txn_pstate_count(b), 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_save(a, tdir, 150), 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_load(b, tdir, 1000, &off), 0);
	CU_ASSERT_EQUAL(off, 150);
	ut_same_state(a, b);

	/* Saving at 150 removed everything above it (a truncated history), kept the junk name. */
	CU_ASSERT(ut_exists(150) && !ut_exists(250) && !ut_exists(260) && !ut_exists(300));
	CU_ASSERT_EQUAL(ut_file_count(), 2);
	/* A leftover temp file of a crashed save is removed by the next save. */
	ut_path(from, sizeof(from), 400, ".snapshot.tmp");
	close(open(from, O_WRONLY | O_CREAT, 0644));
	CU_ASSERT_EQUAL(txn_pstate_snapshot_save(a, tdir, 160), 0);
	CU_ASSERT_EQUAL(txn_pstate_snapshot_save(a, tdir, 170), 0);
	CU_ASSERT(!ut_exists(150) && ut_exists(160) && ut_exists(170));
	CU_ASSERT_EQUAL(ut_file_count(), 3); /* 160, 170 and the junk name */
	CU_ASSERT_EQUAL(txn_pstate_snapshot_save(a, "/tmp/pstate_ut.missing/x", 1), -ENOENT);

	ut_path(from, sizeof(from), 1, ".snapshotx");
	unlink(from);
	ut_path(from, sizeof(from), 160, ".snapshot");
	unlink(from);
	ut_path(from, sizeof(from), 170, ".snapshot");
	unlink(from);
	CU_ASSERT_EQUAL(rmdir(tdir), 0);
	txn_pstate_destroy(a);
	txn_pstate_destroy(b);
}

/*
 * A full table: reserve says so before the owner appends, for a new producer
 * only; a known one always fits; expiry makes room. After a 0 from reserve the
 * update cannot fail, also across growth of the table.
 */
static void test_full(void)
{
	struct txn_pstate *ps = ut_new();

	txn_pstate_set_limit(ps, 2);
	CU_ASSERT_EQUAL(txn_pstate_reserve(ps, 1), 0);
	ut_append(ps, hdr(1, 0, 0, 1), 0, 100);
	CU_ASSERT_EQUAL(txn_pstate_reserve(ps, 2), 0);
	ut_append(ps, hdr(2, 0, 0, 1), 1, 200);
	CU_ASSERT_EQUAL(txn_pstate_reserve(ps, 3), -ENOSPC);   /* a third producer does not fit */
	struct st_batch_hdr h = hdr(3, 0, 0, 1);
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &h, 2, 300), -ENOSPC);
	CU_ASSERT_PTR_NULL(txn_pstate_find(ps, 3));
	CU_ASSERT_EQUAL(txn_pstate_reserve(ps, 1), 0);         /* known ones always do */
	ut_append(ps, hdr(1, 0, 1, 1), 2, 300);
	CU_ASSERT_EQUAL(txn_pstate_expire(ps, 1000, 700), 1);  /* pid 2 idle since 200 */
	CU_ASSERT_EQUAL(txn_pstate_reserve(ps, 3), 0);
	ut_append(ps, hdr(3, 0, 0, 1), 3, 1000);
	CU_ASSERT_EQUAL(txn_pstate_count(ps), 2);
	txn_pstate_destroy(ps);

	ps = ut_new();
	for (int64_t pid = 0; pid < 5000; pid++) {
		CU_ASSERT_EQUAL_FATAL(txn_pstate_reserve(ps, pid), 0);
		h = hdr(pid, 0, 0, 1);
		CU_ASSERT_EQUAL_FATAL(txn_pstate_update(ps, &h, pid, 1), 0);
	}
	CU_ASSERT_EQUAL(txn_pstate_count(ps), 5000);
	txn_pstate_destroy(ps);
}

/*
 * Issue 11: on a shard core the table grows in the core's pool (arena.h),
 * not by realloc. When the pool has no block for the larger table, reserve
 * says -ENOBUFS before the owner appends (and the update refuses the same),
 * the producers held are untouched, and what the table gave back at
 * destroy is whole again for the next one.
 */
static void test_pool(void)
{
	struct txn_arena a;
	struct txn_pstate *ps, *other;
	struct st_batch_hdr h;
	int64_t held = 0;

	CU_ASSERT_FATAL(txn_arena_init(&a, 256u << 10, TXN_ARENA_BLOCK_MIN_BYTES) == 0);
	CU_ASSERT_FATAL(txn_pstate_create_in(&ps, &a) == 0);
	for (;; held++) {
		int rc = txn_pstate_reserve(ps, held);
		if (rc < 0) {
			CU_ASSERT_EQUAL(rc, -ENOBUFS);
			break;
		}
		h = hdr(held, 0, 0, 1);
		CU_ASSERT_EQUAL_FATAL(txn_pstate_update(ps, &h, held, 1), 0);
		CU_ASSERT_FATAL(held < 100000);
	}
	CU_ASSERT(held >= 128 && held < 1024);   /* 256 KiB: a table of 512 slots, not the next one */
	h = hdr(held, 0, 0, 1);
	CU_ASSERT_EQUAL(txn_pstate_update(ps, &h, held, 1), -ENOBUFS);
	CU_ASSERT_PTR_NULL(txn_pstate_find(ps, held));
	CU_ASSERT_EQUAL(txn_pstate_count(ps), (uint32_t)held);
	for (int64_t pid = 0; pid < held; pid++) {   /* known producers still fit and keep their state */
		CU_ASSERT_EQUAL_FATAL(txn_pstate_reserve(ps, pid), 0);
		CU_ASSERT_EQUAL_FATAL(ut_check(ps, hdr(pid, 0, 1, 1)), TXN_APPEND);
	}
	/* Expiry makes room: the emptied table gives its blocks back to the pool, and a new producer
	 * fits again. */
	size_t full = a.used;
	CU_ASSERT(txn_pstate_expire(ps, 100, 10) == (uint32_t)held);
	CU_ASSERT(a.used < full / 4);
	CU_ASSERT_EQUAL(txn_pstate_reserve(ps, held), 0);
	txn_pstate_destroy(ps);
	CU_ASSERT_EQUAL(a.used, 0);
	CU_ASSERT_FATAL(txn_pstate_create_in(&other, &a) == 0);
	CU_ASSERT_EQUAL(txn_pstate_reserve(other, 1), 0);
	txn_pstate_destroy(other);
	txn_arena_fini(&a);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("pstate", NULL, NULL);
	CU_add_test(s, "unknown producer, next sequence, gaps", test_unknown_and_next);
	CU_add_test(s, "duplicates of the last 5, out of window", test_duplicate_window);
	CU_add_test(s, "epochs and markers", test_epochs);
	CU_add_test(s, "sequence wrap at INT32_MAX", test_wrap);
	CU_add_test(s, "several producers", test_many_producers);
	CU_add_test(s, "10000 producers, expire", test_growth_and_expire);
	CU_add_test(s, "expire in dense small tables", test_expire_dense);
	CU_add_test(s, "snapshot round trip", test_snapshot_round_trip);
	CU_add_test(s, "snapshot damage", test_snapshot_damage);
	CU_add_test(s, "snapshot: batches and transactions past its offset", test_snapshot_past_offset);
	CU_add_test(s, "snapshot files", test_snapshot_files);
	CU_add_test(s, "transactions: open, close, snapshot, expiry", test_transactions);
	CU_add_test(s, "full table: reserve before the append", test_full);
	CU_add_test(s, "the table in a spent pool: -ENOBUFS before the append", test_pool);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
