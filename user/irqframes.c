// SPDX-License-Identifier: GPL-2.0
/* See irqframes.h. Only names are looked at: the frames are symbolized anyway, and the
 * entry points' names are stable ABI-like asm labels on every kernel we meet. */
#include <string.h>

#include "irqframes.h"

int irq_entry_frame(const char *name)
{
	static const char *const exact[] = {
		"asm_common_interrupt", "asm_spurious_interrupt",      /* x86-64 */
		"el1h_64_irq", "el0t_64_irq", "el1h_64_fiq", "el0t_64_fiq", /* arm64 */
		"el0t_32_irq", "el0t_32_fiq",
	};
	size_t i;

	if (!name)
		return 0;
	/* every system vector (apic timer, IPIs, ...) has its own asm_sysvec_<name> */
	if (!strncmp(name, "asm_sysvec_", 11))
		return 1;
	for (i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (!strcmp(name, exact[i]))
			return 1;
	return 0;
}

int irq_frames_inner(const char *const *names, int n)
{
	int i;

	/* the innermost entry is the interrupt the sample was taken in; one further out
	 * (a softirq run on an earlier interrupt's exit, interrupted by the tick) is part of
	 * the interrupted context and stays */
	for (i = 0; i < n; i++)
		if (irq_entry_frame(names[i]))
			return i + 1;
	return 0;
}
