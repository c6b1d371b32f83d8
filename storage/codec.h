/*
 * codec.h - decompression of a produced batch's records (gzip, snappy, lz4,
 * zstd) to check them (records.h) before anything is appended. Batches are
 * still stored and served as sent; this only decides whether they are fit to.
 *
 * Locality: one struct st_codec per NIC core, created at start-up (init only)
 * and then used only by that core; every buffer and every codec state is
 * allocated by st_codec_create, so a check never calls malloc.
 *
 * Kafka's wire formats of the records section (after the 61-byte header):
 *
 *   codec   attributes & 7  format
 *   ------  --------------  -------------------------------------------------------
 *   gzip    1               gzip members (RFC 1952); bytes after the last member
 *                           that do not start another are ignored (as Java's
 *                           GZIPInputStream and librdkafka do)
 *   snappy  2               Xerial framing: "\x82SNAPPY\0", int32 version,
 *                           int32 compatible version, then blocks of int32 BE
 *                           length + raw snappy; or one raw snappy block
 *                           (librdkafka and kafkajs send raw; Java's client
 *                           sends Xerial; Kafka reads both)
 *   lz4     3               one LZ4 frame (KIP-57: header checksum correct);
 *                           bytes after it are ignored, as Kafka's reader does
 *   zstd    4               zstd frames
 *
 * Memory, per core: gzip and lz4 stream through a window of
 * ST_CODEC_WINDOW_BYTES; snappy blocks and zstd frames are decoded into a
 * scratch of ST_BATCH_DECOMPRESSED_BYTES_MAX (raw snappy has no streaming
 * form; zstd then needs no window of its own, whatever window its frame
 * declares). The records are checked as they come out, so a bad record
 * stops the work early, and no batch makes a core decompress more than
 * ST_BATCH_DECOMPRESSED_BYTES_MAX.
 */
#ifndef SLUICE_STORAGE_CODEC_H
#define SLUICE_STORAGE_CODEC_H

#include <stddef.h>
#include <stdint.h>

struct st_batch_hdr;
struct st_codec;

/*
 * Records of one batch may decompress to at most this many bytes; more is
 * refused (MESSAGE_TOO_LARGE). It bounds the scratch and the CPU that one
 * decompression bomb can take from a NIC core (a gzip member inflates ~1000x).
 * librdkafka's batch.size (uncompressed) defaults to 1 MB, Java's to 16 KiB.
 */
#define ST_BATCH_DECOMPRESSED_BYTES_MAX (32u << 20)
/* gzip and lz4 output is checked in windows of this size. */
#define ST_CODEC_WINDOW_BYTES (64u << 10)
/* An LZ4 frame's largest block (block maximum size id 7). */
#define ST_LZ4_BLOCK_BYTES_MAX (4u << 20)

/* init only: allocate one core's codec states and buffers. 0 or -ENOMEM. */
int st_codec_create(struct st_codec **out);
/* init only (teardown). NULL is fine. */
void st_codec_destroy(struct st_codec *z);

/*
 * Check the records of the batch at batch (len bytes: the whole batch, parsed
 * into h; the CRC is the caller's): decompress them if the batch is
 * compressed and run them through the records checker, decompressing at
 * most max_bytes (<= ST_BATCH_DECOMPRESSED_BYTES_MAX: the caller's budget).
 * Returns 0 if they are well-formed; -EBADMSG if the compressed stream or a
 * record is malformed, truncated or followed by extra records' bytes;
 * -EMSGSIZE if they decompress to more than max_bytes; -ENOTSUP for a codec
 * id past zstd (5..7); -ENOMEM if a codec wanted more memory than was set
 * aside (a bug in the sizing here, not the client's fault).
 * Locality: the core that owns z.
 */
int st_codec_check_batch(struct st_codec *z, const uint8_t *batch, size_t len, const struct st_batch_hdr *h,
                         uint32_t max_bytes);

/*
 * The first record of the stored batch at batch (as st_codec_check_batch's
 * arguments) whose timestamp is >= target: 0 with its offset delta and
 * timestamp (Kafka's ListOffsets by time, within the batch its time index
 * found). -ENOENT if no record reaches target (a client's maxTimestamp that
 * its records do not bear out); otherwise as st_codec_check_batch. Records
 * after the one found are neither decompressed nor read. z may be NULL for
 * an uncompressed batch (-ENOTSUP for a compressed one). Locality: the core
 * that owns z.
 */
int st_codec_find_time(struct st_codec *z, const uint8_t *batch, size_t len, const struct st_batch_hdr *h,
                       int64_t target, uint32_t max_bytes, int32_t *offset_delta, int64_t *timestamp);

/* Bytes the last st_codec_check_batch decompressed (0 for an uncompressed batch), at most its
 * max_bytes: what the check cost, for the caller's budget. Locality: owner of z. */
uint64_t st_codec_last_bytes(const struct st_codec *z);

#endif
