// SPDX-License-Identifier: GPL-2.0
/* The XDP program `run --rx-xdp` puts on the receiving veth (netio_trace/system/netns.py
 * attaches it in generic mode with `ip link set ... xdpgeneric obj`): it passes every packet
 * untouched. It is there for what its presence does to the receive path, not for anything it
 * does: generic XDP gives the program a linear, private skb, so a zero-copy sender's pages
 * are copied before TCP sees them and TCP_ZEROCOPY_RECEIVE has nothing left to map.
 * Nothing in it differs between the storage and the compat build. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
