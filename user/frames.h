/* Names of the sampled stacks' frames, for user/profile.c.
 *
 * blazesym (blazesym-c, built from third_party/blazesym) does the lookups: user addresses
 * through the symbol tables of the mapped file (no DWARF: bench/NOTES.md, "Frames named by
 * blazesym"), C++ and Rust names demangled; kernel addresses: kaddrs_names in
 * user/trace_helpers.c. What it does not do is here:
 * - per-exec maps: the mappings of each image (an id the caller gives, the sampler's mm
 *   pointer) of each process, read from /proc/PID/maps while the process lives, so that its
 *   stacks are named after it exited, and a process that exec'd keeps the old image's maps
 *   for the old image's samples;
 * - PLT stubs, which no symbol covers: "name@plt", after the GOT slot the stub jumps through;
 * - a stripped file's symbols (libc): the .symtab of its debug file, found by build-id;
 * - the vDSO, which no file holds: named from the tracer's own (the same image);
 * - the x86-64 frame-pointer fix-up: a frameless leaf's caller, which the kernel's walk skips,
 *   put back from the word at the stack pointer when that word is a return address.
 * A user address no symbol covers becomes "[module]" (the mapping's file name, e.g.
 * "[libfoo.so]"), one in no file mapping "[unknown]". */
#ifndef NETIO_FRAMES_H
#define NETIO_FRAMES_H
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

struct frames;
struct frames *frames_new(void);
void frames_free(struct frames *fr);

/* A process's file mappings: NULL when /proc/PID/maps cannot be read or is empty (the
 * process exited). proc_maps_parse reads a maps file's text from f. */
struct proc_maps;
struct proc_maps *proc_maps_read(pid_t pid);
struct proc_maps *proc_maps_parse(FILE *f);
void proc_maps_free(struct proc_maps *m);
/* Stores m (taken) as the maps of tgid's image. */
void frames_set_image(struct frames *fr, pid_t tgid, uint64_t image, struct proc_maps *m);
/* The maps of tgid's image, NULL when never read. */
const struct proc_maps *frames_image(const struct frames *fr, pid_t tgid, uint64_t image);
/* Forgets the images of processes that are gone (call between snapshots). */
void frames_forget_gone(struct frames *fr);

enum sym_result {
	SYM_UNKNOWN = 0, /* in no file mapping (or no maps): "[unknown]" */
	SYM_MODULE = 1,  /* in a file mapping, no symbol covers it: "[module]" */
	SYM_FUNC = 2,    /* a symbol */
};
/* The frame name of user address addr, in m, into buf; with fn_off (may be NULL), the file
 * offset where the function starts (~0 when unknown). */
enum sym_result frames_user_name(struct frames *fr, const struct proc_maps *m, uint64_t addr,
				 char *buf, size_t len, uint64_t *fn_off);
/* 1 when addr follows a call instruction in an executable file mapping of m. */
int frames_is_return_address(struct frames *fr, const struct proc_maps *m, uint64_t addr);

/* A user stack (ips innermost first, n frames) as frame names, outermost first, each passed
 * to emit. Every frame but the innermost is a return address and is looked up at ip - 1 (a
 * call at the very end of a function belongs to that function). have_ret and ret: the word at
 * the stack pointer when the sample was taken, for the frameless-leaf fix-up. */
void frames_user_stack(struct frames *fr, const struct proc_maps *m, const uint64_t *ips,
		       int n, int have_ret, uint64_t ret,
		       void (*emit)(void *ctx, const char *name), void *ctx);

#endif
