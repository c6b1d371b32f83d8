/*
 * read_wait.h - the FIFO of Fetch and ListOffsets requests waiting for one of
 * the core's read slots (shard/read.c): a fixed ring of cap entries allocated with
 * the slots at the shard's start (its bound: DP_READ_WAITS_MAX, dp_limits.h).
 * Pure logic, no I/O. Locality: owner core.
 */
#ifndef SLUICE_READ_WAIT_H
#define SLUICE_READ_WAIT_H

#include <stdbool.h>
#include <stdint.h>

#include "ring.h"

struct dp_core;
/* Runs a Fetch or ListOffsets again: once a warm read brought its lookup's bytes in, or a slot came free. */
typedef void (*lookup_resume_fn)(struct dp_core *c, struct dp_msg *m, unsigned warms);

struct dp_read_wait {
	struct dp_msg req;            /* the request, as it came (it holds no partition: looked up again) */
	lookup_resume_fn resume;
	uint8_t warms;                /* warm reads it waited for so far */
};

/* v[(head + i) % cap] for i < n, oldest first. */
struct dp_read_waits {
	struct dp_read_wait *v;
	uint32_t cap, head, n;
};

/* Queues w at the back: false when the queue holds cap already. */
static inline bool dp_read_wait_push(struct dp_read_waits *q, const struct dp_read_wait *w)
{
	if (q->n == q->cap)
		return false;
	q->v[(q->head + q->n) % q->cap] = *w;
	q->n++;
	return true;
}

/* Takes the oldest into *w: false when none waits. */
static inline bool dp_read_wait_pop(struct dp_read_waits *q, struct dp_read_wait *w)
{
	if (!q->n)
		return false;
	*w = q->v[q->head];
	q->head = (q->head + 1) % q->cap;
	q->n--;
	return true;
}

#endif
