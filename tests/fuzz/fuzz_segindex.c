/*
 * fuzz_segindex.c - libFuzzer target for a sealed segment's offset index file
 * (storage/log.c index_load: DIR/<base>.index, trusted at open instead of a
 * scan when scan_sealed is off, as for every data partition) and the readers
 * that then go by it (st_log_locate, st_log_scan, st_log_read_batches,
 * st_log_offset_for_time).
 *
 * Input: byte 0 the mode (bit 0: keep the index's CRC as it is, else it is
 * fixed so mutations reach the fields behind it; bit 1: no time index, else
 * one that agrees with the index's header, every entry its max_timestamp, so
 * that the index is trusted and lookups by time go by both), bytes 1..2 the index
 * file's length L (big-endian, cut to what is there), then L bytes of index,
 * and the rest the sealed segment at base 0 (each batch's CRC fixed in the
 * same mode). The active segment, empty, starts where the index says the
 * sealed one ends (when that is an offset), so a lying index is believed.
 *
 * What must hold whatever the bytes: open fails only as damage or for
 * memory; the readers never crash, never hand over anything but whole
 * batches, a scan in increasing offsets (CRCs and a batch's own offsets are
 * not checked in a segment the index vouches for: it is not scanned), and
 * answer a locate with a range inside the segment or an error; and close
 * leaves files that open again.
 * Locality: the fuzzer's thread.
 */
#include "fuzz_log.h"
#include "log_internal.h"   /* the time index's layout */

#define FUZZ_LOCATES_MAX 64   /* offsets located per input */
#define FUZZ_INDEX_HEADER_BYTES 48   /* storage/log_internal.h ST_INDEX_HEADER_BYTES */

static uint8_t fuzz_copy[FUZZ_INPUT_BYTES_MAX], fuzz_index[FUZZ_INPUT_BYTES_MAX];
static uint8_t fuzz_tindex[ST_TINDEX_HEADER_BYTES + FUZZ_INPUT_BYTES_MAX];

/* A time index (log_internal.h) for the index in fuzz_index[0, ilen): its entry count, each entry
 * the index's max_timestamp. Returns its length. */
static size_t fuzz_tindex_for(size_t ilen, size_t seg_len)
{
	uint32_t n = (uint32_t)((ilen - FUZZ_INDEX_HEADER_BYTES) / 8);
	size_t len = ST_TINDEX_HEADER_BYTES + (size_t)n * ST_TINDEX_ENTRY_BYTES;
	st_put_be32(fuzz_tindex, ST_TINDEX_MAGIC);
	st_put_be32(fuzz_tindex + 4, ST_TINDEX_VERSION);
	st_put_be64(fuzz_tindex + 8, 0);
	st_put_be64(fuzz_tindex + 16, seg_len);
	st_put_be32(fuzz_tindex + 24, n);
	for (uint32_t i = 0; i < n; i++)
		memcpy(fuzz_tindex + ST_TINDEX_HEADER_BYTES + 8 * i, fuzz_index + 32, 8);
	st_put_be32(fuzz_tindex + 28, crc32c(crc32c(0, fuzz_tindex, 28), fuzz_tindex + ST_TINDEX_HEADER_BYTES,
	                                     len - ST_TINDEX_HEADER_BYTES));
	return len;
}

struct walk {
	int64_t next;   /* every batch handed over starts at or after this */
};

static int batch_cb(void *arg, const uint8_t *b, size_t len, const struct st_batch_hdr *h)
{
	struct st_batch_hdr again;
	(void)arg;
	(void)h;
	fuzz_check(st_batch_parse(b, len, &again) == (int)len, "read_batches handed over a part of a batch");
	/* No CRC or order check: a sealed segment its index vouches for is not scanned at open
	 * (the data partitions' trade of start-up time, as Kafka's recovery point), so damage in it
	 * (a batch claiming more offsets than it holds: the next locate starts behind it) is found
	 * by the reader that checks (a client); the internal logs, which read_batches serves, scan
	 * every segment at open. */
	return 0;
}

static int scan_cb(void *arg, const struct st_batch_hdr *h, const uint8_t *raw, size_t raw_len)
{
	struct walk *w = arg;
	(void)raw;
	fuzz_check(h->base_offset >= w->next && raw_len >= ST_BATCH_HEADER_BYTES, "scan went backwards");
	w->next = h->base_offset + h->last_offset_delta + 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char dir[FUZZ_PATH_BYTES];
	char path[FUZZ_PATH_BYTES + 32];
	if (size < 3 || size - 3 > sizeof(fuzz_copy))
		return 0;
	if (!dir[0])
		fuzz_dir(dir, "segindex");
	size_t ilen = st_be16(data + 1), n = size - 3;
	if (ilen > n)
		ilen = n;
	memcpy(fuzz_index, data + 3, ilen);
	const uint8_t *seg = data + 3 + ilen;
	size_t seg_len = n - ilen;
	if (!(data[0] & 1)) {
		if (ilen >= FUZZ_INDEX_HEADER_BYTES)
			st_put_be32(fuzz_index + 44, crc32c(crc32c(0, fuzz_index, 44), fuzz_index + FUZZ_INDEX_HEADER_BYTES,
			                                    ilen - FUZZ_INDEX_HEADER_BYTES));
		fuzz_fix_crcs(seg, seg_len, fuzz_copy);
		seg = fuzz_copy;
	}
	int64_t active = ilen >= FUZZ_INDEX_HEADER_BYTES ? (int64_t)st_be64(fuzz_index + 24) : 0;
	if (active < 0 || active > INT64_MAX / 2)
		active = 0;

	fuzz_rm_dir(dir);
	fuzz_check(mkdir(dir, 0755) == 0, "cannot make the scratch directory");
	snprintf(path, sizeof(path), "%s/%020d.log", dir, 0);
	fuzz_write_file(path, seg, seg_len);
	snprintf(path, sizeof(path), "%s/%020d.index", dir, 0);
	fuzz_write_file(path, fuzz_index, ilen);
	if (!(data[0] & 2) && ilen >= FUZZ_INDEX_HEADER_BYTES) {
		snprintf(path, sizeof(path), "%s/%020d.timeindex", dir, 0);
		fuzz_write_file(path, fuzz_tindex, fuzz_tindex_for(ilen, seg_len));
	}
	snprintf(path, sizeof(path), "%s/%020" PRId64 ".log", dir, active);
	if (active != 0)
		fuzz_write_file(path, NULL, 0);

	struct st_log_config cfg = { .segment_bytes = 1u << 20, .retention_bytes = -1, .retention_ms = -1,
	                             .index_interval_bytes = 256 };
	struct st_log *log;
	int rc = st_log_open(fuzz_io(), dir, &cfg, &log);
	if (rc == 0) {
		int64_t start = st_log_start_offset(log), end = st_log_end_offset(log);
		fuzz_check(start >= 0 && end >= start, "start and end out of order");
		struct walk w = { .next = start };
		rc = st_log_read_batches(log, batch_cb, &w);
		fuzz_check(rc == 0 || rc == -EBADMSG || rc == -EIO || rc == -EFBIG, "odd error from st_log_read_batches");
		w.next = start;
		rc = st_log_scan(log, start, scan_cb, &w);
		fuzz_check(rc == 0 || rc == -EBADMSG || rc == -EIO, "odd error from st_log_scan");
		int64_t step = (end - start) / FUZZ_LOCATES_MAX + 1;
		for (int64_t o = start; o < end; o += step) {
			int fd;
			uint64_t pos;
			uint32_t len;
			rc = st_log_locate(log, o, end, 4096, &fd, &pos, &len);
			fuzz_check(rc == 0 || rc == -EBADMSG || rc == -EIO, "odd error from st_log_locate");
			fuzz_check(rc != 0 || len == 0 || pos + len <= seg_len || active != 0, "a located range past the data");
		}
		int64_t ts[] = { INT64_MIN, -1, 0, ilen >= FUZZ_INDEX_HEADER_BYTES ? (int64_t)st_be64(fuzz_index + 32) : 1,
		                 INT64_MAX };
		for (size_t k = 0; k < sizeof(ts) / sizeof(ts[0]); k++) {
			int64_t off = st_log_offset_for_time(log, ts[k]);
			fuzz_check(off >= start && off <= end, "a lookup by time outside the log");
		}
		st_log_close(log);
		/* What the first open left opens again (the index may have been replaced or dropped). */
		rc = st_log_open(fuzz_io(), dir, &cfg, &log);
		fuzz_check(rc == 0 || rc == -EBADMSG, "a log that opened does not open again");
		if (rc == 0)
			st_log_close(log);
	} else {
		fuzz_check(rc == -EBADMSG || rc == -ENOMEM, "odd error from st_log_open");
	}
	fuzz_rm_dir(dir);
	return 0;
}
