// SPDX-License-Identifier: GPL-2.0
/* On-CPU stack sampling: where the followed processes spend their CPU time, by stack. Two
 * ways to get the samples, one body (`do_sample`):
 * - `sample`: a perf_event program on per-task events, or on per-CPU events of the workloads'
 *   cgroup (hardware cycles where a PMU exists, software cpu-clock where none does);
 * - `tick_sample`: tp_btf on timer:hrtimer_expire_entry, kept only for the scheduler tick's
 *   hrtimer (user space sets `tick_fn` to its handler's address before load). The tick
 *   already interrupts every busy CPU HZ times a second, so sampling there adds no timer of
 *   its own: per-task cpu-clock events re-arm an hrtimer at every context switch, a VM exit
 *   each, which cost 7-9% more workload CPU per GB here.
 * A sample counts when the current task belongs to a followed tgid (the tracer's
 * `followed_tgids`, shared by fd), or when it is a ksoftirqd thread (softirq work that left
 * the context of the process that raised it) while anything is followed.
 *
 * Stacks are aggregated in the kernel: one stack trace map for kernel and user stacks (and a
 * second for the stacks whose bucket in the first holds another one), and a hash of (tgid,
 * kernel stack id, user stack id, comm) -> count, read by user/profile.c at snapshot time.
 * A tick sample's kernel stack starts with the interrupt's own frames; user space strips them
 * (user/irqframes.c). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "compat.bpf.h"
#include "followed.bpf.h"
#include "percpu_count.bpf.h"

/* Shared with user/profile.c, which checks the key size against the map at load. */
#define PROFILE_MAX_DEPTH 127 /* PERF_MAX_STACK_DEPTH */
#define PROFILE_MAX_STACKS 16384
#define PROFILE_OVERFLOW_STACKS 4096
#define PROFILE_OVERFLOW_ID (1 << 24) /* added to the ids of stacks_overflow */
#define PROFILE_MAX_KEYS 16384
enum {
	PROFILE_STAT_SEEN,    /* samples the program ran for (ticks: those kept) */
	PROFILE_STAT_COUNTED, /* samples of followed tasks, counted */
	PROFILE_STAT_LOST,    /* samples of followed tasks not counted (no stack, map full) */
	PROFILE_STAT_PARTIAL, /* counted with one of the two stacks lost */
	PROFILE_NR_STATS,
};
#define PROFILE_F_SOFTIRQ 1 /* ksoftirqd serving softirqs */
#define PROFILE_F_PARTIAL 2 /* a stack could not be stored */
struct profile_key {
	__u32 tgid;
	__s32 kstack;
	__s32 ustack;
	__u32 flags;
	char comm[16];
	__u64 image; /* the process image (its mm) the user stack belongs to; 0: none */
};
/* To user space, when a followed process runs code in a mapping not seen before (a new image
 * after exec, or a library mapped later): it reads /proc/PID/maps while the process lives. */
struct profile_image_event {
	__u32 tgid;
	__u32 pad;
	__u64 image;
	char comm[16]; /* the process's (its main thread's), to tell a later exec apart */
	__u64 vm_start; /* the mapping's, as images_seen keys it (0: once per image) */
};

char LICENSE[] SEC("license") = "GPL";

#define EFAULT 14
#define EEXIST 17
#ifndef PF_KTHREAD
#define PF_KTHREAD 0x00200000
#endif

#define STACK_MAP(name, entries)						\
struct {									\
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);					\
	__uint(max_entries, entries);						\
	__uint(key_size, sizeof(__u32));					\
	__uint(value_size, PROFILE_MAX_DEPTH * sizeof(__u64));			\
} name SEC(".maps");

STACK_MAP(stacks, PROFILE_MAX_STACKS)

/* A stack trace map keeps one stack per bucket of its hash and refuses (-EEXIST) a stack whose
 * bucket holds another: a tick sample's kernel stack ends at the interrupted instruction, so
 * nearly every sample is a new stack and some meet a taken bucket, and a hot stack that does
 * (a lock spinning in one place) loses every one of its samples. Those go here; a stack that
 * collides in both is lost and counted as such (bench/NOTES.md, "Lost stacks"). */
STACK_MAP(stacks_overflow, PROFILE_OVERFLOW_STACKS)

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROFILE_MAX_KEYS);
	__type(key, struct profile_key);
	__type(value, __u64);
} counts SEC(".maps");

/* user stack id -> the word at the user stack pointer when the sample was taken. For a
 * frameless leaf (libc's memcpy variants) that word is the return address into its caller,
 * which a frame-pointer walk skips; user space inserts it when frame 0 is such a leaf. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROFILE_MAX_STACKS);
	__type(key, __u32);
	__type(value, __u64);
} leaf_ret SEC(".maps");

/* (tgid, image, start of the mapping) already told to user space; LRU: an entry pushed out
 * only costs one more event. */
struct image_seen_key {
	__u32 tgid;
	__u32 pad;
	__u64 image;
	__u64 vm_start;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct image_seen_key);
	__type(value, __u8);
} images_seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} image_events SEC(".maps");

/* PROFILE_STAT_*: samples seen, counted, lost (not counted), stacks partly lost. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROFILE_NR_STATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* Set by user space (profiler_poll, every 20-50 ms from the tracer's loop) while
 * followed_tgids is not empty; when clear, the program looks at the map itself (a followed pid
 * may be newer than the hint). */
volatile int followed_hint;

/* Tick source: the address of the tick's hrtimer handler (tick_nohz_handler from 6.9,
 * tick_sched_timer before) and "keep every Nth tick per CPU" for --freq below HZ. Set
 * before load; tick_fn 0 keeps the tick program from counting anything. */
const volatile __u64 tick_fn = 0;
const volatile __u32 tick_every = 1;
/* THREAD_SIZE, for the compat build's task_pt_regs() (bpf_task_pt_regs is 5.15): set by user
 * space from the kernel's configuration (user/trace_helpers.c, kernel_stack_size). */
const volatile __u64 kernel_stack_size = 16384;

/* Ticks seen per CPU (after the handler filter), for tick_every. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tick_seq SEC(".maps");

#ifndef NETIO_COMPAT
static long any_elem(struct bpf_map *map, const void *key, void *value, void *ctx)
{
	*(int *)ctx = 1;
	return 1; /* stop at the first element */
}
#endif

static __always_inline int is_ksoftirqd(void)
{
	struct task_struct *t = current_task();
	char comm[16];

	if (!(TASK_READ(t, flags) & PF_KTHREAD))
		return 0;
	bpf_get_current_comm(comm, sizeof(comm));
	return comm[0] == 'k' && comm[1] == 's' && comm[2] == 'o' && comm[3] == 'f' &&
	       comm[4] == 't' && comm[5] == 'i' && comm[6] == 'r' && comm[7] == 'q' &&
	       comm[8] == 'd' && comm[9] == '/';
}

/* The stack's id: in `stacks`, or in `stacks_overflow` plus PROFILE_OVERFLOW_ID when its
 * bucket in `stacks` holds another stack. */
static __always_inline __s32 stack_id(void *ctx, __u64 flags)
{
	__s32 id = bpf_get_stackid(ctx, &stacks, flags);

	if (id != -EEXIST)
		return id;
	id = bpf_get_stackid(ctx, &stacks_overflow, flags);
	return id < 0 ? id : id + PROFILE_OVERFLOW_ID;
}

#ifndef NETIO_COMPAT	/* a callback's address (BPF_PSEUDO_FUNC) is refused before 5.13 */
static long vma_start(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	*(__u64 *)ctx = vma->vm_start;
	return 0;
}
#endif

/* Tells user space about a mapping of this image it has not been told about (the one that
 * holds the user instruction pointer ip): it then reads the process's maps, which the user
 * stacks are symbolized with after the process is gone. Without bpf_find_vma (the compat
 * build): once per 2 MiB of code; user space forgets one told mid-exec (profile.c). */
static __always_inline void note_image(__u32 tgid, __u64 image, __u64 ip)
{
	struct image_seen_key k = { .tgid = tgid, .image = image };
	struct profile_image_event ev = { .tgid = tgid, .image = image };
	struct task_struct *t = current_task();
	__u8 one = 1;

#ifdef NETIO_COMPAT
	/* no bpf_find_vma (5.17): once per 2 MiB of code run, so that a library mapped after the
	 * first sample (by the dynamic loader) is told of too */
	k.vm_start = ip & ~((1ULL << 21) - 1);
#else
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_find_vma))
		bpf_find_vma(t, ip, vma_start, &k.vm_start, 0);
#endif
	if (bpf_map_lookup_elem(&images_seen, &k))
		return;
	if (bpf_map_update_elem(&images_seen, &k, &one, BPF_NOEXIST))
		return;
	ev.vm_start = k.vm_start;
	BPF_CORE_READ_STR_INTO(&ev.comm, t, group_leader, comm);
	bpf_ringbuf_output(&image_events, &ev, sizeof(ev), 0);
}

/* The body of every sample. ctx goes to bpf_get_stackid (perf_event or tracing context);
 * irq_sp and irq_ip are the stack and instruction pointers the interrupt saved (perf_event:
 * the sampled registers; 0 when the caller has none, as in the tick's tracepoint), used for
 * the frameless-leaf word and for telling user space about new mappings. */
static __always_inline int do_sample(void *ctx, __u64 irq_sp, __u64 irq_ip)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct profile_key key = {};
	__u64 one = 1, *cnt;
	__u32 flags = 0;
	int err = 0;

	percpu_count(&stats, PROFILE_STAT_SEEN);

	if (tgid == 0 || !tgid_followed(tgid)) {
		int any = 0;

		/* ksoftirqd does nothing but run softirqs (and schedule to do so); its
		 * preempt count is a per-CPU variable that a BPF program cannot address on
		 * kernels without CONFIG_KALLSYMS_ALL, so every ksoftirqd sample counts */
		if (!is_ksoftirqd())
			return 0;
		if (followed_hint)
			any = 1;
#ifndef NETIO_COMPAT	/* bpf_for_each_map_elem is 5.13: the hint alone there */
		else
			bpf_for_each_map_elem(&followed_tgids, any_elem, &any, 0);
#endif
		if (!any)
			return 0;
		flags |= PROFILE_F_SOFTIRQ;
	}

	key.tgid = tgid;
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	key.kstack = stack_id(ctx, 0);
	key.ustack = stack_id(ctx, BPF_F_USER_STACK);

	/* -EFAULT is "no such stack" (a user-mode sample has no kernel part, a kernel thread
	 * has no user part); anything else (-EEXIST in both maps, -ENOMEM) is a lost stack. */
	if (key.kstack < 0 && key.kstack != -EFAULT)
		err = 1;
	if (key.ustack < 0 && key.ustack != -EFAULT && !(flags & PROFILE_F_SOFTIRQ))
		err = 1;
	if (key.kstack < 0 && key.ustack < 0) {
		percpu_count(&stats, PROFILE_STAT_LOST);
		return 0;
	}
	if (err) {
		flags |= PROFILE_F_PARTIAL;
		percpu_count(&stats, PROFILE_STAT_PARTIAL);
	}
	key.flags = flags;

	if (key.ustack >= 0) {
		struct task_struct *t = current_task();
#ifdef NETIO_COMPAT	/* bpf_task_pt_regs is 5.15: task_pt_regs() by hand */
		struct pt_regs *uregs = (struct pt_regs *)((__u64)BPF_CORE_READ(t, stack) +
							   kernel_stack_size) - 1;
#else
		struct pt_regs *uregs = (struct pt_regs *)bpf_task_pt_regs(t);
#endif
		__u64 sp = 0, word = 0, ip = 0;
		__u32 uid = key.ustack;

		key.image = (__u64)TASK_READ(t, mm);
		/* user mode: the interrupted registers are the user's (a user stack pointer has
		 * the top bit clear); else the user registers saved at kernel entry */
		if ((__s64)irq_sp > 0) {
			sp = irq_sp;
			ip = irq_ip;
		} else if (uregs) {
			sp = PT_REGS_SP_CORE(uregs);
			ip = PT_REGS_IP_CORE(uregs);
		}
		if (ip)
			note_image(tgid, key.image, ip);
#if defined(__TARGET_ARCH_x86)
		/* x86-64: [sp] is the return address into a frameless leaf's caller */
		if (sp && bpf_probe_read_user(&word, sizeof(word), (void *)sp) == 0)
			bpf_map_update_elem(&leaf_ret, &uid, &word, BPF_ANY);
#endif
	}

	cnt = bpf_map_lookup_elem(&counts, &key);
	if (cnt) {
		__sync_fetch_and_add(cnt, 1);
	} else if (bpf_map_update_elem(&counts, &key, &one, BPF_NOEXIST)) {
		cnt = bpf_map_lookup_elem(&counts, &key);
		if (!cnt) {
			percpu_count(&stats, PROFILE_STAT_LOST);
			return 0;
		}
		__sync_fetch_and_add(cnt, 1);
	}
	percpu_count(&stats, PROFILE_STAT_COUNTED);
	return 0;
}

SEC("perf_event")
int sample(struct bpf_perf_event_data *ctx)
{
	return do_sample(ctx, PT_REGS_SP(&ctx->regs), PT_REGS_IP(&ctx->regs));
}

/* Every hrtimer expiry runs this; only the tick's goes further. The tick interrupts
 * whatever ran on the CPU: `current` is that task, and the user stack (BPF_F_USER_STACK,
 * from the task's saved user registers) is its. The user stack pointer for the leaf word
 * comes from bpf_task_pt_regs(current) (do_sample with irq_sp 0): the registers saved when
 * the task last entered the kernel, which is this interrupt when it landed in user mode. */
SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(tick_sample, struct hrtimer *timer, ktime_t *now)
{
	__u32 zero = 0;
	__u64 *seq;

	if (!tick_fn || (__u64)timer->function != tick_fn)
		return 0;
	if (tick_every > 1) {
		seq = bpf_map_lookup_elem(&tick_seq, &zero);
		if (!seq)
			return 0;
		/* per CPU, and the tick runs in hard interrupt context: no other writer */
		if ((*seq)++ % tick_every)
			return 0;
	}
	return do_sample(ctx, 0, 0);
}
