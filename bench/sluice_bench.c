/*
 * sluice-bench: a native Kafka load generator. It speaks the Kafka protocol
 * itself (no client library), so it can push a fast broker harder than a
 * general client does: pre-built record batches patched per send, many
 * connections, pipelined requests, one thread, epoll.
 *
 * Workloads: produce (plain, idempotent or transactional), consume (Fetch,
 * read_uncommitted or read_committed), e2e (both in one process; latency from
 * the send time written into each value to the consumer's receipt). Closed
 * loop by default; with --rate, open loop: batches have fixed intended send
 * times and latency counts from those, so a slow broker cannot hide behind a
 * generator that waits for it (no coordinated omission).
 *
 * Output (an interface: bench/suite.sh and bench/report.py read it):
 *   one line per --interval, then a summary line, in the style of Kafka's
 *   kafka-producer-perf-test; then one machine-readable RESULT line; with
 *   --csv FILE, the same figures as CSV rows (header written if the file is
 *   empty). MB = 2^20 bytes of record values. A "# ..." line on stderr gives
 *   the totals (warm-up included) and the checksum used to validate a run.
 *   With --broker-pid PID, the summary, RESULT line and CSV summary row also
 *   give the broker's CPU time (utime + stime from /proc/PID/stat) over the
 *   measured window per MiB of record values, and as % of one core.
 *
 * Files: sb.h (types, limits), sb_conn.c (transport), sb_setup.c (start-up),
 * sb_produce.c, sb_consume.c, sb_digest.h (record digest).
 * Locality: one thread; everything below runs on it.
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "sb.h"

#define SB_CSV_HEADER "label,workload,mode,kind,t_s,records,bytes,rec_per_s,mb_per_s,avg_ms,p50_ms,p95_ms,p99_ms," \
		      "p999_ms,max_ms,errors,offered_rate,commit_p50_ms,commit_p99_ms,broker_cpu_ms_per_mib"
#define SB_COUNT_LIMIT_DEFAULT_S 300.0 /* --count without --duration: give up after this */

static volatile sig_atomic_t sb_interrupted;

uint64_t sb_now_ns(void)
{
	struct timespec ts;
	int rc = clock_gettime(CLOCK_MONOTONIC, &ts);
	assert(rc == 0);
	(void)rc;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t sb_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- figures ----------------------------------------------------------------------------- */

static void sb_hist_add_n(struct bench_hist *h, uint64_t v_us, uint64_t n)
{
	h->bucket[bench_hist_index(v_us)] += n;
	h->count += n;
	h->sum_us += v_us * n;
	if (v_us > h->max_us)
		h->max_us = v_us;
}

void sb_fig_records(struct sb_run *r, uint64_t n, uint64_t bytes, uint64_t lat_us, uint64_t lat_samples, uint64_t now)
{
	struct sb_fig *f[2] = { &r->iv, &r->sum };
	for (int i = 0; i < 2; i++) {
		f[i]->records += n;
		f[i]->bytes += bytes;
		if (lat_samples)
			sb_hist_add_n(&f[i]->lat, lat_us, lat_samples);
	}
	r->last_measured_ns = now;
}

void sb_fig_error(struct sb_run *r)
{
	r->iv.errors++;
	r->sum.errors++;
}

void sb_fig_txn(struct sb_run *r, bool commit, uint64_t lat_us, bool measured)
{
	struct sb_fig *f[2] = { &r->iv, &r->sum };
	for (int i = 0; i < 2; i++) {
		*(commit ? &f[i]->commits : &f[i]->aborts) += 1;
		if (commit && measured)
			sb_hist_add_n(&f[i]->commit, lat_us, 1);
	}
}

void sb_fig_txn_steps(struct sb_run *r, uint64_t add_us, uint64_t open_us, uint64_t txn_us)
{
	struct sb_fig *f[2] = { &r->iv, &r->sum };
	for (int i = 0; i < 2; i++) {
		sb_hist_add_n(&f[i]->add, add_us, 1);
		sb_hist_add_n(&f[i]->open, open_us, 1);
		sb_hist_add_n(&f[i]->txn, txn_us, 1);
	}
}

void sb_fig_coord_retry(struct sb_run *r)
{
	r->iv.coord_retries++;
	r->sum.coord_retries++;
}

static const char *sb_workload_name(enum sb_workload w)
{
	return w == SB_WL_PRODUCE ? "produce" : w == SB_WL_CONSUME ? "consume" : "e2e";
}

static const char *sb_mode_name(const struct sb_opts *o)
{
	if (o->workload == SB_WL_CONSUME)
		return "-";
	return o->mode == SB_MODE_PLAIN ? "plain" : o->mode == SB_MODE_IDEMPOTENT ? "idempotent" : "transactional";
}

/* Derived figures of one interval or of the summary. Locality: main thread (a value). */
struct sb_line {
	double secs, rps, mbps, avg, max, p50, p95, p99, p999, c50, c99;
};

static struct sb_line sb_line_of(const struct sb_fig *f, double secs)
{
	const struct bench_hist *h = &f->lat;
	struct sb_line l = { .secs = secs };
	l.rps = secs > 0 ? (double)f->records / secs : 0.0;
	l.mbps = secs > 0 ? (double)f->bytes / secs / (1024.0 * 1024.0) : 0.0;
	l.avg = h->count ? (double)h->sum_us / (double)h->count / 1e3 : 0.0;
	l.max = (double)h->max_us / 1e3;
	l.p50 = bench_hist_quantile_us(h, 0.50) / 1e3;
	l.p95 = bench_hist_quantile_us(h, 0.95) / 1e3;
	l.p99 = bench_hist_quantile_us(h, 0.99) / 1e3;
	l.p999 = bench_hist_quantile_us(h, 0.999) / 1e3;
	l.c50 = bench_hist_quantile_us(&f->commit, 0.50) / 1e3;
	l.c99 = bench_hist_quantile_us(&f->commit, 0.99) / 1e3;
	return l;
}

/* cpu: the broker's CPU figures (--broker-pid, summary rows), NULL for an empty column. */
static void sb_csv_row(FILE *csv, const struct sb_opts *o, const char *kind, double t_s, const struct sb_fig *f,
		       const struct sb_line *l, const struct sb_cpu_fig *cpu)
{
	if (!csv)
		return;
	char cpu_col[32] = "";
	if (cpu)
		snprintf(cpu_col, sizeof cpu_col, "%.3f", cpu->ms_per_mib);
	fprintf(csv, "%s,%s,%s,%s,%.3f,%" PRIu64 ",%" PRIu64 ",%.1f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%" PRIu64
		",%.0f,%.3f,%.3f,%s\n", o->label, sb_workload_name(o->workload), sb_mode_name(o), kind, t_s, f->records,
		f->bytes, l->rps, l->mbps, l->avg, l->p50, l->p95, l->p99, l->p999, l->max, f->errors, o->rate, l->c50,
		l->c99, cpu_col);
	fflush(csv);
}

static const char *sb_verb(const struct sb_opts *o)
{
	return o->workload == SB_WL_PRODUCE ? "sent" : "read";
}

/* Prints and resets the interval that ends at `end`. */
static void sb_interval_end(struct sb_run *r, FILE *csv, uint64_t end)
{
	const struct sb_opts *o = r->o;
	double secs = (double)(end - r->iv_start) / 1e9;
	struct sb_line l = sb_line_of(&r->iv, secs);
	printf("%" PRIu64 " records %s, %.1f records/sec (%.2f MB/sec), %.3f ms avg latency, %.3f ms max latency.\n",
	       r->iv.records, sb_verb(o), l.rps, l.mbps, l.avg, l.max);
	fflush(stdout);
	sb_csv_row(csv, o, "interval", (double)(end - r->t_measure) / 1e9, &r->iv, &l, NULL);
	if (o->rate > 0 && r->behind_ns > 1000000u)
		fprintf(stderr, "# behind_ms=%.1f: the open-loop schedule is ahead of what the windows allow\n",
			(double)r->behind_ns / 1e6);
	memset(&r->iv, 0, sizeof r->iv);
	r->iv_start = end;
}

static void sb_tick(struct sb_run *r, FILE *csv, uint64_t now)
{
	if (now < r->t_measure) {
		sb_wake_at(r, r->t_measure);
		return;
	}
	if (r->iv_next == 0) {
		/* Warm-up over: what was counted so far is left out of every figure. */
		memset(&r->iv, 0, sizeof r->iv);
		memset(&r->sum, 0, sizeof r->sum);
		if (r->o->broker_pid) {
			int rc = sb_cpu_read(r->o->broker_pid, &r->broker_ticks0);
			r->broker_sampled = rc == 0;
			r->broker_t0 = sb_now_ns();
			if (rc)
				fprintf(stderr, "sluice-bench: --broker-pid %d: /proc/%d/stat: %s (no broker CPU figure)\n",
					r->o->broker_pid, r->o->broker_pid, strerror(-rc));
		}
		r->iv_start = r->t_measure;
		r->iv_next = r->t_measure + (uint64_t)(r->o->interval_s * 1e9);
	}
	while (now >= r->iv_next) {
		sb_interval_end(r, csv, r->iv_next);
		r->iv_next += (uint64_t)(r->o->interval_s * 1e9);
	}
	sb_wake_at(r, r->iv_next);
}

/* stderr: what validation compares (warm-up included, unlike every figure above). */
static void sb_totals(const struct sb_run *r)
{
	fprintf(stderr, "# totals (warm-up included): issued=%" PRIu64 " acked=%" PRIu64 " committed=%" PRIu64
		" read=%" PRIu64 " read_beyond_count=%" PRIu64 " aborted_skipped=%" PRIu64 " checksum=%016" PRIx64 "\n",
		r->issued, r->acked_all, r->committed_all, r->read_all, r->read_extra, r->aborted_skipped, r->checksum);
}

static void sb_report(struct sb_run *r, FILE *csv, uint64_t end)
{
	const struct sb_opts *o = r->o;
	if (end > r->t_measure && (r->iv.records || r->iv.errors))
		sb_interval_end(r, csv, end); /* the last, partial interval */
	uint64_t last = r->sum.records ? r->last_measured_ns : end;
	double secs = last > r->t_measure ? (double)(last - r->t_measure) / 1e9 : 0.0;
	struct sb_line l = sb_line_of(&r->sum, secs);
	/* The broker's CPU from the window's start to now: the answers to the counted records are
	 * all in by now; what follows the last of them is the broker's idle spin (--idle-spin-us). */
	struct sb_cpu_fig cpu = { 0 };
	bool have_cpu = false;
	if (r->broker_sampled) {
		uint64_t ticks1 = 0;
		int rc = sb_cpu_read(o->broker_pid, &ticks1);
		if (rc == 0 && ticks1 >= r->broker_ticks0) {
			cpu = sb_cpu_fig_of(ticks1 - r->broker_ticks0, sysconf(_SC_CLK_TCK), r->sum.bytes,
					    (double)(sb_now_ns() - r->broker_t0) / 1e9);
			have_cpu = true;
		} else {
			fprintf(stderr, "sluice-bench: --broker-pid %d: %s at the end (no broker CPU figure)\n",
				o->broker_pid, rc ? strerror(-rc) : "CPU time went backwards");
		}
	}
	printf("%" PRIu64 " records %s, %.1f records/sec (%.2f MB/sec), %.3f ms avg latency, %.3f ms max latency, "
	       "%.3f ms 50th, %.3f ms 95th, %.3f ms 99th, %.3f ms 99.9th.\n",
	       r->sum.records, sb_verb(o), l.rps, l.mbps, l.avg, l.max, l.p50, l.p95, l.p99, l.p999);
	if (have_cpu)
		printf("broker pid %d: %.0f ms CPU, %.3f ms per MB %s, %.1f %% of a core.\n", o->broker_pid, cpu.ms,
		       cpu.ms_per_mib, sb_verb(o), cpu.pct);
	printf("RESULT label=%s workload=%s mode=%s records=%" PRIu64 " bytes=%" PRIu64 " seconds=%.3f rec_per_sec=%.1f "
	       "mb_per_sec=%.3f avg_ms=%.3f p50_ms=%.3f p95_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f errors=%" PRIu64
	       " offered_rate=%.0f commits=%" PRIu64 " aborts=%" PRIu64 " commit_p50_ms=%.3f commit_p99_ms=%.3f "
	       "checksum=%016" PRIx64,
	       o->label, sb_workload_name(o->workload), sb_mode_name(o), r->sum.records, r->sum.bytes, secs, l.rps, l.mbps,
	       l.avg, l.p50, l.p95, l.p99, l.p999, l.max, r->sum.errors, o->rate, r->sum.commits, r->sum.aborts, l.c50,
	       l.c99, r->checksum);
	if (have_cpu)
		printf(" broker_cpu_ms=%.0f broker_cpu_ms_per_mib=%.3f broker_cpu_pct=%.1f", cpu.ms, cpu.ms_per_mib, cpu.pct);
	printf("\n");
	if (o->workload != SB_WL_CONSUME && o->mode == SB_MODE_TRANSACTIONAL) {
		/* Where a transaction's time goes, step by step (committed, measured ones). */
		const struct sb_fig *f = &r->sum;
		printf("TXN label=%s commits=%" PRIu64 " commits_per_sec=%.1f add_p50_ms=%.3f add_p99_ms=%.3f "
		       "produce_p50_ms=%.3f produce_p99_ms=%.3f end_p50_ms=%.3f end_p99_ms=%.3f txn_p50_ms=%.3f "
		       "txn_p99_ms=%.3f coord_retries=%" PRIu64 "\n", o->label, f->commits,
		       secs > 0 ? (double)f->commits / secs : 0.0, bench_hist_quantile_us(&f->add, 0.50) / 1e3,
		       bench_hist_quantile_us(&f->add, 0.99) / 1e3, bench_hist_quantile_us(&f->open, 0.50) / 1e3,
		       bench_hist_quantile_us(&f->open, 0.99) / 1e3, l.c50, l.c99,
		       bench_hist_quantile_us(&f->txn, 0.50) / 1e3, bench_hist_quantile_us(&f->txn, 0.99) / 1e3,
		       f->coord_retries);
	}
	fflush(stdout);
	sb_csv_row(csv, o, "summary", secs, &r->sum, &l, have_cpu ? &cpu : NULL);
	sb_totals(r);
	if (o->rate > 0)
		fprintf(stderr, "# open loop at %.0f records/s: behind_ms=%.1f at the end, %.1f at most%s\n", o->rate,
			(double)r->behind_ns / 1e6, (double)r->behind_max_ns / 1e6,
			r->behind_max_ns > 1000000u ? " (the generator fell behind its schedule)" : "");
}

/* ---- the loop ------------------------------------------------------------------------------ */

static int sb_dispatch(struct sb_run *r, struct sb_conn *c, uint64_t now)
{
	int rc = sb_conn_read(c);
	if (rc < 0)
		return rc;
	struct sb_req q;
	struct kreader body;
	while ((rc = sb_conn_frame(c, &q, &body)) == 1) {
		if (q.kind == SB_REQ_FETCH)
			rc = sb_cons_on_answer(q.owner, &q, &body, now);
		else if (q.kind == SB_REQ_PRODUCE || q.kind == SB_REQ_ADD_PARTITIONS || q.kind == SB_REQ_END_TXN)
			rc = sb_prod_on_answer(q.owner, &q, &body, now);
		else
			rc = -EPROTO;
		if (rc)
			return rc;
	}
	return rc;
}

static int sb_flush_all(struct sb_run *r, uint64_t now)
{
	for (int i = 0; i < r->nconns; i++) {
		int rc = sb_conn_flush(r->conns[i]);
		if (rc)
			return rc;
	}
	if (r->o->acks == 0) {
		/* acks=0: a written request frees its window slot now, so pump again at once. */
		uint64_t before = r->acked_all;
		for (int i = 0; i < r->nprods; i++)
			sb_prod_reap_written(&r->prods[i], now);
		if (r->acked_all != before)
			r->wake_ns = now;
	}
	return 0;
}

/* e2e: what the consumer must read once the producers are done. */
static uint64_t sb_e2e_target(const struct sb_run *r)
{
	return r->o->isolation ? r->committed_all : r->acked_all;
}

static int sb_loop(struct sb_run *r, FILE *csv)
{
	const struct sb_opts *o = r->o;
	bool prod = o->workload != SB_WL_CONSUME, cons = o->workload != SB_WL_PRODUCE;
	uint64_t deadline = UINT64_MAX;
	struct epoll_event evs[sb_events_max];
	for (;;) {
		uint64_t now = sb_now_ns();
		bool time_up = now >= r->t_end || sb_interrupted;
		/* The drain deadline runs from the producers' stop (e2e: the consumer must catch
		 * up by then too), or from the consumers' stop when there is no producer. */
		if (!r->stopping && (time_up || !prod || (o->count && r->issued >= o->count))) {
			r->stopping = true;
			r->t_stop = now;
			if (prod)
				deadline = now + (uint64_t)sb_drain_timeout_ms * 1000000u;
		}
		bool prods_done = !prod || (r->stopping && sb_prods_idle(r));
		if (cons && !r->cons_stopping) {
			bool enough = o->workload == SB_WL_E2E ? prods_done && r->read_all >= sb_e2e_target(r)
							       : o->count && r->read_all >= o->count;
			if (enough || sb_interrupted || (o->workload == SB_WL_CONSUME && time_up && !o->count)) {
				r->cons_stopping = true;
				if (!prod)
					deadline = now + (uint64_t)sb_drain_timeout_ms * 1000000u;
			}
		}
		if (prods_done && (!cons || (r->cons_stopping && sb_conss_idle(r))))
			return 0;
		if (now >= deadline || (o->workload == SB_WL_CONSUME && o->count && time_up && !r->cons_stopping)) {
			if (cons && !r->cons_stopping)
				fprintf(stderr, "sluice-bench: read %" PRIu64 " of %" PRIu64 " records in time\n", r->read_all,
					o->workload == SB_WL_E2E ? sb_e2e_target(r) : o->count);
			else
				fprintf(stderr, "sluice-bench: answers still outstanding %d ms after the end\n",
					sb_drain_timeout_ms);
			return -ETIMEDOUT;
		}
		if (prod && r->stopping && o->count && r->issued < o->count && !sb_interrupted && time_up) {
			fprintf(stderr, "sluice-bench: sent %" PRIu64 " of %" PRIu64 " records in the time limit\n", r->issued,
				o->count);
			return -ETIMEDOUT;
		}

		r->wake_ns = deadline;
		if (!r->stopping)
			sb_wake_at(r, r->t_end);
		sb_tick(r, csv, now);
		int rc = prod ? sb_prods_pump(r, now) : 0;
		if (!rc && cons)
			rc = sb_conss_pump(r, now);
		if (!rc)
			rc = sb_flush_all(r, now);
		if (rc)
			return rc;

		uint64_t wait_ns = r->wake_ns > now ? r->wake_ns - now : 0;
		struct timespec ts = { .tv_sec = (time_t)(wait_ns / 1000000000u), .tv_nsec = (long)(wait_ns % 1000000000u) };
		int n = epoll_pwait2(r->epfd, evs, sb_events_max, &ts, NULL);
		if (n < 0 && errno != EINTR) {
			perror("sluice-bench: epoll_pwait2");
			return -errno;
		}
		now = sb_now_ns();
		sb_tick(r, csv, now); /* answers that arrived after an interval's end belong to the next one */
		for (int i = 0; i < n; i++) {
			struct sb_conn *c = evs[i].data.ptr;
			if (evs[i].events & EPOLLOUT)
				rc = sb_conn_flush(c);
			if (!rc && (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
				rc = sb_dispatch(r, c, now);
			if (rc)
				return rc;
		}
	}
}

/* ---- options ------------------------------------------------------------------------------- */

static void sb_usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-bench --bootstrap HOST:PORT --topic T [options]\n"
		"  --workload produce|consume|e2e   what to run (default produce)\n"
		"  --mode plain|idempotent|transactional  producer kind (default plain)\n"
		"  --create                 create the topic with CreateTopics if it is missing\n"
		"  --partitions P           partitions for --create (default 6); an existing topic keeps its own\n"
		"  --replication-factor R   for --create (default 1)\n"
		"  --connections C          connections (producers, and consumers); partitions are spread over\n"
		"                           them (default 1)\n"
		"  --inflight N             requests outstanding per connection (default 5)\n"
		"  --batch-records N        records per produce batch (default 100)\n"
		"  --size S                 record value bytes, >= %d (default 100)\n"
		"  --keys none|seq|random   record keys (default none: null keys)\n"
		"  --key-count N            distinct keys for seq/random (default 1000)\n"
		"  --seed N                 seed of the random keys (default 1)\n"
		"  --acks 0|1|-1|all        produce acks (default -1; idempotent/transactional need -1)\n"
		"  --txn-id PREFIX          transactional ids PREFIX-<connection> (default sluice-bench-<pid>)\n"
		"  --txn-records N          records per transaction (default 1000)\n"
		"  --abort-every K          abort every K-th transaction of each connection (default 0: never)\n"
		"  --isolation uncommitted|committed  fetch isolation level (default uncommitted)\n"
		"  --rate R                 open loop: R records/s in all, latency from the intended send time\n"
		"                           (default 0: closed loop, as fast as the windows allow)\n"
		"  --warmup S               seconds left out of every figure (default 0)\n"
		"  --duration S             measured seconds (default 10); with --count, a time limit\n"
		"                           (default 300)\n"
		"  --count N                produce: N records in all; consume: read exactly N from the earliest\n"
		"                           offsets (no warm-up); e2e: not allowed\n"
		"  --interval S             seconds between interval lines (default 1)\n"
		"  --label NAME             label of the RESULT line and CSV rows (default <workload>-<mode>)\n"
		"  --csv FILE               append interval and summary rows (header if the file is empty)\n"
		"  --broker-pid PID         report the broker's CPU time (/proc/PID/stat) over the measured\n"
		"                           window: ms per MB of record values and %% of a core\n"
		"  --fetch-bytes N          fetch size per partition (default 1048576)\n"
		"  --fetch-wait-ms N        fetch MaxWaitMs (default 100)\n"
		"  --fetch-partitions K     partitions per fetch request (default 0: all of the connection's\n"
		"                           in one request, one outstanding; K: --inflight of them pipelined,\n"
		"                           whose answers queue behind each other's long polls)\n"
		"  --help\n"
		"Latency: produce, per record from the (intended) send of its batch to the produce answer;\n"
		"consume, per fetch round trip that brought records; e2e, per record from the send time in its\n"
		"value to its receipt. Exit status: 0 ok, 1 protocol/broker/connection error, 2 usage.\n",
		sb_size_min);
}

static int sb_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

static int sb_parse_int(const char *s, int lo, int hi, int *out)
{
	uint64_t v = 0;
	int rc = sb_parse_u64(s, (uint64_t)lo, (uint64_t)hi, &v);
	*out = (int)v;
	return rc;
}

static int sb_parse_secs(const char *s, double lo, double *out)
{
	char *end = NULL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= 864000.0))
		return -EINVAL;
	*out = v;
	return 0;
}

static int sb_pick(const char *s, const char *const *names, int n, int *out)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i])) {
			*out = i;
			return 0;
		}
	return -EINVAL;
}

/* Returns 0, or -EINVAL after saying why. Locality: init only. */
static int sb_parse_args(int argc, char **argv, struct sb_opts *o, char *label_buf, size_t label_cap,
			 char *txn_buf, size_t txn_cap)
{
	enum { o_bootstrap = 256, o_topic, o_workload, o_mode, o_create, o_partitions, o_repl, o_connections,
	       o_inflight, o_batch, o_size, o_keys, o_key_count, o_seed, o_acks, o_txn_id, o_txn_records, o_abort,
	       o_isolation, o_rate, o_warmup, o_duration, o_count, o_interval, o_label, o_csv, o_fetch_bytes,
	       o_fetch_wait, o_fetch_parts, o_broker_pid, o_help };
	static const struct option longopts[] = {
		{ "bootstrap", required_argument, NULL, o_bootstrap }, { "topic", required_argument, NULL, o_topic },
		{ "workload", required_argument, NULL, o_workload }, { "mode", required_argument, NULL, o_mode },
		{ "create", no_argument, NULL, o_create }, { "partitions", required_argument, NULL, o_partitions },
		{ "replication-factor", required_argument, NULL, o_repl },
		{ "connections", required_argument, NULL, o_connections },
		{ "inflight", required_argument, NULL, o_inflight }, { "batch-records", required_argument, NULL, o_batch },
		{ "size", required_argument, NULL, o_size }, { "keys", required_argument, NULL, o_keys },
		{ "key-count", required_argument, NULL, o_key_count }, { "seed", required_argument, NULL, o_seed },
		{ "acks", required_argument, NULL, o_acks }, { "txn-id", required_argument, NULL, o_txn_id },
		{ "txn-records", required_argument, NULL, o_txn_records },
		{ "abort-every", required_argument, NULL, o_abort }, { "isolation", required_argument, NULL, o_isolation },
		{ "rate", required_argument, NULL, o_rate }, { "warmup", required_argument, NULL, o_warmup },
		{ "duration", required_argument, NULL, o_duration }, { "count", required_argument, NULL, o_count },
		{ "interval", required_argument, NULL, o_interval }, { "label", required_argument, NULL, o_label },
		{ "csv", required_argument, NULL, o_csv }, { "fetch-bytes", required_argument, NULL, o_fetch_bytes },
		{ "fetch-wait-ms", required_argument, NULL, o_fetch_wait },
		{ "fetch-partitions", required_argument, NULL, o_fetch_parts }, { "help", no_argument, NULL, o_help },
		{ "broker-pid", required_argument, NULL, o_broker_pid },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const workloads[] = { "produce", "consume", "e2e" };
	static const char *const modes[] = { "plain", "idempotent", "transactional" };
	static const char *const keys[] = { "none", "seq", "random" };
	static const char *const isolations[] = { "uncommitted", "committed" };
	*o = (struct sb_opts){ .partitions = 6, .replication = 1, .connections = 1, .inflight = 5, .batch_records = 100,
			       .size = 100, .key_count = 1000, .seed = 1, .txn_records = 1000, .duration_s = 10.0,
			       .interval_s = 1.0, .acks = -1, .fetch_bytes = 1 << 20, .fetch_wait_ms = 100 };
	bool duration_set = false, warmup_set = false;
	int c, v = 0, li = -1;
	while ((c = getopt_long(argc, argv, "h", longopts, &li)) != -1) {
		int rc = 0;
		switch (c) {
		case o_bootstrap: o->bootstrap = optarg; break;
		case o_topic: o->topic = optarg; break;
		case o_workload: rc = sb_pick(optarg, workloads, 3, &v); o->workload = (enum sb_workload)v; break;
		case o_mode: rc = sb_pick(optarg, modes, 3, &v); o->mode = (enum sb_mode)v; break;
		case o_create: o->create = true; break;
		case o_partitions: rc = sb_parse_int(optarg, 1, sb_partitions_max, &o->partitions); break;
		case o_repl: rc = sb_parse_int(optarg, 1, 32767, &o->replication); break;
		case o_connections: rc = sb_parse_int(optarg, 1, sb_connections_max, &o->connections); break;
		case o_inflight: rc = sb_parse_int(optarg, 1, sb_inflight_max, &o->inflight); break;
		case o_batch: rc = sb_parse_int(optarg, 1, sb_batch_records_max, &o->batch_records); break;
		case o_size: rc = sb_parse_int(optarg, sb_size_min, sb_size_max, &o->size); break;
		case o_keys: rc = sb_pick(optarg, keys, 3, &v); o->keys = (enum sb_keys)v; break;
		case o_key_count: rc = sb_parse_u64(optarg, 1, 999999999999999999ull, &o->key_count); break;
		case o_seed: rc = sb_parse_u64(optarg, 0, UINT64_MAX, &o->seed); break;
		case o_acks:
			if (!strcmp(optarg, "all") || !strcmp(optarg, "-1"))
				o->acks = -1;
			else if (!strcmp(optarg, "0") || !strcmp(optarg, "1"))
				o->acks = (int16_t)atoi(optarg);
			else
				rc = -EINVAL;
			break;
		case o_txn_id: o->txn_prefix = optarg; break;
		case o_txn_records: rc = sb_parse_u64(optarg, 1, 1000000000000ull, &o->txn_records); break;
		case o_abort: rc = sb_parse_u64(optarg, 0, UINT64_MAX, &o->abort_every); break;
		case o_isolation: rc = sb_pick(optarg, isolations, 2, &v); o->isolation = (int8_t)v; break;
		case o_rate: rc = sb_parse_secs(optarg, 0.0, &o->rate); if (o->rate > 1e10) rc = -EINVAL; break;
		case o_warmup: rc = sb_parse_secs(optarg, 0.0, &o->warmup_s); warmup_set = true; break;
		case o_duration: rc = sb_parse_secs(optarg, 0.001, &o->duration_s); duration_set = true; break;
		case o_count: rc = sb_parse_u64(optarg, 1, UINT64_MAX / 4, &o->count); break;
		case o_interval: rc = sb_parse_secs(optarg, 0.01, &o->interval_s); break;
		case o_label: o->label = optarg; break;
		case o_csv: o->csv = optarg; break;
		case o_fetch_bytes: rc = sb_parse_int(optarg, sb_fetch_bytes_min, sb_fetch_bytes_max, &o->fetch_bytes); break;
		case o_fetch_wait: rc = sb_parse_int(optarg, 0, 60000, &o->fetch_wait_ms); break;
		case o_fetch_parts: rc = sb_parse_int(optarg, 0, sb_partitions_max, &o->fetch_partitions); break;
		case o_broker_pid: rc = sb_parse_int(optarg, 1, 0x7fffffff, &o->broker_pid); break;
		case 'h':
		case o_help: sb_usage(stdout); exit(0);
		default: sb_usage(stderr); return -EINVAL;
		}
		if (rc) {
			fprintf(stderr, "sluice-bench: bad value for --%s: '%s'\n", li >= 0 ? longopts[li].name : "?",
				optarg ? optarg : "");
			return rc;
		}
		li = -1;
	}
	const char *why = NULL;
	if (optind != argc)
		why = "unexpected positional argument";
	else if (!o->bootstrap || !o->topic)
		why = "--bootstrap and --topic are required";
	else if (strlen(o->topic) > sb_name_bytes_max)
		why = "topic name too long";
	else if (o->workload != SB_WL_CONSUME && o->mode != SB_MODE_PLAIN && o->acks != -1)
		why = "idempotent and transactional producers need --acks -1";
	else if (o->abort_every && o->mode != SB_MODE_TRANSACTIONAL)
		why = "--abort-every needs --mode transactional";
	else if (o->workload == SB_WL_E2E && o->count)
		why = "--count is for produce and consume";
	else if (o->workload == SB_WL_CONSUME && o->count && warmup_set && o->warmup_s > 0)
		why = "consume --count reads from the earliest offsets without a warm-up";
	else if (o->label && strpbrk(o->label, " \t\n,="))
		why = "--label may not hold spaces, commas or '='";
	else if (o->broker_pid && sb_cpu_read(o->broker_pid, &(uint64_t){ 0 }) != 0)
		why = "--broker-pid: no readable /proc/PID/stat for that pid";
	if (why) {
		fprintf(stderr, "sluice-bench: %s\n", why);
		sb_usage(stderr);
		return -EINVAL;
	}
	if (o->count && !duration_set)
		o->duration_s = SB_COUNT_LIMIT_DEFAULT_S;
	if (!o->txn_prefix) {
		snprintf(txn_buf, txn_cap, "sluice-bench-%d", (int)getpid());
		o->txn_prefix = txn_buf;
	}
	if (strlen(o->txn_prefix) > 200) {
		fprintf(stderr, "sluice-bench: --txn-id too long\n");
		return -EINVAL;
	}
	if (!o->label) {
		snprintf(label_buf, label_cap, "%s-%s", sb_workload_name(o->workload),
			 o->workload == SB_WL_CONSUME ? (o->isolation ? "committed" : "uncommitted") : sb_mode_name(o));
		o->label = label_buf;
	}
	return 0;
}

static void sb_on_signal(int sig)
{
	(void)sig;
	sb_interrupted = 1;
}

static FILE *sb_csv_open(const char *path)
{
	FILE *f = fopen(path, "a");
	if (!f) {
		fprintf(stderr, "sluice-bench: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	if (ftell(f) == 0) {
		fseek(f, 0, SEEK_END);
		if (ftell(f) == 0)
			fprintf(f, "%s\n", SB_CSV_HEADER);
	}
	return f;
}

int main(int argc, char **argv)
{
	static struct sb_run run; /* static: four histograms of ~30 KiB */
	static struct sb_opts o;
	char label[160], txn[64];
	if (sb_parse_args(argc, argv, &o, label, sizeof label, txn, sizeof txn))
		return 2;
	struct sb_run *r = &run;
	r->o = &o;
	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	void *arena = malloc(sb_arena_bytes);
	if (r->epfd < 0 || !arena) {
		fprintf(stderr, "sluice-bench: start-up: %s\n", strerror(errno));
		return 1;
	}
	karena_init(&r->arena, arena, sb_arena_bytes);
	struct sigaction sa = { .sa_handler = sb_on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	FILE *csv = o.csv ? sb_csv_open(o.csv) : NULL;
	if (o.csv && !csv)
		return 2;

	fprintf(stderr, "# sluice-bench %s, %s, bootstrap %s, topic %s, %d connection%s x %d in flight, "
		"%d records x %d bytes per batch, acks %d%s\n", sb_workload_name(o.workload), sb_mode_name(&o),
		o.bootstrap, o.topic, o.connections, o.connections > 1 ? "s" : "", o.inflight, o.batch_records, o.size,
		o.acks, o.rate > 0 ? ", open loop" : ", closed loop");
	int rc = sb_setup(r);
	if (!rc) {
		r->t_begin = sb_now_ns();
		r->t_measure = r->t_begin + (uint64_t)(o.warmup_s * 1e9);
		r->t_end = (o.count ? r->t_begin : r->t_measure) + (uint64_t)(o.duration_s * 1e9);
		rc = sb_loop(r, csv);
		if (!rc)
			sb_report(r, csv, sb_now_ns());
		else
			sb_totals(r);
	}
	if (csv)
		fclose(csv);
	for (int i = 0; i < r->nconns; i++) {
		sb_conn_close(r->conns[i]);
		free(r->conns[i]);
	}
	if (r->boot) {
		sb_conn_close(r->boot);
		free(r->boot);
	}
	if (rc) {
		fprintf(stderr, "sluice-bench: failed (%s)\n", strerror(-rc));
		return 1;
	}
	if (r->sum.records == 0)
		fprintf(stderr, "sluice-bench: warning: no records were measured\n");
	return 0;
}
