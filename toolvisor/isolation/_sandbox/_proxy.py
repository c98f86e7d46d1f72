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
_CONNECT_WAIT = 10.0  # seconds to send the head, and to reach an allowed host
MAX_TUNNELS = 32
"""Connections one proxy serves at once (each is a thread of the agent's); past it, ``503``."""
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
                self._threads = [t for t in self._threads if t.is_alive()]
                full = len(self._threads) >= MAX_TUNNELS
                if not full:
                    self._open.add(conn)
                    self._threads.append(thread)
            if full:
                with conn, contextlib.suppress(OSError):
                    conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")
                continue
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            conn.settimeout(_CONNECT_WAIT)
            target = self._target(conn)
            conn.settimeout(None)
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
    at ``path``, all on one daemon thread (it ends with the sandbox; one thread, so that the
    relay costs the handler's limits on processes and address space next to nothing)."""
    server = socket.create_server(("127.0.0.1", PORT))
    threading.Thread(target=_relay_all, args=(server, path), daemon=True,
                     name="toolvisor-sandbox-relay").start()


def _relay_all(server: socket.socket, path: str) -> None:
    with selectors.DefaultSelector() as selector:
        selector.register(server, selectors.EVENT_READ, None)
        while True:
            for key, _ in selector.select():
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                if key.data is None:
                    _open_pair(selector, sock, path)
                    continue
                try:
                    data = sock.recv(_CHUNK)
                    if data:
                        key.data.sendall(data)
                        continue
                except OSError:
                    pass
                for end in (sock, key.data):
                    with contextlib.suppress(KeyError, ValueError):
                        selector.unregister(end)
                    end.close()


def _open_pair(selector: selectors.BaseSelector, server: socket.socket, path: str) -> None:
    """Accept one connection and pair it with a new one to the proxy."""
    try:
        conn, _ = server.accept()
    except OSError:
        return
    proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        proxy.connect(path)
    except OSError:
        conn.close()
        proxy.close()
        return
    selector.register(conn, selectors.EVENT_READ, proxy)
    selector.register(proxy, selectors.EVENT_READ, conn)
