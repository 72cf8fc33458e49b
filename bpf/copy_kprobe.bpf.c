// SPDX-License-Identifier: GPL-2.0
/* Exact copy accounting, kprobe/kretprobe rung: the same handlers as copy_fentry.bpf.c.
 * The tracer attaches each program by hand (bpf_program__attach_kprobe) to the function
 * name found in /proc/kallsyms (suffixes such as .isra.0 included). Arguments needed at
 * return are stashed per thread at entry. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "copy_common.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_THREADS);
	__type(key, u32);	/* tid */
	__type(value, u64);	/* the argument needed at return */
} pin_stash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NETIO_MAX_THREADS);
	__type(key, u32);
	__type(value, u64);
} rx_stash SEC(".maps");

/* libbpf 1.1 has no PT_REGS_PARM6 */
static __always_inline u64 kprobe_arg6(struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	return BPF_CORE_READ(regs, r9);
#elif defined(__TARGET_ARCH_arm64)
	return BPF_CORE_READ((struct user_pt_regs *)regs, regs[5]);
#else
	return 0;
#endif
}

static __always_inline void stash(void *map, u64 v)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();

	count_update_error(bpf_map_update_elem(map, &tid, &v, BPF_ANY));
}

static __always_inline bool unstash(void *map, u64 *v)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u64 *p = bpf_map_lookup_elem(map, &tid);

	if (!p)
		return false;
	*v = *p;
	bpf_map_delete_elem(map, &tid);
	return true;
}

SEC("kprobe")
int BPF_KPROBE(kp_sendmsg_in, struct sock *sk)
{
	on_sendmsg_enter(sk);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(kp_sendmsg_out, int ret)
{
	on_sendmsg_exit(ret);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(kp_copy_from_iter, long ret)
{
	on_copy_from_user(ret);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(kp_copy_from_iter_nc, long ret)
{
	on_copy_from_user(ret);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(kp_zc_stream, int ret)
{
	on_zerocopy_stream(ret);
	return 0;
}

/* iov_iter_get_pages2(i, pages, maxsize, maxpages, size_t *start) */
SEC("kprobe")
int BPF_KPROBE(kp_get_pages_in, void *i, void *pages, size_t maxsize, unsigned int maxpages,
	       size_t *start)
{
	if (current_send_scope())
		stash(&pin_stash, (u64)start);
	return 0;
}

/* iov_iter_extract_pages(i, pages, maxsize, maxpages, flags, size_t *offset0) */
SEC("kprobe")
int BPF_KPROBE(kp_extract_pages_in, void *i, void *pages, size_t maxsize,
	       unsigned int maxpages, unsigned int flags)
{
	if (current_send_scope())
		stash(&pin_stash, kprobe_arg6(ctx));
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(kp_pages_out, long ret)
{
	u64 start_ptr;

	if (unstash(&pin_stash, &start_ptr))
		on_pages_pinned(ret, start_ptr);
	return 0;
}

/* skb_copy_ubufs(skb, gfp): counted at entry (it fails only on allocation failure) */
SEC("kprobe")
int BPF_KPROBE(kp_copy_ubufs, struct sk_buff *skb)
{
	on_copy_ubufs(skb);
	return 0;
}

/* skb_copy_datagram_iter(skb, offset, to, len) */
SEC("kprobe")
int BPF_KPROBE(kp_rx_copy_in, void *skb, int offset, void *to, int len)
{
	if (tgid_followed(bpf_get_current_pid_tgid() >> 32))
		stash(&rx_stash, (u64)len);
	return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(kp_rx_copy_out, int ret)
{
	u64 len;

	if (unstash(&rx_stash, &len) && ret == 0)
		on_rx_copy((long)len);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(kp_zc_callback, struct ubuf_info_msgzc *uarg)
{
	on_zc_completion(uarg);
	return 0;
}
