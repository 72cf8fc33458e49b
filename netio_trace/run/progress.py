"""The sweep's progress display: live on a terminal, one plain line per run otherwise."""
import time

from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table

from analysis.contract import ZEROCOPY_STRATEGIES


def _short(run):
    if run.get("status") != "ok":
        return f"[red]{run.get('status')}[/]: {run.get('error')}"
    parts = [f"{run['throughput_gbps']:.2f} Gbit/s", f"{run['latency_us']:.1f} µs/msg"]
    zc = run.get("zerocopy") or {}
    if run["strategy"] in ZEROCOPY_STRATEGIES and zc.get("completions"):
        parts.append(f"copied {100 * zc.get('copied', 0) / zc['completions']:.0f}%")
    a = run.get("attribution") or {}
    cpb = a.get("cycles_per_byte") or {}
    if cpb:
        tot = sum(v for v in cpb.values() if isinstance(v, (int, float)))
        parts.append(f"{tot:.2f} cycles/B" + (" (est.)" if a.get("estimated") else ""))
    tcp = run.get("tcp") or {}
    if tcp.get("retrans"):
        parts.append(f"retrans {tcp['retrans']}")
    return ", ".join(parts)


class Progress:
    """Live display on a terminal; one plain line per run otherwise."""

    def __init__(self, total, console, report_estimate=5.0, run_estimate=None):
        self.total = total
        self.console = console
        self.done = 0
        self.failed = 0
        self.current = ""
        self.last = ""
        self.t0 = time.monotonic()
        self.walls = []
        self.report_estimate = report_estimate
        self.run_estimate = run_estimate
        self.run_started = None
        self.live = None

    def _eta(self):
        """Runs left × mean wall time per run (so far), minus what the current run has
        already taken, plus the report."""
        per = sum(self.walls) / len(self.walls) if self.walls else self.run_estimate
        if per is None:
            return None
        left = per * (self.total - self.done)
        if self.run_started is not None:
            left -= min(time.monotonic() - self.run_started, per)
        return max(left, 0.0) + self.report_estimate

    def _render(self):
        t = Table.grid(padding=(0, 1))
        t.add_column(justify="right", style="bold")
        t.add_column()
        eta = self._eta()
        el = time.monotonic() - self.t0
        bar = ProgressBar(total=max(self.total, 1), completed=self.done, width=40)
        head = Table.grid(padding=(0, 1))
        head.add_row(bar, f"run {min(self.done + 1, self.total)} of {self.total}",
                     f"elapsed {el:4.0f} s",
                     "ETA " + (f"{eta:4.0f} s" if eta is not None else "  …"),
                     f"[red]{self.failed} failed[/]" if self.failed else "")
        t.add_row("", head)
        t.add_row("now", self.current or "…")
        t.add_row("last", self.last or "—")
        return t

    def __enter__(self):
        if self.console.is_terminal:
            # redrawn between runs only (start_run, end_run): a timer redrawing during a run
            # would take CPU from the workloads being measured
            self.live = Live(console=self.console, auto_refresh=False, transient=False,
                             get_renderable=self._render)
            self.live.__enter__()
        return self

    def extend(self, n):
        """n more runs than announced (the extra rounds of undecided comparisons)."""
        self.total += n

    def start_run(self, label):
        self.current = label
        self.run_started = time.monotonic()
        if self.live:
            self.live.refresh()

    def end_run(self, label, run):
        self.done += 1
        if run.get("status") != "ok":
            self.failed += 1
        self.walls.append(time.monotonic() - self.run_started if self.run_started
                          else run.get("wall_s") or 0.0)
        self.run_started = None
        self.last = f"{label}: {_short(run)}"
        if self.live:
            self.current = ""
            self.live.refresh()
        else:
            eta = self._eta()
            self.console.print(f"[{self.done}/{self.total}] {self.last}"
                               + (f"  (ETA {eta:.0f} s)" if eta is not None else ""),
                               highlight=False)

    def __exit__(self, *exc):
        if self.live:
            self.live.refresh()
            self.live.__exit__(*exc)
        return False
