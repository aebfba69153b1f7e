"""OTLP receivers written for the tests: a real gRPC ``TraceService`` server and an
OTLP/HTTP endpoint (``POST /v1/traces``) on loopback, both from opentelemetry-proto's
generated code, keeping every span they are sent; and what such a receiver makes of
OTLP JSON (``request_from_json``)."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

Request = trace_service_pb2.ExportTraceServiceRequest


@dataclass(frozen=True)
class Received:
    """One span as a receiver got it, with its resource's ``service.name``."""

    service: str
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]


def _value(value: AnyValue) -> Any:
    field = value.WhichOneof("value")
    if field == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, field) if field else None


def spans_of(request: Any) -> Iterator[Received]:
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield Received(
                    service=str(resource.get("service.name", "")),
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(),
                    name=span.name,
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    attributes={a.key: _value(a.value) for a in span.attributes},
                )


class _Kept:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[Received] = []
        self.requests = 0

    def keep(self, request: Any) -> None:
        found = list(spans_of(request))
        with self._lock:
            self._spans.extend(found)
            self.requests += 1

    def spans(self) -> list[Received]:
        with self._lock:
            return list(self._spans)


class GrpcReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC collector's trace service on a free loopback port."""

    def __init__(self) -> None:
        self.kept = _Kept()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{port}"
        self._server.start()

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.kept.keep(request)
        return trace_service_pb2.ExportTraceServiceResponse()

    def spans(self) -> list[Received]:
        return self.kept.spans()

    def stop(self) -> None:
        self._server.stop(grace=None)


class HttpReceiver:
    """An OTLP/HTTP collector's ``/v1/traces`` on a free loopback port."""

    def __init__(self) -> None:
        kept = self.kept = _Kept()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                kept.keep(Request.FromString(body))
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def spans(self) -> list[Received]:
        return self.kept.spans()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def request_from_json(document: dict[str, Any]) -> Any:
    """OTLP JSON as a receiver reads it: an ``ExportTraceServiceRequest`` (unknown
    fields refused), its ids hex as OTLP/JSON writes them (proto3's own JSON would
    want base64) and of their lengths (16 and 8 bytes, a root's parent empty)."""
    converted = {
        "resourceSpans": [
            {
                **resource_spans,
                "scopeSpans": [
                    {**scope, "spans": [_ids_as_base64(s) for s in scope.get("spans", [])]}
                    for scope in resource_spans.get("scopeSpans", [])
                ],
            }
            for resource_spans in document["resourceSpans"]
        ]
    }
    request = json_format.ParseDict(converted, Request(), ignore_unknown_fields=False)
    for span in (s for r in request.resource_spans for sc in r.scope_spans for s in sc.spans):
        lengths = (len(span.trace_id), len(span.span_id), len(span.parent_span_id))
        assert lengths[:2] == (16, 8) and lengths[2] in (0, 8), (span.name, lengths)
    return request


def _ids_as_base64(span: dict[str, Any]) -> dict[str, Any]:
    out = dict(span)
    for key in ("traceId", "spanId", "parentSpanId"):
        if key in out:
            out[key] = base64.b64encode(bytes.fromhex(out[key])).decode()
    return out
