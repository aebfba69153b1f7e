"""A traced channel's set-up as a ``connect`` span (``telemetry.setup``).

gRPC's core resolves a target's name and opens the connection (TCP, the TLS handshake,
HTTP/2's greeting) inside the first call, where it would count as that call's
``network`` time. So a traced channel does it before its first call: it asks the
channel to connect and waits, inside a ``connect`` span, until the channel is ready or
has failed (or the call's deadline has passed), then makes the call, which fails as
it would have when the channel did. What the core does cannot be told apart from
outside: the name's look-up is inside the ``connect`` span, not a ``dns`` span of its
own (``cronwave.connect.includes_dns`` says so when the target is a name).

Afterwards a call costs one attribute read. A call that fails ``UNAVAILABLE`` (the
connection lost) makes the next call look again, and a look that found the channel
failing is not repeated for a second (``RETRY_AFTER``: the calls meanwhile fail fast
as they would, with no span each); a connection gRPC drops and
reopens between calls (after ``grpc.client_idle_timeout_ms``, 30 minutes of no
calls by default) is reopened inside a call and counted as its ``network`` time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc

from cronwave_core.targets import addresses
from cronwave_core.telemetry.setup import connecting, is_address
from cronwave_core.telemetry.vocabulary import Hop

ATTR_INCLUDES_DNS = "cronwave.connect.includes_dns"
ATTR_STATE = "cronwave.connect.state"
#: After a look that found the channel failing, seconds before the next one.
RETRY_AFTER = 1.0
_SETTLED = (
    grpc.ChannelConnectivity.READY,
    grpc.ChannelConnectivity.TRANSIENT_FAILURE,
    grpc.ChannelConnectivity.SHUTDOWN,
)


def _host(target: str) -> str:
    """The host of ``host:port``, ``[v6]:port`` or ``dns:///host:port``; of a list of
    replicas' addresses (``cronwave_core.targets``), the first one's."""
    address = addresses(target)[0].rsplit("/", 1)[-1]
    if address.startswith("["):
        return address[1 : address.find("]")]
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


class ChannelReadiness:
    """Whether a channel is known to be connected, and ``ensure``, which connects it
    in a ``connect`` span when it is not (see the module docstring)."""

    def __init__(self, channel: grpc.Channel, target: str, default_timeout: float) -> None:
        self._channel = channel
        self._target = target
        self._timeout = default_timeout
        self._by_name = not is_address(_host(target))
        self._next_look = 0.0
        self.ready = False

    def ensure(self, timeout: float | None, hop: Hop | None) -> None:
        """Wait, in a ``connect`` span of ``hop`` (the caller's when None), until the
        channel is connected, has failed, or ``timeout`` (else the channel's default
        deadline) has passed; never raises for the channel's sake."""
        if self.ready or time.monotonic() < self._next_look:
            return
        settled = threading.Event()
        state: list[grpc.ChannelConnectivity] = []

        def watch(connectivity: grpc.ChannelConnectivity) -> None:
            state.append(connectivity)
            if connectivity in _SETTLED:
                settled.set()

        with connecting("grpc", self._target, hop=hop) as span:
            span.set_attribute(ATTR_INCLUDES_DNS, self._by_name)
            self._channel.subscribe(watch, try_to_connect=True)
            try:
                settled.wait(self._timeout if timeout is None else timeout)
            finally:
                self._channel.unsubscribe(watch)
            final = state[-1] if state else grpc.ChannelConnectivity.IDLE
            span.set_attribute(ATTR_STATE, final.name)
        self.ready = final is grpc.ChannelConnectivity.READY
        if not self.ready:
            self._next_look = time.monotonic() + RETRY_AFTER

    def after_error(self, error: BaseException) -> None:
        """A call failed: ``UNAVAILABLE`` (the connection is gone) makes the next call
        connect again, in a span."""
        code: Callable[[], grpc.StatusCode] | None = getattr(error, "code", None)
        if callable(code) and code() is grpc.StatusCode.UNAVAILABLE:
            self.ready = False
