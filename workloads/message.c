#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "message.h"

#define GOLDEN 0x9e3779b97f4a7c15ULL

static inline uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Word k (bytes 8k..8k+7, little-endian) of a field is seed + k * GOLDEN. */
static inline uint64_t field_seed(uint32_t conn, uint64_t msg, int field)
{
	return mix64(mix64((uint64_t)conn + 1) ^ (msg * WL_FIELDS + (uint64_t)field));
}

int wl_message_init(struct wl_message *m, size_t size)
{
	return wl_message_init_aligned(m, size, 0);
}

int wl_message_init_aligned(struct wl_message *m, size_t size, size_t align)
{
	int i;

	memset(m, 0, sizeof(*m));
	if (size < WL_FIELDS) {
		errno = EINVAL;
		return -1;
	}
	m->size = size;
	for (i = 0; i < WL_FIELDS; i++) {
		m->len[i] = wl_field_len(size, i);
		m->field[i] = align ? aligned_alloc(align, (m->len[i] + align - 1) & ~(align - 1))
				    : malloc(m->len[i]);
		if (!m->field[i]) {
			wl_message_free(m);
			errno = ENOMEM;
			return -1;
		}
	}
	return 0;
}

size_t wl_message_pages(size_t size, size_t page_size)
{
	size_t pages = 0;
	int i;

	for (i = 0; i < WL_FIELDS; i++)
		pages += (wl_field_len(size, i) + page_size - 1) / page_size;
	return pages;
}

void wl_message_free(struct wl_message *m)
{
	int i;

	for (i = 0; i < WL_FIELDS; i++) {
		free(m->field[i]);
		m->field[i] = NULL;
	}
}

uint8_t wl_pattern_byte(uint32_t conn, uint64_t msg, int field, size_t off)
{
	uint64_t w = field_seed(conn, msg, field) + (uint64_t)(off / 8) * GOLDEN;

	return (uint8_t)(w >> (8 * (off % 8)));
}

void wl_pattern_fill(uint8_t *dst, size_t len, uint32_t conn, uint64_t msg, int field, size_t off)
{
	uint64_t seed = field_seed(conn, msg, field);
	uint64_t w = seed + (uint64_t)(off / 8) * GOLDEN;
	size_t i = 0;

	/* Up to the next word boundary of the field, byte by byte. */
	for (; i < len && (off + i) % 8; i++) {
		dst[i] = (uint8_t)(w >> (8 * ((off + i) % 8)));
		if ((off + i) % 8 == 7)
			w += GOLDEN;
	}
	for (; i + 8 <= len; i += 8) {
		uint64_t le = htole64(w);

		memcpy(dst + i, &le, 8);
		w += GOLDEN;
	}
	for (; i < len; i++)
		dst[i] = (uint8_t)(w >> (8 * ((off + i) % 8)));
}

static inline size_t bytes_differing(uint64_t x)
{
	size_t n = 0;

	for (; x; x >>= 8)
		n += (x & 0xff) != 0;
	return n;
}

size_t wl_pattern_check(const uint8_t *p, size_t len, uint32_t conn, uint64_t msg, int field,
			size_t off)
{
	uint64_t w = field_seed(conn, msg, field) + (uint64_t)(off / 8) * GOLDEN;
	size_t i = 0, bad = 0;

	for (; i < len && (off + i) % 8; i++) {
		bad += p[i] != (uint8_t)(w >> (8 * ((off + i) % 8)));
		if ((off + i) % 8 == 7)
			w += GOLDEN;
	}
	for (; i + 8 <= len; i += 8) {
		uint64_t got;

		memcpy(&got, p + i, 8);
		got = le64toh(got);
		if (__builtin_expect(got != w, 0))
			bad += bytes_differing(got ^ w);
		w += GOLDEN;
	}
	for (; i < len; i++)
		bad += p[i] != (uint8_t)(w >> (8 * ((off + i) % 8)));
	return bad;
}

void wl_message_fill(struct wl_message *m, uint32_t conn, uint64_t msg)
{
	int i;

	for (i = 0; i < WL_FIELDS; i++)
		wl_pattern_fill(m->field[i], m->len[i], conn, msg, i, 0);
}

size_t wl_message_check(const struct wl_message *m, uint32_t conn, uint64_t msg)
{
	size_t bad = 0;
	int i;

	for (i = 0; i < WL_FIELDS; i++)
		bad += wl_pattern_check(m->field[i], m->len[i], conn, msg, i, 0);
	return bad;
}

void wl_message_serialize(const struct wl_message *m, uint8_t *buf)
{
	int i;

	for (i = 0; i < WL_FIELDS; i++) {
		memcpy(buf, m->field[i], m->len[i]);
		buf += m->len[i];
	}
}

void wl_message_iov(const struct wl_message *m, struct iovec iov[WL_FIELDS])
{
	int i;

	for (i = 0; i < WL_FIELDS; i++) {
		iov[i].iov_base = m->field[i];
		iov[i].iov_len = m->len[i];
	}
}

void wl_iov_advance(struct iovec **iov, size_t *cnt, size_t n)
{
	while (*cnt && n >= (*iov)->iov_len) {
		n -= (*iov)->iov_len;
		(*iov)++;
		(*cnt)--;
	}
	if (*cnt && n) {
		(*iov)->iov_base = (uint8_t *)(*iov)->iov_base + n;
		(*iov)->iov_len -= n;
	}
}

void wl_verifier_init(struct wl_verifier *v, size_t size, uint32_t conn)
{
	memset(v, 0, sizeof(*v));
	v->size = size;
	v->conn = conn;
}

/* A piece with bad bytes: is it a resent message's? The first such piece sets the period
 * (its message, if the bytes are message 0's); every later one must be message n % period. */
static void classify_bad_piece(struct wl_verifier *v, const uint8_t *data, size_t n)
{
	if (v->stray)
		return;
	if (!v->period)
		v->period = v->msg;	/* 0 when message 0 itself is wrong: stray */
	if (!v->period ||
	    wl_pattern_check(data, n, v->conn, v->msg % v->period, v->field, v->off))
		v->stray = 1;
}

int wl_verifier_resends(const struct wl_verifier *v)
{
	return v->bad_bytes && !v->stray;
}

void wl_verifier_feed(struct wl_verifier *v, const uint8_t *data, size_t len)
{
	while (len) {
		size_t flen = wl_field_len(v->size, v->field);
		size_t n = flen - v->off;
		size_t bad;

		if (n > len)
			n = len;
		bad = wl_pattern_check(data, n, v->conn, v->msg, v->field, v->off);
		if (bad) {
			v->bad_bytes += bad;
			v->cur_bad = 1;
			classify_bad_piece(v, data, n);
		}
		data += n;
		len -= n;
		v->off += n;
		if (v->off == flen) {
			v->off = 0;
			if (++v->field == WL_FIELDS) {
				v->field = 0;
				v->bad_messages += v->cur_bad;
				v->cur_bad = 0;
				v->msg++;
			}
		}
	}
}

size_t wl_verifier_partial(const struct wl_verifier *v)
{
	return wl_field_offset(v->size, v->field) + v->off;
}
