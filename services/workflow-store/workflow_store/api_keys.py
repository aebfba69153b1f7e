"""The API keys the store keeps, and the ``ApiKeyService`` it serves beside the
workflow-store service (see ``protos/cronwave/v1/api_key_service.proto``).

Names: 1 to 128 characters of letters, digits and ``.-_@``; roles: ``viewer``,
``operator``, ``admin``. The token of a new key is returned once and never stored.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import grpc
import sqlalchemy as sa
from cronwave_proto.v1 import api_key_service_pb2 as pb
from cronwave_proto.v1 import api_key_service_pb2_grpc as pb_grpc

from cronwave_core import fields
from cronwave_core.convert import dt_to_ts
from cronwave_core.errors import InvalidArgument, NotFound
from cronwave_core.security import identity as caller
from cronwave_core.security import keys
from cronwave_core.security.identity import ROLES, Identity
from workflow_store import audit_rpc
from workflow_store import audit_store as audit
from workflow_store.audit_store import Actor
from workflow_store.db import Database
from workflow_store.models import ApiKey

_NAME = re.compile(r"^[A-Za-z0-9.\-_@]{1,128}$")


def _to_proto(row: ApiKey) -> pb.ApiKey:
    key = pb.ApiKey(
        key_id=row.key_id,
        name=row.name,
        role=row.role,
        created_at=dt_to_ts(row.created_at),
        created_by=row.created_by,
    )
    if row.revoked_at is not None:
        key.revoked_at.CopyFrom(dt_to_ts(row.revoked_at))
    return key


def _creator() -> str:
    who = caller.current()
    return who.audit_name if who is not None else "unauthenticated"


class ApiKeys:
    """The ``api_keys`` table."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, name: str, role: str, actor: Actor | None = None) -> tuple[ApiKey, str]:
        if not _NAME.match(name):
            raise InvalidArgument(
                "name", "must be 1 to 128 letters, digits or .-_@ (who the key is for)"
            )
        if role not in ROLES:
            raise InvalidArgument("role", f"must be one of {', '.join(ROLES)}, got {role!r}")
        key_id, token, digest = keys.new_token()
        row = ApiKey(
            key_id=key_id,
            name=name,
            role=role,
            secret_hash=digest,
            created_at=datetime.now(UTC),
            created_by=_creator(),
            revoked_at=None,
        )
        with self.db.write() as session:
            session.add(row)
            # Never the token nor its hash: who the key is for, its role and its id.
            changes = {"key_id": key_id, "name": name, "role": role}
            audit.append(session, actor, "CreateApiKey", changes, row.created_at)
        return row, token

    def list(self, include_revoked: bool) -> list[ApiKey]:
        query = sa.select(ApiKey).order_by(ApiKey.created_at, ApiKey.key_id)
        if not include_revoked:
            query = query.where(ApiKey.revoked_at.is_(None))
        with self.db.read() as session:
            return list(session.scalars(query))

    def revoke(self, key_id: str, actor: Actor | None = None) -> ApiKey:
        if not keys.KEY_ID.fullmatch(key_id):
            raise InvalidArgument(
                "key_id",
                f"{fields.shown(key_id)} is not a key id: 16 lowercase letters and digits "
                "(`cronwave auth list-keys` shows them)"
                if key_id
                else "required (`cronwave auth list-keys` shows the key ids)",
            )
        with self.db.write() as session:
            row = session.get(ApiKey, key_id)
            if row is None:
                raise NotFound(f"no API key {key_id!r} (`cronwave auth list-keys` shows them)")
            if row.revoked_at is None:
                row.revoked_at = datetime.now(UTC)
                changes = {"key_id": key_id, "revoked": {"old": False, "new": True}}
                audit.append(session, actor, "RevokeApiKey", changes, row.revoked_at)
        return row

    def authenticate(self, token: str) -> ApiKey | None:
        """The key ``token`` is, when it is valid (well formed, known, secret right,
        not revoked)."""
        parsed = keys.parse_token(token)
        if parsed is None:
            return None
        key_id, secret = parsed
        with self.db.read() as session:
            row = session.get(ApiKey, key_id)
        if row is None or row.revoked_at is not None or not keys.matches(secret, row.secret_hash):
            return None
        return row

    def identity(self, token: str) -> Identity | None:
        """``authenticate`` as the caller it makes (the store's own key check)."""
        row = self.authenticate(token)
        if row is None:
            return None
        return Identity("user", row.name, role=row.role, via="api-key", key_id=row.key_id)

    def key_check(self, ttl: timedelta) -> keys.CachedKeyCheck:
        return keys.CachedKeyCheck(self.identity, ttl)


class ApiKeyServicer(pb_grpc.ApiKeyServiceServicer):
    def __init__(self, api_keys: ApiKeys) -> None:
        self.keys = api_keys

    def CreateApiKey(
        self, request: pb.CreateApiKeyRequest, context: grpc.ServicerContext
    ) -> pb.CreateApiKeyResponse:
        row, token = self.keys.create(request.name, request.role, audit_rpc.actor(context))
        return pb.CreateApiKeyResponse(key=_to_proto(row), token=token)

    def ListApiKeys(
        self, request: pb.ListApiKeysRequest, context: grpc.ServicerContext
    ) -> pb.ListApiKeysResponse:
        return pb.ListApiKeysResponse(
            keys=[_to_proto(row) for row in self.keys.list(request.include_revoked)]
        )

    def RevokeApiKey(
        self, request: pb.RevokeApiKeyRequest, context: grpc.ServicerContext
    ) -> pb.RevokeApiKeyResponse:
        revoked = self.keys.revoke(request.key_id, audit_rpc.actor(context))
        return pb.RevokeApiKeyResponse(key=_to_proto(revoked))

    def AuthenticateApiKey(
        self, request: pb.AuthenticateApiKeyRequest, context: grpc.ServicerContext
    ) -> pb.AuthenticateApiKeyResponse:
        row = self.keys.authenticate(request.token)
        if row is None:
            return pb.AuthenticateApiKeyResponse(valid=False)
        return pb.AuthenticateApiKeyResponse(valid=True, key=_to_proto(row))
