"""The one way a cronwave service starts and stops.

Every server gets the library health service, reflection from its descriptors, the
interceptors in a declared order (tracing, errors, serialization, then the service's
own), and on SIGTERM or SIGINT:
health NOT_SERVING (``enter_graceful_shutdown``), ``stop(grace)``, the service's own
cleanup, then exit.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.instrumentation.grpc import server_interceptor

from cronwave_core import fanout, telemetry
from cronwave_core.errors import CronwaveError
from cronwave_core.settings import Settings

log = logging.getLogger("cronwave")


def _status(error: CronwaveError) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, error.status, grpc.StatusCode.INTERNAL)


class ErrorInterceptor(grpc.ServerInterceptor):
    """Turns a ``CronwaveError`` raised by a servicer into its gRPC status, with the
    error's message (which names the field and the rule) as the details."""

    def intercept_service(self, continuation: Callable[..., Any], details: Any) -> Any:
        handler = continuation(details)
        if handler is None:
            return None
        if handler.unary_unary:
            inner_uu = handler.unary_unary

            def unary_unary(request: Any, context: grpc.ServicerContext) -> Any:
                try:
                    return inner_uu(request, context)
                except CronwaveError as exc:
                    context.abort(_status(exc), exc.message)

            return handler._replace(unary_unary=unary_unary)
        if handler.unary_stream:
            inner_us = handler.unary_stream

            def unary_stream(request: Any, context: grpc.ServicerContext) -> Any:
                try:
                    yield from inner_us(request, context)
                except CronwaveError as exc:
                    context.abort(_status(exc), exc.message)

            return handler._replace(unary_stream=unary_stream)
        return handler


class SerializationInterceptor(grpc.ServerInterceptor):
    """Measures the server's protobuf decode and encode of unary calls made inside a
    trace, each in a span of kind ``serialization`` within the call's SERVER span.

    grpc decodes a request before any interceptor's wrapper runs and encodes the
    reply after it returns, so the stock SERVER span leaves both out. Here the
    handler is replaced by one that takes and returns bytes and does the decode and
    encode itself, inside the behaviour the SERVER span wraps. Streams and calls
    from outside any trace are passed through unchanged."""

    def intercept_service(self, continuation: Callable[..., Any], details: Any) -> Any:
        handler = continuation(details)
        if (
            handler is None
            or handler.unary_unary is None
            or handler.request_deserializer is None
            or handler.response_serializer is None
            or not any(key == "traceparent" for key, _ in details.invocation_metadata or ())
        ):
            return handler
        method: str = details.method
        hop = telemetry.rpc_hop(method)
        name = method.rsplit("/", 1)[-1]
        decode_name, encode_name = f"server decode {name}", f"server encode {name}"
        encode, behavior = handler.response_serializer, handler.unary_unary
        parse = handler.request_deserializer

        def decode(raw: bytes) -> Any:
            # A batch registers its runs before its decode span ends, so that span
            # too is copied into every run's trace (see cronwave_core.fanout).
            request = parse(raw)
            fanout.register_request(request)
            return request

        def unary_unary(raw: bytes, context: grpc.ServicerContext) -> bytes:
            try:
                request = telemetry.codec_call(decode, raw, decode_name, hop, "server")
            except Exception as exc:  # what grpc answers for an undecodable request
                context.abort(grpc.StatusCode.INTERNAL, f"cannot decode the request: {exc}")
            response = behavior(request, context)
            encoded: bytes = telemetry.codec_call(encode, response, encode_name, hop, "server")
            return encoded

        return handler._replace(
            unary_unary=unary_unary, request_deserializer=None, response_serializer=None
        )


@dataclass
class Service:
    """What a service hands to the bootstrap."""

    name: str  # kebab-case: folder = process = Kubernetes object
    address: str
    register: Callable[[grpc.Server], None]
    service_names: Sequence[str]  # full names, for health and reflection
    on_stop: Callable[[], None] = lambda: None  # after the server stopped
    # Before stop(grace): end long-lived streams and loops so the grace period
    # is spent on in-flight unary calls, not on watchers that never return.
    on_stopping: Callable[[], None] = lambda: None
    interceptors: Sequence[grpc.ServerInterceptor] = field(default_factory=tuple)
    max_workers: int = 32


class RunningServer:
    """A started server; ``stop`` is the graceful path, safe to call twice."""

    def __init__(self, service: Service, settings: Settings, traced: bool = True) -> None:
        self.service = service
        self.settings = settings
        interceptors: list[Any] = []
        traced = traced and settings.tracing
        if traced:
            interceptors.append(server_interceptor())
        interceptors.append(ErrorInterceptor())
        if traced:
            # Inside the error interceptor, so a CronwaveError raised by the servicer
            # still becomes its status; outside the service's own, which see messages.
            interceptors.append(SerializationInterceptor())
        interceptors.extend(service.interceptors)
        self.server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=service.max_workers, thread_name_prefix=service.name
            ),
            interceptors=interceptors,
            options=[
                ("grpc.so_reuseport", 0),
                # Clients ping every 10 s (cronwave_core.rpc) to notice a dead peer;
                # the server's default would answer those pings with GOAWAY.
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
                ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
            ],
        )
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        service.register(self.server)
        reflection.enable_server_reflection(
            (*service.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME), self.server
        )
        self.port = self.server.add_insecure_port(service.address)
        if self.port == 0:
            raise CronwaveError(
                f"{service.name}: cannot listen on {service.address}; is another process "
                "using the port?"
            )
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()

    def start(self) -> None:
        self.server.start()
        for name in (*self.service.service_names, ""):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info("%s listening on %s", self.service.name, self.service.address)

    def stop(self) -> None:
        with self._stop_lock:
            if self._stopped.is_set():
                return
            self.health.enter_graceful_shutdown()
            try:
                self.service.on_stopping()
            except Exception:
                log.exception("%s: on_stopping failed", self.service.name)
            self.server.stop(self.settings.grace.total_seconds()).wait()
            try:
                self.service.on_stop()
            finally:
                self._stopped.set()

    def wait(self) -> None:
        self._stopped.wait()


def serve(service: Service, settings: Settings, traced: bool = True) -> None:
    """Start ``service`` and block until SIGTERM or SIGINT has stopped it gracefully."""
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {service.name} %(levelname)s %(message)s"
    )
    server = RunningServer(service, settings, traced=traced)

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("%s: signal %d, stopping gracefully", service.name, signum)
        threading.Thread(target=server.stop, name="graceful-stop", daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    server.start()
    server.wait()
    log.info("%s stopped", service.name)


def full_names(descriptors: Iterable[Any]) -> list[str]:
    """Service full names of the generated ``*_pb2.DESCRIPTOR.services_by_name``."""
    return [svc.full_name for d in descriptors for svc in d.services_by_name.values()]
