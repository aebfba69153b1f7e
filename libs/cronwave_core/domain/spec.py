"""Schedule specifications as domain values, each with its proto conversion beside it
(``to_proto`` / ``from_proto``, as Temporal's ``ScheduleSpec`` and ``SchedulePolicy``);
no gRPC, no SQL.

Instants are aware UTC datetimes; durations are timedeltas; the zone is an IANA name.
Each policy enum is the one Python spelling of its proto enum: members map by name
(``Overlap.BUFFER_ONE`` is ``OVERLAP_POLICY_BUFFER_ONE``, see ``proto_enum``), and
what the proto's UNSPECIFIED means is the field's default here.
The classes have slots: a planner holds one ``ScheduleDef`` and usually one ``Spec``
per schedule, 100,000 of them. ``Spec`` and ``Policy`` can be weakly referenced, so
equal values can be shared without keeping unused ones alive.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Any

from cronwave_proto.v1 import common_pb2 as pb

from cronwave_core.domain.deadlines import (
    MAX_NOTIFIERS,
    Notifier,
    deadline_value,
    notifiers_value,
)
from cronwave_core.domain.labels import is_critical
from cronwave_core.errors import InvalidArgument
from cronwave_core.fields import shown
from cronwave_core.proto_enum import ProtoEnum
from cronwave_core.wire import dt_to_ts, duration_to_td, opt_ts, td_to_duration, ts_to_dt

_NO_JITTER = timedelta(0)
#: The longest cron expression a schedule may have, in characters. Here, not beside
#: the cron parser (``calendar_cron``), so that a spec is checked without loading
#: croniter: the SDK builds specs, only the calendar reads them.
MAX_CRON_LENGTH = 1_000


class DstGap(StrEnum):
    SHIFT = "shift"
    SKIP = "skip"

    def to_proto(self) -> pb.DstGapPolicy:
        return DST_GAPS.to_proto(self)

    @classmethod
    def from_proto(cls, value: int, field: str = "spec.dst_gap") -> DstGap:
        """UNSPECIFIED is the default; an unknown value is refused naming ``field``."""
        return DST_GAPS.from_proto(value, field)

    @classmethod
    def parse(cls, text: str, field: str = "spec.dst_gap") -> DstGap:
        """The member named ``text`` (any case, ``-`` for ``_``)."""
        return DST_GAPS.parse(text, field)


class DstRepeat(StrEnum):
    ONCE = "once"
    LAST = "last"
    TWICE = "twice"

    def to_proto(self) -> pb.DstRepeatPolicy:
        return DST_REPEATS.to_proto(self)

    @classmethod
    def from_proto(cls, value: int, field: str = "spec.dst_repeat") -> DstRepeat:
        """UNSPECIFIED is the default; an unknown value is refused naming ``field``."""
        return DST_REPEATS.from_proto(value, field)

    @classmethod
    def parse(cls, text: str, field: str = "spec.dst_repeat") -> DstRepeat:
        """The member named ``text`` (any case, ``-`` for ``_``)."""
        return DST_REPEATS.parse(text, field)


class Overlap(StrEnum):
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    BUFFER_ALL = "buffer_all"
    CANCEL_OTHER = "cancel_other"
    ALLOW_ALL = "allow_all"

    def to_proto(self) -> pb.OverlapPolicy:
        return OVERLAPS.to_proto(self)

    @classmethod
    def from_proto(cls, value: int, field: str = "policy.overlap") -> Overlap:
        """UNSPECIFIED is the default; an unknown value is refused naming ``field``."""
        return OVERLAPS.from_proto(value, field)

    @classmethod
    def parse(cls, text: str, field: str = "policy.overlap") -> Overlap:
        """The member named ``text`` (any case, ``-`` for ``_``)."""
        return OVERLAPS.parse(text, field)


class Catchup(StrEnum):
    SKIP = "skip"
    LATEST = "latest"
    ALL = "all"

    def to_proto(self) -> pb.CatchupPolicy:
        return CATCHUPS.to_proto(self)

    @classmethod
    def from_proto(cls, value: int, field: str = "policy.catchup") -> Catchup:
        """UNSPECIFIED is the default; an unknown value is refused naming ``field``."""
        return CATCHUPS.from_proto(value, field)

    @classmethod
    def parse(cls, text: str, field: str = "policy.catchup") -> Catchup:
        """The member named ``text`` (any case, ``-`` for ``_``)."""
        return CATCHUPS.parse(text, field)


def _field(default: Any, help: str, *, option: str = "") -> Any:
    """A field with its default and what people are told of it (the CLI's ``--help``);
    ``option`` when its CLI option is not ``--`` and its name with dashes.
    ``schedule_fields`` reads these."""
    metadata = {"help": help, **({"option": option} if option else {})}
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, slots=True)
class Interval:
    """Fires at the Unix epoch + phase + k * every, for every whole k."""

    every: timedelta
    phase: timedelta = timedelta(0)


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Spec:
    """When a schedule fires: the union of its cron expressions, intervals and
    one-off instants, minus excluded local dates, within [start_at, end_at]."""

    cron: tuple[str, ...] = _field(
        (), "Cron expression (5 or 6 fields, macros, L W #); repeatable.", option="--cron"
    )
    time_zone: str = _field(
        "UTC", "IANA zone the cron and times without an offset are read in.", option="--tz"
    )
    dst_gap: DstGap = _field(DstGap.SHIFT, "Slot in a spring-forward gap.")
    dst_repeat: DstRepeat = _field(DstRepeat.ONCE, "Slot in a fall-back hour.")
    exclude_dates: tuple[date, ...] = _field(
        (), "A local date (YYYY-MM-DD) with no runs; repeatable.", option="--exclude-date"
    )
    start_at: datetime | None = _field(
        None, "First instant it may fire (inclusive).", option="--start"
    )
    end_at: datetime | None = _field(
        None, "It fires only before this instant (exclusive).", option="--end"
    )
    max_runs: int = _field(0, "Fire at most this many times (0: no limit).")
    intervals: tuple[Interval, ...] = _field(
        (), "An interval such as 15m (epoch + phase + k*every); repeatable.", option="--every"
    )
    one_off: tuple[datetime, ...] = _field(
        (), "A one-off ISO-8601 instant; repeatable.", option="--at"
    )
    jitter: timedelta = _field(
        timedelta(0), "Delay each start by a deterministic amount below this, e.g. 30s."
    )

    @classmethod
    def from_proto(cls, msg: pb.ScheduleSpec) -> Spec:
        """The spec of a request, each field converted by its rule (refusals name the
        field, ``spec.cron[2]``); the calendar's own rules (``calendar.validate``) are
        checked by the caller."""
        for i, text in enumerate(msg.cron):
            if len(text) > MAX_CRON_LENGTH:  # before the strip below hides the length
                raise InvalidArgument(
                    f"spec.cron[{i}]",
                    f"must be at most {MAX_CRON_LENGTH} characters, got {len(text)}",
                )
        excluded: list[date] = []
        for i, text in enumerate(msg.exclude_dates):
            try:
                excluded.append(date.fromisoformat(text))
            except ValueError as exc:
                raise InvalidArgument(
                    f"spec.exclude_dates[{i}]", f"{shown(text)} is not a date in YYYY-MM-DD form"
                ) from exc
        intervals = []
        for i, iv in enumerate(msg.intervals):
            every = duration_to_td(iv.every, f"spec.intervals[{i}].every")
            phase = duration_to_td(iv.phase, f"spec.intervals[{i}].phase")
            if every <= timedelta(0):
                raise InvalidArgument(f"spec.intervals[{i}].every", "must be a positive duration")
            if phase < timedelta(0) or phase >= every:
                raise InvalidArgument(f"spec.intervals[{i}].phase", "must be in [0, every)")
            intervals.append(Interval(every, phase))
        if msg.max_runs < 0:
            raise InvalidArgument("spec.max_runs", "must not be negative (0 means unlimited)")
        jitter = duration_to_td(msg.jitter, "spec.jitter")
        if jitter < timedelta(0):
            raise InvalidArgument("spec.jitter", "must not be negative")
        spec = cls(
            cron=tuple(c.strip() for c in msg.cron),
            # A planner holds a spec per schedule: the few zone names and the zero
            # jitter are one object each, not one per spec.
            time_zone=sys.intern(msg.time_zone or "UTC"),
            dst_gap=DstGap.from_proto(msg.dst_gap),
            dst_repeat=DstRepeat.from_proto(msg.dst_repeat),
            exclude_dates=tuple(excluded),
            start_at=opt_ts(msg, "start_at", "spec.start_at"),
            end_at=opt_ts(msg, "end_at", "spec.end_at"),
            max_runs=msg.max_runs,
            intervals=tuple(intervals),
            one_off=tuple(ts_to_dt(t, f"spec.one_off[{i}]") for i, t in enumerate(msg.one_off)),
            jitter=jitter or _NO_JITTER,
        )
        if spec.start_at and spec.end_at and spec.end_at <= spec.start_at:
            raise InvalidArgument("spec.end_at", "must be after spec.start_at")
        return spec

    def to_proto(self) -> pb.ScheduleSpec:
        msg = pb.ScheduleSpec(
            cron=list(self.cron),
            time_zone=self.time_zone,
            dst_gap=self.dst_gap.to_proto(),
            dst_repeat=self.dst_repeat.to_proto(),
            exclude_dates=[d.isoformat() for d in self.exclude_dates],
            max_runs=self.max_runs,
            intervals=[
                pb.IntervalSpec(every=td_to_duration(i.every), phase=td_to_duration(i.phase))
                for i in self.intervals
            ],
            one_off=[dt_to_ts(t) for t in self.one_off],
            jitter=td_to_duration(self.jitter),
        )
        if self.start_at:
            msg.start_at.CopyFrom(dt_to_ts(self.start_at))
        if self.end_at:
            msg.end_at.CopyFrom(dt_to_ts(self.end_at))
        return msg


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Policy:
    overlap: Overlap = _field(Overlap.SKIP, "Previous run still going.")
    catchup: Catchup = _field(
        Catchup.LATEST,
        "Slots missed while down ('all' needs --overlap buffer_all or allow_all).",
    )
    catchup_window: timedelta = _field(
        timedelta(minutes=10), "Slots later than this after downtime are MISSED (default 10m)."
    )
    catchup_max_runs: int = _field(
        100, "At most this many catch-up runs with --catchup all (0: 100)."
    )
    #: Each slot must have SUCCEEDED within this long of its fire time (None: no
    #: deadline); ``domain.deadlines`` says what a breach is.
    deadline: timedelta | None = _field(
        None,
        "Each slot must have SUCCEEDED within this long of its fire time, e.g. 45m; "
        "a breach is recorded and sent to the --notify webhooks.",
    )
    notifiers: tuple[Notifier, ...] = _field(
        (), "An http(s) webhook a deadline breach is POSTed to; repeatable.", option="--notify"
    )
    #: The share of runs traced whole, decided when each run's trace begins (1: every
    #: run, the schedule is critical); a run not sampled keeps its worker's spans only
    #: when it fails, is retried or starts late (docs/operations/metrics-and-alerts.md).
    trace_sample: float = _field(
        1.0,
        "Share of runs traced whole, 0..1, e.g. 0.01 (1: every run); a run not sampled "
        "is traced by its worker only when it fails, is retried or starts late.",
    )

    def __post_init__(self) -> None:
        if self.deadline is not None:
            deadline_value(self.deadline)
        notifiers_value(self.notifiers)
        trace_sample_value(self.trace_sample)

    @classmethod
    def from_proto(cls, msg: pb.SchedulePolicy) -> Policy:
        """Unset fields (UNSPECIFIED, no window, 0 runs) are the defaults above."""
        window = (
            duration_to_td(msg.catchup_window, "policy.catchup_window")
            if msg.HasField("catchup_window")
            else None
        )
        if window is not None and window < timedelta(0):
            raise InvalidArgument("policy.catchup_window", "must not be negative")
        if msg.catchup_max_runs < 0:
            raise InvalidArgument("policy.catchup_max_runs", "must not be negative")
        return cls(
            overlap=Overlap.from_proto(msg.overlap),
            catchup=Catchup.from_proto(msg.catchup),
            catchup_window=_DEFAULT_POLICY.catchup_window if window is None else window,
            catchup_max_runs=msg.catchup_max_runs or _DEFAULT_POLICY.catchup_max_runs,
            deadline=(
                deadline_value(duration_to_td(msg.deadline, "policy.deadline"))
                if msg.HasField("deadline")
                else None
            ),
            notifiers=_notifiers(msg),
            trace_sample=(
                trace_sample_value(msg.trace_sample)
                if msg.HasField("trace_sample")
                else _DEFAULT_POLICY.trace_sample
            ),
        )

    def to_proto(self) -> pb.SchedulePolicy:
        msg = pb.SchedulePolicy(
            overlap=self.overlap.to_proto(),
            catchup=self.catchup.to_proto(),
            catchup_window=td_to_duration(self.catchup_window),
            catchup_max_runs=self.catchup_max_runs,
            notifiers=[n.to_proto() for n in self.notifiers],
        )
        if self.deadline is not None:
            msg.deadline.CopyFrom(td_to_duration(self.deadline))
        if self.trace_sample != 1.0:
            msg.trace_sample = self.trace_sample
        return msg


def trace_sample_value(ratio: float, field: str = "policy.trace_sample") -> float:
    """A share of runs: a number with 0 <= ratio <= 1."""
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0.0 <= ratio <= 1.0:
        raise InvalidArgument(
            field, f"must be a share of runs, 0 <= ratio <= 1, got {str(ratio)[:40]}"
        )
    return float(ratio)


def _notifiers(msg: pb.SchedulePolicy) -> tuple[Notifier, ...]:
    if len(msg.notifiers) > MAX_NOTIFIERS:
        raise InvalidArgument(
            "policy.notifiers", f"at most {MAX_NOTIFIERS}, got {len(msg.notifiers)}"
        )
    return tuple(
        Notifier.from_proto(n, f"policy.notifiers[{i}]") for i, n in enumerate(msg.notifiers)
    )


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
    #: Labelled ``critical=true``: every run is traced, whatever ``trace_sample`` says.
    critical: bool = False

    @classmethod
    def from_proto(cls, msg: pb.Schedule) -> ScheduleDef:
        return cls(
            schedule_id=msg.schedule_id,
            spec=Spec.from_proto(msg.spec),
            policy=Policy.from_proto(msg.policy),
            job_type=msg.job_type,
            payload_json=msg.payload_json or "{}",
            paused=msg.paused,
            revision=msg.revision,
            critical=is_critical(msg.labels),
        )

    @property
    def trace_sample(self) -> float:
        """The share of its runs traced whole: all of a critical schedule's."""
        return 1.0 if self.critical else self.policy.trace_sample


_DEFAULT_SPEC = Spec()
_DEFAULT_POLICY = Policy()
# Each policy enum's table (``proto_enum.ProtoEnum``), for code that needs all of its
# members at once: the store's stored JSON, the SDK's and the CLI's lists of choices.
# What a proto enum's UNSPECIFIED means is the field's default above.
DST_GAPS = ProtoEnum(DstGap, pb.DstGapPolicy, "DST_GAP_POLICY_", unspecified=_DEFAULT_SPEC.dst_gap)
DST_REPEATS = ProtoEnum(
    DstRepeat, pb.DstRepeatPolicy, "DST_REPEAT_POLICY_", unspecified=_DEFAULT_SPEC.dst_repeat
)
OVERLAPS = ProtoEnum(
    Overlap, pb.OverlapPolicy, "OVERLAP_POLICY_", unspecified=_DEFAULT_POLICY.overlap
)
CATCHUPS = ProtoEnum(
    Catchup, pb.CatchupPolicy, "CATCHUP_POLICY_", unspecified=_DEFAULT_POLICY.catchup
)
