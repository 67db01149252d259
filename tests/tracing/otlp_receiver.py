"""A small OTLP/HTTP trace receiver (a separate process in tests).

Decodes ``ExportTraceServiceRequest`` protobuf bodies on ``POST /v1/traces`` with the official
definitions from ``opentelemetry-proto`` and serves what it received as JSON on ``GET /spans``.
Prints ``PORT <n>`` once listening. Run: ``python otlp_receiver.py``.
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

_LOCK = threading.Lock()
_SPANS: list[dict[str, Any]] = []


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind is None:
        return None
    return getattr(v, kind)


def _decode(body: bytes) -> list[dict[str, Any]]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    out: list[dict[str, Any]] = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(
                    {
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "kind": span.kind,
                        "status_code": span.status.code,
                        "scope": scope_spans.scope.name,
                        "service": resource.get("service.name"),
                        "attributes": {a.key: _value(a.value) for a in span.attributes},
                        "events": [e.name for e in span.events],
                    }
                )
    return out


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_error(415 if self.path == "/v1/traces" else 404)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        try:
            spans = _decode(body)
        except Exception:
            self.send_error(400, "not an ExportTraceServiceRequest")
            return
        with _LOCK:
            _SPANS.extend(spans)
        payload = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        if self.path != "/spans":
            self.send_error(404)
            return
        with _LOCK:
            payload = json.dumps(_SPANS).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return None


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
