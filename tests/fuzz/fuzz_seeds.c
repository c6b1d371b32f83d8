/* fuzz_seeds.c: writes a seed corpus for fuzz_request: one frame (header + body, no
 * size prefix) per request api, version and fill mode. Usage: fuzz_seeds DIR */
#include "kfill.h"

#include <stdio.h>

static uint8_t seed_arena[256 * 1024] __attribute__((aligned(8)));
static uint8_t seed_msg[8192] __attribute__((aligned(8)));
static uint8_t seed_buf[64 * 1024];

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_seeds DIR\n");
		return 2;
	}
	unsigned written = 0;
	for (int16_t key = 0; key <= KWIRE_API_KEY_MAX; key++) {
		const struct kschema *s = kmsg_request_schema(key);
		if (s == NULL)
			continue;
		for (int16_t v = s->valid.lo; v <= s->valid.hi; v++) {
			for (int mode = KFILL_FULL; mode <= KFILL_NULLS; mode++) {
				struct karena a;
				struct kwriter w;
				struct kreq_header h = { key, v, 1000 + v, { "seed", 4 } };
				karena_init(&a, seed_arena, sizeof seed_arena);
				if (s->size > sizeof seed_msg ||
				    kfill(s, v, mode, (uint32_t)(key * 100 + v), seed_msg, &a) != 0)
					return 1;
				kw_init(&w, seed_buf, sizeof seed_buf);
				kreq_header_encode(&w, &h);
				if (kcodec_encode(s, &w, v, seed_msg) != 0)
					return 1;
				char path[4096];
				snprintf(path, sizeof path, "%s/req-%d-v%d-%d", argv[1], key, v, mode);
				FILE *f = fopen(path, "wb");
				if (f == NULL || fwrite(seed_buf, 1, kw_len(&w), f) != kw_len(&w))
					return 1;
				fclose(f);
				written++;
			}
		}
	}
	printf("fuzz_seeds: %u frames\n", written);
	return 0;
}
