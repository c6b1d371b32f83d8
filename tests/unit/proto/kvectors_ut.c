/* kvectors_ut.c: the codec against the byte-exact vectors in
 * shared/kafka-protocol/test-vectors (path given as argv[1]; exit 77 when absent),
 * plus hand-built flexible encodings with tagged fields. */
#include "kmsg.h"

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define UT_VEC_BYTES_MAX 4096
#define UT_SKIP 77

static const char *ut_dir;
static uint8_t ut_arena_mem[64 * 1024] __attribute__((aligned(8)));
static uint8_t ut_out[UT_VEC_BYTES_MAX];

struct ut_vec {
	uint8_t b[UT_VEC_BYTES_MAX];
	size_t n;
};

/* Parses "OFFSET  hh hh ..." lines, skipping '#' comments (see test-vectors/README.md). */
static int ut_load(const char *name, struct ut_vec *v)
{
	char path[512], line[256];
	snprintf(path, sizeof path, "%s/%s", ut_dir, name);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -errno;
	v->n = 0;
	while (fgets(line, sizeof line, f) != NULL) {
		if (line[0] == '#' || strlen(line) < 6)
			continue;
		for (char *p = line + 6; *p != '\0' && *p != '\n';) {
			unsigned x;
			int used;
			if (sscanf(p, " %2x%n", &x, &used) != 1)
				break;
			if (v->n == UT_VEC_BYTES_MAX) {
				fclose(f);
				return -EFBIG;
			}
			v->b[v->n++] = (uint8_t)x;
			p += used;
		}
	}
	fclose(f);
	return 0;
}

static bool ut_str_is(struct kstr s, const char *want)
{
	return s.len == (int32_t)strlen(want) && memcmp(s.ptr, want, strlen(want)) == 0;
}

/* Loads a whole frame, checks its size prefix, decodes the request header. */
static void ut_frame(const char *name, struct ut_vec *v, struct kreader *r, struct kreq_header *h)
{
	CU_ASSERT_EQUAL_FATAL(ut_load(name, v), 0);
	CU_ASSERT_FATAL(v->n > 4);
	kr_init(r, v->b, v->n);
	CU_ASSERT_EQUAL_FATAL(kr_i32(r), (int32_t)(v->n - 4));
	CU_ASSERT_EQUAL_FATAL(kreq_header_decode(r, h), 0);
}

static void test_01_apiversions_v3_librdkafka(void)
{
	static struct ut_vec v;
	struct kreader r;
	struct kreq_header h;
	struct karena a;
	struct ApiVersionsRequest req;
	ut_frame("01_apiversions_v3_request_librdkafka.hex", &v, &r, &h);
	CU_ASSERT_EQUAL(h.api_key, 18);
	CU_ASSERT_EQUAL(h.api_version, 3);
	CU_ASSERT_EQUAL(h.correlation_id, 1);
	CU_ASSERT(ut_str_is(h.client_id, "rdkafka"));
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
	CU_ASSERT_EQUAL_FATAL(ApiVersionsRequest_decode(&r, 3, &req, &a), 0);
	CU_ASSERT_PTR_EQUAL(r.p, r.end);
	CU_ASSERT(ut_str_is(req.ClientSoftwareName, "librdkafka"));
	CU_ASSERT(ut_str_is(req.ClientSoftwareVersion, "2.0.2"));

	/* Writing it back gives the same frame. */
	struct kwriter w;
	kw_init(&w, ut_out, sizeof ut_out);
	uint8_t *size = kw_reserve(&w, 4);
	kreq_header_encode(&w, &h);
	CU_ASSERT_EQUAL(ApiVersionsRequest_encode(&w, 3, &req), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(size);
	kw_put_i32(size, (int32_t)(kw_len(&w) - 4));
	CU_ASSERT_EQUAL(kw_len(&w), v.n);
	CU_ASSERT(memcmp(ut_out, v.b, v.n) == 0);
}

static void test_02_apiversions_v2_kafkajs(void)
{
	static struct ut_vec v;
	struct kreader r;
	struct kreq_header h;
	struct karena a;
	struct ApiVersionsRequest req;
	ut_frame("02_apiversions_v2_request_kafkajs.hex", &v, &r, &h);
	CU_ASSERT_EQUAL(h.api_key, 18);
	CU_ASSERT_EQUAL(h.api_version, 2);
	CU_ASSERT_EQUAL(h.correlation_id, 0);
	CU_ASSERT(ut_str_is(h.client_id, "kafkajs"));
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
	CU_ASSERT_EQUAL(ApiVersionsRequest_decode(&r, 2, &req, &a), 0);
	CU_ASSERT_PTR_EQUAL(r.p, r.end); /* empty body: no tag byte in v2 */
	CU_ASSERT_EQUAL(req.ClientSoftwareName.len, 0); /* absent: default "" */
}

/* Frames a response: size, header (per kresp_header_encode), body written by fn. */
static size_t ut_apiversions_frame(int16_t version, const struct ApiVersionsResponse *resp)
{
	struct kwriter w;
	kw_init(&w, ut_out, sizeof ut_out);
	uint8_t *size = kw_reserve(&w, 4);
	kresp_header_encode(&w, 18, version, 1);
	CU_ASSERT_EQUAL(ApiVersionsResponse_encode(&w, version, resp), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(size);
	kw_put_i32(size, (int32_t)(kw_len(&w) - 4));
	CU_ASSERT_EQUAL(kw_len(&w), 4 + kresp_header_size(18, version) +
				    ApiVersionsResponse_size(version, resp));
	return kw_len(&w);
}

static void test_03_unsupported_version_response(void)
{
	static struct ut_vec v;
	CU_ASSERT_EQUAL_FATAL(ut_load("03_apiversions_unsupported_version_response_v0.hex", &v), 0);
	struct ApiVersionsResponse_ApiVersion only = { 18, 0, 3 };
	struct ApiVersionsResponse resp;
	ApiVersionsResponse_init(&resp);
	resp.ErrorCode = 35;
	resp.ApiKeys_n = 1;
	resp.ApiKeys = &only;
	resp.ThrottleTimeMs = 100; /* absent in v0: not written */
	size_t n = ut_apiversions_frame(0, &resp);
	CU_ASSERT_EQUAL(n, v.n);
	CU_ASSERT(memcmp(ut_out, v.b, v.n) == 0);
}

static void test_04_apiversions_v3_response(void)
{
	static struct ut_vec v;
	CU_ASSERT_EQUAL_FATAL(ut_load("04_apiversions_v3_response_example.hex", &v), 0);
	struct ApiVersionsResponse_ApiVersion keys[] = { { 0, 0, 7 }, { 1, 0, 11 }, { 18, 0, 3 } };
	struct ApiVersionsResponse resp;
	ApiVersionsResponse_init(&resp);
	resp.ApiKeys_n = 3;
	resp.ApiKeys = keys;
	size_t n = ut_apiversions_frame(3, &resp);
	CU_ASSERT_EQUAL(n, v.n);
	CU_ASSERT(memcmp(ut_out, v.b, v.n) == 0);

	/* And back: header v0 (no tag byte), compact body. */
	struct kreader r;
	struct karena a;
	struct ApiVersionsResponse back;
	kr_init(&r, v.b + 8, v.n - 8);
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
	CU_ASSERT_EQUAL_FATAL(ApiVersionsResponse_decode(&r, 3, &back, &a), 0);
	CU_ASSERT_PTR_EQUAL(r.p, r.end);
	CU_ASSERT_EQUAL_FATAL(back.ApiKeys_n, 3);
	CU_ASSERT_EQUAL(back.ApiKeys[1].ApiKey, 1);
	CU_ASSERT_EQUAL(back.ApiKeys[1].MaxVersion, 11);
	CU_ASSERT_EQUAL(back.FinalizedFeaturesEpoch, -1); /* tagged, absent: default */
	CU_ASSERT_EQUAL(back.SupportedFeatures_n, 0);
}

static void test_07_produce_v7(void)
{
	static struct ut_vec v, batch;
	struct kreader r;
	struct kreq_header h;
	struct karena a;
	struct ProduceRequest req;
	CU_ASSERT_EQUAL_FATAL(ut_load("05_record_batch_v2_transactional.hex", &batch), 0);
	ut_frame("07_produce_v7_request_transactional.hex", &v, &r, &h);
	CU_ASSERT_EQUAL(h.api_key, 0);
	CU_ASSERT_EQUAL(h.api_version, 7);
	CU_ASSERT_EQUAL(h.correlation_id, 5);
	CU_ASSERT(ut_str_is(h.client_id, "rdkafka"));
	size_t body_at = (size_t)(r.p - v.b);
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
	CU_ASSERT_EQUAL_FATAL(ProduceRequest_decode(&r, 7, &req, &a), 0);
	CU_ASSERT_PTR_EQUAL(r.p, r.end);
	CU_ASSERT(ut_str_is(req.TransactionalId, "my-txn"));
	CU_ASSERT_EQUAL(req.Acks, -1);
	CU_ASSERT_EQUAL(req.TimeoutMs, 30000);
	CU_ASSERT_EQUAL_FATAL(req.TopicData_n, 1);
	CU_ASSERT(ut_str_is(req.TopicData[0].Name, "test"));
	CU_ASSERT_EQUAL_FATAL(req.TopicData[0].PartitionData_n, 1);
	const struct ProduceRequest_PartitionProduceData *p = &req.TopicData[0].PartitionData[0];
	CU_ASSERT_EQUAL(p->Index, 0);
	CU_ASSERT_EQUAL_FATAL(p->Records.len, (int32_t)batch.n);
	CU_ASSERT(memcmp(p->Records.ptr, batch.b, batch.n) == 0);
	/* Zero copy: the records point into the frame. */
	CU_ASSERT(p->Records.ptr > v.b && p->Records.ptr + p->Records.len == v.b + v.n);

	struct kwriter w;
	kw_init(&w, ut_out, sizeof ut_out);
	CU_ASSERT_EQUAL(ProduceRequest_encode(&w, 7, &req), 0);
	CU_ASSERT_EQUAL(kw_len(&w), v.n - body_at);
	CU_ASSERT(memcmp(ut_out, v.b + body_at, v.n - body_at) == 0);
}

static void test_08_kafkajs_produce_v7_body(void)
{
	static struct ut_vec v;
	struct kreader r;
	struct karena a;
	struct ProduceRequest req;
	CU_ASSERT_EQUAL_FATAL(ut_load("08_kafkajs_produce_v7_body_fixture.hex", &v), 0);
	CU_ASSERT_EQUAL(v.n, 1139);
	kr_init(&r, v.b, v.n);
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
	CU_ASSERT_EQUAL_FATAL(ProduceRequest_decode(&r, 7, &req, &a), 0);
	CU_ASSERT_PTR_EQUAL(r.p, r.end);
	CU_ASSERT_EQUAL(req.TransactionalId.len, -1);
	CU_ASSERT_EQUAL(req.Acks, -1);
	CU_ASSERT_EQUAL(req.TimeoutMs, 30000);
	CU_ASSERT_EQUAL_FATAL(req.TopicData_n, 1);
	struct kstr name = req.TopicData[0].Name;
	CU_ASSERT(name.len == 72 && memcmp(name.ptr, "test-topic-", 11) == 0);
	CU_ASSERT_EQUAL_FATAL(req.TopicData[0].PartitionData_n, 1);
	struct kbytes rec = req.TopicData[0].PartitionData[0].Records;
	CU_ASSERT_EQUAL_FATAL(rec.len, 0x411);
	struct kreader br;
	kr_init(&br, rec.ptr, (size_t)rec.len);
	CU_ASSERT_EQUAL(kr_i64(&br), 0);                 /* baseOffset */
	CU_ASSERT_EQUAL(kr_i32(&br), rec.len - 12);      /* batchLength */
	(void)kr_i32(&br);
	CU_ASSERT_EQUAL(kr_i8(&br), 2);                  /* magic */
	CU_ASSERT_EQUAL(kr_u32(&br), 0x4409269e);        /* crc */
	kr_skip(&br, 2 + 4 + 8 + 8);
	CU_ASSERT_EQUAL(kr_i64(&br), 4004);              /* producerId */

	struct kwriter w;
	kw_init(&w, ut_out, sizeof ut_out);
	CU_ASSERT_EQUAL(ProduceRequest_encode(&w, 7, &req), 0);
	CU_ASSERT_EQUAL(kw_len(&w), v.n);
	CU_ASSERT(memcmp(ut_out, v.b, v.n) == 0);
}

/* Hand-built from README §2.4/2.5: FetchResponse v12 with one topic and one partition
 * whose CurrentLeader (tag 1) is set; every other tagged field is at its default. */
static void test_fetch_v12_tagged_by_hand(void)
{
	static const uint8_t want[] = {
		0, 0, 0, 0,             /* ThrottleTimeMs */
		0, 0,                   /* ErrorCode */
		0, 0, 0, 7,             /* SessionId 7 */
		2,                      /* Responses: compact count 1 */
		3, 't', 'p',            /* Topic "tp" */
		2,                      /* Partitions: 1 */
		0, 0, 0, 4,             /* PartitionIndex 4 */
		0, 0,                   /* ErrorCode */
		0, 0, 0, 0, 0, 0, 0, 9, /* HighWatermark 9 */
		0, 0, 0, 0, 0, 0, 0, 8, /* LastStableOffset 8 */
		0, 0, 0, 0, 0, 0, 0, 0, /* LogStartOffset 0 */
		1,                      /* AbortedTransactions: null (compact 0) -> 1 = empty */
		0xff, 0xff, 0xff, 0xff, /* PreferredReadReplica -1 */
		4, 0xaa, 0xbb, 0xcc,    /* Records: 3 bytes */
		1,                      /* partition tags: 1 field */
		1, 9,                   /* tag 1 (CurrentLeader), 9 bytes: */
		0, 0, 0, 2, 0, 0, 0, 5, /*   LeaderId 2, LeaderEpoch 5 */
		0,                      /*   its own (empty) tag section */
		0,                      /* topic tags */
		0,                      /* body tags */
	};
	static const uint8_t recs[] = { 0xaa, 0xbb, 0xcc };
	struct FetchResponse_PartitionData p;
	struct FetchResponse_FetchableTopicResponse t;
	struct FetchResponse resp;
	FetchResponse_init(&resp);
	FetchResponse_FetchableTopicResponse_init(&t);
	FetchResponse_PartitionData_init(&p); /* tagged structs at default: not written */
	p.PartitionIndex = 4;
	p.HighWatermark = 9;
	p.LastStableOffset = 8;
	p.LogStartOffset = 0;
	p.CurrentLeader = (struct FetchResponse_LeaderIdAndEpoch){ 2, 5 };
	p.Records = (struct kbytes){ recs, 3 };
	t.Topic = (struct kstr){ "tp", 2 };
	t.Partitions_n = 1;
	t.Partitions = &p;
	resp.SessionId = 7;
	resp.Responses_n = 1;
	resp.Responses = &t;
	struct kwriter w;
	kw_init(&w, ut_out, sizeof ut_out);
	CU_ASSERT_EQUAL(FetchResponse_encode(&w, 12, &resp), 0);
	CU_ASSERT_EQUAL(kw_len(&w), sizeof want);
	CU_ASSERT_EQUAL(FetchResponse_size(12, &resp), sizeof want);
	for (size_t i = 0; i < sizeof want; i++)
		if (ut_out[i] != want[i])
			printf("\nbyte %zu: %02x, want %02x\n", i, ut_out[i], want[i]);
	CU_ASSERT(memcmp(ut_out, want, sizeof want) == 0);

	/* Decoding it back finds the tagged field; an unknown tag (9) is skipped. */
	static uint8_t with_unknown[sizeof want + 3];
	const size_t tags_at = 54; /* the partition's tag count */
	CU_ASSERT_EQUAL_FATAL(want[tags_at], 1);
	memcpy(with_unknown, want, tags_at);
	with_unknown[tags_at] = 2;
	memcpy(with_unknown + tags_at + 1, want + tags_at + 1, 11); /* tag 1 first */
	with_unknown[tags_at + 12] = 9;                             /* then tag 9, */
	with_unknown[tags_at + 13] = 1;                             /* 1 byte */
	with_unknown[tags_at + 14] = 0x77;
	memcpy(with_unknown + tags_at + 15, want + tags_at + 12, sizeof want - tags_at - 12);
	struct kreader r;
	struct karena a;
	struct FetchResponse back;
	kr_init(&r, with_unknown, sizeof with_unknown);
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
	CU_ASSERT_EQUAL_FATAL(FetchResponse_decode(&r, 12, &back, &a), 0);
	CU_ASSERT_PTR_EQUAL(r.p, r.end);
	CU_ASSERT_EQUAL_FATAL(back.Responses_n, 1);
	CU_ASSERT_EQUAL_FATAL(back.Responses[0].Partitions_n, 1);
	const struct FetchResponse_PartitionData *bp = &back.Responses[0].Partitions[0];
	CU_ASSERT_EQUAL(bp->CurrentLeader.LeaderId, 2);
	CU_ASSERT_EQUAL(bp->CurrentLeader.LeaderEpoch, 5);
	CU_ASSERT_EQUAL(bp->SnapshotId.EndOffset, -1);
	CU_ASSERT_EQUAL(bp->Records.len, 3);
	CU_ASSERT_EQUAL(bp->LastStableOffset, 8);
}

/* InitProducerId v4 (flexible) request as librdkafka sends it for an idempotent
 * producer: null transactional id (compact 0), timeout, pid -1, epoch -1, tags. */
static void test_init_producer_id_v4_by_hand(void)
{
	static const uint8_t body[] = {
		0,                      /* TransactionalId: null */
		0x7f, 0xff, 0xff, 0xff, /* TransactionTimeoutMs */
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* ProducerId -1 */
		0xff, 0xff,             /* ProducerEpoch -1 */
		0,                      /* tags */
	};
	struct kreader r;
	struct karena a;
	struct InitProducerIdRequest req;
	kr_init(&r, body, sizeof body);
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
	CU_ASSERT_EQUAL_FATAL(InitProducerIdRequest_decode(&r, 4, &req, &a), 0);
	CU_ASSERT_PTR_EQUAL(r.p, r.end);
	CU_ASSERT_EQUAL(req.TransactionalId.len, -1);
	CU_ASSERT_EQUAL(req.TransactionTimeoutMs, 0x7fffffff);
	CU_ASSERT_EQUAL(req.ProducerId, -1);
	CU_ASSERT_EQUAL(req.ProducerEpoch, -1);
	/* The response: header v1 (tag byte), then ThrottleTimeMs, ErrorCode, pid, epoch. */
	struct InitProducerIdResponse resp = { .ProducerId = 1000, .ProducerEpoch = 0 };
	static const uint8_t want[] = {
		0, 0, 0, 9, 0,                /* correlation id 9, header tags */
		0, 0, 0, 0, 0, 0,             /* ThrottleTimeMs, ErrorCode */
		0, 0, 0, 0, 0, 0, 0x03, 0xe8, /* ProducerId 1000 */
		0, 0, 0,                      /* ProducerEpoch 0, tags */
	};
	struct kwriter w;
	kw_init(&w, ut_out, sizeof ut_out);
	kresp_header_encode(&w, 22, 4, 9);
	CU_ASSERT_EQUAL(InitProducerIdResponse_encode(&w, 4, &resp), 0);
	CU_ASSERT_EQUAL(kw_len(&w), sizeof want);
	CU_ASSERT(memcmp(ut_out, want, sizeof want) == 0);
}

int main(int argc, char **argv)
{
	struct stat st;
	if (argc < 2 || stat(argv[1], &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "kvectors_ut: no test-vectors folder (%s): skipped\n",
			argc < 2 ? "no argument" : argv[1]);
		return UT_SKIP;
	}
	ut_dir = argv[1];
	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	CU_pSuite s = CU_add_suite("kvectors", NULL, NULL);
	CU_add_test(s, "01 ApiVersions v3 request (librdkafka)", test_01_apiversions_v3_librdkafka);
	CU_add_test(s, "02 ApiVersions v2 request (kafkajs)", test_02_apiversions_v2_kafkajs);
	CU_add_test(s, "03 UNSUPPORTED_VERSION response (v0 body)", test_03_unsupported_version_response);
	CU_add_test(s, "04 ApiVersions v3 response", test_04_apiversions_v3_response);
	CU_add_test(s, "07 Produce v7 transactional request", test_07_produce_v7);
	CU_add_test(s, "08 kafkajs Produce v7 body", test_08_kafkajs_produce_v7_body);
	CU_add_test(s, "FetchResponse v12 tagged fields (by hand)", test_fetch_v12_tagged_by_hand);
	CU_add_test(s, "InitProducerId v4 (by hand)", test_init_producer_id_v4_by_hand);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
