"""The audit trail: who changed what, when and from where.

Every mutation a caller asks for (a schedule's create, update, pause, resume and
delete; a cancel; a dead letter's replay; a manual or backfill run recorded; a job
type registered; an API key created or revoked) appends one ``audit_events`` row
inside the transaction of the change, so a change and its audit row commit together
or not at all: a refused request, a conflict or a rolled-back transaction leaves
neither. A call that changes nothing (an
update to the values a schedule already has, ``if_absent`` finding the schedule)
writes none either.

What a row holds of the change is small by construction: the fields changed with
their old and new values when those are short (``SMALL`` characters of JSON), else
their sizes; a payload only ever by its size.

The high-rate machine calls (ClaimRuns, Heartbeat, CompleteRuns, ReleaseRun,
AppendRunEvents, RecordRuns of scheduled and catch-up fires, RecordMissedSlots, the
sweeper's requeues, DeadLetterRun, fencing tokens) are not audited: they are the
services doing their job, thousands a second, and each run's own event history
already records them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.orm import Session

from cronwave_core.domain.runs import Trigger
from cronwave_core.errors import InvalidArgument
from cronwave_core.security import identity
from workflow_store import models as m
from workflow_store.db import Database

#: Old and new values of a field are recorded when each is at most this many
#: characters of JSON; longer ones by their sizes.
SMALL = 200
#: Runs recorded with these triggers are a caller's request, so they are audited;
#: scheduled and catch-up fires are the planner's routine.
AUDITED_TRIGGERS = frozenset({Trigger.MANUAL, Trigger.BACKFILL})
DEFAULT_AUDIT_LIMIT = 50
#: Who a row names when no authorisation interceptor made the caller known.
UNAUTHENTICATED = "unauthenticated"


@dataclass(frozen=True)
class Actor:
    """Who asks for a change (an identity's audit name) and from where (gRPC's peer)."""

    who: str
    peer: str

    @classmethod
    def current(cls, fallback_peer: str) -> Actor:
        """The caller of the call being served: ``identity.current()``'s audit name
        (``unauthenticated`` without one) and its peer (``fallback_peer``, the call's
        own, when the interceptor recorded none)."""
        caller = identity.current()
        who = caller.audit_name if caller is not None else UNAUTHENTICATED
        return cls(who, identity.current_peer() or fallback_peer)


class RecordRequestLike(Protocol):
    @property
    def schedule_id(self) -> str: ...
    @property
    def fire_time(self) -> datetime: ...
    @property
    def trigger(self) -> Trigger: ...
    @property
    def payload_json(self) -> str: ...


@dataclass(frozen=True)
class AuditRecord:
    id: int
    at: datetime
    actor: str
    peer: str
    rpc: str
    schedule_id: str
    run_id: str
    changes_json: str


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def change(old: Any, new: Any) -> dict[str, Any]:
    """One field's change: the values when both are short, else their sizes."""
    old_text, new_text = _json(old), _json(new)
    if len(old_text) <= SMALL and len(new_text) <= SMALL:
        return {"old": old, "new": new}
    return {"old_bytes": len(old_text.encode()), "new_bytes": len(new_text.encode())}


def size_change(old: str, new: str) -> dict[str, Any]:
    """A payload's change: its sizes only, never its contents."""
    return {"old_bytes": len(old.encode()), "new_bytes": len(new.encode())}


def schedule_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The fields that differ between two sets of a schedule's stored values; a spec
    and a policy field by field (``spec.cron``), the payload by its size."""
    changes: dict[str, Any] = {}
    for name, value in new.items():
        before = old.get(name)
        if before == value:
            continue
        if name == "payload_json":
            changes[name] = size_change(before or "", value)
        elif isinstance(value, dict) and isinstance(before, dict | None):
            before = before or {}
            for key in sorted(set(before) | set(value)):
                if before.get(key) != value.get(key):
                    changes[f"{name}.{key}"] = change(before.get(key), value.get(key))
        else:
            changes[name] = change(before, value)
    return changes


def append(
    s: Session,
    actor: Actor | None,
    rpc: str,
    changes: Mapping[str, Any],
    at: datetime,
    *,
    schedule_id: str = "",
    run_id: str = "",
) -> None:
    """Append one audit row in ``s``'s transaction; nothing without an ``actor`` (a
    call from inside the store, not a caller's request)."""
    if actor is None:
        return
    s.execute(
        sa.insert(m.AuditEvent).values(
            at=at,
            actor=actor.who,
            peer=actor.peer,
            rpc=rpc,
            schedule_id=schedule_id,
            run_id=run_id,
            changes=_json(dict(changes)),
        )
    )


def append_recorded(
    s: Session, actor: Actor | None, req: RecordRequestLike, run_id: str, at: datetime
) -> None:
    """A manual or backfill run recorded: a caller's request, audited (a payload of
    its own by its size, as a schedule's is)."""
    changes: dict[str, Any] = {
        "trigger": req.trigger.value,
        "fire_time": req.fire_time.isoformat(),
    }
    if req.payload_json:
        changes["payload_json"] = size_change("", req.payload_json)
    append(s, actor, "RecordRuns", changes, at, schedule_id=req.schedule_id, run_id=run_id)


class AuditLog:
    """The audit rows as callers read them (``ListAuditEvents``). Rows are written by
    ``append`` and ``append_recorded``, in the transaction of the change they record,
    by whichever part makes it; this repository only reads, and takes the database
    alone."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def list_audit_events(
        self, schedule_id: str = "", limit: int = 0, before_id: int = 0
    ) -> list[AuditRecord]:
        """Newest first; ``limit`` 0 means 50; only ids below ``before_id`` when it is
        set (paging); only ``schedule_id``'s when it is given."""
        if limit < 0:
            raise InvalidArgument("limit", f"must not be negative (0 means {DEFAULT_AUDIT_LIMIT})")
        if before_id < 0:
            raise InvalidArgument("before_id", "must not be negative (0 means the newest)")
        query = sa.select(m.AuditEvent).order_by(m.AuditEvent.id.desc())
        if schedule_id:
            query = query.where(m.AuditEvent.schedule_id == schedule_id)
        if before_id:
            query = query.where(m.AuditEvent.id < before_id)
        with self.db.read() as s:
            rows = s.scalars(query.limit(limit or DEFAULT_AUDIT_LIMIT))
            return [
                AuditRecord(
                    id=int(r.id),
                    at=r.at,
                    actor=r.actor,
                    peer=r.peer,
                    rpc=r.rpc,
                    schedule_id=r.schedule_id,
                    run_id=r.run_id,
                    changes_json=r.changes,
                )
                for r in rows
            ]
