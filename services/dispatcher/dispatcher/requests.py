"""Start requests as domain values: validation and the manual-trigger rule.
No gRPC here."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from cronwave_proto.v1 import common_pb2

from cronwave_core.errors import InvalidArgument
from cronwave_core.fields import lease_name, schedule_id
from cronwave_core.limits import DEFAULT_LIMITS, RequestLimits

_TRIGGERS = frozenset(common_pb2.TriggerKind.values()) - {common_pb2.TRIGGER_KIND_UNSPECIFIED}
#: The triggers of a planner's fires, the only ones StartRuns starts: a manual run is a
#: person's, started by TriggerRun on their behalf (the store refuses one on nobody's).
PLANNED = frozenset(
    {
        common_pb2.TRIGGER_KIND_SCHEDULED,
        common_pb2.TRIGGER_KIND_CATCHUP,
        common_pb2.TRIGGER_KIND_BACKFILL,
    }
)


@dataclass(frozen=True)
class StartRequest:
    """A request to start the run of ``schedule_id`` at ``fire_time``.

    Empty ``fencing_scope`` and ``idempotency_key`` are passed on empty: the store
    applies their defaults ("planner" and "<schedule_id>@<fire_time>"), so the one
    place that defines them is the one that enforces them.
    """

    schedule_id: str
    fire_time: datetime
    trigger: common_pb2.TriggerKind
    fencing_token: int = 0
    fencing_scope: str = ""
    idempotency_key: str = ""
    #: A manual run's own payload (JSON text; "": the schedule's), passed on as it is:
    #: the store checks it, as it checks a schedule's.
    payload_json: str = ""
    #: The rules of the ids (``CRONWAVE_MAX_ID_CHARS``): the store's own.
    limits: RequestLimits = field(default=DEFAULT_LIMITS, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.schedule_id.strip():
            raise InvalidArgument("schedule_id", "required")
        # Checked here, by the store's rules, so a refusal names this request's fields
        # (``starts[3].schedule_id``), not those of the store's call it would make.
        schedule_id(self.schedule_id)
        if self.fire_time.tzinfo is None:
            raise InvalidArgument("fire_time", "must be timezone-aware")
        if self.trigger not in _TRIGGERS:
            raise InvalidArgument("trigger", f"unknown value {self.trigger}")
        if self.fencing_token < 0:
            raise InvalidArgument("fencing_token", "must not be negative")
        lease_name(self.fencing_scope, "fencing_scope")
        self.limits.identifier(self.idempotency_key, "idempotency_key")


def manual_fire_time(now: datetime) -> datetime:
    """The nominal fire time of a manual trigger: the moment it was asked for, in
    UTC at microsecond precision.

    Runs are unique per (schedule, fire time), so two triggers are two runs unless
    they land in the same microsecond; manual triggers are de-duplicated only by
    that pair (an idempotency key is passed on to the store, which decides what it
    means)."""
    if now.tzinfo is None:
        raise InvalidArgument("now", "must be timezone-aware")
    return now.astimezone(UTC)


def check_planned(start: StartRequest, where: str = "") -> None:
    """Refuse ``start`` unless its trigger is a planner's (``PLANNED``), naming
    ``{where}trigger``."""
    if start.trigger not in PLANNED:
        raise InvalidArgument(
            f"{where}trigger",
            "StartRuns starts a planner's fires (scheduled, catch-up, backfill); a manual "
            "run is a person's, started with TriggerRun",
        )
