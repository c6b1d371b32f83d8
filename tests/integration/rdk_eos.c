/*
 * rdk_eos.c - an exactly-once consume-transform-produce loop with librdkafka
 * for eos.sh, eos_two.sh and eos_broker_kill.sh: a group consumer
 * (read_committed, no auto commit) and a transactional producer with a fixed
 * transactional.id, so that a restarted instance fences the one it replaces
 * and aborts its open transaction.
 *
 *   rdk_eos --bootstrap B --in T --out O --group G --txn-id ID --partitions P
 *           [--batch N] [--txn-delay-ms D] [--offsets-delay-ms D]
 *           [--idle-seconds S] [--session-ms MS] [--txn-timeout-ms MS]
 *           [--leave-staged] [--fetch-bytes N] [--debug CONTEXTS]
 *   rdk_eos --check-committed --bootstrap B --in T --group G --partitions P
 *
 * Loop: read up to N records; in one transaction copy each (key and value
 * unchanged) to the same partition of O, send the consumer's positions with
 * its group metadata (AddOffsetsToTxn + TxnOffsetCommit), commit. A revoke
 * aborts the open transaction; an abortable error aborts it and rewinds the
 * consumer to the group's committed offsets; retriable errors are retried (a
 * broker restart looks like that), so only a fatal error ends an instance
 * early. --txn-delay-ms holds each transaction open a while before its
 * offsets are sent (the "work" of a real application), so a kill lands inside
 * an open transaction more often and the input lasts long enough for several
 * kills; --offsets-delay-ms holds it open after they were sent, so that a
 * kill leaves offsets staged, which a new owner of those partitions must
 * wait out. Stops when the group's committed offsets reach the high
 * watermarks of all P partitions of T ("done"), after S seconds with nothing
 * to read ("idle"), or on SIGTERM ("left"): the open transaction is committed
 * and the consumer closed, so the group gets a LeaveGroup and the others take
 * its partitions over at once. With --leave-staged the consumer is closed
 * while the transaction's offsets are still staged ("staged N") and the
 * commit waits for SIGUSR1 (see leave()). --fetch-bytes sets the consumer's
 * max.partition.fetch.bytes: librdkafka queues what one Fetch brings
 * partition after partition, so with its 1 MB default a rate-limited copier
 * works through the partitions nearly one at a time; a small value
 * interleaves them, and each transaction then spans several. --debug sets librdkafka's debug
 * contexts on the consumer (stderr; "topic" shows OffsetFetch answers with
 * their unstable partitions).
 *
 * --check-committed: no copying; prints "partition P committed C end H" for
 * each partition of T (OffsetFetch with RequireStable, which librdkafka
 * 2.0.2 sets whenever isolation.level is read_committed, so an offset staged
 * by an open transaction is waited out; one still unstable after
 * EOS_WAIT_MS is reported with its error) and "committed-ok" or
 * "committed-mismatch N".
 *
 * stdout: "assigned N P1,P2,...", "revoked N", "commit K RECORDS", "abort K WHY N",
 * "staged N", "done"/"idle"/"left" (with counts), "fatal WHAT".
 * Exit status: 0 done or left (--check-committed: all equal), 1 client
 * error, idle, fatal error (--check-committed: a mismatch), 2 usage.
 * Locality: test process, one thread (plus librdkafka's); the rebalance
 * callback runs on it from rd_kafka_consumer_poll.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#define EOS_WAIT_MS       30000   /* every blocking client call */
#define EOS_POLL_MS       100
#define EOS_CHECK_IDLE_MS 500     /* nothing read this long: check whether all is committed */
#define EOS_PARTS_MAX     1024
#define EOS_RETRY_MS      200     /* pause before retrying a retriable error */

enum { exit_ok = 0, exit_fail = 1, exit_usage = 2 };

/* Options. Locality: main thread. */
struct opts {
	const char *bootstrap, *in, *out, *group, *txn_id;
	const char *debug;
	int partitions, batch, idle_s, session_ms, txn_delay_ms, txn_timeout_ms, offsets_delay_ms, fetch_bytes;
	bool check_committed, leave_staged;
};

/* The loop's state, shared with the rebalance callback. Locality: main thread. */
struct eos {
	const struct opts *o;
	rd_kafka_t *c, *p;
	bool in_txn, leaving, closed;
	int in_batch;          /* records produced in the open transaction */
	long txns, aborts;
};

/* SIGTERM: leave the group cleanly; SIGUSR1: commit what --leave-staged left open. */
static volatile sig_atomic_t leave_requested, commit_requested;

static void on_signal(int sig)
{
	if (sig == SIGTERM)
		leave_requested = 1;
	else
		commit_requested = 1;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void usage(void)
{
	fprintf(stderr, "usage: rdk_eos --bootstrap B --in T --out O --group G --txn-id ID --partitions P "
	                "[--batch N] [--txn-delay-ms D] [--offsets-delay-ms D] [--idle-seconds S] [--session-ms MS]\n"
	                "               [--txn-timeout-ms MS] [--leave-staged] [--fetch-bytes N] [--debug CONTEXTS]\n"
	                "       rdk_eos --check-committed --bootstrap B --in T --group G --partitions P\n");
	exit(exit_usage);
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char err[256];
	if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "rdk_eos: conf %s=%s: %s\n", k, v, err);
		exit(exit_usage);
	}
}

/* A fatal error (fenced, or the client gave up): this instance is done for. */
static void die(const char *what, rd_kafka_error_t *e)
{
	fprintf(stderr, "rdk_eos: %s: %s (%s)\n", what, e ? rd_kafka_error_string(e) : "failed",
		e ? rd_kafka_error_name(e) : "-");
	printf("fatal %s\n", what);
	fflush(stdout);
	exit(exit_fail);
}

/* The group's committed offsets of l, once settled: librdkafka asks with
 * RequireStable (read_committed) and, after its own few retries, leaves
 * UNSTABLE_OFFSET_COMMIT in the entry while a transaction that staged an
 * offset there is still open; that entry's offset is not the one to resume
 * from, so ask again until none is left or EOS_WAIT_MS is up. */
static rd_kafka_resp_err_t committed_settled(rd_kafka_t *c, rd_kafka_topic_partition_list_t *l)
{
	int64_t deadline = now_ms() + EOS_WAIT_MS;
	for (;;) {
		rd_kafka_resp_err_t e = rd_kafka_committed(c, l, EOS_WAIT_MS);
		for (int i = 0; !e && i < l->cnt; i++)
			e = l->elems[i].err;
		if (!e || now_ms() >= deadline)
			return e;
		usleep(EOS_RETRY_MS * 1000);
	}
}

/* Back to what the group committed, so an aborted batch is read again. */
static void rewind_to_committed(struct eos *s)
{
	rd_kafka_topic_partition_list_t *pos;
	if (rd_kafka_assignment(s->c, &pos))
		die("assignment", NULL);
	if (pos->cnt) {
		rd_kafka_resp_err_t e = committed_settled(s->c, pos);
		if (e)
			die("committed", rd_kafka_error_new(e, "%s", rd_kafka_err2str(e)));
		for (int i = 0; i < pos->cnt; i++)
			if (pos->elems[i].offset < 0)
				pos->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
		rd_kafka_error_t *se = rd_kafka_seek_partitions(s->c, pos, EOS_WAIT_MS);
		if (se)
			die("seek", se);
	}
	rd_kafka_topic_partition_list_destroy(pos);
}

static void txn_abort(struct eos *s, const char *why, bool rewind)
{
	if (!s->in_txn)
		return;
	rd_kafka_error_t *e;
	while ((e = rd_kafka_abort_transaction(s->p, EOS_WAIT_MS)) && rd_kafka_error_is_retriable(e)) {
		fprintf(stderr, "rdk_eos: abort: %s: retrying\n", rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		usleep(EOS_RETRY_MS * 1000);
	}
	if (e)
		die("abort_transaction", e);
	printf("abort %ld %s %d\n", ++s->aborts, why, s->in_batch);
	fflush(stdout);
	s->in_txn = false;
	s->in_batch = 0;
	if (rewind)
		rewind_to_committed(s);
}

/* The consumer's positions to the open transaction (TxnOffsetCommit: staged
 * by the group coordinator until the commit). Returns NULL or the error. */
static rd_kafka_error_t *txn_send_offsets(struct eos *s)
{
	rd_kafka_topic_partition_list_t *pos;
	if (rd_kafka_assignment(s->c, &pos) || rd_kafka_position(s->c, pos))
		die("assignment/position", NULL);
	rd_kafka_consumer_group_metadata_t *meta = rd_kafka_consumer_group_metadata(s->c);
	rd_kafka_error_t *e;
	while ((e = rd_kafka_send_offsets_to_transaction(s->p, pos, meta, EOS_WAIT_MS)) &&
	       rd_kafka_error_is_retriable(e)) {
		fprintf(stderr, "rdk_eos: send_offsets: %s: retrying\n", rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		usleep(EOS_RETRY_MS * 1000);
	}
	rd_kafka_consumer_group_metadata_destroy(meta);
	rd_kafka_topic_partition_list_destroy(pos);
	return e;
}

/* Commits the open transaction unless e (from txn_send_offsets) says
 * otherwise: a retriable error is retried, an abortable one aborts (and
 * rewinds when asked), anything else is fatal. */
static void txn_end(struct eos *s, rd_kafka_error_t *e, bool rewind)
{
	while (!e) {
		e = rd_kafka_commit_transaction(s->p, EOS_WAIT_MS);
		if (!e) {
			printf("commit %ld %d\n", ++s->txns, s->in_batch);
			fflush(stdout);
			s->in_txn = false;
			s->in_batch = 0;
			return;
		}
		if (!rd_kafka_error_is_retriable(e))
			break;
		fprintf(stderr, "rdk_eos: commit: %s: retrying\n", rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		e = NULL;
	}
	if (rd_kafka_error_txn_requires_abort(e)) {
		fprintf(stderr, "rdk_eos: commit: %s: aborting\n", rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		txn_abort(s, "error", rewind);
		return;
	}
	die("send_offsets/commit", e);
}

/* Ends the open transaction: positions to it, then commit. */
static void txn_commit(struct eos *s)
{
	if (s->o->txn_delay_ms)
		usleep((useconds_t)s->o->txn_delay_ms * 1000);
	rd_kafka_error_t *e = txn_send_offsets(s);
	if (!e && s->o->offsets_delay_ms)
		usleep((useconds_t)s->o->offsets_delay_ms * 1000);
	txn_end(s, e, true);
}

/* SIGTERM: leave the group with nothing of this instance left open. By
 * default the open transaction is committed, then the consumer closed
 * (LeaveGroup). --leave-staged: the offsets are sent, the consumer is closed
 * with them still staged, and the commit waits for SIGUSR1 (at most
 * EOS_WAIT_MS): the new owner of these partitions must wait for it
 * (RequireStable) rather than resume from the older committed offsets and
 * copy this transaction's records a second time. */
static void leave(struct eos *s)
{
	if (s->in_txn && s->o->leave_staged) {
		rd_kafka_error_t *e = txn_send_offsets(s);
		s->leaving = true;   /* the close's revoke keeps the transaction */
		rd_kafka_consumer_close(s->c);
		s->closed = true;
		printf("staged %d\n", s->in_batch);
		fflush(stdout);
		for (int64_t end = now_ms() + EOS_WAIT_MS; !commit_requested && now_ms() < end;)
			usleep(10 * 1000);
		txn_end(s, e, false);
	} else if (s->in_txn) {
		txn_commit(s);
	}
	printf("left %ld txns %ld aborts\n", s->txns, s->aborts);
}

/* Eager protocol: a revoke takes every partition, so the open transaction
 * (whose offsets belong to them) is aborted before they are given up. */
static void rebalance_cb(rd_kafka_t *c, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
			 void *opaque)
{
	struct eos *s = opaque;
	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		printf("assigned %d", parts->cnt);
		for (int i = 0; i < parts->cnt; i++)
			printf("%c%d", i ? ',' : ' ', (int)parts->elems[i].partition);
		printf("\n");
		fflush(stdout);
		rd_kafka_assign(c, parts);
	} else {
		if (!s->leaving)
			txn_abort(s, "revoke", false);
		printf("revoked %d\n", parts->cnt);
		fflush(stdout);
		rd_kafka_assign(c, NULL);
	}
}

/* True when the group's committed offset of every input partition is its high watermark. */
static bool all_committed(struct eos *s)
{
	const struct opts *o = s->o;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(o->partitions);
	for (int p = 0; p < o->partitions; p++)
		rd_kafka_topic_partition_list_add(l, o->in, p);
	bool ok = rd_kafka_committed(s->c, l, EOS_WAIT_MS) == 0;
	/* An entry's err (UNSTABLE_OFFSET_COMMIT: a transaction staged an offset there) means not yet. */
	for (int i = 0; ok && i < l->cnt; i++) {
		int64_t lo, hi;
		ok = !l->elems[i].err &&
		     !rd_kafka_query_watermark_offsets(s->c, o->in, l->elems[i].partition, &lo, &hi, EOS_WAIT_MS) &&
		     l->elems[i].offset == hi;
	}
	rd_kafka_topic_partition_list_destroy(l);
	return ok;
}

static void produce_copy(struct eos *s, const rd_kafka_message_t *m)
{
	for (;;) {
		rd_kafka_resp_err_t e = rd_kafka_producev(s->p, RD_KAFKA_V_TOPIC(s->o->out),
			RD_KAFKA_V_PARTITION(m->partition), RD_KAFKA_V_KEY(m->key, m->key_len),
			RD_KAFKA_V_VALUE(m->payload, m->len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_END);
		if (!e)
			return;
		if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			fprintf(stderr, "rdk_eos: produce: %s\n", rd_kafka_err2str(e));
			printf("fatal produce\n");
			exit(exit_fail);
		}
		rd_kafka_poll(s->p, 10);
	}
}

static rd_kafka_t *client_new(rd_kafka_type_t type, rd_kafka_conf_t *conf)
{
	char err[256];
	rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "rdk_eos: rd_kafka_new: %s\n", err);
		exit(exit_fail);
	}
	return rk;
}

/* The group consumer: read_committed (which also makes librdkafka send
 * RequireStable on every OffsetFetch), offsets only through transactions. */
static rd_kafka_t *consumer_new(const struct opts *o, struct eos *s)
{
	char num[32];
	rd_kafka_conf_t *cc = rd_kafka_conf_new();
	conf_set(cc, "bootstrap.servers", o->bootstrap);
	conf_set(cc, "client.id", "rdk_eos_c");
	conf_set(cc, "group.id", o->group);
	conf_set(cc, "isolation.level", "read_committed");
	conf_set(cc, "enable.auto.commit", "false");
	conf_set(cc, "auto.offset.reset", "earliest");
	snprintf(num, sizeof(num), "%d", o->session_ms);
	/* A killed instance stays a member until its session ends; short keeps restarts quick. */
	conf_set(cc, "session.timeout.ms", num);
	conf_set(cc, "heartbeat.interval.ms", "300");
	conf_set(cc, "fetch.wait.max.ms", "100");
	if (o->fetch_bytes) {
		snprintf(num, sizeof(num), "%d", o->fetch_bytes);
		conf_set(cc, "max.partition.fetch.bytes", num);
	}
	if (o->debug)
		conf_set(cc, "debug", o->debug);
	if (s) {
		rd_kafka_conf_set_rebalance_cb(cc, rebalance_cb);
		rd_kafka_conf_set_opaque(cc, s);
	}
	rd_kafka_t *c = client_new(RD_KAFKA_CONSUMER, cc);
	rd_kafka_poll_set_consumer(c);
	return c;
}

/* --check-committed: the group's settled offsets against the input's end
 * offsets, without joining the group. */
static int check_committed(const struct opts *o)
{
	rd_kafka_t *c = consumer_new(o, NULL);
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(o->partitions);
	for (int p = 0; p < o->partitions; p++)
		rd_kafka_topic_partition_list_add(l, o->in, p);
	rd_kafka_resp_err_t e = committed_settled(c, l);
	int bad = 0;
	for (int i = 0; i < l->cnt; i++) {
		int64_t lo, hi = -1;
		rd_kafka_resp_err_t we = rd_kafka_query_watermark_offsets(c, o->in, l->elems[i].partition, &lo, &hi,
									 EOS_WAIT_MS);
		printf("partition %d committed %" PRId64 " end %" PRId64 "%s%s\n", (int)l->elems[i].partition,
		       l->elems[i].offset, hi, l->elems[i].err ? " error " : "",
		       l->elems[i].err ? rd_kafka_err2name(l->elems[i].err) : "");
		bad += e || we || l->elems[i].err || l->elems[i].offset != hi;
	}
	if (e)
		fprintf(stderr, "rdk_eos: committed: %s\n", rd_kafka_err2str(e));
	if (bad)
		printf("committed-mismatch %d\n", bad);
	else
		printf("committed-ok\n");
	rd_kafka_topic_partition_list_destroy(l);
	rd_kafka_destroy(c);
	return bad ? exit_fail : exit_ok;
}

static int run(const struct opts *o)
{
	static struct eos s;
	char num[32];
	s.o = o;

	rd_kafka_conf_t *pc = rd_kafka_conf_new();
	conf_set(pc, "bootstrap.servers", o->bootstrap);
	conf_set(pc, "client.id", "rdk_eos_p");
	conf_set(pc, "transactional.id", o->txn_id);
	snprintf(num, sizeof(num), "%d", o->txn_timeout_ms);
	/* How long the broker waits before it aborts the open transaction of a dead instance. */
	conf_set(pc, "transaction.timeout.ms", num);
	conf_set(pc, "linger.ms", "5");
	s.p = client_new(RD_KAFKA_PRODUCER, pc);
	/* First: fence the previous instance and abort its transaction, so the
	 * group's offsets are settled before this consumer fetches them. */
	rd_kafka_error_t *e = rd_kafka_init_transactions(s.p, EOS_WAIT_MS);
	if (e)
		die("init_transactions", e);

	s.c = consumer_new(o, &s);
	rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(sub, o->in, RD_KAFKA_PARTITION_UA);
	if (rd_kafka_subscribe(s.c, sub)) {
		fprintf(stderr, "rdk_eos: subscribe failed\n");
		return exit_fail;
	}
	rd_kafka_topic_partition_list_destroy(sub);

	int64_t last_read = now_ms(), last_check = 0;
	int rc = exit_fail;
	for (;;) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(s.c, EOS_POLL_MS);
		rd_kafka_poll(s.p, 0);
		if (m && !m->err) {
			last_read = now_ms();
			if (!s.in_txn) {
				e = rd_kafka_begin_transaction(s.p);
				if (e)
					die("begin_transaction", e);
				s.in_txn = true;
			}
			produce_copy(&s, m);
			s.in_batch++;
		} else if (m && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
			fprintf(stderr, "rdk_eos: consume: %s\n", rd_kafka_message_errstr(m));
		}
		if (m)
			rd_kafka_message_destroy(m);
		/* --leave-staged leaves from inside a transaction, so it waits for one. */
		if (leave_requested && (s.in_txn || !o->leave_staged)) {
			leave(&s);
			rc = exit_ok;
			break;
		}
		/* A full batch, or nothing more right now: commit what there is. */
		if (s.in_txn && (s.in_batch >= o->batch || !m))
			txn_commit(&s);
		int64_t t = now_ms();
		if (!s.in_txn && t - last_read >= EOS_CHECK_IDLE_MS && t - last_check >= EOS_CHECK_IDLE_MS) {
			last_check = t;
			if (all_committed(&s)) {
				printf("done %ld txns %ld aborts\n", s.txns, s.aborts);
				rc = exit_ok;
				break;
			}
		}
		if (t - last_read >= (int64_t)o->idle_s * 1000) {
			printf("idle %ld txns %ld aborts\n", s.txns, s.aborts);
			break;
		}
	}
	fflush(stdout);
	if (!s.closed)
		rd_kafka_consumer_close(s.c);
	rd_kafka_destroy(s.c);
	rd_kafka_destroy(s.p);
	return rc;
}

static int parse_int(const char *v, int lo, int hi)
{
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno || *end || end == v || n < lo || n > hi)
		usage();
	return (int)n;
}

int main(int argc, char **argv)
{
	struct opts o = { .batch = 500, .idle_s = 30, .session_ms = 2000, .txn_timeout_ms = 60000 };
	signal(SIGPIPE, SIG_IGN);
	/* SA_RESTART: librdkafka's calls and stdio on this thread are not cut short by it. */
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 1; i < argc; i += 2) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		/* The two flags take no value. */
		if (!strcmp(a, "--check-committed")) { o.check_committed = true; i--; }
		else if (!strcmp(a, "--leave-staged")) { o.leave_staged = true; i--; }
		else if (!v) usage();
		else if (!strcmp(a, "--bootstrap")) o.bootstrap = v;
		else if (!strcmp(a, "--in")) o.in = v;
		else if (!strcmp(a, "--out")) o.out = v;
		else if (!strcmp(a, "--group")) o.group = v;
		else if (!strcmp(a, "--txn-id")) o.txn_id = v;
		else if (!strcmp(a, "--partitions")) o.partitions = parse_int(v, 1, EOS_PARTS_MAX);
		else if (!strcmp(a, "--batch")) o.batch = parse_int(v, 1, 100000);
		else if (!strcmp(a, "--txn-delay-ms")) o.txn_delay_ms = parse_int(v, 0, 10000);
		else if (!strcmp(a, "--idle-seconds")) o.idle_s = parse_int(v, 1, 3600);
		else if (!strcmp(a, "--session-ms")) o.session_ms = parse_int(v, 1000, 600000);
		else if (!strcmp(a, "--txn-timeout-ms")) o.txn_timeout_ms = parse_int(v, 1000, 900000);
		else if (!strcmp(a, "--offsets-delay-ms")) o.offsets_delay_ms = parse_int(v, 0, 10000);
		else if (!strcmp(a, "--fetch-bytes")) o.fetch_bytes = parse_int(v, 1024, 1 << 30);
		else if (!strcmp(a, "--debug")) o.debug = v;
		else usage();
	}
	if (!o.bootstrap || !o.in || !o.group || !o.partitions)
		usage();
	if (o.check_committed)
		return check_committed(&o);
	if (!o.out || !o.txn_id)
		usage();
	return run(&o);
}
