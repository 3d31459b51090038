"""A real S3 endpoint for the tests: moto's server on a free loopback port, and a proxy that injects faults.

`s3_server()` starts moto's ThreadedMotoServer (it speaks the S3 HTTP protocol; s3fs's own tests use it
the same way) and yields an `S3Server` whose `env` points boto/s3fs at it through `AWS_ENDPOINT_URL`.
`FaultProxy` sits between a client and that server: it forwards bytes unchanged, one request per
connection, and can answer chosen requests with a 503, cut a response off mid-transfer, or throttle
responses to a bandwidth, a bounded number of times. The conftest fixtures `s3` and `s3_proxy` wrap both.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT

    @property
    def env(self) -> dict[str, str]:
        """The environment a process needs to reach this server with s3fs/boto, and nothing else."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def fs(self):
        """A fresh s3fs file system on this endpoint (no instance cache, so no state leaks between tests)."""
        import s3fs

        return s3fs.S3FileSystem(key="testing", secret="testing", token="testing", skip_instance_cache=True,
                                 endpoint_url=self.endpoint)

    def bucket(self) -> str:
        """Create a bucket with a unique name and return it."""
        name = f"test-{uuid.uuid4().hex[:12]}"
        self.fs().mkdir(name)
        return name


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


@contextlib.contextmanager
def s3_environment(server: S3Server) -> Iterator[None]:
    """Point this process's boto/s3fs at `server` for the duration (restoring the environment after)."""
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ------------------------------------------------------------------------------------------------ faults


@dataclass
class Fault:
    """Answer the next `times` requests for which `match(method, path)` holds with `kind`:
    "503" (an S3 SlowDown error), "drop" (forward, then cut the response after `after_bytes`) or
    "reset" (close the connection before forwarding)."""

    match: Callable[[str, str], bool]
    kind: str = "503"
    times: int = 1
    after_bytes: int = 300
    hits: int = 0


@dataclass
class FaultProxy:
    """A loopback TCP proxy in front of `upstream` (host, port) that injects the listed faults.

    Each request gets its own upstream connection (the proxy sets `Connection: close`), so every request
    can be seen and matched. `bandwidth` (bytes/s, 0 = unlimited) throttles every response. `requests`
    lists (method, path) of every request seen, faulted or not."""

    upstream: tuple[str, int]
    bandwidth: float = 0.0
    faults: list[Fault] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _pick(self, method: str, path: str) -> Fault | None:
        with self._lock:
            self.requests.append((method, path))
            for fault in self.faults:
                if fault.hits < fault.times and fault.match(method, path):
                    fault.hits += 1
                    return fault
        return None

    def _serve(self, client: socket.socket) -> None:
        with client:
            client.settimeout(30)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(65536)
                if not chunk:
                    return
                head += chunk
            head, rest = head.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            method, path, _ = lines[0].decode("latin-1").split(" ", 2)
            headers = [h for h in lines[1:] if not h.lower().startswith((b"connection:", b"keep-alive:"))]
            fault = self._pick(method, path)
            if fault is not None and fault.kind == "reset":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                return
            if fault is not None and fault.kind == "503":
                self._drain(client, headers, rest)
                body = b"<?xml version='1.0'?><Error><Code>SlowDown</Code><Message>injected</Message></Error>"
                client.sendall(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nConnection: close\r\n"
                               b"Content-Length: %d\r\n\r\n%s" % (len(body), b"" if method == "HEAD" else body))
                return
            with socket.create_connection(self.upstream) as up:
                up.sendall(b"\r\n".join([lines[0], *headers, b"Connection: close"]) + b"\r\n\r\n" + rest)
                threading.Thread(target=self._pump, args=(client, up), daemon=True).start()
                limit = fault.after_bytes if fault is not None and fault.kind == "drop" else None
                self._respond(up, client, limit)

    @staticmethod
    def _drain(client: socket.socket, headers: list[bytes], rest: bytes) -> None:
        """Read the request body the client sends, so that closing does not reset the connection first."""
        length = next((int(h.split(b":", 1)[1]) for h in headers if h.lower().startswith(b"content-length:")), 0)
        client.settimeout(2)
        with contextlib.suppress(OSError):
            while len(rest) < length:
                chunk = client.recv(65536)
                if not chunk:
                    break
                rest += chunk

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := src.recv(65536):
                dst.sendall(chunk)

    def _respond(self, up: socket.socket, client: socket.socket, limit: int | None) -> None:
        sent, start = 0, time.monotonic()
        with contextlib.suppress(OSError):
            while chunk := up.recv(16384):
                if limit is not None and sent + len(chunk) >= limit:
                    client.sendall(chunk[: max(0, limit - sent)])
                    client.shutdown(socket.SHUT_RDWR)  # wakes the pump's recv, so the client sees the cut now
                    return
                client.sendall(chunk)
                sent += len(chunk)
                if self.bandwidth:
                    ahead = sent / self.bandwidth - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)


class SwitchProxy:
    """A loopback TCP proxy in front of `upstream` (host, port) that forwards bytes unchanged, keep-alive and all,
    and can be stopped and started: stopped, every connection through it is reset, mid-request or idle in a
    client's pool, and each new one is reset as soon as it is made, as when a store goes down; started, it
    forwards again. A black hole (`swallow`) is the silent outage: every connection, open or new, is kept open and
    read, and nothing is forwarded or answered, as behind a dead route or a stuck middlebox (no reset ever comes).
    `requests` counts the HTTP requests clients began, `puts` those that were PUTs (uploads under way)."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream, self.requests, self.puts, self.down, self.hole = upstream, 0, 0, False, False
        self.outage: tuple[int, float, bool, bool] | None = None  # (at the request numbered, for seconds, silent,
        # counting PUTs alone): see down_at
        self.cut = 0  # connections reset while down, open ones and new ones
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.down = self.hole = False

    def swallow(self) -> None:
        """Become a black hole: read every connection's bytes and forward nothing, closing none."""
        self.hole = True

    def stop(self) -> None:
        with self._lock:
            self.down = True
            sockets, self._sockets = self._sockets, set()
            self.cut += len(sockets)
        for s in sockets:
            reset(s)

    def down_at(self, put: int, seconds: float, silent: bool = False, any_request: bool = False) -> None:
        """Stop (or, `silent`, become a black hole) when the client begins its `put`-th PUT (or, `any_request`, its
        `put`-th request of any kind), that request among those under way cut or left waiting, and start again
        `seconds` later."""
        self.outage = (put, seconds, silent, any_request)

    def close(self) -> None:
        self.stop()
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        """Join `client` to a new connection upstream (reset it while down, swallow it in a black hole), in its own
        thread: a slow upstream never holds up the connections after it."""
        if self.hole:
            with self._lock:
                self._sockets.add(client)
            self._pump(client, None, True)
            return
        try:
            up = socket.create_connection(self.upstream, timeout=30)
            up.settimeout(None)
        except OSError:
            reset(client)
            return
        with self._lock:
            if self.down:
                self.cut += 1
                reset(client)
                reset(up)
                return
            self._sockets |= {client, up}
        threading.Thread(target=self._pump, args=(client, up, True), daemon=True).start()
        self._pump(up, client, False)

    def _pump(self, src: socket.socket, dst: socket.socket | None, requests: bool) -> None:
        with contextlib.suppress(OSError):
            while chunk := src.recv(65536):
                if requests and chunk.startswith(METHODS):
                    self.requests += 1
                    self.puts += chunk.startswith(b"PUT ")
                    if self.outage is not None and self.outage[0] == (
                            self.requests if self.outage[3] else self.puts if chunk.startswith(b"PUT ") else 0):
                        _, seconds, silent, _ = self.outage
                        self.swallow() if silent else self.stop()
                        back = threading.Timer(seconds, self.start)
                        back.daemon = True  # an outage "for ever" never holds the test process at its exit
                        back.start()
                        if not silent:
                            return
                if dst is not None and not self.hole:
                    dst.sendall(chunk)
        if dst is not None and not self.hole:  # in a black hole, no end is passed on either
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)


METHODS = (b"GET ", b"PUT ", b"HEAD ", b"POST ", b"DELETE ")  # how a chunk that begins a request begins


def reset(s: socket.socket) -> None:
    """Close `s` with a reset (RST), not an orderly end: what a peer that went away sends. The shutdown first wakes
    a thread blocked reading `s` (a close alone leaves that read, and the connection, open)."""
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()
