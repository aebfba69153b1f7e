"""Fencing tokens: issued by the store for a scope when leader-election grants a lease,
and checked on every write a planner fences, in that write's unit of work.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from cronwave_core.errors import (
    CronwaveError,
    InvalidArgument,
    StaleFencingToken,
    UnissuedFencingToken,
)
from cronwave_core.fields import lease_scope, shown
from cronwave_core.shards import in_scope, parse_scope, shard_of
from workflow_store import metrics
from workflow_store import models as m
from workflow_store.guards import GUARDS, Guards
from workflow_store.store_core import _LOCK_FENCES, Clock, utc_now
from workflow_store.unit_of_work import Transactions, UnitOfWork


class Fencing:
    """Fencing tokens issued and checked per scope (see ``Fences``), for the scopes of
    this suite (``Guards.lease_scopes``)."""

    def __init__(self, tx: Transactions, clock: Clock = utc_now, guards: Guards = GUARDS) -> None:
        self.tx = tx
        self.clock = clock
        self.guards = guards

    # -- in a write's unit of work -----------------------------------------------------

    def fences(self, w: UnitOfWork, now: datetime) -> Fences:
        """The fencing tokens of the scopes ``w`` writes under, checked per write (a
        batch locks its scopes once, then checks each item)."""
        return Fences(w.session, now, self.guards.lease_scopes)

    def fence(
        self,
        w: UnitOfWork,
        scope: str,
        token: int,
        now: datetime,
        schedule_ids: Iterable[str] = (),
    ) -> None:
        """Refuse ``token`` if the store never issued it for ``scope`` or it is older
        than the newest seen (``Fences``); remember it if newer.
        Runs inside the caller's unit of work, under the scope's row lock
        (PostgreSQL) or the database write lock (SQLite)."""
        fences = self.fences(w, now)
        fences.lock({scope})
        stale = fences.check(scope, token)
        if stale is not None:
            raise stale
        for schedule_id in schedule_ids:
            outside = outside_shard(schedule_id, scope)
            if outside is not None:
                raise outside
        fences.save()

    def fencing_token(self, scope: str) -> int:
        """The newest fencing token seen for ``scope`` (0 when none)."""
        with self.tx.read() as s:
            token = s.scalar(sa.select(m.Fencing.token).where(m.Fencing.scope == scope))
            return int(token or 0)

    def issue_fencing_token(self, scope: str) -> int:
        """A new fencing token for ``scope``: one more than every token issued for it
        before, durable before it is returned. Leader-election calls it when it grants
        the scope's lease, so tokens strictly increase across Redis restarts and data
        loss with no floor to ask for; each call moves the counter by exactly one, so
        no caller can drive it to overflow. Only for a scope of this suite
        (``Guards.lease_scopes``), else ``InvalidArgument`` naming ``fencing_scope``."""
        lease_scope(scope, "fencing_scope", self.guards.lease_scopes)
        return int(self.tx.rounds(lambda w: self._issue(w.session, scope)))

    def _issue(self, s: Session, scope: str) -> int:
        insert: Any = postgresql.insert if self.tx.dialect == "postgresql" else sqlite.insert
        stmt = insert(m.Fencing).values(scope=scope, token=0, issued=1, updated_at=self.clock())
        stmt = stmt.on_conflict_do_update(
            index_elements=["scope"],
            set_={"issued": m.Fencing.issued + 1, "updated_at": stmt.excluded.updated_at},
        ).returning(m.Fencing.issued)
        return int(s.execute(stmt).scalar_one())


def outside_shard(schedule_id: str, scope: str) -> InvalidArgument | None:
    """The refusal of a write of ``schedule_id`` fenced under a shard scope that is
    not its shard's; None when the scope may fence it."""
    if in_scope(schedule_id, scope):
        return None
    parsed = parse_scope(scope)
    count = parsed[1] if parsed else 1
    return InvalidArgument(
        "fencing_scope",
        f"schedule {shown(schedule_id)} is in shard {shard_of(schedule_id, count)}, not the "
        f"shard of {shown(scope)}; fence it with its own shard's lease",
    )


class Fences:
    """The fencing tokens of each scope a transaction writes under: read once under
    the scopes' row locks (PostgreSQL; SQLite holds the database write lock), checked
    per write in memory, and the newest seen saved once when a newer one was taken.

    A write's token must have been issued by this store (``issue_fencing_token``,
    which leader-election calls when it grants a lease) and not be older than the
    newest seen: ``newest seen <= token <= newest issued``; and its scope must be one
    of ``scopes`` (the suite's lease scopes), whatever tokens a scope was issued
    before. So no caller can make up a token, push the newest seen past what was
    issued (which would fence out every future leader), or name a scope no lease is
    granted for to skip the fence.
    """

    def __init__(self, s: Session, now: datetime, scopes: frozenset[str]) -> None:
        self.s = s
        self.now = now
        self.scopes = scopes
        self.newest: dict[str, int] = {}
        self.stored: dict[str, int] = {}
        self.issued: dict[str, int] = {}

    def lock(self, scopes: set[str]) -> None:
        if not scopes:
            return
        ordered = sorted(scopes)  # one lock order for every transaction
        rows = self.s.execute(_LOCK_FENCES, {"ids": ordered}).tuples()
        for scope, token, issued in rows:
            self.stored[scope] = int(token)
            self.issued[scope] = int(issued)
        self.newest = dict(self.stored)

    def check(self, scope: str, token: int, schedule_id: str = "") -> CronwaveError | None:
        """Refuse ``token`` if the store never issued it for ``scope``, or if it is
        older than the newest seen (stored or accepted earlier in this transaction);
        otherwise it is the newest. A scope that is not the suite's is refused,
        naming ``fencing_scope``, and so is a shard's scope for a schedule of another
        shard (``schedule_id``): a shard's token fences its own schedules alone."""
        if scope not in self.scopes:
            try:
                lease_scope(scope, "fencing_scope", self.scopes)
            except InvalidArgument as exc:
                return exc
        if schedule_id:
            outside = outside_shard(schedule_id, scope)
            if outside is not None:
                return outside
        issued = self.issued.get(scope, 0)
        if token > issued:
            metrics.FENCING_REJECTIONS.labels("unissued").inc()
            return UnissuedFencingToken(scope, token, scope_known=issued > 0)
        newest = self.newest[scope]
        if token < newest:
            metrics.FENCING_REJECTIONS.labels("stale").inc()
            return StaleFencingToken(scope, token, newest)
        self.newest[scope] = token
        return None

    def save(self) -> None:
        for scope, token in self.newest.items():
            if token > self.stored[scope]:
                self.s.execute(
                    sa.update(m.Fencing)
                    .where(m.Fencing.scope == scope)
                    .values(token=token, updated_at=self.now)
                )
