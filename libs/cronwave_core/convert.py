"""Protobuf messages <-> domain values. Field errors name the proto field."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from cronwave.v1 import common_pb2 as pb
from cronwave_core.calendar_cron import MAX_CRON_LENGTH
from cronwave_core.errors import InvalidArgument
from cronwave_core.fields import shown
from cronwave_core.spec import (
    Catchup,
    DstGap,
    DstRepeat,
    Interval,
    Overlap,
    Policy,
    ScheduleDef,
    Spec,
)

_GAP = {pb.DST_GAP_POLICY_SHIFT: DstGap.SHIFT, pb.DST_GAP_POLICY_SKIP: DstGap.SKIP}
_REPEAT = {
    pb.DST_REPEAT_POLICY_ONCE: DstRepeat.ONCE,
    pb.DST_REPEAT_POLICY_LAST: DstRepeat.LAST,
    pb.DST_REPEAT_POLICY_TWICE: DstRepeat.TWICE,
}
_OVERLAP = {
    pb.OVERLAP_POLICY_SKIP: Overlap.SKIP,
    pb.OVERLAP_POLICY_BUFFER_ONE: Overlap.BUFFER_ONE,
    pb.OVERLAP_POLICY_BUFFER_ALL: Overlap.BUFFER_ALL,
    pb.OVERLAP_POLICY_CANCEL_OTHER: Overlap.CANCEL_OTHER,
    pb.OVERLAP_POLICY_ALLOW_ALL: Overlap.ALLOW_ALL,
}
_CATCHUP = {
    pb.CATCHUP_POLICY_SKIP: Catchup.SKIP,
    pb.CATCHUP_POLICY_LATEST: Catchup.LATEST,
    pb.CATCHUP_POLICY_ALL: Catchup.ALL,
}


#: The instants a Timestamp may name: years 1 to 9999, as datetime holds them.
MIN_SECONDS = -62_135_596_800  # 0001-01-01T00:00:00Z
MAX_SECONDS = 253_402_300_799  # 9999-12-31T23:59:59Z
#: The longest duration a request may carry unless its field says otherwise.
MAX_DURATION = timedelta(days=36_525)  # 100 years
_NANOS = 1_000_000_000

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def ts_to_dt(ts: Timestamp, field: str = "timestamp") -> datetime:
    """The aware UTC instant of ``ts``; ``InvalidArgument(field)`` unless its nanos are
    in [0, 1e9) and it lies within years 1 to 9999."""
    seconds, nanos = ts.seconds, ts.nanos
    if not 0 <= nanos < _NANOS:
        raise InvalidArgument(field, f"nanos must be in [0, 999999999], got {nanos}")
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise InvalidArgument(
            field, f"must lie between 0001-01-01 and 9999-12-31 (UTC), got seconds={seconds}"
        )
    return _EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)


def dt_to_ts(dt: datetime) -> Timestamp:
    if dt.tzinfo is None:
        raise ValueError("naive datetime: cronwave instants are timezone-aware")
    # timedelta keeps 0 <= seconds < 86400 and 0 <= microseconds < 10**6, which is
    # also Timestamp's normal form (non-negative nanos, also before 1970).
    delta = dt - _EPOCH
    return Timestamp(seconds=delta.days * 86_400 + delta.seconds, nanos=delta.microseconds * 1000)


def opt_ts(msg: object, name: str, field: str = "") -> datetime | None:
    """``msg.<name>`` as an instant (``ts_to_dt``, refusals naming ``field``, by
    default ``name``), or None when unset."""
    if not msg.HasField(name):  # type: ignore[attr-defined]
        return None
    return ts_to_dt(getattr(msg, name), field or name)


def td_to_duration(td: timedelta) -> Duration:
    d = Duration()
    d.FromTimedelta(td)
    return d


def duration_to_td(
    d: Duration, field: str = "duration", limit: timedelta = MAX_DURATION
) -> timedelta:
    """As ``Duration.ToTimedelta`` (nanoseconds rounded toward zero), without its
    Python-level checks: a schedule load converts a few of these per schedule.
    ``InvalidArgument(field)`` for a Duration protobuf calls malformed (nanos outside
    (-1e9, 1e9) or of the other sign than seconds) and for one longer than ``limit``
    either way (``MAX_DURATION`` lies well inside both protobuf's and timedelta's
    range); whether it may be negative is the field's own rule."""
    seconds, nanos = d.seconds, d.nanos
    if not -_NANOS < nanos < _NANOS or (seconds > 0 > nanos) or (seconds < 0 < nanos):
        raise InvalidArgument(
            field,
            f"not a valid Duration: nanos must be in (-1e9, 1e9) with the sign of seconds, "
            f"got seconds={seconds}, nanos={nanos}",
        )
    micros = nanos // 1000 if nanos >= 0 else -(-nanos // 1000)
    if abs(seconds) > limit.days * 86_400 + limit.seconds:
        raise InvalidArgument(field, f"must be at most {_span(limit)} either way, got {seconds}s")
    return timedelta(seconds=seconds, microseconds=micros)


def _span(td: timedelta) -> str:
    seconds = td.total_seconds()
    if td.days and not td.seconds and not td.microseconds:
        return f"{td.days} day{'s' if td.days != 1 else ''} ({seconds:g}s)"
    return f"{seconds:g}s"


def _enum(mapping: dict[int, object], value: int, default: object, field: str) -> object:
    if value == 0:
        return default
    if value not in mapping:
        raise InvalidArgument(field, f"unknown value {value}")
    return mapping[value]


def _inverse(mapping: dict[int, object]) -> dict[object, int]:
    return {v: k for k, v in mapping.items()}


_GAP_PB = _inverse(_GAP)  # type: ignore[arg-type]
_REPEAT_PB = _inverse(_REPEAT)  # type: ignore[arg-type]
_OVERLAP_PB = _inverse(_OVERLAP)  # type: ignore[arg-type]
_CATCHUP_PB = _inverse(_CATCHUP)  # type: ignore[arg-type]


def spec_from_proto(msg: pb.ScheduleSpec) -> Spec:
    """The spec of a request, each field converted by its rule; the calendar's own
    rules (``calendar.validate``) are checked by the caller."""
    for i, text in enumerate(msg.cron):
        if len(text) > MAX_CRON_LENGTH:  # before the strip below hides the length
            raise InvalidArgument(
                f"spec.cron[{i}]", f"must be at most {MAX_CRON_LENGTH} characters, got {len(text)}"
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
    spec = Spec(
        cron=tuple(c.strip() for c in msg.cron),
        time_zone=msg.time_zone or "UTC",
        dst_gap=_enum(_GAP, msg.dst_gap, DstGap.SHIFT, "spec.dst_gap"),  # type: ignore[arg-type]
        dst_repeat=_enum(_REPEAT, msg.dst_repeat, DstRepeat.ONCE, "spec.dst_repeat"),  # type: ignore[arg-type]
        exclude_dates=tuple(excluded),
        start_at=opt_ts(msg, "start_at", "spec.start_at"),
        end_at=opt_ts(msg, "end_at", "spec.end_at"),
        max_runs=msg.max_runs,
        intervals=tuple(intervals),
        one_off=tuple(ts_to_dt(t, f"spec.one_off[{i}]") for i, t in enumerate(msg.one_off)),
        jitter=jitter,
    )
    if spec.start_at and spec.end_at and spec.end_at <= spec.start_at:
        raise InvalidArgument("spec.end_at", "must be after spec.start_at")
    return spec


def spec_to_proto(spec: Spec) -> pb.ScheduleSpec:
    msg = pb.ScheduleSpec(
        cron=list(spec.cron),
        time_zone=spec.time_zone,
        dst_gap=_GAP_PB[spec.dst_gap],  # type: ignore[arg-type]
        dst_repeat=_REPEAT_PB[spec.dst_repeat],  # type: ignore[arg-type]
        exclude_dates=[d.isoformat() for d in spec.exclude_dates],
        max_runs=spec.max_runs,
        intervals=[
            pb.IntervalSpec(every=td_to_duration(i.every), phase=td_to_duration(i.phase))
            for i in spec.intervals
        ],
        one_off=[dt_to_ts(t) for t in spec.one_off],
        jitter=td_to_duration(spec.jitter),
    )
    if spec.start_at:
        msg.start_at.CopyFrom(dt_to_ts(spec.start_at))
    if spec.end_at:
        msg.end_at.CopyFrom(dt_to_ts(spec.end_at))
    return msg


def policy_from_proto(msg: pb.SchedulePolicy) -> Policy:
    window = (
        duration_to_td(msg.catchup_window, "policy.catchup_window")
        if msg.HasField("catchup_window")
        else None
    )
    if window is not None and window < timedelta(0):
        raise InvalidArgument("policy.catchup_window", "must not be negative")
    if msg.catchup_max_runs < 0:
        raise InvalidArgument("policy.catchup_max_runs", "must not be negative")
    default = Policy()
    return Policy(
        overlap=_enum(_OVERLAP, msg.overlap, Overlap.SKIP, "policy.overlap"),  # type: ignore[arg-type]
        catchup=_enum(_CATCHUP, msg.catchup, Catchup.LATEST, "policy.catchup"),  # type: ignore[arg-type]
        catchup_window=default.catchup_window if window is None else window,
        catchup_max_runs=msg.catchup_max_runs or default.catchup_max_runs,
    )


def policy_to_proto(policy: Policy) -> pb.SchedulePolicy:
    return pb.SchedulePolicy(
        overlap=_OVERLAP_PB[policy.overlap],  # type: ignore[arg-type]
        catchup=_CATCHUP_PB[policy.catchup],  # type: ignore[arg-type]
        catchup_window=td_to_duration(policy.catchup_window),
        catchup_max_runs=policy.catchup_max_runs,
    )


def schedule_def_from_proto(msg: pb.Schedule) -> ScheduleDef:
    return ScheduleDef(
        schedule_id=msg.schedule_id,
        spec=spec_from_proto(msg.spec),
        policy=policy_from_proto(msg.policy),
        job_type=msg.job_type,
        payload_json=msg.payload_json or "{}",
        paused=msg.paused,
        revision=msg.revision,
    )
