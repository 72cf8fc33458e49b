#!/usr/bin/env python3
"""A stand-in for `netio-tracer --control`, speaking the protocol of docs/tracer.md, for testing
the driver's client without root. FAKE_TRACER_MODE=fail-start|die-on-snapshot changes its mood."""
import json
import os
import sys

mode = os.environ.get("FAKE_TRACER_MODE", "")
if "--control" not in sys.argv:
    print("fake tracer: only --control", file=sys.stderr)
    sys.exit(2)
if mode == "fail-start":
    print("cannot attach fentry: Operation not permitted", file=sys.stderr)
    sys.exit(2)
print("some banner that is not an answer", flush=True)
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
    elif cmd in ("clear", "reset"):
        if cmd == "clear":
            pids.clear()
            netns.clear()
        print("ok", flush=True)
    elif cmd == "snapshot" and len(words) in (2, 3):
        if mode == "die-on-snapshot":
            sys.exit(1)
        with open(words[1], "w") as f:
            json.dump({"attach": {"tx_bytes": "tracepoint"}, "pids": pids, "netns_names": netns,
                       "tx_bytes": 0}, f)
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
