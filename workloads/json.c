#include <math.h>

#include "json.h"

void jw_init(struct jw *w, FILE *f)
{
	w->f = f;
	w->depth = 0;
	w->count[0] = 0;
}

static void put_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void member(struct jw *w, const char *key)
{
	if (w->count[w->depth]++)
		fputc(',', w->f);
	if (key) {
		put_string(w->f, key);
		fputc(':', w->f);
	}
}

static void open_level(struct jw *w, const char *key, char c)
{
	member(w, key);
	fputc(c, w->f);
	if (w->depth + 1 < JW_MAX_DEPTH)
		w->depth++;
	w->count[w->depth] = 0;
}

static void close_level(struct jw *w, char c)
{
	fputc(c, w->f);
	if (w->depth > 0)
		w->depth--;
}

void jw_obj_begin(struct jw *w, const char *key) { open_level(w, key, '{'); }
void jw_obj_end(struct jw *w) { close_level(w, '}'); }
void jw_arr_begin(struct jw *w, const char *key) { open_level(w, key, '['); }
void jw_arr_end(struct jw *w) { close_level(w, ']'); }

void jw_str(struct jw *w, const char *key, const char *val)
{
	member(w, key);
	if (val)
		put_string(w->f, val);
	else
		fputs("null", w->f);
}

void jw_u64(struct jw *w, const char *key, uint64_t v)
{
	member(w, key);
	fprintf(w->f, "%llu", (unsigned long long)v);
}

void jw_int(struct jw *w, const char *key, long long v)
{
	member(w, key);
	fprintf(w->f, "%lld", v);
}

void jw_double(struct jw *w, const char *key, double v)
{
	member(w, key);
	if (isfinite(v))
		fprintf(w->f, "%.9g", v);
	else
		fputs("null", w->f);
}

void jw_bool(struct jw *w, const char *key, int v)
{
	member(w, key);
	fputs(v ? "true" : "false", w->f);
}

void jw_null(struct jw *w, const char *key)
{
	member(w, key);
	fputs("null", w->f);
}

void jw_finish(struct jw *w)
{
	fputc('\n', w->f);
	fflush(w->f);
}
