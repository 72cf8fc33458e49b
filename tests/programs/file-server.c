/* file-server: serves a file over one TCP connection as a small web server would: a header
 * line written with send(2) (copied from its buffer), then the file's bytes with sendfile(2)
 * (spliced from the page cache, never copied from the user), REPEAT times.
 *
 *   file-server --file PATH [--repeat R] [--addr A] [--port P] [--netns NAME] [--ready-fd FD]
 *               [--timeout S]
 *
 * Listens on A:P (default 0.0.0.0, P 0: any port), writes `listening PORT` to FD and to
 * stderr, accepts one connection, serves, closes.
 *
 * JSON: {"program","port","file_bytes","repeat","header_bytes","spliced_bytes","bytes",
 *        "send_calls","sendfile_calls","seconds","error"} */
#include <netinet/in.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "progs.h"

struct server {
	int file, conn;
	unsigned long long file_bytes;
	unsigned long long header_bytes, spliced_bytes, send_calls, sendfile_calls;
	const char *error;
	int error_errno;
};

static int fail(struct server *s, const char *what)
{
	s->error = what;
	s->error_errno = errno;
	return -1;
}

static int send_header(struct server *s, unsigned long long n)
{
	char line[64];
	int len = snprintf(line, sizeof(line), "FILE %llu\r\n", n);

	for (int off = 0; off < len;) {
		ssize_t r = send(s->conn, line + off, (size_t)(len - off), 0);

		s->send_calls++;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return fail(s, "send");
		off += (int)r;
		s->header_bytes += (unsigned long long)r;
	}
	return 0;
}

static int send_file(struct server *s)
{
	off_t off = 0;

	while ((unsigned long long)off < s->file_bytes) {
		ssize_t r = sendfile(s->conn, s->file, &off, s->file_bytes - (unsigned long long)off);

		s->sendfile_calls++;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? fail(s, "sendfile") : (errno = EIO, fail(s, "file shrank"));
		s->spliced_bytes += (unsigned long long)r;
	}
	return 0;
}

/* Listen, say so, take one connection. The port, or -1. */
static int accept_one(struct server *s, struct sockaddr_in *a, unsigned long long ready_fd)
{
	socklen_t len = sizeof(*a);
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);

	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)a, sizeof(*a)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)a, &len) < 0)
		return fail(s, "listen");
	say_ready(ready_fd, "listening %d", ntohs(a->sin_port));
	fprintf(stderr, "listening %d\n", ntohs(a->sin_port));
	s->conn = accept(lfd, NULL, NULL);
	close(lfd);
	return s->conn < 0 ? fail(s, "accept") : ntohs(a->sin_port);
}

int main(int argc, char **argv)
{
	unsigned long long port = 0, repeat = 1, ready_fd = 0, timeout = 60;
	const char *addr = "0.0.0.0", *netns = NULL, *path = NULL;
	struct server s = { .file = -1, .conn = -1 };
	struct opt opts[] = {
		OPT_STR_("file", &path, true),
		OPT_NUM_("repeat", &repeat, 1, 1000000, false),
		OPT_STR_("addr", &addr, false),
		OPT_NUM_("port", &port, 0, 65535, false),
		OPT_STR_("netns", &netns, false),
		OPT_NUM_("ready-fd", &ready_fd, 3, 1023, false),
		OPT_NUM_("timeout", &timeout, 1, 3600, false),
		OPT_END,
	};
	struct sockaddr_in a;
	struct stat st;
	int bound;
	double t0;

	prog_name = "file-server";
	parse_options(opts, argc, argv);
	a = ipv4_addr(addr, port);
	s.file = open(path, O_RDONLY | O_CLOEXEC);
	if (s.file < 0 || fstat(s.file, &st) < 0 || !S_ISREG(st.st_mode) || !st.st_size)
		usage_error("--file '%s': not a readable, non-empty regular file", path);
	s.file_bytes = (unsigned long long)st.st_size;
	enter_netns(netns);
	alarm((unsigned)timeout);
	bound = accept_one(&s, &a, ready_fd);
	t0 = now_s();
	for (unsigned long long i = 0; bound >= 0 && i < repeat; i++)
		if (send_header(&s, s.file_bytes) < 0 || send_file(&s) < 0)
			break;
	if (s.conn >= 0 && close(s.conn) < 0 && !s.error)
		fail(&s, "close");
	printf("{\"program\":\"file-server\",\"port\":%d,\"file_bytes\":%llu,\"repeat\":%llu,"
	       "\"header_bytes\":%llu,\"spliced_bytes\":%llu,\"bytes\":%llu,\"send_calls\":%llu,"
	       "\"sendfile_calls\":%llu,\"seconds\":%.6f,", bound, s.file_bytes, repeat,
	       s.header_bytes, s.spliced_bytes, s.header_bytes + s.spliced_bytes, s.send_calls,
	       s.sendfile_calls, now_s() - t0);
	json_str_or_null("error", error_text(s.error, s.error_errno), "}\n");
	return report_error(s.error, s.error_errno);
}
