/*
 * topicconf.h - Kafka's topic configuration keys, and whether a value is one
 * Kafka would accept for its key (CreateTopics' Configs). Pure (no I/O, no
 * core state). Locality: any thread.
 */
#ifndef SLUICE_DP_TOPICCONF_H
#define SLUICE_DP_TOPICCONF_H

#include <stddef.h>

/*
 * NULL when Kafka takes value (len bytes; val NULL: a null value) for topic
 * config key name, else the reason it is refused (a static string): an
 * unknown key, a null value, a value that does not parse as the key's type
 * or lies outside its range. Kafka answers each of these INVALID_CONFIG.
 */
const char *dp_topic_config_why(const char *name, size_t name_len, const char *val, size_t len);

#endif
