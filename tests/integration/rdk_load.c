/*
 * rdk_load.c - librdkafka load generator and verifier for the real-client
 * integration tests (the .sh scripts beside it).
 *
 * Locality: a single-threaded test program (librdkafka runs its own threads;
 * every callback here runs on the main thread from rd_kafka_poll/flush).
 *
 *   rdk_load produce --bootstrap B --topic T --partitions P --count N --size S
 *                    [--acks all|1|0] [--acked-file F] [--allow-failures]
 *                    [--timeout-ms MS] [--idempotent] [--no-create]
 *   rdk_load consume --bootstrap B --topic T --partitions P [--expect N]
 *                    [--acked-file F] [--timeout S] [--conf K=V]...
 *
 * Message i has key "k<i>" and a value of exactly S bytes whose layout is
 * shared with kafkajs/test.js (keep the two in step):
 *
 *   offset   size   field
 *   0        8      i, uint64 little-endian
 *   8        S-12   filler: byte j (counted from 0 at offset 0) = (i * 131 + j) & 0xff
 *   S-4      4      FNV-1a 32 of bytes [0, S-4), little-endian
 *
 * A consumer can therefore check each message on its own (whole, not torn,
 * key matches value) and, with --expect/--acked-file, the set of messages.
 * Exit status: 0 = OK, 1 = verification or delivery failure, 2 = usage or
 * setup error.
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

#define value_bytes_min 16u
#define value_bytes_max (1u << 20)
#define partitions_max 1024
#define conf_max 16
#define key_bytes_max 32
#define admin_timeout_ms 15000
#define metadata_wait_ms 20000
#define watermark_timeout_ms 10000
#define acked_flush_ms 100           /* crash test watches the file grow */
#define flush_step_ms 500
#define report_every_ms 5000
#define errors_printed_max 20        /* per kind, so a broken broker doesn't flood logs */

enum { exit_ok = 0, exit_fail = 1, exit_usage = 2 };

/* Options of both subcommands. Locality: main thread. */
struct opts {
	const char *bootstrap;
	const char *topic;
	const char *acks;
	const char *acked_file;
	const char *compression; /* compression.codec, NULL: librdkafka's default (none) */
	int32_t partitions;
	int64_t count;
	int64_t expect;        /* -1: not given */
	uint32_t size;
	int timeout_s;         /* consume: overall limit */
	int msg_timeout_ms;    /* produce: message.timeout.ms */
	int req_timeout_ms;    /* produce: request.timeout.ms, 0 = librdkafka's default */
	int batch_messages;    /* produce: batch.num.messages, 0 = librdkafka's default */
	bool allow_failures;
	bool idempotent;
	bool no_create;        /* topic exists or is auto-created: skip CreateTopics */
	const char *conf[conf_max]; /* consume: extra librdkafka settings "K=V" (--conf) */
	int nconf;
};

/* Producer progress, updated by the delivery-report callback. Locality: main thread. */
struct produce_state {
	FILE *acked;
	int64_t acked_n;
	int64_t failed_n;
	int64_t last_flush_ms;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint32_t fnv1a32(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t k = 0; k < n; k++) {
		h ^= p[k];
		h *= 16777619u;
	}
	return h;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int k = 0; k < 8; k++)
		p[k] = (uint8_t)(v >> (8 * k));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int k = 0; k < 8; k++)
		v |= (uint64_t)p[k] << (8 * k);
	return v;
}

static void value_fill(uint8_t *v, uint32_t size, uint64_t i)
{
	put_le64(v, i);
	for (uint32_t j = 8; j < size - 4; j++)
		v[j] = (uint8_t)(i * 131u + j);
	uint32_t h = fnv1a32(v, size - 4);
	for (int k = 0; k < 4; k++)
		v[size - 4 + k] = (uint8_t)(h >> (8 * k));
}

/* Returns true and sets *i when the value is whole and consistent with its key. */
static bool value_check(const uint8_t *v, size_t size, const void *key, size_t key_len,
			uint64_t *i)
{
	if (size < value_bytes_min || size > value_bytes_max)
		return false;
	uint32_t h = 0;
	for (int k = 0; k < 4; k++)
		h |= (uint32_t)v[size - 4 + k] << (8 * k);
	if (h != fnv1a32(v, size - 4))
		return false;
	*i = get_le64(v);
	for (size_t j = 8; j < size - 4; j++)
		if (v[j] != (uint8_t)(*i * 131u + j))
			return false;
	char want[key_bytes_max];
	int n = snprintf(want, sizeof(want), "k%" PRIu64, *i);
	return key && (size_t)n == key_len && memcmp(want, key, key_len) == 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: rdk_load produce --bootstrap B --topic T --partitions P --count N --size S\n"
		"                        [--acks all|1|0] [--acked-file F] [--allow-failures]\n"
		"                        [--timeout-ms MS] [--idempotent] [--no-create]\n"
		"                        [--compression none|gzip|snappy|lz4|zstd] [--request-timeout-ms MS]\n"
		"                        [--batch-messages N]\n"
		"       rdk_load consume --bootstrap B --topic T --partitions P [--expect N]\n"
		"                        [--acked-file F] [--timeout S] [--conf K=V]...\n");
	exit(exit_usage);
}

static int64_t parse_num(const char *s, int64_t lo, int64_t hi, const char *what)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi) {
		fprintf(stderr, "rdk_load: bad %s '%s' (want %" PRId64 "..%" PRId64 ")\n", what, s,
			lo, hi);
		exit(exit_usage);
	}
	return v;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .acks = "all", .expect = -1, .count = -1, .size = 100,
			    .timeout_s = 120, .msg_timeout_ms = 60000 };
	for (int k = 2; k < argc; k++) {
		const char *a = argv[k];
		const char *v = k + 1 < argc ? argv[k + 1] : NULL;
		if (!strcmp(a, "--allow-failures")) { o->allow_failures = true; continue; }
		if (!strcmp(a, "--idempotent")) { o->idempotent = true; continue; }
		if (!strcmp(a, "--no-create")) { o->no_create = true; continue; }
		if (!v)
			usage();
		k++;
		if (!strcmp(a, "--bootstrap")) o->bootstrap = v;
		else if (!strcmp(a, "--topic")) o->topic = v;
		else if (!strcmp(a, "--acks")) o->acks = v;
		else if (!strcmp(a, "--acked-file")) o->acked_file = v;
		else if (!strcmp(a, "--compression")) o->compression = v;
		else if (!strcmp(a, "--partitions"))
			o->partitions = (int32_t)parse_num(v, 1, partitions_max, a);
		else if (!strcmp(a, "--count")) o->count = parse_num(v, 0, INT32_MAX, a);
		else if (!strcmp(a, "--expect")) o->expect = parse_num(v, 0, INT32_MAX, a);
		else if (!strcmp(a, "--size"))
			o->size = (uint32_t)parse_num(v, value_bytes_min, value_bytes_max, a);
		else if (!strcmp(a, "--timeout")) o->timeout_s = (int)parse_num(v, 1, 3600, a);
		else if (!strcmp(a, "--conf") && o->nconf < conf_max && strchr(v, '=')) o->conf[o->nconf++] = v;
		else if (!strcmp(a, "--batch-messages"))
			o->batch_messages = (int)parse_num(v, 1, 1000000, a);
		else if (!strcmp(a, "--request-timeout-ms"))
			o->req_timeout_ms = (int)parse_num(v, 100, 300000, a);
		else if (!strcmp(a, "--timeout-ms"))
			o->msg_timeout_ms = (int)parse_num(v, 1000, 3600000, a);
		else
			usage();
	}
	if (!o->bootstrap || !o->topic || o->partitions <= 0)
		usage();
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char err[256];
	if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "rdk_load: config %s=%s: %s\n", k, v, err);
		exit(exit_usage);
	}
}

static rd_kafka_t *client_new(rd_kafka_type_t type, rd_kafka_conf_t *conf)
{
	char err[512];
	rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "rdk_load: rd_kafka_new: %s\n", err);
		exit(exit_usage);
	}
	return rk;
}

/* librdkafka's own log lines go to stderr, tagged, so test logs show reconnects. */
static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	fprintf(stderr, "rdkafka %d %s: %s\n", level, fac, buf);
}

/* Wait until metadata shows the topic with exactly P partitions. */
static int topic_wait(rd_kafka_t *rk, const struct opts *o)
{
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
	int64_t deadline = now_ms() + metadata_wait_ms;
	int have = -1;
	while (now_ms() < deadline) {
		const struct rd_kafka_metadata *md = NULL;
		if (rd_kafka_metadata(rk, 0, rkt, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
			if (md->topic_cnt == 1 && md->topics[0].err == 0)
				have = md->topics[0].partition_cnt;
			rd_kafka_metadata_destroy(md);
			if (have == o->partitions)
				break;
		}
		usleep(100 * 1000);
	}
	rd_kafka_topic_destroy(rkt);
	if (have != o->partitions) {
		fprintf(stderr, "rdk_load: metadata for %s shows %d partitions, want %d\n", o->topic,
			have, o->partitions);
		return -EIO;
	}
	return 0;
}

/* CreateTopics(P, RF 1) unless the topic exists, then wait until metadata shows P partitions. */
static int topic_ensure(rd_kafka_t *rk, const struct opts *o)
{
	if (o->no_create)
		return topic_wait(rk, o);
	char err[256];
	rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(o->topic, o->partitions, 1, err,
							sizeof(err));
	if (!nt) {
		fprintf(stderr, "rdk_load: NewTopic: %s\n", err);
		return -EINVAL;
	}
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
	rd_kafka_AdminOptions_set_operation_timeout(ao, admin_timeout_ms, err, sizeof(err));
	rd_kafka_AdminOptions_set_request_timeout(ao, admin_timeout_ms, err, sizeof(err));
	rd_kafka_CreateTopics(rk, &nt, 1, ao, q);
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, admin_timeout_ms + 5000);
	int rc = 0;
	if (!ev) {
		fprintf(stderr, "rdk_load: CreateTopics: no result\n");
		rc = -ETIMEDOUT;
	} else if (rd_kafka_event_error(ev)) {
		fprintf(stderr, "rdk_load: CreateTopics: %s\n", rd_kafka_event_error_string(ev));
		rc = -EIO;
	} else {
		size_t n = 0;
		const rd_kafka_topic_result_t **tr =
			rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
		for (size_t k = 0; k < n; k++) {
			rd_kafka_resp_err_t e = rd_kafka_topic_result_error(tr[k]);
			if (e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
				fprintf(stderr, "rdk_load: topic %s exists\n", o->topic);
			else if (e) {
				fprintf(stderr, "rdk_load: CreateTopics %s: %s (%s)\n", o->topic,
					rd_kafka_err2name(e), rd_kafka_topic_result_error_string(tr[k]));
				rc = -EIO;
			}
		}
		if (n != 1) {
			fprintf(stderr, "rdk_load: CreateTopics: %zu results, want 1\n", n);
			rc = -EIO;
		}
	}
	if (ev)
		rd_kafka_event_destroy(ev);
	rd_kafka_AdminOptions_destroy(ao);
	rd_kafka_queue_destroy(q);
	rd_kafka_NewTopic_destroy(nt);
	return rc ? rc : topic_wait(rk, o);
}

static void acked_flush(struct produce_state *st, bool force)
{
	int64_t t = now_ms();
	if (st->acked && (force || t - st->last_flush_ms >= acked_flush_ms)) {
		fflush(st->acked);
		st->last_flush_ms = t;
	}
}

/* Delivery report: one per message, on the main thread from rd_kafka_poll/flush. */
static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct produce_state *st = opaque;
	uint64_t i = (uint64_t)(uintptr_t)m->_private;
	if (m->err) {
		if (st->failed_n++ < errors_printed_max)
			fprintf(stderr, "rdk_load: delivery of %" PRIu64 " failed: %s\n", i,
				rd_kafka_err2str(m->err));
		return;
	}
	st->acked_n++;
	if (st->acked)
		fprintf(st->acked, "%" PRId32 " %" PRId64 " %" PRIu64 "\n", m->partition, m->offset, i);
}

static int cmd_produce(const struct opts *o)
{
	if (o->count < 0)
		usage();
	struct produce_state st = { .last_flush_ms = now_ms() };
	if (o->acked_file) {
		st.acked = fopen(o->acked_file, "w");
		if (!st.acked) {
			perror(o->acked_file);
			return exit_usage;
		}
	}
	char tmo[32];
	snprintf(tmo, sizeof(tmo), "%d", o->msg_timeout_ms);
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	conf_set(conf, "bootstrap.servers", o->bootstrap);
	conf_set(conf, "client.id", "rdk_load");
	conf_set(conf, "acks", o->acks);
	if (o->compression)
		conf_set(conf, "compression.codec", o->compression);
	conf_set(conf, "linger.ms", "5");
	conf_set(conf, "batch.num.messages", "10000");
	conf_set(conf, "queue.buffering.max.messages", "200000");
	conf_set(conf, "message.timeout.ms", tmo);
	conf_set(conf, "reconnect.backoff.max.ms", "1000");
	conf_set(conf, "enable.idempotence", o->idempotent ? "true" : "false");
	if (o->batch_messages) {
		char bm[32];
		snprintf(bm, sizeof(bm), "%d", o->batch_messages);
		conf_set(conf, "batch.num.messages", bm);
	}
	if (o->req_timeout_ms) {
		char rt[32];
		snprintf(rt, sizeof(rt), "%d", o->req_timeout_ms);
		/* socket.timeout.ms is librdkafka's own wait for a response; the other is the broker's. */
		conf_set(conf, "request.timeout.ms", rt);
		conf_set(conf, "socket.timeout.ms", rt);
	}
	rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
	rd_kafka_conf_set_log_cb(conf, log_cb);
	rd_kafka_conf_set_opaque(conf, &st);
	rd_kafka_t *rk = client_new(RD_KAFKA_PRODUCER, conf);

	if (topic_ensure(rk, o)) {
		rd_kafka_destroy(rk);
		return exit_fail;
	}
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
	uint8_t *val = malloc(o->size);
	if (!val)
		return exit_usage;
	int64_t t0 = now_ms(), last_report = t0;
	for (int64_t i = 0; i < o->count; i++) {
		char key[key_bytes_max];
		int kn = snprintf(key, sizeof(key), "k%" PRId64, i);
		value_fill(val, o->size, (uint64_t)i);
		while (rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, val, o->size,
					key, (size_t)kn, (void *)(uintptr_t)i) == -1) {
			rd_kafka_resp_err_t e = rd_kafka_last_error();
			if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
				fprintf(stderr, "rdk_load: produce %" PRId64 ": %s\n", i,
					rd_kafka_err2str(e));
				return exit_fail;
			}
			rd_kafka_poll(rk, 10);
			acked_flush(&st, false);
		}
		if ((i & 1023) == 0) {
			rd_kafka_poll(rk, 0);
			acked_flush(&st, false);
		}
		if (now_ms() - last_report >= report_every_ms) {
			last_report = now_ms();
			fprintf(stderr, "rdk_load: queued %" PRId64 " acked %" PRId64 " failed %" PRId64 "\n",
				i + 1, st.acked_n, st.failed_n);
		}
	}
	/* The flush loop is bounded by message.timeout.ms: every message is then either acked or failed. */
	while (rd_kafka_outq_len(rk) > 0) {
		rd_kafka_flush(rk, flush_step_ms);
		acked_flush(&st, true);
		if (now_ms() - last_report >= report_every_ms) {
			last_report = now_ms();
			fprintf(stderr, "rdk_load: waiting for %d in flight, acked %" PRId64 " failed %" PRId64 "\n",
				rd_kafka_outq_len(rk), st.acked_n, st.failed_n);
		}
	}
	acked_flush(&st, true);
	double secs = (double)(now_ms() - t0) / 1000.0;
	free(val);
	rd_kafka_topic_destroy(rkt);
	rd_kafka_destroy(rk);
	if (st.acked && fclose(st.acked) != 0) {
		perror(o->acked_file);
		return exit_fail;
	}
	printf("produce: topic %s count %" PRId64 " acked %" PRId64 " failed %" PRId64
	       " in %.2f s (%.0f msg/s)\n", o->topic, o->count, st.acked_n, st.failed_n, secs,
	       secs > 0 ? (double)st.acked_n / secs : 0.0);
	if (st.acked_n + st.failed_n != o->count) {
		fprintf(stderr, "rdk_load: %" PRId64 " delivery reports for %" PRId64 " messages\n",
			st.acked_n + st.failed_n, o->count);
		return exit_fail;
	}
	return st.failed_n && !o->allow_failures ? exit_fail : exit_ok;
}

/* What the consumer saw in one partition. Locality: main thread. */
struct part_seen {
	int64_t hw;             /* high watermark queried before consuming */
	int64_t next;           /* offset after the last message read, -1 before any */
	int64_t *i_at;          /* [hw]: i read at that offset, -1 if none */
	int64_t last_i;         /* for the per-partition order check */
	int64_t n;
	bool done;
};

/* Consumer verdicts. Locality: main thread. */
struct consume_state {
	struct part_seen part[partitions_max];
	uint32_t *seen;         /* [seen_cap]: times each i was read */
	uint64_t seen_cap;
	int64_t total, bad_value, bad_order, bad_offset, beyond_hw, errors;
};

#define fail_log(counter, ...) \
	do { if ((counter)++ < errors_printed_max) fprintf(stderr, "rdk_load: " __VA_ARGS__); } while (0)

static int seen_add(struct consume_state *cs, uint64_t i)
{
	if (i >= cs->seen_cap) {
		if (i > INT32_MAX)
			return -ERANGE;
		uint64_t cap = cs->seen_cap ? cs->seen_cap : 1024;
		while (cap <= i)
			cap *= 2;
		uint32_t *p = realloc(cs->seen, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + cs->seen_cap, 0, (cap - cs->seen_cap) * sizeof(*p));
		cs->seen = p;
		cs->seen_cap = cap;
	}
	cs->seen[i]++;
	return 0;
}

static void consume_one(struct consume_state *cs, const struct opts *o, const rd_kafka_message_t *m)
{
	if (m->partition < 0 || m->partition >= o->partitions) {
		fail_log(cs->bad_offset, "message from unexpected partition %d\n", m->partition);
		return;
	}
	struct part_seen *ps = &cs->part[m->partition];
	cs->total++;
	ps->n++;
	if (m->offset <= ps->next - 1 || m->offset < 0)
		fail_log(cs->bad_offset, "partition %d: offset %" PRId64 " after %" PRId64 "\n",
			 m->partition, m->offset, ps->next - 1);
	ps->next = m->offset + 1;
	if (ps->next >= ps->hw)
		ps->done = true;
	uint64_t i;
	if (!value_check(m->payload, m->len, m->key, m->key_len, &i)) {
		fail_log(cs->bad_value, "partition %d offset %" PRId64 ": bad value (len %zu)\n",
			 m->partition, m->offset, m->len);
		return;
	}
	if (seen_add(cs, i))
		fail_log(cs->bad_value, "i %" PRIu64 " out of range\n", i);
	if (m->offset < ps->hw)
		ps->i_at[m->offset] = (int64_t)i;
	else
		cs->beyond_hw++;   /* only possible if someone produced after we looked */
	if (o->expect >= 0 && (int64_t)i <= ps->last_i)
		fail_log(cs->bad_order, "partition %d offset %" PRId64 ": i %" PRIu64 " after %" PRId64 "\n",
			 m->partition, m->offset, i, ps->last_i);
	if ((int64_t)i > ps->last_i)
		ps->last_i = (int64_t)i;
}

/* Every line "partition offset i" of the acked file must have been read at exactly that offset. */
static int64_t acked_verify(const struct consume_state *cs, const struct opts *o, int64_t *lines)
{
	FILE *f = fopen(o->acked_file, "r");
	if (!f) {
		perror(o->acked_file);
		return -1;
	}
	int64_t missing = 0, off, i;
	int32_t p;
	int rc;
	*lines = 0;
	while ((rc = fscanf(f, "%" SCNd32 " %" SCNd64 " %" SCNd64, &p, &off, &i)) == 3) {
		(*lines)++;
		bool ok = p >= 0 && p < o->partitions && off >= 0 && off < cs->part[p].hw &&
			  cs->part[p].i_at[off] == i;
		if (!ok && missing++ < errors_printed_max)
			fprintf(stderr, "rdk_load: acked i %" PRId64 " at partition %d offset %" PRId64
				" not found (read there: %" PRId64 ")\n", i, p, off,
				p >= 0 && p < o->partitions && off >= 0 && off < cs->part[p].hw ?
				cs->part[p].i_at[off] : -2);
	}
	/* A half-written last line is possible only if rdk_load produce itself died. */
	if (rc != EOF)
		fprintf(stderr, "rdk_load: acked file: unparsable line after %" PRId64 " lines\n", *lines);
	fclose(f);
	return missing;
}

static int cmd_consume(const struct opts *o)
{
	static struct consume_state cs;   /* large; zeroed */
	char gid[64];
	snprintf(gid, sizeof(gid), "rdk-load-%d-%ld", (int)getpid(), (long)time(NULL));
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	conf_set(conf, "bootstrap.servers", o->bootstrap);
	conf_set(conf, "client.id", "rdk_load");
	conf_set(conf, "group.id", gid);
	conf_set(conf, "enable.auto.commit", "false");
	conf_set(conf, "enable.auto.offset.store", "false");
	conf_set(conf, "enable.partition.eof", "true");
	conf_set(conf, "auto.offset.reset", "error");  /* BEGINNING is explicit; a reset is a bug */
	conf_set(conf, "check.crcs", "true");
	conf_set(conf, "fetch.wait.max.ms", "100");
	conf_set(conf, "reconnect.backoff.max.ms", "1000");
	for (int k = 0; k < o->nconf; k++) {
		char kv[256];
		snprintf(kv, sizeof(kv), "%s", o->conf[k]);
		char *eq = strchr(kv, '=');
		*eq = 0;
		conf_set(conf, kv, eq + 1);
	}
	rd_kafka_conf_set_log_cb(conf, log_cb);
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER, conf);
	rd_kafka_poll_set_consumer(rk);

	int64_t t0 = now_ms(), total_hw = 0;
	for (int32_t p = 0; p < o->partitions; p++) {
		int64_t lo = -1, hi = -1;
		rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, o->topic, p, &lo, &hi,
									 watermark_timeout_ms);
		if (e) {
			fprintf(stderr, "rdk_load: watermarks of %s/%d: %s\n", o->topic, p,
				rd_kafka_err2str(e));
			rd_kafka_destroy(rk);
			return exit_fail;
		}
		struct part_seen *ps = &cs.part[p];
		*ps = (struct part_seen){ .hw = hi, .next = -1, .last_i = -1, .done = hi <= lo };
		ps->i_at = malloc((size_t)(hi > 0 ? hi : 1) * sizeof(int64_t));
		if (!ps->i_at)
			return exit_usage;
		memset(ps->i_at, 0xff, (size_t)(hi > 0 ? hi : 1) * sizeof(int64_t));
		total_hw += hi - lo;
		fprintf(stderr, "rdk_load: %s/%d low %" PRId64 " high %" PRId64 "\n", o->topic, p, lo, hi);
	}

	rd_kafka_topic_partition_list_t *tpl = rd_kafka_topic_partition_list_new(o->partitions);
	for (int32_t p = 0; p < o->partitions; p++)
		rd_kafka_topic_partition_list_add(tpl, o->topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
	rd_kafka_resp_err_t e = rd_kafka_assign(rk, tpl);
	rd_kafka_topic_partition_list_destroy(tpl);
	if (e) {
		fprintf(stderr, "rdk_load: assign: %s\n", rd_kafka_err2str(e));
		rd_kafka_destroy(rk);
		return exit_fail;
	}

	int64_t deadline = t0 + (int64_t)o->timeout_s * 1000, last_report = t0;
	int32_t done = 0;
	while (done < o->partitions && now_ms() < deadline) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
		if (m) {
			if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
				if (m->partition >= 0 && m->partition < o->partitions &&
				    m->offset >= cs.part[m->partition].hw)
					cs.part[m->partition].done = true;
			} else if (m->err) {
				/* Transient client errors (reconnects) are not verdicts; data checks are. */
				fail_log(cs.errors, "consume error on %d: %s\n", m->partition,
					 rd_kafka_message_errstr(m));
			} else {
				consume_one(&cs, o, m);
			}
			rd_kafka_message_destroy(m);
		}
		done = 0;
		for (int32_t p = 0; p < o->partitions; p++)
			done += cs.part[p].done;
		if (now_ms() - last_report >= report_every_ms) {
			last_report = now_ms();
			fprintf(stderr, "rdk_load: read %" PRId64 " of %" PRId64 ", %d/%d partitions done\n",
				cs.total, total_hw, done, o->partitions);
		}
	}
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	double secs = (double)(now_ms() - t0) / 1000.0;

	bool ok = true;
	if (done < o->partitions) {
		ok = false;
		for (int32_t p = 0; p < o->partitions; p++)
			if (!cs.part[p].done)
				fprintf(stderr, "rdk_load: TIMEOUT: partition %d read to %" PRId64 " of high watermark %" PRId64 "\n",
					p, cs.part[p].next, cs.part[p].hw);
	}
	int64_t distinct = 0, dups = 0, missing = 0;
	for (uint64_t i = 0; i < cs.seen_cap; i++) {
		distinct += cs.seen[i] > 0;
		dups += cs.seen[i] > 1 ? cs.seen[i] - 1 : 0;
	}
	if (cs.bad_value || cs.bad_offset || cs.beyond_hw)
		ok = false;
	if (o->expect >= 0) {
		for (int64_t i = 0; i < o->expect; i++)
			if ((uint64_t)i >= cs.seen_cap || cs.seen[i] == 0)
				fail_log(missing, "expected i %" PRId64 " never read\n", i);
		int64_t extra = distinct - (o->expect - missing);
		if (missing || dups || extra || cs.bad_order) {
			fprintf(stderr, "rdk_load: FAIL expect %" PRId64 ": missing %" PRId64 " duplicates %"
				PRId64 " unexpected %" PRId64 " out-of-order %" PRId64 "\n", o->expect,
				missing, dups, extra, cs.bad_order);
			ok = false;
		}
	}
	int64_t acked_lines = 0, acked_missing = 0;
	if (o->acked_file) {
		acked_missing = acked_verify(&cs, o, &acked_lines);
		if (acked_missing)
			ok = false;
	}
	printf("consume: topic %s read %" PRId64 " (high watermarks sum %" PRId64 ") distinct %" PRId64
	       " duplicates %" PRId64 " bad-values %" PRId64 " bad-offsets %" PRId64
	       " acked-checked %" PRId64 " acked-missing %" PRId64 " client-errors %" PRId64
	       " in %.2f s: %s\n", o->topic, cs.total, total_hw, distinct, dups, cs.bad_value,
	       cs.bad_offset, acked_lines, acked_missing, cs.errors, secs, ok ? "OK" : "FAIL");
	for (int32_t p = 0; p < o->partitions; p++)
		free(cs.part[p].i_at);
	free(cs.seen);
	return ok ? exit_ok : exit_fail;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	signal(SIGPIPE, SIG_IGN);
	struct opts o;
	parse_opts(argc, argv, &o);
	if (!strcmp(argv[1], "produce"))
		return cmd_produce(&o);
	if (!strcmp(argv[1], "consume"))
		return cmd_consume(&o);
	usage();
}
