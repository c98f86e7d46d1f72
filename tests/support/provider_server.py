"""A local HTTP server that answers like a model provider, for the SDK wire tests.

It binds 127.0.0.1 on a random port and answers each request with the next scripted reply: a
JSON body with a status and headers, or a server-sent event stream (chunked), which may be cut
mid-way by closing the connection without ending it. Every request is recorded (method, path,
headers, JSON body). Each reply closes its connection, so no connection (and no server thread)
outlives the request that opened it.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer: ``body`` as JSON, or ``events`` as a server-sent event stream
    (``(event name or None, data)``; data that is not a str is sent as JSON) that stops after
    ``cut_after`` events without ending, when given. With ``hold``, the server answers only
    once the test sets it (so a client's timeout passes first)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[tuple[str | None, Any]] | None = None
    cut_after: int | None = None
    hold: threading.Event | None = None  # answer only once it is set (5 s at most)


@dataclass(frozen=True)
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class ProviderServer:
    """Scripted replies in order; ``requests`` lists what came in. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        serve = functools.partial(self._http.serve_forever, poll_interval=0.05)
        self._thread = threading.Thread(target=serve, name="provider-server", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with ``replies``; forget earlier requests and replies."""
        with self._lock:
            self._replies = deque(replies)
            self.requests = []

    @property
    def unused(self) -> int:
        with self._lock:
            return len(self._replies)

    def _take(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
        return Reply(status=599, body={"error": {"message": "no scripted reply left"}})

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()


def _handler(server: ProviderServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            reply = server._take(Recorded(
                "POST", self.path, {k.lower(): v for k, v in self.headers.items()},
                json.loads(raw) if raw else None))
            self.close_connection = True
            if reply.hold is not None:
                reply.hold.wait(5)
            try:
                if reply.events is None:
                    self._send_json(reply)
                else:
                    self._send_events(reply)
            except ConnectionError:
                pass  # the client gave up first (its timeout): nobody reads the answer

        def _send_json(self, reply: Reply) -> None:
            data = json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self._end_headers(reply)
            self.wfile.write(data)

        def _send_events(self, reply: Reply) -> None:
            assert reply.events is not None
            self.send_response(reply.status)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self._end_headers(reply)
            for sent, (name, data) in enumerate(reply.events):
                if sent == reply.cut_after:
                    self.wfile.flush()
                    return  # the connection closes without the last chunk: a broken stream
                text = data if isinstance(data, str) else json.dumps(data)
                event = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
                self._chunk(event.encode())
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _end_headers(self, reply: Reply) -> None:
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("connection", "close")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the tests read ``requests`` instead."""

    return Handler
