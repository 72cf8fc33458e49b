"""The agent's HTTP side: GET /metrics and GET /healthz, nothing else (404 for another path,
405 for another method).

A thread per connection with a socket timeout: a scraper that stalls or sends garbage holds
its own thread for at most TIMEOUT_S, never the tracing loop (the main thread); at most
MAX_CONNECTIONS at once (more are closed at once: many slow clients cost threads, not the
tracing).

The exposition is made at the first scrape after a snapshot, not at each snapshot: a scrape
every 15 s then pays for one of the seven or so snapshots between, and the main thread's
loop only adds. `Exposition.lock` is held while the main thread adds a snapshot and while a
scrape renders, so a scrape during a snapshot gets whole figures: the last snapshot's or the
next one's, never half of one."""
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TIMEOUT_S = 10.0
MAX_CONNECTIONS = 32


class ListenError(ValueError):
    pass


def parse_listen(text):
    """ADDR:PORT (IPv6 as [ADDR]:PORT) → (address family, host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535 or not host:
        raise ListenError(f"--listen {text}: not ADDR:PORT")
    if host.startswith("[") and host.endswith("]"):
        return socket.AF_INET6, host[1:-1], int(port)
    return socket.AF_INET, host, int(port)


class _Handler(BaseHTTPRequestHandler):
    timeout = TIMEOUT_S             # a stalled client's socket times out
    server_version = "netio-trace-agent"

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, OPENMETRICS, self.server.exposition.current())
        elif path == "/healthz":
            ok, why = self.server.health()
            self._send(200 if ok else 503, "text/plain; charset=utf-8", (why + "\n").encode())
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found: GET /metrics or /healthz\n")

    def _not_allowed(self):
        self.send_response(405)
        self.send_header("Allow", "GET")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _not_allowed

    def _send(self, code, ctype, body):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        pass        # a scrape a second is not news: stderr stays for what goes wrong


class _Server(ThreadingHTTPServer):
    daemon_threads = True       # a connection in its timeout does not hold up the exit

    def __init__(self, *args):
        super().__init__(*args)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)      # full: closed, no thread
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class _Server6(_Server):
    address_family = socket.AF_INET6


class Exposition:
    """The bytes a scrape gets, made on demand from the last `make` published."""

    def __init__(self):
        self.lock = threading.RLock()
        self._make, self._bytes = None, b"# EOF\n"

    def publish(self, make):
        """make: the exposition's bytes, or a function that makes them (called under lock
        at the next scrape)."""
        with self.lock:
            if callable(make):
                self._make = make
            else:
                self._make, self._bytes = None, make

    def current(self):
        with self.lock:
            if self._make is not None:
                self._bytes, self._make = self._make(), None
            return self._bytes


class MetricsServer:
    """Bound at construction (so that a port in use or an address not on this host is known
    before anything else starts), serving from start()."""

    def __init__(self, listen, health):
        family, host, port = parse_listen(listen)
        cls = _Server6 if family == socket.AF_INET6 else _Server
        try:
            self.httpd = cls((host, port), _Handler)
        except OSError as e:
            raise ListenError(f"--listen {listen}: {e.strerror or e}") from None
        self.httpd.exposition = Exposition()
        self.httpd.health = health
        self.thread = None

    @property
    def port(self):
        return self.httpd.server_address[1]

    @property
    def exposition(self):
        return self.httpd.exposition

    def publish(self, make):
        """The exposition from now on: bytes, or a function that makes them at the next scrape."""
        self.httpd.exposition.publish(make)

    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics",
                                       daemon=True)
        self.thread.start()

    def close(self):
        if self.thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()
