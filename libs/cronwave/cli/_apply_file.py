"""A ``cronwave apply`` file: the schedules it declares, read and checked whole.

The format (docs/operations/schedules.md, *Declaring schedules*)::

    manager: billing            # optional: whose file this is (default "default")
    schedules:
      - id: nightly-billing
        job_type: billing.nightly
        cron: "0 2 * * *"       # or a list
        time_zone: Europe/Berlin
        overlap: skip
        payload: {customers: 100000}
        labels: {critical: "true", team: billing}

Every entry is checked before anything is changed, with the rules the store applies
(the calendar's own code): a file with an unknown field, a bad cron or zone, a
duplicate id or a value of the wrong type is refused, naming the file, the entry (its
index and id) and the field. A job type's registration is checked against the store
by the command, before it changes anything too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from cronwave._spec_input import policy_of, spec_of
from cronwave.cli import _schedule_args as args
from cronwave_core.domain import calendar
from cronwave_core.domain.catchup import check_coherent
from cronwave_core.domain.deadlines import notifier_url
from cronwave_core.domain.labels import Labels, labels_value
from cronwave_core.domain.spec import Interval, Policy, Spec
from cronwave_core.errors import InvalidArgument

#: The manager of a file that names none.
DEFAULT_MANAGER = "default"
#: What ``managed_by`` holds for the schedules of ``manager``'s file.
MARKER_PREFIX = "apply:"
_TOP_FIELDS = ("manager", "schedules")
FIELDS = (
    "id",
    "job_type",
    "cron",
    "time_zone",
    "intervals",
    "one_off",
    "exclude_dates",
    "start_at",
    "end_at",
    "max_runs",
    "jitter",
    "dst_gap",
    "dst_repeat",
    "overlap",
    "catchup",
    "catchup_window",
    "catchup_max_runs",
    "deadline",
    "notify",
    "notify_format",
    "payload",
    "paused",
    "labels",
)
_MAX_ENTRIES = 10_000


def marker(manager: str) -> str:
    return MARKER_PREFIX + manager


@dataclass(frozen=True)
class Declared:
    """One entry of the file, as the schedule it declares. ``paused`` None: the entry
    does not say, and apply leaves the schedule's pause as it is."""

    schedule_id: str
    job_type: str
    spec: Spec
    policy: Policy
    payload: dict[str, Any]
    paused: bool | None
    index: int
    labels: Labels = ()

    def where(self, path: Path) -> str:
        return f"{path}: schedules[{self.index}] (id '{self.schedule_id}')"


@dataclass(frozen=True)
class ApplyFile:
    path: Path
    manager: str
    schedules: tuple[Declared, ...]

    @property
    def marker(self) -> str:
        return marker(self.manager)


def read(path: Path) -> ApplyFile:
    """The file at ``path``, checked whole; ``InvalidArgument`` naming the file, the
    entry and the field otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(str(path), f"cannot be read ({type(exc).__name__})") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise InvalidArgument(str(path), f"not valid YAML{at}: {problem}") from None
    if not isinstance(document, dict):
        raise InvalidArgument(str(path), "must be a mapping with a 'schedules' list")
    for key in document:
        if key not in _TOP_FIELDS:
            raise InvalidArgument(
                f"{path}: {key}", f"unknown field; a file has {', '.join(_TOP_FIELDS)}"
            )
    manager = document.get("manager", DEFAULT_MANAGER)
    if not isinstance(manager, str) or not _plain_name(manager):
        raise InvalidArgument(
            f"{path}: manager", "must be a name of a-z, 0-9, '.', '_' or '-', e.g. billing"
        )
    entries = document.get("schedules")
    if not isinstance(entries, list):
        raise InvalidArgument(f"{path}: schedules", "required: a list of schedules")
    if len(entries) > _MAX_ENTRIES:
        raise InvalidArgument(f"{path}: schedules", f"at most {_MAX_ENTRIES} entries")
    declared: list[Declared] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        one = _entry(path, index, entry)
        if one.schedule_id in seen:
            raise InvalidArgument(
                f"{path}: schedules[{index}] (id '{one.schedule_id}'): id",
                f"duplicate: schedules[{seen[one.schedule_id]}] has the same id",
            )
        seen[one.schedule_id] = index
        declared.append(one)
    return ApplyFile(path, manager, tuple(declared))


def _plain_name(text: str) -> bool:
    return 0 < len(text) <= 63 and all(c.isascii() and (c.isalnum() or c in "._-") for c in text)


def _entry(path: Path, index: int, entry: object) -> Declared:
    where = f"{path}: schedules[{index}]"
    if not isinstance(entry, dict):
        raise InvalidArgument(where, "must be a mapping with at least id, job_type and a cron")
    sid = entry.get("id")
    if not isinstance(sid, str) or not sid:
        raise InvalidArgument(f"{where}: id", "required: the schedule's id, e.g. nightly-billing")
    where = f"{where} (id '{sid}')"
    for key in entry:
        if key not in FIELDS:
            raise InvalidArgument(
                f"{where}: {key}", f"unknown field; an entry has {', '.join(FIELDS)}"
            )
    try:
        return _declared(entry, sid, index)
    except InvalidArgument as exc:
        field = exc.field.removeprefix("spec.").removeprefix("policy.")
        raise InvalidArgument(f"{where}: {field}", exc.rule) from None


def _declared(entry: dict[str, Any], sid: str, index: int) -> Declared:
    job_type = entry.get("job_type")
    if not isinstance(job_type, str) or not job_type:
        raise InvalidArgument("job_type", "required: a registered job type, e.g. cronwave.noop")
    tz = _typed(entry, "time_zone", str, "a zone name such as Europe/Berlin") or "UTC"
    calendar.zone(tz, "time_zone")
    cron = entry.get("cron", [])
    if isinstance(cron, str):
        cron = [cron]
    if not isinstance(cron, list) or not all(isinstance(c, str) for c in cron):
        raise InvalidArgument("cron", "must be a cron expression or a list of them (quoted)")
    payload = entry.get("payload", {})
    if not isinstance(payload, dict):
        raise InvalidArgument("payload", "must be a mapping (the job's input as a JSON object)")
    paused = entry.get("paused")
    if paused is not None and not isinstance(paused, bool):
        raise InvalidArgument("paused", "must be true or false")
    labels = entry.get("labels", {})
    if not isinstance(labels, dict):
        raise InvalidArgument("labels", 'must be a mapping such as {critical: "true"}')
    spec = spec_of(
        cron,
        time_zone=tz,
        dst_gap=_typed(entry, "dst_gap", str, "a name such as shift"),
        dst_repeat=_typed(entry, "dst_repeat", str, "a name such as once"),
        exclude_dates=[
            _date(d, f"exclude_dates[{i}]") for i, d in enumerate(_list(entry, "exclude_dates"))
        ],
        intervals=[
            _interval(v, f"intervals[{i}]") for i, v in enumerate(_list(entry, "intervals"))
        ],
        one_off=[_instant(v, f"one_off[{i}]", tz) for i, v in enumerate(_list(entry, "one_off"))],
        start_at=_optional(entry, "start_at", lambda v: _instant(v, "start_at", tz)),
        end_at=_optional(entry, "end_at", lambda v: _instant(v, "end_at", tz)),
        max_runs=_typed(entry, "max_runs", int, "a whole number (0: no limit)") or 0,
        jitter=_optional(entry, "jitter", lambda v: _duration(v, "jitter")),
    )
    policy = policy_of(
        overlap=_typed(entry, "overlap", str, "a name such as skip"),
        catchup=_typed(entry, "catchup", str, "a name such as latest"),
        catchup_window=_optional(entry, "catchup_window", lambda v: _duration(v, "catchup_window")),
        catchup_max_runs=_typed(entry, "catchup_max_runs", int, "a whole number") or 0,
        deadline=_optional(entry, "deadline", lambda v: _duration(v, "deadline")),
        notify=[_url(v, f"notify[{i}]") for i, v in enumerate(_list(entry, "notify"))],
        notify_format=_typed(entry, "notify_format", str, "json or slack"),
    )
    # Exactly the store's checks: the values as the store would read them.
    checked = Spec.from_proto(spec.to_proto())
    calendar.validate(checked)
    check_coherent(Policy.from_proto(policy.to_proto()))
    return Declared(sid, job_type, spec, policy, payload, paused, index, labels_value(labels))


def _typed(entry: dict[str, Any], key: str, kind: type, what: str) -> Any:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidArgument(key, f"must be {what}, got {value!r}")
    return value


def _list(entry: dict[str, Any], key: str) -> list[Any]:
    value = entry.get(key, [])
    if not isinstance(value, list):
        return [value]
    return value


def _optional(entry: dict[str, Any], key: str, parse: Callable[[Any], Any]) -> Any:
    value = entry.get(key)
    return None if value is None else parse(value)


def _duration(value: object, field: str) -> timedelta:
    if isinstance(value, bool):
        raise InvalidArgument(field, f"must be a duration such as 30s or 15m, got {value!r}")
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    if isinstance(value, str):
        return args.parse_duration(value, field)
    raise InvalidArgument(field, f"must be a duration such as 30s or 15m, got {value!r}")


def _url(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(field, f"must be an http:// or https:// URL, got {value!r}")
    return notifier_url(value, field)


def _date(value: object, field: str) -> date:
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str):
        return args.parse_dates([value], field)[0]
    raise InvalidArgument(field, f"must be a date in YYYY-MM-DD form, got {value!r}")


def _instant(value: object, field: str, tz: str) -> datetime:
    """An instant; YAML's own timestamps are taken as they are (a naive one, as
    wall-clock time in ``tz``)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=calendar.zone(tz, "time_zone")).astimezone(UTC)
        return value.astimezone(UTC)
    if isinstance(value, str):
        return args.parse_instant(value, field, tz)
    raise InvalidArgument(field, f"must be an ISO-8601 instant, got {value!r}")


def _interval(value: object, field: str) -> Interval:
    if isinstance(value, dict):
        unknown = [k for k in value if k not in ("every", "phase")]
        if unknown or "every" not in value:
            raise InvalidArgument(field, "must be a duration or a mapping of every and phase")
        every = _duration(value["every"], f"{field}.every")
        phase = _duration(value.get("phase", 0), f"{field}.phase")
        return Interval(every, phase)
    return Interval(_duration(value, field), timedelta(0))
