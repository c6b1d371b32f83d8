/*
 * partition.c - the partitions a core owns: producer-state recovery and
 * snapshots, opening and closing them, a failed log's offline state and its
 * probes, the shard timer (retention, snapshots, expiry), and topic deletes
 * waiting for their partitions' I/O. Moved from shard.c unchanged.
 * Locality: shard core (owner).
 */
#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>
#include <liburing.h>

#include "batch.h"
#include "kerr.h"
#include "log.h"
#include "lso.h"
#include "pstate.h"
#include "shard_internal.h"
#include "trash.h"

static int recover_producers(struct dp_part *p)
{
	const struct dp_config *cfg = &dp_core_self()->b->cfg;
	struct txn_arena *pool = dp_core_self()->txn_arena;   /* the core's pool: tables grow in it */
	int rc = txn_pstate_create_in(&p->ps, pool);
	if (rc == 0 && cfg->test_producers_max)
		txn_pstate_set_limit(p->ps, cfg->test_producers_max);
	if (rc == 0 && (rc = txn_lso_create_in(&p->lso, pool)) == 0 && cfg->test_txn_open_max)
		txn_lso_set_limits(p->lso, cfg->test_txn_open_max, 0);
	if (rc == 0)
		rc = txn_lso_open_index(p->lso, p->dir, st_log_end_offset(p->log));
	if (rc == 0 && (rc = txn_pstate_recover(p->ps, p->lso, p->log, p->dir, &p->snap_offset)) == 0)
		txn_lso_attach_io(p->lso, dp_core_self()->io, st_log_dirfd(p->log));   /* its writes: io_uring from now on */
	if (p->ps && txn_pstate_evicted(p->ps))
		DP_WARN("partition %s: %llu idle producers dropped at recovery, oldest first: more than its table "
		        "holds (--txn-state-mib, or the producers limit); their deduplication is lost as after expiry",
		        p->dir, (unsigned long long)txn_pstate_evicted(p->ps));
	if (rc == -ENOBUFS || rc == -ENOSPC)
		DP_WARN("partition %s: its open or aborted transactions do not fit this core's state pool: not opened "
		        "(raise --txn-state-mib)", p->dir);
	return rc;
}

/* A partition's state is in a write on the core's io_uring: it is not freed or replaced meanwhile. */
static bool part_files_busy(const struct dp_part *p)
{
	return (p->ps && txn_pstate_snapshot_busy(p->ps)) || (p->lso && txn_lso_busy(p->lso));
}

static void snapshot_written(void *arg, int status, int64_t offset)
{
	struct dp_part *p = arg;
	assert(dp_core_self()->snaps_inflight > 0);
	dp_core_self()->snaps_inflight--;
	if (status == 0)
		p->snap_offset = offset;   /* failures are logged by pstate; the next interval tries again */
}

/* The periodic snapshot, written through the core's io_uring (txn_pstate_snapshot_start): the timer
 * never waits for the disk. One per partition and round; due until it could start, at most
 * DP_SNAPSHOTS_INFLIGHT_MAX at a time on the core. */
static void snapshot_producers_async(struct dp_core *c, struct dp_part *p)
{
	int64_t end = st_log_end_offset(p->log);
	int fd;
	if (txn_pstate_snapshot_busy(p->ps) || c->snaps_inflight >= DP_SNAPSHOTS_INFLIGHT_MAX)
		return;   /* the last one is still being written, or the core's writes are all taken */
	if (txn_lso_sync_fd(p->lso, &fd) == -EAGAIN)
		return;   /* aborts still being appended: an fdatasync now would not cover them */
	/* A marker still in flight (or failed with its log) has closed its transaction in the
	 * producer state but not in the index (dp_shard_on_marker): a snapshot encoded now would
	 * hold an abort the index lacks. Still due: the next timer tries again. */
	if (p->markers_writing || st_log_failed(p->log))
		return;
	p->snap_due = false;
	txn_pstate_expire(p->ps, dp_wall_ms(), c->b->cfg.producer_expiration_ms);
	if (end == p->snap_offset || txn_lso_sync_fd(p->lso, &fd) < 0)
		return;   /* nothing new; or the index cannot be made durable: no snapshot past its aborts */
	/* Every abort below the snapshot's offset must be on disk before the snapshot is: fd first. */
	int rc = txn_pstate_snapshot_start(p->ps, c->io, st_log_dirfd(p->log), end, fd, snapshot_written, p);
	if (rc == 0)
		c->snaps_inflight++;
	else
		DP_WARN_RL("producer snapshot at %lld not started: %s (its buffer comes from the core's "
		           "--txn-state-mib pool; the next round tries again)", (long long)end, strerror(-rc));
}

/* Synchronous: clean shutdown only (the loop has stopped; nothing else waits for this core). */
static void snapshot_producers(struct dp_core *c, struct dp_part *p)
{
	int64_t end = st_log_end_offset(p->log);
	txn_pstate_expire(p->ps, dp_wall_ms(), c->b->cfg.producer_expiration_ms);
	/* A marker still in flight (or failed with its log) has closed its transaction in the
	 * producer state but not in the index (dp_shard_on_marker): a snapshot now would hold an
	 * abort the index lacks. */
	if (end == p->snap_offset || p->markers_writing || st_log_failed(p->log))
		return;
	/* Every abort below the snapshot's offset must be on disk before the snapshot is. */
	if (txn_lso_sync(p->lso) < 0)
		return;
	if (txn_pstate_snapshot_save(p->ps, p->dir, end) == 0)
		p->snap_offset = end;
}

/* Forget what recover_producers built (before it runs again). */
static void part_drop_recovery(struct dp_part *p)
{
	if (p->ps)
		txn_pstate_destroy(p->ps);
	if (p->lso) {
		txn_lso_close_index(p->lso);
		txn_lso_destroy(p->lso);
	}
	p->ps = NULL;
	p->lso = NULL;
}

static void part_free(struct dp_core *c, struct dp_part *p)
{
	part_drop_recovery(p);
	dp_shard_allow_clear(c, p);
	free(p->dir);
	free(p);
}

/* A partition's log: the broker's flags, with what its topic's configs set instead (tc NULL: none).
 * A topic's segment.bytes is at most the flag's (topicconf.c), which the memory budget is sized by. */
static struct st_log_config part_log_config(const struct dp_config *cfg, const struct dp_topic_conf *tc)
{
	struct st_log_config lc = {
		.segment_bytes = cfg->segment_bytes,
		.retention_bytes = cfg->retention_bytes,
		.retention_ms = cfg->retention_ms,
		.index_interval_bytes = 4096,
	};
	if (tc && (tc->set & DP_TC_SEGMENT_BYTES) && tc->segment_bytes <= cfg->segment_bytes)
		lc.segment_bytes = tc->segment_bytes;
	if (tc && (tc->set & DP_TC_RETENTION_BYTES))
		lc.retention_bytes = tc->retention_bytes;
	if (tc && (tc->set & DP_TC_RETENTION_MS))
		lc.retention_ms = tc->retention_ms;
	return lc;
}

/*
 * An allowance beside the structures' own sizes: malloc's chunk headers and
 * the part-used pages between a partition's dozen allocations, and the
 * catalog's pointer to it on every core. Measured: a new partition on a
 * quiet broker is ~8 KB resident beyond its structures' sizes.
 */
#define DP_PART_ALLOC_SLACK_BYTES (16u << 10)

unsigned long long dp_shard_partition_bytes(const struct dp_config *cfg)
{
	struct st_log_config lc = part_log_config(cfg, NULL);
	return sizeof(struct dp_part) + strlen(cfg->data_dir) + 1 + TXN_TOPIC_BYTES_MAX + 8 + st_log_open_bytes(&lc) +
	       (cfg->direct_io ? ST_LOG_DIRECT_BUF_BYTES : 0) + txn_pstate_base_bytes() + txn_lso_base_bytes() + DP_PART_ALLOC_SLACK_BYTES;
}

/* Open (creating or recovering) every partition of t that this core owns. */
int dp_shard_open_owned(struct dp_core *c, struct dp_topic *t, uint32_t id, int32_t first)
{
	int failed = 0;
	const struct dp_config *cfg = &c->b->cfg;
	struct st_log_config lc = part_log_config(cfg, &t->conf);
	for (int32_t i = first; i < t->nparts; i++) {
		if (dp_owner_core(c->b, t->hash, i) != c->id)
			continue;
		char dir[1024];
		dp_partition_dir(cfg, dir, sizeof(dir), t->name, t->name_len, i);
		struct dp_part *p = calloc(1, sizeof(*p));
		int rc = p && (p->dir = strdup(dir)) ? st_log_open(c->io, dir, &lc, &p->log) : -ENOMEM;
		if (rc == 0) {
			rc = recover_producers(p);
			if (rc == -EBADMSG) {
				/* The replay met damage in a segment trusted from its index; storage dropped
				 * that index, so a second open scans the segment and sets the damage aside. */
				st_log_close(p->log);
				p->log = NULL;
				part_drop_recovery(p);
				rc = st_log_open(c->io, dir, &lc, &p->log);
				if (rc == 0)
					rc = recover_producers(p);
			}
			if (rc < 0 && p->log)
				st_log_close(p->log);
		}
		if (rc < 0) {
			/* The partition stays offline (requests get errors); others go on. */
			DP_ERR("partition %s/%d: cannot open %s: %s", t->name, i, dir, strerror(-rc));
			if (p)
				part_free(c, p);
			failed++;
			continue;
		}
		t->parts[i] = p;
		int64_t lost = 0;
		uint32_t ranges = st_log_damage_count(p->log, &lost);
		if (ranges)
			DP_ERR("partition %s/%d: DAMAGED: %u range(s) holding %lld offset(s) set aside (storage log lines "
			       "above); fetches of them answer CORRUPT_MESSAGE, the rest is served", t->name, i, ranges,
			       (long long)lost);
		/* A COMMIT/ABORT marker lost in a damaged range leaves its transaction open here for good. */
		int64_t hw = st_log_durable_offset(p->log), lso = dp_part_lso(p, hw);
		if (ranges && lso < hw)
			DP_WARN("partition %s/%d: %u transaction(s) open, the oldest from offset %lld: one whose marker was "
			        "in a damaged range hangs (read_committed stops there): `sluice-admin producers %s %d` "
			        "shows each open transaction's start, `sluice-admin abort-transaction %s %d PID` ends one",
			        t->name, i, txn_lso_open_count(p->lso), (long long)lso, t->name, i, t->name, i);
		DP_INFO("partition %s/%d opened on core %d: log start %lld, end %lld, %u producers "
		        "(snapshot at %lld)", t->name, i, c->id, (long long)st_log_start_offset(p->log),
		        (long long)st_log_end_offset(p->log), txn_pstate_count(p->ps), (long long)p->snap_offset);
	}
	(void)id;
	return failed;
}

void dp_shard_close_topic(struct dp_core *c, struct dp_topic *t, bool delete_files)
{
	for (int32_t i = 0; i < t->nparts; i++) {
		struct dp_part *p = t->parts[i];
		if (!p)
			continue;
		wake_waiters(c, p, true);
		assert(!p->dupwait);   /* callers wait for st_io_pending() == 0 */
		if (delete_files) {
			st_log_delete(p->log, c->trash);
			if (c->b->cfg.fault_delete_kill == DP_FAULT_DELETE_MID) {
				DP_WARN("fault injection: SIGKILL mid-delete (%s removed)", p->dir);
				raise(SIGKILL);
			}
		} else {
			snapshot_producers(c, p);   /* a clean restart replays nothing */
			st_log_close(p->log);
		}
		part_free(c, p);
		t->parts[i] = NULL;
	}
}

/*
 * A partition goes offline when a write or sync of its log fails (disk full,
 * I/O error): its appends are refused with KAFKA_STORAGE_ERROR, reads of
 * what is durable go on. Retried batches waiting for an original that will
 * now never be durable are answered at once.
 */
void part_offline(struct dp_core *c, struct dp_part *p)
{
	assert(st_log_failed(p->log));
	if (p->offline_ms)
		return;   /* already (a reply sent on the way here can re-enter with --cores 1) */
	p->offline_ms = c->now_ms > 0 ? c->now_ms : 1;
	p->probe_backoff_ms = DP_PROBE_FIRST_MS;
	p->probe_ms = c->now_ms + DP_PROBE_FIRST_MS;
	DP_ERR("partition %s is offline: %s; appends are refused until it is reopened (tried every %d s "
	       "backing off to %d s)", p->dir, strerror(-st_log_failed(p->log)), DP_PROBE_FIRST_MS / 1000,
	       DP_PROBE_MAX_MS / 1000);
	struct dp_append *w = p->dupwait;
	p->dupwait = NULL;
	while (w) {
		struct dp_append *next = w->dup_next;
		w->err = w->err ? w->err : KERR_KAFKA_STORAGE_ERROR;
		dp_shard_on_append(w, 0, w->base_offset);   /* may free w */
		w = next;
	}
}

static void part_state_free(struct dp_part *p)
{
	if (p->ps)
		txn_pstate_destroy(p->ps);
	if (p->lso) {
		txn_lso_close_index(p->lso);
		txn_lso_destroy(p->lso);
	}
	if (p->log)
		st_log_close(p->log);
	p->ps = NULL;
	p->lso = NULL;
	p->log = NULL;
}

/*
 * Try to bring an offline partition back: cut the failed log's files at
 * their durable end, open the log again beside the failed one and rebuild its producer state and aborted index from the disk, as
 * a restart would, since the in-memory ones took in batches that never made
 * it. Only when that worked does the new state replace the old; otherwise
 * the partition stays offline and the next try waits twice as long. After
 * ENOSPC it waits quietly for free space first. Synchronous, like opening a
 * partition at create; the coordinator's permissions (allow) are kept.
 */
static void part_probe(struct dp_core *c, struct dp_topic *t, int32_t i, struct dp_part *p)
{
	int err = st_log_failed(p->log);
	if (p->fault_hold_ms > c->now_ms)
		return;   /* test only: a marker sent again is to meet the partition offline first */
	if (!st_log_idle(p->log) || p->reads || p->dupwait || part_files_busy(p) || p->markers_writing) {
		p->probe_ms = c->now_ms + DP_PROBE_BUSY_MS;   /* not reachable today: failed logs take no appends */
		return;
	}
	p->probe_ms = c->now_ms + p->probe_backoff_ms;
	p->probe_backoff_ms = p->probe_backoff_ms * 2 > DP_PROBE_MAX_MS ? DP_PROBE_MAX_MS : p->probe_backoff_ms * 2;
	struct statvfs sv;
	if ((err == -ENOSPC || err == -EDQUOT) && statvfs(p->dir, &sv) == 0 &&
	    (uint64_t)sv.f_bavail * sv.f_frsize < DP_PROBE_FREE_BYTES_MIN)
		return;
	struct dp_part np = { .dir = p->dir };
	struct st_log_config lc = part_log_config(&c->b->cfg, &t->conf);
	/* The bytes whose write or sync failed are in the page cache still: not durable, never
	 * acknowledged, so the reopen must not find them (HW, LSO, a marker counted written). */
	int rc = st_log_cut_failed(p->log);
	if (rc == 0)
		rc = st_log_open(c->io, p->dir, &lc, &np.log);
	if (rc == 0)
		rc = recover_producers(&np);
	if (rc < 0) {
		DP_WARN("partition %s/%d is still offline: reopen failed: %s; next try in %d s", t->name, i,
		        strerror(-rc), (int)((p->probe_ms - c->now_ms) / 1000));
		part_state_free(&np);
		return;
	}
	part_state_free(p);
	p->log = np.log;
	p->ps = np.ps;
	p->lso = np.lso;
	p->snap_offset = np.snap_offset;
	DP_WARN("partition %s/%d is back online after %lld ms offline (%s): log end %lld; %llu appends "
	        "were refused meanwhile", t->name, i, (long long)(c->now_ms - p->offline_ms), strerror(-err),
	        (long long)st_log_end_offset(p->log), (unsigned long long)p->refused);
	p->offline_ms = 0;
	p->refused = 0;
	wake_waiters(c, p, false);
}

/* Owner timer: retention, producer snapshots, expired watches, waiting duplicates. */
void dp_shard_timer(struct dp_core *c)
{
	if (c->trash)
		st_trash_tick(c->trash, c->now_ms);
	if (!c->opens_done)
		dp_shard_report_opens(c);
	if (c->markers_held)
		dp_shard_markers_due(c);   /* test only */
	/* Retention may close a segment a cold read still names by its fd: it waits for them. */
	bool retain = c->now_ms >= c->next_retention_ms && !c->reads_inflight;
	if (retain)
		c->next_retention_ms = c->now_ms + DP_RETENTION_CHECK_MS;
	/* A round starts once the last one reached every partition: each gets its snapshot, however
	 * long a round takes (the interval is the least time between two of a partition's). */
	bool snap = c->now_ms >= c->next_snapshot_ms && !c->snap_round_open;
	if (snap)
		c->next_snapshot_ms = c->now_ms + c->b->cfg.producer_snapshot_ms;
	bool due = false;
	for (uint32_t id = 0; id < c->topics_end; id++) {
		struct dp_topic *t = &c->topics[id];
		if (!t->live || t->deleting)
			continue;
		for (int32_t i = 0; i < t->nparts; i++) {
			struct dp_part *p = t->parts[i];
			if (!p)
				continue;
			if (p->offline_ms || st_log_failed(p->log)) {
				if (!p->offline_ms)
					part_offline(c, p);
				if (c->now_ms >= p->probe_ms)
					part_probe(c, t, i, p);
				if (p->offline_ms)
					continue;   /* no snapshot or retention of a log that is not sound */
			}
			if (p->nwaiters)
				wake_waiters(c, p, false);
			if (p->dupwait)
				dupwait_check(p);
			if (snap)
				p->snap_due = true;
			if (p->snap_due)
				snapshot_producers_async(c, p);
			due |= p->snap_due;
			st_log_keep_from(p->log, p->snap_offset);   /* a restart replays from it */
			if (retain && st_log_retain(p->log, dp_wall_ms()) > 0) {
				txn_lso_trim(p->lso, st_log_start_offset(p->log));
				if (!txn_pstate_snapshot_busy(p->ps))   /* its chain syncs the index file first */
					txn_lso_compact_index(p->lso);
				DP_INFO("partition %s/%d: retention moved log start to %lld", t->name, i,
				        (long long)st_log_start_offset(p->log));
			}
		}
	}
	c->snap_round_open = due;
}

/*
 * Topic deletion waits until no append, marker or cold read of the topic's
 * partitions on this core is in flight, so no completion can refer to a
 * closed log; new produces are refused meanwhile. The wait is a flag in the
 * topic's own catalog entry (at most one delete per topic is under way, the
 * control core sees to that), so any number of topics can wait at once and
 * appends to other topics never hold a delete back.
 */
static bool topic_idle(const struct dp_topic *t)
{
	for (int32_t i = 0; i < t->nparts; i++) {
		const struct dp_part *p = t->parts[i];
		if (p && (!st_log_idle(p->log) || p->dupwait || p->reads || part_files_busy(p) || p->markers_writing))
			return false;
	}
	return true;
}

static void topic_del_finish(struct dp_core *c, uint32_t id)
{
	struct dp_topic *t = &c->topics[id];
	struct dp_msg ack = { .type = DP_MSG_TOPIC_DEL_ACK, .ctx = t->del_ctx };
	uint16_t src = t->del_src;
	dp_msg_fn fn = t->del_reply;
	t->del_wait = false;
	c->ndel_wait--;
	dp_shard_close_topic(c, t, true);
	dp_topic_remove(c, id);
	dp_answer_to(c, src, fn, &ack);
}

int dp_shard_deletes(struct dp_core *c)
{
	int n = 0;
	for (uint32_t id = 0; id < c->topics_end && c->ndel_wait; id++) {
		struct dp_topic *t = &c->topics[id];
		if (t->live && t->del_wait && topic_idle(t)) {
			topic_del_finish(c, id);
			n++;
		}
	}
	return n;
}

void shard_topic_del(struct dp_core *c, struct dp_msg *m)
{
	struct dp_topic *t = dp_topic_get(c, m->topic_id, m->gen);
	if (!t) {
		struct dp_msg ack = { .type = DP_MSG_TOPIC_DEL_ACK, .ctx = m->ctx, .idx = m->idx };
		dp_answer(c, m, &ack);
		return;
	}
	assert(!t->del_wait);   /* one delete per topic at a time (control.c) */
	t->deleting = true;
	t->del_wait = true;
	t->del_src = m->src;
	t->del_ctx = m->ctx;
	t->del_reply = m->reply;
	c->ndel_wait++;
	if (topic_idle(t))
		topic_del_finish(c, m->topic_id);
}
