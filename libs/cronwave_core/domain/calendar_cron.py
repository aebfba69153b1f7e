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

Most expressions use numbers, names, ``*``, ``?``, lists, increasing ranges and
steps only; those are compiled into sorted value tuples here (``_Fields``, a few
hundred bytes, stepped by arithmetic in microseconds), to exactly the sets croniter
expands them to (``tests/calendar/test_calendar_cron_fields.py`` compares the two).
Everything else (``L``, ``W``, ``#``, wrap-around and equal-bound ranges, day-of-week
``7`` in a range, macros, anything invalid) is compiled and stepped by croniter. A
planner holds 100,000 distinct expressions, so the compact form is what keeps its
memory and its load time small.

Refused, each with the reason: an expression longer than ``MAX_CRON_LENGTH``
characters; a number outside its field's values, naming both (``hour 25 is out of
range 0-23``); a step (``/n``) of 0 or larger than its field's count of values (60
seconds or minutes, 24 hours, 31 days, 12 months, 7 weekdays); 7 fields (years);
``H`` and ``R`` (hashed and random values differ between processes, so two planners
would disagree); ``@reboot``;
``W`` next to a restricted day-of-week and ``#``/``L<n>`` next to a restricted
day-of-month (croniter gives these no consistent meaning); expressions that never
name a real date, such as ``0 0 30 2 *``.
"""

from __future__ import annotations

import copy
import re
from bisect import bisect_left
from calendar import monthrange
from collections.abc import Iterator, Set
from datetime import date, datetime, time, timedelta
from functools import lru_cache

from croniter import croniter
from croniter.croniter import CroniterBadDateError, CroniterError

from cronwave_core.domain.spec import MAX_CRON_LENGTH
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
_SECOND = timedelta(seconds=1)
_MINUTE = timedelta(minutes=1)
# croniter gives up after 50 years without a slot; so does the compact form.
_SEARCH_MONTHS = 50 * 12 + 12


class _Refused(Exception):
    """An expression broke a rule; the caller adds the field name."""


class CronExpr:
    """One compiled cron expression, shared between threads (immutable)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def slots_after(
        self, local: datetime, skip_dates: Set[date] = frozenset()
    ) -> Iterator[datetime]:
        """Naive wall-clock slots strictly after the naive ``local``, increasing, none
        on a date in ``skip_dates``. Ends when no slot exists within 50 years or
        before the end of the datetime range."""
        raise NotImplementedError


class _Croniter(CronExpr):
    """An expression croniter steps: each walk over the slots steps its own shallow
    copy of the compiled croniter."""

    __slots__ = ("_template",)

    def __init__(self, text: str, template: croniter) -> None:
        super().__init__(text)
        self._template = template

    def slots_after(
        self, local: datetime, skip_dates: Set[date] = frozenset()
    ) -> Iterator[datetime]:
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


# Day matching of a compact expression, as croniter reads the two day fields: both
# restricted -> either matches (Vixie cron); one restricted -> that one; neither -> any.
_ANY_DAY, _DOM, _DOW, _DOM_OR_DOW = range(4)


class _Fields(CronExpr):
    """An expression of plain values, ranges, lists and steps, as sorted tuples of the
    values each field allows (tuples are shared between expressions)."""

    __slots__ = ("_days", "_doms", "_dows", "_hours", "_minutes", "_months", "_seconds")

    def __init__(self, text: str, fields: tuple[tuple[int, ...], ...], days: int) -> None:
        super().__init__(text)
        self._seconds, self._minutes, self._hours, self._doms, self._months, self._dows = fields
        self._days = days

    def slots_after(
        self, local: datetime, skip_dates: Set[date] = frozenset()
    ) -> Iterator[datetime]:
        at = local
        while True:
            try:
                slot = self._next(at)
            except (OverflowError, ValueError):  # the end of datetime's range
                return
            if slot is None:
                return
            day = slot.date()
            if day in skip_dates:
                try:
                    at = datetime.combine(day + timedelta(days=1), time()) - _US
                except OverflowError:
                    return
                continue
            yield slot
            at = slot

    def _next(self, after: datetime) -> datetime | None:
        """The first slot strictly after ``after``; None when none is within 50 years."""
        if self._seconds == (0,):
            start = after.replace(second=0, microsecond=0) + _MINUTE
        else:
            start = after.replace(microsecond=0) + _SECOND
        year, month, day = start.year, start.month, start.day
        hms: tuple[int, int, int] | None = (start.hour, start.minute, start.second)
        months = self._months
        for _ in range(_SEARCH_MONTHS):
            i = bisect_left(months, month)
            if i == len(months):
                year, month, day, hms = year + 1, months[0], 1, None
            elif months[i] != month:
                month, day, hms = months[i], 1, None
            if year > 9999:
                return None
            last = monthrange(year, month)[1]
            while day <= last:
                if self._day_matches(year, month, day):
                    at = self._first_time(hms)
                    if at is not None:
                        return datetime(year, month, day, *at)
                day, hms = day + 1, None
            month, day, hms = month + 1, 1, None
            if month > 12:
                year, month = year + 1, 1
        return None

    def _day_matches(self, year: int, month: int, day: int) -> bool:
        days = self._days
        if days == _ANY_DAY:
            return True
        if days != _DOW and day in self._doms:
            return True
        if days == _DOM:
            return False
        return (date(year, month, day).weekday() + 1) % 7 in self._dows

    def _first_time(self, hms: tuple[int, int, int] | None) -> tuple[int, int, int] | None:
        """The earliest (hour, minute, second) of the expression at or after ``hms``
        within a day (None: from midnight)."""
        hours, minutes, seconds = self._hours, self._minutes, self._seconds
        if hms is None:
            return hours[0], minutes[0], seconds[0]
        h, m, s = hms
        i = bisect_left(hours, h)
        if i == len(hours):
            return None
        if hours[i] > h:
            return hours[i], minutes[0], seconds[0]
        j = bisect_left(minutes, m)
        if j < len(minutes):
            if minutes[j] > m:
                return h, minutes[j], seconds[0]
            k = bisect_left(seconds, s)
            if k < len(seconds):
                return h, m, seconds[k]
            if j + 1 < len(minutes):
                return h, minutes[j + 1], seconds[0]
        if i + 1 < len(hours):
            return hours[i + 1], minutes[0], seconds[0]
        return None


def parse_cron(text: str, field: str) -> CronExpr:
    """Compile ``text``; raise ``InvalidArgument(field, rule)`` when it breaks a rule
    of the module docstring. Compiled expressions are cached by text."""
    if len(text) > MAX_CRON_LENGTH:  # before the cache, which would keep it
        raise InvalidArgument(
            field, f"must be at most {MAX_CRON_LENGTH} characters, got {len(text)}"
        )
    try:
        return _compile(text)
    except _Refused as exc:
        raise InvalidArgument(field, str(exc)) from None


@lru_cache(maxsize=4096)
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
        _check_steps(text, fields)
        _check_ranges(text, fields)
        compact = _compact(text, fields)
        if compact is not None:
            return compact
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
    return _Croniter(text, template)


# Field kinds in the order of a 6-field expression: second, minute, hour, day of month,
# month, day of week; their bounds and names.
_BOUNDS = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_NAMES: tuple[dict[str, int], ...] = (
    {},
    {},
    {},
    {},
    {name: i + 1 for i, name in enumerate(_MONTH_NAMES)},
    {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))},
)
_PLAIN = re.compile(r"^[0-9a-z*?,/-]+$")
_ITEM = re.compile(r"^(?:(\*)|([0-9a-z]+)(?:-([0-9a-z]+))?)(?:/([0-9]+))?$")
_DOM_KIND, _DOW_KIND = 3, 5
# The most days each month can have (February: in a leap year).
_LONGEST = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _compact(text: str, fields: list[str]) -> _Fields | None:
    """``text`` in the compact form, or None to leave it to croniter (anything but
    plain values, increasing ranges, lists and steps, and anything invalid)."""
    if len(fields) == 5:
        fields = ["0", *fields]
    elif len(fields) != 6:
        return None
    lowered = [f.lower() for f in fields]
    values: list[tuple[int, ...]] = []
    for kind, field in enumerate(lowered):
        parsed = _field(field, kind)
        if parsed is None:
            return None
        values.append(parsed)
    dom, dow = lowered[_DOM_KIND], lowered[_DOW_KIND]
    # croniter: "*" (or "?") is unrestricted; so is a list naming every value, unless
    # the other day field is written without a "*".
    dom_any = dom in ("*", "?") or (len(values[_DOM_KIND]) == 31 and "*" in dow)
    dow_any = dow in ("*", "?") or (len(values[_DOW_KIND]) == 7 and "*" in dom)
    if not dom_any and not dow_any:
        days = _DOM_OR_DOW
    elif not dom_any:
        days = _DOM
        longest = max(_LONGEST[month] for month in values[4])
        if values[_DOM_KIND][0] > longest:
            raise _Refused(f"{text!r} never matches a real date (such as 30 February)")
    else:
        days = _ANY_DAY if dow_any else _DOW
    return _Fields(text, tuple(values), days)


@lru_cache(maxsize=4096)
def _field(field: str, kind: int) -> tuple[int, ...] | None:
    """The sorted values ``field`` allows, or None when it is not in the compact
    syntax. Cached by text, so equal fields share one tuple."""
    if not _PLAIN.match(field):
        return None
    if field == "?":
        return tuple(range(_BOUNDS[kind][0], _BOUNDS[kind][1] + 1)) if kind in (3, 5) else None
    low, high = _BOUNDS[kind]
    found: set[int] = set()
    items = field.split(",")
    for item in items:
        match = _ITEM.match(item)
        if match is None:
            return None
        star, first, last, step_text = match.groups()
        if star and len(items) > 1:
            return None  # croniter reads a list with "*" its own way
        step = int(step_text) if step_text else 1
        if step < 1:
            return None
        if star:
            start, end = low, high
        else:
            first_value = _value(first, kind, alone=last is None and step_text is None)
            if first_value is None:
                return None
            start = first_value
            if last is not None:
                last_value = _value(last, kind, alone=False)
                if last_value is None or last_value <= start:
                    return None  # equal and wrap-around ranges: croniter's own rules
                end = last_value
            elif step_text is not None:
                end = high
            else:
                end = start
        found.update(range(start, end + 1, step))
    return tuple(sorted(found))


def _value(token: str, kind: int, alone: bool) -> int | None:
    low, high = _BOUNDS[kind]
    if token.isdigit():
        value = int(token)
        if kind == _DOW_KIND and value == 7 and alone:
            return 0  # Sunday, as 0
    else:
        found = _NAMES[kind].get(token)
        if found is None:
            return None
        value = found
    return value if low <= value <= high else None


# Field names and their counts of values, in the order of a 6-field expression.
_STEP_FIELDS = (
    ("second", 60),
    ("minute", 60),
    ("hour", 24),
    ("day-of-month", 31),
    ("month", 12),
    ("day-of-week", 7),
)
_STEP = re.compile(r"/(\d+)")


def _check_steps(text: str, fields: list[str]) -> None:
    """Refuse a step larger than its field's count of values: such a step names
    nothing a smaller one does not, and a huge one is a typo."""
    if len(fields) not in (5, 6):
        return  # the field count is refused with its own reason
    kinds = _STEP_FIELDS if len(fields) == 6 else _STEP_FIELDS[1:]
    for (name, count), field in zip(kinds, fields, strict=True):
        for match in _STEP.finditer(field):
            digits = match.group(1)
            if len(digits) > 2 or int(digits) > count:  # 0 is refused as not valid
                shown = digits if len(digits) <= 10 else f"{digits[:10]}... ({len(digits)} digits)"
                raise _Refused(
                    f"the step /{shown} in the {name} field must be between 1 and {count}"
                )


# Each field's values, in the order of a 6-field expression (day-of-week 7 is Sunday).
_RANGES = (
    ("second", 0, 59),
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
)
_NTH = (1, 5)  # the n of "5#n": the first to the fifth such weekday of a month
_NUMBER = re.compile(r"^\d+$")


def _check_ranges(text: str, fields: list[str]) -> None:
    """Refuse a number outside its field's values, naming the field and the range
    (croniter says only "out of range", of the whole expression). Only numbers are
    looked at: names, ``*``, ``L`` and the like are croniter's to judge."""
    if len(fields) not in (5, 6):
        return  # the field count is refused with its own reason
    kinds = _RANGES if len(fields) == 6 else _RANGES[1:]
    for (name, low, high), field in zip(kinds, fields, strict=True):
        for item in field.lower().split(","):
            base = item.split("/", 1)[0]  # a step is _check_steps's
            for part in base.split("-"):
                day, hash_, nth = part.partition("#")
                number = day.removesuffix("w") if name == "day-of-month" else day
                if name == "day-of-week":
                    number = number.removeprefix("l")
                _in_range(text, name, number, low, high)
                if hash_:  # "the nth such weekday of the month"
                    _in_range(text, f"{name} {day}#n: n", nth, *_NTH)


def _in_range(text: str, what: str, number: str, low: int, high: int) -> None:
    if _NUMBER.match(number) and not low <= int(number) <= high:
        shown = number if len(number) <= 10 else f"{number[:10]}... ({len(number)} digits)"
        raise _Refused(f"{text!r}: {what} {shown} is out of range {low}-{high}")


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
