/*
 * group_ut.c - the consumer-group coordinator's pure logic (txn/group.c):
 * the state table against Kafka's, joins and rebalances, the leader's
 * SyncGroup, heartbeats, leaving, session expiry, the rebalance timeout,
 * commit checks, and the committed-offset table with its log records.
 *
 * Locality: test thread only (one test forks a child that must abort).
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "batch.h"
#include "group.h"

#define UT_SESSION_MS 10000
#define UT_REBALANCE_MS 30000
#define UT_TS 1700000000000ll
#define UT_MANY 3000

static struct grp_outs ut_o;

/* A JoinGroup of protocol type "consumer" with the given assignors (metadata = name). */
static struct grp_join_req jreq(const char *member, const char *client, const char *p1, const char *p2)
{
	struct grp_join_req q = { .member_id = member, .member_id_len = strlen(member),
	                          .client_id = client, .client_id_len = strlen(client),
	                          .protocol_type = "consumer", .protocol_type_len = 8,
	                          .session_ms = UT_SESSION_MS, .rebalance_ms = UT_REBALANCE_MS };
	const char *ps[2] = { p1, p2 };
	for (int i = 0; i < 2; i++)
		if (ps[i]) {
			q.proto_names[q.nprotocols] = ps[i];
			q.proto_name_lens[q.nprotocols] = strlen(ps[i]);
			q.proto_metas[q.nprotocols] = (const uint8_t *)ps[i];
			q.proto_meta_lens[q.nprotocols] = strlen(ps[i]);
			q.nprotocols++;
		}
	return q;
}

static struct grp_waiter W(uintptr_t n)
{
	return (struct grp_waiter){ .ctx = (void *)n, .gen = (uint32_t)n, .core = 1 };
}

/* The answer for waiter n in ut_o, or NULL. */
static struct grp_out *out_for(uintptr_t n)
{
	for (uint32_t i = 0; i < ut_o.n; i++)
		if (ut_o.o[i].w.ctx == (void *)n)
			return &ut_o.o[i];
	return NULL;
}

static struct grp_member *join_new(struct grp_group *g, uintptr_t w, const char *client, int64_t now)
{
	struct grp_join_req q = jreq("", client, "range", "roundrobin");
	ut_o.n = 0;
	CU_ASSERT_EQUAL_FATAL(grp_join(g, &q, W(w), now, &ut_o), 0);
	return g->members[g->nmembers - 1];
}

/* join_new with the broker's group.initial.rebalance.delay.ms and a rebalance timeout. */
static struct grp_member *join_new_delayed(struct grp_group *g, uintptr_t w, const char *client, int32_t delay_ms,
                                           int32_t rebalance_ms, int64_t now)
{
	struct grp_join_req q = jreq("", client, "range", "roundrobin");
	q.initial_delay_ms = delay_ms;
	q.rebalance_ms = rebalance_ms;
	ut_o.n = 0;
	CU_ASSERT_EQUAL_FATAL(grp_join(g, &q, W(w), now, &ut_o), 0);
	return g->members[g->nmembers - 1];
}

/*
 * Kafka's InitialDelayedJoin (librdkafka's 0102: two static members joining
 * 1 ms apart must land in one generation): an Empty group's first rebalance
 * waits the delay even when everyone has joined; a member joining during a
 * wait (generation 0) earns another, within the rebalance timeout; later
 * rebalances are not delayed.
 */
static void test_initial_delay(void)
{
	struct grp_coord *c;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	struct grp_group *g = grp_get(c, "gd", 2);
	struct grp_member *a = join_new_delayed(g, 1, "a", 3000, UT_REBALANCE_MS, 0);
	CU_ASSERT_PTR_NULL(out_for(1));   /* the only member, yet no answer before the delay */
	CU_ASSERT_EQUAL(g->state, GRP_PREPARING_REBALANCE);
	ut_o.n = 0;
	grp_tick(g, 1000, &ut_o);
	CU_ASSERT_EQUAL(ut_o.n, 0);
	struct grp_member *b = join_new_delayed(g, 2, "b", 3000, UT_REBALANCE_MS, 1001);
	CU_ASSERT_EQUAL(ut_o.n, 0);
	/* The first wait ends with a new member in it: another 3000 ms. */
	grp_tick(g, 3000, &ut_o);
	CU_ASSERT_EQUAL(ut_o.n, 0);
	grp_tick(g, 5999, &ut_o);
	CU_ASSERT_EQUAL(ut_o.n, 0);
	CU_ASSERT_EQUAL(g->generation, 0);
	grp_tick(g, 6000, &ut_o);
	CU_ASSERT_EQUAL(ut_o.n, 2);
	CU_ASSERT(out_for(1) && out_for(1)->err == KERR_NONE && out_for(1)->m == a);
	CU_ASSERT(out_for(2) && out_for(2)->err == KERR_NONE && out_for(2)->m == b);
	CU_ASSERT_EQUAL(g->generation, 1);
	CU_ASSERT_EQUAL(g->nmembers, 2);
	CU_ASSERT_EQUAL(g->state, GRP_COMPLETING_REBALANCE);
	/* A later rebalance (a third member) completes once everyone rejoined, undelayed. */
	struct grp_member *m3 = join_new_delayed(g, 3, "c", 3000, UT_REBALANCE_MS, 7000);
	struct grp_join_req qa = jreq(a->id, "a", "range", "roundrobin"), qb = jreq(b->id, "b", "range", "roundrobin");
	qa.initial_delay_ms = qb.initial_delay_ms = 3000;
	CU_ASSERT_EQUAL(grp_join(g, &qa, W(4), 7001, &ut_o), 0);
	CU_ASSERT_EQUAL(grp_join(g, &qb, W(5), 7002, &ut_o), 0);
	CU_ASSERT(out_for(3) && out_for(3)->err == KERR_NONE && out_for(3)->m == m3);
	CU_ASSERT(out_for(4) && out_for(4)->err == KERR_NONE);
	CU_ASSERT_EQUAL(g->generation, 2);

	/* The waits stop at the rebalance timeout (5000 ms here), joiners or not. */
	struct grp_group *h = grp_get(c, "gt", 2);
	join_new_delayed(h, 11, "a", 3000, 5000, 0);
	join_new_delayed(h, 12, "b", 3000, 5000, 1000);
	ut_o.n = 0;
	grp_tick(h, 3000, &ut_o);   /* a joiner in the first wait: 2000 ms more, all that is left */
	CU_ASSERT_EQUAL(ut_o.n, 0);
	join_new_delayed(h, 13, "c", 3000, 5000, 4000);
	grp_tick(h, 4999, &ut_o);
	CU_ASSERT_EQUAL(ut_o.n, 0);
	grp_tick(h, 5000, &ut_o);
	CU_ASSERT_EQUAL(ut_o.n, 3);
	CU_ASSERT_EQUAL(h->generation, 1);
	CU_ASSERT_EQUAL(h->nmembers, 3);

	/* Everyone leaves during the wait: Empty again at once (nothing left to tick it). */
	struct grp_group *e = grp_get(c, "ge", 2);
	struct grp_member *x = join_new_delayed(e, 21, "x", 3000, UT_REBALANCE_MS, 0);
	ut_o.n = 0;
	CU_ASSERT_EQUAL(grp_leave(e, x->id, x->id_len, 500, &ut_o), KERR_NONE);
	CU_ASSERT_EQUAL(e->state, GRP_EMPTY);
	CU_ASSERT(out_for(21) && out_for(21)->err == KERR_UNKNOWN_MEMBER_ID);
	/* ... and its next first rebalance waits again. */
	join_new_delayed(e, 22, "y", 3000, UT_REBALANCE_MS, 1000);
	CU_ASSERT_EQUAL(e->state, GRP_PREPARING_REBALANCE);
	ut_o.n = 0;
	grp_tick(e, 3999, &ut_o);
	CU_ASSERT_EQUAL(ut_o.n, 0);
	grp_tick(e, 4000, &ut_o);
	CU_ASSERT(out_for(22) && out_for(22)->err == KERR_NONE);
	grp_coord_destroy(c);
}

static void test_state_table(void)
{
	/* Kafka's GroupState validPreviousStates, written out independently. */
	static const bool ok[5][5] = {
		/* from \ to:   Empty  Prep   Compl  Stable Dead */
		[GRP_EMPTY] = { false, true, false, false, true },
		[GRP_PREPARING_REBALANCE] = { true, false, true, false, true },
		[GRP_COMPLETING_REBALANCE] = { false, true, false, true, true },
		[GRP_STABLE] = { false, true, false, false, true },
		[GRP_DEAD] = { false, false, false, false, true },
	};
	for (int f = 0; f < 5; f++)
		for (int t = 0; t < 5; t++)
			CU_ASSERT_EQUAL(grp_state_move_ok(f, t), ok[f][t]);
	CU_ASSERT(!grp_state_move_ok(GRP_EMPTY, 9));
	CU_ASSERT_STRING_EQUAL(grp_state_name(GRP_COMPLETING_REBALANCE), "CompletingRebalance");
	pid_t pid = fork();
	if (pid == 0) {
		struct grp_group g = { .state = GRP_EMPTY };
		grp_set_state(&g, GRP_STABLE);   /* must abort */
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

static void test_single_member(void)
{
	struct grp_coord *c;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	CU_ASSERT_PTR_NULL(grp_get(c, "", 0));
	struct grp_group *g = grp_get(c, "g1", 2);
	CU_ASSERT_PTR_EQUAL(grp_get(c, "g1", 2), g);
	CU_ASSERT_EQUAL(g->state, GRP_EMPTY);
	struct grp_member *m = join_new(g, 1, "rdk", 0);
	/* The only member rejoined at once: the join completes now, generation 1, it leads. */
	CU_ASSERT_EQUAL(ut_o.n, 1);
	CU_ASSERT(out_for(1) && out_for(1)->err == KERR_NONE && out_for(1)->m == m && out_for(1)->kind == GRP_OUT_JOIN);
	CU_ASSERT_EQUAL(g->state, GRP_COMPLETING_REBALANCE);
	CU_ASSERT_EQUAL(g->generation, 1);
	CU_ASSERT_PTR_EQUAL(g->leader, m);
	CU_ASSERT(m->id_len > 4 && memcmp(m->id, "rdk-", 4) == 0);
	CU_ASSERT(g->protocol_name_len == 5 && memcmp(g->protocol_name, "range", 5) == 0);
	/* Heartbeat while completing: fine; wrong generation, unknown member. */
	CU_ASSERT_EQUAL(grp_heartbeat(g, m->id, m->id_len, 1, 10), KERR_NONE);
	CU_ASSERT_EQUAL(grp_heartbeat(g, m->id, m->id_len, 0, 10), KERR_ILLEGAL_GENERATION);
	CU_ASSERT_EQUAL(grp_heartbeat(g, "x", 1, 1, 10), KERR_UNKNOWN_MEMBER_ID);
	CU_ASSERT_EQUAL(grp_commit_check(g, m->id, m->id_len, 1), KERR_REBALANCE_IN_PROGRESS);
	/* The leader syncs its own assignment. */
	struct grp_assign a = { m->id, m->id_len, (const uint8_t *)"ASSIGN", 6 };
	ut_o.n = 0;
	CU_ASSERT_EQUAL(grp_sync(g, m->id, m->id_len, 1, &a, 1, W(2), 20, &ut_o), 0);
	CU_ASSERT(out_for(2) && out_for(2)->err == KERR_NONE && out_for(2)->m == m);
	CU_ASSERT(m->assignment_len == 6 && memcmp(m->assignment, "ASSIGN", 6) == 0);
	CU_ASSERT_EQUAL(g->state, GRP_STABLE);
	CU_ASSERT_EQUAL(grp_commit_check(g, m->id, m->id_len, 1), KERR_NONE);
	CU_ASSERT_EQUAL(grp_commit_check(g, m->id, m->id_len, 2), KERR_ILLEGAL_GENERATION);
	CU_ASSERT_EQUAL(grp_commit_check(g, "", 0, -1), KERR_UNKNOWN_MEMBER_ID);
	/* A follower-like rejoin with the same protocols while Stable by the leader: rebalance. */
	struct grp_join_req q = jreq(m->id, "rdk", "range", "roundrobin");
	ut_o.n = 0;
	CU_ASSERT_EQUAL(grp_join(g, &q, W(3), 30, &ut_o), 0);
	CU_ASSERT(out_for(3) && out_for(3)->err == KERR_NONE);
	CU_ASSERT_EQUAL(g->generation, 2);
	/* Leave: the group is empty, a new generation, simple commits are allowed again. */
	ut_o.n = 0;
	CU_ASSERT_EQUAL(grp_leave(g, m->id, m->id_len, 40, &ut_o), KERR_NONE);
	CU_ASSERT_EQUAL(g->state, GRP_EMPTY);
	CU_ASSERT_EQUAL(g->nmembers, 0);
	CU_ASSERT_EQUAL(g->generation, 3);
	CU_ASSERT_EQUAL(grp_commit_check(g, "", 0, -1), KERR_NONE);
	CU_ASSERT_EQUAL(grp_commit_check(g, "", 0, 3), KERR_ILLEGAL_GENERATION);
	CU_ASSERT_EQUAL(grp_commit_check(NULL, "", 0, -1), KERR_NONE);
	CU_ASSERT_EQUAL(grp_leave(g, "nobody", 6, 50, &ut_o), KERR_UNKNOWN_MEMBER_ID);
	grp_coord_destroy(c);
}

static void test_two_members(void)
{
	struct grp_coord *c;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	struct grp_group *g = grp_get(c, "g2", 2);
	struct grp_member *a = join_new(g, 1, "a", 0);
	struct grp_assign as = { a->id, a->id_len, (const uint8_t *)"A1", 2 };
	ut_o.n = 0;
	grp_sync(g, a->id, a->id_len, 1, &as, 1, W(2), 0, &ut_o);
	CU_ASSERT_EQUAL(g->state, GRP_STABLE);
	/* b joins: a rebalance; b waits for a to rejoin. */
	struct grp_member *b = join_new(g, 3, "b", 100);
	CU_ASSERT_EQUAL(ut_o.n, 0);
	CU_ASSERT_EQUAL(g->state, GRP_PREPARING_REBALANCE);
	CU_ASSERT_EQUAL(grp_heartbeat(g, a->id, a->id_len, 1, 200), KERR_REBALANCE_IN_PROGRESS);
	CU_ASSERT_EQUAL(grp_commit_check(g, a->id, a->id_len, 1), KERR_NONE);   /* commit before rejoining */
	/* A SyncGroup now is refused. */
	ut_o.n = 0;
	grp_sync(g, a->id, a->id_len, 1, NULL, 0, W(4), 200, &ut_o);
	CU_ASSERT(out_for(4) && out_for(4)->err == KERR_REBALANCE_IN_PROGRESS);
	/* a rejoins: both answered, a stays leader (the first joiner). */
	struct grp_join_req q = jreq(a->id, "a", "range", "roundrobin");
	ut_o.n = 0;
	grp_join(g, &q, W(5), 300, &ut_o);
	CU_ASSERT_EQUAL(ut_o.n, 2);
	CU_ASSERT(out_for(3) && out_for(3)->err == KERR_NONE && out_for(3)->m == b);
	CU_ASSERT(out_for(5) && out_for(5)->err == KERR_NONE && out_for(5)->m == a);
	CU_ASSERT_EQUAL(g->generation, 2);
	CU_ASSERT_PTR_EQUAL(g->leader, a);
	/* The follower's SyncGroup waits for the leader's, then both get theirs. */
	ut_o.n = 0;
	grp_sync(g, b->id, b->id_len, 2, NULL, 0, W(6), 310, &ut_o);
	CU_ASSERT_EQUAL(ut_o.n, 0);
	struct grp_assign two[2] = { { a->id, a->id_len, (const uint8_t *)"AA", 2 },
	                             { b->id, b->id_len, (const uint8_t *)"BBB", 3 } };
	grp_sync(g, a->id, a->id_len, 2, two, 2, W(7), 320, &ut_o);
	CU_ASSERT_EQUAL(ut_o.n, 2);
	CU_ASSERT(out_for(6) && out_for(6)->err == KERR_NONE && out_for(6)->m == b);
	CU_ASSERT(b->assignment_len == 3 && memcmp(b->assignment, "BBB", 3) == 0);
	CU_ASSERT(a->assignment_len == 2);
	/* A late follower SyncGroup in Stable is answered at once; wrong generation refused. */
	ut_o.n = 0;
	grp_sync(g, b->id, b->id_len, 2, NULL, 0, W(8), 330, &ut_o);
	grp_sync(g, b->id, b->id_len, 1, NULL, 0, W(9), 330, &ut_o);
	grp_sync(g, "zz", 2, 2, NULL, 0, W(10), 330, &ut_o);
	CU_ASSERT(out_for(8) && out_for(8)->err == KERR_NONE);
	CU_ASSERT(out_for(9) && out_for(9)->err == KERR_ILLEGAL_GENERATION);
	CU_ASSERT(out_for(10) && out_for(10)->err == KERR_UNKNOWN_MEMBER_ID);
	/* A follower rejoining with unchanged protocols keeps the generation. */
	q = jreq(b->id, "b", "range", "roundrobin");
	ut_o.n = 0;
	grp_join(g, &q, W(11), 340, &ut_o);
	CU_ASSERT(out_for(11) && out_for(11)->err == KERR_NONE);
	CU_ASSERT_EQUAL(g->generation, 2);
	CU_ASSERT_EQUAL(g->state, GRP_STABLE);
	/* The leader leaves: b is alone after its rejoin, and leads. */
	ut_o.n = 0;
	CU_ASSERT_EQUAL(grp_leave(g, a->id, a->id_len, 400, &ut_o), KERR_NONE);
	CU_ASSERT_EQUAL(g->state, GRP_PREPARING_REBALANCE);
	CU_ASSERT_EQUAL(grp_heartbeat(g, b->id, b->id_len, 2, 410), KERR_REBALANCE_IN_PROGRESS);
	q = jreq(b->id, "b", "range", "roundrobin");
	grp_join(g, &q, W(12), 420, &ut_o);
	CU_ASSERT(out_for(12) && out_for(12)->err == KERR_NONE);
	CU_ASSERT_EQUAL(g->generation, 3);
	CU_ASSERT_PTR_EQUAL(g->leader, b);
	grp_coord_destroy(c);
}

/* A static member (instance id) joining with an empty member id. */
static struct grp_member *join_static(struct grp_group *g, uintptr_t w, const char *instance, int64_t now)
{
	struct grp_join_req q = jreq("", instance, "range", "roundrobin");
	q.instance_id = instance;
	q.instance_id_len = strlen(instance);
	ut_o.n = 0;
	CU_ASSERT_EQUAL_FATAL(grp_join(g, &q, W(w), now, &ut_o), 0);
	return grp_static_find(g, instance, strlen(instance));
}

static void test_static_members(void)
{
	struct grp_coord *c;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	struct grp_group *g = grp_get(c, "gs", 2);
	/* Two static members, a leads; Stable at generation 2. */
	struct grp_member *a = join_static(g, 1, "inst-a", 0);
	CU_ASSERT_FATAL(a != NULL);
	struct grp_assign as = { a->id, a->id_len, (const uint8_t *)"A1", 2 };
	ut_o.n = 0;
	grp_sync(g, a->id, a->id_len, 1, &as, 1, W(2), 0, &ut_o);
	struct grp_member *b = join_static(g, 3, "inst-b", 10);
	CU_ASSERT_FATAL(b != NULL && b != a);
	struct grp_join_req q = jreq(a->id, "inst-a", "range", "roundrobin");
	q.instance_id = "inst-a";
	q.instance_id_len = 6;
	ut_o.n = 0;
	grp_join(g, &q, W(4), 20, &ut_o);
	CU_ASSERT_EQUAL(g->generation, 2);
	struct grp_assign two[2] = { { a->id, a->id_len, (const uint8_t *)"AA", 2 },
	                             { b->id, b->id_len, (const uint8_t *)"BBB", 3 } };
	ut_o.n = 0;
	grp_sync(g, b->id, b->id_len, 2, NULL, 0, W(5), 30, &ut_o);
	grp_sync(g, a->id, a->id_len, 2, two, 2, W(6), 30, &ut_o);
	CU_ASSERT_EQUAL_FATAL(g->state, GRP_STABLE);

	/* b restarts: a join with its instance id and no member id takes its place under a
	 * new id, with no rebalance: same generation, same assignment. */
	char old_b[GRP_MEMBER_ID_BYTES_MAX + 1] = { 0 };   /* jreq takes its strlen */
	size_t old_b_len = b->id_len;
	memcpy(old_b, b->id, old_b_len);
	struct grp_member *b2 = join_static(g, 7, "inst-b", 40);
	CU_ASSERT_PTR_EQUAL(b2, b);
	CU_ASSERT(out_for(7) && out_for(7)->err == KERR_NONE && out_for(7)->m == b);
	CU_ASSERT(b->id_len != old_b_len || memcmp(b->id, old_b, old_b_len) != 0);
	CU_ASSERT_EQUAL(g->state, GRP_STABLE);
	CU_ASSERT_EQUAL(g->generation, 2);
	CU_ASSERT_EQUAL(g->nmembers, 2);
	CU_ASSERT(b->assignment_len == 3 && memcmp(b->assignment, "BBB", 3) == 0);
	ut_o.n = 0;
	grp_sync(g, b->id, b->id_len, 2, NULL, 0, W(8), 50, &ut_o);
	CU_ASSERT(out_for(8) && out_for(8)->err == KERR_NONE && out_for(8)->m == b);
	/* The old id is fenced (the zombie's heartbeats, commits, joins); a dynamic id is not. */
	CU_ASSERT_EQUAL(grp_fenced(g, old_b, old_b_len, "inst-b", 6), KERR_FENCED_INSTANCE_ID);
	CU_ASSERT_EQUAL(grp_fenced(g, b->id, b->id_len, "inst-b", 6), 0);
	CU_ASSERT_EQUAL(grp_fenced(g, old_b, old_b_len, "", 0), 0);
	q = jreq(old_b, "inst-b", "range", "roundrobin");
	q.member_id_len = old_b_len;
	q.instance_id = "inst-b";
	q.instance_id_len = 6;
	ut_o.n = 0;
	grp_join(g, &q, W(9), 60, &ut_o);
	CU_ASSERT(out_for(9) && out_for(9)->err == KERR_FENCED_INSTANCE_ID);

	/* A static rejoin fences the old instance's waiting SyncGroup. */
	q = jreq(a->id, "inst-a", "range", NULL);   /* a changes its protocols: a rebalance */
	q.instance_id = "inst-a";
	q.instance_id_len = 6;
	ut_o.n = 0;
	grp_join(g, &q, W(10), 70, &ut_o);
	CU_ASSERT_EQUAL(g->state, GRP_PREPARING_REBALANCE);
	q = jreq(b->id, "inst-b", "range", "roundrobin");
	q.instance_id = "inst-b";
	q.instance_id_len = 6;
	grp_join(g, &q, W(11), 80, &ut_o);
	CU_ASSERT_EQUAL(g->state, GRP_COMPLETING_REBALANCE);
	CU_ASSERT_EQUAL(g->generation, 3);
	ut_o.n = 0;
	grp_sync(g, b->id, b->id_len, 3, NULL, 0, W(12), 90, &ut_o);   /* waits for the leader */
	CU_ASSERT_EQUAL(ut_o.n, 0);
	join_static(g, 13, "inst-b", 100);
	CU_ASSERT(out_for(12) && out_for(12)->err == KERR_FENCED_INSTANCE_ID);
	CU_ASSERT_EQUAL(g->state, GRP_PREPARING_REBALANCE);   /* mid-assignment: Kafka rebalances too */

	/* The leader restarting keeps its place too: answered as a follower naming its old id. */
	q = jreq(a->id, "inst-a", "range", NULL);
	q.instance_id = "inst-a";
	q.instance_id_len = 6;
	ut_o.n = 0;
	grp_join(g, &q, W(14), 110, &ut_o);
	CU_ASSERT(out_for(13) && out_for(13)->err == KERR_NONE && out_for(14) && out_for(14)->err == KERR_NONE);
	CU_ASSERT(!out_for(14)->follower);
	CU_ASSERT_EQUAL(g->generation, 4);
	struct grp_assign two4[2] = { { a->id, a->id_len, (const uint8_t *)"A4", 2 },
	                              { b->id, b->id_len, (const uint8_t *)"B4", 2 } };
	ut_o.n = 0;
	grp_sync(g, a->id, a->id_len, 4, two4, 2, W(15), 120, &ut_o);
	CU_ASSERT_EQUAL_FATAL(g->state, GRP_STABLE);
	CU_ASSERT_PTR_EQUAL(g->leader, a);
	char old_a[GRP_MEMBER_ID_BYTES_MAX + 1];
	size_t old_a_len = a->id_len;
	memcpy(old_a, a->id, old_a_len);
	struct grp_join_req qa = jreq("", "inst-a", "range", NULL);
	qa.instance_id = "inst-a";
	qa.instance_id_len = 6;
	ut_o.n = 0;
	CU_ASSERT_EQUAL(grp_join(g, &qa, W(16), 130, &ut_o), 0);
	CU_ASSERT(out_for(16) && out_for(16)->err == KERR_NONE && out_for(16)->m == a && out_for(16)->follower);
	CU_ASSERT(a->prev_id_len == old_a_len && memcmp(a->prev_id, old_a, old_a_len) == 0);
	CU_ASSERT_EQUAL(g->state, GRP_STABLE);
	CU_ASSERT_EQUAL(g->generation, 4);
	CU_ASSERT_PTR_EQUAL(g->leader, a);
	ut_o.n = 0;
	grp_sync(g, a->id, a->id_len, 4, NULL, 0, W(17), 140, &ut_o);
	CU_ASSERT(out_for(17) && out_for(17)->err == KERR_NONE && a->assignment_len == 2 && !memcmp(a->assignment, "A4", 2));

	/* A static member that stops heartbeating expires like any other. */
	ut_o.n = 0;
	grp_tick(g, 120 + UT_SESSION_MS + 1, &ut_o);   /* b's last sign of life was at 120 */
	CU_ASSERT_EQUAL(g->nmembers, 1);
	CU_ASSERT_PTR_NULL(grp_static_find(g, "inst-b", 6));
	CU_ASSERT_EQUAL(g->state, GRP_PREPARING_REBALANCE);
	grp_coord_destroy(c);
}

/* KIP-394: a new member's first JoinGroup (v4+) gets MEMBER_ID_REQUIRED and an id to join with. */
static void test_member_id_required(void)
{
	struct grp_coord *c;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	struct grp_group *g = grp_get(c, "gk", 2);
	struct grp_join_req q = jreq("", "kjs", "range", NULL);
	q.require_known_id = true;
	ut_o.n = 0;
	CU_ASSERT_EQUAL(grp_join(g, &q, W(1), 0, &ut_o), 0);
	struct grp_out *o1 = out_for(1);
	CU_ASSERT_FATAL(o1 && o1->err == KERR_MEMBER_ID_REQUIRED && o1->member_id_len > 4);
	char id[GRP_MEMBER_ID_BYTES_MAX + 1];
	size_t idlen = o1->member_id_len;
	memcpy(id, o1->member_id, idlen);
	CU_ASSERT(memcmp(id, "kjs-", 4) == 0);
	CU_ASSERT_EQUAL(g->nmembers, 0);       /* not a member yet: a lost answer leaves no ghost */
	CU_ASSERT_EQUAL(g->state, GRP_EMPTY);
	/* A second first join (a retry whose first answer was lost) gets another id. */
	ut_o.n = 0;
	grp_join(g, &q, W(2), 10, &ut_o);
	CU_ASSERT(out_for(2) && out_for(2)->err == KERR_MEMBER_ID_REQUIRED);
	CU_ASSERT(out_for(2)->member_id_len != idlen || memcmp(out_for(2)->member_id, id, idlen) != 0);
	/* Joining with the given id makes it a member under that id. */
	q.member_id = id;
	q.member_id_len = idlen;
	ut_o.n = 0;
	grp_join(g, &q, W(3), 20, &ut_o);
	CU_ASSERT(out_for(3) && out_for(3)->err == KERR_NONE && out_for(3)->m == g->members[0]);
	CU_ASSERT_EQUAL(g->nmembers, 1);
	CU_ASSERT(g->members[0]->id_len == idlen && memcmp(g->members[0]->id, id, idlen) == 0);
	CU_ASSERT_EQUAL(g->generation, 1);
	/* An id never handed out is unknown. */
	struct grp_join_req bogus = jreq("kjs-999-0", "kjs", "range", NULL);
	bogus.require_known_id = true;
	ut_o.n = 0;
	grp_join(g, &bogus, W(4), 30, &ut_o);
	CU_ASSERT(out_for(4) && out_for(4)->err == KERR_UNKNOWN_MEMBER_ID);
	/* The unused id of the retry is forgotten after a session timeout. */
	CU_ASSERT_EQUAL(g->npending, 1);
	ut_o.n = 0;
	grp_tick(g, 10 + UT_SESSION_MS + 1, &ut_o);
	CU_ASSERT_EQUAL(g->npending, 0);
	grp_coord_destroy(c);
}

/* Membership records: a Stable group written and restored keeps members, leader, generation and assignments. */
static void test_group_records(void)
{
	struct grp_coord *c, *c2;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	struct grp_group *g = grp_get(c, "gr", 2);
	struct grp_member *a = join_static(g, 1, "inst-a", 0);
	struct grp_assign as = { a->id, a->id_len, (const uint8_t *)"A1", 2 };
	ut_o.n = 0;
	grp_sync(g, a->id, a->id_len, 1, &as, 1, W(2), 0, &ut_o);
	struct grp_member *b = join_new(g, 3, "b", 10);
	struct grp_join_req q = jreq(a->id, "inst-a", "range", "roundrobin");
	q.instance_id = "inst-a";
	q.instance_id_len = 6;
	ut_o.n = 0;
	grp_join(g, &q, W(4), 20, &ut_o);
	struct grp_assign two[2] = { { a->id, a->id_len, (const uint8_t *)"AA", 2 },
	                             { b->id, b->id_len, (const uint8_t *)"BBB", 3 } };
	ut_o.n = 0;
	grp_sync(g, a->id, a->id_len, 2, two, 2, W(5), 30, &ut_o);
	CU_ASSERT_EQUAL_FATAL(g->state, GRP_STABLE);
	CU_ASSERT(g->changes != g->saved_changes);

	uint8_t key[GRP_GROUP_KEY_BYTES_MAX], val[4096], batch[8192];
	int kn = grp_group_key_encode(key, sizeof(key), g->id, g->id_len);
	size_t vsize = grp_group_value_size(g);
	CU_ASSERT_EQUAL(grp_group_value_encode(g, val, vsize - 1), -ENOSPC);
	int vn = grp_group_value_encode(g, val, sizeof(val));
	CU_ASSERT_FATAL(kn > 0 && vn == (int)vsize);
	int bn = st_batch_build(batch, sizeof(batch), 0, -1, -1, -1, 0, key, kn, val, vn);
	CU_ASSERT_FATAL(bn > 0);

	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c2), 0);
	CU_ASSERT_EQUAL(grp_groups_apply_batch(c2, batch, (size_t)bn, 5000), 0);
	struct grp_group *r = grp_find(c2, "gr", 2);
	CU_ASSERT_FATAL(r != NULL);
	CU_ASSERT_EQUAL(r->state, GRP_STABLE);
	CU_ASSERT_EQUAL(r->generation, 2);
	CU_ASSERT_EQUAL_FATAL(r->nmembers, 2);
	CU_ASSERT(r->leader && r->leader->id_len == a->id_len && !memcmp(r->leader->id, a->id, a->id_len));
	struct grp_member *rb = grp_member_find(r, b->id, b->id_len);
	CU_ASSERT_FATAL(rb != NULL);
	CU_ASSERT(rb->assignment_len == 3 && !memcmp(rb->assignment, "BBB", 3));
	CU_ASSERT_PTR_EQUAL(grp_static_find(r, "inst-a", 6), r->leader);
	CU_ASSERT(r->protocol_type_len == 8 && r->protocol_name_len == 5 && !memcmp(r->protocol_name, "range", 5));
	CU_ASSERT_EQUAL(rb->last_hb_ms, 5000);
	/* The members carry on: heartbeats and commits of generation 2, a follower's SyncGroup. */
	CU_ASSERT_EQUAL(grp_heartbeat(r, b->id, b->id_len, 2, 5100), KERR_NONE);
	CU_ASSERT_EQUAL(grp_commit_check(r, b->id, b->id_len, 2), KERR_NONE);
	ut_o.n = 0;
	grp_sync(r, b->id, b->id_len, 2, NULL, 0, W(6), 5200, &ut_o);
	CU_ASSERT(out_for(6) && out_for(6)->err == KERR_NONE && out_for(6)->m == rb);
	/* A member's rejoin with all its protocols (the record kept one) is a normal rejoin. */
	q = jreq(b->id, "b", "range", "roundrobin");
	ut_o.n = 0;
	CU_ASSERT_EQUAL(grp_join(r, &q, W(7), 5300, &ut_o), 0);
	CU_ASSERT_EQUAL(r->state, GRP_PREPARING_REBALANCE);

	/* A later Empty record replaces it; a damaged one leaves the group Empty and is reported. */
	struct grp_group *e = grp_get(c, "ge", 2);
	e->generation = 7;
	kn = grp_group_key_encode(key, sizeof(key), "gr", 2);
	vn = grp_group_value_encode(e, val, sizeof(val));
	bn = st_batch_build(batch, sizeof(batch), 0, -1, -1, -1, 0, key, kn, val, vn);
	CU_ASSERT_EQUAL(grp_groups_apply_batch(c2, batch, (size_t)bn, 6000), 0);
	CU_ASSERT(r->state == GRP_EMPTY && r->nmembers == 0 && r->generation == 7);
	val[2] = 9;   /* no such state */
	bn = st_batch_build(batch, sizeof(batch), 0, -1, -1, -1, 0, key, kn, val, vn);
	CU_ASSERT_EQUAL(grp_groups_apply_batch(c2, batch, (size_t)bn, 6000), -EBADMSG);
	/* Offsets in the same log are not the groups' business, nor the groups theirs. */
	struct grp_offsets *t;
	CU_ASSERT_EQUAL_FATAL(grp_offsets_create(&t), 0);
	vn = grp_group_value_encode(g, val, sizeof(val));
	bn = st_batch_build(batch, sizeof(batch), 0, -1, -1, -1, 0, key, kn, val, vn);
	CU_ASSERT_EQUAL(grp_offsets_apply_batch(t, batch, (size_t)bn), 0);
	CU_ASSERT_EQUAL(grp_offsets_count(t), 0);
	grp_offsets_destroy(t);
	grp_coord_destroy(c2);
	grp_coord_destroy(c);
}

/* DeleteGroups: an Empty group goes Dead (unlisted, its generation forgotten), takes simple
 * commits, and its next join makes it anew; a group tombstone read back does the same. */
static void test_group_delete(void)
{
	struct grp_coord *c;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	struct grp_group *g = grp_get(c, "gd", 2);
	struct grp_member *a = join_new(g, 1, "a", 0);
	CU_ASSERT_FATAL(a != NULL);
	ut_o.n = 0;
	CU_ASSERT_EQUAL(grp_leave(g, a->id, a->id_len, 10, &ut_o), KERR_NONE);
	CU_ASSERT_EQUAL_FATAL(g->state, GRP_EMPTY);
	CU_ASSERT(g->generation > 0);
	uint8_t key[GRP_GROUP_KEY_BYTES_MAX], val[4096], batch[8192];
	int kn = grp_group_key_encode(key, sizeof(key), g->id, g->id_len);
	int vn = grp_group_value_encode(g, val, sizeof(val));
	int bn = st_batch_build(batch, sizeof(batch), 0, -1, -1, -1, 0, key, kn, val, vn);
	CU_ASSERT_FATAL(kn > 0 && vn > 0 && bn > 0);
	int32_t gen = g->generation;

	grp_delete(g);
	CU_ASSERT(g->state == GRP_DEAD && g->generation == 0 && g->protocol_type_len == 0 && g->nmembers == 0);
	CU_ASSERT_EQUAL(grp_commit_check(g, "", 0, -1), KERR_NONE);   /* a simple commit */
	CU_ASSERT_EQUAL(grp_commit_check(g, "", 0, gen), KERR_ILLEGAL_GENERATION);
	CU_ASSERT_PTR_EQUAL(grp_get(c, "gd", 2), g);                 /* a join revives it, Empty, generation 0 */
	CU_ASSERT(g->state == GRP_EMPTY && g->generation == 0);
	struct grp_member *b = join_new(g, 2, "b", 20);
	CU_ASSERT(b != NULL && g->generation == 1);

	/* Read back: the group's record, then its tombstone: Dead, its generation gone. */
	struct grp_coord *c2;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c2), 0);
	CU_ASSERT_EQUAL(grp_groups_apply_batch(c2, batch, (size_t)bn, 100), 0);
	struct grp_group *r = grp_find(c2, "gd", 2);
	CU_ASSERT_FATAL(r != NULL);
	CU_ASSERT(r->state == GRP_EMPTY && r->generation == gen);
	bn = st_batch_build(batch, sizeof(batch), 0, -1, -1, -1, 0, key, kn, NULL, -1);
	CU_ASSERT_FATAL(bn > 0);
	CU_ASSERT_EQUAL(grp_groups_apply_batch(c2, batch, (size_t)bn, 100), 0);
	CU_ASSERT(r->state == GRP_DEAD && r->generation == 0);
	grp_coord_destroy(c2);
	grp_coord_destroy(c);
}

static void test_protocols(void)
{
	struct grp_coord *c;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	struct grp_group *g = grp_get(c, "g3", 2);
	struct grp_join_req q = jreq("", "a", "roundrobin", "range");
	ut_o.n = 0;
	grp_join(g, &q, W(1), 0, &ut_o);
	struct grp_member *a = g->members[0];
	/* No common assignor, or another protocol type: INCONSISTENT_GROUP_PROTOCOL. */
	q = jreq("", "b", "sticky", NULL);
	grp_join(g, &q, W(2), 0, &ut_o);
	CU_ASSERT(out_for(2) && out_for(2)->err == KERR_INCONSISTENT_GROUP_PROTOCOL);
	q = jreq("", "b", "range", NULL);
	q.protocol_type = "connect";
	q.protocol_type_len = 7;
	grp_join(g, &q, W(3), 0, &ut_o);
	CU_ASSERT(out_for(3) && out_for(3)->err == KERR_INCONSISTENT_GROUP_PROTOCOL);
	q = jreq("", "b", "range", NULL);
	q.session_ms = 10;
	grp_join(g, &q, W(4), 0, &ut_o);
	CU_ASSERT(out_for(4) && out_for(4)->err == KERR_INVALID_SESSION_TIMEOUT);
	q = jreq("nope", "b", "range", NULL);
	grp_join(g, &q, W(5), 0, &ut_o);
	CU_ASSERT(out_for(5) && out_for(5)->err == KERR_UNKNOWN_MEMBER_ID);
	CU_ASSERT_EQUAL(g->nmembers, 1);
	/* b supports only range: the leader's first choice (roundrobin) cannot be taken. */
	q = jreq("", "b", "range", NULL);
	ut_o.n = 0;
	grp_join(g, &q, W(6), 0, &ut_o);
	q = jreq(a->id, "a", "roundrobin", "range");
	grp_join(g, &q, W(7), 0, &ut_o);
	CU_ASSERT(out_for(6) && out_for(6)->err == KERR_NONE && out_for(7) && out_for(7)->err == KERR_NONE);
	CU_ASSERT(g->protocol_name_len == 5 && memcmp(g->protocol_name, "range", 5) == 0);
	grp_coord_destroy(c);
}

static void test_expiry_and_timeout(void)
{
	struct grp_coord *c;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	struct grp_group *g = grp_get(c, "g4", 2);
	struct grp_member *a = join_new(g, 1, "a", 0);
	ut_o.n = 0;
	grp_sync(g, a->id, a->id_len, 1, NULL, 0, W(2), 0, &ut_o);
	struct grp_member *b = join_new(g, 3, "b", 1000);
	(void)b;
	/* a never rejoins; heartbeats keep it a member until the rebalance timeout. */
	CU_ASSERT_EQUAL(grp_heartbeat(g, a->id, a->id_len, 1, 5000), KERR_REBALANCE_IN_PROGRESS);
	ut_o.n = 0;
	for (int64_t t = 5000; t < 1000 + UT_REBALANCE_MS; t += 4000) {
		grp_tick(g, t, &ut_o);
		CU_ASSERT_EQUAL(grp_heartbeat(g, a->id, a->id_len, 1, t), KERR_REBALANCE_IN_PROGRESS);
	}
	grp_tick(g, 1000 + UT_REBALANCE_MS - 1, &ut_o);
	CU_ASSERT_EQUAL(ut_o.n, 0);
	CU_ASSERT_EQUAL(g->nmembers, 2);
	grp_tick(g, 1000 + UT_REBALANCE_MS, &ut_o);
	/* The join completed without a: b alone, generation 2, b leads. */
	CU_ASSERT(out_for(3) && out_for(3)->err == KERR_NONE);
	CU_ASSERT_EQUAL(g->nmembers, 1);
	CU_ASSERT_EQUAL(g->generation, 2);
	CU_ASSERT(g->leader == g->members[0] && g->leader->id[0] == 'b');
	struct grp_member *bb = g->members[0];
	int64_t t = 1000 + UT_REBALANCE_MS;
	ut_o.n = 0;
	grp_sync(g, bb->id, bb->id_len, 2, NULL, 0, W(4), t, &ut_o);
	CU_ASSERT_EQUAL(g->state, GRP_STABLE);
	/* Session expiry: silent past the session timeout, gone; the group is Empty. */
	grp_tick(g, t + UT_SESSION_MS, &ut_o);
	CU_ASSERT_EQUAL(g->nmembers, 1);
	CU_ASSERT_EQUAL(grp_heartbeat(g, bb->id, bb->id_len, 2, t + UT_SESSION_MS), KERR_NONE);
	grp_tick(g, t + 2 * UT_SESSION_MS, &ut_o);
	CU_ASSERT_EQUAL(g->nmembers, 1);
	grp_tick(g, t + 2 * UT_SESSION_MS + 1, &ut_o);
	CU_ASSERT_EQUAL(g->nmembers, 0);
	CU_ASSERT_EQUAL(g->state, GRP_EMPTY);
	CU_ASSERT_EQUAL(g->generation, 3);
	grp_coord_destroy(c);
}

/*
 * A client's rebalance timeout is bounded (GRP_REBALANCE_MAX_MS): a member
 * that joined with INT32_MAX and went away holds the next rebalance only
 * that long, not 24 days; session timeouts out of bounds are refused.
 */
static void test_rebalance_bound(void)
{
	struct grp_coord *c;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	struct grp_group *g = grp_get(c, "g-bound", 7);
	struct grp_join_req q = jreq("", "a", "range", NULL);
	q.rebalance_ms = INT32_MAX;
	ut_o.n = 0;
	CU_ASSERT_EQUAL_FATAL(grp_join(g, &q, W(1), 0, &ut_o), 0);
	struct grp_member *a = g->members[0];
	CU_ASSERT_EQUAL(a->rebalance_ms, GRP_REBALANCE_MAX_MS);
	ut_o.n = 0;
	grp_sync(g, a->id, a->id_len, 1, NULL, 0, W(2), 0, &ut_o);
	CU_ASSERT_EQUAL(g->state, GRP_STABLE);
	/* b joins; a never rejoins (its connection is gone). */
	join_new(g, 3, "b", 1000);
	CU_ASSERT_EQUAL(g->state, GRP_PREPARING_REBALANCE);
	CU_ASSERT(g->rebalance_deadline_ms <= 1000 + GRP_REBALANCE_MAX_MS);
	ut_o.n = 0;
	grp_tick(g, 1000 + GRP_REBALANCE_MAX_MS, &ut_o);
	CU_ASSERT(out_for(3) && out_for(3)->err == KERR_NONE);
	CU_ASSERT_EQUAL(g->nmembers, 1);
	/* Session timeouts outside Kafka's bounds: INVALID_SESSION_TIMEOUT, nothing joins. */
	int32_t bad[] = { GRP_SESSION_MIN_MS - 1, GRP_SESSION_MAX_MS + 1, INT32_MAX, -1 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct grp_join_req x = jreq("", "x", "range", NULL);
		x.session_ms = bad[i];
		ut_o.n = 0;
		CU_ASSERT_EQUAL(grp_join(g, &x, W(10 + i), 2000 + GRP_REBALANCE_MAX_MS, &ut_o), 0);
		CU_ASSERT(out_for(10 + i) && out_for(10 + i)->err == KERR_INVALID_SESSION_TIMEOUT);
		CU_ASSERT_EQUAL(g->nmembers, 1);
	}
	grp_coord_destroy(c);
}

/* A waiting JoinGroup or SyncGroup whose client left is answered at once (grp_waiter_gone). */
static void test_waiter_gone(void)
{
	struct grp_coord *c;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	struct grp_group *g = grp_get(c, "g-gone", 6);
	struct grp_member *a = join_new(g, 1, "a", 0);
	ut_o.n = 0;
	grp_sync(g, a->id, a->id_len, 1, NULL, 0, W(2), 0, &ut_o);
	CU_ASSERT_EQUAL(g->state, GRP_STABLE);
	join_new(g, 3, "b", 1000);   /* waits for a to rejoin */
	CU_ASSERT_EQUAL(g->nmembers, 2);
	ut_o.n = 0;
	CU_ASSERT_FALSE(grp_waiter_gone(g, (void *)3, 99, 1500, &ut_o));   /* another generation of that ctx */
	CU_ASSERT_TRUE(grp_waiter_gone(g, (void *)3, 3, 1500, &ut_o));
	CU_ASSERT(out_for(3) && out_for(3)->err == KERR_REBALANCE_IN_PROGRESS);
	CU_ASSERT_EQUAL(g->nmembers, 2);   /* b stays, no longer waiting, */
	CU_ASSERT_PTR_NULL(g->members[1]->join.ctx);
	CU_ASSERT_FALSE(grp_waiter_gone(g, (void *)3, 3, 1500, &ut_o));
	/* until its session times out (it never heartbeats; a does): then only a is left. */
	CU_ASSERT_EQUAL(grp_heartbeat(g, a->id, a->id_len, 1, 9000), KERR_REBALANCE_IN_PROGRESS);
	ut_o.n = 0;
	grp_tick(g, 1000 + UT_SESSION_MS + 1, &ut_o);
	CU_ASSERT_EQUAL(g->nmembers, 1);
	CU_ASSERT_EQUAL(g->state, GRP_PREPARING_REBALANCE);   /* still waiting for a */
	/* a rejoins: the rebalance completes without b. */
	struct grp_join_req q = jreq(a->id, "a", "range", "roundrobin");
	ut_o.n = 0;
	grp_join(g, &q, W(4), 1000 + UT_SESSION_MS + 2, &ut_o);
	CU_ASSERT(out_for(4) && out_for(4)->err == KERR_NONE);
	CU_ASSERT_EQUAL(g->state, GRP_COMPLETING_REBALANCE);
	/* A follower's SyncGroup waiting for the leader's, whose client leaves. */
	join_new(g, 5, "f", 3000);
	ut_o.n = 0;
	struct grp_join_req qa = jreq(a->id, "a", "range", "roundrobin");
	grp_join(g, &qa, W(6), 3000, &ut_o);
	struct grp_member *f = g->members[1];
	CU_ASSERT_EQUAL_FATAL(g->state, GRP_COMPLETING_REBALANCE);
	ut_o.n = 0;
	grp_sync(g, f->id, f->id_len, g->generation, NULL, 0, W(7), 3000, &ut_o);
	CU_ASSERT_PTR_NULL(out_for(7));   /* waits for the leader's */
	CU_ASSERT_TRUE(grp_waiter_gone(g, (void *)7, 7, 3100, &ut_o));
	CU_ASSERT(out_for(7) && out_for(7)->err == KERR_REBALANCE_IN_PROGRESS);
	CU_ASSERT_EQUAL(g->nmembers, 2);   /* a SyncGroup's client leaving removes nobody */
	grp_coord_destroy(c);
}

static void test_expiry_in_stable_pair(void)
{
	struct grp_coord *c;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	struct grp_group *g = grp_get(c, "g5", 2);
	struct grp_member *a = join_new(g, 1, "a", 0);
	struct grp_member *b = join_new(g, 2, "b", 0);
	struct grp_join_req q = jreq(a->id, "a", "range", "roundrobin");
	ut_o.n = 0;
	grp_join(g, &q, W(3), 0, &ut_o);
	CU_ASSERT_EQUAL(g->state, GRP_COMPLETING_REBALANCE);
	/* The follower waits in SyncGroup; the leader dies: the follower is told to rejoin. */
	grp_sync(g, b->id, b->id_len, g->generation, NULL, 0, W(4), 0, &ut_o);
	ut_o.n = 0;
	grp_heartbeat(g, b->id, b->id_len, g->generation, UT_SESSION_MS);
	grp_tick(g, UT_SESSION_MS + 1, &ut_o);
	CU_ASSERT_EQUAL(g->nmembers, 1);
	CU_ASSERT(out_for(4) && out_for(4)->err == KERR_REBALANCE_IN_PROGRESS);
	CU_ASSERT_EQUAL(g->state, GRP_PREPARING_REBALANCE);
	grp_coord_destroy(c);
}

static void test_many_groups(void)
{
	struct grp_coord *c;
	CU_ASSERT_EQUAL_FATAL(grp_coord_create(&c), 0);
	char id[32];
	for (int i = 0; i < UT_MANY; i++) {
		int n = snprintf(id, sizeof(id), "group-%d", i);
		CU_ASSERT_PTR_NOT_NULL_FATAL(grp_get(c, id, (size_t)n));
	}
	CU_ASSERT_EQUAL(grp_count(c), UT_MANY);
	for (int i = 0; i < UT_MANY; i++) {
		int n = snprintf(id, sizeof(id), "group-%d", i);
		struct grp_group *g = grp_find(c, id, (size_t)n);
		CU_ASSERT(g && g->id_len == n && memcmp(g->id, id, (size_t)n) == 0);
	}
	uint32_t cur = 0, k = 0;
	while (grp_next(c, &cur))
		k++;
	CU_ASSERT_EQUAL(k, UT_MANY);
	CU_ASSERT_PTR_NULL(grp_find(c, "group-x", 7));
	grp_coord_destroy(c);
}

static void test_offsets(void)
{
	struct grp_offsets *t;
	CU_ASSERT_EQUAL_FATAL(grp_offsets_create(&t), 0);
	CU_ASSERT_PTR_NULL(grp_offset_get(t, "g", 1, "t", 1, 0));
	char topic[32];
	for (int i = 0; i < UT_MANY; i++) {
		int n = snprintf(topic, sizeof(topic), "topic-%d", i % 100);
		CU_ASSERT_EQUAL(grp_offset_put(t, "g", 1, topic, (size_t)n, i / 100, i, 3, UT_TS, i % 2 ? "meta" : NULL,
		                               i % 2 ? 4 : -1), 0);
	}
	CU_ASSERT_EQUAL(grp_offsets_count(t), UT_MANY);
	const struct grp_offset *o = grp_offset_get(t, "g", 1, "topic-7", 7, 5);
	CU_ASSERT(o && o->offset == 507 && o->leader_epoch == 3 && o->meta_len == 4 && memcmp(o->meta, "meta", 4) == 0);
	o = grp_offset_get(t, "g", 1, "topic-8", 7, 5);
	CU_ASSERT(o && o->offset == 508 && o->meta_len == -1);
	CU_ASSERT_PTR_NULL(grp_offset_get(t, "h", 1, "topic-8", 7, 5));
	/* Replace. */
	CU_ASSERT_EQUAL(grp_offset_put(t, "g", 1, "topic-8", 7, 5, 9999, -1, UT_TS + 1, "", 0), 0);
	o = grp_offset_get(t, "g", 1, "topic-8", 7, 5);
	CU_ASSERT(o && o->offset == 9999 && o->meta_len == 0);
	CU_ASSERT_EQUAL(grp_offsets_count(t), UT_MANY);
	const char *gp, *tp;
	size_t gl, tl;
	int32_t p;
	grp_offset_key_parts(o, &gp, &gl, &tp, &tl, &p);
	CU_ASSERT(gl == 1 && gp[0] == 'g' && tl == 7 && memcmp(tp, "topic-8", 7) == 0 && p == 5);
	char big[GRP_OFFSET_META_MAX + 1];
	memset(big, 'x', sizeof(big));
	CU_ASSERT_EQUAL(grp_offset_put(t, "g", 1, "t", 1, 0, 1, -1, 0, big, GRP_OFFSET_META_MAX + 1), -EINVAL);
	CU_ASSERT_EQUAL(grp_offset_put(t, "g", 1, big, GRP_TOPIC_BYTES_MAX + 1, 0, 1, -1, 0, NULL, -1), -EINVAL);
	grp_offsets_destroy(t);
}

/* One record batch of an offsets-log record (value NULL: tombstone). */
static int rec_batch(uint8_t *buf, size_t cap, const char *g, const char *topic, int32_t p, int64_t off,
                     const char *meta, bool tomb)
{
	uint8_t k[GRP_KEY_BYTES_MAX], v[GRP_VALUE_BYTES_MAX];
	int kn = grp_offset_key_encode(k, sizeof(k), g, strlen(g), topic, strlen(topic), p);
	int vn = grp_offset_value_encode(v, sizeof(v), off, 7, UT_TS, meta, meta ? (int32_t)strlen(meta) : -1);
	if (kn < 0 || vn < 0)
		return -1;
	return st_batch_build(buf, cap, 0, -1, -1, -1, UT_TS, k, kn, tomb ? NULL : v, tomb ? -1 : vn);
}

static void test_offsets_recovery(void)
{
	struct grp_offsets *t;
	CU_ASSERT_EQUAL_FATAL(grp_offsets_create(&t), 0);
	uint8_t b[8192];
	int n;
	/* Latest record per key wins; a tombstone deletes. */
	for (int i = 0; i < 100; i++) {
		n = rec_batch(b, sizeof(b), "grp", "orders", i % 10, i, i == 99 ? "last" : NULL, false);
		CU_ASSERT_EQUAL_FATAL(grp_offsets_apply_batch(t, b, (size_t)n), 0);
	}
	CU_ASSERT_EQUAL(grp_offsets_count(t), 10);
	const struct grp_offset *o = grp_offset_get(t, "grp", 3, "orders", 6, 9);
	CU_ASSERT(o && o->offset == 99 && o->leader_epoch == 7 && o->commit_ms == UT_TS && o->meta_len == 4);
	CU_ASSERT(grp_offset_get(t, "grp", 3, "orders", 6, 0)->offset == 90);
	for (int p = 0; p < 10; p += 2) {
		n = rec_batch(b, sizeof(b), "grp", "orders", p, 0, NULL, true);
		CU_ASSERT_EQUAL(grp_offsets_apply_batch(t, b, (size_t)n), 0);
	}
	CU_ASSERT_EQUAL(grp_offsets_count(t), 5);
	for (int p = 0; p < 10; p++)
		CU_ASSERT_EQUAL(grp_offset_get(t, "grp", 3, "orders", 6, p) != NULL, p % 2 == 1);
	/* Damage: a flipped byte fails the CRC, a bad key or value is skipped. */
	n = rec_batch(b, sizeof(b), "grp", "orders", 1, 5, NULL, false);
	b[n - 3] ^= 0x40;
	CU_ASSERT_EQUAL(grp_offsets_apply_batch(t, b, (size_t)n), -EBADMSG);
	n = st_batch_build(b, sizeof(b), 0, -1, -1, -1, UT_TS, "junk", 4, "v", 1);
	CU_ASSERT_EQUAL(grp_offsets_apply_batch(t, b, (size_t)n), -EBADMSG);
	uint8_t k[GRP_KEY_BYTES_MAX];
	int kn = grp_offset_key_encode(k, sizeof(k), "grp", 3, "orders", 6, 1);
	n = st_batch_build(b, sizeof(b), 0, -1, -1, -1, UT_TS, k, kn, "short", 5);
	CU_ASSERT_EQUAL(grp_offsets_apply_batch(t, b, (size_t)n), -EBADMSG);
	CU_ASSERT(grp_offset_get(t, "grp", 3, "orders", 6, 1)->offset == 91);
	CU_ASSERT_EQUAL(grp_offsets_count(t), 5);
	grp_offsets_destroy(t);
}

/* One record batch of a staged (pending) offset of producer pid (tomb: drop it). */
static int pend_batch(uint8_t *buf, size_t cap, int64_t pid, const char *g, int32_t p, int64_t off, bool tomb)
{
	uint8_t k[GRP_PENDING_KEY_BYTES_MAX], v[GRP_VALUE_BYTES_MAX];
	int kn = grp_pending_key_encode(k, sizeof(k), pid, g, strlen(g), "orders", 6, p);
	int vn = grp_offset_value_encode(v, sizeof(v), off, 3, UT_TS, "m", 1);
	if (kn < 0 || vn < 0)
		return -1;
	return st_batch_build(buf, cap, 0, -1, -1, -1, UT_TS, k, kn, tomb ? NULL : v, tomb ? -1 : vn);
}

static void test_pending(void)
{
	struct grp_offsets *t;
	CU_ASSERT_EQUAL_FATAL(grp_offsets_create(&t), 0);
	uint8_t k[GRP_PENDING_KEY_BYTES_MAX], b[8192];
	/* Key layout: version 2, pid, then the committed key's body. */
	int kn = grp_pending_key_encode(k, sizeof(k), 0x0102030405060708LL, "grp", 3, "orders", 6, 9);
	uint8_t k1[GRP_KEY_BYTES_MAX];
	int k1n = grp_offset_key_encode(k1, sizeof(k1), "grp", 3, "orders", 6, 9);
	CU_ASSERT_EQUAL_FATAL(kn, k1n + 8);
	CU_ASSERT(k[0] == 0 && k[1] == 2 && k[2] == 1 && k[9] == 8);
	CU_ASSERT_EQUAL(memcmp(k + 10, k1 + 2, (size_t)k1n - 2), 0);
	CU_ASSERT_EQUAL(grp_pending_key_encode(k, 7, 1, "g", 1, "t", 1, 0), -ENOSPC);
	/* Staged offsets are kept apart: not committed, not fetched. */
	CU_ASSERT_EQUAL(grp_pending_put(t, k, (size_t)kn, 42, 1, UT_TS, NULL, -1), 0);
	CU_ASSERT_EQUAL(grp_pending_put(t, k1, (size_t)k1n, 42, 1, UT_TS, NULL, -1), -EINVAL);
	CU_ASSERT_EQUAL(grp_offsets_count(t), 0);
	CU_ASSERT_EQUAL(grp_pending_count(t), 1);
	CU_ASSERT(grp_offset_get(t, "grp", 3, "orders", 6, 9) == NULL);
	CU_ASSERT(grp_pending_has(t, "grp", 3, "orders", 6, 9));
	CU_ASSERT(!grp_pending_has(t, "grp", 3, "orders", 6, 8));
	CU_ASSERT(!grp_pending_has(t, "gr", 2, "orders", 6, 9));
	uint32_t cur = 0;
	const struct grp_offset *o = grp_pending_next(t, &cur);
	CU_ASSERT_FATAL(o != NULL);
	const char *gp, *tp;
	size_t gl, tl;
	int32_t part;
	grp_offset_key_parts(o, &gp, &gl, &tp, &tl, &part);
	CU_ASSERT(gl == 3 && !memcmp(gp, "grp", 3) && tl == 6 && !memcmp(tp, "orders", 6) && part == 9);
	CU_ASSERT_EQUAL(grp_pending_pid(o), 0x0102030405060708LL);
	CU_ASSERT_EQUAL(o->offset, 42);
	CU_ASSERT(grp_pending_next(t, &cur) == NULL);
	grp_pending_del(t, k, (size_t)kn);
	grp_pending_del(t, k, (size_t)kn);   /* absent: nothing */
	CU_ASSERT_EQUAL(grp_pending_count(t), 0);
	/* Recovery: pending records and their tombstones, next to committed ones. */
	for (int pid = 1; pid <= 3; pid++)
		for (int p = 0; p < 4; p++) {
			int n = pend_batch(b, sizeof(b), pid, "grp", p, 100 * pid + p, false);
			CU_ASSERT_EQUAL_FATAL(grp_offsets_apply_batch(t, b, (size_t)n), 0);
		}
	int n = rec_batch(b, sizeof(b), "grp", "orders", 0, 7, NULL, false);
	CU_ASSERT_EQUAL(grp_offsets_apply_batch(t, b, (size_t)n), 0);
	CU_ASSERT_EQUAL(grp_pending_count(t), 12);
	CU_ASSERT_EQUAL(grp_offsets_count(t), 1);
	CU_ASSERT_EQUAL(grp_offset_get(t, "grp", 3, "orders", 6, 0)->offset, 7);
	for (int p = 0; p < 4; p++) {
		n = pend_batch(b, sizeof(b), 2, "grp", p, 0, true);
		CU_ASSERT_EQUAL(grp_offsets_apply_batch(t, b, (size_t)n), 0);
	}
	CU_ASSERT_EQUAL(grp_pending_count(t), 8);
	cur = 0;
	while ((o = grp_pending_next(t, &cur))) {
		CU_ASSERT(grp_pending_pid(o) == 1 || grp_pending_pid(o) == 3);
		grp_offset_key_parts(o, &gp, &gl, &tp, &tl, &part);
		CU_ASSERT_EQUAL(o->offset, 100 * grp_pending_pid(o) + part);
		CU_ASSERT(o->meta_len == 1 && o->meta[0] == 'm');
	}
	CU_ASSERT_EQUAL(grp_offsets_count(t), 1);
	grp_offsets_destroy(t);
}

/*
 * Issue 10 item 2: a transaction's end for a staged offset. Until the end is
 * durable the offset stays pending (RequireStable: UNSTABLE_OFFSET_COMMIT)
 * and the committed one unchanged; then one step swaps them. A later stage
 * of the same key (a new transaction) survives the old end.
 */
static void test_pending_end(void)
{
	struct grp_offsets *t;
	CU_ASSERT_FATAL(grp_offsets_create(&t) == 0);
	uint8_t k[GRP_PENDING_KEY_BYTES_MAX];
	int kn = grp_pending_key_encode(k, sizeof(k), 7, "grp", 3, "orders", 6, 2);
	CU_ASSERT_FATAL(kn > 0);
	CU_ASSERT_EQUAL(grp_offset_put(t, "grp", 3, "orders", 6, 2, 10, 1, UT_TS, NULL, -1), 0);
	CU_ASSERT_EQUAL(grp_pending_end_begin(t, k, (size_t)kn), -ENOENT);
	CU_ASSERT_EQUAL(grp_pending_put(t, k, (size_t)kn, 20, 1, UT_TS, "m", 1), 0);
	CU_ASSERT_EQUAL(grp_pending_end_begin(t, k, (size_t)kn), 0);
	uint32_t cur = 0;
	CU_ASSERT(grp_pending_next(t, &cur)->ending);
	/* Being written: still pending, the old offset still the committed one. */
	CU_ASSERT(grp_pending_has(t, "grp", 3, "orders", 6, 2));
	CU_ASSERT_EQUAL(grp_offset_get(t, "grp", 3, "orders", 6, 2)->offset, 10);
	/* Durable: the committed offset and the staged one's departure in one step. */
	CU_ASSERT_EQUAL(grp_pending_end_apply(t, k, (size_t)kn, true, 20, 1, UT_TS + 1, "m", 1), 0);
	CU_ASSERT(!grp_pending_has(t, "grp", 3, "orders", 6, 2));
	const struct grp_offset *o = grp_offset_get(t, "grp", 3, "orders", 6, 2);
	CU_ASSERT_EQUAL(o->offset, 20);
	CU_ASSERT_EQUAL(o->commit_ms, UT_TS + 1);
	CU_ASSERT(o->meta_len == 1 && o->meta[0] == 'm');
	CU_ASSERT_EQUAL(grp_pending_count(t), 0);
	/* An abort: only the staged entry goes. */
	CU_ASSERT_EQUAL(grp_pending_put(t, k, (size_t)kn, 30, 1, UT_TS, NULL, -1), 0);
	CU_ASSERT_EQUAL(grp_pending_end_begin(t, k, (size_t)kn), 0);
	CU_ASSERT_EQUAL(grp_pending_end_apply(t, k, (size_t)kn, false, 30, 1, UT_TS, NULL, -1), 0);
	CU_ASSERT_EQUAL(grp_pending_count(t), 0);
	CU_ASSERT_EQUAL(grp_offset_get(t, "grp", 3, "orders", 6, 2)->offset, 20);
	/* The producer's next transaction stages the same key before the old
	 * end is durable: the old end commits its own value and keeps the new one. */
	CU_ASSERT_EQUAL(grp_pending_put(t, k, (size_t)kn, 40, 1, UT_TS, NULL, -1), 0);
	CU_ASSERT_EQUAL(grp_pending_end_begin(t, k, (size_t)kn), 0);
	CU_ASSERT_EQUAL(grp_pending_put(t, k, (size_t)kn, 50, 1, UT_TS, NULL, -1), 0);
	CU_ASSERT_EQUAL(grp_pending_end_apply(t, k, (size_t)kn, true, 40, 1, UT_TS, NULL, -1), 0);
	CU_ASSERT_EQUAL(grp_offset_get(t, "grp", 3, "orders", 6, 2)->offset, 40);
	CU_ASSERT(grp_pending_has(t, "grp", 3, "orders", 6, 2));
	cur = 0;
	o = grp_pending_next(t, &cur);
	CU_ASSERT(o->offset == 50 && !o->ending);
	/* A committed key is no pending key. */
	uint8_t k1[GRP_KEY_BYTES_MAX];
	int k1n = grp_offset_key_encode(k1, sizeof(k1), "grp", 3, "orders", 6, 2);
	CU_ASSERT_EQUAL(grp_pending_end_apply(t, k1, (size_t)k1n, true, 1, 1, UT_TS, NULL, -1), -EINVAL);
	grp_offsets_destroy(t);
}

/*
 * The group state pool (group.h: struct grp_mem): every kind of state comes
 * from it and, once it is spent, a call that needs more fails with -ENOMEM
 * before it changed anything; what must not fail once durable (a prepared
 * commit's install, a staged offset's commit) needs no memory, even with the
 * pool spent; freed entries make room again; the replay's spill takes the
 * heap. Each fill runs until the pool refuses, so the test fails if the pool
 * is not what the allocations come from.
 */
static void test_pool(void)
{
	struct grp_mem mem = { 0 };
	CU_ASSERT_FATAL(txn_arena_init(&mem.arena, 256 << 10, 64) == 0);
	struct grp_coord *c;
	struct grp_offsets *t;
	CU_ASSERT_FATAL(grp_coord_create_in(&c, &mem) == 0);
	CU_ASSERT_FATAL(grp_offsets_create_in(&t, &mem) == 0);
	/* A group with a member whose metadata is large: its blocks are the pool's. */
	struct grp_group *g = grp_get(c, "big", 3);
	CU_ASSERT_FATAL(g != NULL);
	static uint8_t meta[16 << 10];
	memset(meta, 'm', sizeof(meta));
	struct grp_join_req q = jreq("", "rdk", "range", NULL);
	q.proto_metas[0] = meta;
	q.proto_meta_lens[0] = sizeof(meta);
	size_t before = mem.arena.used;
	ut_o.n = 0;
	CU_ASSERT_EQUAL_FATAL(grp_join(g, &q, W(1), 0, &ut_o), 0);
	CU_ASSERT(mem.arena.used >= before + sizeof(meta) + sizeof(struct grp_member));
	struct grp_member *lead = g->members[0];
	CU_ASSERT_EQUAL(g->state, GRP_COMPLETING_REBALANCE);
	/* Committed offsets until the pool refuses one. */
	uint32_t n = 0;
	int err = 0;
	char topic[32];
	struct grp_offset *o;
	for (; n < 100000; n++) {   /* bounded: should the pool not be what they take, the test fails */
		snprintf(topic, sizeof(topic), "t%u", n);
		if ((err = grp_offset_prepare(t, "big", 3, topic, strlen(topic), 0, -1, &o)) < 0)
			break;
		CU_ASSERT_PTR_NOT_NULL(o);   /* a new key: a new entry */
		grp_offset_install(t, o, "big", 3, topic, strlen(topic), 0, n, 0, UT_TS, NULL, -1);
	}
	CU_ASSERT_EQUAL(err, -ENOMEM);
	CU_ASSERT(n > 100);
	CU_ASSERT_EQUAL(grp_offsets_count(t), n);
	/* Spent, a key committed again still goes in: in place, no memory (metadata that fits its block). */
	const struct grp_offset *t5 = grp_offset_get(t, "big", 3, "t5", 2, 0);
	int32_t fit = t5->meta_cap;   /* what the rest of its block holds */
	CU_ASSERT_EQUAL_FATAL(grp_offset_prepare(t, "big", 3, "t5", 2, 0, fit, &o), 0);
	CU_ASSERT_PTR_NULL(o);
	grp_offset_install(t, o, "big", 3, "t5", 2, 0, 555, 0, UT_TS, "metametametametametametametameta", fit);
	CU_ASSERT(t5->offset == 555 && t5->meta_len == fit && !memcmp(t5->meta, "metametametametametametametameta", fit));
	CU_ASSERT(fit < 32);
	CU_ASSERT_EQUAL(grp_offset_put(t, "big", 3, "t6", 2, 0, 666, 0, UT_TS, NULL, -1), 0);
	/* Not metadata larger than its block holds. */
	CU_ASSERT_EQUAL(grp_offset_prepare(t, "big", 3, "t5", 2, 0, 1000, &o), -ENOMEM);
	/* Spent: a new group, a new member, an assignment, a staged offset are refused, unchanged. */
	CU_ASSERT_PTR_NULL(grp_get(c, "other", 5));
	CU_ASSERT_PTR_NULL(grp_find(c, "other", 5));
	struct grp_join_req q2 = jreq("", "rdk2", "range", NULL);
	q2.proto_metas[0] = meta;
	q2.proto_meta_lens[0] = sizeof(meta);
	ut_o.n = 0;
	CU_ASSERT_EQUAL(grp_join(g, &q2, W(2), 1, &ut_o), -ENOMEM);
	CU_ASSERT_EQUAL(g->nmembers, 1);
	CU_ASSERT_EQUAL(ut_o.n, 0);
	struct grp_assign a = { lead->id, lead->id_len, meta, sizeof(meta) };
	ut_o.n = 0;
	CU_ASSERT_EQUAL(grp_sync(g, lead->id, lead->id_len, g->generation, &a, 1, W(3), 2, &ut_o), -ENOMEM);
	CU_ASSERT_EQUAL(g->state, GRP_COMPLETING_REBALANCE);
	CU_ASSERT_EQUAL(ut_o.n, 0);
	uint8_t k[GRP_PENDING_KEY_BYTES_MAX];
	int kn = grp_pending_key_encode(k, sizeof(k), 7, "big", 3, "fresh", 5, 0);
	CU_ASSERT_EQUAL(grp_pending_put(t, k, (size_t)kn, 5, 0, UT_TS, NULL, -1), -ENOMEM);
	CU_ASSERT_EQUAL(grp_pending_count(t), 0);
	/* Freeing committed offsets makes room (64 in a row: buddies that merge into the larger blocks
	 * a staged entry's longer key takes): a staged one, then a prepared commit. */
	for (uint32_t i = 0; i < 64; i++) {
		uint8_t k1[GRP_KEY_BYTES_MAX];
		snprintf(topic, sizeof(topic), "t%u", i);
		int k1n = grp_offset_key_encode(k1, sizeof(k1), "big", 3, topic, strlen(topic), 0);
		grp_offset_del(t, k1, (size_t)k1n);
	}
	CU_ASSERT_EQUAL_FATAL(grp_pending_put(t, k, (size_t)kn, 5, 0, UT_TS, "m", 1), 0);
	/* t70's new value with metadata its entry cannot hold: a fresh block, prepared now. */
	static char big_meta[200];
	memset(big_meta, 'b', sizeof(big_meta));
	struct grp_offset *p1;
	CU_ASSERT_EQUAL_FATAL(grp_offset_prepare(t, "big", 3, "t70", 3, 0, (int32_t)sizeof(big_meta), &p1), 0);
	CU_ASSERT_FATAL(p1 != NULL);
	/* Fill what is left, then: the install and the staged offset's commit still go through. */
	uint32_t more = 0;
	while (more < 100000 && grp_offset_prepare(t, "big", 3, "u", 1, (int32_t)more, -1, &o) == 0)
		grp_offset_install(t, o, "big", 3, "u", 1, (int32_t)more, 1, 0, UT_TS, NULL, -1), more++;
	CU_ASSERT(more < 100000);
	grp_offset_install(t, p1, "big", 3, "t70", 3, 0, 99, 0, UT_TS, big_meta, (int32_t)sizeof(big_meta));
	const struct grp_offset *t70 = grp_offset_get(t, "big", 3, "t70", 3, 0);   /* replaced t70's entry */
	CU_ASSERT(t70 && t70->offset == 99 && t70->meta_len == (int16_t)sizeof(big_meta) &&
	          !memcmp(t70->meta, big_meta, sizeof(big_meta)));
	CU_ASSERT_EQUAL(grp_pending_end_begin(t, k, (size_t)kn), 0);
	CU_ASSERT_EQUAL(grp_pending_end_apply(t, k, (size_t)kn, true, 5, 0, UT_TS, "m", 1), 0);
	CU_ASSERT_EQUAL(grp_pending_count(t), 0);
	const struct grp_offset *f = grp_offset_get(t, "big", 3, "fresh", 5, 0);
	CU_ASSERT(f && f->offset == 5 && f->meta_len == 1 && f->meta[0] == 'm');
	/* A failed write's prepared entry is dropped: the pool has it back. */
	uint8_t k1[GRP_KEY_BYTES_MAX];
	int k1n = grp_offset_key_encode(k1, sizeof(k1), "big", 3, "t80", 3, 0);
	grp_offset_del(t, k1, (size_t)k1n);
	size_t used = mem.arena.used;
	struct grp_offset *p2;
	CU_ASSERT_EQUAL_FATAL(grp_offset_prepare(t, "big", 3, "t80", 3, 0, -1, &p2), 0);
	CU_ASSERT_FATAL(p2 != NULL);
	grp_offset_drop(t, p2);
	CU_ASSERT_EQUAL(mem.arena.used, used);
	CU_ASSERT_PTR_NULL(grp_offset_get(t, "big", 3, "t80", 3, 0));
	/* The replay's spill: past the pool, the heap, counted. */
	mem.spill = true;
	CU_ASSERT_PTR_NOT_NULL(grp_get(c, "spilled", 7));
	for (uint32_t i = 0; i < 200; i++) {
		snprintf(topic, sizeof(topic), "s%u", i);
		CU_ASSERT_EQUAL(grp_offset_put(t, "spilled", 7, topic, strlen(topic), 0, i, 0, UT_TS, NULL, -1), 0);
	}
	CU_ASSERT(mem.spilled > 0);
	mem.spill = false;
	grp_offsets_destroy(t);
	grp_coord_destroy(c);
	CU_ASSERT_EQUAL(mem.arena.used, 0);   /* everything went back */
	txn_arena_fini(&mem.arena);
}

int main(void)
{
	CU_pSuite s;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	s = CU_add_suite("group", NULL, NULL);
	CU_add_test(s, "state moves vs Kafka's table; setter aborts", test_state_table);
	CU_add_test(s, "one member: join, sync, heartbeat, commit checks, leave", test_single_member);
	CU_add_test(s, "two members: rebalance, leader sync, leader leaves", test_two_members);
	CU_add_test(s, "static members: rejoin without rebalance, fencing, leader, expiry", test_static_members);
	CU_add_test(s, "KIP-394: MEMBER_ID_REQUIRED, then join with the given id", test_member_id_required);
	CU_add_test(s, "membership records: write, restore, carry on", test_group_records);
	CU_add_test(s, "protocols: type, common assignor, leader's order", test_protocols);
	CU_add_test(s, "rebalance timeout and session expiry", test_expiry_and_timeout);
	CU_add_test(s, "rebalance timeout bounded, session timeout bounds", test_rebalance_bound);
	CU_add_test(s, "a waiting request whose client left is answered at once", test_waiter_gone);
	CU_add_test(s, "leader expires while the follower waits in SyncGroup", test_expiry_in_stable_pair);
	CU_add_test(s, "initial rebalance delay (group.initial.rebalance.delay.ms)", test_initial_delay);
	CU_add_test(s, "group table: thousands of groups", test_many_groups);
	CU_add_test(s, "offsets: put, get, replace, limits", test_offsets);
	CU_add_test(s, "offsets: recovery, tombstones, damage", test_offsets_recovery);
	CU_add_test(s, "DeleteGroups: Dead, simple commits, made anew; the tombstone read back", test_group_delete);
	CU_add_test(s, "staged (pending) transactional offsets: keys, table, recovery", test_pending);
	CU_add_test(s, "staged offsets stay pending until their transaction's end is durable", test_pending_end);
	CU_add_test(s, "the group state pool: refused when spent, installs need none, spill", test_pool);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
