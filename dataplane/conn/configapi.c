/*
 * configapi.c - DescribeConfigs on the NIC core: a topic's configs from this
 * core's copy of the catalog (the text the topic was created or altered
 * with, loop/topicconf.h), the broker's from its flags. Listed are the
 * topic configs sluice applies or stores, each with its value, whether it
 * was set for the topic (source DYNAMIC_TOPIC_CONFIG) or is the broker's
 * (STATIC_BROKER_CONFIG, a flag) or Kafka's default (DEFAULT_CONFIG); keys
 * sluice refuses (topicconf.c) are not listed, since no value of theirs is
 * in effect. AlterConfigs (replace) and IncrementalAlterConfigs (KIP-339)
 * of a topic go to the control core, which applies them to the topic's
 * configs, writes them durably and hands them to every data core before the
 * answer; the broker's configs are its flags, not altered. Locality: NIC core.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kerr.h"
#include "conn_internal.h"

/* Kafka's resource types and config sources (DescribeConfigs). */
#define CFG_RESOURCE_TOPIC  2
#define CFG_RESOURCE_BROKER 4
#define CFG_SOURCE_DYNAMIC_TOPIC 1
#define CFG_SOURCE_STATIC_BROKER 4
#define CFG_SOURCE_DEFAULT       5
#define CFG_NUMBER_CHARS_MAX 24   /* an int64 in decimal, with its sign and NUL */

static const char cfg_why_type[] = "sluice describes topic (2) and broker (4) resources only";
static const char cfg_why_broker[] = "not this broker's id";
static const char cfg_why_topic[] = "the topic does not exist";

static struct kstr cfg_str(const char *s) { return (struct kstr){ s, (int32_t)strlen(s) }; }

/* dp_null_values_why's message is cut to this many bytes (a config name may be 32 KiB long). */
#define DP_NULL_VALUES_MESSAGE_BYTES_MAX 256

struct kstr dp_null_values_why(struct dp_req *r, const void *configs, int32_t n, size_t stride,
                               size_t name_off, size_t value_off, const char *prefix)
{
	char *msg = NULL;
	size_t at = 0, names = 0;
	for (int32_t j = 0; j < n; j++) {
		const char *e = (const char *)configs + (size_t)j * stride;
		struct kstr name, value;
		memcpy(&name, e + name_off, sizeof(name));
		memcpy(&value, e + value_off, sizeof(value));
		if (value.len >= 0)
			continue;
		if (!msg) {
			if (!(msg = dp_req_alloc(r, DP_NULL_VALUES_MESSAGE_BYTES_MAX)))
				return (struct kstr){ NULL, -2 };
			at = strlen(prefix) < DP_NULL_VALUES_MESSAGE_BYTES_MAX ? strlen(prefix) : DP_NULL_VALUES_MESSAGE_BYTES_MAX;
			memcpy(msg, prefix, at);
		}
		const char *parts[2] = { ",", name.ptr };
		size_t lens[2] = { names++ ? 1u : 0u, name.len > 0 ? (size_t)name.len : 0u };
		for (int k = 0; k < 2; k++) {
			size_t room = DP_NULL_VALUES_MESSAGE_BYTES_MAX - at, m = lens[k] < room ? lens[k] : room;
			if (m)
				memcpy(msg + at, parts[k], m);
			at += m;
		}
	}
	return msg ? (struct kstr){ msg, (int32_t)at } : (struct kstr){ NULL, -1 };
}

/* A number's text, in the request's arena (it outlives the response's encoding). */
static struct kstr cfg_num(struct dp_req *r, int64_t v)
{
	char *b = dp_req_alloc(r, CFG_NUMBER_CHARS_MAX);
	if (!b)
		return (struct kstr){ NULL, -2 };
	return (struct kstr){ b, snprintf(b, CFG_NUMBER_CHARS_MAX, "%" PRId64, v) };
}

/* The value the broker applies for applied key i when the topic does not set it (its flag). */
static struct kstr applied_default(struct dp_core *c, struct dp_req *r, const char *name)
{
	const struct dp_config *cfg = &c->b->cfg;
	if (!strcmp(name, "retention.ms"))
		return cfg_num(r, cfg->retention_ms);
	if (!strcmp(name, "retention.bytes"))
		return cfg_num(r, cfg->retention_bytes);
	if (!strcmp(name, "segment.bytes"))
		return cfg_num(r, (int64_t)cfg->segment_bytes);
	if (!strcmp(name, "max.message.bytes"))   /* without one, a batch is bounded by the request's frame */
		return cfg_num(r, cfg->max_frame_bytes);
	return cfg_str("1");   /* min.insync.replicas: Kafka's default */
}

/* Whether the requested keys (null: all) name key i. */
static bool cfg_wanted(const struct DescribeConfigsRequest_DescribeConfigsResource *q, const char *name)
{
	if (q->ConfigurationKeys_n < 0)
		return true;
	size_t n = strlen(name);
	for (int32_t j = 0; j < q->ConfigurationKeys_n; j++)
		if (q->ConfigurationKeys[j].len == (int32_t)n && !memcmp(q->ConfigurationKeys[j].ptr, name, n))
			return true;
	return false;
}

static int describe_topic(struct dp_core *c, struct dp_req *r, const struct DescribeConfigsRequest *req,
                          const struct DescribeConfigsRequest_DescribeConfigsResource *q,
                          struct DescribeConfigsResponse_DescribeConfigsResult *out)
{
	int32_t id = q->ResourceName.len < 0 ? -1 : dp_topic_find(c, q->ResourceName.ptr, (size_t)q->ResourceName.len);
	if (id < 0 || c->topics[id].deleting) {
		out->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		out->ErrorMessage = cfg_str(cfg_why_topic);
		return 0;
	}
	const struct dp_topic *t = &c->topics[id];
	/* The values are copied: the topic may be deleted on this core before the response is encoded. */
	char *text = dp_req_alloc(r, t->conf.text_len ? t->conf.text_len : 1);
	if (!text)
		return -1;
	memcpy(text, t->conf.text ? t->conf.text : "", t->conf.text_len);
	struct dp_topic_configs tc;
	if (dp_topic_configs_parse(&tc, text, t->conf.text_len, UINT64_MAX)) {
		out->ErrorCode = KERR_UNKNOWN_SERVER_ERROR;   /* the broker wrote this text itself */
		return 0;
	}
	out->Configs = dp_req_alloc(r, sizeof(*out->Configs) * DP_TOPIC_CONFIG_KEYS);
	if (!out->Configs)
		return -1;
	out->Configs_n = 0;
	for (int i = 0; i < DP_TOPIC_CONFIG_KEYS; i++) {
		const char *name = dp_topic_config_name(i);
		if (!dp_topic_config_listed(i) || !cfg_wanted(q, name))
			continue;
		struct DescribeConfigsResponse_DescribeConfigsResourceResult *e = &out->Configs[out->Configs_n++];
		DescribeConfigsResponse_DescribeConfigsResourceResult_init(e);
		e->Name = cfg_str(name);
		bool set = tc.val[i] != NULL;
		e->Value = set ? (struct kstr){ tc.val[i], tc.len[i] }
		           : dp_topic_config_applied(i) ? applied_default(c, r, name) : cfg_str(dp_topic_config_default(i));
		if (e->Value.len < -1)
			return -1;
		e->ReadOnly = false;
		e->IsDefault = !set;
		e->ConfigSource = set ? CFG_SOURCE_DYNAMIC_TOPIC
		                  : dp_topic_config_applied(i) && strcmp(name, "min.insync.replicas") ? CFG_SOURCE_STATIC_BROKER
		                                                                                      : CFG_SOURCE_DEFAULT;
		e->IsSensitive = false;
		e->ConfigType = dp_topic_config_type(i);
		e->Documentation = (struct kstr){ NULL, -1 };
		e->Synonyms_n = 0;
		if (req->IncludeSynonyms) {   /* the one source its value comes from */
			e->Synonyms = dp_req_alloc(r, sizeof(*e->Synonyms));
			if (!e->Synonyms)
				return -1;
			e->Synonyms_n = 1;
			e->Synonyms[0] = (struct DescribeConfigsResponse_DescribeConfigsSynonym){ e->Name, e->Value, e->ConfigSource };
		}
	}
	return 0;
}

/* The broker's own settings that a client may ask for; read-only (they are flags). */
static int describe_broker(struct dp_core *c, struct dp_req *r, const struct DescribeConfigsRequest_DescribeConfigsResource *q,
                           struct DescribeConfigsResponse_DescribeConfigsResult *out)
{
	const struct dp_config *cfg = &c->b->cfg;
	struct kstr id = cfg_num(r, cfg->node_id);
	if (id.len < 0)
		return -1;
	if (q->ResourceName.len > 0 &&
	    (q->ResourceName.len != id.len || memcmp(q->ResourceName.ptr, id.ptr, (size_t)id.len))) {
		out->ErrorCode = KERR_INVALID_REQUEST;
		out->ErrorMessage = cfg_str(cfg_why_broker);
		return 0;
	}
	const struct { const char *name; int64_t v; const char *s; } keys[] = {
		{ "broker.id", cfg->node_id, NULL },
		{ "num.partitions", cfg->default_partitions, NULL },
		{ "auto.create.topics.enable", 0, cfg->auto_create ? "true" : "false" },
		{ "log.retention.ms", cfg->retention_ms, NULL },
		{ "log.retention.bytes", cfg->retention_bytes, NULL },
		{ "log.segment.bytes", (int64_t)cfg->segment_bytes, NULL },
		{ "message.max.bytes", cfg->max_frame_bytes, NULL },
		{ "socket.request.max.bytes", cfg->max_frame_bytes, NULL },
		{ "min.insync.replicas", 1, NULL },
		{ "log.cleanup.policy", 0, "delete" },
		{ "compression.type", 0, "producer" },
		{ "log.message.timestamp.type", 0, "CreateTime" },
		{ "offsets.retention.minutes", cfg->offsets_retention_ms < 0 ? -1 : cfg->offsets_retention_ms / 60000, NULL },
		{ "group.initial.rebalance.delay.ms", cfg->group_initial_delay_ms, NULL },
		{ "transaction.max.timeout.ms", cfg->txn_max_timeout_ms, NULL },
		{ "transactional.id.expiration.ms", cfg->txn_id_expiration_ms, NULL },
	};
	size_t n = sizeof(keys) / sizeof(keys[0]);
	out->Configs = dp_req_alloc(r, sizeof(*out->Configs) * n);
	if (!out->Configs)
		return -1;
	out->Configs_n = 0;
	for (size_t i = 0; i < n; i++) {
		if (!cfg_wanted(q, keys[i].name))
			continue;
		struct DescribeConfigsResponse_DescribeConfigsResourceResult *e = &out->Configs[out->Configs_n++];
		DescribeConfigsResponse_DescribeConfigsResourceResult_init(e);
		e->Name = cfg_str(keys[i].name);
		e->Value = keys[i].s ? cfg_str(keys[i].s) : cfg_num(r, keys[i].v);
		if (e->Value.len < -1)
			return -1;
		e->ReadOnly = true;
		e->IsDefault = false;
		e->ConfigSource = CFG_SOURCE_STATIC_BROKER;
		e->ConfigType = keys[i].s ? (strcmp(keys[i].name, "auto.create.topics.enable") ? 2 : 1) : 5;
		e->Documentation = (struct kstr){ NULL, -1 };
		e->Synonyms_n = 0;
	}
	return 0;
}

int dp_describe_configs(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct DescribeConfigsRequest req;
	if (DescribeConfigsRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	struct DescribeConfigsResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!resp)
		return -1;
	DescribeConfigsResponse_init(resp);
	r->resp = resp;
	if (!DP_RESP_ARRAY(r, resp, Results, req.Resources_n))
		return -1;
	for (int32_t i = 0; i < resp->Results_n; i++) {
		const struct DescribeConfigsRequest_DescribeConfigsResource *q = &req.Resources[i];
		struct DescribeConfigsResponse_DescribeConfigsResult *out = &resp->Results[i];
		DescribeConfigsResponse_DescribeConfigsResult_init(out);
		out->ResourceType = q->ResourceType;
		out->ResourceName = q->ResourceName.len < 0 ? cfg_str("") : q->ResourceName;
		out->ErrorMessage = (struct kstr){ NULL, -1 };
		out->Configs_n = 0;
		int rc = 0;
		if (q->ResourceType == CFG_RESOURCE_TOPIC)
			rc = describe_topic(c, r, &req, q, out);
		else if (q->ResourceType == CFG_RESOURCE_BROKER)
			rc = describe_broker(c, r, q, out);
		else {
			out->ErrorCode = KERR_INVALID_REQUEST;
			out->ErrorMessage = cfg_str(cfg_why_type);
		}
		if (rc < 0)
			return -1;
	}
	return 0;
}

static const char cfg_why_broker_ro[] = "sluice's broker configs are its command-line flags: not altered at run time";
static const char cfg_why_dup[] = "Error due to duplicate config keys";   /* Kafka's message */
/* Kafka 2.x's (ZkAdminManager.alterConfigs, before the resource's type or existence). */
static const char cfg_why_null[] = "Null value not supported for : ";
/* Kafka 3's (ConfigAdminManager.preprocess), for every entry of the resource: 2.x's
 * AlterConfigs failed whole on it (UNKNOWN_SERVER_ERROR, Collectors.toMap's duplicate key) and
 * its IncrementalAlterConfigs kept the last entry, answering one fewer than asked. */
static const char cfg_why_dup_resource[] = "Each resource must appear at most once.";
static const char cfg_why_many[] = "more configs than one alter takes (DP_TOPIC_CREATE_CONFIGS_MAX)";

/*
 * One resource of an alter: its error now, or (0) its topic's change sent to
 * the control core, whose answer fills the result (dp_alter_configs_part).
 * get(j, &op) reads config j of the request into op. Returns -1 when the
 * request's arena has no room (the caller closes). dup_[idx]: the resource is
 * in the request more than once (alter_dups).
 */
#define ALTER_RESOURCE(c, r, q, out, idx, validate, is_replace, FILL)                                     \
	do {                                                                                                 \
		(out)->ResourceType = (q)->ResourceType;                                                         \
		(out)->ResourceName = (q)->ResourceName.len < 0 ? cfg_str("") : (q)->ResourceName;              \
		(out)->ErrorMessage = (struct kstr){ NULL, -1 };                                                 \
		(out)->ErrorCode = 0;                                                                            \
		int32_t nc_ = (q)->Configs_n > 0 ? (q)->Configs_n : 0;                                           \
		struct kstr null_;                                                                               \
		if (dup_[idx]) {                                                                                 \
			(out)->ErrorCode = KERR_INVALID_REQUEST;                                                     \
			(out)->ErrorMessage = cfg_str(cfg_why_dup_resource);                                         \
		} else if ((q)->ResourceType == CFG_RESOURCE_BROKER) {                                           \
			(out)->ErrorCode = KERR_INVALID_REQUEST;                                                     \
			(out)->ErrorMessage = cfg_str(cfg_why_broker_ro);                                            \
		} else if ((q)->ResourceType != CFG_RESOURCE_TOPIC) {                                            \
			(out)->ErrorCode = KERR_INVALID_REQUEST;                                                     \
			(out)->ErrorMessage = cfg_str(cfg_why_type);                                                 \
		} else if ((q)->ResourceName.len < 0 ||                                                          \
		           dp_topic_find((c), (q)->ResourceName.ptr, (size_t)(q)->ResourceName.len) < 0) {       \
			(out)->ErrorCode = KERR_UNKNOWN_TOPIC_OR_PARTITION;                                          \
			(out)->ErrorMessage = cfg_str(cfg_why_topic);                                                \
		} else if (nc_ > DP_TOPIC_CREATE_CONFIGS_MAX) {                                                  \
			(out)->ErrorCode = KERR_INVALID_CONFIG;                                                      \
			(out)->ErrorMessage = cfg_str(cfg_why_many);                                                 \
		} else if ((is_replace) &&                                                                       \
		           (null_ = dp_null_values_why((r), (q)->Configs, nc_, sizeof(*(q)->Configs),            \
		                                       offsetof(__typeof__(*(q)->Configs), Name),                \
		                                       offsetof(__typeof__(*(q)->Configs), Value),               \
		                                       cfg_why_null)).len != -1) {                               \
			if (null_.len < 0)                                                                           \
				return -1;                                                                               \
			(out)->ErrorCode = KERR_INVALID_REQUEST;                                                     \
			(out)->ErrorMessage = null_;                                                                 \
		} else {                                                                                         \
			struct dp_topic_alter *a_ = dp_req_alloc((r), sizeof(*a_));                                  \
			struct dp_topic_alter_op *ops_ = dp_req_alloc((r), sizeof(*ops_) * (size_t)(nc_ ? nc_ : 1)); \
			if (!a_ || !ops_)                                                                            \
				return -1;                                                                               \
			bool bad_ = false;                                                                           \
			for (int32_t j = 0; j < nc_; j++) {                                                          \
				FILL(&(q)->Configs[j], &ops_[j]);                                                        \
				bad_ |= (q)->Configs[j].Name.len < 0;                                                    \
			}                                                                                            \
			*a_ = (struct dp_topic_alter){ .replace = (is_replace), .n = nc_, .ops = ops_ };              \
			if (bad_) {                                                                                  \
				(out)->ErrorCode = KERR_INVALID_REQUEST;                                                 \
				(out)->ErrorMessage = cfg_str("null config name");                                       \
			} else if (dp_topic_alter_dup(a_)) {   /* as Kafka's ConfigAdminManager, before any is applied */ \
				(out)->ErrorCode = KERR_INVALID_REQUEST;                                                 \
				(out)->ErrorMessage = cfg_str(cfg_why_dup);                                              \
			} else {                                                                                     \
				dp_ask_control((c), (r), DP_MSG_ALTER_CONF, (uint32_t)(idx), (q)->ResourceName, 0,       \
				               (validate) ? DP_F_VALIDATE_ONLY : 0, a_);                                 \
			}                                                                                            \
		}                                                                                                \
	} while (0)

#define FILL_SET(in, o)                                                                                  \
	(*(o) = (struct dp_topic_alter_op){ .name = (in)->Name.ptr, .name_len = (in)->Name.len < 0 ? 0 : (uint32_t)(in)->Name.len, \
	                                    .val = (in)->Value.len < 0 ? NULL : (in)->Value.ptr,                 \
	                                    .len = (in)->Value.len < 0 ? 0 : (uint32_t)(in)->Value.len, .op = DP_TC_OP_SET })
#define FILL_OP(in, o)                                                                                   \
	(*(o) = (struct dp_topic_alter_op){ .name = (in)->Name.ptr, .name_len = (in)->Name.len < 0 ? 0 : (uint32_t)(in)->Name.len, \
	                                    .val = (in)->Value.len < 0 ? NULL : (in)->Value.ptr,                 \
	                                    .len = (in)->Value.len < 0 ? 0 : (uint32_t)(in)->Value.len,          \
	                                    .op = (in)->ConfigOperation })

/* Which of a request's n resources (type and name) it holds more than once: *dup from r's arena;
 * -1 when the arena is spent. */
#define ALTER_DUPS(r, req, dup)                                                                           \
	do {                                                                                                 \
		int32_t n_ = dp_count((req).Resources_n);                                                        \
		struct name_at *names_ = dp_req_alloc((r), sizeof(*names_) * (size_t)(n_ ? n_ : 1));            \
		if (!names_ || !((dup) = dp_req_alloc((r), sizeof(bool) * (size_t)(n_ ? n_ : 1))))             \
			return -1;                                                                                   \
		for (int32_t i_ = 0; i_ < n_; i_++)                                                              \
			names_[i_] = (struct name_at){ .name = (req).Resources[i_].ResourceName, .idx = i_,          \
			                               .kind = (req).Resources[i_].ResourceType };                  \
		names_mark_dups(names_, n_, (dup));                                                              \
	} while (0)

int dp_alter_configs(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct AlterConfigsRequest req;
	if (AlterConfigsRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	struct AlterConfigsResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!resp)
		return -1;
	AlterConfigsResponse_init(resp);
	r->resp = resp;
	if (!DP_RESP_ARRAY(r, resp, Responses, req.Resources_n))
		return -1;
	bool *dup_;
	ALTER_DUPS(r, req, dup_);
	for (int32_t i = 0; i < resp->Responses_n; i++)
		ALTER_RESOURCE(c, r, &req.Resources[i], &resp->Responses[i], i, req.ValidateOnly, true, FILL_SET);
	return 0;
}

int dp_incremental_alter_configs(struct dp_core *c, struct dp_req *r, struct kreader *rd)
{
	struct IncrementalAlterConfigsRequest req;
	if (IncrementalAlterConfigsRequest_decode(rd, r->hdr.api_version, &req, &r->arena) < 0)
		return -1;
	struct IncrementalAlterConfigsResponse *resp = dp_req_alloc(r, sizeof(*resp));
	if (!resp)
		return -1;
	IncrementalAlterConfigsResponse_init(resp);
	r->resp = resp;
	if (!DP_RESP_ARRAY(r, resp, Responses, req.Resources_n))
		return -1;
	bool *dup_;
	ALTER_DUPS(r, req, dup_);
	for (int32_t i = 0; i < resp->Responses_n; i++)
		ALTER_RESOURCE(c, r, &req.Resources[i], &resp->Responses[i], i, req.ValidateOnly, false, FILL_OP);
	return 0;
}

void dp_alter_configs_part(struct dp_req *r, struct dp_msg *m)
{
	struct kstr why = m->u.topic.name ? (struct kstr){ m->u.topic.name, (int32_t)m->u.topic.name_len }
	                                  : (struct kstr){ NULL, -1 };   /* the control core's static reason */
	if (r->hdr.api_key == KAPI_ALTER_CONFIGS) {
		struct AlterConfigsResponse *resp = r->resp;
		resp->Responses[m->idx].ErrorCode = m->err;
		resp->Responses[m->idx].ErrorMessage = why;
	} else {
		struct IncrementalAlterConfigsResponse *resp = r->resp;
		resp->Responses[m->idx].ErrorCode = m->err;
		resp->Responses[m->idx].ErrorMessage = why;
	}
}
