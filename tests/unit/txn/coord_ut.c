/*
 * coord_ut.c - the transaction coordinator's pure logic (txn/coord.c): the
 * state table against Kafka's, the asserting setter, the id table, the
 * partitions and groups of a transaction, the log value encoding and
 * recovery from coordinator-log batches.
 *
 * Locality: test thread only (one test forks a child that must abort).
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "batch.h"
#include "coord.h"

#define UT_NSTATES 8
#define UT_MANY_IDS 5000
#define UT_BUF_BYTES (4u << 20)   /* > 10000 partitions of 249-byte topics */
#define UT_TS 1700000000000ll

static uint8_t ut_buf[UT_BUF_BYTES], ut_buf2[UT_BUF_BYTES];

/*
 * Kafka's validPreviousStates (README §5.2), written out independently of
 * coord.c: expected[to][from].
 */
static const bool expected[UT_NSTATES][UT_NSTATES] = {
	[TXN_EMPTY] = { [TXN_EMPTY] = 1, [TXN_COMPLETE_COMMIT] = 1, [TXN_COMPLETE_ABORT] = 1 },
	[TXN_ONGOING] = { [TXN_ONGOING] = 1, [TXN_EMPTY] = 1, [TXN_COMPLETE_COMMIT] = 1,
	                  [TXN_COMPLETE_ABORT] = 1 },
	[TXN_PREPARE_COMMIT] = { [TXN_ONGOING] = 1 },
	[TXN_PREPARE_ABORT] = { [TXN_ONGOING] = 1, [TXN_PREPARE_EPOCH_FENCE] = 1 },
	[TXN_COMPLETE_COMMIT] = { [TXN_PREPARE_COMMIT] = 1 },
	[TXN_COMPLETE_ABORT] = { [TXN_PREPARE_ABORT] = 1 },
	[TXN_DEAD] = { [TXN_EMPTY] = 1, [TXN_COMPLETE_COMMIT] = 1, [TXN_COMPLETE_ABORT] = 1 },
	[TXN_PREPARE_EPOCH_FENCE] = { [TXN_ONGOING] = 1 },
};

static struct txn_coord *ut_new(void)
{
	struct txn_coord *c = NULL;
	CU_ASSERT_FATAL(txn_coord_create(&c) == 0 && c);
	return c;
}

static void test_state_table(void)
{
	static const char *const names[UT_NSTATES] = { "Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
		"CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence" };
	int legal = 0;
	for (int to = 0; to < UT_NSTATES; to++) {
		CU_ASSERT_STRING_EQUAL(txn_state_name((enum txn_state)to), names[to]);
		for (int from = 0; from < UT_NSTATES; from++) {
			bool ok = txn_state_move_ok((enum txn_state)from, (enum txn_state)to);
			if (ok != expected[to][from])
				fprintf(stderr, "\n%s -> %s: got %d\n", names[from], names[to], ok);
			CU_ASSERT_EQUAL(ok, expected[to][from]);
			legal += ok;
		}
	}
	CU_ASSERT_EQUAL(legal, 16);   /* the count of arrows in §5.2 */
	/* Out-of-range states are never legal, on either side. */
	for (int s = 0; s < UT_NSTATES; s++) {
		CU_ASSERT_FALSE(txn_state_move_ok((enum txn_state)s, (enum txn_state)UT_NSTATES));
		CU_ASSERT_FALSE(txn_state_move_ok((enum txn_state)UT_NSTATES, (enum txn_state)s));
		CU_ASSERT_FALSE(txn_state_move_ok((enum txn_state)-1, (enum txn_state)s));
		CU_ASSERT_FALSE(txn_state_move_ok((enum txn_state)s, (enum txn_state)-1));
	}
	CU_ASSERT_STRING_EQUAL(txn_state_name((enum txn_state)UT_NSTATES), "?");
}

/* Runs txn_set_state(from -> to) in a child; returns its wait status. */
/* A stand-alone entry named "x" (its name is a flexible array: no initialiser). */
static struct txn_meta *ut_meta(enum txn_state state)
{
	static _Alignas(struct txn_meta) unsigned char mem[sizeof(struct txn_meta) + 2];
	struct txn_meta *m = (struct txn_meta *)mem;
	memset(mem, 0, sizeof(mem));
	m->id_len = 1;
	m->id[0] = 'x';
	m->state = state;
	return m;
}

static int ut_move_in_child(enum txn_state from, enum txn_state to)
{
	pid_t pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);   /* the expected complaint is noise here */
		if (fd >= 0)
			dup2(fd, STDERR_FILENO);
		struct txn_meta *m = ut_meta(from);
		txn_set_state(m, to);
		_exit(m->state == to ? 0 : 3);
	}
	int st = 0;
	CU_ASSERT_EQUAL_FATAL(waitpid(pid, &st, 0), pid);
	return st;
}

static void test_setter(void)
{
	/* Legal moves return the old state and set the new one. */
	struct txn_meta *m = ut_meta(TXN_EMPTY);
	static const enum txn_state path[] = { TXN_ONGOING, TXN_ONGOING, TXN_PREPARE_EPOCH_FENCE, TXN_PREPARE_ABORT,
		TXN_COMPLETE_ABORT, TXN_ONGOING, TXN_PREPARE_COMMIT, TXN_COMPLETE_COMMIT, TXN_EMPTY, TXN_DEAD };
	enum txn_state prev = TXN_EMPTY;
	for (size_t i = 0; i < sizeof(path) / sizeof(path[0]); i++) {
		CU_ASSERT_EQUAL(txn_set_state(m, path[i]), prev);
		CU_ASSERT_EQUAL(m->state, path[i]);
		prev = path[i];
	}
	/* Each decision (into Prepare*) takes the next serial, and only a decision: 2 on that path. */
	CU_ASSERT_EQUAL(m->serial, 2);
	struct txn_meta *w = ut_meta(TXN_ONGOING);
	w->serial = TXN_SERIAL_MAX;   /* wraps to 1, never 0 ("none") or negative */
	txn_set_state(w, TXN_PREPARE_COMMIT);
	CU_ASSERT_EQUAL(w->serial, 1);
	txn_set_state(w, TXN_COMPLETE_COMMIT);
	txn_set_state(w, TXN_ONGOING);
	CU_ASSERT_EQUAL(w->serial, 1);
	txn_set_state(w, TXN_PREPARE_ABORT);
	CU_ASSERT_EQUAL(w->serial, 2);
	/* Every illegal move dies with SIGABRT; a few legal ones exit cleanly. */
	for (int from = 0; from < UT_NSTATES; from++)
		for (int to = 0; to < UT_NSTATES; to++) {
			if (expected[to][from] && !(from == TXN_ONGOING && to == TXN_PREPARE_COMMIT))
				continue;
			int st = ut_move_in_child((enum txn_state)from, (enum txn_state)to);
			bool died = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
			bool clean = WIFEXITED(st) && WEXITSTATUS(st) == 0;
			CU_ASSERT(expected[to][from] ? clean : died);
		}
	/* Dead is absorbing. */
	int st = ut_move_in_child(TXN_DEAD, TXN_EMPTY);
	CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

/*
 * The driver's moves (coord.h's picture), written out independently of
 * coord.c: drive_expected[to][from], and the transaction states each
 * target works on.
 */
#define UT_NDRIVES 8
static const bool drive_expected[UT_NDRIVES][UT_NDRIVES] = {
	[TXN_DRIVE_IDLE] = { [TXN_DRIVE_INIT] = 1, [TXN_DRIVE_ADD] = 1, [TXN_DRIVE_ADD_ACKS] = 1,
	                     [TXN_DRIVE_OFFSETS] = 1, [TXN_DRIVE_PREPARE] = 1, [TXN_DRIVE_MARKERS] = 1,
	                     [TXN_DRIVE_REAUTH] = 1 },
	[TXN_DRIVE_INIT] = { [TXN_DRIVE_IDLE] = 1 },
	[TXN_DRIVE_ADD] = { [TXN_DRIVE_IDLE] = 1 },
	[TXN_DRIVE_ADD_ACKS] = { [TXN_DRIVE_ADD] = 1 },
	[TXN_DRIVE_OFFSETS] = { [TXN_DRIVE_IDLE] = 1 },
	[TXN_DRIVE_PREPARE] = { [TXN_DRIVE_IDLE] = 1 },
	[TXN_DRIVE_MARKERS] = { [TXN_DRIVE_PREPARE] = 1 },
	[TXN_DRIVE_REAUTH] = { [TXN_DRIVE_IDLE] = 1 },
};
static const bool drive_state_ok[UT_NDRIVES][UT_NSTATES] = {
	[TXN_DRIVE_IDLE] = { 1, 1, 1, 1, 1, 1, 1, 1 },
	[TXN_DRIVE_INIT] = { [TXN_EMPTY] = 1, [TXN_COMPLETE_COMMIT] = 1, [TXN_COMPLETE_ABORT] = 1 },
	[TXN_DRIVE_ADD] = { [TXN_ONGOING] = 1 },
	[TXN_DRIVE_ADD_ACKS] = { [TXN_ONGOING] = 1 },
	[TXN_DRIVE_OFFSETS] = { [TXN_ONGOING] = 1 },
	[TXN_DRIVE_PREPARE] = { [TXN_PREPARE_COMMIT] = 1, [TXN_PREPARE_ABORT] = 1 },
	[TXN_DRIVE_MARKERS] = { [TXN_PREPARE_COMMIT] = 1, [TXN_PREPARE_ABORT] = 1 },
	[TXN_DRIVE_REAUTH] = { [TXN_ONGOING] = 1 },
};

static void test_drive_table(void)
{
	static const char *const names[UT_NDRIVES] = { "Idle", "Init", "AddPartitions", "AddPartitionsAcks",
		"AddOffsets", "Prepare", "Markers", "Reauthorise" };
	CU_ASSERT_EQUAL(TXN_DRIVE_COUNT, UT_NDRIVES);
	int legal = 0;
	for (int to = 0; to < UT_NDRIVES; to++) {
		CU_ASSERT_STRING_EQUAL(txn_drive_name((enum txn_drive)to), names[to]);
		for (int from = 0; from < UT_NDRIVES; from++) {
			bool ok = txn_drive_move_ok((enum txn_drive)from, (enum txn_drive)to);
			if (ok != drive_expected[to][from])
				fprintf(stderr, "\n%s -> %s: got %d\n", names[from], names[to], ok);
			CU_ASSERT_EQUAL(ok, drive_expected[to][from]);
			legal += ok;
		}
	}
	CU_ASSERT_EQUAL(legal, 14);   /* the arrows of coord.h's picture */
	for (int d = 0; d < UT_NDRIVES; d++) {
		CU_ASSERT_FALSE(txn_drive_move_ok((enum txn_drive)d, TXN_DRIVE_COUNT));
		CU_ASSERT_FALSE(txn_drive_move_ok(TXN_DRIVE_COUNT, (enum txn_drive)d));
		CU_ASSERT_FALSE(txn_drive_move_ok((enum txn_drive)-1, (enum txn_drive)d));
	}
	CU_ASSERT_STRING_EQUAL(txn_drive_name(TXN_DRIVE_COUNT), "?");
	/* Every (drive, state, answers due, resend) combination: txn_drive_ok agrees with the spec. */
	struct txn_meta *m = ut_meta(TXN_EMPTY);
	for (int from = 0; from < UT_NDRIVES; from++)
		for (int to = 0; to < UT_NDRIVES; to++)
			for (int st = 0; st < UT_NSTATES; st++)
				for (int due = 0; due < 2; due++)
					for (int listed = 0; listed < 2; listed++) {
						m->drive = (enum txn_drive)from;
						m->state = (enum txn_state)st;
						m->markers_left = (uint32_t)due;
						m->retry_listed = listed;
						bool want = drive_expected[to][from] && drive_state_ok[to][st] && !due &&
						            !(to == TXN_DRIVE_IDLE && listed);
						CU_ASSERT_EQUAL(txn_drive_ok(m, (enum txn_drive)to), want);
					}
}

/* Runs txn_set_drive(from -> to) with m in state st, due answers outstanding, in a child. */
static int ut_drive_in_child(enum txn_drive from, enum txn_drive to, enum txn_state st, uint32_t due, bool listed)
{
	pid_t pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		if (fd >= 0)
			dup2(fd, STDERR_FILENO);
		struct txn_meta *m = ut_meta(st);
		m->drive = from;
		m->markers_left = due;
		m->retry_listed = listed;
		txn_set_drive(m, to);
		_exit(m->drive == to ? 0 : 3);
	}
	int st_ = 0;
	CU_ASSERT_EQUAL_FATAL(waitpid(pid, &st_, 0), pid);
	return st_;
}

static void test_drive_setter(void)
{
	/* Each op's whole walk, with the transaction states the driver gives it. */
	static const struct { enum txn_drive to; enum txn_state st; } walk[] = {
		{ TXN_DRIVE_INIT, TXN_EMPTY }, { TXN_DRIVE_IDLE, TXN_EMPTY },
		{ TXN_DRIVE_ADD, TXN_ONGOING }, { TXN_DRIVE_ADD_ACKS, TXN_ONGOING }, { TXN_DRIVE_IDLE, TXN_ONGOING },
		{ TXN_DRIVE_OFFSETS, TXN_ONGOING }, { TXN_DRIVE_IDLE, TXN_ONGOING },
		{ TXN_DRIVE_PREPARE, TXN_PREPARE_COMMIT }, { TXN_DRIVE_MARKERS, TXN_PREPARE_COMMIT },
		{ TXN_DRIVE_IDLE, TXN_COMPLETE_COMMIT },
		{ TXN_DRIVE_REAUTH, TXN_ONGOING }, { TXN_DRIVE_IDLE, TXN_ONGOING },
		{ TXN_DRIVE_PREPARE, TXN_PREPARE_ABORT }, { TXN_DRIVE_IDLE, TXN_PREPARE_ABORT },   /* a failed op */
	};
	struct txn_meta *m = ut_meta(TXN_EMPTY);
	enum txn_drive prev = TXN_DRIVE_IDLE;
	for (size_t i = 0; i < sizeof(walk) / sizeof(walk[0]); i++) {
		m->state = walk[i].st;
		CU_ASSERT_EQUAL(txn_set_drive(m, walk[i].to), prev);
		CU_ASSERT_EQUAL(m->drive, walk[i].to);
		CU_ASSERT_EQUAL(txn_busy(m), walk[i].to != TXN_DRIVE_IDLE);
		prev = walk[i].to;
	}
	/* Every move the table refuses dies with SIGABRT; every one it allows, in a state it works on, exits. */
	for (int from = 0; from < UT_NDRIVES; from++)
		for (int to = 0; to < UT_NDRIVES; to++) {
			enum txn_state st = TXN_EMPTY;
			for (int s = 0; s < UT_NSTATES; s++)
				if (drive_state_ok[to][s]) {
					st = (enum txn_state)s;
					break;
				}
			int w = ut_drive_in_child((enum txn_drive)from, (enum txn_drive)to, st, 0, false);
			bool died = WIFSIGNALED(w) && WTERMSIG(w) == SIGABRT;
			bool clean = WIFEXITED(w) && WEXITSTATUS(w) == 0;
			CU_ASSERT(drive_expected[to][from] ? clean : died);
		}
	/* A legal move in the wrong transaction state, with answers due, or into Idle with a resend pending. */
	int w = ut_drive_in_child(TXN_DRIVE_IDLE, TXN_DRIVE_PREPARE, TXN_ONGOING, 0, false);
	CU_ASSERT(WIFSIGNALED(w) && WTERMSIG(w) == SIGABRT);
	w = ut_drive_in_child(TXN_DRIVE_IDLE, TXN_DRIVE_INIT, TXN_ONGOING, 0, false);
	CU_ASSERT(WIFSIGNALED(w) && WTERMSIG(w) == SIGABRT);
	w = ut_drive_in_child(TXN_DRIVE_MARKERS, TXN_DRIVE_IDLE, TXN_COMPLETE_ABORT, 1, false);
	CU_ASSERT(WIFSIGNALED(w) && WTERMSIG(w) == SIGABRT);
	w = ut_drive_in_child(TXN_DRIVE_ADD, TXN_DRIVE_ADD_ACKS, TXN_ONGOING, 2, false);
	CU_ASSERT(WIFSIGNALED(w) && WTERMSIG(w) == SIGABRT);
	w = ut_drive_in_child(TXN_DRIVE_PREPARE, TXN_DRIVE_IDLE, TXN_PREPARE_COMMIT, 0, true);
	CU_ASSERT(WIFSIGNALED(w) && WTERMSIG(w) == SIGABRT);
	w = ut_drive_in_child(TXN_DRIVE_MARKERS, TXN_DRIVE_IDLE, TXN_COMPLETE_COMMIT, 0, false);
	CU_ASSERT(WIFEXITED(w) && WEXITSTATUS(w) == 0);
}

static int ut_id(char *buf, int i)
{
	return sprintf(buf, "txn-%d-%x", i, (unsigned)i * 2654435761u);
}

static void test_table(void)
{
	struct txn_coord *c = ut_new();
	char id[64];
	CU_ASSERT_PTR_NULL(txn_coord_find(c, "nope", 4));
	for (int i = 0; i < UT_MANY_IDS; i++) {
		int n = ut_id(id, i);
		struct txn_meta *m = txn_coord_add(c, id, (size_t)n);
		CU_ASSERT_PTR_NOT_NULL_FATAL(m);
		CU_ASSERT(m->id_len == n && memcmp(m->id, id, (size_t)n) == 0);
		CU_ASSERT(m->state == TXN_EMPTY && m->pid == -1 && m->epoch == -1 && m->prev_pid == -1);
		CU_ASSERT(m->ntps == 0 && m->ngroups == 0);
		m->pid = i;   /* a tag to check addresses stay stable through growth */
	}
	CU_ASSERT_EQUAL(txn_coord_count(c), UT_MANY_IDS);
	for (int i = 0; i < UT_MANY_IDS; i++) {
		int n = ut_id(id, i);
		struct txn_meta *m = txn_coord_find(c, id, (size_t)n);
		CU_ASSERT_FATAL(m && m->pid == i);
		CU_ASSERT_PTR_NULL(txn_coord_find(c, id, (size_t)n - 1));   /* a prefix is another id */
	}
	/* Remove two in three: the rest stay findable (backward shift keeps clusters whole). */
	for (int i = 0; i < UT_MANY_IDS; i++) {
		if (i % 3 == 0)
			continue;
		int n = ut_id(id, i);
		txn_coord_remove(c, txn_coord_find(c, id, (size_t)n));
	}
	uint32_t left = (UT_MANY_IDS + 2) / 3;
	CU_ASSERT_EQUAL(txn_coord_count(c), left);
	for (int i = 0; i < UT_MANY_IDS; i++) {
		int n = ut_id(id, i);
		struct txn_meta *m = txn_coord_find(c, id, (size_t)n);
		CU_ASSERT(i % 3 == 0 ? m && m->pid == i : m == NULL);
	}
	/* Iteration visits each live entry exactly once. */
	static uint8_t seen[UT_MANY_IDS];
	memset(seen, 0, sizeof(seen));
	uint32_t cur = 0, visited = 0;
	for (struct txn_meta *m; (m = txn_coord_next(c, &cur)) != NULL; visited++) {
		CU_ASSERT_FATAL(m->pid >= 0 && m->pid < UT_MANY_IDS && m->pid % 3 == 0);
		CU_ASSERT_EQUAL(seen[m->pid]++, 0);
	}
	CU_ASSERT_EQUAL(visited, left);
	CU_ASSERT_PTR_NULL(txn_coord_next(c, &cur));   /* stays at the end */
	/* Re-add the removed ones; all are found again. */
	for (int i = 0; i < UT_MANY_IDS; i++)
		if (i % 3) {
			int n = ut_id(id, i);
			struct txn_meta *m = txn_coord_add(c, id, (size_t)n);
			CU_ASSERT_FATAL(m != NULL);
			m->pid = i;
		}
	CU_ASSERT_EQUAL(txn_coord_count(c), UT_MANY_IDS);
	for (int i = 0; i < UT_MANY_IDS; i++) {
		int n = ut_id(id, i);
		struct txn_meta *m = txn_coord_find(c, id, (size_t)n);
		CU_ASSERT(m && m->pid == i);
	}
	/* Longest id, and a too-long one is never found. */
	static char big[TXN_ID_BYTES_MAX + 1];
	memset(big, 'i', sizeof(big));
	CU_ASSERT_PTR_NOT_NULL(txn_coord_add(c, big, TXN_ID_BYTES_MAX));
	CU_ASSERT_PTR_NOT_NULL(txn_coord_find(c, big, TXN_ID_BYTES_MAX));
	CU_ASSERT_PTR_NULL(txn_coord_find(c, big, TXN_ID_BYTES_MAX + 1));
	/* Remove everything. */
	cur = 0;
	for (struct txn_meta *m; (m = txn_coord_next(c, &cur)) != NULL;) {
		txn_coord_remove(c, m);
		cur = 0;   /* removal shifts entries: restart */
	}
	CU_ASSERT_EQUAL(txn_coord_count(c), 0);
	cur = 0;
	CU_ASSERT_PTR_NULL(txn_coord_next(c, &cur));
	txn_coord_destroy(c);
	txn_coord_destroy(NULL);
}

static void ut_topic(char *buf, size_t len, int salt)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)('a' + (i * 7 + (size_t)salt) % 26);
}

static void test_tps_groups(void)
{
	struct txn_coord *c = ut_new();
	struct txn_meta *m = txn_coord_add(c, "t", 1);
	CU_ASSERT_FATAL(m != NULL);
	CU_ASSERT_FALSE(txn_meta_has_tp(m, "a", 1, 0));
	CU_ASSERT_EQUAL(txn_meta_add_tp(m, "a", 1, 0), 0);
	CU_ASSERT_EQUAL(txn_meta_add_tp(m, "a", 1, 0), 0);   /* again: no duplicate */
	CU_ASSERT_EQUAL(m->ntps, 1);
	CU_ASSERT(txn_meta_has_tp(m, "a", 1, 0));
	CU_ASSERT_FALSE(txn_meta_has_tp(m, "a", 1, 1));
	CU_ASSERT_FALSE(txn_meta_has_tp(m, "ab", 2, 0));
	CU_ASSERT_FALSE(txn_meta_has_tp(m, "", 0, 0));
	static char t[TXN_TOPIC_BYTES_MAX + 2];
	ut_topic(t, sizeof(t), 0);
	CU_ASSERT_EQUAL(txn_meta_add_tp(m, t, TXN_TOPIC_BYTES_MAX + 1, 0), -EINVAL);
	CU_ASSERT_EQUAL(txn_meta_add_tp(m, t, TXN_TOPIC_BYTES_MAX, 0), 0);
	CU_ASSERT(txn_meta_has_tp(m, t, TXN_TOPIC_BYTES_MAX, 0));
	CU_ASSERT_EQUAL(m->tps[1].topic[TXN_TOPIC_BYTES_MAX], 0);   /* NUL-terminated copy */
	/* Fill to the limit: the next distinct partition is refused, duplicates still fine. */
	for (int32_t p = 1; m->ntps < TXN_PARTS_MAX; p++)
		CU_ASSERT_EQUAL_FATAL(txn_meta_add_tp(m, "a", 1, p), 0);
	CU_ASSERT_EQUAL(txn_meta_add_tp(m, "b", 1, 0), -ENOSPC);
	CU_ASSERT_EQUAL(txn_meta_add_tp(m, "a", 1, 17), 0);
	CU_ASSERT_EQUAL(m->ntps, TXN_PARTS_MAX);
	CU_ASSERT(txn_meta_has_tp(m, "a", 1, TXN_PARTS_MAX - 2));
	CU_ASSERT_FALSE(txn_meta_has_tp(m, "a", 1, TXN_PARTS_MAX - 1));

	static char g[TXN_GROUP_BYTES_MAX + 1];
	ut_topic(g, sizeof(g), 3);
	CU_ASSERT_EQUAL(txn_meta_add_group(m, g, TXN_GROUP_BYTES_MAX + 1), -EINVAL);
	CU_ASSERT_EQUAL(txn_meta_add_group(m, g, TXN_GROUP_BYTES_MAX), 0);
	CU_ASSERT(txn_meta_has_group(m, g, TXN_GROUP_BYTES_MAX));
	CU_ASSERT_FALSE(txn_meta_has_group(m, g, TXN_GROUP_BYTES_MAX - 1));
	CU_ASSERT_EQUAL(txn_meta_add_group(m, g, TXN_GROUP_BYTES_MAX), 0);
	CU_ASSERT_EQUAL(m->ngroups, 1);
	char name[16];
	for (int i = 0; m->ngroups < TXN_GROUPS_MAX; i++)
		CU_ASSERT_EQUAL_FATAL(txn_meta_add_group(m, name, (size_t)sprintf(name, "g%d", i)), 0);
	CU_ASSERT_EQUAL(txn_meta_add_group(m, "extra", 5), -ENOSPC);
	CU_ASSERT_EQUAL(txn_meta_add_group(m, "g0", 2), 0);
	CU_ASSERT(txn_meta_has_group(m, "g62", 3));
	CU_ASSERT_FALSE(txn_meta_has_group(m, "g63", 3));

	txn_meta_clear_txn(m);
	CU_ASSERT(m->ntps == 0 && m->ngroups == 0);
	CU_ASSERT_FALSE(txn_meta_has_tp(m, "a", 1, 0));
	CU_ASSERT_FALSE(txn_meta_has_group(m, "g0", 2));
	CU_ASSERT_EQUAL(txn_meta_add_tp(m, "z", 1, 9), 0);
	CU_ASSERT(txn_meta_has_tp(m, "z", 1, 9));
	txn_coord_destroy(c);
}

/* Fills m with a transaction of ntps partitions (topic length tlen) and ng groups. */
static void ut_fill(struct txn_meta *m, uint32_t ntps, size_t tlen, uint32_t ng, size_t glen, int salt)
{
	static char t[TXN_GROUP_BYTES_MAX + 16];
	m->pid = 0x0102030405060708ll + salt;
	m->epoch = (int16_t)(TXN_EPOCH_MAX - salt);
	m->prev_pid = salt ? 77 : -1;
	m->prev_epoch = salt ? 3 : -1;
	m->state = (enum txn_state)(salt % UT_NSTATES);
	m->timeout_ms = TXN_TIMEOUT_MAX_MS - salt;
	m->start_ms = UT_TS + salt;
	m->update_ms = UT_TS + 2 * salt;
	m->serial = salt ? TXN_SERIAL_MAX - salt : 0;
	txn_meta_clear_txn(m);
	for (uint32_t i = 0; i < ntps; i++) {
		size_t n = tlen ? tlen : 1 + i % 20;
		ut_topic(t, n, (int)i + salt);
		CU_ASSERT_EQUAL_FATAL(txn_meta_add_tp(m, t, n, (int32_t)(i * 31 + 1)), 0);
	}
	for (uint32_t i = 0; i < ng; i++) {
		size_t n = glen ? glen : 1 + i % 30;
		ut_topic(t, n, (int)i);
		memcpy(t, &i, sizeof(i) < n ? sizeof(i) : n);   /* keeps groups distinct */
		if (n < sizeof(i))
			t[0] = (char)('A' + i);
		CU_ASSERT_EQUAL_FATAL(txn_meta_add_group(m, t, n), 0);
	}
	CU_ASSERT_EQUAL_FATAL(m->ntps, ntps);
	CU_ASSERT_EQUAL_FATAL(m->ngroups, ng);
}

static bool ut_same(const struct txn_meta *a, const struct txn_meta *b)
{
	if (a->pid != b->pid || a->epoch != b->epoch || a->prev_pid != b->prev_pid || a->prev_epoch != b->prev_epoch ||
	    a->state != b->state || a->timeout_ms != b->timeout_ms || a->start_ms != b->start_ms ||
	    a->update_ms != b->update_ms || a->serial != b->serial || a->ntps != b->ntps || a->ngroups != b->ngroups)
		return false;
	for (uint32_t i = 0; i < a->ntps; i++)
		if (a->tps[i].partition != b->tps[i].partition || a->tps[i].topic_len != b->tps[i].topic_len ||
		    memcmp(a->tps[i].topic, b->tps[i].topic, a->tps[i].topic_len) != 0)
			return false;
	for (uint32_t i = 0; i < a->ngroups; i++)
		if (a->groups[i].len != b->groups[i].len || memcmp(a->groups[i].id, b->groups[i].id, a->groups[i].len))
			return false;
	return true;
}

/* Encode src, decode into dst, compare; returns the encoded size. */
static int ut_round_trip(const struct txn_meta *src, struct txn_meta *dst)
{
	size_t need = txn_meta_value_size(src);
	CU_ASSERT_FATAL(need <= UT_BUF_BYTES);
	if (need > 0)
		CU_ASSERT_EQUAL(txn_meta_encode(src, ut_buf, need - 1), -ENOSPC);
	int n = txn_meta_encode(src, ut_buf, UT_BUF_BYTES);
	CU_ASSERT_EQUAL_FATAL(n, (int)need);
	CU_ASSERT(ut_buf[0] == 0 && ut_buf[1] == 1);   /* version 1 */
	CU_ASSERT_EQUAL(ut_buf[22], (uint8_t)src->state);
	char id_before[8];
	memcpy(id_before, dst->id, sizeof(id_before));
	CU_ASSERT_EQUAL_FATAL(txn_meta_decode(dst, ut_buf, (size_t)n), 0);
	CU_ASSERT(ut_same(src, dst));
	CU_ASSERT_EQUAL(memcmp(id_before, dst->id, sizeof(id_before)), 0);   /* id untouched */
	return n;
}

static void test_value_round_trip(void)
{
	struct txn_coord *c = ut_new();
	struct txn_meta *a = txn_coord_add(c, "a", 1), *b = txn_coord_add(c, "b", 1);
	CU_ASSERT_FATAL(a && b);
	/* Fresh entry: no partitions, no groups, -1s. */
	CU_ASSERT_EQUAL(ut_round_trip(a, b), 47 + 4 + 4);
	ut_fill(a, 3, 5, 2, 4, 1);
	CU_ASSERT_EQUAL(ut_round_trip(a, b), 47 + 3 * (2 + 5 + 4) + 4 + 2 * (2 + 4) + 4);
	for (int salt = 0; salt < UT_NSTATES; salt++) {
		ut_fill(a, (uint32_t)salt * 13, 0, (uint32_t)salt * 3, 0, salt);
		ut_round_trip(a, b);
	}
	/* Negative and extreme values survive. */
	a->pid = INT64_MIN;
	a->epoch = INT16_MIN;
	a->timeout_ms = -1;
	a->start_ms = INT64_MAX;
	a->update_ms = -5;
	ut_round_trip(a, b);
	/* The largest value: every limit at once. */
	ut_fill(a, TXN_PARTS_MAX, TXN_TOPIC_BYTES_MAX, TXN_GROUPS_MAX, TXN_GROUP_BYTES_MAX, 5);
	int n = ut_round_trip(a, b);
	CU_ASSERT_EQUAL(n, 47 + TXN_PARTS_MAX * (2 + TXN_TOPIC_BYTES_MAX + 4) + 4 +
	                TXN_GROUPS_MAX * (2 + TXN_GROUP_BYTES_MAX) + 4);
	/* Decoding again over a full entry replaces, not appends. */
	ut_fill(a, 2, 3, 1, 3, 2);
	ut_round_trip(a, b);
	txn_coord_destroy(c);
}

static void ut_put_be(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static void test_value_damage(void)
{
	struct txn_coord *c = ut_new();
	struct txn_meta *a = txn_coord_add(c, "a", 1), *b = txn_coord_add(c, "b", 1);
	CU_ASSERT_FATAL(a && b);
	ut_fill(a, 7, 0, 5, 0, 3);   /* topic lengths 1..7, group lengths 1..5 */
	int n = txn_meta_encode(a, ut_buf, UT_BUF_BYTES);
	CU_ASSERT_FATAL(n > 0);
	/* Every truncation. */
	for (int len = 0; len < n; len++) {
		memcpy(ut_buf2, ut_buf, (size_t)len);
		CU_ASSERT_EQUAL(txn_meta_decode(b, ut_buf2, (size_t)len), -EBADMSG);
	}
	/* A trailing byte. */
	memcpy(ut_buf2, ut_buf, (size_t)n);
	ut_buf2[n] = 0;
	CU_ASSERT_EQUAL(txn_meta_decode(b, ut_buf2, (size_t)n + 1), -EBADMSG);

	size_t groups_at = 47;   /* the group count follows the partitions */
	for (uint32_t i = 0; i < a->ntps; i++)
		groups_at += 2 + a->tps[i].topic_len + 4;
	struct { size_t off; int bytes; uint64_t v; const char *what; } bad[] = {
		{ 0, 2, 2, "version 2" },
		{ (size_t)n - 4, 4, 0x80000000u, "serial < 0" },
		{ 0, 2, 0xffff, "version -1" },
		{ 22, 1, UT_NSTATES, "state 8" },
		{ 22, 1, 0xff, "state 255" },
		{ 43, 4, 8, "partition count + 1" },
		{ 43, 4, 6, "partition count - 1" },
		{ 43, 4, 0, "partition count 0" },
		{ 43, 4, TXN_PARTS_MAX + 1, "partition count over the limit" },
		{ 43, 4, 0xffffffff, "partition count -1" },
		{ 47, 2, TXN_TOPIC_BYTES_MAX + 1, "topic length over the limit" },
		{ 47, 2, 0xffff, "topic length -1" },
		{ 47, 2, 1000, "topic length past the end" },
		{ 47, 2, 0, "topic length short" },
		{ groups_at, 4, 6, "group count + 1" },
		{ groups_at, 4, 4, "group count - 1" },
		{ groups_at, 4, 0, "group count 0" },
		{ groups_at, 4, TXN_GROUPS_MAX + 1, "group count over the limit" },
		{ groups_at, 4, 0xffffffff, "group count -1" },
		{ groups_at + 4, 2, 0xffff, "group length -1" },
		{ groups_at + 4, 2, 50, "group length past the end" },
		{ groups_at + 4, 2, 2, "group length long" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(ut_buf2, ut_buf, (size_t)n);
		ut_put_be(ut_buf2 + bad[i].off, bad[i].v, bad[i].bytes);
		int rc = txn_meta_decode(b, ut_buf2, (size_t)n);
		if (rc != -EBADMSG)
			fprintf(stderr, "\n%s: decode returned %d\n", bad[i].what, rc);
		CU_ASSERT_EQUAL(rc, -EBADMSG);
	}
	/* A group longer than the limit inside a consistent value. */
	ut_fill(a, 0, 0, 0, 0, 0);
	n = txn_meta_encode(a, ut_buf, UT_BUF_BYTES);
	CU_ASSERT_FATAL(n == 55);
	ut_put_be(ut_buf, 0, 2);   /* a version 0 value: no serial */
	ut_put_be(ut_buf + 47, 1, 4);
	ut_put_be(ut_buf + 51, TXN_GROUP_BYTES_MAX + 1, 2);
	memset(ut_buf + 53, 'g', TXN_GROUP_BYTES_MAX + 1);
	CU_ASSERT_EQUAL(txn_meta_decode(b, ut_buf, 53 + TXN_GROUP_BYTES_MAX + 1), -EBADMSG);
	ut_put_be(ut_buf + 51, TXN_GROUP_BYTES_MAX, 2);   /* and the same at the limit is fine */
	b->serial = 9;
	CU_ASSERT_EQUAL(txn_meta_decode(b, ut_buf, 53 + TXN_GROUP_BYTES_MAX), 0);
	CU_ASSERT_EQUAL(b->ngroups, 1);
	CU_ASSERT_EQUAL(b->serial, 0);   /* version 0: serial 0, "none" */
	/* Random byte flips never crash (the result may be either). */
	ut_fill(a, 7, 0, 5, 0, 3);
	n = txn_meta_encode(a, ut_buf, UT_BUF_BYTES);
	srand(42);
	for (int i = 0; i < 20000; i++) {
		memcpy(ut_buf2, ut_buf, (size_t)n);
		for (int k = 0; k < 1 + i % 4; k++)
			ut_buf2[rand() % n] = (uint8_t)rand();
		int rc = txn_meta_decode(b, ut_buf2, (size_t)(rand() % (n + 1)));
		CU_ASSERT(rc == 0 || rc == -EBADMSG);
		CU_ASSERT(b->ntps <= TXN_PARTS_MAX && b->ngroups <= TXN_GROUPS_MAX);
	}
	txn_coord_destroy(c);
}

/* ---- recovery ---------------------------------------------------------------- */

#define UT_LOG_BYTES (1u << 20)
static uint8_t ut_log[UT_LOG_BYTES];
static size_t ut_log_len;
static size_t ut_batch_at[64], ut_nbatches;

/* Appends one coordinator record (value NULL: tombstone) to the in-memory log. */
static void ut_log_put(const char *id, const struct txn_meta *m)
{
	static uint8_t val[UT_BUF_BYTES / 8];
	int vlen = -1;
	if (m) {
		vlen = txn_meta_encode(m, val, sizeof(val));
		CU_ASSERT_FATAL(vlen > 0);
	}
	int n = st_batch_build(ut_log + ut_log_len, UT_LOG_BYTES - ut_log_len, 0, -1, -1, -1, UT_TS, id,
	                       (int32_t)strlen(id), m ? val : NULL, vlen);
	CU_ASSERT_FATAL(n > 0 && ut_nbatches < 64);
	ut_batch_at[ut_nbatches++] = ut_log_len;
	ut_log_len += (size_t)n;
}

static size_t ut_batch_len(size_t i)
{
	return (i + 1 < ut_nbatches ? ut_batch_at[i + 1] : ut_log_len) - ut_batch_at[i];
}

static void ut_replay(struct txn_coord *c)
{
	for (size_t i = 0; i < ut_nbatches; i++)
		CU_ASSERT_EQUAL(txn_coord_apply_batch(c, ut_log + ut_batch_at[i], ut_batch_len(i)), 0);
}

/* Canonical snapshot of a table: its entries' encodings keyed by id, in id order. */
static size_t ut_snapshot(struct txn_coord *c, uint8_t *out, size_t cap)
{
	struct txn_meta *all[16];
	uint32_t cur = 0, n = 0;
	for (struct txn_meta *m; (m = txn_coord_next(c, &cur)) != NULL;) {
		CU_ASSERT_FATAL(n < 16);
		all[n++] = m;
	}
	for (uint32_t i = 1; i < n; i++)   /* insertion sort by id */
		for (uint32_t j = i; j > 0 && strcmp(all[j - 1]->id, all[j]->id) > 0; j--) {
			struct txn_meta *t = all[j];
			all[j] = all[j - 1];
			all[j - 1] = t;
		}
	size_t len = 0;
	for (uint32_t i = 0; i < n; i++) {
		CU_ASSERT_FATAL(len + all[i]->id_len + 1 < cap);
		memcpy(out + len, all[i]->id, all[i]->id_len + 1u);
		len += all[i]->id_len + 1u;
		int k = txn_meta_encode(all[i], out + len, cap - len);
		CU_ASSERT_FATAL(k > 0);
		len += (size_t)k;
	}
	return len;
}

static void test_recovery(void)
{
	struct txn_coord *src = ut_new();   /* the coordinator that wrote the log */
	struct txn_meta *a = txn_coord_add(src, "app-a", 5), *b = txn_coord_add(src, "app-b", 5),
	                *c = txn_coord_add(src, "app-c", 5);
	CU_ASSERT_FATAL(a && b && c);
	ut_log_len = ut_nbatches = 0;

	a->pid = 1000, a->epoch = 0, a->timeout_ms = 60000, a->update_ms = UT_TS;
	ut_log_put("app-a", a);
	b->pid = 1001, b->epoch = 0, b->timeout_ms = 30000;
	ut_log_put("app-b", b);
	c->pid = 1002, c->epoch = 4;
	ut_log_put("app-c", c);
	/* a: a transaction over two partitions and a group, committed. */
	txn_set_state(a, TXN_ONGOING);
	a->start_ms = UT_TS + 10;
	CU_ASSERT_EQUAL(txn_meta_add_tp(a, "orders", 6, 0), 0);
	CU_ASSERT_EQUAL(txn_meta_add_tp(a, "orders", 6, 3), 0);
	CU_ASSERT_EQUAL(txn_meta_add_group(a, "billing", 7), 0);
	ut_log_put("app-a", a);
	txn_set_state(a, TXN_PREPARE_COMMIT);
	ut_log_put("app-a", a);
	txn_set_state(a, TXN_COMPLETE_COMMIT);
	txn_meta_clear_txn(a);
	ut_log_put("app-a", a);
	/* c: left Ongoing (recovery must bring back its partitions to abort them). */
	txn_set_state(c, TXN_ONGOING);
	CU_ASSERT_EQUAL(txn_meta_add_tp(c, "events", 6, 7), 0);
	ut_log_put("app-c", c);
	/* b: expires (tombstone), then comes back with a new producer id. */
	txn_set_state(b, TXN_DEAD);
	ut_log_put("app-b", NULL);
	txn_coord_remove(src, b);
	b = txn_coord_add(src, "app-b", 5);
	CU_ASSERT_FATAL(b != NULL);
	b->pid = 2001, b->epoch = 0, b->timeout_ms = 5000;
	ut_log_put("app-b", b);
	/* d: created and removed again; a tombstone of an unknown id is harmless. */
	struct txn_meta *d = txn_coord_add(src, "app-d", 5);
	CU_ASSERT_FATAL(d != NULL);
	d->pid = 3000;
	ut_log_put("app-d", d);
	ut_log_put("app-d", NULL);
	txn_coord_remove(src, d);
	ut_log_put("never-was", NULL);

	static uint8_t want[1 << 16], got[1 << 16];
	size_t want_len = ut_snapshot(src, want, sizeof(want));

	struct txn_coord *r = ut_new();
	ut_replay(r);
	CU_ASSERT_EQUAL(txn_coord_count(r), 3);
	struct txn_meta *ra = txn_coord_find(r, "app-a", 5), *rb = txn_coord_find(r, "app-b", 5),
	                *rc = txn_coord_find(r, "app-c", 5);
	CU_ASSERT_FATAL(ra && rb && rc);
	CU_ASSERT(ra->state == TXN_COMPLETE_COMMIT && ra->pid == 1000 && ra->ntps == 0 && ra->ngroups == 0);
	CU_ASSERT(rb->state == TXN_EMPTY && rb->pid == 2001 && rb->timeout_ms == 5000);
	CU_ASSERT(rc->state == TXN_ONGOING && rc->epoch == 4 && txn_meta_has_tp(rc, "events", 6, 7));
	CU_ASSERT_PTR_NULL(txn_coord_find(r, "app-d", 5));
	CU_ASSERT(ut_same(ra, a) && ut_same(rb, b) && ut_same(rc, c));
	CU_ASSERT_EQUAL(ut_snapshot(r, got, sizeof(got)), want_len);
	CU_ASSERT_EQUAL(memcmp(got, want, want_len), 0);

	/* Replaying the same log again over the recovered table is idempotent. */
	ut_replay(r);
	CU_ASSERT_EQUAL(ut_snapshot(r, got, sizeof(got)), want_len);
	CU_ASSERT_EQUAL(memcmp(got, want, want_len), 0);

	/* Damaged batches: bad CRC (a flip in the value), truncated, padded. Nothing changes. */
	for (size_t i = 0; i < ut_nbatches; i++) {
		size_t at = ut_batch_at[i], len = ut_batch_len(i);
		static uint8_t copy[1 << 16];
		CU_ASSERT_FATAL(len + 1 <= sizeof(copy));
		for (size_t flip = ST_BATCH_OFF_CRC; flip < len; flip += 7) {
			memcpy(copy, ut_log + at, len);
			copy[flip] ^= 0x40;
			CU_ASSERT_EQUAL(txn_coord_apply_batch(r, copy, len), -EBADMSG);
		}
		memcpy(copy, ut_log + at, len);
		CU_ASSERT_EQUAL(txn_coord_apply_batch(r, copy, len - 1), -EBADMSG);
		CU_ASSERT_EQUAL(txn_coord_apply_batch(r, copy, ST_BATCH_HEADER_BYTES - 1), -EBADMSG);
		copy[len] = 0;
		CU_ASSERT_EQUAL(txn_coord_apply_batch(r, copy, len + 1), -EBADMSG);
	}
	/* A tombstone for app-a with a bad CRC must not remove it. */
	uint8_t tomb[256];
	int tn = st_batch_build(tomb, sizeof(tomb), 0, -1, -1, -1, UT_TS, "app-a", 5, NULL, -1);
	CU_ASSERT_FATAL(tn > 0);
	tomb[tn - 1] ^= 1;
	CU_ASSERT_EQUAL(txn_coord_apply_batch(r, tomb, (size_t)tn), -EBADMSG);
	CU_ASSERT_EQUAL(ut_snapshot(r, got, sizeof(got)), want_len);
	CU_ASSERT_EQUAL(memcmp(got, want, want_len), 0);

	/* A CRC-valid record whose value is not a coordinator value: refused, fresh id not added. */
	uint8_t junk[64] = { 0, 1 };   /* version 1 */
	uint8_t batch[256];
	int bn = st_batch_build(batch, sizeof(batch), 0, -1, -1, -1, UT_TS, "app-e", 5, junk, sizeof(junk));
	CU_ASSERT_FATAL(bn > 0);
	CU_ASSERT_EQUAL(txn_coord_apply_batch(r, batch, (size_t)bn), -EBADMSG);
	CU_ASSERT_PTR_NULL(txn_coord_find(r, "app-e", 5));
	/* A null key is refused. */
	bn = st_batch_build(batch, sizeof(batch), 0, -1, -1, -1, UT_TS, NULL, -1, NULL, -1);
	CU_ASSERT_FATAL(bn > 0);
	CU_ASSERT_EQUAL(txn_coord_apply_batch(r, batch, (size_t)bn), -EBADMSG);
	CU_ASSERT_EQUAL(ut_snapshot(r, got, sizeof(got)), want_len);
	CU_ASSERT_EQUAL(memcmp(got, want, want_len), 0);

	txn_coord_destroy(r);
	txn_coord_destroy(src);
}

/*
 * A CRC-valid value that fails to decode, for an id that exists (a writer
 * bug, since the CRC passed): the entry keeps what it had.
 */
static void test_recovery_bad_value_existing(void)
{
	struct txn_coord *r = ut_new();
	struct txn_meta *m = txn_coord_add(r, "app-c", 5);
	CU_ASSERT_FATAL(m != NULL);
	m->pid = 7;
	txn_set_state(m, TXN_ONGOING);
	CU_ASSERT_EQUAL(txn_meta_add_tp(m, "events", 6, 7), 0);
	/* Value: another entry's (pid 99, partition other-1) whose count says 2 but holds 1. */
	struct txn_coord *o = ut_new();
	struct txn_meta *x = txn_coord_add(o, "app-c", 5);
	CU_ASSERT_FATAL(x != NULL);
	x->pid = 99;
	x->state = TXN_ONGOING;
	CU_ASSERT_EQUAL(txn_meta_add_tp(x, "other", 5, 1), 0);
	uint8_t val[128];
	int vn = txn_meta_encode(x, val, sizeof(val));
	CU_ASSERT_FATAL(vn > 0);
	ut_put_be(val + 43, 2, 4);
	txn_coord_destroy(o);
	uint8_t batch[256];
	int bn = st_batch_build(batch, sizeof(batch), 0, -1, -1, -1, UT_TS, "app-c", 5, val, vn);
	CU_ASSERT_FATAL(bn > 0);
	CU_ASSERT_EQUAL(txn_coord_apply_batch(r, batch, (size_t)bn), -EBADMSG);
	m = txn_coord_find(r, "app-c", 5);
	CU_ASSERT_FATAL(m != NULL);
	CU_ASSERT_EQUAL(m->pid, 7);
	CU_ASSERT_EQUAL(m->state, TXN_ONGOING);
	CU_ASSERT(m->ntps == 1 && txn_meta_has_tp(m, "events", 6, 7));
	txn_coord_destroy(r);
}

/*
 * Issue 10 item 9: an id costs what it holds, not what the limits allow
 * (it cost a 64-group array of 1 KiB names, 66 KB, before). Heap in use for
 * UT_MEM_IDS ids of 64-byte names, idle and after a transaction with a
 * group and a partition, stays under UT_ID_BYTES_MAX each.
 */
#define UT_MEM_IDS 2000
#define UT_ID_BYTES_MAX 512
static void test_id_memory(void)
{
	struct txn_coord *c = ut_new();
	char id[80];
	size_t before = mallinfo2().uordblks;
	for (int i = 0; i < UT_MEM_IDS; i++) {
		int n = snprintf(id, sizeof(id), "%064d", i);
		struct txn_meta *m = txn_coord_add(c, id, (size_t)n);
		CU_ASSERT_FATAL(m != NULL);
		/* One transaction through its group and partition, then over. */
		CU_ASSERT_EQUAL(txn_meta_add_group(m, "copier-group", 12), 0);
		CU_ASSERT_EQUAL(txn_meta_add_tp(m, "output", 6, i % 12), 0);
		CU_ASSERT(txn_meta_has_group(m, "copier-group", 12) && m->groups_cap == 1);
		txn_meta_clear_txn(m);
		CU_ASSERT(m->ngroups == 0 && m->groups == NULL && m->tps == NULL);
	}
	size_t grown = mallinfo2().uordblks - before;
	printf("\n    %d ids: %zu heap bytes, %zu per id\n", UT_MEM_IDS, grown, grown / UT_MEM_IDS);
	CU_ASSERT(grown <= (size_t)UT_MEM_IDS * UT_ID_BYTES_MAX);
	/* Groups still reach their limit, and not beyond. */
	struct txn_meta *m = txn_coord_find(c, id, strlen(id));
	CU_ASSERT_FATAL(m != NULL);
	for (int i = 0; i < TXN_GROUPS_MAX; i++) {
		int n = snprintf(id, sizeof(id), "g%d", i);
		CU_ASSERT_EQUAL(txn_meta_add_group(m, id, (size_t)n), 0);
	}
	CU_ASSERT_EQUAL(m->groups_cap, TXN_GROUPS_MAX);
	CU_ASSERT_EQUAL(txn_meta_add_group(m, "one-more", 8), -ENOSPC);
	CU_ASSERT(txn_meta_has_group(m, "g0", 2) && txn_meta_has_group(m, "g63", 3));
	txn_coord_destroy(c);
}

/*
 * The broker's table (txn_coord_create_fixed): its memory is all taken at
 * creation, so adding ids (up to the longest), removing and adding again
 * take nothing from the heap, and past ids_max an id is refused (NULL). A
 * start-up replay of a log with more ids than that still loads them all.
 */
#define UT_FIXED_IDS 4
#define UT_FIXED_TPS 64       /* 16 units of TXN_COORD_TPS_UNIT */
#define UT_FIXED_GROUPS 4
static void test_fixed_table(void)
{
	struct txn_coord *c = NULL;
	CU_ASSERT_FATAL(txn_coord_create_fixed(&c, UT_FIXED_IDS, UT_FIXED_TPS, UT_FIXED_GROUPS) == 0 && c);
	static char big[TXN_ID_BYTES_MAX];
	memset(big, 'L', sizeof(big));
	struct mallinfo2 before = mallinfo2();
	struct txn_meta *m[UT_FIXED_IDS];
	char id[16];
	for (int i = 0; i < UT_FIXED_IDS - 1; i++) {
		int n = snprintf(id, sizeof(id), "fixed-%d", i);
		CU_ASSERT_FATAL((m[i] = txn_coord_add(c, id, (size_t)n)) != NULL);
		CU_ASSERT_EQUAL(m[i]->state, TXN_EMPTY);
	}
	CU_ASSERT_FATAL((m[UT_FIXED_IDS - 1] = txn_coord_add(c, big, sizeof(big))) != NULL);
	CU_ASSERT(txn_coord_find(c, big, sizeof(big)) == m[UT_FIXED_IDS - 1]);
	CU_ASSERT_PTR_NULL(txn_coord_add(c, "one-more", 8));   /* full: refused, not grown */
	txn_coord_remove(c, m[1]);
	struct txn_meta *again = txn_coord_add(c, "again", 5);
	CU_ASSERT_FATAL(again != NULL);
	CU_ASSERT(again->pid == -1 && again->epoch == -1 && again->ntps == 0 && again->update_ms == 0);
	CU_ASSERT(txn_coord_find(c, "fixed-0", 7) == m[0] && txn_coord_find(c, "fixed-1", 7) == NULL);
	struct mallinfo2 after = mallinfo2();
	CU_ASSERT_EQUAL(after.uordblks, before.uordblks);   /* not one byte from the heap */
	CU_ASSERT_EQUAL(after.hblkhd, before.hblkhd);
	CU_ASSERT_EQUAL(txn_coord_count(c), UT_FIXED_IDS);
	txn_coord_destroy(c);

	/* A replay past the pool: every id comes back. */
	ut_log_len = ut_nbatches = 0;
	struct txn_meta *w = ut_meta(TXN_EMPTY);
	for (int i = 0; i < UT_FIXED_IDS + 2; i++) {
		snprintf(id, sizeof(id), "replay-%d", i);
		w->pid = 2000 + i;
		w->epoch = 0;
		ut_log_put(id, w);
	}
	CU_ASSERT_FATAL(txn_coord_create_fixed(&c, UT_FIXED_IDS, UT_FIXED_TPS, UT_FIXED_GROUPS) == 0);
	ut_replay(c);
	CU_ASSERT_EQUAL(txn_coord_count(c), UT_FIXED_IDS + 2);
	struct txn_meta *last = txn_coord_find(c, "replay-5", 8);
	CU_ASSERT(last && last->pid == 2005);
	CU_ASSERT_PTR_NULL(txn_coord_add(c, "new", 3));   /* the poll path still may not grow it */
	txn_coord_remove(c, last);   /* a record from the heap goes back to the heap */
	txn_coord_remove(c, txn_coord_find(c, "replay-0", 8));
	CU_ASSERT_PTR_NOT_NULL(txn_coord_add(c, "new", 3));
	txn_coord_destroy(c);
}

/*
 * Issue 11: the open transactions' partition and group lists of the
 * broker's table come from its pools. Steady traffic (ids starting,
 * growing and ending transactions, over and over) takes nothing from the
 * heap, not even while the lists are held; a list the pool cannot hold is
 * refused with -ENOMEM and nothing changed, and the room comes back when a
 * transaction ends. A replay of a log with more than the pools hold loads
 * whole, the extra on the heap (txn_coord_lists_over).
 */
static void test_fixed_lists(void)
{
	struct txn_coord *c = NULL;
	CU_ASSERT_FATAL(txn_coord_create_fixed(&c, UT_FIXED_IDS, UT_FIXED_TPS, UT_FIXED_GROUPS) == 0);
	struct txn_meta *m[UT_FIXED_IDS];
	char name[16];
	for (int i = 0; i < UT_FIXED_IDS; i++) {
		int n = snprintf(name, sizeof(name), "lists-%d", i);
		CU_ASSERT_FATAL((m[i] = txn_coord_add(c, name, (size_t)n)) != NULL);
	}
	struct mallinfo2 before = mallinfo2();
	for (int round = 0; round < 200; round++) {
		/* Each id: a few partitions one call at a time, then more, and a group. */
		for (int i = 0; i < UT_FIXED_IDS; i++) {
			/* <= 8: blocks of 8 for four ids take half the pool, and growing
			 * holds the old block and the new one for a moment */
			int ntp = 1 + (round + i) % 8;
			for (int p = 0; p < ntp; p++)
				CU_ASSERT_EQUAL_FATAL(txn_meta_add_tp(m[i], "orders", 6, p), 0);
			CU_ASSERT_EQUAL_FATAL(txn_meta_add_group(m[i], "g", 1), 0);
		}
		struct mallinfo2 held = mallinfo2();
		CU_ASSERT_EQUAL_FATAL(held.uordblks, before.uordblks);   /* the lists are all in the pools */
		CU_ASSERT_EQUAL_FATAL(held.hblkhd, before.hblkhd);
		for (int i = 0; i < UT_FIXED_IDS; i++)
			txn_meta_clear_txn(m[i]);
	}
	/* One id takes the whole partition pool; the next is refused, unchanged. */
	CU_ASSERT_EQUAL(txn_meta_tps_room(m[0], UT_FIXED_TPS), 0);
	for (int p = 0; p < UT_FIXED_TPS; p++)
		CU_ASSERT_EQUAL_FATAL(txn_meta_add_tp(m[0], "orders", 6, p), 0);
	CU_ASSERT_EQUAL(txn_meta_add_tp(m[0], "orders", 6, UT_FIXED_TPS), -ENOMEM);   /* no larger block */
	CU_ASSERT_EQUAL(m[0]->ntps, UT_FIXED_TPS);
	CU_ASSERT_EQUAL(txn_meta_add_tp(m[1], "orders", 6, 0), -ENOMEM);
	CU_ASSERT_EQUAL(txn_meta_tps_room(m[1], 1), -ENOMEM);
	CU_ASSERT(m[1]->ntps == 0 && m[1]->tps == NULL);
	CU_ASSERT_EQUAL(txn_meta_tps_room(m[1], TXN_PARTS_MAX + 1), -ENOMEM);   /* clamped to the limit, not ENOSPC */
	/* Groups: UT_FIXED_GROUPS in all. */
	for (int g = 0; g < UT_FIXED_GROUPS; g++) {
		int n = snprintf(name, sizeof(name), "g%d", g);
		CU_ASSERT_EQUAL(txn_meta_add_group(m[2], name, (size_t)n), 0);
	}
	CU_ASSERT_EQUAL(txn_meta_add_group(m[3], "other", 5), -ENOMEM);
	CU_ASSERT_EQUAL(txn_meta_add_group(m[2], "g0", 2), 0);   /* already in: no room needed */
	CU_ASSERT(m[3]->ngroups == 0 && m[3]->groups == NULL);
	/* Ending a transaction gives its room back. */
	txn_meta_clear_txn(m[0]);
	txn_meta_clear_txn(m[2]);
	CU_ASSERT_EQUAL(txn_meta_add_tp(m[1], "orders", 6, 0), 0);
	CU_ASSERT_EQUAL(txn_meta_add_group(m[3], "other", 5), 0);
	struct mallinfo2 after = mallinfo2();
	CU_ASSERT_EQUAL(after.uordblks, before.uordblks);
	CU_ASSERT_EQUAL(txn_coord_lists_over(c), 0);
	txn_coord_destroy(c);

	/* A replay of a transaction larger than the pool: loaded whole, on the heap. */
	ut_log_len = ut_nbatches = 0;
	struct txn_meta *w = ut_meta(TXN_ONGOING);
	w->pid = 3000;
	w->epoch = 0;
	for (int p = 0; p < UT_FIXED_TPS + 10; p++)
		CU_ASSERT_EQUAL_FATAL(txn_meta_add_tp(w, "orders", 6, p), 0);
	for (int g = 0; g < UT_FIXED_GROUPS + 1; g++) {
		int n = snprintf(name, sizeof(name), "g%d", g);
		CU_ASSERT_EQUAL_FATAL(txn_meta_add_group(w, name, (size_t)n), 0);
	}
	ut_log_put("big", w);
	w->pid = 3001;
	txn_meta_clear_txn(w);
	CU_ASSERT_EQUAL(txn_meta_add_tp(w, "orders", 6, 1), 0);
	ut_log_put("small", w);
	txn_meta_clear_txn(w);
	CU_ASSERT_FATAL(txn_coord_create_fixed(&c, UT_FIXED_IDS, UT_FIXED_TPS, UT_FIXED_GROUPS) == 0);
	ut_replay(c);
	struct txn_meta *big = txn_coord_find(c, "big", 3), *small = txn_coord_find(c, "small", 5);
	CU_ASSERT_FATAL(big && small);
	CU_ASSERT(big->ntps == UT_FIXED_TPS + 10 && big->ngroups == UT_FIXED_GROUPS + 1 &&
	          txn_meta_has_tp(big, "orders", 6, UT_FIXED_TPS + 9));
	CU_ASSERT(small->ntps == 1 && txn_meta_has_tp(small, "orders", 6, 1));
	CU_ASSERT_EQUAL(txn_coord_lists_over(c), 2);   /* big's partitions and its groups */
	struct txn_meta *n = txn_coord_add(c, "new", 3);
	CU_ASSERT_FATAL(n != NULL);
	CU_ASSERT_EQUAL(txn_meta_add_tp(n, "orders", 6, 0), 0);   /* the pool is still there for the rest */
	txn_meta_clear_txn(big);   /* the heap lists go back to the heap */
	CU_ASSERT_EQUAL(txn_coord_lists_over(c), 0);
	txn_coord_destroy(c);
}

/*
 * The next transaction's list (begun while the last one's markers are
 * written): its own entries and pool blocks, untouched by the transaction's
 * clear and encoding, installed as the transaction with its told count, and
 * freed with the id.
 */
static void test_next_list(void)
{
	struct txn_coord *c = NULL;
	CU_ASSERT_FATAL(txn_coord_create_fixed(&c, UT_FIXED_IDS, UT_FIXED_TPS, UT_FIXED_GROUPS) == 0);
	struct txn_meta *m = txn_coord_add(c, "next", 4);
	CU_ASSERT_FATAL(m != NULL);
	txn_set_state(m, TXN_ONGOING);
	CU_ASSERT_EQUAL(txn_meta_add_tp(m, "a", 1, 0), 0);
	CU_ASSERT_EQUAL(txn_meta_add_group(m, "g", 1), 0);
	m->tps_told = 1;
	txn_set_state(m, TXN_PREPARE_COMMIT);
	size_t vlen = txn_meta_value_size(m);
	CU_ASSERT_EQUAL(txn_meta_next_room(m, 2), 0);
	CU_ASSERT_EQUAL(txn_meta_next_add_tp(m, "b", 1, 0), 0);
	CU_ASSERT_EQUAL(txn_meta_next_add_tp(m, "b", 1, 1), 0);
	CU_ASSERT_EQUAL(txn_meta_next_add_tp(m, "b", 1, 1), 0);   /* a duplicate: taken once */
	m->next_told = 2;
	CU_ASSERT(m->next_ntps == 2 && txn_meta_next_has_tp(m, "b", 1, 1) && !txn_meta_next_has_tp(m, "a", 1, 0));
	CU_ASSERT(m->ntps == 1 && m->tps_told == 1 && !txn_meta_has_tp(m, "b", 1, 0));
	CU_ASSERT_EQUAL(txn_meta_value_size(m), vlen);   /* the record is the decided transaction's alone */
	/* Complete: the transaction's lists go, the next one's stay, and become the transaction. */
	txn_set_state(m, TXN_COMPLETE_COMMIT);
	txn_meta_clear_txn(m);
	CU_ASSERT(m->ntps == 0 && m->ngroups == 0 && m->next_ntps == 2);
	txn_meta_next_install(m);
	CU_ASSERT(m->ntps == 2 && m->tps_told == 2 && txn_meta_has_tp(m, "b", 1, 0) && txn_meta_has_tp(m, "b", 1, 1));
	CU_ASSERT(m->next_ntps == 0 && m->next_tps == NULL && m->next_told == 0);
	/* The pool holds both lists at once; an id removed with a next list gives it back. */
	CU_ASSERT_EQUAL(txn_meta_next_add_tp(m, "c", 1, 0), 0);
	txn_coord_remove(c, m);
	struct txn_meta *w = txn_coord_add(c, "whole", 5);
	CU_ASSERT_FATAL(w != NULL);
	CU_ASSERT_EQUAL(txn_meta_tps_room(w, UT_FIXED_TPS), 0);   /* the whole pool: nothing was left behind */
	txn_coord_destroy(c);
}

/* transactional.id.expiration.ms: which ids may go, and when. */
static void test_expirable(void)
{
	struct txn_meta *m = ut_meta(TXN_EMPTY);
	const int64_t ttl = 1000, now = UT_TS;
	m->update_ms = now - ttl;
	static const bool settled[UT_NSTATES] = { [TXN_EMPTY] = 1, [TXN_COMPLETE_COMMIT] = 1, [TXN_COMPLETE_ABORT] = 1 };
	for (int st = 0; st < UT_NSTATES; st++) {
		m->state = (enum txn_state)st;
		CU_ASSERT_EQUAL(txn_meta_expirable(m, now, ttl), settled[st]);
	}
	m->state = TXN_COMPLETE_COMMIT;
	CU_ASSERT(txn_meta_expirable(m, now, ttl));
	CU_ASSERT(!txn_meta_expirable(m, now - 1, ttl));   /* used less than ttl ago */
	CU_ASSERT(!txn_meta_expirable(m, now, ttl + 1));
	/* Anything under way or waiting keeps it, however old. */
	m->drive = TXN_DRIVE_INIT;
	CU_ASSERT(!txn_meta_expirable(m, now + 10 * ttl, ttl));
	m->drive = TXN_DRIVE_IDLE;
	m->has_queued = true;
	CU_ASSERT(!txn_meta_expirable(m, now + 10 * ttl, ttl));
	m->has_queued = false;
	m->op_ctx = m;
	CU_ASSERT(!txn_meta_expirable(m, now + 10 * ttl, ttl));
	m->op_ctx = NULL;
	m->markers_left = 1;
	CU_ASSERT(!txn_meta_expirable(m, now + 10 * ttl, ttl));
	m->markers_left = 0;
	m->writes = 1;   /* a log write's cookie still points at it */
	CU_ASSERT(!txn_meta_expirable(m, now + 10 * ttl, ttl));
	m->writes = 0;
	CU_ASSERT(txn_meta_expirable(m, now + 10 * ttl, ttl));
}

int main(void)
{
	CU_pSuite s;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("coord", NULL, NULL);
	CU_add_test(s, "state moves vs Kafka's table", test_state_table);
	CU_add_test(s, "setter: legal moves, SIGABRT on illegal", test_setter);
	CU_add_test(s, "driver moves vs coord.h's picture", test_drive_table);
	CU_add_test(s, "driver setter: each op's walk, SIGABRT on illegal", test_drive_setter);
	CU_add_test(s, "table: thousands of ids, removal, iteration", test_table);
	CU_add_test(s, "partitions and groups: dedup, limits, clear", test_tps_groups);
	CU_add_test(s, "value: round trip up to every limit", test_value_round_trip);
	CU_add_test(s, "value: truncation, bad counts, flips", test_value_damage);
	CU_add_test(s, "recovery: replay, tombstones, damaged batches", test_recovery);
	CU_add_test(s, "recovery: bad value keeps an existing entry", test_recovery_bad_value_existing);
	CU_add_test(s, "memory: an id costs what it holds", test_id_memory);
	CU_add_test(s, "expiry: settled, idle ids only", test_expirable);
	CU_add_test(s, "fixed table: no allocation after creation, full refuses", test_fixed_table);
	CU_add_test(s, "fixed table: transactions' lists from pools, full refuses", test_fixed_lists);
	CU_add_test(s, "next transaction's list: apart, installed, freed", test_next_list);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
