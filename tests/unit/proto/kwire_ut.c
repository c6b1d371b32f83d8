/* kwire_ut.c: wire primitives, arena, and the request/response headers. */
#include "kmsg.h"

#include <CUnit/Basic.h>

static uint8_t ut_buf[256];

/* Writes v as a uvarint, compares with the expected bytes, reads it back. */
static void ut_uvarint(uint32_t v, const uint8_t *want, size_t n)
{
	struct kwriter w;
	struct kreader r;
	kw_init(&w, ut_buf, sizeof ut_buf);
	kw_uvarint(&w, v);
	CU_ASSERT_EQUAL(w.err, 0);
	CU_ASSERT_EQUAL(kw_len(&w), n);
	CU_ASSERT_EQUAL(kw_uvarint_size(v), n);
	CU_ASSERT(memcmp(ut_buf, want, n) == 0);
	kr_init(&r, ut_buf, n);
	CU_ASSERT_EQUAL(kr_uvarint(&r), v);
	CU_ASSERT_EQUAL(r.err, 0);
	CU_ASSERT_PTR_EQUAL(r.p, r.end);
}

static void test_uvarint(void)
{
	ut_uvarint(0, (const uint8_t[]){ 0x00 }, 1);
	ut_uvarint(1, (const uint8_t[]){ 0x01 }, 1);
	ut_uvarint(127, (const uint8_t[]){ 0x7f }, 1);
	ut_uvarint(128, (const uint8_t[]){ 0x80, 0x01 }, 2);
	ut_uvarint(300, (const uint8_t[]){ 0xac, 0x02 }, 2);
	ut_uvarint(16384, (const uint8_t[]){ 0x80, 0x80, 0x01 }, 3);
	ut_uvarint(0xffffffffu, (const uint8_t[]){ 0xff, 0xff, 0xff, 0xff, 0x0f }, 5);

	/* Too long, top bits past 32, truncated: errors, and the error sticks. */
	static const uint8_t six[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 };
	static const uint8_t big5[] = { 0xff, 0xff, 0xff, 0xff, 0x1f };
	static const uint8_t cut[] = { 0x80, 0x80 };
	struct kreader r;
	kr_init(&r, six, sizeof six);
	CU_ASSERT_EQUAL(kr_uvarint(&r), 0);
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
	kr_init(&r, big5, sizeof big5);
	(void)kr_uvarint(&r);
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
	kr_init(&r, cut, sizeof cut);
	(void)kr_uvarint(&r);
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
	CU_ASSERT_EQUAL(kr_i8(&r), 0); /* sticky */
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
}

static void test_zigzag(void)
{
	/* Record-level varints: -1 -> 0x01, 1 -> 0x02 (README §2.4). */
	static const struct { int64_t v; uint8_t b[10]; size_t n; } cases[] = {
		{ 0, { 0x00 }, 1 }, { -1, { 0x01 }, 1 }, { 1, { 0x02 }, 1 },
		{ -64, { 0x7f }, 1 }, { 64, { 0x80, 0x01 }, 2 },
		{ INT32_MAX, { 0xfe, 0xff, 0xff, 0xff, 0x0f }, 5 },
		{ INT32_MIN, { 0xff, 0xff, 0xff, 0xff, 0x0f }, 5 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct kwriter w;
		struct kreader r;
		kw_init(&w, ut_buf, sizeof ut_buf);
		kw_varint(&w, (int32_t)cases[i].v);
		CU_ASSERT_EQUAL(kw_len(&w), cases[i].n);
		CU_ASSERT_EQUAL(kw_varint_size((int32_t)cases[i].v), cases[i].n);
		CU_ASSERT(memcmp(ut_buf, cases[i].b, cases[i].n) == 0);
		kr_init(&r, ut_buf, kw_len(&w));
		CU_ASSERT_EQUAL(kr_varint(&r), cases[i].v);
		/* Same bytes as a varlong. */
		kw_init(&w, ut_buf, sizeof ut_buf);
		kw_varlong(&w, cases[i].v);
		CU_ASSERT(kw_len(&w) == cases[i].n && memcmp(ut_buf, cases[i].b, cases[i].n) == 0);
		kr_init(&r, ut_buf, kw_len(&w));
		CU_ASSERT_EQUAL(kr_varlong(&r), cases[i].v);
	}
	int64_t extremes[] = { INT64_MIN, INT64_MAX, 1700000000000LL, -1700000000000LL };
	for (size_t i = 0; i < 4; i++) {
		struct kwriter w;
		struct kreader r;
		kw_init(&w, ut_buf, sizeof ut_buf);
		kw_varlong(&w, extremes[i]);
		CU_ASSERT_EQUAL(kw_len(&w), kw_varlong_size(extremes[i]));
		kr_init(&r, ut_buf, kw_len(&w));
		CU_ASSERT_EQUAL(kr_varlong(&r), extremes[i]);
		CU_ASSERT_PTR_EQUAL(r.p, r.end);
	}
	CU_ASSERT_EQUAL(kw_varlong_size(INT64_MIN), 10);
}

static void test_fixed(void)
{
	struct kwriter w;
	struct kreader r;
	uint8_t uuid[16], back[16];
	for (int i = 0; i < 16; i++)
		uuid[i] = (uint8_t)(i * 11);
	kw_init(&w, ut_buf, sizeof ut_buf);
	kw_i8(&w, -2);
	kw_i16(&w, -300);
	kw_u16(&w, 65000);
	kw_i32(&w, -70000);
	kw_u32(&w, 0x8e6582a3u);
	kw_i64(&w, -5000000000LL);
	kw_f64(&w, 2.5);
	kw_bool(&w, true);
	kw_uuid(&w, uuid);
	CU_ASSERT_EQUAL(w.err, 0);
	CU_ASSERT_EQUAL(kw_len(&w), 1 + 2 + 2 + 4 + 4 + 8 + 8 + 1 + 16);
	static const uint8_t head[] = { 0xfe, 0xfe, 0xd4, 0xfd, 0xe8, 0xff, 0xfe, 0xee, 0x90,
					0x8e, 0x65, 0x82, 0xa3 };
	CU_ASSERT(memcmp(ut_buf, head, sizeof head) == 0); /* big-endian */
	kr_init(&r, ut_buf, kw_len(&w));
	CU_ASSERT_EQUAL(kr_i8(&r), -2);
	CU_ASSERT_EQUAL(kr_i16(&r), -300);
	CU_ASSERT_EQUAL(kr_u16(&r), 65000);
	CU_ASSERT_EQUAL(kr_i32(&r), -70000);
	CU_ASSERT_EQUAL(kr_u32(&r), 0x8e6582a3u);
	CU_ASSERT_EQUAL(kr_i64(&r), -5000000000LL);
	CU_ASSERT_EQUAL(kr_f64(&r), 2.5);
	CU_ASSERT(kr_bool(&r));
	kr_uuid(&r, back);
	CU_ASSERT(memcmp(uuid, back, 16) == 0);
	CU_ASSERT_EQUAL(r.err, 0);
	CU_ASSERT_PTR_EQUAL(r.p, r.end);
	CU_ASSERT_EQUAL(kr_i32(&r), 0); /* past the end */
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
	CU_ASSERT_PTR_EQUAL(r.p, r.end);
}

static void test_strings_bytes(void)
{
	struct kwriter w;
	struct kreader r;
	kw_init(&w, ut_buf, sizeof ut_buf);
	kw_string(&w, (struct kstr){ "abc", 3 });
	kw_string(&w, (struct kstr){ NULL, -1 });
	kw_cstring(&w, (struct kstr){ "de", 2 });
	kw_cstring(&w, (struct kstr){ NULL, -1 });
	kw_bytes(&w, (struct kbytes){ (const uint8_t *)"xy", 2 });
	kw_cbytes(&w, (struct kbytes){ NULL, -1 });
	kw_array_len(&w, 3);
	kw_carray_len(&w, -1);
	kw_carray_len(&w, 5);
	CU_ASSERT_EQUAL(w.err, 0);
	static const uint8_t want[] = { 0, 3, 'a', 'b', 'c', 0xff, 0xff, 3, 'd', 'e', 0,
					0, 0, 0, 2, 'x', 'y', 0, 0, 0, 0, 3, 0, 6 };
	CU_ASSERT_EQUAL(kw_len(&w), sizeof want);
	CU_ASSERT(memcmp(ut_buf, want, sizeof want) == 0);

	kr_init(&r, ut_buf, kw_len(&w));
	struct kstr s = kr_string(&r);
	CU_ASSERT(s.len == 3 && memcmp(s.ptr, "abc", 3) == 0 && s.ptr == (const char *)ut_buf + 2);
	CU_ASSERT_EQUAL(kr_nstring(&r).len, -1);
	s = kr_cstring(&r);
	CU_ASSERT(s.len == 2 && memcmp(s.ptr, "de", 2) == 0);
	CU_ASSERT_EQUAL(kr_cnstring(&r).len, -1);
	struct kbytes b = kr_bytes(&r);
	CU_ASSERT(b.len == 2 && memcmp(b.ptr, "xy", 2) == 0);
	CU_ASSERT_EQUAL(kr_cnbytes(&r).len, -1);
	CU_ASSERT_EQUAL(kr_array_len(&r), 0); /* 3 elements, 2 bytes left: error */
	CU_ASSERT_EQUAL(r.err, -EBADMSG);

	/* A non-nullable reader refuses null; a length past the end is an error. */
	kr_init(&r, (const uint8_t[]){ 0xff, 0xff }, 2);
	CU_ASSERT_EQUAL(kr_string(&r).len, -1);
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
	kr_init(&r, (const uint8_t[]){ 0x00 }, 1);
	CU_ASSERT_EQUAL(kr_cstring(&r).len, -1);
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
	kr_init(&r, (const uint8_t[]){ 0, 5, 'a' }, 3);
	(void)kr_nstring(&r);
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
	kr_init(&r, (const uint8_t[]){ 0xff, 0xfe }, 2); /* -2 */
	(void)kr_nstring(&r);
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
	kr_init(&r, (const uint8_t[]){ 0x7f, 0xff, 0xff, 0xff }, 4);
	(void)kr_nbytes(&r);
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
	/* Compact string longer than an int16 can say. */
	kr_init(&r, (const uint8_t[]){ 0x81, 0x80, 0x02 }, 3);
	(void)kr_cnstring(&r);
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
	/* Array counts: -1 null, count bounded by the bytes left. */
	kr_init(&r, (const uint8_t[]){ 0xff, 0xff, 0xff, 0xff }, 4);
	CU_ASSERT_EQUAL(kr_array_len(&r), -1);
	kr_init(&r, (const uint8_t[]){ 0, 0, 0, 2, 1, 1 }, 6);
	CU_ASSERT_EQUAL(kr_array_len(&r), 2);
	kr_init(&r, (const uint8_t[]){ 3, 1 }, 2);
	CU_ASSERT_EQUAL(kr_carray_len(&r), 0); /* 2 elements, 1 byte left */
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
}

static void test_writer_overflow(void)
{
	struct kwriter w;
	memset(ut_buf, 0xa5, sizeof ut_buf);
	kw_init(&w, ut_buf, 5);
	kw_i32(&w, 1);
	kw_i16(&w, 2); /* does not fit */
	CU_ASSERT_EQUAL(w.err, -ENOSPC);
	CU_ASSERT_EQUAL(kw_len(&w), 4);
	kw_i8(&w, 3); /* would fit, but the error is sticky */
	CU_ASSERT_EQUAL(kw_len(&w), 4);
	CU_ASSERT_EQUAL(ut_buf[4], 0xa5);
	CU_ASSERT_PTR_NULL(kw_reserve(&w, 0));

	kw_init(&w, ut_buf, sizeof ut_buf);
	uint8_t *at = kw_reserve(&w, 4);
	kw_i16(&w, 7);
	kw_put_i32(at, (int32_t)kw_len(&w) - 4);
	CU_ASSERT(memcmp(ut_buf, (const uint8_t[]){ 0, 0, 0, 2, 0, 7 }, 6) == 0);

	kw_init(&w, ut_buf, sizeof ut_buf);
	kw_string(&w, (struct kstr){ "x", KWIRE_STRING_LEN_MAX + 1 });
	CU_ASSERT_EQUAL(w.err, -EINVAL);
	CU_ASSERT_EQUAL(kw_len(&w), 0);
}

static void test_skip_tags(void)
{
	/* Two fields (tag 0: 2 bytes, tag 5: 1 byte), then a marker byte. */
	static const uint8_t tags[] = { 2, 0, 2, 0xaa, 0xbb, 5, 1, 0xcc, 0x42 };
	struct kreader r;
	kr_init(&r, tags, sizeof tags);
	kr_skip_tags(&r);
	CU_ASSERT_EQUAL(r.err, 0);
	CU_ASSERT_EQUAL(kr_i8(&r), 0x42);
	kr_init(&r, tags, 7); /* cut inside the second field */
	kr_skip_tags(&r);
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
	static const uint8_t many[] = { 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0 };
	kr_init(&r, many, sizeof many);
	kr_skip_tags(&r);
	CU_ASSERT_EQUAL(r.err, -EBADMSG);
}

static void test_arena(void)
{
	static uint8_t mem[64] __attribute__((aligned(8)));
	struct karena a;
	memset(mem, 0xff, sizeof mem);
	karena_init(&a, mem, sizeof mem);
	uint8_t *p = karena_alloc(&a, 3);
	uint8_t *q = karena_alloc(&a, 8);
	CU_ASSERT_PTR_EQUAL(p, mem);
	CU_ASSERT_PTR_EQUAL(q, mem + 8); /* 8-byte aligned */
	CU_ASSERT(p[0] == 0 && p[2] == 0 && q[7] == 0);
	CU_ASSERT_PTR_NOT_NULL(karena_alloc(&a, 48)); /* exactly full */
	CU_ASSERT_PTR_NULL(karena_alloc(&a, 1));
	CU_ASSERT_PTR_NULL(karena_alloc(&a, SIZE_MAX));
	karena_reset(&a);
	CU_ASSERT_PTR_NULL(karena_alloc(&a, 65));
	CU_ASSERT_PTR_EQUAL(karena_alloc(&a, 64), mem);
}

static void test_headers(void)
{
	struct kwriter w;
	struct kreader r;
	struct kreq_header h = { 3, 9, 77, { "cli", 3 } }, back;
	/* Metadata v9 is flexible: header v2 (tag byte after the classic client id). */
	kw_init(&w, ut_buf, sizeof ut_buf);
	kreq_header_encode(&w, &h);
	static const uint8_t v2[] = { 0, 3, 0, 9, 0, 0, 0, 77, 0, 3, 'c', 'l', 'i', 0 };
	CU_ASSERT_EQUAL(kw_len(&w), sizeof v2);
	CU_ASSERT(memcmp(ut_buf, v2, sizeof v2) == 0);
	kr_init(&r, ut_buf, kw_len(&w));
	CU_ASSERT_EQUAL(kreq_header_decode(&r, &back), 0);
	CU_ASSERT_PTR_EQUAL(r.p, r.end);
	CU_ASSERT(back.api_key == 3 && back.api_version == 9 && back.correlation_id == 77);
	CU_ASSERT(back.client_id.len == 3 && memcmp(back.client_id.ptr, "cli", 3) == 0);
	/* Header v2 with a tagged field that is skipped. */
	static const uint8_t v2tag[] = { 0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 1, 0, 1, 9, 0x55 };
	kr_init(&r, v2tag, sizeof v2tag);
	CU_ASSERT_EQUAL(kreq_header_decode(&r, &back), 0);
	CU_ASSERT_EQUAL(back.client_id.len, -1);
	CU_ASSERT_EQUAL(kr_i8(&r), 0x55);
	/* Metadata v8 and an unknown key: header v1, no tag section read. */
	static const uint8_t v1[] = { 0x00, 0x63, 0, 9, 0, 0, 0, 1, 0, 0, 0x55 };
	kr_init(&r, v1, sizeof v1);
	CU_ASSERT_EQUAL(kreq_header_decode(&r, &back), 0);
	CU_ASSERT_EQUAL(back.api_key, 99);
	CU_ASSERT_EQUAL(kr_i8(&r), 0x55);
	kr_init(&r, v1, 9); /* truncated client id */
	CU_ASSERT_EQUAL(kreq_header_decode(&r, &back), -EBADMSG);

	/* Responses: ApiVersions v3 header v0; Metadata v9 header v1; Produce v7 v0. */
	kw_init(&w, ut_buf, sizeof ut_buf);
	kresp_header_encode(&w, 18, 3, 5);
	CU_ASSERT_EQUAL(kw_len(&w), 4);
	CU_ASSERT_EQUAL(kresp_header_size(KAPI_API_VERSIONS, 3), 4);
	kresp_header_encode(&w, 3, 9, 6);
	CU_ASSERT_EQUAL(kw_len(&w), 9);
	CU_ASSERT_EQUAL(kresp_header_size(KAPI_METADATA, 9), 5);
	kresp_header_encode(&w, 0, 7, 7);
	CU_ASSERT_EQUAL(kw_len(&w), 13);
	static const uint8_t resp[] = { 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 0, 7 };
	CU_ASSERT(memcmp(ut_buf, resp, sizeof resp) == 0);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return CU_get_error();
	CU_pSuite s = CU_add_suite("kwire", NULL, NULL);
	CU_add_test(s, "unsigned varints", test_uvarint);
	CU_add_test(s, "zig-zag varints", test_zigzag);
	CU_add_test(s, "fixed-size values", test_fixed);
	CU_add_test(s, "strings, bytes, counts", test_strings_bytes);
	CU_add_test(s, "writer overflow", test_writer_overflow);
	CU_add_test(s, "skip tags", test_skip_tags);
	CU_add_test(s, "arena", test_arena);
	CU_add_test(s, "headers", test_headers);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
