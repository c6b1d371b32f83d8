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
 * Uses the fastest implementation below that the CPU runs (checked once at
 * start-up). Locality: any.
 */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/* The portable table implementation, exposed so tests can compare both. Locality: any. */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);

/*
 * The implementations crc32c() chooses from, exposed so tests and
 * sluice-crc-bench can run each one. All compute the same function as crc32c().
 *   CRC32C_IMPL_SW      slice-by-8 tables (any CPU)
 *   CRC32C_IMPL_SSE42   one chain of SSE4.2 crc32q, 8 bytes per instruction
 *   CRC32C_IMPL_SSE42X3 three independent crc32q chains over thirds of the
 *                       buffer, joined with PCLMULQDQ (SSE4.2 + PCLMUL)
 *   CRC32C_IMPL_ISAL    ISA-L's crc32_iscsi for every length (builds with
 *                       ISA-L only)
 *   CRC32C_IMPL_ISAL_MIXED  what crc32c() does in a build with ISA-L: ISA-L
 *                       for long buffers, the chains for short ones
 */
enum crc32c_impl {
	CRC32C_IMPL_SW,
	CRC32C_IMPL_SSE42,
	CRC32C_IMPL_SSE42X3,
	CRC32C_IMPL_ISAL,
	CRC32C_IMPL_ISAL_MIXED,
	CRC32C_IMPLS
};

typedef uint32_t (*crc32c_fn)(uint32_t crc, const void *buf, size_t len);

/*
 * impl's function, or NULL when this CPU (or this build's architecture) lacks
 * what it needs. *name, when name is not NULL, gets impl's short name either
 * way. Locality: any.
 */
crc32c_fn crc32c_impl_get(enum crc32c_impl impl, const char **name);

/* The implementation crc32c() uses on this CPU. Locality: any. */
enum crc32c_impl crc32c_impl_chosen(void);

#endif
