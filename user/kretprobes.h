/* kprobes and kretprobes attached for the ladder (user/kretprobes.c): a kretprobe gets room for
 * every caller in flight, not the kernel's default of one per CPU. */
#ifndef NETIO_KRETPROBES_H
#define NETIO_KRETPROBES_H
#include <stdbool.h>
#include <bpf/libbpf.h>

/* prog on func's entry, or its return (retprobe), as bpf_program__attach_kprobe does. */
struct bpf_link *kprobe_attach(struct bpf_program *prog, bool retprobe, const char *func);
/* The kretprobe events this process made, removed: after their links are destroyed. */
void kretprobes_remove(void);
/* Those a tracer that is gone left behind (killed), removed. */
void kretprobes_remove_stale(void);

#endif
