/*
 * sb_digest.h: the record digest of sluice-bench, shared by sluice_bench (what
 * the producer had acknowledged, what the consumer read) and sluice-rdk-verify
 * (what librdkafka reads back), so that the three can be compared.
 *
 * The digest of a set of records is the sum, mod 2^64, of one hash per record,
 * so it does not depend on the order in which partitions are read. A record's
 * hash covers its partition, its value and its key (when not null); the offset
 * is left out on purpose, because the producer never learns the offsets of a
 * batch that a retry placed twice, and because offsets differ between topics.
 * sluice-bench makes every value unique (it embeds the connection, the
 * partition and a per-(connection, partition) counter), so a lost, duplicated
 * or altered record changes the sum.
 */
#ifndef SLUICE_BENCH_SB_DIGEST_H
#define SLUICE_BENCH_SB_DIGEST_H

#include <stdint.h>
#include <xxhash.h>

/* Hash of one record; key_len or value_len -1 means null. Locality: any. */
static inline uint64_t sb_digest_record(int32_t partition, const void *key, int32_t key_len, const void *value,
					int32_t value_len)
{
	uint64_t seed = (uint64_t)(uint32_t)partition;
	uint64_t h = value_len >= 0 ? XXH3_64bits_withSeed(value, (size_t)value_len, seed) : seed * 0x9e3779b97f4a7c15u;
	if (key_len >= 0)
		h += XXH3_64bits_withSeed(key, (size_t)key_len, ~seed);
	return h;
}

#endif
