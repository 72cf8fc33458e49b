// SPDX-License-Identifier: GPL-2.0
/* A snapshot: the maps read (stats.c), the perf counters and the samples added, written as
 * the trace object (docs/tracer.md), and the folded stacks beside it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "json.h"
#include "tracer.h"

static void write_trace_json(struct tracer *tr, FILE *out, const char *folded, struct snapshot *s)
{
	struct json j;

	json_init(&j, out);
	json_begin_object(&j);
	stats_write_json(&tr->bpf, s, &j);
	json_key(&j, "perf");
	if (tr->pc) {
		char *buf = NULL;
		size_t len = 0;
		FILE *ms = open_memstream(&buf, &len);
		if (ms) {
			perf_counters_write_json(tr->pc, &s->k, ms);
			fclose(ms);
			json_raw(&j, buf);
			free(buf);
		} else {
			json_null(&j);
		}
	} else {
		json_null(&j);
	}
	json_key(&j, "samples");
	if (tr->prof) {
		long lost = 0, total = 0;
		if (folded) {
			FILE *ff = fopen(folded, "w");
			if (ff) {
				profiler_write_folded(tr->prof, ff);
				fclose(ff);
			} else {
				fprintf(stderr, "netio-tracer: %s: %s\n", folded, strerror(errno));
			}
		}
		total = profiler_samples(tr->prof, &lost);
		json_begin_object(&j);
		json_kv_int(&j, "total", total);
		json_kv_int(&j, "lost", lost);
		profiler_write_json(tr->prof, &j);
		json_end(&j);
	} else {
		json_null(&j);
		if (folded) {
			/* no sampling: an empty stack file rather than none */
			FILE *ff = fopen(folded, "w");
			if (ff)
				fclose(ff);
		}
	}
	json_end(&j);
	json_finish(&j);
}

/* Write the snapshot to path atomically (tmp + rename). */
int snapshot_to(struct tracer *tr, const char *path, const char *folded, char *err,
		size_t errlen, bool view)
{
	struct snapshot s;
	char tmp[4096];
	FILE *f;

	tr->base.share = stats_share(tr);
	if (stats_read(&tr->bpf, &tr->base, tr->pids, tr->npids, &s)) {
		snprintf(err, errlen, "cannot read the maps");
		return -1;
	}
	if (!path || !strcmp(path, "-")) {
		write_trace_json(tr, stdout, folded, &s);
	} else {
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, getpid());
		f = fopen(tmp, "w");
		if (!f) {
			snprintf(err, errlen, "%.400s: %s", tmp, strerror(errno));
			stats_free(&s);
			return -1;
		}
		write_trace_json(tr, f, folded, &s);
		if (fclose(f) || rename(tmp, path)) {
			snprintf(err, errlen, "%.400s: %s", path, strerror(errno));
			unlink(tmp);
			stats_free(&s);
			return -1;
		}
	}
	if (view)
		view_print(stderr, &tr->bpf, &s);
	stats_free(&s);
	return 0;
}
