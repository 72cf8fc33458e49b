/* Unit test of user/irqframes.c: which innermost frames of a tick sample's kernel stack are
 * the interrupt's own (stripped by user/profile.c), and that nothing else is. */
#include <stdio.h>
#include <string.h>

#include "irqframes.h"

#include "check.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

int main(void)
{
	/* the tick in a send's copy, as the tp_btf program sees it (innermost first) */
	static const char *const in_kernel[] = {
		"bpf_prog_6deef7357e7b4530_tick_sample", "bpf_trace_run2",
		"__bpf_trace_hrtimer_expire_entry", "__hrtimer_run_queues", "hrtimer_interrupt",
		"__sysvec_apic_timer_interrupt", "sysvec_apic_timer_interrupt",
		"asm_sysvec_apic_timer_interrupt", "_copy_from_iter", "tcp_sendmsg_locked",
		"tcp_sendmsg", "__sys_sendmsg", "do_syscall_64", "entry_SYSCALL_64_after_hwframe",
	};
	/* the tick in user mode: the interrupt is the whole kernel stack */
	static const char *const in_user[] = {
		"__hrtimer_run_queues", "hrtimer_interrupt", "__sysvec_apic_timer_interrupt",
		"sysvec_apic_timer_interrupt", "asm_sysvec_apic_timer_interrupt",
	};
	/* the tick in a softirq that an earlier interrupt's exit runs: only the innermost
	 * interrupt goes, the softirq and the interrupt it runs on stay */
	static const char *const in_softirq[] = {
		"__hrtimer_run_queues", "hrtimer_interrupt", "__sysvec_apic_timer_interrupt",
		"sysvec_apic_timer_interrupt", "asm_sysvec_apic_timer_interrupt", "skb_copy_ubufs",
		"__netif_receive_skb_core", "net_rx_action", "handle_softirqs", "__irq_exit_rcu",
		"sysvec_call_function_single", "asm_sysvec_call_function_single", "_copy_to_iter",
	};
	/* arm64 */
	static const char *const arm64[] = {
		"__hrtimer_run_queues", "hrtimer_interrupt", "arch_timer_handler_virt",
		"handle_percpu_devid_irq", "generic_handle_domain_irq", "gic_handle_irq",
		"call_on_irq_stack", "el1_interrupt", "el1h_64_irq_handler", "el1h_64_irq",
		"_copy_from_iter", "tcp_sendmsg_locked",
	};
	/* no entry seen (a truncated stack, or an unknown entry name): nothing is cut */
	static const char *const no_entry[] = {
		"__hrtimer_run_queues", "hrtimer_interrupt", NULL, "_copy_from_iter",
	};
	/* a device interrupt's entry */
	static const char *const common[] = {
		"__hrtimer_run_queues", "hrtimer_interrupt", "__common_interrupt",
		"common_interrupt", "asm_common_interrupt", "native_safe_halt",
	};

	CHECK(irq_frames_inner(in_kernel, N(in_kernel)) == 8, "in kernel: %d",
	      irq_frames_inner(in_kernel, N(in_kernel)));
	CHECK(!strcmp(in_kernel[irq_frames_inner(in_kernel, N(in_kernel))], "_copy_from_iter"),
	      "first kept frame");
	CHECK(irq_frames_inner(in_user, N(in_user)) == N(in_user), "in user: %d",
	      irq_frames_inner(in_user, N(in_user)));
	CHECK(irq_frames_inner(in_softirq, N(in_softirq)) == 5, "in softirq: %d",
	      irq_frames_inner(in_softirq, N(in_softirq)));
	CHECK(irq_frames_inner(arm64, N(arm64)) == 10, "arm64: %d",
	      irq_frames_inner(arm64, N(arm64)));
	CHECK(irq_frames_inner(no_entry, N(no_entry)) == 0, "no entry: %d",
	      irq_frames_inner(no_entry, N(no_entry)));
	CHECK(irq_frames_inner(common, N(common)) == 5, "common: %d",
	      irq_frames_inner(common, N(common)));
	CHECK(irq_frames_inner(in_kernel, 0) == 0, "empty");

	/* names that only look like entries are not */
	CHECK(!irq_entry_frame("sysvec_apic_timer_interrupt"), "C handler is not the entry");
	CHECK(!irq_entry_frame("asm_exc_page_fault"), "a fault is not an interrupt");
	CHECK(!irq_entry_frame("el1h_64_irq_handler"), "arm64 C handler is not the entry");
	CHECK(!irq_entry_frame(NULL), "NULL");
	CHECK(irq_entry_frame("asm_sysvec_reschedule_ipi"), "any system vector");
	CHECK(irq_entry_frame("el0t_64_irq"), "arm64 from user");

	return check_report("test_irqframes");
}
