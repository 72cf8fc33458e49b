/* A tiny streaming JSON writer (no allocation, no DOM), shared by the tracer (user/) and the
 * workloads (workloads/): one object on stdout or in a file. Commas, quoting and escaping are
 * handled for you; keys and values alternate inside objects.
 *
 *   struct json j;
 *   json_init(&j, stdout);
 *   json_begin_object(&j);
 *     json_key(&j, "bytes");  json_uint(&j, 42);
 *     json_key(&j, "list");   json_begin_array(&j); json_int(&j, -1); json_null(&j); json_end(&j);
 *   json_end(&j);            // closes whatever is open (object or array)
 *   json_finish(&j);         // newline + fflush
 *
 * json_raw() inserts an already formatted JSON value (e.g. produced by another writer into a
 * memory stream). Nesting is limited to JSON_MAX_DEPTH. */
#ifndef NETIO_JSON_H
#define NETIO_JSON_H
#include <stdbool.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

struct json {
	FILE *f;
	int depth;
	bool pretty;                      /* indent with two spaces per level */
	bool first[JSON_MAX_DEPTH];       /* no element written yet at this level */
	char kind[JSON_MAX_DEPTH];        /* '{' or '[' */
	bool after_key;                   /* a key was written, its value comes next */
};

void json_init(struct json *j, FILE *f);
void json_set_pretty(struct json *j, bool pretty);

void json_begin_object(struct json *j);
void json_begin_array(struct json *j);
void json_end(struct json *j);            /* closes the innermost object or array */
void json_end_object(struct json *j);     /* same as json_end, for readability */
void json_end_array(struct json *j);

void json_key(struct json *j, const char *key);
void json_int(struct json *j, long long v);
void json_uint(struct json *j, unsigned long long v);
void json_double(struct json *j, double v);   /* 9 significant digits, integral ones as N.0;
						 * NaN and infinities are written as null */
void json_string(struct json *j, const char *s); /* NULL is written as null */
void json_null(struct json *j);
void json_bool(struct json *j, bool v);
void json_raw(struct json *j, const char *text); /* a complete JSON value, written verbatim */

/* key + value in one call */
void json_kv_int(struct json *j, const char *key, long long v);
void json_kv_uint(struct json *j, const char *key, unsigned long long v);
void json_kv_double(struct json *j, const char *key, double v);
void json_kv_string(struct json *j, const char *key, const char *s);
void json_kv_bool(struct json *j, const char *key, bool v);
void json_kv_null(struct json *j, const char *key);
/* key: v where it was counted, else null (a count nobody could take is not a zero) */
void json_kv_count(struct json *j, const char *key, bool counted, unsigned long long v);

/* Write a trailing newline and flush. */
void json_finish(struct json *j);

#endif
