/* kcodec_ut.c: generic tests of the generated codec over every schema and version:
 * round trips, exact sizes, truncated and mutated input, hostile counts, defaults. */
#include "kfill.h"

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>

#define UT_BUF_BYTES (64 * 1024)
#define UT_ARENA_BYTES (256 * 1024)
#define UT_MUTATIONS 40

static uint8_t ut_buf[UT_BUF_BYTES], ut_buf2[UT_BUF_BYTES];
static uint8_t ut_arena_mem[UT_ARENA_BYTES] __attribute__((aligned(8)));
static uint8_t ut_arena2_mem[UT_ARENA_BYTES] __attribute__((aligned(8)));
static uint8_t ut_msg[8192] __attribute__((aligned(8)));
static uint8_t ut_msg2[8192] __attribute__((aligned(8)));

/* Encodes msg; checks size() against the bytes written. Returns the length. */
static size_t ut_encode(const struct kschema *s, int16_t v, const void *msg, uint8_t *buf)
{
	struct kwriter w;
	kw_init(&w, buf, UT_BUF_BYTES);
	int rc = kcodec_encode(s, &w, v, msg);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	size_t n = kw_len(&w);
	if (kcodec_size(s, v, msg) != n)
		printf("\n%s v%d: size %zu, wrote %zu\n", s->name, v, kcodec_size(s, v, msg), n);
	CU_ASSERT_EQUAL(kcodec_size(s, v, msg), n);
	return n;
}

/* fill -> encode -> decode -> compare -> re-encode -> same bytes. */
static void ut_round_trip(const struct kschema *s, int16_t v, enum kfill_mode mode, uint32_t seed)
{
	struct karena a, a2;
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
	karena_init(&a2, ut_arena2_mem, sizeof ut_arena2_mem);
	CU_ASSERT_FATAL(s->size <= sizeof ut_msg);
	CU_ASSERT_EQUAL_FATAL(kfill(s, v, mode, seed, ut_msg, &a), 0);
	size_t n = ut_encode(s, v, ut_msg, ut_buf);

	struct kreader r;
	kr_init(&r, ut_buf, n);
	int rc = kcodec_decode(s, &r, v, ut_msg2, &a2);
	if (rc != 0 || r.p != r.end || !kequal(s, ut_msg, ut_msg2))
		printf("\n%s v%d mode %d: rc %d, left %zu\n", s->name, v, mode, rc, kr_left(&r));
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_PTR_EQUAL(r.p, r.end);
	CU_ASSERT(kequal(s, ut_msg, ut_msg2));

	size_t n2 = ut_encode(s, v, ut_msg2, ut_buf2);
	CU_ASSERT_EQUAL(n, n2);
	CU_ASSERT(memcmp(ut_buf, ut_buf2, n) == 0);
}

static void test_round_trip_all(void)
{
	unsigned versions = 0;
	for (const struct kschema *const *sp = kmsg_all_schemas; *sp; sp++) {
		const struct kschema *s = *sp;
		CU_ASSERT(s->valid.lo <= s->valid.hi);
		for (int16_t v = s->valid.lo; v <= s->valid.hi; v++) {
			ut_round_trip(s, v, KFILL_FULL, 1u + (uint32_t)v);
			ut_round_trip(s, v, KFILL_NULLS, 7u + (uint32_t)v);
			versions++;
		}
	}
	/* Every request and response of the 25 api keys, plus the two data schemas. */
	CU_ASSERT(versions > 250);
}

/* The versions the broker advertises (VERSIONS.md) must all exist in the schemas. */
static void test_advertised_versions_exist(void)
{
	static const struct { int16_t key, max; } adv[] = {
		{ 0, 7 }, { 1, 11 }, { 2, 3 }, { 3, 9 }, { 18, 3 }, { 19, 4 }, { 20, 4 },
		{ 22, 4 }, { 10, 2 }, { 24, 1 }, { 25, 1 }, { 26, 1 }, { 28, 3 }, { 8, 7 },
		{ 9, 7 }, { 11, 5 }, { 14, 3 }, { 12, 3 }, { 13, 3 }, { 61, 0 }, { 65, 0 },
		{ 66, 0 }, { 32, 1 }, { 27, 1 }, { 17, 1 },
	};
	for (size_t i = 0; i < sizeof adv / sizeof adv[0]; i++) {
		const struct kapi_info *info = kapi_info(adv[i].key);
		CU_ASSERT_PTR_NOT_NULL_FATAL(info);
		CU_ASSERT_EQUAL(info->key, adv[i].key);
		CU_ASSERT(info->min_version == 0 && info->max_version >= adv[i].max);
		CU_ASSERT_PTR_NOT_NULL(kmsg_request_schema(adv[i].key));
		CU_ASSERT_PTR_NOT_NULL(kmsg_response_schema(adv[i].key));
	}
	CU_ASSERT_PTR_NULL(kapi_info(-1));
	CU_ASSERT_PTR_NULL(kapi_info(4)); /* LeaderAndIsr: not a client api */
	CU_ASSERT_PTR_NULL(kapi_info(1000));
	CU_ASSERT_STRING_EQUAL(kapi_info(KAPI_PRODUCE)->name, "Produce");
	CU_ASSERT_EQUAL(kapi_info(KAPI_METADATA)->flexible_min, 9);
	CU_ASSERT_EQUAL(kapi_info(KAPI_SASL_HANDSHAKE)->flexible_min, -1);
	CU_ASSERT(!kapi_flexible(KAPI_METADATA, 8) && kapi_flexible(KAPI_METADATA, 9) && kapi_flexible(KAPI_METADATA, 12));
	CU_ASSERT(!kapi_flexible(KAPI_METADATA, 13)); /* beyond the schema */
	CU_ASSERT(kapi_flexible(KAPI_DESCRIBE_PRODUCERS, 0) && !kapi_flexible(KAPI_SASL_HANDSHAKE, 1) && !kapi_flexible(99, 0));
}

/* Every strict prefix of a valid encoding must fail to decode: the decoder follows
 * the same path as on the full input until it needs a byte that is not there. The
 * prefix sits in an exactly-sized heap block so ASan sees any read past it. */
static void test_truncated_prefixes(void)
{
	for (const struct kschema *const *sp = kmsg_all_schemas; *sp; sp++) {
		const struct kschema *s = *sp;
		for (int16_t v = s->valid.lo; v <= s->valid.hi; v++) {
			struct karena a;
			karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
			CU_ASSERT_EQUAL_FATAL(kfill(s, v, KFILL_FULL, 3, ut_msg, &a), 0);
			size_t n = ut_encode(s, v, ut_msg, ut_buf);
			for (size_t len = 0; len < n; len++) {
				uint8_t *copy = malloc(len ? len : 1);
				CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
				memcpy(copy, ut_buf, len);
				struct kreader r;
				struct karena a2;
				kr_init(&r, copy, len);
				karena_init(&a2, ut_arena2_mem, sizeof ut_arena2_mem);
				int rc = kcodec_decode(s, &r, v, ut_msg2, &a2);
				if (rc != -EBADMSG)
					printf("\n%s v%d prefix %zu/%zu: rc %d\n", s->name, v, len, n, rc);
				CU_ASSERT_EQUAL(rc, -EBADMSG);
				CU_ASSERT(r.p <= r.end);
				free(copy);
			}
		}
	}
}

/* Random byte changes: decoding either fails or yields a message that encodes to
 * exactly size() bytes and decodes again. */
static void test_mutations(void)
{
	uint32_t seed = 12345;
	unsigned ok = 0, bad = 0;
	for (const struct kschema *const *sp = kmsg_all_schemas; *sp; sp++) {
		const struct kschema *s = *sp;
		for (int16_t v = s->valid.lo; v <= s->valid.hi; v++) {
			struct karena a;
			karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
			CU_ASSERT_EQUAL_FATAL(kfill(s, v, KFILL_FULL, 5, ut_msg, &a), 0);
			size_t n = ut_encode(s, v, ut_msg, ut_buf);
			for (int m = 0; m < UT_MUTATIONS && n > 0; m++) {
				uint8_t *copy = malloc(n);
				CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
				memcpy(copy, ut_buf, n);
				for (int k = 0; k < 1 + m % 3; k++) {
					seed = seed * 1103515245u + 12345u;
					copy[(seed >> 8) % n] = (uint8_t)(seed >> 20);
				}
				struct kreader r;
				struct karena a2;
				kr_init(&r, copy, n);
				karena_init(&a2, ut_arena2_mem, sizeof ut_arena2_mem);
				int rc = kcodec_decode(s, &r, v, ut_msg2, &a2);
				CU_ASSERT(r.p <= r.end);
				if (rc != 0) {
					CU_ASSERT(rc == -EBADMSG);
					bad++;
					free(copy);
					continue;
				}
				ok++;
				struct kwriter w;
				kw_init(&w, ut_buf2, sizeof ut_buf2);
				CU_ASSERT_EQUAL(kcodec_encode(s, &w, v, ut_msg2), 0);
				CU_ASSERT_EQUAL(kw_len(&w), kcodec_size(s, v, ut_msg2));
				kr_init(&r, ut_buf2, kw_len(&w));
				CU_ASSERT_EQUAL(kcodec_decode(s, &r, v, ut_msg, &a), 0);
				CU_ASSERT_PTR_EQUAL(r.p, r.end);
				free(copy);
			}
		}
	}
	CU_ASSERT(ok > 0 && bad > 0); /* both outcomes were exercised */
}

static void test_hostile_counts(void)
{
	struct karena a;
	struct kreader r;
	struct ProduceRequest pr;
	/* Produce v7: TransactionalId null, Acks -1, TimeoutMs 0, TopicData count 2^31-1. */
	static const uint8_t produce[] = { 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
					   0x7f, 0xff, 0xff, 0xff, 0, 1, 'x' };
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
	kr_init(&r, produce, sizeof produce);
	CU_ASSERT_EQUAL(ProduceRequest_decode(&r, 7, &pr, &a), -EBADMSG);
	CU_ASSERT_EQUAL(a.used, 0); /* rejected before any allocation */

	/* Count -2 is neither null nor a count. */
	static const uint8_t neg[] = { 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe };
	kr_init(&r, neg, sizeof neg);
	CU_ASSERT_EQUAL(ProduceRequest_decode(&r, 7, &pr, &a), -EBADMSG);
	/* Null TopicData: not nullable. */
	static const uint8_t null_arr[] = { 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff };
	kr_init(&r, null_arr, sizeof null_arr);
	CU_ASSERT_EQUAL(ProduceRequest_decode(&r, 7, &pr, &a), -EBADMSG);

	/* A null topic name (never nullable), classic and compact. */
	static const uint8_t null_name[] = { 0xff, 0xff, 0, 0, 0, 0, 0, 0, /* txn, acks, timeout */
					     0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 0 };
	kr_init(&r, null_name, sizeof null_name);
	CU_ASSERT_EQUAL(ProduceRequest_decode(&r, 7, &pr, &a), -EBADMSG);
	static uint8_t null_cname[] = { 0, 0, 0, 0, 0, 0, 0, /* txn, acks, timeout */
					2, 0, 1, 0, 0 };
	kr_init(&r, null_cname, sizeof null_cname);
	CU_ASSERT_EQUAL(ProduceRequest_decode(&r, 9, &pr, &a), -EBADMSG);
	null_cname[8] = 1; /* the same with an empty name decodes */
	kr_init(&r, null_cname, sizeof null_cname);
	CU_ASSERT_EQUAL(ProduceRequest_decode(&r, 9, &pr, &a), 0);
	karena_reset(&a);

	/* Metadata v9 (flexible): Topics compact count uvarint 0xffffffff - 1 elements. */
	struct MetadataRequest mr;
	static const uint8_t meta[] = { 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 0, 0, 0 };
	kr_init(&r, meta, sizeof meta);
	CU_ASSERT_EQUAL(MetadataRequest_decode(&r, 9, &mr, &a), -EBADMSG);
	CU_ASSERT_EQUAL(a.used, 0);
	/* A count equal to the bytes left passes the bound, then runs out of input. */
	static const uint8_t meta2[] = { 0x05, 0, 0, 0, 0 };
	kr_init(&r, meta2, sizeof meta2);
	CU_ASSERT_EQUAL(MetadataRequest_decode(&r, 9, &mr, &a), -EBADMSG);
	/* A 6-byte uvarint. */
	static const uint8_t meta3[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0, 0, 0 };
	kr_init(&r, meta3, sizeof meta3);
	CU_ASSERT_EQUAL(MetadataRequest_decode(&r, 9, &mr, &a), -EBADMSG);
	/* A hostile tag count with nothing behind it. */
	static const uint8_t meta4[] = { 0x01, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f };
	kr_init(&r, meta4, sizeof meta4);
	CU_ASSERT_EQUAL(MetadataRequest_decode(&r, 9, &mr, &a), -EBADMSG);
	/* A tagged field whose size runs past the end. */
	static const uint8_t meta5[] = { 0x01, 0, 0, 0x01, 0x05, 0x7f, 0 };
	kr_init(&r, meta5, sizeof meta5);
	CU_ASSERT_EQUAL(MetadataRequest_decode(&r, 9, &mr, &a), -EBADMSG);
}

/* A valid message with more array elements than the arena holds: -ENOMEM, no crash. */
static void test_arena_exhausted(void)
{
	struct karena a;
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
	CU_ASSERT_EQUAL_FATAL(kfill(&kschema_ProduceRequest, 7, KFILL_FULL, 1, ut_msg, &a), 0);
	size_t n = ut_encode(&kschema_ProduceRequest, 7, ut_msg, ut_buf);
	for (size_t cap = 0; cap < 4 * sizeof(struct ProduceRequest_TopicProduceData); cap += 8) {
		struct kreader r;
		struct karena small;
		kr_init(&r, ut_buf, n);
		karena_init(&small, ut_arena2_mem, cap);
		CU_ASSERT_EQUAL(ProduceRequest_decode(&r, 7, (void *)ut_msg2, &small), -ENOMEM);
		CU_ASSERT(small.used <= cap);
	}
}

/* Fields absent in a version decode to the schema's default. */
static void test_defaults(void)
{
	struct karena a;
	struct kreader r;
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);

	/* Produce v2: no TransactionalId (3+): default null. Acks 1, timeout 5, 0 topics. */
	static const uint8_t p2[] = { 0, 1, 0, 0, 0, 5, 0, 0, 0, 0 };
	struct ProduceRequest pr;
	kr_init(&r, p2, sizeof p2);
	CU_ASSERT_EQUAL_FATAL(ProduceRequest_decode(&r, 2, &pr, &a), 0);
	CU_ASSERT_EQUAL(pr.TransactionalId.len, -1);
	CU_ASSERT_EQUAL(pr.Acks, 1);
	CU_ASSERT_EQUAL(pr.TimeoutMs, 5);
	CU_ASSERT_EQUAL(pr.TopicData_n, 0);

	/* Metadata v0: null-less topics array of 0; AllowAutoTopicCreation (4+) defaults true. */
	static const uint8_t m0[] = { 0, 0, 0, 0 };
	struct MetadataRequest mr;
	kr_init(&r, m0, sizeof m0);
	CU_ASSERT_EQUAL_FATAL(MetadataRequest_decode(&r, 0, &mr, &a), 0);
	CU_ASSERT_EQUAL(mr.Topics_n, 0);
	CU_ASSERT(mr.AllowAutoTopicCreation);
	/* Topics null is allowed from v1 only. */
	static const uint8_t m1[] = { 0xff, 0xff, 0xff, 0xff };
	kr_init(&r, m1, sizeof m1);
	CU_ASSERT_EQUAL(MetadataRequest_decode(&r, 0, &mr, &a), -EBADMSG);
	kr_init(&r, m1, sizeof m1);
	CU_ASSERT_EQUAL(MetadataRequest_decode(&r, 1, &mr, &a), 0);
	CU_ASSERT_EQUAL(mr.Topics_n, -1);
	CU_ASSERT_PTR_NULL(mr.Topics);

	/* Fetch v3: ReplicaId -1 ... IsolationLevel (4+) 0, SessionEpoch (7+) -1. */
	struct FetchRequest fr;
	kcodec_defaults(&kschema_FetchRequest, &fr);
	CU_ASSERT_EQUAL(fr.SessionEpoch, -1);
	CU_ASSERT_EQUAL(fr.ReplicaId, -1);
	CU_ASSERT_EQUAL(fr.MaxBytes, 0x7fffffff);
	CU_ASSERT_EQUAL(fr.ClusterId.len, -1);
	CU_ASSERT_EQUAL(fr.ReplicaState.ReplicaEpoch, -1);

	/* <Struct>_init sets defaults in nested structs too. */
	struct ProduceResponse_PartitionProduceResponse pp;
	memset(&pp, 0x5a, sizeof pp);
	ProduceResponse_PartitionProduceResponse_init(&pp);
	CU_ASSERT(pp.Index == 0 && pp.ErrorCode == 0 && pp.BaseOffset == 0);
	CU_ASSERT(pp.LogAppendTimeMs == -1 && pp.LogStartOffset == -1);
	CU_ASSERT(pp.CurrentLeader.LeaderId == -1 && pp.CurrentLeader.LeaderEpoch == -1);
	CU_ASSERT(pp.RecordErrors_n == 0 && pp.RecordErrors == NULL && pp.ErrorMessage.len == -1);

	/* Version outside validVersions. */
	kr_init(&r, m0, sizeof m0);
	CU_ASSERT_EQUAL(MetadataRequest_decode(&r, 13, &mr, &a), -EBADMSG);
	struct kwriter w;
	kw_init(&w, ut_buf, sizeof ut_buf);
	CU_ASSERT_EQUAL(MetadataRequest_encode(&w, 13, &mr), -EINVAL);
	CU_ASSERT_EQUAL(MetadataRequest_size(13, &mr), 0);
}

/* Unencodable values: -EINVAL; too small a buffer: -ENOSPC without overrun. */
static void test_encode_errors(void)
{
	struct ProduceResponse resp;
	struct ProduceResponse_TopicProduceResponse t;
	struct kwriter w;
	kcodec_defaults(&kschema_ProduceResponse, &resp);
	memset(&t, 0, sizeof t); /* zeroed: empty name, no partitions: encodable */
	resp.Responses = &t;
	resp.Responses_n = 1;
	kw_init(&w, ut_buf, sizeof ut_buf);
	CU_ASSERT_EQUAL(ProduceResponse_encode(&w, 7, &resp), 0);
	CU_ASSERT_EQUAL(kw_len(&w), ProduceResponse_size(7, &resp));

	t.Name = (struct kstr){ NULL, -1 }; /* Name is never nullable */
	kw_init(&w, ut_buf, sizeof ut_buf);
	CU_ASSERT_EQUAL(ProduceResponse_encode(&w, 7, &resp), -EINVAL);
	t.Name = (struct kstr){ NULL, 3 }; /* length without bytes */
	kw_init(&w, ut_buf, sizeof ut_buf);
	CU_ASSERT_EQUAL(ProduceResponse_encode(&w, 7, &resp), -EINVAL);
	t.Name = (struct kstr){ "t", 1 };
	resp.Responses_n = -1; /* Responses is never nullable */
	kw_init(&w, ut_buf, sizeof ut_buf);
	CU_ASSERT_EQUAL(ProduceResponse_encode(&w, 7, &resp), -EINVAL);
	resp.Responses_n = 2;
	resp.Responses = NULL;
	kw_init(&w, ut_buf, sizeof ut_buf);
	CU_ASSERT_EQUAL(ProduceResponse_encode(&w, 7, &resp), -EINVAL);

	/* Every buffer size short of the full encoding: -ENOSPC, nothing written past it. */
	struct karena a;
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
	CU_ASSERT_EQUAL_FATAL(kfill(&kschema_FetchResponse, 12, KFILL_FULL, 9, ut_msg, &a), 0);
	size_t n = ut_encode(&kschema_FetchResponse, 12, ut_msg, ut_buf);
	for (size_t cap = 0; cap < n; cap++) {
		memset(ut_buf2, 0xa5, n + 16);
		kw_init(&w, ut_buf2, cap);
		CU_ASSERT_EQUAL(FetchResponse_encode(&w, 12, (void *)ut_msg), -ENOSPC);
		CU_ASSERT(w.p <= w.end);
		CU_ASSERT(memcmp(ut_buf2, ut_buf, kw_len(&w)) == 0);
		CU_ASSERT_EQUAL(ut_buf2[cap], 0xa5);
	}
}

/* kmsg_decode_request dispatches on the api key and checks the version. */
static void test_dispatch(void)
{
	static union kmsg_request u;
	struct karena a;
	struct kreader r;
	static const uint8_t body[] = { 0, 0, 0, 0 }; /* Metadata v0: no topics */
	karena_init(&a, ut_arena_mem, sizeof ut_arena_mem);
	kr_init(&r, body, sizeof body);
	CU_ASSERT_EQUAL(kmsg_decode_request(KAPI_METADATA, 0, &r, &u, &a), 0);
	CU_ASSERT_EQUAL(u.Metadata.Topics_n, 0);
	kr_init(&r, body, sizeof body);
	CU_ASSERT_EQUAL(kmsg_decode_request(KAPI_METADATA, 13, &r, &u, &a), -ENOTSUP);
	CU_ASSERT_EQUAL(kmsg_decode_request(4, 0, &r, &u, &a), -ENOTSUP);
	CU_ASSERT_EQUAL(kmsg_decode_request(-1, 0, &r, &u, &a), -ENOTSUP);
	CU_ASSERT_EQUAL(kmsg_decode_request(200, 0, &r, &u, &a), -ENOTSUP);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	CU_pSuite s = CU_add_suite("kcodec", NULL, NULL);
	CU_add_test(s, "round trip, every schema and version", test_round_trip_all);
	CU_add_test(s, "advertised versions exist", test_advertised_versions_exist);
	CU_add_test(s, "truncated prefixes fail", test_truncated_prefixes);
	CU_add_test(s, "mutations decode consistently", test_mutations);
	CU_add_test(s, "hostile counts and nulls", test_hostile_counts);
	CU_add_test(s, "arena exhausted", test_arena_exhausted);
	CU_add_test(s, "defaults of absent fields", test_defaults);
	CU_add_test(s, "encode errors", test_encode_errors);
	CU_add_test(s, "request dispatch", test_dispatch);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
