"""bench/tcp_counters.py's checks and its write-up, on made-up readings (no root)."""
from bench import tcp_counters


class FakeTally:
    def __init__(self, inode, written, read, owner=100, syn=0):
        self.inode, self.written, self.read, self.owner = inode, written, read, owner
        self.syn = syn


def test_a_socket_counts_only_when_both_directions_and_its_owner_match():
    cases = {"ok": [FakeTally(1, 10, 20)], "short": [FakeTally(2, 10, 20)],
             "missing": [FakeTally(3, 0, 0)], "owner": [FakeTally(4, 1, 1, owner=0)]}
    counters = {1: (1, 10, 20, 100), 2: (1, 10, 19, 100), 4: (1, 1, 1, 100)}
    rows = {case: (n, ok, misses) for case, n, ok, misses in
            tcp_counters.check_exact(cases, counters)}
    assert rows["ok"] == (1, 1, [])
    assert rows["short"][:2] == (1, 0) and "counters 10 19" in rows["short"][2][0]
    assert rows["missing"][:2] == (1, 0)
    assert rows["owner"][:2] == (1, 0)


def test_the_side_that_connected_counts_its_syn():
    rows = tcp_counters.check_exact({"c": [FakeTally(1, 10, 0, syn=1)]}, {1: (1, 11, 0, 100)})
    assert rows[0][2] == 1
    rows = tcp_counters.check_exact({"c": [FakeTally(1, 10, 0, syn=1)]}, {1: (1, 10, 0, 100)})
    assert rows[0][2] == 0


def test_a_closed_socket_is_never_called_exact():
    # in CLOSE a FIN sent and a reset look alike: its written bytes are not read there
    rows = tcp_counters.check_exact({"closed": [FakeTally(1, 5, 0)]}, {1: (7, 5, 0, 100)})
    assert rows[0][2] == 0


def test_the_breakeven_is_the_read_over_the_per_call_cost():
    rounds = [{"sockets_per_read": 1000, "bpf_us_per_read": 100.0}]
    line = tcp_counters.breakeven_line(500, rounds, {"ns_per_message": 200.0}, 10)
    # 1000 sockets x 100 ns = 100 us = 500 messages at 200 ns; over 10 s: 50 a second
    assert "100 µs" in line and "500 messages" in line and "50.0 messages a second" in line
