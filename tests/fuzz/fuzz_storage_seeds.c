/*
 * fuzz_storage_seeds.c - writes seed inputs for fuzz_recovery and
 * fuzz_txnindex into two directories: well-formed segments (split into a
 * sealed and an active one at several points, with and without scan_sealed)
 * and well-formed aborted-index files, so that the fuzzers start from what
 * the broker writes and mutate it into damage.
 *
 *   fuzz_storage_seeds RECOVERY_DIR TXNINDEX_DIR
 * Locality: a standalone process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "crc32c.h"
#include "ut_batch.h"

#define SEED_BATCHES 12
#define SEED_BATCH_BYTES 512

static void put(const char *dir, const char *name, const uint8_t *p, size_t n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n)
		exit(2);
	fclose(f);
}

int main(int argc, char **argv)
{
	static uint8_t seg[1 + SEED_BATCHES * SEED_BATCH_BYTES], idx[8 + 8 + 64 * 28];
	size_t n = 1;
	int64_t next = 0;

	if (argc != 3)
		return 2;
	for (int i = 0; i < SEED_BATCHES; i++) {
		int recs = 1 + i % 3;
		uint32_t len = ut_batch(seg + n, SEED_BATCH_BYTES,
		                        &(struct ut_batch_spec){ .records = recs, .first_ts = 1000 + i, .value_len = 20 + 7 * i });
		st_batch_set_base_offset(seg + n, next);
		next += recs;
		n += len;
	}
	const uint8_t layouts[] = { 0x00, 0x01, 0x40, 0x41, 0x80, 0x81, 0xfe, 0xff };
	for (size_t k = 0; k < sizeof(layouts); k++) {
		char name[32];
		seg[0] = layouts[k];
		snprintf(name, sizeof(name), "seg-%02x", layouts[k]);
		put(argv[1], name, seg, n);
	}
	for (int entries = 0; entries <= 64; entries += 16) {
		size_t m = 0;
		st_put_be64(idx, 100000);
		m = 8;
		st_put_be32(idx + m, 0x534c5441u); /* "SLTA", version 1, 28-byte entries: txn/lso.c */
		st_put_be16(idx + m + 4, 1);
		st_put_be16(idx + m + 6, 28);
		m += 8;
		for (int i = 0; i < entries; i++, m += 28) {
			st_put_be64(idx + m, (uint64_t)(1000 + i % 5));
			st_put_be64(idx + m + 8, (uint64_t)(10 * i));
			st_put_be64(idx + m + 16, (uint64_t)(10 * i + 5));
			st_put_be32(idx + m + 24, crc32c(0, idx + m, 24));
		}
		char name[32];
		snprintf(name, sizeof(name), "idx-%02d", entries);
		put(argv[2], name, idx, m);
	}
	return 0;
}
