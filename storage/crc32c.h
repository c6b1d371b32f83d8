/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of Kafka RecordBatch v2.
 *
 * Locality: any (pure function, no state after start-up).
 */
#ifndef SLUICE_STORAGE_CRC32C_H
#define SLUICE_STORAGE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * Continue a CRC-32C over buf. Start with crc = 0; the initial and final
 * inversions are done inside, so crc32c(crc32c(0, a), b) == crc32c(0, a||b).
 * Check value: crc32c(0, "123456789", 9) == 0xE3069283.
 * Uses the SSE4.2 crc32 instruction when the CPU has it (checked at run time).
 * Locality: any.
 */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/* The portable table implementation, exposed so tests can compare both. Locality: any. */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);

#endif
