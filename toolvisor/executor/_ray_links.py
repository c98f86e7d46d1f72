"""The context links of ``ray`` calls: a listener on this node that tasks connect back to.

A Ray task's handler reaches its call's context as a worker process's does (see
``_remote_context.py``), over a socket instead of a pipe: the task connects on its handler's
first use of the context (a task that never uses it costs nothing), proves it knows this
runner's secret key (``multiprocessing``'s HMAC challenge), names its call by a one-time token
and is then served by a thread of its own until it closes the connection or its worker dies.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.contract import CallContext
from toolvisor.executor._calls import RunningCall
from toolvisor.executor._context_server import serve_link

_log = get_event_log("tool_runner", isolation="ray")


@dataclass(frozen=True, slots=True)
class LinkAddress:
    """Where a task connects to reach its call's context, and how it proves who it is."""

    host: str
    port: int
    authkey: bytes
    token: str

    def connect(self) -> Connection:
        """Open the link (in the task): authenticate, then name the call."""
        conn = Client((self.host, self.port), authkey=self.authkey)
        conn.send_bytes(self.token.encode())
        return conn


class RayContextLinks:
    """Serves the context of this runner's ``ray`` calls.

    ``_calls`` (token to call) is guarded by ``_lock``; the accept thread owns the listener's
    connections until it hands each to its own serving thread.
    """

    def __init__(self, host: str) -> None:
        self._host = host
        self._authkey = secrets.token_bytes(32)
        self._lock = threading.Lock()
        self._calls: dict[str, RunningCall] = {}
        self._listener: Listener | None = None
        self._accepting: threading.Thread | None = None
        self._serving: list[threading.Thread] = []
        self._closing = False

    def address_for(self, call: RunningCall) -> LinkAddress:
        """A fresh token for ``call``, valid until :meth:`forget`; starts listening on first use."""
        token = secrets.token_urlsafe(16)
        with self._lock:
            if self._listener is None:
                self._listener = Listener((self._host, 0), authkey=self._authkey)
                self._accepting = threading.Thread(target=self._accept, daemon=True,
                                                   name="toolvisor-ray-links")
                self._accepting.start()
            self._calls[token] = call
            host, port = self._listener.address
        return LinkAddress(host, port, self._authkey, token)

    def forget(self, address: LinkAddress | None) -> None:
        """The call of ``address`` ended: its token no longer opens a link."""
        if address is not None:
            with self._lock:
                self._calls.pop(address.token, None)

    def _accept(self) -> None:
        listener = self._listener
        assert listener is not None
        while True:
            try:
                conn = listener.accept()
            except OSError:
                return
            except Exception as exc:  # a peer that failed the challenge: refuse it, go on
                _log.warning("ray_link_refused", error=repr(exc))
                continue
            if self._closing:
                conn.close()
                return
            self._start_serving(conn)

    def _start_serving(self, conn: Connection) -> None:
        try:
            token = conn.recv_bytes(256).decode()
        except (EOFError, OSError, UnicodeDecodeError):
            conn.close()
            return
        with self._lock:
            call = self._calls.get(token)

        def context() -> CallContext | None:
            return None if call is None or call.settled else call.ctx

        thread = threading.Thread(target=serve_link, args=(conn, context), daemon=True,
                                  name="toolvisor-ray-link")
        thread.start()
        self._serving = [t for t in self._serving if t.is_alive()]
        self._serving.append(thread)

    def close(self) -> None:
        """Stop listening and wait for every link to close (call it once every task ended)."""
        with self._lock:
            listener, self._listener = self._listener, None
            self._closing = True
        if listener is None:
            return
        host, port = listener.address
        Client((host, port), authkey=self._authkey).close()  # wakes the accept thread
        assert self._accepting is not None
        self._accepting.join()
        listener.close()
        for thread in self._serving:
            thread.join()


def node_address(ray: Any) -> str:
    """The address this node is known by in its Ray cluster (where its tasks can reach it)."""
    address: str = ray.util.get_node_ip_address()
    return address
