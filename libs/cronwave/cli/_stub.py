"""One service's stub for a client command, with failures turned into
``CronwaveError``s (``Unavailable`` naming the service when it cannot be reached)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from cronwave.cli._console import network_settings, reported_errors, tls_settings
from cronwave_core.errors import CLI

Resp = TypeVar("Resp")
S = TypeVar("S")


class StoreStub(Generic[S]):
    """A stub (``make(channel)``) on a channel to the workflow-store."""

    def __init__(self, make: Callable[[Any], S]) -> None:
        from cronwave import _transport
        from cronwave_core.channels import plain_channel

        settings = network_settings()
        self.address = settings.store_addr
        self.timeout = settings.rpc_timeout
        self._transport = _transport
        self._channel = plain_channel(settings.store_addr, settings.rpc_timeout, tls_settings())
        self.stub = make(self._channel)

    def call(self, method: Callable[[Any], Resp], request: Any) -> Resp:
        try:
            return method(request)
        except self._transport.RpcError as exc:
            where = f"workflow-store at {self.address}"
            raise self._transport.call_error(where, self.timeout, exc).hinted(CLI) from exc

    def close(self) -> None:
        self._channel.close()


@contextmanager
def store_stub(make: Callable[[Any], S]) -> Iterator[StoreStub[S]]:
    """``StoreStub(make)`` for the block, errors reported, closed after."""
    with reported_errors():
        store = StoreStub(make)
        try:
            yield store
        finally:
            store.close()
