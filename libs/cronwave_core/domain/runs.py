"""A run's state and why it exists, as domain values with their proto conversion
beside them (members map by name: ``RunState.TIMED_OUT`` is ``RUN_STATE_TIMED_OUT``,
see ``proto_enum``). People see states and triggers by their upper-case names
(``"SUCCEEDED"``, ``"MANUAL"``); the store keeps the lower-case values.

A run's life: PENDING (recorded, its message queued) -> WAITING (a worker claimed
it: an attempt holds it and beats, but its body has not started -- it waits for its
fire time, claimed ahead by the dispatch lead, or for a job process) -> RUNNING (the
attempt reported its body's start) -> a terminal state. A retry or a hand-back goes
back to PENDING, and the next claim to WAITING again. WAITING and RUNNING are *held*
(an attempt's lease, its heartbeat, can lapse); all three are in flight."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from cronwave_proto.v1 import common_pb2 as pb

from cronwave_core.proto_enum import ProtoEnum


class RunState(StrEnum):
    PENDING = "pending"
    WAITING = "waiting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    MISSED = "missed"
    CANCELLED = "cancelled"
    DEAD_LETTERED = "dead_lettered"

    @property
    def terminal(self) -> bool:
        """True once the state can no longer change."""
        return self in TERMINAL

    @property
    def in_flight(self) -> bool:
        """PENDING, WAITING or RUNNING: the run blocks an overlapping fire."""
        return self in IN_FLIGHT

    @property
    def held(self) -> bool:
        """WAITING or RUNNING: an attempt holds the run (until its heartbeat lapses),
        whether or not its body has started."""
        return self in HELD

    def to_proto(self) -> pb.RunState:
        return RUN_STATES.to_proto(self)

    @classmethod
    def from_proto(cls, value: int, field: str = "state") -> RunState:
        """UNSPECIFIED is no state: it is refused, as an unknown value is."""
        return RUN_STATES.from_proto(value, field)

    @classmethod
    def parse(cls, text: str, field: str = "state") -> RunState:
        """The state named ``text`` (``"FAILED"``, any case)."""
        return RUN_STATES.parse(text, field)


TERMINAL = frozenset(
    {
        RunState.SUCCEEDED,
        RunState.FAILED,
        RunState.TIMED_OUT,
        RunState.MISSED,
        RunState.CANCELLED,
        RunState.DEAD_LETTERED,
    }
)
HELD = frozenset({RunState.WAITING, RunState.RUNNING})
IN_FLIGHT = frozenset({RunState.PENDING, *HELD})


class Trigger(StrEnum):
    """Why a run exists (the proto's ``TriggerKind``)."""

    SCHEDULED = "scheduled"
    MANUAL = "manual"
    BACKFILL = "backfill"
    CATCHUP = "catchup"

    @property
    def for_slot(self) -> bool:
        """True for a run of one of the calendar's slots (SCHEDULED, CATCHUP, BACKFILL):
        its outcome answers "did that slot run?". A MANUAL run is outside the calendar
        and proves nothing of any slot, so a test trigger never stands in for one."""
        return self in SLOT_TRIGGERS

    def to_proto(self) -> pb.TriggerKind:
        return TRIGGERS.to_proto(self)

    @classmethod
    def from_proto(cls, value: int, field: str = "trigger") -> Trigger:
        """UNSPECIFIED means SCHEDULED; an unknown value is refused naming ``field``."""
        return TRIGGERS.from_proto(value, field)

    @classmethod
    def parse(cls, text: str, field: str = "trigger") -> Trigger:
        return TRIGGERS.parse(text, field)


SLOT_TRIGGERS = frozenset({Trigger.SCHEDULED, Trigger.CATCHUP, Trigger.BACKFILL})

RUN_STATES = ProtoEnum(RunState, pb.RunState, "RUN_STATE_", upper=True)
TRIGGERS = ProtoEnum(
    Trigger, pb.TriggerKind, "TRIGGER_KIND_", unspecified=Trigger.SCHEDULED, upper=True
)


#: The reasons of placeholder rows start with this: a MISSED row that stands for work a
#: planner decided and has still to start (a paced catch-up run, a buffered fire, a
#: backfill, a fire put off); starting its slot turns it into the run.
PLACEHOLDER_PREFIX = "pending:"


def is_placeholder(reason: str) -> bool:
    """Whether a MISSED row's ``reason`` makes it a placeholder, not a final word."""
    return reason.startswith(PLACEHOLDER_PREFIX)


#: How far ahead of its fire time a planner may record a placeholder (a MISSED row
#: whose reason starts with ``PLACEHOLDER_PREFIX``): a fire decided ahead of its instant (the
#: dispatch lead) and then put off stands in the store at once, so the next term, here
#: or on another planner, resumes it even when a later slot of its schedule was
#: recorded first. A final MISSED reason still waits for its slot's fire time.
PLACEHOLDER_AHEAD = timedelta(seconds=60)

#: The clock skew between two services' clocks (a planner's and the store's, two
#: planners') that the bounds on how far ahead a fire time may lie allow for: NTP keeps
#: it to milliseconds.
CLOCK_SKEW = timedelta(seconds=1)
