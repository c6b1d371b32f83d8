/* fuzz_tcp_seeds.c: writes the seed corpus of fuzz_tcp into DIR: record
 * sequences (fuzz_tcp.c's format) that open connections with and without
 * each TCP option, move data both ways, lose and reorder it, and close from
 * either side, so mutations start from deep states. Locality: a tool, run
 * once per fuzzing session. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcp_harness.h"

static uint8_t g_b[8192];
static size_t g_n;

static void rec(uint8_t op, const void *d, uint8_t len)
{
	g_b[g_n++] = op;
	g_b[g_n++] = len;
	memcpy(g_b + g_n, d, len);
	g_n += len;
}

/* a TCP record: flags, port, seq delta, ack delta (relative to the stack's last), window, options, payload */
static void seg(uint8_t flags, int port, int8_t dseq, int8_t dack, const uint8_t *opt, uint8_t optlen,
		const char *payload, uint8_t plen, int ts)
{
	uint8_t r[255] = { flags, (uint8_t)port, (uint8_t)dseq, 0, (uint8_t)dack, 0, 0xff, 0xff,
			   (uint8_t)(optlen / 4), (uint8_t)ts, 0, 0 };
	memcpy(r + 12, opt, optlen);
	memcpy(r + 12 + optlen, payload, plen);
	rec(1, r, (uint8_t)(12 + optlen + plen));
}

static void put(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(g_b, 1, g_n, f) != g_n || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
	g_n = 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_tcp_seeds DIR\n");
		return 2;
	}
	uint8_t opt[40];
	for (unsigned which = 0; which <= TH_O_ALL; which += 5) {
		uint8_t ol = (uint8_t)th_syn_opts(opt, which, 1460, 7, 100);
		/* the SYN's seq is relative to 0 (nothing sent yet): any will do */
		seg(0x02, 0, 0, 0, opt, ol, "", 0, 0);
		seg(0x10, 0, 0, 1, NULL, 0, "", 0, 0);                /* ACK of the SYN-ACK */
		seg(0x18, 0, 0, 0, NULL, 0, "hello", 5, which & TH_O_TS);
		seg(0x18, 0, 10, 0, NULL, 0, "later", 5, 0);           /* out of order */
		uint8_t app[2] = { 0x10, 40 };                         /* send 640 bytes */
		rec(3, app, 2);
		uint8_t t = 50;
		rec(2, &t, 1);                                         /* timers */
		seg(0x10, 0, 0, 0, NULL, 0, "", 0, 0);                 /* duplicate ACKs */
		seg(0x10, 0, 0, 0, NULL, 0, "", 0, 0);
		seg(0x10, 0, 0, 0, NULL, 0, "", 0, 0);
		seg(0x11, 0, 0, 0, NULL, 0, "", 0, 0);                 /* FIN */
		uint8_t cl[1] = { 0x20 };
		rec(3, cl, 1);                                         /* close */
		char name[32];
		snprintf(name, sizeof(name), "session-%u", which);
		put(argv[1], name);
	}
	uint8_t ol = (uint8_t)th_syn_opts(opt, TH_O_ALL, 536, 14, 1);
	seg(0x02, 1, 0, 0, opt, ol, "", 0, 0);
	seg(0x04, 1, 0, 0, NULL, 0, "", 0, 0);                          /* RST in SYN_RCVD */
	uint8_t arp[28] = { 0 };
	arp[7] = 1;
	rec(4, arp, 28);
	uint8_t icmp[16] = { 1, 0, 0, 0, 0x12, 0x34, 0, 1, 'p', 'i', 'n', 'g' };
	rec(4, icmp, 16);
	put(argv[1], "rst-arp-icmp");
	return 0;
}
