"""Schedule specifications as domain values (no protobuf, no SQL).

Instants are aware UTC datetimes; durations are timedeltas; the zone is an IANA name.
The classes have slots: a planner holds one ``ScheduleDef`` and usually one ``Spec``
per schedule, 100,000 of them. ``Spec`` and ``Policy`` can be weakly referenced, so
equal values can be shared without keeping unused ones alive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from enum import StrEnum


class DstGap(StrEnum):
    SHIFT = "shift"
    SKIP = "skip"


class DstRepeat(StrEnum):
    ONCE = "once"
    LAST = "last"
    TWICE = "twice"


class Overlap(StrEnum):
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    BUFFER_ALL = "buffer_all"
    CANCEL_OTHER = "cancel_other"
    ALLOW_ALL = "allow_all"


class Catchup(StrEnum):
    SKIP = "skip"
    LATEST = "latest"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class Interval:
    """Fires at the Unix epoch + phase + k * every, for every whole k."""

    every: timedelta
    phase: timedelta = timedelta(0)


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Spec:
    """When a schedule fires: the union of its cron expressions, intervals and
    one-off instants, minus excluded local dates, within [start_at, end_at]."""

    cron: tuple[str, ...] = ()
    time_zone: str = "UTC"
    dst_gap: DstGap = DstGap.SHIFT
    dst_repeat: DstRepeat = DstRepeat.ONCE
    exclude_dates: tuple[date, ...] = ()
    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: int = 0
    intervals: tuple[Interval, ...] = ()
    one_off: tuple[datetime, ...] = ()
    jitter: timedelta = timedelta(0)


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Policy:
    overlap: Overlap = Overlap.SKIP
    catchup: Catchup = Catchup.LATEST
    catchup_window: timedelta = timedelta(minutes=10)
    catchup_max_runs: int = 100


@dataclass(frozen=True, slots=True)
class ScheduleDef:
    """A schedule as the planner sees it."""

    schedule_id: str
    spec: Spec
    policy: Policy = field(default_factory=Policy)
    job_type: str = ""
    payload_json: str = "{}"
    paused: bool = False
    revision: int = 0
