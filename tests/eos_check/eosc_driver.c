/*
 * eosc_driver.c - the clients of the randomized exactly-once checker
 * (eosc_run.py starts them, eosc_check.py judges what they logged and read).
 *
 *   eosc_driver create  --bootstrap B --topics T:P[,T:P..]
 *   eosc_driver produce --bootstrap B --txn-id ID --instance N --topics T:P[,..]
 *                       --log FILE --seed S [--abort-pct N] [--txn-max N]
 *                       [--hold-ms-max N] [--txn-timeout-ms MS]
 *   eosc_driver copy    --bootstrap B --txn-id ID --instance N --group G
 *                       --topics T:P[,..] --out T --log FILE --seed S
 *                       [--abort-pct N] [--txn-max N] [--txn-timeout-ms MS]
 *   eosc_driver close   --bootstrap B --txn-id ID --instance N --log FILE
 *   eosc_driver read    --bootstrap B --topics T:P[,..] --isolation committed|uncommitted
 *                       --out FILE [--settle-s S]
 *
 * produce: one transactional producer instance (acks=all, idempotent). Each
 * transaction writes 1..--txn-max records, each to a random partition of a
 * random topic of --topics, is held open up to --hold-ms-max, and is then
 * committed, or with --abort-pct odds aborted, half of those after a flush
 * (so the records are in the log before the abort) and half without. Runs
 * until SIGTERM (ends after the open transaction). A record's key and value
 * are its id "TXNID.INSTANCE.TXN.SEQ", unique over the run.
 *
 * copy: a consume-transform-produce copier: a group consumer (read_committed,
 * no auto commit) on the input topics and a transactional producer that
 * copies each record, value "ID<ORIGINAL", to partition K of --out, where K
 * numbers the input partitions in --topics order (a:3,b:3: a-0 is 0, b-0 is
 * 3), so each output partition is one input partition's copy in order. Each
 * transaction holds 1..--txn-max records and the consumer's positions
 * (send_offsets_to_transaction); --abort-pct of them are aborted instead and
 * the consumer rewound to the group's committed offsets (not once finishing). SIGUSR1: finish,
 * i.e. exit once the group's settled committed offsets are the input's high
 * watermarks ("done"); meanwhile a position past the committed offset (the
 * markers at a partition's end) is committed in a transaction of offsets
 * only.
 *
 * close: init_transactions and exit: fences the transactional id's previous
 * instances and aborts whatever they left open.
 *
 * Error handling is what a Kafka application should do: a retriable error is
 * retried, an abortable one aborts the transaction, a fatal one (fenced, or
 * the client gave up) ends the instance with status 3 (the runner starts a
 * new one with the same transactional id).
 *
 * The log (--log) is appended one line per write(2) as it happens, so a
 * SIGKILL leaves a usable prefix. Lines: "MS EVENT ARGS", MS the
 * CLOCK_MONOTONIC milliseconds (one clock for all processes of the machine):
 *   start TXNID INSTANCE PID | init_ok | init_err NAME KIND
 *   begin TXN | send TXN SEQ TOPIC PART [ORIG] | dr TXN SEQ TOPIC PART OFFSET ERR
 *   produce_err TXN SEQ NAME | flush TXN ERR | offsets TXN T:P:O,..
 *   commit_req TXN N | commit_ok TXN | commit_err TXN NAME KIND
 *   abort_req TXN flush|noflush|error|revoke | abort_ok TXN | abort_err TXN NAME KIND
 *   rewind | assigned N | revoked N | behind ERR T:P:COMMITTED:HW:mine|other,..
 *   done | fatal WHAT NAME | exit
 * KIND is fatal, abortable, retriable or other; ERR is "-" for success.
 *
 * read: assigns every partition from the beginning with the isolation level
 * and reads until each partition is at its end (EOF: the LSO for
 * read_committed) and, for read_committed, that end is the high watermark,
 * or --settle-s passed. --out gets "rec TOPIC PART OFFSET VALUE" per record
 * and "end TOPIC PART POSITION LISTOFFSETS HW" per partition: POSITION the
 * last EOF offset, LISTOFFSETS the latest offset by this handle's isolation
 * (the LSO for read_committed), HW the high watermark (read_uncommitted).
 *
 * Exit status: 0 ok, 1 error, 2 usage, 3 fatal client error (produce/copy).
 * Locality: test process, one thread (plus librdkafka's); delivery reports
 * and rebalance callbacks run on it from rd_kafka_poll/flush/consumer_poll.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#define eosc_call_ms          60000   /* every blocking client call: a busy machine is slow */
#define eosc_retry_ms         200     /* pause before retrying a retriable error */
#define eosc_poll_ms          100
#define eosc_finish_check_ms  1000    /* copier finishing: how often it compares offsets */
#define eosc_finish_idle_ms   1000    /* ... once nothing came this long (a check costs ~13 round trips) */
#define eosc_finish_log_ms    10000   /* copier finishing: how often it logs what is missing */
#define eosc_topics_max       8
#define eosc_parts_max        64
#define eosc_line_bytes_max   1024
#define eosc_value_bytes_max  256
#define eosc_seq_max          65535   /* records per transaction: fits the opaque packing */

enum { exit_ok = 0, exit_fail = 1, exit_usage = 2, exit_fatal = 3 };

/* Options of all subcommands. Locality: main thread. */
struct opts {
	const char *cmd, *bootstrap, *txn_id, *group, *out, *log, *isolation;
	char *topic[eosc_topics_max];
	int parts[eosc_topics_max];
	int ntopics;
	int instance, abort_pct, txn_max, hold_ms_max, txn_timeout_ms, settle_s;
	uint64_t seed;
};

/* One client's state. Locality: main thread. */
struct client {
	const struct opts *o;
	rd_kafka_t *p, *c;    /* transactional producer; consumer (copy only) */
	int logfd;
	uint64_t rng;
	long txn;             /* number of the open or last transaction */
	int in_txn_recs;      /* records produced in the open transaction */
	bool in_txn;
};

static volatile sig_atomic_t stop_requested, finish_requested;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		finish_requested = 1;
	else
		stop_requested = 1;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* splitmix64: small, seedable, the same on every machine. */
static uint64_t rnd(struct client *s)
{
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int rnd_below(struct client *s, int n)
{
	return n > 0 ? (int)(rnd(s) % (uint64_t)n) : 0;
}

/* One log line, one write(2) on an O_APPEND fd: a kill never leaves half a line
 * in the middle, at most a torn last line, which the checker ignores. */
static void eosc_log(struct client *s, const char *fmt, ...)
{
	char line[eosc_line_bytes_max];
	int n = snprintf(line, sizeof(line), "%" PRId64 " ", now_ms());
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (s->logfd >= 0 && write(s->logfd, line, (size_t)n) != n) {
		perror("eosc_driver: log write");
		_exit(exit_fail);
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: eosc_driver create  --bootstrap B --topics T:P[,..]\n"
		"       eosc_driver produce --bootstrap B --txn-id ID --instance N --topics T:P[,..] --log F --seed S\n"
		"                           [--abort-pct N] [--txn-max N] [--hold-ms-max N] [--txn-timeout-ms MS]\n"
		"       eosc_driver copy    --bootstrap B --txn-id ID --instance N --group G --topics T:P[,..]\n"
		"                           --out T --log F --seed S [--abort-pct N] [--txn-max N] [--txn-timeout-ms MS]\n"
		"       eosc_driver close   --bootstrap B --txn-id ID --instance N --log F\n"
		"       eosc_driver read    --bootstrap B --topics T:P[,..] --isolation committed|uncommitted\n"
		"                           --out F [--settle-s S]\n");
	exit(exit_usage);
}

static long parse_num(const char *v, long lo, long hi)
{
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno || *end || end == v || n < lo || n > hi)
		usage();
	return n;
}

/* "a:3,b:3" into o->topic/o->parts. */
static void parse_topics(struct opts *o, char *v)
{
	for (char *save = NULL, *t = strtok_r(v, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(t, ':');
		if (!colon || o->ntopics == eosc_topics_max)
			usage();
		*colon = 0;
		o->topic[o->ntopics] = t;
		o->parts[o->ntopics++] = (int)parse_num(colon + 1, 1, eosc_parts_max);
	}
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char err[256];
	if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "eosc_driver: conf %s=%s: %s\n", k, v, err);
		exit(exit_usage);
	}
}

static rd_kafka_t *client_new(rd_kafka_type_t type, rd_kafka_conf_t *conf)
{
	char err[256];
	rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "eosc_driver: rd_kafka_new: %s\n", err);
		exit(exit_fail);
	}
	return rk;
}

static const char *err_kind(const rd_kafka_error_t *e)
{
	if (rd_kafka_error_is_fatal(e))
		return "fatal";
	if (rd_kafka_error_txn_requires_abort(e))
		return "abortable";
	if (rd_kafka_error_is_retriable(e))
		return "retriable";
	return "other";
}

/* The instance cannot go on (fenced, or the client gave up): the runner
 * starts a new one with the same transactional id. */
static void die(struct client *s, const char *what, rd_kafka_error_t *e)
{
	eosc_log(s, "fatal %s %s", what, e ? rd_kafka_error_name(e) : "-");
	fprintf(stderr, "eosc_driver: %s: %s\n", what, e ? rd_kafka_error_string(e) : "failed");
	_exit(exit_fatal);
}

/* Record id packed into the message opaque, for the delivery report. */
static void *rec_opaque(long txn, int seq)
{
	return (void *)(uintptr_t)(((uint64_t)txn << 16) | (uint64_t)seq);
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	struct client *s = opaque;
	uint64_t id = (uint64_t)(uintptr_t)m->_private;
	eosc_log(s, "dr %" PRIu64 " %d %s %d %" PRId64 " %s", id >> 16, (int)(id & 0xffff),
	     rd_kafka_topic_name(m->rkt), (int)m->partition, m->err ? (int64_t)-1 : m->offset,
	     m->err ? rd_kafka_err2name(m->err) : "-");
}

static rd_kafka_t *txn_producer_new(struct client *s)
{
	const struct opts *o = s->o;
	char num[32];
	rd_kafka_conf_t *pc = rd_kafka_conf_new();
	conf_set(pc, "bootstrap.servers", o->bootstrap);
	snprintf(num, sizeof(num), "eosc-%s-%d", o->txn_id, o->instance);
	conf_set(pc, "client.id", num);
	conf_set(pc, "transactional.id", o->txn_id);
	snprintf(num, sizeof(num), "%d", o->txn_timeout_ms);
	conf_set(pc, "transaction.timeout.ms", num);
	conf_set(pc, "acks", "all");
	snprintf(num, sizeof(num), "%d", rnd_below(s, 10));
	conf_set(pc, "linger.ms", num);
	conf_set(pc, "reconnect.backoff.max.ms", "500");
	rd_kafka_conf_set_dr_msg_cb(pc, dr_cb);
	rd_kafka_conf_set_opaque(pc, s);
	return client_new(RD_KAFKA_PRODUCER, pc);
}

/* init_transactions until it succeeds: a timeout is retriable (the broker may
 * be down for a restart); fatal ends the instance. */
static void txn_init(struct client *s)
{
	eosc_log(s, "start %s %d %d", s->o->txn_id, s->o->instance, (int)getpid());
	for (;;) {
		rd_kafka_error_t *e = rd_kafka_init_transactions(s->p, eosc_call_ms);
		if (!e) {
			eosc_log(s, "init_ok");
			return;
		}
		eosc_log(s, "init_err %s %s", rd_kafka_error_name(e), err_kind(e));
		if (rd_kafka_error_is_fatal(e) || stop_requested)
			die(s, "init_transactions", e);
		rd_kafka_error_destroy(e);
		usleep(eosc_retry_ms * 1000);
	}
}

static void txn_begin(struct client *s)
{
	rd_kafka_error_t *e = rd_kafka_begin_transaction(s->p);
	if (e)
		die(s, "begin_transaction", e);
	s->txn++;
	s->in_txn = true;
	s->in_txn_recs = 0;
	eosc_log(s, "begin %ld", s->txn);
}

/* Aborts the open transaction (retrying retriable errors). */
static void txn_abort(struct client *s, const char *why)
{
	eosc_log(s, "abort_req %ld %s", s->txn, why);
	for (;;) {
		rd_kafka_error_t *e = rd_kafka_abort_transaction(s->p, eosc_call_ms);
		if (!e)
			break;
		eosc_log(s, "abort_err %ld %s %s", s->txn, rd_kafka_error_name(e), err_kind(e));
		if (!rd_kafka_error_is_retriable(e))
			die(s, "abort_transaction", e);
		rd_kafka_error_destroy(e);
		usleep(eosc_retry_ms * 1000);
	}
	eosc_log(s, "abort_ok %ld", s->txn);
	s->in_txn = false;
}

/* Commits the open transaction; an abortable error aborts it. Returns true
 * when it was committed. */
static bool txn_commit(struct client *s)
{
	eosc_log(s, "commit_req %ld %d", s->txn, s->in_txn_recs);
	for (;;) {
		rd_kafka_error_t *e = rd_kafka_commit_transaction(s->p, eosc_call_ms);
		if (!e)
			break;
		eosc_log(s, "commit_err %ld %s %s", s->txn, rd_kafka_error_name(e), err_kind(e));
		if (rd_kafka_error_txn_requires_abort(e)) {
			rd_kafka_error_destroy(e);
			txn_abort(s, "error");
			return false;
		}
		if (!rd_kafka_error_is_retriable(e))
			die(s, "commit_transaction", e);
		rd_kafka_error_destroy(e);
		usleep(eosc_retry_ms * 1000);
	}
	eosc_log(s, "commit_ok %ld", s->txn);
	s->in_txn = false;
	return true;
}

/* Aborts with --abort-pct odds (half of those after a flush, so that the
 * records are in the log first), else commits. Returns true if committed. */
static bool txn_end_random(struct client *s)
{
	if (rnd_below(s, 100) < s->o->abort_pct) {
		if (rnd_below(s, 2)) {
			rd_kafka_resp_err_t fe = rd_kafka_flush(s->p, eosc_call_ms);
			eosc_log(s, "flush %ld %s", s->txn, fe ? rd_kafka_err2name(fe) : "-");
			txn_abort(s, "flush");
		} else {
			txn_abort(s, "noflush");
		}
		return false;
	}
	return txn_commit(s);
}

/* Produces one record of the open transaction. Returns false on an error
 * that needs the transaction aborted (fatal ones end the instance). */
static bool txn_send(struct client *s, const char *topic, int part, const char *value, const char *orig)
{
	int seq = s->in_txn_recs++;
	if (orig)
		eosc_log(s, "send %ld %d %s %d %s", s->txn, seq, topic, part, orig);
	else
		eosc_log(s, "send %ld %d %s %d", s->txn, seq, topic, part);
	for (;;) {
		rd_kafka_resp_err_t e = rd_kafka_producev(s->p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(part),
			RD_KAFKA_V_KEY(value, strlen(value)), RD_KAFKA_V_VALUE((void *)value, strlen(value)),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(rec_opaque(s->txn, seq)),
			RD_KAFKA_V_END);
		if (!e)
			return true;
		if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			rd_kafka_poll(s->p, 10);
			continue;
		}
		eosc_log(s, "produce_err %ld %d %s", s->txn, seq, rd_kafka_err2name(e));
		char fs[256];
		if (e == RD_KAFKA_RESP_ERR__FATAL || rd_kafka_fatal_error(s->p, fs, sizeof(fs)))
			die(s, "produce", NULL);
		return false;
	}
}

static int produce_main(const struct opts *o)
{
	static struct client s;
	s.o = o;
	s.rng = o->seed;
	s.logfd = open(o->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (s.logfd < 0) {
		perror(o->log);
		return exit_fail;
	}
	s.p = txn_producer_new(&s);
	txn_init(&s);
	char value[eosc_value_bytes_max];
	while (!stop_requested) {
		txn_begin(&s);
		int n = 1 + rnd_below(&s, o->txn_max);
		bool ok = true;
		for (int i = 0; ok && i < n; i++) {
			int t = rnd_below(&s, o->ntopics);
			int part = rnd_below(&s, o->parts[t]);
			snprintf(value, sizeof(value), "%s.%d.%ld.%d", o->txn_id, o->instance, s.txn, s.in_txn_recs);
			ok = txn_send(&s, o->topic[t], part, value, NULL);
			rd_kafka_poll(s.p, 0);
		}
		/* Held open a while, as an application's work would, so that the
		 * transactions of the producers interleave in the partitions. */
		if (ok && o->hold_ms_max)
			usleep((useconds_t)rnd_below(&s, o->hold_ms_max + 1) * 1000);
		if (ok)
			txn_end_random(&s);
		else
			txn_abort(&s, "error");
		rd_kafka_poll(s.p, 0);
	}
	eosc_log(&s, "exit");
	rd_kafka_destroy(s.p);
	return exit_ok;
}

/* ---- copy ---- */

/* Output partition of an input partition: its number in --topics order. */
static int copy_out_part(const struct opts *o, const char *topic, int part)
{
	int k = 0;
	for (int t = 0; t < o->ntopics; t++) {
		if (!strcmp(o->topic[t], topic))
			return k + part;
		k += o->parts[t];
	}
	return -1;
}

static int copy_out_parts(const struct opts *o)
{
	int k = 0;
	for (int t = 0; t < o->ntopics; t++)
		k += o->parts[t];
	return k;
}

/* The group's committed offsets of l, once settled: with read_committed,
 * librdkafka asks with RequireStable and leaves UNSTABLE_OFFSET_COMMIT in an
 * entry whose offset is staged by an open transaction; ask again until none
 * is left (or the deadline). */
static rd_kafka_resp_err_t committed_settled(rd_kafka_t *c, rd_kafka_topic_partition_list_t *l)
{
	int64_t deadline = now_ms() + eosc_call_ms;
	for (;;) {
		rd_kafka_resp_err_t e = rd_kafka_committed(c, l, eosc_call_ms);
		for (int i = 0; !e && i < l->cnt; i++)
			e = l->elems[i].err;
		if (!e || now_ms() >= deadline)
			return e;
		usleep(eosc_retry_ms * 1000);
	}
}

/* After an abort: back to what the group committed, so that the aborted
 * batch is read and copied again. */
static void copy_rewind(struct client *s)
{
	rd_kafka_topic_partition_list_t *pos;
	if (rd_kafka_assignment(s->c, &pos))
		die(s, "assignment", NULL);
	if (pos->cnt) {
		rd_kafka_resp_err_t e = committed_settled(s->c, pos);
		if (e)
			die(s, "committed", rd_kafka_error_new(e, "%s", rd_kafka_err2str(e)));
		for (int i = 0; i < pos->cnt; i++)
			if (pos->elems[i].offset < 0)
				pos->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
		rd_kafka_error_t *se = rd_kafka_seek_partitions(s->c, pos, eosc_call_ms);
		if (se)
			die(s, "seek", se);
	}
	rd_kafka_topic_partition_list_destroy(pos);
	eosc_log(s, "rewind");
}

/* Eager protocol: a revoke takes every partition, so the open transaction
 * (whose offsets belong to them) is aborted before they are given up. */
static void copy_rebalance_cb(rd_kafka_t *c, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
			      void *opaque)
{
	struct client *s = opaque;
	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		eosc_log(s, "assigned %d", parts->cnt);
		rd_kafka_assign(c, parts);
	} else {
		if (s->in_txn)
			txn_abort(s, "revoke");
		eosc_log(s, "revoked %d", parts->cnt);
		rd_kafka_assign(c, NULL);
	}
}

/* Positions to the open transaction, then commit; abortable errors abort it
 * and rewind. */
static void copy_commit(struct client *s)
{
	rd_kafka_topic_partition_list_t *pos;
	if (rd_kafka_assignment(s->c, &pos) || rd_kafka_position(s->c, pos))
		die(s, "assignment/position", NULL);
	char line[eosc_line_bytes_max];
	size_t n = 0;
	line[0] = 0;
	for (int i = 0; i < pos->cnt && n < sizeof(line) - 64; i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s:%d:%" PRId64, i ? "," : "",
				      pos->elems[i].topic, (int)pos->elems[i].partition, pos->elems[i].offset);
	eosc_log(s, "offsets %ld %s", s->txn, n ? line : "-");
	rd_kafka_consumer_group_metadata_t *meta = rd_kafka_consumer_group_metadata(s->c);
	rd_kafka_error_t *e;
	while ((e = rd_kafka_send_offsets_to_transaction(s->p, pos, meta, eosc_call_ms))) {
		eosc_log(s, "offsets_err %ld %s %s", s->txn, rd_kafka_error_name(e), err_kind(e));
		if (!rd_kafka_error_is_retriable(e))
			break;
		rd_kafka_error_destroy(e);
		usleep(eosc_retry_ms * 1000);
	}
	rd_kafka_consumer_group_metadata_destroy(meta);
	rd_kafka_topic_partition_list_destroy(pos);
	if (e) {
		if (!rd_kafka_error_txn_requires_abort(e))
			die(s, "send_offsets_to_transaction", e);
		rd_kafka_error_destroy(e);
		txn_abort(s, "error");
		copy_rewind(s);
		return;
	}
	if (!txn_commit(s))
		copy_rewind(s);
}

enum copy_finish { copy_behind, copy_ahead, copy_done };

/* Finishing: copy_done when the group's settled committed offset of every
 * input partition is its high watermark; copy_ahead when this instance's
 * position on a partition it owns is past the committed offset (a
 * partition's tail of transaction markers is read without a record to copy,
 * so only an offsets-only transaction moves the committed offset over it);
 * else copy_behind, with what is missing in the log at most every
 * eosc_finish_log_ms. */
static enum copy_finish copy_finish_state(struct client *s, int64_t *last_log)
{
	const struct opts *o = s->o;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(copy_out_parts(o));
	for (int t = 0; t < o->ntopics; t++)
		for (int p = 0; p < o->parts[t]; p++)
			rd_kafka_topic_partition_list_add(l, o->topic[t], p);
	rd_kafka_resp_err_t ce = committed_settled(s->c, l);
	rd_kafka_topic_partition_list_t *pos = NULL;
	if (rd_kafka_assignment(s->c, &pos) || rd_kafka_position(s->c, pos))
		die(s, "assignment/position", NULL);
	char line[eosc_line_bytes_max];
	size_t n = 0;
	bool done = !ce, ahead = false;
	for (int i = 0; i < l->cnt; i++) {
		rd_kafka_topic_partition_t *c = &l->elems[i];
		int64_t lo, hi = -1;
		bool ok = !ce && !c->err &&
			  !rd_kafka_query_watermark_offsets(s->c, c->topic, c->partition, &lo, &hi, eosc_call_ms) &&
			  c->offset == hi;
		rd_kafka_topic_partition_t *mine = rd_kafka_topic_partition_list_find(pos, c->topic, c->partition);
		if (!ce && !c->err && mine && mine->offset >= 0 && mine->offset > c->offset)
			ahead = true;
		if (!ok && n < sizeof(line) - 96)
			n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s:%d:%" PRId64 ":%" PRId64 ":%s", n ? "," : "",
					      c->topic, (int)c->partition, c->offset, hi,
					      mine ? "mine" : "other");
		done = done && ok;
	}
	rd_kafka_topic_partition_list_destroy(pos);
	rd_kafka_topic_partition_list_destroy(l);
	if (done)
		return copy_done;
	if (!ahead && now_ms() - *last_log >= eosc_finish_log_ms) {
		*last_log = now_ms();
		eosc_log(s, "behind %s %s", ce ? rd_kafka_err2name(ce) : "-", n ? line : "-");
	}
	return ahead ? copy_ahead : copy_behind;
}

static int copy_main(const struct opts *o)
{
	static struct client s;
	char num[32];
	s.o = o;
	s.rng = o->seed;
	s.logfd = open(o->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (s.logfd < 0) {
		perror(o->log);
		return exit_fail;
	}
	s.p = txn_producer_new(&s);
	/* First fence the previous instance and abort its transaction, so the
	 * group's offsets are settled before this consumer fetches them. */
	txn_init(&s);

	rd_kafka_conf_t *cc = rd_kafka_conf_new();
	conf_set(cc, "bootstrap.servers", o->bootstrap);
	snprintf(num, sizeof(num), "eosc-%s-%d-c", o->txn_id, o->instance);
	conf_set(cc, "client.id", num);
	conf_set(cc, "group.id", o->group);
	conf_set(cc, "isolation.level", "read_committed");
	conf_set(cc, "enable.auto.commit", "false");
	conf_set(cc, "auto.offset.reset", "earliest");
	/* A killed or stopped instance stays a member until its session ends. */
	conf_set(cc, "session.timeout.ms", "10000");
	conf_set(cc, "heartbeat.interval.ms", "500");
	conf_set(cc, "fetch.wait.max.ms", "100");
	/* Small fetches interleave the partitions, so a transaction spans several. */
	conf_set(cc, "max.partition.fetch.bytes", "8192");
	conf_set(cc, "reconnect.backoff.max.ms", "500");
	rd_kafka_conf_set_rebalance_cb(cc, copy_rebalance_cb);
	rd_kafka_conf_set_opaque(cc, &s);
	s.c = client_new(RD_KAFKA_CONSUMER, cc);
	rd_kafka_poll_set_consumer(s.c);
	rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(o->ntopics);
	for (int t = 0; t < o->ntopics; t++)
		rd_kafka_topic_partition_list_add(sub, o->topic[t], RD_KAFKA_PARTITION_UA);
	if (rd_kafka_subscribe(s.c, sub))
		die(&s, "subscribe", NULL);
	rd_kafka_topic_partition_list_destroy(sub);

	char value[2 * eosc_value_bytes_max + 2];
	int target = 0;
	int64_t last_read = now_ms(), last_check = 0, last_behind = 0;
	while (!stop_requested) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(s.c, eosc_poll_ms);
		rd_kafka_poll(s.p, 0);
		if (m && !m->err) {
			last_read = now_ms();
			if (!s.in_txn) {
				txn_begin(&s);
				target = 1 + rnd_below(&s, o->txn_max);
			}
			char orig[eosc_value_bytes_max];
			size_t len = m->len < sizeof(orig) - 1 ? m->len : sizeof(orig) - 1;
			memcpy(orig, m->payload, len);
			orig[len] = 0;
			snprintf(value, sizeof(value), "%s.%d.%ld.%d<%s", o->txn_id, o->instance, s.txn, s.in_txn_recs,
				 orig);
			int op = copy_out_part(o, rd_kafka_topic_name(m->rkt), (int)m->partition);
			if (!txn_send(&s, o->out, op, value, orig)) {
				txn_abort(&s, "error");
				copy_rewind(&s);
			}
		} else if (m && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
			fprintf(stderr, "eosc_driver: consume: %s\n", rd_kafka_message_errstr(m));
		}
		if (m)
			rd_kafka_message_destroy(m);
		/* A full batch, or nothing more right now: end what there is. */
		if (s.in_txn && (s.in_txn_recs >= target || !m)) {
			/* Aborts only while the producers run: finishing is catching up. */
			if (!finish_requested && rnd_below(&s, 100) < o->abort_pct) {
				if (rnd_below(&s, 2)) {
					rd_kafka_resp_err_t fe = rd_kafka_flush(s.p, eosc_call_ms);
					eosc_log(&s, "flush %ld %s", s.txn, fe ? rd_kafka_err2name(fe) : "-");
					txn_abort(&s, "flush");
				} else {
					txn_abort(&s, "noflush");
				}
				copy_rewind(&s);
			} else {
				copy_commit(&s);
			}
		}
		int64_t t = now_ms();
		if (finish_requested && !s.in_txn && t - last_read >= eosc_finish_idle_ms &&
		    t - last_check >= eosc_finish_check_ms) {
			last_check = t;
			enum copy_finish f = copy_finish_state(&s, &last_behind);
			if (f == copy_done) {
				eosc_log(&s, "done");
				break;
			}
			if (f == copy_ahead) {
				txn_begin(&s);
				copy_commit(&s);
			}
		}
	}
	if (s.in_txn)
		txn_abort(&s, "exit");
	eosc_log(&s, "exit");
	rd_kafka_consumer_close(s.c);
	rd_kafka_destroy(s.c);
	rd_kafka_destroy(s.p);
	return exit_ok;
}

static int close_main(const struct opts *o)
{
	static struct client s;
	s.o = o;
	s.logfd = open(o->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (s.logfd < 0) {
		perror(o->log);
		return exit_fail;
	}
	s.p = txn_producer_new(&s);
	txn_init(&s);
	eosc_log(&s, "exit");
	rd_kafka_destroy(s.p);
	return exit_ok;
}

/* ---- create, read ---- */

static int create_main(const struct opts *o)
{
	char err[256];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	conf_set(conf, "bootstrap.servers", o->bootstrap);
	rd_kafka_t *rk = client_new(RD_KAFKA_PRODUCER, conf);
	rd_kafka_NewTopic_t *nt[eosc_topics_max];
	for (int t = 0; t < o->ntopics; t++) {
		nt[t] = rd_kafka_NewTopic_new(o->topic[t], o->parts[t], 1, err, sizeof(err));
		if (!nt[t]) {
			fprintf(stderr, "eosc_driver: NewTopic: %s\n", err);
			return exit_fail;
		}
	}
	rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
	rd_kafka_AdminOptions_set_operation_timeout(ao, eosc_call_ms, err, sizeof(err));
	rd_kafka_AdminOptions_set_request_timeout(ao, eosc_call_ms, err, sizeof(err));
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	rd_kafka_CreateTopics(rk, nt, (size_t)o->ntopics, ao, q);
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, eosc_call_ms + 5000);
	int rc = exit_ok;
	if (!ev || rd_kafka_event_error(ev)) {
		fprintf(stderr, "eosc_driver: CreateTopics: %s\n", ev ? rd_kafka_event_error_string(ev) : "no result");
		rc = exit_fail;
	} else {
		size_t n;
		const rd_kafka_topic_result_t **tr =
			rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
		for (size_t i = 0; i < n; i++) {
			rd_kafka_resp_err_t e = rd_kafka_topic_result_error(tr[i]);
			if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
				fprintf(stderr, "eosc_driver: CreateTopics %s: %s\n", rd_kafka_topic_result_name(tr[i]),
					rd_kafka_err2str(e));
				rc = exit_fail;
			}
		}
	}
	if (ev)
		rd_kafka_event_destroy(ev);
	rd_kafka_queue_destroy(q);
	rd_kafka_AdminOptions_destroy(ao);
	for (int t = 0; t < o->ntopics; t++)
		rd_kafka_NewTopic_destroy(nt[t]);
	rd_kafka_destroy(rk);
	return rc;
}

static rd_kafka_t *reader_new(const struct opts *o, const char *isolation)
{
	char gid[64];
	snprintf(gid, sizeof(gid), "eosc-reader-%d-%" PRId64, (int)getpid(), now_ms());
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	conf_set(conf, "bootstrap.servers", o->bootstrap);
	conf_set(conf, "group.id", gid);
	conf_set(conf, "isolation.level", isolation);
	conf_set(conf, "enable.auto.commit", "false");
	conf_set(conf, "enable.partition.eof", "true");
	conf_set(conf, "auto.offset.reset", "error");
	conf_set(conf, "check.crcs", "true");
	conf_set(conf, "fetch.wait.max.ms", "100");
	conf_set(conf, "reconnect.backoff.max.ms", "500");
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER, conf);
	rd_kafka_poll_set_consumer(rk);
	return rk;
}

/* Per partition of the reader. Locality: main thread. */
struct rpart {
	int64_t eof;      /* offset of the last EOF since the last record, -1 none */
	int64_t lso, hw;  /* ListOffsets latest by this handle's isolation; high watermark */
};

static int read_main(const struct opts *o)
{
	bool committed = !strcmp(o->isolation, "committed");
	if (!committed && strcmp(o->isolation, "uncommitted"))
		usage();
	FILE *out = fopen(o->out, "w");
	if (!out) {
		perror(o->out);
		return exit_fail;
	}
	rd_kafka_t *rk = reader_new(o, committed ? "read_committed" : "read_uncommitted");
	/* The high watermark comes from a read_uncommitted handle whatever we read with. */
	rd_kafka_t *hwk = committed ? reader_new(o, "read_uncommitted") : rk;
	static struct rpart rp[eosc_topics_max][eosc_parts_max];
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(copy_out_parts(o));
	for (int t = 0; t < o->ntopics; t++)
		for (int p = 0; p < o->parts[t]; p++) {
			rd_kafka_topic_partition_list_add(l, o->topic[t], p)->offset = RD_KAFKA_OFFSET_BEGINNING;
			rp[t][p].eof = -1;
		}
	if (rd_kafka_assign(rk, l)) {
		fprintf(stderr, "eosc_driver: assign failed\n");
		return exit_fail;
	}
	rd_kafka_topic_partition_list_destroy(l);
	int64_t deadline = now_ms() + (int64_t)o->settle_s * 1000, last_wm = 0;
	long recs = 0;
	for (;;) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
		if (m) {
			int t = 0;
			const char *tn = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
			while (t < o->ntopics && strcmp(o->topic[t], tn))
				t++;
			bool known = t < o->ntopics && m->partition >= 0 && m->partition < o->parts[t];
			if (!m->err && known) {
				fprintf(out, "rec %s %d %" PRId64 " %.*s\n", tn, (int)m->partition, m->offset, (int)m->len,
					(const char *)m->payload);
				rp[t][m->partition].eof = -1;
				recs++;
			} else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF && known) {
				rp[t][m->partition].eof = m->offset;
			} else if (m->err) {
				fprintf(stderr, "eosc_driver: read: %s\n", rd_kafka_message_errstr(m));
			}
			rd_kafka_message_destroy(m);
			continue;
		}
		/* Idle: are all partitions at their end, and (read_committed) is
		 * that end the high watermark? Watermarks at most once a second. */
		int64_t t0 = now_ms();
		if (t0 - last_wm < 1000)
			continue;
		last_wm = t0;
		bool all = true;
		for (int t = 0; t < o->ntopics; t++)
			for (int p = 0; p < o->parts[t]; p++) {
				struct rpart *r = &rp[t][p];
				int64_t lo;
				r->lso = r->hw = -1;
				if (rd_kafka_query_watermark_offsets(rk, o->topic[t], p, &lo, &r->lso, eosc_call_ms) ||
				    rd_kafka_query_watermark_offsets(hwk, o->topic[t], p, &lo, &r->hw, eosc_call_ms))
					all = false;
				if (r->eof < 0 || r->eof < r->hw || r->lso < r->hw)
					all = false;
			}
		if (all || now_ms() >= deadline)
			break;
	}
	for (int t = 0; t < o->ntopics; t++)
		for (int p = 0; p < o->parts[t]; p++)
			fprintf(out, "end %s %d %" PRId64 " %" PRId64 " %" PRId64 "\n", o->topic[t], p, rp[t][p].eof,
				rp[t][p].lso, rp[t][p].hw);
	if (fclose(out)) {
		perror(o->out);
		return exit_fail;
	}
	printf("read %s: %ld records\n", o->isolation, recs);
	if (hwk != rk)
		rd_kafka_destroy(hwk);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	return exit_ok;
}

int main(int argc, char **argv)
{
	struct opts o = { .abort_pct = 20, .txn_max = 50, .hold_ms_max = 20, .txn_timeout_ms = 30000,
			  .settle_s = 60 };
	signal(SIGPIPE, SIG_IGN);
	/* SA_RESTART: librdkafka's calls on this thread are not cut short. */
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	if (argc < 2)
		usage();
	o.cmd = argv[1];
	for (int i = 2; i < argc; i += 2) {
		const char *a = argv[i];
		char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) usage();
		else if (!strcmp(a, "--bootstrap")) o.bootstrap = v;
		else if (!strcmp(a, "--txn-id")) o.txn_id = v;
		else if (!strcmp(a, "--instance")) o.instance = (int)parse_num(v, 0, 1000000);
		else if (!strcmp(a, "--topics")) parse_topics(&o, v);
		else if (!strcmp(a, "--group")) o.group = v;
		else if (!strcmp(a, "--out")) o.out = v;
		else if (!strcmp(a, "--log")) o.log = v;
		else if (!strcmp(a, "--isolation")) o.isolation = v;
		else if (!strcmp(a, "--seed")) o.seed = (uint64_t)strtoull(v, NULL, 10);
		else if (!strcmp(a, "--abort-pct")) o.abort_pct = (int)parse_num(v, 0, 100);
		else if (!strcmp(a, "--txn-max")) o.txn_max = (int)parse_num(v, 1, eosc_seq_max);
		else if (!strcmp(a, "--hold-ms-max")) o.hold_ms_max = (int)parse_num(v, 0, 10000);
		else if (!strcmp(a, "--txn-timeout-ms")) o.txn_timeout_ms = (int)parse_num(v, 1000, 900000);
		else if (!strcmp(a, "--settle-s")) o.settle_s = (int)parse_num(v, 0, 3600);
		else usage();
	}
	if (!o.bootstrap)
		usage();
	if (!strcmp(o.cmd, "create") && o.ntopics)
		return create_main(&o);
	if (!strcmp(o.cmd, "read") && o.ntopics && o.isolation && o.out)
		return read_main(&o);
	if (!o.txn_id || !o.log)
		usage();
	if (!strcmp(o.cmd, "produce") && o.ntopics)
		return produce_main(&o);
	if (!strcmp(o.cmd, "copy") && o.ntopics && o.group && o.out)
		return copy_main(&o);
	if (!strcmp(o.cmd, "close"))
		return close_main(&o);
	usage();
	return exit_usage;
}
