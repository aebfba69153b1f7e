"""The store's transactional logic: every public method is one transaction that either
applies completely or raises a ``CronwaveError`` and writes nothing.

Uniqueness and races are settled by the database: one run per (schedule, fire time)
is a unique constraint; a claim or completion is a conditional UPDATE whose row count
says who won; fencing tokens are read under the write lock of the same transaction
that inserts the run.
"""

from __future__ import annotations

from workflow_store.attempt_store import AttemptStore
from workflow_store.audit_store import AuditLog
from workflow_store.db import Database
from workflow_store.dead_letter_store import DeadLetters
from workflow_store.deadline_store import DeadlineStore
from workflow_store.fencing import FencingStore
from workflow_store.guards import GUARDS, Guards
from workflow_store.limits import LIMITS, Limits
from workflow_store.run_store import RunStore
from workflow_store.schedule_deletion import ScheduleDeletion
from workflow_store.schedule_store import ScheduleStore
from workflow_store.store_core import (
    DEFAULT_DEAD_LETTER_LIMIT,
    DEFAULT_RUN_LIMIT,
    DEFAULT_STALLED_LIMIT,
    JOB_TYPE_TTL,
    MAX_LOST_PAGE,
    Clock,
    utc_now,
)
from workflow_store.sweep_store import Requeues

__all__ = [
    "DEFAULT_DEAD_LETTER_LIMIT",
    "DEFAULT_RUN_LIMIT",
    "DEFAULT_STALLED_LIMIT",
    "JOB_TYPE_TTL",
    "MAX_LOST_PAGE",
    "Clock",
    "Store",
    "utc_now",
]


class Store(
    ScheduleDeletion,
    ScheduleStore,
    RunStore,
    FencingStore,
    AttemptStore,
):
    """Schedules, job types, runs, attempts and fencing tokens over a ``Database``: one
    class for the servicer, one module per concept (``schedule_store``,
    ``schedule_deletion``, ``run_store``, ``fencing``, ``attempt_store``), all on
    ``store_core.StoreCore``.

    Four parts it holds rather than is, each taking the database (and the clock, the
    limits) only: ``audit`` (``audit_store.AuditLog``), ``requeues``
    (``sweep_store.Requeues``: stalled and lost runs), ``dead_letters``
    (``dead_letter_store.DeadLetters``) and ``deadlines``
    (``deadline_store.DeadlineStore``). The deadline sweep, the webhook notifier and the
    delivery relay are not in it at all: ``main`` builds them beside it, each over the
    narrow port it uses (``deadline_sweep.DeadlineRecords``, ``notifier.Outbox``,
    ``delivery_relay.Claims``)."""

    def __init__(
        self,
        db: Database,
        clock: Clock = utc_now,
        limits: Limits = LIMITS,
        guards: Guards = GUARDS,
    ) -> None:
        super().__init__(db, clock, limits, guards)
        self.audit = AuditLog(db)
        self.requeues = Requeues(db, clock)
        self.dead_letters = DeadLetters(db, clock)
        self.deadlines = DeadlineStore(db, clock, limits)
