/* Interrupt frames at the inner end of a kernel stack taken from inside an interrupt
 * handler (the tick sampler, bpf/profile.bpf.c): the handler's frames up to and including
 * the interrupt entry, then the interrupted context. */
#ifndef NETIO_IRQFRAMES_H
#define NETIO_IRQFRAMES_H

/* 1 when name is a hard-interrupt entry frame: x86-64 asm_sysvec_* (the APIC vectors, the
 * local timer among them) and asm_common_interrupt / asm_spurious_interrupt (device and
 * legacy timer interrupts); arm64 el1h_64_irq / el0t_64_irq (and the _fiq and 32-bit user
 * variants). */
int irq_entry_frame(const char *name);

/* names[0] is the innermost frame, names[n - 1] the outermost (NULL for a frame with no
 * symbol). Returns how many innermost frames belong to the interrupt: up to and including
 * the innermost interrupt entry frame, or 0 when there is none (a stack is never cut
 * where the boundary cannot be seen). n when the interrupt landed in user mode: its
 * kernel stack is the interrupt alone. */
int irq_frames_inner(const char *const *names, int n);

#endif
