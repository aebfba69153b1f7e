"""A schedule's labels: a few ``key=value`` pairs its owners give it (``team=billing``,
``critical=true``) to find it by and to route its alerts; no gRPC, no SQL.

Labels are the owners' words, so they are bounded rather than interpreted: at most
``MAX_LABELS`` of them, a key of lower-case letters, digits and ``_`` (a Prometheus
label name's shape, starting with a letter), a value of letters, digits, ``.``, ``_``
and ``-``. One label means something to cronwave itself: ``critical=true`` marks a
schedule whose slots must succeed (the store exports it as
``cronwave_schedule_critical``, and the alert ``CriticalScheduleDidNotSucceed`` pages
for it); any other value of ``critical`` is "not critical".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from cronwave_core.errors import InvalidArgument

#: Labels per schedule, and the longest key and value.
MAX_LABELS = 16
MAX_KEY_CHARS = 63
MAX_VALUE_CHARS = 63
#: The label that marks a schedule whose every slot must succeed.
CRITICAL = "critical"
CRITICAL_VALUE = "true"

_KEY = re.compile(rf"[a-z][a-z0-9_]{{0,{MAX_KEY_CHARS - 1}}}")
_VALUE = re.compile(rf"[A-Za-z0-9._-]{{0,{MAX_VALUE_CHARS}}}")

#: A schedule's labels as a value: (key, value) pairs in key order (hashable, so a
#: frozen record can hold them).
Labels = tuple[tuple[str, str], ...]


def labels_value(
    given: Mapping[str, str] | Iterable[tuple[str, str]], field: str = "labels"
) -> Labels:
    """``given`` as ``Labels``; ``InvalidArgument`` naming ``field`` (and the key:
    ``labels["Team"]``) for too many labels, a malformed key or value."""
    pairs = list(given.items() if isinstance(given, Mapping) else given)
    if len(pairs) > MAX_LABELS:
        raise InvalidArgument(field, f"at most {MAX_LABELS} labels, got {len(pairs)}")
    seen: dict[str, str] = {}
    for key, value in pairs:
        shown = str(key)[:80] + ("..." if len(str(key)) > 80 else "")
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InvalidArgument(
                f"{field}[{shown!r}]",
                f"a label key is 1-{MAX_KEY_CHARS} characters of a-z, 0-9 and _, starting "
                "with a letter (e.g. team, critical)",
            )
        if not isinstance(value, str) or not _VALUE.fullmatch(value):
            raise InvalidArgument(
                f"{field}[{shown!r}]",
                f"a label value is at most {MAX_VALUE_CHARS} characters of letters, digits, "
                ". _ and - (e.g. true, billing-eu)",
            )
        if key in seen:
            raise InvalidArgument(f"{field}[{shown!r}]", "given twice")
        seen[key] = value
    return tuple(sorted(seen.items()))


def is_critical(labels: Labels | Mapping[str, str]) -> bool:
    """Whether ``labels`` mark a schedule critical (``critical=true``)."""
    return dict(labels).get(CRITICAL) == CRITICAL_VALUE


def parse_label(text: str, option: str = "--label") -> tuple[str, str]:
    """``KEY=VALUE`` as a pair (checked by ``labels_value`` with the others)."""
    key, sep, value = text.partition("=")
    if not sep:
        raise InvalidArgument(option, f"{text!r} is not KEY=VALUE, e.g. critical=true")
    return key.strip(), value.strip()
