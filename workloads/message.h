/* A message: 8 separately heap-allocated fields of size/8 bytes, the remainder in the last.
 * The --verify pattern of every byte is a function of (connection, message number, field,
 * offset in the field), so a receiver can check any byte of the stream without state beyond
 * its position, and a buffer reused too early (message n+k's bytes where n's belong) shows. */
#ifndef NETIO_MESSAGE_H
#define NETIO_MESSAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define WL_FIELDS 8

struct wl_message {
	size_t size;
	size_t len[WL_FIELDS];
	uint8_t *field[WL_FIELDS];
};

/* Length of field i (0..7) of a message of size bytes. */
static inline size_t wl_field_len(size_t size, int i)
{
	return size / WL_FIELDS + (i == WL_FIELDS - 1 ? size % WL_FIELDS : 0);
}

/* Offset of field i in the serialized message. */
static inline size_t wl_field_offset(size_t size, int i)
{
	return (size_t)i * (size / WL_FIELDS);
}

/* Allocates the 8 fields (size >= 8). 0, or -1 with errno (ENOMEM, EINVAL). */
int wl_message_init(struct wl_message *m, size_t size);
/* The same with every field starting at a multiple of align (a power of two >= 8): a field
 * then spans the fewest pages, which a UDP zero-copy datagram (at most MAX_SKB_FRAGS page
 * fragments) needs. */
int wl_message_init_aligned(struct wl_message *m, size_t size, size_t align);
/* Pages the fields of a message of size bytes span at most when aligned to page_size. */
size_t wl_message_pages(size_t size, size_t page_size);
void wl_message_free(struct wl_message *m);

/* Pattern: byte off of field f of message msg on connection conn. */
uint8_t wl_pattern_byte(uint32_t conn, uint64_t msg, int field, size_t off);
/* Writes len pattern bytes starting at offset off of the field. */
void wl_pattern_fill(uint8_t *dst, size_t len, uint32_t conn, uint64_t msg, int field, size_t off);
/* Number of bytes in p[0..len) that differ from the pattern starting at offset off. */
size_t wl_pattern_check(const uint8_t *p, size_t len, uint32_t conn, uint64_t msg, int field,
			size_t off);

/* Fill every field with message msg's pattern / count the bytes that differ from it. */
void wl_message_fill(struct wl_message *m, uint32_t conn, uint64_t msg);
size_t wl_message_check(const struct wl_message *m, uint32_t conn, uint64_t msg);

/* Copies the 8 fields, in order, into buf (m->size bytes). */
void wl_message_serialize(const struct wl_message *m, uint8_t *buf);
/* Points iov[0..7] at the fields. */
void wl_message_iov(const struct wl_message *m, struct iovec iov[WL_FIELDS]);

/* Drops the first n bytes (less than their total) from the iovec array *iov of *cnt entries,
 * for resuming a partial sendmsg(): *iov and *cnt move past whole entries, and the first
 * remaining entry is shortened in place (so *iov must be a writable copy). */
void wl_iov_advance(struct iovec **iov, size_t *cnt, size_t n);

/* Checks a byte stream of consecutive messages (0, 1, 2, ...) of one connection, fed in
 * pieces of any length. */
struct wl_verifier {
	size_t size;
	uint32_t conn;
	uint64_t msg;          /* message being received */
	int field;             /* field being received */
	size_t off;            /* offset in that field */
	int cur_bad;           /* current message has a bad byte */
	uint64_t bad_bytes;
	uint64_t bad_messages; /* complete messages with at least one bad byte */
	uint64_t period;       /* the first bad message, if its bytes were message 0's */
	int stray;             /* a bad byte that is not a resent message's */
};

void wl_verifier_init(struct wl_verifier *v, size_t size, uint32_t conn);
void wl_verifier_feed(struct wl_verifier *v, const uint8_t *data, size_t len);
/* Every bad byte so far belongs to a message resent unchanged: message n carries message
 * n % period's bytes. That is what a sender that fills its messages once sends (a server
 * started without --verify: one message, or a ring of period messages), not a corruption. */
int wl_verifier_resends(const struct wl_verifier *v);
/* Bytes of the message in progress (0 at a message boundary). */
size_t wl_verifier_partial(const struct wl_verifier *v);

#endif
