"""The store's composition root: every repository built once, each given only what it
uses, and held by name for the servicer.

Every public method of a repository is one transaction (a unit of work,
``unit_of_work``) that either applies completely or raises a ``CronwaveError`` and
writes nothing; a step one repository takes of another (a fencing check, a schedule's
revision, a run's cancel) runs in the caller's unit of work, passed explicitly.

Uniqueness and races are settled by the database: one run per (schedule, fire time)
is a unique constraint; a claim or completion is a conditional UPDATE whose row count
says who won; fencing tokens are read under the write lock of the same transaction
that inserts the run.
"""

from __future__ import annotations

from workflow_store.attempt_store import Attempts
from workflow_store.audit_store import AuditLog
from workflow_store.db import Database
from workflow_store.dead_letter_store import DeadLetters
from workflow_store.deadline_store import DeadlineStore
from workflow_store.fencing import Fencing
from workflow_store.guards import GUARDS, Guards
from workflow_store.job_types import JobTypes
from workflow_store.limits import LIMITS, Limits
from workflow_store.run_store import Runs
from workflow_store.schedule_changes import ScheduleChanges
from workflow_store.schedule_deletion import ScheduleDeletion
from workflow_store.schedule_store import Schedules
from workflow_store.store_core import Clock, utc_now
from workflow_store.sweep_store import Requeues
from workflow_store.unit_of_work import Transactions

__all__ = ["Store"]


class Store:
    """The store's parts over one ``Database`` (docs/architecture.md, *The
    workflow-store's parts*, says who may call what):

    - ``schedules`` (``schedule_store.Schedules``), ``deletion``
      (``schedule_deletion.ScheduleDeletion``) and ``changes``
      (``schedule_changes.ScheduleChanges``: the revision counter and the watchers'
      wake-up, one per process);
    - ``job_types`` (``job_types.JobTypes``, with the one job-type cache);
    - ``runs`` (``run_store.Runs``), ``attempts`` (``attempt_store.Attempts``) and
      ``fencing`` (``fencing.Fencing``);
    - ``audit``, ``requeues``, ``dead_letters`` and ``deadlines``, over the database
      alone.

    ``tx``, ``clock`` and ``guards`` are here for ``slots`` (its ``SlotStore`` port,
    with ``fencing`` and ``changes``), ``db`` for the benchmark seeder, ``limits`` for
    the servicer's replies. The deadline sweep, the webhook notifier and the delivery
    relay are not here at all: ``main`` builds them beside it, each over the narrow
    port it uses."""

    def __init__(
        self,
        db: Database,
        clock: Clock = utc_now,
        limits: Limits = LIMITS,
        guards: Guards = GUARDS,
    ) -> None:
        self.db = db
        self.tx = Transactions(db)
        self.clock = clock
        self.limits = limits
        self.guards = guards
        self.changes = ScheduleChanges()
        self.job_types = JobTypes(self.tx, clock)
        self.fencing = Fencing(self.tx, clock, guards)
        self.schedules = Schedules(self.tx, self.job_types, self.changes, clock, limits)
        self.runs = Runs(self.tx, self.job_types, self.fencing, clock)
        self.attempts = Attempts(self.tx, self.job_types, clock)
        self.deletion = ScheduleDeletion(self.tx, self.changes, self.attempts, clock)
        self.audit = AuditLog(db)
        self.requeues = Requeues(db, clock)
        self.dead_letters = DeadLetters(db, clock)
        self.deadlines = DeadlineStore(db, clock, limits)
