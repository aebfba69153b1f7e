"""Certificates of the test session's CA (``tests/conftest.py`` makes one per test
process and points CRONWAVE_TLS_DIR at it), for a test that calls as a service."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import grpc

from cronwave_core.security.rules import rule_table
from cronwave_core.security.tls import new_channel, process_tls, set_process_tls
from cronwave_core.settings import TlsSettings
from cronwave_core.suite import Suite


def as_identity(identity: str, token: str = "") -> TlsSettings:
    """This process's TLS settings, presenting ``identity``'s certificate (a service's
    name, ``local-admin`` or ``client``) and sending ``token`` when given."""
    tls = process_tls()
    return dataclasses.replace(
        tls,
        identity=identity,
        cert=tls.tls_dir / f"{identity}.pem",
        key=tls.tls_dir / f"{identity}-key.pem",
        token=token,
    )


@contextlib.contextmanager
def process_identity(identity: str) -> Iterator[None]:
    """Within the block this test process calls as ``identity`` wherever it opens a
    channel with the process's settings (job code run in the test, as a worker)."""
    previous = set_process_tls(as_identity(identity))
    try:
        yield
    finally:
        set_process_tls(previous)


def channel(address: str, identity: str = "local-admin", token: str = "") -> grpc.Channel:
    return new_channel(address, (), as_identity(identity, token))


def caller_for(method: str) -> str:
    """The identity a test calls ``method`` as: the local administrator where a role
    may call it, else the first service its rule allows (the hop that makes the call
    in production: the dispatcher records runs, a worker claims them, ...)."""
    rule = rule_table().get(method)
    if rule is None or rule.role is not None or rule.anyone or not rule.services:
        return "local-admin"
    return sorted(rule.services)[0]


class HopChannel(grpc.Channel):
    """A channel to one server that makes each call with the certificate of an
    identity the method's rule allows (``caller_for``): for tests of what a service
    does, which call it as every hop in turn. Tests of the rules themselves use
    ``channel`` with the identity under test."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._channels: dict[str, grpc.Channel] = {}

    def _for(self, method: str) -> grpc.Channel:
        identity = caller_for(method)
        if identity not in self._channels:
            self._channels[identity] = channel(self.address, identity)
        return self._channels[identity]

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._for(method).unary_unary(method, *args, **kwargs)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._for(method).unary_stream(method, *args, **kwargs)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._for(method).stream_unary(method, *args, **kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._for(method).stream_stream(method, *args, **kwargs)

    def subscribe(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("HopChannel holds one channel per identity")

    def unsubscribe(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("HopChannel holds one channel per identity")

    def close(self) -> None:
        for inner in self._channels.values():
            inner.close()
        self._channels.clear()

    def __enter__(self) -> HopChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def hop_channel(suite: Suite | None, target: str) -> HopChannel:
    """A ``HopChannel`` to ``target``: a service of ``suite`` by name, or ``HOST:PORT``."""
    if suite is not None and not _is_address(target):
        target = suite.address(target)
    return HopChannel(target)


def _is_address(target: str) -> bool:
    return ":" in target
