"""A run's state and why it exists, as domain values with their proto conversion
beside them (members map by name: ``RunState.TIMED_OUT`` is ``RUN_STATE_TIMED_OUT``,
see ``proto_enum``). People see states and triggers by their upper-case names
(``"SUCCEEDED"``, ``"MANUAL"``); the store keeps the lower-case values."""

from __future__ import annotations

from enum import StrEnum

from cronwave_proto.v1 import common_pb2 as pb

from cronwave_core.proto_enum import ProtoEnum


class RunState(StrEnum):
    PENDING = "pending"
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
        """PENDING or RUNNING: the run blocks an overlapping fire."""
        return self in IN_FLIGHT

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
IN_FLIGHT = frozenset({RunState.PENDING, RunState.RUNNING})


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
