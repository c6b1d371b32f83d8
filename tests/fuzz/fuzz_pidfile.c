/* fuzz_pidfile.c: libFuzzer target for the __producer_ids file's decode
 * (dataplane/control/pidfile.c dp_pid_file_decode, as dp_pid_init reads the
 * file at start-up) and the block arithmetic behind it (dp_pid_next_block).
 * Input: byte 0 the mode (bit 0: keep the CRC as it is, else it is fixed in a
 * copy so that mutations reach the value behind it), then the file's bytes.
 * Beyond "no crash": a file that decodes is exactly the record the broker
 * writes for that value (one spelling), its value is a block end the broker
 * could have written (0..DP_PID_END_MAX: no negative id, no overflow), the
 * block after it is past it and fits, and what the broker writes for that
 * block decodes back to it (what it writes it can read at the next start). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "pidfile.h"

#define FUZZ_PIDFILE_BYTES_MAX 64

static void fuzz_check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_pidfile: %s\n", what);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t b[FUZZ_PIDFILE_BYTES_MAX], w[DP_PID_FILE_BYTES];
	if (size < 1 || size - 1 > sizeof(b))
		return 0;
	size_t n = size - 1;
	memcpy(b, data + 1, n);
	if (!(data[0] & 1) && n >= DP_PID_FILE_BYTES) {
		uint32_t crc = crc32c(0, b, 12);
		b[12] = (uint8_t)(crc >> 24), b[13] = (uint8_t)(crc >> 16), b[14] = (uint8_t)(crc >> 8), b[15] = (uint8_t)crc;
	}
	int64_t end = -2;
	int rc = dp_pid_file_decode(b, n, &end);
	fuzz_check(rc == 0 || rc == -EBADMSG || rc == -ERANGE, "odd error from dp_pid_file_decode");
	if (rc < 0) {
		fuzz_check(end == -2, "a refused file set the block end");
		if (rc == -ERANGE)
			fuzz_check(n == DP_PID_FILE_BYTES && !memcmp(b, "SLPI", 4), "ERANGE for bytes that are no record");
		return 0;
	}
	fuzz_check(n == DP_PID_FILE_BYTES, "a file of the wrong length decoded");
	fuzz_check(end >= 0 && end <= DP_PID_END_MAX, "a block end the broker never writes was taken");
	dp_pid_file_encode(w, end);
	fuzz_check(!memcmp(w, b, DP_PID_FILE_BYTES), "a decoded file is not the record written for its value");
	int64_t next = dp_pid_next_block(end);
	if (next < 0) {
		fuzz_check(end > DP_PID_END_MAX - DP_PID_BLOCK, "ids exhausted below the limit");
		return 0;
	}
	fuzz_check(next == end + DP_PID_BLOCK && next <= DP_PID_END_MAX, "the next block is not one block on");
	int64_t back = -2;
	dp_pid_file_encode(w, next);
	fuzz_check(dp_pid_file_decode(w, sizeof(w), &back) == 0 && back == next,
	           "the record written for the next block does not decode back");
	return 0;
}
