"""Protobuf messages <-> domain values. Field errors name the proto field."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from cronwave.v1 import common_pb2 as pb
from cronwave_core.errors import InvalidArgument
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


def ts_to_dt(ts: Timestamp) -> datetime:
    return datetime.fromtimestamp(ts.seconds, UTC) + timedelta(microseconds=ts.nanos // 1000)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def dt_to_ts(dt: datetime) -> Timestamp:
    if dt.tzinfo is None:
        raise ValueError("naive datetime: cronwave instants are timezone-aware")
    # timedelta keeps 0 <= seconds < 86400 and 0 <= microseconds < 10**6, which is
    # also Timestamp's normal form (non-negative nanos, also before 1970).
    delta = dt - _EPOCH
    return Timestamp(seconds=delta.days * 86_400 + delta.seconds, nanos=delta.microseconds * 1000)


def opt_ts(msg: object, name: str) -> datetime | None:
    return ts_to_dt(getattr(msg, name)) if msg.HasField(name) else None  # type: ignore[attr-defined]


def td_to_duration(td: timedelta) -> Duration:
    d = Duration()
    d.FromTimedelta(td)
    return d


def duration_to_td(d: Duration) -> timedelta:
    """As ``Duration.ToTimedelta`` (nanoseconds rounded toward zero), without its
    Python-level checks: a schedule load converts a few of these per schedule."""
    nanos = d.nanos
    micros = nanos // 1000 if nanos >= 0 else -(-nanos // 1000)
    return timedelta(seconds=d.seconds, microseconds=micros)


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
    excluded: list[date] = []
    for i, text in enumerate(msg.exclude_dates):
        try:
            excluded.append(date.fromisoformat(text))
        except ValueError as exc:
            raise InvalidArgument(
                f"spec.exclude_dates[{i}]", f"{text!r} is not a date in YYYY-MM-DD form"
            ) from exc
    intervals = []
    for i, iv in enumerate(msg.intervals):
        every = duration_to_td(iv.every)
        phase = duration_to_td(iv.phase)
        if every <= timedelta(0):
            raise InvalidArgument(f"spec.intervals[{i}].every", "must be a positive duration")
        if phase < timedelta(0) or phase >= every:
            raise InvalidArgument(f"spec.intervals[{i}].phase", "must be in [0, every)")
        intervals.append(Interval(every, phase))
    if msg.max_runs < 0:
        raise InvalidArgument("spec.max_runs", "must not be negative (0 means unlimited)")
    jitter = duration_to_td(msg.jitter)
    if jitter < timedelta(0):
        raise InvalidArgument("spec.jitter", "must not be negative")
    spec = Spec(
        cron=tuple(c.strip() for c in msg.cron),
        time_zone=msg.time_zone or "UTC",
        dst_gap=_enum(_GAP, msg.dst_gap, DstGap.SHIFT, "spec.dst_gap"),  # type: ignore[arg-type]
        dst_repeat=_enum(_REPEAT, msg.dst_repeat, DstRepeat.ONCE, "spec.dst_repeat"),  # type: ignore[arg-type]
        exclude_dates=tuple(excluded),
        start_at=opt_ts(msg, "start_at"),
        end_at=opt_ts(msg, "end_at"),
        max_runs=msg.max_runs,
        intervals=tuple(intervals),
        one_off=tuple(ts_to_dt(t) for t in msg.one_off),
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
    window = duration_to_td(msg.catchup_window) if msg.HasField("catchup_window") else None
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
