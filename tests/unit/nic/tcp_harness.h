/*
 * tcp_harness.h - crafting and parsing frames for the tests of nic/tcp/
 * (tcp_ut.c, tcp_link_ut.c, the fuzz target's seeds). The checksums here
 * are computed independently of tcp.c's, so a wrong checksum on either side
 * shows.
 *
 * Locality: test programs, one thread.
 */
#ifndef SLUICE_TCP_HARNESS_H
#define SLUICE_TCP_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define TH_SRV_IP   0xc6120001u   /* 198.18.0.1 (RFC 2544 benchmarking range) */
#define TH_CLI_IP   0xc6120002u   /* 198.18.0.2 */
#define TH_PORT     9092u
#define TH_FRAME_MAX 2048u

static const uint8_t th_srv_mac[6] = { 0x02, 0, 0, 0, 0, 0x01 };
static const uint8_t th_cli_mac[6] = { 0x02, 0, 0, 0, 0, 0x02 };

/* options for th_syn_opts */
#define TH_O_MSS  0x1u
#define TH_O_WS   0x2u
#define TH_O_SACK 0x4u
#define TH_O_TS   0x8u
#define TH_O_ALL  0xfu

static inline void th_w16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void th_w32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline uint32_t th_r16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static inline uint32_t th_r32(const uint8_t *p) { return th_r16(p) << 16 | th_r16(p + 2); }

/* RFC 1071 by the book: 16-bit words, end-around carry each step. */
static inline uint16_t th_csum(const uint8_t *p, uint32_t n, uint32_t init)
{
	uint32_t sum = init;
	for (uint32_t i = 0; i + 1 < n; i += 2) {
		sum += th_r16(p + i);
		sum = (sum & 0xffff) + (sum >> 16);
	}
	if (n & 1) {
		sum += (uint32_t)p[n - 1] << 8;
		sum = (sum & 0xffff) + (sum >> 16);
	}
	return (uint16_t)~sum;
}

static inline uint32_t th_pseudo(uint32_t src, uint32_t dst, uint32_t len)
{
	uint32_t s = (src >> 16) + (src & 0xffff) + (dst >> 16) + (dst & 0xffff) + 6 + len;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return s;
}

static inline uint32_t th_eth_ip(uint8_t *b, const uint8_t dmac[6], const uint8_t smac[6], uint32_t src,
				 uint32_t dst, uint8_t proto, uint32_t payload)
{
	memcpy(b, dmac, 6);
	memcpy(b + 6, smac, 6);
	th_w16(b + 12, 0x0800);
	uint8_t *ip = b + 14;
	memset(ip, 0, 20);
	ip[0] = 0x45;
	th_w16(ip + 2, 20 + payload);
	th_w16(ip + 6, 0x4000);
	ip[8] = 64;
	ip[9] = proto;
	th_w32(ip + 12, src);
	th_w32(ip + 16, dst);
	th_w16(ip + 10, th_csum(ip, 20, 0));
	return 34;
}

/* A TCP frame from (src, sport) to (dst, dport). Returns its length. */
static inline uint32_t th_tcp(uint8_t *b, const uint8_t dmac[6], const uint8_t smac[6], uint32_t src, uint32_t dst,
			      uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack, uint8_t flags, uint16_t win,
			      const uint8_t *opt, uint32_t optlen, const void *data, uint32_t len)
{
	uint32_t tl = 20 + optlen + len;
	uint32_t o = th_eth_ip(b, dmac, smac, src, dst, 6, tl);
	uint8_t *t = b + o;
	th_w16(t, sport); th_w16(t + 2, dport);
	th_w32(t + 4, seq); th_w32(t + 8, ack);
	t[12] = (uint8_t)((20 + optlen) / 4 << 4);
	t[13] = flags;
	th_w16(t + 14, win);
	th_w16(t + 16, 0); th_w16(t + 18, 0);
	if (optlen)
		memcpy(t + 20, opt, optlen);
	if (len)
		memcpy(t + 20 + optlen, data, len);
	th_w16(t + 16, th_csum(t, tl, th_pseudo(src, dst, tl)));
	return o + tl;
}

/* SYN options in the order Linux sends them. */
static inline uint32_t th_syn_opts(uint8_t *o, unsigned which, uint16_t mss, uint8_t ws, uint32_t tsval)
{
	uint32_t n = 0;
	if (which & TH_O_MSS) { o[n++] = 2; o[n++] = 4; th_w16(o + n, mss); n += 2; }
	if (which & TH_O_SACK) { o[n++] = 1; o[n++] = 1; o[n++] = 4; o[n++] = 2; }
	if (which & TH_O_TS) { o[n++] = 1; o[n++] = 1; o[n++] = 8; o[n++] = 10; th_w32(o + n, tsval); th_w32(o + n + 4, 0); n += 8; }
	if (which & TH_O_WS) { o[n++] = 1; o[n++] = 3; o[n++] = 3; o[n++] = ws; }
	return n;
}

static inline uint32_t th_ts_opt(uint8_t *o, uint32_t tsval, uint32_t tsecr)
{
	o[0] = 1; o[1] = 1; o[2] = 8; o[3] = 10;
	th_w32(o + 4, tsval); th_w32(o + 8, tsecr);
	return 12;
}

/* A parsed frame the stack sent. */
struct th_pkt {
	uint32_t ethtype, proto, src, dst;
	uint32_t seq, ack, len;
	uint16_t sport, dport, win;
	uint8_t flags;
	bool csum_ok;
	bool has_mss, has_ws, sack_perm, has_ts;
	uint16_t mss;
	uint8_t ws;
	uint32_t tsval, tsecr;
	uint32_t nsack, sack[4][2];
	const uint8_t *data;       /* into frame */
	uint32_t flen;
	uint8_t frame[TH_FRAME_MAX];
};

static inline void th_parse(struct th_pkt *p, const uint8_t *f, uint32_t n)
{
	memset(p, 0, sizeof(*p) - sizeof(p->frame));
	memcpy(p->frame, f, n < TH_FRAME_MAX ? n : TH_FRAME_MAX);
	p->flen = n;
	f = p->frame;
	p->ethtype = th_r16(f + 12);
	p->csum_ok = true;
	if (p->ethtype != 0x0800 || n < 34)
		return;
	const uint8_t *ip = f + 14;
	p->proto = ip[9];
	p->src = th_r32(ip + 12);
	p->dst = th_r32(ip + 16);
	uint32_t tot = th_r16(ip + 2);
	p->csum_ok = th_csum(ip, 20, 0) == 0 && tot + 14 == n;
	if (p->proto == 1) {
		p->csum_ok = p->csum_ok && th_csum(ip + 20, tot - 20, 0) == 0;
		p->data = ip + 20;
		p->len = tot - 20;
		return;
	}
	if (p->proto != 6)
		return;
	const uint8_t *t = ip + 20;
	uint32_t tl = tot - 20, off = (uint32_t)(t[12] >> 4) * 4;
	p->csum_ok = p->csum_ok && th_csum(t, tl, th_pseudo(p->src, p->dst, tl)) == 0;
	p->sport = (uint16_t)th_r16(t); p->dport = (uint16_t)th_r16(t + 2);
	p->seq = th_r32(t + 4); p->ack = th_r32(t + 8);
	p->flags = t[13]; p->win = (uint16_t)th_r16(t + 14);
	p->data = t + off;
	p->len = tl - off;
	for (uint32_t i = 20; i < off;) {
		uint8_t k = t[i];
		if (k == 0)
			break;
		if (k == 1) { i++; continue; }
		uint8_t l = t[i + 1];
		if (k == 2) { p->has_mss = true; p->mss = (uint16_t)th_r16(t + i + 2); }
		if (k == 3) { p->has_ws = true; p->ws = t[i + 2]; }
		if (k == 4) p->sack_perm = true;
		if (k == 8) { p->has_ts = true; p->tsval = th_r32(t + i + 2); p->tsecr = th_r32(t + i + 6); }
		if (k == 5)
			for (uint32_t j = 0; j < (uint32_t)(l - 2) / 8 && j < 4; j++, p->nsack++) {
				p->sack[j][0] = th_r32(t + i + 2 + 8 * j);
				p->sack[j][1] = th_r32(t + i + 6 + 8 * j);
			}
		i += l;
	}
}

#endif
