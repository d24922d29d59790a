"""An OTLP/HTTP trace receiver on 127.0.0.1 for the tests: what a collector would get, parsed by
the OpenTelemetry protobuf definitions."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.timing import scaled


class OtlpReceiver:
    """Collects the spans POSTed to `/v1/traces`: `spans()` lists them as dicts."""

    def __init__(self):
        self._spans: list[dict] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                receiver._add(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _add(self, request) -> None:
        with self._lock:
            for resource_spans in request.resource_spans:
                service = {a.key: a.value.string_value
                           for a in resource_spans.resource.attributes}.get("service.name")
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self._spans.append({
                            "name": span.name, "service": service,
                            "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                            "parent_id": span.parent_span_id.hex(),
                            "attributes": {a.key: _value(a.value) for a in span.attributes}})

    def spans(self) -> list[dict]:
        with self._lock:
            return list(self._spans)

    def wait_for(self, found, seconds: float = 30) -> list[dict]:
        """The spans once `found(spans)` holds (or the last seen after `seconds`, scaled)."""
        deadline = time.monotonic() + scaled(seconds)
        while not found(self.spans()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.spans()

    def stop(self) -> None:
        self._server.shutdown()


def _value(value):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None
