/*
 * sb_ut.c: unit tests of sluice-bench's producer and consumer logic, without a
 * broker: connections are plain buffers that nobody sends, answers are encoded
 * with the generic codec and handed to the handlers directly.
 *
 *   - hand-encoded produce requests decode with the generic codec; their batch
 *     parses, its CRC holds, its records carry the stamp, keys, sequences and
 *     the digest the producer recorded;
 *   - a retriable error resends the failed batch and the batches it doomed, in
 *     order, with the same sequences and content; an unexpected
 *     OUT_OF_ORDER_SEQUENCE_NUMBER ends the run;
 *   - the consumer skips control batches and, with read_committed, the batches
 *     of aborted transactions, and stops at a truncated batch.
 *
 * The figure functions of sluice_bench.c are stubbed here and count calls.
 * Locality: test thread.
 */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "sb.h"
#include "sb_digest.h"

/* ---- stubs of sluice_bench.c ------------------------------------------------------------ */

static uint64_t ut_records, ut_errors, ut_now_ns = 1000000;

void sb_fig_records(struct sb_run *r, uint64_t n, uint64_t bytes, uint64_t lat_us, uint64_t lat_samples, uint64_t now)
{
	ut_records += n;
}
void sb_fig_error(struct sb_run *r) { ut_errors++; }
void sb_fig_txn(struct sb_run *r, bool commit, uint64_t lat_us, bool measured) {}
void sb_fig_txn_steps(struct sb_run *r, uint64_t add_us, uint64_t open_us, uint64_t txn_us) {}
void sb_fig_coord_retry(struct sb_run *r) {}
uint64_t sb_now_ns(void) { return ut_now_ns; }
int64_t sb_wall_ms(void) { return 1700000000000; }

/* ---- fixtures ---------------------------------------------------------------------------- */

static struct sb_run ut_run;
static struct sb_opts ut_opts;
static struct sb_prod ut_prod;
static struct sb_cons ut_cons;
static struct sb_conn ut_conn_;
static uint8_t ut_arena_mem[1 << 20], ut_dec_mem[1 << 20];
static struct karena ut_dec; /* the test's own decodes */

static void ut_conn_init(struct sb_conn *c)
{
	free(c->sbuf);
	free(c->rbuf);
	free(c->q);
	*c = (struct sb_conn){ .fd = -1, .epfd = -1, .scap = 4 << 20, .rcap = 1 << 16, .qcap = 16, .next_corr = 1 };
	c->sbuf = malloc(c->scap);
	c->rbuf = malloc(c->rcap);
	c->q = calloc(c->qcap, sizeof *c->q);
	CU_ASSERT_FATAL(c->sbuf && c->rbuf && c->q);
}

/* One idempotent producer (pid 42, epoch 3) on partitions 0 and 3 of topic "ut". */
static void ut_prod_init(enum sb_keys keys)
{
	struct sb_run *r = &ut_run;
	ut_opts = (struct sb_opts){ .topic = "ut", .workload = SB_WL_PRODUCE, .mode = SB_MODE_IDEMPOTENT, .keys = keys,
				    .key_count = 1000, .seed = 5, .size = 100, .batch_records = 100, .inflight = 4,
				    .acks = -1, .connections = 1, .txn_records = 1000 };
	free(r->tpl.buf);
	free(r->tpl.rec_end);
	free(r->tpl.val_off);
	*r = (struct sb_run){ .o = &ut_opts, .t_end = UINT64_MAX, .nparts = 4 };
	karena_init(&r->arena, ut_arena_mem, sizeof ut_arena_mem);
	CU_ASSERT_FATAL(sb_tpl_init(r) == 0);
	ut_conn_init(&ut_conn_);
	struct sb_prod *p = &ut_prod;
	for (int s = 0; s < p->nslots; s++)
		free(p->slots[s].resend);
	free(p->slots);
	*p = (struct sb_prod){ .run = r, .idx = 0, .conn = &ut_conn_, .coord = &ut_conn_, .pid = 42, .epoch = 3,
			       .nslots = 2 };
	p->slots = calloc(2, sizeof *p->slots);
	for (int s = 0; s < 2; s++) {
		p->slots[s].partition = s * 3;
		p->slots[s].resend = calloc((size_t)ut_opts.inflight, sizeof(struct sb_batch));
	}
	r->prods = p;
	r->nprods = 1;
	ut_records = ut_errors = 0;
}

/* Decodes the i-th queued produce request in the send buffer; checks it against its queue entry. */
static void ut_check_request(const uint8_t **at, const struct sb_req *q, int32_t partition, int32_t seq)
{
	struct kreader rd;
	uint32_t size = st_be32(*at);
	kr_init(&rd, *at + 4, size);
	*at += 4 + size;
	struct kreq_header h;
	CU_ASSERT_FATAL(kreq_header_decode(&rd, &h) == 0);
	CU_ASSERT(h.api_key == KAPI_PRODUCE && h.api_version == SB_V_PRODUCE && h.correlation_id == q->corr);
	struct ProduceRequest req;
	karena_reset(&ut_dec);
	CU_ASSERT_FATAL(ProduceRequest_decode(&rd, SB_V_PRODUCE, &req, &ut_dec) == 0);
	CU_ASSERT(kr_left(&rd) == 0);
	CU_ASSERT(req.Acks == -1 && req.TransactionalId.len == -1);
	CU_ASSERT_FATAL(req.TopicData_n == 1 && req.TopicData[0].PartitionData_n == 1);
	CU_ASSERT(sb_kstr_eq(req.TopicData[0].Name, "ut", 2));
	const struct ProduceRequest_PartitionProduceData *pd = &req.TopicData[0].PartitionData[0];
	CU_ASSERT(pd->Index == partition);

	struct st_batch_hdr bh;
	CU_ASSERT_FATAL(st_batch_parse(pd->Records.ptr, (size_t)pd->Records.len, &bh) == pd->Records.len);
	CU_ASSERT(st_batch_crc_ok(pd->Records.ptr, (size_t)pd->Records.len));
	CU_ASSERT(bh.producer_id == 42 && bh.producer_epoch == 3 && bh.base_sequence == seq);
	CU_ASSERT(bh.records_count == 100 && bh.last_offset_delta == 99 && bh.attributes == 0);
	CU_ASSERT(bh.first_timestamp == 1700000000000 && bh.max_timestamp == bh.first_timestamp);
	struct st_record_iter it;
	struct st_record rec;
	CU_ASSERT_FATAL(st_record_iter_init(&it, pd->Records.ptr, (size_t)pd->Records.len, &bh) == 0);
	uint64_t digest = 0;
	for (int i = 0; i < 100; i++) {
		CU_ASSERT_FATAL(st_record_next(&it, &rec) == 1);
		CU_ASSERT(rec.offset_delta == i && rec.value_len == 100);
		CU_ASSERT(st_be64(rec.value) == q->b.intended_ns / 1000u);
		CU_ASSERT(st_be32(rec.value + 8) == (uint32_t)partition && st_be32(rec.value + 12) == 0);
		CU_ASSERT(st_be64(rec.value + 16) == q->b.counter + (uint64_t)i);
		if (ut_opts.keys == SB_KEYS_SEQ) {
			char want[4];
			snprintf(want, sizeof want, "%03d", (int)((q->b.counter + (uint64_t)i) % 1000));
			CU_ASSERT(rec.key_len == 3 && memcmp(rec.key, want, 3) == 0);
		} else {
			CU_ASSERT(rec.key_len == -1 && rec.key == NULL);
		}
		digest += sb_digest_record(partition, rec.key, rec.key_len, rec.value, rec.value_len);
	}
	CU_ASSERT(st_record_next(&it, &rec) == 0);
	CU_ASSERT(digest == q->b.digest);
}

/* Pops the head request as sb_conn_frame would and answers it with error code ec. */
static int ut_answer(int16_t ec)
{
	struct sb_conn *c = &ut_conn_;
	CU_ASSERT_FATAL(c->qlen > 0);
	struct sb_req q = c->q[c->qhead];
	c->qhead = (c->qhead + 1) % c->qcap;
	c->qlen--;
	struct ProduceResponse resp;
	struct ProduceResponse_TopicProduceResponse t;
	struct ProduceResponse_PartitionProduceResponse pr;
	ProduceResponse_init(&resp);
	ProduceResponse_TopicProduceResponse_init(&t);
	ProduceResponse_PartitionProduceResponse_init(&pr);
	pr.Index = ut_prod.slots[q.b.slot].partition;
	pr.ErrorCode = ec;
	pr.RecordErrors_n = 0;
	t.Name = (struct kstr){ "ut", 2 };
	t.PartitionResponses_n = 1;
	t.PartitionResponses = &pr;
	resp.Responses_n = 1;
	resp.Responses = &t;
	resp.NodeEndpoints_n = 0;
	static uint8_t buf[256];
	struct kwriter w;
	kw_init(&w, buf, sizeof buf);
	CU_ASSERT_FATAL(ProduceResponse_encode(&w, SB_V_PRODUCE, &resp) == 0);
	struct kreader rd;
	kr_init(&rd, buf, kw_len(&w));
	return sb_prod_on_answer(&ut_prod, &q, &rd, ut_now_ns);
}

static const struct sb_req *ut_queued(int i)
{
	return &ut_conn_.q[(ut_conn_.qhead + (uint32_t)i) % ut_conn_.qcap];
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_produce_encoding(void)
{
	ut_prod_init(SB_KEYS_SEQ);
	CU_ASSERT_FATAL(sb_prods_pump(&ut_run, ut_now_ns) == 0);
	CU_ASSERT_FATAL(ut_conn_.qlen == 4); /* the window */
	const uint8_t *at = ut_conn_.sbuf;
	/* Round robin over the slots; sequences count records per partition. */
	ut_check_request(&at, ut_queued(0), 0, 0);
	ut_check_request(&at, ut_queued(1), 3, 0);
	ut_check_request(&at, ut_queued(2), 0, 100);
	ut_check_request(&at, ut_queued(3), 3, 100);
	CU_ASSERT(at == ut_conn_.sbuf + ut_conn_.stail);
	CU_ASSERT(ut_run.issued == 400 && ut_prod.inflight == 4);
	for (int i = 0; i < 4; i++)
		CU_ASSERT(ut_answer(0) == 0);
	CU_ASSERT(ut_run.acked_all == 400 && ut_records == 400 && ut_prod.inflight == 0);
}

static void test_sequence_wraps(void)
{
	ut_prod_init(SB_KEYS_NONE);
	ut_prod.slots[0].next_seq = INT32_MAX - 49; /* 50 sequences left before the wrap */
	CU_ASSERT_FATAL(sb_prods_pump(&ut_run, ut_now_ns) == 0);
	const uint8_t *at = ut_conn_.sbuf;
	ut_check_request(&at, ut_queued(0), 0, INT32_MAX - 49);
	ut_check_request(&at, ut_queued(1), 3, 0);
	ut_check_request(&at, ut_queued(2), 0, 50); /* INT32_MAX is followed by 0 */
}

static void test_retry_in_order(void)
{
	ut_prod_init(SB_KEYS_NONE);
	CU_ASSERT_FATAL(sb_prods_pump(&ut_run, ut_now_ns) == 0);
	uint64_t d0 = ut_queued(0)->b.digest, d2 = ut_queued(2)->b.digest;
	CU_ASSERT(ut_answer(KERR_REQUEST_TIMED_OUT) == 0); /* slot 0, sequence 0: retriable */
	CU_ASSERT(ut_answer(0) == 0);                        /* slot 1 */
	CU_ASSERT(ut_answer(KERR_OUT_OF_ORDER_SEQUENCE_NUMBER) == 0);      /* slot 0, sequence 100: doomed by the first */
	CU_ASSERT(ut_answer(0) == 0);
	CU_ASSERT(ut_errors == 1 && ut_run.acked_all == 200);
	CU_ASSERT(ut_prod.slots[0].resend_len == 2);

	/* Before the back-off ends only the other slot sends; then the two batches again,
	 * in order, same content. */
	CU_ASSERT_FATAL(sb_prods_pump(&ut_run, ut_now_ns + 1000000) == 0);
	CU_ASSERT_FATAL(ut_conn_.qlen == 4);
	for (int i = 0; i < 4; i++) {
		CU_ASSERT(ut_queued(0)->b.slot == 1 && ut_queued(0)->b.seq == 200 + 100 * i); /* popped below */
		CU_ASSERT(ut_answer(0) == 0);
	}
	uint32_t tail = (uint32_t)ut_conn_.stail;
	ut_now_ns += (uint64_t)sb_retry_backoff_ms * 1000000u;
	CU_ASSERT_FATAL(sb_prods_pump(&ut_run, ut_now_ns) == 0);
	CU_ASSERT_FATAL(ut_conn_.qlen == 4);
	const uint8_t *at = ut_conn_.sbuf + tail;
	ut_check_request(&at, ut_queued(0), 0, 0);
	ut_check_request(&at, ut_queued(1), 0, 100);
	CU_ASSERT(ut_queued(0)->b.digest == d0 && ut_queued(1)->b.digest == d2);
	CU_ASSERT(ut_queued(0)->b.attempts == 2 && ut_queued(2)->b.attempts == 1);
	CU_ASSERT(ut_queued(2)->b.slot == 0 && ut_queued(2)->b.seq == 200); /* new ones after the resent ones */
	for (int i = 0; i < 4; i++)
		CU_ASSERT(ut_answer(0) == 0);
	CU_ASSERT(ut_run.acked_all == 1000 && ut_run.committed_all == 1000);

	/* An out-of-order answer nobody expects ends the run. */
	CU_ASSERT_FATAL(sb_prods_pump(&ut_run, ut_now_ns) == 0);
	CU_ASSERT(ut_answer(KERR_OUT_OF_ORDER_SEQUENCE_NUMBER) == -EIO);
	/* So does a fatal broker error. */
	CU_ASSERT(ut_answer(KERR_INVALID_PRODUCER_EPOCH) == -EIO);
}

/* A fetch answer for partition 0 holding `recs`, aborted transactions `ab`; handled with `isolation`. */
static int ut_fetch(int8_t isolation, const uint8_t *recs, size_t len, const struct FetchResponse_AbortedTransaction *ab,
		    int nab)
{
	struct sb_run *r = &ut_run;
	ut_opts = (struct sb_opts){ .topic = "ut", .workload = SB_WL_CONSUME, .isolation = isolation, .inflight = 1,
				    .fetch_bytes = 1 << 20 };
	*r = (struct sb_run){ .o = &ut_opts, .t_end = UINT64_MAX, .nparts = 1, .nconss = 1 };
	karena_init(&r->arena, ut_arena_mem, sizeof ut_arena_mem);
	static struct sb_fpart part;
	part = (struct sb_fpart){ .partition = 0, .busy = true, .offset = 0 };
	ut_cons = (struct sb_cons){ .run = r, .conn = &ut_conn_, .parts = &part, .nparts = 1, .inflight = 1 };
	r->conss = &ut_cons;

	struct FetchResponse resp;
	struct FetchResponse_FetchableTopicResponse t;
	struct FetchResponse_PartitionData pd;
	FetchResponse_init(&resp);
	FetchResponse_FetchableTopicResponse_init(&t);
	FetchResponse_PartitionData_init(&pd);
	pd.PartitionIndex = 0;
	pd.HighWatermark = 8;
	pd.LastStableOffset = 8;
	pd.LogStartOffset = 0;
	pd.AbortedTransactions_n = nab;
	pd.AbortedTransactions = (struct FetchResponse_AbortedTransaction *)ab;
	pd.Records = (struct kbytes){ recs, (int32_t)len };
	t.Topic = (struct kstr){ "ut", 2 };
	t.Partitions_n = 1;
	t.Partitions = &pd;
	resp.Responses_n = 1;
	resp.Responses = &t;
	resp.NodeEndpoints_n = 0;
	static uint8_t buf[8192];
	struct kwriter w;
	kw_init(&w, buf, sizeof buf);
	CU_ASSERT_FATAL(FetchResponse_encode(&w, SB_V_FETCH, &resp) == 0);
	struct kreader rd;
	kr_init(&rd, buf, kw_len(&w));
	struct sb_req q = { .kind = SB_REQ_FETCH, .expects_response = true, .fpart = 1, .sent_ns = ut_now_ns };
	int rc = sb_cons_on_answer(&ut_cons, &q, &rd, ut_now_ns);
	CU_ASSERT(!part.busy && ut_cons.inflight == 0);
	return rc;
}

static size_t ut_put_batch(uint8_t *at, int64_t offset, int16_t attrs, int64_t pid, const char *value)
{
	int n = st_batch_build(at, 256, attrs, pid, pid >= 0 ? 0 : -1, pid >= 0 ? 0 : -1, 1, NULL, -1, value,
			       (int32_t)strlen(value));
	CU_ASSERT_FATAL(n > 0);
	st_batch_set_base_offset(at, offset);
	return (size_t)n;
}

static size_t ut_put_marker(uint8_t *at, int64_t offset, int64_t pid, bool commit)
{
	int n = st_batch_build_marker(at, 256, pid, 0, commit, 0, 1);
	CU_ASSERT_FATAL(n > 0);
	st_batch_set_base_offset(at, offset);
	return (size_t)n;
}

static uint64_t ut_digest(const char *const *values, int n)
{
	uint64_t d = 0;
	for (int i = 0; i < n; i++)
		d += sb_digest_record(0, NULL, -1, values[i], (int32_t)strlen(values[i]));
	return d;
}

static void test_fetch_read_committed(void)
{
	static uint8_t recs[4096];
	size_t len = 0;
	const int16_t txn = ST_BATCH_ATTR_TRANSACTIONAL;
	len += ut_put_batch(recs + len, 0, 0, -1, "plain");
	len += ut_put_batch(recs + len, 1, txn, 7, "aborted");
	len += ut_put_batch(recs + len, 2, txn, 8, "committed-8");
	len += ut_put_marker(recs + len, 3, 7, false);
	len += ut_put_marker(recs + len, 4, 8, true);
	len += ut_put_batch(recs + len, 5, txn, 7, "committed-7"); /* producer 7's next transaction */
	len += ut_put_marker(recs + len, 6, 7, true);
	size_t whole = len;
	len += ut_put_batch(recs + len, 7, 0, -1, "truncated") - 5; /* the answer ends inside it */
	struct FetchResponse_AbortedTransaction ab[1] = { { .ProducerId = 7, .FirstOffset = 1 } };

	const char *committed[] = { "plain", "committed-8", "committed-7" };
	CU_ASSERT(ut_fetch(1, recs, len, ab, 1) == 0);
	CU_ASSERT(ut_run.read_all == 3 && ut_run.aborted_skipped == 1);
	CU_ASSERT(ut_run.checksum == ut_digest(committed, 3));
	CU_ASSERT(ut_cons.parts[0].offset == 7);

	const char *all[] = { "plain", "aborted", "committed-8", "committed-7" };
	CU_ASSERT(ut_fetch(0, recs, whole, ab, 1) == 0);
	CU_ASSERT(ut_run.read_all == 4 && ut_run.aborted_skipped == 0);
	CU_ASSERT(ut_run.checksum == ut_digest(all, 4));

	/* A damaged batch is an error, not a silent skip. */
	recs[whole - 1] ^= 1;
	CU_ASSERT(ut_fetch(0, recs, whole, ab, 1) == -EPROTO);
}

/* --broker-pid: utime + stime out of /proc/PID/stat, a comm with spaces and ')' included. */
static void test_broker_cpu(void)
{
	uint64_t t = 0;
	const char *stat = "4242 (sluiced) x) S 1 4242 4242 0 -1 4194560 1500 0 3 0 1234 567 0 0 20 0 3 0 99 "
			   "123456789 2000 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 17 1 0 0 0 0 0\n";
	CU_ASSERT(sb_cpu_parse_stat(stat, &t) == 0 && t == 1234 + 567);
	CU_ASSERT(sb_cpu_parse_stat("4242 (sluiced) S 1 2 3", &t) == -EINVAL);
	CU_ASSERT(sb_cpu_parse_stat("4242 sluiced S 1 2 3 4 5 6 7 8 9 10 11 12 13", &t) == -EINVAL);
	CU_ASSERT(sb_cpu_parse_stat("1 (a) S 1 1 1 0 -1 0 0 0 0 0 12x 5 0", &t) == -EINVAL);

	/* Our own process: its stat parses, and its CPU time does not go backwards. */
	uint64_t a = 0, b = 0;
	CU_ASSERT(sb_cpu_read((int)getpid(), &a) == 0);
	for (volatile uint64_t i = 0; i < 20000000u; i++)
		;
	CU_ASSERT(sb_cpu_read((int)getpid(), &b) == 0 && b >= a);
	CU_ASSERT(sb_cpu_read(0x7ffffffe, &a) == -ENOENT);

	/* 250 ticks at 100 Hz = 2.5 s of CPU over 10 MiB in 5 s: 250 ms per MiB, half a core. */
	struct sb_cpu_fig f = sb_cpu_fig_of(250, 100, 10u << 20, 5.0);
	CU_ASSERT_DOUBLE_EQUAL(f.ms, 2500.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(f.ms_per_mib, 250.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(f.pct, 50.0, 1e-9);
	f = sb_cpu_fig_of(250, 100, 0, 0.0);
	CU_ASSERT(f.ms_per_mib == 0.0 && f.pct == 0.0);
}

int main(void)
{
	karena_init(&ut_dec, ut_dec_mem, sizeof ut_dec_mem);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("sluice-bench", NULL, NULL);
	CU_add_test(s, "produce request encoding", test_produce_encoding);
	CU_add_test(s, "sequence wraps at INT32_MAX", test_sequence_wraps);
	CU_add_test(s, "retriable error: resend in order", test_retry_in_order);
	CU_add_test(s, "fetch: control batches, aborted transactions", test_fetch_read_committed);
	CU_add_test(s, "--broker-pid: /proc/PID/stat and the CPU figures", test_broker_cpu);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
