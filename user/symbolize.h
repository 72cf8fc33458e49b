/* Address -> function name, for the sampled stacks of user/profile.c.
 *
 * Kernel: /proc/kallsyms (text symbols, sorted, binary search; module and BPF program
 * symbols included).
 * User: the ELF symbols (.symtab, else the separate debug file found by build-id or
 * .gnu_debuglink under /usr/lib/debug, plus .dynsym) of the file behind the mapping that
 * holds the address, in a snapshot of /proc/PID/maps taken while the process lived. PIE and
 * shared libraries are handled through the mapping's file offset and the file's PT_LOAD
 * segments. The vDSO is read from the tracer's own (identical) image.
 * An address that no symbol covers is never dropped: it becomes "[module]" (the mapping's
 * file name, e.g. "[libfoo.so]") or "[unknown]" when no mapping holds it. */
#ifndef NETIO_SYMBOLIZE_H
#define NETIO_SYMBOLIZE_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct symbolizer;
struct proc_maps;

struct symbolizer *symbolizer_new(void);
void symbolizer_free(struct symbolizer *s);

/* (Re)read /proc/kallsyms. 0, or -1 when it cannot be read or shows no addresses
 * (kptr_restrict). Called lazily by symbolize_kernel when never loaded. */
int symbolizer_load_kallsyms(struct symbolizer *s);
/* The kernel symbol covering addr, or NULL. */
const char *symbolize_kernel(struct symbolizer *s, uint64_t addr);

/* Snapshot of a process's mappings: NULL (errno set) when /proc/PID/maps cannot be read,
 * e.g. the process has exited. proc_maps_parse takes the text of a maps file. */
struct proc_maps *proc_maps_read(pid_t pid);
struct proc_maps *proc_maps_parse(const char *text);
/* 1 when both snapshots list the same mappings. */
int proc_maps_equal(const struct proc_maps *a, const struct proc_maps *b);
void proc_maps_free(struct proc_maps *m);

enum sym_result {
	SYM_UNKNOWN = 0, /* in no mapping (or no maps): "[unknown]" */
	SYM_MODULE = 1,  /* in a mapping, no symbol covers it: "[module]" */
	SYM_FUNC = 2,    /* a symbol */
};
/* Writes the frame name of user address addr into buf. The caller passes addr - 1 for
 * return addresses (every frame but the innermost), so that a call at the very end of a
 * function resolves to that function. */
enum sym_result symbolize_user(struct symbolizer *s, const struct proc_maps *m, uint64_t addr,
			       char *buf, size_t len);
/* 1 when addr (a return address) follows a call instruction in an executable file mapping
 * of m. */
int symbolize_is_return_address(struct symbolizer *s, const struct proc_maps *m,
				uint64_t addr);

/* Where the word at the stack pointer stands for a sample at addr (x86-64 frame-pointer
 * conventions), from the prologue of the function that holds addr. */
enum frame_state {
	FRAME_UNKNOWN = -1,  /* no symbol, no code, or not x86-64 */
	FRAME_NONE = 0,      /* no push %rbp; mov %rsp,%rbp prologue: a frameless function */
	FRAME_SET = 1,       /* past the prologue: the frame-pointer walk has its caller */
	FRAME_AT_ENTRY = 2,  /* before the push: [sp] is the return address */
	FRAME_PUSHED = 3,    /* between push and mov: [sp + 8] is the return address */
};
enum frame_state symbolize_frame_state(struct symbolizer *s, const struct proc_maps *m,
				       uint64_t addr);

/* Lower level, for tests: the symbol covering vaddr (a link-time address) in the ELF file
 * at path; NULL when none. */
const char *symbolize_elf_vaddr(struct symbolizer *s, const char *path, uint64_t vaddr);

#endif
