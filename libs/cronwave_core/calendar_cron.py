"""Cron expressions, parsed and stepped by croniter on naive local wall-clock time.

The syntax is croniter's; nothing here re-parses a field. What a schedule may say:

- 5 fields: ``minute hour day-of-month month day-of-week``.
- 6 fields: ``second minute hour day-of-month month day-of-week`` -- seconds come
  FIRST, as in Quartz and Spring. (croniter's own default puts them last; this
  module always passes ``second_at_beginning=True``.)
- Macros: ``@yearly`` ``@annually`` ``@monthly`` ``@weekly`` ``@daily``
  ``@midnight`` ``@hourly`` (any case).
- Ranges ``1-5`` (a reversed range such as ``22-2`` wraps around), steps ``*/15``,
  ``10-50/20``, ``5/15``, lists ``1,15``, month and day names ``jan``-``dec``,
  ``sun``-``sat`` (any case), ``?`` as ``*``; day-of-week ``0`` and ``7`` are Sunday.
- ``L`` in day-of-month (the last day; also ``15-L``), ``15W`` (the weekday nearest
  the 15th, within the month), ``5#3`` (the third Friday) and ``L5`` (the last
  Friday) in day-of-week. The Quartz spelling ``5L`` is not accepted.
- When both day fields are restricted, a day matching either fires (Vixie cron).

Refused, each with the reason: 7 fields (years); ``H`` and ``R`` (hashed and random
values differ between processes, so two planners would disagree); ``@reboot``;
``W`` next to a restricted day-of-week and ``#``/``L<n>`` next to a restricted
day-of-month (croniter gives these no consistent meaning); expressions that never
name a real date, such as ``0 0 30 2 *``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Set
from datetime import date, datetime, time, timedelta
from functools import lru_cache

from croniter import croniter
from croniter.croniter import CroniterBadDateError, CroniterError

from cronwave_core.errors import InvalidArgument

MACROS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)

# A list item that croniter would expand with a hash or at random: H, H/5, R(0-30)...
_HASHED = re.compile(r"^[hr](\(\d+-\d+\))?(/\d+)?$", re.IGNORECASE)

# Any date will do: an expression that matches nothing within croniter's 50-year
# search from here matches nothing at all.
_PROBE = datetime(2000, 1, 1)
_US = timedelta(microseconds=1)


class _Refused(Exception):
    """An expression broke a rule; the caller adds the field name."""


class CronExpr:
    """One compiled cron expression. Instances are shared between threads: each walk
    over the slots steps its own shallow copy of the compiled croniter."""

    __slots__ = ("_template", "text")

    def __init__(self, text: str, template: croniter) -> None:
        self.text = text
        self._template = template

    def slots_after(
        self, local: datetime, skip_dates: Set[date] = frozenset()
    ) -> Iterator[datetime]:
        """Naive wall-clock slots strictly after the naive ``local``, increasing, none
        on a date in ``skip_dates``. Ends when no slot exists within 50 years or
        before the end of the datetime range."""
        it = copy.copy(self._template)
        it.set_current(local, force=True)
        while True:
            try:
                slot: datetime = it.get_next(datetime)
            except (CroniterBadDateError, OverflowError, ValueError):
                return
            day = slot.date()
            if day in skip_dates:
                # An excluded day is passed in one step, not slot by slot: a
                # 1-second expression has 86,400 slots in it.
                try:
                    resume = datetime.combine(day + timedelta(days=1), time()) - _US
                except OverflowError:
                    return
                it.set_current(resume, force=True)
                continue
            yield slot


def parse_cron(text: str, field: str) -> CronExpr:
    """Compile ``text``; raise ``InvalidArgument(field, rule)`` when it breaks a rule
    of the module docstring. Compiled expressions are cached by text."""
    try:
        return _compile(text)
    except _Refused as exc:
        raise InvalidArgument(field, str(exc)) from None


@lru_cache(maxsize=16384)
def _compile(text: str) -> CronExpr:
    expr = text.strip()
    if not expr:
        raise _Refused(
            "is empty; write 5 fields (minute hour day month weekday), 6 fields "
            "(second first) or a macro such as @daily"
        )
    if expr.startswith("@"):
        if expr.lower() not in MACROS:
            raise _Refused(f"{text!r}: unknown macro; use one of {', '.join(sorted(MACROS))}")
    else:
        fields = expr.split()
        if len(fields) not in (5, 6):
            raise _Refused(
                f"{text!r} has {len(fields)} fields; use 5 (minute hour day month weekday) "
                "or 6 (second minute hour day month weekday)"
            )
        for item in (part for f in fields for part in f.split(",")):
            if _HASHED.match(item):
                raise _Refused(
                    f"{text!r}: hashed and random values (H, R) are not supported; "
                    "write the value out"
                )
    try:
        template = croniter(expr, _PROBE, second_at_beginning=True)
    except (CroniterError, ValueError, TypeError, KeyError) as exc:
        raise _Refused(f"{text!r} is not a valid cron expression: {_reason(exc, expr)}") from None
    _check_day_fields(text, expr)
    try:
        copy.copy(template).get_next(datetime)
    except CroniterBadDateError:
        raise _Refused(f"{text!r} never matches a real date (such as 30 February)") from None
    return CronExpr(text, template)


def _check_day_fields(text: str, expr: str) -> None:
    if expr.startswith("@"):
        return
    expanded, nth_weekday = croniter.expand(expr, second_at_beginning=True)
    fields = expr.lower().split()
    day_of_month = fields[-3]
    dom_restricted = expanded[2] != ["*"]
    dow_restricted = expanded[4] != ["*"]
    if "w" in day_of_month and dow_restricted:
        raise _Refused(
            f"{text!r}: 'W' in day-of-month needs '*' or '?' in day-of-week; "
            "use two expressions for a union"
        )
    if nth_weekday and dom_restricted:
        raise _Refused(
            f"{text!r}: '#' and 'L<day>' in day-of-week need '*' or '?' in day-of-month; "
            "use two expressions for a union"
        )


def _reason(exc: Exception, expr: str) -> str:
    lines = str(exc).strip().splitlines()
    reason = lines[-1] if lines else type(exc).__name__
    fields = expr.split()
    if len(fields) >= 5 and "l" in fields[-1].lower() and "#" not in fields[-1]:
        reason += "; write the last Friday of a month as L5, not 5L"
    return reason
