/*
 * pidfile.h - the __producer_ids file's bytes (its layout is in pid.c's
 * header comment): encode, and a pure decode that trusts nothing in them,
 * so a fuzzer runs it alone (tests/fuzz/fuzz_pidfile.c). Locality: any
 * thread (pure); pid.c uses it on the control core.
 */
#ifndef SLUICE_DP_PIDFILE_H
#define SLUICE_DP_PIDFILE_H

#include <stddef.h>
#include <stdint.h>

#define DP_PID_FILE_BYTES 16
#define DP_PID_BLOCK 1000     /* ids recorded per write */
/*
 * The largest block end the file may hold. Ids are int64 and -1 means none,
 * so none is negative; a block past this would overflow. Kafka's id manager
 * stops the same way ("exhausted all producer ids") instead of wrapping.
 */
#define DP_PID_END_MAX (INT64_MAX - DP_PID_BLOCK)

void dp_pid_file_encode(uint8_t b[DP_PID_FILE_BYTES], int64_t end);
/*
 * Pure: the next block start the file's n bytes record. 0 and *end;
 * -EBADMSG when they are not exactly one record (length, magic, CRC);
 * -ERANGE when the CRC is good but the value is no block end the broker
 * writes (negative, or past DP_PID_END_MAX): taking it would hand out
 * negative ids or overflow.
 */
int dp_pid_file_decode(const uint8_t *b, size_t n, int64_t *end);
/* Pure: the block end to record after end, or -1 when none fits below DP_PID_END_MAX (ids exhausted). */
int64_t dp_pid_next_block(int64_t end);

#endif
