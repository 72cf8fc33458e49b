// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <blazesym.h>
#include <gelf.h>
#include "trace_helpers.h"

/* Sorted names, each pointing into the pool, which holds them back to back. */
struct ksyms {
	char *pool;
	size_t n;
	char *names[];
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static struct ksyms *names_load(FILE *f, bool kallsyms_format);

/* A big stdio buffer: a read of /proc (a seq_file) or of tracefs fills as much of it as it
 * can, so a file of several MB takes a few reads rather than one per 4 KiB (dear under
 * QEMU/TCG: bench/NOTES.md, "One vCPU, and what a tracer's start costs in a guest"). */
static FILE *open_big(const char *path)
{
	FILE *f = fopen(path, "re");

	if (f)
		setvbuf(f, NULL, _IOFBF, 1 << 20);
	return f;
}

FILE *kallsyms_open(void)
{
	return open_big("/proc/kallsyms");
}

/* "ffffffff81000000 T name\t[module]": its address, type and name (cut at the name's end,
 * in line). false for a line that is not one. Faster than sscanf on 200 000 lines. */
bool kallsyms_line(char *line, unsigned long long *addr, char *type, char **name)
{
	char *p, *end;

	*addr = strtoull(line, &p, 16);
	if (p == line || *p != ' ' || !p[1] || p[2] != ' ')
		return false;
	*type = p[1];
	*name = p + 3;
	end = *name + strcspn(*name, " \t\n");
	*end = 0;
	return end != *name;
}

struct ksyms *ksyms_load(void)
{
	FILE *f = kallsyms_open();

	if (!f)
		return NULL;
	return names_load(f, true);
}

struct ksyms *ftrace_funcs_load(void)
{
	FILE *f;

	tracefs_event_id("sched", "sched_process_fork");	/* mounts tracefs if needed */
	f = open_big("/sys/kernel/tracing/available_filter_functions");
	if (!f)
		f = open_big("/sys/kernel/debug/tracing/available_filter_functions");
	if (!f)
		return NULL;
	return names_load(f, false);
}

static struct ksyms *names_load(FILE *f, bool kallsyms_format)
{
	char line[512], type, *name, *pool = NULL;
	size_t pool_len = 0, pool_cap = 0, *offs = NULL, noffs = 0, capoffs = 0;
	unsigned long long addr;
	struct ksyms *ks = NULL;

	while (fgets(line, sizeof(line), f)) {
		if (kallsyms_format) {
			if (!kallsyms_line(line, &addr, &type, &name))
				continue;
			if (type != 't' && type != 'T' && type != 'w' && type != 'W')
				continue;
		} else {
			/* "name" or "name [module]" */
			name = line;
			name[strcspn(name, " \t\n")] = 0;
			if (!*name)
				continue;
		}
		size_t len = strlen(name) + 1;
		if (pool_len + len > pool_cap) {
			size_t cap = pool_cap ? pool_cap * 2 : 1 << 20;
			char *p = realloc(pool, cap);
			if (!p)
				goto out;
			pool = p;
			pool_cap = cap;
		}
		if (noffs == capoffs) {
			size_t cap = capoffs ? capoffs * 2 : 65536;
			size_t *p = realloc(offs, cap * sizeof(*p));
			if (!p)
				goto out;
			offs = p;
			capoffs = cap;
		}
		offs[noffs++] = pool_len;
		memcpy(pool + pool_len, name, len);
		pool_len += len;
	}
	if (ferror(f) || (!kallsyms_format && noffs == 0))
		goto out;	/* e.g. EPERM on read */
	ks = malloc(sizeof(*ks) + noffs * sizeof(ks->names[0]));
	if (!ks)
		goto out;
	ks->pool = pool;
	ks->n = noffs;
	for (size_t i = 0; i < noffs; i++)
		ks->names[i] = pool + offs[i];
	qsort(ks->names, ks->n, sizeof(ks->names[0]), cmp_str);
out:
	fclose(f);
	free(offs);
	if (!ks)
		free(pool);
	return ks;
}

void ksyms_free(struct ksyms *ks)
{
	if (ks)
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

/* THREAD_SIZE: 16 KiB on x86-64 and arm64, twice that with KASAN (its stack order), read from
 * the kernel's configuration where it is at hand. */
unsigned long kernel_stack_size(void)
{
	struct utsname u;
	char path[256], line[256];
	unsigned long size = 16384;
	FILE *f;

	uname(&u);
	snprintf(path, sizeof(path), "/boot/config-%s", u.release);
	f = fopen(path, "re");
	if (!f)
		return size;
	while (fgets(line, sizeof(line), f))
		if (!strcmp(line, "CONFIG_KASAN=y\n"))
			size *= 2;
	fclose(f);
	return size;
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

struct kaddrs {
	blaze_symbolizer *sym;
	const blaze_syms *last; /* the names kaddrs_names gave last */
};

struct kaddrs *kaddrs_new(void)
{
	struct kaddrs *k = calloc(1, sizeof(*k));
	blaze_symbolizer_opts o = { .type_size = sizeof(o) };

	if (k && !(k->sym = blaze_symbolizer_new_opts(&o))) {
		free(k);
		return NULL;
	}
	return k;
}

void kaddrs_free(struct kaddrs *k)
{
	if (!k)
		return;
	blaze_syms_free(k->last);
	blaze_symbolizer_free(k->sym);
	free(k);
}

int kaddrs_names(struct kaddrs *k, const uint64_t *addrs, int n, const char **names)
{
	/* kallsyms only (it has the modules and BPF programs): no vmlinux to look for */
	blaze_symbolize_src_kernel src = { .type_size = sizeof(src), .vmlinux = "" };

	blaze_syms_free(k->last);
	k->last = n > 0 ? blaze_symbolize_kernel_abs_addrs(k->sym, &src, addrs, n) : NULL;
	for (int i = 0; i < n; i++)
		names[i] = k->last && k->last->syms[i].name && k->last->syms[i].name[0] ?
				   k->last->syms[i].name : NULL;
	return k->last || n <= 0 ? 0 : -1;
}

int elf_debug_file(Elf *elf, const char *path, char *out, size_t len)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	uint8_t *id;
	size_t n = 0;
	int k;

	out[0] = 0;
	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
			return -1;	/* symbols of its own */
	id = blaze_read_elf_build_id(path, &n);
	k = id && n >= 2 ? snprintf(out, len, "/usr/lib/debug/.build-id/%02x/", id[0]) : 0;
	for (size_t i = 1; k && i < n && (size_t)k < len; i++)
		k += snprintf(out + k, len - k, "%02x", id[i]);
	if (k && (size_t)k < len)
		snprintf(out + k, len - k, ".debug");
	free(id);
	if (!k || (size_t)k >= len || access(out, R_OK)) {
		out[0] = 0;
		return -1;
	}
	return 0;
}

int elf_file_vaddr(Elf *elf, uint64_t off, uint64_t *vaddr)
{
	GElf_Phdr ph;
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD || off < ph.p_offset ||
		    off - ph.p_offset >= ph.p_filesz)
			continue;
		*vaddr = off - ph.p_offset + ph.p_vaddr;
		return 0;
	}
	return -1;
}

int vdso_image_fd(void)
{
	unsigned long base = getauxval(AT_SYSINFO_EHDR), start, end;
	FILE *f = base ? fopen("/proc/self/maps", "re") : NULL;
	char line[256];
	int fd = -1;

	while (f && fd < 0 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx", &start, &end) != 2 || start != base)
			continue;
		fd = memfd_create("vdso", MFD_CLOEXEC);
		if (fd >= 0 && write(fd, (void *)base, end - start) != (ssize_t)(end - start)) {
			close(fd);
			fd = -1;
			break;
		}
	}
	if (f)
		fclose(f);
	return fd;
}
