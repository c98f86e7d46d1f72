"""The context links of ``ray`` calls: a listener on this node that tasks connect back to.

A Ray task's handler reaches its call's context as a worker process's does (see
``_remote_context.py``), over a TCP connection instead of a pipe. The task connects on its
handler's first use of the context (a task that never uses it costs nothing). Before anything
is unpickled either way, both ends prove they know the runner's 32-byte key (each answers the
other's random challenge with an HMAC-SHA256), and the task names its call by a one-time token;
each connection then has a thread of its own, so a peer that stalls holds up only itself.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection

from toolvisor._logging import get_event_log
from toolvisor.contract import CallContext
from toolvisor.isolation._link._context_server import join_links, serve_link
from toolvisor.isolation._running import RunningCall

_log = get_event_log("tool_runner", isolation="ray")
LINK_HOST_VARIABLE = "TOOLVISOR_RAY_LINK_HOST"
"""The environment variable that names the address the links listen on (default: the address
Ray knows this node by)."""
_HANDSHAKE_WAIT = 10.0  # seconds either end waits for the other's part of the handshake
_NONCE = 32


def _proof(key: bytes, role: bytes, challenge: bytes) -> bytes:
    return hmac.new(key, role + challenge, hashlib.sha256).digest()


def _received(conn: Connection, limit: int) -> bytes:
    """The next message, within the handshake's wait; ``ConnectionError`` if none comes."""
    if not conn.poll(_HANDSHAKE_WAIT):
        raise ConnectionError(f"no answer within {_HANDSHAKE_WAIT:g} s")
    return conn.recv_bytes(limit)


def _connection(sock: socket.socket) -> Connection:
    sock.settimeout(None)  # blocking: a Connection reads and writes the bare descriptor
    return Connection(sock.detach())


@dataclass(frozen=True, slots=True)
class LinkAddress:
    """Where a task connects to reach its call's context, and what it proves itself with."""

    host: str
    port: int
    authkey: bytes
    token: str

    def connect(self) -> Connection:
        """Open the link (in the task): challenge the agent, answer its challenge, name the
        call. ``ConnectionError`` if the agent cannot be reached or fails its challenge."""
        conn = _connection(socket.create_connection((self.host, self.port),
                                                    timeout=_HANDSHAKE_WAIT))
        try:
            challenge = secrets.token_bytes(_NONCE)
            conn.send_bytes(challenge)
            reply = _received(conn, 2 * _NONCE)
            if not hmac.compare_digest(reply[_NONCE:], _proof(self.authkey, b"agent",
                                                              challenge)):
                raise ConnectionError(f"the agent at {self.host}:{self.port} failed the "
                                      "challenge: it does not hold this call's key")
            conn.send_bytes(_proof(self.authkey, b"task", reply[:_NONCE])
                            + self.token.encode())
        except BaseException:
            conn.close()
            raise
        return conn


class RayContextLinks:
    """Serves the context of this runner's ``ray`` calls.

    ``_calls`` (token to call and tag) and ``_threads`` are guarded by ``_lock``; the accept
    thread owns the listening socket until :meth:`close`; each connection is owned by its own
    thread (handshake, then ``serve_link``).
    """

    def __init__(self, host: str) -> None:
        self._host = host
        self._authkey = secrets.token_bytes(32)
        self._lock = threading.Lock()
        self._calls: dict[str, tuple[RunningCall, int]] = {}
        self._threads: list[threading.Thread] = []
        self._listener: socket.socket | None = None
        self._closing = False

    def address_for(self, call: RunningCall, tag: int) -> LinkAddress:
        """A fresh token for ``call`` (``tag``: its link tag), valid until :meth:`forget`;
        starts listening on first use."""
        token = secrets.token_urlsafe(16)
        with self._lock:
            if self._closing:
                raise RuntimeError("this runner's Ray links are closed; the runner is closing")
            if self._listener is None:
                try:
                    self._listener = socket.create_server((self._host, 0))
                except OSError as exc:
                    raise RuntimeError(
                        f"cannot listen on {self._host!r} for the Ray tasks' context links "
                        f"({exc}); set {LINK_HOST_VARIABLE} to an address of this machine "
                        "the cluster's workers can reach") from exc
                self._start(self._accept, self._listener, "toolvisor-ray-links")
            self._calls[token] = (call, tag)
            host, port = self._listener.getsockname()[:2]
        return LinkAddress(host, port, self._authkey, token)

    def forget(self, address: LinkAddress) -> None:
        """The call of ``address`` ended: its token no longer opens a link."""
        with self._lock:
            self._calls.pop(address.token, None)

    def _start(self, target: Callable[[socket.socket], None], sock: socket.socket,
               name: str) -> None:
        """Start a thread (``_lock`` held) and keep it, to join at close."""
        thread = threading.Thread(target=target, args=(sock,), daemon=True, name=name)
        thread.start()
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                if self._closing:
                    sock.close()
                    return
                self._start(self._serve, sock, "toolvisor-ray-link")

    def _serve(self, sock: socket.socket) -> None:
        conn = _connection(sock)
        try:
            challenge = _received(conn, _NONCE)
            nonce = secrets.token_bytes(_NONCE)
            conn.send_bytes(nonce + _proof(self._authkey, b"agent", challenge))
            reply = _received(conn, 2 * _NONCE + 64)
            token = reply[_NONCE:].decode()
        except (EOFError, OSError, UnicodeDecodeError) as exc:
            _log.warning("ray_link_refused", error=repr(exc))
            conn.close()
            return
        if not hmac.compare_digest(reply[:_NONCE], _proof(self._authkey, b"task", nonce)):
            _log.warning("ray_link_refused", error="the peer failed the challenge")
            conn.close()
            return
        with self._lock:
            call, tag = self._calls.get(token, (None, 0))

        def context(asked: int) -> CallContext | None:
            return None if call is None or asked != tag or call.settled else call.ctx

        serve_link(conn, context)

    def close(self) -> None:
        """Stop listening and wait for every link to close (call it once every task ended)."""
        with self._lock:
            listener, self._listener = self._listener, None
            self._closing = True
        if listener is None:
            return
        socket.create_connection(listener.getsockname()[:2]).close()  # wakes the accept
        with self._lock:
            threads = list(self._threads)
        join_links(threads, _log)
        listener.close()
