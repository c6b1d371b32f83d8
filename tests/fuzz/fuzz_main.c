/*
 * fuzz_main.c - the fallback driver of the fuzz targets where clang's
 * libFuzzer is missing (run.sh builds the target with gcc, ASan and UBSan
 * and links this main instead). It takes the arguments run.sh gives
 * libFuzzer: it runs every input of every directory named (the seeds and
 * the committed regression cases), then mutates them at random until
 * -max_total_time seconds have passed. No coverage guidance: it finds less
 * than libFuzzer, but every regression case runs every time on either path.
 *
 * A failure (a sanitizer report, abort, a fatal signal) writes the input
 * that did it to ./crash-fallback-SEED-N and prints the seed; FUZZ_SEED=S
 * replays the same mutations. Exits 1 on a failure, as run.sh asks of libFuzzer.
 * Locality: one thread (the target's).
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sanitizer/common_interface_defs.h>

#define FUZZ_MAIN_INPUTS_MAX 4096        /* corpus files loaded */
#define FUZZ_MAIN_LEN_DEFAULT 8192       /* bytes of the largest input, as libFuzzer's default -max_len 4096 x2 */
#define FUZZ_MAIN_MUTATIONS_MAX 8        /* edits applied to one input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct { uint8_t *p; size_t n; } corpus[FUZZ_MAIN_INPUTS_MAX];
static uint32_t ncorpus;
static uint8_t *cur;          /* the input under test, for the death report */
static size_t cur_len;
static uint64_t seed, rng, execs;
static char crash_path[64];

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Async-signal-safe: open, write, close only. */
static void save_input(void)
{
	int fd = open(crash_path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd >= 0) {
		if (cur_len && write(fd, cur, cur_len) < 0)
			(void)0;
		close(fd);
	}
	static const char msg[] = "fuzz_main: the input that failed: ";
	if (write(2, msg, sizeof(msg) - 1) < 0 || write(2, crash_path, strlen(crash_path)) < 0 || write(2, "\n", 1) < 0)
		(void)0;
}

static void on_death(void) { save_input(); }

static void on_signal(int sig)
{
	save_input();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void load_dir(const char *path, size_t max_len)
{
	DIR *d = opendir(path);
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d)) && ncorpus < FUZZ_MAIN_INPUTS_MAX) {
		char f[4096];
		struct stat st;
		snprintf(f, sizeof(f), "%s/%s", path, de->d_name);
		if (stat(f, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		FILE *in = fopen(f, "rb");
		size_t n = (size_t)st.st_size < max_len ? (size_t)st.st_size : max_len;
		uint8_t *p = malloc(n ? n : 1);
		if (!in || !p || fread(p, 1, n, in) != n) {
			fprintf(stderr, "fuzz_main: cannot read %s\n", f);
			exit(1);
		}
		fclose(in);
		corpus[ncorpus].p = p;
		corpus[ncorpus++].n = n;
	}
	closedir(d);
}

static void run_one(uint8_t *p, size_t n)
{
	cur = p;
	cur_len = n;
	execs++;
	LLVMFuzzerTestOneInput(p, n);
}

/* A few random edits of a random corpus input into buf; returns its length. */
static size_t mutate(uint8_t *buf, size_t max_len)
{
	static const uint64_t interesting[] = { 0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x7fffffff,
	                                        0x80000000, 0xffffffff, 0x7fffffffffffffff, UINT64_MAX };
	const uint32_t k = (uint32_t)(next_rand() % ncorpus);
	size_t n = corpus[k].n;
	memcpy(buf, corpus[k].p, n);
	uint32_t edits = 1 + (uint32_t)(next_rand() % FUZZ_MAIN_MUTATIONS_MAX);
	for (uint32_t e = 0; e < edits; e++) {
		size_t at = n ? next_rand() % n : 0;
		switch (next_rand() % 7) {
		case 0:   /* a bit */
			if (n)
				buf[at] ^= (uint8_t)(1u << (next_rand() % 8));
			break;
		case 1:   /* a byte */
			if (n)
				buf[at] = (uint8_t)next_rand();
			break;
		case 2: { /* a big-endian integer of 1, 2, 4 or 8 bytes at a limit */
			uint32_t w = 1u << (next_rand() % 4);
			uint64_t v = interesting[next_rand() % (sizeof(interesting) / sizeof(interesting[0]))];
			for (uint32_t i = 0; i < w && at + i < n; i++)
				buf[at + i] = (uint8_t)(v >> (8 * (w - 1 - i)));
			break;
		}
		case 3: { /* insert random bytes */
			size_t m = 1 + next_rand() % 16;
			if (n + m > max_len)
				break;
			memmove(buf + at + m, buf + at, n - at);
			for (size_t i = 0; i < m; i++)
				buf[at + i] = (uint8_t)next_rand();
			n += m;
			break;
		}
		case 4: { /* erase a range */
			size_t m = n - at ? 1 + next_rand() % (n - at) : 0;
			if (m > 64)
				m = 1 + m % 64;
			memmove(buf + at, buf + at + m, n - at - m);
			n -= m;
			break;
		}
		case 5:   /* truncate */
			n = at;
			break;
		default: { /* splice: a piece of another input over this one */
			const uint32_t o = (uint32_t)(next_rand() % ncorpus);
			if (!corpus[o].n || !n)
				break;
			size_t from = next_rand() % corpus[o].n, m = 1 + next_rand() % (corpus[o].n - from);
			if (at + m > n)
				m = n - at;
			memcpy(buf + at, corpus[o].p + from, m);
			break;
		}
		}
	}
	return n;
}

int main(int argc, char **argv)
{
	long seconds = 10;
	size_t max_len = FUZZ_MAIN_LEN_DEFAULT;
	const char *s = getenv("FUZZ_SEED");

	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "-max_total_time=", 16))
			seconds = atol(argv[i] + 16);
		else if (!strncmp(argv[i], "-max_len=", 9))
			max_len = (size_t)atol(argv[i] + 9);
	}
	for (int i = 1; i < argc; i++)
		if (argv[i][0] != '-')
			load_dir(argv[i], max_len);
	seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
	rng = seed * 0x9e3779b97f4a7c15ull | 1;
	snprintf(crash_path, sizeof(crash_path), "crash-fallback-%llu-regress", (unsigned long long)seed);
	__sanitizer_set_death_callback(on_death);
	signal(SIGABRT, on_signal);
	signal(SIGSEGV, on_signal);
	signal(SIGBUS, on_signal);
	signal(SIGFPE, on_signal);
	fprintf(stderr, "fuzz_main: %u inputs, then mutations for %lds (FUZZ_SEED=%llu)\n", ncorpus, seconds,
	        (unsigned long long)seed);

	for (uint32_t i = 0; i < ncorpus; i++)   /* seeds and regression cases, as they are */
		run_one(corpus[i].p, corpus[i].n);
	uint8_t *buf = malloc(max_len + 1);
	if (!buf)
		return 1;
	time_t end = time(NULL) + seconds;
	while (ncorpus && time(NULL) < end) {
		for (int k = 0; k < 64; k++) {
			snprintf(crash_path, sizeof(crash_path), "crash-fallback-%llu-%llu", (unsigned long long)seed,
			         (unsigned long long)execs);
			run_one(buf, mutate(buf, max_len));
		}
	}
	fprintf(stderr, "fuzz_main: DONE %llu runs\nstat::number_of_executed_units: %llu\n", (unsigned long long)execs,
	        (unsigned long long)execs);
	free(buf);
	return 0;
}
