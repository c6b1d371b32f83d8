/*
 * txn_limits.h - limits that txn/'s tables and dataplane/'s catalog share,
 * each named once here; the headers that use them (coord.h, group.h,
 * pstate.h, lso.h, dataplane/loop/dp_limits.h) take their names from these and
 * tie the rest to them with _Static_assert.
 *
 * Locality: pure constants, any core.
 */
#ifndef SLUICE_TXN_LIMITS_H
#define SLUICE_TXN_LIMITS_H

#define TXN_TOPIC_BYTES_MAX      249      /* Kafka's longest topic name (catalog, coordinators, offsets) */
#define TXN_TOPIC_PARTITIONS_MAX 10000    /* partitions of one topic (the catalog's limit) */
#define TXN_PARTS_MAX            10000    /* partitions in one transaction */
#define TXN_GROUP_ID_BYTES_MAX   1024     /* group ids, longer are refused (group and txn coordinators) */
#define TXN_PRODUCERS_MAX        (1u << 20) /* idempotent producers, and open transactions, per partition */

_Static_assert(TXN_PARTS_MAX >= TXN_TOPIC_PARTITIONS_MAX,
               "one transaction can write every partition of a topic");

#endif
