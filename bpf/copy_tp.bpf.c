// SPDX-License-Identifier: GPL-2.0
/* Copy accounting from tracepoints only (tp_btf): the rung every kernel since 5.5 allows.
 *   tx_bytes      sock:sock_send_length (6.3+), TCP sockets, ret > 0
 *   rx_copy       skb:skb_copy_datagram_iovec (len about to be copied to the user)
 *   zc_tx_bytes   net:net_dev_start_xmit, skbs flagged SKBFL_ZEROCOPY_ENABLE: data_len
 *                 (their user pages), per device netns and per owning socket
 *   fallback copy net:netif_receive_skb, a flagged skb delivered locally will be copied;
 *                 tcp:tcp_probe confirms the flag is gone when TCP sees the segment
 *   tx_copy       inferred in user space: tx_bytes - zc_tx_bytes */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "maps.h"

char LICENSE[] SEC("license") = "GPL";

#define NETIO_IPPROTO_TCP 6

SEC("tp_btf/sock_send_length")
int BPF_PROG(tp_send_length, struct sock *sk, int ret, int flags)
{
	u32 tgid;
	struct proc_stats *ps;

	if (ret <= 0)
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	if (!tgid_followed(tgid))
		return 0;
	if (BPF_CORE_READ(sk, sk_protocol) != NETIO_IPPROTO_TCP)
		return 0;
	ps = proc_get(tgid);
	if (ps) {
		ps->tx_bytes += ret;
		ps->tx_calls++;
	}
	note_zc_owner(sk, tgid);
	return 0;
}

SEC("tp_btf/skb_copy_datagram_iovec")
int BPF_PROG(tp_rx_copy, const struct sk_buff *skb, int len)
{
	u32 tgid;
	struct proc_stats *ps;

	if (len <= 0)
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	if (!tgid_followed(tgid))
		return 0;
	ps = proc_get(tgid);
	if (ps) {
		ps->rx_copy_bytes += len;
		ps->rx_calls++;
	}
	return 0;
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(tp_xmit, struct sk_buff *skb, struct net_device *dev)
{
	if (!skb_zerocopy_flagged(skb))
		return 0;
	count_zc_xmit(skb, dev_netns(dev));
	return 0;
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(tp_netif_receive, struct sk_buff *skb)
{
	u32 inum;
	struct netns_stats *ns;

	if (!skb_zerocopy_flagged(skb))
		return 0;
	inum = BPF_CORE_READ(skb, dev, nd_net.net, ns.inum);
	if (!netns_followed(inum))
		return 0;
	ns = netns_get(inum);
	if (ns) {
		ns->fallback_copy_bytes += BPF_CORE_READ(skb, data_len);
		ns->fallback_copy_skbs++;
	}
	return 0;
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(tp_tcp_probe, struct sock *sk, struct sk_buff *skb)
{
	u32 inum;
	struct netns_stats *ns;

	if (!skb_zerocopy_flagged(skb))
		return 0;
	inum = sk_netns(sk);
	if (!netns_followed(inum))
		return 0;
	ns = netns_get(inum);
	if (ns)
		ns->zc_skbs_at_tcp++;
	return 0;
}
