"""The keyword form of a schedule, turned into the ``Spec`` and ``Policy`` it stands
for: the one place where the SDK's loose input (policy names, dates as text, plain
datetimes) becomes typed values, checked for what those values cannot hold."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from typing import TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from cronwave_core.convert import dt_to_ts
from cronwave_core.domain.deadlines import Notifier, NotifyFormat, deadline_value, notifier_url
from cronwave_core.domain.spec import Catchup, DstGap, DstRepeat, Interval, Overlap, Policy, Spec
from cronwave_core.errors import InvalidArgument
from cronwave_core.fields import shown

_V = TypeVar("_V")
_SPEC = Spec()
_POLICY = Policy()


def timestamp(value: datetime, field: str) -> Timestamp:
    return dt_to_ts(aware(value, field))


def aware(value: datetime, field: str) -> datetime:
    if value.tzinfo is None:
        raise InvalidArgument(field, "must be a timezone-aware datetime (e.g. tzinfo=UTC)")
    return value


def _date(value: date | str, field: str) -> date:
    if not isinstance(value, str):
        return value
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(field, f"{shown(value)} is not a date in YYYY-MM-DD form") from None


def spec_of(
    cron: str | Sequence[str] = (),
    *,
    time_zone: str = "UTC",
    dst_gap: str | None = None,
    dst_repeat: str | None = None,
    exclude_dates: Iterable[date | str] = (),
    intervals: Iterable[Interval] = (),
    one_off: Iterable[datetime] = (),
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    max_runs: int = 0,
    jitter: timedelta | None = None,
) -> Spec:
    """The ``Spec`` of ``create_schedule``'s and ``preview``'s keywords; policies by
    name (``None`` is the default). Checks what a ``Spec`` cannot hold (names, naive
    datetimes, dates as text); the server validates the rest and names the field."""
    return Spec(
        cron=(cron,) if isinstance(cron, str) else tuple(cron),
        time_zone=time_zone,
        dst_gap=DstGap.parse(dst_gap) if dst_gap else _SPEC.dst_gap,
        dst_repeat=DstRepeat.parse(dst_repeat) if dst_repeat else _SPEC.dst_repeat,
        exclude_dates=tuple(
            _date(d, f"spec.exclude_dates[{i}]") for i, d in enumerate(exclude_dates)
        ),
        start_at=None if start_at is None else aware(start_at, "spec.start_at"),
        end_at=None if end_at is None else aware(end_at, "spec.end_at"),
        max_runs=max_runs,
        intervals=tuple(intervals),
        one_off=tuple(aware(t, f"spec.one_off[{i}]") for i, t in enumerate(one_off)),
        jitter=_SPEC.jitter if jitter is None else jitter,
    )


def policy_of(
    *,
    overlap: str | None = None,
    catchup: str | None = None,
    catchup_window: timedelta | None = None,
    catchup_max_runs: int = 0,
    deadline: timedelta | None = None,
    notify: Sequence[str] = (),
    notify_format: str | None = None,
    trace_sample: float | None = None,
) -> Policy:
    """The ``Policy`` of ``create_schedule``'s keywords (``None`` and 0: the default)."""
    if deadline is not None:
        deadline_value(deadline)
    return Policy(
        overlap=Overlap.parse(overlap) if overlap else _POLICY.overlap,
        catchup=Catchup.parse(catchup) if catchup else _POLICY.catchup,
        catchup_window=_POLICY.catchup_window if catchup_window is None else catchup_window,
        catchup_max_runs=catchup_max_runs or _POLICY.catchup_max_runs,
        deadline=deadline,
        notifiers=notifiers_of(notify, notify_format),
        trace_sample=_POLICY.trace_sample if trace_sample is None else trace_sample,
    )


def notifiers_of(urls: Sequence[str], notify_format: str | None) -> tuple[Notifier, ...]:
    """One notifier per URL, each with ``notify_format`` (``json`` or ``slack``)."""
    if isinstance(urls, str):
        urls = (urls,)
    fmt = NotifyFormat.parse(notify_format, "notify_format") if notify_format else None
    return tuple(
        Notifier(notifier_url(url, f"policy.notifiers[{i}].url"), fmt or NotifyFormat.JSON)
        for i, url in enumerate(urls)
    )


def whole_or_keywords(name: str, whole: _V | None, keywords: _V, given: bool) -> _V:
    """``whole`` when given, else the value the keywords build; ``given`` says whether
    any keyword was set (a keyword set to its default counts)."""
    if whole is None:
        return keywords
    if given:
        raise InvalidArgument(name, f"give the {name} whole or by its keywords, not both")
    return whole
