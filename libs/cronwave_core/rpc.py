"""Client channels: every outgoing call has a deadline and is traced.

Traced unary calls also measure their protobuf encode and decode: the channel
encodes the request before the call (so before the OpenTelemetry CLIENT span
starts) and decodes the reply after it, each in a span of kind ``serialization``
(``spans.codec_call``). The CLIENT span then holds transport time only, and the
network time of a call (client span minus the server's span, which holds the
server's own decode and encode) is not inflated by serialization. A call of an RPC that
has no hop of its own (``rpc_hops``) sends the caller's hop along, so its server's spans
are placed in it (``propagation.call_hop``). Before its first traced call, a channel is
connected in a ``connect`` span of the call's hop (``channel_ready``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import client_interceptor, grpcext

from cronwave_core.channel_ready import ChannelReadiness
from cronwave_core.channels import CHANNEL_OPTIONS, DeadlineInterceptor, RelayInterceptor
from cronwave_core.security.tls import new_channel
from cronwave_core.settings import TlsSettings
from cronwave_core.status import (
    error_from_item,
    error_from_rpc,
    error_from_status,
    item_error,
    relayed_status,
    status_code,
)
from cronwave_core.telemetry.lean import plain_attributes
from cronwave_core.telemetry.propagation import call_hop
from cronwave_core.telemetry.rpc_hops import rpc_hop
from cronwave_core.telemetry.spans import codec_call
from cronwave_core.telemetry.tracing import tracing_enabled
from cronwave_core.telemetry.vocabulary import ATTR_HOP


def _same(value: Any) -> Any:
    return value


def _in_trace() -> bool:
    return trace.get_current_span().get_span_context().is_valid


def _caller_hop() -> str | None:
    """The hop of the span a call is made in, if it says one."""
    hop = plain_attributes(trace.get_current_span()).get(ATTR_HOP)
    return hop if isinstance(hop, str) else None


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
        readiness: ChannelReadiness | None = None,
    ) -> None:
        # grpc-stubs lags grpcio: unary_unary's fourth argument (_registered_method) is missing.
        self._bytes = channel.unary_unary(method, None, None, registered)  # type: ignore[call-arg]
        self._channel = channel
        self._method = method
        self._registered = registered
        self._readiness = readiness
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

    def _connected(self, traced: bool, timeout: Any) -> None:
        """Before a traced call on a channel not known to be connected: connect it in a
        ``connect`` span (``channel_ready``)."""
        readiness = self._readiness
        if traced and readiness is not None and not readiness.ready:
            readiness.ensure(timeout, self._hop)

    def __call__(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        traced = _in_trace()
        self._connected(traced, kwargs.get("timeout"))
        try:
            if traced and self._hop is None:
                with call_hop(_caller_hop()):
                    raw = self._bytes(self._request(request, True), *args, **kwargs)
                    return self._reply(raw, True)
            return self._reply(self._bytes(self._request(request, traced), *args, **kwargs), traced)
        except grpc.RpcError as exc:
            if self._readiness is not None:
                self._readiness.after_error(exc)
            raise

    def with_call(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        traced = _in_trace()
        self._connected(traced, kwargs.get("timeout"))
        try:
            if traced and self._hop is None:
                with call_hop(_caller_hop()):
                    raw, call = self._bytes.with_call(self._request(request, True), *args, **kwargs)
                    return self._reply(raw, True), call
            raw, call = self._bytes.with_call(self._request(request, traced), *args, **kwargs)
            return self._reply(raw, traced), call
        except grpc.RpcError as exc:
            if self._readiness is not None:
                self._readiness.after_error(exc)
            raise

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

    def __init__(self, channel: grpc.Channel, readiness: ChannelReadiness | None = None) -> None:
        self._channel = channel
        self._readiness = readiness

    def unary_unary(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        _registered_method: bool = False,
    ) -> grpc.UnaryUnaryMultiCallable:
        return _SerializingUnaryUnary(
            self._channel,
            method,
            request_serializer,
            response_deserializer,
            _registered_method,
            self._readiness,
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


def open_channel(
    address: str,
    timeout: timedelta,
    *,
    traced: bool = True,
    tls: TlsSettings | None = None,
) -> grpc.Channel:
    """A channel to ``address`` with mutual TLS as ``tls`` says (this process's
    ``CRONWAVE_TLS_*`` when None), a default deadline and, when ``traced`` and this
    process traces (``telemetry.tracing.tracing_enabled``), OpenTelemetry client spans
    and serialization spans, and a ``connect`` span for its set-up."""
    raw = channel = new_channel(address, CHANNEL_OPTIONS, tls)
    traced = traced and tracing_enabled()
    if traced:
        # OpenTelemetry's interceptor is not a grpc one: it wraps through grpcext.
        channel = grpcext.intercept_channel(channel, client_interceptor())
    channel = grpc.intercept_channel(channel, DeadlineInterceptor(timeout), RelayInterceptor())
    if not traced:
        return channel
    return SerializingChannel(channel, ChannelReadiness(raw, address, timeout.total_seconds()))


__all__ = [
    "DeadlineInterceptor",
    "SerializingChannel",
    "error_from_item",
    "error_from_rpc",
    "error_from_status",
    "item_error",
    "open_channel",
    "relayed_status",
    "status_code",
]
