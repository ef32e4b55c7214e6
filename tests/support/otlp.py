"""A loopback OTLP/HTTP trace receiver: what a collector (Jaeger, Tempo, Langfuse...) gets from Zerg.

``POST /v1/traces`` bodies are decoded as the protocol's protobuf ``ExportTraceServiceRequest``
(opentelemetry-proto) into plain span dicts; tests wait for the spans they expect with a ceiling,
never a sleep. Any other path, or a body that does not decode, answers 400 and is counted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                     ExportTraceServiceResponse)

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def value_of(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


class OTLPReceiver:
    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        self.rejected = 0
        self.content_types: set[str] = set()
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as collectors do (every answer has a Content-Length)

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    if self.path != "/v1/traces":
                        raise ValueError(self.path)
                    request = ExportTraceServiceRequest.FromString(body)
                except Exception:
                    with receiver._changed:
                        receiver.rejected += 1
                    self.send_response(400)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                receiver._take(request, self.headers.get("Content-Type", ""))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self) -> None:  # noqa: N802  GET /count: how many spans arrived (another process asks)
                body = str(len(receiver.spans)).encode()
                self.send_response(200 if self.path == "/count" else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        """The OTEL_EXPORTER_OTLP_ENDPOINT value (the exporter appends /v1/traces)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _take(self, request: ExportTraceServiceRequest, content_type: str) -> None:
        spans = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: value_of(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append({
                        "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex() or None, "name": span.name,
                        "kind": KINDS.get(span.kind, str(span.kind)), "start_ns": span.start_time_unix_nano,
                        "end_ns": span.end_time_unix_nano, "status": span.status.code,
                        "attributes": {kv.key: value_of(kv.value) for kv in span.attributes},
                        "resource": resource, "scope": scope_spans.scope.name,
                        "schema_url": scope_spans.schema_url,
                    })
        with self._changed:
            self.requests += 1
            self.content_types.add(content_type)
            self.spans.extend(spans)
            self._changed.notify_all()

    def wait_for(self, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 60.0) -> list[dict[str, Any]]:
        """The spans received once ``done(spans)`` holds; AssertionError after ``timeout`` seconds."""
        with self._changed:
            if not self._changed.wait_for(lambda: done(list(self.spans)), timeout):
                names = sorted(s["name"] for s in self.spans)
                raise AssertionError(f"the expected spans did not arrive in {timeout} s; got {names}")
            return list(self.spans)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# A receiver in a process of its own (bench.tracing): prints the endpoint, then serves until stdin closes.
if __name__ == "__main__":
    import sys

    server = OTLPReceiver()
    print(server.endpoint, flush=True)
    sys.stdin.read()
    server.close()
