"""A sandbox's network allow-list: an HTTP ``CONNECT`` proxy in the agent, reached from the
sandbox through one Unix socket, that opens only the ``host:port`` pairs the tool allows.

The sandbox keeps its own network namespace (no route out); its worker relays connections
made to ``127.0.0.1:3128`` there (``HTTPS_PROXY``) to the socket (``_child.py``). Each
connection is one thread here: it reads the ``CONNECT`` line, refuses a pair not on the list
(``403``), else connects and relays bytes both ways until either side closes.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import tempfile
import threading

from toolvisor._logging import get_event_log

SOCKET_DIR = "/run/toolvisor-proxy"
"""Where the proxy's socket is bound in the sandbox."""
SOCKET_NAME = "proxy.sock"
PORT = 3128
"""The port the sandbox's relay listens on, on the sandbox's own loopback."""
_HEAD_LIMIT = 8192  # bytes of a CONNECT request's head
_CONNECT_WAIT = 10.0  # seconds to reach an allowed host
_CHUNK = 65536

_log = get_event_log("tool_runner", isolation="sandbox")


class AllowListProxy:
    """The proxy of one pool's sandboxes; ``allowed`` holds ``(host, port)`` pairs."""

    def __init__(self, allowed: frozenset[tuple[str, int]]) -> None:
        self._allowed = allowed
        self.directory = tempfile.mkdtemp(prefix="toolvisor-proxy-")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(os.path.join(self.directory, SOCKET_NAME))
        self._server.listen()
        self._lock = threading.Lock()  # guards _open and _threads
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._accept, name="toolvisor-sandbox-proxy",
                                        daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:  # closed
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True,
                                      name="toolvisor-sandbox-proxy-conn")
            with self._lock:
                self._open.add(conn)
                self._threads = [t for t in self._threads if t.is_alive()]
                self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            target = self._target(conn)
            if target is None:
                conn.sendall(b"HTTP/1.1 403 Forbidden\r\n\r\n")
                return
            try:
                upstream = socket.create_connection(target, timeout=_CONNECT_WAIT)
            except OSError:
                conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
                return
            upstream.settimeout(None)
            with self._lock:
                self._open.add(upstream)
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            _relay(conn, upstream)
        except OSError:
            return
        finally:
            with self._lock:
                for sock in (conn, upstream):
                    if sock is not None:
                        self._open.discard(sock)
                        sock.close()

    def _target(self, conn: socket.socket) -> tuple[str, int] | None:
        """The allowed ``(host, port)`` of the ``CONNECT`` request, or ``None``."""
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(_HEAD_LIMIT)
            if not data or len(head) + len(data) > _HEAD_LIMIT:
                return None
            head += data
        method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
        authority = rest.partition(" ")[0]
        host, _, port = authority.rpartition(":")
        pair = (host.strip("[]"), int(port)) if port.isdigit() else None
        allowed = method == "CONNECT" and pair in self._allowed
        _log.info("sandbox_connect", target=authority, allowed=allowed)
        return pair if allowed else None

    def close(self) -> None:
        """Stop accepting, cut every open connection, wait for the threads, remove the socket."""
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            threads = list(self._threads)
        for thread in threads:
            thread.join()
        os.unlink(os.path.join(self.directory, SOCKET_NAME))
        os.rmdir(self.directory)


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    with selectors.DefaultSelector() as selector:
        selector.register(a, selectors.EVENT_READ, b)
        selector.register(b, selectors.EVENT_READ, a)
        while True:
            for key, _ in selector.select():
                data = key.fileobj.recv(_CHUNK)  # type: ignore[union-attr]
                if not data:
                    return
                key.data.sendall(data)


def relay_to(path: str) -> None:
    """In the sandbox: relay each connection made to ``127.0.0.1:PORT`` to the proxy's socket
    at ``path``, a thread each (daemons: they end with the sandbox)."""
    server = socket.create_server(("127.0.0.1", PORT))

    def accept() -> None:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=_pipe, args=(conn, path), daemon=True).start()

    threading.Thread(target=accept, daemon=True, name="toolvisor-sandbox-relay").start()


def _pipe(conn: socket.socket, path: str) -> None:
    with conn, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as proxy:
        try:
            proxy.connect(path)
            _relay(conn, proxy)
        except OSError:
            return
