/* fuzz_tcp.c: libFuzzer target over the packet input of the userspace TCP
 * (nic/tcp/tcp.c): a server stack takes frames, timer ticks and
 * application calls from the input. Input: records of
 *     op (1 byte) | len (1 byte) | len bytes
 * op % 5: 0 a raw frame (the Ethernet bytes as given); 1 a TCP segment to
 * the listening port built with good checksums (so mutations reach the
 * state machine, not only the checksum check), its sequence and ACK
 * numbers relative to what the stack sent last: bytes flags, client port
 * (2 choices), seq delta, ack delta, window, option bytes, payload; 2 the
 * clock on by len * 7 ms and the timers; 3 the application: read, send,
 * close, abort or release one connection; 4 an ARP or ICMP frame.
 * Beyond "no crash, ASan/UBSan clean": tcp_check() (every flow's sequence
 * and ring invariants, the flow lists, the connection limit) after every
 * record, every frame out is whole with good checksums, every frame fits
 * tcp_frame_bytes_max(), and at the end, with the application releasing
 * every handle and the clock run far ahead, every flow is freed (no flow
 * leak, the memory taken at tcp_create all there is). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcp.h"
#include "tcp_harness.h"

#define FUZZ_TCP_CONNS 4u

static void fuzz_check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_tcp: %s\n", what);
		abort();
	}
}

struct fz {
	struct tcp_stack *s;
	uint64_t now;
	uint32_t last_seq[2], last_ack[2];   /* what the stack sent to each client port */
	uint32_t conns[FUZZ_TCP_CONNS];
	uint32_t nconns;
};

static void fz_drain(struct fz *z)
{
	uint8_t f[TH_FRAME_MAX];
	uint32_t n;
	static struct th_pkt p;
	int guard = 0;
	while ((n = tcp_output(z->s, z->now, f, sizeof(f))) > 0) {
		fuzz_check(n <= tcp_frame_bytes_max(z->s), "frame over the limit");
		th_parse(&p, f, n);
		fuzz_check(p.csum_ok, "bad checksum out");
		if (p.ethtype == 0x0800 && p.proto == 6) {
			int k = p.dport == 40001;
			z->last_seq[k] = p.seq;
			z->last_ack[k] = p.ack;
		}
		fuzz_check(++guard < 100000, "output never ends");
	}
	struct tcp_ev ev[16];
	int k;
	while ((k = tcp_events(z->s, ev, 16)) > 0) {
		for (int i = 0; i < k; i++) {
			if (ev[i].kind == TCP_EV_OPEN && z->nconns < FUZZ_TCP_CONNS)
				z->conns[z->nconns++] = ev[i].conn;
			if (ev[i].kind == TCP_EV_CLOSED)
				tcp_release(z->s, ev[i].conn);
		}
	}
	tcp_check(z->s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tcp_config c = { .ip = TH_SRV_IP, .port = TH_PORT, .conns_max = FUZZ_TCP_CONNS, .rx_bytes = 4096,
				.tx_bytes = 4096, .isn_secret = 1, .time_wait_us = 1000000,
				.keepalive_idle_us = 5000000, .keepalive_intvl_us = 1000000, .keepalive_probes = 2 };
	memcpy(c.mac, th_srv_mac, 6);
	struct fz z = { .now = 1000000 };
	fuzz_check(tcp_create(&c, &z.s) == 0, "create");
	static uint8_t f[TH_FRAME_MAX], junk[4096];
	for (size_t i = 0; i + 2 <= size;) {
		uint8_t op = data[i] % 5, len = data[i + 1];
		const uint8_t *b = data + i + 2;
		if (i + 2 + len > size)
			len = (uint8_t)(size - i - 2);
		i += 2 + (size_t)len;
		switch (op) {
		case 0: {
			/* a copy of exactly len bytes, so that the sanitizer sees a read past
			 * the frame's end (inside data it would not, but for the last) */
			uint8_t *g = malloc(len ? len : 1);
			fuzz_check(g != NULL, "malloc");
			memcpy(g, b, len);
			tcp_input(z.s, g, len, z.now);
			free(g);
			break;
		}
		case 1: {
			if (len < 12)
				break;
			uint8_t flags = b[0] & 0x3f;
			int k = b[1] & 1;
			uint16_t port = (uint16_t)(40000 + k);
			uint32_t seq = z.last_ack[k] + (uint32_t)(int8_t)b[2] * (b[3] + 1u);
			uint32_t ack = z.last_seq[k] + (uint32_t)(int8_t)b[4] * (b[5] + 1u);
			uint16_t win = (uint16_t)th_r16(b + 6);
			uint32_t optlen = (b[8] % 11) * 4;
			if (12 + optlen > len)
				optlen = 0;
			uint8_t ts[12];
			const uint8_t *opt = b + 12;
			if (b[9] & 1 && optlen == 0) {   /* a well-formed timestamp, usually */
				optlen = th_ts_opt(ts, (uint32_t)(z.now / 1000) + b[10], z.last_seq[k] ^ b[11]);
				opt = ts;
			}
			uint32_t dl = len - 12 - (opt == ts ? 0 : optlen);
			uint32_t n = th_tcp(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, port, TH_PORT, seq, ack, flags,
					    win, opt, optlen, b + 12 + (opt == ts ? 0 : optlen), dl);
			tcp_input(z.s, f, n, z.now);
			break;
		}
		case 2:
			z.now += (uint64_t)len * 7000;
			tcp_timers(z.s, z.now);
			break;
		case 3: {
			if (!z.nconns || !len)
				break;
			uint32_t h = z.conns[b[0] % z.nconns];
			const uint8_t *d;
			uint32_t n;
			switch ((b[0] >> 4) % 5) {
			case 0:
				while ((n = tcp_recv_peek(z.s, h, &d)) > 0)
					tcp_recv_consume(z.s, h, n);
				break;
			case 1:
				memset(junk, b[0], sizeof(junk));
				tcp_send(z.s, h, junk, (uint32_t)len * 16);
				break;
			case 2:
				tcp_close(z.s, h);
				break;
			case 3:
				tcp_abort(z.s, h);
				break;
			default:
				tcp_release(z.s, h);   /* (a stale handle is ignored) */
				break;
			}
			break;
		}
		default: {
			uint32_t n;
			if (!len)
				break;
			if (b[0] & 1) {   /* ICMP echo, good checksum */
				uint32_t ml = len < 8 ? 8 : len;
				n = th_eth_ip(f, th_srv_mac, th_cli_mac, TH_CLI_IP, TH_SRV_IP, 1, ml);
				memset(f + n, 0, ml);
				memcpy(f + n, b, len);
				f[n] = 8; f[n + 1] = 0; f[n + 2] = f[n + 3] = 0;
				th_w16(f + n + 2, th_csum(f + n, ml, 0));
				n += ml;
			} else {          /* ARP, fields from the input */
				memset(f, 0xff, 6);
				memcpy(f + 6, th_cli_mac, 6);
				th_w16(f + 12, 0x0806);
				memset(f + 14, 0, 28);
				memcpy(f + 14, b, len < 28 ? len : 28);
				th_w16(f + 14, 1); th_w16(f + 16, 0x0800); f[18] = 6; f[19] = 4;
				if (b[0] & 2)
					th_w32(f + 14 + 24, TH_SRV_IP);
				n = 42;
			}
			tcp_input(z.s, f, n, z.now);
			break;
		}
		}
		fz_drain(&z);
	}
	/* the end: the application lets go, the clock runs on: nothing is left */
	for (uint32_t k = 0; k < z.nconns; k++)
		tcp_release(z.s, z.conns[k]);
	for (int t = 0; t < 100 && tcp_flows_used(z.s); t++) {
		z.now += 10000000;
		tcp_timers(z.s, z.now);
		fz_drain(&z);
		for (uint32_t k = 0; k < z.nconns; k++)
			tcp_release(z.s, z.conns[k]);
	}
	fuzz_check(tcp_flows_used(z.s) == 0, "flows left after every handle was released");
	tcp_destroy(z.s);
	return 0;
}
