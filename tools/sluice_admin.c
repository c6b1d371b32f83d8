/*
 * sluice-admin - a small Kafka admin client: transactions (KIP-664),
 * consumer groups and topics.
 *
 *   sluice-admin --bootstrap HOST:PORT transactions [--older-than-ms N]
 *   sluice-admin --bootstrap HOST:PORT producers TOPIC PARTITION
 *   sluice-admin --bootstrap HOST:PORT abort-transaction TOPIC PARTITION PRODUCER_ID
 *   sluice-admin --bootstrap HOST:PORT groups
 *   sluice-admin --bootstrap HOST:PORT group GROUP
 *   sluice-admin --bootstrap HOST:PORT topics list
 *   sluice-admin --bootstrap HOST:PORT topics describe TOPIC
 *   sluice-admin --bootstrap HOST:PORT topics create TOPIC PARTITIONS [KEY=VALUE]...
 *   sluice-admin --bootstrap HOST:PORT topics delete TOPIC
 *   sluice-admin --bootstrap HOST:PORT topics add-partitions TOPIC COUNT
 *   sluice-admin --bootstrap HOST:PORT delete-records TOPIC PARTITION OFFSET
 *   sluice-admin --bootstrap HOST:PORT configs describe topic|broker NAME
 *   sluice-admin --bootstrap HOST:PORT configs alter TOPIC KEY=VALUE|-KEY...
 *
 * transactions: ListTransactions v0, then DescribeTransactions v0 for the ids
 * it names; one line per id. With --older-than-ms only Ongoing transactions
 * that started at least N ms ago ("hanging" ones).
 * producers: DescribeProducers v0 for one partition.
 * abort-transaction: DescribeProducers to learn the producer's epoch and
 * coordinator epoch on the partition, then WriteTxnMarkers v1 with an ABORT
 * marker for that partition only, as Kafka's kafka-transactions.sh does.
 * groups: ListGroups v4, one line per group with its state.
 * group: what kafka-consumer-groups.sh --describe --members --offsets shows:
 * DescribeGroups v5 (state, assignor, each member with its client id, host
 * and assigned partitions), OffsetFetch v7 (every committed offset of the
 * group) and ListOffsets v2 (read_uncommitted end offsets): one line per
 * partition with committed offset, end offset, lag and the member it is
 * assigned to.
 * topics list: Metadata v4 of every topic, one line each with its partition
 * count. topics describe: Metadata v4 of the topic and ListOffsets v2
 * (earliest and latest): one line per partition with its leader and offsets.
 * topics create: CreateTopics v4 (replication factor 1; each KEY=VALUE a
 * topic config). topics delete: DeleteTopics v1. topics add-partitions:
 * CreatePartitions v1, the topic's new partition count.
 * delete-records: DeleteRecords v1 of one partition (OFFSET -1: its high
 * watermark), as kafka-delete-records.sh does; prints the new log start
 * (the low watermark).
 * configs describe: DescribeConfigs v1 of a topic or the broker (NAME its id),
 * one line per config: KEY=VALUE and its source (topic, broker, default) and
 * read-only flag. configs alter: IncrementalAlterConfigs v0 of a topic, each
 * KEY=VALUE a SET, each -KEY a DELETE (back to the broker's value).
 *
 * sluice is one node, so every request goes to the bootstrap broker (Kafka's
 * tool would ask each broker, and the coordinator for DescribeTransactions).
 * Plain blocking TCP, one request in flight. Every reply is checked: framing,
 * correlation id, a body that decodes to the last byte, the answer covering
 * what was asked, and each error code.
 * Exit status: 0 ok, 1 a broker error or a malformed reply, 2 usage or I/O.
 * Locality: a standalone process.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "kerr.h"
#include "kmsg.h"
#include "kwire.h"

#define ADM_FRAME_BYTES_MAX (64u << 20)  /* largest reply accepted */
#define ADM_ARENA_BYTES (64u << 20)      /* decoded arrays of one reply */
#define ADM_DESCRIBE_IDS_MAX 1000        /* ids per DescribeTransactions request */
#define ADM_IO_TIMEOUT_S 30              /* a silent broker is an error, not a hang */
#define ADM_CLIENT_ID "sluice-admin"

/* Connection and buffers of the one process. Locality: main thread. */
struct adm {
	int fd;
	int32_t next_corr;
	uint8_t *req, *resp;
	size_t req_cap;
	struct karena arena;
};

/* Kafka's name of an error code, for messages; "?" for one Kafka 3.7.1 lacks. */
static const char *err_name(int16_t code)
{
	const char *n = kerr_name(code);
	return n ? n : "?";
}

static void die(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("sluice-admin: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(status);
}

/* An error code in an answer, with the broker's message when it sent one: exit 1. */
static void die_kerr(const char *what, int16_t code, struct kstr msg)
{
	die(1, "%s: error %d (%s)%s%.*s", what, code, err_name(code), msg.len > 0 ? ": " : "",
	    msg.len > 0 ? msg.len : 0, msg.ptr);
}

/* A reply that breaks the protocol. */
#define MALFORMED(...) die(1, "malformed reply: " __VA_ARGS__)

static void usage(void)
{
	fputs("usage: sluice-admin --bootstrap HOST:PORT transactions [--older-than-ms N]\n"
	      "       sluice-admin --bootstrap HOST:PORT producers TOPIC PARTITION\n"
	      "       sluice-admin --bootstrap HOST:PORT abort-transaction TOPIC PARTITION PRODUCER_ID\n"
	      "       sluice-admin --bootstrap HOST:PORT groups\n"
	      "       sluice-admin --bootstrap HOST:PORT group GROUP\n"
	      "       sluice-admin --bootstrap HOST:PORT topics list\n"
	      "       sluice-admin --bootstrap HOST:PORT topics describe TOPIC\n"
	      "       sluice-admin --bootstrap HOST:PORT topics create TOPIC PARTITIONS [KEY=VALUE]...\n"
	      "       sluice-admin --bootstrap HOST:PORT topics delete TOPIC\n"
	      "       sluice-admin --bootstrap HOST:PORT topics add-partitions TOPIC COUNT\n"
	      "       sluice-admin --bootstrap HOST:PORT delete-records TOPIC PARTITION OFFSET\n"
	      "       sluice-admin --bootstrap HOST:PORT configs describe topic|broker NAME\n"
	      "       sluice-admin --bootstrap HOST:PORT configs alter TOPIC KEY=VALUE|-KEY...\n",
	      stderr);
	exit(2);
}

static int64_t parse_int(const char *s, int64_t lo, int64_t hi, const char *what)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		die(2, "bad %s '%s'", what, s);
	return v;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);   /* brokers stamp wall-clock ms */
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void adm_connect(struct adm *a, const char *bootstrap)
{
	char host[256];
	const char *colon = strrchr(bootstrap, ':');
	if (!colon || colon == bootstrap || (size_t)(colon - bootstrap) >= sizeof(host) || !colon[1])
		die(2, "--bootstrap wants HOST:PORT, got '%s'", bootstrap);
	memcpy(host, bootstrap, (size_t)(colon - bootstrap));
	host[colon - bootstrap] = 0;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
	int rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (rc)
		die(2, "%s: %s", bootstrap, gai_strerror(rc));
	a->fd = -1;
	for (ai = res; ai && a->fd < 0; ai = ai->ai_next) {
		a->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (a->fd >= 0 && connect(a->fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			rc = errno;
			close(a->fd);
			a->fd = -1;
			errno = rc;
		}
	}
	freeaddrinfo(res);
	if (a->fd < 0)
		die(2, "connect %s: %s", bootstrap, strerror(errno));
	struct timeval tv = { .tv_sec = ADM_IO_TIMEOUT_S };
	setsockopt(a->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(a->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static void io_all(int fd, uint8_t *p, size_t n, bool out)
{
	while (n) {
		ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			die(2, "%s: %s", out ? "send" : "recv", errno == EAGAIN ? "timed out" : strerror(errno));
		if (k == 0)
			die(1, "broker closed the connection");
		p += k;
		n -= (size_t)k;
	}
}

/*
 * The request framing around an encoder: size prefix, header (v1 or v2 by
 * kapi_flexible), body. Then reads the reply, checks its correlation id,
 * skips the v1 header's tags when the version is flexible, and returns a
 * reader over the body.
 */
#define ADM_CALL(a, key, ver, Msg, body, r)                                                      \
	do {                                                                                        \
		struct kreq_header h_ = { .api_key = (key), .api_version = (ver),                       \
		                          .correlation_id = (a)->next_corr++,                           \
		                          .client_id = { ADM_CLIENT_ID, sizeof(ADM_CLIENT_ID) - 1 } };  \
		struct kwriter w_;                                                                      \
		size_t need_ = 4 + 64 + sizeof(ADM_CLIENT_ID) + Msg##_size((ver), (body));             \
		adm_reserve((a), need_);                                                                \
		kw_init(&w_, (a)->req, (a)->req_cap);                                                   \
		kw_i32(&w_, 0);                                                                         \
		kreq_header_encode(&w_, &h_);                                                           \
		int erc_ = Msg##_encode(&w_, (ver), (body));                                             \
		if (erc_ || w_.err)                                                                     \
			die(2, "encoding %s failed: %d", #Msg, erc_ ? erc_ : w_.err);                       \
		adm_exchange((a), &w_, &h_, (r));                                                       \
	} while (0)

static void adm_reserve(struct adm *a, size_t n)
{
	if (n <= a->req_cap)
		return;
	free(a->req);
	if (!(a->req = malloc(n)))
		die(2, "out of memory");
	a->req_cap = n;
}

static void adm_exchange(struct adm *a, struct kwriter *w, const struct kreq_header *h, struct kreader *r)
{
	size_t len = kw_len(w);
	kw_put_i32(w->start, (int32_t)(len - 4));
	io_all(a->fd, w->start, len, true);
	uint8_t sz[4];
	io_all(a->fd, sz, 4, false);
	uint32_t n = (uint32_t)sz[0] << 24 | (uint32_t)sz[1] << 16 | (uint32_t)sz[2] << 8 | sz[3];
	if (n < 4 || n > ADM_FRAME_BYTES_MAX)
		MALFORMED("frame size %u", n);
	io_all(a->fd, a->resp, n, false);
	kr_init(r, a->resp, n);
	int32_t corr = kr_i32(r);
	if (kapi_flexible(h->api_key, h->api_version))
		kr_skip_tags(r);   /* response header v1 */
	if (r->err)
		MALFORMED("response header of api %d", h->api_key);
	if (corr != h->correlation_id)
		MALFORMED("correlation id %d, expected %d", corr, h->correlation_id);
	karena_reset(&a->arena);
}

/* Decodes the body; the whole frame must be used. */
#define ADM_DECODE(a, Msg, ver, r, out)                                                   \
	do {                                                                                  \
		int drc_ = Msg##_decode((r), (ver), (out), &(a)->arena);                          \
		if (drc_ || (r)->err)                                                             \
			MALFORMED("%s v%d does not decode (%d)", #Msg, (ver), drc_ ? drc_ : (r)->err); \
		if (kr_left(r))                                                                   \
			MALFORMED("%s v%d: %zu bytes after the body", #Msg, (ver), kr_left(r));       \
	} while (0)

static bool kstr_eq(struct kstr s, const char *c)
{
	return s.len >= 0 && (size_t)s.len == strlen(c) && memcmp(s.ptr, c, (size_t)s.len) == 0;
}

/* ---- transactions ------------------------------------------------------------ */

static int print_described(const struct DescribeTransactionsResponse *resp, const struct kstr *asked, int32_t n,
                           int64_t older_than_ms)
{
	int bad = 0;
	if (resp->TransactionStates_n != n)
		MALFORMED("DescribeTransactions answered %d ids, asked %d", resp->TransactionStates_n, n);
	int64_t now = now_ms();
	for (int32_t i = 0; i < n; i++) {
		const struct DescribeTransactionsResponse_TransactionState *t = &resp->TransactionStates[i];
		if (t->TransactionalId.len != asked[i].len ||
		    memcmp(t->TransactionalId.ptr, asked[i].ptr, (size_t)asked[i].len) != 0)
			MALFORMED("DescribeTransactions answer %d is for '%.*s', asked '%.*s'", i,
			          t->TransactionalId.len, t->TransactionalId.ptr, asked[i].len, asked[i].ptr);
		if (t->ErrorCode) {
			fprintf(stderr, "sluice-admin: %.*s: error %d (%s)\n", asked[i].len, asked[i].ptr,
			        t->ErrorCode, err_name(t->ErrorCode));
			bad = 1;
			continue;
		}
		int64_t age = t->TransactionStartTimeMs >= 0 ? now - t->TransactionStartTimeMs : -1;
		if (older_than_ms >= 0 && !(kstr_eq(t->TransactionState, "Ongoing") && age >= older_than_ms))
			continue;
		printf("%.*s producer_id=%" PRId64 " epoch=%d state=%.*s start_ms=%" PRId64 " age_ms=%" PRId64
		       " timeout_ms=%d partitions=",
		       asked[i].len, asked[i].ptr, t->ProducerId, t->ProducerEpoch, t->TransactionState.len,
		       t->TransactionState.ptr, t->TransactionStartTimeMs, age, t->TransactionTimeoutMs);
		const char *sep = "";
		for (int32_t k = 0; k < t->Topics_n; k++)
			for (int32_t p = 0; p < t->Topics[k].Partitions_n; p++, sep = ",")
				printf("%s%.*s-%d", sep, t->Topics[k].Topic.len, t->Topics[k].Topic.ptr,
				       t->Topics[k].Partitions[p]);
		printf("%s\n", *sep ? "" : "-");
	}
	return bad;
}

static int cmd_transactions(struct adm *a, int64_t older_than_ms)
{
	struct kreader r;
	struct ListTransactionsRequest lreq;
	ListTransactionsRequest_init(&lreq);
	lreq.StateFilters_n = lreq.ProducerIdFilters_n = 0;
	ADM_CALL(a, KAPI_LIST_TRANSACTIONS, 0, ListTransactionsRequest, &lreq, &r);
	struct ListTransactionsResponse lresp;
	ADM_DECODE(a, ListTransactionsResponse, 0, &r, &lresp);
	if (lresp.ErrorCode)
		die(1, "ListTransactions: error %d (%s)", lresp.ErrorCode, err_name(lresp.ErrorCode));
	if (lresp.TransactionStates_n < 0)
		MALFORMED("ListTransactions: null TransactionStates");

	/* The ids live in the reply frame, which the next call overwrites: copy them. */
	int32_t n = lresp.TransactionStates_n;
	struct kstr *ids = calloc((size_t)n + 1, sizeof(*ids));
	if (!ids)
		die(2, "out of memory");
	for (int32_t i = 0; i < n; i++) {
		struct kstr s = lresp.TransactionStates[i].TransactionalId;
		if (s.len < 0)
			MALFORMED("ListTransactions: null transactional id");
		char *c = malloc((size_t)s.len + 1);
		if (!c)
			die(2, "out of memory");
		memcpy(c, s.ptr, (size_t)s.len);
		ids[i] = (struct kstr){ c, s.len };
	}
	int bad = 0;
	for (int32_t at = 0; at < n; at += ADM_DESCRIBE_IDS_MAX) {
		int32_t k = n - at < ADM_DESCRIBE_IDS_MAX ? n - at : ADM_DESCRIBE_IDS_MAX;
		struct DescribeTransactionsRequest dreq;
		DescribeTransactionsRequest_init(&dreq);
		dreq.TransactionalIds_n = k;
		dreq.TransactionalIds = ids + at;
		ADM_CALL(a, KAPI_DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest, &dreq, &r);
		struct DescribeTransactionsResponse dresp;
		ADM_DECODE(a, DescribeTransactionsResponse, 0, &r, &dresp);
		bad |= print_described(&dresp, ids + at, k, older_than_ms);
	}
	for (int32_t i = 0; i < n; i++)
		free((void *)ids[i].ptr);
	free(ids);
	return bad;
}

/* ---- producers ------------------------------------------------------------------ */

/* DescribeProducers for one partition; returns its (checked) answer. */
static const struct DescribeProducersResponse_PartitionResponse *describe_producers(struct adm *a, const char *topic,
                                                                                    int32_t partition)
{
	struct kreader r;
	struct DescribeProducersRequest req;
	struct DescribeProducersRequest_TopicRequest t;
	DescribeProducersRequest_init(&req);
	DescribeProducersRequest_TopicRequest_init(&t);
	t.Name = (struct kstr){ topic, (int32_t)strlen(topic) };
	t.PartitionIndexes_n = 1;
	t.PartitionIndexes = &partition;
	req.Topics_n = 1;
	req.Topics = &t;
	ADM_CALL(a, KAPI_DESCRIBE_PRODUCERS, 0, DescribeProducersRequest, &req, &r);
	static struct DescribeProducersResponse resp;   /* its arrays live in the arena */
	ADM_DECODE(a, DescribeProducersResponse, 0, &r, &resp);
	const struct DescribeProducersResponse_PartitionResponse *found = NULL;
	for (int32_t i = 0; i < resp.Topics_n; i++) {
		if (!kstr_eq(resp.Topics[i].Name, topic))
			MALFORMED("DescribeProducers: topic '%.*s' not asked for", resp.Topics[i].Name.len,
			          resp.Topics[i].Name.ptr);
		for (int32_t p = 0; p < resp.Topics[i].Partitions_n; p++) {
			if (resp.Topics[i].Partitions[p].PartitionIndex != partition || found)
				MALFORMED("DescribeProducers: partition %d unexpected",
				          resp.Topics[i].Partitions[p].PartitionIndex);
			found = &resp.Topics[i].Partitions[p];
		}
	}
	if (!found)
		MALFORMED("DescribeProducers: no answer for %s-%d", topic, partition);
	if (found->ErrorCode) {
		char what[300];
		snprintf(what, sizeof(what), "DescribeProducers %s-%d", topic, partition);
		die_kerr(what, found->ErrorCode, found->ErrorMessage);
	}
	if (found->ActiveProducers_n < 0)
		MALFORMED("DescribeProducers: null ActiveProducers");
	return found;
}

static int cmd_producers(struct adm *a, const char *topic, int32_t partition)
{
	const struct DescribeProducersResponse_PartitionResponse *p = describe_producers(a, topic, partition);
	for (int32_t i = 0; i < p->ActiveProducers_n; i++) {
		const struct DescribeProducersResponse_ProducerState *s = &p->ActiveProducers[i];
		printf("producer_id=%" PRId64 " epoch=%d last_sequence=%d last_timestamp=%" PRId64
		       " coordinator_epoch=%d current_txn_start_offset=%" PRId64 "\n",
		       s->ProducerId, s->ProducerEpoch, s->LastSequence, s->LastTimestamp, s->CoordinatorEpoch,
		       s->CurrentTxnStartOffset);
	}
	return 0;
}

/* ---- abort-transaction ----------------------------------------------------------- */

static int cmd_abort(struct adm *a, const char *topic, int32_t partition, int64_t pid)
{
	const struct DescribeProducersResponse_PartitionResponse *p = describe_producers(a, topic, partition);
	const struct DescribeProducersResponse_ProducerState *s = NULL;
	for (int32_t i = 0; i < p->ActiveProducers_n && !s; i++)
		if (p->ActiveProducers[i].ProducerId == pid)
			s = &p->ActiveProducers[i];
	if (!s)
		die(1, "producer %" PRId64 " is not active on %s-%d", pid, topic, partition);
	if (s->CurrentTxnStartOffset < 0)
		die(1, "producer %" PRId64 " has no open transaction on %s-%d", pid, topic, partition);
	if (s->ProducerEpoch < 0 || s->ProducerEpoch > INT16_MAX)
		MALFORMED("DescribeProducers: producer epoch %d", s->ProducerEpoch);
	int16_t epoch = (int16_t)s->ProducerEpoch;
	int32_t coord_epoch = s->CoordinatorEpoch;
	fprintf(stderr, "aborting producer %" PRId64 " epoch %d on %s-%d (coordinator epoch %d, txn start offset %" PRId64
	        ")\n", pid, epoch, topic, partition, coord_epoch, s->CurrentTxnStartOffset);

	struct kreader r;
	struct WriteTxnMarkersRequest req;
	struct WriteTxnMarkersRequest_WritableTxnMarker m;
	struct WriteTxnMarkersRequest_WritableTxnMarkerTopic t;
	WriteTxnMarkersRequest_init(&req);
	WriteTxnMarkersRequest_WritableTxnMarker_init(&m);
	WriteTxnMarkersRequest_WritableTxnMarkerTopic_init(&t);
	t.Name = (struct kstr){ topic, (int32_t)strlen(topic) };
	t.PartitionIndexes_n = 1;
	t.PartitionIndexes = &partition;
	m.ProducerId = pid;
	m.ProducerEpoch = epoch;
	m.TransactionResult = false;   /* abort */
	m.Topics_n = 1;
	m.Topics = &t;
	m.CoordinatorEpoch = coord_epoch;
	req.Markers_n = 1;
	req.Markers = &m;
	ADM_CALL(a, KAPI_WRITE_TXN_MARKERS, 1, WriteTxnMarkersRequest, &req, &r);
	struct WriteTxnMarkersResponse resp;
	ADM_DECODE(a, WriteTxnMarkersResponse, 1, &r, &resp);
	if (resp.Markers_n != 1 || resp.Markers[0].ProducerId != pid)
		MALFORMED("WriteTxnMarkers: %d markers answered, expected 1 for producer %" PRId64, resp.Markers_n, pid);
	const struct WriteTxnMarkersResponse_WritableTxnMarkerResult *mr = &resp.Markers[0];
	if (mr->Topics_n != 1 || !kstr_eq(mr->Topics[0].Name, topic) || mr->Topics[0].Partitions_n != 1 ||
	    mr->Topics[0].Partitions[0].PartitionIndex != partition)
		MALFORMED("WriteTxnMarkers: the answer is not for %s-%d", topic, partition);
	int16_t ec = mr->Topics[0].Partitions[0].ErrorCode;
	printf("abort %s-%d producer_id=%" PRId64 " epoch=%d: error %d (%s)\n", topic, partition, pid, epoch, ec,
	       err_name(ec));
	return ec ? 1 : 0;
}

/* ---- consumer groups --------------------------------------------------------------- */

static int cmd_groups(struct adm *a)
{
	struct kreader r;
	struct ListGroupsRequest req;
	ListGroupsRequest_init(&req);
	req.StatesFilter_n = 0;
	ADM_CALL(a, KAPI_LIST_GROUPS, 4, ListGroupsRequest, &req, &r);
	struct ListGroupsResponse resp;
	ADM_DECODE(a, ListGroupsResponse, 4, &r, &resp);
	if (resp.ErrorCode)
		die(1, "ListGroups: error %d (%s)", resp.ErrorCode, err_name(resp.ErrorCode));
	for (int32_t i = 0; i < resp.Groups_n; i++) {
		const struct ListGroupsResponse_ListedGroup *g = &resp.Groups[i];
		printf("%.*s state=%.*s protocol_type=%.*s\n", g->GroupId.len, g->GroupId.ptr, g->GroupState.len,
		       g->GroupState.ptr, g->ProtocolType.len > 0 ? g->ProtocolType.len : 1,
		       g->ProtocolType.len > 0 ? g->ProtocolType.ptr : "-");
	}
	return 0;
}

/* One partition of the group's view: committed offset, end offset, owner. */
struct adm_gpart {
	char *topic;
	int32_t partition;
	int64_t committed, end;
	int owner;                    /* index into members, -1 none */
};

/* A copy of the reply-frame string s (the next call overwrites the frame). */
static char *dupk(struct kstr s)
{
	char *c = malloc(s.len > 0 ? (size_t)s.len + 1 : 1);
	if (!c)
		die(2, "out of memory");
	if (s.len > 0)
		memcpy(c, s.ptr, (size_t)s.len);
	c[s.len > 0 ? s.len : 0] = 0;
	return c;
}

static struct adm_gpart *gpart_get(struct adm_gpart **v, int32_t *n, const char *topic, size_t tlen, int32_t part)
{
	for (int32_t i = 0; i < *n; i++)
		if (strlen((*v)[i].topic) == tlen && !memcmp((*v)[i].topic, topic, tlen) && (*v)[i].partition == part)
			return &(*v)[i];
	struct adm_gpart *nv = realloc(*v, sizeof(**v) * (size_t)(*n + 1));
	if (!nv)
		die(2, "out of memory");
	*v = nv;
	struct adm_gpart *p = &nv[(*n)++];
	p->topic = dupk((struct kstr){ topic, (int32_t)tlen });
	p->partition = part;
	p->committed = p->end = -1;
	p->owner = -1;
	return p;
}

static int gpart_cmp(const void *x, const void *y)
{
	const struct adm_gpart *a = x, *b = y;
	int c = strcmp(a->topic, b->topic);
	return c ? c : (a->partition > b->partition) - (a->partition < b->partition);
}

/* DescribeGroups: prints the group and its members, records each member's partitions. */
static int describe_group(struct adm *a, const char *group, char ***member_ids, int32_t *nmembers,
                          struct adm_gpart **parts, int32_t *nparts)
{
	struct kreader r;
	struct DescribeGroupsRequest req;
	struct kstr gid = { group, (int32_t)strlen(group) };
	DescribeGroupsRequest_init(&req);
	req.Groups_n = 1;
	req.Groups = &gid;
	ADM_CALL(a, KAPI_DESCRIBE_GROUPS, 5, DescribeGroupsRequest, &req, &r);
	struct DescribeGroupsResponse resp;
	ADM_DECODE(a, DescribeGroupsResponse, 5, &r, &resp);
	if (resp.Groups_n != 1 || !kstr_eq(resp.Groups[0].GroupId, group))
		MALFORMED("DescribeGroups: %d groups answered, expected '%s'", resp.Groups_n, group);
	const struct DescribeGroupsResponse_DescribedGroup *g = &resp.Groups[0];
	if (g->ErrorCode)
		die(1, "DescribeGroups %s: error %d (%s)", group, g->ErrorCode, err_name(g->ErrorCode));
	int32_t nm = g->Members_n > 0 ? g->Members_n : 0;
	printf("group %s state=%.*s protocol_type=%.*s protocol=%.*s members=%d\n", group, g->GroupState.len,
	       g->GroupState.ptr, g->ProtocolType.len > 0 ? g->ProtocolType.len : 1,
	       g->ProtocolType.len > 0 ? g->ProtocolType.ptr : "-", g->ProtocolData.len > 0 ? g->ProtocolData.len : 1,
	       g->ProtocolData.len > 0 ? g->ProtocolData.ptr : "-", nm);
	*member_ids = calloc((size_t)nm + 1, sizeof(char *));
	if (!*member_ids)
		die(2, "out of memory");
	*nmembers = nm;
	for (int32_t i = 0; i < nm; i++) {
		const struct DescribeGroupsResponse_DescribedGroupMember *m = &g->Members[i];
		(*member_ids)[i] = dupk(m->MemberId);
		printf("member %.*s", m->MemberId.len, m->MemberId.ptr);
		if (m->GroupInstanceId.len >= 0)
			printf(" instance=%.*s", m->GroupInstanceId.len, m->GroupInstanceId.ptr);
		printf(" client_id=%.*s host=%.*s partitions=", m->ClientId.len, m->ClientId.ptr, m->ClientHost.len,
		       m->ClientHost.ptr);
		/* The consumer protocol's assignment: int16 version, then the layout of that version. */
		struct kreader ar;
		struct ConsumerProtocolAssignment asg;
		const char *sep = "";
		kr_init(&ar, m->MemberAssignment.ptr, m->MemberAssignment.len > 0 ? (size_t)m->MemberAssignment.len : 0);
		int16_t av = kr_left(&ar) >= 2 ? kr_i16(&ar) : -1;
		if (av >= 0 && kstr_eq(g->ProtocolType, "consumer") &&
		    ConsumerProtocolAssignment_decode(&ar, av > 3 ? 3 : av, &asg, &a->arena) == 0 && !ar.err) {
			for (int32_t t = 0; t < asg.AssignedPartitions_n; t++) {
				const struct ConsumerProtocolAssignment_TopicPartition *tp = &asg.AssignedPartitions[t];
				for (int32_t p = 0; p < tp->Partitions_n; p++, sep = ",") {
					printf("%s%.*s-%d", sep, tp->Topic.len, tp->Topic.ptr, tp->Partitions[p]);
					gpart_get(parts, nparts, tp->Topic.ptr, (size_t)tp->Topic.len, tp->Partitions[p])->owner = i;
				}
			}
		}
		printf("%s\n", *sep ? "" : "-");
	}
	return 0;
}

/* OffsetFetch v7 with null topics: every offset the group committed. */
static void fetch_committed(struct adm *a, const char *group, struct adm_gpart **parts, int32_t *nparts)
{
	struct kreader r;
	struct OffsetFetchRequest req;
	OffsetFetchRequest_init(&req);
	req.GroupId = (struct kstr){ group, (int32_t)strlen(group) };
	req.Topics_n = -1;
	req.RequireStable = false;
	ADM_CALL(a, KAPI_OFFSET_FETCH, 7, OffsetFetchRequest, &req, &r);
	struct OffsetFetchResponse resp;
	ADM_DECODE(a, OffsetFetchResponse, 7, &r, &resp);
	if (resp.ErrorCode)
		die(1, "OffsetFetch %s: error %d (%s)", group, resp.ErrorCode, err_name(resp.ErrorCode));
	for (int32_t t = 0; t < resp.Topics_n; t++)
		for (int32_t p = 0; p < resp.Topics[t].Partitions_n; p++) {
			const struct OffsetFetchResponse_OffsetFetchResponsePartition *x = &resp.Topics[t].Partitions[p];
			if (x->ErrorCode)
				die(1, "OffsetFetch %s %.*s-%d: error %d (%s)", group, resp.Topics[t].Name.len,
				    resp.Topics[t].Name.ptr, x->PartitionIndex, x->ErrorCode, err_name(x->ErrorCode));
			gpart_get(parts, nparts, resp.Topics[t].Name.ptr, (size_t)resp.Topics[t].Name.len,
			          x->PartitionIndex)->committed = x->CommittedOffset;
		}
}

/* ListOffsets v2 (latest, read_uncommitted) for every partition, one request per partition: few. */
static void fetch_ends(struct adm *a, struct adm_gpart *parts, int32_t nparts)
{
	for (int32_t i = 0; i < nparts; i++) {
		struct kreader r;
		struct ListOffsetsRequest req;
		struct ListOffsetsRequest_ListOffsetsTopic t;
		struct ListOffsetsRequest_ListOffsetsPartition p;
		ListOffsetsRequest_init(&req);
		ListOffsetsRequest_ListOffsetsTopic_init(&t);
		ListOffsetsRequest_ListOffsetsPartition_init(&p);
		p.PartitionIndex = parts[i].partition;
		p.Timestamp = -1;   /* latest */
		t.Name = (struct kstr){ parts[i].topic, (int32_t)strlen(parts[i].topic) };
		t.Partitions_n = 1;
		t.Partitions = &p;
		req.ReplicaId = -1;
		req.IsolationLevel = 0;
		req.Topics_n = 1;
		req.Topics = &t;
		ADM_CALL(a, KAPI_LIST_OFFSETS, 2, ListOffsetsRequest, &req, &r);
		struct ListOffsetsResponse resp;
		ADM_DECODE(a, ListOffsetsResponse, 2, &r, &resp);
		if (resp.Topics_n != 1 || resp.Topics[0].Partitions_n != 1 ||
		    resp.Topics[0].Partitions[0].PartitionIndex != parts[i].partition)
			MALFORMED("ListOffsets: the answer is not for %s-%d", parts[i].topic, parts[i].partition);
		const struct ListOffsetsResponse_ListOffsetsPartitionResponse *x = &resp.Topics[0].Partitions[0];
		if (x->ErrorCode)
			fprintf(stderr, "sluice-admin: ListOffsets %s-%d: error %d (%s)\n", parts[i].topic,
			        parts[i].partition, x->ErrorCode, err_name(x->ErrorCode));
		else
			parts[i].end = x->Offset;
	}
}

/* " name=N", or " name=-" for an unknown (negative) value. */
static void put_offset(const char *name, int64_t v)
{
	if (v >= 0)
		printf("%s%" PRId64, name, v);
	else
		printf("%s-", name);
}

static int cmd_group(struct adm *a, const char *group)
{
	char **members = NULL;
	int32_t nmembers = 0, nparts = 0;
	struct adm_gpart *parts = NULL;
	describe_group(a, group, &members, &nmembers, &parts, &nparts);
	fetch_committed(a, group, &parts, &nparts);
	fetch_ends(a, parts, nparts);
	qsort(parts, (size_t)nparts, sizeof(*parts), gpart_cmp);
	for (int32_t i = 0; i < nparts; i++) {
		const struct adm_gpart *p = &parts[i];
		printf("offset %s %d", p->topic, p->partition);
		put_offset(" committed=", p->committed);
		put_offset(" end=", p->end);
		put_offset(" lag=", p->committed >= 0 && p->end >= 0 ? p->end - p->committed : -1);
		printf(" member=%s\n", p->owner >= 0 ? members[p->owner] : "-");
		free(p->topic);
	}
	for (int32_t i = 0; i < nmembers; i++)
		free(members[i]);
	free(members);
	free(parts);
	return 0;
}

/* ---- topics ------------------------------------------------------------------ */

#define ADM_TOPIC_CONFIGS_MAX 64   /* KEY=VALUE arguments of one create */
#define ADM_ADMIN_TIMEOUT_MS 60000 /* the broker's time to create or delete */

static struct kstr kstr_of(const char *s)
{
	return (struct kstr){ s, (int32_t)strlen(s) };
}

/* Metadata v4 of one topic (NULL: all). The reply stays in a->resp until the next call. */
static void topics_metadata(struct adm *a, const char *topic, struct MetadataResponse *resp)
{
	struct kreader r;
	struct MetadataRequest req;
	struct MetadataRequest_MetadataRequestTopic t;
	MetadataRequest_init(&req);
	req.AllowAutoTopicCreation = false;
	if (topic) {
		MetadataRequest_MetadataRequestTopic_init(&t);
		t.Name = kstr_of(topic);
		req.Topics = &t;
		req.Topics_n = 1;
	} else {
		req.Topics_n = -1;
	}
	ADM_CALL(a, KAPI_METADATA, 4, MetadataRequest, &req, &r);
	ADM_DECODE(a, MetadataResponse, 4, &r, resp);
}

static int cmd_topics_list(struct adm *a)
{
	struct MetadataResponse resp;
	topics_metadata(a, NULL, &resp);
	for (int32_t i = 0; i < resp.Topics_n; i++) {
		const struct MetadataResponse_MetadataResponseTopic *t = &resp.Topics[i];
		printf("%.*s partitions=%d\n", t->Name.len, t->Name.ptr, t->Partitions_n);
	}
	return 0;
}

/* ListOffsets v2 (read_uncommitted) at timestamp ts (-2 earliest, -1 latest) of n partitions. */
static void topic_offsets(struct adm *a, const char *topic, int32_t n, int64_t ts, int64_t *out)
{
	struct kreader r;
	struct ListOffsetsRequest req;
	struct ListOffsetsRequest_ListOffsetsTopic t;
	ListOffsetsRequest_init(&req);
	ListOffsetsRequest_ListOffsetsTopic_init(&t);
	struct ListOffsetsRequest_ListOffsetsPartition *ps = calloc((size_t)(n ? n : 1), sizeof(*ps));
	if (!ps)
		die(2, "out of memory");
	for (int32_t p = 0; p < n; p++) {
		ListOffsetsRequest_ListOffsetsPartition_init(&ps[p]);
		ps[p].PartitionIndex = p;
		ps[p].Timestamp = ts;
		out[p] = -1;
	}
	req.ReplicaId = -1;
	t.Name = kstr_of(topic);
	t.Partitions = ps;
	t.Partitions_n = n;
	req.Topics = &t;
	req.Topics_n = 1;
	ADM_CALL(a, KAPI_LIST_OFFSETS, 2, ListOffsetsRequest, &req, &r);
	free(ps);
	struct ListOffsetsResponse resp;
	ADM_DECODE(a, ListOffsetsResponse, 2, &r, &resp);
	for (int32_t i = 0; i < resp.Topics_n; i++)
		for (int32_t k = 0; k < resp.Topics[i].Partitions_n; k++) {
			const struct ListOffsetsResponse_ListOffsetsPartitionResponse *x = &resp.Topics[i].Partitions[k];
			if (x->PartitionIndex < 0 || x->PartitionIndex >= n)
				MALFORMED("ListOffsets answered partition %d of %d", x->PartitionIndex, n);
			out[x->PartitionIndex] = x->ErrorCode ? -1 : x->Offset;
		}
}

static int cmd_topics_describe(struct adm *a, const char *topic)
{
	struct MetadataResponse resp;
	topics_metadata(a, topic, &resp);
	if (resp.Topics_n != 1 || !kstr_eq(resp.Topics[0].Name, topic))
		MALFORMED("Metadata answered %d topics for one", resp.Topics_n);
	const struct MetadataResponse_MetadataResponseTopic *t = &resp.Topics[0];
	if (t->ErrorCode)
		die(1, "%s: error %d (%s)", topic, t->ErrorCode, err_name(t->ErrorCode));
	int32_t n = t->Partitions_n;
	int32_t *leader = calloc((size_t)(n ? n : 1), sizeof(*leader));
	int64_t *start = calloc((size_t)(n ? n : 1), sizeof(*start)), *end = calloc((size_t)(n ? n : 1), sizeof(*end));
	if (!leader || !start || !end)
		die(2, "out of memory");
	for (int32_t p = 0; p < n; p++)
		leader[p] = -1;
	for (int32_t i = 0; i < n; i++) {
		const struct MetadataResponse_MetadataResponsePartition *p = &t->Partitions[i];
		if (p->PartitionIndex < 0 || p->PartitionIndex >= n)
			MALFORMED("partition %d of %d", p->PartitionIndex, n);
		leader[p->PartitionIndex] = p->ErrorCode ? -1 : p->LeaderId;
	}
	topic_offsets(a, topic, n, -2, start);
	topic_offsets(a, topic, n, -1, end);
	printf("topic %s partitions=%d\n", topic, n);
	for (int32_t p = 0; p < n; p++) {
		printf("partition %s %d leader=%d", topic, p, leader[p]);
		put_offset(" start=", start[p]);
		put_offset(" end=", end[p]);
		putchar('\n');
	}
	free(leader);
	free(start);
	free(end);
	return 0;
}

static int cmd_topics_create(struct adm *a, const char *topic, int32_t nparts, char **kv, int nkv)
{
	struct kreader r;
	struct CreateTopicsRequest req;
	struct CreateTopicsRequest_CreatableTopic t;
	struct CreateTopicsRequest_CreateableTopicConfig cfg[ADM_TOPIC_CONFIGS_MAX];
	if (nkv > ADM_TOPIC_CONFIGS_MAX)
		die(2, "at most %d configs", ADM_TOPIC_CONFIGS_MAX);
	CreateTopicsRequest_init(&req);
	CreateTopicsRequest_CreatableTopic_init(&t);
	for (int i = 0; i < nkv; i++) {
		char *eq = strchr(kv[i], '=');
		if (!eq || eq == kv[i])
			die(2, "config '%s' is not KEY=VALUE", kv[i]);
		CreateTopicsRequest_CreateableTopicConfig_init(&cfg[i]);
		cfg[i].Name = (struct kstr){ kv[i], (int32_t)(eq - kv[i]) };
		cfg[i].Value = kstr_of(eq + 1);
	}
	t.Name = kstr_of(topic);
	t.NumPartitions = nparts;
	t.ReplicationFactor = 1;
	t.Assignments_n = 0;
	t.Configs = cfg;
	t.Configs_n = nkv;
	req.Topics = &t;
	req.Topics_n = 1;
	req.timeoutMs = ADM_ADMIN_TIMEOUT_MS;
	ADM_CALL(a, KAPI_CREATE_TOPICS, 4, CreateTopicsRequest, &req, &r);
	struct CreateTopicsResponse resp;
	ADM_DECODE(a, CreateTopicsResponse, 4, &r, &resp);
	if (resp.Topics_n != 1 || !kstr_eq(resp.Topics[0].Name, topic))
		MALFORMED("CreateTopics answered %d topics for one", resp.Topics_n);
	const struct CreateTopicsResponse_CreatableTopicResult *x = &resp.Topics[0];
	if (x->ErrorCode) {
		char what[300];
		snprintf(what, sizeof(what), "create %s", topic);
		die_kerr(what, x->ErrorCode, x->ErrorMessage);
	}
	printf("created %s partitions=%d\n", topic, nparts);
	return 0;
}

static int cmd_topics_delete(struct adm *a, const char *topic)
{
	struct kreader r;
	struct DeleteTopicsRequest req;
	struct kstr name = kstr_of(topic);
	DeleteTopicsRequest_init(&req);
	req.TopicNames = &name;
	req.TopicNames_n = 1;
	req.TimeoutMs = ADM_ADMIN_TIMEOUT_MS;
	ADM_CALL(a, KAPI_DELETE_TOPICS, 1, DeleteTopicsRequest, &req, &r);
	struct DeleteTopicsResponse resp;
	ADM_DECODE(a, DeleteTopicsResponse, 1, &r, &resp);
	if (resp.Responses_n != 1 || !kstr_eq(resp.Responses[0].Name, topic))
		MALFORMED("DeleteTopics answered %d topics for one", resp.Responses_n);
	if (resp.Responses[0].ErrorCode)
		die(1, "delete %s: error %d (%s)", topic, resp.Responses[0].ErrorCode, err_name(resp.Responses[0].ErrorCode));
	printf("deleted %s\n", topic);
	return 0;
}

static int cmd_topics_add_partitions(struct adm *a, const char *topic, int32_t count)
{
	struct kreader r;
	struct CreatePartitionsRequest req;
	struct CreatePartitionsRequest_CreatePartitionsTopic t;
	CreatePartitionsRequest_init(&req);
	CreatePartitionsRequest_CreatePartitionsTopic_init(&t);
	t.Name = kstr_of(topic);
	t.Count = count;
	t.Assignments_n = -1;   /* the broker places them */
	req.Topics = &t;
	req.Topics_n = 1;
	req.TimeoutMs = ADM_ADMIN_TIMEOUT_MS;
	ADM_CALL(a, KAPI_CREATE_PARTITIONS, 1, CreatePartitionsRequest, &req, &r);
	struct CreatePartitionsResponse resp;
	ADM_DECODE(a, CreatePartitionsResponse, 1, &r, &resp);
	if (resp.Results_n != 1 || !kstr_eq(resp.Results[0].Name, topic))
		MALFORMED("CreatePartitions answered %d topics for one", resp.Results_n);
	const struct CreatePartitionsResponse_CreatePartitionsTopicResult *x = &resp.Results[0];
	if (x->ErrorCode) {
		char what[300];
		snprintf(what, sizeof(what), "add partitions to %s", topic);
		die_kerr(what, x->ErrorCode, x->ErrorMessage);
	}
	printf("%s partitions=%d\n", topic, count);
	return 0;
}

static int cmd_delete_records(struct adm *a, const char *topic, int32_t partition, int64_t offset)
{
	struct kreader r;
	struct DeleteRecordsRequest req;
	struct DeleteRecordsRequest_DeleteRecordsTopic t;
	struct DeleteRecordsRequest_DeleteRecordsPartition p;
	DeleteRecordsRequest_init(&req);
	DeleteRecordsRequest_DeleteRecordsTopic_init(&t);
	DeleteRecordsRequest_DeleteRecordsPartition_init(&p);
	p.PartitionIndex = partition;
	p.Offset = offset;
	t.Name = kstr_of(topic);
	t.Partitions = &p;
	t.Partitions_n = 1;
	req.Topics = &t;
	req.Topics_n = 1;
	req.TimeoutMs = ADM_ADMIN_TIMEOUT_MS;
	ADM_CALL(a, KAPI_DELETE_RECORDS, 1, DeleteRecordsRequest, &req, &r);
	struct DeleteRecordsResponse resp;
	ADM_DECODE(a, DeleteRecordsResponse, 1, &r, &resp);
	if (resp.Topics_n != 1 || !kstr_eq(resp.Topics[0].Name, topic) || resp.Topics[0].Partitions_n != 1 ||
	    resp.Topics[0].Partitions[0].PartitionIndex != partition)
		MALFORMED("DeleteRecords did not answer the one partition asked");
	const struct DeleteRecordsResponse_DeleteRecordsPartitionResult *x = &resp.Topics[0].Partitions[0];
	if (x->ErrorCode)
		die(1, "delete records of %s-%d: error %d (%s)", topic, partition, x->ErrorCode, err_name(x->ErrorCode));
	printf("%s %d low_watermark=%" PRId64 "\n", topic, partition, x->LowWatermark);
	return 0;
}

static int cmd_topics(struct adm *a, char **av, int n)
{
	if (n == 1 && strcmp(av[0], "list") == 0)
		return cmd_topics_list(a);
	if (n == 2 && strcmp(av[0], "describe") == 0)
		return cmd_topics_describe(a, av[1]);
	if (n >= 3 && strcmp(av[0], "create") == 0)
		return cmd_topics_create(a, av[1], (int32_t)parse_int(av[2], 1, INT32_MAX, "partitions"), av + 3, n - 3);
	if (n == 2 && strcmp(av[0], "delete") == 0)
		return cmd_topics_delete(a, av[1]);
	if (n == 3 && strcmp(av[0], "add-partitions") == 0)
		return cmd_topics_add_partitions(a, av[1], (int32_t)parse_int(av[2], 1, INT32_MAX, "count"));
	usage();
	return 2;
}

static const char *source_name(int8_t s)
{
	switch (s) {
	case 1: return "topic";
	case 4: return "broker";
	case 5: return "default";
	default: return "other";
	}
}

static int cmd_configs_describe(struct adm *a, const char *kind, const char *name)
{
	struct kreader r;
	struct DescribeConfigsRequest req;
	struct DescribeConfigsRequest_DescribeConfigsResource q;
	DescribeConfigsRequest_init(&req);
	DescribeConfigsRequest_DescribeConfigsResource_init(&q);
	if (strcmp(kind, "topic") == 0)
		q.ResourceType = 2;
	else if (strcmp(kind, "broker") == 0)
		q.ResourceType = 4;
	else
		usage();
	q.ResourceName = kstr_of(name);
	q.ConfigurationKeys_n = -1;   /* all */
	req.Resources = &q;
	req.Resources_n = 1;
	ADM_CALL(a, KAPI_DESCRIBE_CONFIGS, 1, DescribeConfigsRequest, &req, &r);
	struct DescribeConfigsResponse resp;
	ADM_DECODE(a, DescribeConfigsResponse, 1, &r, &resp);
	if (resp.Results_n != 1)
		MALFORMED("DescribeConfigs answered %d resources for one", resp.Results_n);
	const struct DescribeConfigsResponse_DescribeConfigsResult *x = &resp.Results[0];
	if (x->ErrorCode) {
		char what[300];
		snprintf(what, sizeof(what), "describe configs of %s %s", kind, name);
		die_kerr(what, x->ErrorCode, x->ErrorMessage);
	}
	for (int32_t i = 0; i < x->Configs_n; i++) {
		const struct DescribeConfigsResponse_DescribeConfigsResourceResult *e = &x->Configs[i];
		printf("%.*s=%.*s source=%s%s\n", (int)e->Name.len, e->Name.ptr, e->Value.len < 0 ? 0 : (int)e->Value.len,
		       e->Value.len < 0 ? "" : e->Value.ptr, source_name(e->ConfigSource), e->ReadOnly ? " read-only" : "");
	}
	return 0;
}

static int cmd_configs_alter(struct adm *a, const char *topic, char **kv, int nkv)
{
	struct kreader r;
	struct IncrementalAlterConfigsRequest req;
	struct IncrementalAlterConfigsRequest_AlterConfigsResource q;
	struct IncrementalAlterConfigsRequest_AlterableConfig cfg[ADM_TOPIC_CONFIGS_MAX];
	if (nkv > ADM_TOPIC_CONFIGS_MAX)
		die(2, "at most %d configs", ADM_TOPIC_CONFIGS_MAX);
	IncrementalAlterConfigsRequest_init(&req);
	IncrementalAlterConfigsRequest_AlterConfigsResource_init(&q);
	for (int i = 0; i < nkv; i++) {
		IncrementalAlterConfigsRequest_AlterableConfig_init(&cfg[i]);
		char *eq = strchr(kv[i], '=');
		if (kv[i][0] == '-' && kv[i][1] && !eq) {
			cfg[i].Name = kstr_of(kv[i] + 1);
			cfg[i].ConfigOperation = 1;   /* DELETE */
			cfg[i].Value = (struct kstr){ NULL, -1 };
		} else if (eq && eq != kv[i]) {
			cfg[i].Name = (struct kstr){ kv[i], (int32_t)(eq - kv[i]) };
			cfg[i].ConfigOperation = 0;   /* SET */
			cfg[i].Value = kstr_of(eq + 1);
		} else {
			die(2, "config '%s' is not KEY=VALUE or -KEY", kv[i]);
		}
	}
	q.ResourceType = 2;
	q.ResourceName = kstr_of(topic);
	q.Configs = cfg;
	q.Configs_n = nkv;
	req.Resources = &q;
	req.Resources_n = 1;
	ADM_CALL(a, KAPI_INCREMENTAL_ALTER_CONFIGS, 0, IncrementalAlterConfigsRequest, &req, &r);
	struct IncrementalAlterConfigsResponse resp;
	ADM_DECODE(a, IncrementalAlterConfigsResponse, 0, &r, &resp);
	if (resp.Responses_n != 1 || !kstr_eq(resp.Responses[0].ResourceName, topic))
		MALFORMED("IncrementalAlterConfigs answered %d resources for one", resp.Responses_n);
	if (resp.Responses[0].ErrorCode) {
		char what[300];
		snprintf(what, sizeof(what), "alter configs of %s", topic);
		die_kerr(what, resp.Responses[0].ErrorCode, resp.Responses[0].ErrorMessage);
	}
	printf("altered %s (%d configs)\n", topic, nkv);
	return 0;
}

int main(int argc, char **argv)
{
	const char *bootstrap = NULL;
	int i = 1;
	if (i + 1 < argc && strcmp(argv[i], "--bootstrap") == 0) {
		bootstrap = argv[i + 1];
		i += 2;
	}
	if (!bootstrap || i >= argc)
		usage();
	const char *cmd = argv[i++];
	struct adm a = { .next_corr = 1 };
	a.resp = malloc(ADM_FRAME_BYTES_MAX);
	void *arena = malloc(ADM_ARENA_BYTES);
	if (!a.resp || !arena)
		die(2, "out of memory");
	karena_init(&a.arena, arena, ADM_ARENA_BYTES);

	int rc;
	if (strcmp(cmd, "transactions") == 0) {
		int64_t older = -1;
		if (i + 2 == argc && strcmp(argv[i], "--older-than-ms") == 0)
			older = parse_int(argv[i + 1], 0, INT64_MAX, "--older-than-ms");
		else if (i != argc)
			usage();
		adm_connect(&a, bootstrap);
		rc = cmd_transactions(&a, older);
	} else if (strcmp(cmd, "producers") == 0 && i + 2 == argc) {
		int32_t part = (int32_t)parse_int(argv[i + 1], 0, INT32_MAX, "partition");
		adm_connect(&a, bootstrap);
		rc = cmd_producers(&a, argv[i], part);
	} else if (strcmp(cmd, "abort-transaction") == 0 && i + 3 == argc) {
		int32_t part = (int32_t)parse_int(argv[i + 1], 0, INT32_MAX, "partition");
		int64_t pid = parse_int(argv[i + 2], 0, INT64_MAX, "producer id");
		adm_connect(&a, bootstrap);
		rc = cmd_abort(&a, argv[i], part, pid);
	} else if (strcmp(cmd, "groups") == 0 && i == argc) {
		adm_connect(&a, bootstrap);
		rc = cmd_groups(&a);
	} else if (strcmp(cmd, "group") == 0 && i + 1 == argc) {
		adm_connect(&a, bootstrap);
		rc = cmd_group(&a, argv[i]);
	} else if (strcmp(cmd, "configs") == 0 && i + 3 == argc && strcmp(argv[i], "describe") == 0) {
		adm_connect(&a, bootstrap);
		rc = cmd_configs_describe(&a, argv[i + 1], argv[i + 2]);
	} else if (strcmp(cmd, "configs") == 0 && i + 3 <= argc && strcmp(argv[i], "alter") == 0) {
		adm_connect(&a, bootstrap);
		rc = cmd_configs_alter(&a, argv[i + 1], argv + i + 2, argc - i - 2);
	} else if (strcmp(cmd, "delete-records") == 0 && i + 3 == argc) {
		int32_t part = (int32_t)parse_int(argv[i + 1], 0, INT32_MAX, "partition");
		int64_t off = parse_int(argv[i + 2], -1, INT64_MAX, "offset");
		adm_connect(&a, bootstrap);
		rc = cmd_delete_records(&a, argv[i], part, off);
	} else if (strcmp(cmd, "topics") == 0 && i < argc) {
		adm_connect(&a, bootstrap);
		rc = cmd_topics(&a, argv + i, argc - i);
	} else {
		usage();
	}
	close(a.fd);
	free(a.req);
	free(a.resp);
	free(arena);
	return rc;
}
