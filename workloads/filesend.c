#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "filesend.h"

/* Bytes kept behind the write offset before pages are punched out: far more than any socket
 * send buffer holds, so no page punched can still wait for a retransmit's first send. */
#define KEEP_BEHIND  (64ll << 20)
#define PUNCH_EVERY  (16ll << 20)

static int write_all(int fd, const uint8_t *p, size_t len, off_t off)
{
	while (len) {
		ssize_t r = pwrite(fd, p, len, off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += r;
		len -= (size_t)r;
		off += r;
	}
	return 0;
}

/* Message n of connection conn, serialized, at offset off. */
static int write_message(struct wl_filemsg *f, uint32_t conn, uint64_t n, off_t off)
{
	wl_message_fill(&f->msg, conn, n);
	wl_message_serialize(&f->msg, f->flat);
	return write_all(f->fd, f->flat, f->size, off);
}

int wl_filemsg_init(struct wl_filemsg *f, size_t size, uint32_t conn, int verify)
{
	memset(f, 0, sizeof(*f));
	f->size = size;
	f->verify = verify;
	f->fd = memfd_create("netio-sendfile", MFD_CLOEXEC);
	if (f->fd < 0)
		return -1;
	f->flat = malloc(size);
	if (!f->flat || wl_message_init(&f->msg, size) < 0) {
		wl_filemsg_free(f);
		errno = ENOMEM;
		return -1;
	}
	if (!verify && write_message(f, conn, 0, 0) < 0) {
		int e = errno;

		wl_filemsg_free(f);
		errno = e;
		return -1;
	}
	return 0;
}

void wl_filemsg_free(struct wl_filemsg *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	free(f->flat);
	f->flat = NULL;
	wl_message_free(&f->msg);
}

/* Whole pages more than KEEP_BEHIND behind the write offset leave the file. */
static void punch_behind(struct wl_filemsg *f)
{
	long page = sysconf(_SC_PAGESIZE);
	off_t upto = f->next - KEEP_BEHIND;

	if (upto - f->punched < PUNCH_EVERY)
		return;
	upto -= upto % page;
	if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, f->punched,
		      upto - f->punched) == 0)
		f->punched = upto;
}

int wl_filemsg_prepare(struct wl_filemsg *f, uint32_t conn, uint64_t n, off_t *off)
{
	if (!f->verify) {
		*off = 0;
		return 0;
	}
	if (write_message(f, conn, n, f->next) < 0)
		return -1;
	*off = f->next;
	f->next += (off_t)f->size;
	punch_behind(f);
	return 0;
}
