/* The sendfile strategy's message: serialized into a memfd and sent from its page-cache pages
 * with sendfile(2), which splices them into the socket instead of copying them.
 *
 * A page spliced into a socket stays referenced by its skbs until the peer acknowledges it,
 * and nothing tells the sender when that is: a page rewritten while in flight changes bytes
 * already "sent". So the file is never overwritten. Without --verify every message is the same
 * (message 0, written once, sent from offset 0, as the other strategies fill their fields
 * once); with --verify each message is written to fresh file pages after the last, and whole
 * pages far behind are punched out of the file (the skbs keep their own references). */
#ifndef NETIO_FILESEND_H
#define NETIO_FILESEND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "message.h"

struct wl_filemsg {
	int fd;
	size_t size;
	int verify;
	off_t next;              /* verify: where the next message is written */
	off_t punched;           /* verify: bytes before this offset were punched out */
	uint8_t *flat;           /* verify: the message serialized before it is written */
	struct wl_message msg;   /* verify: its 8 fields, filled with the pattern */
};

/* Creates the file and, without verify, writes message 0 of connection conn.
 * 0, or -1 with errno. */
int wl_filemsg_init(struct wl_filemsg *f, size_t size, uint32_t conn, int verify);
void wl_filemsg_free(struct wl_filemsg *f);
/* The file offset message n starts at (under verify, written there first). 0 or -1 with errno. */
int wl_filemsg_prepare(struct wl_filemsg *f, uint32_t conn, uint64_t n, off_t *off);

#endif
