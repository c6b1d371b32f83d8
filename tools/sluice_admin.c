/*
 * sluice-admin - a small Kafka admin client for transactions (KIP-664).
 *
 *   sluice-admin --bootstrap HOST:PORT transactions [--older-than-ms N]
 *   sluice-admin --bootstrap HOST:PORT producers TOPIC PARTITION
 *   sluice-admin --bootstrap HOST:PORT abort-transaction TOPIC PARTITION PRODUCER_ID
 *
 * transactions: ListTransactions v0, then DescribeTransactions v0 for the ids
 * it names; one line per id. With --older-than-ms only Ongoing transactions
 * that started at least N ms ago ("hanging" ones).
 * producers: DescribeProducers v0 for one partition.
 * abort-transaction: DescribeProducers to learn the producer's epoch and
 * coordinator epoch on the partition, then WriteTxnMarkers v1 with an ABORT
 * marker for that partition only, as Kafka's kafka-transactions.sh does.
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

#include "kmsg.h"
#include "kwire.h"

#define ADM_API_WRITE_TXN_MARKERS 27
#define ADM_API_DESCRIBE_PRODUCERS 61
#define ADM_API_DESCRIBE_TRANSACTIONS 65
#define ADM_API_LIST_TRANSACTIONS 66
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

static const struct { int16_t code; const char *name; } err_names[] = {
	{ -1, "UNKNOWN_SERVER_ERROR" }, { 0, "NONE" }, { 2, "CORRUPT_MESSAGE" },
	{ 3, "UNKNOWN_TOPIC_OR_PARTITION" }, { 6, "NOT_LEADER_OR_FOLLOWER" },
	{ 14, "COORDINATOR_LOAD_IN_PROGRESS" }, { 15, "COORDINATOR_NOT_AVAILABLE" },
	{ 16, "NOT_COORDINATOR" }, { 35, "UNSUPPORTED_VERSION" }, { 42, "INVALID_REQUEST" },
	{ 47, "INVALID_PRODUCER_EPOCH" }, { 48, "INVALID_TXN_STATE" },
	{ 49, "INVALID_PRODUCER_ID_MAPPING" }, { 51, "CONCURRENT_TRANSACTIONS" },
	{ 52, "TRANSACTION_COORDINATOR_FENCED" }, { 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" },
	{ 59, "UNKNOWN_PRODUCER_ID" }, { 90, "PRODUCER_FENCED" }, { 105, "TRANSACTIONAL_ID_NOT_FOUND" },
};

static const char *err_name(int16_t code)
{
	for (size_t i = 0; i < sizeof(err_names) / sizeof(err_names[0]); i++)
		if (err_names[i].code == code)
			return err_names[i].name;
	return "?";
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

/* A reply that breaks the protocol. */
#define MALFORMED(...) die(1, "malformed reply: " __VA_ARGS__)

static void usage(void)
{
	fputs("usage: sluice-admin --bootstrap HOST:PORT transactions [--older-than-ms N]\n"
	      "       sluice-admin --bootstrap HOST:PORT producers TOPIC PARTITION\n"
	      "       sluice-admin --bootstrap HOST:PORT abort-transaction TOPIC PARTITION PRODUCER_ID\n",
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
	ADM_CALL(a, ADM_API_LIST_TRANSACTIONS, 0, ListTransactionsRequest, &lreq, &r);
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
		ADM_CALL(a, ADM_API_DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest, &dreq, &r);
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
	ADM_CALL(a, ADM_API_DESCRIBE_PRODUCERS, 0, DescribeProducersRequest, &req, &r);
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
	if (found->ErrorCode)
		die(1, "DescribeProducers %s-%d: error %d (%s)%s%.*s", topic, partition, found->ErrorCode,
		    err_name(found->ErrorCode), found->ErrorMessage.len > 0 ? ": " : "",
		    found->ErrorMessage.len > 0 ? found->ErrorMessage.len : 0, found->ErrorMessage.ptr);
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
	ADM_CALL(a, ADM_API_WRITE_TXN_MARKERS, 1, WriteTxnMarkersRequest, &req, &r);
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
	} else {
		usage();
	}
	close(a.fd);
	free(a.req);
	free(a.resp);
	free(arena);
	return rc;
}
