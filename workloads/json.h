/* A minimal JSON writer for the workloads' one result object. */
#ifndef NETIO_JSON_H
#define NETIO_JSON_H

#include <stdint.h>
#include <stdio.h>

#define JW_MAX_DEPTH 16

struct jw {
	FILE *f;
	int depth;
	int count[JW_MAX_DEPTH];   /* members written at each level */
};

void jw_init(struct jw *w, FILE *f);
/* key is NULL inside arrays and for the top-level value. */
void jw_obj_begin(struct jw *w, const char *key);
void jw_obj_end(struct jw *w);
void jw_arr_begin(struct jw *w, const char *key);
void jw_arr_end(struct jw *w);
void jw_str(struct jw *w, const char *key, const char *val);   /* NULL -> null */
void jw_u64(struct jw *w, const char *key, uint64_t v);
void jw_int(struct jw *w, const char *key, long long v);
void jw_double(struct jw *w, const char *key, double v);      /* non-finite -> null */
void jw_bool(struct jw *w, const char *key, int v);
void jw_null(struct jw *w, const char *key);
/* Ends the top-level value with a newline and flushes. */
void jw_finish(struct jw *w);

#endif
