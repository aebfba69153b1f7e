"""An audit event in words: what was done (``updated``, ``paused``) and each value it
changed as a person reads it -- ``overlap: skip → allow_all``, ``payload: 31 → 40
bytes`` -- never as stored (``policy.overlap``, ``OVERLAP_POLICY_SKIP``, ``None → ...``).

The store records a field's old and new values (``workflow_store.audit_store``); a
value is named by the field's last part (``spec.time_zone`` -> ``time zone``), a policy
by its choice as the CLI and SDK spell it (``skip``), a duration in words, a size in
bytes. A field that was unset shows its new value alone; a schedule's creation shows
only the values it was given (an empty note, a zero jitter, ``paused: no`` are left
out).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from console.slots import human
from cronwave_core.domain.deadlines import NOTIFY_FORMATS
from cronwave_core.domain.runs import RunState
from cronwave_core.domain.spec import CATCHUPS, DST_GAPS, DST_REPEATS, OVERLAPS
from cronwave_core.proto_enum import ProtoEnum

#: What each call did, in a word or two.
DONE = {
    "CreateSchedule": "created",
    "UpdateSchedule": "updated",
    "PauseSchedule": "paused",
    "ResumeSchedule": "resumed",
    "DeleteSchedule": "deleted",
    "CancelRun": "cancelled a run",
    "ReplayDeadLetter": "replayed a dead letter",
    "RegisterJobType": "registered the job type",
}
#: Field names that the rule (the last part, ``_`` as a space) would not make words of.
LABELS = {
    "payload_json": "payload",
    "dst_gap": "DST gap",
    "dst_repeat": "DST repeated hour",
    "catchup": "catch-up",
    "catchup_window": "catch-up window",
    "catchup_max_runs": "catch-up cap",
    "pause_note": "note",
    "fire_time": "slot",
    "grace_seconds": "grace",
    "cancelled_count": "runs cancelled",
}


def _shown(table: ProtoEnum[Any, Any]) -> dict[str, str]:
    return {name: table.shown(member) for member, name in table.names.items()}


#: A stored policy or format value -> its choice as people write it.
_CHOICES = {
    **_shown(DST_GAPS),
    **_shown(DST_REPEATS),
    **_shown(OVERLAPS),
    **_shown(CATCHUPS),
    **_shown(NOTIFY_FORMATS),
}
_STATES = {state.name: state.value for state in RunState}
_DURATION = re.compile(r"^-?\d+(\.\d+)?s$")
_INSTANT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d")


@dataclass(frozen=True)
class Change:
    """One field an event changed: its name and what became of it, in words."""

    field: str
    text: str


def done(rpc: str, changes: Mapping[str, Any]) -> str:
    """What the call did (a manual or backfill run recorded: ``triggered``,
    ``backfilled``); an unknown call by its name."""
    if rpc == "RecordRuns":
        return "backfilled" if changes.get("trigger") == "backfill" else "triggered"
    return DONE.get(rpc, rpc)


def label(name: str) -> str:
    last = name.rsplit(".", 1)[-1]
    return LABELS.get(last, last.replace("_", " "))


def words(value: Any, name: str = "") -> str | None:
    """``value`` as a person reads it; None for no value (None, empty)."""
    if value is None or value == "" or value == [] or value == {}:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        if name.endswith("_seconds"):
            return human(timedelta(seconds=value))
        return f"{value:,}" if isinstance(value, int) else f"{value:g}"
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list):
        parts = [w for item in value if (w := words(item)) is not None]
        return ", ".join(parts) or None
    if isinstance(value, dict):
        if "every" in value:  # an interval
            every, phase = words(value["every"]), words(value.get("phase"))
            shifted = phase is not None and phase != human(timedelta(0))
            return f"every {every}" + (f" from {phase}" if shifted else "")
        parts = [f"{label(k)} {w}" for k, v in value.items() if (w := words(v, k)) is not None]
        return ", ".join(parts) or None
    return str(value)


def _text(value: str) -> str:
    if value in _CHOICES:
        return _CHOICES[value]
    if value in _STATES:
        return _STATES[value]
    if _DURATION.match(value):
        return human(timedelta(seconds=float(value[:-1])))
    if _INSTANT.match(value):
        try:
            return f"{datetime.fromisoformat(value.replace('Z', '+00:00')):%Y-%m-%d %H:%M:%S}Z"
        except ValueError:
            return value
    return value


def _trivial(text: str | None, value: Any) -> bool:
    """A value a creation need not mention: none, no, zero."""
    return text is None or value is False or text == human(timedelta(0))


def described(rpc: str, changes: Mapping[str, Any]) -> list[Change]:
    """Each change of the event, in words (see the module docstring)."""
    created = rpc == "CreateSchedule"
    out = []
    for name, value in changes.items():
        if isinstance(value, dict) and "new_bytes" in value:
            old, new = value.get("old_bytes", 0), value["new_bytes"]
            text = f"{new:,} bytes" if created or not old else f"{old:,} → {new:,} bytes"
        elif isinstance(value, dict) and "new" in value and "old" in value:
            old_text, new_text = words(value["old"]), words(value["new"])
            if old_text is None and (created and _trivial(new_text, value["new"])):
                continue
            if old_text is None and new_text is None:
                continue
            if old_text is None:
                text = str(new_text)
            else:
                text = f"{old_text} → {new_text if new_text is not None else 'none'}"
        else:
            text_or_none = words(value, name)
            if text_or_none is None:
                continue
            text = text_or_none
        out.append(Change(label(name), text))
    return out
