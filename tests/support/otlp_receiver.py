"""A local OTLP/HTTP trace receiver: what a collector would get from an ``OTLPSpanExporter``.

It binds 127.0.0.1 on a random port, accepts ``POST /v1/traces`` with a protobuf
``ExportTraceServiceRequest`` and keeps each span's name and attributes. HTTP/1.0: every
request closes its connection, so nothing outlives :meth:`close`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the collector saw it."""

    name: str
    attributes: dict[str, Any]
    service: str


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind is not None else None


class OtlpReceiver:
    """Serves until closed; ``spans`` lists every span received. Use it as a ``with`` block."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                ok = self.path == "/v1/traces" \
                    and self.headers["Content-Type"] == "application/x-protobuf"
                if ok:
                    receiver._take(ExportTraceServiceRequest.FromString(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads ``spans``, not the access log."""

        self._http = HTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever,
                                        kwargs={"poll_interval": 0.05}, name="otlp-receiver")
        self._thread.start()

    @property
    def url(self) -> str:
        """Where an exporter sends traces: ``http://127.0.0.1:<port>/v1/traces``."""
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/v1/traces"

    def _take(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(ReceivedSpan(
                        span.name, {a.key: _value(a.value) for a in span.attributes},
                        str(resource.get("service.name"))))

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()

    def __enter__(self) -> OtlpReceiver:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
