/*
 * names.h - topic names and the partition directory names made of them:
 * what is valid, and which directory names the start-up scan takes for a
 * partition. Pure (no I/O, no core state), so a fuzzer runs it alone
 * (tests/fuzz/fuzz_dirnames.c). Locality: any thread.
 */
#ifndef SLUICE_DP_NAMES_H
#define SLUICE_DP_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dp_limits.h"

bool dp_topic_name_valid(const char *name, size_t len);
/* The coordinators' own logs: never a user topic (created, auto-created or produced to). */
bool dp_topic_internal(const char *name, size_t len);

/* What a data directory entry's name is to the start-up scan. */
enum dp_dir_name {
	DP_DIR_PARTITION,       /* TOPIC-P exactly as dp_partition_dir writes it */
	DP_DIR_OTHER,           /* no '-': the broker's own files and logs (__producer_ids, ...) */
	DP_DIR_BAD_TOPIC,       /* the part before the last '-' is not a valid topic name */
	DP_DIR_INTERNAL,        /* a coordinator log's name with a partition: never a user topic */
	DP_DIR_NOT_CANONICAL,   /* the partition is not a plain decimal without leading zeros */
	DP_DIR_PARTITION_RANGE, /* the partition is past DP_PARTITIONS_MAX */
	DP_DIR_DELETE_MARK,     /* N.topic-deleting: a topic delete's durable record (control.c) */
	DP_DIR_DELETE_TMP,      /* N.topic-deleting.tmp: such a record not yet renamed into place */
};

/*
 * A topic delete is recorded before any partition is touched: a file named
 * "<catalog slot>" DP_DELETE_MARK_SUFFIX holding the topic's name, written
 * whole and renamed into place durably. Until it is removed (after every
 * partition directory is), a start-up finishes the delete first. The name
 * ends in a letter, so it is never a partition directory's (those end in a
 * digit), and it has no room for the topic's name (249 bytes plus a suffix
 * can pass NAME_MAX), hence the content.
 */
#define DP_DELETE_MARK_SUFFIX ".topic-deleting"
#define DP_DELETE_TMP_SUFFIX  ".topic-deleting.tmp"

/*
 * A topic's configs (topicconf.h) live in DATA/DP_TOPIC_CONFIG_DIR/<topic>,
 * written whole and renamed into place durably before its partition
 * directories are made; a file whose topic has no partition directory is
 * removed at start-up. The directory's name has no '-', so the scan takes it
 * for the broker's own (DP_DIR_OTHER). A temp file's prefix is no topic
 * name's character, so no topic's file is another's temp.
 */
#define DP_TOPIC_CONFIG_DIR        "__topic_configs"
#define DP_TOPIC_CONFIG_TMP_PREFIX "~"

/*
 * Pure: parse a data directory entry's name (len bytes, no NUL needed). On
 * DP_DIR_PARTITION, *topic_len is the topic's length (the name's prefix) and
 * *partition its partition. Only the canonical spelling is taken (the one
 * dp_partition_dir writes: decimal, no sign, no leading zero), so that no two
 * names are one partition: Kafka's Integer.parseInt would read "t-05", "t-+5"
 * and "t-5" all as t/5, and a stray copy would then be opened as that
 * partition's log beside (or instead of) the real one.
 */
enum dp_dir_name dp_dir_name_parse(const char *name, size_t len, size_t *topic_len, int32_t *partition);
const char *dp_dir_name_why(enum dp_dir_name k);   /* for the scan's log line */

#endif
