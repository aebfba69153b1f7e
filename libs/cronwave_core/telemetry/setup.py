"""A connection's set-up in spans: looking up its server's name (kind ``dns``) and
opening it (kind ``connect``: TCP, any TLS handshake and the protocol's greeting),
each in the hop that paid it.

Connections are pooled, so set-up is rare, and for that reason a tail cause: the
run that happens to open a connection pays for it, and a slow resolver (search
paths, ``ndots`` in Kubernetes) or a slow handshake would otherwise hide in the
``database``, ``cache`` or ``app`` time of its hop. A ``connect`` span holds the
``dns`` span of its look-up; the waterfall counts the look-up as ``dns`` and only the
rest as ``connect`` (``cronwave_waterfall.runs``).

These spans say their kind but not their hop: they take the hop of the span they
start in (``propagation.RunAttributesProcessor``), since any hop may be the one that
opens a connection; a gRPC channel's says the hop of the call it opens for, as the
call's network time does (``cronwave_core.channel_ready``). One opened outside any
span (at start-up) is a trace of its own, in no run.

A name is looked up by a ``Resolver`` (``socket.getaddrinfo`` by default, given to
the client that connects), once per connection, and the client then connects to the
addresses it was answered, so the look-up is measured once and not repeated inside
the connect. An address (``127.0.0.1``, ``::1``) needs no look-up and gets no span.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry.trace import Span

from cronwave_core.telemetry.spans import kind_span
from cronwave_core.telemetry.vocabulary import ATTR_ADDRESSES, ATTR_HOP, ATTR_PEER, Hop, Kind

__all__ = ["AddrInfo", "Resolver", "connecting", "is_address", "resolve", "system_resolver"]

#: One answer of ``socket.getaddrinfo``: family, type, protocol, canonical name and
#: the socket address (whose first item is the address).
AddrInfo = tuple[Any, Any, int, str, tuple[Any, ...]]
#: ``(host, port) -> answers``, as ``socket.getaddrinfo(host, port,
#: type=SOCK_STREAM)``; raises ``OSError`` (``socket.gaierror``) for a name it cannot
#: resolve.
Resolver = Callable[[str, int], list[AddrInfo]]


def system_resolver(host: str, port: int) -> list[AddrInfo]:
    """The operating system's look-up (``/etc/hosts``, ``resolv.conf``, ...)."""
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)


def is_address(host: str) -> bool:
    """Whether ``host`` is an IP address (no look-up needed), not a name."""
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def resolve(host: str, port: int, resolver: Resolver, client: str) -> list[AddrInfo]:
    """The addresses of ``host`` for a ``client`` (``redis``, ``postgresql``) to
    connect to, looked up by ``resolver`` inside a ``dns`` span."""
    with kind_span(f"{client} dns", Kind.DNS, {ATTR_PEER: f"{host}:{port}"}) as span:
        answers = resolver(host, port)
        span.set_attribute(ATTR_ADDRESSES, ",".join(str(a[4][0]) for a in answers))
    return answers


def connecting(client: str, peer: str, hop: Hop | None = None) -> AbstractContextManager[Span]:
    """A ``connect`` span around opening one connection of ``client`` to ``peer``
    (``host:port``), current inside the block: a look-up made inside is its child.
    It is in ``hop`` when given (a gRPC call's own hop), else its parent's."""
    attrs = {ATTR_PEER: peer} if hop is None else {ATTR_PEER: peer, ATTR_HOP: hop.value}
    return kind_span(f"{client} connect", Kind.CONNECT, attrs)
