"""One colour per attribution category, shared by the headline plot and the flame
graphs' legend. The copies keep the colours they always had; the send and receive path gets
hues of its own, darker for the transmit side, lighter for receive and bookkeeping; "other"
stays grey."""
CAT_COLORS = {"user_copy": "#e377c2", "kernel_tx_copy": "#1f77b4", "pinning": "#ff7f0e",
              "fallback_copy": "#d62728", "completion": "#bcbd22", "kernel_rx_copy": "#17becf",
              "syscall": "#9467bd", "splice": "#7f2704", "tcp_tx": "#8c564b", "ip_tx": "#2ca02c",
              "net_rx": "#98df8a", "checksum": "#f7e11b", "skb_mem": "#c49c94",
              "sched": "#ffbb78", "locks": "#393b79", "bpf": "#e7298a",
              "startup": "#1b9e77", "zc_receive": "#6a3d9a", "page_mapping": "#b8860b",
              "copy_buffer": "#5f9ea0", "other": "#c7c7c7"}
