/*
 * sim_disk.h - the simulator's in-memory disk: the implementation of
 * storage/fs.h under -DST_FS_SIM.
 *
 * Locality: the simulator's one thread (every simulated core runs on it).
 *
 * Model (what a power cut may do, and what the simulator makes it do):
 *   - each file has the bytes reads see (the page cache) and the bytes a
 *     crash keeps (the platter); fdatasync/fsync copies the first to the
 *     second; a failed one (fault) forgets the dirty range without
 *     writing it (Linux's "fsyncgate": a later fsync succeeds and the
 *     overwritten bytes below the synced length stay lost; bytes past that
 *     length go with the next sync, or with a crash's seeded pages);
 *   - names (create, unlink, rename, mkdir) go to an ordered metadata
 *     journal; a directory fsync forces everything journalled so far; a
 *     crash keeps a random prefix of the rest (ordered metadata, as ext4);
 *   - at a crash a seeded part of each file's unsynced pages is kept
 *     (ST_LOG_PAGE_BYTES pages): by default a prefix, its last page torn at
 *     a sector; with `scattered`, each page on its own (holes of zeros,
 *     later pages kept while an earlier one is lost); the file length is
 *     the synced one or reaches up to a kept page;
 *   - submissions (st_fs_prep_*: writes, syncs, and storage/fop.c's
 *     openat, renameat, unlinkat, close) wait in a per-ring queue and
 *     complete in a seeded order when the simulator steps the ring: chains
 *     (a write and its linked sync, a directory fsync before a roll's first
 *     write, a rename and its directory fsync) keep their order, different
 *     chains reorder; a failure in a chain cancels the rest (-ECANCELED)
 *     unless the link is hard; writes may be short, fail (-EIO) or hit the
 *     capacity (-ENOSPC); a sync may fail (-EIO); an openat, renameat or
 *     unlinkat may fail (-EIO); their names go to the metadata journal as
 *     the synchronous calls' do, at completion;
 *   - between the crash and the restart the machine is "dead": every call
 *     fails with EIO and changes nothing, so the real code's teardown runs
 *     (and frees its memory) without touching the disk.
 */
#ifndef SLUICE_SIM_DISK_H
#define SLUICE_SIM_DISK_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>

struct io_uring;
struct io_uring_cqe;

/* Faults, as chances in parts per million per operation. */
struct sim_faults {
	uint32_t write_short_ppm;    /* a write writes a random prefix */
	uint32_t write_eio_ppm;      /* a write fails with -EIO */
	uint32_t sync_eio_ppm;       /* an fdatasync/fsync fails with -EIO (and drops the dirty pages) */
	uint32_t meta_eio_ppm;       /* a submitted openat, renameat or unlinkat fails with -EIO (changes nothing) */
	uint32_t page_keep_ppm;      /* at a crash, unsynced pages are kept (see scattered) */
	bool scattered;              /* false: a prefix of a file's unsynced pages is kept, its last page torn at
	                              * a 512-byte sector; true: each page kept or lost on its own (later pages
	                              * kept while an earlier one is lost; see tests/sim/README.md) */
	uint64_t capacity_bytes;     /* sum of file lengths beyond which writes get -ENOSPC */
};

/* Deterministic generator (splitmix64), shared by the disk and the workload. */
uint64_t sim_rand(void);
static inline uint64_t sim_below(uint64_t n) { return n ? sim_rand() % n : 0; }
static inline bool sim_chance_ppm(uint32_t ppm) { return sim_below(1000000) < ppm; }
void sim_seed(uint64_t seed);

void sim_disk_init(const struct sim_faults *f);
void sim_disk_free(void);
/* The machine dies: every later call fails until sim_disk_restart. */
void sim_disk_kill(void);
/* Apply the crash to the platter (torn pages, lost names), clear fds and queues, come back. */
void sim_disk_restart(void);
bool sim_disk_dead(void);
uint64_t sim_disk_used_bytes(void);
void sim_disk_set_capacity(uint64_t bytes);
void sim_disk_set_faults(const struct sim_faults *f);
/* O_DIRECT's alignment (default 4096) and whether st_fs_dio_align reports it (default yes; no:
 * a kernel without statx STATX_DIOALIGN, the log guesses 4096). Kept across seeds and restarts. */
void sim_disk_set_dio(uint32_t align, bool reported);

/* For the whole-broker simulator's wsim_fs.h (dataplane/'s few direct calls): read(2) at the
 * fd's position, renameat(2) by directory fds, and statvfs(2), which the in-memory disk does
 * not answer (-1, ENOSYS: callers treat it as unknown); a directory stream's fd and fstatat(2)
 * (readdir's d_type is DT_UNKNOWN, as on file systems without it, so callers stat each name). */
struct statvfs;
struct stat;
int sim_disk_dirfd(DIR *dir);
int sim_disk_fstatat(int dirfd, const char *name, struct stat *st, int flags);
long sim_disk_read(int fd, void *buf, unsigned long len);
int sim_disk_renameat(int olddirfd, const char *from, int newdirfd, const char *to);
int sim_disk_statvfs(const char *path, struct statvfs *sv);

/* A submission queue standing for one core's io_uring (st_io_create's ring). */
struct io_uring *sim_ring_create(unsigned depth);
void sim_ring_destroy(struct io_uring *ring);
/* Complete up to max queued operations in seeded order; each CQE goes to cb. Returns how many. */
typedef void (*sim_cqe_cb)(void *arg, const struct io_uring_cqe *cqe);
unsigned sim_ring_step(struct io_uring *ring, unsigned max, sim_cqe_cb cb, void *arg);
unsigned sim_ring_queued(const struct io_uring *ring);

#endif
