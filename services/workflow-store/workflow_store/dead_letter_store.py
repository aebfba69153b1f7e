"""The dead-letter list: runs given up on, poison messages, and replays. ``DeadLetters``
is a repository ``Store`` holds (``Store.dead_letters``), over the database and the
clock alone."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Session

from cronwave_core.errors import (
    FailedPrecondition,
    InvalidArgument,
    StaleAttempt,
)
from workflow_store import models as m
from workflow_store.audit_store import Actor, append
from workflow_store.db import Database
from workflow_store.ids import same_token
from workflow_store.records import (
    DeadLettered,
    DeadLetterRecord,
    DeadLetterRequest,
    RunRecord,
    RunState,
)
from workflow_store.rows import (
    _event,
    _get_run,
    _run,
)
from workflow_store.store_core import (
    DEFAULT_DEAD_LETTER_LIMIT,
    Clock,
    conditional_update,
    rounds,
    utc_now,
)


class DeadLetters:
    """The dead-letter list."""

    def __init__(self, db: Database, clock: Clock = utc_now) -> None:
        self.db = db
        self.clock = clock

    # -- dead letters ------------------------------------------------------------------

    def dead_letter(self, req: DeadLetterRequest) -> DeadLettered:
        """Put the run on the dead-letter list (state DEAD_LETTERED) with ``req.reason``
        and ``req.error``; a message naming no known run is listed on its own.

        Only the attempt that holds the run gives up on it: it passes its token
        (``StaleAttempt`` for any other, ``FailedPrecondition`` when no attempt holds
        the run: it is neither WAITING nor RUNNING). A message refused before any claim
        (undecodable, rejected by the broker) passes none: it is listed as it arrived,
        naming its PENDING run, and
        the run is left as it is (``changed=False``; the sweeper sends it a new
        message), so a worker's certificate cannot dead-letter a run it never claimed.
        A terminal run, or one a live attempt holds, is left alone and nothing listed.
        """
        return rounds(self.db, lambda s: self._dead_letter(s, req))

    def _dead_letter(self, s: Session, req: DeadLetterRequest) -> DeadLettered:
        now = self.clock()
        row = s.get(m.Run, req.run_id, populate_existing=True) if req.run_id else None
        if row is None:
            letter = _new_letter(
                s, req, now, error=req.error, job_type="", attempt=0, queue=req.queue
            )
            return DeadLettered(letter, None, changed=True)
        state = RunState(row.state)
        if state.terminal:
            return DeadLettered(None, _run(row), changed=False)
        if not req.attempt_token:
            if state.held:
                return DeadLettered(None, _run(row), changed=False)
            letter = _new_letter(
                s,
                req,
                now,
                error=req.error,
                job_type=row.job_type,
                attempt=row.attempt,
                queue=req.queue or row.queue,
            )
            return DeadLettered(letter, _run(row), changed=False)
        if not same_token(req.attempt_token, row.attempt_token):
            raise StaleAttempt(row.run_id, row.attempt, row.state)
        if not state.held:
            raise FailedPrecondition(
                f"run is {state.value}: run '{row.run_id}' has no attempt holding it to give "
                "up; only the attempt that claimed a run dead-letters it (a message refused "
                "before its claim passes no attempt_token, and leaves the run as it is)"
            )
        error = req.error or row.error
        conditional_update(s, row, state=RunState.DEAD_LETTERED.value, finished_at=now, error=error)
        letter = _new_letter(
            s,
            req,
            now,
            error=error,
            job_type=row.job_type,
            attempt=row.attempt,
            queue=req.queue or row.queue,
        )
        _event(
            s, row, "dead_lettered", now, f"{req.reason.value}: {error}" if error else req.reason
        )
        return DeadLettered(letter, _run(row), changed=True)

    def list_dead_letters(
        self, limit: int = 0, include_replayed: bool = False
    ) -> list[DeadLetterRecord]:
        """Newest first; ``limit`` 0 means 50; replayed entries only when asked."""
        if limit < 0:
            raise InvalidArgument(
                "limit", f"must not be negative (0 means {DEFAULT_DEAD_LETTER_LIMIT})"
            )
        query = sa.select(m.DeadLetter).order_by(m.DeadLetter.id.desc())
        if not include_replayed:
            query = query.where(m.DeadLetter.replayed_at.is_(None))
        with self.db.read() as s:
            rows = s.scalars(query.limit(limit or DEFAULT_DEAD_LETTER_LIMIT))
            return [_dead_letter_record(r) for r in rows]

    def replay_dead_letter(self, run_id: str, actor: Actor | None = None) -> RunRecord:
        """A DEAD_LETTERED run becomes PENDING with no message (the sweeper sends one);
        its next claim is a new attempt with a fresh retry budget. Raises
        ``FailedPrecondition`` for a run in any other state."""
        return rounds(self.db, lambda s: self._replay(s, run_id, actor))

    def _replay(self, s: Session, run_id: str, actor: Actor | None) -> RunRecord:
        now = self.clock()
        row = _get_run(s, run_id)
        if row.state != RunState.DEAD_LETTERED.value:
            raise FailedPrecondition(
                f"run is {row.state}: run '{run_id}' is not dead-lettered; only runs on "
                "the dead-letter list (`cronwave dlq list`) can be replayed"
            )
        conditional_update(
            s,
            row,
            state=RunState.PENDING.value,
            finished_at=None,
            due_at=None,
            next_sweep_at=None,
            requeues=0,
        )
        s.execute(
            sa.update(m.DeadLetter)
            .where(m.DeadLetter.run_id == run_id, m.DeadLetter.replayed_at.is_(None))
            .values(replayed_at=now)
        )
        _event(s, row, "replayed", now, "")
        changes = {"state": {"old": "DEAD_LETTERED", "new": "PENDING"}}
        append(
            s,
            actor,
            "ReplayDeadLetter",
            changes,
            self.clock(),
            schedule_id=row.schedule_id,
            run_id=run_id,
        )
        return _run(row)


def _new_letter(
    s: Session,
    req: DeadLetterRequest,
    now: datetime,
    *,
    error: str,
    job_type: str,
    attempt: int,
    queue: str,
) -> DeadLetterRecord:
    row = m.DeadLetter(
        run_id=req.run_id,
        reason=req.reason.value,
        error=error,
        queue=queue,
        job_type=job_type,
        attempt=attempt,
        message_json=req.message_json,
        created_at=now,
        replayed_at=None,
    )
    s.add(row)
    s.flush()
    return _dead_letter_record(row)


def _dead_letter_record(row: m.DeadLetter) -> DeadLetterRecord:
    return DeadLetterRecord(
        id=row.id,
        run_id=row.run_id,
        reason=row.reason,
        error=row.error,
        queue=row.queue,
        job_type=row.job_type,
        attempt=row.attempt,
        message_json=row.message_json,
        created_at=row.created_at,
        replayed_at=row.replayed_at,
    )
