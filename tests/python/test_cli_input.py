"""Bad input: one clear line on stderr, exit 2, nothing started or created."""
import json
import os
import shutil

import pytest

from conftest import FIXTURES, run_cli
from netio_trace import preflight
from netio_trace.run import params as P

BAD_RUN = [
    (["--sizes", "0"], "size '0' is out of range"),
    (["--sizes", "-1"], "size '-1' is not a byte count"),
    (["--sizes", "7"], "size '7' is out of range"),
    (["--sizes", "1e12"], "size '1e12' is not a byte count"),
    (["--sizes", "abc"], "size 'abc' is not a byte count"),
    (["--sizes", "4K,,8K"], "empty item"),
    (["--threads", "0"], "threads 0 is out of range"),
    (["--threads", "100000"], "threads 100000 is out of range"),
    (["--threads", "257"], "threads 257 is out of range"),
    (["--threads", "two"], "not a whole number"),
    (["--strategies", "three-copy"], "unknown strategy 'three-copy'"),
    (["--transport", "infiniband"], "unknown transport 'infiniband'"),
    (["--duration", "0"], "duration 0 must be more than 0"),
    (["--duration", "-3"], "duration -3 must be more than 0"),
    (["--duration", "abc"], "not a number of seconds"),
    (["--repeat", "0"], "repeat 0 is out of range"),
    (["--freq", "0"], "freq 0 is out of range"),
    (["--attach", "uprobe"], "unknown attach mode"),
    (["--sample-source", "ticks"], "unknown sample source 'ticks'"),
    (["--frobnicate"], "unrecognized arguments"),
    # what a transport cannot run, a datagram that would fragment, a bad preset
    (["--strategies", "sendfile", "--transport", "forward"], "sendfile cannot run over forward"),
    (["--strategies", "one-copy,sendfile", "--transport", "veth,forward"],
     "sendfile cannot run over forward"),
    (["--transport", "forward", "--sizes", "64K"], "does not fit one unfragmented datagram"),
    (["--preset", "zerocopy", "--sizes", "4K,65508"], "does not fit one unfragmented datagram"),
    (["--preset", "zerocopy", "--strategies", "sendfile"], "sendfile cannot run over forward"),
    (["--preset", "nocopy"], "unknown preset 'nocopy'"),
    (["--preset", "zerocopy", "--quick"], "not allowed with argument"),
    # receive strategies and the MSS
    (["--receive", "zerocopy"], "unknown receive strategy 'zerocopy'"),
    (["--receive", "copy,,mmap"], "empty item"),
    (["--receive", "mmap", "--transport", "forward", "--sizes", "4K"],
     "--receive mmap needs a receiver"),
    (["--preset", "receive", "--transport", "forward"], "needs a receiver"),
    (["--mss", "87"], "mss 87 is out of range (88 to 32767 bytes)"),
    (["--mss", "32768"], "mss 32768 is out of range"),
    (["--mss", "4K"], "mss '4K' is not a whole number"),
    (["--mss", "4108", "--transport", "forward", "--sizes", "4K"], "--mss is TCP's"),
]


def _one_line(cp):
    lines = [l for l in cp.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, cp.stderr
    return lines[0]


@pytest.mark.parametrize("args,needle", BAD_RUN, ids=[" ".join(a) for a, _ in BAD_RUN])
def test_bad_run_values(tmp_path, args, needle):
    out = tmp_path / "out"
    cp = run_cli("run", *args, "--out", str(out))
    assert cp.returncode == 2
    line = _one_line(cp)
    assert needle in line and line.startswith("netio-trace run:")
    assert not out.exists()          # nothing started, nothing created
    assert cp.stdout == ""


def test_out_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    cp = run_cli("run", "--out", str(f))
    assert cp.returncode == 2 and "is a file" in _one_line(cp)


def test_out_not_writable(tmp_path):
    target = "/proc/netio-trace-test/out"      # refuses new entries, even for root
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        target = str(ro / "out")
    cp = run_cli("run", "--out", target)
    assert cp.returncode == 2 and "not writable" in _one_line(cp)


def test_out_already_holds_a_sweep(fixture_dir):
    cp = run_cli("run", "--out", str(fixture_dir))
    assert cp.returncode == 2 and "already holds a sweep" in _one_line(cp)


def test_resume_from_a_different_sweep(fixture_dir):
    cp = run_cli("run", "--resume", str(fixture_dir), "--sizes", "4K,16K")
    line = _one_line(cp)
    assert cp.returncode == 2 and "different sweep" in line and "sizes 256,4K,64K vs 4K,16K" in line
    cp = run_cli("run", "--resume", str(fixture_dir), "--quick")
    assert cp.returncode == 2 and "different sweep" in _one_line(cp)


def test_resume_not_a_sweep(tmp_path):
    cp = run_cli("run", "--resume", str(tmp_path))
    assert cp.returncode == 2 and "not a netio-trace results directory" in _one_line(cp)
    (tmp_path / "sweep.json").write_text(json.dumps({"format": "other"}))
    cp = run_cli("run", "--resume", str(tmp_path))
    assert cp.returncode == 2 and "not a netio-trace sweep" in _one_line(cp)
    cp = run_cli("run", "--resume", str(tmp_path / "missing"))
    assert cp.returncode == 2 and "no such directory" in _one_line(cp)


def test_resume_with_other_out(fixture_dir, tmp_path):
    cp = run_cli("run", "--resume", str(fixture_dir), "--out", str(tmp_path / "x"))
    assert cp.returncode == 2 and "drop --out" in _one_line(cp)


def test_trace_needs_a_target():
    cp = run_cli("trace")
    assert cp.returncode == 2 and "exactly one of --pid" in _one_line(cp)
    cp = run_cli("trace", "--pid", "1", "--", "true")
    assert cp.returncode == 2 and "exactly one of --pid" in _one_line(cp)
    cp = run_cli("trace", "--pid", "abc")
    assert cp.returncode == 2 and "not a process id" in _one_line(cp)
    cp = run_cli("trace", "--pid", "999999999")
    assert cp.returncode == 2 and "no such process" in _one_line(cp)
    cp = run_cli("trace", "--attach", "nope", "--", "true")
    assert cp.returncode == 2 and "unknown attach mode" in _one_line(cp)
    cp = run_cli("trace", "--sample-source", "pmu", "--", "true")
    assert cp.returncode == 2 and "unknown sample source 'pmu'" in _one_line(cp)
    for n in ("0", "65537", "x", "-4"):
        cp = run_cli("trace", "--latency-sample", n, "--", "true")
        assert cp.returncode == 2 and "a whole number from 1 to 65536" in _one_line(cp), n
    cp = run_cli("trace", "--no-latency", "--latency-sample", "4", "--", "true")
    assert cp.returncode == 2 and "nothing is timed with --no-latency" in _one_line(cp)
    cp = run_cli("run", "--latency-sample", "0")
    assert cp.returncode == 2 and "a whole number from 1 to 65536" in _one_line(cp)
    cp = run_cli("run", "--no-trace", "--latency-sample", "4")
    assert cp.returncode == 2 and "nothing is timed with --no-trace" in _one_line(cp)


def _without_privileges():
    """A prefix that runs the CLI without the capabilities it needs."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("setpriv not available to drop capabilities")
    return (setpriv, "--inh-caps=-all", "--bounding-set=-all")


@pytest.mark.parametrize("args", [["run", "--quick"], ["doctor"], ["doctor", "--json"],
                                  ["trace", "--", "true"]])
def test_without_privileges(tmp_path, args):
    if args[0] == "run":
        args = args + ["--out", str(tmp_path / "out")]
    cp = run_cli(*args, prefix=_without_privileges())
    assert cp.returncode == 2
    line = _one_line(cp)
    assert "CAP_" in line and ("sudo" in line or "root" in line)
    assert not (tmp_path / "out").exists()


def test_missing_binaries_are_named(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the privilege check comes first when not root")
    cp = run_cli("run", "--quick", "--out", str(tmp_path / "o"),
                 env={"NETIO_BUILD": str(tmp_path / "nobuild")})
    line = _one_line(cp)
    assert cp.returncode == 2 and "not built" in line and "netio-server" in line


def test_help_lists_subcommands():
    cp = run_cli("--help")
    assert cp.returncode == 0
    for word in ("run", "trace", "report", "doctor"):
        assert word in cp.stdout
    cp = run_cli("run", "--help")
    for flag in ("--strategies", "--sizes", "--threads", "--transport", "--duration", "--repeat",
                 "--out", "--no-trace", "--attach", "--freq", "--sample-source", "--quick",
                 "--resume"):
        assert flag in cp.stdout


def test_fixture_is_committed():
    assert os.path.exists(os.path.join(FIXTURES, "runs.jsonl"))


def test_help_says_how_strategies_differ():
    """Every strategy and transport is described, and the strategy that does not
    send 8 heap fields says so (in `run --help`; the report says it too)."""
    cp = run_cli("run", "--help")
    assert cp.returncode == 0 and "--preset" in cp.stdout
    for name in ("two-copy", "one-copy", "zero-copy", "per-field", "sendfile", "io-uring",
                 "io-uring-zc", "veth", "loopback", "forward"):
        assert f"\n  {name:<12} " in cp.stdout, name
    text = " ".join(cp.stdout.split())
    sendfile = text.split(" sendfile not the 8 heap fields", 1)[1]
    assert "sendfile(2)" in sendfile.split(" io-uring ")[0]
    assert "IORING_SEND_ZC_REPORT_USAGE" in text and "blackhole" in text


def test_mmap_where_the_kernel_lacks_zerocopy_receive(monkeypatch):
    """`--receive mmap` on a kernel without TCP_ZEROCOPY_RECEIVE: one line, before
    anything runs (netio_trace.preflight.probe_zerocopy_receive, stood in for)."""
    monkeypatch.setattr(preflight, "probe_zerocopy_receive",
                        lambda: "this kernel has no TCP_ZEROCOPY_RECEIVE (Operation not "
                                "supported; Linux 4.18+)")
    monkeypatch.setattr(preflight, "check_privileges", lambda params: None)
    monkeypatch.setattr(preflight.paths, "have_binary", lambda name: True)
    monkeypatch.setattr(preflight.files, "find_tool", lambda name: "/usr/sbin/" + name)
    params = P.SweepParams(**dict(P.QUICK, receives=("copy", "mmap"), passes=("untraced",)))
    with pytest.raises(P.UsageError) as e:
        preflight.preflight(params)
    assert str(e.value) == ("netio-trace run: --receive mmap: this kernel has no "
                            "TCP_ZEROCOPY_RECEIVE (Operation not supported; Linux 4.18+); "
                            "leave mmap out of --receive")
    # this kernel has it
    monkeypatch.undo()
    assert preflight.probe_zerocopy_receive() is None
