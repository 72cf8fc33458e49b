#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "json.h"
#include "tcp_stats.h"

int wl_tcp_set_cc(int fd, const char *name)
{
	return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name));
}

int wl_tcp_get_cc(int fd, char *buf, size_t len)
{
	char tmp[WL_CC_NAME_MAX + 1] = { 0 };
	socklen_t n = WL_CC_NAME_MAX;

	if (len == 0) {
		errno = EINVAL;
		return -1;
	}
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, tmp, &n) < 0)
		return -1;
	tmp[n < WL_CC_NAME_MAX ? n : WL_CC_NAME_MAX] = '\0';
	strncpy(buf, tmp, len - 1);
	buf[len - 1] = '\0';
	return 0;
}

int wl_tcp_apply_cc(int fd, const char *name)
{
	if (name)
		return wl_tcp_set_cc(fd, name);
	(void)wl_tcp_set_cc(fd, "cubic");
	return 0;
}

int wl_tcp_stats_read(int fd, struct wl_tcp_stats *s)
{
	struct tcp_info ti;
	socklen_t n = sizeof(ti);

	memset(s, 0, sizeof(*s));
	if (wl_tcp_get_cc(fd, s->cc, sizeof(s->cc)) < 0)
		s->cc[0] = '\0';
	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &n) < 0)
		return -1;
	s->retrans = ti.tcpi_total_retrans;
	s->rtt_us = ti.tcpi_rtt;
	if (n >= offsetof(struct tcp_info, tcpi_segs_out) + sizeof(ti.tcpi_segs_out))
		s->segs_out = ti.tcpi_segs_out;
	if (n >= offsetof(struct tcp_info, tcpi_bytes_retrans) + sizeof(ti.tcpi_bytes_retrans))
		s->bytes_retrans = ti.tcpi_bytes_retrans;
	s->valid = 1;
	return 0;
}

void wl_tcp_stats_json(struct json *w, const struct wl_tcp_stats *t)
{
	json_key(w, "tcp");
	json_begin_object(w);
	if (t->valid) {
		json_kv_string(w, "cc", t->cc[0] ? t->cc : NULL);
		json_kv_uint(w, "retrans", t->retrans);
		json_kv_uint(w, "rtt_us", t->rtt_us);
		json_kv_uint(w, "segs_out", t->segs_out);
		json_kv_uint(w, "bytes_retrans", t->bytes_retrans);
	} else {
		json_kv_null(w, "cc");
		json_kv_null(w, "retrans");
		json_kv_null(w, "rtt_us");
		json_kv_null(w, "segs_out");
		json_kv_null(w, "bytes_retrans");
	}
	json_end_object(w);
}
