"""The one way a cronwave service starts and stops.

Every server listens with mutual TLS (``cronwave_core.security.tls``; plaintext on
loopback only when ``CRONWAVE_INSECURE=1``) and gets the library health service,
reflection from its descriptors, the interceptors in a declared order (tracing,
errors, authentication and the per-RPC rules (``cronwave_core.security.authz``),
serialization, then the service's own, then, in a process started for tests only,
the latency faults of ``cronwave_core.fault_interceptors``), the process's Prometheus endpoint
(``CRONWAVE_METRICS_ADDR``, ``cronwave_core.metrics``), and on SIGTERM or SIGINT:
health NOT_SERVING (``enter_graceful_shutdown``), ``stop(grace)``, the service's own
cleanup, then exit.
"""

from __future__ import annotations

import logging
import secrets
import signal
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NoReturn

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.instrumentation.grpc import server_interceptor

from cronwave_core import heap
from cronwave_core.errors import CronwaveError, InvalidArgument
from cronwave_core.fault_interceptors import server_faults
from cronwave_core.handlers import around
from cronwave_core.limits import DEFAULT_LIMITS
from cronwave_core.logs import configure_logging
from cronwave_core.metrics import MetricsServer, serve_metrics
from cronwave_core.security.authz import AuthInterceptor, KeyCheck
from cronwave_core.security.keys import CachedKeyCheck, RemoteKeyCheck
from cronwave_core.security.tls import CredentialFiles, check_bind, server_credentials
from cronwave_core.settings import MetricsSettings, NetworkSettings, TestHooks, TlsSettings
from cronwave_core.status import rich_status
from cronwave_core.targets import one_address
from cronwave_core.telemetry import fanout
from cronwave_core.telemetry.rpc_hops import rpc_hop
from cronwave_core.telemetry.spans import codec_call

log = logging.getLogger("cronwave")

#: How often a waiting main thread wakes to run the handlers of signals (``RunningServer.wait``).
_SIGNAL_POLL_S = 0.2

#: The variable that says where each service listens: one address for the process,
#: though to its callers it may be one of a list (``cronwave_core.targets``).
LISTEN_VARS = {
    "workflow-store": "CRONWAVE_STORE_ADDR",
    "leader-election": "CRONWAVE_LEADER_ADDR",
    "dispatcher": "CRONWAVE_DISPATCHER_ADDR",
    "cron-planner": "CRONWAVE_PLANNER_ADDR",
    "worker": "CRONWAVE_WORKER_ADDR",
}


class UndecodableRequest(InvalidArgument):
    """A request whose bytes are not a serialized message of the method's type."""

    def __init__(self, type_name: str) -> None:
        super().__init__(
            "request",
            f"the body is not a valid serialized {type_name} message (malformed protobuf "
            "or a string that is not UTF-8); nothing was done",
        )


def _type_name(parse: Callable[[bytes], Any], method: str) -> str:
    """The full name of the message ``parse`` (a generated ``FromString``) decodes."""
    cls = getattr(parse, "__self__", None)
    descriptor = getattr(cls, "DESCRIPTOR", None)
    return str(getattr(descriptor, "full_name", "")) or f"request of {method}"


def decoder(parse: Callable[[bytes], Any], method: str) -> Callable[[bytes], Any]:
    """``parse``, raising ``UndecodableRequest`` for bytes it cannot decode."""
    type_name = _type_name(parse, method)

    def decode(raw: bytes) -> Any:
        try:
            return parse(raw)
        except Exception:  # DecodeError, or a string field that is not UTF-8
            raise UndecodableRequest(type_name) from None

    return decode


class ErrorInterceptor(grpc.ServerInterceptor):
    """Every call a servicer fails ends with a status the caller can act on, and no
    internals in its message:

    - a request whose bytes do not decode: ``INVALID_ARGUMENT`` (grpc's own answer
      would be ``INTERNAL``: the handler here takes the bytes and decodes them itself);
    - a ``CronwaveError``: its status, with its message (which names the field and
      the rule) and, for a kind of ``errors.BY_REASON``, its reason and attributes
      as status details (``cronwave_core.status.rich_status``), so the caller raises
      the same class;
    - any other exception: ``INTERNAL`` with a correlation id and nothing else; the
      traceback goes to the service's log under the same id, for an operator to find.

    A call the servicer ended itself (``context.abort``) keeps its status."""

    def __init__(self, service: str = "service") -> None:
        self.service = service

    def intercept_service(self, continuation: Callable[..., Any], details: Any) -> Any:
        handler = continuation(details)
        if handler is None:
            return None
        method: str = details.method
        parse = handler.request_deserializer
        fail = self._fail

        def guard(context: grpc.ServicerContext) -> _Failing:
            return _Failing(fail, context, method)

        return around(handler, guard, decoder(parse, method) if parse is not None else None)

    def _fail(self, exc: Exception, context: grpc.ServicerContext, method: str) -> NoReturn:
        """End the call for ``exc``: its own status for a ``CronwaveError``, else
        ``INTERNAL`` under a new correlation id (the traceback is logged with it)."""
        if isinstance(exc, CronwaveError):
            if exc.__cause__ is not None and exc.status == "UNAVAILABLE":
                # What the caller is not told (a driver's text names the statement).
                log.warning("%s: %s in %s: %s", self.service, exc.message, method, exc.__cause__)
            context.abort_with_status(rich_status(exc))
        if _ended(context):
            raise exc  # context.abort: the call already has its status
        correlation = secrets.token_hex(8)
        log.error(
            "%s: internal error (correlation id %s) in %s",
            self.service,
            correlation,
            method,
            exc_info=exc,
        )
        context.abort(
            grpc.StatusCode.INTERNAL,
            f"internal error (correlation id {correlation}); the detail is in the "
            f"{self.service}'s log",
        )
        raise AssertionError("context.abort returned")  # it raises


class _Failing:
    """Ends the call it guards for the exception the call raised (``_fail``)."""

    __slots__ = ("_context", "_fail", "_method")

    def __init__(
        self,
        fail: Callable[[Exception, grpc.ServicerContext, str], NoReturn],
        context: grpc.ServicerContext,
        method: str,
    ) -> None:
        self._fail, self._context, self._method = fail, context, method

    def __enter__(self) -> None:
        return None

    def __exit__(self, _kind: object, exc: BaseException | None, _tb: object) -> None:
        if isinstance(exc, Exception):
            self._fail(exc, self._context, self._method)


def _ended(context: grpc.ServicerContext) -> bool:
    """Whether the servicer already gave the call its status (``context.abort``)."""
    try:
        code = context.code()  # type: ignore[attr-defined]  # grpc-stubs lags grpcio
    except (AttributeError, RuntimeError):  # a grpcio without ServicerContext.code
        return False
    return code is not None and code != grpc.StatusCode.OK


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
        hop = rpc_hop(method)
        name = method.rsplit("/", 1)[-1]
        decode_name, encode_name = f"server decode {name}", f"server encode {name}"
        encode, behavior = handler.response_serializer, handler.unary_unary
        parse = decoder(handler.request_deserializer, method)

        def decode(raw: bytes) -> Any:
            # A batch registers its runs before its decode span ends, so that span
            # too is copied into every run's trace (see cronwave_core.telemetry.fanout).
            request = parse(raw)
            fanout.register_request(request)
            return request

        def unary_unary(raw: bytes, context: grpc.ServicerContext) -> bytes:
            # An undecodable request raises UndecodableRequest: the error
            # interceptor outside answers INVALID_ARGUMENT.
            request = codec_call(decode, raw, decode_name, hop, "server")
            response = behavior(request, context)
            encoded: bytes = codec_call(encode, response, encode_name, hop, "server")
            return encoded

        return handler._replace(
            unary_unary=unary_unary, request_deserializer=None, response_serializer=None
        )


#: A service's gRPC handler threads unless it says otherwise (the workflow-store:
#: ``CRONWAVE_STORE_THREADS``). A call that finds them all busy waits for one until
#: its deadline; the Redis pools a handler uses are sized to them.
SERVER_THREADS = 32


@dataclass
class Service:
    """What a service hands to the bootstrap."""

    name: str  # kebab-case: folder = process = Kubernetes object
    address: str
    register: Callable[[grpc.Server], None]
    service_names: Sequence[str]  # full names, for health and reflection
    # Once the server listens: the service's own loops and threads, so a process
    # refused at start-up (its address, its port, its TLS) has started none of them.
    on_start: Callable[[], None] = lambda: None
    on_stop: Callable[[], None] = lambda: None  # after the server stopped
    # Before stop(grace): end long-lived streams and loops so the grace period
    # is spent on in-flight unary calls, not on watchers that never return.
    on_stopping: Callable[[], None] = lambda: None
    interceptors: Sequence[grpc.ServerInterceptor] = field(default_factory=tuple)
    max_workers: int = SERVER_THREADS
    # The server's gRPC receive cap: above every request limit the servicer checks
    # (cronwave_core.limits), so an oversized field is refused naming it; only a
    # message past this meets gRPC's own refusal, which names no field.
    max_receive_bytes: int = DEFAULT_LIMITS.receive_bytes
    # How API keys sent to this service are checked (None: with the workflow-store's
    # AuthenticateApiKey, cached); see cronwave_core.security.keys.
    check_key: KeyCheck | None = None


class RunningServer:
    """A started server; ``stop`` is the graceful path, safe to call twice."""

    def __init__(
        self,
        service: Service,
        grace: timedelta,
        traced: bool = True,
        hooks: TestHooks | None = None,
        metrics: MetricsSettings | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        """``grace``: how long ``stop`` lets in-flight calls finish (``CRONWAVE_GRACE``);
        ``traced``: server spans and serialization timing (``CRONWAVE_TRACING``);
        ``hooks``: the process's test hooks (faults only where they are enabled);
        ``metrics``: where ``start`` serves ``/metrics`` (None: read from the
        environment, ``CRONWAVE_METRICS_ADDR``); ``tls``: its certificate and whether
        it is insecure (None: ``CRONWAVE_TLS_*`` and ``CRONWAVE_INSECURE``)."""
        one_address(service.address, LISTEN_VARS.get(service.name, service.name))
        self.service = service
        self.grace = grace
        self.metrics = metrics if metrics is not None else MetricsSettings.from_env()
        tls = tls if tls is not None else TlsSettings.from_env()
        if tls.insecure:
            check_bind(service.address, service.name)
        self.metrics_server: MetricsServer | None = None
        interceptors: list[Any] = []
        if traced:
            interceptors.append(server_interceptor())
        interceptors.append(ErrorInterceptor(service.name))
        # Inside the error interceptor, so a refusal becomes its status and message.
        check_key = service.check_key
        if check_key is None and not tls.insecure:
            # Every service but the store asks the store about API keys.
            network = NetworkSettings.from_env()
            remote = RemoteKeyCheck(network.store_addr, network.rpc_timeout)
            check_key = CachedKeyCheck(remote, tls.auth_cache_ttl)
        interceptors.append(
            AuthInterceptor(service.name, insecure=tls.insecure, check_key=check_key)
        )
        if traced:
            # Inside the error interceptor, so a CronwaveError raised by the servicer
            # still becomes its status; outside the service's own, which see messages.
            interceptors.append(SerializationInterceptor())
        interceptors.extend(service.interceptors)
        # Innermost, so a fault's span sits within the call's own spans; none at all
        # in a process not started for tests.
        if hooks is not None:
            interceptors.extend(server_faults(hooks, service.service_names))
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
                ("grpc.max_receive_message_length", service.max_receive_bytes),
            ],
        )
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        service.register(self.server)
        reflection.enable_server_reflection(
            (*service.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME), self.server
        )
        if tls.insecure:
            self.port = self.server.add_insecure_port(service.address)
        else:
            files = CredentialFiles(tls.ca, tls.cert, tls.key)
            self.port = self.server.add_secure_port(service.address, server_credentials(files))
        if self.port == 0:
            raise CronwaveError(
                f"{service.name}: cannot listen on {service.address}; is another process "
                "using the port?"
            )
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()

    def start(self) -> None:
        """Serve ``/metrics`` (when configured), then the gRPC server. A metrics port
        that is taken stops start-up, as a taken gRPC port does."""
        if self.metrics.metrics_addr:
            try:
                self.metrics_server = serve_metrics(self.metrics.metrics_addr)
            except OSError as exc:
                raise CronwaveError(
                    f"{self.service.name}: cannot serve metrics on "
                    f"{self.metrics.metrics_addr} ({exc}); is another process using the port?"
                ) from exc
        self.server.start()
        self.service.on_start()
        heap.settle()  # what start-up built lives as long as the process
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
            self.server.stop(self.grace.total_seconds()).wait()
            if self.metrics_server is not None:
                self.metrics_server.stop()
            try:
                self.service.on_stop()
            finally:
                self._stopped.set()

    def wait(self) -> None:
        """Block until stopped. The main thread wakes every ``_SIGNAL_POLL_S``: a
        signal the kernel delivered to another of the process's threads only sets a
        flag, and Python runs its handler when the main thread next runs, which a wait
        without a timeout may never do (a SIGTERM was once ignored for 30 s so)."""
        while not self._stopped.wait(_SIGNAL_POLL_S):
            pass


def serve(
    service: Service, grace: timedelta, traced: bool = True, hooks: TestHooks | None = None
) -> None:
    """Start ``service`` and block until SIGTERM or SIGINT has stopped it gracefully."""
    configure_logging(service.name)
    server = RunningServer(service, grace, traced=traced, hooks=hooks)

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
