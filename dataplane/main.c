/*
 * main.c - sluiced: command line, start-up, threads, signals. Locality: init only.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "coord.h"
#include "lso.h"
#include "nic.h"
#include "pstate.h"
#include "broker.h"
#include "control.h"   /* dp_scan_data_dir */
#ifdef DP_NIC_DPDK
#include "nic_dpdk.h"
#endif

static volatile sig_atomic_t stop_flag;
static _Atomic int ready_count;

/* --nic and the DPDK backend's flags: init only, main.c's alone (the cores see
 * only their nic). The backend is chosen when the binary is linked: sluiced
 * has the socket one, sluiced-dpdk (built where libdpdk is found) DPDK's. */
#ifdef DP_NIC_DPDK
#define DP_NIC_BUILT "dpdk"
#else
#define DP_NIC_BUILT "socket"
#endif
static struct {
	char mode[16];           /* "socket" or "dpdk" */
	const char *eal;         /* --dpdk-eal */
	long port;               /* --dpdk-port */
	uint32_t ip;             /* --ip, host order; 0: --listen's host */
	int prefix;
	const char *faults;      /* --dpdk-faults (test only), checked by sluiced-dpdk */
} nic_flags = { .mode = DP_NIC_BUILT };

static void usage(FILE *f)
{
	fprintf(f,
	"usage: sluiced [options]\n"
	"  --listen HOST:PORT      address to accept Kafka clients on (default 127.0.0.1:9092)\n"
	"  --advertise HOST:PORT   address given to clients in Metadata (default: --listen)\n"
	"  --data DIR              data directory (default ./data)\n"
	"  --cores N               threads, one per core (default: one per CPU it may run on)\n"
	"  --control-core WHERE    shared: core 0 runs the control role beside data, every core a data core;\n"
	"                          own: core 0 runs control only, cores 1..N-1 data (default: shared below\n"
	"                          8 cores, own from 8; --cores 1 always runs every role on its one core)\n"
	"  --idle-spin-us N        a core with nothing to do busy-polls N us before it sleeps (default 200\n"
	"                          where the NIC is polled (DPDK) or the cores leave a CPU free, else 0: a\n"
	"                          spinning core would take the CPU from the clients and the kernel)\n"
	"  --log-level LEVEL       error | warn | info | debug (default info)\n"
	"  --partitions N          partitions of auto-created topics (default 1)\n"
	"  --no-auto-create        do not create topics named in Metadata requests\n"
	"  --no-fsync              acknowledge after the write, without fdatasync (NOT durable)\n"
	"  --segment-bytes N       roll log segments beyond N bytes (default 268435456)\n"
	"  --prealloc-bytes N      keep N bytes of the active segments' disk space reserved ahead of\n"
	"                          their appends (fallocate), 0 = none (default 8388608)\n"
	"  --direct-io on|off      write appends with O_DIRECT from a 1 MiB aligned buffer per partition,\n"
	"                          bypassing page-cache writeback; fdatasync as before (default off)\n"
	"  --retention-bytes N     keep at most N bytes per partition, -1 = unlimited (default -1)\n"
	"  --retention-ms N        delete segments older than N ms, -1 = unlimited (default 604800000)\n"
	"  --max-frame-bytes N     largest request accepted; larger closes the connection (default 104857600)\n"
	"  --node-id N             broker id reported in Metadata (default 1)\n"
	"  --producer-expiration-ms N  forget idempotent producers idle this long (default 86400000)\n"
	"  --producer-snapshot-ms N    producer-state snapshot interval (default 60000)\n"
	"  --partitions-max N      partitions the broker holds at most (fewer if the file descriptors\n"
	"                          hold fewer); CreateTopics past it: POLICY_VIOLATION (default 4096)\n"
	"  --txn-state-mib N       per data core, the pool for its partitions' producer state and\n"
	"                          transaction indexes; when spent, such batches are refused, retriable\n"
	"                          (default 128)\n"
	"  --group-state-mib N     the pool for the group coordinator's groups, members and offsets;\n"
	"                          when spent, new ones are refused, retriable (default 256)\n"
	"  --transaction-max-timeout-ms N  largest transaction.timeout.ms accepted (default 900000)\n"
	"  --transaction-log-compact-records N  compact __transaction_state once it holds this many\n"
	"                          records beyond two per transactional id (default 100000)\n"
	"  --transactional-id-expiration-ms N  forget a transactional id with no transaction that was\n"
	"                          not used for N ms (a tombstone in __transaction_state) (default 604800000)\n"
	"  --transactional-ids-max N  transactional ids tracked at most; InitProducerId of a new one\n"
	"                          beyond is answered COORDINATOR_LOAD_IN_PROGRESS (retried) (default 100000)\n"
	"  --txn-partitions-max N  partitions in all open transactions together (a fixed pool, in blocks\n"
	"                          of 4); AddPartitionsToTxn beyond is answered COORDINATOR_NOT_AVAILABLE\n"
	"                          (retried) (default 65536)\n"
	"  --txn-groups-max N      consumer groups in all open transactions together (a fixed pool);\n"
	"                          AddOffsetsToTxn beyond is answered COORDINATOR_NOT_AVAILABLE (default 8192)\n"
	"  --offsets-retention-ms N  forget a committed offset not committed again for N ms once its\n"
	"                          group has no members (for N ms), -1 = never (default 604800000)\n"
	"  --group-initial-rebalance-delay-ms N  an empty group's first rebalance waits N ms for more\n"
	"                          members to join, as Kafka's (0..300000, default 3000)\n"
	"  test only (fault injection, off by default):\n"
	"  --fault-drop-produce N  after appending, drop the Produce response with N/1000 odds\n"
	"  --fault-close-produce N after appending, close the connection instead of answering, N/1000\n"
	"  --fault-seed N          seed of the fault dice (default 1)\n"
	"  --fault-marker-fail N   answer a COMMIT/ABORT marker as a failed write, not writing it, N/1000\n"
	"  --fault-call-refuse N   refuse a coordinator request's buffer, N/1000: answered\n"
	"                          COORDINATOR_LOAD_IN_PROGRESS by the connection's core\n"
	"  --fault-prepare-fail N  the first N PrepareCommit/PrepareAbort writes of the transaction\n"
	"                          coordinator fail (in turn refused, and reported failed once durable)\n"
	"  --fault-add-fail N      the same for the first N AddPartitionsToTxn writes\n"
	"  --fault-init-fail N     the same for the first N InitProducerId writes\n"
	"  --fault-conf-sync-fail N  the first N topic config alters' directory syncs fail after the\n"
	"                          rename (the new file in place, maybe not durable: KAFKA_STORAGE_ERROR)\n"
	"  --fault-marker-write-fail N  on each data core, the log writes of the first N COMMIT/ABORT\n"
	"                          markers fail after they were queued (nothing written, EIO): the\n"
	"                          partition goes offline until its probe reopens the log\n"
	"  --fault-delete-kill POINT  SIGKILL the broker during a DeleteTopics: after-intent (the\n"
	"                          delete's record is durable), mid-delete (a data core removed one\n"
	"                          partition of the topic)\n"
	"  --fault-txn-kill POINT  SIGKILL the broker during a commit/abort: after-prepare,\n"
	"                          after-first-marker or before-complete; or add-lost: no\n"
	"                          AddPartitionsToTxn record is written, SIGKILL at the first EndTxn\n"
	"  --fetch-aborted-max N   list at most N (1..1024) aborted transactions per read_committed\n"
	"                          partition answer, cutting the records sooner (default 1024)\n"
	"  --fault-marker-delay-ms N  act on each durable COMMIT/ABORT marker N ms late (its\n"
	"                          transaction stays open in the LSO meanwhile), as a slow disk would\n"
	"  --fault-offsets-delay-ms N  act on each durable transactional-offset write (TxnOffsetCommit,\n"
	"                          a transaction's end) N ms late, as a slow disk would\n"
	"  --test-producers-max N  per partition, track at most N idempotent producers (default 1048576)\n"
	"  --test-txn-open-max N   per partition, at most N open transactions (default 1048576)\n"
	"  --test-xmsg-credits N   per pair of cores, at most N refusable requests unanswered (default 4096)\n"
	"  --test-appends-max N    per data core, at most N partition appends in flight (default 16384)\n"
	"  --test-reads-max N      per data core, at most N cold and warm reads in flight (default 256)\n"
	"  --test-txn-state-bytes N  per data core, a producer and transaction state pool of N bytes\n"
	"                          (4096..1048575) instead of --txn-state-mib\n"
	"  --test-txn-allows-max N per data core, at most N partitions granted to open transactions\n"
	"                          (default 65536)\n"
	"  --nic socket|dpdk       the NIC backend; this binary has \"" DP_NIC_BUILT "\" (sluiced: socket,\n"
	"                          sluiced-dpdk: dpdk, built where libdpdk is found)\n"
	"  --dpdk-eal \"ARGS\"       sluiced-dpdk: words for rte_eal_init (cores, --vdev, and where hugepages\n"
	"                          are absent --no-huge -m MB --no-shconf --file-prefix NAME)\n"
	"  --dpdk-port N           sluiced-dpdk: the DPDK port (default 0); one queue pair per data core\n"
	"  --ip ADDR[/PREFIX]      sluiced-dpdk: the userspace stack's IPv4 address (default: --listen's host;\n"
	"                          replies go to each frame's source MAC, so no route is needed)\n"
	"  --dpdk-faults F         sluiced-dpdk, TEST ONLY: seeded link faults, F = drop=PPM,dup=PPM,\n"
	"                          reorder=PPM,corrupt=PPM,txdrop=PPM,seed=N (parts per million per frame)\n"
	"  --print-budget          print the itemised memory budget for these flags and exit\n"
	"  --help                  this text\n");
}

static int parse_hostport(const char *s, char *host, size_t cap, uint16_t *port)
{
	const char *colon = strrchr(s, ':');
	if (!colon || (size_t)(colon - s) >= cap)
		return -1;
	long p = strtol(colon + 1, NULL, 10);
	if (p < 0 || p > 65535)
		return -1;
	size_t hl = (size_t)(colon - s);
	if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {   /* [::1]:9092 */
		s++;
		hl -= 2;
	}
	memcpy(host, s, hl);
	host[hl] = 0;
	*port = (uint16_t)p;
	return 0;
}

/*
 * The CPUs this process may run on (sched_getaffinity: a container's cpuset or a
 * taskset, not every online CPU) into *set when set is not NULL; their count. The
 * online CPUs when the mask cannot be read.
 */
static int allowed_cpus(cpu_set_t *set)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	if (sched_getaffinity(0, sizeof(s), &s) < 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		n = n < 1 ? 1 : n > CPU_SETSIZE ? CPU_SETSIZE : n;
		for (long i = 0; i < n; i++)
			CPU_SET(i, &s);
	}
	if (set)
		*set = s;
	return CPU_COUNT(&s);
}

static int parse_args(int argc, char **argv, struct dp_config *cfg)
{
	enum { O_LISTEN = 1, O_ADV, O_DATA, O_CORES, O_CONTROL, O_LOG, O_PARTS, O_NOAUTO, O_NOFSYNC, O_SEG,
	       O_RBYTES, O_RMS, O_MAXFRAME, O_NODE, O_PEXP, O_PSNAP, O_FDROP, O_FCLOSE, O_FSEED, O_TXNKILL, O_DELKILL, O_FOFFDELAY,
	       O_TXNMAX, O_TXNCOMPACT, O_TXNIDEXP, O_TXNIDSMAX, O_TXNTPSMAX, O_TXNGRPMAX, O_OFFRET, O_GRPDELAY, O_FABORTED, O_TPMAX, O_TTMAX, O_TXCRED, O_TAPPENDS, O_TREADS, O_TALLOWS, O_PBUDGET, O_TXNSTATE, O_GRPSTATE, O_TTXNSTATE, O_PARTSMAX,
	       O_FMARKER, O_FPREP, O_FADD, O_FCALL, O_FINIT, O_FMWRITE, O_FCONFSYNC, O_FMDELAY, O_PREALLOC, O_DIRECT_IO, O_SPIN, O_NIC, O_DPDKEAL, O_DPDKPORT, O_IP, O_DPDKFAULTS, O_HELP };
	static const struct option opts[] = {
		{ "listen", required_argument, 0, O_LISTEN }, { "advertise", required_argument, 0, O_ADV },
		{ "data", required_argument, 0, O_DATA }, { "cores", required_argument, 0, O_CORES },
		{ "control-core", required_argument, 0, O_CONTROL }, { "idle-spin-us", required_argument, 0, O_SPIN },
		{ "log-level", required_argument, 0, O_LOG }, { "partitions", required_argument, 0, O_PARTS },
		{ "no-auto-create", no_argument, 0, O_NOAUTO }, { "no-fsync", no_argument, 0, O_NOFSYNC },
		{ "segment-bytes", required_argument, 0, O_SEG },
		{ "prealloc-bytes", required_argument, 0, O_PREALLOC }, { "direct-io", required_argument, 0, O_DIRECT_IO }, { "retention-bytes", required_argument, 0, O_RBYTES },
		{ "retention-ms", required_argument, 0, O_RMS }, { "max-frame-bytes", required_argument, 0, O_MAXFRAME },
		{ "node-id", required_argument, 0, O_NODE }, { "help", no_argument, 0, O_HELP },
		{ "producer-expiration-ms", required_argument, 0, O_PEXP },
		{ "producer-snapshot-ms", required_argument, 0, O_PSNAP },
		{ "fault-drop-produce", required_argument, 0, O_FDROP },
		{ "fault-close-produce", required_argument, 0, O_FCLOSE },
		{ "fault-seed", required_argument, 0, O_FSEED },
		{ "fault-marker-fail", required_argument, 0, O_FMARKER },
		{ "fault-call-refuse", required_argument, 0, O_FCALL },
		{ "fault-prepare-fail", required_argument, 0, O_FPREP },
		{ "fault-conf-sync-fail", required_argument, 0, O_FCONFSYNC },
		{ "fault-add-fail", required_argument, 0, O_FADD },
		{ "fault-marker-write-fail", required_argument, 0, O_FMWRITE },
		{ "fault-init-fail", required_argument, 0, O_FINIT },
		{ "fault-txn-kill", required_argument, 0, O_TXNKILL },
		{ "fault-delete-kill", required_argument, 0, O_DELKILL },
		{ "fetch-aborted-max", required_argument, 0, O_FABORTED },
		{ "fault-offsets-delay-ms", required_argument, 0, O_FOFFDELAY },
		{ "fault-marker-delay-ms", required_argument, 0, O_FMDELAY },
		{ "test-producers-max", required_argument, 0, O_TPMAX },
		{ "test-txn-open-max", required_argument, 0, O_TTMAX },
		{ "test-xmsg-credits", required_argument, 0, O_TXCRED },
		{ "test-appends-max", required_argument, 0, O_TAPPENDS },
		{ "test-reads-max", required_argument, 0, O_TREADS },
		{ "test-txn-allows-max", required_argument, 0, O_TALLOWS },
		{ "txn-state-mib", required_argument, 0, O_TXNSTATE },
		{ "group-state-mib", required_argument, 0, O_GRPSTATE },
		{ "partitions-max", required_argument, 0, O_PARTSMAX },
		{ "test-txn-state-bytes", required_argument, 0, O_TTXNSTATE },
		{ "print-budget", no_argument, 0, O_PBUDGET },
		{ "nic", required_argument, 0, O_NIC }, { "dpdk-eal", required_argument, 0, O_DPDKEAL },
		{ "dpdk-port", required_argument, 0, O_DPDKPORT }, { "ip", required_argument, 0, O_IP },
		{ "dpdk-faults", required_argument, 0, O_DPDKFAULTS },
		{ "transaction-max-timeout-ms", required_argument, 0, O_TXNMAX },
		{ "transaction-log-compact-records", required_argument, 0, O_TXNCOMPACT },
		{ "transactional-id-expiration-ms", required_argument, 0, O_TXNIDEXP },
		{ "transactional-ids-max", required_argument, 0, O_TXNIDSMAX },
		{ "txn-partitions-max", required_argument, 0, O_TXNTPSMAX },
		{ "txn-groups-max", required_argument, 0, O_TXNGRPMAX },
		{ "offsets-retention-ms", required_argument, 0, O_OFFRET },
		{ "group-initial-rebalance-delay-ms", required_argument, 0, O_GRPDELAY },
		{ 0, 0, 0, 0 },
	};
	dp_config_defaults(cfg);
	bool adv = false;
	int o;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end = NULL;
		switch (o) {
		case O_LISTEN:
			if (parse_hostport(optarg, cfg->listen_host, sizeof(cfg->listen_host), &cfg->listen_port))
				goto bad;
			break;
		case O_ADV:
			if (parse_hostport(optarg, cfg->advertised_host, sizeof(cfg->advertised_host),
			                   &cfg->advertised_port))
				goto bad;
			adv = true;
			break;
		case O_DATA:
			snprintf(cfg->data_dir, sizeof(cfg->data_dir), "%s", optarg);
			break;
		case O_CORES:
			cfg->cores = (int)strtol(optarg, &end, 10);
			if (*end || cfg->cores < 1 || cfg->cores > DP_CORES_MAX)
				goto bad;
			break;
		case O_CONTROL:
			if (!strcmp(optarg, "shared")) cfg->control_core = DP_CONTROL_SHARED;
			else if (!strcmp(optarg, "own")) cfg->control_core = DP_CONTROL_OWN;
			else goto bad;
			break;
		case O_LOG:
			if (!strcmp(optarg, "error")) cfg->log_level = DP_LOG_ERROR;
			else if (!strcmp(optarg, "warn")) cfg->log_level = DP_LOG_WARN;
			else if (!strcmp(optarg, "info")) cfg->log_level = DP_LOG_INFO;
			else if (!strcmp(optarg, "debug")) cfg->log_level = DP_LOG_DEBUG;
			else goto bad;
			break;
		case O_PARTS:
			cfg->default_partitions = (int32_t)strtol(optarg, &end, 10);
			if (*end || cfg->default_partitions < 1 || cfg->default_partitions > DP_PARTITIONS_MAX)
				goto bad;
			break;
		case O_NOAUTO: cfg->auto_create = false; break;
		case O_NOFSYNC: cfg->fsync = false; break;
		case O_SEG:
			cfg->segment_bytes = strtoull(optarg, &end, 10);
			if (*end || cfg->segment_bytes < 4096)
				goto bad;
			break;
		case O_PREALLOC: {
			unsigned long long v = strtoull(optarg, &end, 10);
			if (*end || v > UINT32_MAX)
				goto bad;
			cfg->prealloc_bytes = (uint32_t)v;
			break;
		}
		case O_DIRECT_IO:
			if (!strcmp(optarg, "on"))
				cfg->direct_io = true;
			else if (!strcmp(optarg, "off"))
				cfg->direct_io = false;
			else
				goto bad;
			break;
		case O_RBYTES: cfg->retention_bytes = strtoll(optarg, &end, 10); if (*end) goto bad; break;
		case O_RMS: cfg->retention_ms = strtoll(optarg, &end, 10); if (*end) goto bad; break;
		case O_MAXFRAME:
			cfg->max_frame_bytes = (uint32_t)strtoul(optarg, &end, 10);
			if (*end || cfg->max_frame_bytes < 1024 || cfg->max_frame_bytes > DP_FRAME_BYTES_MAX)
				goto bad;
			break;
		case O_NODE: cfg->node_id = (int32_t)strtol(optarg, &end, 10); if (*end || cfg->node_id < 0) goto bad; break;
		case O_PEXP:
			cfg->producer_expiration_ms = strtoll(optarg, &end, 10);
			if (*end || cfg->producer_expiration_ms < 1)
				goto bad;
			break;
		case O_PSNAP:
			cfg->producer_snapshot_ms = strtoll(optarg, &end, 10);
			if (*end || cfg->producer_snapshot_ms < 10)
				goto bad;
			break;
		case O_FDROP:
		case O_FCLOSE: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v > 1000)
				goto bad;
			*(o == O_FDROP ? &cfg->fault_drop_permille : &cfg->fault_close_permille) = (uint32_t)v;
			break;
		}
		case O_FMARKER:
		case O_FCALL: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v > 1000)
				goto bad;
			*(o == O_FMARKER ? &cfg->fault_marker_fail_permille : &cfg->fault_call_refuse_permille) = (uint32_t)v;
			break;
		}
		case O_FPREP:
		case O_FCONFSYNC:
		case O_FADD:
		case O_FINIT:
		case O_FMWRITE: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v > 1000)
				goto bad;
			*(o == O_FPREP ? &cfg->fault_prepare_fail : o == O_FCONFSYNC ? &cfg->fault_conf_sync_fail :
			  o == O_FADD ? &cfg->fault_add_fail :
			  o == O_FINIT ? &cfg->fault_init_fail : &cfg->fault_marker_write_fail) = (uint32_t)v;
			break;
		}
		case O_FSEED: cfg->fault_seed = strtoull(optarg, &end, 10); if (*end) goto bad; break;
		case O_FABORTED: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > DP_FETCH_ABORTED_MAX)
				goto bad;
			cfg->fetch_aborted_max = (uint32_t)v;
			break;
		}
		case O_TPMAX:
		case O_TTMAX: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > (o == O_TPMAX ? TXN_PSTATE_PRODUCERS_MAX : TXN_LSO_OPEN_MAX))
				goto bad;
			*(o == O_TPMAX ? &cfg->test_producers_max : &cfg->test_txn_open_max) = (uint32_t)v;
			break;
		}
		case O_TXCRED:
		case O_TAPPENDS: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > (o == O_TXCRED ? DP_XMSG_CREDITS : DP_APPENDS_MAX))
				goto bad;
			*(o == O_TXCRED ? &cfg->test_xmsg_credits : &cfg->test_appends_max) = (uint32_t)v;
			break;
		}
		case O_SPIN: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v > DP_IDLE_SPIN_US_MAX)
				goto bad;
			cfg->idle_spin_us = (int32_t)v;
			break;
		}
		case O_TREADS: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > DP_READS_MAX)
				goto bad;
			cfg->test_reads_max = (uint32_t)v;
			break;
		}
		case O_TXNSTATE: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > DP_TXN_STATE_MIB_MAX)
				goto bad;
			cfg->txn_state_mib = (uint32_t)v;
			break;
		}
		case O_GRPSTATE: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > DP_GROUP_STATE_MIB_MAX)
				goto bad;
			cfg->group_state_mib = (uint32_t)v;
			break;
		}
		case O_PARTSMAX: {
			long long v = strtoll(optarg, &end, 10);
			if (*end || v < 1 || v > DP_BROKER_PARTITIONS_MAX)
				goto bad;
			cfg->partitions_max = v;
			break;
		}
		case O_TTXNSTATE: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 4096 || v >= (1ul << 20))
				goto bad;
			cfg->test_txn_state_bytes = (uint32_t)v;
			break;
		}
		case O_TALLOWS: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > DP_TXN_ALLOWS_MAX)
				goto bad;
			cfg->test_txn_allows_max = (uint32_t)v;
			break;
		}
		case O_TXNKILL:
			if (!strcmp(optarg, "after-prepare")) cfg->fault_txn_kill = 1;
			else if (!strcmp(optarg, "after-first-marker")) cfg->fault_txn_kill = 2;
			else if (!strcmp(optarg, "before-complete")) cfg->fault_txn_kill = 3;
			else if (!strcmp(optarg, "add-lost")) cfg->fault_txn_kill = 4;
			else goto bad;
			break;
		case O_DELKILL:
			if (!strcmp(optarg, "mid-delete")) cfg->fault_delete_kill = DP_FAULT_DELETE_MID;
			else if (!strcmp(optarg, "after-intent")) cfg->fault_delete_kill = DP_FAULT_DELETE_INTENT;
			else goto bad;
			break;
		case O_FOFFDELAY:
		case O_FMDELAY: {
			int32_t *ms = o == O_FOFFDELAY ? &cfg->fault_offsets_delay_ms : &cfg->fault_marker_delay_ms;
			*ms = (int32_t)strtol(optarg, &end, 10);
			if (*end || *ms < 0 || *ms > 600000)
				goto bad;
			break;
		}
		case O_TXNMAX:
			cfg->txn_max_timeout_ms = (int32_t)strtol(optarg, &end, 10);
			if (*end || cfg->txn_max_timeout_ms < 1)
				goto bad;
			break;
		case O_TXNCOMPACT:
			cfg->txn_log_compact_records = strtoll(optarg, &end, 10);
			if (*end || cfg->txn_log_compact_records < 1)
				goto bad;
			break;
		case O_TXNIDEXP:
			cfg->txn_id_expiration_ms = strtoll(optarg, &end, 10);
			if (*end || cfg->txn_id_expiration_ms < 1)
				goto bad;
			break;
		case O_TXNIDSMAX: {
			long v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > TXN_IDS_MAX)
				goto bad;
			cfg->txn_ids_max = (uint32_t)v;
			break;
		}
		case O_TXNTPSMAX: {   /* whole units of the pool; at most 2^28 (the pool's u32 indexes, x4) */
			long v = strtol(optarg, &end, 10);
			if (*end || v < (long)TXN_COORD_TPS_UNIT || v > (1L << 28))
				goto bad;
			cfg->txn_tps_max = (uint32_t)v;
			break;
		}
		case O_TXNGRPMAX: {
			long v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > (1L << 24))
				goto bad;
			cfg->txn_groups_max = (uint32_t)v;
			break;
		}
		case O_OFFRET:
			cfg->offsets_retention_ms = strtoll(optarg, &end, 10);
			if (*end || cfg->offsets_retention_ms < -1 || cfg->offsets_retention_ms == 0)
				goto bad;
			break;
		case O_GRPDELAY: {
			long v = strtol(optarg, &end, 10);
			if (*end || v < 0 || v > DP_GROUP_INITIAL_DELAY_MAX_MS)
				goto bad;
			cfg->group_initial_delay_ms = (int32_t)v;
			break;
		}
		case O_PBUDGET: cfg->print_budget = true; break;
		case O_NIC:
			if (strcmp(optarg, "socket") && strcmp(optarg, "dpdk"))
				goto bad;
			if (strcmp(optarg, DP_NIC_BUILT)) {
				fprintf(stderr, "sluiced: --nic %s: this binary is built with the %s NIC; %s\n", optarg,
				        DP_NIC_BUILT, strcmp(optarg, "dpdk") ? "use sluiced" :
				        "use sluiced-dpdk (built where meson finds libdpdk)");
				return -1;
			}
			break;
		case O_DPDKEAL: nic_flags.eal = optarg; break;
		case O_DPDKFAULTS: nic_flags.faults = optarg; break;
		case O_DPDKPORT:
			nic_flags.port = strtol(optarg, &end, 10);
			if (*end || nic_flags.port < 0 || nic_flags.port > UINT16_MAX)
				goto bad;
			break;
		case O_IP: {
			char a[INET_ADDRSTRLEN];
			const char *slash = strchr(optarg, '/');
			size_t alen = slash ? (size_t)(slash - optarg) : strlen(optarg);
			struct in_addr in;
			if (alen >= sizeof(a))
				goto bad;
			memcpy(a, optarg, alen);
			a[alen] = 0;
			nic_flags.prefix = slash ? (int)strtol(slash + 1, &end, 10) : 32;
			if (inet_pton(AF_INET, a, &in) != 1 || (slash && (*end || nic_flags.prefix < 1 ||
			                                                   nic_flags.prefix > 32)))
				goto bad;
			nic_flags.ip = ntohl(in.s_addr);
			break;
		}
		case O_HELP: case 'h': usage(stdout); exit(0);
		default: goto bad;
		}
		continue;
bad:
		fprintf(stderr, "sluiced: bad option or value%s%s\n", optarg ? ": " : "", optarg ? optarg : "");
		usage(stderr);
		return -1;
	}
	if (optind < argc) {
		fprintf(stderr, "sluiced: unexpected argument %s\n", argv[optind]);
		return -1;
	}
#ifndef DP_NIC_DPDK
	if (nic_flags.eal || nic_flags.faults || nic_flags.port || nic_flags.ip) {
		fprintf(stderr, "sluiced: --dpdk-eal, --dpdk-port, --dpdk-faults and --ip are sluiced-dpdk's\n");
		return -1;
	}
#endif
	if (!cfg->cores) {   /* the default: one core per CPU this process may run on */
		int ncpu = allowed_cpus(NULL);
		cfg->cores = ncpu < 1 ? 1 : ncpu > DP_CORES_MAX ? DP_CORES_MAX : ncpu;
	}
	/* Spinning pays where nothing else needs the CPU, or where only polling sees frames arrive. */
	if (cfg->idle_spin_us < 0)
		cfg->idle_spin_us = !strcmp(DP_NIC_BUILT, "dpdk") || cfg->cores < allowed_cpus(NULL) ? DP_IDLE_SPIN_US : 0;
	if (cfg->control_core == DP_CONTROL_OWN && cfg->cores < 2) {
		fprintf(stderr, "sluiced: --control-core own needs --cores 2 or more\n");
		return -1;
	}
	if (!adv) {
		snprintf(cfg->advertised_host, sizeof(cfg->advertised_host), "%s",
		         strcmp(cfg->listen_host, "0.0.0.0") && strcmp(cfg->listen_host, "::") ? cfg->listen_host : "localhost");
		cfg->advertised_port = cfg->listen_port;
	}
	return 0;
}

static void *core_thread(void *arg)
{
	struct dp_core *c = arg;
	cpu_set_t allowed;
	int ncpu = allowed_cpus(&allowed);
	if (ncpu > 1 && c->b->ncores <= ncpu) {
		/* One core per allowed CPU when there are enough (the id-th of them: a cpuset or
		 * taskset may leave CPUs 0..n-1 out); otherwise let the kernel place them. */
		cpu_set_t set;
		CPU_ZERO(&set);
		for (int cpu = 0, n = 0; cpu < CPU_SETSIZE; cpu++)
			if (CPU_ISSET(cpu, &allowed) && n++ == c->id) {
				CPU_SET(cpu, &set);
				break;
			}
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	dp_core_run(c);
	return NULL;
}

/*
 * The port is free, or -errno once DP_LISTEN_WAIT_MS have passed. A broker that was
 * just SIGKILLed still holds its listeners for a moment after it is reaped: the
 * kernel closes files held by an io_uring in a worker after the process is gone. A
 * restart (a supervisor's, or a crash test's) waits that out; a live broker on the
 * port is still refused, only later.
 */
static int dp_wait_port(const char *host, uint16_t port)
{
	int rc = nic_port_probe(host, port);
	for (int waited_ms = 0; rc == -EADDRINUSE && waited_ms < DP_LISTEN_WAIT_MS;
	     waited_ms += DP_LISTEN_RETRY_MS) {
		if (waited_ms == 0)
			DP_INFO("%s:%u is in use; waiting up to %d ms for it to be released", host, port,
			        DP_LISTEN_WAIT_MS);
		usleep(DP_LISTEN_RETRY_MS * 1000);
		rc = nic_port_probe(host, port);
	}
	return rc;
}

int main(int argc, char **argv)
{
	static struct dp_broker b;
	/* Large buffers get their own mappings, so what the pool lets go returns to the system
	 * (the dynamic threshold would put them on the heap, resident after free). */
	mallopt(M_MMAP_THRESHOLD, DP_MALLOC_MMAP_BYTES);
	if (parse_args(argc, argv, &b.cfg) < 0)
		return 2;
	if (b.cfg.print_budget) {
		dp_budget_print(&b.cfg, dp_broker_roles, DP_BROKER_ROLES, stdout);
		return 0;
	}
	dp_log_level = b.cfg.log_level;
	dp_log_set_core(0);
	b.stop = &stop_flag;
	b.ready = &ready_count;
	if (dp_broker_assemble(&b) < 0) {
		DP_ERR("start-up: out of memory");
		return 1;
	}
	dp_fd_budget_init(&b);
#ifdef DP_NIC_DPDK
	{
		struct in_addr in;
		if (!nic_flags.ip && inet_pton(AF_INET, b.cfg.listen_host, &in) == 1)
			nic_flags.ip = ntohl(in.s_addr);
		/* rte_eal_init pins this thread to its main lcore; the cores place themselves
		 * by the mask this process had before (core_thread reads it) */
		cpu_set_t mask;
		sched_getaffinity(0, sizeof(mask), &mask);
		struct nic_dpdk_config dc = { .eal_args = nic_flags.eal, .port_id = (uint16_t)nic_flags.port,
		                              .queues = (uint16_t)b.ndata, .ip = nic_flags.ip };
		if (nic_flags.faults && nic_dpdk_faults_parse(nic_flags.faults, &dc.faults) < 0) {
			DP_ERR("--dpdk-faults %s: want drop=PPM,dup=PPM,reorder=PPM,corrupt=PPM,txdrop=PPM,seed=N",
			       nic_flags.faults);
			return 2;
		}
		if (nic_flags.faults)
			DP_WARN("TEST-ONLY link faults are on: %s", nic_flags.faults);
		char err[256];
		int drc = nic_dpdk_init(&dc, err, sizeof(err));
		sched_setaffinity(0, sizeof(mask), &mask);
		if (drc < 0) {
			DP_ERR("DPDK: %s", err);
			return 1;
		}
		DP_INFO("DPDK port %ld up: %d queue pairs, stack address %u.%u.%u.%u", nic_flags.port, b.ndata,
		        nic_flags.ip >> 24, nic_flags.ip >> 16 & 0xffu, nic_flags.ip >> 8 & 0xffu, nic_flags.ip & 0xffu);
	}
#endif
	int rc = b.cfg.listen_port ? dp_wait_port(b.cfg.listen_host, b.cfg.listen_port) : 0;
	if (rc < 0) {
		DP_ERR("cannot listen on %s:%u: %s", b.cfg.listen_host, b.cfg.listen_port, strerror(-rc));
		return 1;
	}
	rc = dp_scan_data_dir(&b);
	if (rc < 0) {
		DP_ERR("data directory %s: %s", b.cfg.data_dir, strerror(-rc));
		return 1;
	}

	/* Only this thread takes SIGINT/SIGTERM; the cores never see signals. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	pthread_t th[DP_CORES_MAX];
	for (int i = 0; i < b.ncores; i++)
		pthread_create(&th[i], NULL, core_thread, b.cores[i]);
	while (atomic_load(&ready_count) < b.ncores)
		usleep(1000);
	if (atomic_load(&ready_count) >= 1000) {
		DP_ERR("start-up failed");
		stop_flag = 1;
	} else {
		if (b.cfg.fault_drop_permille || b.cfg.fault_close_permille)
			DP_WARN("TEST-ONLY fault injection is on: Produce responses dropped %u/1000, "
			        "connections closed %u/1000", b.cfg.fault_drop_permille, b.cfg.fault_close_permille);
		DP_INFO("sluiced listening on %s:%u (%d cores: %d data, control on core 0%s, data dir %s, fsync %s, direct io %s, idle spin %d us)",
		        b.cfg.listen_host, b.cfg.listen_port, b.ncores, b.ndata,
		        b.first_data ? " alone" : b.ncores > 1 ? " beside data" : "", b.cfg.data_dir,
		        b.cfg.fsync ? "on" : "off", b.cfg.direct_io ? "on" : "off", b.cfg.idle_spin_us);
		DP_INFO("memory budget %llu MiB for these flags (sluiced --print-budget itemises it)",
		        dp_budget_total(&b.cfg, dp_broker_roles, DP_BROKER_ROLES) >> 20);
		int sig;
		sigwait(&sigs, &sig);
		DP_INFO("signal %d: shutting down", sig);
		stop_flag = 1;
	}
	for (int i = 0; i < b.ncores; i++) {
		if (b.cores[i]->efd < 0)
			continue;   /* cores still starting check the stop flag themselves */
		ssize_t w = write(b.cores[i]->efd, &(uint64_t){ 1 }, sizeof(uint64_t));
		(void)w;
	}
	for (int i = 0; i < b.ncores; i++)
		pthread_join(th[i], NULL);
	dp_broker_release(&b);
#ifdef DP_NIC_DPDK
	nic_dpdk_fini();
#endif
	DP_INFO("stopped");
	return stop_flag && atomic_load(&ready_count) >= 1000 ? 1 : 0;
}
