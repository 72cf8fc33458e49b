"""What the bench measures and against what: paths, the targets, each section's
configurations, and the records a section's measuring hands to its Markdown."""
import collections
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(os.environ.get("NETIO_BUILD", os.path.join(REPO, "build")))
RESULTS = os.path.join(REPO, "bench", "results.md")
PROFILES = os.path.join(REPO, "bench", "profiles")
IPERF3_PORT = 5201  # inside the run's own namespaces only
NETIO_PORT0 = 5400  # ours: a fresh port per run inside the run's own namespaces
KiB = 1024

# targets: what the README's limits promise, each a ratio to the untraced run
# The tracer's levels, each / untraced, paired within rounds: the full default (counting, latency
# histograms, sampling on the tick where there is no PMU) >= 0.88 in every case and >= 0.92 at
# one-copy 16 KiB loopback; counting (--no-latency --no-sample) >= 0.95 in every case, 0.97 there
TARGET_OVERHEAD = 0.88
TARGET_OVERHEAD_HEADLINE = 0.92
TARGET_COUNTING = 0.95
TARGET_COUNTING_HEADLINE = 0.97
AIM_OVERHEAD = 0.99
TARGET_HEADLINE = 0.97      # one-copy 16 KiB loopback 1 thread: the headline case
TARGET_SAMPLING = 0.98      # stack sampling on top of the rest of the tracer
TARGET_IPERF3 = 1.0         # ours / iperf3: our workloads are no slower than the peer's
TARGET_PEER = 1.0           # ours / bpftrace doing the same counting, paired
TARGET_SENDFILE = 1.0       # our sendfile / iperf3 -Z at the same size

# How long the machine speed probe runs its busy loop on each CPU (pairs.Rounds.steady).
PROBE_S = 0.05

# ---- sections 1 and 2 ----------------------------------------------------------------------
# the variants of section 1's "where the cost goes" table, fewest parts first
DECOMPOSITION = ("sampling", "xmit-receive", "counting", "programs", "no-sample", "full",
                 "exact-latency", "tick", "bpftrace-timer")
# the strategies whose cost is taken apart: one-copy (the headline's) and zero-copy
# (the tracer's worst case)
DECOMPOSED = ("one-copy", "zero-copy")

# The counting level: bytes and copies per process, no latency (no syscall hook), no
# sampling, no counters.
COUNTING_ARGS = ("--no-latency", "--no-sample", "--no-counters")

OVERHEAD_STRATEGIES = ("two-copy", "one-copy", "zero-copy")
OVERHEAD_SIZES = (16 * KiB, 64 * KiB)
HEADLINE_CASE = ("loopback", "one-copy", 16 * KiB)

# One configuration of section 1 and what its interleaved rounds gave: {variant: [Run]}.
OverheadCase = collections.namedtuple("OverheadCase", "transport strategy size tag res")

# ---- section 1w ------------------------------------------------------------------------------
# (level, target in every case, target at the headline case); the levels' tracers are in
# measure_overhead.WINDOW_TRACERS
WINDOW_TARGETS = (("full", TARGET_OVERHEAD, TARGET_OVERHEAD_HEADLINE),
                  ("counting", TARGET_COUNTING, TARGET_COUNTING_HEADLINE))
# programs: per run, the traced windows' BPF statistics ({program: (ns, runs)}, Windows.stop)
WindowCase = collections.namedtuple("WindowCase", "tag level runs speeds programs",
                                    defaults=((),))

# ---- sections 4 to 8 ---------------------------------------------------------------------------
SCALE_THREADS = (1, 2, 4, 8, 32, 128)
SCALE_SIZE = 16 * KiB
SCALE_SMALL = 8     # bytes: the most events per second

SWEEP_LIMIT_S = 300     # the default sweep, both passes and the report: the bound the bench checks
SWEEP_CFG = ["--strategies", "one-copy", "--sizes", "64K", "--threads", "1", "--transport",
             "veth", "--repeat", "3"]

PASSES_CFG = ["--strategies", "one-copy", "--sizes", "16K", "--threads", "1",
              "--transport", "loopback"]
DETACHED_BAND = (0.97, 1.03)     # the loaded-but-detached tracer disturbs nothing

FORWARD_SIZES = (1 * KiB, 4 * KiB, 16 * KiB, 63 * KiB)
ZC_PAIRS = (("one-copy", "zero-copy"), ("io-uring", "io-uring-zc"))
SENDFILE_SIZES = (16 * KiB, 64 * KiB)

IPERF3_SIZES = (4 * KiB, 16 * KiB, 64 * KiB)
IPERF3_STRATEGIES = ("one-copy", "two-copy")

# ---- bench.per_message: BPF program runs per message sent ------------------------------------
# every program's runs / the messages sent, at the counting level, where it applies: one-copy
# 16 KiB over loopback and over veth
TARGET_RUNS_PER_MESSAGE = 2.0
RUNS_PER_MESSAGE_CASES = (("loopback", "one-copy", 16 * KiB), ("veth", "one-copy", 16 * KiB))

UNRELATED_TARGET_NAME = "8. unrelated syscalls (getpid loop), fentry rung / untraced, in the guest"


def size_name(n):
    return f"{n // KiB} KiB" if n >= KiB and n % KiB == 0 else f"{n} B"


def config_tag(transport, strategy, size):
    return f"{transport} {strategy} {size_name(size)}"
