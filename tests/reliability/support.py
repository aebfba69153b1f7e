"""What the reliability tests read from a run's events. The rigs of real processes they
drive are ``tests.harness.cluster``'s ``Rig`` and ``make_rig``."""

from __future__ import annotations

from datetime import UTC, datetime

from cronwave_proto.v1 import common_pb2


def events_of(events: list[common_pb2.RunEvent], kind: str) -> list[common_pb2.RunEvent]:
    return [e for e in events if e.kind == kind]


def lifecycle(events: list[common_pb2.RunEvent]) -> list[str]:
    """The kinds of a run's events that change or route it (without "started", the
    body's start, which other parts of cronwave record)."""
    return [e.kind for e in events if e.kind != "started"]


def at(event: common_pb2.RunEvent) -> datetime:
    return event.at.ToDatetime(tzinfo=UTC)
