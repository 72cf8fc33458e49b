/* Per-socket congestion control and TCP_INFO figures. */
#ifndef NETIO_TCP_STATS_H
#define NETIO_TCP_STATS_H

#include <stdint.h>

struct json;

#define WL_CC_NAME_MAX 16   /* TCP_CA_NAME_MAX */

struct wl_tcp_stats {
	int valid;
	char cc[WL_CC_NAME_MAX + 1];
	uint32_t retrans;        /* tcpi_total_retrans */
	uint32_t rtt_us;         /* tcpi_rtt (smoothed) */
	uint64_t segs_out;       /* tcpi_segs_out */
	uint64_t bytes_retrans;  /* tcpi_bytes_retrans: data resent (a SYN's resends count none) */
};

/* setsockopt(TCP_CONGESTION). 0 or -1 with errno. */
int wl_tcp_set_cc(int fd, const char *name);
/* getsockopt(TCP_CONGESTION) into buf (NUL-terminated). 0 or -1 with errno. */
int wl_tcp_get_cc(int fd, char *buf, size_t len);
/* Applies the --cc choice: name given: must succeed (0 / -1 errno); name NULL: cubic if the
 * kernel allows it, else the system default is kept (always 0). */
int wl_tcp_apply_cc(int fd, const char *name);
/* TCP_INFO + TCP_CONGESTION. 0 or -1 with errno (s->valid says which). */
int wl_tcp_stats_read(int fd, struct wl_tcp_stats *s);
/* Writes "tcp": {cc, retrans, rtt_us, segs_out, bytes_retrans} (nulls where TCP_INFO was not
 * read). */
void wl_tcp_stats_json(struct json *w, const struct wl_tcp_stats *s);

#endif
