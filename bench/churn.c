/* netio-churn: the churn bench's load (bench/churn.py, docs/bench.md). Thousands of
 * short-lived processes, threads and TCP connections over loopback, each connection sending a
 * little: what the tracer pays per fork, per thread exit and per socket state change, where
 * the per-message benches see none of them.
 *
 *   netio-churn [--processes P] [--threads T] [--connections C] [--bytes B] [--parallel N]
 *               [--netns NAME]
 *
 * The process listens on 127.0.0.1 (in NAME's network namespace if given) and one acceptor
 * thread receives every connection to its end. The main thread forks P children, at most N
 * alive at once; each child starts T threads, which between them open C / (P x T) connections
 * (the remainder to the first threads), one after another: connect, send B bytes, close. A
 * child exits 0 when every byte of its threads was sent. At the end it prints its own
 * accounting as JSON on stdout, to check the tracer's against:
 *   {"processes", "threads", "connections", "bytes_sent", "bytes_received", "seconds"}
 * (threads: the children's, not each process's main thread nor the acceptor). Exit 0 when
 * every child succeeded and bytes_received == bytes_sent, 1 otherwise, 2 on usage. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loops.h"

struct opts {
	long processes, threads, connections, bytes, parallel;
	const char *netns;
};

struct client {
	const struct opts *o;
	struct sockaddr_in addr;
	long first, count;	/* this thread's connections: global indices first.. */
	int failed;
};

static char payload[65536];

/* one connection: connect, send every byte, close; 0 when all were sent */
static int one_connection(const struct sockaddr_in *addr, long bytes)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	long sent = 0;

	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr))) {
		close(fd);
		return -1;
	}
	while (sent < bytes) {
		long chunk = bytes - sent < (long)sizeof(payload) ? bytes - sent : (long)sizeof(payload);
		ssize_t n = send(fd, payload, chunk, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		sent += n;
	}
	close(fd);
	return sent == bytes ? 0 : -1;
}

static void *client_thread(void *arg)
{
	struct client *c = arg;

	for (long i = 0; i < c->count && !c->failed; i++)
		c->failed = one_connection(&c->addr, c->o->bytes) != 0;
	return NULL;
}

/* child number k of the parent: its threads and their connections; the exit status */
static int child(const struct opts *o, const struct sockaddr_in *addr, long k)
{
	long per = o->connections / (o->processes * o->threads);
	long extra = o->connections % (o->processes * o->threads);
	struct client c[o->threads];
	pthread_t tid[o->threads];
	int failed = 0;

	for (long t = 0; t < o->threads; t++) {
		long g = k * o->threads + t;	/* the thread's global index */

		c[t] = (struct client){ .o = o, .addr = *addr, .count = per + (g < extra) };
		if (pthread_create(&tid[t], NULL, client_thread, &c[t])) {
			c[t].failed = 1;
			tid[t] = 0;
		}
	}
	for (long t = 0; t < o->threads; t++) {
		if (tid[t])
			pthread_join(tid[t], NULL);
		failed |= c[t].failed;
	}
	return failed;
}

struct acceptor {
	int listen_fd;
	long connections;	/* to accept */
	long accepted;
	uint64_t bytes;
};

/* every connection read to its end, one after another */
static void *acceptor_thread(void *arg)
{
	struct acceptor *a = arg;
	static char buf[65536];

	while (a->accepted < a->connections) {
		int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		ssize_t n;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break;	/* the listener shut down: a child failed */
		}
		a->accepted++;
		while ((n = recv(fd, buf, sizeof(buf), 0)) != 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				break;
			a->bytes += n;
		}
		close(fd);
	}
	return NULL;
}

static int enter_netns(const char *name)
{
	char path[256];
	int fd, r;

	snprintf(path, sizeof(path), "/var/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	r = setns(fd, CLONE_NEWNET);
	close(fd);
	return r;
}

static int listen_loopback(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	*addr = (struct sockaddr_in){ .sin_family = AF_INET,
				      .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0 || bind(fd, (struct sockaddr *)addr, sizeof(*addr)) ||
	    listen(fd, SOMAXCONN) || getsockname(fd, (struct sockaddr *)addr, &len))
		return -1;
	return fd;
}

/* the P children, at most o->parallel alive at once; returns how many failed */
static long fork_children(const struct opts *o, const struct sockaddr_in *addr, int listen_fd)
{
	long alive = 0, failed = 0;
	int status;

	for (long k = 0; k < o->processes; k++) {
		pid_t pid;

		if (alive == o->parallel) {
			if (wait(&status) > 0)
				failed += !WIFEXITED(status) || WEXITSTATUS(status);
			alive--;
		}
		pid = fork();
		if (pid == 0) {
			close(listen_fd);
			_exit(child(o, addr, k));
		}
		if (pid < 0)
			failed++;
		else
			alive++;
	}
	while (alive-- > 0)
		if (wait(&status) > 0)
			failed += !WIFEXITED(status) || WEXITSTATUS(status);
	return failed;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "processes", 1, 0, 'p' }, { "threads", 1, 0, 't' }, { "connections", 1, 0, 'c' },
		{ "bytes", 1, 0, 'b' }, { "parallel", 1, 0, 'j' }, { "netns", 1, 0, 'n' }, { 0 } };
	int opt;

	*o = (struct opts){ .processes = 300, .threads = 4, .connections = 2400, .bytes = 1000,
			    .parallel = 8 };
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		long *v = opt == 'p' ? &o->processes : opt == 't' ? &o->threads :
			  opt == 'c' ? &o->connections : opt == 'b' ? &o->bytes :
			  opt == 'j' ? &o->parallel : NULL;

		if (opt == 'n')
			o->netns = optarg;
		else if (!v)
			return -1;
		else
			*v = strtol(optarg, NULL, 10);
	}
	if (optind != argc || o->processes < 1 || o->processes > 100000 || o->threads < 1 ||
	    o->threads > 256 || o->connections < 0 || o->connections > 1000000 || o->bytes < 1 ||
	    o->bytes > (1 << 24) || o->parallel < 1)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct acceptor a = {};
	struct sockaddr_in addr;
	struct opts o;
	pthread_t acc;
	long failed;
	double t0;

	if (parse(argc, argv, &o)) {
		fprintf(stderr, "usage: netio-churn [--processes 1..100000] [--threads 1..256] "
			"[--connections 0..1000000] [--bytes 1..16777216] [--parallel N] "
			"[--netns NAME]\n");
		return 2;
	}
	/* before any socket or thread: setns moves the calling thread only */
	if (o.netns && enter_netns(o.netns)) {
		fprintf(stderr, "netio-churn: netns %s: %s\n", o.netns, strerror(errno));
		return 1;
	}
	a.listen_fd = listen_loopback(&addr);
	if (a.listen_fd < 0) {
		fprintf(stderr, "netio-churn: listen: %s\n", strerror(errno));
		return 1;
	}
	a.connections = o.connections;
	t0 = bench_now();
	if (pthread_create(&acc, NULL, acceptor_thread, &a)) {
		fprintf(stderr, "netio-churn: acceptor thread: %s\n", strerror(errno));
		return 1;
	}
	failed = fork_children(&o, &addr, a.listen_fd);
	if (failed)	/* their connections never come: the acceptor must not wait for them */
		shutdown(a.listen_fd, SHUT_RDWR);
	pthread_join(acc, NULL);
	printf("{\"processes\": %ld, \"threads\": %ld, \"connections\": %ld, \"bytes_sent\": %ld, "
	       "\"bytes_received\": %llu, \"processes_failed\": %ld, \"seconds\": %.6f}\n",
	       o.processes, o.processes * o.threads, a.accepted, o.connections * o.bytes,
	       (unsigned long long)a.bytes, failed, bench_now() - t0);
	if (failed || a.bytes != (uint64_t)(o.connections * o.bytes)) {
		fprintf(stderr, "netio-churn: %ld of %ld processes failed, %llu of %ld bytes "
			"received\n", failed, o.processes, (unsigned long long)a.bytes,
			o.connections * o.bytes);
		return 1;
	}
	return 0;
}
