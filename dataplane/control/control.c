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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fop.h"
#include "fs.h"
#include "kerr.h"
#include "control_internal.h"
#include "shard.h"
#include "log.h"

/*
 * Each catalog slot carries its own create and delete operation, so there is
 * no shared pool to run out of: a create takes a free slot (and makes it
 * live at once), a delete a live one that is not being deleted, so a slot
 * has at most one of each in flight (a delete can overtake a create still
 * waiting for its acks; the ring order to each core keeps ADD before DEL).
 */
struct ctrl_topic {
	bool live, deleting;
	uint32_t gen;
	int32_t nparts;
	uint16_t len;
	char name[DP_TOPIC_NAME_MAX + 1];
	struct dp_ctrl_op create_op, delete_op, grow_op;   /* grow_op: a CreatePartitions */
	struct dp_ctrl_op alter_op;   /* an AlterConfigs or IncrementalAlterConfigs */
	char *alter_text;             /* its new text, being written */
	uint32_t alter_len;
	/* A delete's record (names.h): written before any partition is touched, removed after all. */
	struct st_fop mark_fop;
	struct dp_core *mark_core;    /* the control core, for the record's completion */
	char mark[32], mark_tmp[36];  /* "<slot>" DP_DELETE_MARK_SUFFIX / DP_DELETE_TMP_SUFFIX; "" none */
	/* Its configs (topicconf.h): the file DP_TOPIC_CONFIG_DIR/<name> holds conf_text; none, no file. */
	struct dp_topic_conf conf;    /* what the data cores apply (TOPIC_ADD carries a pointer to it) */
	char *conf_text;              /* "name=value\n" per key set; NULL: no configs */
	uint32_t conf_len;
	struct st_fop conf_fop;       /* a create's write of the file, before its partition directories */
	struct dp_core *conf_core;
	char conf_tmp[DP_TOPIC_NAME_MAX + 2];   /* DP_TOPIC_CONFIG_TMP_PREFIX + name */
};

/* Control core only. */
struct dp_ctrl {
	struct ctrl_topic topics[DP_TOPICS_MAX];
	int conf_dirfd;               /* DATA/DP_TOPIC_CONFIG_DIR: the topics' config files */
	int64_t nparts;               /* partitions of live topics (being created or deleted too): their fds */
	uint32_t conf_sync_faults;    /* test only (--fault-conf-sync-fail): alters whose directory sync fails yet */
};

/* The reasons a create is refused beyond a bare error code (CreateTopics' ErrorMessage). */
static const char ctrl_why_internal[] = "the name of an internal topic of the broker";
static const char ctrl_why_topics[] = "the broker holds no more topics (catalog full)";
static const char ctrl_why_fds[] =
	"the broker's file descriptor limit (RLIMIT_NOFILE) holds no more partitions";
static const char ctrl_why_parts[] = "the broker's partition limit (--partitions-max) holds no more partitions";
static const char ctrl_why_fewer[] = "the topic has at least as many partitions as requested (they can only grow)";
static const char ctrl_why_busy[] = "the topic is being created, deleted or grown by another request";

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

static void done(struct dp_core *c, const struct dp_msg *req, uint16_t type, int16_t err, const char *why)
{
	struct dp_msg m = { .type = type, .err = err, .ctx = req->ctx, .idx = req->idx, .gen = req->gen };
	m.u.topic.name = why;   /* a static string: it outlives the reply */
	m.u.topic.name_len = why ? (uint32_t)strlen(why) : 0;
	dp_answer(c, req, &m);
}

static void op_start(struct dp_ctrl_op *op, const struct dp_msg *req, uint16_t reply_type, uint32_t id,
                     uint32_t acks)
{
	assert(!op->used);
	*op = (struct dp_ctrl_op){ .used = true, .req_core = req->src, .req_reply = req->reply, .req_ctx = req->ctx, .req_idx = req->idx,
	                           .req_gen = req->gen, .topic_id = id, .acks_left = acks,
	                           .reply_type = reply_type, .removing = reply_type == DP_MSG_DELETE_DONE };
}

static void send_del(struct dp_core *c, struct dp_ctrl_op *op, uint32_t id)
{
	for (int d = 0; d < c->b->ndata; d++) {
		struct dp_msg del = { .type = DP_MSG_TOPIC_DEL, .ctx = op, .topic_id = id,
		                      .gen = c->ctrl->topics[id].gen };
		dp_ask(c, c->b->first_data + d, dp_shard_msg, dp_control_msg, &del);
	}
}

static void limit_log(struct dp_core *c, const char *name, size_t len, int32_t nparts, const char *why)
{
	struct dp_ctrl *k = c->ctrl;
	DP_WARN_RL("create topic %.*s (%d partitions) refused: %s (%lld partitions held, room for %lld)",
	        (int)len, name, nparts, why, (long long)k->nparts, (long long)c->b->partitions_max);
}

static void create_dirs(struct dp_core *c, struct ctrl_topic *t);
static void create_undo(struct dp_core *c, struct ctrl_topic *t, int16_t err);
static void conf_written(void *arg, int status);

static void ctrl_alter(struct dp_core *c, struct dp_msg *m);

static void ctrl_create(struct dp_core *c, struct dp_msg *m)
{
	struct dp_ctrl *k = c->ctrl;
	const char *name = m->u.topic.name;
	size_t len = m->u.topic.name_len;
	int32_t nparts = m->u.topic.nparts;
	if (!dp_topic_name_valid(name, len)) {
		done(c, m, DP_MSG_CREATE_DONE, KERR_INVALID_TOPIC_EXCEPTION, NULL);
		return;
	}
	if (dp_topic_internal(name, len)) {
		done(c, m, DP_MSG_CREATE_DONE, KERR_INVALID_REQUEST, ctrl_why_internal);
		return;
	}
	if (ctrl_find(k, name, len) >= 0) {
		done(c, m, DP_MSG_CREATE_DONE, KERR_TOPIC_ALREADY_EXISTS, NULL);
		return;
	}
	if (nparts < 1 || nparts > DP_PARTITIONS_MAX) {
		done(c, m, DP_MSG_CREATE_DONE, KERR_INVALID_PARTITIONS, NULL);
		return;
	}
	int32_t id = -1;
	for (int32_t i = 0; i < DP_TOPICS_MAX && id < 0; i++)
		if (!k->topics[i].live)
			id = i;
	const char *why = id < 0 ? ctrl_why_topics
	                  : k->nparts + nparts > c->b->partitions_max ? (c->b->partitions_by_flag ? ctrl_why_parts : ctrl_why_fds)
	                                                              : NULL;
	if (why) {
		/* A broker limit, as Kafka answers a create its policy refuses; the others go on. */
		limit_log(c, name, len, nparts, why);
		done(c, m, DP_MSG_CREATE_DONE, KERR_POLICY_VIOLATION, why);
		return;
	}
	if (m->flags & DP_F_VALIDATE_ONLY) {
		done(c, m, DP_MSG_CREATE_DONE, KERR_NONE, NULL);
		return;
	}
	/* The slot is the topic's from here (a second create of the name meets it), until undone. */
	struct ctrl_topic *t = &k->topics[id];
	op_start(&t->create_op, m, DP_MSG_CREATE_DONE, (uint32_t)id, (uint32_t)c->b->ndata);
	t->live = true;
	t->deleting = false;
	t->gen++;
	t->nparts = nparts;
	t->len = (uint16_t)len;
	memcpy(t->name, name, len);
	t->name[len] = 0;
	k->nparts += nparts;
	t->conf = (struct dp_topic_conf){ 0 };
	t->conf_len = 0;
	const struct dp_topic_configs *tc = m->u.topic.conf;
	char text[DP_TOPIC_CONFIG_TEXT_BYTES_MAX];
	size_t tlen = tc ? dp_topic_configs_format(tc, text) : 0;
	if (tlen == 0) {
		create_dirs(c, t);
		return;
	}
	/* The configs first (the file alone, with no partition directory, is dropped at start-up). */
	dp_topic_configs_applied(tc, &t->conf);
	t->conf_text = malloc(tlen);
	if (!t->conf_text) {
		create_undo(c, t, KERR_KAFKA_STORAGE_ERROR);
		return;
	}
	memcpy(t->conf_text, text, tlen);
	t->conf_len = (uint32_t)tlen;
	t->conf.text = t->conf_text;
	t->conf.text_len = t->conf_len;
	t->conf_core = c;
	_Static_assert(sizeof(DP_TOPIC_CONFIG_TMP_PREFIX) == 2, "conf_tmp holds a one-character prefix");
	t->conf_tmp[0] = DP_TOPIC_CONFIG_TMP_PREFIX[0];
	memcpy(t->conf_tmp + 1, t->name, (size_t)t->len + 1);
	st_fop_replace(c->io, &t->conf_fop, k->conf_dirfd, t->conf_tmp, t->name, NULL, t->conf_text, tlen, -1,
	               conf_written, t);
}

/* A create that cannot go on: the slot is free again, and the requester answered err. */
static void create_undo(struct dp_core *c, struct ctrl_topic *t, int16_t err)
{
	struct dp_ctrl_op *op = &t->create_op;
	if (t->conf_text && st_fs_unlinkat(c->ctrl->conf_dirfd, t->name, 0) == 0)
		st_fs_fsync(c->ctrl->conf_dirfd);
	free(t->conf_text);
	t->conf_text = NULL;
	t->conf_len = 0;
	c->ctrl->nparts -= t->nparts;
	t->live = false;
	struct dp_msg r = { .type = op->reply_type, .err = err, .ctx = op->req_ctx, .idx = op->req_idx,
	                    .gen = op->req_gen };
	op->used = false;
	dp_answer_to(c, op->req_core, op->req_reply, &r);
}

static void conf_written(void *arg, int status)
{
	struct ctrl_topic *t = arg;
	struct dp_core *c = t->conf_core;
	if (status < 0) {
		/* Renamed or not, the create is refused: the file goes (create_undo), the client may retry. */
		DP_ERR("create topic %s: cannot write its configs: %s", t->name, strerror(-status));
		create_undo(c, t, KERR_KAFKA_STORAGE_ERROR);
		return;
	}
	create_dirs(c, t);
}

/* Durable first: the partition directories are the topic's record on disk. */
static void create_dirs(struct dp_core *c, struct ctrl_topic *t)
{
	const struct dp_config *cfg = &c->b->cfg;
	uint32_t id = (uint32_t)(t - c->ctrl->topics);
	for (int32_t p = 0; p < t->nparts; p++) {
		char dir[1024];
		dp_partition_dir(cfg, dir, sizeof(dir), t->name, t->len, p);
		if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
			DP_ERR("create topic %s: mkdir %s: %s", t->name, dir, strerror(errno));
			while (--p >= 0) {   /* nothing half-created */
				dp_partition_dir(cfg, dir, sizeof(dir), t->name, t->len, p);
				rmdir(dir);
			}
			create_undo(c, t, KERR_KAFKA_STORAGE_ERROR);
			return;
		}
	}
	fsync_dir(cfg->data_dir);
	int32_t nparts = t->nparts;
	DP_INFO("topic %s created with %d partitions%s", t->name, nparts, t->conf_text ? " and configs" : "");
	for (int d = 0; d < c->b->ndata; d++) {
		struct dp_msg add = { .type = DP_MSG_TOPIC_ADD, .ctx = &t->create_op, .topic_id = (uint32_t)id,
		                      .gen = t->gen };
		add.u.topic.name = t->name;
		add.u.topic.name_len = t->len;
		add.u.topic.nparts = nparts;
		add.u.topic.conf = &t->conf;
		dp_ask(c, c->b->first_data + d, dp_shard_msg, dp_control_msg, &add);
	}
}

/*
 * CreatePartitions of one topic: the new partition directories are made
 * (durable first, as a create's: they are the count's record, the start-up
 * scan takes the count from them), then every data core grows its copy and
 * opens the new partitions it owns (dp_owner_core, the rule every partition
 * follows); the answer waits for every core, as a create's does.
 */
static void ctrl_create_parts(struct dp_core *c, struct dp_msg *m)
{
	struct dp_ctrl *k = c->ctrl;
	const char *name = m->u.topic.name;
	size_t len = m->u.topic.name_len;
	int32_t count = m->u.topic.nparts;
	int32_t id = ctrl_find(k, name, len);
	if (id < 0 || k->topics[id].deleting) {
		done(c, m, DP_MSG_CREATE_PARTS_DONE, KERR_UNKNOWN_TOPIC_OR_PARTITION, NULL);
		return;
	}
	struct ctrl_topic *t = &k->topics[id];
	if (t->create_op.used || t->grow_op.used) {
		done(c, m, DP_MSG_CREATE_PARTS_DONE, KERR_REASSIGNMENT_IN_PROGRESS, ctrl_why_busy);
		return;
	}
	if (count <= t->nparts || count > DP_PARTITIONS_MAX) {
		done(c, m, DP_MSG_CREATE_PARTS_DONE, KERR_INVALID_PARTITIONS, count <= t->nparts ? ctrl_why_fewer : NULL);
		return;
	}
	int32_t add = count - t->nparts;
	if (k->nparts + add > c->b->partitions_max) {
		const char *why = c->b->partitions_by_flag ? ctrl_why_parts : ctrl_why_fds;
		limit_log(c, name, len, count, why);
		done(c, m, DP_MSG_CREATE_PARTS_DONE, KERR_POLICY_VIOLATION, why);
		return;
	}
	if (m->flags & DP_F_VALIDATE_ONLY) {
		done(c, m, DP_MSG_CREATE_PARTS_DONE, KERR_NONE, NULL);
		return;
	}
	const struct dp_config *cfg = &c->b->cfg;
	for (int32_t p = t->nparts; p < count; p++) {
		char dir[1024];
		dp_partition_dir(cfg, dir, sizeof(dir), t->name, t->len, p);
		if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
			DP_ERR("topic %s: add partitions: mkdir %s: %s", t->name, dir, strerror(errno));
			while (--p >= t->nparts) {   /* the count stays what it was */
				dp_partition_dir(cfg, dir, sizeof(dir), t->name, t->len, p);
				rmdir(dir);
			}
			done(c, m, DP_MSG_CREATE_PARTS_DONE, KERR_KAFKA_STORAGE_ERROR, NULL);
			return;
		}
	}
	fsync_dir(cfg->data_dir);
	DP_INFO("topic %s: %d partitions, was %d", t->name, count, t->nparts);
	op_start(&t->grow_op, m, DP_MSG_CREATE_PARTS_DONE, (uint32_t)id, (uint32_t)c->b->ndata);
	t->nparts = count;
	k->nparts += add;
	for (int d = 0; d < c->b->ndata; d++) {
		struct dp_msg grow = { .type = DP_MSG_TOPIC_GROW, .ctx = &t->grow_op, .topic_id = (uint32_t)id,
		                       .gen = t->gen };
		grow.u.topic.nparts = count;
		dp_ask(c, c->b->first_data + d, dp_shard_msg, dp_control_msg, &grow);
	}
}

/*
 * An alter's new text is durable: the control core's copy takes it, then
 * every data core's, and the client is answered once all have it. Renamed,
 * its directory sync failed: the file in place is the new one (what a read
 * of it, and the next start, see) but a crash may bring the old one back;
 * every core takes the new text, so memory says what the file says, and the
 * client is answered KAFKA_STORAGE_ERROR (not durable), as a failed log
 * write is; it may alter again. A write that failed before its rename
 * changed nothing.
 */
static void alter_written(void *arg, int status)
{
	struct ctrl_topic *t = arg;
	struct dp_core *c = t->conf_core;
	struct dp_ctrl_op *op = &t->alter_op;
	if (status == 0 && st_fop_renamed(&t->conf_fop) && c->ctrl->conf_sync_faults) {
		c->ctrl->conf_sync_faults--;
		DP_WARN("fault injection: topic %s: its altered configs' directory sync answered failed", t->name);
		status = -EIO;
	}
	if (status < 0 && !st_fop_renamed(&t->conf_fop)) {
		DP_ERR("topic %s: cannot write its altered configs: %s; they stay as they were", t->name, strerror(-status));
		free(t->alter_text);
		t->alter_text = NULL;
		struct dp_msg r = { .type = op->reply_type, .err = KERR_KAFKA_STORAGE_ERROR, .ctx = op->req_ctx,
		                    .idx = op->req_idx, .gen = op->req_gen };
		op->used = false;
		dp_answer_to(c, op->req_core, op->req_reply, &r);
		return;
	}
	if (status < 0) {
		DP_ERR("topic %s: its altered configs may not survive a crash: %s; answered KAFKA_STORAGE_ERROR",
		       t->name, strerror(-status));
		op->err = KERR_KAFKA_STORAGE_ERROR;   /* ctrl_ack answers it once every core took the text */
	}
	struct dp_topic_configs tc;
	const char *why = dp_topic_configs_parse(&tc, t->alter_text, t->alter_len, UINT64_MAX);
	assert(!why);   /* formatted by ctrl_alter from configs it took */
	(void)why;
	free(t->conf_text);
	t->conf_text = t->alter_len ? t->alter_text : NULL;
	if (!t->alter_len)
		free(t->alter_text);
	t->conf_len = t->alter_len;
	t->alter_text = NULL;
	dp_topic_configs_applied(&tc, &t->conf);
	t->conf.text = t->conf_text;
	t->conf.text_len = t->conf_len;
	DP_INFO("topic %s: configs altered", t->name);
	uint32_t id = (uint32_t)(t - c->ctrl->topics);
	for (int d = 0; d < c->b->ndata; d++) {
		struct dp_msg m = { .type = DP_MSG_TOPIC_CONF, .ctx = op, .topic_id = id, .gen = t->gen };
		m.u.topic.conf = &t->conf;
		dp_ask(c, c->b->first_data + d, dp_shard_msg, dp_control_msg, &m);
	}
}

/* AlterConfigs / IncrementalAlterConfigs of one topic: applied to its configs now, written
 * durably (as a create's), then announced to every data core. One at a time per topic. */
static void ctrl_alter(struct dp_core *c, struct dp_msg *m)
{
	struct dp_ctrl *k = c->ctrl;
	int32_t id = ctrl_find(k, m->u.topic.name, m->u.topic.name_len);
	if (id < 0 || k->topics[id].deleting) {
		done(c, m, DP_MSG_ALTER_CONF_DONE, KERR_UNKNOWN_TOPIC_OR_PARTITION, NULL);
		return;
	}
	struct ctrl_topic *t = &k->topics[id];
	if (t->create_op.used || t->alter_op.used || st_fop_busy(&t->conf_fop)) {
		done(c, m, DP_MSG_ALTER_CONF_DONE, KERR_REASSIGNMENT_IN_PROGRESS, ctrl_why_busy);
		return;
	}
	struct dp_topic_configs tc;
	const char *why = dp_topic_configs_parse(&tc, t->conf_text ? t->conf_text : "", t->conf_len, UINT64_MAX);
	static char scratch[DP_TOPIC_CONFIG_KEYS][DP_TOPIC_CONFIG_VALUE_BYTES_MAX];   /* control core only */
	if (!why)
		why = dp_topic_configs_alter(&tc, m->u.topic.conf, scratch, c->b->cfg.segment_bytes);
	if (why) {
		done(c, m, DP_MSG_ALTER_CONF_DONE, KERR_INVALID_CONFIG, why);
		return;
	}
	if (m->flags & DP_F_VALIDATE_ONLY) {
		done(c, m, DP_MSG_ALTER_CONF_DONE, KERR_NONE, NULL);
		return;
	}
	char text[DP_TOPIC_CONFIG_TEXT_BYTES_MAX];
	size_t tlen = dp_topic_configs_format(&tc, text);
	t->alter_text = malloc(tlen ? tlen : 1);
	if (!t->alter_text) {
		done(c, m, DP_MSG_ALTER_CONF_DONE, KERR_KAFKA_STORAGE_ERROR, NULL);
		return;
	}
	memcpy(t->alter_text, text, tlen);
	t->alter_len = (uint32_t)tlen;
	op_start(&t->alter_op, m, DP_MSG_ALTER_CONF_DONE, (uint32_t)id, (uint32_t)c->b->ndata);
	t->conf_core = c;
	_Static_assert(sizeof(DP_TOPIC_CONFIG_TMP_PREFIX) == 2, "conf_tmp holds a one-character prefix");
	t->conf_tmp[0] = DP_TOPIC_CONFIG_TMP_PREFIX[0];
	memcpy(t->conf_tmp + 1, t->name, (size_t)t->len + 1);
	/* An empty text is written too: a file with no configs reads as none. */
	st_fop_replace(c->io, &t->conf_fop, k->conf_dirfd, t->conf_tmp, t->name, NULL, t->alter_text, tlen, -1,
	               alter_written, t);
}

/*
 * The delete's record is durable (status 0): from here a crash cannot bring
 * the topic back, since a start-up removes whatever partitions of it are
 * left before it scans the rest. Only now do the data cores remove theirs.
 */
static void mark_written(void *arg, int status)
{
	struct ctrl_topic *t = arg;
	struct dp_core *c = t->mark_core;
	uint32_t id = (uint32_t)(t - c->ctrl->topics);
	if (status < 0 && !st_fop_renamed(&t->mark_fop)) {
		/* Nothing was touched: the topic stays, whole; the client may try again. */
		DP_ERR("topic %s: cannot record its delete: %s; the topic stays", t->name, strerror(-status));
		t->mark[0] = 0;
		t->deleting = false;
		struct dp_ctrl_op *op = &t->delete_op;
		struct dp_msg r = { .type = op->reply_type, .err = KERR_KAFKA_STORAGE_ERROR, .ctx = op->req_ctx,
		                    .idx = op->req_idx, .gen = op->req_gen };
		op->used = false;
		dp_answer_to(c, op->req_core, op->req_reply, &r);
		return;
	}
	if (status < 0)   /* renamed, its directory sync failed: a crash may or may not keep it */
		DP_ERR("topic %s: its delete's record may not survive a crash: %s; deleting anyway", t->name,
		       strerror(-status));
	if (c->b->cfg.fault_delete_kill == DP_FAULT_DELETE_INTENT) {
		DP_WARN("fault injection: SIGKILL after-intent (topic %s)", t->name);
		raise(SIGKILL);
	}
	send_del(c, &t->delete_op, id);
}

static void ctrl_delete(struct dp_core *c, struct dp_msg *m)
{
	struct dp_ctrl *k = c->ctrl;
	int32_t id = ctrl_find(k, m->u.topic.name, m->u.topic.name_len);
	/* A topic whose configs are being written is not on any data core yet: a delete would overtake its ADD. */
	if (id < 0 || k->topics[id].deleting || st_fop_busy(&k->topics[id].conf_fop)) {
		done(c, m, DP_MSG_DELETE_DONE, KERR_UNKNOWN_TOPIC_OR_PARTITION, NULL);
		return;
	}
	struct ctrl_topic *t = &k->topics[id];
	op_start(&t->delete_op, m, DP_MSG_DELETE_DONE, (uint32_t)id, (uint32_t)c->b->ndata);
	t->deleting = true;
	DP_INFO("topic %s: deleting", t->name);
	snprintf(t->mark, sizeof(t->mark), "%u%s", (unsigned)id, DP_DELETE_MARK_SUFFIX);
	snprintf(t->mark_tmp, sizeof(t->mark_tmp), "%u%s", (unsigned)id, DP_DELETE_TMP_SUFFIX);
	t->mark_core = c;
	st_fop_replace(c->io, &t->mark_fop, c->ctrl_pids->dirfd, t->mark_tmp, t->mark, NULL, t->name, t->len, -1,
	               mark_written, t);
}

#define CTRL_REMOVE_PASSES_MAX 16   /* directory passes of remove_dir (as storage's st_log_delete) */
#define CTRL_REMOVE_DEPTH_MAX  4    /* subdirectories remove_dir descends (a partition has none) */

/* Remove directory dir and the files in it (a partition's: no subdirectories). Synchronous: init,
 * and on the control core only for what a data core left (a partition that failed to open).
 * st_fs_* (storage/fs.h), as every call on a descriptor the simulator's disk may have made. */
static int remove_dir_at(int dirfd, const char *dir, int depth)
{
	int fd = st_fs_openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	DIR *d = st_fs_fdopendir(fd);
	if (!d) {
		st_fs_close(fd);
		return -errno;
	}
	/* Unlinking while reading a directory may skip entries (tmpfs): repeat until a pass is clean. */
	int rc = 0;
	for (int pass = 0, removed = 1; removed && !rc && pass < CTRL_REMOVE_PASSES_MAX; pass++) {
		struct dirent *e;
		removed = 0;
		st_fs_rewinddir(d);
		while ((e = st_fs_readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
				int urc = st_fs_unlinkat(fd, e->d_name, 0) == 0 ? 0 : -errno;
				if (urc == -EISDIR && depth < CTRL_REMOVE_DEPTH_MAX)   /* not the broker's: still its */
					urc = remove_dir_at(fd, e->d_name, depth + 1);
				if (urc == 0)
					removed++;
				else if (urc != -ENOENT && !rc)
					rc = urc;
			}
	}
	st_fs_closedir(d);
	if (!rc && st_fs_unlinkat(dirfd, dir, AT_REMOVEDIR) < 0)
		rc = -errno;
	return rc;
}

static int remove_dir(int dirfd, const char *dir)
{
	return remove_dir_at(dirfd, dir, 0);
}

/* Every data core closed the topic's partitions: remove what is left on disk and free the slot. */
static void topic_forget(struct dp_core *c, struct ctrl_topic *t)
{
	/* Remove whatever directories are left (partitions that failed to open). */
	int left = 0;
	for (int32_t p = 0; p < t->nparts; p++) {
		char dir[1024];
		dp_partition_dir(&c->b->cfg, dir, sizeof(dir), t->name, t->len, p);
		int rc = remove_dir(AT_FDCWD, dir);
		if (rc < 0) {
			DP_ERR("topic %s: cannot remove %s: %s", t->name, dir, strerror(-rc));
			left++;
		}
	}
	if (left && t->mark[0]) {
		/* The record stays, so the next start finishes the delete; until then the name stays taken
		 * (a topic created under it now would be removed by that start). */
		DP_ERR("topic %s: %d partition directories left; the next start removes them, the name cannot be "
		       "created again until then", t->name, left);
		fsync_dir(c->b->cfg.data_dir);
		return;
	}
	/* The configs go before the record, durably: a topic created again under the name starts bare. */
	{   /* a file may be there with no configs in it (altered back to none) */
		if (st_fs_unlinkat(c->ctrl->conf_dirfd, t->name, 0) < 0 && errno != ENOENT)
			DP_ERR("topic %s: cannot remove its config file: %s (the next start removes it)", t->name,
			       strerror(errno));
		st_fs_fsync(c->ctrl->conf_dirfd);
		free(t->conf_text);
		t->conf_text = NULL;
		t->conf_len = 0;
	}
	/* The record goes last, durably (the directory sync below) before the answer: so it never
	 * outlives the delete into a topic created again under the name. */
	if (t->mark[0] && st_fs_unlinkat(c->ctrl_pids->dirfd, t->mark, 0) < 0 && errno != ENOENT)
		DP_ERR("topic %s: cannot remove %s: %s (a restart removes the topic's partitions again)", t->name,
		       t->mark, strerror(errno));
	t->mark[0] = 0;
	fsync_dir(c->b->cfg.data_dir);
	c->ctrl->nparts -= t->nparts;
	assert(c->ctrl->nparts >= 0);
	t->live = false;
	t->deleting = false;
	DP_INFO("topic %s deleted", t->name);
}

static void ctrl_ack(struct dp_core *c, struct dp_msg *m)
{
	struct dp_ctrl_op *op = m->ctx;
	assert(op->used && op->acks_left > 0);
	if (m->err && !op->err)
		op->err = m->err;
	if (--op->acks_left)
		return;
	struct ctrl_topic *t = &c->ctrl->topics[op->topic_id];
	if (op->reply_type == DP_MSG_CREATE_DONE && op->err && !op->removing && !t->deleting) {
		/* A core could not open its partitions: take the topic back out before answering. */
		DP_WARN("topic %s: creation failed on a data core; removing it again", t->name);
		op->removing = true;
		op->acks_left = (uint32_t)c->b->ndata;
		t->deleting = true;
		send_del(c, op, op->topic_id);
		return;
	}
	if (op->removing)
		topic_forget(c, t);
	struct dp_msg r = { .type = op->reply_type, .err = op->err, .ctx = op->req_ctx,
	                    .idx = op->req_idx, .gen = op->req_gen };
	op->used = false;
	dp_answer_to(c, op->req_core, op->req_reply, &r);
}

void dp_control_msg(struct dp_core *c, struct dp_msg *m)
{
	switch (m->type) {
	case DP_MSG_CREATE: ctrl_create(c, m); return;
	case DP_MSG_DELETE: ctrl_delete(c, m); return;
	case DP_MSG_CREATE_PARTS: ctrl_create_parts(c, m); return;
	case DP_MSG_ALTER_CONF: ctrl_alter(c, m); return;
	case DP_MSG_TOPIC_CONF_ACK:
	case DP_MSG_TOPIC_ADD_ACK:
	case DP_MSG_TOPIC_GROW_ACK:
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

const char *dp_ctrl_topic_name(struct dp_core *c, uint32_t id, uint32_t gen, size_t *len)
{
	if (id >= DP_TOPICS_MAX)
		return NULL;
	const struct ctrl_topic *t = &c->ctrl->topics[id];
	if (!t->live || t->deleting || t->gen != gen)
		return NULL;
	*len = t->len;
	return t->name;
}

/*
 * init only: finish the topic deletes a crash interrupted. Each record
 * (names.h) names a topic whose delete was decided: every partition
 * directory of it still here goes, then the record. A record that does not
 * hold a valid topic name stops the start (it could be any topic's, and
 * guessing could bring a deleted topic back or delete a live one).
 */
static int finish_deletes(const struct dp_config *cfg, int dirfd)
{
	DIR *d = opendir(cfg->data_dir);
	if (!d)
		return -errno;
	/* Gather first: removing entries while reading the directory may skip some. */
	char (*marks)[sizeof(((struct ctrl_topic *)0)->mark)] = NULL;
	size_t nmarks = 0, cap = 0;
	int rc = 0;
	struct dirent *e;
	while (!rc && (e = readdir(d))) {
		size_t tl;
		int32_t p;
		enum dp_dir_name k = dp_dir_name_parse(e->d_name, strlen(e->d_name), &tl, &p);
		if (k == DP_DIR_DELETE_TMP) {
			unlinkat(dirfd, e->d_name, 0);   /* never renamed into place: that delete did not happen */
		} else if (k == DP_DIR_DELETE_MARK) {
			if (strlen(e->d_name) >= sizeof(*marks)) {
				DP_ERR("%s/%s: not a name the broker writes for a delete's record; refusing to start",
				       cfg->data_dir, e->d_name);
				rc = -EINVAL;
			} else if (nmarks == cap) {
				void *nm = realloc(marks, (cap = cap ? 2 * cap : 16) * sizeof(*marks));
				rc = nm ? 0 : -ENOMEM;
				marks = nm ? nm : marks;
			}
			if (!rc)
				strcpy(marks[nmarks++], e->d_name);
		}
	}
	closedir(d);
	for (size_t i = 0; i < nmarks && !rc; i++) {
		char name[DP_TOPIC_NAME_MAX + 1];
		int fd = openat(dirfd, marks[i], O_RDONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : read(fd, name, sizeof(name));
		if (fd >= 0)
			close(fd);
		if (n < 0 || !dp_topic_name_valid(name, (size_t)n)) {
			DP_ERR("%s/%s: %s; refusing to start (its topic's delete cannot be finished)", cfg->data_dir,
			       marks[i], n < 0 ? strerror(errno) : "does not hold a topic name");
			rc = n < 0 ? -errno : -EBADMSG;
			break;
		}
		int removed = 0;
		for (int32_t p = 0; p < DP_PARTITIONS_MAX && !rc; p++) {
			char dir[1024];
			dp_partition_dir(cfg, dir, sizeof(dir), name, (size_t)n, p);
			struct stat st;
			if (stat(dir, &st) < 0)
				continue;
			if ((rc = remove_dir(AT_FDCWD, dir)) < 0)
				DP_ERR("%s: cannot remove: %s; refusing to start (the deleted topic would come back)", dir,
				       strerror(-rc));
			removed++;
		}
		if (rc)
			break;
		fsync(dirfd);   /* the partitions are gone before their record goes */
		if (unlinkat(dirfd, marks[i], 0) < 0) {
			rc = -errno;
			DP_ERR("%s/%s: cannot remove: %s", cfg->data_dir, marks[i], strerror(errno));
			break;
		}
		fsync(dirfd);
		DP_WARN("topic %.*s: finished its delete that a stop interrupted (%d partition directories removed)",
		        (int)n, name, removed);
	}
	free(marks);
	return rc;
}

/*
 * init only: each recovered topic's configs from its file (names.h). A temp
 * file was never renamed into place (its create was never answered); a file
 * whose topic has no partition directory is a create that stopped before
 * them, or a delete's leftover: both go. A file that does not parse stops
 * the start: going on without it would quietly drop a retention or limit
 * the topic was created with.
 */
static int load_configs(struct dp_ctrl *k, const struct dp_config *cfg, const char *cdir, int32_t ntopics)
{
	DIR *d = st_fs_opendir(cdir);
	if (!d)
		return -errno;
	int rc = 0, dropped = 0;
	struct dirent *e;
	char text[DP_TOPIC_CONFIG_TEXT_BYTES_MAX + 1];
	while (!rc && (e = st_fs_readdir(d))) {
		size_t len = strlen(e->d_name);
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		int32_t id = ctrl_find(k, e->d_name, len);
		if (id < 0 || id >= ntopics) {
			if (st_fs_unlinkat(k->conf_dirfd, e->d_name, 0) == 0)
				dropped++;
			if (strncmp(e->d_name, DP_TOPIC_CONFIG_TMP_PREFIX, strlen(DP_TOPIC_CONFIG_TMP_PREFIX)))
				DP_WARN("%s/%s/%s removed: no such topic (a create or delete a stop interrupted)", cfg->data_dir,
				        DP_TOPIC_CONFIG_DIR, e->d_name);
			continue;
		}
		struct ctrl_topic *t = &k->topics[id];
		/* st_fs_*: conf_dirfd is the simulator's under ST_FS_SIM (storage/fs.h) */
		int ffd = st_fs_openat(k->conf_dirfd, e->d_name, O_RDONLY | O_CLOEXEC, 0);
		ssize_t n = ffd < 0 ? -1 : st_fs_pread(ffd, text, sizeof(text), 0);
		if (ffd >= 0)
			st_fs_close(ffd);
		struct dp_topic_configs tc;
		const char *why = n < 0 ? strerror(errno)
		                  : (size_t)n > DP_TOPIC_CONFIG_TEXT_BYTES_MAX ? "longer than a config text"
		                  : dp_topic_configs_parse(&tc, text, (size_t)n, UINT64_MAX);   /* a lowered flag clamps it (partition.c) */
		if (why) {
			DP_ERR("%s/%s/%s: %s; refusing to start (the topic's configs would be lost)", cfg->data_dir,
			       DP_TOPIC_CONFIG_DIR, e->d_name, why);
			rc = -EBADMSG;
			break;
		}
		if (n == 0)
			continue;   /* altered back to no configs */
		t->conf_text = malloc((size_t)n);
		if (!t->conf_text) {
			rc = -ENOMEM;
			break;
		}
		memcpy(t->conf_text, text, (size_t)n);
		t->conf_len = (uint32_t)n;
		dp_topic_configs_applied(&tc, &t->conf);
		t->conf.text = t->conf_text;
		t->conf.text_len = t->conf_len;
		DP_INFO("topic %s: its configs loaded (%zd bytes)", t->name, n);
	}
	st_fs_closedir(d);
	if (dropped)
		st_fs_fsync(k->conf_dirfd);
	return rc;
}

/* init only: the control catalog and every data core's copy from the data directory. */
int dp_scan_data_dir(struct dp_broker *b)
{
	struct dp_core *cc = b->cores[0];
	cc->ctrl = calloc(1, sizeof(*cc->ctrl));
	cc->ctrl_pids = calloc(1, sizeof(*cc->ctrl_pids));
	if (!cc->ctrl || !cc->ctrl_pids)
		return -ENOMEM;
	cc->ctrl_pids->dirfd = -1;
	cc->ctrl->conf_dirfd = -1;
	cc->ctrl->conf_sync_faults = b->cfg.fault_conf_sync_fail;
	if (mkdir(b->cfg.data_dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	int prc = dp_pid_init(cc->ctrl_pids, b->cfg.data_dir);
	if (prc < 0)
		return prc;
	/* st_fs_*: the calls the simulator's disk sees too (storage/fs.h). */
	char cdir[1024];
	snprintf(cdir, sizeof(cdir), "%s/%s", b->cfg.data_dir, DP_TOPIC_CONFIG_DIR);
	if (st_fs_mkdir(cdir, 0755) < 0 && errno != EEXIST)
		return -errno;
	cc->ctrl->conf_dirfd = st_fs_open(cdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (cc->ctrl->conf_dirfd < 0)
		return -errno;
	st_fs_fsync(cc->ctrl_pids->dirfd);
	if ((prc = finish_deletes(&b->cfg, cc->ctrl_pids->dirfd)) < 0)
		return prc;
	DIR *d = opendir(b->cfg.data_dir);
	if (!d)
		return -errno;
	struct ctrl_topic *ts = cc->ctrl->topics;
	int32_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len;
		int32_t p;
		enum dp_dir_name k = dp_dir_name_parse(e->d_name, strlen(e->d_name), &len, &p);
		if (k == DP_DIR_OTHER || k == DP_DIR_DELETE_MARK || k == DP_DIR_DELETE_TMP)
			continue;   /* the delete records: finish_deletes took care of them */
		/* Skipped, not fatal: one stray name must not keep every other partition offline. */
		if (k != DP_DIR_PARTITION) {
			DP_WARN("%s/%s skipped: %s", b->cfg.data_dir, e->d_name, dp_dir_name_why(k));
			continue;
		}
		struct stat st;
		/* A link to a directory is taken, as Kafka's File.isDirectory does (fstatat follows it). */
		if (e->d_type != DT_DIR && (fstatat(dirfd(d), e->d_name, &st, 0) < 0 || !S_ISDIR(st.st_mode))) {
			DP_WARN("%s/%s skipped: not a directory", b->cfg.data_dir, e->d_name);
			continue;
		}
		int32_t id = ctrl_find(cc->ctrl, e->d_name, len);
		if (id < 0) {
			if (n == DP_TOPICS_MAX) {
				DP_WARN("%s/%s skipped: %d topics recovered already (the catalog's limit)", b->cfg.data_dir,
				        e->d_name, DP_TOPICS_MAX);
				continue;
			}
			id = n++;
			ts[id] = (struct ctrl_topic){ .live = true, .gen = 1, .len = (uint16_t)len };
			memcpy(ts[id].name, e->d_name, len);
		}
		if (p + 1 > ts[id].nparts)
			ts[id].nparts = p + 1;
	}
	closedir(d);
	for (int32_t id = 0; id < n; id++)
		cc->ctrl->nparts += ts[id].nparts;
	if ((prc = load_configs(cc->ctrl, &b->cfg, cdir, n)) < 0)
		return prc;
	if (cc->ctrl->nparts > b->partitions_max)
		DP_WARN("%lld partitions recovered, but the %s holds %lld: raise it (%s) or delete topics; new "
		        "topics are refused", (long long)cc->ctrl->nparts,
		        b->partitions_by_flag ? "partition limit" : "file descriptor limit", (long long)b->partitions_max,
		        b->partitions_by_flag ? "--partitions-max" : "ulimit -n");
	for (int32_t id = 0; id < n; id++) {
		DP_INFO("recovered topic %s with %d partitions", ts[id].name, ts[id].nparts);
		for (int i = 0; i < b->ndata; i++) {
			int rc = dp_topic_install(b->cores[b->first_data + i], (uint32_t)id, ts[id].gen,
			                          ts[id].name, ts[id].len, &ts[id].conf, ts[id].nparts);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/* teardown, after the cores stopped: what dp_scan_data_dir made (a simulated machine boots many times). */
void dp_scan_release(struct dp_core *cc)
{
	if (cc->ctrl) {
		for (int32_t i = 0; i < DP_TOPICS_MAX; i++)
			free(cc->ctrl->topics[i].conf_text);
		if (cc->ctrl->conf_dirfd >= 0)
			st_fs_close(cc->ctrl->conf_dirfd);
	}
	free(cc->ctrl);
	cc->ctrl = NULL;
	if (cc->ctrl_pids) {
		free(cc->ctrl_pids->w);
		if (cc->ctrl_pids->dirfd >= 0)
			close(cc->ctrl_pids->dirfd);
		free(cc->ctrl_pids);
		cc->ctrl_pids = NULL;
	}
}
