/*
 * records.h - streaming check of a RecordBatch v2's records section: the
 * bytes after the 61-byte header, uncompressed, or as a codec hands them out
 * chunk by chunk (codec.h). Nothing is buffered: the checker keeps the state
 * of the one field it is inside, so a record may be split anywhere between
 * two feeds.
 *
 * Locality: any (pure functions over caller state).
 *
 * What it checks, as Kafka's broker does before it appends (DefaultRecord
 * readFrom, LogValidator validateBatch / validateRecord), §3.3:
 *
 *   recordsCount >= 1 and lastOffsetDelta == recordsCount - 1
 *   exactly recordsCount records, and no byte after the last one
 *   each record:  length          varint (int32)  >= 1, the body that follows
 *                 attributes      int8
 *                 timestampDelta  varlong
 *                 offsetDelta     varint (int32)  == the record's index (0, 1, ...):
 *                                                 increasing, up to lastOffsetDelta
 *                 keyLength       varint (int32)  >= -1 (-1: null), then the key
 *                 valueLength     varint (int32)  >= -1, then the value
 *                 headers         varint (int32)  >= 0, then per header:
 *                   keyLength     varint (int32)  >= 0, the key
 *                   valueLength   varint (int32)  >= -1, the value
 *                 every field inside the record's length, which it fills exactly
 *   varints: at most 5 bytes for int32 fields (value within 32 bits), 10 for varlong
 */
#ifndef SLUICE_STORAGE_RECORDS_H
#define SLUICE_STORAGE_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct st_batch_hdr;

/* Checker state for one records section. Locality: any (value; one per batch being checked). */
struct st_recs_check {
	int32_t count;            /* records the header announces */
	int32_t seen;             /* records complete so far */
	uint8_t state;            /* field being read (records.c, enum rc_state) */
	uint8_t vbytes;           /* bytes of the varint being read */
	bool bad;                 /* absorbing: once malformed, always malformed */
	uint64_t vacc;            /* that varint's bits so far */
	int64_t body_left;        /* bytes of the current record not read yet */
	int64_t skip;             /* key, value or header bytes still to pass over */
	int64_t headers_left;     /* headers of the current record not read yet */
	uint64_t bytes;           /* bytes fed so far */
	/* A seek by time (st_recs_seek_time): the first record whose timestamp reaches seek_ts. */
	bool seeking, found;
	int64_t first_ts;         /* the batch's baseTimestamp: a record's is first_ts + its delta */
	int64_t seek_ts;
	int64_t cur_ts;           /* the timestamp of the record being read */
	int32_t found_delta;      /* found: that record's offset delta and timestamp */
	int64_t found_ts;
};

/* st_recs_check_feed's answer once a seek found its record (the rest is not read). */
#define ST_RECS_FOUND 1

/*
 * Start checking the records of a batch whose header is h: 0, or -EBADMSG if
 * the header's count and lastOffsetDelta already disagree (the checker is
 * then bad). Locality: any.
 */
int st_recs_check_init(struct st_recs_check *v, const struct st_batch_hdr *h);

/*
 * The next n bytes of the records section: 0 while they are well-formed so
 * far, -EBADMSG as soon as they are not (bytes after the last record
 * included), ST_RECS_FOUND once a seek found its record. Locality: any.
 */
int st_recs_check_feed(struct st_recs_check *v, const uint8_t *p, size_t n);

/*
 * After st_recs_check_init: make the feed stop at the first record whose
 * timestamp (first_ts + timestampDelta, as Kafka's DefaultRecord reads it)
 * is >= target, returning ST_RECS_FOUND with found_delta and found_ts set
 * (Kafka's ListOffsets by time within a batch). Records before it are
 * checked as usual. Locality: any.
 */
void st_recs_seek_time(struct st_recs_check *v, int64_t first_ts, int64_t target);

/* End of the section: 0 if exactly count records ended there, else -EBADMSG. Locality: any. */
int st_recs_check_end(struct st_recs_check *v);

#endif
