/*
 * rdk_group.c - a librdkafka group consumer for the group-coordinator tests
 * (group_*.sh).
 *
 *   rdk_group watermarks --bootstrap B --topic T --partitions P
 *       prints "PARTITION HIGH_WATERMARK" per partition.
 *   rdk_group commit --bootstrap B --topic T --group G --partitions P --offset O
 *       commits offset O for partitions 0..P-1 of T in group G without
 *       joining it (a "simple" commit, as assign() users make: generation -1).
 *   rdk_group consume --bootstrap B --topic T --group G --partitions P --out FILE
 *       [--peer FILE] [--until N] [--stop-shared N] [--delay-ms D]
 *       [--auto-commit] [--timeout S] [--session-ms MS] [--until-min N --idle-ms MS]
 *       [--instance-id ID]
 *       subscribe()s to T in group G. Each message is committed synchronously
 *       (rd_kafka_commit_message) and only then written to FILE as
 *       "PARTITION OFFSET": a line means "processed and committed", so across
 *       the consumers of a group every offset must appear exactly once.
 *       With --auto-commit the offset is stored and auto-committed every
 *       100 ms instead, and every message is written (at-least-once).
 *       Stops (closing the consumer: LeaveGroup) when own lines + the lines
 *       of --peer reach --until, or, with --stop-shared N, after N messages
 *       processed while sharing the topic (assigned fewer than P partitions)
 *       once the peer has written something, or with --idle-ms once the
 *       lines reach --until-min and nothing came for that long.
 *       --instance-id makes it a static member (group.instance.id, KIP-345):
 *       librdkafka then sends no LeaveGroup when it closes.
 *   rdk_group commit-many --bootstrap B --topic T --group PREFIX --partitions P --groups N
 *       --offset O [--offset-step S]
 *       as commit, for the N groups PREFIX0..PREFIX(N-1): group i commits O + i*S
 *       (one commit each, in turn: one batch each in __consumer_offsets).
 *   rdk_group committed --bootstrap B --topic T --group PREFIX --partitions P --groups N
 *       prints "GROUP PARTITION OFFSET" (-1: none) for each of those groups.
 *   rdk_group read --bootstrap B --topic T --partitions P --partition Q --offset O --until-offset E
 *       [--timeout S]
 *       assign()s partition Q at offset O (no group, check.crcs on) and reads until
 *       it has the record at E-1, or until the first error the client reports;
 *       prints "read COUNT FIRST LAST" (-1 -1 if none) and, on an error,
 *       "error FETCH_OFFSET CODE NAME". Exit 0 at E, 3 on an error, 1 on timeout.
 *
 * Exit status: 0 = stopped as asked, 1 = timeout or client error, 2 = usage.
 * Locality: test process, one thread (plus librdkafka's).
 */
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

enum { exit_ok = 0, exit_fail = 1, exit_usage = 2 };

struct opts {
	const char *mode, *bootstrap, *topic, *group, *out, *peer, *instance_id;
	int partitions, delay_ms, timeout_s, session_ms;
	int64_t offset;               /* commit modes; read: the start */
	int64_t offset_step, until_offset;
	int groups, partition;
	long until, until_min, stop_shared;
	int idle_ms;
	bool auto_commit;
};

static int assigned;   /* partitions in the current assignment */

static void usage(void)
{
	fprintf(stderr, "usage: rdk_group watermarks|consume|commit --bootstrap B --topic T --partitions P "
	                "[--group G --out FILE --peer FILE --until N --stop-shared N --delay-ms D "
	                "--auto-commit --timeout S --session-ms MS --instance-id ID --offset O --offset-step S "
	                "--groups N --partition Q --until-offset E]\n");
	exit(exit_usage);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long lines_of(const char *path)
{
	if (!path)
		return 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	long n = 0;
	int ch;
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

static void set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char err[256];
	if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "config %s=%s: %s\n", k, v, err);
		exit(exit_usage);
	}
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
                         void *opaque)
{
	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		assigned = parts->cnt;
		fprintf(stderr, "assigned %d partitions:", parts->cnt);
		for (int i = 0; i < parts->cnt; i++)
			fprintf(stderr, " %d", parts->elems[i].partition);
		fprintf(stderr, "\n");
		rd_kafka_assign(rk, parts);
	} else {
		fprintf(stderr, "revoked %d partitions (%s)\n", parts->cnt, rd_kafka_err2str(err));
		assigned = 0;
		rd_kafka_assign(rk, NULL);
	}
}

static int watermarks(const struct opts *o)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char err[256];
	set(conf, "bootstrap.servers", o->bootstrap);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "rd_kafka_new: %s\n", err);
		return exit_fail;
	}
	for (int p = 0; p < o->partitions; p++) {
		int64_t lo, hi;
		rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, o->topic, p, &lo, &hi, 10000);
		if (e) {
			fprintf(stderr, "watermarks of %s/%d: %s\n", o->topic, p, rd_kafka_err2str(e));
			rd_kafka_destroy(rk);
			return exit_fail;
		}
		printf("%d %lld\n", p, (long long)hi);
	}
	rd_kafka_destroy(rk);
	return exit_ok;
}

static int simple_commit(const struct opts *o)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char err[256];
	set(conf, "bootstrap.servers", o->bootstrap);
	set(conf, "group.id", o->group);
	set(conf, "enable.auto.commit", "false");
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "rd_kafka_new: %s\n", err);
		return exit_fail;
	}
	rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(o->partitions);
	for (int p = 0; p < o->partitions; p++)
		rd_kafka_topic_partition_list_add(parts, o->topic, p)->offset = o->offset;
	rd_kafka_resp_err_t e = rd_kafka_commit(rk, parts, 0);   /* synchronous, no subscription: simple */
	for (int p = 0; !e && p < parts->cnt; p++)
		e = parts->elems[p].err;
	if (e)
		fprintf(stderr, "commit: %s\n", rd_kafka_err2str(e));
	rd_kafka_topic_partition_list_destroy(parts);
	rd_kafka_destroy(rk);
	return e ? exit_fail : exit_ok;
}

/* A consumer handle of group g, no subscription. */
static rd_kafka_t *group_handle(const struct opts *o, const char *g)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char err[256];
	set(conf, "bootstrap.servers", o->bootstrap);
	set(conf, "group.id", g);
	set(conf, "enable.auto.commit", "false");
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!rk)
		fprintf(stderr, "rd_kafka_new: %s\n", err);
	return rk;
}

static int commit_many(const struct opts *o)
{
	for (int i = 0; i < o->groups; i++) {
		char g[128];
		snprintf(g, sizeof(g), "%s%d", o->group, i);
		rd_kafka_t *rk = group_handle(o, g);
		if (!rk)
			return exit_fail;
		rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(o->partitions);
		for (int p = 0; p < o->partitions; p++)
			rd_kafka_topic_partition_list_add(parts, o->topic, p)->offset = o->offset + i * o->offset_step;
		rd_kafka_resp_err_t e = rd_kafka_commit(rk, parts, 0);
		for (int p = 0; !e && p < parts->cnt; p++)
			e = parts->elems[p].err;
		rd_kafka_topic_partition_list_destroy(parts);
		rd_kafka_destroy(rk);
		if (e) {
			fprintf(stderr, "commit of %s: %s\n", g, rd_kafka_err2str(e));
			return exit_fail;
		}
	}
	return exit_ok;
}

static int committed(const struct opts *o)
{
	for (int i = 0; i < o->groups; i++) {
		char g[128];
		snprintf(g, sizeof(g), "%s%d", o->group, i);
		rd_kafka_t *rk = group_handle(o, g);
		if (!rk)
			return exit_fail;
		rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(o->partitions);
		for (int p = 0; p < o->partitions; p++)
			rd_kafka_topic_partition_list_add(parts, o->topic, p);
		rd_kafka_resp_err_t e = rd_kafka_committed(rk, parts, 15000);
		for (int p = 0; !e && p < parts->cnt; p++) {
			e = parts->elems[p].err;
			printf("%s %d %lld\n", g, parts->elems[p].partition,
			       parts->elems[p].offset < 0 ? -1LL : (long long)parts->elems[p].offset);
		}
		rd_kafka_topic_partition_list_destroy(parts);
		rd_kafka_destroy(rk);
		if (e) {
			fprintf(stderr, "committed of %s: %s\n", g, rd_kafka_err2str(e));
			return exit_fail;
		}
	}
	return exit_ok;
}

static int read_partition(const struct opts *o)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char err[256];
	set(conf, "bootstrap.servers", o->bootstrap);
	set(conf, "group.id", "rdk_group-read");   /* required by the API, never joined (assign) */
	set(conf, "enable.auto.commit", "false");
	set(conf, "check.crcs", "true");
	set(conf, "fetch.wait.max.ms", "100");
	set(conf, "fetch.error.backoff.ms", "100");
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "rd_kafka_new: %s\n", err);
		return exit_fail;
	}
	rd_kafka_poll_set_consumer(rk);
	rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(parts, o->topic, o->partition)->offset = o->offset;
	rd_kafka_assign(rk, parts);
	rd_kafka_topic_partition_list_destroy(parts);
	long n = 0;
	int64_t first = -1, last = -1, deadline = now_ms() + (int64_t)o->timeout_s * 1000;
	int rc = exit_fail;
	while (now_ms() < deadline && rc == exit_fail) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
		if (!m)
			continue;
		if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
			rd_kafka_message_destroy(m);
			continue;
		}
		if (m->err) {
			printf("read %ld %lld %lld\n", n, (long long)first, (long long)last);
			printf("error %lld %d %s\n", (long long)m->offset, (int)m->err, rd_kafka_err2name(m->err));
			fprintf(stderr, "consume error: %s\n", rd_kafka_message_errstr(m));
			rd_kafka_message_destroy(m);
			rc = 3;
			break;
		}
		if (m->offset != (last < 0 ? m->offset : last + 1) || (last < 0 && m->offset < o->offset))
			fprintf(stderr, "offset %lld after %lld (gap)\n", (long long)m->offset, (long long)last);
		if (first < 0)
			first = m->offset;
		last = m->offset;
		n++;
		if (m->offset >= o->until_offset - 1) {
			printf("read %ld %lld %lld\n", n, (long long)first, (long long)last);
			rc = exit_ok;
		}
		rd_kafka_message_destroy(m);
	}
	if (rc == exit_fail)
		printf("read %ld %lld %lld\ntimeout\n", n, (long long)first, (long long)last);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	return rc;
}

static int consume(const struct opts *o)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char err[256];
	set(conf, "bootstrap.servers", o->bootstrap);
	set(conf, "group.id", o->group);
	set(conf, "auto.offset.reset", "earliest");
	set(conf, "enable.auto.commit", o->auto_commit ? "true" : "false");
	set(conf, "enable.auto.offset.store", "false");
	set(conf, "auto.commit.interval.ms", "100");
	char session[16];
	snprintf(session, sizeof(session), "%d", o->session_ms);
	set(conf, "session.timeout.ms", session);
	set(conf, "heartbeat.interval.ms", "500");
	set(conf, "fetch.wait.max.ms", "100");
	if (o->instance_id)
		set(conf, "group.instance.id", o->instance_id);
	rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "rd_kafka_new: %s\n", err);
		return exit_fail;
	}
	rd_kafka_poll_set_consumer(rk);
	rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(sub, o->topic, RD_KAFKA_PARTITION_UA);
	rd_kafka_resp_err_t e = rd_kafka_subscribe(rk, sub);
	rd_kafka_topic_partition_list_destroy(sub);
	if (e) {
		fprintf(stderr, "subscribe: %s\n", rd_kafka_err2str(e));
		return exit_fail;
	}
	FILE *out = fopen(o->out, "a");
	if (!out) {
		fprintf(stderr, "%s: %s\n", o->out, strerror(errno));
		return exit_fail;
	}
	long own = 0, shared = 0, failed_commits = 0;
	int rc = exit_fail;
	int64_t deadline = now_ms() + (int64_t)o->timeout_s * 1000, last_msg_ms = now_ms();
	while (now_ms() < deadline) {
		long total = o->until > 0 ? own + lines_of(o->peer) : 0;
		if (o->until > 0 && total >= o->until) {
			rc = exit_ok;
			break;
		}
		if (o->idle_ms > 0 && total >= o->until_min && now_ms() - last_msg_ms >= o->idle_ms) {
			rc = exit_ok;
			break;
		}
		if (o->stop_shared > 0 && shared >= o->stop_shared) {
			rc = exit_ok;
			break;
		}
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
		if (!m)
			continue;
		last_msg_ms = now_ms();
		if (m->err) {
			if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
				fprintf(stderr, "consume error: %s\n", rd_kafka_message_errstr(m));
			rd_kafka_message_destroy(m);
			continue;
		}
		if (o->delay_ms)
			usleep((useconds_t)o->delay_ms * 1000);
		if (o->auto_commit) {
			rd_kafka_offset_store(m->rkt, m->partition, m->offset);   /* commits offset + 1 */
		} else if ((e = rd_kafka_commit_message(rk, m, 0))) {
			/* Not committed: it will come again (from the committed offset), maybe elsewhere. */
			fprintf(stderr, "commit of %d/%lld failed: %s\n", m->partition, (long long)m->offset,
			        rd_kafka_err2str(e));
			failed_commits++;
			rd_kafka_message_destroy(m);
			continue;
		}
		fprintf(out, "%d %lld\n", m->partition, (long long)m->offset);
		fflush(out);
		own++;
		if (assigned > 0 && assigned < o->partitions && lines_of(o->peer) > 0)
			shared++;
		rd_kafka_message_destroy(m);
	}
	fclose(out);
	fprintf(stderr, "%s: %ld messages, %ld shared, %ld failed commits; closing\n",
	        rc == exit_ok ? "done" : "TIMEOUT", own, shared, failed_commits);
	printf("consumed %ld\n", own);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o = { .timeout_s = 60, .session_ms = 10000, .offset = -1 };
	if (argc < 2)
		usage();
	o.mode = argv[1];
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--auto-commit")) {
			o.auto_commit = true;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		const char *v = argv[++i];
		if (!strcmp(a, "--bootstrap")) o.bootstrap = v;
		else if (!strcmp(a, "--topic")) o.topic = v;
		else if (!strcmp(a, "--group")) o.group = v;
		else if (!strcmp(a, "--out")) o.out = v;
		else if (!strcmp(a, "--peer")) o.peer = v;
		else if (!strcmp(a, "--partitions")) o.partitions = atoi(v);
		else if (!strcmp(a, "--delay-ms")) o.delay_ms = atoi(v);
		else if (!strcmp(a, "--session-ms")) o.session_ms = atoi(v);
		else if (!strcmp(a, "--timeout")) o.timeout_s = atoi(v);
		else if (!strcmp(a, "--until")) o.until = atol(v);
		else if (!strcmp(a, "--until-min")) o.until_min = atol(v);
		else if (!strcmp(a, "--idle-ms")) o.idle_ms = atoi(v);
		else if (!strcmp(a, "--stop-shared")) o.stop_shared = atol(v);
		else if (!strcmp(a, "--instance-id")) o.instance_id = v;
		else if (!strcmp(a, "--offset")) o.offset = atoll(v);
		else if (!strcmp(a, "--offset-step")) o.offset_step = atoll(v);
		else if (!strcmp(a, "--groups")) o.groups = atoi(v);
		else if (!strcmp(a, "--partition")) o.partition = atoi(v);
		else if (!strcmp(a, "--until-offset")) o.until_offset = atoll(v);
		else usage();
	}
	if (!o.bootstrap || !o.topic || o.partitions <= 0)
		usage();
	if (!strcmp(o.mode, "watermarks"))
		return watermarks(&o);
	if (!strcmp(o.mode, "commit") && o.group && o.offset >= 0)
		return simple_commit(&o);
	if (!strcmp(o.mode, "consume") && o.group && o.out)
		return consume(&o);
	if (!strcmp(o.mode, "commit-many") && o.group && o.groups > 0 && o.offset >= 0)
		return commit_many(&o);
	if (!strcmp(o.mode, "committed") && o.group && o.groups > 0)
		return committed(&o);
	if (!strcmp(o.mode, "read") && o.offset >= 0 && o.until_offset > o.offset)
		return read_partition(&o);
	usage();
}
