#!/usr/bin/env python3
"""A stand-in for `netio-tracer --control` (and `--probe`), speaking the protocol of
docs/tracer.md, for testing the driver's client without root. FAKE_TRACER_MODE changes its mood:
- fail-start: a forced rung refused (one line on stderr, exit 2);
- fail-load: `--probe` answers as usual, but loading fails as on a kernel the tracer cannot
  load on (a libbpf line and its own reason on stderr, exit 1);
- die-on-snapshot: exits at the first snapshot;
- compat: the ready line and snapshot of the compat build on a kernel with kprobes and no
  fentry (doctor's ladder rows).
FAKE_TRACER_CALLS, when set, names a file that gets one line per start: the arguments."""
import json
import os
import sys

mode = os.environ.get("FAKE_TRACER_MODE", "")
if os.environ.get("FAKE_TRACER_CALLS"):
    with open(os.environ["FAKE_TRACER_CALLS"], "a") as calls:
        calls.write(" ".join(sys.argv[1:]) + "\n")
PROBE = {"kernel": "5.10.0-fake", "btf": True,
         "bpf_build": {"name": "compat", "missing": "task-local storage (5.11)"},
         "attach": {"fentry": False, "kprobe": True, "tp_btf": True, "tracepoint": True,
                    "perf_event": True, "uprobe": True},
         "pmu": {"cycles": False}, "msg_zerocopy": True,
         "sampling": {"source": "tick", "scope": "cpu", "freq": 250}}
COMPAT_READY = {
    "attach": {"tx_bytes": "kprobe", "tx_copy": "kprobe", "pinning": "kprobe",
               "fallback_copy": "kprobe", "zc_completion": "kprobe", "rx_copy": "kprobe",
               "rx_mapped": "tp_btf", "rx_discarded": "unavailable", "rx_spliced": "tp_btf",
               "syscalls": "tracepoint", "stacks": "unavailable"},
    "attach_why": {p: "loading fentry/fexit programs failed: Operation not permitted"
                   for p in ("tx_bytes", "tx_copy", "pinning", "fallback_copy",
                             "zc_completion", "rx_copy", "rx_mapped", "rx_discarded",
                             "rx_spliced", "syscalls")} | {"stacks": "--no-sample"},
    "probes": {"tx_bytes": "kprobe:tcp_sendmsg"},
    "bpf_build": {"name": "compat", "missing": "task-local storage (5.11)"},
    "samples": None}
COMPAT_UNAVAILABLE = {"processes.zc_tx_bytes": "per process: no send names the owner here"}

if "--probe" in sys.argv:
    print(json.dumps(PROBE))
    sys.exit(0)
if "--control" not in sys.argv:
    print("fake tracer: only --control and --probe", file=sys.stderr)
    sys.exit(2)
if mode == "fail-start":
    print("cannot attach fentry: Operation not permitted", file=sys.stderr)
    sys.exit(2)
if mode == "fail-load":
    print("libbpf: prog 'fork_btf': BPF program load failed: Invalid argument", file=sys.stderr)
    print("netio-tracer: cannot load the filter and fork handler (sched_process_fork): "
          "Invalid argument", file=sys.stderr)
    sys.exit(1)
print("some banner that is not an answer", flush=True)
if mode == "compat":
    print("ready " + json.dumps(COMPAT_READY), flush=True)
else:
    print('ready {"attach":{"tx_bytes":"tracepoint","stacks":"perf_event"}}', flush=True)
pids, netns = [], []
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    cmd = words[0]
    if cmd == "pid" and len(words) == 3 and words[1] == "add":
        if not words[2].isdigit():
            print(f"error bad pid {words[2]}", flush=True)
            continue
        pids.append(int(words[2]))
        print("ok", flush=True)
    elif cmd == "netns" and len(words) == 3:
        netns.append(words[2])
        print("ok", flush=True)
    elif cmd in ("attach", "detach") and len(words) == 1:
        print("ok", flush=True)
    elif cmd in ("clear", "reset"):
        if cmd == "clear":
            pids.clear()
            netns.clear()
        print("ok", flush=True)
    elif cmd == "skb-programs" and mode != "old" and words[1:] in (["always"], ["on-demand"]):
        if os.environ.get("FAKE_TRACER_COMMANDS"):      # what the driver asked, for tests
            with open(os.environ["FAKE_TRACER_COMMANDS"], "a") as f:
                f.write(line)
        print("ok", flush=True)
    elif cmd == "snapshot" and len(words) in (2, 3):
        if mode == "die-on-snapshot":
            sys.exit(1)
        snap = {"attach": {"tx_bytes": "tracepoint"}, "pids": pids, "netns_names": netns,
                "tx_bytes": 0, "unavailable": {}, "perf": {"software_from": "task_struct"}}
        if mode == "compat":
            snap.update(attach=COMPAT_READY["attach"], unavailable=COMPAT_UNAVAILABLE,
                        perf={"software_from": "perf_event"})
        with open(words[1], "w") as f:
            json.dump(snap, f)
        if len(words) == 3:
            with open(words[2], "w") as f:
                f.write("a;b;c 3\n")
        print("ok", flush=True)
    elif cmd == "quit":
        print("ok", flush=True)
        sys.exit(0)
    else:
        print(f"error unknown command {cmd}", flush=True)
sys.exit(0)
