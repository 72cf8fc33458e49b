"""The bench's Markdown writers (bench/markdown.py, bench/markdown_overhead.py) fed with what a
real bench recorded: sections 1 and 3 of the full bench of 2026-11-26 (fixtures/bench/, copied
from bench/results.md) list every run in round order; rebuilt from those lists, the writers
must give back the same text. The lists do not say which rounds the machine kept its speed
in: the tables do (a ratio kept from one pair shows n=1), and STEADY_* name those runs."""
import os
import re
import types

from bench import markdown, markdown_overhead, pairs
from bench.config import KiB, OverheadCase, config_tag
from bench.profiles import Profile

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "bench", "results-2026-11-26.md")
# (configuration, variant): the rounds (from 0) whose runs saw one machine speed; every
# other run of that bench saw it change (results.md: 1 024 of 1 166 runs)
STEADY_IPERF3 = {("loopback 16 KiB", "two-copy"): {1}, ("loopback 16 KiB", "iperf3"): {1},
                 ("loopback 64 KiB", "two-copy"): {1}, ("loopback 64 KiB", "iperf3"): {1}}
STEADY_OVERHEAD = {("loopback one-copy 16 KiB", "tick"): {1},
                   ("loopback one-copy 16 KiB", "no-sample"): {1},
                   ("veth one-copy 64 KiB", "programs"): {5},
                   ("veth one-copy 64 KiB", "bpftrace"): {5}}
STEADY, UNSTEADY = ((100.0,), (100.0,)), ((100.0,), (50.0,))


def _recorded():
    with open(FIXTURE) as f:
        return f.read()


def _section(text, title, until=None):
    """What one section's writer returned: from its heading to the heading until (the next
    numbered "## " heading by default) or the end."""
    start = text.index(title)
    end = (text.index(until, start) if until
           else getattr(re.compile(r"^## \d", re.M).search(text, start + len(title)), "start",
                        lambda: len(text))())
    return text[start:end].rstrip("\n") + "\n"


def _every_run(section):
    """The lines of a section's closing list of every run."""
    return section[section.index("\nEvery run, in round order"):]


def _rounds(tag, runs_by_variant, steady):
    """pairs.Rounds of the recorded runs, each run's machine speed steady where steady
    says so."""
    res = pairs.Rounds(list(runs_by_variant))
    for name, runs in runs_by_variant.items():
        res[name] += runs
        res.speeds[name] += [STEADY if i in steady.get((tag, name), ()) else UNSTEADY
                             for i in range(len(runs))]
    return res


RUN3 = re.compile(r"([\d.]+) Gbit/s \(retrans (\d+), (\w+), ([\d.]+) CPU s/GB\)")


def _iperf3_data(text):
    """Section 3's every-run list: [(transport, size, Rounds)] in run order."""
    data, by_config = [], {}
    for m in re.finditer(r"^- (\w+) (\d+) KiB ([\w-]+): (.*)$",
                         _every_run(_section(text, "## 3.")), re.M):
        transport, size, name = m.group(1), int(m.group(2)) * KiB, m.group(3)
        runs = [{"recv_gbps": float(g), "retrans": int(r), "cc": cc, "cpu_s_per_gb": float(c)}
                for g, r, cc, c in RUN3.findall(m.group(4))]
        if (transport, size) not in by_config:
            by_config[(transport, size)] = {}
            data.append((transport, size))
        by_config[(transport, size)][name] = runs
    return [(t, s, _rounds(f"{t} {s // KiB} KiB", by_config[(t, s)], STEADY_IPERF3))
            for t, s in data]


def test_section_3_comes_back_as_the_bench_wrote_it():
    text = _recorded()
    data = _iperf3_data(text)
    assert len(data) == 6 and all(len(res["iperf3"]) == 5 for _, _, res in data)
    args = types.SimpleNamespace(iperf3_duration=1, rounds=5)
    assert markdown.section_iperf3(args, data) == _section(text, "## 3.")


def _overhead_cases(text):
    """Section 1's every-run list (receiver Gbit/s only): [OverheadCase] in run order."""
    cases = []
    for m in re.finditer(r"^- (\w+) ([\w-]+) (\d+) KiB: (.*)$",
                         _every_run(_section(text, "## 1.", "## 3.")), re.M):
        transport, strategy, size = m.group(1), m.group(2), int(m.group(3)) * KiB
        tag = config_tag(transport, strategy, size)
        runs = {name: [{"recv_gbps": float(x)} for x in values.split(", ")]
                for name, values in re.findall(r"([\w-]+) \[([^\]]*)\]", m.group(4))}
        cases.append(OverheadCase(transport, strategy, size, tag,
                                  _rounds(tag, runs, STEADY_OVERHEAD)))
    return cases


def _table_rows(section, header_start):
    """The rows of the table whose header line starts with header_start."""
    lines = section.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(header_start))
    end = next((k for k in range(i, len(lines)) if not lines[k].startswith("|")), len(lines))
    return lines[i + 2:end]


def test_section_1_tables_come_back_from_the_runs_it_lists():
    """What the every-run list holds (receiver throughput) gives the overhead table, the
    headline, the sampling table, the peer's ratios and the list itself back; the other
    tables need what the list does not keep (CPU, BPF time)."""
    text = _recorded()
    cases = _overhead_cases(text)
    assert [c.tag for c in cases][:2] == ["loopback two-copy 16 KiB", "loopback two-copy 64 KiB"]
    assert len(cases) == 12
    args = types.SimpleNamespace(duration=1.0, rounds=5, one_copy_rounds=9)
    ours = markdown_overhead.section_overhead(args, cases, [], [])
    recorded = _section(text, "## 1.", "## 3.")
    for header in ("| transport | strategy | size | untraced Gbit/s",
                   "| transport | size | sampling alone / untraced"):
        assert _table_rows(ours, header) == _table_rows(recorded, header)
    # the peer's table, but for the last column (send calls counted exactly: not listed)
    peer = "| transport | strategy | size | ours full / untraced"
    cut = [row.rsplit(" | ", 1)[0] for row in _table_rows(ours, peer)]
    assert cut == [row.rsplit(" | ", 1)[0] for row in _table_rows(recorded, peer)]
    assert "1.282 (min 1.282, max 1.282, n=1, 8 unsteady left out)" in cut[9]
    for line in recorded.splitlines():
        if line.startswith(("**Issue 3 headline**", "- loopback ", "- veth ")):
            assert line in ours.splitlines()


def test_a_missed_target_links_its_profile_and_says_where_its_samples_went():
    run = {"bpf_programs": {"tp_xmit": 3000, "sc_enter": 9000}, "messages": 10,
           "bpf_ns_per_msg": 1200.0, "bpf_cpu_share": 0.05}
    p = Profile("veth one-copy 16 KiB: full/untraced 0.850 < 0.88", 0.85, run,
                "overhead-veth-one-copy-16k.folded", "overhead-veth-one-copy-16k.svg", None,
                200, {"in our BPF programs": 50, "in perf event scheduling": 0},
                {"memcpy": 120, "bpf_prog_x": 50, "other": 30})
    (line,) = markdown.profile_lines(p)
    assert line.startswith("- veth one-copy 16 KiB: full/untraced 0.850 < 0.88: profile of the "
                           "traced run with the median ratio (0.850): "
                           "[overhead-veth-one-copy-16k.folded]"
                           "(profiles/overhead-veth-one-copy-16k.folded), "
                           "[overhead-veth-one-copy-16k.svg]")
    assert "Of its 200 samples: 25.0% in our BPF programs; 0.0% in perf event scheduling." in line
    assert "the costliest: sc_enter 900 ns/msg, tp_xmit 300 ns/msg" in line
    assert line.endswith("`memcpy` 60.0%, `bpf_prog_x` 25.0%, `other` 15.0%.")
    empty = Profile("x", None, None, None, None, None, 0, {}, {})
    assert markdown.profile_lines(empty) == ["- x: no profile (the traced run kept no stacks)"]
    assert markdown.misses_md([]) == []
    # the files it links are the bench's, rebuilt by every run, not the repository's
    block = markdown.misses_md([p])
    assert block[0] == "### Missed targets: profiles" and "not committed" in block[2]
    assert block[4] == line
