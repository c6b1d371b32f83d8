/* fuzz_startup_seeds.c: writes the seed corpora of fuzz_pidfile and
 * fuzz_dirnames (what the start-up reads besides the logs) into DIR_PIDFILE
 * and DIR_DIRNAMES: __producer_ids records the broker writes (its own
 * encoder, dp_pid_file_encode: a fresh file, a used one, the last block) and
 * data directories as the broker leaves them (dp_partition_dir's names,
 * the coordinator logs, __producer_ids and its temporary file), with a few
 * stray names beside. Locality: a tool, run once per fuzzing session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pidfile.h"

static void put(const char *dir, const char *name, const void *b, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static void pidfile(const char *dir, const char *name, int64_t end)
{
	uint8_t b[1 + DP_PID_FILE_BYTES] = { 1 };   /* mode 1: the CRC as written */
	dp_pid_file_encode(b + 1, end);
	put(dir, name, b, sizeof(b));
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: fuzz_startup_seeds DIR_PIDFILE DIR_DIRNAMES\n");
		return 2;
	}
	pidfile(argv[1], "first", DP_PID_BLOCK);
	pidfile(argv[1], "used", 123 * DP_PID_BLOCK);
	pidfile(argv[1], "last-block", DP_PID_END_MAX - DP_PID_BLOCK);
	pidfile(argv[1], "exhausted", DP_PID_END_MAX);
	static const char *const dirs[][2] = {
		{ "broker", "__producer_ids/__transaction_state/__consumer_offsets/orders-0/orders-1/orders-2" },
		{ "dashes", "my-topic-0/my-topic-10/a.b_c-9999/__producer_ids.tmp" },
		{ "stray", "orders-05/orders-+5/orders-5/__consumer_offsets-0/lost+found/t-10000/-1/x-" },
	};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		put(argv[2], dirs[i][0], dirs[i][1], strlen(dirs[i][1]));
	return 0;
}
