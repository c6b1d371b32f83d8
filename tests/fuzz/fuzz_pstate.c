/*
 * fuzz_pstate.c - libFuzzer target for the producer-state snapshot (txn/pstate.c:
 * txn_pstate_snapshot_read, the file load txn_pstate_snapshot_load) and the
 * partition's start-up recovery behind it (txn_pstate_recover: the snapshot's
 * open transactions begun in the LSO, then the log tail replayed into both).
 *
 * Input: byte 0 the mode (bit 0: keep the CRCs as they are, else the
 * snapshot's and each batch's are fixed so mutations reach the fields behind
 * them; bit 1: also run the recovery from files), bytes 1..2 the snapshot's
 * length L (big-endian, cut to what is there), then L bytes of snapshot, and
 * the rest the partition's log segment (record batches from offset 0).
 *
 * What must hold whatever the bytes: a snapshot read either fails and leaves
 * the state as it was, or loads producers the sequence rules can run with
 * (at most TXN_PSTATE_BATCHES batches each, in offset order, all below the
 * snapshot's offset, an open transaction's first offset too); writing that
 * state and reading it back gives the same producers; the rules (check,
 * update, expire) run over every loaded producer; and recovery from the
 * snapshot file and the log never crashes, and fails only for memory or the
 * log scan's errors.
 * Locality: the fuzzer's thread.
 */
#include "fuzz_log.h"
#include "lso.h"
#include "pstate.h"

#define FUZZ_NOW_MS 1700000000000LL

static uint8_t fuzz_copy[FUZZ_INPUT_BYTES_MAX];
static uint8_t fuzz_snap[FUZZ_INPUT_BYTES_MAX];

static bool same_producer(const struct txn_producer *a, const struct txn_producer *b)
{
	if (a->pid != b->pid || a->epoch != b->epoch || a->nbatches != b->nbatches ||
	    a->txn_first_offset != b->txn_first_offset || a->coordinator_epoch != b->coordinator_epoch ||
	    a->last_timestamp != b->last_timestamp || a->last_update_ms != b->last_update_ms)
		return false;
	for (uint32_t k = 0; k < a->nbatches; k++) {   /* newest first in both */
		const struct txn_pbatch *x = &a->b[(a->newest + TXN_PSTATE_BATCHES - k) % TXN_PSTATE_BATCHES];
		const struct txn_pbatch *y = &b->b[(b->newest + TXN_PSTATE_BATCHES - k) % TXN_PSTATE_BATCHES];
		if (memcmp(x, y, sizeof(*x)))
			return false;
	}
	return true;
}

static void check_loaded(struct txn_pstate *ps, int64_t offset)
{
	uint32_t cur = 0, n = 0;
	struct txn_producer *p;
	fuzz_check(offset >= 0, "a snapshot at a negative offset");
	while ((p = txn_pstate_next(ps, &cur))) {
		n++;
		fuzz_check(p->pid >= 0 && txn_pstate_find(ps, p->pid) == p, "a loaded producer is not found");
		fuzz_check(p->nbatches <= TXN_PSTATE_BATCHES && p->newest < TXN_PSTATE_BATCHES &&
		           (p->nbatches == 0 || p->newest == p->nbatches - 1), "batches out of bounds");
		fuzz_check(p->txn_first_offset >= -1 && p->txn_first_offset < offset,
		           "an open transaction at or past the snapshot's offset");
		for (uint32_t k = 0; k < p->nbatches; k++)
			fuzz_check(p->b[k].first_seq >= 0 && p->b[k].last_seq >= 0 && p->b[k].first_offset >= 0 &&
			           p->b[k].first_offset <= p->b[k].last_offset && p->b[k].last_offset < offset &&
			           (k == 0 || p->b[k - 1].last_offset < p->b[k].first_offset), "a batch out of order");
	}
	fuzz_check(n == txn_pstate_count(ps), "the count disagrees with the table");
}

/* Write what was read, read it again: the same producers at the same offset. */
static void check_rewrite(struct txn_pstate *ps, int64_t offset)
{
	size_t size = txn_pstate_snapshot_size(ps);
	uint8_t *buf = malloc(size);
	struct txn_pstate *ps2;
	int64_t off2 = -1;
	fuzz_check(buf && txn_pstate_snapshot_write(ps, offset, buf, size) == size, "txn_pstate_snapshot_write");
	fuzz_check(txn_pstate_create(&ps2) == 0, "txn_pstate_create");
	fuzz_check(txn_pstate_snapshot_read(ps2, buf, size, &off2) == 0 && off2 == offset,
	           "a rewritten snapshot does not read");
	fuzz_check(txn_pstate_count(ps2) == txn_pstate_count(ps), "a rewritten snapshot holds other producers");
	uint32_t cur = 0;
	struct txn_producer *p;
	while ((p = txn_pstate_next(ps, &cur))) {
		struct txn_producer *q = txn_pstate_find(ps2, p->pid);
		fuzz_check(q && same_producer(p, q), "a rewritten snapshot reads to another producer");
	}
	txn_pstate_destroy(ps2);
	free(buf);
}

/* The sequence rules over every loaded producer: its next batch, a retry, a new epoch, a marker. */
static void drive(struct txn_pstate *ps, int64_t offset)
{
	uint32_t cur = 0;
	struct txn_producer *p;
	int64_t at = offset;
	while ((p = txn_pstate_next(ps, &cur))) {
		const struct txn_pbatch *nb = p->nbatches ? &p->b[p->newest] : NULL;
		struct st_batch_hdr h = {
			.producer_id = p->pid, .producer_epoch = p->epoch, .attributes = ST_BATCH_ATTR_TRANSACTIONAL,
			.base_sequence = nb ? (nb->last_seq == INT32_MAX ? 0 : nb->last_seq + 1) : 0,
			.last_offset_delta = 2, .max_timestamp = FUZZ_NOW_MS,
		};
		struct txn_pbatch dup;
		fuzz_check(txn_pstate_check(ps, &h, &dup) == TXN_APPEND, "the next sequence is refused");
		/* Updates do not move entries (the pid is known): p stays valid. */
		fuzz_check(txn_pstate_update(ps, &h, at, FUZZ_NOW_MS) == 0, "an update of a known producer failed");
		fuzz_check(txn_pstate_check(ps, &h, &dup) == TXN_DUPLICATE && dup.first_offset == at,
		           "a retry is not a duplicate");
		at += 3;
		if (p->epoch < INT16_MAX) {
			h.producer_epoch = (int16_t)(p->epoch + 1);
			h.base_sequence = 0;
			fuzz_check(txn_pstate_check(ps, &h, &dup) == TXN_APPEND, "a new epoch from 0 is refused");
		}
		h.attributes = ST_BATCH_ATTR_TRANSACTIONAL | ST_BATCH_ATTR_CONTROL;
		h.base_sequence = -1;
		h.last_offset_delta = 0;
		fuzz_check(txn_pstate_update(ps, &h, at++, FUZZ_NOW_MS) == 0, "a marker update failed");
		fuzz_check(p->txn_first_offset == -1, "a marker leaves the transaction open");
	}
	(void)txn_pstate_expire(ps, FUZZ_NOW_MS + 1, 0);
	fuzz_check(txn_pstate_count(ps) == 0, "closed producers outlive their expiration");
}

/* The partition's start-up over files: DIR/<offset>.snapshot and DIR/<0>.log. */
static void recover(const char *dir, const uint8_t *snap, size_t snap_len, int64_t snap_offset, const uint8_t *seg,
                    size_t seg_len)
{
	char path[FUZZ_PATH_BYTES + 64];
	fuzz_rm_dir(dir);
	fuzz_check(mkdir(dir, 0755) == 0, "cannot make the scratch directory");
	snprintf(path, sizeof(path), "%s/%020" PRId64 ".snapshot", dir, snap_offset < 0 ? 0 : snap_offset);
	fuzz_write_file(path, snap, snap_len);
	snprintf(path, sizeof(path), "%s/%020d.log", dir, 0);
	fuzz_write_file(path, seg, seg_len);
	struct st_log_config lc = { .segment_bytes = 1u << 20, .retention_bytes = -1, .retention_ms = -1,
	                            .index_interval_bytes = 4096 };
	struct st_log *log;
	int rc = st_log_open(fuzz_io(), dir, &lc, &log);
	if (rc < 0) {
		fuzz_check(rc == -EBADMSG || rc == -ENOMEM, "odd error from st_log_open");
		fuzz_rm_dir(dir);
		return;
	}
	struct txn_pstate *ps = NULL;
	struct txn_lso *lso = NULL;
	int64_t used = -2;
	fuzz_check(txn_pstate_create(&ps) == 0 && txn_lso_create(&lso) == 0, "create");
	fuzz_check(txn_lso_open_index(lso, dir, st_log_end_offset(log)) == 0, "txn_lso_open_index");
	rc = txn_pstate_recover(ps, lso, log, dir, &used);
	fuzz_check(rc == 0 || rc == -ENOMEM, "txn_pstate_recover failed");
	if (rc == 0) {
		fuzz_check(used == -1 || (used >= 0 && used <= st_log_end_offset(log)), "a snapshot past the log used");
		int64_t lso_at = txn_lso_get(lso, st_log_end_offset(log));
		fuzz_check(lso_at >= st_log_start_offset(log) && lso_at <= st_log_end_offset(log), "the LSO outside the log");
	}
	txn_lso_destroy(lso);
	txn_pstate_destroy(ps);
	st_log_close(log);
	fuzz_rm_dir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char dir[FUZZ_PATH_BYTES];
	if (size < 3 || size - 3 > sizeof(fuzz_copy))
		return 0;
	if (!dir[0])
		fuzz_dir(dir, "pstate");
	size_t snap_len = st_be16(data + 1), n = size - 3;
	if (snap_len > n)
		snap_len = n;
	memcpy(fuzz_snap, data + 3, snap_len);
	const uint8_t *seg = data + 3 + snap_len;
	size_t seg_len = n - snap_len;
	if (!(data[0] & 1)) {
		if (snap_len >= 4)
			st_put_be32(fuzz_snap + snap_len - 4, crc32c(0, fuzz_snap, snap_len - 4));
		fuzz_fix_crcs(seg, seg_len, fuzz_copy);
		seg = fuzz_copy;
	}

	struct txn_pstate *ps;
	int64_t offset = -1;
	fuzz_check(txn_pstate_create(&ps) == 0, "txn_pstate_create");
	/* A state to keep when the read fails. */
	struct st_batch_hdr h0 = { .producer_id = 1, .producer_epoch = 0, .base_sequence = 0, .max_timestamp = 1 };
	fuzz_check(txn_pstate_update(ps, &h0, 0, 1) == 0, "txn_pstate_update");
	int rc = txn_pstate_snapshot_read(ps, fuzz_snap, snap_len, &offset);
	fuzz_check(rc == 0 || rc == -EBADMSG || rc == -ENOMEM, "odd error from txn_pstate_snapshot_read");
	if (rc == 0) {
		check_loaded(ps, offset);
		check_rewrite(ps, offset);
		drive(ps, offset);
	} else {
		fuzz_check(txn_pstate_count(ps) == 1 && txn_pstate_find(ps, 1), "a failed read changed the state");
	}
	txn_pstate_destroy(ps);
	if (data[0] & 2)
		recover(dir, fuzz_snap, snap_len, offset, seg, seg_len);
	return 0;
}
