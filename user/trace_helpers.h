/* Helpers of the tracer: kernel symbols, BTF, tracepoints, network namespaces, log2
 * histograms. */
#ifndef NETIO_TRACE_HELPERS_H
#define NETIO_TRACE_HELPERS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <libelf.h>

struct btf;

/* /proc/kallsyms opened with a buffer that takes it in a few reads; one line of it parsed
 * (address, type, name cut in place; false for another kind of line). */
FILE *kallsyms_open(void);
bool kallsyms_line(char *line, unsigned long long *addr, char *type, char **name);

/* /proc/kallsyms, text symbols only, sorted for lookups. */
struct ksyms;
struct ksyms *ksyms_load(void);
void ksyms_free(struct ksyms *ks);
size_t ksyms_count(const struct ksyms *ks);
bool ksyms_has(const struct ksyms *ks, const char *name);
/* The symbol to attach a kprobe to for function `name`: `name` itself, or a compiler clone
 * such as name.isra.0 / name.constprop.0 / name.part.0 (never name.cold). NULL if absent.
 * The returned string lives as long as ks. */
const char *ksyms_find_func(const struct ksyms *ks, const char *name);

/* Kernel addresses -> names, through blazesym's kallsyms source (modules and BPF programs
 * included). kallsyms is read at the first lookup: a new kaddrs per snapshot sees the modules
 * and BPF programs loaded since. kaddrs_names puts the names of addrs[0..n) into names (NULL
 * where none); they live until the next call. 0, or -1 when kallsyms cannot be read. */
struct kaddrs;
struct kaddrs *kaddrs_new(void);
void kaddrs_free(struct kaddrs *k);
int kaddrs_names(struct kaddrs *k, const uint64_t *addrs, int n, const char **names);

/* ELF files (libelf) for user/frames.c. The separate debug file of the file at path whose
 * ELF is elf, when it has no .symtab and one is installed by build-id as Debian's -dbg
 * packages do (/usr/lib/debug/.build-id/xx/yyyy.debug), into out; 0, or -1 when none. The
 * virtual address of file offset off in elf (its PT_LOAD segments); 0, or -1. */
int elf_debug_file(Elf *elf, const char *path, char *out, size_t len);
int elf_file_vaddr(Elf *elf, uint64_t off, uint64_t *vaddr);
/* A memfd holding this process's vDSO image (an ELF file), -1 when none. */
int vdso_image_fd(void);

/* /sys/kernel/tracing/available_filter_functions (functions ftrace can patch), loaded like
 * kallsyms; NULL when it cannot be read (not mounted, or locked down). */
struct ksyms *ftrace_funcs_load(void);

/* The running kernel's BTF (loaded once, never freed), NULL without BTF. */
const struct btf *vmlinux_btf(void);
bool btf_func_exists(const struct btf *btf, const char *name);
/* enum enum_name of the kernel's BTF has enumerator (an enumerator the kernel added tells
 * what it has: BPF_FUNC_loop, BPF_MAP_TYPE_TASK_STORAGE) */
bool btf_enum_has(const struct btf *btf, const char *enum_name, const char *enumerator);
/* The kernel's THREAD_SIZE (the compat sampler's task_pt_regs). */
unsigned long kernel_stack_size(void);
/* The kernel has kprobes (CONFIG_KPROBES: the kprobe PMU or tracefs's kprobe_events). */
bool kprobes_available(void);
/* Parameter idx of kernel function func is called name in the kernel's BTF. */
bool btf_func_param_is(const struct btf *btf, const char *func, int idx, const char *name);
/* A BTF-typed tracepoint (tp_btf) exists: the kernel has the typedef btf_trace_<name>. */
bool btf_tracepoint_exists(const struct btf *btf, const char *name);
/* /sys/kernel/tracing/events/<category>/<name>/id, mounting tracefs if needed; -1 if absent */
long tracefs_event_id(const char *category, const char *name);

/* netns inode number of NAME (looked up in /var/run/netns/) or PATH (anything with a '/',
 * e.g. /proc/PID/ns/net). 0 on success, -1 with a message in err. */
int netns_inum(const char *name_or_path, unsigned int *inum, char *err, size_t errlen);
unsigned int netns_inum_self(void);

/* log2 histograms as the BPF side fills them: slot 0 is [0, 2), slot i is [2^i, 2^(i+1)). */
unsigned long long log2_slot_lo(int slot);
unsigned long long log2_slot_hi(int slot);	/* exclusive */
/* Percentile q (0..1), linearly interpolated inside the bucket that holds it. NaN if empty. */
double log2_hist_percentile(const unsigned long long *slots, int nslots, double q);
/* bcc-style print: "     nsecs : count  distribution" with a 40-column bar. */
void print_log2_hist(FILE *f, const unsigned long long *slots, int nslots, const char *unit);

/* "1.5 GiB", "12.0 KiB", "512 B" */
const char *human_bytes(double bytes, char *buf, size_t len);

#endif
