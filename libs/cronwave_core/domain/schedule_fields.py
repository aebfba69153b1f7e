"""The fields of a schedule's ``Spec`` and ``Policy``, read from the dataclasses, as
the one table every other spelling of a field is derived from.

Each field has a ``Kind`` (read from its type), and each kind has one way to be a
keyword of the SDK, a path of an update's field mask, an option of the CLI, a key of
an ``apply -f`` file and a key of the JSON output. Adding a field of a kind that
exists therefore touches the proto, the dataclass (with its ``help``) and the code
that uses it; a field of a type no kind covers stops the import here, naming it.
``tests/schedules/test_schedule_fields.py`` holds the table against the proto and
the consumers against the table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Any, get_type_hints

from cronwave_core.domain import spec as spec_module
from cronwave_core.domain.deadlines import Notifier
from cronwave_core.domain.spec import (
    CATCHUPS,
    DST_GAPS,
    DST_REPEATS,
    OVERLAPS,
    Interval,
    Policy,
    Spec,
)
from cronwave_core.proto_enum import ProtoEnum


class Kind(StrEnum):
    """What a field holds, which decides how each edge spells and parses it."""

    TEXT = "text"  # time_zone
    TEXTS = "texts"  # cron
    ENUM = "enum"  # a policy named by its value ("buffer_one")
    COUNT = "count"  # a whole number, 0 the default
    RATIO = "ratio"  # a share, 0..1 (trace_sample)
    DURATION = "duration"  # a timedelta, JSON "<name>_seconds"
    OPTIONAL_DURATION = "optional_duration"  # a timedelta or None (no value)
    INSTANT = "instant"  # an aware datetime or None
    INSTANTS = "instants"
    DATES = "dates"
    INTERVALS = "intervals"
    NOTIFIERS = "notifiers"  # webhooks: keywords notify and notify_format


_KIND_OF_TYPE: tuple[tuple[object, Kind], ...] = (
    (str, Kind.TEXT),
    (tuple[str, ...], Kind.TEXTS),
    (int, Kind.COUNT),
    (float, Kind.RATIO),
    (timedelta, Kind.DURATION),
    (timedelta | None, Kind.OPTIONAL_DURATION),
    (datetime | None, Kind.INSTANT),
    (tuple[datetime, ...], Kind.INSTANTS),
    (tuple[date, ...], Kind.DATES),
    (tuple[Interval, ...], Kind.INTERVALS),
    (tuple[Notifier, ...], Kind.NOTIFIERS),
)
_ENUMS: dict[type, ProtoEnum[Any, Any]] = {
    table.members: table for table in (DST_GAPS, DST_REPEATS, OVERLAPS, CATCHUPS)
}
_DURATIONS = (Kind.DURATION, Kind.OPTIONAL_DURATION)


@dataclass(frozen=True)
class ScheduleField:
    """One field of ``Spec`` (``part`` "spec") or ``Policy`` ("policy")."""

    part: str
    name: str
    kind: Kind
    default: Any
    help: str
    #: The CLI's option; ``--`` and the name with dashes unless the field says.
    option: str
    #: The table of an ENUM field's members (None for other kinds).
    enum: ProtoEnum[Any, Any] | None = None

    @property
    def path(self) -> str:
        """Its path in an update's field mask and in refusals (``spec.jitter``)."""
        return f"{self.part}.{self.name}"

    @property
    def keyword(self) -> str:
        """Its keyword in the SDK and its key in an ``apply -f`` file."""
        return "notify" if self.kind is Kind.NOTIFIERS else self.name

    @property
    def json_key(self) -> str:
        """Its key in ``-o json`` output: durations in seconds say so."""
        return f"{self.name}_seconds" if self.kind in _DURATIONS else self.name


def _kind(owner: type, name: str, hint: object) -> Kind:
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return Kind.ENUM
    for type_, kind in _KIND_OF_TYPE:
        if hint == type_:
            return kind
    raise TypeError(
        f"{owner.__name__}.{name} has type {hint!r}, which no schedule field kind covers: "
        "add a Kind to cronwave_core.domain.schedule_fields (and its codec at each edge)"
    )


def _fields(part: str, owner: type) -> tuple[ScheduleField, ...]:
    hints = get_type_hints(owner, vars(spec_module))
    found = []
    for f in dataclasses.fields(owner):
        kind = _kind(owner, f.name, hints[f.name])
        if f.default is dataclasses.MISSING:
            raise TypeError(f"{owner.__name__}.{f.name} needs a plain default (what unset means)")
        found.append(
            ScheduleField(
                part=part,
                name=f.name,
                kind=kind,
                default=f.default,
                help=f.metadata.get("help", ""),
                option=f.metadata.get("option", "--" + f.name.replace("_", "-")),
                enum=_ENUMS[hints[f.name]] if kind is Kind.ENUM else None,
            )
        )
    return tuple(found)


SPEC_FIELDS = _fields("spec", Spec)
POLICY_FIELDS = _fields("policy", Policy)
#: Every field, the spec's first, each in its dataclass's order.
FIELDS = SPEC_FIELDS + POLICY_FIELDS
BY_NAME = {f.name: f for f in FIELDS}
BY_KEYWORD = {f.keyword: f for f in FIELDS}
