/* fuzz_batch_seeds.c: writes the seed corpus of fuzz_batch into DIR: Records
 * bytes as a Produce partition carries them: one batch, two batches back to
 * back, a transactional batch followed by its COMMIT marker, an ABORT marker
 * alone, and a batch with keys, values and nulls. Locality: a tool, run once
 * per fuzzing session. */
#include "batch.h"

#include <stdio.h>
#include <stdlib.h>

static uint8_t buf[4096];

static void put(const char *dir, const char *name, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static size_t one(size_t at, int16_t attributes, int64_t pid, int32_t seq, int32_t key_len, int32_t value_len)
{
	int n = st_batch_build(buf + at, sizeof(buf) - at, attributes, pid, pid < 0 ? -1 : 0, seq, 1700000000000,
	                       "key", key_len, "value-bytes", value_len);
	if (n < 0) {
		fprintf(stderr, "fuzz_batch_seeds: st_batch_build: %d\n", n);
		exit(1);
	}
	return at + (size_t)n;
}

static size_t marker(size_t at, bool commit)
{
	int n = st_batch_build_marker(buf + at, sizeof(buf) - at, 7, 0, commit, 0, 1700000000000);
	if (n < 0)
		exit(1);
	return at + (size_t)n;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_batch_seeds DIR\n");
		return 2;
	}
	const char *dir = argv[1];
	put(dir, "one", one(0, 0, -1, -1, 3, 11));
	put(dir, "two", one(one(0, 0, 5, 0, -1, 11), 0, 5, 1, 3, -1));
	put(dir, "txn-commit", marker(one(0, ST_BATCH_ATTR_TRANSACTIONAL, 7, 0, 3, 11), true));
	put(dir, "abort", marker(0, false));
	put(dir, "empty-value", one(0, 0, -1, -1, 0, 0));
	return 0;
}
