/* fuzz_request.c: libFuzzer target for request parsing. Input: one request frame
 * without its size prefix (header + body), exactly what a connection hands the
 * decoder. Beyond "no crash, no out-of-bounds read", it checks that anything that
 * decodes re-encodes to exactly size() bytes, and that the re-encoding decodes to the
 * same bytes again (encode(decode(x)) is a fixed point). */
#include "kmsg.h"

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_ARENA_BYTES (4u << 20)

static uint8_t fuzz_arena_mem[FUZZ_ARENA_BYTES] __attribute__((aligned(8)));
static union kmsg_request fuzz_req, fuzz_req2;

static void fuzz_check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_request: %s\n", what);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kreader r;
	struct kreq_header h;
	struct karena a;
	kr_init(&r, data, size);
	if (kreq_header_decode(&r, &h) != 0)
		return 0;
	karena_init(&a, fuzz_arena_mem, sizeof fuzz_arena_mem);
	int rc = kmsg_decode_request(h.api_key, h.api_version, &r, &fuzz_req, &a);
	fuzz_check(r.p >= data && r.p <= r.end, "reader left its buffer");
	fuzz_check(rc == 0 || rc == -EBADMSG || rc == -ENOTSUP || rc == -ENOMEM, "odd error");
	if (rc != 0)
		return 0;

	const struct kschema *s = kmsg_request_schema(h.api_key);
	size_t n = kcodec_size(s, h.api_version, &fuzz_req);
	uint8_t *buf = malloc(n + 1), *buf2 = malloc(n + 1);
	fuzz_check(buf != NULL && buf2 != NULL, "malloc");
	struct kwriter w;
	kw_init(&w, buf, n);
	fuzz_check(kcodec_encode(s, &w, h.api_version, &fuzz_req) == 0, "re-encode failed");
	fuzz_check(kw_len(&w) == n, "size() differs from encode");

	struct kreader r2;
	kr_init(&r2, buf, n);
	fuzz_check(kcodec_decode(s, &r2, h.api_version, &fuzz_req2, &a) == 0, "re-decode failed");
	fuzz_check(r2.p == r2.end, "re-decode left bytes");
	kw_init(&w, buf2, n + 1);
	fuzz_check(kcodec_encode(s, &w, h.api_version, &fuzz_req2) == 0, "third encode failed");
	fuzz_check(kw_len(&w) == n && memcmp(buf, buf2, n) == 0, "not a fixed point");
	free(buf);
	free(buf2);
	return 0;
}
