"""The store revision every schedule change takes, and the in-process wake-up of the
watch streams (``Schedules.watch``) once a change committed: one per store process,
shared by every part that changes a schedule (``Schedules``, ``ScheduleDeletion``,
``slots.create_schedules``)."""

from __future__ import annotations

import threading
from datetime import timedelta

import sqlalchemy as sa

from workflow_store import models as m
from workflow_store.unit_of_work import UnitOfWork


class ScheduleChanges:
    """The revision counter and the watchers waiting for a newer one."""

    def __init__(self) -> None:
        self._changes = threading.Condition()
        self._closing = threading.Event()
        self._latest_revision = 0

    def bump(self, w: UnitOfWork, count: int = 1) -> int:
        """The next store revision (the last of ``count`` taken at once), in ``w``; the
        watchers are woken once ``w`` committed. The counter row stays locked until
        commit, so revisions become visible in the order they were handed out."""
        query = (
            sa.update(m.StoreRevision)
            .where(m.StoreRevision.id == 1)
            .values(revision=m.StoreRevision.revision + count)
            .returning(m.StoreRevision.revision)
        )
        revision = int(w.session.execute(query).scalar_one())
        w.after_commit(lambda: self._changed(revision))
        return revision

    @property
    def closing(self) -> bool:
        """Whether the process is stopping (``close_watchers``): every watch ends."""
        return self._closing.is_set()

    def wait_for_change(self, after: int, timeout: timedelta) -> None:
        """Block until this process commits a schedule change newer than ``after``, a
        ``wake_watchers`` call, or ``timeout``."""
        with self._changes:
            if self._latest_revision <= after:
                self._changes.wait(timeout.total_seconds())

    def wake_watchers(self) -> None:
        with self._changes:
            self._changes.notify_all()

    def close_watchers(self) -> None:
        """End every watch stream: the process is stopping. Watchers reconnect to
        another replica (or to this one when it is back) from their last revision."""
        self._closing.set()
        self.wake_watchers()

    def _changed(self, revision: int) -> None:
        with self._changes:
            self._latest_revision = max(self._latest_revision, revision)
            self._changes.notify_all()
