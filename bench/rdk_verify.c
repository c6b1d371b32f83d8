/*
 * sluice-rdk-verify: reads a whole topic back with librdkafka and prints the
 * record count and the digest of sb_digest.h, so that a sluice-bench run can
 * be checked by an independent client: what sluice-bench's producer had
 * acknowledged (committed, for transactions) must be exactly what a Kafka
 * client reads.
 *
 *   sluice-rdk-verify --bootstrap HOST:PORT --topic T [--isolation committed|uncommitted]
 *                     [--timeout S]
 *
 * Every partition is assigned from its beginning (no consumer group, no
 * commits) and read until librdkafka reports its end (enable.partition.eof:
 * the high watermark, or the last stable offset with read_committed).
 * Prints: VERIFY topic=T isolation=I partitions=P records=N checksum=<16 hex>
 * Exit status: 0 ok, 1 consume error or timeout, 2 usage.
 * Locality: main thread (librdkafka's own threads never call back into it:
 * everything is served by rd_kafka_consumer_poll here).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "sb_digest.h"

enum {
	rv_partitions_max = 4096,
	rv_metadata_timeout_ms = 10000,
	rv_poll_ms = 100,
	rv_timeout_s_default = 60,
};

static int64_t rv_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void rv_usage(void)
{
	fprintf(stderr, "usage: sluice-rdk-verify --bootstrap HOST:PORT --topic T "
			"[--isolation committed|uncommitted] [--timeout S]\n");
}

static int rv_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char err[256];
	if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "sluice-rdk-verify: %s=%s: %s\n", k, v, err);
		return -EINVAL;
	}
	return 0;
}

/* Partition count of the topic from Metadata, or -1. */
static int rv_partitions(rd_kafka_t *rk, const char *topic)
{
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
	const struct rd_kafka_metadata *md = NULL;
	int n = -1;
	rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, rv_metadata_timeout_ms);
	if (err)
		fprintf(stderr, "sluice-rdk-verify: metadata: %s\n", rd_kafka_err2str(err));
	else if (md->topic_cnt != 1 || md->topics[0].err)
		fprintf(stderr, "sluice-rdk-verify: topic %s: %s\n", topic,
			md->topic_cnt == 1 ? rd_kafka_err2str(md->topics[0].err) : "missing");
	else
		n = md->topics[0].partition_cnt;
	if (md)
		rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(rkt);
	return n;
}

int main(int argc, char **argv)
{
	const char *bootstrap = NULL, *topic = NULL, *isolation = "read_committed";
	long timeout_s = rv_timeout_s_default;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--bootstrap") && v)
			bootstrap = argv[++i];
		else if (!strcmp(argv[i], "--topic") && v)
			topic = argv[++i];
		else if (!strcmp(argv[i], "--isolation") && v && (!strcmp(v, "committed") || !strcmp(v, "uncommitted")))
			isolation = !strcmp(argv[++i], "committed") ? "read_committed" : "read_uncommitted";
		else if (!strcmp(argv[i], "--timeout") && v && (timeout_s = strtol(argv[++i], NULL, 10)) > 0)
			;
		else {
			rv_usage();
			return 2;
		}
	}
	if (!bootstrap || !topic) {
		rv_usage();
		return 2;
	}
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char err[512];
	if (rv_set(conf, "bootstrap.servers", bootstrap) || rv_set(conf, "client.id", "sluice-rdk-verify") ||
	    rv_set(conf, "group.id", "sluice-rdk-verify") || rv_set(conf, "enable.auto.commit", "false") ||
	    rv_set(conf, "enable.partition.eof", "true") || rv_set(conf, "isolation.level", isolation) ||
	    rv_set(conf, "auto.offset.reset", "earliest")) {
		rd_kafka_conf_destroy(conf);
		return 2;
	}
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
	if (!rk) {
		fprintf(stderr, "sluice-rdk-verify: %s\n", err);
		return 1;
	}
	rd_kafka_poll_set_consumer(rk);
	int nparts = rv_partitions(rk, topic);
	if (nparts <= 0 || nparts > rv_partitions_max) {
		rd_kafka_destroy(rk);
		return 1;
	}
	rd_kafka_topic_partition_list_t *tl = rd_kafka_topic_partition_list_new(nparts);
	for (int p = 0; p < nparts; p++)
		rd_kafka_topic_partition_list_add(tl, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
	rd_kafka_resp_err_t aerr = rd_kafka_assign(rk, tl);
	rd_kafka_topic_partition_list_destroy(tl);
	if (aerr) {
		fprintf(stderr, "sluice-rdk-verify: assign: %s\n", rd_kafka_err2str(aerr));
		rd_kafka_destroy(rk);
		return 1;
	}

	static bool at_eof[rv_partitions_max];
	int eofs = 0, rc = 0;
	uint64_t records = 0, checksum = 0;
	int64_t deadline = rv_now_ms() + timeout_s * 1000;
	while (eofs < nparts && rv_now_ms() < deadline) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, rv_poll_ms);
		if (!m)
			continue;
		if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
			if (m->partition >= 0 && m->partition < nparts && !at_eof[m->partition]) {
				at_eof[m->partition] = true;
				eofs++;
			}
		} else if (m->err) {
			fprintf(stderr, "sluice-rdk-verify: partition %d: %s\n", m->partition, rd_kafka_message_errstr(m));
			rc = 1;
			rd_kafka_message_destroy(m);
			break;
		} else {
			/* Records after an EOF would mean someone still produces: count them, but say so below. */
			if (m->partition >= 0 && m->partition < nparts && at_eof[m->partition]) {
				at_eof[m->partition] = false;
				eofs--;
			}
			records++;
			checksum += sb_digest_record(m->partition, m->key, m->key ? (int32_t)m->key_len : -1, m->payload,
						     m->payload ? (int32_t)m->len : -1);
		}
		rd_kafka_message_destroy(m);
	}
	if (!rc && eofs < nparts) {
		fprintf(stderr, "sluice-rdk-verify: %d of %d partitions reached their end within %ld s\n", eofs, nparts,
			timeout_s);
		rc = 1;
	}
	printf("VERIFY topic=%s isolation=%s partitions=%d records=%" PRIu64 " checksum=%016" PRIx64 "\n", topic,
	       isolation, nparts, records, checksum);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	return rc;
}
