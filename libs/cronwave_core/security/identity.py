"""Who is calling: an ``Identity`` made by the authorisation interceptor from the
caller's certificate or bearer token, available to the servicer (and what it calls)
for the duration of the call through ``current()``; ``current_peer()`` is where the
call came from (gRPC's peer string, ``ipv4:127.0.0.1:53122``).

Servicers read it to record who did what (the audit trail), and to bind what a
caller acquires to it (leader-election's leases: only the identity that campaigned
renews or resigns); which methods a caller may call they never decide with it: that
is ``cronwave_core.security.rules``, applied before the servicer runs."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from cronwave_core import extensions

#: Roles of people and programs, each allowed what the one before it is.
ROLES = ("viewer", "operator", "admin")
#: cronwave's services, each known by its certificate (``pki``); an installed package
#: adds its own servers' (``service_identities``).
SERVICE_IDENTITIES = (
    "workflow-store",
    "leader-election",
    "dispatcher",
    "cron-planner",
    "worker",
    "console",
)


@functools.cache
def service_identities() -> tuple[str, ...]:
    """cronwave's services and then the servers of the installed packages
    (``cronwave_core.extensions``): every identity a suite issues a certificate to."""
    names = list(SERVICE_IDENTITIES)
    for extension in extensions.installed():
        names += [name for name in extension.identities if name not in names]
    return tuple(names)


#: A certificate's identity is a URI under this prefix (``pki``).
SPIFFE_PREFIX = "spiffe://cronwave/"
#: A user certificate's role is a second URI, this prefix and the role.
ROLE_URN_PREFIX = "urn:cronwave:role:"


@dataclass(frozen=True)
class Identity:
    """``kind``: ``service`` (a cronwave service's certificate), ``user`` (a person or
    program: a user certificate or an API key) or ``insecure`` (a plaintext loopback
    suite, where nobody is authenticated). ``role``: a user's role (``ROLES``).
    ``via``: ``certificate``, ``api-key`` or ``insecure``; ``key_id`` the API key's
    id when ``via`` is ``api-key``."""

    kind: str
    name: str
    role: str | None = None
    via: str = "certificate"
    key_id: str = ""
    #: For a service relaying a person's request (the dispatcher recording the run a
    #: user triggered): that person, as ``audit_name`` names them (``RELAYS``).
    on_behalf_of: str = ""

    def __str__(self) -> str:
        if self.kind == "service":
            return f"service {self.name}"
        if self.kind == "insecure":
            return "an unauthenticated caller (insecure mode)"
        how = f"API key {self.key_id}" if self.via == "api-key" else self.via
        return f"user {self.name} ({self.role or 'no role'}, {how})"

    @property
    def audit_name(self) -> str:
        """What the audit trail records: ``service:worker``, ``user:alice``,
        ``insecure``, ``user:alice via service:dispatcher``."""
        own = "insecure" if self.kind == "insecure" else f"{self.kind}:{self.name}"
        return f"{self.on_behalf_of} via {own}" if self.on_behalf_of else own

    @property
    def requester(self) -> str:
        """Whom a call this service makes now is made for (``ON_BEHALF_OF``): the
        person it relays, or the user calling; empty for a service's own work."""
        if self.on_behalf_of:
            return self.on_behalf_of
        return self.audit_name if self.kind == "user" else ""


INSECURE = Identity("insecure", "insecure", role="admin", via="insecure")

#: The metadata key a service's call carries the person it is made for in.
ON_BEHALF_OF = "cronwave-on-behalf-of"
#: The services whose word on whom they relay is taken (they serve people's
#: requests and pass them on: a trigger, a backfill, a console's change); from any
#: other caller the key is ignored.
RELAYS = frozenset({"dispatcher", "cron-planner", "console"})

_identity: ContextVar[Identity | None] = ContextVar("cronwave_identity", default=None)
_peer: ContextVar[str] = ContextVar("cronwave_peer", default="")


def current() -> Identity | None:
    """The caller of the call being served on this thread, or None outside one."""
    return _identity.get()


def current_peer() -> str:
    return _peer.get()


@contextlib.contextmanager
def serving(identity: Identity, peer: str) -> Iterator[None]:
    """Make ``identity`` and ``peer`` current while the call runs."""
    token, peer_token = _identity.set(identity), _peer.set(peer)
    try:
        yield
    finally:
        _identity.reset(token)
        _peer.reset(peer_token)
