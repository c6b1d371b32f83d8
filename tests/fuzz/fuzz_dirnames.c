/* fuzz_dirnames.c: libFuzzer target for the data directory's entry names as
 * the start-up scan reads them (dataplane/loop/names.c dp_dir_name_parse,
 * called by dataplane/control/control.c dp_scan_data_dir for each readdir
 * name). Input: the names of one directory, separated by '/' (no name holds
 * one); each is cut at its first NUL, as a d_name is.
 * Beyond "no crash": a name taken for a partition is exactly the name the
 * broker writes for that topic and partition (dp_partition_dir's
 * "%.*s-%d"), its topic is valid and not a coordinator log, its partition in
 * range; so no two names of one directory are one partition (checked
 * too); a name without '-' is never a partition; every refusal has its
 * reason; and the name the broker writes for a taken topic with any
 * partition in range parses back to that topic and partition. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"

#define FUZZ_DIRNAMES_MAX 64          /* partitions kept per input for the pairwise check */
#define FUZZ_DIRNAME_BYTES 512        /* longer than any name a file system holds (255) */

static struct { char name[FUZZ_DIRNAME_BYTES]; size_t tlen; int32_t p; } taken[FUZZ_DIRNAMES_MAX];

static void fuzz_check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_dirnames: %s\n", what);
		abort();
	}
}

/* The name dp_partition_dir writes (without its data directory). */
static int written_name(char *out, size_t cap, const char *topic, size_t tlen, int32_t p)
{
	return snprintf(out, cap, "%.*s-%" PRId32, (int)tlen, topic, p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t ntaken = 0;
	for (size_t at = 0; at <= size;) {
		const uint8_t *slash = memchr(data + at, '/', size - at);
		size_t len = (slash ? (size_t)(slash - data) : size) - at;
		const char *name = (const char *)data + at;
		at += len + 1;
		const char *nul = memchr(name, 0, len);
		if (nul)
			len = (size_t)(nul - name);
		size_t tlen = (size_t)-1;
		int32_t p = -2;
		enum dp_dir_name k = dp_dir_name_parse(name, len, &tlen, &p);
		fuzz_check(dp_dir_name_why(k) && strcmp(dp_dir_name_why(k), "?"), "a kind without its reason");
		if (k == DP_DIR_OTHER)
			fuzz_check(!memchr(name, '-', len), "a name with '-' passed over as not a partition");
		if (k != DP_DIR_PARTITION) {
			fuzz_check(tlen == (size_t)-1 && p == -2, "a refused name set its topic or partition");
			continue;
		}
		fuzz_check(tlen < len && name[tlen] == '-', "the topic does not end at a '-'");
		fuzz_check(dp_topic_name_valid(name, tlen) && !dp_topic_internal(name, tlen), "a topic the broker refuses");
		fuzz_check(p >= 0 && p < DP_PARTITIONS_MAX, "a partition out of range");
		char w[FUZZ_DIRNAME_BYTES];
		int wn = written_name(w, sizeof(w), name, tlen, p);
		fuzz_check(wn > 0 && (size_t)wn == len && !memcmp(w, name, len),
		           "a partition taken under a name the broker does not write");
		for (uint32_t i = 0; i < ntaken; i++)
			fuzz_check(taken[i].p != p || taken[i].tlen != tlen || memcmp(taken[i].name, name, tlen) ||
			           !memcmp(taken[i].name, name, len),
			           "two names of one directory taken for one partition");
		if (ntaken < FUZZ_DIRNAMES_MAX && len < FUZZ_DIRNAME_BYTES) {
			memcpy(taken[ntaken].name, name, len);
			taken[ntaken].name[len] = 0;
			taken[ntaken].tlen = tlen, taken[ntaken].p = p;
			ntaken++;
		}
		/* The other way: every partition of this topic, as written, is read back as itself. */
		int32_t other = (int32_t)((uint32_t)(p * 7919 + (int32_t)len) % DP_PARTITIONS_MAX);
		const int32_t tries[] = { 0, DP_PARTITIONS_MAX - 1, other };
		for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
			size_t t2 = 0;
			int32_t p2 = -1;
			wn = written_name(w, sizeof(w), name, tlen, tries[i]);
			fuzz_check(wn > 0 && dp_dir_name_parse(w, (size_t)wn, &t2, &p2) == DP_DIR_PARTITION && t2 == tlen &&
			           p2 == tries[i], "a name the broker writes is not read back");
		}
	}
	return 0;
}
