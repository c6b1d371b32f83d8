/*
 * rdk_txn.c - librdkafka transactional producer and read_committed consumer
 * for the transaction integration tests (txn_*.sh, kafkajs_txn.sh).
 *
 * Locality: a single-threaded test program (librdkafka runs its own threads;
 * delivery reports run on the main thread from rd_kafka_poll/flush).
 *
 *   rdk_txn produce --bootstrap B --txn-id ID --topics T1[,T2..] --partitions P --count N
 *                   --tag TAG --plan commit|abort|open[,...] [--out FILE] [--create]
 *                   [--txn-timeout-ms MS] [--op-timeout-ms MS] [--allow-fail]
 *       One producer instance runs the transactions of --plan in turn; each writes N
 *       records to every partition of every topic, flushes (so the batches are in
 *       the log) and then commits or aborts; "open" (last only) prints OPEN and
 *       waits to be killed. After each flush, before ending the transaction, every
 *       record is appended to --out as "PLAN KEY TOPIC PARTITION OFFSET".
 *       With --allow-fail a failed commit/abort prints and exits 3 instead of 1.
 *   rdk_txn consume --bootstrap B --topics T1[,..] --partitions P
 *                   --isolation committed|uncommitted [--expect FILE [--subset]]
 *                   [--timeout S] [--out FILE]
 *       Reads every partition from the beginning (assign(), no group) until each
 *       is at its end (EOF: the LSO for read_committed) and, with --expect, every
 *       expected record was seen. Expect lines are out-file lines (first field
 *       ignored; offset -1 = any). Without --subset the records read must be
 *       exactly the expected ones; with it they must include them. Prints
 *       "end TOPIC P OFFSET" per partition, and the ListOffsets watermarks of
 *       this handle (its isolation level) as "wm TOPIC P LOW HIGH". With --until F it
 *       reads on (while producers write) until file F exists, then to the end;
 *       --fetch-max-bytes N sets fetch.max.bytes (answers cut across partitions).
 *       With --repeat R the plan runs R times over (transaction numbers go on).
 *   rdk_txn random --bootstrap B --txn-id ID --topics T1[,..] --partitions P --txns N
 *                  --seed S --tag TAG [--max-records M] [--abort-pct A] [--noflush-pct F]
 *                  [--out FILE] [--create]
 *       N transactions of 1..M records (default 50), each to a random partition of a
 *       random topic; A % of them (default 20) are aborted, F % of those (default 0)
 *       without a flush first (their records may or may not reach the log). Every
 *       record is appended to --out as "commit|abort KEY TOPIC PARTITION OFFSET"
 *       (offset -1: not delivered) once its transaction has ended; a failed end is
 *       fatal (exit 1). Several run side by side against the same partitions.
 *   rdk_txn interleave --bootstrap B --topic T
 *   rdk_txn fence --bootstrap B --topic T --partitions P
 *       Self-contained scenarios with several clients in lock step (see below).
 *
 * Record key = value = "TAG.TXN.TOPIC.PARTITION.I", unique per test.
 * Exit status: 0 OK, 1 check failed, 2 usage/setup error, 3 (--allow-fail) txn end failed.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#define topics_max 8
#define partitions_max 64
#define plan_max 16
#define key_bytes_max 96
#define records_max 200000
#define admin_timeout_ms 15000
#define metadata_wait_ms 20000
#define init_timeout_ms 30000
#define flush_timeout_ms 30000
#define watermark_timeout_ms 10000
#define errors_printed_max 20

enum { exit_ok = 0, exit_fail = 1, exit_usage = 2, exit_txn_failed = 3 };
enum plan_step { plan_commit, plan_abort, plan_open };
static const char *const plan_names[] = { "commit", "abort", "open" };

/* consume --fetch-max-bytes: librdkafka's fetch.max.bytes, NULL its default. */
static const char *consume_fetch_max_bytes;

/* Options of all subcommands. Locality: main thread. */
struct opts {
	const char *bootstrap, *txn_id, *tag, *out, *expect, *isolation, *until;
	char *topic[topics_max];
	int ntopics;
	int32_t partitions;
	int count;
	enum plan_step plan[plan_max];
	int nplan;
	int txn_timeout_ms, op_timeout_ms, timeout_s;
	bool create, allow_fail, subset;
	int repeat;                         /* produce: times the plan runs */
	int txns, max_records, abort_pct, noflush_pct;   /* random */
	unsigned seed;
};

/* One record: produced (offset from the delivery report) or read. Locality: main thread. */
struct rec {
	char key[key_bytes_max];
	int ti;                 /* index into opts.topic */
	int32_t p;
	int64_t off;            /* -1: not delivered / any */
	int err;                /* delivery error */
	int seen;               /* consume: times read */
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: rdk_txn produce --bootstrap B --txn-id ID --topics T[,T] --partitions P --count N\n"
		"                       --tag TAG --plan commit|abort|open[,..] [--out F] [--create]\n"
		"                       [--txn-timeout-ms MS] [--op-timeout-ms MS] [--allow-fail]\n"
		"                       [--repeat R]\n"
		"       rdk_txn consume --bootstrap B --topics T[,T] --partitions P\n"
		"                       --isolation committed|uncommitted [--expect F [--subset]]\n"
		"                       [--timeout S] [--out F] [--until F] [--fetch-max-bytes N]\n"
		"       rdk_txn random --bootstrap B --txn-id ID --topics T[,T] --partitions P --txns N\n"
		"                      --seed S --tag TAG [--max-records M] [--abort-pct A]\n"
		"                      [--noflush-pct F] [--out F] [--create]\n"
		"       rdk_txn interleave --bootstrap B --topic T\n"
		"       rdk_txn fence --bootstrap B --topic T --partitions P\n");
	exit(exit_usage);
}

static long parse_num(const char *s, long lo, long hi, const char *what)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi) {
		fprintf(stderr, "rdk_txn: bad %s '%s' (want %ld..%ld)\n", what, s, lo, hi);
		exit(exit_usage);
	}
	return v;
}

/* Comma-separated list: add() each element (it exits on a bad one). */
static void parse_list(char *s, void (*add)(struct opts *, const char *), struct opts *o)
{
	for (char *save = NULL, *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save))
		add(o, t);
}

static void add_topic(struct opts *o, const char *t)
{
	if (o->ntopics == topics_max || strchr(t, '.'))
		usage();   /* keys use '.' as a separator */
	o->topic[o->ntopics++] = (char *)t;
}

static void add_plan(struct opts *o, const char *t)
{
	if (o->nplan == plan_max)
		usage();
	int k;
	for (k = 0; k <= plan_open && strcmp(t, plan_names[k]); k++)
		;
	if (k > plan_open || (o->nplan && o->plan[o->nplan - 1] == plan_open))
		usage();   /* unknown, or a step after "open" */
	o->plan[o->nplan++] = (enum plan_step)k;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .count = 5, .tag = "r", .isolation = "committed", .timeout_s = 30,
			    .txn_timeout_ms = 60000, .op_timeout_ms = 30000, .partitions = 1,
			    .repeat = 1, .txns = 100, .max_records = 50, .abort_pct = 20, .seed = 1 };
	for (int k = 2; k < argc; k++) {
		const char *a = argv[k];
		char *v = k + 1 < argc ? argv[k + 1] : NULL;
		if (!strcmp(a, "--create")) { o->create = true; continue; }
		if (!strcmp(a, "--allow-fail")) { o->allow_fail = true; continue; }
		if (!strcmp(a, "--subset")) { o->subset = true; continue; }
		if (!v)
			usage();
		k++;
		if (!strcmp(a, "--bootstrap")) o->bootstrap = v;
		else if (!strcmp(a, "--txn-id")) o->txn_id = v;
		else if (!strcmp(a, "--tag")) o->tag = v;
		else if (!strcmp(a, "--out")) o->out = v;
		else if (!strcmp(a, "--expect")) o->expect = v;
		else if (!strcmp(a, "--until")) o->until = v;
		else if (!strcmp(a, "--fetch-max-bytes") && parse_num(v, 1000, 1 << 30, a)) consume_fetch_max_bytes = v;
		else if (!strcmp(a, "--isolation")) o->isolation = v;
		else if (!strcmp(a, "--topics") || !strcmp(a, "--topic")) parse_list(v, add_topic, o);
		else if (!strcmp(a, "--plan")) parse_list(v, add_plan, o);
		else if (!strcmp(a, "--partitions"))
			o->partitions = (int32_t)parse_num(v, 1, partitions_max, a);
		else if (!strcmp(a, "--count")) o->count = (int)parse_num(v, 1, 10000, a);
		else if (!strcmp(a, "--txn-timeout-ms"))
			o->txn_timeout_ms = (int)parse_num(v, 1000, 900000, a);
		else if (!strcmp(a, "--op-timeout-ms"))
			o->op_timeout_ms = (int)parse_num(v, 1000, 300000, a);
		else if (!strcmp(a, "--timeout")) o->timeout_s = (int)parse_num(v, 1, 600, a);
		else if (!strcmp(a, "--repeat")) o->repeat = (int)parse_num(v, 1, 100000, a);
		else if (!strcmp(a, "--txns")) o->txns = (int)parse_num(v, 1, 100000, a);
		else if (!strcmp(a, "--max-records")) o->max_records = (int)parse_num(v, 1, 1000, a);
		else if (!strcmp(a, "--abort-pct")) o->abort_pct = (int)parse_num(v, 0, 100, a);
		else if (!strcmp(a, "--noflush-pct")) o->noflush_pct = (int)parse_num(v, 0, 100, a);
		else if (!strcmp(a, "--seed")) o->seed = (unsigned)parse_num(v, 0, 1L << 30, a);
		else
			usage();
	}
	if (!o->bootstrap || !o->ntopics)
		usage();
	if (strcmp(o->isolation, "committed") && strcmp(o->isolation, "uncommitted"))
		usage();
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char err[256];
	if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "rdk_txn: config %s=%s: %s\n", k, v, err);
		exit(exit_usage);
	}
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	fprintf(stderr, "rdkafka %s %d %s: %s\n", rd_kafka_name(rk), level, fac, buf);
}

static rd_kafka_t *client_new(rd_kafka_type_t type, rd_kafka_conf_t *conf)
{
	char err[512];
	rd_kafka_conf_set_log_cb(conf, log_cb);
	rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "rdk_txn: rd_kafka_new: %s\n", err);
		exit(exit_usage);
	}
	return rk;
}

/* ---- producer ------------------------------------------------------------------ */

/* Delivery report: store the offset (or error) in the record the message points at. */
static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct rec *r = m->_private;
	r->off = m->err ? -1 : m->offset;
	r->err = m->err;
}

/* txn_id NULL: a plain idempotent producer (non-transactional records). */
static rd_kafka_t *producer_new(const char *bootstrap, const char *txn_id, int txn_timeout_ms)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	conf_set(conf, "bootstrap.servers", bootstrap);
	conf_set(conf, "client.id", txn_id ? txn_id : "rdk_txn_plain");
	conf_set(conf, "linger.ms", "5");
	conf_set(conf, "acks", "all");
	conf_set(conf, "enable.idempotence", "true");
	conf_set(conf, "reconnect.backoff.max.ms", "500");
	if (txn_id) {
		char t[32];
		snprintf(t, sizeof(t), "%d", txn_timeout_ms);
		conf_set(conf, "transactional.id", txn_id);
		conf_set(conf, "transaction.timeout.ms", t);
	}
	rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
	return client_new(RD_KAFKA_PRODUCER, conf);
}

/* Prints and frees a transactional-API error; returns its code (0 if none). */
static rd_kafka_resp_err_t txn_err(const char *what, rd_kafka_error_t *e)
{
	if (!e)
		return RD_KAFKA_RESP_ERR_NO_ERROR;
	rd_kafka_resp_err_t code = rd_kafka_error_code(e);
	fprintf(stderr, "rdk_txn: %s: %s: %s%s%s\n", what, rd_kafka_error_name(e),
		rd_kafka_error_string(e), rd_kafka_error_is_fatal(e) ? " (fatal)" : "",
		rd_kafka_error_txn_requires_abort(e) ? " (abortable)" : "");
	rd_kafka_error_destroy(e);
	return code;
}

/* CreateTopics for each topic (an existing one is fine), then wait for metadata. */
static int topics_create(rd_kafka_t *rk, char *const *topic, int ntopics, int32_t partitions)
{
	char err[256];
	rd_kafka_NewTopic_t *nt[topics_max];
	for (int k = 0; k < ntopics; k++) {
		nt[k] = rd_kafka_NewTopic_new(topic[k], partitions, 1, err, sizeof(err));
		if (!nt[k]) {
			fprintf(stderr, "rdk_txn: NewTopic: %s\n", err);
			return -EINVAL;
		}
	}
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
	rd_kafka_AdminOptions_set_operation_timeout(ao, admin_timeout_ms, err, sizeof(err));
	rd_kafka_AdminOptions_set_request_timeout(ao, admin_timeout_ms, err, sizeof(err));
	rd_kafka_CreateTopics(rk, nt, (size_t)ntopics, ao, q);
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, admin_timeout_ms + 5000);
	int rc = 0;
	if (!ev || rd_kafka_event_error(ev)) {
		fprintf(stderr, "rdk_txn: CreateTopics: %s\n", ev ? rd_kafka_event_error_string(ev) : "no result");
		rc = -EIO;
	} else {
		size_t n = 0;
		const rd_kafka_topic_result_t **tr =
			rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
		for (size_t k = 0; k < n; k++) {
			rd_kafka_resp_err_t e = rd_kafka_topic_result_error(tr[k]);
			if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
				fprintf(stderr, "rdk_txn: CreateTopics %s: %s\n",
					rd_kafka_topic_result_name(tr[k]), rd_kafka_err2name(e));
				rc = -EIO;
			}
		}
	}
	if (ev)
		rd_kafka_event_destroy(ev);
	rd_kafka_AdminOptions_destroy(ao);
	rd_kafka_queue_destroy(q);
	for (int k = 0; k < ntopics; k++)
		rd_kafka_NewTopic_destroy(nt[k]);
	for (int k = 0; k < ntopics && !rc; k++) {
		rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic[k], NULL);
		int have = -1;
		for (int64_t deadline = now_ms() + metadata_wait_ms; now_ms() < deadline; usleep(100000)) {
			const struct rd_kafka_metadata *md = NULL;
			if (rd_kafka_metadata(rk, 0, rkt, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
				if (md->topic_cnt == 1 && md->topics[0].err == 0)
					have = md->topics[0].partition_cnt;
				rd_kafka_metadata_destroy(md);
				if (have == partitions)
					break;
			}
		}
		rd_kafka_topic_destroy(rkt);
		if (have != partitions) {
			fprintf(stderr, "rdk_txn: %s has %d partitions, want %d\n", topic[k], have, partitions);
			rc = -EIO;
		}
	}
	return rc;
}

/* Queue one record (key = value) for topic/partition; r keeps its delivery report. */
static int produce_rec(rd_kafka_t *rk, const char *topic, struct rec *r)
{
	rd_kafka_resp_err_t e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
		RD_KAFKA_V_PARTITION(r->p), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		RD_KAFKA_V_KEY(r->key, strlen(r->key)), RD_KAFKA_V_VALUE(r->key, strlen(r->key)),
		RD_KAFKA_V_OPAQUE(r), RD_KAFKA_V_END);
	if (e) {
		fprintf(stderr, "rdk_txn: produce %s: %s\n", r->key, rd_kafka_err2name(e));
		return -EIO;
	}
	r->off = -1;
	r->err = -1;   /* until the delivery report */
	return 0;
}

/* Queue count records per partition of each topic, tagged "tag.txn", into recs[]. */
static int produce_batch(rd_kafka_t *rk, char *const *topic, int ntopics, int32_t partitions,
			 int count, const char *tag, int txn, struct rec *recs, int *n)
{
	for (int t = 0; t < ntopics; t++)
		for (int32_t p = 0; p < partitions; p++)
			for (int i = 0; i < count; i++) {
				if (*n == records_max)
					return -ENOSPC;
				struct rec *r = &recs[(*n)++];
				*r = (struct rec){ .ti = t, .p = p };
				snprintf(r->key, sizeof(r->key), "%s.%d.%s.%d.%d", tag, txn, topic[t], p, i);
				if (produce_rec(rk, topic[t], r))
					return -EIO;
			}
	return 0;
}

/* Flush, then check every record from..n-1 got an offset. Returns the number that failed. */
static int flush_check(rd_kafka_t *rk, struct rec *recs, int from, int n, bool quiet)
{
	rd_kafka_flush(rk, flush_timeout_ms);
	int bad = 0;
	for (int k = from; k < n; k++)
		if (recs[k].err && bad++ < errors_printed_max && !quiet)
			fprintf(stderr, "rdk_txn: %s not delivered: %s\n", recs[k].key,
				recs[k].err < 0 ? "no report" : rd_kafka_err2name(recs[k].err));
	return bad;
}

static void out_write(FILE *f, const char *label, char *const *topic, const struct rec *recs,
		      int from, int n)
{
	for (int k = from; k < n; k++)
		fprintf(f, "%s %s %s %d %" PRId64 "\n", label, recs[k].key, topic[recs[k].ti],
			recs[k].p, recs[k].off);
	fflush(f);
}

static int cmd_produce(const struct opts *o)
{
	if (!o->txn_id || !o->nplan)
		usage();
	static struct rec recs[records_max];
	FILE *out = stdout;
	if (o->out && !(out = fopen(o->out, "a"))) {
		perror(o->out);
		return exit_usage;
	}
	rd_kafka_t *rk = producer_new(o->bootstrap, o->txn_id, o->txn_timeout_ms);
	if (o->create && topics_create(rk, o->topic, o->ntopics, o->partitions))
		return exit_fail;
	int64_t t0 = now_ms();
	if (txn_err("init_transactions", rd_kafka_init_transactions(rk, init_timeout_ms)))
		return exit_fail;
	printf("init_transactions: %" PRId64 " ms\n", now_ms() - t0);
	int n = 0;
	for (int s = 0; s < o->nplan * o->repeat; s++) {
		int from = n;
		enum plan_step step = o->plan[s % o->nplan];
		if (txn_err("begin_transaction", rd_kafka_begin_transaction(rk)))
			return exit_fail;
		if (produce_batch(rk, o->topic, o->ntopics, o->partitions, o->count, o->tag, s, recs, &n))
			return exit_fail;
		int bad = flush_check(rk, recs, from, n, false);
		if (bad) {
			fprintf(stderr, "rdk_txn: txn %d: %d records not delivered\n", s, bad);
			return exit_fail;
		}
		out_write(out, plan_names[step], o->topic, recs, from, n);
		if (step == plan_open) {
			/* The script kills us now: the transaction must time out on the broker. */
			printf("OPEN %s %d records\n", o->txn_id, n - from);
			fflush(stdout);
			for (;;)
				rd_kafka_poll(rk, 1000);
		}
		t0 = now_ms();
		rd_kafka_error_t *e = step == plan_commit ?
			rd_kafka_commit_transaction(rk, o->op_timeout_ms) :
			rd_kafka_abort_transaction(rk, o->op_timeout_ms);
		if (txn_err(plan_names[step], e)) {
			printf("txn %d %s FAILED\n", s, plan_names[step]);
			return o->allow_fail ? exit_txn_failed : exit_fail;
		}
		printf("txn %d %s ok: %d records in %" PRId64 " ms\n", s, plan_names[step],
		       n - from, now_ms() - t0);
		fflush(stdout);
	}
	rd_kafka_destroy(rk);
	if (out != stdout && fclose(out)) {
		perror(o->out);
		return exit_fail;
	}
	return exit_ok;
}

/* Next number of a small xorshift generator: the same seed makes the same transactions. */
static unsigned rnd(unsigned *state)
{
	unsigned x = *state ? *state : 1u;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *state = x;
}

static int cmd_random(const struct opts *o)
{
	if (!o->txn_id)
		usage();
	static struct rec recs[records_max];
	FILE *out = stdout;
	if (o->out && !(out = fopen(o->out, "a"))) {
		perror(o->out);
		return exit_usage;
	}
	rd_kafka_t *rk = producer_new(o->bootstrap, o->txn_id, o->txn_timeout_ms);
	if (o->create && topics_create(rk, o->topic, o->ntopics, o->partitions))
		return exit_fail;
	if (txn_err("init_transactions", rd_kafka_init_transactions(rk, init_timeout_ms)))
		return exit_fail;
	unsigned st = o->seed * 2654435761u + 1;
	int n = 0, aborted = 0, unflushed = 0;
	for (int t = 0; t < o->txns; t++) {
		int from = n, count = 1 + (int)(rnd(&st) % (unsigned)o->max_records);
		bool abort = (int)(rnd(&st) % 100) < o->abort_pct;
		bool flush = !abort || (int)(rnd(&st) % 100) >= o->noflush_pct;
		if (txn_err("begin_transaction", rd_kafka_begin_transaction(rk)))
			return exit_fail;
		for (int i = 0; i < count; i++) {
			if (n == records_max) {
				fprintf(stderr, "rdk_txn: more than %d records\n", records_max);
				return exit_usage;
			}
			struct rec *r = &recs[n++];
			*r = (struct rec){ .ti = (int)(rnd(&st) % (unsigned)o->ntopics),
					   .p = (int32_t)(rnd(&st) % (unsigned)o->partitions) };
			snprintf(r->key, sizeof(r->key), "%s.%d.%s.%d.%d", o->tag, t, o->topic[r->ti], r->p, i);
			if (produce_rec(rk, o->topic[r->ti], r))
				return exit_fail;
		}
		if (flush) {
			int bad = flush_check(rk, recs, from, n, false);
			if (bad) {
				fprintf(stderr, "rdk_txn: txn %d: %d records not delivered\n", t, bad);
				return exit_fail;
			}
		}
		rd_kafka_error_t *e = abort ? rd_kafka_abort_transaction(rk, o->op_timeout_ms) :
			rd_kafka_commit_transaction(rk, o->op_timeout_ms);
		if (txn_err(abort ? "abort" : "commit", e)) {
			printf("txn %d %s FAILED\n", t, abort ? "abort" : "commit");
			return exit_fail;
		}
		rd_kafka_poll(rk, 0);   /* delivery reports of an abort without flush */
		out_write(out, abort ? "abort" : "commit", o->topic, recs, from, n);
		aborted += abort;
		unflushed += !flush;
	}
	rd_kafka_destroy(rk);
	printf("random %s: %d transactions (%d aborted, %d of them unflushed), %d records\n", o->txn_id,
	       o->txns, aborted, unflushed, n);
	if (out != stdout && fclose(out)) {
		perror(o->out);
		return exit_fail;
	}
	return exit_ok;
}

/* ---- consumer ------------------------------------------------------------------ */

/* What one consume pass saw. Locality: main thread. */
struct consumed {
	struct rec *rec;        /* [n] in the order read */
	int n, cap;
	int64_t end[topics_max][partitions_max];        /* last EOF offset, -1 none */
	bool at_end[topics_max][partitions_max];        /* EOF since the last record */
	int64_t wm_lo[topics_max][partitions_max], wm_hi[topics_max][partitions_max];
	int bad;                /* order / value / unknown-topic problems */
};

static int topic_index(char *const *topic, int ntopics, const char *name)
{
	for (int k = 0; k < ntopics; k++)
		if (!strcmp(topic[k], name))
			return k;
	return -1;
}

static int expect_find(struct rec *exp, int nexp, const char *key)
{
	for (int k = 0; k < nexp; k++)   /* small sets: a scan is fine */
		if (!strcmp(exp[k].key, key))
			return k;
	return -1;
}

static bool all_at_end(const struct consumed *c, int ntopics, int32_t partitions)
{
	for (int t = 0; t < ntopics; t++)
		for (int32_t p = 0; p < partitions; p++)
			if (!c->at_end[t][p])
				return false;
	return true;
}

/* consume --until: read on until this file exists (the producers are done). */
static const char *consume_until_file;


static bool until_pending(void)
{
	return consume_until_file && access(consume_until_file, F_OK) != 0;
}

/*
 * Read topic[0..ntopics) x partitions from the beginning with the given
 * isolation until every partition is at EOF and every one of exp[] was read
 * (or timeout_ms). Fills c (caller frees c->rec).
 */
static int consume_pass(const char *bootstrap, char *const *topic, int ntopics, int32_t partitions,
			const char *isolation, struct rec *exp, int nexp, int timeout_ms,
			struct consumed *c)
{
	char gid[64];
	snprintf(gid, sizeof(gid), "rdk-txn-%d-%" PRId64, (int)getpid(), now_ms());
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	conf_set(conf, "bootstrap.servers", bootstrap);
	conf_set(conf, "client.id", "rdk_txn_consumer");
	conf_set(conf, "group.id", gid);
	conf_set(conf, "isolation.level", !strcmp(isolation, "committed") ? "read_committed" :
		 "read_uncommitted");
	conf_set(conf, "enable.auto.commit", "false");
	conf_set(conf, "enable.partition.eof", "true");
	conf_set(conf, "auto.offset.reset", "error");
	conf_set(conf, "check.crcs", "true");
	conf_set(conf, "fetch.wait.max.ms", "100");
	conf_set(conf, "reconnect.backoff.max.ms", "500");
	if (consume_fetch_max_bytes) {
		conf_set(conf, "message.max.bytes", consume_fetch_max_bytes);   /* librdkafka: <= fetch.max.bytes */
		conf_set(conf, "fetch.max.bytes", consume_fetch_max_bytes);
	}
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER, conf);
	rd_kafka_poll_set_consumer(rk);
	*c = (struct consumed){ 0 };
	memset(c->end, 0xff, sizeof(c->end));
	rd_kafka_topic_partition_list_t *tpl = rd_kafka_topic_partition_list_new(ntopics * partitions);
	for (int t = 0; t < ntopics; t++)
		for (int32_t p = 0; p < partitions; p++)
			rd_kafka_topic_partition_list_add(tpl, topic[t], p)->offset = RD_KAFKA_OFFSET_BEGINNING;
	rd_kafka_resp_err_t e = rd_kafka_assign(rk, tpl);
	rd_kafka_topic_partition_list_destroy(tpl);
	if (e) {
		fprintf(stderr, "rdk_txn: assign: %s\n", rd_kafka_err2str(e));
		return -EIO;
	}
	int missing = nexp;
	for (int k = 0; k < nexp; k++)
		exp[k].seen = 0;
	int64_t deadline = now_ms() + timeout_ms;
	while (now_ms() < deadline && (missing > 0 || until_pending() || !all_at_end(c, ntopics, partitions))) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
		if (!m)
			continue;
		int t = m->rkt ? topic_index(topic, ntopics, rd_kafka_topic_name(m->rkt)) : -1;
		if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF && t >= 0) {
			c->end[t][m->partition] = m->offset;
			c->at_end[t][m->partition] = true;
		} else if (m->err) {
			fprintf(stderr, "rdk_txn: consume error: %s\n", rd_kafka_message_errstr(m));
		} else if (t < 0 || m->partition < 0 || m->partition >= partitions) {
			fprintf(stderr, "rdk_txn: record from unexpected %s/%d\n",
				m->rkt ? rd_kafka_topic_name(m->rkt) : "?", m->partition);
			c->bad++;
		} else {
			c->at_end[t][m->partition] = false;
			if (c->n == c->cap) {
				c->cap = c->cap ? 2 * c->cap : 1024;
				c->rec = realloc(c->rec, (size_t)c->cap * sizeof(*c->rec));
				if (!c->rec)
					abort();
			}
			struct rec *r = &c->rec[c->n++];
			*r = (struct rec){ .ti = t, .p = m->partition, .off = m->offset };
			size_t kl = m->key_len < key_bytes_max - 1 ? m->key_len : key_bytes_max - 1;
			if (m->key)
				memcpy(r->key, m->key, kl);
			if (!m->key || m->len != m->key_len || memcmp(m->payload, m->key, m->len)) {
				fprintf(stderr, "rdk_txn: %s/%d@%" PRId64 ": value does not match key '%s'\n",
					topic[t], m->partition, m->offset, r->key);
				c->bad++;
			}
			int x = expect_find(exp, nexp, r->key);
			if (x >= 0 && exp[x].seen++ == 0)
				missing--;
		}
		rd_kafka_message_destroy(m);
	}
	/* ListOffsets from this handle: librdkafka sends its isolation.level. */
	for (int t = 0; t < ntopics; t++)
		for (int32_t p = 0; p < partitions; p++) {
			c->wm_lo[t][p] = c->wm_hi[t][p] = -1;
			e = rd_kafka_query_watermark_offsets(rk, topic[t], p, &c->wm_lo[t][p],
							     &c->wm_hi[t][p], watermark_timeout_ms);
			if (e)
				fprintf(stderr, "rdk_txn: watermarks %s/%d: %s\n", topic[t], p,
					rd_kafka_err2name(e));
		}
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	if (!all_at_end(c, ntopics, partitions))
		fprintf(stderr, "rdk_txn: TIMEOUT: not every partition reached its end\n");
	return 0;
}

/*
 * Compare what was read with exp[]: offsets strictly increasing per partition,
 * every expected record read exactly once at its offset (if known), and, unless
 * subset, nothing else. Returns the number of problems.
 */
static int consume_verify(const struct consumed *c, char *const *topic, struct rec *exp, int nexp,
			  bool subset, const char *what)
{
	int bad = c->bad, printed = 0;
	int64_t last[topics_max][partitions_max];
	memset(last, 0xff, sizeof(last));
#define complain(...) do { bad++; if (printed++ < errors_printed_max) fprintf(stderr, "rdk_txn: " __VA_ARGS__); } while (0)
	for (int k = 0; k < c->n; k++) {
		const struct rec *r = &c->rec[k];
		if (r->off <= last[r->ti][r->p])
			complain("%s: %s/%d offset %" PRId64 " after %" PRId64 "\n", what,
				 topic[r->ti], r->p, r->off, last[r->ti][r->p]);
		last[r->ti][r->p] = r->off;
		int x = expect_find(exp, nexp, r->key);
		if (x < 0) {
			if (!subset)
				complain("%s: unexpected record %s at %s/%d@%" PRId64 "\n", what, r->key,
					 topic[r->ti], r->p, r->off);
		} else if (exp[x].ti != r->ti || exp[x].p != r->p ||
			   (exp[x].off >= 0 && exp[x].off != r->off)) {
			complain("%s: %s read at %s/%d@%" PRId64 ", want %s/%d@%" PRId64 "\n", what,
				 r->key, topic[r->ti], r->p, r->off, topic[exp[x].ti], exp[x].p, exp[x].off);
		}
	}
	for (int k = 0; k < nexp; k++)
		if (exp[k].seen != 1)
			complain("%s: expected %s (%s/%d@%" PRId64 ") read %d times\n", what, exp[k].key,
				 topic[exp[k].ti], exp[k].p, exp[k].off, exp[k].seen);
#undef complain
	return bad;
}

/* Expect-file lines: "LABEL KEY TOPIC PARTITION OFFSET"; topics not in o->topic are an error. */
static int expect_load(const char *path, char *const *topic, int ntopics, struct rec *exp)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		exit(exit_usage);
	}
	char label[32], key[key_bytes_max], tname[256];
	int n = 0, p;
	int64_t off;
	while (fscanf(f, "%31s %95s %255s %d %" SCNd64, label, key, tname, &p, &off) == 5) {
		int t = topic_index(topic, ntopics, tname);
		if (t < 0 || n == records_max || p < 0 || p >= partitions_max) {
			fprintf(stderr, "rdk_txn: %s: bad line for %s/%d\n", path, tname, p);
			exit(exit_usage);
		}
		exp[n] = (struct rec){ .ti = t, .p = p, .off = off };
		snprintf(exp[n].key, sizeof(exp[n].key), "%s", key);
		n++;
	}
	fclose(f);
	return n;
}

static void consumed_print(FILE *f, const struct consumed *c, char *const *topic, int ntopics,
			   int32_t partitions, bool records)
{
	for (int k = 0; records && k < c->n; k++)
		fprintf(f, "rec %s %s %d %" PRId64 "\n", c->rec[k].key, topic[c->rec[k].ti],
			c->rec[k].p, c->rec[k].off);
	for (int t = 0; t < ntopics; t++)
		for (int32_t p = 0; p < partitions; p++)
			fprintf(f, "end %s %d %" PRId64 "\nwm %s %d %" PRId64 " %" PRId64 "\n", topic[t], p,
				c->end[t][p], topic[t], p, c->wm_lo[t][p], c->wm_hi[t][p]);
}

static int cmd_consume(const struct opts *o)
{
	static struct rec exp[records_max];
	int nexp = o->expect ? expect_load(o->expect, o->topic, o->ntopics, exp) : 0;
	struct consumed c;
	consume_until_file = o->until;
	if (consume_pass(o->bootstrap, o->topic, o->ntopics, o->partitions, o->isolation, exp, nexp,
			 o->timeout_s * 1000, &c))
		return exit_fail;
	if (o->out) {
		FILE *f = fopen(o->out, "w");
		if (!f) {
			perror(o->out);
			return exit_usage;
		}
		consumed_print(f, &c, o->topic, o->ntopics, o->partitions, true);
		fclose(f);
	}
	consumed_print(stdout, &c, o->topic, o->ntopics, o->partitions, false);
	int bad = o->expect ? consume_verify(&c, o->topic, exp, nexp, o->subset, o->isolation) : c.bad;
	bad += !all_at_end(&c, o->ntopics, o->partitions);
	printf("consume %s: read %d, expected %d%s: %s\n", o->isolation, c.n, nexp,
	       o->subset ? " (subset)" : "", bad ? "FAIL" : "OK");
	free(c.rec);
	return bad ? exit_fail : exit_ok;
}

/* ---- scenarios ------------------------------------------------------------------- */

#define check(cond, ...) \
	do { if (!(cond)) { fprintf(stderr, "rdk_txn: CHECK FAILED: " __VA_ARGS__); fputc('\n', stderr); failed++; } } while (0)

/* Read partition 0 of o->topic[0] with isolation; exp[] must be exactly what is read, in this order. */
static int expect_exactly(const struct opts *o, const char *isolation, struct rec *exp, int nexp,
			  int64_t want_end, const char *what)
{
	struct consumed c;
	int failed = 0;
	if (consume_pass(o->bootstrap, o->topic, 1, 1, isolation, exp, nexp, 15000, &c))
		return 1;
	failed += consume_verify(&c, o->topic, exp, nexp, false, what);
	for (int k = 0; k < c.n && k < nexp; k++)
		check(!strcmp(c.rec[k].key, exp[k].key), "%s: record %d is %s, want %s", what, k,
		      c.rec[k].key, exp[k].key);
	check(c.end[0][0] == want_end, "%s: consumer end offset %" PRId64 ", want %" PRId64, what,
	      c.end[0][0], want_end);
	/* read_committed ListOffsets(latest) must be the LSO too, read_uncommitted the HW. */
	check(c.wm_hi[0][0] == want_end, "%s: ListOffsets latest %" PRId64 ", want %" PRId64, what,
	      c.wm_hi[0][0], want_end);
	printf("%s: read %d, end %" PRId64 ", ListOffsets latest %" PRId64 ": %s\n", what, c.n,
	       c.end[0][0], c.wm_hi[0][0], failed ? "FAIL" : "OK");
	free(c.rec);
	return failed;
}

static int rec_cmp_off(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Copy the delivered records of src[from..to) into dst (appending), sorted later. */
static int rec_take(struct rec *dst, int n, const struct rec *src, int from, int to)
{
	for (int k = from; k < to; k++)
		dst[n++] = src[k];
	return n;
}

/*
 * interleave: on ONE partition, plain records P0, then txn A (first batch),
 * txn B (first batch), plain records P1, A's second batch, B's second batch.
 * While A is open, read_committed ends at A's first offset (the LSO) even
 * though later plain records exist; after A commits it ends at B's first
 * offset; after B aborts it sees P0, A and P1 in offset order and nothing of B,
 * while read_uncommitted sees everything.
 */
static int cmd_interleave(const struct opts *o)
{
	static struct rec recs[1024], exp[1024];
	char *topic = o->topic[0];
	int failed = 0, n = 0;
	rd_kafka_t *pa = producer_new(o->bootstrap, "ilv-a", 60000);
	rd_kafka_t *pb = producer_new(o->bootstrap, "ilv-b", 60000);
	rd_kafka_t *pp = producer_new(o->bootstrap, NULL, 0);
	if (topics_create(pp, o->topic, 1, 1))
		return exit_usage;
	if (txn_err("A init", rd_kafka_init_transactions(pa, init_timeout_ms)) ||
	    txn_err("B init", rd_kafka_init_transactions(pb, init_timeout_ms)))
		return exit_fail;
	/* Segments [start, end) of recs[] per step. */
	int p0 = n;
	if (produce_batch(pp, &topic, 1, 1, 3, "p0", 0, recs, &n) || flush_check(pp, recs, p0, n, false))
		return exit_fail;
	int a1 = n;
	if (txn_err("A begin", rd_kafka_begin_transaction(pa)) ||
	    produce_batch(pa, &topic, 1, 1, 4, "a", 1, recs, &n) || flush_check(pa, recs, a1, n, false))
		return exit_fail;
	int b1 = n;
	if (txn_err("B begin", rd_kafka_begin_transaction(pb)) ||
	    produce_batch(pb, &topic, 1, 1, 4, "b", 1, recs, &n) || flush_check(pb, recs, b1, n, false))
		return exit_fail;
	int p1 = n;
	if (produce_batch(pp, &topic, 1, 1, 3, "p1", 0, recs, &n) || flush_check(pp, recs, p1, n, false))
		return exit_fail;
	int a2 = n;
	if (produce_batch(pa, &topic, 1, 1, 4, "a", 2, recs, &n) || flush_check(pa, recs, a2, n, false))
		return exit_fail;
	int b2 = n;
	if (produce_batch(pb, &topic, 1, 1, 4, "b", 2, recs, &n) || flush_check(pb, recs, b2, n, false))
		return exit_fail;
	int end = n;
	int64_t a_first = recs[a1].off, b_first = recs[b1].off;
	check(recs[p0].off < a_first && a_first < b_first && b_first < recs[p1].off &&
	      recs[p1].off < recs[a2].off && recs[a2].off < recs[b2].off,
	      "batches not in the produced order: p0 %" PRId64 " a1 %" PRId64 " b1 %" PRId64
	      " p1 %" PRId64 " a2 %" PRId64 " b2 %" PRId64, recs[p0].off, a_first, b_first,
	      recs[p1].off, recs[a2].off, recs[b2].off);
	for (int k = 0; k < end; k++)
		printf("produced %s at %" PRId64 "\n", recs[k].key, recs[k].off);
	int64_t log_end = recs[end - 1].off + 1;

	/* 1. Both open: read_committed stops at A's first offset, before P1. */
	int ne = rec_take(exp, 0, recs, p0, a1);
	failed += expect_exactly(o, "committed", exp, ne, a_first, "both open, read_committed");
	/* read_uncommitted sees every record; it ends at the log end. */
	ne = rec_take(exp, 0, recs, p0, end);
	qsort(exp, (size_t)ne, sizeof(*exp), rec_cmp_off);
	failed += expect_exactly(o, "uncommitted", exp, ne, log_end, "both open, read_uncommitted");

	/* 2. A commits (adds a marker): read_committed ends at B's first offset. */
	if (txn_err("A commit", rd_kafka_commit_transaction(pa, o->op_timeout_ms)))
		return exit_fail;
	ne = rec_take(exp, 0, recs, p0, b1);
	failed += expect_exactly(o, "committed", exp, ne, b_first, "A committed, B open, read_committed");

	/* 3. B aborts: read_committed sees P0, A, P1 in offset order, nothing of B. */
	if (txn_err("B abort", rd_kafka_abort_transaction(pb, o->op_timeout_ms)))
		return exit_fail;
	ne = rec_take(exp, 0, recs, p0, b1);
	ne = rec_take(exp, ne, recs, p1, b2);
	qsort(exp, (size_t)ne, sizeof(*exp), rec_cmp_off);
	/* The end is past both markers: log end + 2. */
	failed += expect_exactly(o, "committed", exp, ne, log_end + 2, "B aborted, read_committed");
	ne = rec_take(exp, 0, recs, p0, end);
	qsort(exp, (size_t)ne, sizeof(*exp), rec_cmp_off);
	failed += expect_exactly(o, "uncommitted", exp, ne, log_end + 2, "B aborted, read_uncommitted");

	rd_kafka_destroy(pa);
	rd_kafka_destroy(pb);
	rd_kafka_destroy(pp);
	printf("interleave: %s\n", failed ? "FAIL" : "OK");
	return failed ? exit_fail : exit_ok;
}

static bool is_fencing(rd_kafka_resp_err_t e)
{
	return e == RD_KAFKA_RESP_ERR__FENCED || e == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
	       e == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

/*
 * fence: instance 1 of a transactional.id writes and flushes a transaction; a
 * second instance with the same id calls init_transactions, which fences the
 * first and aborts its open transaction. Instance 1's commit must then fail
 * with a fatal fencing error: round 0 produces once more first (Produce with
 * the old epoch), round 1 commits at once (EndTxn with the old epoch).
 * Instance 2 then commits; read_committed sees exactly the instance-2 records
 * of both rounds, read_uncommitted instance 1's flushed records too.
 * recs[] gets instance 1's flushed records in [*f1_from, *f1_to) and instance
 * 2's in [*f2_from, *n). Returns the number of failed checks, -1 on a setup error.
 */
static int fence_round(const struct opts *o, int round, struct rec *recs, int *n, int *f1_from,
		       int *f1_to, int *f2_from)
{
	int failed = 0;
	char id[32], tag1[16], tag2[16];
	snprintf(id, sizeof(id), "fence-%d", round);
	snprintf(tag1, sizeof(tag1), "f%da", round);
	snprintf(tag2, sizeof(tag2), "f%db", round);
	rd_kafka_t *p1 = producer_new(o->bootstrap, id, 60000);
	if (topics_create(p1, o->topic, o->ntopics, o->partitions))
		return -1;
	*f1_from = *n;
	if (txn_err("1 init", rd_kafka_init_transactions(p1, init_timeout_ms)) ||
	    txn_err("1 begin", rd_kafka_begin_transaction(p1)) ||
	    produce_batch(p1, o->topic, o->ntopics, o->partitions, 3, tag1, 0, recs, n) ||
	    flush_check(p1, recs, *f1_from, *n, false))
		return -1;
	*f1_to = *n;
	rd_kafka_t *p2 = producer_new(o->bootstrap, id, 60000);
	int64_t t0 = now_ms();
	if (txn_err("2 init (fencing 1)", rd_kafka_init_transactions(p2, init_timeout_ms)))
		return -1;
	printf("round %d: instance 2 init_transactions took %" PRId64 " ms\n", round, now_ms() - t0);

	/* Instance 1 is a zombie now: its records may be rejected, its commit must be. */
	if (round == 0) {
		static struct rec zombie[partitions_max * topics_max];
		int nz = 0;
		if (produce_batch(p1, o->topic, o->ntopics, o->partitions, 1, tag1, 1, zombie, &nz))
			return -1;
		int undelivered = flush_check(p1, zombie, 0, nz, true);
		printf("round %d: instance 1 after fencing: %d of %d records rejected\n", round,
		       undelivered, nz);
	}
	rd_kafka_error_t *e = rd_kafka_commit_transaction(p1, o->op_timeout_ms);
	check(e, "round %d: instance 1's commit succeeded after it was fenced", round);
	if (e) {
		bool fatal = rd_kafka_error_is_fatal(e);
		rd_kafka_resp_err_t code = rd_kafka_error_code(e);
		char fs[512] = "";
		rd_kafka_resp_err_t fcode = rd_kafka_fatal_error(p1, fs, sizeof(fs));
		printf("round %d: instance 1 commit: %s (%s), fatal %d; fatal error %s: %s\n", round,
		       rd_kafka_error_name(e), rd_kafka_error_string(e), fatal,
		       rd_kafka_err2name(fcode), fs);
		check(fatal, "round %d: instance 1's commit error %s is not fatal", round,
		      rd_kafka_error_name(e));
		check(is_fencing(code) || is_fencing(fcode), "round %d: instance 1 failed with %s / "
		      "fatal %s, not a fencing error", round, rd_kafka_err2name(code),
		      rd_kafka_err2name(fcode));
		rd_kafka_error_destroy(e);
	}
	*f2_from = *n;
	if (txn_err("2 begin", rd_kafka_begin_transaction(p2)) ||
	    produce_batch(p2, o->topic, o->ntopics, o->partitions, 3, tag2, 0, recs, n) ||
	    flush_check(p2, recs, *f2_from, *n, false) ||
	    txn_err("2 commit", rd_kafka_commit_transaction(p2, o->op_timeout_ms)))
		return -1;
	printf("round %d: instance 2 committed %d records\n", round, *n - *f2_from);
	rd_kafka_destroy(p1);
	rd_kafka_destroy(p2);
	return failed;
}

static int cmd_fence(const struct opts *o)
{
	static struct rec recs[4096], committed[4096], both[4096];
	int failed = 0, n = 0, nc = 0, nb = 0;
	for (int round = 0; round < 2; round++) {
		int f1_from, f1_to, f2_from;
		int rc = fence_round(o, round, recs, &n, &f1_from, &f1_to, &f2_from);
		if (rc < 0)
			return exit_fail;
		failed += rc;
		nc = rec_take(committed, nc, recs, f2_from, n);
		nb = rec_take(both, nb, recs, f1_from, f1_to);
		nb = rec_take(both, nb, recs, f2_from, n);
	}
	struct consumed c;
	if (consume_pass(o->bootstrap, o->topic, o->ntopics, o->partitions, "committed", committed,
			 nc, 15000, &c))
		return exit_fail;
	failed += consume_verify(&c, o->topic, committed, nc, false, "read_committed");
	free(c.rec);
	/* read_uncommitted: instance 1's flushed (then aborted) records are in the log. */
	if (consume_pass(o->bootstrap, o->topic, o->ntopics, o->partitions, "uncommitted", both, nb,
			 15000, &c))
		return exit_fail;
	failed += consume_verify(&c, o->topic, both, nb, true, "read_uncommitted");
	free(c.rec);
	printf("fence: %s\n", failed ? "FAIL" : "OK");
	return failed ? exit_fail : exit_ok;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct opts o;
	parse_opts(argc, argv, &o);
	if (!strcmp(argv[1], "produce"))
		return cmd_produce(&o);
	if (!strcmp(argv[1], "consume"))
		return cmd_consume(&o);
	if (!strcmp(argv[1], "random"))
		return cmd_random(&o);
	if (!strcmp(argv[1], "interleave"))
		return cmd_interleave(&o);
	if (!strcmp(argv[1], "fence"))
		return cmd_fence(&o);
	usage();
}
