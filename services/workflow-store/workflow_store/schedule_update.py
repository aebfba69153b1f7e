"""An UpdateSchedule request: which fields it changes (its field mask) and the
schedule they make, validated whole as a create is.

Paths name a whole message (``spec``, ``policy``) or one field of it
(``spec.cron``, ``policy.overlap``), or a top-level field (``job_type``,
``payload_json``, ``paused``, ``managed_by``, ``labels``: replaced whole). A field a
path names takes the request's value, unset meaning the field's default
(``spec.start_at`` unset: no start bound); every other field keeps the schedule's
current value.
"""

from __future__ import annotations

from collections.abc import Callable

from cronwave_proto.v1 import common_pb2 as pb
from google.protobuf.field_mask_pb2 import FieldMask

from cronwave_core.errors import InvalidArgument
from workflow_store.convert import new_schedule_from_proto, schedule_to_proto
from workflow_store.records import NewSchedule, ScheduleRecord

_TOP = ("spec", "policy", "job_type", "payload_json", "paused", "managed_by", "labels")
PATHS: tuple[str, ...] = (
    *_TOP,
    *(f"spec.{f.name}" for f in pb.ScheduleSpec.DESCRIPTOR.fields),
    *(f"policy.{f.name}" for f in pb.SchedulePolicy.DESCRIPTOR.fields),
)
_FIXED = {
    "schedule_id": "names the schedule and cannot be changed; create a new schedule instead",
    "pause_note": "is set by pause and resume (their --note)",
}
_SERVER_OWNED = ("created_at", "updated_at", "revision", "deleted", "withheld")


def update_paths(mask: FieldMask) -> tuple[str, ...]:
    """The mask's paths, each checked; refusals name ``update_mask.paths[i]``."""
    if not mask.paths:
        raise InvalidArgument(
            "update_mask", "required: name the fields to change, e.g. spec.cron or payload_json"
        )
    seen: list[str] = []
    for i, path in enumerate(mask.paths):
        field = f"update_mask.paths[{i}]"
        if path in _FIXED:
            raise InvalidArgument(field, f"'{path}' {_FIXED[path]}")
        if path in _SERVER_OWNED:
            raise InvalidArgument(field, f"'{path}' is kept by the store and cannot be set")
        if path not in PATHS:
            shown = path if len(path) <= 64 else path[:64] + "..."
            raise InvalidArgument(
                field,
                f"unknown path '{shown}'; one of: {', '.join(_TOP)}, spec.<field>, policy.<field>",
            )
        if path in seen or path.split(".")[0] in seen:
            raise InvalidArgument(field, f"'{path}' is named twice (or inside a whole message)")
        seen.append(path)
    for path in seen:
        if "." in path and path.split(".")[0] in seen:
            raise InvalidArgument("update_mask", f"'{path}' is inside '{path.split('.')[0]}'")
    return tuple(seen)


def reviser(msg: pb.Schedule, paths: tuple[str, ...]) -> Callable[[ScheduleRecord], NewSchedule]:
    """What ``Schedules.update_schedule`` applies to the current schedule: the fields of
    ``msg`` that ``paths`` name, over the rest of the current one, validated as a
    create validates (refusals name the field, ``spec.cron[0]``)."""
    mask = FieldMask(paths=list(paths))

    def revise(current: ScheduleRecord) -> NewSchedule:
        merged = schedule_to_proto(current)
        mask.MergeMessage(msg, merged, replace_message_field=True, replace_repeated_field=True)
        return new_schedule_from_proto(merged)

    return revise
