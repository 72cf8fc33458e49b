// SPDX-License-Identifier: GPL-2.0
/* Tiny streaming JSON writer, the tracer's and the workloads' one: see json.h. */
#include <math.h>	/* isnan, isinf: macros, no libm needed */
#include <string.h>
#include "json.h"

void json_init(struct json *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
}

void json_set_pretty(struct json *j, bool pretty)
{
	j->pretty = pretty;
}

static void indent(struct json *j)
{
	if (!j->pretty)
		return;
	fputc('\n', j->f);
	for (int i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

/* Called before every value and every key. */
static void before_item(struct json *j)
{
	if (j->after_key) {		/* value of a key: no comma */
		j->after_key = false;
		return;
	}
	if (j->depth == 0)
		return;
	if (!j->first[j->depth])
		fputc(',', j->f);
	j->first[j->depth] = false;
	indent(j);
}

static void write_escaped(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		case '\b': fputs("\\b", f); break;
		case '\f': fputs("\\f", f); break;
		default:
			if (*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

static void begin(struct json *j, char kind)
{
	before_item(j);
	fputc(kind, j->f);
	if (j->depth + 1 < JSON_MAX_DEPTH) {
		j->depth++;
		j->first[j->depth] = true;
		j->kind[j->depth] = kind;
	}
}

void json_begin_object(struct json *j) { begin(j, '{'); }
void json_begin_array(struct json *j) { begin(j, '['); }

void json_end(struct json *j)
{
	if (j->depth == 0)
		return;
	char kind = j->kind[j->depth];
	bool empty = j->first[j->depth];
	j->after_key = false;
	j->depth--;
	if (!empty)
		indent(j);
	fputc(kind == '{' ? '}' : ']', j->f);
}

void json_end_object(struct json *j) { json_end(j); }
void json_end_array(struct json *j) { json_end(j); }

void json_key(struct json *j, const char *key)
{
	before_item(j);
	write_escaped(j->f, key ? key : "");
	fputs(j->pretty ? ": " : ":", j->f);
	j->after_key = true;
}

void json_int(struct json *j, long long v)
{
	before_item(j);
	fprintf(j->f, "%lld", v);
}

void json_uint(struct json *j, unsigned long long v)
{
	before_item(j);
	fprintf(j->f, "%llu", v);
}

void json_double(struct json *j, double v)
{
	before_item(j);
	if (isnan(v) || isinf(v))
		fputs("null", j->f);
	else if (v > -1e15 && v < 1e15 && (double)(long long)v == v)
		fprintf(j->f, "%.1f", v);	/* stays a float for the reader */
	else
		fprintf(j->f, "%.9g", v);
}

void json_string(struct json *j, const char *s)
{
	before_item(j);
	if (!s)
		fputs("null", j->f);
	else
		write_escaped(j->f, s);
}

void json_null(struct json *j)
{
	before_item(j);
	fputs("null", j->f);
}

void json_bool(struct json *j, bool v)
{
	before_item(j);
	fputs(v ? "true" : "false", j->f);
}

void json_raw(struct json *j, const char *text)
{
	before_item(j);
	/* strip trailing whitespace so that the next comma lands right */
	size_t n = text ? strlen(text) : 0;
	while (n && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\r'))
		n--;
	if (!n)
		fputs("null", j->f);
	else
		fwrite(text, 1, n, j->f);
}

void json_kv_int(struct json *j, const char *k, long long v) { json_key(j, k); json_int(j, v); }
void json_kv_uint(struct json *j, const char *k, unsigned long long v) { json_key(j, k); json_uint(j, v); }
void json_kv_double(struct json *j, const char *k, double v) { json_key(j, k); json_double(j, v); }
void json_kv_string(struct json *j, const char *k, const char *s) { json_key(j, k); json_string(j, s); }
void json_kv_bool(struct json *j, const char *k, bool v) { json_key(j, k); json_bool(j, v); }
void json_kv_null(struct json *j, const char *k) { json_key(j, k); json_null(j); }

void json_kv_count(struct json *j, const char *k, bool counted, unsigned long long v)
{
	if (counted)
		json_kv_uint(j, k, v);
	else
		json_kv_null(j, k);
}

void json_finish(struct json *j)
{
	fputc('\n', j->f);
	fflush(j->f);
}
