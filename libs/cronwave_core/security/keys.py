"""API keys: their tokens, what the store keeps of them, and how a service checks one.

A token is ``cwk_<key id>_<secret>``: the key id (16 lowercase letters and digits)
names the row, the secret (43 URL-safe characters, 256 bits) proves it. The store
keeps only the SHA-256 of the secret: the secret is random, so a fast hash is as
strong as a slow one, and the check costs microseconds.

Every service but the store checks a key with the store's ``AuthenticateApiKey``
(``RemoteKeyCheck``), and every service, the store too, trusts an answer for
``CRONWAVE_AUTH_CACHE_TTL`` (``CachedKeyCheck``): a revoked key is refused everywhere
within that time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from cachetools import TLRUCache

from cronwave_core.security.identity import Identity

if TYPE_CHECKING:
    from cronwave_proto.v1.api_key_service_pb2_grpc import ApiKeyServiceStub

PREFIX = "cwk_"
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_TOKEN = re.compile(r"^cwk_([a-z0-9]{16})_([A-Za-z0-9_-]{43})$")
#: A key's id, as ``cronwave auth list-keys`` shows it.
KEY_ID = re.compile(r"[a-z0-9]{16}")
#: At most this many tokens' answers are cached per process.
_CACHE_SIZE = 10_000


def new_token() -> tuple[str, str, str]:
    """A new key: ``(key id, token, secret hash)``."""
    key_id = "".join(secrets.choice(_ALPHABET) for _ in range(16))
    secret = secrets.token_urlsafe(32)
    return key_id, f"{PREFIX}{key_id}_{secret}", secret_hash(secret)


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_token(token: str) -> tuple[str, str] | None:
    """``(key id, secret)`` of a well-formed token, else None."""
    found = _TOKEN.match(token)
    return (found.group(1), found.group(2)) if found else None


def matches(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(secret_hash(secret), stored_hash)


class CachedKeyCheck:
    """``check`` (token -> identity or None), each answer trusted for ``ttl`` from when
    it was asked (using it does not extend it, so a revoked key in steady use is still
    refused within ``ttl``); a malformed token is refused without asking. ``clock``:
    seconds of a monotonic clock."""

    def __init__(
        self,
        check: Callable[[str], Identity | None],
        ttl: timedelta,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._check = check
        self._clock = clock
        ttl_s = ttl.total_seconds()
        # digest -> (when it was asked, the answer); it expires ``ttl`` after it was
        # asked, and a read does not extend it. A TTL of 0 keeps nothing.
        self._answers: TLRUCache[str, tuple[float, Identity | None]] = TLRUCache(
            _CACHE_SIZE, lambda _key, answer, _now: answer[0] + ttl_s, timer=clock
        )
        self._lock = threading.Lock()

    def __call__(self, token: str) -> Identity | None:
        if parse_token(token) is None:
            return None
        digest = hashlib.sha256(token.encode()).hexdigest()  # never the token itself
        asked = self._clock()
        with self._lock:
            try:
                return self._answers[digest][1]
            except KeyError:
                pass
        identity = self._check(token)
        with self._lock:
            self._answers[digest] = (asked, identity)
        return identity


class RemoteKeyCheck:
    """Checks a token with the workflow-store's ``AuthenticateApiKey``, over a channel
    made on first use (this service's certificate). The store unreachable: the
    token is refused (the caller sees UNAUTHENTICATED, saying so)."""

    def __init__(self, store_addr: str, timeout: timedelta) -> None:
        self._addr = store_addr
        self._timeout = timeout.total_seconds()
        self._stub: ApiKeyServiceStub | None = None
        self._lock = threading.Lock()

    def _store(self) -> ApiKeyServiceStub:
        with self._lock:
            if self._stub is None:
                from cronwave_proto.v1 import api_key_service_pb2_grpc as keys_grpc

                from cronwave_core.channels import CHANNEL_OPTIONS
                from cronwave_core.security.tls import new_channel

                channel = new_channel(self._addr, CHANNEL_OPTIONS)
                self._stub = keys_grpc.ApiKeyServiceStub(channel)
            return self._stub

    def __call__(self, token: str) -> Identity | None:
        import grpc
        from cronwave_proto.v1 import api_key_service_pb2 as keys_pb

        from cronwave_core.errors import Unauthenticated

        stub = self._store()
        try:
            reply = stub.AuthenticateApiKey(
                keys_pb.AuthenticateApiKeyRequest(token=token), timeout=self._timeout
            )
        except grpc.RpcError as exc:
            raise Unauthenticated(
                f"the API key could not be checked: the workflow-store did not answer "
                f"({exc.code().name})"
            ) from None
        if not reply.valid:
            return None
        return Identity(
            "user", reply.key.name, role=reply.key.role, via="api-key", key_id=reply.key.key_id
        )
