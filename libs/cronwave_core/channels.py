"""Plain client channels: mutual TLS (``cronwave_core.security.tls``) and a default
deadline on every unary call. They import grpc alone: the SDK's client uses them as
they are, and ``cronwave_core.rpc`` adds tracing on top for the services."""

from __future__ import annotations

import collections
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import grpc

from cronwave_core.security import identity
from cronwave_core.security.tls import new_channel
from cronwave_core.settings import TlsSettings


class _CallDetails(
    collections.namedtuple(
        "_CallDetails",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    pass


def _changed(details: Any, **fields: Any) -> _CallDetails:
    """``details`` with ``fields`` (``timeout``, ``metadata``) replaced."""
    return _CallDetails(
        details.method,
        fields.get("timeout", details.timeout),
        fields.get("metadata", details.metadata),
        details.credentials,
        getattr(details, "wait_for_ready", None),
        getattr(details, "compression", None),
    )


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
        return _changed(details, timeout=self._timeout)

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(details, request)


class RelayInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds whom a call is made for (``identity.ON_BEHALF_OF``) when this service makes
    it while serving a person's call (the dispatcher recording the run a user
    triggered), so the audit trail names that person."""

    def _details(self, details: Any) -> Any:
        current = identity.current()
        requester = current.requester if current is not None else ""
        if not requester:
            return details
        metadata = [*(details.metadata or ()), (identity.ON_BEHALF_OF, requester)]
        return _changed(details, metadata=metadata)

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._details(details), request)


CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
]


def plain_channel(address: str, timeout: timedelta, tls: TlsSettings | None = None) -> grpc.Channel:
    """A channel to ``address`` (TLS as ``tls`` says, this process's settings when
    None) whose unary calls without a deadline get ``timeout``; reconnects back off
    from 100 ms to 1 s, and keepalive pings find a dead peer within about 15 s.
    Streams have no default deadline."""
    channel = new_channel(address, CHANNEL_OPTIONS, tls)
    return grpc.intercept_channel(channel, DeadlineInterceptor(timeout))
