/*
 * sb_setup.c: sluice-bench's start-up, done with blocking request/answer pairs
 * (sb_call) and the generic codec: ApiVersions, CreateTopics, Metadata, the
 * producer and consumer connections, FindCoordinator and InitProducerId per
 * producer, ListOffsets for the e2e consumer.
 *
 * The topic's partitions must all be led by one broker (a single node, or a
 * cluster where one broker leads this topic): every data connection goes to
 * that leader, as Metadata names it, which need not be the bootstrap address.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sb.h"

static const struct { int16_t code; const char *name; } sb_err_names[] = {
	{ -1, "UNKNOWN_SERVER_ERROR" }, { 0, "NONE" }, { 1, "OFFSET_OUT_OF_RANGE" }, { 2, "CORRUPT_MESSAGE" },
	{ 3, "UNKNOWN_TOPIC_OR_PARTITION" }, { 5, "LEADER_NOT_AVAILABLE" }, { 6, "NOT_LEADER_OR_FOLLOWER" },
	{ 7, "REQUEST_TIMED_OUT" }, { 10, "MESSAGE_TOO_LARGE" }, { 13, "NETWORK_EXCEPTION" },
	{ 14, "COORDINATOR_LOAD_IN_PROGRESS" }, { 15, "COORDINATOR_NOT_AVAILABLE" }, { 16, "NOT_COORDINATOR" },
	{ 17, "INVALID_TOPIC_EXCEPTION" }, { 19, "NOT_ENOUGH_REPLICAS" }, { 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND" },
	{ 21, "INVALID_REQUIRED_ACKS" }, { 29, "TOPIC_AUTHORIZATION_FAILED" }, { 35, "UNSUPPORTED_VERSION" },
	{ 36, "TOPIC_ALREADY_EXISTS" }, { 37, "INVALID_PARTITIONS" }, { 38, "INVALID_REPLICATION_FACTOR" },
	{ 41, "NOT_CONTROLLER" }, { 42, "INVALID_REQUEST" }, { 45, "OUT_OF_ORDER_SEQUENCE_NUMBER" },
	{ 46, "DUPLICATE_SEQUENCE_NUMBER" }, { 47, "INVALID_PRODUCER_EPOCH" }, { 48, "INVALID_TXN_STATE" },
	{ 49, "INVALID_PRODUCER_ID_MAPPING" }, { 50, "INVALID_TRANSACTION_TIMEOUT" }, { 51, "CONCURRENT_TRANSACTIONS" },
	{ 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" }, { 55, "OPERATION_NOT_ATTEMPTED" }, { 56, "KAFKA_STORAGE_ERROR" },
	{ 59, "UNKNOWN_PRODUCER_ID" }, { 87, "INVALID_RECORD" }, { 90, "PRODUCER_FENCED" },
};

const char *sb_err_name(int16_t code)
{
	for (size_t i = 0; i < sizeof sb_err_names / sizeof sb_err_names[0]; i++)
		if (sb_err_names[i].code == code)
			return sb_err_names[i].name;
	return "?";
}

static void sb_sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static struct kstr sb_kstr(const char *s)
{
	return (struct kstr){ s, (int32_t)strlen(s) };
}

/* The broker must offer every version this run sends; say which one it lacks. */
static int sb_check_versions(struct sb_run *r)
{
	const struct sb_opts *o = r->o;
	bool prod = o->workload != SB_WL_CONSUME, cons = o->workload != SB_WL_PRODUCE;
	const struct { int16_t key, ver; bool used; const char *name; } need[] = {
		{ KAPI_METADATA, SB_V_METADATA, true, "Metadata" },
		{ KAPI_CREATE_TOPICS, SB_V_CREATE_TOPICS, o->create, "CreateTopics" },
		{ KAPI_PRODUCE, SB_V_PRODUCE, prod, "Produce" },
		{ KAPI_FETCH, SB_V_FETCH, cons, "Fetch" },
		{ KAPI_LIST_OFFSETS, SB_V_LIST_OFFSETS, o->workload == SB_WL_E2E, "ListOffsets" },
		{ KAPI_INIT_PRODUCER_ID, SB_V_INIT_PRODUCER_ID, prod && o->mode != SB_MODE_PLAIN, "InitProducerId" },
		{ KAPI_FIND_COORDINATOR, SB_V_FIND_COORDINATOR, prod && o->mode == SB_MODE_TRANSACTIONAL, "FindCoordinator" },
		{ KAPI_ADD_PARTITIONS_TO_TXN, SB_V_ADD_PARTITIONS, prod && o->mode == SB_MODE_TRANSACTIONAL, "AddPartitionsToTxn" },
		{ KAPI_END_TXN, SB_V_END_TXN, prod && o->mode == SB_MODE_TRANSACTIONAL, "EndTxn" },
	};
	struct ApiVersionsRequest req;
	struct ApiVersionsResponse resp;
	ApiVersionsRequest_init(&req);
	int rc = sb_call(r, r->boot, KAPI_API_VERSIONS, SB_V_API_VERSIONS, &kschema_ApiVersionsRequest, &req,
			 &kschema_ApiVersionsResponse, &resp);
	if (rc)
		return rc;
	if (resp.ErrorCode) {
		fprintf(stderr, "sluice-bench: ApiVersions: error %d (%s)\n", resp.ErrorCode, sb_err_name(resp.ErrorCode));
		return -EPROTO;
	}
	for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
		if (!need[i].used)
			continue;
		bool ok = false;
		for (int32_t k = 0; k < resp.ApiKeys_n && !ok; k++)
			ok = resp.ApiKeys[k].ApiKey == need[i].key && resp.ApiKeys[k].MinVersion <= need[i].ver &&
			     need[i].ver <= resp.ApiKeys[k].MaxVersion;
		if (!ok) {
			fprintf(stderr, "sluice-bench: the broker does not offer %s v%d, which this run needs\n", need[i].name,
				need[i].ver);
			return -EPROTONOSUPPORT;
		}
	}
	return 0;
}

static int sb_create_topic(struct sb_run *r)
{
	const struct sb_opts *o = r->o;
	struct CreateTopicsRequest req;
	struct CreateTopicsRequest_CreatableTopic t;
	struct CreateTopicsResponse resp;
	CreateTopicsRequest_init(&req);
	CreateTopicsRequest_CreatableTopic_init(&t);
	t.Name = sb_kstr(o->topic);
	t.NumPartitions = o->partitions;
	t.ReplicationFactor = (int16_t)o->replication;
	t.Assignments_n = 0;
	t.Configs_n = 0;
	req.Topics_n = 1;
	req.Topics = &t;
	req.timeoutMs = sb_io_timeout_ms / 2;
	int rc = sb_call(r, r->boot, KAPI_CREATE_TOPICS, SB_V_CREATE_TOPICS, &kschema_CreateTopicsRequest, &req,
			 &kschema_CreateTopicsResponse, &resp);
	if (rc)
		return rc;
	if (resp.Topics_n != 1 || !sb_kstr_eq(resp.Topics[0].Name, o->topic, strlen(o->topic))) {
		fprintf(stderr, "sluice-bench: CreateTopics answered for %d topics, not for %s\n", resp.Topics_n, o->topic);
		return -EPROTO;
	}
	int16_t ec = resp.Topics[0].ErrorCode;
	if (ec == KERR_TOPIC_ALREADY_EXISTS) {
		fprintf(stderr, "# topic %s already exists\n", o->topic);
	} else if (ec) {
		struct kstr m = resp.Topics[0].ErrorMessage;
		fprintf(stderr, "sluice-bench: CreateTopics %s: error %d (%s)%s%.*s\n", o->topic, ec, sb_err_name(ec),
			m.len > 0 ? ": " : "", m.len > 0 ? m.len : 0, m.ptr);
		return -EPROTO;
	} else {
		fprintf(stderr, "# created topic %s with %d partitions\n", o->topic, o->partitions);
	}
	return 0;
}

/*
 * Metadata until every partition has a leader (a topic just created may need
 * a moment). Sets r->nparts and the leader's address. Fails at once for an
 * unknown topic unless --create asked for it.
 */
static int sb_wait_topic(struct sb_run *r)
{
	const struct sb_opts *o = r->o;
	uint64_t deadline = sb_now_ns() + (uint64_t)sb_setup_wait_ms * 1000000u;
	char why[160] = "no answer";
	for (;;) {
		struct MetadataRequest req;
		struct MetadataRequest_MetadataRequestTopic t;
		struct MetadataResponse resp;
		MetadataRequest_init(&req);
		MetadataRequest_MetadataRequestTopic_init(&t);
		t.Name = sb_kstr(o->topic);
		req.Topics_n = 1;
		req.Topics = &t;
		req.AllowAutoTopicCreation = false;
		int rc = sb_call(r, r->boot, KAPI_METADATA, SB_V_METADATA, &kschema_MetadataRequest, &req,
				 &kschema_MetadataResponse, &resp);
		if (rc)
			return rc;
		const struct MetadataResponse_MetadataResponseTopic *mt = NULL;
		for (int32_t i = 0; i < resp.Topics_n; i++)
			if (sb_kstr_eq(resp.Topics[i].Name, o->topic, strlen(o->topic)))
				mt = &resp.Topics[i];
		int32_t leader = -1;
		bool ready = false;
		if (!mt) {
			snprintf(why, sizeof why, "topic missing from Metadata");
		} else if (mt->ErrorCode == KERR_UNKNOWN_TOPIC_OR_PARTITION && !o->create) {
			fprintf(stderr, "sluice-bench: topic %s does not exist (pass --create to create it)\n", o->topic);
			return -ENOENT;
		} else if (mt->ErrorCode) {
			snprintf(why, sizeof why, "topic error %d (%s)", mt->ErrorCode, sb_err_name(mt->ErrorCode));
		} else if (mt->Partitions_n <= 0 || mt->Partitions_n > sb_partitions_max) {
			snprintf(why, sizeof why, "%d partitions (1..%d supported)", mt->Partitions_n, sb_partitions_max);
		} else {
			ready = true;
			for (int32_t i = 0; i < mt->Partitions_n && ready; i++) {
				const struct MetadataResponse_MetadataResponsePartition *mp = &mt->Partitions[i];
				if (mp->ErrorCode || mp->LeaderId < 0 || mp->PartitionIndex < 0 ||
				    mp->PartitionIndex >= mt->Partitions_n) {
					snprintf(why, sizeof why, "partition %d: error %d, leader %d", mp->PartitionIndex,
						 mp->ErrorCode, mp->LeaderId);
					ready = false;
				} else if (leader >= 0 && mp->LeaderId != leader) {
					fprintf(stderr, "sluice-bench: the partitions of %s have different leaders (%d, %d); "
						"sluice-bench sends to one broker only\n", o->topic, leader, mp->LeaderId);
					return -ENOTSUP;
				}
				leader = mp->LeaderId;
			}
		}
		if (ready) {
			for (int32_t i = 0; i < resp.Brokers_n; i++) {
				const struct MetadataResponse_MetadataResponseBroker *b = &resp.Brokers[i];
				if (b->NodeId != leader)
					continue;
				if (b->Host.len <= 0 || b->Host.len >= (int32_t)sizeof r->leader_host) {
					fprintf(stderr, "sluice-bench: Metadata: leader %d has a bad host\n", leader);
					return -EPROTO;
				}
				memcpy(r->leader_host, b->Host.ptr, (size_t)b->Host.len);
				r->leader_host[b->Host.len] = '\0';
				r->leader_port = b->Port;
				r->nparts = mt->Partitions_n;
				if (o->create && r->nparts != o->partitions)
					fprintf(stderr, "sluice-bench: warning: topic %s has %d partitions, not %d; using %d\n",
						o->topic, r->nparts, o->partitions, r->nparts);
				return 0;
			}
			snprintf(why, sizeof why, "leader %d is not among the brokers", leader);
		}
		if (sb_now_ns() >= deadline) {
			fprintf(stderr, "sluice-bench: topic %s not ready after %d ms: %s\n", o->topic, sb_setup_wait_ms, why);
			return -ETIMEDOUT;
		}
		sb_sleep_ms(sb_setup_retry_ms);
	}
}

static bool sb_coord_retriable(int16_t ec)
{
	return ec == KERR_CONCURRENT_TRANSACTIONS || ec == KERR_COORDINATOR_LOAD_IN_PROGRESS ||
	       ec == KERR_COORDINATOR_NOT_AVAILABLE || ec == KERR_NOT_COORDINATOR;
}

/* FindCoordinator(transaction) for p->txn_id: the coordinator's address. */
static int sb_find_coordinator(struct sb_run *r, struct sb_prod *p, char *host, size_t cap, int *port)
{
	uint64_t deadline = sb_now_ns() + (uint64_t)sb_setup_wait_ms * 1000000u;
	for (;;) {
		struct FindCoordinatorRequest req;
		struct FindCoordinatorResponse resp;
		FindCoordinatorRequest_init(&req);
		req.Key = sb_kstr(p->txn_id);
		req.KeyType = 1;
		req.CoordinatorKeys_n = 0;
		int rc = sb_call(r, r->boot, KAPI_FIND_COORDINATOR, SB_V_FIND_COORDINATOR, &kschema_FindCoordinatorRequest,
				 &req, &kschema_FindCoordinatorResponse, &resp);
		if (rc)
			return rc;
		if (resp.ErrorCode == KERR_NONE) {
			if (resp.Host.len <= 0 || (size_t)resp.Host.len >= cap || resp.Port <= 0) {
				fprintf(stderr, "sluice-bench: FindCoordinator: bad address\n");
				return -EPROTO;
			}
			memcpy(host, resp.Host.ptr, (size_t)resp.Host.len);
			host[resp.Host.len] = '\0';
			*port = resp.Port;
			return 0;
		}
		if (!sb_coord_retriable(resp.ErrorCode) || sb_now_ns() >= deadline) {
			fprintf(stderr, "sluice-bench: FindCoordinator %s: error %d (%s)\n", p->txn_id, resp.ErrorCode,
				sb_err_name(resp.ErrorCode));
			return -EPROTO;
		}
		sb_sleep_ms(sb_setup_retry_ms);
	}
}

/* InitProducerId: a new producer id (idempotent) or the transactional id's, epoch bumped. */
static int sb_init_producer_id(struct sb_run *r, struct sb_prod *p)
{
	bool txn = r->o->mode == SB_MODE_TRANSACTIONAL;
	struct sb_conn *c = txn ? p->coord : p->conn;
	uint64_t deadline = sb_now_ns() + (uint64_t)sb_setup_wait_ms * 1000000u;
	for (;;) {
		struct InitProducerIdRequest req;
		struct InitProducerIdResponse resp;
		InitProducerIdRequest_init(&req);
		req.TransactionalId = txn ? sb_kstr(p->txn_id) : (struct kstr){ NULL, -1 };
		req.TransactionTimeoutMs = sb_txn_timeout_ms;
		int rc = sb_call(r, c, KAPI_INIT_PRODUCER_ID, SB_V_INIT_PRODUCER_ID, &kschema_InitProducerIdRequest, &req,
				 &kschema_InitProducerIdResponse, &resp);
		if (rc)
			return rc;
		if (resp.ErrorCode == KERR_NONE && resp.ProducerId >= 0 && resp.ProducerEpoch >= 0) {
			p->pid = resp.ProducerId;
			p->epoch = resp.ProducerEpoch;
			return 0;
		}
		/* CONCURRENT_TRANSACTIONS: a previous run with this id left a transaction open,
		 * which the coordinator is now aborting. */
		if (!sb_coord_retriable(resp.ErrorCode) || sb_now_ns() >= deadline) {
			fprintf(stderr, "sluice-bench: InitProducerId%s%s: error %d (%s), producer id %lld\n",
				txn ? " " : "", txn ? p->txn_id : "", resp.ErrorCode, sb_err_name(resp.ErrorCode),
				(long long)resp.ProducerId);
			return -EPROTO;
		}
		sb_sleep_ms(sb_setup_retry_ms);
	}
}

static struct sb_conn *sb_new_conn(struct sb_run *r, const char *host, int port, size_t scap, size_t rcap,
				   uint32_t qcap, int *rc)
{
	assert(r->nconns < (int)(sizeof r->conns / sizeof r->conns[0]));
	struct sb_conn *c = calloc(1, sizeof *c);
	if (!c) {
		*rc = -ENOMEM;
		return NULL;
	}
	r->conns[r->nconns] = c;
	*rc = sb_conn_open(c, r->nconns, host, port, scap, rcap, qcap, r->epfd);
	r->nconns++;
	return *rc ? NULL : c;
}

/* Partitions of connection i out of n: i, i + n, ... (one shared partition when n > partitions). */
static int sb_parts_of(int i, int n, int nparts, int32_t *out)
{
	int k = 0;
	if (n > nparts) {
		out[k++] = i % nparts;
		return k;
	}
	for (int p = i; p < nparts; p += n)
		out[k++] = p;
	return k;
}

static int sb_setup_producers(struct sb_run *r)
{
	const struct sb_opts *o = r->o;
	int rc = sb_tpl_init(r);
	if (rc)
		return rc;
	size_t req_max = 64 + strlen(r->client_id) + 256 + strlen(o->topic) + r->tpl.rec_end[r->tpl.n];
	size_t scap = (size_t)(o->inflight + 1) * req_max + sb_ctl_bytes;
	uint32_t qcap = (uint32_t)(o->inflight + sb_ctl_inflight_max);
	int32_t *parts = calloc((size_t)r->nparts, sizeof *parts);
	r->nprods = o->connections;
	r->prods = calloc((size_t)r->nprods, sizeof *r->prods);
	if (!parts || !r->prods)
		return -ENOMEM;
	for (int i = 0; i < r->nprods && !rc; i++) {
		struct sb_prod *p = &r->prods[i];
		*p = (struct sb_prod){ .run = r, .idx = i, .pid = -1, .epoch = -1 };
		p->nslots = sb_parts_of(i, r->nprods, r->nparts, parts);
		p->slots = calloc((size_t)p->nslots, sizeof *p->slots);
		if (!p->slots)
			return -ENOMEM;
		for (int s = 0; s < p->nslots; s++) {
			p->slots[s].partition = parts[s];
			p->slots[s].resend = calloc((size_t)o->inflight, sizeof(struct sb_batch));
			if (!p->slots[s].resend)
				return -ENOMEM;
		}
		p->conn = sb_new_conn(r, r->leader_host, r->leader_port, scap, sb_ctl_resp_bytes, qcap, &rc);
		if (!p->conn)
			break;
		p->coord = p->conn;
		if (o->mode == SB_MODE_TRANSACTIONAL) {
			char host[sb_host_bytes_max];
			int port = 0;
			snprintf(p->txn_id, sizeof p->txn_id, "%s-%d", o->txn_prefix, i);
			if ((rc = sb_find_coordinator(r, p, host, sizeof host, &port)))
				break;
			if (strcmp(host, r->leader_host) || port != r->leader_port)
				p->coord = sb_new_conn(r, host, port, sb_ctl_bytes, sb_ctl_resp_bytes, sb_ctl_inflight_max, &rc);
			if (!p->coord)
				break;
		}
		if (o->mode != SB_MODE_PLAIN)
			rc = sb_init_producer_id(r, p);
	}
	free(parts);
	if (!rc && o->mode != SB_MODE_PLAIN)
		fprintf(stderr, "# %d producer%s, producer ids %lld..%lld%s%s\n", r->nprods, r->nprods > 1 ? "s" : "",
			(long long)r->prods[0].pid, (long long)r->prods[r->nprods - 1].pid,
			o->mode == SB_MODE_TRANSACTIONAL ? ", transactional ids " : "",
			o->mode == SB_MODE_TRANSACTIONAL ? o->txn_prefix : "");
	return rc;
}

/* e2e: every partition starts at its end (the LSO for read_committed), so only this run's records are read. */
static int sb_latest_offsets(struct sb_run *r)
{
	const struct sb_opts *o = r->o;
	struct ListOffsetsRequest req;
	struct ListOffsetsRequest_ListOffsetsTopic t;
	struct ListOffsetsRequest_ListOffsetsPartition *lp = calloc((size_t)r->nparts, sizeof *lp);
	if (!lp)
		return -ENOMEM;
	ListOffsetsRequest_init(&req);
	ListOffsetsRequest_ListOffsetsTopic_init(&t);
	for (int32_t i = 0; i < r->nparts; i++) {
		ListOffsetsRequest_ListOffsetsPartition_init(&lp[i]);
		lp[i].PartitionIndex = i;
		lp[i].Timestamp = -1; /* latest */
	}
	t.Name = sb_kstr(o->topic);
	t.Partitions_n = r->nparts;
	t.Partitions = lp;
	req.ReplicaId = -1;
	req.IsolationLevel = o->isolation;
	req.Topics_n = 1;
	req.Topics = &t;
	struct ListOffsetsResponse resp;
	int rc = sb_call(r, r->boot, KAPI_LIST_OFFSETS, SB_V_LIST_OFFSETS, &kschema_ListOffsetsRequest, &req,
			 &kschema_ListOffsetsResponse, &resp);
	free(lp);
	if (rc)
		return rc;
	int32_t found = 0;
	for (int32_t ti = 0; ti < resp.Topics_n; ti++) {
		for (int32_t k = 0; k < resp.Topics[ti].Partitions_n; k++) {
			const struct ListOffsetsResponse_ListOffsetsPartitionResponse *pr = &resp.Topics[ti].Partitions[k];
			if (pr->ErrorCode || pr->Offset < 0) {
				fprintf(stderr, "sluice-bench: ListOffsets %s-%d: error %d (%s), offset %lld\n", o->topic,
					pr->PartitionIndex, pr->ErrorCode, sb_err_name(pr->ErrorCode), (long long)pr->Offset);
				return -EPROTO;
			}
			for (int c = 0; c < r->nconss; c++)
				for (int j = 0; j < r->conss[c].nparts; j++)
					if (r->conss[c].parts[j].partition == pr->PartitionIndex) {
						r->conss[c].parts[j].offset = pr->Offset;
						found++;
					}
		}
	}
	if (found != r->nparts) {
		fprintf(stderr, "sluice-bench: ListOffsets answered %d of %d partitions\n", found, r->nparts);
		return -EPROTO;
	}
	return 0;
}

static int sb_setup_consumers(struct sb_run *r)
{
	const struct sb_opts *o = r->o;
	int32_t *parts = calloc((size_t)r->nparts, sizeof *parts);
	r->nconss = o->connections < r->nparts ? o->connections : r->nparts;
	/* The largest answer: MaxBytes of the widest request, plus the frame around the records. */
	int width = (r->nparts + r->nconss - 1) / r->nconss;
	if (o->fetch_partitions > 0 && o->fetch_partitions < width)
		width = o->fetch_partitions;
	size_t frame_max = (size_t)sb_fetch_max_bytes(o, width) + sb_fetch_overhead_bytes;
	size_t rcap = 2 * frame_max > sb_ctl_resp_bytes ? 2 * frame_max : sb_ctl_resp_bytes;
	size_t scap = sb_ctl_bytes + (size_t)o->inflight * (256 + 32 * (size_t)width);
	uint32_t qcap = (uint32_t)(o->inflight + sb_ctl_inflight_max);
	r->conss = calloc((size_t)r->nconss, sizeof *r->conss);
	if (!parts || !r->conss)
		return -ENOMEM;
	int rc = 0;
	for (int i = 0; i < r->nconss && !rc; i++) {
		struct sb_cons *cs = &r->conss[i];
		*cs = (struct sb_cons){ .run = r, .idx = i };
		cs->nparts = sb_parts_of(i, r->nconss, r->nparts, parts);
		cs->parts = calloc((size_t)cs->nparts, sizeof *cs->parts);
		if (!cs->parts)
			return -ENOMEM;
		for (int k = 0; k < cs->nparts; k++)
			cs->parts[k] = (struct sb_fpart){ .partition = parts[k], .high_watermark = -1, .last_stable = -1 };
		cs->conn = sb_new_conn(r, r->leader_host, r->leader_port, scap, rcap, qcap, &rc);
	}
	free(parts);
	if (!rc && o->workload == SB_WL_E2E)
		rc = sb_latest_offsets(r);
	return rc;
}

int sb_setup(struct sb_run *r)
{
	const struct sb_opts *o = r->o;
	char host[sb_host_bytes_max];
	int port = 0, rc;
	if (sb_split_addr(o->bootstrap, host, sizeof host, &port)) {
		fprintf(stderr, "sluice-bench: --bootstrap wants HOST:PORT, got '%s'\n", o->bootstrap);
		return -EINVAL;
	}
	/* The bootstrap connection serves start-up calls only; it is not in the epoll set. */
	r->boot = calloc(1, sizeof *r->boot);
	if (!r->boot)
		return -ENOMEM;
	if ((rc = sb_conn_open(r->boot, -1, host, port, sb_ctl_bytes, sb_arena_bytes, 1, -1)))
		return rc;
	if ((rc = sb_check_versions(r)))
		return rc;
	if (o->create && (rc = sb_create_topic(r)))
		return rc;
	if ((rc = sb_wait_topic(r)))
		return rc;
	fprintf(stderr, "# topic %s: %d partitions, leader %s:%d\n", o->topic, r->nparts, r->leader_host, r->leader_port);
	if (o->workload != SB_WL_CONSUME && (rc = sb_setup_producers(r)))
		return rc;
	if (o->workload != SB_WL_PRODUCE && (rc = sb_setup_consumers(r)))
		return rc;
	return 0;
}
