/*
 * wsim.c - sluice-wsim, the whole-broker deterministic simulator.
 *
 * The real broker (dataplane/: loop, conn, shard, control, with storage/ and
 * txn/ under it) runs its cores on this one thread, stepped in a seeded
 * order (dp_core_step), on a virtual clock, against the in-memory disk
 * (sim_disk.c, behind storage/fs.h and wsim_fs.h) and the in-memory network
 * (nic/nic_sim.c). Clients speak the Kafka wire through nic_sim pipes, with
 * the generated codec (kmsg.h): idempotent producers (acks=-1, up to 5
 * batches in flight, retries), transactional producers (FindCoordinator,
 * InitProducerId, AddPartitionsToTxn, Produce, AddOffsetsToTxn,
 * TxnOffsetCommit, EndTxn commit and abort) and a read_committed consumer
 * (Fetch isolation 1, the aborted-transaction lists, as Kafka's consumer
 * filters). The simulated machine crashes at random (the disk keeps a seeded
 * part of what was not synced, clients see resets) and restarts: real
 * recovery from the simulated disk.
 *
 * After each run (faults off, everything settled, one last crash and
 * restart) it checks Kafka's guarantees: nothing acknowledged lost, no
 * duplicate, read_committed shows no aborted or uncommitted record,
 * transactions all-or-nothing across partitions, committed offsets only
 * from committed transactions, the LSO never moves back. A failure prints
 * its seed; --seed N replays it exactly (--replay-check runs it twice and
 * compares the runs' digests).
 *
 * The seam: dataplane/loop/seam.h and seam_nic.h under -DDP_LOOP_SIM are
 * implemented here (the dp_seam_* functions below).
 *
 * Locality: one thread, everything.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <liburing.h>
#include <malloc.h>

#include "batch.h"
#include "coord.h"
#include "fs.h"
#include "htab.h"
#include "kmsg.h"
#include "kwire.h"
#include "nic.h"
#include "nic_sim.h"
#include "broker.h"
#include "control.h"   /* dp_scan_data_dir */
#include "seam_nic.h"
#include "sim_disk.h"

/* Limits of the workload, units last. */
#define W_TOPICS 2
#define W_PARTS_PER_TOPIC 2
#define W_PARTS (W_TOPICS * W_PARTS_PER_TOPIC)
#define W_IDEM_MAX 3              /* idempotent producers */
#define W_TXNP_MAX 2              /* transactional producers */
#define W_IDEM_BATCHES_MAX 200    /* batches one idempotent producer sends in a run */
#define W_TXNS_MAX 40             /* transactions of one transactional producer in a run */
#define W_TXN_RECS_MAX 6          /* records of one transaction */
#define W_INFLIGHT_MAX 5          /* idempotent batches in flight (Kafka's limit) */
#define W_QUEUE_MAX 8             /* requests a client connection waits on */
#define W_OUT_BYTES (64u << 10)
#define W_IN_BYTES (512u << 10)
#define W_ARENA_BYTES (1u << 20)
#define W_FETCH_PART_BYTES (16u << 10)
#define W_LOG_MAX 4096            /* records one partition holds in a run */
#define W_VALUE_BYTES 16
#define W_PORT 9092
/* The simulated broker's settings where they differ from sluiced's defaults (broker_boot). */
#define W_SEGMENT_BYTES (16u << 10)   /* segments roll within a run */
#define W_SNAPSHOT_MS 300             /* producer snapshots taken within a run */
#define W_TXN_IDS_MAX 16              /* the coordinator's id table (W_TXNP_MAX in use) */
#define W_APPENDS_MAX 256             /* per data core, appends in flight */
#define W_TXN_ALLOWS_MAX 64           /* per data core, partitions granted to open transactions */
#define W_PARTITIONS_MAX 10000        /* the simulated machine's fd budget */
#define W_NIC_CONNS 64            /* the simulated NIC's accept table per core */
#define W_NIC_RX_BUFS 16          /* ... and its receive buffers (DP_NIC_RX_BUF_BYTES each) */
#define W_RUN_US (2500u * 1000u)  /* the workload's virtual time, before settling */
#define W_SETTLE_US (120ull * 1000 * 1000) /* settling must finish within this (else: stuck) */
#define W_SUPERVISE_US (20ll * 1000 * 1000) /* settling: the broker is restarted after this without settling */
#define W_BACKOFF_US 20000u       /* a client's retry back-off */
#define W_REQ_TIMEOUT_US (10ull * 1000 * 1000) /* a client gives up on a connection after this */
#define W_EPOCH_WALL_MS 1700000000000ll

enum { V_PRODUCE = 7, V_FETCH = 11, V_INIT_PID = 1, V_FIND_COORD = 2, V_ADD_PARTS = 1, V_END_TXN = 1,
       V_ADD_OFFSETS = 1, V_TXN_OFFSET_COMMIT = 2, V_OFFSET_FETCH = 7, V_CREATE_TOPICS = 4 };

static const char *const topic_names[W_TOPICS] = { "wa", "wb" };

/* ---- the virtual machine: clock, network, cores ------------------------------------------- */

static struct {
	int64_t now_us;
	struct nic_sim_net *net;
	struct dp_broker *b;          /* NULL while the machine is down */
	volatile sig_atomic_t stop;
	_Atomic int ready;
	int cores;
	int control_core;             /* --control-core: the broker's (enum dp_control_core) */
	int disk_faults;              /* --disk-faults: -1 seeded, else this class for every seed */
	bool no_sync_eio;             /* --no-sync-eio: fdatasync never fails */
	bool direct_io;               /* --direct-io on: the broker's appends O_DIRECT (sluiced --direct-io) */
	uint32_t credits;             /* --credits: the broker's --test-xmsg-credits (0: its default) */
	bool started[DP_CORES_MAX];   /* dp_core_start succeeded: the core is stopped at the end */
	uint64_t clock_reads;         /* the seam's clock reads: a core's turn makes one (two each DP_WALL_SYNC_MS) */
	bool verbose;
	/* cold reads done synchronously, completed at the core's next reap (seam: dp_seam_prep_read) */
	struct { struct dp_core *c; uint64_t ud; int res; } reads[DP_READS_MAX * 2];
	uint32_t nreads;
	int64_t disk_due_us[DP_CORES_MAX]; /* when each core's disk ring completes its next ops (0: none queued) */
} M;

/* A stopping core spins on the clock for its bounded wait (core.c's teardown): there the
 * machine's time runs on by itself. */
int64_t dp_seam_mono_us(void)
{
	M.clock_reads++;
	if (M.stop)
		M.now_us += 100;
	return M.now_us;
}
int64_t dp_seam_wall_ms(void)
{
	M.clock_reads++;
	return W_EPOCH_WALL_MS + M.now_us / 1000;
}
struct io_uring *dp_seam_ring(struct dp_core *c) { return c->sim_ring; }

int dp_seam_ring_init(struct dp_core *c)
{
	c->sim_ring = sim_ring_create(256);
	c->efd = -1;
	return c->sim_ring ? 0 : -ENOMEM;
}

void dp_seam_ring_exit(struct dp_core *c)
{
	/* What is still queued is lost with the machine (the disk is dead by now at a crash). */
	sim_ring_destroy(c->sim_ring);
	c->sim_ring = NULL;
}

void dp_seam_wake_close(struct dp_core *c) { (void)c; }
void dp_seam_submit(struct dp_core *c) { st_fs_submit(c->sim_ring); }
void dp_seam_arm_wakeup(struct dp_core *c) { (void)c; }
void dp_seam_wake(struct dp_core *dst) { (void)dst; }   /* the driver looks at every ring itself */

/* Only a stopping core waits (its teardown, bounded by the clock): time goes on. */
void dp_seam_wait(struct dp_core *c, int64_t max_us)
{
	(void)c;
	M.now_us += max_us;
	nic_sim_net_set_now(M.net, (uint64_t)M.now_us);
}

struct reap_ctx {
	struct dp_core *c;
	void (*on)(struct dp_core *c, const struct io_uring_cqe *cqe);
};

static void reap_cb(void *arg, const struct io_uring_cqe *cqe)
{
	struct reap_ctx *r = arg;
	r->on(r->c, cqe);
}

unsigned dp_seam_reap(struct dp_core *c, void (*on)(struct dp_core *c, const struct io_uring_cqe *cqe))
{
	unsigned n = 0;
	for (uint32_t i = 0; i < M.nreads;) {
		if (M.reads[i].c != c) {
			i++;
			continue;
		}
		struct io_uring_cqe cqe = { .user_data = M.reads[i].ud, .res = M.reads[i].res };
		M.reads[i] = M.reads[--M.nreads];
		on(c, &cqe);
		n++;
	}
	/* The disk: a few of the queued operations complete once their time has come. */
	int64_t *due = &M.disk_due_us[c->id];
	if (sim_ring_queued(c->sim_ring)) {
		if (!*due)
			*due = M.now_us + 20 + (int64_t)sim_below(400);
		if (M.now_us >= *due) {
			struct reap_ctx r = { c, on };
			n += sim_ring_step(c->sim_ring, 1 + (unsigned)sim_below(8), reap_cb, &r);
			*due = 0;
		}
	} else {
		*due = 0;
	}
	return n;
}

void dp_seam_prep_read(struct dp_core *c, int fd, void *buf, uint32_t len, uint64_t pos, uint64_t user_data)
{
	assert(M.nreads < sizeof(M.reads) / sizeof(M.reads[0]));
	ssize_t got = st_fs_pread(fd, buf, len, (off_t)pos);
	M.reads[M.nreads++] = (typeof(M.reads[0])){ c, user_data, got < 0 ? -errno : (int)got };
}

int dp_seam_nic_create(struct dp_core *c, const struct nic_config *nc, struct nic **out)
{
	(void)c;
	/* The simulated clients are a handful: a smaller accept table and receive pool keep each boot
	 * cheap, and the pool can run dry (the NIC then stops delivering until buffers come back). */
	struct nic_config small = *nc;
	small.conns_max = W_NIC_CONNS;
	small.rx_bufs = W_NIC_RX_BUFS;
	return nic_sim_create(&small, M.net, out);
}

/* ---- the broker: assembled as sluiced's (dataplane/broker.c), stepped here ----------------- */

static void broker_free(struct dp_broker *b)
{
	dp_broker_release(b);
	free(b);
}

static int broker_boot(void)
{
	struct dp_broker *b = calloc(1, sizeof(*b));
	struct dp_config *cfg = &b->cfg;
	dp_config_defaults(cfg);
	/* What a simulated machine changes: its address and disk, its cores, small segments (rolls
	 * and retention happen within a run), frequent snapshots, and pools sized for the workload
	 * (each boot allocates them whole; a run boots many times). */
	cfg->listen_port = cfg->advertised_port = W_PORT;
	snprintf(cfg->advertised_host, sizeof cfg->advertised_host, "%s", cfg->listen_host);
	snprintf(cfg->data_dir, sizeof cfg->data_dir, "/w");
	cfg->cores = M.cores;
	cfg->control_core = M.control_core;
	cfg->default_partitions = W_PARTS_PER_TOPIC;
	cfg->auto_create = false;
	cfg->segment_bytes = W_SEGMENT_BYTES;
	cfg->direct_io = M.direct_io;
	cfg->producer_snapshot_ms = W_SNAPSHOT_MS;
	cfg->txn_ids_max = W_TXN_IDS_MAX;
	cfg->test_appends_max = W_APPENDS_MAX;
	cfg->test_txn_allows_max = W_TXN_ALLOWS_MAX;
	cfg->test_xmsg_credits = M.credits;
	cfg->log_level = dp_log_level = M.verbose ? (getenv("WSIM_DEBUG") ? DP_LOG_DEBUG : DP_LOG_INFO) : DP_LOG_ERROR;
	M.stop = 0;
	M.ready = 0;
	b->stop = &M.stop;
	b->ready = &M.ready;
	M.b = b;
	if (dp_broker_assemble(b) < 0)
		return -ENOMEM;
	b->partitions_max = W_PARTITIONS_MAX;   /* the simulated machine's fd budget */
	int rc = dp_scan_data_dir(b);
	if (rc < 0)
		return rc;
	for (int i = 0; i < b->ncores; i++) {
		if ((rc = dp_core_start(b->cores[i])) < 0)
			return rc;   /* as sluiced's: a core whose setup failed is not torn down */
		M.started[i] = true;
	}
	return 0;
}

/* The machine stops: with a dead disk (a crash) nothing more reaches it, and the cores' own
 * teardown frees their memory; clients see their connections go. */
static void broker_down(void)
{
	struct dp_broker *b = M.b;
	if (!b)
		return;
	M.stop = 1;
	for (int i = b->ncores - 1; i >= 0; i--)
		if (M.started[i])
			dp_core_stop(b->cores[i]);
	memset(M.started, 0, sizeof(M.started));
	M.nreads = 0;
	memset(M.disk_due_us, 0, sizeof(M.disk_due_us));
	broker_free(b);
	M.b = NULL;
}

/* ---- clients: Kafka wire over nic_sim ------------------------------------------------------ */

enum w_kind { K_NONE, K_CREATE, K_PRODUCE, K_INIT, K_FIND, K_ADD, K_ADDOFF, K_TXNOFF, K_END, K_FETCH, K_OFFFETCH };

struct w_pend {
	int32_t corr;
	int16_t api, ver;
	uint8_t kind;
	int32_t arg;
};

struct w_conn {
	uint32_t h;                   /* nic_sim client handle; 0: none */
	bool dead;
	uint8_t out[W_OUT_BYTES];
	uint32_t out_n;
	uint8_t in[W_IN_BYTES];
	uint32_t in_n;
	int32_t next_corr;
	struct w_pend q[W_QUEUE_MAX];
	uint32_t qh, qn;
	int64_t oldest_us;            /* when the request at the head was sent */
};

static uint8_t arena_mem[W_ARENA_BYTES];
static struct karena arena;

static bool conn_open(struct w_conn *wc)
{
	memset(wc, 0, offsetof(struct w_conn, out));
	wc->out_n = wc->in_n = 0;
	wc->qh = wc->qn = 0;
	wc->next_corr = 1;
	uint32_t h;
	if (nic_sim_connect(M.net, W_PORT, &h) < 0)
		return false;
	wc->h = h;
	return true;
}

static void conn_drop(struct w_conn *wc)
{
	if (wc->h)
		nic_sim_client_reset(M.net, wc->h);
	wc->h = 0;
	wc->qn = 0;
	wc->out_n = wc->in_n = 0;
}

static int conn_send(struct w_conn *wc, int16_t api, int16_t ver, const struct kschema *s, const void *body,
                     uint8_t kind, int32_t arg)
{
	if (!wc->h || wc->dead || wc->qn == W_QUEUE_MAX)
		return -EAGAIN;
	static const char client_id[] = "wsim";
	size_t need = 4 + 10 + sizeof client_id + kcodec_size(s, ver, body);
	if (wc->out_n + need > W_OUT_BYTES)
		return -EAGAIN;
	struct kwriter w;
	kw_init(&w, wc->out + wc->out_n, need);
	struct kreq_header h = { .api_key = api, .api_version = ver, .correlation_id = wc->next_corr++,
	                         .client_id = { client_id, sizeof client_id - 1 } };
	kw_i32(&w, 0);
	kreq_header_encode(&w, &h);
	int rc = kcodec_encode(s, &w, ver, body);
	assert(rc == 0 && !w.err);
	(void)rc;
	kw_put_i32(wc->out + wc->out_n, (int32_t)(kw_len(&w) - 4));
	wc->out_n += (uint32_t)kw_len(&w);
	if (!wc->qn)
		wc->oldest_us = M.now_us;
	wc->q[(wc->qh + wc->qn++) % W_QUEUE_MAX] = (struct w_pend){ h.correlation_id, api, ver, kind, arg };
	return 0;
}

/* Moves bytes both ways; true when the connection failed (reset, closed, stuck). */
static bool conn_pump(struct w_conn *wc)
{
	if (!wc->h)
		return false;
	if (wc->dead)
		return true;
	while (wc->out_n) {
		int n = nic_sim_client_write(M.net, wc->h, wc->out, wc->out_n);
		if (n == -EAGAIN)
			break;
		if (n < 0) {
			wc->dead = true;
			return true;
		}
		memmove(wc->out, wc->out + n, wc->out_n - (uint32_t)n);
		wc->out_n -= (uint32_t)n;
	}
	for (;;) {
		if (wc->in_n == W_IN_BYTES) {
			wc->dead = true;   /* an answer larger than asked for */
			return true;
		}
		int n = nic_sim_client_read(M.net, wc->h, wc->in + wc->in_n, W_IN_BYTES - wc->in_n);
		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			wc->dead = true;
			return true;
		}
		wc->in_n += (uint32_t)n;
	}
	if (wc->qn && M.now_us - wc->oldest_us > (int64_t)W_REQ_TIMEOUT_US) {
		wc->dead = true;
		return true;
	}
	return false;
}

/* The next whole answer: 1 with *p and a reader over its body, 0 if none yet, -1 malformed. */
static int conn_frame(struct w_conn *wc, struct w_pend *p, struct kreader *r, uint32_t *used)
{
	if (wc->in_n < 4 || !wc->qn)
		return 0;
	uint32_t len = st_be32(wc->in);
	if (len < 4 || len > W_IN_BYTES - 4)
		return -1;
	if (wc->in_n < 4 + len)
		return 0;
	*p = wc->q[wc->qh];
	if ((int32_t)st_be32(wc->in + 4) != p->corr)
		return -1;
	wc->qh = (wc->qh + 1) % W_QUEUE_MAX;
	wc->qn--;
	wc->oldest_us = M.now_us;
	/* header v1 (flexible versions: OffsetFetch v7) adds a tag buffer; the broker's is empty */
	size_t hb = kresp_header_size(p->api, p->ver);
	if (hb > 4 && (len < hb || wc->in[8] != 0))
		return -1;
	kr_init(r, wc->in + 4 + hb, len - hb);
	*used = 4 + len;
	return 1;
}

static void conn_consume(struct w_conn *wc, uint32_t used)
{
	memmove(wc->in, wc->in + used, wc->in_n - used);
	wc->in_n -= used;
}

static int decode(const struct kschema *s, struct kreader *r, int16_t ver, void *out)
{
	karena_reset(&arena);
	int rc = kcodec_decode(s, r, ver, out, &arena);
	return rc || r->err ? -EPROTO : 0;
}

static struct kstr kstr_of(const char *s) { return (struct kstr){ s, (int32_t)strlen(s) }; }

/* ---- the workload's book: what was sent, acknowledged, seen -------------------------------- */

enum txn_status { T_NONE, T_OPEN, T_COMMITTED, T_ABORTED, T_UNKNOWN };
static const char *const status_names[] = { "none", "open", "committed", "aborted", "unknown" };

struct w_txn {
	uint8_t status;
	bool commit;                  /* what EndTxn asks */
	bool offsets;                 /* TxnOffsetCommit in it */
	uint8_t nrec;
	uint8_t part[W_TXN_RECS_MAX]; /* record k's partition */
	uint8_t seen[W_TXN_RECS_MAX]; /* times record k is in the final read_committed scan */
	bool live_seen;               /* a read_committed consumer was shown one of its records */
};

struct w_idem {
	struct w_conn conn;
	int64_t pid;
	int16_t epoch;
	int part;
	uint32_t made, acked, sent;   /* batches: created, acknowledged (a prefix), sent on this connection */
	int64_t due_us;
	uint32_t seen[W_IDEM_BATCHES_MAX]; /* times batch n is in the final scan */
	bool init_sent;
	int16_t last_err;
};

enum tp_state { TP_FIND, TP_INIT, TP_ADD, TP_PRODUCE, TP_ADDOFF, TP_TXNOFF, TP_END, TP_IDLE };

struct w_txnp {
	struct w_conn conn;
	char id[16], group[16];
	int64_t pid;
	int16_t epoch;
	uint8_t state;
	bool waiting;                 /* a request of the state is out */
	int64_t due_us;
	int32_t seq[W_PARTS];
	uint32_t ntxn;                /* transactions begun */
	uint32_t k;                   /* records of the current one produced */
	int16_t last_err;
	struct w_txn t[W_TXNS_MAX];
};

struct w_log {   /* what a consumer saw in one partition */
	int64_t next;                 /* fetch position */
	int64_t lso_max;
};

static struct {
	uint64_t seed;
	int nidem, ntxnp;
	struct w_idem idem[W_IDEM_MAX];
	struct w_txnp txnp[W_TXNP_MAX];
	struct w_conn cons;
	struct w_log live[W_PARTS];
	bool cons_waiting;
	int64_t cons_due_us;
	bool producing;               /* false: settling, no new work */
	uint32_t violations;
	uint64_t digest;
	uint64_t crashes, acks, commits, aborts, unknowns, fetched;
	int64_t next_crash_us[4];
	int ncrash, crash_i;
	int soon_left;                /* crashes still to place right after an EndTxn's answer */
	int64_t crash_soon_us;        /* 0: none placed */
	struct sim_faults faults;
} W;

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...)
{
	if (W.violations++ < 10) {
		va_list ap;
		va_start(ap, fmt);
		printf("seed %" PRIu64 ": VIOLATION: ", W.seed);
		vprintf(fmt, ap);
		printf("\n");
		va_end(ap);
	}
}

static void mix(uint64_t v)
{
	W.digest ^= v;
	W.digest *= 0x100000001b3ull;
}

static int part_topic(int p) { return p / W_PARTS_PER_TOPIC; }
static int part_index(int p) { return p % W_PARTS_PER_TOPIC; }

/* A record's value names it: kind (1 idempotent, 2 transactional), producer, number, record. */
static void value_put(uint8_t *v, uint8_t kind, uint8_t prod, uint32_t n, uint32_t k)
{
	memset(v, 0, W_VALUE_BYTES);
	v[0] = 'W';
	v[1] = kind;
	v[2] = prod;
	st_put_be32(v + 4, n);
	st_put_be32(v + 8, k);
}

static bool retriable(int16_t ec)
{
	switch (ec) {
	case KERR_NOT_ENOUGH_REPLICAS: case KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND: case KERR_REQUEST_TIMED_OUT:
	case KERR_CONCURRENT_TRANSACTIONS: case KERR_COORDINATOR_LOAD_IN_PROGRESS: case KERR_NOT_COORDINATOR:
	case KERR_COORDINATOR_NOT_AVAILABLE: case KERR_NOT_LEADER_OR_FOLLOWER: case KERR_LEADER_NOT_AVAILABLE:
	case KERR_UNKNOWN_TOPIC_OR_PARTITION: case KERR_KAFKA_STORAGE_ERROR: case KERR_NETWORK_EXCEPTION:
	case KERR_UNSTABLE_OFFSET_COMMIT:
		return true;
	default:
		return false;
	}
}

/* Produce of one one-record batch. */
static int send_produce(struct w_conn *wc, const char *txn_id, int part, int64_t pid, int16_t epoch, int32_t seq,
                        const uint8_t *value, uint8_t kind, int32_t arg)
{
	uint8_t batch[ST_BATCH_HEADER_BYTES + 64];
	int n = st_batch_build(batch, sizeof batch, txn_id ? ST_BATCH_ATTR_TRANSACTIONAL : 0, pid, epoch, seq,
	                       dp_seam_wall_ms(), NULL, -1, value, W_VALUE_BYTES);
	assert(n > 0);
	struct ProduceRequest req;
	struct ProduceRequest_TopicProduceData td;
	struct ProduceRequest_PartitionProduceData pd;
	ProduceRequest_init(&req);
	ProduceRequest_TopicProduceData_init(&td);
	ProduceRequest_PartitionProduceData_init(&pd);
	pd.Index = part_index(part);
	pd.Records = (struct kbytes){ batch, n };
	td.Name = kstr_of(topic_names[part_topic(part)]);
	td.PartitionData_n = 1;
	td.PartitionData = &pd;
	req.TransactionalId = txn_id ? kstr_of(txn_id) : (struct kstr){ NULL, -1 };
	req.Acks = -1;
	req.TimeoutMs = 30000;
	req.TopicData_n = 1;
	req.TopicData = &td;
	return conn_send(wc, KAPI_PRODUCE, V_PRODUCE, &kschema_ProduceRequest, &req, kind, arg);
}

static int16_t produce_error(struct kreader *r, int64_t *base)
{
	struct ProduceResponse resp;
	if (decode(&kschema_ProduceResponse, r, V_PRODUCE, &resp) < 0 || resp.Responses_n != 1 ||
	    resp.Responses[0].PartitionResponses_n != 1)
		return -1;
	*base = resp.Responses[0].PartitionResponses[0].BaseOffset;
	return resp.Responses[0].PartitionResponses[0].ErrorCode;
}

static int send_init_pid(struct w_conn *wc, const char *txn_id)
{
	struct InitProducerIdRequest req;
	InitProducerIdRequest_init(&req);
	req.TransactionalId = txn_id ? kstr_of(txn_id) : (struct kstr){ NULL, -1 };
	req.TransactionTimeoutMs = 60000;
	req.ProducerId = -1;
	req.ProducerEpoch = -1;
	return conn_send(wc, KAPI_INIT_PRODUCER_ID, V_INIT_PID, &kschema_InitProducerIdRequest, &req, K_INIT, 0);
}

/* ---- idempotent producers ------------------------------------------------------------------ */

static void idem_lost(struct w_idem *p)
{
	conn_drop(&p->conn);
	p->sent = p->acked;   /* everything not acknowledged goes again, in order, on a new connection */
	p->init_sent = false;
	p->due_us = M.now_us + W_BACKOFF_US + (int64_t)sim_below(W_BACKOFF_US);
}

static void idem_answer(struct w_idem *p, const struct w_pend *q, struct kreader *r)
{
	if (q->kind == K_INIT) {
		struct InitProducerIdResponse resp;
		if (decode(&kschema_InitProducerIdResponse, r, V_INIT_PID, &resp) < 0 || resp.ErrorCode) {
			idem_lost(p);
			return;
		}
		if (p->pid < 0) {   /* the first id is kept: a retry of the first InitProducerId changes nothing */
			p->pid = resp.ProducerId;
			p->epoch = resp.ProducerEpoch;
		}
		return;
	}
	int64_t base;
	int16_t ec = produce_error(r, &base);
	uint32_t n = (uint32_t)q->arg;
	if (ec)
		p->last_err = ec;
	if (ec == 0 || ec == KERR_DUPLICATE_SEQUENCE_NUMBER) {
		if (n != p->acked) {
			if (n > p->acked)
				violation("idempotent producer %d: batch %u acknowledged before batch %u (sequence gap accepted)",
				          (int)(p - W.idem), n, p->acked);
			return;
		}
		p->acked++;
		W.acks++;
		return;
	}
	if (!retriable(ec) && ec != KERR_OUT_OF_ORDER_SEQUENCE_NUMBER)
		if (W.violations < 10 && M.b)
			printf("seed %" PRIu64 ": note: idempotent producer %d batch %u: error %d\n", W.seed,
			       (int)(p - W.idem), n, ec);
	idem_lost(p);
}

static void idem_poll(struct w_idem *p)
{
	if (!p->conn.h) {
		if (M.now_us < p->due_us || !M.b)
			return;
		if (!conn_open(&p->conn)) {
			p->due_us = M.now_us + W_BACKOFF_US;
			return;
		}
	}
	if (conn_pump(&p->conn)) {
		idem_lost(p);
		return;
	}
	struct w_pend q;
	struct kreader r;
	uint32_t used;
	int rc;
	while ((rc = conn_frame(&p->conn, &q, &r, &used)) == 1) {
		idem_answer(p, &q, &r);
		if (!p->conn.h)
			return;
		conn_consume(&p->conn, used);
	}
	if (rc < 0) {
		idem_lost(p);
		return;
	}
	if (p->pid < 0) {
		if (!p->init_sent && send_init_pid(&p->conn, NULL) == 0)
			p->init_sent = true;
		return;
	}
	if (W.producing && p->made < W_IDEM_BATCHES_MAX && p->made - p->acked < W_INFLIGHT_MAX &&
	    sim_below(4) == 0)
		p->made++;
	while (p->sent < p->made && p->sent - p->acked < W_INFLIGHT_MAX) {
		uint8_t v[W_VALUE_BYTES];
		value_put(v, 1, (uint8_t)(p - W.idem), p->sent, 0);
		if (send_produce(&p->conn, NULL, p->part, p->pid, p->epoch, (int32_t)p->sent, v, K_PRODUCE,
		                 (int32_t)p->sent) < 0)
			break;
		p->sent++;
	}
}

static bool idem_settled(const struct w_idem *p) { return p->acked == p->made; }

/* ---- transactional producers ---------------------------------------------------------------- */

static struct w_txn *txn_cur(struct w_txnp *p) { return p->ntxn ? &p->t[p->ntxn - 1] : NULL; }

/* Anything unexpected: the connection goes, the transaction's outcome is left to the broker
 * (the next InitProducerId completes or aborts it), and the producer starts over. */
#define TRACE(...) do { if (M.verbose) { printf("%9.3f ms: ", (double)M.now_us / 1000); printf(__VA_ARGS__); printf("\n"); } } while (0)

static void txnp_lost(struct w_txnp *p)
{
	conn_drop(&p->conn);
	struct w_txn *t = txn_cur(p);
	TRACE("txn producer %d: lost in state %d (txn %u, last error %d)", (int)(p - W.txnp), p->state, p->ntxn - 1,
	      p->last_err);
	if (t && t->status == T_OPEN)
		t->status = T_UNKNOWN;
	p->state = TP_FIND;
	p->waiting = false;
	p->due_us = M.now_us + W_BACKOFF_US + (int64_t)sim_below(W_BACKOFF_US);
}

static void txnp_retry(struct w_txnp *p)
{
	p->waiting = false;
	p->due_us = M.now_us + 1000 + (int64_t)sim_below(W_BACKOFF_US);
}

static int32_t txn_offset_value(const struct w_txnp *p, uint32_t ti) { return (int32_t)(ti * 7 + 3); }

static void txnp_send(struct w_txnp *p)
{
	struct w_txn *t = txn_cur(p);
	int rc = 0;
	switch (p->state) {
	case TP_FIND: {
		struct FindCoordinatorRequest req;
		FindCoordinatorRequest_init(&req);
		req.Key = kstr_of(p->id);
		req.KeyType = 1;
		rc = conn_send(&p->conn, KAPI_FIND_COORDINATOR, V_FIND_COORD, &kschema_FindCoordinatorRequest, &req, K_FIND, 0);
		break;
	}
	case TP_INIT:
		rc = send_init_pid(&p->conn, p->id);
		break;
	case TP_ADD: {
		struct AddPartitionsToTxnRequest req;
		struct AddPartitionsToTxnRequest_AddPartitionsToTxnTopic tp[W_TOPICS];
		int32_t parts[W_TOPICS][W_PARTS_PER_TOPIC];
		int nt = 0;
		AddPartitionsToTxnRequest_init(&req);
		for (int ti = 0; ti < W_TOPICS; ti++) {
			int np = 0;
			for (int pi = 0; pi < W_PARTS_PER_TOPIC; pi++) {
				bool used = false;
				for (int k = 0; k < t->nrec; k++)
					used |= t->part[k] == ti * W_PARTS_PER_TOPIC + pi;
				if (used)
					parts[ti][np++] = pi;
			}
			if (!np)
				continue;
			AddPartitionsToTxnRequest_AddPartitionsToTxnTopic_init(&tp[nt]);
			tp[nt].Name = kstr_of(topic_names[ti]);
			tp[nt].Partitions_n = np;
			tp[nt].Partitions = parts[ti];
			nt++;
		}
		req.V3AndBelowTransactionalId = kstr_of(p->id);
		req.V3AndBelowProducerId = p->pid;
		req.V3AndBelowProducerEpoch = p->epoch;
		req.V3AndBelowTopics_n = nt;
		req.V3AndBelowTopics = tp;
		rc = conn_send(&p->conn, KAPI_ADD_PARTITIONS_TO_TXN, V_ADD_PARTS, &kschema_AddPartitionsToTxnRequest, &req,
		               K_ADD, 0);
		break;
	}
	case TP_PRODUCE: {
		uint8_t v[W_VALUE_BYTES];
		int part = t->part[p->k];
		value_put(v, 2, (uint8_t)(p - W.txnp), p->ntxn - 1, p->k);
		rc = send_produce(&p->conn, p->id, part, p->pid, p->epoch, p->seq[part], v, K_PRODUCE, 0);
		break;
	}
	case TP_ADDOFF: {
		struct AddOffsetsToTxnRequest req;
		AddOffsetsToTxnRequest_init(&req);
		req.TransactionalId = kstr_of(p->id);
		req.ProducerId = p->pid;
		req.ProducerEpoch = p->epoch;
		req.GroupId = kstr_of(p->group);
		rc = conn_send(&p->conn, KAPI_ADD_OFFSETS_TO_TXN, V_ADD_OFFSETS, &kschema_AddOffsetsToTxnRequest, &req,
		               K_ADDOFF, 0);
		break;
	}
	case TP_TXNOFF: {
		struct TxnOffsetCommitRequest req;
		struct TxnOffsetCommitRequest_TxnOffsetCommitRequestTopic tt;
		struct TxnOffsetCommitRequest_TxnOffsetCommitRequestPartition pp;
		TxnOffsetCommitRequest_init(&req);
		TxnOffsetCommitRequest_TxnOffsetCommitRequestTopic_init(&tt);
		TxnOffsetCommitRequest_TxnOffsetCommitRequestPartition_init(&pp);
		pp.PartitionIndex = 0;
		pp.CommittedOffset = txn_offset_value(p, p->ntxn - 1);
		pp.CommittedLeaderEpoch = -1;
		tt.Name = kstr_of(topic_names[0]);
		tt.Partitions_n = 1;
		tt.Partitions = &pp;
		req.TransactionalId = kstr_of(p->id);
		req.GroupId = kstr_of(p->group);
		req.ProducerId = p->pid;
		req.ProducerEpoch = p->epoch;
		req.GenerationId = -1;
		req.MemberId = kstr_of("");
		req.GroupInstanceId = (struct kstr){ NULL, -1 };
		req.Topics_n = 1;
		req.Topics = &tt;
		rc = conn_send(&p->conn, KAPI_TXN_OFFSET_COMMIT, V_TXN_OFFSET_COMMIT, &kschema_TxnOffsetCommitRequest, &req,
		               K_TXNOFF, 0);
		break;
	}
	case TP_END: {
		struct EndTxnRequest req;
		EndTxnRequest_init(&req);
		req.TransactionalId = kstr_of(p->id);
		req.ProducerId = p->pid;
		req.ProducerEpoch = p->epoch;
		req.Committed = t->commit;
		rc = conn_send(&p->conn, KAPI_END_TXN, V_END_TXN, &kschema_EndTxnRequest, &req, K_END, 0);
		break;
	}
	default:
		return;
	}
	if (rc == 0)
		p->waiting = true;
}

/* A new transaction, or none (settling, or the run's share done). */
static void txnp_begin(struct w_txnp *p)
{
	if (!W.producing || p->ntxn == W_TXNS_MAX) {
		p->state = TP_IDLE;
		return;
	}
	struct w_txn *t = &p->t[p->ntxn++];
	memset(t, 0, sizeof(*t));
	t->status = T_OPEN;
	t->commit = sim_below(10) < 7;
	t->offsets = sim_below(2) == 0;
	t->nrec = (uint8_t)(1 + sim_below(W_TXN_RECS_MAX));
	for (int k = 0; k < t->nrec; k++)
		t->part[k] = (uint8_t)sim_below(W_PARTS);
	p->k = 0;
	p->state = TP_ADD;
}

static int16_t simple_error(const struct kschema *s, int16_t ver, struct kreader *r)
{
	/* EndTxn, AddOffsetsToTxn: ThrottleTimeMs then ErrorCode */
	struct EndTxnResponse resp;
	if (decode(s, r, ver, &resp) < 0)
		return -1;
	return resp.ErrorCode;
}

static void txnp_answer(struct w_txnp *p, const struct w_pend *q, struct kreader *r)
{
	struct w_txn *t = txn_cur(p);
	int16_t ec = -1;
	switch (q->kind) {
	case K_FIND: {
		struct FindCoordinatorResponse resp;
		ec = decode(&kschema_FindCoordinatorResponse, r, V_FIND_COORD, &resp) < 0 ? -1 : resp.ErrorCode;
		if (ec == 0) {
			p->state = TP_INIT;
			p->waiting = false;
			return;
		}
		break;
	}
	case K_INIT: {
		struct InitProducerIdResponse resp;
		ec = decode(&kschema_InitProducerIdResponse, r, V_INIT_PID, &resp) < 0 ? -1 : resp.ErrorCode;
		if (ec == 0) {
			p->pid = resp.ProducerId;
			p->epoch = resp.ProducerEpoch;
			TRACE("txn producer %d: pid %lld epoch %d", (int)(p - W.txnp), (long long)p->pid, p->epoch);
			memset(p->seq, 0, sizeof(p->seq));
			p->waiting = false;
			txnp_begin(p);
			return;
		}
		break;
	}
	case K_ADD: {
		struct AddPartitionsToTxnResponse resp;
		if (decode(&kschema_AddPartitionsToTxnResponse, r, V_ADD_PARTS, &resp) < 0)
			break;
		ec = 0;
		for (int i = 0; i < resp.ResultsByTopicV3AndBelow_n; i++)
			for (int j = 0; j < resp.ResultsByTopicV3AndBelow[i].ResultsByPartition_n; j++)
				if (resp.ResultsByTopicV3AndBelow[i].ResultsByPartition[j].PartitionErrorCode)
					ec = resp.ResultsByTopicV3AndBelow[i].ResultsByPartition[j].PartitionErrorCode;
		if (ec == 0) {
			p->state = TP_PRODUCE;
			p->waiting = false;
			return;
		}
		break;
	}
	case K_PRODUCE: {
		int64_t base;
		ec = produce_error(r, &base);
		if (ec == 0 || ec == KERR_DUPLICATE_SEQUENCE_NUMBER) {
			p->seq[t->part[p->k]]++;
			p->waiting = false;
			if (++p->k == t->nrec)
				p->state = t->offsets ? TP_ADDOFF : TP_END;
			return;
		}
		break;
	}
	case K_ADDOFF:
		ec = simple_error(&kschema_AddOffsetsToTxnResponse, V_ADD_OFFSETS, r);
		if (ec == 0) {
			p->state = TP_TXNOFF;
			p->waiting = false;
			return;
		}
		break;
	case K_TXNOFF: {
		struct TxnOffsetCommitResponse resp;
		if (decode(&kschema_TxnOffsetCommitResponse, r, V_TXN_OFFSET_COMMIT, &resp) < 0)
			break;
		ec = resp.Topics_n == 1 && resp.Topics[0].Partitions_n == 1 ? resp.Topics[0].Partitions[0].ErrorCode : -1;
		if (ec == 0) {
			TRACE("txn producer %d: txn %u offsets staged", (int)(p - W.txnp), p->ntxn - 1);
			p->state = TP_END;
			p->waiting = false;
			return;
		}
		break;
	}
	case K_END:
		ec = simple_error(&kschema_EndTxnResponse, V_END_TXN, r);
		if (ec == 0) {
			t->status = t->commit ? T_COMMITTED : T_ABORTED;
			TRACE("txn producer %d: txn %u %s (offsets %d -> %d)", (int)(p - W.txnp), p->ntxn - 1,
			      t->commit ? "committed" : "aborted", t->offsets, txn_offset_value(p, p->ntxn - 1));
			if (t->commit)
				W.commits++;
			else
				W.aborts++;
			p->waiting = false;
			/* a crash soon after a transaction's end: its markers and Complete are under way */
			if (W.producing && W.soon_left && sim_below(8) == 0) {
				W.soon_left--;
				W.crash_soon_us = M.now_us + (int64_t)sim_below(2000);
			}
			txnp_begin(p);
			return;
		}
		break;
	}
	p->last_err = ec;
	if (ec > 0 && retriable(ec)) {
		txnp_retry(p);
		return;
	}
	txnp_lost(p);
}

static void txnp_poll(struct w_txnp *p)
{
	if (!p->conn.h) {
		if (M.now_us < p->due_us || !M.b || p->state == TP_IDLE)
			return;
		if (!conn_open(&p->conn)) {
			p->due_us = M.now_us + W_BACKOFF_US;
			return;
		}
	}
	if (conn_pump(&p->conn)) {
		txnp_lost(p);
		return;
	}
	struct w_pend q;
	struct kreader r;
	uint32_t used;
	int rc;
	while ((rc = conn_frame(&p->conn, &q, &r, &used)) == 1) {
		txnp_answer(p, &q, &r);
		if (!p->conn.h)
			return;
		conn_consume(&p->conn, used);
	}
	if (rc < 0) {
		txnp_lost(p);
		return;
	}
	if (!p->waiting && p->state != TP_IDLE && M.now_us >= p->due_us)
		txnp_send(p);
}

static bool txnp_settled(const struct w_txnp *p) { return p->state == TP_IDLE && !p->waiting; }

/* ---- read_committed consumers -------------------------------------------------------------- */

struct fetch_view {   /* what one read of one partition delivers, as Kafka's consumer filters it */
	int part;
	int64_t next;                 /* the position after the batches read */
	int64_t hw, lso;
	int16_t ec;
};

typedef void (*record_fn)(int part, int64_t off, const uint8_t *v, int32_t len, bool txnl, void *arg);

/* Walk one partition's records of a Fetch answer; isolation 1 drops aborted transactions' batches. */
static void fetch_walk(const struct FetchResponse_PartitionData *pd, int part, int64_t from, bool committed,
                       struct fetch_view *fv, record_fn fn, void *arg)
{
	fv->part = part;
	fv->ec = pd->ErrorCode;
	fv->hw = pd->HighWatermark;
	fv->lso = pd->LastStableOffset;
	fv->next = from;
	if (pd->ErrorCode || pd->Records.len <= 0)
		return;
	int64_t active[64];
	int nactive = 0;
	const struct FetchResponse_AbortedTransaction *aborted = pd->AbortedTransactions;
	int naborted = pd->AbortedTransactions_n < 1024 ? pd->AbortedTransactions_n : 1024, taken = 0;
	int order[1024];
	for (int i = 0; i < naborted; i++) {   /* by first offset (insertion: the lists are short) */
		int j = i;
		while (j > 0 && aborted[order[j - 1]].FirstOffset > aborted[i].FirstOffset) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	const uint8_t *p = pd->Records.ptr, *end = p + pd->Records.len;
	while (p < end) {
		struct st_batch_hdr h;
		int n = st_batch_parse(p, (size_t)(end - p), &h);
		if (n < 0)
			break;   /* a partial batch at the end */
		int64_t last = h.base_offset + h.last_offset_delta;
		if (last < from) {
			p += n;
			continue;
		}
		/* Kafka's consumer: each listed aborted transaction applies from its first offset
		 * until its producer's ABORT marker, taken once, in offset order. */
		while (committed && taken < naborted) {
			const struct FetchResponse_AbortedTransaction *a = &aborted[order[taken]];
			if (a->FirstOffset > last)
				break;
			bool in = false;
			for (int j = 0; j < nactive; j++)
				in |= active[j] == a->ProducerId;
			if (!in && nactive < 64)
				active[nactive++] = a->ProducerId;
			taken++;
		}
		bool txnl = h.attributes & ST_BATCH_ATTR_TRANSACTIONAL;
		if (h.attributes & ST_BATCH_ATTR_CONTROL) {
			if (committed && st_batch_marker_type(p, (size_t)n) == ST_MARKER_ABORT)
				for (int j = 0; j < nactive; j++)
					if (active[j] == h.producer_id)
						active[j] = active[--nactive];
		} else {
			bool aborted = false;
			for (int j = 0; committed && txnl && j < nactive; j++)
				aborted |= active[j] == h.producer_id;
			if (!aborted) {
				struct st_record_iter it;
				struct st_record rec;
				if (st_record_iter_init(&it, p, (size_t)n, &h) == 0)
					for (int64_t i = 0; st_record_next(&it, &rec) == 1; i++)
						fn(part, h.base_offset + rec.offset_delta, rec.value, rec.value_len, txnl, arg);
			}
		}
		fv->next = last + 1;
		p += n;
	}
}

/*
 * A Fetch of every partition, in order from partition rot on: librdkafka moves the start of its
 * list on by one each fetch, so a topic may come twice (its tail first, then its head).
 */
static int send_fetch(struct w_conn *wc, const int64_t *from, int8_t isolation, int32_t wait_ms, uint8_t kind,
                      uint32_t rot)
{
	struct FetchRequest req;
	struct FetchRequest_FetchTopic ft[W_TOPICS + 1];
	struct FetchRequest_FetchPartition fp[W_PARTS];
	FetchRequest_init(&req);
	int nt = 0, last_ti = -1;
	for (int k = 0; k < W_PARTS; k++) {
		int part = (int)((rot + (uint32_t)k) % W_PARTS), ti = part / W_PARTS_PER_TOPIC;
		if (ti != last_ti) {
			FetchRequest_FetchTopic_init(&ft[nt]);
			ft[nt].Topic = kstr_of(topic_names[ti]);
			ft[nt].Partitions_n = 0;
			ft[nt].Partitions = &fp[k];
			nt++;
			last_ti = ti;
		}
		struct FetchRequest_FetchPartition *f = &fp[k];
		FetchRequest_FetchPartition_init(f);
		f->Partition = part % W_PARTS_PER_TOPIC;
		f->CurrentLeaderEpoch = -1;
		f->FetchOffset = from[part];
		f->LogStartOffset = -1;
		f->PartitionMaxBytes = W_FETCH_PART_BYTES;
		ft[nt - 1].Partitions_n++;
	}
	req.ReplicaId = -1;
	req.MaxWaitMs = wait_ms;
	req.MinBytes = 1;
	req.MaxBytes = W_PARTS * W_FETCH_PART_BYTES;
	req.IsolationLevel = isolation;
	req.SessionId = 0;
	req.SessionEpoch = -1;
	req.Topics_n = nt;
	req.Topics = ft;
	req.RackId = kstr_of("");
	return conn_send(wc, KAPI_FETCH, V_FETCH, &kschema_FetchRequest, &req, kind, 0);
}

static int fetch_part_of(const struct kstr *topic, int32_t index)
{
	for (int ti = 0; ti < W_TOPICS; ti++)
		if ((size_t)topic->len == strlen(topic_names[ti]) && !memcmp(topic->ptr, topic_names[ti], (size_t)topic->len) &&
		    index >= 0 && index < W_PARTS_PER_TOPIC)
			return ti * W_PARTS_PER_TOPIC + index;
	return -1;
}

/* A value the workload wrote: its book entry. */
static bool value_parse(const uint8_t *v, int32_t len, uint8_t *kind, uint8_t *prod, uint32_t *n, uint32_t *k)
{
	if (len != W_VALUE_BYTES || !v || v[0] != 'W')
		return false;
	*kind = v[1];
	*prod = v[2];
	*n = st_be32(v + 4);
	*k = st_be32(v + 8);
	if (*kind == 1)
		return *prod < W.nidem && *n < W_IDEM_BATCHES_MAX;
	if (*kind == 2)
		return *prod < W.ntxnp && *n < W_TXNS_MAX && *k < W_TXN_RECS_MAX;
	return false;
}

static void live_record(int part, int64_t off, const uint8_t *v, int32_t len, bool txnl, void *arg)
{
	uint8_t kind, prod;
	uint32_t n, k;
	if (!value_parse(v, len, &kind, &prod, &n, &k)) {
		violation("partition %d offset %" PRId64 ": a record the workload did not write", part, off);
		return;
	}
	W.fetched++;
	if (kind == 2)
		W.txnp[prod].t[n].live_seen = true;
	mix((uint64_t)off * 31 + (uint64_t)part);
}

static void cons_poll(void)
{
	struct w_conn *wc = &W.cons;
	if (!wc->h) {
		if (M.now_us < W.cons_due_us || !M.b)
			return;
		if (!conn_open(wc)) {
			W.cons_due_us = M.now_us + W_BACKOFF_US;
			return;
		}
		W.cons_waiting = false;
	}
	if (conn_pump(wc)) {
		conn_drop(wc);
		W.cons_due_us = M.now_us + W_BACKOFF_US;
		return;
	}
	struct w_pend q;
	struct kreader r;
	uint32_t used;
	int rc;
	while ((rc = conn_frame(wc, &q, &r, &used)) == 1) {
		struct FetchResponse resp;
		W.cons_waiting = false;
		if (decode(&kschema_FetchResponse, &r, V_FETCH, &resp) < 0) {
			rc = -1;
			break;
		}
		for (int i = 0; i < resp.Responses_n; i++)
			for (int j = 0; j < resp.Responses[i].Partitions_n; j++) {
				const struct FetchResponse_PartitionData *pd = &resp.Responses[i].Partitions[j];
				int part = fetch_part_of(&resp.Responses[i].Topic, pd->PartitionIndex);
				if (part < 0)
					continue;
				struct fetch_view fv;
				struct w_log *l = &W.live[part];
				if (pd->ErrorCode == KERR_OFFSET_OUT_OF_RANGE)
					violation("partition %d: read_committed position %" PRId64 " out of range (the log "
					          "lost what a consumer was shown)", part, l->next);
				fetch_walk(pd, part, l->next, true, &fv, live_record, NULL);
				if (pd->ErrorCode)
					continue;
				if (pd->LastStableOffset < l->lso_max)
					violation("partition %d: LSO moved back from %" PRId64 " to %" PRId64, part, l->lso_max,
					          pd->LastStableOffset);
				if (pd->LastStableOffset > l->lso_max)
					l->lso_max = pd->LastStableOffset;
				if (fv.next > pd->LastStableOffset && fv.next > l->next)
					violation("partition %d: read_committed read up to %" PRId64 ", past the LSO %" PRId64,
					          part, fv.next, pd->LastStableOffset);
				l->next = fv.next;
			}
		conn_consume(wc, used);
	}
	if (rc < 0) {
		conn_drop(wc);
		W.cons_due_us = M.now_us + W_BACKOFF_US;
		return;
	}
	if (!W.cons_waiting) {
		int64_t from[W_PARTS];
		for (int i = 0; i < W_PARTS; i++)
			from[i] = W.live[i].next;
		if (send_fetch(wc, from, 1, 5 + (int32_t)sim_below(50), K_FETCH, 0) == 0)
			W.cons_waiting = true;
	}
}

/* ---- the driver ------------------------------------------------------------------------------ */

static bool clients_settled(void)
{
	for (int i = 0; i < W.nidem; i++)
		if (!idem_settled(&W.idem[i]))
			return false;
	for (int i = 0; i < W.ntxnp; i++)
		if (!txnp_settled(&W.txnp[i]))
			return false;
	return true;
}

static void crash_restart(const char *why)
{
	TRACE("crash (%s)", why);
	W.crashes++;
	sim_disk_kill();
	broker_down();
	sim_disk_restart();
	/* A start-up that fails (a faulty disk under its first writes) is tried again, as a
	 * supervisor would, a second later. */
	int rc = 0;
	for (int attempt = 0; attempt < 10; attempt++) {
		if ((rc = broker_boot()) == 0)
			return;
		broker_down();
		M.now_us += 1000000;
	}
	violation("restart after a crash failed 10 times: %s", strerror(-rc));
}

/* One turn: every core steps once, in a seeded order, then every client; virtual time goes on
 * a little (the turn's work), or jumps to the next due event when nothing happened. */
static void turn(void)
{
	struct dp_broker *b = M.b;
	int work = 0;
	nic_sim_net_set_now(M.net, (uint64_t)M.now_us);
	if (b) {
		int order[DP_CORES_MAX];
		for (int i = 0; i < b->ncores; i++)
			order[i] = i;
		for (int i = b->ncores - 1; i > 0; i--) {
			int j = (int)sim_below((uint64_t)i + 1), x = order[i];
			order[i] = order[j];
			order[j] = x;
		}
		for (int i = 0; i < b->ncores; i++) {
			/* Issue 15: one clock read per loop iteration, whatever the turn handles (the
			 * wall clock's resync each DP_WALL_SYNC_MS the second), never one per request. */
			uint64_t reads = M.clock_reads;
			work += dp_core_step(b->cores[order[i]]);
			if (M.clock_reads - reads > 2)
				violation("core %d read the clock %llu times in one turn", order[i],
				          (unsigned long long)(M.clock_reads - reads));
		}
	}
	for (int i = 0; i < W.nidem; i++)
		idem_poll(&W.idem[i]);
	for (int i = 0; i < W.ntxnp; i++)
		txnp_poll(&W.txnp[i]);
	cons_poll();
	if (work) {
		M.now_us += (int64_t)sim_below(30);
		return;
	}
	/* idle: the next thing due */
	int64_t next = M.now_us + 1000;
	uint64_t net = nic_sim_net_next_us(M.net);
	if (net != UINT64_MAX && (int64_t)net < next)
		next = (int64_t)net;
	if (b)
		for (int i = 0; i < b->ncores; i++) {
			int64_t w = dp_core_wake_us(b->cores[i]);
			if (w < next)
				next = w;
			if (M.disk_due_us[i] && M.disk_due_us[i] < next)
				next = M.disk_due_us[i];
		}
	if (next <= M.now_us)
		next = M.now_us + 1;
	M.now_us = next;
}

static int create_topics_once(void)
{
	struct w_conn *wc = calloc(1, sizeof(*wc));
	struct CreateTopicsRequest req;
	struct CreateTopicsRequest_CreatableTopic t[W_TOPICS];
	/* The first topic has configs, so each boot after a crash loads its config file through the
	 * simulated disk (control.c's load_configs); values that change nothing the workload checks. */
	struct CreateTopicsRequest_CreateableTopicConfig conf[2];
	CreateTopicsRequest_CreateableTopicConfig_init(&conf[0]);
	CreateTopicsRequest_CreateableTopicConfig_init(&conf[1]);
	conf[0].Name = kstr_of("retention.ms");
	conf[0].Value = kstr_of("604800000");
	conf[1].Name = kstr_of("max.compaction.lag.ms");
	conf[1].Value = kstr_of("86400000");
	CreateTopicsRequest_init(&req);
	for (int i = 0; i < W_TOPICS; i++) {
		CreateTopicsRequest_CreatableTopic_init(&t[i]);
		t[i].Name = kstr_of(topic_names[i]);
		t[i].NumPartitions = W_PARTS_PER_TOPIC;
		t[i].ReplicationFactor = 1;
		if (i == 0) {
			t[i].Configs = conf;
			t[i].Configs_n = 2;
		}
	}
	req.Topics_n = W_TOPICS;
	req.Topics = t;
	req.timeoutMs = 10000;
	int rc = -ETIMEDOUT;
	int64_t until = M.now_us + 30 * 1000000ll;
	if (!conn_open(wc) ||
	    conn_send(wc, KAPI_CREATE_TOPICS, V_CREATE_TOPICS, &kschema_CreateTopicsRequest, &req, K_CREATE, 0) < 0)
		goto out;
	while (M.now_us < until) {
		turn();
		if (conn_pump(wc)) {
			rc = -ECONNRESET;
			goto out;
		}
		struct w_pend q;
		struct kreader r;
		uint32_t used;
		int f = conn_frame(wc, &q, &r, &used);
		if (f < 0) {
			rc = -EPROTO;
			goto out;
		}
		if (f == 1) {
			struct CreateTopicsResponse resp;
			rc = decode(&kschema_CreateTopicsResponse, &r, V_CREATE_TOPICS, &resp);
			/* Per topic: one that exists already is a retry's (create_topics), not another's error. */
			for (int i = 0; rc == 0 && i < resp.Topics_n; i++)
				if (resp.Topics[i].ErrorCode && resp.Topics[i].ErrorCode != KERR_TOPIC_ALREADY_EXISTS)
					rc = -resp.Topics[i].ErrorCode;
			goto out;
		}
	}
out:
	conn_drop(wc);
	free(wc);
	return rc;
}

/* CreateTopics until it is answered (the network may reset the connection): a topic that
 * exists already is what a retry after a lost answer finds. */
static int create_topics(void)
{
	int rc = -ETIMEDOUT;
	for (int attempt = 0; attempt < 20; attempt++) {
		rc = create_topics_once();
		if (rc == 0)
			return 0;
		/* REQUEST_TIMED_OUT: retriable, as a client takes it (the broker's answer when it had no
		 * credit toward the control core, --credits). */
		if (rc != -ECONNRESET && rc != -ETIMEDOUT && rc != -KERR_REQUEST_TIMED_OUT)
			return rc;
		M.now_us += W_BACKOFF_US;
	}
	return rc;
}

/* ---- the final read and the checks ---------------------------------------------------------- */

static void final_record(int part, int64_t off, const uint8_t *v, int32_t len, bool txnl, void *arg)
{
	uint8_t kind, prod;
	uint32_t n, k;
	if (!value_parse(v, len, &kind, &prod, &n, &k)) {
		violation("final read: partition %d offset %" PRId64 ": a record the workload did not write", part, off);
		return;
	}
	mix((uint64_t)off << 20 ^ (uint64_t)part << 16 ^ (uint64_t)kind << 12 ^ (uint64_t)prod << 8 ^ ((uint64_t)n * 64 + k));
	if (kind == 1) {
		W.idem[prod].seen[n]++;
		if (W.idem[prod].part != part)
			violation("idempotent batch %u.%u in partition %d, sent to %d", prod, n, part, W.idem[prod].part);
	} else {
		struct w_txn *t = &W.txnp[prod].t[n];
		if (k >= t->nrec || t->part[k] != part) {
			violation("transactional record %u.%u.%u in the wrong partition %d", prod, n, k, part);
			return;
		}
		t->seen[k]++;
	}
}

/* Reads every partition to its end with read_committed; false if it could not. */
static bool final_read(void)
{
	struct w_conn *wc = calloc(1, sizeof(*wc));
	int64_t from[W_PARTS] = { 0 }, hw[W_PARTS];
	bool done[W_PARTS] = { false };
	bool ok = false;
	int64_t until = M.now_us + 60 * 1000000ll;
	if (!conn_open(wc))
		goto out;
	bool waiting = false;
	/* The list starts one partition earlier each fetch: against a broker that moves its own start
	 * on by one each round, as fetch_round does, the same partition comes last every time. Any order
	 * is a client's to choose (librdkafka moves its start on by one each fetch); none may starve
	 * a partition. */
	uint32_t rot = 0;
	while (M.now_us < until) {
		if (!waiting) {
			if (send_fetch(wc, from, 1, 10, K_FETCH, rot) < 0)
				goto out;
			waiting = true;
			rot += W_PARTS - 1;
		}
		turn();
		if (conn_pump(wc))
			goto out;
		struct w_pend q;
		struct kreader r;
		uint32_t used;
		int f = conn_frame(wc, &q, &r, &used);
		if (f < 0)
			goto out;
		if (f == 0)
			continue;
		waiting = false;
		struct FetchResponse resp;
		if (decode(&kschema_FetchResponse, &r, V_FETCH, &resp) < 0)
			goto out;
		for (int i = 0; i < resp.Responses_n; i++)
			for (int j = 0; j < resp.Responses[i].Partitions_n; j++) {
				const struct FetchResponse_PartitionData *pd = &resp.Responses[i].Partitions[j];
				int part = fetch_part_of(&resp.Responses[i].Topic, pd->PartitionIndex);
				if (part < 0 || done[part] || pd->ErrorCode)
					continue;
				struct fetch_view fv;
				fetch_walk(pd, part, from[part], true, &fv, final_record, NULL);
				if (M.verbose)
					printf("final fetch p%d from %" PRId64 " -> %" PRId64 " hw %" PRId64 " lso %" PRId64
					       " bytes %d aborted %d\n", part, from[part], fv.next, pd->HighWatermark,
					       pd->LastStableOffset, pd->Records.len, pd->AbortedTransactions_n);
				from[part] = fv.next;
				hw[part] = pd->HighWatermark;
				if (pd->LastStableOffset != pd->HighWatermark)
					continue;   /* a transaction still open: its marker is on its way */
				if (pd->LastStableOffset < W.live[part].lso_max)
					violation("partition %d: LSO %" PRId64 " after the last restart, below %" PRId64
					          " seen before", part, pd->LastStableOffset, W.live[part].lso_max);
				if (fv.next >= pd->HighWatermark)
					done[part] = true;
			}
		conn_consume(wc, used);
		bool all = true;
		for (int p = 0; p < W_PARTS; p++)
			all &= done[p];
		if (all) {
			ok = true;
			for (int p = 0; p < W_PARTS; p++)
				mix((uint64_t)hw[p]);
			break;
		}
	}
out:
	conn_drop(wc);
	free(wc);
	return ok;
}

/* OffsetFetch of each transactional producer's group: -1, or the offset of a committed one. */
static bool final_offsets(int64_t *got)
{
	struct w_conn *wc = calloc(1, sizeof(*wc));
	bool ok = false;
	int64_t until = M.now_us + 30 * 1000000ll;
	if (!conn_open(wc))
		goto out;
	for (int i = 0; i < W.ntxnp; i++) {
		bool answered = false;
		while (!answered && M.now_us < until) {
			struct OffsetFetchRequest req;
			struct OffsetFetchRequest_OffsetFetchRequestTopic t;
			int32_t part0 = 0;
			OffsetFetchRequest_init(&req);
			OffsetFetchRequest_OffsetFetchRequestTopic_init(&t);
			t.Name = kstr_of(topic_names[0]);
			t.PartitionIndexes_n = 1;
			t.PartitionIndexes = &part0;
			req.GroupId = kstr_of(W.txnp[i].group);
			req.Topics_n = 1;
			req.Topics = &t;
			req.RequireStable = true;
			if (conn_send(wc, KAPI_OFFSET_FETCH, V_OFFSET_FETCH, &kschema_OffsetFetchRequest, &req, K_OFFFETCH, 0) < 0)
				goto out;
			for (;;) {
				if (M.now_us >= until)
					goto out;
				turn();
				if (conn_pump(wc))
					goto out;
				struct w_pend q;
				struct kreader r;
				uint32_t used;
				int f = conn_frame(wc, &q, &r, &used);
				if (f < 0)
					goto out;
				if (f == 0)
					continue;
				struct OffsetFetchResponse resp;
				if (decode(&kschema_OffsetFetchResponse, &r, V_OFFSET_FETCH, &resp) < 0)
					goto out;
				int16_t ec = resp.ErrorCode;
				if (!ec && (resp.Topics_n != 1 || resp.Topics[0].Partitions_n != 1))
					goto out;
				if (!ec)
					ec = resp.Topics[0].Partitions[0].ErrorCode;
				TRACE("OffsetFetch %s: error %d offset %lld", W.txnp[i].group, ec,
				      ec ? -2LL : (long long)resp.Topics[0].Partitions[0].CommittedOffset);
				if (!ec) {
					got[i] = resp.Topics[0].Partitions[0].CommittedOffset;
					answered = true;
				}
				conn_consume(wc, used);
				break;   /* answered, or retriable (loading, unstable): ask again */
			}
		}
		if (!answered)
			goto out;
	}
	ok = true;
out:
	conn_drop(wc);
	free(wc);
	return ok;
}

static void check_book(const int64_t *offsets)
{
	for (int i = 0; i < W.nidem; i++) {
		struct w_idem *p = &W.idem[i];
		for (uint32_t n = 0; n < p->made; n++) {
			if (n < p->acked && p->seen[n] == 0)
				violation("idempotent batch %d.%u acknowledged, then lost", i, n);
			if (p->seen[n] > 1)
				violation("idempotent batch %d.%u written %u times", i, n, p->seen[n]);
		}
	}
	for (int i = 0; i < W.ntxnp; i++) {
		struct w_txnp *p = &W.txnp[i];
		int64_t want = -1;
		for (uint32_t ti = 0; ti < p->ntxn; ti++) {
			struct w_txn *t = &p->t[ti];
			int seen = 0, dup = 0;
			for (int k = 0; k < t->nrec; k++) {
				seen += t->seen[k] > 0;
				dup |= t->seen[k] > 1;
			}
			bool committed = seen == t->nrec;
			if (dup)
				violation("transaction %d.%u: a record written twice", i, ti);
			if (seen && seen < t->nrec)
				violation("transaction %d.%u (%s): %d of its %d records visible (not all-or-nothing)", i, ti,
				          status_names[t->status], seen, t->nrec);
			if (t->status == T_COMMITTED && !committed)
				violation("transaction %d.%u: commit acknowledged, records lost", i, ti);
			if (t->status == T_ABORTED && seen)
				violation("transaction %d.%u: aborted, records visible to read_committed", i, ti);
			if (t->live_seen && !committed)
				violation("transaction %d.%u (%s): a read_committed consumer was shown a record of it, "
				          "but it did not commit", i, ti, status_names[t->status]);
			if (t->status == T_UNKNOWN)
				W.unknowns++;
			if (committed && t->offsets)
				want = txn_offset_value(p, ti);
			mix((uint64_t)seen << 8 | t->status);
		}
		if (offsets[i] != want)
			violation("group %s: committed offset %" PRId64 ", the last committed transaction's is %" PRId64, p->group,
			          offsets[i], want);
		mix((uint64_t)offsets[i]);
	}
}

/* ---- one run ---------------------------------------------------------------------------------- */

static int run_seed(uint64_t seed, uint64_t *digest)
{
	memset(&W, 0, sizeof(W));
	W.seed = seed;
	sim_seed(seed);
	M.now_us = 1000000;
	M.nreads = 0;
	memset(M.disk_due_us, 0, sizeof(M.disk_due_us));
	karena_init(&arena, arena_mem, sizeof arena_mem);
	uint32_t faulty = (uint32_t)sim_below(4);
	if (M.disk_faults >= 0)
		faulty = (uint32_t)M.disk_faults;
	W.faults = (struct sim_faults){
		.write_short_ppm = faulty ? 20000 : 0,
		.write_eio_ppm = faulty > 1 ? 1000 : 0,
		.sync_eio_ppm = faulty > 1 && !M.no_sync_eio ? 1000 : 0,
		.meta_eio_ppm = 0,
		.page_keep_ppm = (uint32_t)sim_below(1000000),
	};
	struct sim_faults clean = { .page_keep_ppm = W.faults.page_keep_ppm };
	sim_disk_init(&clean);
	struct nic_sim_net_config nc = { .seed = seed, .pipes_max = 256, .pipe_bytes = 256u << 10 };
	int rc = nic_sim_net_create(&nc, &M.net);
	assert(rc == 0);
	uint32_t netty = (uint32_t)sim_below(3);
	struct nic_sim_faults nf = {
		.delay_us_max = 50 + (uint32_t)sim_below(500),
		.short_read_ppm = netty ? 100000 : 0,
		.short_write_ppm = netty ? 100000 : 0,
		.reset_ppm = netty > 1 ? 300 : 0,
	};
	nic_sim_net_set_faults(M.net, &nf);
	W.nidem = 1 + (int)sim_below(W_IDEM_MAX);
	W.ntxnp = 1 + (int)sim_below(W_TXNP_MAX);
	for (int i = 0; i < W.nidem; i++) {
		W.idem[i].pid = -1;
		W.idem[i].part = (int)sim_below(W_PARTS);
	}
	for (int i = 0; i < W.ntxnp; i++) {
		snprintf(W.txnp[i].id, sizeof W.txnp[i].id, "tx%d", i);
		snprintf(W.txnp[i].group, sizeof W.txnp[i].group, "g%d", i);
		W.txnp[i].pid = -1;
		W.txnp[i].state = TP_FIND;
	}
	W.ncrash = (int)sim_below(3);
	W.soon_left = (int)sim_below(3);
	for (int i = 0; i < W.ncrash; i++)
		W.next_crash_us[i] = M.now_us + 200000 + (int64_t)sim_below(W_RUN_US);
	rc = broker_boot();
	if (rc < 0) {
		violation("boot failed: %s", strerror(-rc));
	} else if ((rc = create_topics()) < 0) {
		violation("CreateTopics failed: %d", rc);
	} else {
		sim_disk_set_faults(&W.faults);
		W.producing = true;
		int64_t end = M.now_us + W_RUN_US;
		while (M.now_us < end) {
			turn();
			for (int i = 0; i < W.ncrash; i++)
				if (W.next_crash_us[i] && M.now_us >= W.next_crash_us[i]) {
					W.next_crash_us[i] = 0;
					crash_restart("random");
				}
			if (W.crash_soon_us && M.now_us >= W.crash_soon_us) {
				W.crash_soon_us = 0;
				crash_restart("after an EndTxn");
			}
		}
		/* settle: faults off, no new work, everything answered */
		W.producing = false;
		sim_disk_set_faults(&clean);
		nic_sim_net_set_faults(M.net, &(struct nic_sim_faults){ .delay_us_max = 100 });
		/* A log that failed stays failed until the broker restarts (the coordinators' logs have
		 * no probe; Kafka halts a broker whose log directory failed): a supervisor restarts
		 * a broker that makes no progress for W_SUPERVISE_US. */
		int64_t until = M.now_us + (int64_t)W_SETTLE_US, kick = M.now_us + W_SUPERVISE_US;
		while (M.now_us < until && !clients_settled()) {
			turn();
			if (M.now_us >= kick) {
				crash_restart("supervisor");
				kick = M.now_us + W_SUPERVISE_US;
			}
		}
		if (!clients_settled()) {
			violation("the workload did not settle within %llu s of virtual time",
			          (unsigned long long)(W_SETTLE_US / 1000000));
			for (int i = 0; i < W.nidem; i++)
				if (!idem_settled(&W.idem[i]))
					printf("  idempotent producer %d: %u of %u batches acknowledged (last error %d)\n", i,
					       W.idem[i].acked, W.idem[i].made, W.idem[i].last_err);
			for (int i = 0; i < W.ntxnp; i++)
				if (!txnp_settled(&W.txnp[i]))
					printf("  transactional producer %d: state %d, transaction %u, last error %d\n", i,
					       W.txnp[i].state, W.txnp[i].ntxn, W.txnp[i].last_err);
		}
		/* the last crash: what was acknowledged must survive it */
		crash_restart("final");
		int64_t offsets[W_TXNP_MAX] = { 0 };
		if (!M.b)
			;   /* the restart failed: said above */
		else if (!final_read())
			violation("the final read_committed read did not finish");
		else if (!final_offsets(offsets))
			violation("the final OffsetFetch did not finish");
		else
			check_book(offsets);
	}
	for (int i = 0; i < W.nidem; i++)
		conn_drop(&W.idem[i].conn);
	for (int i = 0; i < W.ntxnp; i++)
		conn_drop(&W.txnp[i].conn);
	conn_drop(&W.cons);
	broker_down();
	nic_sim_net_destroy(M.net);
	M.net = NULL;
	sim_disk_free();
	mix(W.acks);
	mix(W.commits);
	mix(W.aborts);
	*digest = W.digest;
	printf("seed %" PRIu64 ": %s  crashes %" PRIu64 " acks %" PRIu64 " commits %" PRIu64 " aborts %" PRIu64
	       " unknown %" PRIu64 " read %" PRIu64 " disk-faults %u net-faults %u  digest %016" PRIx64 "\n",
	       seed, W.violations ? "FAIL" : "ok", W.crashes, W.acks, W.commits, W.aborts, W.unknowns, W.fetched, faulty,
	       netty, W.digest);
	return W.violations ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: sluice-wsim [--seed N | --first N --seeds M] [--cores N] [--control-core own|shared]\n"
	                "                   [--disk-faults 0-3] [--no-sync-eio] [--direct-io on|off]\n"
	                "                   [--credits N] [--replay-check] [--verbose]\n");
}

int main(int argc, char **argv)
{
	uint64_t first = 1, nseeds = 20;
	bool replay = false;
	M.cores = 3;
	M.disk_faults = -1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			first = strtoull(argv[++i], NULL, 10);
			nseeds = 1;
		} else if (!strcmp(argv[i], "--first") && i + 1 < argc) {
			first = strtoull(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) {
			nseeds = strtoull(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--cores") && i + 1 < argc) {
			M.cores = atoi(argv[++i]);
			if (M.cores < 1 || M.cores > 8) {
				usage();
				return 2;
			}
		} else if (!strcmp(argv[i], "--control-core") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "own"))
				M.control_core = DP_CONTROL_OWN;
			else if (!strcmp(argv[i], "shared"))
				M.control_core = DP_CONTROL_SHARED;
			else {
				usage();
				return 2;
			}
		} else if (!strcmp(argv[i], "--disk-faults") && i + 1 < argc) {
			M.disk_faults = atoi(argv[++i]);
			if (M.disk_faults < 0 || M.disk_faults > 3) {
				usage();
				return 2;
			}
		} else if (!strcmp(argv[i], "--credits") && i + 1 < argc) {
			M.credits = (uint32_t)strtoul(argv[++i], NULL, 10);
			if (M.credits < 1 || M.credits > DP_XMSG_CREDITS) {
				usage();
				return 2;
			}
		} else if (!strcmp(argv[i], "--direct-io") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "on") || !strcmp(argv[i], "off")) {
				M.direct_io = !strcmp(argv[i], "on");
			} else {
				usage();
				return 2;
			}
		} else if (!strcmp(argv[i], "--no-sync-eio")) {
			M.no_sync_eio = true;
		} else if (!strcmp(argv[i], "--replay-check")) {
			replay = true;
		} else if (!strcmp(argv[i], "--verbose")) {
			M.verbose = true;
		} else {
			usage();
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* As sluiced: large pools get their own mappings. Here it also keeps each boot cheap: a
	 * fresh mapping is zero pages touched only where used, a reused heap chunk is memset whole. */
	mallopt(M_MMAP_THRESHOLD, DP_MALLOC_MMAP_BYTES);
	uint64_t failed = 0, first_failed = 0;
	for (uint64_t s = first; s < first + nseeds; s++) {
		uint64_t d1, d2;
		int bad = run_seed(s, &d1);
		if (replay) {
			bad |= run_seed(s, &d2);
			if (d1 != d2) {
				printf("seed %" PRIu64 ": NOT DETERMINISTIC: digest %016" PRIx64 " then %016" PRIx64 "\n", s, d1, d2);
				bad = 1;
			}
		}
		if (bad && !failed++)
			first_failed = s;
	}
	if (failed) {
		char cores[32] = "", faults[32] = "", credits[32] = "";
		if (M.cores != 3)
			snprintf(cores, sizeof(cores), " --cores %d", M.cores);
		if (M.disk_faults >= 0)
			snprintf(faults, sizeof(faults), " --disk-faults %d", M.disk_faults);
		if (M.credits)
			snprintf(credits, sizeof(credits), " --credits %u", M.credits);
		printf("%" PRIu64 " of %" PRIu64 " seeds failed; replay the first: %s --seed %" PRIu64 "%s%s%s%s%s\n", failed,
		       nseeds, argv[0], first_failed, M.no_sync_eio ? " --no-sync-eio" : "", M.direct_io ? " --direct-io on" : "",
		       cores, faults, credits);
		return 1;
	}
	printf("all %" PRIu64 " seeds passed\n", nseeds);
	return 0;
}
