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

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cronwave._models import Schedule
from cronwave._spec_input import policy_of, spec_of
from cronwave.cli._field_forms import ENTRY_KEYS, keywords_of_entry, yaml_fields
from cronwave_core.domain import calendar
from cronwave_core.domain.catchup import check_coherent
from cronwave_core.domain.labels import Labels, labels_value
from cronwave_core.domain.schedule_fields import SPEC_FIELDS
from cronwave_core.domain.spec import Policy, Spec
from cronwave_core.errors import InvalidArgument

#: The manager of a file that names none.
DEFAULT_MANAGER = "default"
#: What ``managed_by`` holds for the schedules of ``manager``'s file.
MARKER_PREFIX = "apply:"
_TOP_FIELDS = ("manager", "schedules")
#: An entry's keys: its identity, its spec and policy fields (``_field_forms``, from
#: the dataclasses), and what the schedule carries beside them.
FIELDS = ("id", "job_type", *ENTRY_KEYS, "payload", "paused", "labels")
_MAX_ENTRIES = 10_000
_SPEC_KEYWORDS = frozenset(f.keyword for f in SPEC_FIELDS)
#: The path that reads the file from standard input.
STDIN = Path("-")


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
        text = sys.stdin.read() if path == STDIN else path.read_text(encoding="utf-8")
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
    payload = entry.get("payload", {})
    if not isinstance(payload, dict):
        raise InvalidArgument("payload", "must be a mapping (the job's input as a JSON object)")
    paused = entry.get("paused")
    if paused is not None and not isinstance(paused, bool):
        raise InvalidArgument("paused", "must be true or false")
    labels = entry.get("labels", {})
    if not isinstance(labels, dict):
        raise InvalidArgument("labels", 'must be a mapping such as {critical: "true"}')
    keywords = keywords_of_entry(entry, tz)
    keywords["time_zone"] = tz
    spec = spec_of(**{k: v for k, v in keywords.items() if k in _SPEC_KEYWORDS})
    policy = policy_of(**{k: v for k, v in keywords.items() if k not in _SPEC_KEYWORDS})
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


def document_of(schedules: Sequence[Schedule]) -> dict[str, Any]:
    """The file that declares ``schedules`` as they are (``schedule show -o yaml``):
    applied, it changes none of them. The manager is theirs when they share one."""
    managers = {s.managed_by for s in schedules if s.managed_by.startswith(MARKER_PREFIX)}
    document: dict[str, Any] = {}
    if len(managers) == 1:
        document["manager"] = managers.pop().removeprefix(MARKER_PREFIX)
    document["schedules"] = [_entry_of(s) for s in schedules]
    return document


def _entry_of(schedule: Schedule) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": schedule.schedule_id, "job_type": schedule.job_type}
    entry.update(yaml_fields(schedule.spec, schedule.policy))
    if schedule.payload:
        entry["payload"] = schedule.payload
    entry["paused"] = schedule.paused
    if schedule.labels:
        entry["labels"] = dict(schedule.labels)
    return entry


def dump(document: dict[str, Any]) -> str:
    return str(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
