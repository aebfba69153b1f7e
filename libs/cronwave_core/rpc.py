"""Client channels: every outgoing call has a deadline and is traced."""

from __future__ import annotations

import collections
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import grpc
from opentelemetry.instrumentation.grpc import client_interceptor, grpcext

from cronwave_core import errors


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


def open_channel(address: str, timeout: timedelta, *, traced: bool = True) -> grpc.Channel:
    """An insecure channel to ``address`` (loopback or a private network) with a
    default deadline and, when ``traced``, OpenTelemetry client spans."""
    channel = grpc.insecure_channel(address, options=_OPTIONS)
    if traced:
        # OpenTelemetry's interceptor is not a grpc one: it wraps through grpcext.
        channel = grpcext.intercept_channel(channel, client_interceptor())
    return grpc.intercept_channel(channel, DeadlineInterceptor(timeout))


def error_from_rpc(exc: grpc.RpcError) -> errors.CronwaveError:
    """The cronwave error that a failed call stands for, message unchanged."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    name = code.name if code is not None else "UNKNOWN"
    cls = errors.BY_STATUS.get(name, errors.CronwaveError)
    if name == "INVALID_ARGUMENT":
        field, _, rule = (details or "").partition(": ")
        return errors.InvalidArgument(field, rule)
    err = cls.__new__(cls)
    errors.CronwaveError.__init__(err, details or name)
    err.status = name
    return err
