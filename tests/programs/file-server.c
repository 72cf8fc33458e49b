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
#include "stream.h"

struct server {
	int file;
	unsigned long long file_bytes, spliced_bytes, sendfile_calls;
	struct stream_send conn;	/* the connection; its send(2)s are the header lines */
	struct prog_error err;
};

static int send_header(struct server *s, unsigned long long n)
{
	char line[64];
	int len = snprintf(line, sizeof(line), "FILE %llu\r\n", n);

	return send_whole(&s->conn, line, (size_t)len) < 0 ? fail(&s->err, "send") : 0;
}

static int send_file(struct server *s)
{
	off_t off = 0;

	while ((unsigned long long)off < s->file_bytes) {
		ssize_t r = sendfile(s->conn.fd, s->file, &off,
				     s->file_bytes - (unsigned long long)off);

		s->sendfile_calls++;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return fail(&s->err, "sendfile");
		if (r == 0)
			return fail_with(&s->err, "file shrank", EIO);
		s->spliced_bytes += (unsigned long long)r;
	}
	return 0;
}

static void print_json(const struct server *s, const struct sockaddr_in *a,
		       unsigned long long repeat)
{
	json_begin();
	printf("\"port\":%d,\"file_bytes\":%llu,\"repeat\":%llu,\"header_bytes\":%llu,"
	       "\"spliced_bytes\":%llu,\"bytes\":%llu,\"send_calls\":%llu,\"sendfile_calls\":%llu,",
	       ntohs(a->sin_port), s->file_bytes, repeat, s->conn.bytes, s->spliced_bytes,
	       s->conn.bytes + s->spliced_bytes, s->conn.calls, s->sendfile_calls);
}

int main(int argc, char **argv)
{
	unsigned long long repeat = 1;
	const char *path = NULL;
	struct place pl = { .addr = "0.0.0.0", .timeout = 60 };
	struct server s = { .file = -1 };
	struct opt opts[] = {
		OPT_STR_("file", &path, true),
		OPT_NUM_("repeat", &repeat, 1, 1000000, false),
		OPTS_LISTEN_ON(&pl),
		OPTS_RUN(&pl),
		OPT_READY_FD(&pl),
		OPT_END,
	};
	struct sockaddr_in a;
	struct stat st;
	double t0;

	prog_start("file-server", opts, argc, argv);
	s.file = open(path, O_RDONLY | O_CLOEXEC);
	if (s.file < 0 || fstat(s.file, &st) < 0 || !S_ISREG(st.st_mode) || !st.st_size)
		usage_error("--file '%s': not a readable, non-empty regular file", path);
	s.file_bytes = (unsigned long long)st.st_size;
	a = place_enter(&pl);
	alarm((unsigned)pl.timeout);
	s.conn.fd = tcp_accept_one(&a, pl.ready_fd, &s.err);
	t0 = now_s();
	for (unsigned long long i = 0; s.conn.fd >= 0 && i < repeat; i++)
		if (send_header(&s, s.file_bytes) < 0 || send_file(&s) < 0)
			break;
	if (s.conn.fd >= 0 && close(s.conn.fd) < 0)
		fail(&s.err, "close");
	print_json(&s, &a, repeat);
	return json_end(now_s() - t0, &s.err);
}
