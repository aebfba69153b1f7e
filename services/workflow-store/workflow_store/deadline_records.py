"""Deadline breaches and their deliveries as the store reads and writes them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from cronwave_core.domain.deadlines import NotifyFormat
from cronwave_core.domain.runs import RunState

#: How long a queued delivery (a new one, or one taken from the outbox) is held before
#: its POST renews the claim: time enough to wait for a delivery thread
#: (``delivery_outbox``).
QUEUED_HOLD = timedelta(seconds=30)


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


@dataclass(frozen=True)
class DeliveryRecord:
    delivery_id: int
    url: str
    format: NotifyFormat
    status: DeliveryStatus
    attempts: int
    http_status: int
    error: str
    updated_at: datetime
    #: The claim its sender bears while the delivery is pending ("" once settled).
    claim_token: str = ""


@dataclass(frozen=True)
class BreachRecord:
    breach_id: int
    schedule_id: str
    fire_time: datetime
    deadline_at: datetime
    reason: str
    cause: str
    run_id: str
    run_state: RunState | None
    detected_at: datetime
    deliveries: tuple[DeliveryRecord, ...] = field(default=())

    @property
    def deadline(self) -> timedelta:
        return self.deadline_at - self.fire_time


@dataclass(frozen=True)
class SlotCheck:
    """One sweep's work on one schedule: judge its slots in ``(after, through]`` (the
    calendar's ``slots``, and the runs recorded in that range), then move its cursor
    to ``through``."""

    schedule_id: str
    deadline: timedelta
    after: datetime
    through: datetime
    slots: tuple[datetime, ...]
    notify: tuple[tuple[str, NotifyFormat], ...]
