"""What ``cronwave apply`` would change: the declared schedules against the store's.

Each declared schedule is created (absent), updated (present, with the fields that
differ: the update's mask names only those), or left unchanged. With prune, a live
schedule whose ``managed_by`` is this file's marker and that the file no longer
declares is deleted; a schedule made by hand (``managed_by`` empty) or by another
manager's file is never pruned. A present schedule the file declares is taken over:
it gets the file's marker, so a later apply of the file without it prunes it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cronwave_proto.v1 import common_pb2 as pb

from cronwave._models import Schedule
from cronwave.cli._apply_file import ApplyFile, Declared


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"
    PRUNE = "prune"


@dataclass(frozen=True)
class Change:
    action: Action
    schedule_id: str
    #: For an update: the mask paths that change (``spec.cron``, ``payload_json``...).
    paths: tuple[str, ...] = ()
    #: For a create or an update: the schedule as the file declares it.
    message: pb.Schedule | None = None


@dataclass(frozen=True)
class Plan:
    changes: tuple[Change, ...] = field(default_factory=tuple)

    def of(self, action: Action) -> list[Change]:
        return [c for c in self.changes if c.action is action]

    @property
    def changes_anything(self) -> bool:
        return any(c.action is not Action.UNCHANGED for c in self.changes)


def message_of(declared: Declared, marker: str, current: Schedule | None) -> pb.Schedule:
    """The schedule ``declared`` stands for; its pause as ``current``'s when the entry
    does not say."""
    paused = declared.paused
    if paused is None:
        paused = current.paused if current is not None else False
    return pb.Schedule(
        schedule_id=declared.schedule_id,
        spec=declared.spec.to_proto(),
        policy=declared.policy.to_proto(),
        job_type=declared.job_type,
        payload_json=json.dumps(declared.payload, sort_keys=True),
        paused=paused,
        managed_by=marker,
        labels=dict(declared.labels),
    )


def _payload(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text


def differing(wanted: pb.Schedule, current: Schedule) -> tuple[str, ...]:
    """The mask paths on which ``current`` is not what ``wanted`` declares."""
    paths: list[str] = []
    for prefix, want, have in (
        ("spec", wanted.spec, current.spec.to_proto()),
        ("policy", wanted.policy, current.policy.to_proto()),
    ):
        set_want, set_have = _set_fields(want), _set_fields(have)
        for descriptor in want.DESCRIPTOR.fields:
            if set_want.get(descriptor.name) != set_have.get(descriptor.name):
                paths.append(f"{prefix}.{descriptor.name}")
    if wanted.job_type != current.job_type:
        paths.append("job_type")
    if current.withheld or _payload(wanted.payload_json) != _payload(current.payload_json):
        paths.append("payload_json")
    if wanted.paused != current.paused:
        paths.append("paused")
    if wanted.managed_by != current.managed_by:
        paths.append("managed_by")
    if dict(wanted.labels) != current.labels:
        paths.append("labels")
    return tuple(paths)


def _set_fields(message: Any) -> dict[str, Any]:
    """The fields set in ``message`` (a scalar at its default is not), by name."""
    return {descriptor.name: value for descriptor, value in message.ListFields()}


def plan(file: ApplyFile, live: Sequence[Schedule], *, prune: bool) -> Plan:
    """The changes that make the store's live schedules what ``file`` declares."""
    by_id = {s.schedule_id: s for s in live}
    changes: list[Change] = []
    for declared in file.schedules:
        current = by_id.get(declared.schedule_id)
        wanted = message_of(declared, file.marker, current)
        if current is None:
            changes.append(Change(Action.CREATE, declared.schedule_id, message=wanted))
            continue
        paths = differing(wanted, current)
        action = Action.UPDATE if paths else Action.UNCHANGED
        changes.append(Change(action, declared.schedule_id, paths, wanted))
    if prune:
        declared_ids = {d.schedule_id for d in file.schedules}
        for schedule in live:
            if schedule.managed_by == file.marker and schedule.schedule_id not in declared_ids:
                changes.append(Change(Action.PRUNE, schedule.schedule_id))
    return Plan(tuple(changes))
