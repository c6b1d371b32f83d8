/*
 * group.h - the consumer-group coordinator's state: groups and their
 * members under Kafka's classic rebalance protocol (one checked state
 * setter), and the committed-offset table with its log records.
 *
 * Pure logic: no I/O and no clock. Every call takes `now` (ms) and, where a
 * request may be answered later (JoinGroup, SyncGroup), an opaque waiter
 * (the driver's handle on the unanswered request). Answers that became
 * ready are appended to a struct grp_outs the driver sends right after the
 * call. Membership is persisted as one record per group (its state when
 * it last became Stable or Empty), so a restarted broker knows its members
 * and their assignments, and they carry on without a rebalance.
 *
 * Locality: control core (dataplane/control/group.c drives it).
 */
#ifndef SLUICE_TXN_GROUP_H
#define SLUICE_TXN_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "kerr.h"         /* the Kafka error codes the group logic returns */
#include "txn_limits.h"

/*
 * Where the coordinator's state lives: every group, member, pending member
 * id, protocol metadata, assignment and offset, and the tables over them,
 * take their memory from one pool reserved at start-up (the driver's
 * --group-state-mib), so no client can make the control core allocate,
 * nor grow its state past that bound. When the pool has no block left, the
 * call that needed one fails with -ENOMEM before anything changed that a
 * client was told, and the driver answers it retriably. NULL instead of a
 * grp_mem: the heap (tests, tools, the simulator).
 *
 * spill: replaying the log at start-up (init, not the poll loop), what no
 * longer fits the pool (a log written under a larger one) comes from the
 * heap, counted in spilled, rather than losing the state or the start.
 */
struct grp_mem {
	struct txn_arena arena;
	bool spill;
	uint64_t spilled;             /* blocks the heap gave while spill was set */
};

#define GRP_ID_BYTES_MAX        TXN_GROUP_ID_BYTES_MAX /* group ids, longer are refused */
#define GRP_MEMBER_ID_BYTES_MAX 512     /* client id + "-" + suffix, truncated */
#define GRP_NAME_BYTES_MAX      255     /* protocol type / name; client ids are cut to this */
#define GRP_HOST_BYTES_MAX      63      /* a member's address as text, "/" + IPv6 literal fits */
#define GRP_PROTOCOLS_MAX       16      /* assignors one member offers */
#define GRP_MEMBERS_MAX         1024    /* per group */
#define GRP_OUTS_MAX            (2 * GRP_MEMBERS_MAX + 2)   /* answers one call can release */
/*
 * Session timeouts outside [min, max] are refused with INVALID_SESSION_TIMEOUT,
 * as Kafka's group.min/max.session.timeout.ms do (Kafka's min is 6000; ours
 * is lower so tests can expire members in seconds). A rebalance timeout
 * (max.poll.interval.ms) is not refused, since Kafka takes any, but it is
 * clamped to GRP_REBALANCE_MAX_MS: it sets how long a rebalance waits for
 * members that do not rejoin, and a client's INT32_MAX (24 days) must not
 * hold a group, and the JoinGroups waiting in it, that long.
 */
#define GRP_SESSION_MIN_MS      1000
#define GRP_SESSION_MAX_MS      1800000 /* group.max.session.timeout.ms */
#define GRP_REBALANCE_MAX_MS    1800000 /* rebalance timeouts above are taken as this */
_Static_assert(GRP_SESSION_MIN_MS > 0 && GRP_SESSION_MIN_MS <= GRP_SESSION_MAX_MS, "session bounds");
_Static_assert(GRP_REBALANCE_MAX_MS >= GRP_SESSION_MAX_MS, "a v0 join's rebalance timeout is its session timeout");
#define GRP_TOPIC_BYTES_MAX     TXN_TOPIC_BYTES_MAX
#define GRP_OFFSET_META_MAX     4096    /* offset.metadata.max.bytes */


enum grp_state {
	GRP_EMPTY = 0,
	GRP_PREPARING_REBALANCE,
	GRP_COMPLETING_REBALANCE,
	GRP_STABLE,
	GRP_DEAD,
};

/* The driver's handle on a request waiting for an answer (opaque here). */
struct grp_waiter {
	void *ctx;                    /* NULL: nobody waits */
	uint32_t gen;
	uint16_t core;
};

struct grp_protocol {
	char name[GRP_NAME_BYTES_MAX + 1];
	uint16_t name_len;
	uint8_t *meta;                /* meta_len bytes (never NULL), from the group's grp_mem */
	uint32_t meta_len;
};

/* One member. Its address is stable while it is in the group. */
struct grp_member {
	char id[GRP_MEMBER_ID_BYTES_MAX + 1];
	uint16_t id_len;
	char instance_id[GRP_NAME_BYTES_MAX + 1];   /* group.instance.id (KIP-345); empty: dynamic */
	uint16_t instance_id_len;
	char prev_id[GRP_MEMBER_ID_BYTES_MAX + 1];  /* a static leader's id before its restart */
	uint16_t prev_id_len;
	char client_id[GRP_NAME_BYTES_MAX + 1];     /* of its latest JoinGroup, for DescribeGroups */
	uint16_t client_id_len;
	char client_host[GRP_HOST_BYTES_MAX + 1];
	uint16_t client_host_len;
	int32_t session_ms, rebalance_ms;
	int64_t last_hb_ms;
	uint32_t nprotocols;
	struct grp_protocol protocols[GRP_PROTOCOLS_MAX];
	uint8_t *assignment;          /* the leader's SyncGroup, from the group's grp_mem; NULL: none */
	uint32_t assignment_len;
	struct grp_waiter join;       /* a JoinGroup waiting for the rebalance */
	struct grp_waiter sync;       /* a SyncGroup waiting for the leader's */
};

/* A member id handed out with MEMBER_ID_REQUIRED, not yet used to join. */
struct grp_pending_member {
	char id[GRP_MEMBER_ID_BYTES_MAX + 1];
	uint16_t id_len;
	int64_t expire_ms;            /* forgotten after one session timeout */
};

struct grp_group {
	struct grp_mem *mem;          /* the coordinator's (its members, arrays and metadata come from it) */
	char id[GRP_ID_BYTES_MAX + 1];
	uint16_t id_len;
	enum grp_state state;
	int32_t generation;
	char protocol_type[GRP_NAME_BYTES_MAX + 1];
	uint16_t protocol_type_len;
	int32_t protocol;             /* index into the leader's protocols, -1 none */
	char protocol_name[GRP_NAME_BYTES_MAX + 1];
	uint16_t protocol_name_len;
	struct grp_member *leader;
	struct grp_member **members;  /* [nmembers], in join order */
	uint32_t nmembers, members_cap;
	int64_t rebalance_deadline_ms;
	/*
	 * Kafka's InitialDelayedJoin: an Empty group's first rebalance waits
	 * group.initial.rebalance.delay.ms, even once everyone has joined, so
	 * members starting together land in one generation; each wait in which a
	 * new member joined (generation 0 only, as Kafka) is followed by another,
	 * until the rebalance timeout is used up.
	 */
	int64_t initial_until_ms;     /* 0: not in the initial delay */
	int32_t initial_delay_ms;     /* the configured delay */
	int32_t initial_cur_ms;       /* this wait's length */
	int32_t initial_left_ms;      /* of the rebalance timeout, after this wait */
	bool initial_joined;          /* a new member joined during this wait */
	uint64_t next_member_seq;
	struct grp_pending_member *pending;   /* [npending] (KIP-394) */
	uint32_t npending, pending_cap;
	uint32_t changes;             /* bumped by every state move and member replacement */
	uint32_t saved_changes;       /* the driver's: changes when the group was last persisted */
	bool compact_due;             /* the driver's: the running compaction has not rewritten it yet */
	int64_t empty_since_ms;       /* the driver's: when it last became Empty (offset retention), 0 not Empty */
};

/* What an answer is for. */
enum grp_out_kind { GRP_OUT_JOIN = 1, GRP_OUT_SYNC };

/*
 * One answer ready to go. For a successful JoinGroup/SyncGroup m is the
 * member (valid until the next call into the group), else NULL. follower:
 * a JoinGroup answer for a restarted static leader: name m->prev_id as the
 * leader and send no member list.
 */
struct grp_out {
	enum grp_out_kind kind;
	bool follower;
	int16_t err;
	const char *member_id;        /* MEMBER_ID_REQUIRED: the id to join with (valid as m) */
	uint16_t member_id_len;
	struct grp_waiter w;
	struct grp_member *m;
};

struct grp_outs {
	uint32_t n;
	struct grp_out o[GRP_OUTS_MAX];
};

/* A JoinGroup, as the logic needs it. Strings point into the request. */
struct grp_join_req {
	const char *member_id; size_t member_id_len;   /* empty: a new member */
	const char *instance_id; size_t instance_id_len;   /* empty: a dynamic member */
	bool require_known_id;        /* JoinGroup v4+ (KIP-394): a new dynamic member gets an id first */
	const char *client_id; size_t client_id_len;
	const char *client_host; size_t client_host_len;   /* may be empty */
	const char *protocol_type; size_t protocol_type_len;
	int32_t session_ms, rebalance_ms;
	int32_t initial_delay_ms;     /* the broker's group.initial.rebalance.delay.ms, 0 none */
	uint32_t nprotocols;
	const char *proto_names[GRP_PROTOCOLS_MAX];
	size_t proto_name_lens[GRP_PROTOCOLS_MAX];
	const uint8_t *proto_metas[GRP_PROTOCOLS_MAX];
	size_t proto_meta_lens[GRP_PROTOCOLS_MAX];
};

/* A SyncGroup assignment (the leader's). */
struct grp_assign {
	const char *member_id; size_t member_id_len;
	const uint8_t *bytes; size_t len;
};

const char *grp_state_name(enum grp_state s);
bool grp_state_move_ok(enum grp_state from, enum grp_state to);
/* The one way to change a state: aborts on a move Kafka's table forbids. */
enum grp_state grp_set_state(struct grp_group *g, enum grp_state to);

/* ---- the table of groups ---- */
struct grp_coord;
int  grp_coord_create(struct grp_coord **out);
/* The same, its state from mem (grp_mem: NULL the heap); mem outlives it. */
int  grp_coord_create_in(struct grp_coord **out, struct grp_mem *mem);
void grp_coord_destroy(struct grp_coord *c);
struct grp_group *grp_find(struct grp_coord *c, const char *id, size_t len);
struct grp_group *grp_get(struct grp_coord *c, const char *id, size_t len);   /* find or add (Empty) */
struct grp_group *grp_next(struct grp_coord *c, uint32_t *cursor);             /* cursor starts at 0 */
/*
 * DeleteGroups of an Empty group: it becomes Dead, its generation, protocol and pending member
 * ids forgotten (Kafka removes the group; entries here are never freed, so Dead stands for
 * "none": listings skip it, and grp_get makes it anew, Empty, for its next join). A group
 * tombstone read back at start does the same.
 */
void grp_delete(struct grp_group *g);
uint32_t grp_count(const struct grp_coord *c);
struct grp_member *grp_member_find(const struct grp_group *g, const char *id, size_t len);

/*
 * JoinGroup: answered through outs (now, or when the rebalance completes).
 * Static membership (KIP-345): a join with an instance id and no member id
 * that finds a member of that instance id takes its place under a new
 * member id (the old id is fenced: FENCED_INSTANCE_ID). In a Stable group
 * with unchanged protocols that costs no rebalance: the member keeps its
 * assignment. If it was the leader, its answer names the old leader id
 * (grp_out.follower), as Kafka does, so that it does not compute an
 * assignment a Stable group would not hand out. KIP-394: with
 * require_known_id, a new dynamic member (no member id) is answered
 * MEMBER_ID_REQUIRED with an id to join again with (within one session
 * timeout), so a join whose answer was lost leaves no ghost member behind.
 * Returns 0, or -ENOMEM (nothing was queued for w; answer it with an
 * error).
 */
int grp_join(struct grp_group *g, const struct grp_join_req *q, struct grp_waiter w, int64_t now,
             struct grp_outs *outs);
/* SyncGroup: answered through outs. Returns 0 or -ENOMEM as grp_join. */
int grp_sync(struct grp_group *g, const char *member, size_t member_len, int32_t generation,
             const struct grp_assign *a, uint32_t na, struct grp_waiter w, int64_t now,
             struct grp_outs *outs);
/*
 * Is this (member id, instance id) a fenced static member, i.e. the instance
 * id now belongs to another member id? FENCED_INSTANCE_ID or 0. Sync,
 * Heartbeat, OffsetCommit and LeaveGroup check it first. instance_len 0: a
 * dynamic member, never fenced.
 */
int16_t grp_fenced(const struct grp_group *g, const char *member, size_t member_len, const char *instance,
                   size_t instance_len);
/* The static member with this instance id, or NULL. */
struct grp_member *grp_static_find(const struct grp_group *g, const char *instance, size_t instance_len);
/* Heartbeat: the Kafka error code to answer now. */
int16_t grp_heartbeat(struct grp_group *g, const char *member, size_t member_len, int32_t generation,
                      int64_t now);
/* LeaveGroup of one member: the error code; may release other members' answers. */
int16_t grp_leave(struct grp_group *g, const char *member, size_t member_len, int64_t now,
                  struct grp_outs *outs);
/*
 * The client behind waiter (ctx, gen) is gone: its connection closed while
 * the request waited. The waiter is answered now (the driver drops the
 * answer and frees the request) instead of being held for the whole
 * rebalance; the member stays, as in Kafka, no longer counted as rejoined:
 * its session timeout or the rebalance deadline removes it unless it comes
 * back. Returns true if g held that waiter.
 */
bool grp_waiter_gone(struct grp_group *g, const void *ctx, uint32_t gen, int64_t now, struct grp_outs *outs);
/* Timers: expire silent members, finish overdue rebalances. */
void grp_tick(struct grp_group *g, int64_t now, struct grp_outs *outs);
/* May this OffsetCommit be taken? 0 or a Kafka error code. generation < 0: simple commit. */
int16_t grp_commit_check(const struct grp_group *g, const char *member, size_t member_len,
                         int32_t generation);

/* ---- group metadata: membership, persisted in the offsets log ---- */

/*
 * Log record key, big-endian: int16 version (3), int16 group length, group.
 * Value: int16 version (0), int8 state (Empty 0, Stable 3), int32
 * generation, str16 protocol type, str16 protocol name, str16 leader id,
 * int32 member count, then per member: str16 id, str16 instance id (may be
 * empty), str16 client id, str16 client host, int32 session ms, int32
 * rebalance ms, bytes32 metadata of the group's protocol, bytes32
 * assignment. (str16 = int16 length + bytes; bytes32 = int32 length +
 * bytes.) Written when a group becomes Stable or Empty; later records win.
 */
#define GRP_GROUP_KEY_BYTES_MAX (2 + 2 + GRP_ID_BYTES_MAX)
int grp_group_key_encode(uint8_t *buf, size_t cap, const char *group, size_t glen);
/* Bytes grp_group_value_encode needs for g. */
size_t grp_group_value_size(const struct grp_group *g);
/* g must be Stable or Empty. Returns bytes written or -ENOSPC. */
int grp_group_value_encode(const struct grp_group *g, uint8_t *buf, size_t cap);
/*
 * Recovery: apply the group records of one stored batch (other records are
 * the offsets table's, skipped here). A restored Stable group's members are
 * given until now + their session timeout to heartbeat. Returns 0, -EBADMSG
 * if a record was damaged (the others still apply), or -ENOMEM.
 */
int grp_groups_apply_batch(struct grp_coord *c, const uint8_t *batch, size_t len, int64_t now);

/* ---- committed offsets ---- */

/* One committed offset. */
struct grp_offset {
	int64_t offset;
	int32_t leader_epoch;
	int64_t commit_ms;
	int16_t meta_len;             /* -1: null */
	char *meta;                   /* meta_len bytes when > 0: in the entry's own block, after the key */
	bool ending;                  /* staged only: its transaction's end is being written */
	bool compact_due;             /* the driver's: the running compaction has not rewritten it yet */
	uint16_t key_len;
	uint16_t meta_cap;            /* the metadata the entry's block holds */
	uint8_t key[];                /* grp_offset_key_encode */
};

struct grp_offsets;
int  grp_offsets_create(struct grp_offsets **out);
/* The same, its entries and tables from mem (NULL: the heap); mem outlives it. */
int  grp_offsets_create_in(struct grp_offsets **out, struct grp_mem *mem);
void grp_offsets_destroy(struct grp_offsets *t);
uint32_t grp_offsets_count(const struct grp_offsets *t);

/*
 * Log record key, big-endian: int16 version (1), int16 group length, group,
 * int16 topic length, topic, int32 partition. Returns bytes written, or
 * -ENOSPC (cap too small) / -EINVAL (a name too long).
 */
#define GRP_KEY_BYTES_MAX (2 + 2 + GRP_ID_BYTES_MAX + 2 + GRP_TOPIC_BYTES_MAX + 4)
int grp_offset_key_encode(uint8_t *buf, size_t cap, const char *group, size_t glen, const char *topic,
                          size_t tlen, int32_t partition);
/*
 * Log record value, big-endian: int16 version (0), int64 offset, int32
 * leader epoch, int64 commit timestamp ms, int16 metadata length (-1 null),
 * metadata bytes. A null value deletes the key.
 */
#define GRP_VALUE_BYTES_MAX (2 + 8 + 4 + 8 + 2 + GRP_OFFSET_META_MAX)
int grp_offset_value_encode(uint8_t *buf, size_t cap, int64_t offset, int32_t leader_epoch,
                            int64_t commit_ms, const char *meta, int32_t meta_len);

/* Look up (group, topic, partition): NULL if never committed. */
const struct grp_offset *grp_offset_get(const struct grp_offsets *t, const char *group, size_t glen,
                                        const char *topic, size_t tlen, int32_t partition);
/*
 * An OffsetCommit in two steps, so that applying it once its record is
 * durable cannot fail for want of memory (the record would be on disk, and
 * back at the next start, while the table never had it): _prepare, before
 * the write, makes the room (*fresh: a new entry's block, not yet in the
 * table, or NULL when the key's entry holds the new metadata in place, so a
 * key committed again needs no memory); _install, once durable, applies the
 * value (fresh as given by _prepare), and returns 0 (-ENOMEM only should the
 * rule _prepare relies on be broken: see group.c); _drop, after a failed
 * write, undoes _prepare. _prepare returns 0, -EINVAL (a name or the
 * metadata too long) or -ENOMEM.
 */
int  grp_offset_prepare(struct grp_offsets *t, const char *group, size_t glen, const char *topic, size_t tlen,
                        int32_t partition, int32_t meta_len, struct grp_offset **fresh);
int  grp_offset_install(struct grp_offsets *t, struct grp_offset *fresh, const char *group, size_t glen,
                        const char *topic, size_t tlen, int32_t partition, int64_t offset, int32_t leader_epoch,
                        int64_t commit_ms, const char *meta, int32_t meta_len);
void grp_offset_drop(struct grp_offsets *t, struct grp_offset *fresh);
/* Store a commit at once (replaces): prepare and install. Returns 0, -EINVAL or -ENOMEM. */
int grp_offset_put(struct grp_offsets *t, const char *group, size_t glen, const char *topic, size_t tlen,
                   int32_t partition, int64_t offset, int32_t leader_epoch, int64_t commit_ms,
                   const char *meta, int32_t meta_len);
/* Iterate: cursor starts at 0. */
const struct grp_offset *grp_offset_next(const struct grp_offsets *t, uint32_t *cursor);
/* Split an entry's key back into its parts (pointers into the key). */
void grp_offset_key_parts(const struct grp_offset *o, const char **group, size_t *glen,
                          const char **topic, size_t *tlen, int32_t *partition);
/*
 * Recovery: apply one stored batch of the offsets log (key/value as above,
 * null value = delete). Later records win. Returns 0, -EBADMSG if a record
 * was damaged (the others still apply), or -ENOMEM.
 */
int grp_offsets_apply_batch(struct grp_offsets *t, const uint8_t *batch, size_t len);

/* ---- transactional offsets (TxnOffsetCommit), staged until the transaction ends ---- */

/*
 * Pending log record key, big-endian: int16 version (2), int64 producer id,
 * then the committed key's body (int16 group length, group, int16 topic
 * length, topic, int32 partition). The value is a committed value
 * (grp_offset_value_encode); a null value drops the staged offset. One per
 * (producer id, group, topic, partition): a later TxnOffsetCommit of the same
 * transaction replaces it. grp_offsets_apply_batch keeps these apart from
 * the committed offsets (never visible to OffsetFetch).
 */
#define GRP_PENDING_KEY_BYTES_MAX (GRP_KEY_BYTES_MAX + 8)
int grp_pending_key_encode(uint8_t *buf, size_t cap, int64_t pid, const char *group, size_t glen,
                           const char *topic, size_t tlen, int32_t partition);
/* Stage an offset under a pending key (replaces). Returns 0, -EINVAL or -ENOMEM. */
int grp_pending_put(struct grp_offsets *t, const uint8_t *key, size_t klen, int64_t offset,
                    int32_t leader_epoch, int64_t commit_ms, const char *meta, int32_t meta_len);
/*
 * The end of a transaction, for one staged offset. A staged offset stays
 * pending (grp_pending_has, so RequireStable answers UNSTABLE_OFFSET_COMMIT)
 * until the end's records are durable: only then does a commit make the
 * offset visible, in the same step that drops the staged entry, so no
 * OffsetFetch ever sees neither (issue 10 item 2). end_begin marks the entry
 * (-ENOENT if absent); a marked entry is not ended twice. end_apply, once
 * durable: with commit, (offset, leader_epoch, commit_ms, meta) becomes the
 * committed offset of the pending key's (group, topic, partition); then the
 * staged entry goes unless a later grp_pending_put replaced it meanwhile (a
 * new transaction of the same producer). The staged entry's own block
 * becomes the committed one, and the committed table always has a slot
 * ready for every staged entry (grp_pending_put makes it), so a commit of a
 * staged entry being ended needs no memory. Returns 0, -EINVAL or -ENOMEM
 * (only without such an entry: a replay, or one replaced meanwhile; the
 * staged entry is kept).
 */
int grp_pending_end_begin(struct grp_offsets *t, const uint8_t *pkey, size_t pklen);
int grp_pending_end_apply(struct grp_offsets *t, const uint8_t *pkey, size_t pklen, bool commit, int64_t offset,
                          int32_t leader_epoch, int64_t commit_ms, const char *meta, int32_t meta_len);
/* Drop one committed offset, by its key (absent: nothing). */
void grp_offset_del(struct grp_offsets *t, const uint8_t *key, size_t klen);
/* Drop one staged offset (absent: nothing). */
void grp_pending_del(struct grp_offsets *t, const uint8_t *key, size_t klen);
/* Iterate the staged offsets: cursor starts at 0; no put/del while iterating. */
const struct grp_offset *grp_pending_next(const struct grp_offsets *t, uint32_t *cursor);
uint32_t grp_pending_count(const struct grp_offsets *t);
/* The producer id of a staged offset (grp_offset_key_parts also works on it). */
int64_t grp_pending_pid(const struct grp_offset *o);
/* Has any producer staged an offset for (group, topic, partition)? Linear: staged offsets are few. */
bool grp_pending_has(const struct grp_offsets *t, const char *group, size_t glen, const char *topic,
                     size_t tlen, int32_t partition);

#endif
