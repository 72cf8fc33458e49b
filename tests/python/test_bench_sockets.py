"""bench/sockets.py's host line: SRSO's state, with retbleed's return thunk beside it where
the kernel installs one (a program run's floor moves with either), from files standing in
for /sys."""
import pytest

from bench import sockets


@pytest.fixture
def vulns(tmp_path, monkeypatch):
    def write(srso=None, retbleed=None):
        for name, text in (("SRSO", srso), ("RETBLEED", retbleed)):
            path = tmp_path / name
            if text is not None:
                path.write_text(text + "\n")
            monkeypatch.setattr(sockets, name, str(path))
    return write


def test_srso_alone_where_retbleed_has_no_thunk(vulns):
    vulns(srso="Not affected", retbleed="Not affected")
    assert sockets.srso_state() == "Not affected"


def test_retbleed_thunk_beside_srso_without_one(vulns):
    vulns(srso="Mitigation: SMT disabled",
          retbleed="Mitigation: untrained return thunk; SMT disabled")
    assert sockets.srso_state() == ("Mitigation: SMT disabled (retbleed: Mitigation: "
                                    "untrained return thunk; SMT disabled)")


def test_a_kernel_without_the_files(vulns):
    vulns()
    assert sockets.srso_state() == "not reported by this kernel"
