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

/* Counts a connection's error (an empty one is none) and keeps the first. */
void wl_count_error(const char *error, int *errors, const char **first_error);

/* "errors" and "error", then closes the object; the first error also goes to stderr, one
 * line after prog's name. */
void wl_json_close(struct json *w, const char *prog, int errors, const char *first_error);

#endif
