"""Client channels: every outgoing call has a deadline and is traced.

Traced unary calls also measure their protobuf encode and decode: the channel
encodes the request before the call (so before the OpenTelemetry CLIENT span
starts) and decodes the reply after it, each in a span of kind ``serialization``
(``spans.codec_call``). The CLIENT span then holds transport time only, and the
network time of a call (client span minus the server's span, which holds the
server's own decode and encode) is not inflated by serialization.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import grpc
from cronwave_proto.v1 import common_pb2
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import client_interceptor, grpcext

from cronwave_core import errors
from cronwave_core.telemetry.rpc_hops import rpc_hop
from cronwave_core.telemetry.spans import codec_call
from cronwave_core.telemetry.tracing import tracing_enabled


class _CallDetails(
    collections.namedtuple(
        "_CallDetails",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    pass


class DeadlineInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
):
    """Gives every call that has no deadline the default one. Streams are exempt:
    a watch stream lives as long as its caller wants it to."""

    def __init__(self, default: timedelta) -> None:
        self._timeout = default.total_seconds()

    def _details(self, details: Any) -> Any:
        if details.timeout is not None:
            return details
        return _CallDetails(
            details.method,
            self._timeout,
            details.metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(details, request)


_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
]


def _same(value: Any) -> Any:
    return value


def _in_trace() -> bool:
    return trace.get_current_span().get_span_context().is_valid


class _SerializingUnaryUnary(grpc.UnaryUnaryMultiCallable):
    """A unary method callable that encodes and decodes outside the call, each in a
    serialization span when the caller is inside a trace."""

    def __init__(
        self,
        channel: grpc.Channel,
        method: str,
        serializer: Callable[[Any], bytes] | None,
        deserializer: Callable[[bytes], Any] | None,
        registered: bool,
    ) -> None:
        # grpc-stubs lags grpcio: unary_unary's fourth argument (_registered_method) is missing.
        self._bytes = channel.unary_unary(method, None, None, registered)  # type: ignore[call-arg]
        self._channel = channel
        self._method = method
        self._registered = registered
        self._encode = serializer or _same
        self._decode = deserializer or _same
        self._hop = rpc_hop(method)
        name = method.rsplit("/", 1)[-1]
        self._encode_name = f"client encode {name}"
        self._decode_name = f"client decode {name}"

    def _request(self, request: Any, traced: bool) -> Any:
        if not traced:
            return self._encode(request)
        return codec_call(self._encode, request, self._encode_name, self._hop, "client")

    def _reply(self, raw: Any, traced: bool) -> Any:
        if not traced:
            return self._decode(raw)
        return codec_call(self._decode, raw, self._decode_name, self._hop, "client")

    def __call__(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        traced = _in_trace()
        return self._reply(self._bytes(self._request(request, traced), *args, **kwargs), traced)

    def with_call(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        traced = _in_trace()
        raw, call = self._bytes.with_call(self._request(request, traced), *args, **kwargs)
        return self._reply(raw, traced), call

    def future(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        # A future decodes on grpc's thread; it is not measured, only passed through.
        plain = self._channel.unary_unary(
            self._method,
            None if self._encode is _same else self._encode,
            None if self._decode is _same else self._decode,
            self._registered,  # type: ignore[call-arg]  # grpc-stubs lags grpcio, as above
        )
        return plain.future(request, *args, **kwargs)


class SerializingChannel(grpc.Channel):
    """A channel whose unary methods measure their encode and decode (see the
    module docstring); streams pass through unmeasured."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._channel = channel

    def unary_unary(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        _registered_method: bool = False,
    ) -> grpc.UnaryUnaryMultiCallable:
        return _SerializingUnaryUnary(
            self._channel, method, request_serializer, response_deserializer, _registered_method
        )

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.unary_stream(method, *args, **kwargs)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.stream_unary(method, *args, **kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.stream_stream(method, *args, **kwargs)

    def subscribe(self, *args: Any, **kwargs: Any) -> None:
        self._channel.subscribe(*args, **kwargs)

    def unsubscribe(self, *args: Any, **kwargs: Any) -> None:
        self._channel.unsubscribe(*args, **kwargs)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> SerializingChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_channel(address: str, timeout: timedelta, *, traced: bool = True) -> grpc.Channel:
    """An insecure channel to ``address`` (loopback or a private network) with a
    default deadline and, when ``traced`` and this process traces
    (``telemetry.tracing.tracing_enabled``), OpenTelemetry client spans and serialization
    spans."""
    channel = grpc.insecure_channel(address, options=_OPTIONS)
    traced = traced and tracing_enabled()
    if traced:
        # OpenTelemetry's interceptor is not a grpc one: it wraps through grpcext.
        channel = grpcext.intercept_channel(channel, client_interceptor())
    channel = grpc.intercept_channel(channel, DeadlineInterceptor(timeout))
    return SerializingChannel(channel) if traced else channel


def error_from_rpc(exc: grpc.RpcError) -> errors.CronwaveError:
    """The cronwave error that a failed call stands for, message unchanged."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return error_from_status(code.name if code is not None else "UNKNOWN", details or "")


def error_from_status(name: str, details: str) -> errors.CronwaveError:
    """The cronwave error for a gRPC status (by name) and its message."""
    cls = errors.BY_STATUS.get(name, errors.CronwaveError)
    if name == "INVALID_ARGUMENT":
        field, _, rule = details.partition(": ")
        return errors.InvalidArgument(field, rule)
    err = cls.__new__(cls)
    errors.CronwaveError.__init__(err, details or name)
    err.status = name
    return err


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def status_code(number: int) -> grpc.StatusCode:
    """The gRPC status code an ``ItemError.code`` number stands for."""
    return _CODES.get(number, grpc.StatusCode.UNKNOWN)


def error_from_item(item: common_pb2.ItemError) -> errors.CronwaveError:
    """The cronwave error one item of a batch call was refused with."""
    return error_from_status(status_code(item.code).name, item.message)


def item_error(exc: errors.CronwaveError) -> common_pb2.ItemError:
    """One item's refusal in a batch answer: the status its single call would end with."""
    code = getattr(grpc.StatusCode, exc.status, grpc.StatusCode.UNKNOWN)
    return common_pb2.ItemError(code=code.value[0], message=exc.message)
