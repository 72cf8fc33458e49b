"""bench/harness.py's host line: SRSO's state, with retbleed's beside it wherever the CPU is
exposed to that one (a program run's floor moves with either's return thunk), from files
standing in for /sys."""
import pytest

from bench import harness


@pytest.fixture
def vulns(tmp_path, monkeypatch):
    def write(srso=None, retbleed=None):
        for name, text in (("spec_rstack_overflow", srso), ("retbleed", retbleed)):
            if text is not None:
                (tmp_path / name).write_text(text + "\n")
        monkeypatch.setattr(harness, "VULNERABILITIES", str(tmp_path))
    return write


def test_srso_alone_where_retbleed_does_not_apply(vulns):
    vulns(srso="Not affected", retbleed="Not affected")
    assert harness.srso_state() == "Not affected"


def test_retbleed_thunk_beside_srso_without_one(vulns):
    vulns(srso="Mitigation: SMT disabled",
          retbleed="Mitigation: untrained return thunk; SMT disabled")
    assert harness.srso_state() == ("Mitigation: SMT disabled (retbleed: Mitigation: "
                                    "untrained return thunk; SMT disabled)")


def test_a_kernel_without_the_files(vulns):
    vulns()
    assert harness.srso_state() == "not reported by this kernel"
