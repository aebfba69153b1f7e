"""A value other than the default for each kind of schedule field, and a spec and a
policy with every field set to one: what the edge tests send through each edge."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from cronwave_core.domain.deadlines import Notifier, NotifyFormat
from cronwave_core.domain.schedule_fields import POLICY_FIELDS, SPEC_FIELDS, Kind, ScheduleField
from cronwave_core.domain.spec import Catchup, Interval, Overlap, Policy, Spec

AT = datetime(2031, 3, 4, 5, 6, 7, 123_000, tzinfo=UTC)
SAMPLES: dict[Kind, Any] = {
    Kind.TEXT: "Europe/Berlin",
    Kind.TEXTS: ("0 2 * * *", "30 4 * * 1"),
    Kind.COUNT: 7,
    Kind.RATIO: 0.25,
    Kind.DURATION: timedelta(seconds=90),
    Kind.OPTIONAL_DURATION: timedelta(minutes=45),
    Kind.INSTANT: AT,
    Kind.INSTANTS: (AT + timedelta(days=1),),
    Kind.DATES: (date(2031, 12, 25),),
    Kind.INTERVALS: (Interval(timedelta(minutes=15), timedelta(minutes=5)),),
    Kind.NOTIFIERS: (Notifier("https://hooks.example.com/x", NotifyFormat.SLACK),),
    # ENUM: the last member, never the default (see sample()).
}
#: Values the calendar and the policy rules accept together.
_OVERRIDES: dict[str, Any] = {
    "end_at": AT + timedelta(days=400),
    "overlap": Overlap.ALLOW_ALL,
    "catchup": Catchup.ALL,
}


def sample(field: ScheduleField) -> Any:
    if field.name in _OVERRIDES:
        return _OVERRIDES[field.name]
    if field.kind is Kind.ENUM:
        assert field.enum is not None
        return [m for m in field.enum.members if m != field.default][-1]
    return SAMPLES[field.kind]


def every_field_set() -> tuple[Spec, Policy]:
    spec = Spec(**{f.name: sample(f) for f in SPEC_FIELDS})
    policy = Policy(**{f.name: sample(f) for f in POLICY_FIELDS})
    return spec, policy
