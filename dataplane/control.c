/*
 * control.c - the control core: the authoritative topic catalog. Creates
 * and deletes are serialised here, made durable as partition directories,
 * then announced to every data core, which updates its own copy and opens
 * or removes the partitions it owns. The requester is answered only after
 * every data core has acknowledged, so a client that created a topic can
 * use it on any connection at once. Locality: control core.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kerr.h"
#include "core.h"
#include "log.h"

#define DP_CTRL_OPS_MAX 1024

struct ctrl_topic {
	bool live, deleting;
	uint32_t gen;
	int32_t nparts;
	uint16_t len;
	char name[DP_TOPIC_NAME_MAX + 1];
};

/* Control core only. */
struct dp_ctrl {
	struct ctrl_topic topics[DP_TOPICS_MAX];
	struct dp_ctrl_op ops[DP_CTRL_OPS_MAX];
};

static int32_t ctrl_find(struct dp_ctrl *k, const char *name, size_t len)
{
	for (int32_t i = 0; i < DP_TOPICS_MAX; i++)
		if (k->topics[i].live && k->topics[i].len == len && memcmp(k->topics[i].name, name, len) == 0)
			return i;
	return -1;
}

static void fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

static void done(struct dp_core *c, const struct dp_msg *req, uint16_t type, int16_t err)
{
	struct dp_msg m = { .type = type, .err = err, .ctx = req->ctx, .idx = req->idx, .gen = req->gen };
	dp_send(c, req->src, &m);
}

static struct dp_ctrl_op *op_start(struct dp_ctrl *k, const struct dp_msg *req, uint16_t reply_type,
                                   uint32_t acks)
{
	for (uint32_t i = 0; i < DP_CTRL_OPS_MAX; i++) {
		struct dp_ctrl_op *op = &k->ops[i];
		if (op->used)
			continue;
		*op = (struct dp_ctrl_op){ .used = true, .req_core = req->src, .req_ctx = req->ctx,
		                           .req_idx = req->idx, .req_gen = req->gen, .acks_left = acks,
		                           .reply_type = reply_type };
		return op;
	}
	return NULL;
}

static void ctrl_create(struct dp_core *c, struct dp_msg *m)
{
	struct dp_ctrl *k = c->ctrl;
	const char *name = m->u.topic.name;
	size_t len = m->u.topic.name_len;
	int32_t nparts = m->u.topic.nparts;
	if (!dp_topic_name_valid(name, len)) {
		done(c, m, DP_MSG_CREATE_DONE, KERR_INVALID_TOPIC_EXCEPTION);
		return;
	}
	if (ctrl_find(k, name, len) >= 0) {
		done(c, m, DP_MSG_CREATE_DONE, KERR_TOPIC_ALREADY_EXISTS);
		return;
	}
	if (nparts < 1 || nparts > DP_PARTITIONS_MAX) {
		done(c, m, DP_MSG_CREATE_DONE, KERR_INVALID_PARTITIONS);
		return;
	}
	int32_t id = -1;
	for (int32_t i = 0; i < DP_TOPICS_MAX && id < 0; i++)
		if (!k->topics[i].live)
			id = i;
	struct dp_ctrl_op *op = id >= 0 ? op_start(k, m, DP_MSG_CREATE_DONE, (uint32_t)c->b->ndata) : NULL;
	if (!op) {
		done(c, m, DP_MSG_CREATE_DONE, KERR_UNKNOWN_SERVER_ERROR);
		return;
	}
	/* Durable first: the partition directories are the topic's record on disk. */
	const struct dp_config *cfg = &c->b->cfg;
	for (int32_t p = 0; p < nparts; p++) {
		char dir[1024];
		dp_partition_dir(cfg, dir, sizeof(dir), name, len, p);
		if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
			DP_ERR("create topic %.*s: mkdir %s: %s", (int)len, name, dir, strerror(errno));
			op->used = false;
			done(c, m, DP_MSG_CREATE_DONE, KERR_KAFKA_STORAGE_ERROR);
			return;
		}
	}
	fsync_dir(cfg->data_dir);
	struct ctrl_topic *t = &k->topics[id];
	t->live = true;
	t->deleting = false;
	t->gen++;
	t->nparts = nparts;
	t->len = (uint16_t)len;
	memcpy(t->name, name, len);
	t->name[len] = 0;
	DP_INFO("topic %s created with %d partitions", t->name, nparts);
	for (int d = 0; d < c->b->ndata; d++) {
		struct dp_msg add = { .type = DP_MSG_TOPIC_ADD, .ctx = op, .topic_id = (uint32_t)id, .gen = t->gen };
		add.u.topic.name = t->name;
		add.u.topic.name_len = t->len;
		add.u.topic.nparts = nparts;
		dp_send(c, c->b->first_data + d, &add);
	}
}

static void ctrl_delete(struct dp_core *c, struct dp_msg *m)
{
	struct dp_ctrl *k = c->ctrl;
	int32_t id = ctrl_find(k, m->u.topic.name, m->u.topic.name_len);
	if (id < 0 || k->topics[id].deleting) {
		done(c, m, DP_MSG_DELETE_DONE, KERR_UNKNOWN_TOPIC_OR_PARTITION);
		return;
	}
	struct dp_ctrl_op *op = op_start(k, m, DP_MSG_DELETE_DONE, (uint32_t)c->b->ndata);
	if (!op) {
		done(c, m, DP_MSG_DELETE_DONE, KERR_UNKNOWN_SERVER_ERROR);
		return;
	}
	op->topic_id = (uint32_t)id;
	k->topics[id].deleting = true;
	DP_INFO("topic %s: deleting", k->topics[id].name);
	for (int d = 0; d < c->b->ndata; d++) {
		struct dp_msg del = { .type = DP_MSG_TOPIC_DEL, .ctx = op, .topic_id = (uint32_t)id,
		                      .gen = k->topics[id].gen };
		dp_send(c, c->b->first_data + d, &del);
	}
}

static void ctrl_ack(struct dp_core *c, struct dp_msg *m)
{
	struct dp_ctrl_op *op = m->ctx;
	assert(op->used && op->acks_left > 0);
	if (m->err && !op->err)
		op->err = m->err;
	if (--op->acks_left)
		return;
	if (op->reply_type == DP_MSG_DELETE_DONE) {
		struct ctrl_topic *t = &c->ctrl->topics[op->topic_id];
		/* Remove whatever directories are left (partitions that failed to open). */
		for (int32_t p = 0; p < t->nparts; p++) {
			char dir[1024];
			dp_partition_dir(&c->b->cfg, dir, sizeof(dir), t->name, t->len, p);
			rmdir(dir);
		}
		fsync_dir(c->b->cfg.data_dir);
		t->live = false;
		t->deleting = false;
		DP_INFO("topic %s deleted", t->name);
	}
	struct dp_msg r = { .type = op->reply_type, .err = op->err, .ctx = op->req_ctx,
	                    .idx = op->req_idx, .gen = op->req_gen };
	op->used = false;
	dp_send(c, op->req_core, &r);
}

void dp_control_msg(struct dp_core *c, struct dp_msg *m)
{
	switch (m->type) {
	case DP_MSG_CREATE: ctrl_create(c, m); return;
	case DP_MSG_DELETE: ctrl_delete(c, m); return;
	case DP_MSG_TOPIC_ADD_ACK:
	case DP_MSG_TOPIC_DEL_ACK: ctrl_ack(c, m); return;
	case DP_MSG_INIT_PID: dp_pid_init_producer(c, m); return;
	default: assert(!"not a control message");
	}
}

/* Control core: where a partition lives, for the transaction coordinator. */
bool dp_ctrl_topic(struct dp_core *c, const char *name, size_t len, int32_t partition,
                   uint32_t *id, uint32_t *gen, uint32_t *hash)
{
	int32_t i = ctrl_find(c->ctrl, name, len);
	if (i < 0 || c->ctrl->topics[i].deleting || partition < 0 || partition >= c->ctrl->topics[i].nparts)
		return false;
	*id = (uint32_t)i;
	*gen = c->ctrl->topics[i].gen;
	*hash = dp_topic_hash(name, len);
	return true;
}

/* init only: the control catalog and every data core's copy from the data directory. */
int dp_scan_data_dir(struct dp_broker *b)
{
	struct dp_core *cc = b->cores[0];
	cc->ctrl = calloc(1, sizeof(*cc->ctrl));
	if (!cc->ctrl)
		return -ENOMEM;
	if (mkdir(b->cfg.data_dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	int prc = dp_pid_init(&cc->ctrl_pids, b->cfg.data_dir);
	if (prc < 0)
		return prc;
	DIR *d = opendir(b->cfg.data_dir);
	if (!d)
		return -errno;
	struct ctrl_topic *ts = cc->ctrl->topics;
	int32_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *dash = strrchr(e->d_name, '-');
		if (!dash || dash == e->d_name || !dash[1])
			continue;
		char *endp;
		long p = strtol(dash + 1, &endp, 10);
		size_t len = (size_t)(dash - e->d_name);
		if (*endp || p < 0 || p >= DP_PARTITIONS_MAX || !dp_topic_name_valid(e->d_name, len))
			continue;
		int32_t id = ctrl_find(cc->ctrl, e->d_name, len);
		if (id < 0) {
			if (n == DP_TOPICS_MAX)
				break;
			id = n++;
			ts[id] = (struct ctrl_topic){ .live = true, .gen = 1, .len = (uint16_t)len };
			memcpy(ts[id].name, e->d_name, len);
		}
		if (p + 1 > ts[id].nparts)
			ts[id].nparts = (int32_t)p + 1;
	}
	closedir(d);
	for (int32_t id = 0; id < n; id++) {
		DP_INFO("recovered topic %s with %d partitions", ts[id].name, ts[id].nparts);
		for (int i = 0; i < b->ndata; i++) {
			int rc = dp_topic_install(b->cores[b->first_data + i], (uint32_t)id, ts[id].gen,
			                          ts[id].name, ts[id].len, ts[id].nparts);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

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
