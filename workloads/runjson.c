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

void wl_count_error(const char *error, int *errors, const char **first_error)
{
	if (!error[0])
		return;
	(*errors)++;
	if (!*first_error)
		*first_error = error;
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
