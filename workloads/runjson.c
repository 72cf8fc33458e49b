#include <stdio.h>

#include "netutil.h"
#include "runjson.h"

void wl_json_open(struct json *w, const char *role)
{
	json_init(w, stdout);
	json_begin_object(w);
	json_kv_string(w, "role", role);
}

void wl_json_figures(struct json *w, uint64_t bytes, uint64_t messages, double seconds)
{
	json_kv_uint(w, "bytes", bytes);
	json_kv_uint(w, "messages", messages);
	json_kv_double(w, "seconds", seconds);
	json_kv_double(w, "throughput_gbps", wl_gbps(bytes, seconds));
}

void wl_outcome_start(struct wl_outcome *r, const char *global_error)
{
	r->t0 = r->t1 = 0;
	r->errors = global_error ? 1 : 0;
	r->first_error = global_error;
}

void wl_outcome_add(struct wl_outcome *r, double start, double end, const char *error)
{
	if (start && (!r->t0 || start < r->t0))
		r->t0 = start;
	if (end > r->t1)
		r->t1 = end;
	if (!error[0])
		return;
	r->errors++;
	if (!r->first_error)
		r->first_error = error;
}

double wl_outcome_seconds(const struct wl_outcome *r)
{
	return r->t1 > r->t0 ? r->t1 - r->t0 : 0;
}

void wl_json_close(struct json *w, const char *prog, int errors, const char *first_error)
{
	json_kv_int(w, "errors", errors);
	json_kv_string(w, "error", first_error);
	json_end_object(w);
	json_finish(w);
	if (first_error)
		fprintf(stderr, "%s: %s\n", prog, first_error);
}
