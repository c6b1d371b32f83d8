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
/* user_data tag of the core's SQEs for cold fetch reads (dp_shard_read_complete). */
#define DP_READ_TAG             4u        /* user_data tag of cold fetch reads (shard.c) */

#define DP_ABORTED_AT(len) (((len) + 7u) & ~7u)

/* shard.c: owner-side handlers */
void dp_shard_msg(struct dp_core *c, struct dp_msg *m);
/* Close and remove the topics whose delete waits and whose partitions are idle; returns how many. */
int  dp_shard_deletes(struct dp_core *c);
/* Returns how many owned partitions could not be opened (they stay offline). */
int  dp_shard_open_owned(struct dp_core *c, struct dp_topic *t, uint32_t id);
void dp_shard_close_topic(struct dp_core *c, struct dp_topic *t, bool delete_files);
void dp_shard_on_append(void *cookie, int status, int64_t base_offset);
void dp_shard_timer(struct dp_core *c);
/* A cold fetch read (DP_READ_TAG) completed. */
struct io_uring_cqe;
void dp_shard_read_complete(struct dp_core *c, const struct io_uring_cqe *cqe);
/* shard.c: transactions on the owner */
void dp_shard_txn_msg(struct dp_core *c, struct dp_msg *m);
void dp_shard_on_marker(void *cookie, int status);

#endif
