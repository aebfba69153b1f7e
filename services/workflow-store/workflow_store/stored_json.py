"""The stored JSON of schedule specs and policies (the proto's canonical JSON), read
and written directly for the usual shapes.

The stored form is what ``json_format.MessageToDict`` makes of the proto (field
names as in the proto). Reading and writing it through ``json_format`` costs a few
hundred microseconds a schedule, which is most of a 100,000-schedule
ListSchedules, so the usual shapes are converted directly, to the same values
(``tests/workflow_store/test_stored_spec_json.py`` compares the two). Anything
else -- a form the direct path does not know, or a value it would refuse -- goes
through ``json_format`` and the proto conversions, which say what is wrong.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

from cronwave_proto.v1 import common_pb2 as pb
from google.protobuf import json_format

from cronwave_core.convert import dt_to_ts, td_to_duration
from cronwave_core.domain.schedule_fields import POLICY_FIELDS, SPEC_FIELDS
from cronwave_core.domain.spec import (
    CATCHUPS,
    DST_GAPS,
    DST_REPEATS,
    OVERLAPS,
    Interval,
    Policy,
    Spec,
)

#: The fields the direct conversion below reads and writes. A field added to ``Spec``
#: or ``Policy`` and not yet to it is stored through ``json_format`` (correct, slower)
#: until it is: ``tests/workflow_store/test_stored_spec_json.py`` says when.
_SPEC_KEYS = frozenset(
    {
        "cron",
        "time_zone",
        "dst_gap",
        "dst_repeat",
        "exclude_dates",
        "start_at",
        "end_at",
        "max_runs",
        "intervals",
        "one_off",
        "jitter",
    }
)
_POLICY_KEYS = frozenset(
    {"overlap", "catchup", "catchup_window", "catchup_max_runs", "trace_sample"}
)
#: Whether the direct conversion knows every field (deadline and notifiers, rare, are
#: left to ``json_format`` on purpose).
SPEC_DIRECT = {f.name for f in SPEC_FIELDS} == _SPEC_KEYS
POLICY_DIRECT = {f.name for f in POLICY_FIELDS} == _POLICY_KEYS | {"deadline", "notifiers"}
_DURATION = re.compile(r"^(\d+)(?:\.(\d{1,9}))?s$", re.ASCII)
_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$", re.ASCII)
_ZERO = timedelta(0)
_SPEC = Spec()
_POLICY = Policy()


class _Unusual(Exception):
    """A stored value the direct conversion leaves to ``json_format``."""


def _duration_text(td: timedelta) -> str:
    return str(td_to_duration(td).ToJsonString())


def _timestamp_text(dt: datetime) -> str:
    return str(dt_to_ts(dt).ToJsonString())


def _duration(text: object) -> timedelta:
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        raise _Unusual
    nanos = int(match.group(2).ljust(9, "0")) if match.group(2) else 0
    return timedelta(seconds=int(match.group(1)), microseconds=nanos // 1000)


def _timestamp(text: object) -> datetime:
    match = _TIMESTAMP.match(text) if isinstance(text, str) else None
    if match is None:
        raise _Unusual
    try:
        at = datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC)
    except ValueError:
        raise _Unusual from None
    nanos = int(match.group(2).ljust(9, "0")) if match.group(2) else 0
    return at + timedelta(microseconds=nanos // 1000)


def _texts(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Unusual
    return value


def _list(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise _Unusual
    return value


def spec_to_dict(spec: Spec) -> dict[str, Any]:
    if not SPEC_DIRECT:
        return json_format.MessageToDict(spec.to_proto(), preserving_proto_field_name=True)
    try:
        data: dict[str, Any] = {}
        if spec.cron:
            data["cron"] = list(_texts(list(spec.cron)))
        if spec.time_zone:
            data["time_zone"] = spec.time_zone
        data["dst_gap"] = DST_GAPS.names[spec.dst_gap]
        data["dst_repeat"] = DST_REPEATS.names[spec.dst_repeat]
        if spec.exclude_dates:
            data["exclude_dates"] = [d.isoformat() for d in spec.exclude_dates]
        if spec.start_at:
            data["start_at"] = _timestamp_text(spec.start_at)
        if spec.end_at:
            data["end_at"] = _timestamp_text(spec.end_at)
        if spec.max_runs:
            data["max_runs"] = str(int(spec.max_runs))
        if spec.intervals:
            data["intervals"] = [
                {"every": _duration_text(i.every), "phase": _duration_text(i.phase)}
                for i in spec.intervals
            ]
        if spec.one_off:
            data["one_off"] = [_timestamp_text(t) for t in spec.one_off]
        data["jitter"] = _duration_text(spec.jitter)
        return data
    except (_Unusual, KeyError, TypeError, ValueError, AttributeError):
        return json_format.MessageToDict(spec.to_proto(), preserving_proto_field_name=True)


def spec_from_dict(data: dict[str, Any]) -> Spec:
    try:
        return _spec_direct(data)
    except (_Unusual, KeyError, TypeError, ValueError, AttributeError):
        return Spec.from_proto(json_format.ParseDict(data, pb.ScheduleSpec()))


def _spec_direct(data: dict[str, Any]) -> Spec:
    if not isinstance(data, dict) or not data.keys() <= _SPEC_KEYS:
        raise _Unusual
    time_zone = data.get("time_zone", "")
    max_runs = data.get("max_runs", 0)
    if not isinstance(time_zone, str) or isinstance(max_runs, bool):
        raise _Unusual
    max_runs = int(max_runs)  # int64 is stored as a string
    jitter = _duration(data["jitter"]) if "jitter" in data else _ZERO
    if max_runs < 0:
        raise _Unusual
    intervals = []
    for item in _list(data.get("intervals", [])):
        if not isinstance(item, dict) or not item.keys() <= {"every", "phase"}:
            raise _Unusual
        every = _duration(item["every"]) if "every" in item else _ZERO
        phase = _duration(item["phase"]) if "phase" in item else _ZERO
        if every <= _ZERO or phase >= every:
            raise _Unusual
        intervals.append(Interval(every, phase))
    start_at = _timestamp(data["start_at"]) if "start_at" in data else None
    end_at = _timestamp(data["end_at"]) if "end_at" in data else None
    if start_at and end_at and end_at <= start_at:
        raise _Unusual
    return Spec(
        cron=tuple(c.strip() for c in _texts(data.get("cron", []))),
        time_zone=time_zone or "UTC",
        dst_gap=DST_GAPS.by_name[data["dst_gap"]] if "dst_gap" in data else _SPEC.dst_gap,
        dst_repeat=(
            DST_REPEATS.by_name[data["dst_repeat"]] if "dst_repeat" in data else _SPEC.dst_repeat
        ),
        exclude_dates=tuple(date.fromisoformat(d) for d in _texts(data.get("exclude_dates", []))),
        start_at=start_at,
        end_at=end_at,
        max_runs=max_runs,
        intervals=tuple(intervals),
        one_off=tuple(_timestamp(t) for t in _list(data.get("one_off", []))),
        jitter=jitter,
    )


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    if not POLICY_DIRECT or policy.deadline is not None or policy.notifiers:
        # Rare enough for the generic form, which ``policy_from_dict`` reads back.
        return json_format.MessageToDict(policy.to_proto(), preserving_proto_field_name=True)
    try:
        data: dict[str, Any] = {
            "overlap": OVERLAPS.names[policy.overlap],
            "catchup": CATCHUPS.names[policy.catchup],
            "catchup_window": _duration_text(policy.catchup_window),
        }
        if policy.catchup_max_runs:
            data["catchup_max_runs"] = int(policy.catchup_max_runs)
        if policy.trace_sample != _POLICY.trace_sample:
            data["trace_sample"] = float(policy.trace_sample)
        return data
    except (KeyError, TypeError, ValueError, AttributeError):
        return json_format.MessageToDict(policy.to_proto(), preserving_proto_field_name=True)


_POLICIES: dict[tuple[tuple[str, Any], ...], Policy] = {}


def policy_from_dict(data: dict[str, Any]) -> Policy:
    """Policies are few and immutable: equal stored forms give one shared value."""
    try:
        key = tuple(sorted(data.items()))
        found = _POLICIES.get(key)
    except TypeError:  # an unhashable value: not a stored form this reads directly
        key, found = (), None
    if found is not None:
        return found
    try:
        policy = _policy_direct(data)
    except (_Unusual, KeyError, TypeError, ValueError, AttributeError):
        return Policy.from_proto(json_format.ParseDict(data, pb.SchedulePolicy()))
    if key and len(_POLICIES) < 1024:
        _POLICIES[key] = policy
    return policy


def _policy_direct(data: dict[str, Any]) -> Policy:
    if not isinstance(data, dict) or not data.keys() <= _POLICY_KEYS:
        raise _Unusual
    max_runs = data.get("catchup_max_runs", 0)
    if not isinstance(max_runs, int) or isinstance(max_runs, bool) or max_runs < 0:
        raise _Unusual
    sample = data.get("trace_sample", _POLICY.trace_sample)
    if type(sample) not in (int, float) or not 0.0 <= sample <= 1.0:
        raise _Unusual
    return Policy(
        overlap=OVERLAPS.by_name[data["overlap"]] if "overlap" in data else _POLICY.overlap,
        catchup=CATCHUPS.by_name[data["catchup"]] if "catchup" in data else _POLICY.catchup,
        catchup_window=(
            _duration(data["catchup_window"])
            if "catchup_window" in data
            else _POLICY.catchup_window
        ),
        catchup_max_runs=max_runs or _POLICY.catchup_max_runs,
        trace_sample=float(sample),
    )


# -- schedules -------------------------------------------------------------------------
