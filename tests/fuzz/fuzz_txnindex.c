/*
 * fuzz_txnindex.c - libFuzzer target for the aborted-transaction index parser
 * (txn/lso.c: txn_lso_open_index, its torn/damaged/rebuild decisions).
 *
 * Input: bytes 0..7 the log end (big-endian, masked to >= 0), the rest is the
 * file DIR/aborted.txnindex. Each run opens it and checks what must hold
 * whatever the bytes: the entries loaded are ordered with first < last < log
 * end; a damaged file loads nothing and asks for a rebuild; after the rebuild
 * (or the cut of a torn tail) a second open trusts the file and loads the same
 * entries. Locality: the fuzzer's thread.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "lso.h"

#define FUZZ_PATH_BYTES 256
#define FUZZ_ENTRIES_MAX 4096  /* inputs are small: more is never loaded */

static struct txn_aborted got[FUZZ_ENTRIES_MAX + 1], again[FUZZ_ENTRIES_MAX + 1];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char dir[FUZZ_PATH_BYTES], path[FUZZ_PATH_BYTES + 32];
	const char *tmp = getenv("TMPDIR");

	if (size < 8)
		return 0;
	int64_t log_end = (int64_t)(st_be64(data) & INT64_MAX);
	snprintf(dir, sizeof(dir), "%s/fuzz_txnindex.%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp ? tmp : "/tmp",
	         (int)getpid());
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/aborted.txnindex", dir);
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0 || (size > 8 && write(fd, data + 8, size - 8) != (ssize_t)(size - 8)))
		abort();
	close(fd);

	struct txn_lso *l;
	if (txn_lso_create(&l) < 0 || txn_lso_open_index(l, dir, log_end) < 0)
		abort();
	uint32_t n = txn_lso_aborted(l, 0, INT64_MAX, got, FUZZ_ENTRIES_MAX);
	if (n > FUZZ_ENTRIES_MAX)
		abort();
	if (txn_lso_needs_rebuild(l)) {
		if (n != 0 || txn_lso_last_marker(l) != -1 || txn_lso_sync(l) == 0)
			abort();
		/* As recovery would from the log: one abort below the end, then the file is replaced. */
		if (log_end > 1) {
			if (txn_lso_begin(l, 7, 0) < 0 || txn_lso_end(l, 7, log_end - 1, true) < 0)
				abort();
		}
		if (txn_lso_rebuilt(l) < 0)
			abort();
		n = txn_lso_aborted(l, 0, INT64_MAX, got, FUZZ_ENTRIES_MAX);
	}
	for (uint32_t i = 0; i < n; i++)
		if (got[i].pid < 0 || got[i].first_offset < 0 || got[i].first_offset >= got[i].last_offset ||
		    got[i].last_offset >= log_end || (i && got[i - 1].last_offset >= got[i].last_offset))
			abort();
	if (txn_lso_sync(l) != 0)
		abort();
	txn_lso_destroy(l);
	/* What the first open left is trusted as is, with the same entries. */
	if (txn_lso_create(&l) < 0 || txn_lso_open_index(l, dir, log_end) < 0 || txn_lso_needs_rebuild(l))
		abort();
	if (txn_lso_aborted(l, 0, INT64_MAX, again, FUZZ_ENTRIES_MAX) != n || memcmp(got, again, n * sizeof(*got)))
		abort();
	txn_lso_destroy(l);
	unlink(path);
	return 0;
}
