"""The soak's load (tests/soak/test_agent_soak.py): for SECONDS, about RATE short-lived
processes a second, forked and never exec'd, each with THREADS threads, and each thread one TCP
connection (BYTES bytes sent, then closed) and one UDP socket (DATAGRAMS datagrams of SIZE
bytes, then closed), to receivers outside the traced cgroup. At the end, its own accounting as
JSON on stdout, for the agent's figures to be checked against:
  {"processes", "failed", "threads", "tcp_connections", "udp_sockets", "tcp_bytes", "udp_bytes"}
Only processes that exited 0 are counted; each sends its bytes whole or exits 1.

  load.py TCP_PORT UDP_PORT SECONDS RATE THREADS BYTES DATAGRAMS SIZE"""
import json
import os
import socket
import sys
import threading
import time

MAX_ALIVE = 16          # children alive at once: a bound, so the host is not flooded


def one_thread(tcp_port, udp_port, nbytes, datagrams, size, failed):
    try:
        with socket.create_connection(("127.0.0.1", tcp_port), timeout=30) as s:
            s.sendall(b"t" * nbytes)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            for _ in range(datagrams):
                if u.sendto(b"u" * size, ("127.0.0.1", udp_port)) != size:
                    raise OSError("short datagram")
    except OSError:
        failed.append(1)


def child(tcp_port, udp_port, threads, nbytes, datagrams, size):
    """One short-lived process: its threads, then exit 0 only when every byte went."""
    failed = []
    ts = [threading.Thread(target=one_thread, args=(tcp_port, udp_port, nbytes, datagrams,
                                                    size, failed)) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    os._exit(1 if failed else 0)


def reap(block, counts):
    """Reap children (at least one when block); count those that exited 0 and those not."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        counts["ok" if os.waitstatus_to_exitcode(status) == 0 else "failed"] += 1
        counts["alive"] -= 1
        block = False


def main(argv):
    tcp_port, udp_port = int(argv[0]), int(argv[1])
    seconds, rate = float(argv[2]), float(argv[3])
    threads, nbytes, datagrams, size = map(int, argv[4:8])
    counts = {"ok": 0, "failed": 0, "alive": 0}
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        due = start + n / rate
        if time.monotonic() < due:
            time.sleep(due - time.monotonic())
        reap(counts["alive"] >= MAX_ALIVE, counts)
        if os.fork() == 0:
            child(tcp_port, udp_port, threads, nbytes, datagrams, size)
        counts["alive"] += 1
        n += 1
    while counts["alive"]:
        reap(True, counts)
    ok = counts["ok"]
    print(json.dumps({"processes": ok, "failed": counts["failed"], "threads": ok * threads,
                      "tcp_connections": ok * threads, "udp_sockets": ok * threads,
                      "tcp_bytes": ok * threads * nbytes,
                      "udp_bytes": ok * threads * datagrams * size}))
    return 0 if counts["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
