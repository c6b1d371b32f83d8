/*
 * rdk_txoffs.c - librdkafka consume-transform-produce with transactional
 * offsets (rd_kafka_send_offsets_to_transaction, i.e. AddOffsetsToTxn and
 * TxnOffsetCommit) for txn_offsets.sh.
 *
 * Locality: a single-threaded test program (librdkafka runs its own threads).
 *
 *   rdk_txoffs run --bootstrap B --in T --out O --group G --txn-id ID --per N
 *                  --plan commit|abort|open|zombie[,...]
 *       A group consumer (no auto commit) on T and a transactional producer:
 *       each step of --plan reads N records, copies them to O inside a
 *       transaction, sends the consumer's positions to the transaction, and
 *       commits or aborts it (after an abort the consumer seeks back to the
 *       committed offsets, as an application must). "open" (last only) leaves
 *       the transaction open, prints OPEN and waits to be killed. "zombie" sends
 *       the offsets as a member of another generation would (KIP-447: the
 *       group metadata of generation 424242 with this consumer's member id):
 *       the broker must refuse them; prints "refused ERROR_NAME", aborts
 *       and seeks back. Prints "step I PLAN OFFSET" with the position sent
 *       (partition 0).
 *   rdk_txoffs committed --bootstrap B --in T --group G
 *       Prints "committed OFFSET": the group's committed offset of T/0
 *       (OffsetFetch with RequireStable: waits out staged offsets).
 *
 * Exit status: 0 OK, 1 client error or timeout, 2 usage.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#define TXO_STEPS_MAX 64
#define TXO_WAIT_MS   30000        /* every client call and every step's reads */

struct opts {
	const char *mode, *bootstrap, *in, *out, *group, *txn_id, *plan;
	int per;
};

static void usage(void)
{
	fprintf(stderr, "usage: rdk_txoffs run|committed --bootstrap B --in T [--out O] --group G "
	                "[--txn-id ID --per N --plan commit|abort|open,...]\n");
	exit(2);
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char err[256];
	if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "conf %s=%s: %s\n", k, v, err);
		exit(2);
	}
}

static rd_kafka_t *client(rd_kafka_type_t type, const struct opts *o)
{
	char err[256];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	conf_set(conf, "bootstrap.servers", o->bootstrap);
	if (type == RD_KAFKA_CONSUMER) {
		conf_set(conf, "group.id", o->group);
		conf_set(conf, "enable.auto.commit", "false");
		conf_set(conf, "auto.offset.reset", "earliest");
		conf_set(conf, "isolation.level", "read_committed");
		/* A killed instance holds its partitions until its session ends (the broker keeps
		 * the group's members across its own restarts): keep that short. */
		conf_set(conf, "session.timeout.ms", "6000");
		conf_set(conf, "heartbeat.interval.ms", "500");
	} else {
		conf_set(conf, "transactional.id", o->txn_id);
		conf_set(conf, "transaction.timeout.ms", "60000");
	}
	rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "rd_kafka_new: %s\n", err);
		exit(1);
	}
	if (type == RD_KAFKA_CONSUMER)
		rd_kafka_poll_set_consumer(rk);
	return rk;
}

static void check(const char *what, rd_kafka_error_t *e)
{
	if (!e)
		return;
	fprintf(stderr, "%s: %s\n", what, rd_kafka_error_string(e));
	exit(1);
}

/* The group's committed offset of in/0 into parts (a one-entry list). */
static int64_t committed(rd_kafka_t *c, rd_kafka_topic_partition_list_t *parts)
{
	rd_kafka_resp_err_t e = rd_kafka_committed(c, parts, TXO_WAIT_MS);
	if (e || parts->elems[0].err) {
		fprintf(stderr, "committed: %s\n", rd_kafka_err2str(e ? e : parts->elems[0].err));
		exit(1);
	}
	return parts->elems[0].offset;
}

static int cmd_committed(const struct opts *o)
{
	rd_kafka_t *c = client(RD_KAFKA_CONSUMER, o);
	rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(parts, o->in, 0);
	printf("committed %lld\n", (long long)committed(c, parts));
	rd_kafka_topic_partition_list_destroy(parts);
	rd_kafka_consumer_close(c);
	rd_kafka_destroy(c);
	return 0;
}

static int cmd_run(const struct opts *o)
{
	char *plan = strdup(o->plan), *save = NULL;
	rd_kafka_t *c = client(RD_KAFKA_CONSUMER, o), *p = client(RD_KAFKA_PRODUCER, o);
	rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(sub, o->in, RD_KAFKA_PARTITION_UA);
	if (rd_kafka_subscribe(c, sub)) {
		fprintf(stderr, "subscribe failed\n");
		return 1;
	}
	check("init_transactions", rd_kafka_init_transactions(p, TXO_WAIT_MS));
	int step = 0;
	for (char *s = strtok_r(plan, ",", &save); s; s = strtok_r(NULL, ",", &save), step++) {
		check("begin_transaction", rd_kafka_begin_transaction(p));
		int got = 0;
		time_t until = time(NULL) + TXO_WAIT_MS / 1000;
		while (got < o->per) {
			if (time(NULL) > until) {
				fprintf(stderr, "step %d: only %d of %d records\n", step, got, o->per);
				return 1;
			}
			rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 100);
			if (!m)
				continue;
			if (!m->err) {
				rd_kafka_resp_err_t e = rd_kafka_producev(p, RD_KAFKA_V_TOPIC(o->out),
					RD_KAFKA_V_VALUE(m->payload, m->len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
					RD_KAFKA_V_END);
				if (e) {
					fprintf(stderr, "produce: %s\n", rd_kafka_err2str(e));
					return 1;
				}
				got++;
			}
			rd_kafka_message_destroy(m);
		}
		rd_kafka_topic_partition_list_t *pos;
		if (rd_kafka_assignment(c, &pos) || rd_kafka_position(c, pos)) {
			fprintf(stderr, "assignment/position failed\n");
			return 1;
		}
		bool zombie = !strcmp(s, "zombie");
		rd_kafka_consumer_group_metadata_t *meta;
		if (zombie) {
			char *member = rd_kafka_memberid(c);
			meta = rd_kafka_consumer_group_metadata_new_with_genid(o->group, 424242, member ? member : "", NULL);
			rd_kafka_mem_free(c, member);
		} else {
			meta = rd_kafka_consumer_group_metadata(c);
		}
		rd_kafka_error_t *se = rd_kafka_send_offsets_to_transaction(p, pos, meta, TXO_WAIT_MS);
		rd_kafka_consumer_group_metadata_destroy(meta);
		if (zombie) {
			if (!se) {
				fprintf(stderr, "step %d: offsets of another generation were accepted\n", step);
				return 1;
			}
			printf("refused %s\n", rd_kafka_error_name(se));
			rd_kafka_error_destroy(se);
		} else {
			check("send_offsets_to_transaction", se);
		}
		long long at = -1;
		for (int i = 0; i < pos->cnt; i++)
			if (pos->elems[i].partition == 0)
				at = (long long)pos->elems[i].offset;
		printf("step %d %s %lld\n", step, s, at);
		fflush(stdout);
		if (!strcmp(s, "open")) {
			printf("OPEN\n");
			fflush(stdout);
			for (;;)
				pause();
		}
		if (!strcmp(s, "commit")) {
			check("commit_transaction", rd_kafka_commit_transaction(p, TXO_WAIT_MS));
		} else {
			check("abort_transaction", rd_kafka_abort_transaction(p, TXO_WAIT_MS));
			/* Back to what the group committed: the aborted records are read again. */
			rd_kafka_committed(c, pos, TXO_WAIT_MS);
			for (int i = 0; i < pos->cnt; i++)
				if (pos->elems[i].offset < 0)
					pos->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
			rd_kafka_error_t *e = rd_kafka_seek_partitions(c, pos, TXO_WAIT_MS);
			if (e)
				check("seek", e);
		}
		rd_kafka_topic_partition_list_destroy(pos);
	}
	rd_kafka_topic_partition_list_destroy(sub);
	free(plan);
	rd_kafka_consumer_close(c);
	rd_kafka_destroy(c);
	rd_kafka_flush(p, TXO_WAIT_MS);
	rd_kafka_destroy(p);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .per = 10 };
	if (argc < 2)
		usage();
	o.mode = argv[1];
	for (int i = 2; i + 1 < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];
		if (!strcmp(a, "--bootstrap")) o.bootstrap = v;
		else if (!strcmp(a, "--in")) o.in = v;
		else if (!strcmp(a, "--out")) o.out = v;
		else if (!strcmp(a, "--group")) o.group = v;
		else if (!strcmp(a, "--txn-id")) o.txn_id = v;
		else if (!strcmp(a, "--plan")) o.plan = v;
		else if (!strcmp(a, "--per")) o.per = atoi(v);
		else usage();
	}
	if (!o.bootstrap || !o.in || !o.group)
		usage();
	if (!strcmp(o.mode, "committed"))
		return cmd_committed(&o);
	if (!strcmp(o.mode, "run") && o.out && o.txn_id && o.plan && o.per > 0)
		return cmd_run(&o);
	usage();
}
