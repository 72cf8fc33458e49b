"""Sweep parameters: defaults, --quick, validation of every list the user gives, the run
schedule in interleaved rounds, and sweep.json (what --resume compares against)."""
import dataclasses
import json

from analysis.contract import run_key, STRATEGIES, TRANSPORTS  # noqa: F401 (re-used by the CLI)
from analysis.contract import FORWARD_MAX_SIZE, runnable
from analysis.contract import DEFAULT_RECEIVE, MSS_MAX, MSS_MIN, RECEIVES, receive_runnable
from analysis.contract import ALIGN_STRATEGIES, ALIGNS, DEFAULT_ALIGN, rx_xdp_runnable
from analysis.sizes import format_size, parse_sizes

MAX_THREADS = 256
MAX_DURATION = 3600.0
MAX_REPEAT = 100
MIN_FREQ, MAX_FREQ = 1, 100000
ATTACH_MODES = ("auto", "fentry", "kprobe", "tracepoint")
# What the tracer's stack samples are taken on (netio-tracer --sample-source): auto is cycles
# where a PMU exists, else cpu-clock; tick samples on the scheduler tick (HZ per busy CPU).
SAMPLE_SOURCES = ("auto", "cycles", "cpu-clock", "tick")

# Default sweep: 3 strategies x 5 sizes x 4 thread counts x veth = 60 configurations.
# Measured on the 2-core VM: a run of 0.5 s costs ~0.68 s of wall time (namespaces, veth, gate,
# snapshot and symbolization add ~0.18 s; the tracer loads once per sweep), the report ~5 s.
# Three interleaved rounds (a median of three, with min and max) x 0.5 s: 180 runs, ~2 min 10 s
# in all, well inside the 5-minute bound with room for a slower or busier machine.
DEFAULTS = dict(strategies=("two-copy", "one-copy", "zero-copy"),
                sizes=(256, 1024, 4096, 16384, 65536),
                threads=(1, 2, 4, 8),
                transports=("veth",),
                duration=0.5,
                repeat=3)
# --quick: every strategy at a small and a large size, one thread, veth, three rounds
# (18 runs, ~20 s with the report).
QUICK = dict(strategies=("two-copy", "one-copy", "zero-copy"),
             sizes=(4096, 65536),
             threads=(1,),
             transports=("veth",),
             duration=0.5,
             repeat=3)
# --preset zerocopy: where zero-copy can win. The forward path (nothing receives, so
# nothing copies a zero-copy skb back) beside veth (local delivery: every zero-copy send ends in
# the fallback copy), copy against zero-copy, by socket call and by io_uring, at sizes one
# datagram holds. 4 strategies x 4 sizes x 2 transports = 32 configurations, both passes,
# 3 rounds: 192 runs, about as long as the default sweep.
PRESETS = {
    "zerocopy": dict(strategies=("one-copy", "zero-copy", "io-uring", "io-uring-zc"),
                     sizes=(1024, 4096, 16384, 64512),
                     threads=(1,),
                     transports=("forward", "veth"),
                     duration=0.5,
                     repeat=3),
    # --preset receive: where receive zero-copy wins. Every receive strategy behind
    # a sender whose pages can be mapped (zero-copy), the same with its fields page-aligned
    # (pages it owns whole), and one whose pages cannot (one-copy), at MSS 4108: 4096-byte
    # segments over loopback, while veth's MTU of 1500 keeps them at 1448 (the MSS that splits
    # pages). 4 receives x 3 senders x 3 sizes x 2 transports = 72 configurations, both
    # passes, 3 rounds: 432 runs, about 5 minutes.
    "receive": dict(strategies=("one-copy", "zero-copy"),
                    aligns=("none", "page"),
                    receives=("copy", "discard", "mmap", "splice"),
                    sizes=(16384, 65536, 262144),
                    threads=(1,),
                    transports=("loopback", "veth"),
                    mss=4108,
                    duration=0.5,
                    repeat=3),
}
DEFAULT_FREQ = 999
SWEEP_FORMAT = "netio-trace sweep 1"


class UsageError(ValueError):
    """A bad command-line value: printed as one line, exit status 2."""


def _split(text, what):
    items = [p.strip() for p in str(text).split(",")]
    if not any(items):
        raise UsageError(f"--{what} is empty")
    if any(not p for p in items):
        raise UsageError(f"--{what} {text!r} has an empty item")
    return list(dict.fromkeys(items))


def _choice(value, noun, allowed):
    """value if it is one of allowed, else UsageError naming them."""
    if value not in allowed:
        raise UsageError(f"unknown {noun} {value!r} (choose from {', '.join(allowed)})")
    return value


def _whole(text, noun, lo, hi, unit=""):
    """text as a whole number from lo to hi, else UsageError (unit: " Hz" and the like)."""
    try:
        n = int(text)
    except (TypeError, ValueError):
        of_unit = f" of{unit}" if unit else ""
        raise UsageError(f"{noun} {text!r} is not a whole number{of_unit}") from None
    if n < lo or n > hi:
        raise UsageError(f"{noun} {text} is out of range ({lo} to {hi}{unit})")
    return n


def parse_strategies(text):
    return tuple(_choice(s, "strategy", STRATEGIES) for s in _split(text, "strategies"))


def parse_receives(text):
    return tuple(_choice(r, "receive strategy", RECEIVES) for r in _split(text, "receive"))


def parse_aligns(text):
    return tuple(_choice(a, "alignment", ALIGNS) for a in _split(text, "align"))


def parse_mss(text):
    return _whole(text, "mss", MSS_MIN, MSS_MAX, " bytes")


def parse_transports(text):
    return tuple(_choice(t, "transport", TRANSPORTS) for t in _split(text, "transport"))


def parse_threads(text):
    return tuple(sorted({_whole(p, "threads", 1, MAX_THREADS) for p in _split(text, "threads")}))


def parse_size_list(text):
    try:
        return tuple(parse_sizes(text))
    except ValueError as e:
        raise UsageError(str(e)) from None


def parse_duration(text):
    try:
        d = float(text)
    except (TypeError, ValueError):
        raise UsageError(f"duration {text!r} is not a number of seconds") from None
    if not d > 0 or d != d:
        raise UsageError(f"duration {text} must be more than 0 seconds")
    if d > MAX_DURATION:
        raise UsageError(f"duration {text} is more than {MAX_DURATION:.0f} seconds per run")
    return d


def parse_repeat(text):
    return _whole(text, "repeat", 1, MAX_REPEAT)


def parse_freq(text):
    return _whole(text, "freq", MIN_FREQ, MAX_FREQ, " Hz")


def parse_attach(text):
    return _choice(text, "attach mode", ATTACH_MODES)


def parse_sample_source(text):
    return _choice(text, "sample source", SAMPLE_SOURCES)


def _refuse_on_forward(items, check, option, transport):
    """UsageError for the first of items that check (runnable, receive_runnable) says cannot
    run on transport: only forward refuses any."""
    for x in items:
        why = check(x, transport)
        if why:
            raise UsageError(f"{why}: leave {x} out of --{option} or forward out of --transport")


def check_combinations(strategies, sizes, transports, receives=(DEFAULT_RECEIVE,), mss=None,
                       rx_xdp=False):
    """UsageError for a strategy or receive strategy a transport cannot run, --mss on forward,
    --rx-xdp anywhere but veth, or a size forward cannot send in one unfragmented datagram."""
    why = rx_xdp_runnable(transports) if rx_xdp else None
    if why:
        raise UsageError(why)
    for t in transports:
        _refuse_on_forward(receives, receive_runnable, "receive", t)
        if t == "forward" and mss is not None:
            raise UsageError("--mss is TCP's: forward sends UDP datagrams; leave forward out "
                             "of --transport")
    for t in transports:
        _refuse_on_forward(strategies, runnable, "strategies", t)
    if "forward" in transports:
        big = [z for z in sizes if z > FORWARD_MAX_SIZE]
        if big:
            raise UsageError(f"size {format_size(big[0])} does not fit one unfragmented datagram "
                             f"on forward (at most {FORWARD_MAX_SIZE} bytes: MTU 65535 less the "
                             f"IP and UDP headers)")


@dataclasses.dataclass(frozen=True)
class Config:
    strategy: str
    msg_size: int
    threads: int
    transport: str
    receive: str = DEFAULT_RECEIVE
    align: str = DEFAULT_ALIGN

    def label(self):
        recv = "" if self.receive == DEFAULT_RECEIVE else f" → {self.receive}"
        align = "" if self.align == DEFAULT_ALIGN else f"@{self.align}"
        return (f"{self.strategy}{align}{recv} {format_size(self.msg_size)} ×{self.threads} "
                f"{self.transport}")



PASSES = ("untraced", "traced")


@dataclasses.dataclass(frozen=True)
class Slot:
    """One run of the schedule: a configuration, its round, and whether the tracer is on."""
    repeat: int
    config: Config
    traced: bool

    def key(self):
        return run_key(self.config.strategy, self.config.msg_size, self.config.threads,
                       self.config.transport, self.repeat, self.traced, self.config.receive,
                       self.config.align)


def passes_in_round(passes, repeat):
    """The passes in the order round `repeat` (0-based) runs them: untraced first in odd rounds
    (1st, 3rd…), traced first in even ones, so that drift falls on both."""
    order = [p for p in PASSES if p in passes]
    return order if repeat % 2 == 0 else order[::-1]


@dataclasses.dataclass(frozen=True)
class SweepParams:
    strategies: tuple
    sizes: tuple
    threads: tuple
    transports: tuple
    duration: float
    repeat: int
    passes: tuple = PASSES
    attach: str = "auto"
    freq: int = DEFAULT_FREQ
    sample_source: str = "auto"
    receives: tuple = (DEFAULT_RECEIVE,)
    mss: int = None         # TCP_MAXSEG on both ends; None: the kernel's
    aligns: tuple = (DEFAULT_ALIGN,)    # the zero-copy senders' field placements
    rx_xdp: bool = False    # an XDP program (XDP_PASS) on the receiving veth
    latency_sample: int = None  # the tracer times 1 call in N of each class; None: its default

    # What makes two sweeps the same sweep (what --resume compares).
    IDENTITY = ("strategies", "sizes", "threads", "transports", "duration", "repeat",
                "passes", "attach", "freq", "sample_source", "receives", "mss", "aligns",
                "rx_xdp", "latency_sample")

    @property
    def trace(self):
        """The tracer is needed: some pass is traced."""
        return "traced" in self.passes

    def configs(self):
        """Every configuration, receive strategy then strategy innermost, so that the
        strategies being compared run next to each other in time."""
        return [Config(s, size, t, tr, r, a)
                for tr in self.transports for t in self.threads
                for size in self.sizes for s in self.strategies for a in self.aligns_of(s)
                for r in self.receives]

    def aligns_of(self, strategy):
        """The field placements a strategy runs with: --align's on the zero-copy strategies,
        the default on the others (their fields are copied wherever they lie)."""
        if strategy in ALIGN_STRATEGIES:
            return self.aligns
        return (DEFAULT_ALIGN,)

    def groups(self):
        """Configurations that differ only by strategy (the ones a report compares), in order."""
        out = {}
        for c in self.configs():
            out.setdefault((c.transport, c.threads, c.msg_size), []).append(c)
        return list(out.values())

    def round_slots(self, repeat, groups=None):
        """One round: for each group, every pass in this round's order, strategies innermost
        (the strategies compared run next to each other, and so do a configuration's untraced
        and traced runs)."""
        return [Slot(repeat, c, p == "traced")
                for g in (groups if groups is not None else self.groups())
                for p in passes_in_round(self.passes, repeat) for c in g]

    def schedule(self):
        """Every Slot, in interleaved rounds: every configuration in every pass, then again."""
        return [s for r in range(self.repeat) for s in self.round_slots(r)]

    def to_dict(self):
        return {"format": SWEEP_FORMAT,
                "strategies": list(self.strategies), "sizes": list(self.sizes),
                "threads": list(self.threads), "transports": list(self.transports),
                "duration": self.duration, "repeat": self.repeat, "trace": self.trace,
                "passes": list(self.passes),
                "attach": self.attach, "freq": self.freq, "sample_source": self.sample_source,
                "receives": list(self.receives), "mss": self.mss,
                "aligns": list(self.aligns), "rx_xdp": self.rx_xdp,
                "latency_sample": self.latency_sample}

    @classmethod
    def from_dict(cls, d):
        if d.get("format") != SWEEP_FORMAT:
            raise UsageError("not a netio-trace sweep description (format "
                             f"{d.get('format')!r}, expected {SWEEP_FORMAT!r})")
        try:
            return cls(strategies=tuple(d["strategies"]), sizes=tuple(int(x) for x in d["sizes"]),
                       threads=tuple(int(x) for x in d["threads"]),
                       transports=tuple(d["transports"]), duration=float(d["duration"]),
                       repeat=int(d["repeat"]), passes=_passes_of(d),
                       attach=d.get("attach", "auto"), freq=int(d.get("freq", DEFAULT_FREQ)),
                       # sweeps written before --sample-source existed sampled on auto
                       sample_source=d.get("sample_source", "auto"),
                       # and before --receive and --mss, received by copy at the kernel's MSS
                       receives=tuple(d.get("receives") or (DEFAULT_RECEIVE,)),
                       mss=None if d.get("mss") is None else int(d["mss"]),
                       # and before --align and --rx-xdp, malloc's fields and no XDP
                       aligns=tuple(d.get("aligns") or (DEFAULT_ALIGN,)),
                       rx_xdp=bool(d.get("rx_xdp", False)),
                       # and before --latency-sample, the tracer's default
                       latency_sample=(None if d.get("latency_sample") is None
                                       else int(d["latency_sample"])))
        except (KeyError, TypeError, ValueError) as e:
            raise UsageError(f"sweep description is incomplete or damaged ({e})") from None

    def differences(self, other):
        """Human list of what differs between two sweeps ([] when they are the same sweep)."""
        out = []
        for f in self.IDENTITY:
            a, b = getattr(self, f), getattr(other, f)
            if a != b:
                out.append(f"{f} {_fmt(f, a)} vs {_fmt(f, b)}")
        return out

    def describe(self):
        recv = ("" if self.receives == (DEFAULT_RECEIVE,)
                else f"receive {_fmt('receives', self.receives)}; ")
        mss = "" if self.mss is None else f"MSS {self.mss}; "
        if self.aligns != (DEFAULT_ALIGN,):
            mss += f"zero-copy fields aligned {_fmt('aligns', self.aligns)}; "
        if self.rx_xdp:
            mss += "XDP_PASS on the receiving veth (generic); "
        return (f"strategies {_fmt('strategies', self.strategies)}; {recv}{mss}"
                f"sizes {_fmt('sizes', self.sizes)}; "
                f"threads {_fmt('threads', self.threads)}; transport {_fmt('transports', self.transports)}; "
                f"{self.repeat} × {self.duration:g} s; "
                + " and ".join(self.passes) + " passes; "
                + (f"tracer {self.attach}, sampling {self.freq} Hz"
                   + (f" on {self.sample_source}" if self.sample_source != "auto" else "")
                   + (f", latency timed 1 call in {self.latency_sample}"
                      if self.latency_sample else "")
                   if self.trace else "no tracer"))


def _passes_of(d):
    """sweep.json's passes; sweeps written before the two passes had one, named by "trace"."""
    if "passes" in d:
        passes = tuple(p for p in PASSES if p in d["passes"])
        if not passes or len(passes) != len(d["passes"]):
            raise ValueError(f"passes {d['passes']!r}")
        return passes
    return ("traced",) if d.get("trace", True) else ("untraced",)


def _fmt(field, value):
    if field == "sizes":
        return ",".join(format_size(v) for v in value)
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return str(value)


def load_sweep_file(path):
    try:
        with open(path) as f:
            d = json.load(f)
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist: not a netio-trace results directory") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read {path}: {e}") from None
    if not isinstance(d, dict):
        raise UsageError(f"{path} is not a sweep description")
    return SweepParams.from_dict(d)
