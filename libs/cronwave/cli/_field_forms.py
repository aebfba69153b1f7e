"""A schedule's spec and policy fields in the CLI's two document forms, each derived
from the field table (``cronwave_core.domain.schedule_fields``) by the field's kind:

- ``-o json``: ``json_fields`` (durations as ``<name>_seconds``, instants RFC 3339);
- an ``apply -f`` entry: ``yaml_fields`` writes it (only what differs from the
  default), ``keywords_of_entry`` reads it into ``spec_of`` / ``policy_of``'s
  keywords, so that ``schedule show -o yaml | apply -f -`` gives the same schedule.

A kind has one codec per form here; a field of a new kind fails the tests
(``tests/schedules/test_schedule_fields.py``) until it has its codecs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from cronwave.cli import _schedule_args as args
from cronwave_core.domain.deadlines import NotifyFormat, notifier_url
from cronwave_core.domain.schedule_fields import FIELDS, Kind, ScheduleField
from cronwave_core.domain.spec import Interval, Policy, Spec
from cronwave_core.errors import InvalidArgument

#: The key of an ``apply -f`` entry beside ``notify`` that is no field of its own.
NOTIFY_FORMAT = "notify_format"
#: Every key of an ``apply -f`` entry that is a spec or policy field.
ENTRY_KEYS = (*(f.keyword for f in FIELDS), NOTIFY_FORMAT)


def instant(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


_JSON: dict[Kind, Callable[[Any], Any]] = {
    Kind.TEXT: str,
    Kind.TEXTS: list,
    Kind.ENUM: str,
    Kind.COUNT: int,
    Kind.RATIO: float,
    Kind.DURATION: seconds,
    Kind.OPTIONAL_DURATION: seconds,
    Kind.INSTANT: instant,
    Kind.INSTANTS: lambda values: [instant(t) for t in values],
    Kind.DATES: lambda values: [d.isoformat() for d in values],
    Kind.INTERVALS: lambda values: [
        {"every_seconds": seconds(i.every), "phase_seconds": seconds(i.phase)} for i in values
    ],
    Kind.NOTIFIERS: lambda values: [{"url": n.url, "format": str(n.format)} for n in values],
}


def json_fields(spec: Spec, policy: Policy) -> dict[str, Any]:
    """Every spec and policy field by its JSON key, in the table's order."""
    return {
        f.json_key: _JSON[f.kind](getattr(spec if f.part == "spec" else policy, f.name))
        for f in FIELDS
    }


# -- apply -f entries ---------------------------------------------------------------


def duration_text(value: timedelta) -> str:
    """The shortest of ``2h``, ``15m``, ``90s``, ``250ms``, ``0.000007s`` that is
    exactly ``value`` (``_schedule_args.parse_duration`` reads each back)."""
    micros = value // timedelta(microseconds=1)
    for unit, size in (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000)):
        if micros and micros % size == 0:
            return f"{micros // size}{unit}"
    if micros % 1_000_000 == 0:
        return f"{micros // 1_000_000}s"
    if micros % 1000 == 0:
        return f"{micros // 1000}ms"
    return f"{micros / 1_000_000:.6f}s"


def _notify_yaml(values: tuple[Any, ...]) -> list[str]:
    return [n.url for n in values]


_YAML: dict[Kind, Callable[[Any], Any]] = {
    Kind.TEXT: str,
    Kind.TEXTS: list,
    Kind.ENUM: str,
    Kind.COUNT: int,
    Kind.RATIO: float,
    Kind.DURATION: duration_text,
    Kind.OPTIONAL_DURATION: duration_text,
    Kind.INSTANT: lambda value: value.astimezone(UTC).isoformat(),
    Kind.INSTANTS: lambda values: [t.astimezone(UTC).isoformat() for t in values],
    Kind.DATES: lambda values: [d.isoformat() for d in values],
    Kind.INTERVALS: lambda values: [
        {"every": duration_text(i.every), "phase": duration_text(i.phase)} for i in values
    ],
    Kind.NOTIFIERS: _notify_yaml,
}


def yaml_fields(spec: Spec, policy: Policy) -> dict[str, Any]:
    """The fields that differ from the default, by their ``apply -f`` keys. The
    webhooks of one entry share one format: a schedule whose webhooks have several
    (made through the SDK) is written with the first one's."""
    entry: dict[str, Any] = {}
    for f in FIELDS:
        value = getattr(spec if f.part == "spec" else policy, f.name)
        if value == f.default:
            continue
        entry[f.keyword] = _YAML[f.kind](value)
        if f.kind is Kind.NOTIFIERS and value[0].format is not NotifyFormat.JSON:
            entry[NOTIFY_FORMAT] = str(value[0].format)
    return entry


def keywords_of_entry(entry: dict[str, Any], tz: str) -> dict[str, Any]:
    """``spec_of`` / ``policy_of``'s keywords of the fields ``entry`` gives (each read
    by its kind; times without an offset in ``tz``). A bad value raises
    ``InvalidArgument`` naming the entry's key."""
    keywords: dict[str, Any] = {}
    for f in FIELDS:
        value = entry.get(f.keyword)
        if value is not None:
            keywords[f.keyword] = _READ[f.kind](f, value, tz)
    if entry.get(NOTIFY_FORMAT) is not None:
        keywords[NOTIFY_FORMAT] = _typed(NOTIFY_FORMAT, entry[NOTIFY_FORMAT], str, "json or slack")
    return keywords


def _typed(key: str, value: object, kind: type, what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidArgument(key, f"must be {what}, got {value!r}")
    return value


def _listed(value: object) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _texts(f: ScheduleField, value: object, tz: str) -> list[str]:
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not all(isinstance(c, str) for c in texts):
        raise InvalidArgument(f.keyword, "must be a cron expression or a list of them (quoted)")
    return texts


def _count(f: ScheduleField, value: object, tz: str) -> int:
    what = "a whole number (0: no limit)" if f.default == 0 else "a whole number"
    return int(_typed(f.keyword, value, int, what))


def _ratio(f: ScheduleField, value: object, tz: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f.keyword, f"must be a number with 0 <= ratio <= 1, got {value!r}")
    return float(value)


def duration(value: object, field: str) -> timedelta:
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


def parse_instant(value: object, field: str, tz: str) -> datetime:
    """An instant; YAML's own timestamps are taken as they are (a naive one, as
    wall-clock time in ``tz``)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            from cronwave_core.domain.calendar import zone  # croniter: only when needed

            return value.replace(tzinfo=zone(tz, "time_zone")).astimezone(UTC)
        return value.astimezone(UTC)
    if isinstance(value, str):
        return args.parse_instant(value, field, tz)
    raise InvalidArgument(field, f"must be an ISO-8601 instant, got {value!r}")


def _interval(value: object, field: str) -> Interval:
    if isinstance(value, dict):
        unknown = [k for k in value if k not in ("every", "phase")]
        if unknown or "every" not in value:
            raise InvalidArgument(field, "must be a duration or a mapping of every and phase")
        every = duration(value["every"], f"{field}.every")
        phase = duration(value.get("phase", 0), f"{field}.phase")
        return Interval(every, phase)
    return Interval(duration(value, field), timedelta(0))


def _enum_name(f: ScheduleField, value: object, tz: str) -> str:
    return str(_typed(f.keyword, value, str, f"a name such as {f.default}"))


_READ: dict[Kind, Callable[[ScheduleField, Any, str], Any]] = {
    Kind.TEXT: lambda f, v, tz: _typed(f.keyword, v, str, "a zone name such as Europe/Berlin"),
    Kind.TEXTS: _texts,
    Kind.ENUM: _enum_name,
    Kind.COUNT: _count,
    Kind.RATIO: _ratio,
    Kind.DURATION: lambda f, v, tz: duration(v, f.keyword),
    Kind.OPTIONAL_DURATION: lambda f, v, tz: duration(v, f.keyword),
    Kind.INSTANT: lambda f, v, tz: parse_instant(v, f.keyword, tz),
    Kind.INSTANTS: lambda f, v, tz: [
        parse_instant(t, f"{f.keyword}[{i}]", tz) for i, t in enumerate(_listed(v))
    ],
    Kind.DATES: lambda f, v, tz: [_date(d, f"{f.keyword}[{i}]") for i, d in enumerate(_listed(v))],
    Kind.INTERVALS: lambda f, v, tz: [
        _interval(x, f"{f.keyword}[{i}]") for i, x in enumerate(_listed(v))
    ],
    Kind.NOTIFIERS: lambda f, v, tz: [
        _url(u, f"{f.keyword}[{i}]") for i, u in enumerate(_listed(v))
    ],
}
#: Each form's codec of each kind (the tests check that none is missing).
CODECS = {"json": _JSON, "yaml": _YAML, "read": _READ}
