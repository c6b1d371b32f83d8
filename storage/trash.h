/*
 * trash.h - removing a deleted partition's files without the poll core
 * paying for it (interface for other folders).
 *
 * Unlinking a file frees its blocks in the call that drops its last link:
 * measured here, 0.4-0.5 s per GiB, and a topic's delete did that for every
 * file of every partition on the owning data core, which stood still
 * meanwhile. Now a deleted partition's directory is renamed into the core's
 * trash directory (one metadata step, its descriptors closed first while the
 * files are still linked, which is cheap), and the trash is emptied in the
 * background: each file's unlink goes through io_uring (st_fop_close_drop),
 * which always runs it on a kernel worker, at most ST_TRASH_UNLINKS at once;
 * an emptied directory is removed on the core (cheap: it holds nothing).
 *
 * The trash is on disk, so what a stop or a crash leaves there is emptied
 * after the next start, by the same core (or, for a core that is no more,
 * adopted by the one that starts with adopt set). Its directory is
 * DATA/ST_TRASH_DIR/<core>, and ST_TRASH_DIR has no '-', so the start-up
 * scan never takes it for a partition.
 *
 * Locality: the owning core (its io_uring); init and fini on it too.
 */
#ifndef SLUICE_STORAGE_TRASH_H
#define SLUICE_STORAGE_TRASH_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>

#include "fop.h"

#define ST_TRASH_DIR        ".trash"
#define ST_TRASH_UNLINKS    4     /* unlinks in flight per core: each on its own kernel worker */
#define ST_TRASH_PATH_BYTES 1024
#define ST_TRASH_PASSES_MAX 16    /* readdir passes over one directory before it is left for later */
/*
 * A file larger than this is not unlinked whole: its blocks are freed
 * ST_TRASH_PUNCH_BYTES at a time from its end (fallocate PUNCH_HOLE through
 * io_uring), one punch per core at a time, ST_TRASH_PUNCH_GAP_MS apart, then
 * the empty file unlinked. An unlink frees all of a file's blocks in one go,
 * and other files' fdatasyncs wait behind the file system's work for it:
 * measured here (2 GB file, a 4 KiB write+fdatasync every 2 ms beside it),
 * the fdatasync's worst case was 55-74 ms with one unlink and 8-11 ms punched
 * 16 MiB a step 2 ms apart (sluice-trash-bench, bench/RESULTS.md).
 */
#define ST_TRASH_PUNCH_BYTES  (16u << 20)
#define ST_TRASH_PUNCH_GAP_MS 2

struct st_io;

struct st_trash {
	struct st_io *io;
	char dir[ST_TRASH_PATH_BYTES];  /* DATA/ST_TRASH_DIR/<core> */
	uint64_t stamp, seq;            /* names handed out: <stamp>.<seq>, unique across restarts */
	bool made;                      /* dir exists, open as dirfd */
	int dirfd;
	bool pending;                   /* it may hold something */
	bool again;                     /* something came in while the top directory was being read */
	DIR *top;                       /* the trash being read, NULL none */
	DIR *sub;                       /* the entry being emptied, NULL none */
	int subfd;
	char subname[256];
	bool sub_file;                  /* the entry is a file, its unlink under way */
	uint32_t sub_passes;
	struct st_fop fop[ST_TRASH_UNLINKS];
	char names[ST_TRASH_UNLINKS][256];
	uint32_t inflight;
	char held[256];                 /* a large file read from sub while the punch was busy: next */
	bool has_held;
	struct st_fop punch;            /* the large file being freed a punch at a time */
	int pfd, pdirfd;
	uint64_t pend;                  /* its bytes not yet punched, from 0 */
	int64_t pnext_ms;               /* the next punch not before */
	bool punching, pfailed;
	int64_t now_ms;                 /* the last tick's */
	char pname[256];
	uint64_t files_removed, dirs_removed, failures, punches;
};

/*
 * Set up core's trash under data_dir; stamp: any value unique to this start
 * (the wall clock). What an earlier run left there is emptied from the first
 * st_trash_tick. adopt: also take in the trash of every other core directory
 * under DATA/ST_TRASH_DIR not named in live[0, nlive) (a run with more cores).
 */
void st_trash_init(struct st_trash *t, struct st_io *io, const char *data_dir, int core, uint64_t stamp,
                   bool adopt, const int *live, int nlive);
/* Rename path (a directory, or a file) into the trash. 0, or -errno (path untouched, or gone). */
int  st_trash_put(struct st_trash *t, const char *path);
/* Start what can be started (cheap when the trash is empty): call it every tick, now_ms any clock. */
void st_trash_tick(struct st_trash *t, int64_t now_ms);
/* Unlinks or a punch in flight (the core waits for them before it stops; a file half punched is
 * finished after the next start). */
bool st_trash_busy(const struct st_trash *t);
/* Close what is open (not busy); what is left stays for the next start. */
void st_trash_fini(struct st_trash *t);

#endif
