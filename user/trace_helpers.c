// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "trace_helpers.h"

struct ksyms {
	char **names;
	size_t n, cap;
	char *pool;		/* all names, back to back */
	size_t pool_len, pool_cap;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static struct ksyms *names_load(FILE *f, bool kallsyms_format);

struct ksyms *ksyms_load(void)
{
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return NULL;
	return names_load(f, true);
}

struct ksyms *ftrace_funcs_load(void)
{
	FILE *f;

	tracefs_event_id("sched", "sched_process_fork");	/* mounts tracefs if needed */
	f = fopen("/sys/kernel/tracing/available_filter_functions", "r");
	if (!f)
		f = fopen("/sys/kernel/debug/tracing/available_filter_functions", "r");
	if (!f)
		return NULL;
	return names_load(f, false);
}

static struct ksyms *names_load(FILE *f, bool kallsyms_format)
{
	struct ksyms *ks;
	char line[512], type, name[256];
	unsigned long long addr;
	size_t *offs = NULL, noffs = 0, capoffs = 0;

	ks = calloc(1, sizeof(*ks));
	if (!ks)
		goto fail;
	while (fgets(line, sizeof(line), f)) {
		if (kallsyms_format) {
			if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3)
				continue;
			if (type != 't' && type != 'T' && type != 'w' && type != 'W')
				continue;
		} else if (sscanf(line, "%255s", name) != 1) {
			continue;
		}
		size_t len = strlen(name) + 1;
		if (ks->pool_len + len > ks->pool_cap) {
			size_t cap = ks->pool_cap ? ks->pool_cap * 2 : 1 << 20;
			char *p = realloc(ks->pool, cap);
			if (!p)
				goto fail;
			ks->pool = p;
			ks->pool_cap = cap;
		}
		if (noffs == capoffs) {
			size_t cap = capoffs ? capoffs * 2 : 65536;
			size_t *p = realloc(offs, cap * sizeof(*p));
			if (!p)
				goto fail;
			offs = p;
			capoffs = cap;
		}
		offs[noffs++] = ks->pool_len;
		memcpy(ks->pool + ks->pool_len, name, len);
		ks->pool_len += len;
	}
	if (ferror(f) || (!kallsyms_format && noffs == 0))
		goto fail;	/* e.g. EPERM on read */
	fclose(f);
	f = NULL;
	ks->names = malloc((noffs ? noffs : 1) * sizeof(char *));
	if (!ks->names)
		goto fail;
	for (size_t i = 0; i < noffs; i++)
		ks->names[i] = ks->pool + offs[i];
	ks->n = noffs;
	free(offs);
	qsort(ks->names, ks->n, sizeof(char *), cmp_str);
	return ks;
fail:
	if (f)
		fclose(f);
	free(offs);
	ksyms_free(ks);
	return NULL;
}

void ksyms_free(struct ksyms *ks)
{
	if (!ks)
		return;
	free(ks->names);
	free(ks->pool);
	free(ks);
}

size_t ksyms_count(const struct ksyms *ks)
{
	return ks ? ks->n : 0;
}

/* first index whose name is >= key */
static size_t lower_bound(const struct ksyms *ks, const char *key)
{
	size_t lo = 0, hi = ks->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (strcmp(ks->names[mid], key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool ksyms_has(const struct ksyms *ks, const char *name)
{
	size_t i;

	if (!ks)
		return false;
	i = lower_bound(ks, name);
	return i < ks->n && strcmp(ks->names[i], name) == 0;
}

const char *ksyms_find_func(const struct ksyms *ks, const char *name)
{
	size_t len = strlen(name), i;
	const char *clone = NULL;

	if (!ks)
		return NULL;
	for (i = lower_bound(ks, name); i < ks->n; i++) {
		const char *s = ks->names[i];
		if (strncmp(s, name, len) != 0)
			break;
		if (s[len] == '\0')
			return s;
		if (s[len] != '.' || clone)
			continue;
		/* name.isra.0, name.constprop.0, name.part.0: callable entry points of the function;
		 * name.cold is only the unlikely tail of it */
		if (!strncmp(s + len, ".isra.", 6) || !strncmp(s + len, ".constprop.", 11) ||
		    !strncmp(s + len, ".part.", 6))
			clone = s;
	}
	return clone;
}

const struct btf *vmlinux_btf(void)
{
	static struct btf *btf;
	static bool tried;

	if (!tried) {
		tried = true;
		btf = btf__load_vmlinux_btf();	/* NULL and errno on failure (libbpf 1.x) */
	}
	return btf;
}

bool btf_func_exists(const struct btf *btf, const char *name)
{
	return btf && btf__find_by_name_kind(btf, name, BTF_KIND_FUNC) > 0;
}

bool btf_enum_has(const struct btf *btf, const char *enum_name, const char *enumerator)
{
	const struct btf_type *t;
	const struct btf_enum *e;
	int id;

	id = btf ? btf__find_by_name_kind(btf, enum_name, BTF_KIND_ENUM) : -1;
	if (id <= 0)
		return false;
	t = btf__type_by_id(btf, id);
	e = btf_enum(t);
	for (int i = 0; i < btf_vlen(t); i++)
		if (!strcmp(btf__name_by_offset(btf, e[i].name_off), enumerator))
			return true;
	return false;
}

bool kprobes_available(void)
{
	return access("/sys/bus/event_source/devices/kprobe", F_OK) == 0 ||
	       access("/sys/kernel/tracing/kprobe_events", F_OK) == 0 ||
	       access("/sys/kernel/debug/tracing/kprobe_events", F_OK) == 0;
}

bool btf_func_param_is(const struct btf *btf, const char *func, int idx, const char *name)
{
	const struct btf_type *t;
	const struct btf_param *p;
	int id = btf ? btf__find_by_name_kind(btf, func, BTF_KIND_FUNC) : -1;

	if (id <= 0)
		return false;
	t = btf__type_by_id(btf, btf__type_by_id(btf, id)->type);	/* its FUNC_PROTO */
	if (!t || !btf_is_func_proto(t) || idx >= btf_vlen(t))
		return false;
	p = btf_params(t);
	return !strcmp(btf__name_by_offset(btf, p[idx].name_off), name);
}

bool btf_tracepoint_exists(const struct btf *btf, const char *name)
{
	char tname[256];

	snprintf(tname, sizeof(tname), "btf_trace_%s", name);
	return btf && btf__find_by_name_kind(btf, tname, BTF_KIND_TYPEDEF) > 0;
}

long tracefs_event_id(const char *category, const char *name)
{
	static const char *roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	char path[512];
	long id = -1;

	for (int pass = 0; pass < 2 && id < 0; pass++) {
		for (size_t r = 0; r < 2 && id < 0; r++) {
			FILE *f;
			snprintf(path, sizeof(path), "%s/events/%s/%s/id", roots[r], category, name);
			f = fopen(path, "r");
			if (!f)
				continue;
			if (fscanf(f, "%ld", &id) != 1)
				id = -1;
			fclose(f);
		}
		if (id < 0 && pass == 0) {
			/* tracefs may not be mounted here: mount it where the kernel expects it */
			struct stat st;
			snprintf(path, sizeof(path), "%s/events", roots[0]);
			if (stat(path, &st) != 0)
				mount("nodev", roots[0], "tracefs", 0, NULL);
		}
	}
	return id;
}

int netns_inum(const char *spec, unsigned int *inum, char *err, size_t errlen)
{
	char path[512];
	struct stat st;

	if (strchr(spec, '/'))
		snprintf(path, sizeof(path), "%s", spec);
	else
		snprintf(path, sizeof(path), "/var/run/netns/%s", spec);
	if (stat(path, &st) != 0) {
		snprintf(err, errlen, "netns %s: %s: %s", spec, path, strerror(errno));
		return -1;
	}
	*inum = (unsigned int)st.st_ino;
	return 0;
}

unsigned int netns_inum_self(void)
{
	struct stat st;

	if (stat("/proc/self/ns/net", &st) != 0)
		return 0;
	return (unsigned int)st.st_ino;
}

unsigned long long log2_slot_lo(int slot)
{
	return slot == 0 ? 0 : 1ULL << slot;
}

unsigned long long log2_slot_hi(int slot)
{
	return 1ULL << (slot + 1);
}

double log2_hist_percentile(const unsigned long long *slots, int nslots, double q)
{
	unsigned long long total = 0, cum = 0;
	double target;

	for (int i = 0; i < nslots; i++)
		total += slots[i];
	if (!total)
		return NAN;
	target = q * (double)total;
	for (int i = 0; i < nslots; i++) {
		if (!slots[i])
			continue;
		if ((double)(cum + slots[i]) >= target) {
			double lo = (double)log2_slot_lo(i), hi = (double)log2_slot_hi(i);
			double frac = (target - (double)cum) / (double)slots[i];
			if (frac < 0)
				frac = 0;
			return lo + (hi - lo) * frac;
		}
		cum += slots[i];
	}
	return (double)log2_slot_hi(nslots - 1);
}

static void print_stars(FILE *f, unsigned long long val, unsigned long long max, int width)
{
	int n = max ? (int)((double)val * width / (double)max) : 0;
	if (val && !n)
		n = 0;
	for (int i = 0; i < width; i++)
		fputc(i < n ? '*' : ' ', f);
}

void print_log2_hist(FILE *f, const unsigned long long *slots, int nslots, const char *unit)
{
	int first = -1, last = -1;
	unsigned long long max = 0;

	for (int i = 0; i < nslots; i++) {
		if (slots[i]) {
			if (first < 0)
				first = i;
			last = i;
			if (slots[i] > max)
				max = slots[i];
		}
	}
	if (last < 0)
		return;
	fprintf(f, "%*s%-*s : count    distribution\n", 10, "", 14, unit);
	for (int i = first; i <= last; i++) {
		unsigned long long lo = log2_slot_lo(i), hi = log2_slot_hi(i) - 1;
		fprintf(f, "%*llu -> %-*llu : %-8llu |", 14, lo, 14, hi, slots[i]);
		print_stars(f, slots[i], max, 40);
		fputs("|\n", f);
	}
}

const char *human_bytes(double b, char *buf, size_t len)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (fabs(b) >= 1024 && u < 4) {
		b /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%.0f %s", b, units[u]);
	else
		snprintf(buf, len, "%.1f %s", b, units[u]);
	return buf;
}
