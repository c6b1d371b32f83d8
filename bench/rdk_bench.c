/*
 * sluice-rdk-bench: a librdkafka producer benchmark, in the spirit of Kafka's
 * kafka-producer-perf-test, so that the same binary can be pointed at sluice
 * and at a stock Kafka and the numbers compared.
 *
 * What is measured:
 *   - throughput: successfully delivered records of the measured phase, divided
 *     by the time from the first measured send to the last measured delivery
 *     report (so the drain at the end is included, as in Kafka's tool);
 *   - latency: per record, from rd_kafka_produce() (enqueue) to the delivery
 *     report, kept in a fixed log-linear histogram (no per-record storage), so
 *     it includes time queued inside librdkafka, exactly like Kafka's tool;
 *   - steady_mb_per_sec (only with --seconds): payload bytes whose delivery
 *     report arrived inside the fixed window [warm-up end, warm-up end + D],
 *     divided by D; unlike the figure above it is not diluted by the drain.
 * MB means MiB (2^20 bytes) of record values, as in Kafka's tool; keys are
 * empty and there are no headers.
 *
 * Every record points at one pre-built payload (msgflags 0: librdkafka neither
 * copies nor frees it), and records are spread round-robin over partitions by
 * the bench itself so that every partition, and so every shard core, is fed.
 *
 * Locality: everything runs on the main thread; delivery reports are served by
 * rd_kafka_poll() on this thread too, so no state below needs a lock.
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <time.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "bench_hist.h"

/* Limits, units last. */
enum {
	bench_size_max = 1 << 20,            /* largest record value, bytes */
	bench_partitions_max = 1 << 16,      /* CreateTopics partition count */
	bench_props_max = 32,                /* -X key=value pairs */
	bench_poll_every = 64,               /* produce calls between poll(0) */
	bench_queue_full_wait_ms = 1,        /* poll timeout when the queue is full */
	bench_admin_timeout_ms = 15000,      /* CreateTopics request */
	bench_metadata_wait_ms = 20000,      /* wait for the topic to have leaders */
	bench_metadata_retry_ms = 200,
	bench_message_timeout_ms = 60000,    /* default message.timeout.ms */
	bench_drain_slack_ms = 10000,        /* past message.timeout.ms */
	bench_drain_poll_ms = 10,
};
_Static_assert(bench_poll_every > 0 && (bench_poll_every & (bench_poll_every - 1)) == 0,
	       "poll cadence is a mask");

/* Command line. Locality: init only. */
struct bench_opts {
	const char *bootstrap;
	const char *topic;
	int partitions;
	int replication;
	size_t size;
	uint64_t count;      /* 0: run for `seconds` instead */
	double seconds;
	double warmup_seconds;
	double throughput;   /* records/s cap, warm-up included; 0: as fast as possible */
	const char *acks;    /* "all", "1" or "0" */
	bool idempotence;
	uint64_t txn_records;  /* >0: transactional, commit every this many records */
	int linger_ms;       /* -1: librdkafka default */
	long batch_bytes;    /* -1: librdkafka default */
	bool mock;           /* in-process mock cluster, for testing the bench itself */
	int nprops;
	const char *prop_key[bench_props_max];
	const char *prop_val[bench_props_max];
};

/* Counters and timing of one run. Locality: main thread (delivery reports too). */
struct bench_run {
	const struct bench_opts *opts;
	uint64_t t_begin_ns;        /* first enqueue of all, warm-up included */
	uint64_t t_measure_ns;      /* records enqueued at or after this are measured */
	uint64_t t_window_end_ns;   /* end of the steady window (--seconds only) */
	uint64_t t_first_send_ns;   /* first measured enqueue */
	uint64_t t_last_dr_ns;      /* last measured delivery report */
	uint64_t poll_now_ns;       /* clock read once per poll, 0 = not read yet */
	uint64_t sent;              /* all records enqueued, warm-up included */
	uint64_t sent_measured;
	uint64_t done;              /* delivery reports, success or not */
	uint64_t delivered_measured;
	uint64_t failed;
	uint64_t window_records;    /* delivered inside the steady window */
	rd_kafka_resp_err_t first_err;
	struct bench_hist hist;
	struct bench_hist commit_hist; /* commit_transaction() call to return */
	uint64_t commits;
	uint64_t txn_open;             /* records in the open transaction */
};

static uint64_t bench_now_ns(void)
{
	struct timespec ts;
	int rc = clock_gettime(CLOCK_MONOTONIC, &ts);
	assert(rc == 0);
	(void)rc;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Delivery report: runs inside rd_kafka_poll() on the main thread. All reports
 * served by one poll call were observed by the application at the same moment,
 * so the clock is read once per poll call, not once per record.
 */
static void bench_on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
	struct bench_run *run = opaque;
	uint64_t enq_ns = (uint64_t)(uintptr_t)msg->_private;
	assert(enq_ns != 0 && "every record carries its enqueue time");
	if (run->poll_now_ns == 0)
		run->poll_now_ns = bench_now_ns();
	uint64_t now = run->poll_now_ns;
	assert(now >= enq_ns);
	run->done++;
	assert(run->done <= run->sent);
	if (msg->err) {
		if (run->failed++ == 0)
			run->first_err = msg->err;
		return;
	}
	if (run->t_window_end_ns && now >= run->t_measure_ns && now <= run->t_window_end_ns)
		run->window_records++;
	if (enq_ns < run->t_measure_ns)
		return; /* warm-up record */
	run->delivered_measured++;
	run->t_last_dr_ns = now;
	bench_hist_add(&run->hist, (now - enq_ns) / 1000u);
}

static int bench_poll(rd_kafka_t *rk, struct bench_run *run, int timeout_ms)
{
	run->poll_now_ns = 0;
	return rd_kafka_poll(rk, timeout_ms);
}

static void bench_usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-rdk-bench --bootstrap HOST:PORT --topic T --partitions P --size S\n"
		"                        (--count N | --seconds D) --acks all|1|0\n"
		"                        [--idempotence] [--transactional RECORDS_PER_TXN]\n"
		"                        [--linger-ms L] [--batch-bytes X]\n"
		"                        [--warmup-seconds W] [--replication-factor R]\n"
		"                        [--throughput R] [-X librdkafka.property=value ...] [--mock]\n"
		"  --count N          send N measured records (after the warm-up, if any)\n"
		"  --seconds D        send for D seconds (after the warm-up, if any)\n"
		"  --warmup-seconds W send for W seconds first; those records are not measured\n"
		"  --throughput R     cap the send rate at R records/s (default: no cap, so\n"
		"                     latency is mostly time queued inside librdkafka)\n"
		"  --partitions P     partitions to create the topic with (an existing topic\n"
		"                     keeps its own count); records go round-robin over them\n"
		"  --mock             use librdkafka's in-process mock cluster (tests the bench)\n");
}

static int bench_parse_long(const char *s, long lo, long hi, long *out)
{
	char *end = NULL;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

static int bench_parse_seconds(const char *s, double *out)
{
	char *end = NULL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0.0 && v <= 86400.0))
		return -EINVAL;
	*out = v;
	return 0;
}

/* Returns 0, or -EINVAL after printing why. Locality: init only. */
static int bench_parse_args(int argc, char **argv, struct bench_opts *o)
{
	enum { o_bootstrap = 256, o_topic, o_partitions, o_size, o_count, o_seconds, o_acks,
	       o_idem, o_linger, o_batch, o_warmup, o_repl, o_mock, o_tput, o_txn, o_help };
	static const struct option longopts[] = {
		{ "bootstrap", required_argument, NULL, o_bootstrap },
		{ "topic", required_argument, NULL, o_topic },
		{ "partitions", required_argument, NULL, o_partitions },
		{ "size", required_argument, NULL, o_size },
		{ "count", required_argument, NULL, o_count },
		{ "seconds", required_argument, NULL, o_seconds },
		{ "acks", required_argument, NULL, o_acks },
		{ "idempotence", no_argument, NULL, o_idem },
		{ "transactional", required_argument, NULL, o_txn },
		{ "linger-ms", required_argument, NULL, o_linger },
		{ "batch-bytes", required_argument, NULL, o_batch },
		{ "warmup-seconds", required_argument, NULL, o_warmup },
		{ "replication-factor", required_argument, NULL, o_repl },
		{ "mock", no_argument, NULL, o_mock },
		{ "throughput", required_argument, NULL, o_tput },
		{ "help", no_argument, NULL, o_help },
		{ NULL, 0, NULL, 0 },
	};
	*o = (struct bench_opts){ .partitions = 1, .replication = 1, .size = 100, .acks = "all",
				  .linger_ms = -1, .batch_bytes = -1 };
	long v = 0;
	int c;
	while ((c = getopt_long(argc, argv, "X:h", longopts, NULL)) != -1) {
		int rc = 0;
		switch (c) {
		case o_bootstrap: o->bootstrap = optarg; break;
		case o_topic: o->topic = optarg; break;
		case o_partitions:
			rc = bench_parse_long(optarg, 1, bench_partitions_max, &v);
			o->partitions = (int)v;
			break;
		case o_size:
			rc = bench_parse_long(optarg, 1, bench_size_max, &v);
			o->size = (size_t)v;
			break;
		case o_count:
			rc = bench_parse_long(optarg, 1, INT64_MAX / 2, &v);
			o->count = (uint64_t)v;
			break;
		case o_seconds: rc = bench_parse_seconds(optarg, &o->seconds); break;
		case o_warmup: rc = bench_parse_seconds(optarg, &o->warmup_seconds); break;
		case o_acks:
			o->acks = optarg;
			if (strcmp(optarg, "all") && strcmp(optarg, "-1") && strcmp(optarg, "1") &&
			    strcmp(optarg, "0"))
				rc = -EINVAL;
			if (!strcmp(optarg, "-1"))
				o->acks = "all";
			break;
		case o_idem: o->idempotence = true; break;
		case o_txn:
			rc = bench_parse_long(optarg, 1, 100000000L, &v);
			o->txn_records = (uint64_t)v;
			o->idempotence = true;   /* transactions imply idempotence */
			break;
		case o_linger:
			rc = bench_parse_long(optarg, 0, 900000, &v);
			o->linger_ms = (int)v;
			break;
		case o_batch:
			rc = bench_parse_long(optarg, 1, 2147483647L, &v);
			o->batch_bytes = v;
			break;
		case o_repl:
			rc = bench_parse_long(optarg, -1, 32767, &v);
			o->replication = (int)v;
			break;
		case o_mock: o->mock = true; break;
		case o_tput:
			rc = bench_parse_long(optarg, 0, 1000000000L, &v);
			o->throughput = (double)v;
			break;
		case 'X': {
			char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || o->nprops == bench_props_max) {
				rc = -EINVAL;
				break;
			}
			*eq = '\0';
			o->prop_key[o->nprops] = optarg;
			o->prop_val[o->nprops] = eq + 1;
			o->nprops++;
			break;
		}
		case 'h':
		case o_help: bench_usage(stdout); exit(0);
		default: bench_usage(stderr); return -EINVAL;
		}
		if (rc) {
			fprintf(stderr, "sluice-rdk-bench: bad value for option: %s\n", argv[optind - 1]);
			return rc;
		}
	}
	const char *why = NULL;
	if (optind != argc)
		why = "unexpected positional argument";
	else if (!o->bootstrap && !o->mock)
		why = "--bootstrap is required";
	else if (!o->topic)
		why = "--topic is required";
	else if ((o->count == 0) == (o->seconds <= 0.0))
		why = "give exactly one of --count N or --seconds D (D > 0)";
	else if (o->idempotence && strcmp(o->acks, "all"))
		why = "--idempotence needs --acks all";
	if (why) {
		fprintf(stderr, "sluice-rdk-bench: %s\n", why);
		bench_usage(stderr);
		return -EINVAL;
	}
	return 0;
}

static int bench_conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char errstr[512];
	if (rd_kafka_conf_set(conf, k, v, errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "sluice-rdk-bench: config %s=%s: %s\n", k, v, errstr);
		return -EINVAL;
	}
	return 0;
}

/* Builds the producer configuration; user -X properties are applied last. */
static rd_kafka_conf_t *bench_conf_new(const struct bench_opts *o, struct bench_run *run)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char num[32];
	int rc = 0;
	if (o->mock)
		rc |= bench_conf_set(conf, "test.mock.num.brokers", "1");
	else
		rc |= bench_conf_set(conf, "bootstrap.servers", o->bootstrap);
	rc |= bench_conf_set(conf, "client.id", "sluice-rdk-bench");
	rc |= bench_conf_set(conf, "acks", o->acks);
	rc |= bench_conf_set(conf, "enable.idempotence", o->idempotence ? "true" : "false");
	if (o->txn_records) {
		snprintf(num, sizeof num, "sluice-bench-%d", (int)getpid());
		rc |= bench_conf_set(conf, "transactional.id", num);
	}
	snprintf(num, sizeof num, "%d", bench_message_timeout_ms);
	rc |= bench_conf_set(conf, "message.timeout.ms", num);
	if (o->linger_ms >= 0) {
		snprintf(num, sizeof num, "%d", o->linger_ms);
		rc |= bench_conf_set(conf, "linger.ms", num);
	}
	if (o->batch_bytes > 0) {
		snprintf(num, sizeof num, "%ld", o->batch_bytes);
		rc |= bench_conf_set(conf, "batch.size", num);
	}
	for (int i = 0; i < o->nprops; i++)
		rc |= bench_conf_set(conf, o->prop_key[i], o->prop_val[i]);
	if (rc) {
		rd_kafka_conf_destroy(conf);
		return NULL;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, bench_on_delivery);
	rd_kafka_conf_set_opaque(conf, run);
	return conf;
}

/* A configuration property as librdkafka resolved it, for the RESULT line. */
static const char *bench_conf_get(rd_kafka_t *rk, const char *k, char *buf, size_t cap)
{
	const rd_kafka_conf_t *conf = rd_kafka_conf(rk);
	size_t len = cap;
	if (rd_kafka_conf_get(conf, k, buf, &len) != RD_KAFKA_CONF_OK)
		snprintf(buf, cap, "?");
	return buf;
}

/*
 * Creates the topic with CreateTopics; an existing topic is fine. A broker that
 * does not support CreateTopics is not fatal: the producer's metadata request
 * may still auto-create the topic, which bench_topic_wait() then waits for.
 * Must run before the first rd_kafka_topic_new() so that auto-creation cannot
 * win the race with a broker-default partition count. Locality: init only.
 */
static void bench_topic_create(rd_kafka_t *rk, const struct bench_opts *o)
{
	char errstr[512];
	rd_kafka_NewTopic_t *nt =
		rd_kafka_NewTopic_new(o->topic, o->partitions, o->replication, errstr, sizeof errstr);
	if (!nt) {
		fprintf(stderr, "sluice-rdk-bench: warning: NewTopic: %s\n", errstr);
		return;
	}
	rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
	rd_kafka_AdminOptions_set_request_timeout(ao, bench_admin_timeout_ms, errstr, sizeof errstr);
	rd_kafka_AdminOptions_set_operation_timeout(ao, bench_admin_timeout_ms - 1000, errstr,
						    sizeof errstr);
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	rd_kafka_CreateTopics(rk, &nt, 1, ao, q);
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, bench_admin_timeout_ms + 5000);
	const char *what = NULL;
	rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
	if (!ev) {
		what = "no CreateTopics result";
		err = RD_KAFKA_RESP_ERR__TIMED_OUT;
	} else if (rd_kafka_event_error(ev)) {
		what = rd_kafka_event_error_string(ev);
		err = rd_kafka_event_error(ev);
	} else {
		size_t n = 0;
		const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
		const rd_kafka_topic_result_t **tr = rd_kafka_CreateTopics_result_topics(res, &n);
		if (n == 1 && rd_kafka_topic_result_error(tr[0])) {
			err = rd_kafka_topic_result_error(tr[0]);
			what = rd_kafka_topic_result_error_string(tr[0]);
		}
	}
	if (err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
		fprintf(stderr, "# topic %s already exists\n", o->topic);
	else if (err)
		fprintf(stderr, "sluice-rdk-bench: warning: CreateTopics %s: %s (%s); relying on auto-creation\n",
			o->topic, rd_kafka_err2name(err), what ? what : "");
	else
		fprintf(stderr, "# created topic %s with %d partitions\n", o->topic, o->partitions);
	if (ev)
		rd_kafka_event_destroy(ev);
	rd_kafka_queue_destroy(q);
	rd_kafka_AdminOptions_destroy(ao);
	rd_kafka_NewTopic_destroy(nt);
}

/*
 * Waits until the topic's metadata shows every partition with a leader.
 * Returns the partition count, or -ETIMEDOUT. Locality: init only.
 */
static int bench_topic_wait(rd_kafka_t *rk, rd_kafka_topic_t *rkt, const char *topic)
{
	uint64_t deadline = bench_now_ns() + (uint64_t)bench_metadata_wait_ms * 1000000u;
	const char *last = "no answer";
	while (bench_now_ns() < deadline) {
		const struct rd_kafka_metadata *md = NULL;
		rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, bench_metadata_retry_ms * 5);
		int n = -1;
		if (err) {
			last = rd_kafka_err2str(err);
		} else if (md->topic_cnt != 1 || strcmp(md->topics[0].topic, topic)) {
			last = "topic missing from metadata";
		} else if (md->topics[0].err) {
			last = rd_kafka_err2str(md->topics[0].err);
		} else if (md->topics[0].partition_cnt > 0) {
			n = md->topics[0].partition_cnt;
			for (int i = 0; i < md->topics[0].partition_cnt; i++)
				if (md->topics[0].partitions[i].leader < 0)
					n = -1, last = "partition without a leader";
		} else {
			last = "topic has no partitions";
		}
		if (md)
			rd_kafka_metadata_destroy(md);
		if (n > 0)
			return n;
		rd_kafka_poll(rk, bench_metadata_retry_ms);
	}
	fprintf(stderr, "sluice-rdk-bench: topic %s not ready after %d ms: %s\n", topic,
		bench_metadata_wait_ms, last);
	return -ETIMEDOUT;
}

/* Fills the shared payload with letters, like Kafka's tool (no compression is set). */
static void bench_payload_fill(char *p, size_t n)
{
	uint64_t x = 0x9e3779b97f4a7c15u;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = (char)('A' + x % 26);
	}
}

static int bench_txn_error(rd_kafka_error_t *e, const char *what)
{
	fprintf(stderr, "sluice-rdk-bench: %s: %s\n", what, rd_kafka_error_string(e));
	rd_kafka_error_destroy(e);
	return -EIO;
}

/*
 * Transactional mode: commit the open transaction (librdkafka flushes it
 * first, serving delivery reports) and begin the next. The commit time is
 * recorded in its own histogram.
 */
static int bench_txn_next(rd_kafka_t *rk, struct bench_run *run)
{
	uint64_t t0 = bench_now_ns();
	rd_kafka_error_t *e = rd_kafka_commit_transaction(rk, -1);
	if (e)
		return bench_txn_error(e, "commit_transaction");
	uint64_t t1 = bench_now_ns();
	bench_hist_add(&run->commit_hist, (t1 - t0) / 1000u);
	run->commits++;
	run->txn_open = 0;
	run->poll_now_ns = 0;
	rd_kafka_poll(rk, 0);
	e = rd_kafka_begin_transaction(rk);
	return e ? bench_txn_error(e, "begin_transaction") : 0;
}

/*
 * The produce loop: enqueue as fast as librdkafka accepts, poll delivery reports
 * every bench_poll_every records, and wait briefly when the local queue is full.
 * Returns 0, or -EIO on a produce error other than a full queue.
 */
static int bench_produce(rd_kafka_t *rk, rd_kafka_topic_t *rkt, int nparts, const char *payload,
			 struct bench_run *run)
{
	const struct bench_opts *o = run->opts;
	uint64_t t_stop = o->count ? UINT64_MAX : run->t_measure_ns + (uint64_t)(o->seconds * 1e9);
	int32_t part = 0;
	for (;;) {
		uint64_t now = bench_now_ns();
		bool measured = now >= run->t_measure_ns;
		if (o->count ? run->sent_measured == o->count : now >= t_stop)
			break;
		if (o->throughput > 0.0) {
			/* Paced: the n-th record is due n/R seconds after the first. */
			uint64_t due = run->t_begin_ns + (uint64_t)((double)run->sent * 1e9 / o->throughput);
			if (now < due) {
				/* Sleep at least 1 ms: spinning would steal a core from the
				 * broker on a small machine; the sender then catches up in a
				 * burst of R/1000 records. */
				bench_poll(rk, run, 1 + (int)((due - now) / 1000000u));
				continue;
			}
		}
		/* msgflags 0: the payload is shared and outlives every record. */
		if (rd_kafka_produce(rkt, part, 0, (void *)payload, o->size, NULL, 0,
				     (void *)(uintptr_t)now) == -1) {
			rd_kafka_resp_err_t err = rd_kafka_last_error();
			if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
				bench_poll(rk, run, bench_queue_full_wait_ms);
				continue;
			}
			char why[512] = "";
			if (err == RD_KAFKA_RESP_ERR__FATAL)
				rd_kafka_fatal_error(rk, why, sizeof why);
			fprintf(stderr, "sluice-rdk-bench: produce: %s%s%s\n", rd_kafka_err2str(err),
				*why ? ": " : "", why);
			return -EIO;
		}
		if (measured && run->sent_measured++ == 0)
			run->t_first_send_ns = now;
		part = part + 1 == nparts ? 0 : part + 1;
		if ((++run->sent & (bench_poll_every - 1)) == 0)
			bench_poll(rk, run, 0);
		/* After counting it as sent: the commit serves its delivery report. */
		if (o->txn_records && ++run->txn_open == o->txn_records && bench_txn_next(rk, run) < 0)
			return -EIO;
	}
	return 0;
}

/*
 * Polls until every record has its delivery report, or the deadline passes:
 * librdkafka fails a record after message.timeout.ms, so waiting a little
 * longer than that can only end early if librdkafka itself is stuck.
 */
static int bench_drain(rd_kafka_t *rk, struct bench_run *run)
{
	char buf[32];
	long timeout_ms = atol(bench_conf_get(rk, "message.timeout.ms", buf, sizeof buf));
	if (timeout_ms <= 0)
		timeout_ms = bench_message_timeout_ms;
	uint64_t deadline = bench_now_ns() + (uint64_t)(timeout_ms + bench_drain_slack_ms) * 1000000u;
	while (run->done < run->sent && bench_now_ns() < deadline)
		bench_poll(rk, run, bench_drain_poll_ms);
	if (run->done < run->sent) {
		fprintf(stderr, "sluice-rdk-bench: %" PRIu64 " records without a delivery report\n",
			run->sent - run->done);
		return -ETIMEDOUT;
	}
	return 0;
}

static void bench_report(rd_kafka_t *rk, const struct bench_run *run, int nparts)
{
	const struct bench_opts *o = run->opts;
	const struct bench_hist *h = &run->hist;
	double secs = run->delivered_measured ?
		(double)(run->t_last_dr_ns - run->t_first_send_ns) / 1e9 : 0.0;
	double rps = secs > 0 ? (double)run->delivered_measured / secs : 0.0;
	double mbps = rps * (double)o->size / (1024.0 * 1024.0);
	double avg_ms = h->count ? (double)h->sum_us / (double)h->count / 1e3 : 0.0;
	double max_ms = (double)h->max_us / 1e3;
	double p50 = bench_hist_quantile_us(h, 0.50) / 1e3;
	double p95 = bench_hist_quantile_us(h, 0.95) / 1e3;
	double p99 = bench_hist_quantile_us(h, 0.99) / 1e3;
	double p999 = bench_hist_quantile_us(h, 0.999) / 1e3;
	double steady_rps = o->count ? 0.0 : (double)run->window_records / o->seconds;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	char linger[32], batch[32];

	printf("%" PRIu64 " records sent, %.1f records/sec (%.2f MB/sec), avg latency %.2f ms, "
	       "max latency %.2f ms, p50 %.2f ms, p95 %.2f ms, p99 %.2f ms, p99.9 %.2f ms\n",
	       run->delivered_measured, rps, mbps, avg_ms, max_ms, p50, p95, p99, p999);
	const struct bench_hist *ch = &run->commit_hist;
	double c50 = bench_hist_quantile_us(ch, 0.50) / 1e3, c99 = bench_hist_quantile_us(ch, 0.99) / 1e3;
	double cavg = ch->count ? (double)ch->sum_us / (double)ch->count / 1e3 : 0.0;
	if (o->txn_records)
		printf("%" PRIu64 " transactions of %" PRIu64 " records, commit avg %.3f ms, p50 %.3f ms, p99 %.3f ms\n",
		       run->commits, o->txn_records, cavg, c50, c99);
	printf("RESULT tool=sluice-rdk-bench txn_records=%" PRIu64 " commits=%" PRIu64 " commit_avg_ms=%.3f "
	       "commit_p50_ms=%.3f commit_p99_ms=%.3f ", o->txn_records, run->commits, cavg, c50, c99);
	printf("topic=%s partitions=%d size=%zu acks=%s idempotence=%d "
	       "linger_ms=%s batch_bytes=%s warmup_s=%.1f throughput_cap=%.0f records=%" PRIu64 " errors=%" PRIu64
	       " seconds=%.3f records_per_sec=%.1f mb_per_sec=%.3f avg_ms=%.3f max_ms=%.3f "
	       "p50_ms=%.3f p95_ms=%.3f p99_ms=%.3f p999_ms=%.3f steady_records_per_sec=%.1f "
	       "steady_mb_per_sec=%.3f client_cpu_s=%.2f\n",
	       o->topic, nparts, o->size, o->acks, o->idempotence,
	       bench_conf_get(rk, "linger.ms", linger, sizeof linger),
	       bench_conf_get(rk, "batch.size", batch, sizeof batch), o->warmup_seconds, o->throughput,
	       run->delivered_measured, run->failed, secs, rps, mbps, avg_ms, max_ms, p50, p95, p99,
	       p999, steady_rps, steady_rps * (double)o->size / (1024.0 * 1024.0), cpu_s);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static struct bench_run run; /* static: the histogram is ~30 KiB */
	struct bench_opts o;
	if (bench_parse_args(argc, argv, &o))
		return 2;
	run.opts = &o;

	char *payload = malloc(o.size);
	if (!payload) {
		fprintf(stderr, "sluice-rdk-bench: out of memory\n");
		return 1;
	}
	bench_payload_fill(payload, o.size);

	rd_kafka_conf_t *conf = bench_conf_new(&o, &run);
	if (!conf)
		return 2;
	char errstr[512];
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
	if (!rk) {
		fprintf(stderr, "sluice-rdk-bench: rd_kafka_new: %s\n", errstr);
		rd_kafka_conf_destroy(conf);
		return 1;
	}
	fprintf(stderr, "# librdkafka %s, bootstrap=%s topic=%s size=%zu acks=%s idempotence=%d\n",
		rd_kafka_version_str(), o.mock ? "(mock)" : o.bootstrap, o.topic, o.size, o.acks,
		o.idempotence);

	int rc = 1;
	if (o.txn_records) {
		rd_kafka_error_t *e = rd_kafka_init_transactions(rk, 30000);
		if (!e)
			e = rd_kafka_begin_transaction(rk);
		if (e) {
			bench_txn_error(e, "init_transactions");
			rd_kafka_destroy(rk);
			return 1;
		}
	}
	if (o.mock) /* the mock cluster has no controller to answer CreateTopics */
		rd_kafka_mock_topic_create(rd_kafka_handle_mock_cluster(rk), o.topic, o.partitions, 1);
	else
		bench_topic_create(rk, &o);
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o.topic, NULL);
	int nparts = rkt ? bench_topic_wait(rk, rkt, o.topic) : -EINVAL;
	if (nparts > 0) {
		if (nparts != o.partitions)
			fprintf(stderr, "sluice-rdk-bench: warning: topic %s has %d partitions, not %d; using %d\n",
				o.topic, nparts, o.partitions, nparts);
		uint64_t t0 = bench_now_ns();
		run.t_begin_ns = t0;
		run.t_measure_ns = t0 + (uint64_t)(o.warmup_seconds * 1e9);
		if (!o.count)
			run.t_window_end_ns = run.t_measure_ns + (uint64_t)(o.seconds * 1e9);
		int prc = bench_produce(rk, rkt, nparts, payload, &run);
		if (!prc && o.txn_records && run.txn_open && bench_txn_next(rk, &run) < 0)
			prc = -EIO;
		int drc = bench_drain(rk, &run);
		bench_report(rk, &run, nparts);
		char why[512] = "";
		if (rd_kafka_fatal_error(rk, why, sizeof why))
			fprintf(stderr, "sluice-rdk-bench: fatal client error: %s\n", why);
		if (run.failed)
			fprintf(stderr, "sluice-rdk-bench: %" PRIu64 " deliveries failed, first: %s\n",
				run.failed, rd_kafka_err2str(run.first_err));
		rc = prc || drc || run.failed || run.delivered_measured == 0;
	}
	if (rkt)
		rd_kafka_topic_destroy(rkt);
	rd_kafka_flush(rk, 1000);
	rd_kafka_destroy(rk);
	free(payload);
	return rc;
}
