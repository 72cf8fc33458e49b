/* The JSON object netio-server and netio-client print on stdout (docs/workloads.md): the
 * parts both write alike, around the fields of their own. */
#ifndef NETIO_RUNJSON_H
#define NETIO_RUNJSON_H

#include <stdint.h>

#include "json.h"

/* Opens the object on stdout with its "role". */
void wl_json_open(struct json *w, const char *role);

/* "bytes", "messages", "seconds", "throughput_gbps": a run's or a connection's figures. */
void wl_json_figures(struct json *w, uint64_t bytes, uint64_t messages, double seconds);

/* What a run's connections add up to alike in both workloads: the span from the first
 * connection's start to the last one's end, and the errors, the first kept. */
struct wl_outcome {
	double t0, t1;
	int errors;
	const char *first_error;
};

/* An outcome with no connection yet; global_error (NULL: none) is the whole run's own. */
void wl_outcome_start(struct wl_outcome *r, const char *global_error);

/* A connection that ran from start to end (start 0: it never started) with its error (an
 * empty one is none). */
void wl_outcome_add(struct wl_outcome *r, double start, double end, const char *error);

/* The span's seconds, 0 where no connection ran. */
double wl_outcome_seconds(const struct wl_outcome *r);

/* "errors" and "error", then closes the object; the first error also goes to stderr, one
 * line after prog's name. */
void wl_json_close(struct json *w, const char *prog, int errors, const char *first_error);

#endif
