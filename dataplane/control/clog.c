/*
 * clog.c - the coordinators' own logs (__transaction_state for txncoord.c,
 * __consumer_offsets for group.c), one helper for both: open and replay,
 * write a record, and compact. Every change is a new record, so such a log
 * only grows; when it holds far more records than there are live keys, a
 * compaction starts a new segment, the coordinator writes every live key's
 * current state into it, and once those writes are durable the segments
 * before it go: the newest record of each key is then always in what
 * remains. Records written meanwhile land after the new segment's start
 * too, so nothing newer is ever dropped. The rewrites go out a slice per
 * turn (DP_CLOG_COMPACT_SLICE, control_internal.h). Locality: control core.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "batch.h"
#include "log.h"
#include "control_internal.h"

int dp_internal_log_open(struct dp_core *c, const char *name, const char *what, char *dir, size_t dir_cap,
                         struct st_log **log,
                         int (*load)(void *arg, const uint8_t *batch, size_t len, const struct st_batch_hdr *h),
                         void *arg)
{
	/* Small segments: compaction drops whole ones. Every segment is scanned at open (compaction
	 * keeps these logs small), so damage anywhere is set aside before the replay, not met in it. */
	struct st_log_config lc = { .segment_bytes = 64u << 20, .retention_bytes = -1, .retention_ms = -1,
	                            .index_interval_bytes = 4096, .scan_sealed = true };
	snprintf(dir, dir_cap, "%s/%s", c->b->cfg.data_dir, name);
	mkdir(dir, 0755);
	int rc = st_log_open(c->io, dir, &lc, log);
	if (rc < 0 || (rc = st_log_read_batches(*log, load, arg)) < 0) {
		DP_ERR("%s log %s: %s", what, dir, strerror(-rc));
		return rc;
	}
	/*
	 * Damage in the middle of a coordinator log: the replay skipped the damaged batches and read
	 * on. Refusing to start would take every group (or every transactional producer) down for
	 * one bad batch, and truncating would silently drop every commit after it; skipping loses
	 * only what the damaged bytes held, and most of that is superseded by later records of the
	 * same key (a group's next commit, a transaction's next state). What is not superseded (an
	 * offset committed once, the last state of an idle transactional id) is lost: say so loudly.
	 * The one costly loss: a transaction's last record being its PrepareCommit, its commit cut
	 * short by a crash; the state before it (Ongoing) then times out and aborts what markers had
	 * not reached yet. That needs damage in exactly that record; refusing every start for it
	 * would cost far more.
	 */
	int64_t lost = 0;
	uint32_t ranges = st_log_damage_count(*log, &lost);
	if (ranges)
		DP_ERR("%s log %s: DAMAGED: %u range(s) holding %lld record offset(s) were skipped; the rest was "
		       "loaded. Records only there are lost (committed offsets fall back to earlier commits or to "
		       "auto.offset.reset). The damaged bytes stay in the files; restore the directory from a backup "
		       "to get them back", what, dir, ranges, (long long)lost);
	return 0;
}

int64_t dp_clog_append(struct dp_clog *l, uint8_t *batch, uint32_t len, st_append_cb cb, void *arg)
{
	int64_t off = st_log_append_cb(l->log, batch, len, 1, cb, arg);
	if (off >= 0)
		l->records++;
	return off;
}

int dp_clog_write(struct dp_clog *l, uint8_t *buf, size_t cap, int64_t ts_ms, const void *key, size_t klen,
                  const uint8_t *val, int vlen, st_append_cb cb, void *arg)
{
	int n = st_batch_build(buf, cap, 0, -1, -1, -1, ts_ms, key, (int)klen, val, val ? vlen : -1);
	if (n < 0)
		return n;
	int64_t off = dp_clog_append(l, buf, (uint32_t)n, cb, arg);
	return off < 0 ? (int)off : n;
}

static void compaction_report(const struct dp_clog *l, int rc)
{
	if (rc >= 0)
		DP_INFO("%s: compaction done, %d old segment(s) removed", l->name, rc);
	else if (rc == -EIO)
		DP_WARN("%s: a compaction write failed, old segments kept", l->name);
}

bool dp_clog_compact_begin(struct dp_clog *l, uint64_t live, int64_t extra_records)
{
	if (st_compaction_busy(&l->compact) || l->records < 2ull * live + (uint64_t)extra_records)
		return false;
	if (st_compaction_begin(l->log, &l->compact) < 0)
		return false;
	l->records = 0;
	return true;
}

uint32_t dp_clog_compact_room(const struct dp_clog *l)
{
	return l->compact.pending >= DP_CLOG_COMPACT_SLICE ? 0 : DP_CLOG_COMPACT_SLICE - l->compact.pending;
}

void dp_clog_compact_end(struct dp_clog *l)
{
	compaction_report(l, st_compaction_end(l->log, &l->compact));
}

void dp_clog_compact_done(struct dp_clog *l, int status)
{
	compaction_report(l, st_compaction_done(l->log, &l->compact, status));
}
