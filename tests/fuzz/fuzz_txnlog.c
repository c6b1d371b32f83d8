/*
 * fuzz_txnlog.c - libFuzzer target for the transaction coordinator's log
 * (__transaction_state): the record decode (txn/coord.c txn_meta_decode,
 * under txn_coord_apply_batch) and the start-up replay that applies the
 * whole log in order (dataplane/txncoord.c load_batch).
 *
 * Input: byte 0 the mode (bit 0: keep the CRCs as they are, else each
 * batch's is fixed so mutations reach the records; bit 1: replay through a
 * log on disk, as the broker does, else straight from memory), the rest the
 * log's bytes: one record batch after another, each record key = a
 * transactional id, value = txn_meta_encode or null (the id is gone).
 *
 * What must hold whatever the bytes: replay never crashes or fails but for
 * memory; every entry it leaves is one the coordinator can run with (a
 * state of Kafka's table, partitions and groups within their limits, names
 * within theirs); and writing each entry back as compaction does (one
 * record per id, txn_meta_encode) and replaying that gives the same table,
 * byte for byte, with the same ids.
 * Locality: the fuzzer's thread.
 */
#include "coord.h"
#include "fuzz_log.h"

static uint8_t fuzz_copy[FUZZ_INPUT_BYTES_MAX];
static uint8_t fuzz_val[1u << 20], fuzz_val2[1u << 20], fuzz_batch[(1u << 20) + 4096];

static int load_batch(void *arg, const uint8_t *batch, size_t len, const struct st_batch_hdr *h)
{
	(void)h;
	int rc = txn_coord_apply_batch(arg, batch, len);
	fuzz_check(rc == 0 || rc == -EBADMSG || rc == -ENOMEM, "odd error from txn_coord_apply_batch");
	return rc == -ENOMEM ? rc : 0;   /* as load_batch: damage is skipped, memory stops the start */
}

/* An entry the driver can run with: what dp_txnc_start and the handlers assume of a loaded one. */
static void check_meta(const struct txn_meta *m)
{
	fuzz_check(m->state <= TXN_PREPARE_EPOCH_FENCE, "a state outside Kafka's table");
	fuzz_check(m->id_len > 0 && m->id_len <= TXN_ID_BYTES_MAX && m->id[m->id_len] == 0, "an id out of bounds");
	fuzz_check(m->ntps <= TXN_PARTS_MAX && m->ntps <= m->tps_cap && (m->ntps == 0 || m->tps),
	           "partitions beyond their limit");
	fuzz_check(m->ngroups <= TXN_GROUPS_MAX && m->ngroups <= m->groups_cap && (m->ngroups == 0 || m->groups),
	           "groups beyond their limit");
	for (uint32_t i = 0; i < m->ntps; i++) {
		fuzz_check(m->tps[i].topic_len <= TXN_TOPIC_BYTES_MAX && m->tps[i].topic[m->tps[i].topic_len] == 0,
		           "a topic name out of bounds");
		for (uint32_t j = 0; j < i; j++)
			fuzz_check(m->tps[j].partition != m->tps[i].partition ||
			           m->tps[j].topic_len != m->tps[i].topic_len ||
			           memcmp(m->tps[j].topic, m->tps[i].topic, m->tps[i].topic_len),
			           "a partition twice in one transaction");
	}
	for (uint32_t i = 0; i < m->ngroups; i++)
		fuzz_check(m->groups[i].len <= TXN_GROUP_BYTES_MAX, "a group name out of bounds");
	fuzz_check(!txn_busy(m) && m->writes == 0 && !m->has_queued && !m->retry_listed, "driver state restored");
}

/* Compaction's rewrite: each entry as one record; replayed into a fresh table it must come back the same. */
static void check_rewrite(struct txn_coord *c)
{
	struct txn_coord *c2;
	uint32_t cur = 0;
	struct txn_meta *m;
	fuzz_check(txn_coord_create(&c2) == 0, "txn_coord_create");
	while ((m = txn_coord_next(c, &cur))) {
		check_meta(m);
		size_t vn = txn_meta_value_size(m);
		fuzz_check(vn <= sizeof(fuzz_val) && txn_meta_encode(m, fuzz_val, sizeof(fuzz_val)) == (int)vn,
		           "txn_meta_encode of a loaded entry");
		int bn = st_batch_build(fuzz_batch, sizeof(fuzz_batch), 0, -1, -1, -1, m->update_ms, m->id, m->id_len,
		                        fuzz_val, (int32_t)vn);
		fuzz_check(bn > 0, "st_batch_build of a loaded entry");
		int rc = txn_coord_apply_batch(c2, fuzz_batch, (size_t)bn);
		if (rc == -ENOMEM)
			break;
		fuzz_check(rc == 0, "a rewritten entry does not replay");
		struct txn_meta *m2 = txn_coord_find(c2, m->id, m->id_len);
		fuzz_check(m2 != NULL, "a rewritten entry is not found");
		fuzz_check(txn_meta_value_size(m2) == vn && txn_meta_encode(m2, fuzz_val2, sizeof(fuzz_val2)) == (int)vn &&
		           memcmp(fuzz_val, fuzz_val2, vn) == 0, "a rewritten entry replays to another");
	}
	fuzz_check(m != NULL || txn_coord_count(c2) == txn_coord_count(c), "the rewrite holds other ids");
	txn_coord_destroy(c2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char dir[FUZZ_PATH_BYTES];
	if (size < 1 || size - 1 > sizeof(fuzz_copy))
		return 0;
	if (!dir[0])
		fuzz_dir(dir, "txnlog");
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	if (!(data[0] & 1)) {
		fuzz_fix_crcs(p, n, fuzz_copy);
		p = fuzz_copy;
	}
	struct txn_coord *c;
	fuzz_check(txn_coord_create(&c) == 0, "txn_coord_create");
	int rc = fuzz_replay(dir, p, n, data[0] & 2, load_batch, c);
	fuzz_check(rc == 0 || rc == -ENOMEM, "the replay failed");
	if (rc == 0)
		check_rewrite(c);
	txn_coord_destroy(c);
	return 0;
}
