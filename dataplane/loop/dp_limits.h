/*
 * dp_limits.h - the data plane's limits, in one place (internal to dataplane/).
 *
 * Every bound a client could otherwise push is here, with units last, and
 * the ones that depend on each other are tied with _Static_assert. A
 * client's own numbers (sizes, counts, timeouts) never size memory: they are
 * clamped to these. Limits of the pure logic live beside it and are listed
 * here so the whole picture is on one page:
 *   txn/group.h   GRP_SESSION_MIN_MS, GRP_SESSION_MAX_MS (JoinGroup outside:
 *                 INVALID_SESSION_TIMEOUT), GRP_REBALANCE_MAX_MS (clamped),
 *                 GRP_MEMBERS_MAX, GRP_ID_BYTES_MAX, GRP_OFFSET_META_MAX
 *   nic/nic_internal.h  NIC_TXQ_MAX queued sends per connection
 *   --max-frame-bytes   the largest request (DP_FRAME_BYTES_MAX at most)
 *
 * Memory a connection pins. Each request holds its frame, its decode
 * arena (all of it), the fetch buffers it lent to
 * owner cores (a parked fetch gives back those that came back empty) and,
 * once answered, its encoded response until the NIC has sent it. These "held bytes" are counted per connection
 * and per core (conn.c). A connection stops being read (nic_pause: TCP
 * pushes back) once it holds DP_CONN_HELD_BYTES_MAX, or has
 * DP_CONN_REQS_MAX requests unfinished, and is read again at half of
 * either. One request may take a connection past its limit (the limit is
 * checked before a request starts), so a connection holds at most
 *     DP_CONN_HELD_BYTES_MAX + one request
 * where one request is at most a frame, its arena (DP_ARENA_BYTES_MAX at
 * most), its fetch buffers (about its MaxBytes: fetch.c) and its response.
 * Across a core's connections requests start only while the core holds less than
 * DP_CORE_HELD_BYTES_MAX; beyond it they wait, and the connection with the
 * most answers it does not read (at least DP_CONN_RECLAIM_MIN_BYTES unsent)
 * is closed, so clients that never read cannot hold the core's budget
 * forever while others wait.
 *
 * Connections. The NIC accepts at most DP_CONNS_MAX per data core and
 * refuses (closes at accept) beyond; that is the only refusal. A closed
 * connection's requests that are still out at other cores (a JoinGroup
 * waiting for a rebalance, a produce at the disk) are detached from its
 * slot (their answers are dropped when they come back), so they never keep
 * a slot from the next connection. Only a connection that left while its
 * reads were paused keeps its slot a while, to carry out what it sent
 * (acks=0 producers count on that); at most DP_CONN_DRAINING_MAX do at
 * once, beyond that the unread rest is dropped.
 */
#ifndef SLUICE_DP_LIMITS_H
#define SLUICE_DP_LIMITS_H

#include <stdint.h>

#include "txn_limits.h"   /* the limits dataplane/ shares with txn/, named once there */

/* Cores and rings. */
#define DP_CORES_MAX            64
#define DP_RING_MSGS            4096      /* per (src, dst) pair */
#define DP_RING_BURST           64
/*
 * Cross-core flow control. A message that does not fit its ring waits in
 * the sender's backlog for that destination, a fixed queue of
 * DP_BACKLOG_MSGS allocated at start-up (main.c). What bounds it is credit:
 * a request (dp_ask, loop.h: it carries DP_F_CREDIT) sent to another core
 * is counted against that pair until its one answer (dp_answer or
 * dp_answer_to: DP_F_ANSWER) comes back. Fan-outs a
 * client's request makes per partition (produce, fetch, list, markers,
 * describe producers, creates and deletes), and the coordinator's markers
 * and partition grants, ask dp_send_room() first and are refused beyond
 * DP_XMSG_CREDITS (the partition gets a retriable error; the coordinator
 * sends again on its timer; a fetch first asks it again when one of its own
 * answers gives credit back, conn/fetch.c). Before that, past half of the credit toward
 * another data core, a NIC core starts no new request (its connections
 * pause, conn.c), so a request's fan-out normally finds room. A request to the control core
 * (coordinator calls, call.h, and InitProducerId) is counted but never refused: a
 * NIC core has at most DP_REQS_MAX requests. So a backlog (X -> Y) holds at
 * most, itemised:
 *   X's requests to Y           DP_XMSG_CREDITS + DP_REQS_MAX (calls) + 2 (catalog fan-out)
 *   X's replies to Y's requests the same, Y's
 *   GROUP_GONE                  DP_REQS_MAX (one per group call)
 *   watches and their fires     DP_BACKLOG_WATCH_MSGS (advisory: past it a fire
 *                               is dropped and the fetch answers at MaxWaitMs)
 */
#define DP_XMSG_CREDITS         4096      /* refusable requests outstanding per (src, dst) */
#define DP_BACKLOG_WATCH_MSGS   4096
#define DP_BACKLOG_MSGS         (2u * (DP_XMSG_CREDITS + DP_REQS_MAX + 2u) + DP_REQS_MAX + DP_BACKLOG_WATCH_MSGS)
/* (calls and GROUP_GONE go only to and from the control core: a backlog
 * between two data cores is DP_REQS_MAX-free, dp_backlog_msgs in loop.h) */

/* Catalog. */
#define DP_TOPIC_CREATE_CONFIGS_MAX 1000   /* configs in one CreateTopics entry; more: INVALID_CONFIG */
#define DP_TOPICS_MAX           4096      /* catalog slots */
#define DP_TOPIC_INDEX_SLOTS    8192      /* open addressing, 2x topics */
#define DP_TOPIC_NAME_MAX       TXN_TOPIC_BYTES_MAX      /* Kafka's limit (txn/txn_limits.h) */
#define DP_PARTITIONS_MAX       TXN_TOPIC_PARTITIONS_MAX /* per topic */
/* Partitions the whole broker holds (--partitions-max; less when the file
 * descriptors hold fewer, dp_fd_budget_init). Each costs its fixed state and
 * its active segment's index at full size (~0.55 MiB at the default 256 MiB
 * segments, the budget's "partitions" item), so without this bound a raised
 * RLIMIT_NOFILE alone made the budget hundreds of GiB. 4,096 is about what
 * Kafka's own guidance gives one broker (~4,000). Past it a CreateTopics is
 * refused POLICY_VIOLATION, as a broker policy would refuse it. */
#define DP_BROKER_PARTITIONS_DEFAULT 4096
#define DP_BROKER_PARTITIONS_MAX ((int64_t)DP_TOPICS_MAX * DP_PARTITIONS_MAX)   /* the flag's range */

/* Connections and requests, per data core. */
#define DP_CONNS_MAX            4096      /* accepted connections; more are refused at accept */
#define DP_CONN_DRAINING_MAX    DP_CONNS_MAX /* closed while paused, still carrying out what they sent */
#define DP_CONN_SLOTS           (DP_CONNS_MAX + DP_CONN_DRAINING_MAX)
#define DP_REQS_MAX             16384     /* in-flight requests per core */
#define DP_CONN_REQS_MAX        1024      /* unfinished requests of one connection before its reads pause */
#define DP_CONN_RESUME_REQS_MAX 64        /* requests one resume starts from a stash; the rest waits a turn */
#define DP_CONN_HELD_BYTES_MAX  (32ull << 20)  /* bytes one connection's requests hold before its reads pause */
#define DP_CORE_HELD_BYTES_MAX  (512ull << 20) /* bytes all of a core's requests hold before new ones wait */
#define DP_CONN_RECLAIM_MIN_BYTES (DP_CONN_HELD_BYTES_MAX / 4) /* unsent answers that make a connection closable */
#define DP_FRAME_CHUNK_BYTES    (64u << 10) /* a frame's buffer starts here and grows as its bytes arrive */
#define DP_FRAME_BYTES_MAX      (1u << 30) /* --max-frame-bytes at most */
#define DP_FRAME_BYTES_DEFAULT  (100u << 20) /* Kafka's socket.request.max.bytes */
#define DP_ARENA_BASE_BYTES     16384
/* A request's arena holds what its frame decodes to and what its handler
 * allocates per element for the answer. Both are bounded per wire byte,
 * asserted: the decoder's for every array of every request schema
 * (KMSG_REQUEST_ARRAYS, conn.c; the largest is a string, 16 bytes from 1),
 * the handlers' in fetch.c (Fetch: a topic's answer, 48 bytes, from 3). So
 * any well-formed request decodes and is answered, up to DP_ARENA_BYTES_MAX. */
#define DP_ARENA_DECODE_PER_WIRE_BYTE 16
#define DP_ARENA_ANSWER_PER_WIRE_BYTE 16
#define DP_ARENA_PER_FRAME_BYTE (DP_ARENA_DECODE_PER_WIRE_BYTE + DP_ARENA_ANSWER_PER_WIRE_BYTE)
#define DP_ARENA_BYTES_MAX      (256u << 20) /* a request that decodes to more is malformed: closed */
/* A coordinator's answer is made in its call's arena, sized by the request;
 * one that holds the broker's state (a JoinGroup leader's member list,
 * ListGroups, ListTransactions, ...) may need more: the call is sent again
 * with this many times the arena, up to DP_ARENA_BYTES_MAX, so at most
 * DP_CALL_GROWS_MAX times (call.h dp_call_grow). */
#define DP_CALL_GROW_FACTOR     4
#define DP_CALL_GROWS_MAX       8

/* NIC. */
#define DP_NIC_BURST            64
#define DP_NIC_RX_BUF_BYTES     (64u << 10)
#define DP_NIC_RX_BUFS          256       /* per core: bytes received but not yet framed */

/* Buffer pool (buf.c), per core. */
#define DP_BUF_MAX_BYTES        (1ull << 30)   /* largest buffer */
#define DP_BUF_CLASS_IDLE_BYTES (64ull << 20)  /* idle bytes kept per size class */
#define DP_BUF_IDLE_BYTES_MAX   (256ull << 20) /* idle bytes kept in all classes */
#define DP_MALLOC_MMAP_BYTES    (1 << 20)      /* buffers this large are mapped on their own (mallopt) */

/* Owner side, per data core: records of a partition's share of a produce
 * until it is durable (and duplicates waiting for their original). Storage
 * queues at most ST_IO_APPENDS_MAX (8192) appends per core; beyond the pool
 * a batch is refused, retriable (NOT_ENOUGH_REPLICAS), not written. */
#define DP_APPENDS_MAX          16384
/* Owner side, per data core: grants of a partition to a producer's ongoing
 * transaction (AddPartitionsToTxn fans one out per partition; the marker
 * takes it back). From a fixed pool; when it is empty the grant is refused
 * and the AddPartitionsToTxn answered COORDINATOR_NOT_AVAILABLE (retriable),
 * so the client tries again once transactions have ended. 65536 is e.g.
 * 1,000 open transactions writing 65 partitions each on one core. */
#define DP_TXN_ALLOWS_MAX       65536
/* Owner side, per data core: one pool (txn/arena.h), reserved at start-up,
 * that every owned partition's producer table, open-transaction list and
 * aborted index take their arrays from instead of malloc on the poll core
 * (--txn-state-mib). A producer costs ~0.8 KiB of it at most (its slot in a
 * table at most half full, doubled once more while growing, and its
 * snapshot bytes), an aborted transaction ~32 B; so the default holds e.g.
 * 100,000 producers, or 60,000 and a million aborts kept by retention, on
 * one core. Tables shrink again after expiry and retention.
 * When it is spent a batch that needs a new entry is refused before its
 * append, retriable (NOT_ENOUGH_REPLICAS). */
#define DP_TXN_STATE_MIB_DEFAULT 128u
#define DP_TXN_STATE_MIB_MAX     (1u << 20)   /* 1 TiB: the flag's range */

/* Control core: one pool (txn/arena.h), reserved at start-up, that the group
 * coordinator's whole state takes its memory from (txn/group.h: struct
 * grp_mem), --group-state-mib: groups, their members (~6 KiB each, an 8 KiB
 * block, plus their protocols' metadata and assignments), KIP-394 member ids
 * handed out, committed and staged offsets (one block each with key and
 * metadata, 128 B for a typical one) and the tables over them. Before, each
 * was a malloc on the control core, and a client naming new group ids, or
 * members sending large metadata, grew it without bound. The default holds
 * e.g. 10,000 members and 500,000 committed offsets. When it is spent,
 * what needs more (a new group or member, a commit of a new key) is answered
 * COORDINATOR_NOT_AVAILABLE, retriable, before anything is written. */
#define DP_GROUP_STATE_MIB_DEFAULT 256u
#define DP_GROUP_STATE_MIB_MAX     (1u << 20)   /* 1 TiB: the flag's range */
#define GRP_MEM_UNIT_BYTES         64u          /* the pool's smallest block: an offset of a short key */

/* Control core: each coordinator's log writes in flight (records from a
 * fixed pool; storage queues at most ST_IO_APPENDS_MAX, 8192, per core). */
#define DP_COORD_WRITES_MAX     8192

/* Loop, waits, reads. */
#define DP_CQE_BURST            256
#define DP_WAITERS_PER_PART     64        /* parked fetches watching one partition */
#define DP_DELREC_WAITS_PER_PART 8        /* DeleteRecords of one partition waiting for its log-start
                                              file; more at once are answered REQUEST_TIMED_OUT (retriable) */
#define DP_DELREC_PARTS_MAX     1024      /* partitions one DeleteRecords names in all; those past it are
                                              answered INVALID_REQUEST, none sent to an owner */
/* An idle core busy-polls this long after its last work before it sleeps (--idle-spin-us; the
 * default: this where the NIC is polled or a CPU is left beside the cores, else 0, main.c). */
#define DP_IDLE_SPIN_US         200
#define DP_IDLE_SPIN_US_MAX     1000000
#define DP_SLEEP_MAX_MS         10
/* A core reads the monotonic clock once per loop iteration and derives the wall clock from it,
 * reading the wall clock itself again this often (a step of the system clock shows within it). */
#define DP_WALL_SYNC_MS         1000
/* From this many cores the control role gets a core of its own by default (dp_layout): there it
 * costs at most an eighth of the data capacity; below, it shares core 0 with a data role. The
 * control role's work per loop iteration is bounded either way: DP_RING_BURST messages from each
 * other core's ring, and its timers once per DP_TXNC_TIMER_MS / DP_GRP_TIMER_MS. */
#define DP_CONTROL_OWN_CORES_MIN 8
#define DP_URING_ENTRIES        2048
#define DP_READS_MAX            256       /* cold fetch reads in flight per data core (--test-reads-max: fewer) */
/*
 * A Fetch or ListOffsets that needs a read slot (shard/read.c) while all
 * DP_READS_MAX are in flight waits in a FIFO of its core and runs again when
 * one completes: a poll core never reads with a blocking syscall instead.
 * Bound: every such request is a credited fan-out (above), so at most
 * DP_XMSG_CREDITS from each core that sends them wait at once, and past half
 * of that credit a NIC core starts no new request (conn.c):
 *     DP_READ_WAITS_MAX = DP_XMSG_CREDITS    (one sending core's whole credit)
 * More (several NIC cores at full credit toward one owner, all cold) is
 * answered retriable: Fetch KAFKA_STORAGE_ERROR, as for a buffer it could not
 * lend (conn/fetch.c), ListOffsets LEADER_NOT_AVAILABLE, as for no credit.
 */
#define DP_READ_WAITS_MAX       DP_XMSG_CREDITS
/* Producer-state snapshots being written (io_uring) per data core: each is an fdatasync, a rename
 * and a directory fsync, and a thousand at once would stand in front of the appends' own
 * fdatasyncs in the disk's queue and the file system's journal. The rest wait their turn. */
#define DP_SNAPSHOTS_INFLIGHT_MAX 4

/* Fetch, produce checks, descriptors, failed disks. */
#define DP_FETCH_RESPONSE_MAX_BYTES (55u << 20) /* Kafka's fetch.max.bytes: MaxBytes and PartitionMaxBytes clamp here */
#define DP_FETCH_ABORTED_MAX    1024      /* aborted transactions in one partition's read_committed answer */
#define DP_FETCH_ABORTED_BYTES  (8u + DP_FETCH_ABORTED_MAX * 24u) /* their room behind the records (shard.c) */
/* One Produce request may make its core decompress at most this much to check
 * its batches (storage/codec.h; each batch also at most
 * ST_BATCH_DECOMPRESSED_BYTES_MAX); beyond, its remaining compressed batches
 * are refused with MESSAGE_TOO_LARGE. A gzip bomb of ~40 KB inflates to the
 * 32 MiB batch limit in ~0.2-0.3 s here, so without it one 100 MB request of
 * bombs would hold a NIC core for minutes; with it, for about a second at
 * most, while legitimate requests (clients cap them at 1 MB compressed by
 * default) stay far below. */
#define DP_PRODUCE_DECOMPRESSED_BYTES_MAX (128u << 20)
/*
 * ListOffsets by time reads the batch its time index found and walks its
 * records, decompressing them (shard/read.c). One request's partitions by
 * time share this much of both (bytes read and bytes decompressed), each at
 * most DP_LIST_PART_WORK_BYTES_MAX: a request naming a million partitions
 * costs its owners what one naming 64 does, and a lookup whose batch is over
 * its share is answered by the batch's header (its base offset and
 * maxTimestamp). Clients ask a handful of partitions at a time.
 */
#define DP_LIST_WORK_BYTES_MAX      (256u << 20)
#define DP_LIST_PART_WORK_BYTES_MAX (4u << 20)
/*
 * File descriptors: the partitions a broker may hold are checked against
 * RLIMIT_NOFILE (soft limit raised to the hard one at start-up) before a
 * create is answered. Budget, itemised:
 *   every partition   DP_PART_FDS: its directory, active segment, aborted
 *                     index, and one sealed segment (a partition with more
 *                     sealed segments holds one more per segment); with
 *                     --direct-io on DP_PART_DIRECT_FDS more (the active
 *                     segment's O_DIRECT descriptor)
 *   connections       DP_CONNS_MAX per data core, but at most a quarter of
 *                     the limit (then accept() meets EMFILE before the
 *                     partitions do)
 *   the rest          DP_FDS_RESERVED: stdio, io_urings and eventfds,
 *                     listeners, the coordinators' own logs, snapshot and
 *                     index files open for a moment
 */
#define DP_PART_FDS             4
#define DP_PART_DIRECT_FDS      1
/* A partition whose disk failed is reopened on a timer, backing off from 1 s to 60 s;
 * after ENOSPC only once this much space is free again. */
#define DP_PROBE_FIRST_MS       1000
#define DP_PROBE_MAX_MS         60000
#define DP_PROBE_BUSY_MS        100      /* a probe that met the log busy looks again this soon */
#define DP_PROBE_FREE_BYTES_MIN (1u << 20)
#define DP_FAULT_HOLD_MS        5000     /* test only: --fault-marker-write-fail holds the probe at most this long */
#define DP_FDS_RESERVED         256
/* How often a shard applies retention (size and time) to its partitions. */
#define DP_RETENTION_CHECK_MS   30000

/*
 * Kafka's group.initial.rebalance.delay.ms (its default): an Empty group's
 * first rebalance waits this long, and again while new members come, within
 * the rebalance timeout (txn/group.h). The broker flag takes up to the max:
 * JoinGroups wait that long in the coordinator.
 */
#define DP_GROUP_INITIAL_DELAY_MS_DEFAULT 3000
#define DP_GROUP_INITIAL_DELAY_MAX_MS     300000
_Static_assert(DP_GROUP_INITIAL_DELAY_MS_DEFAULT <= DP_GROUP_INITIAL_DELAY_MAX_MS, "initial delay bounds");

/* Start-up: how long a busy listen port is waited for (a SIGKILLed broker's
 * listeners outlive it for a moment; see dp_wait_port), polled this often. */
#define DP_LISTEN_WAIT_MS       10000
#define DP_LISTEN_RETRY_MS      50

/* Log lines a client can cause (log.c): per call site and core. */
#define DP_LOG_RL_BURST         10        /* lines per window, then "N similar lines suppressed" */
#define DP_LOG_RL_WINDOW_MS     10000

_Static_assert(DP_BACKLOG_MSGS >= 2u * (DP_XMSG_CREDITS + DP_REQS_MAX + 2u) + DP_REQS_MAX,
               "a backlog holds every credited request, its reply and every GROUP_GONE");
_Static_assert(DP_TOPIC_INDEX_SLOTS >= 2 * DP_TOPICS_MAX, "index load factor");
_Static_assert(DP_CONN_SLOTS >= DP_CONNS_MAX + DP_CONN_DRAINING_MAX,
               "every accepted connection finds a slot while the draining ones keep theirs");
_Static_assert(DP_CONN_SLOTS <= UINT16_MAX, "slot numbers are 16 bits (conn_map)");
_Static_assert(DP_CONN_REQS_MAX <= DP_REQS_MAX, "one connection cannot need more than the core has");
_Static_assert(DP_CORE_HELD_BYTES_MAX >= 4 * DP_CONN_HELD_BYTES_MAX,
               "several busy connections fit in a core's budget");
_Static_assert(DP_CONN_RECLAIM_MIN_BYTES > 0 && DP_CONN_RECLAIM_MIN_BYTES < DP_CONN_HELD_BYTES_MAX,
               "a connection at its own limit is closable");
_Static_assert(DP_FRAME_BYTES_DEFAULT <= DP_FRAME_BYTES_MAX && DP_FRAME_BYTES_MAX <= DP_BUF_MAX_BYTES,
               "a frame fits one pool buffer");
_Static_assert(DP_BUF_CLASS_IDLE_BYTES <= DP_BUF_IDLE_BYTES_MAX, "idle pool bounds");
_Static_assert(DP_ARENA_BASE_BYTES <= DP_ARENA_BYTES_MAX && DP_ARENA_BYTES_MAX <= DP_BUF_MAX_BYTES,
               "a request's arena is one pool buffer, whatever --max-frame-bytes says");
_Static_assert((uint64_t)DP_ARENA_BASE_BYTES << (2 * DP_CALL_GROWS_MAX) >= DP_ARENA_BYTES_MAX && DP_CALL_GROW_FACTOR == 4,
               "a call sent again DP_CALL_GROWS_MAX times reaches the largest arena");

#endif
