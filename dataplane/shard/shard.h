/*
 * shard.h - the owner side (dataplane/shard/), what other roles and the
 * loop may call. Locality: owner core (a data core, for the partitions that
 * hash to it). Other roles reach it only by messages; what they share is the
 * message layout (loop.h) and the fetch buffer's (DP_ABORTED_AT).
 */
#ifndef SLUICE_DP_SHARD_H
#define SLUICE_DP_SHARD_H

#include "loop.h"
#include "kwire.h"
#include "kmsg.h"   /* owners fill the Fetch and DescribeProducers answers' entries */

/* Fetch buffers: where the aborted-transaction list starts after len bytes of records (layout: shard.c). */
#define DP_ABORTED_AT(len) (((len) + 7u) & ~7u)

/* shard_role.c: main.c gives it to every data core (dp_core_add_role). */
extern const struct dp_role dp_shard_role;

/* shard.c: owner-side handlers */
void dp_shard_msg(struct dp_core *c, struct dp_msg *m);
/* shard.c: transactions on the owner */
void dp_shard_txn_msg(struct dp_core *c, struct dp_msg *m);

#endif
