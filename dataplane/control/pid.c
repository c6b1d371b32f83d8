/*
 * pid.c - producer ids for idempotent producers, never reused: ids are
 * handed out from blocks, and a block is recorded on disk before any id in
 * it is given to a client. After a crash the next block starts past every
 * id that may have been issued. Locality: control core.
 *
 * File DATA/__producer_ids (written atomically: temp, fdatasync, rename):
 *   offset  size  field
 *        0     4  magic "SLPI"
 *        4     8  next block start (int64, big-endian): no id >= this was issued
 *       12     4  CRC32C of bytes 0..11
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "kerr.h"
#include "control_internal.h"

#define DP_PID_BLOCK 1000
#define DP_EPOCH_MAX 32766   /* Kafka bumps to a new id when the epoch would reach Short.MAX_VALUE */

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static int write_block(const char *dir, int64_t next)
{
	char path[1024], tmp[1040];
	snprintf(path, sizeof(path), "%s/__producer_ids", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	uint8_t b[16];
	memcpy(b, "SLPI", 4);
	put_be64(b + 4, (uint64_t)next);
	uint32_t crc = crc32c(0, b, 12);
	b[12] = (uint8_t)(crc >> 24), b[13] = (uint8_t)(crc >> 16), b[14] = (uint8_t)(crc >> 8), b[15] = (uint8_t)crc;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int rc = write(fd, b, sizeof(b)) == (ssize_t)sizeof(b) && fdatasync(fd) == 0 ? 0 : -EIO;
	close(fd);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc == 0) {
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
	return rc;
}

/* init only: read the next block start; a missing file starts at 0. */
int dp_pid_init(struct dp_pids *p, const char *dir)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/__producer_ids", dir);
	p->dir = dir;
	p->next = p->end = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	uint8_t b[16];
	ssize_t n = read(fd, b, sizeof(b));
	close(fd);
	uint32_t crc = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
	if (n != (ssize_t)sizeof(b) || memcmp(b, "SLPI", 4) || crc32c(0, b, 12) != crc) {
		DP_ERR("%s is damaged; refusing to start (ids could be reused)", path);
		return -EBADMSG;
	}
	p->next = p->end = (int64_t)get_be64(b + 4);
	return 0;
}

int64_t dp_pid_alloc(struct dp_pids *p)
{
	if (p->next == p->end) {
		/* Record the block before handing out any id in it. */
		if (write_block(p->dir, p->end + DP_PID_BLOCK) < 0) {
			DP_ERR("cannot record producer id block: storage error");
			return -1;
		}
		p->end += DP_PID_BLOCK;
	}
	return p->next++;
}

/*
 * InitProducerId without a transactional id. A request carrying its current
 * id and epoch (KIP-360, v3+) gets the same id with the epoch bumped, so the
 * producer can reset its sequences without a new identity; at the epoch
 * limit, or for an id we never issued, it gets a fresh id.
 */
void dp_pid_init_producer(struct dp_core *c, struct dp_msg *m)
{
	struct dp_pids *p = c->ctrl_pids;
	struct dp_msg r = { .type = DP_MSG_INIT_PID_DONE, .ctx = m->ctx, .idx = m->idx, .gen = m->gen };
	int64_t pid = m->u.pid.pid;
	int16_t epoch = m->u.pid.epoch;
	if (pid >= 0 && pid < p->next && epoch >= 0 && epoch < DP_EPOCH_MAX) {
		r.u.pid.pid = pid;
		r.u.pid.epoch = (int16_t)(epoch + 1);
	} else {
		r.u.pid.pid = dp_pid_alloc(p);
		r.u.pid.epoch = 0;
		if (r.u.pid.pid < 0)
			r.err = KERR_KAFKA_STORAGE_ERROR;
	}
	dp_answer(c, m, &r);
}
