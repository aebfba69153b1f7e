"""The unit of work: the one transaction a call of the store runs in.

A repository opens it (``Transactions.write`` or ``Transactions.rounds``) and hands it
to the steps it takes of other repositories (a fencing check, a schedule's revision, a
run's cancel), so the steps of one call commit together or not at all. What must wait
for the commit (waking the watch streams of a schedule change) is registered on it
with ``after_commit``, and runs only once it committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TypeVar

from sqlalchemy.orm import Session

from cronwave_core.errors import FailedPrecondition
from workflow_store.db import Conflicted, Database

T = TypeVar("T")
# A conditional UPDATE that loses a race is re-evaluated against the winner's result;
# more rounds than this means something keeps changing the row, which we report.
MAX_ROUNDS = 5


class Lost(Exception):
    """A conditional UPDATE matched no row: another transaction changed it first."""


class UnitOfWork:
    """One write transaction: its ``session``, and what is to happen once it committed."""

    __slots__ = ("_committed", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        self._committed: list[Callable[[], None]] = []

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once this transaction committed; never if it rolls back."""
        self._committed.append(action)

    def committed(self) -> None:
        for action in self._committed:
            action()


class Transactions:
    """The store's transactions over a ``Database``: ``read()`` for queries, a unit of
    work for changes (``write()``, or ``rounds()`` for one decided again when it lost a
    race)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.dialect = db.dialect

    def read(self) -> AbstractContextManager[Session]:
        return self.db.read()

    @contextmanager
    def write(self) -> Iterator[UnitOfWork]:
        """A unit of work that commits when the block ends (then its ``after_commit``
        actions run) and rolls back when it raises."""
        with self.db.write() as s:
            work = UnitOfWork(s)
            yield work
        work.committed()

    def rounds(self, work: Callable[[UnitOfWork], T]) -> T:
        """``work`` in a unit of work, again from the start in a new one when it lost a
        race (``Lost``), so it decides on the winner's result, or when PostgreSQL rolled
        it back for a concurrent transaction (``Conflicted``: a deadlock it broke). When
        every round failed and one was ``Conflicted``, that is the answer."""
        conflicted: Conflicted | None = None
        for _ in range(MAX_ROUNDS):
            try:
                with self.write() as w:
                    result = work(w)
            except Lost:
                continue
            except Conflicted as exc:
                conflicted = exc
                continue
            return result
        if conflicted is not None:
            raise conflicted
        raise FailedPrecondition("run_id: the run keeps changing under concurrent writers; retry")
