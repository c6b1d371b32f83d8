/*
 * api.c - request dispatch, the advertised API table, and the handlers that
 * need no partition owner (ApiVersions, Metadata, CreateTopics,
 * DeleteTopics). Locality: NIC core.
 */
#include <errno.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "kerr.h"
#include "conn_internal.h"
#include "topicconf.h"

/*
 * What we advertise and implement. Ranges follow VERSIONS.md: the classic
 * APIs start at 0 because librdkafka's feature detection looks for overlaps.
 * Produce v0-2 carry magic 0/1 message sets, answered with
 * UNSUPPORTED_FOR_MESSAGE_FORMAT batch by batch.
 */
static const struct dp_api {
	int16_t key, min, max;
} dp_apis[] = {
	{ KAPI_PRODUCE, 0, 7 },
	{ KAPI_FETCH, 0, 11 },
	{ KAPI_LIST_OFFSETS, 0, 3 },
	{ KAPI_METADATA, 0, 6 },
	{ KAPI_OFFSET_COMMIT, 0, 7 },
	{ KAPI_OFFSET_FETCH, 0, 7 },   /* 7: RequireStable answers UNSTABLE_OFFSET_COMMIT for staged txn offsets */
	{ KAPI_FIND_COORDINATOR, 0, 2 },
	{ KAPI_JOIN_GROUP, 0, 5 },   /* 4: MEMBER_ID_REQUIRED first, KIP-394; 5: static members */
	{ KAPI_HEARTBEAT, 0, 3 },
	{ KAPI_LEAVE_GROUP, 0, 3 },
	{ KAPI_SYNC_GROUP, 0, 3 },
	{ KAPI_DESCRIBE_GROUPS, 0, 5 },
	{ KAPI_LIST_GROUPS, 0, 4 },
	{ KAPI_DELETE_GROUPS, 0, 2 },    /* durable through the offsets log (tombstones) */
	{ KAPI_OFFSET_DELETE, 0, 0 },
	{ KAPI_API_VERSIONS, 0, 3 },
	{ KAPI_CREATE_TOPICS, 0, 4 },
	{ KAPI_DELETE_TOPICS, 0, 1 },
	{ KAPI_DELETE_RECORDS, 0, 2 },      /* librdkafka and kafkajs 0-1; answered once the new start is durable */
	{ KAPI_CREATE_PARTITIONS, 0, 1 },   /* librdkafka 0, kafkajs 1 (the same layout) */
	{ KAPI_DESCRIBE_CLUSTER, 0, 0 },    /* admin tools (Kafka's AdminClient) */
	{ KAPI_DESCRIBE_ACLS, 0, 3 },       /* SECURITY_DISABLED, as Kafka with no authorizer */
	{ KAPI_CREATE_ACLS, 0, 3 },
	{ KAPI_DELETE_ACLS, 0, 3 },
	{ KAPI_DESCRIBE_CONFIGS, 0, 4 },    /* librdkafka 0-1, kafkajs 0-2 (configapi.c) */
	{ KAPI_ALTER_CONFIGS, 0, 2 },       /* librdkafka 0, kafkajs 0-1 */
	{ KAPI_INCREMENTAL_ALTER_CONFIGS, 0, 1 },
	{ KAPI_INIT_PRODUCER_ID, 0, 4 },   /* 4: librdkafka's epoch bump, KIP-360 */
	{ KAPI_ADD_PARTITIONS_TO_TXN, 0, 1 },
	{ KAPI_ADD_OFFSETS_TO_TXN, 0, 1 },
	{ KAPI_END_TXN, 0, 1 },
	{ KAPI_WRITE_TXN_MARKERS, 0, 1 },   /* admin tools; the coordinator writes markers itself */
	{ KAPI_TXN_OFFSET_COMMIT, 0, 3 },   /* 3: generation/member checks, KIP-447 */
	{ KAPI_DESCRIBE_PRODUCERS, 0, 0 },
	{ KAPI_DESCRIBE_TRANSACTIONS, 0, 0 },
	{ KAPI_LIST_TRANSACTIONS, 0, 0 },
};
#define DP_NAPIS (sizeof(dp_apis) / sizeof(dp_apis[0]))

static const struct dp_api *api_find(int16_t key)
{
	for (size_t i = 0; i < DP_NAPIS; i++)
		if (dp_apis[i].key == key)
			return &dp_apis[i];
	return NULL;
}

static const int32_t *node_list(struct dp_core *c)
{
	static _Thread_local int32_t node[1];
	node[0] = c->b->cfg.node_id;
	return node;
}

/* ---- ApiVersions ---------------------------------------------------------- */

static int api_versions(struct dp_core *c, struct dp_req *r, struct kreader *rd, bool supported)
{
	struct ApiVersionsResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!resp)
		return -1;
	ApiVersionsResponse_init(resp);   /* schema defaults: unset tagged fields stay unsent */
	r->resp = resp;
	if (!supported) {
		/* Kafka answers an unknown version with a v0 body: UNSUPPORTED_VERSION and our range. */
		static struct ApiVersionsResponse_ApiVersion self = {
			.ApiKey = KAPI_API_VERSIONS, .MinVersion = 0, .MaxVersion = 3 };
		resp->ErrorCode = KERR_UNSUPPORTED_VERSION;
		resp->ApiKeys = &self;
		resp->ApiKeys_n = 1;
		r->hdr.api_version = 0;
		return 0;
	}
	struct ApiVersionsRequest req;
	if (ApiVersionsRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	resp->ApiKeys = dp_req_alloc(r, sizeof(*resp->ApiKeys) * DP_NAPIS);
	for (size_t i = 0; i < DP_NAPIS; i++) {
		resp->ApiKeys[i].ApiKey = dp_apis[i].key;
		resp->ApiKeys[i].MinVersion = dp_apis[i].min;
		resp->ApiKeys[i].MaxVersion = dp_apis[i].max;
	}
	resp->ApiKeys_n = DP_NAPIS;
	return 0;
}

/* ---- Metadata ------------------------------------------------------------- */

/* Per requested topic: the catalog answer is taken when the response is encoded. */
struct md_topic {
	struct kstr name;
	int16_t err;
};

void dp_ask_control(struct dp_core *c, struct dp_req *r, uint16_t type, uint32_t idx,
                    struct kstr name, int32_t nparts, uint16_t flags, const void *conf)
{
	struct dp_msg m = { .type = type, .ctx = r, .idx = idx, .gen = r->gen, .flags = flags };
	m.u.topic.conf = conf;
	m.u.topic.name = name.ptr;
	m.u.topic.name_len = (uint32_t)name.len;
	m.u.topic.nparts = nparts;
	r->pending++;
	if (dp_send_room(c, c->b->services[DP_SVC_CONTROL].core, 1)) {
		dp_ask_service(c, DP_SVC_CONTROL, dp_req_complete_part, &m);
		return;
	}
	/* No credit toward the control core (dp_limits.h): answered here with a
	 * retriable error, as the control core's own answer would be. */
	struct dp_msg done = { .type = (uint16_t)(type + 1), .fn = dp_req_complete_part, .ctx = r, .idx = idx,
	                       .gen = r->gen, .src = (uint16_t)c->id,
	                       .err = r->hdr.api_key == KAPI_METADATA ? KERR_LEADER_NOT_AVAILABLE : KERR_REQUEST_TIMED_OUT };
	dp_req_complete_part(c, &done);
}

static int metadata(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct MetadataRequest *req = dp_req_alloc(r, sizeof(*req));
	if (MetadataRequest_decode(rd, r->hdr.api_version, req, &r->arena) < 0)
		return -1;
	r->req = req;
	/* null (v1+) or empty (v0) list: all topics (slots stay NULL); built at encode time. */
	if (req->Topics_n < 0 || (req->Topics_n == 0 && r->hdr.api_version == 0))
		return 0;
	struct md_topic *mt = dp_req_alloc(r, sizeof(*mt) * (size_t)(req->Topics_n + 1));
	if (!mt)
		return -1;
	r->slots = (void **)mt;
	r->nslots = (uint32_t)req->Topics_n;
	bool create = c->b->cfg.auto_create && req->AllowAutoTopicCreation;
	for (int32_t i = 0; i < req->Topics_n; i++) {
		struct kstr n = req->Topics[i].Name;
		mt[i].name = n;
		if (n.len < 0 || !dp_topic_name_valid(n.ptr, (size_t)n.len)) {
			mt[i].err = KERR_INVALID_TOPIC_EXCEPTION;
			continue;
		}
		if (dp_topic_find(c, n.ptr, (size_t)n.len) >= 0)
			continue;
		mt[i].err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		/* The coordinators' logs are not topics: asking for one never makes a user topic of it. */
		if (create && !dp_topic_internal(n.ptr, (size_t)n.len))
			dp_ask_control(c, r, DP_MSG_CREATE, (uint32_t)i, n, c->b->cfg.default_partitions, 0, NULL);
	}
	return 0;
}

static void md_fill_topic(struct dp_core *c, struct dp_req *r, struct MetadataResponse_MetadataResponseTopic *t,
                          const struct dp_topic *dt, struct kstr name, int16_t err, void **mem)
{
	t->Name = name;
	t->ErrorCode = err;
	t->TopicAuthorizedOperations = INT32_MIN;
	if (!dt)
		return;
	struct MetadataResponse_MetadataResponsePartition *p = *mem;
	*mem = p + dt->nparts;
	t->Partitions = p;
	t->Partitions_n = dt->nparts;
	for (int32_t i = 0; i < dt->nparts; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		p[i].PartitionIndex = i;
		p[i].LeaderId = c->b->cfg.node_id;
		p[i].LeaderEpoch = 0;
		p[i].ReplicaNodes = (int32_t *)node_list(c);
		p[i].ReplicaNodes_n = 1;
		p[i].IsrNodes = (int32_t *)node_list(c);
		p[i].IsrNodes_n = 1;
		p[i].OfflineReplicas_n = 0;
	}
}

/* The one broker's cluster, as Metadata and DescribeCluster name it. */
#define DP_CLUSTER_ID "sluice-cluster"

static int metadata_build(struct dp_core *c, struct dp_req *r)
{
	struct MetadataResponse *resp = dp_req_alloc(r, sizeof(*resp));
	struct MetadataResponse_MetadataResponseBroker *br = dp_req_alloc(r, sizeof(*br));
	if (!resp || !br)
		return -ENOMEM;
	r->resp = resp;
	const struct dp_config *cfg = &c->b->cfg;
	br->NodeId = cfg->node_id;
	br->Host = (struct kstr){ cfg->advertised_host, (int32_t)strlen(cfg->advertised_host) };
	br->Port = cfg->advertised_port;
	br->Rack = (struct kstr){ NULL, -1 };
	resp->Brokers = br;
	resp->Brokers_n = 1;
	resp->ClusterId = (struct kstr){ DP_CLUSTER_ID, sizeof(DP_CLUSTER_ID) - 1 };
	resp->ControllerId = cfg->node_id;
	resp->ClusterAuthorizedOperations = INT32_MIN;

	/* Size everything first so the arrays come from one buffer. */
	struct md_topic *mt = (struct md_topic *)r->slots;
	uint32_t ntopics = 0;
	size_t nparts = 0;
	if (mt) {
		for (uint32_t i = 0; i < r->nslots; i++) {
			int32_t id = mt[i].err == KERR_INVALID_TOPIC_EXCEPTION ? -1 :
			             dp_topic_find(c, mt[i].name.ptr, (size_t)mt[i].name.len);
			if (id >= 0)
				nparts += (size_t)c->topics[id].nparts;
		}
		ntopics = r->nslots;
	} else {
		for (uint32_t id = 0; id < c->topics_end; id++)
			if (c->topics[id].live) {
				ntopics++;
				nparts += (size_t)c->topics[id].nparts;
			}
	}
	size_t bytes = ntopics * sizeof(struct MetadataResponse_MetadataResponseTopic) +
	               nparts * sizeof(struct MetadataResponse_MetadataResponsePartition) + 64;
	void *mem = dp_buf_try_get(bytes);
	if (!mem)
		return -ENOMEM;   /* the connection is closed, the broker goes on */
	r->resp_buf = NULL;
	r->slots_mem = mem;
	struct MetadataResponse_MetadataResponseTopic *t = mem;
	memset(t, 0, ntopics * sizeof(*t));
	void *pmem = t + ntopics;
	resp->Topics = t;
	resp->Topics_n = (int32_t)ntopics;
	if (mt) {
		for (uint32_t i = 0; i < r->nslots; i++) {
			int32_t id = mt[i].err == KERR_INVALID_TOPIC_EXCEPTION ? -1 :
			             dp_topic_find(c, mt[i].name.ptr, (size_t)mt[i].name.len);
			md_fill_topic(c, r, &t[i], id >= 0 ? &c->topics[id] : NULL, mt[i].name,
			              id >= 0 ? KERR_NONE : mt[i].err, &pmem);
		}
	} else {
		uint32_t k = 0;
		for (uint32_t id = 0; id < c->topics_end; id++) {
			struct dp_topic *dt = &c->topics[id];
			if (dt->live)
				md_fill_topic(c, r, &t[k++], dt, (struct kstr){ dt->name, dt->name_len }, 0, &pmem);
		}
	}
	return 0;
}

/* ---- FindCoordinator --------------------------------------------------------- */

/*
 * One node: this broker coordinates every group (key type 0) and every
 * transactional id (1). librdkafka also takes FindCoordinator support as its
 * sign of a 0.9+ broker, and only then compresses with lz4.
 */
static int find_coordinator(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct FindCoordinatorRequest req;
	struct FindCoordinatorResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!resp || FindCoordinatorRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	FindCoordinatorResponse_init(resp);
	r->resp = resp;
	const struct dp_config *cfg = &c->b->cfg;
	resp->ErrorMessage = (struct kstr){ NULL, -1 };
	if (req.KeyType != 0 && req.KeyType != 1) {
		resp->ErrorCode = KERR_INVALID_REQUEST;
		resp->NodeId = -1;
		resp->Host = (struct kstr){ "", 0 };
		resp->Port = -1;
		return 0;
	}
	resp->NodeId = cfg->node_id;
	resp->Host = (struct kstr){ cfg->advertised_host, (int32_t)strlen(cfg->advertised_host) };
	resp->Port = cfg->advertised_port;
	return 0;
}

/* ---- CreateTopics / DeleteTopics -------------------------------------------- */

/*
 * CreateTopics' ErrorMessage for a name asked for twice is kept to this many
 * bytes (the list of names is cut short beyond), and only the first so many
 * entries of duplicated names carry it (the rest have the error code alone):
 * it costs 256 response bytes for an entry of some 20 request bytes, so a
 * request of a few million duplicates would otherwise ask for an answer past
 * the largest response buffer (1 GiB) from a frame of 100 MB.
 */
#define DP_CREATE_DUPS_MESSAGE_BYTES_MAX 256
#define DP_CREATE_DUPS_MESSAGES_MAX      1024

static int name_cmp(const void *a, const void *b, void *ctx)
{
	const struct CreateTopicsRequest_CreatableTopic *t = ctx;
	const struct kstr *x = &t[*(const int32_t *)a].Name, *y = &t[*(const int32_t *)b].Name;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	int d = x->len > 0 ? memcmp(x->ptr, y->ptr, (size_t)x->len) : 0;
	return d ? d : *(const int32_t *)a < *(const int32_t *)b ? -1 : 1;   /* stable: request order */
}

static void append_cut(char *buf, size_t *at, const char *s, size_t n)
{
	size_t room = DP_CREATE_DUPS_MESSAGE_BYTES_MAX - *at;
	memcpy(buf + *at, s, n < room ? n : room);
	*at += n < room ? n : room;
}

/*
 * Kafka refuses every entry of a name that a CreateTopics request holds more
 * than once with INVALID_REQUEST (and creates none of them), before any other
 * check: which of the entries' settings would be meant is unknowable. Sorting
 * indexes, not names, keeps this O(n log n) for a request of a million entries.
 * Returns -1 when the request's arena has no room (the caller closes).
 */
static int create_dups(struct dp_req *r, const struct CreateTopicsRequest *req, struct CreateTopicsResponse *resp)
{
	int32_t n = resp->Topics_n;
	int32_t *by_name = dp_req_alloc(r, sizeof(*by_name) * (size_t)(n ? n : 1));
	char *msg = dp_req_alloc(r, DP_CREATE_DUPS_MESSAGE_BYTES_MAX);
	if (!by_name || !msg)
		return -1;
	for (int32_t i = 0; i < n; i++)
		by_name[i] = i;
	qsort_r(by_name, (size_t)n, sizeof(*by_name), name_cmp, req->Topics);
	static const char head[] = "Create topics request from client `", mid[] = "` contains multiple entries for "
	                                                                      "the following topics: ";
	struct kstr cid = r->hdr.client_id;
	size_t at = 0, names = 0;
	append_cut(msg, &at, head, sizeof(head) - 1);
	append_cut(msg, &at, cid.ptr, cid.len > 0 ? (size_t)cid.len : 0);
	append_cut(msg, &at, mid, sizeof(mid) - 1);
	for (int32_t i = 0, j; i < n; i = j) {
		const struct kstr *name = &req->Topics[by_name[i]].Name;
		for (j = i + 1; j < n; j++) {
			const struct kstr *other = &req->Topics[by_name[j]].Name;
			if (other->len != name->len || (name->len > 0 && memcmp(other->ptr, name->ptr, (size_t)name->len)))
				break;
		}
		if (j - i < 2)
			continue;
		if (names++)
			append_cut(msg, &at, ",", 1);
		append_cut(msg, &at, name->ptr, name->len > 0 ? (size_t)name->len : 0);
		for (int32_t k = i; k < j; k++)
			resp->Topics[by_name[k]].ErrorCode = KERR_INVALID_REQUEST;
	}
	for (int32_t i = 0, given = 0; names && i < n && given < DP_CREATE_DUPS_MESSAGES_MAX; i++)
		if (resp->Topics[i].ErrorCode == KERR_INVALID_REQUEST) {
			resp->Topics[i].ErrorMessage = (struct kstr){ msg, (int32_t)at };
			given++;
		}
	return 0;
}

static const char create_why_both[] = "both numPartitions or replicationFactor and replicasAssignment were set";
static const char create_why_order[] =
	"partitions should be a consecutive 0-based integer sequence";
static const char create_why_broker[] =
	"an assignment may name only this broker, once (a single broker: replication factor 1)";

/*
 * An explicit assignment on one broker: partitions 0..n-1, each once, each
 * on this broker alone (Kafka answers INVALID_REPLICA_ASSIGNMENT for an
 * unknown broker, a broker twice or a gap). Sorting is not needed: each
 * index has one place, so a gap or a repeat shows as a slot taken twice.
 */
static const char *create_assignment_why(const struct dp_core *c, const struct CreateTopicsRequest_CreatableTopic *in)
{
	int32_t n = in->Assignments_n;
	uint64_t seen[(DP_PARTITIONS_MAX + 63) / 64] = { 0 };
	for (int32_t j = 0; j < n; j++) {
		const struct CreateTopicsRequest_CreatableReplicaAssignment *a = &in->Assignments[j];
		int32_t p = a->PartitionIndex;
		if (p < 0 || p >= n || (seen[p / 64] >> (p % 64)) & 1)
			return create_why_order;
		seen[p / 64] |= 1ull << (p % 64);
		if (a->BrokerIds_n != 1 || a->BrokerIds[0] != c->b->cfg.node_id)
			return create_why_broker;
	}
	return NULL;
}

/* Kafka 2.x's (ZkAdminManager.createTopics; 3.x answers INVALID_CONFIG, "...configs: "). */
static const char create_why_null[] = "Null value not supported for topic configs : ";
static const char create_why_configs_n[] = "more configs than a topic takes (DP_TOPIC_CREATE_CONFIGS_MAX)";

/*
 * Every config of a create must be a topic config Kafka knows, with a value
 * it takes, that sluice applies or stores (topicconf.h); a key given twice
 * takes its last value, as Kafka's Properties do. tc's values point into the
 * request, which outlives the create.
 */
static const char *create_configs_why(const struct dp_core *c, const struct CreateTopicsRequest_CreatableTopic *in,
                                      struct dp_topic_configs *tc)
{
	memset(tc, 0, sizeof(*tc));
	if (in->Configs_n > DP_TOPIC_CREATE_CONFIGS_MAX)
		return create_why_configs_n;
	for (int32_t j = 0; j < in->Configs_n; j++) {
		const struct CreateTopicsRequest_CreateableTopicConfig *cf = &in->Configs[j];
		const char *why = cf->Name.len < 0 ? "null config name"
		                  : dp_topic_configs_set(tc, cf->Name.ptr, (size_t)cf->Name.len,
		                                         cf->Value.len < 0 ? NULL : cf->Value.ptr,
		                                         cf->Value.len < 0 ? 0 : (size_t)cf->Value.len, c->b->cfg.segment_bytes);
		if (why)
			return why;
	}
	return NULL;
}

static int create_topics(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct CreateTopicsRequest req;
	if (CreateTopicsRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	struct CreateTopicsResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!resp)
		return -1;
	r->resp = resp;
	int32_t n = req.Topics_n > 0 ? req.Topics_n : 0;
	resp->Topics = dp_req_alloc(r, sizeof(*resp->Topics) * (size_t)(n ? n : 1));
	if (!resp->Topics)
		return -1;
	resp->Topics_n = n;
	for (int32_t i = 0; i < n; i++)
		resp->Topics[i] = (struct CreateTopicsResponse_CreatableTopicResult){
			.Name = req.Topics[i].Name, .ErrorMessage = { NULL, -1 }, .NumPartitions = -1,
			.ReplicationFactor = -1, .Configs_n = -1 };
	if (create_dups(r, &req, resp) < 0)
		return -1;
	for (int32_t i = 0; i < n; i++) {
		struct CreateTopicsRequest_CreatableTopic *in = &req.Topics[i];
		struct CreateTopicsResponse_CreatableTopicResult *out = &resp->Topics[i];
		bool assigned = in->Assignments_n > 0;
		int32_t np = assigned ? in->Assignments_n
		             : in->NumPartitions == -1 ? c->b->cfg.default_partitions : in->NumPartitions;
		const char *why = NULL;
		struct dp_topic_configs tc;
		if (out->ErrorCode)
			continue;   /* a duplicate */
		struct kstr nulls = dp_null_values_why(r, in->Configs, dp_count(in->Configs_n), sizeof(*in->Configs),
		                                       offsetof(struct CreateTopicsRequest_CreateableTopicConfig, Name),
		                                       offsetof(struct CreateTopicsRequest_CreateableTopicConfig, Value),
		                                       create_why_null);
		if (nulls.len < -1)
			return -1;
		if (in->Name.len < 0 || !dp_topic_name_valid(in->Name.ptr, (size_t)in->Name.len))
			out->ErrorCode = KERR_INVALID_TOPIC_EXCEPTION;
		else if (nulls.len >= 0)   /* Kafka 2.x: INVALID_REQUEST, before the other checks of the entry */
			out->ErrorCode = KERR_INVALID_REQUEST, out->ErrorMessage = nulls;
		else if (assigned && (in->NumPartitions != -1 || in->ReplicationFactor != -1))
			out->ErrorCode = KERR_INVALID_REQUEST, why = create_why_both;
		else if (np < 1 || np > DP_PARTITIONS_MAX)
			out->ErrorCode = KERR_INVALID_PARTITIONS;
		else if (assigned && (why = create_assignment_why(c, in)))
			out->ErrorCode = KERR_INVALID_REPLICA_ASSIGNMENT;
		else if (in->ReplicationFactor != -1 && in->ReplicationFactor != 1)
			out->ErrorCode = KERR_INVALID_REPLICATION_FACTOR;
		else if ((why = create_configs_why(c, in, &tc)))
			out->ErrorCode = KERR_INVALID_CONFIG;
		else if (dp_topic_find(c, in->Name.ptr, (size_t)in->Name.len) >= 0)
			out->ErrorCode = KERR_TOPIC_ALREADY_EXISTS;
		else {   /* the control core checks the broker's limits, for validateOnly too */
			struct dp_topic_configs *keep = in->Configs_n > 0 ? dp_req_alloc(r, sizeof(*keep)) : NULL;
			if (in->Configs_n > 0 && !keep)
				return -1;
			if (keep)
				*keep = tc;
			dp_ask_control(c, r, DP_MSG_CREATE, (uint32_t)i, in->Name, np,
			            req.validateOnly ? DP_F_VALIDATE_ONLY : 0, keep);
		}
		if (why)
			out->ErrorMessage = (struct kstr){ why, (int32_t)strlen(why) };
		if (out->ErrorCode == KERR_NONE) {
			out->NumPartitions = np;
			out->ReplicationFactor = 1;
		}
	}
	return 0;
}

static int delete_topics(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct DeleteTopicsRequest req;
	if (DeleteTopicsRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	struct DeleteTopicsResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!resp)
		return -1;
	r->resp = resp;
	int32_t n = req.TopicNames_n > 0 ? req.TopicNames_n : 0;
	resp->Responses = dp_req_alloc(r, sizeof(*resp->Responses) * (size_t)(n ? n : 1));
	if (!resp->Responses)
		return -1;
	resp->Responses_n = n;
	for (int32_t i = 0; i < n; i++) {
		struct DeleteTopicsResponse_DeletableTopicResult *out = &resp->Responses[i];
		out->Name = req.TopicNames[i];
		out->ErrorMessage = (struct kstr){ NULL, -1 };
		if (out->Name.len < 0 || dp_topic_find(c, out->Name.ptr, (size_t)out->Name.len) < 0)
			out->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		else
			dp_ask_control(c, r, DP_MSG_DELETE, (uint32_t)i, out->Name, 0, 0, NULL);
	}
	return 0;
}

static int name_at_cmp(const void *a, const void *b)
{
	const struct name_at *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->name.len != y->name.len)
		return x->name.len < y->name.len ? -1 : 1;
	int d = x->name.len > 0 ? memcmp(x->name.ptr, y->name.ptr, (size_t)x->name.len) : 0;
	return d ? d : x->idx < y->idx ? -1 : 1;
}

static bool name_at_same(const struct name_at *a, const struct name_at *b)
{
	return a->kind == b->kind && a->name.len == b->name.len &&
	       (a->name.len <= 0 || memcmp(a->name.ptr, b->name.ptr, (size_t)a->name.len) == 0);
}

void names_mark_dups(struct name_at *names, int32_t n, bool *dup)
{
	qsort(names, (size_t)n, sizeof(*names), name_at_cmp);
	for (int32_t i = 0; i < n; i++) {
		bool same_prev = i > 0 && name_at_same(&names[i - 1], &names[i]);
		bool same_next = i + 1 < n && name_at_same(&names[i + 1], &names[i]);
		dup[names[i].idx] = same_prev || same_next;
	}
}

/*
 * CreatePartitions. On one broker an assignment can name only this broker,
 * once per new partition (replication factor 1); Kafka answers any other
 * INVALID_REPLICA_ASSIGNMENT. The count is checked against the topic on the
 * control core, which holds the authoritative count.
 */
static int16_t create_parts_assignment(const struct dp_core *c, const struct CreatePartitionsRequest_CreatePartitionsTopic *in,
                                       int32_t now)
{
	if (in->Assignments_n < 0)
		return KERR_NONE;   /* null: the broker places them */
	if (in->Count <= now)
		return KERR_INVALID_PARTITIONS;   /* Kafka checks the count first */
	if (in->Assignments_n != in->Count - now)
		return KERR_INVALID_REPLICA_ASSIGNMENT;
	for (int32_t j = 0; j < in->Assignments_n; j++) {
		const struct CreatePartitionsRequest_CreatePartitionsAssignment *a = &in->Assignments[j];
		if (a->BrokerIds_n != 1 || a->BrokerIds[0] != c->b->cfg.node_id)
			return KERR_INVALID_REPLICA_ASSIGNMENT;
	}
	return KERR_NONE;
}

static int create_partitions(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct CreatePartitionsRequest req;
	if (CreatePartitionsRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	struct CreatePartitionsResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!resp)
		return -1;
	r->resp = resp;
	int32_t n = req.Topics_n > 0 ? req.Topics_n : 0;
	resp->ThrottleTimeMs = 0;
	resp->Results = dp_req_alloc(r, sizeof(*resp->Results) * (size_t)(n ? n : 1));
	if (!resp->Results)
		return -1;
	resp->Results_n = n;
	/* A name twice in one request: Kafka refuses every entry of it (which count is meant?). */
	struct name_at *names = dp_req_alloc(r, sizeof(*names) * (size_t)(n ? n : 1));
	bool *dup = dp_req_alloc(r, sizeof(*dup) * (size_t)(n ? n : 1));
	if (!names || !dup)
		return -1;
	for (int32_t i = 0; i < n; i++)
		names[i] = (struct name_at){ .name = req.Topics[i].Name, .idx = i };
	names_mark_dups(names, n, dup);
	for (int32_t i = 0; i < n; i++) {
		struct CreatePartitionsRequest_CreatePartitionsTopic *in = &req.Topics[i];
		struct CreatePartitionsResponse_CreatePartitionsTopicResult *out = &resp->Results[i];
		*out = (struct CreatePartitionsResponse_CreatePartitionsTopicResult){
			.Name = in->Name, .ErrorMessage = { NULL, -1 } };
		if (dup[i]) {
			out->ErrorCode = KERR_INVALID_REQUEST;
			continue;
		}
		int32_t id = in->Name.len < 0 ? -1 : dp_topic_find(c, in->Name.ptr, (size_t)in->Name.len);
		if (id < 0)
			out->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		else if ((out->ErrorCode = create_parts_assignment(c, in, c->topics[id].nparts)) == KERR_NONE)
			dp_ask_control(c, r, DP_MSG_CREATE_PARTS, (uint32_t)i, in->Name, in->Count,
			            req.ValidateOnly ? DP_F_VALIDATE_ONLY : 0, NULL);
	}
	return 0;
}

/* DescribeCluster: this broker, which is also the controller (as Metadata says). */
static int describe_cluster(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct DescribeClusterRequest req;
	if (DescribeClusterRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	struct DescribeClusterResponse *resp = dp_req_alloc(r, sizeof(*resp));
	struct DescribeClusterResponse_DescribeClusterBroker *br = dp_req_alloc(r, sizeof(*br));
	if (!resp || !br)
		return -1;
	DescribeClusterResponse_init(resp);
	DescribeClusterResponse_DescribeClusterBroker_init(br);
	const struct dp_config *cfg = &c->b->cfg;
	br->BrokerId = cfg->node_id;
	br->Host = (struct kstr){ cfg->advertised_host, (int32_t)strlen(cfg->advertised_host) };
	br->Port = cfg->advertised_port;
	resp->Brokers = br;
	resp->Brokers_n = 1;
	resp->ClusterId = (struct kstr){ DP_CLUSTER_ID, sizeof(DP_CLUSTER_ID) - 1 };
	resp->ControllerId = cfg->node_id;
	r->resp = resp;
	return 0;
}

/* ---- ACLs -----------------------------------------------------------------------
 * sluice has no authorizer: it answers the ACL APIs as Kafka does with none
 * configured (authorizer.class.name unset; KafkaApis/AclApis), SECURITY_DISABLED
 * with Kafka's own sentences. DescribeAcls sets its top-level error by hand, with
 * "... on the broker"; CreateAcls and DeleteAcls answer every creation and filter
 * with the SecurityDisabledException raised there ("No Authorizer is configured.").
 * Nothing is stored.
 */
#define DP_ACL_DESCRIBE_MSG "No Authorizer is configured on the broker"
#define DP_ACL_ALTER_MSG "No Authorizer is configured."

static int describe_acls(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	(void)c;
	struct DescribeAclsRequest req;
	if (DescribeAclsRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	struct DescribeAclsResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!resp)
		return -1;
	DescribeAclsResponse_init(resp);
	resp->ErrorCode = KERR_SECURITY_DISABLED;
	resp->ErrorMessage = (struct kstr){ DP_ACL_DESCRIBE_MSG, sizeof(DP_ACL_DESCRIBE_MSG) - 1 };
	r->resp = resp;
	return 0;
}

static int create_acls(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	(void)c;
	struct CreateAclsRequest req;
	if (CreateAclsRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	struct CreateAclsResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!resp)
		return -1;
	CreateAclsResponse_init(resp);
	if (!DP_RESP_ARRAY(r, resp, Results, req.Creations_n))
		return -1;
	for (int32_t i = 0; i < resp->Results_n; i++) {
		struct CreateAclsResponse_AclCreationResult *out = &resp->Results[i];
		CreateAclsResponse_AclCreationResult_init(out);
		out->ErrorCode = KERR_SECURITY_DISABLED;
		out->ErrorMessage = (struct kstr){ DP_ACL_ALTER_MSG, sizeof(DP_ACL_ALTER_MSG) - 1 };
	}
	r->resp = resp;
	return 0;
}

static int delete_acls(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	(void)c;
	struct DeleteAclsRequest req;
	if (DeleteAclsRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	struct DeleteAclsResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!resp)
		return -1;
	DeleteAclsResponse_init(resp);
	if (!DP_RESP_ARRAY(r, resp, FilterResults, req.Filters_n))
		return -1;
	for (int32_t i = 0; i < resp->FilterResults_n; i++) {
		struct DeleteAclsResponse_DeleteAclsFilterResult *out = &resp->FilterResults[i];
		DeleteAclsResponse_DeleteAclsFilterResult_init(out);
		out->ErrorCode = KERR_SECURITY_DISABLED;
		out->ErrorMessage = (struct kstr){ DP_ACL_ALTER_MSG, sizeof(DP_ACL_ALTER_MSG) - 1 };
	}
	r->resp = resp;
	return 0;
}

/* ---- InitProducerId ----------------------------------------------------------- */

static int init_producer_id(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct InitProducerIdRequest req;
	struct kreader body = *rd;
	struct InitProducerIdResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!resp || InitProducerIdRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	InitProducerIdResponse_init(resp);
	r->resp = resp;
	if (req.TransactionalId.len >= 0)
		return dp_txn_init_producer(c, r, &body);   /* the transaction coordinator: a call of its own */
	struct dp_msg m = { .type = DP_MSG_INIT_PID, .ctx = r, .gen = r->gen };
	m.u.pid.pid = req.ProducerId;
	m.u.pid.epoch = req.ProducerEpoch;
	r->pending++;
	dp_ask_service(c, DP_SVC_CONTROL, dp_req_complete_part, &m);
	return 0;
}

/* ---- dispatch --------------------------------------------------------------- */

int dp_handle_request(struct dp_core *c, struct dp_req *r)
{
	struct kreader rd;
	kr_init(&rd, r->frame, r->frame_len);
	if (kreq_header_decode(&rd, &r->hdr) < 0) {
		DP_WARN_RL("connection %u: malformed request header; closing", r->conn->handle);
		return -1;
	}
	const struct dp_api *api = api_find(r->hdr.api_key);
	bool supported = api && r->hdr.api_version >= api->min && r->hdr.api_version <= api->max;
	if (r->hdr.api_key == KAPI_API_VERSIONS)
		return api_versions(c, r, &rd, supported) < 0 ? -1 : 0;
	if (!supported) {
		DP_WARN_RL("connection %u: unsupported api %d version %d; closing", r->conn->handle,
		        r->hdr.api_key, r->hdr.api_version);
		return -1;
	}
	int rc;
	switch (r->hdr.api_key) {
	case KAPI_PRODUCE: rc = dp_produce_start(c, r, &rd); break;
	case KAPI_FETCH: rc = dp_fetch_start(c, r, &rd); break;
	case KAPI_LIST_OFFSETS: rc = dp_list_offsets_start(c, r, &rd); break;
	case KAPI_DELETE_RECORDS: rc = dp_delete_records_start(c, r, &rd); break;
	case KAPI_METADATA: rc = metadata(c, r, &rd); break;
	case KAPI_FIND_COORDINATOR: rc = find_coordinator(c, r, &rd); break;
	case KAPI_OFFSET_COMMIT: case KAPI_OFFSET_FETCH: case KAPI_JOIN_GROUP: case KAPI_HEARTBEAT:
	case KAPI_LEAVE_GROUP: case KAPI_SYNC_GROUP: case KAPI_DESCRIBE_GROUPS: case KAPI_LIST_GROUPS:
	case KAPI_TXN_OFFSET_COMMIT: case KAPI_DELETE_GROUPS: case KAPI_OFFSET_DELETE:
		rc = dp_group_handle(c, r, &rd);
		break;
	case KAPI_CREATE_TOPICS: rc = create_topics(c, r, &rd); break;
	case KAPI_DELETE_TOPICS: rc = delete_topics(c, r, &rd); break;
	case KAPI_CREATE_PARTITIONS: rc = create_partitions(c, r, &rd); break;
	case KAPI_DESCRIBE_CLUSTER: rc = describe_cluster(c, r, &rd); break;
	case KAPI_DESCRIBE_ACLS: rc = describe_acls(c, r, &rd); break;
	case KAPI_CREATE_ACLS: rc = create_acls(c, r, &rd); break;
	case KAPI_DELETE_ACLS: rc = delete_acls(c, r, &rd); break;
	case KAPI_DESCRIBE_CONFIGS: rc = dp_describe_configs(c, r, &rd); break;
	case KAPI_ALTER_CONFIGS: rc = dp_alter_configs(c, r, &rd); break;
	case KAPI_INCREMENTAL_ALTER_CONFIGS: rc = dp_incremental_alter_configs(c, r, &rd); break;
	case KAPI_INIT_PRODUCER_ID: rc = init_producer_id(c, r, &rd); break;
	case KAPI_ADD_PARTITIONS_TO_TXN: case KAPI_ADD_OFFSETS_TO_TXN: case KAPI_END_TXN:
	case KAPI_WRITE_TXN_MARKERS: case KAPI_DESCRIBE_PRODUCERS: case KAPI_DESCRIBE_TRANSACTIONS:
	case KAPI_LIST_TRANSACTIONS:
		rc = dp_txn_handle(c, r, &rd);
		break;
	default: rc = -1; break;
	}
	if (rc < 0)
		DP_WARN_RL("connection %u: malformed %s v%d request; closing", r->conn->handle,
		        kapi_info(r->hdr.api_key) ? kapi_info(r->hdr.api_key)->name : "?", r->hdr.api_version);
	return rc;
}

void dp_handle_part(struct dp_core *c, struct dp_req *r, struct dp_msg *m)
{
	switch (m->type) {
	case DP_MSG_PRODUCE_DONE:
		dp_produce_part(c, r, m);
		return;
	case DP_MSG_FETCH_DONE:
		dp_fetch_part(c, r, m);
		return;
	case DP_MSG_LIST_DONE:
		dp_list_offsets_part(c, r, m);
		return;
	case DP_MSG_DELREC_DONE:
		dp_delete_records_part(c, r, m);
		return;
	case DP_MSG_CREATE_DONE:
		if (r->hdr.api_key == KAPI_METADATA) {
			/* Someone else created it first: just as good. */
			((struct md_topic *)r->slots)[m->idx].err =
				m->err == KERR_TOPIC_ALREADY_EXISTS ? KERR_NONE : m->err;
		} else {
			struct CreateTopicsResponse *resp = r->resp;
			resp->Topics[m->idx].ErrorCode = m->err;
			if (m->u.topic.name)   /* the control core's static reason */
				resp->Topics[m->idx].ErrorMessage =
					(struct kstr){ m->u.topic.name, (int32_t)m->u.topic.name_len };
			if (m->err) {
				resp->Topics[m->idx].NumPartitions = -1;
				resp->Topics[m->idx].ReplicationFactor = -1;
			}
		}
		return;
	case DP_MSG_TXN_DONE:
	case DP_MSG_GROUP_DONE:
		dp_call_done(c, r, m);   /* the coordinator answered in the call */
		return;
	case DP_MSG_TXN_MARKER_DONE:
	case DP_MSG_DESCRIBE_PRODUCERS_DONE:
		dp_txn_part(c, r, m);
		return;
	case DP_MSG_INIT_PID_DONE: {
		struct InitProducerIdResponse *resp = r->resp;
		resp->ErrorCode = m->err;
		resp->ProducerId = m->err ? -1 : m->u.pid.pid;
		resp->ProducerEpoch = m->err ? -1 : m->u.pid.epoch;
		return;
	}
	case DP_MSG_DELETE_DONE: {
		struct DeleteTopicsResponse *resp = r->resp;
		resp->Responses[m->idx].ErrorCode = m->err;
		return;
	}
	case DP_MSG_ALTER_CONF_DONE:
		dp_alter_configs_part(r, m);
		return;
	case DP_MSG_CREATE_PARTS_DONE: {
		struct CreatePartitionsResponse *resp = r->resp;
		resp->Results[m->idx].ErrorCode = m->err;
		if (m->u.topic.name)   /* the control core's static reason */
			resp->Results[m->idx].ErrorMessage = (struct kstr){ m->u.topic.name, (int32_t)m->u.topic.name_len };
		return;
	}
	default:
		assert(!"unexpected reply type");
	}
}

bool dp_handle_more(struct dp_core *c, struct dp_req *r)
{
	if (r->hdr.api_key == KAPI_FETCH && r->resp)
		return dp_fetch_more(c, r);
	return false;
}

void dp_req_release(struct dp_core *c, struct dp_req *r)
{
	if (r->hdr.api_key == KAPI_FETCH)
		dp_fetch_release(c, r);
	if (r->slots_mem) {
		dp_buf_put(r->slots_mem);
		r->slots_mem = NULL;
	}
	if (r->call) {   /* after its answer is encoded, or dropped */
		dp_req_buf_put(c, r, r->call, r->call_bytes);
		r->call = NULL;
	}
}

#define ENCODE_CASE(key, Msg)                                                        \
	case key:                                                                    \
		body = Msg##_size(v, r->resp);                                       \
		break;
#define ENCODE_CASE2(key, Msg)                                                       \
	case key:                                                                    \
		rc = Msg##_encode(&w, v, r->resp);                                   \
		break;

int dp_encode_response(struct dp_core *c, struct dp_req *r)
{
	int16_t key = r->hdr.api_key, v = r->hdr.api_version;
	if (key == KAPI_METADATA && metadata_build(c, r) < 0)
		return -ENOMEM;
	if (!r->resp)
		return -EINVAL;
	size_t body = 0;
	switch (key) {
	ENCODE_CASE(KAPI_PRODUCE, ProduceResponse)
	ENCODE_CASE(KAPI_FETCH, FetchResponse)
	ENCODE_CASE(KAPI_LIST_OFFSETS, ListOffsetsResponse)
	ENCODE_CASE(KAPI_DELETE_RECORDS, DeleteRecordsResponse)
	ENCODE_CASE(KAPI_METADATA, MetadataResponse)
	ENCODE_CASE(KAPI_OFFSET_COMMIT, OffsetCommitResponse)
	ENCODE_CASE(KAPI_OFFSET_FETCH, OffsetFetchResponse)
	ENCODE_CASE(KAPI_JOIN_GROUP, JoinGroupResponse)
	ENCODE_CASE(KAPI_HEARTBEAT, HeartbeatResponse)
	ENCODE_CASE(KAPI_LEAVE_GROUP, LeaveGroupResponse)
	ENCODE_CASE(KAPI_SYNC_GROUP, SyncGroupResponse)
	ENCODE_CASE(KAPI_DESCRIBE_GROUPS, DescribeGroupsResponse)
	ENCODE_CASE(KAPI_LIST_GROUPS, ListGroupsResponse)
	ENCODE_CASE(KAPI_DELETE_GROUPS, DeleteGroupsResponse)
	ENCODE_CASE(KAPI_OFFSET_DELETE, OffsetDeleteResponse)
	ENCODE_CASE(KAPI_TXN_OFFSET_COMMIT, TxnOffsetCommitResponse)
	ENCODE_CASE(KAPI_FIND_COORDINATOR, FindCoordinatorResponse)
	ENCODE_CASE(KAPI_API_VERSIONS, ApiVersionsResponse)
	ENCODE_CASE(KAPI_CREATE_TOPICS, CreateTopicsResponse)
	ENCODE_CASE(KAPI_DELETE_TOPICS, DeleteTopicsResponse)
	ENCODE_CASE(KAPI_CREATE_PARTITIONS, CreatePartitionsResponse)
	ENCODE_CASE(KAPI_DESCRIBE_CLUSTER, DescribeClusterResponse)
	ENCODE_CASE(KAPI_DESCRIBE_ACLS, DescribeAclsResponse)
	ENCODE_CASE(KAPI_CREATE_ACLS, CreateAclsResponse)
	ENCODE_CASE(KAPI_DELETE_ACLS, DeleteAclsResponse)
	ENCODE_CASE(KAPI_DESCRIBE_CONFIGS, DescribeConfigsResponse)
	ENCODE_CASE(KAPI_ALTER_CONFIGS, AlterConfigsResponse)
	ENCODE_CASE(KAPI_INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsResponse)
	ENCODE_CASE(KAPI_INIT_PRODUCER_ID, InitProducerIdResponse)
	ENCODE_CASE(KAPI_ADD_PARTITIONS_TO_TXN, AddPartitionsToTxnResponse)
	ENCODE_CASE(KAPI_ADD_OFFSETS_TO_TXN, AddOffsetsToTxnResponse)
	ENCODE_CASE(KAPI_END_TXN, EndTxnResponse)
	ENCODE_CASE(KAPI_WRITE_TXN_MARKERS, WriteTxnMarkersResponse)
	ENCODE_CASE(KAPI_DESCRIBE_PRODUCERS, DescribeProducersResponse)
	ENCODE_CASE(KAPI_DESCRIBE_TRANSACTIONS, DescribeTransactionsResponse)
	ENCODE_CASE(KAPI_LIST_TRANSACTIONS, ListTransactionsResponse)
	default: return -EINVAL;
	}
	bool flex_hdr = key != KAPI_API_VERSIONS && kapi_flexible(key, v);
	size_t total = 4 + 4 + (flex_hdr ? 1 : 0) + body;
	/* A Fetch's size follows its records (at most MaxBytes, and a first batch): no abort for it. */
	if (!(r->resp_buf = dp_buf_try_get(total))) {
		DP_WARN("no buffer of %zu bytes for the response to api %d v%d", total, key, v);
		return -ENOMEM;
	}
	struct kwriter w;
	kw_init(&w, r->resp_buf, total);
	kw_i32(&w, (int32_t)(total - 4));
	kresp_header_encode(&w, key, v, r->hdr.correlation_id);
	int rc = -EINVAL;
	switch (key) {
	ENCODE_CASE2(KAPI_PRODUCE, ProduceResponse)
	ENCODE_CASE2(KAPI_FETCH, FetchResponse)
	ENCODE_CASE2(KAPI_LIST_OFFSETS, ListOffsetsResponse)
	ENCODE_CASE2(KAPI_DELETE_RECORDS, DeleteRecordsResponse)
	ENCODE_CASE2(KAPI_METADATA, MetadataResponse)
	ENCODE_CASE2(KAPI_OFFSET_COMMIT, OffsetCommitResponse)
	ENCODE_CASE2(KAPI_OFFSET_FETCH, OffsetFetchResponse)
	ENCODE_CASE2(KAPI_JOIN_GROUP, JoinGroupResponse)
	ENCODE_CASE2(KAPI_HEARTBEAT, HeartbeatResponse)
	ENCODE_CASE2(KAPI_LEAVE_GROUP, LeaveGroupResponse)
	ENCODE_CASE2(KAPI_SYNC_GROUP, SyncGroupResponse)
	ENCODE_CASE2(KAPI_DESCRIBE_GROUPS, DescribeGroupsResponse)
	ENCODE_CASE2(KAPI_LIST_GROUPS, ListGroupsResponse)
	ENCODE_CASE2(KAPI_DELETE_GROUPS, DeleteGroupsResponse)
	ENCODE_CASE2(KAPI_OFFSET_DELETE, OffsetDeleteResponse)
	ENCODE_CASE2(KAPI_TXN_OFFSET_COMMIT, TxnOffsetCommitResponse)
	ENCODE_CASE2(KAPI_FIND_COORDINATOR, FindCoordinatorResponse)
	ENCODE_CASE2(KAPI_API_VERSIONS, ApiVersionsResponse)
	ENCODE_CASE2(KAPI_CREATE_TOPICS, CreateTopicsResponse)
	ENCODE_CASE2(KAPI_DELETE_TOPICS, DeleteTopicsResponse)
	ENCODE_CASE2(KAPI_CREATE_PARTITIONS, CreatePartitionsResponse)
	ENCODE_CASE2(KAPI_DESCRIBE_CLUSTER, DescribeClusterResponse)
	ENCODE_CASE2(KAPI_DESCRIBE_ACLS, DescribeAclsResponse)
	ENCODE_CASE2(KAPI_CREATE_ACLS, CreateAclsResponse)
	ENCODE_CASE2(KAPI_DELETE_ACLS, DeleteAclsResponse)
	ENCODE_CASE2(KAPI_DESCRIBE_CONFIGS, DescribeConfigsResponse)
	ENCODE_CASE2(KAPI_ALTER_CONFIGS, AlterConfigsResponse)
	ENCODE_CASE2(KAPI_INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsResponse)
	ENCODE_CASE2(KAPI_INIT_PRODUCER_ID, InitProducerIdResponse)
	ENCODE_CASE2(KAPI_ADD_PARTITIONS_TO_TXN, AddPartitionsToTxnResponse)
	ENCODE_CASE2(KAPI_ADD_OFFSETS_TO_TXN, AddOffsetsToTxnResponse)
	ENCODE_CASE2(KAPI_END_TXN, EndTxnResponse)
	ENCODE_CASE2(KAPI_WRITE_TXN_MARKERS, WriteTxnMarkersResponse)
	ENCODE_CASE2(KAPI_DESCRIBE_PRODUCERS, DescribeProducersResponse)
	ENCODE_CASE2(KAPI_DESCRIBE_TRANSACTIONS, DescribeTransactionsResponse)
	ENCODE_CASE2(KAPI_LIST_TRANSACTIONS, ListTransactionsResponse)
	}
	if (rc < 0 || w.err || (size_t)(w.p - w.start) != total) {
		DP_ERR_RL("encoding api %d v%d: rc %d err %d wrote %zu of %zu", key, v, rc, w.err,
		       (size_t)(w.p - w.start), total);
		dp_buf_put(r->resp_buf);
		r->resp_buf = NULL;
		return rc < 0 ? rc : -EINVAL;
	}
	r->resp_len = (uint32_t)total;
	return 0;
}
