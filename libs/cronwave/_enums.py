"""How the SDK shows run states and trigger kinds: by their upper-case names
(``"SUCCEEDED"``, ``"MANUAL"``). The types themselves are ``cronwave_core.domain.runs``'s
(and the policies ``cronwave_core.domain.spec``'s); this module only names them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cronwave_proto.v1 import common_pb2 as pb

from cronwave_core.domain.runs import (
    IN_FLIGHT,
    RUN_STATES,
    SLOT_TRIGGERS,
    TERMINAL,
    TRIGGERS,
    RunState,
)
from cronwave_core.proto_enum import ProtoEnum

TERMINAL_STATES = frozenset(state.name for state in TERMINAL)
"""Run states that never change again."""
IN_FLIGHT_STATES = tuple(state.name for state in RunState if state in IN_FLIGHT)
"""Run states of a run not finished yet (PENDING, WAITING, RUNNING), in their order."""
SLOT_TRIGGER_NAMES = frozenset(trigger.name for trigger in SLOT_TRIGGERS)
"""Triggers whose runs are slots of the calendar (a MANUAL run is none)."""


def _name(table: ProtoEnum[Any, Any], value: int) -> str:
    member = table.lookup(value)
    return member.name if member is not None else str(value)  # a newer server's value


def state_name(value: int) -> str:
    return _name(RUN_STATES, value)


def trigger_name(value: int) -> str:
    return _name(TRIGGERS, value)


def parse_states(texts: Iterable[str], field: str = "states") -> list[pb.RunState]:
    """The proto values of state names (``"FAILED"``), refusals naming ``states[i]``."""
    return [RunState.parse(text, f"{field}[{i}]").to_proto() for i, text in enumerate(texts)]
