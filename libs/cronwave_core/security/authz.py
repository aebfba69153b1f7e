"""The server interceptor that says who is calling and whether it may.

For every call: the caller is the API key of its bearer token when it sends one
(``authorization: Bearer cwk_...``), else the identity in its client certificate
(``cronwave_core.security.pki``); a call with neither a valid key nor a certificate
with a role or a service name is ``UNAUTHENTICATED``. Then the method's rule
(``cronwave_core.security.rules``) decides: ``PERMISSION_DENIED`` names the caller
and what the method needs. An allowed call runs with its identity current
(``identity.serving``), for the audit trail.

Insecure mode (``CRONWAVE_INSECURE=1``, loopback only) authenticates nobody: every
call runs as ``identity.INSECURE``, and a method without a rule is still refused.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import grpc

from cronwave_core.errors import Unauthenticated
from cronwave_core.handlers import around
from cronwave_core.security import rules
from cronwave_core.security.identity import (
    INSECURE,
    ON_BEHALF_OF,
    RELAYS,
    ROLE_URN_PREFIX,
    ROLES,
    SPIFFE_PREFIX,
    Identity,
    serving,
)

#: Verifies an API key: its identity, or None for a key that is unknown, revoked or
#: malformed.
KeyCheck = Callable[[str], Identity | None]


@functools.lru_cache(maxsize=1024)
def certificate_identity(names: tuple[bytes, ...]) -> Identity | None:
    """The identity in a verified client certificate's subject alternative names
    (``ServicerContext.peer_identities()``: its URIs, DNS names and IPs), or None when
    it names none we know. Cached by the names: the same certificate, the same
    identity."""
    uris = [n.decode(errors="replace") for n in names if n.startswith((b"spiffe:", b"urn:"))]
    role = next((u[len(ROLE_URN_PREFIX) :] for u in uris if u.startswith(ROLE_URN_PREFIX)), None)
    for uri in uris:
        if not uri.startswith(SPIFFE_PREFIX):
            continue
        kind, _, name = uri[len(SPIFFE_PREFIX) :].partition("/")
        if not name:
            continue
        if kind == "service":
            return Identity("service", name)
        if kind == "user":
            return Identity("user", name, role=role if role in ROLES else None)
        if kind == "client":
            return Identity("user", name, role=None)
    return None


def _metadata(metadata: Any, key: str) -> str:
    for name, value in metadata or ():
        if name == key:
            return str(value)
    return ""


def _bearer(metadata: Any) -> str | None:
    for key, value in metadata or ():
        if key == "authorization":
            scheme, _, token = str(value).partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return None


class AuthInterceptor(grpc.ServerInterceptor):
    """Authentication and the per-RPC rules (see the module docstring). ``check_key``
    verifies API keys (None: this server accepts none)."""

    def __init__(
        self,
        service: str,
        *,
        insecure: bool = False,
        check_key: KeyCheck | None = None,
        rule_table: Mapping[str, rules.Rule] | None = None,
    ) -> None:
        self.service = service
        self.insecure = insecure
        self.check_key = check_key
        # cronwave's rules and the installed packages' (rules.rule_table()) unless given
        self.rules = rules.rule_table() if rule_table is None else rule_table

    def identify(self, context: grpc.ServicerContext) -> Identity:
        """Who makes this call, or ``Unauthenticated``."""
        if self.insecure:
            return INSECURE
        token = _bearer(context.invocation_metadata())
        if token is not None:
            if not token:
                raise Unauthenticated(
                    "the authorization header is malformed or its key empty; send "
                    "`authorization: Bearer <API key>`"
                )
            if self.check_key is None:
                raise Unauthenticated(f"{self.service} does not accept API keys")
            identity = self.check_key(token)
            if identity is None:
                raise Unauthenticated(
                    "the API key is not valid: unknown, revoked or malformed "
                    "(`cronwave auth list-keys` shows the keys)"
                )
            return identity
        identity = certificate_identity(tuple(context.peer_identities() or ()))
        if identity is not None and identity.kind == "service" and identity.name in RELAYS:
            relayed = _metadata(context.invocation_metadata(), ON_BEHALF_OF)
            if relayed:
                identity = dataclasses.replace(identity, on_behalf_of=relayed[:300])
        if identity is None or (identity.kind == "user" and identity.role is None):
            who = f"user {identity.name}" if identity else "the caller's certificate"
            raise Unauthenticated(
                f"{who} carries no role: call with an API key "
                "(CRONWAVE_TOKEN, from `cronwave auth create-key`) or a certificate "
                "that names a role or a service"
            )
        return identity

    def intercept_service(self, continuation: Callable[..., Any], details: Any) -> Any:
        handler = continuation(details)
        if handler is None:
            return None
        method: str = details.method
        identify = self.identify
        table = self.rules

        def admit(context: grpc.ServicerContext) -> AbstractContextManager[object]:
            identity = identify(context)
            rules.check(method, identity, table)
            return serving(identity, context.peer())

        return around(handler, admit)
