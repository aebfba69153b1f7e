"""Deadlines per schedule and where their breaches go; no gRPC, no SQL.

A schedule's ``deadline`` means: each slot (a nominal fire time of its calendar) must
have SUCCEEDED within this long of its fire time. ``judge`` decides, once the deadline
has passed, whether a slot breached it and why, from what the store holds for that
slot (its run, if any). The store's deadline sweep asks it; nothing else decides.

| what the store holds for the slot at the deadline | breach reason | cause |
|---|---|---|
| SUCCEEDED, finished by the deadline | none | |
| SUCCEEDED after the deadline (the sweep came late) | ``succeeded_late`` | |
| FAILED / TIMED_OUT / CANCELLED | ``failed`` / ``timed_out`` / ``cancelled`` | the run's error |
| DEAD_LETTERED | ``dead_lettered`` | the run's error |
| RUNNING | ``still_running`` | started when |
| WAITING after a failed attempt (its retry claimed, not begun) | ``failed`` | the attempt's error |
| WAITING (claimed, the job body has not begun) | ``not_started`` | ``waiting: ...`` |
| PENDING after a failed attempt (a retry is due) | ``failed`` | the attempt's error |
| PENDING (never claimed, or handed back) | ``not_started`` | ``pending: ...`` |
| MISSED ``pending:*`` (decided, not started yet) | ``not_started`` | its placeholder reason |
| MISSED ``paused`` or ``dst_gap_skip`` | none: the operator or the DST policy said so | |
| MISSED for another reason | ``missed`` | the MISSED reason (``overlap_skip`` ...) |
| nothing (planner down, no leader) | ``not_started`` | ``no run recorded`` |
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from urllib.parse import urlsplit

from cronwave_proto.v1 import common_pb2 as pb

from cronwave_core.domain.runs import RunState, is_placeholder
from cronwave_core.errors import InvalidArgument
from cronwave_core.fields import shown
from cronwave_core.proto_enum import ProtoEnum

#: The longest deadline a schedule may have.
MAX_DEADLINE = timedelta(days=31)
#: Notifiers per schedule, and the longest URL of one.
MAX_NOTIFIERS = 10
MAX_URL_LENGTH = 2_000

#: MISSED reasons that are not breaches: nobody was to run the slot.
NOT_EXPECTED = frozenset({"paused", "dst_gap_skip"})


class NotifyFormat(StrEnum):
    JSON = "json"
    SLACK = "slack"

    def to_proto(self) -> pb.NotifyFormat:
        return NOTIFY_FORMATS.to_proto(self)

    @classmethod
    def from_proto(cls, value: int, field: str = "format") -> NotifyFormat:
        """UNSPECIFIED is JSON; an unknown value is refused naming ``field``."""
        return NOTIFY_FORMATS.from_proto(value, field)

    @classmethod
    def parse(cls, text: str, field: str = "format") -> NotifyFormat:
        return NOTIFY_FORMATS.parse(text, field)


NOTIFY_FORMATS = ProtoEnum(
    NotifyFormat, pb.NotifyFormat, "NOTIFY_FORMAT_", unspecified=NotifyFormat.JSON
)


def notifier_url(url: str, field: str) -> str:
    """An absolute http:// or https:// URL with a host, printable, at most
    ``MAX_URL_LENGTH`` characters."""
    if not url:
        raise InvalidArgument(field, "required: an http:// or https:// URL")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidArgument(field, f"must be at most {MAX_URL_LENGTH} characters, got {len(url)}")
    if not url.isprintable() or any(c.isspace() for c in url):
        raise InvalidArgument(field, "must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a malformed port
    except ValueError:
        raise InvalidArgument(field, f"{shown(url)} is not a valid URL") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidArgument(field, f"must be an http:// or https:// URL, got {shown(url)}")
    if not parts.hostname:
        raise InvalidArgument(field, f"{shown(url)} has no host")
    del port
    return url


@dataclass(frozen=True, slots=True)
class Notifier:
    url: str
    format: NotifyFormat = NotifyFormat.JSON

    def __post_init__(self) -> None:
        notifier_url(self.url, "url")

    @classmethod
    def from_proto(cls, msg: pb.Notifier, field: str = "notifier") -> Notifier:
        url = notifier_url(msg.url, f"{field}.url")
        return cls(url=url, format=NotifyFormat.from_proto(msg.format, f"{field}.format"))

    def to_proto(self) -> pb.Notifier:
        return pb.Notifier(url=self.url, format=self.format.to_proto())


def deadline_value(deadline: timedelta, field: str = "policy.deadline") -> timedelta:
    """A positive duration of at most ``MAX_DEADLINE``."""
    if deadline <= timedelta(0):
        raise InvalidArgument(
            field, f"must be a positive duration, got {deadline.total_seconds():g}s"
        )
    if deadline > MAX_DEADLINE:
        raise InvalidArgument(field, f"must be at most {MAX_DEADLINE.days} days")
    return deadline


def notifiers_value(notifiers: tuple[Notifier, ...], field: str = "policy.notifiers") -> None:
    if len(notifiers) > MAX_NOTIFIERS:
        raise InvalidArgument(field, f"at most {MAX_NOTIFIERS}, got {len(notifiers)}")


class BreachReason(StrEnum):
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    DEAD_LETTERED = "dead_lettered"
    STILL_RUNNING = "still_running"
    NOT_STARTED = "not_started"
    MISSED = "missed"
    SUCCEEDED_LATE = "succeeded_late"


@dataclass(frozen=True, slots=True)
class SlotRun:
    """What the store holds for one slot: its run's state, and for a MISSED row its
    reason (the run's error column)."""

    run_id: str
    state: RunState
    error: str = ""
    finished_at: datetime | None = None
    started_at: datetime | None = None
    claimed_at: datetime | None = None
    attempt: int = 0


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: BreachReason
    cause: str


_TERMINAL_FAILURES = {
    RunState.FAILED: BreachReason.FAILED,
    RunState.TIMED_OUT: BreachReason.TIMED_OUT,
    RunState.CANCELLED: BreachReason.CANCELLED,
    RunState.DEAD_LETTERED: BreachReason.DEAD_LETTERED,
}


def judge(run: SlotRun | None, deadline_at: datetime) -> Verdict | None:
    """The breach of a slot whose deadline ``deadline_at`` has passed, or None when it
    met it (or was not to run); the table in the module's docstring."""
    if run is None:
        return Verdict(BreachReason.NOT_STARTED, "no run recorded (planner down or no leader)")
    state = run.state
    if state is RunState.SUCCEEDED:
        if run.finished_at is not None and run.finished_at > deadline_at:
            return Verdict(BreachReason.SUCCEEDED_LATE, f"finished at {_iso(run.finished_at)}")
        return None
    if state in _TERMINAL_FAILURES:
        return Verdict(_TERMINAL_FAILURES[state], run.error)
    if state is RunState.WAITING:
        if run.error:
            return Verdict(BreachReason.FAILED, f"attempt {run.attempt - 1} failed: {run.error}")
        claimed = f" at {_iso(run.claimed_at)}" if run.claimed_at is not None else ""
        return Verdict(BreachReason.NOT_STARTED, f"waiting: claimed{claimed}, not begun")
    if state is RunState.RUNNING:
        if run.started_at is not None:
            return Verdict(BreachReason.STILL_RUNNING, f"started at {_iso(run.started_at)}")
        return Verdict(BreachReason.STILL_RUNNING, "claimed, the job body has not begun")
    if state is RunState.PENDING:
        if run.error:
            return Verdict(BreachReason.FAILED, f"attempt {run.attempt} failed: {run.error}")
        if run.attempt:
            return Verdict(BreachReason.NOT_STARTED, "pending: handed back, not running")
        return Verdict(BreachReason.NOT_STARTED, "pending: never claimed")
    if state is RunState.MISSED:
        reason = run.error
        if reason in NOT_EXPECTED:
            return None
        if is_placeholder(reason):
            return Verdict(BreachReason.NOT_STARTED, reason)
        return Verdict(BreachReason.MISSED, reason)
    return Verdict(BreachReason.NOT_STARTED, f"run state {state.name}")


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")
