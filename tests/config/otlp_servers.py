"""Two small HTTP servers on 127.0.0.1 for the tracing tests, each in a thread of the test process: an OTLP/HTTP
collector that decodes what exporters send (`ExportTraceServiceRequest`, protobuf), and a recording hop in
front of a destination that keeps each request's method, path and headers and passes it on unchanged."""

import gzip
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import urllib3
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_span_id: str  # "" for a root
    start_ns: int
    attributes: dict


def _attributes(span) -> dict:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in span.attributes}


def _decoded(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest.FromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        service=resource.get("service.name", ""),
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        start_ns=span.start_time_unix_nano,
                        attributes=_attributes(span),
                    )
                )
    return spans


class _Server:
    def __init__(self, handler):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.owner = self
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


class _CollectorHandler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - the standard library's name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        self.server.owner.add(_decoded(body))
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


class Collector(_Server):
    """An OTLP/HTTP traces endpoint at `base_url` + /v1/traces; `spans` as received, in arrival order."""

    def __init__(self):
        self.spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        super().__init__(_CollectorHandler)

    def add(self, spans: list[ReceivedSpan]) -> None:
        with self._lock:
            self.spans.extend(spans)

    def of_key(self, action_key: str) -> list[ReceivedSpan]:
        with self._lock:
            spans = [s for s in self.spans if s.attributes.get("handoff.action_key") == action_key]
        return sorted(spans, key=lambda s: s.start_ns)


class _HopHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _pass_on(self):
        hop = self.server.owner
        body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
        hop.record(self.command, self.path, dict(self.headers.items()))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        answer = hop.pool.urlopen(
            self.command, self.path, body=body or None, headers=headers, retries=False
        )
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            if name.lower() not in ("connection", "transfer-encoding", "content-length"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.data)))
        self.end_headers()
        self.wfile.write(answer.data)

    do_GET = do_POST = _pass_on  # noqa: N815

    def log_message(self, *args):
        pass


class RecordingHop(_Server):
    """Passes every request on to `target` (scheme, host and port; the path is kept) and records it."""

    def __init__(self, target: str):
        self.pool = urllib3.connection_from_url(target)
        self.requests: list[tuple[str, str, dict]] = []
        self._lock = threading.Lock()
        super().__init__(_HopHandler)

    def record(self, method: str, path: str, headers: dict) -> None:
        with self._lock:
            self.requests.append((method, path, {k.lower(): v for k, v in headers.items()}))
