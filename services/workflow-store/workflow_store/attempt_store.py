"""Attempts: claims, heartbeats, completions, hand-backs and cancellations, each a
conditional UPDATE of the run's state and attempt token.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from cronwave_core.domain.cancel import CancelRequest
from cronwave_core.errors import (
    CronwaveError,
    FailedPrecondition,
    InvalidArgument,
    RunNotFound,
    StaleAttempt,
)
from cronwave_core.fields import require_run_id
from workflow_store import models as m
from workflow_store.audit_store import Actor, AuditStore, change
from workflow_store.ids import new_attempt_token, same_token
from workflow_store.records import (
    COMPLETIONS,
    Beat,
    Claim,
    ClaimRequest,
    Completion,
    CompletionRequest,
    RunRecord,
    RunState,
)
from workflow_store.rows import (
    _event,
    _get_run,
    _run,
    _run_of,
)
from workflow_store.store_core import (
    _CLAIM_COLUMNS,
    _CLAIM_UPDATE,
    _COMPLETE_COLUMNS,
    _COMPLETE_UPDATE,
    _check_batch,
    _event_values,
    _insert_events,
    _lock_runs,
    _only,
    _update_runs,
)


class AttemptStore(AuditStore):
    """A run's attempts, from claim to completion."""

    # -- attempts ----------------------------------------------------------------------

    def claim_run(self, run_id: str, worker_id: str) -> Claim:
        """Start a new attempt of the run for ``worker_id`` unless it is terminal or a
        live attempt holds it (its heartbeat younger than the job's heartbeat timeout).
        Of concurrent claims exactly one wins."""
        if not worker_id:
            raise InvalidArgument("worker_id", "required: the claiming worker's id")
        claim: Claim = _only(
            self._rounds(lambda s: self._claim_all(s, [ClaimRequest(run_id, worker_id)]))
        )
        return claim

    def claim_runs(self, claims: Sequence[ClaimRequest]) -> list[Claim | CronwaveError]:
        """``claim_run`` for every item in one transaction, as if claimed one after the
        other in that order (a run claimed twice is claimed once): each item's claim,
        or in its place the ``RunNotFound`` it was refused with. Raises
        ``InvalidArgument`` naming the item (``claims[0].worker_id``) for a malformed
        one; then nothing is written."""
        _check_batch("claims", claims)
        for i, claim in enumerate(claims):
            require_run_id(claim.run_id, f"claims[{i}].run_id")
            if not claim.worker_id:
                raise InvalidArgument(
                    f"claims[{i}].worker_id", "required: the claiming worker's id"
                )
        if not claims:
            return []
        results: list[Claim | CronwaveError] = self._rounds(lambda s: self._claim_all(s, claims))
        return results

    def _claim_all(self, s: Session, claims: Sequence[ClaimRequest]) -> list[Claim | CronwaveError]:
        now = self.clock()
        runs = _lock_runs(s, {claim.run_id for claim in claims})
        before: dict[str, tuple[str, str]] = {}
        events: list[dict[str, Any]] = []
        results: list[Claim | CronwaveError] = []
        for claim in claims:
            run = runs.get(claim.run_id)
            if run is None:
                results.append(RunNotFound(claim.run_id))
                continue
            if not self._claimable(s, run, now):
                results.append(Claim(_run_of(run), claimed=False, attempt_token=""))
                continue
            before.setdefault(run["run_id"], (run["state"], run["attempt_token"]))
            run.update(
                state=RunState.RUNNING.value,
                attempt=run["attempt"] + 1,
                attempt_token=new_attempt_token(),
                claimed_at=now,
                heartbeat_at=now,
                worker_id=claim.worker_id,
                next_sweep_at=None,
                requeues=0,
            )
            events.append(_event_values(run, "claimed", claim.worker_id, now))
            results.append(Claim(_run_of(run), claimed=True, attempt_token=run["attempt_token"]))
        _update_runs(s, _CLAIM_UPDATE, runs, before, _CLAIM_COLUMNS)
        _insert_events(s, events)
        return results

    def _claimable(self, s: Session, run: dict[str, Any], now: datetime) -> bool:
        """Whether a claim may start a new attempt: not terminal, not cancel-requested
        (its body is stopping, never to run again), not a retry whose delay has not
        passed (an early duplicate message), not held by a live attempt."""
        state = RunState(run["state"])
        if state.terminal or run.get("cancel_deadline") is not None:
            return False
        if state is RunState.PENDING and run["due_at"] is not None and run["due_at"] > now:
            return False
        if state is RunState.RUNNING:
            alive_since = run["heartbeat_at"] or run["claimed_at"]
            if alive_since is not None and now - alive_since < self._heartbeat_timeout(
                s, run["job_type"]
            ):
                return False
        return True

    def heartbeat(
        self,
        run_id: str,
        attempt_token: str,
        checkpoint_json: str,
        body_started_at: datetime | None = None,
    ) -> Beat:
        """Prove the attempt is alive; returns the deadline of its next heartbeat and,
        for a cancel-requested run, how long its body has left to stop. With
        ``body_started_at`` (sent once, while the body runs) the run's ``started_at``
        is set unless an earlier attempt's body began first, and the event ``started``
        is recorded. Raises ``StaleAttempt`` for a superseded attempt,
        ``FailedPrecondition`` when the run is not running."""
        return self._rounds(
            lambda s: self._heartbeat(s, run_id, attempt_token, checkpoint_json, body_started_at)
        )

    def _heartbeat(
        self,
        s: Session,
        run_id: str,
        token: str,
        checkpoint: str,
        body_started_at: datetime | None,
    ) -> Beat:
        now = self.clock()
        row = _get_run(s, run_id)
        state = RunState(row.state)
        if not same_token(token, row.attempt_token):
            raise StaleAttempt(run_id, row.attempt, row.state)
        if state.terminal:
            raise FailedPrecondition(
                f"run is already {state.value}: run '{run_id}' has finished; stop working on it"
            )
        if state is not RunState.RUNNING:
            raise FailedPrecondition(
                f"run is {state.value}: run '{run_id}' has no running attempt; claim it first"
            )
        values: dict[str, Any] = {"heartbeat_at": now}
        if checkpoint:
            values["checkpoint_json"] = checkpoint
        if body_started_at is not None and row.started_at is None:
            values["started_at"] = body_started_at
        self._conditional_update(s, row, **values)
        if body_started_at is not None:
            _event(s, row, "started", now, _body_started(body_started_at, row.fire_time))
        deadline = now + self._heartbeat_timeout(s, row.job_type)
        if row.cancel_deadline is None:
            return Beat(deadline)
        left = max(row.cancel_deadline - now, timedelta(0))
        return Beat(deadline, cancel_grace=left, cancel_reason=row.cancel_reason)

    def complete_run(
        self,
        run_id: str,
        attempt_token: str,
        state: RunState,
        error: str = "",
        result_json: str = "",
        retry_after: timedelta = timedelta(0),
        body_started_at: datetime | None = None,
    ) -> Completion:
        """Finish the run in ``state``. A run that is already terminal is returned
        unchanged (``changed=False``): a repeated completion changes nothing. A FAILED
        completion with ``retry_after`` > 0 puts the run back to PENDING instead. With
        ``body_started_at``, a completion that changes the run also records the run
        event ``started`` (when the job body began, and its fire lateness)."""
        req = CompletionRequest(
            run_id, attempt_token, state, error, result_json, retry_after, body_started_at
        )
        _check_completion(req, "")
        completion: Completion = _only(self._rounds(lambda s: self._complete_all(s, [req])))
        return completion

    def complete_runs(
        self, completions: Sequence[CompletionRequest]
    ) -> list[Completion | CronwaveError]:
        """``complete_run`` for every item in one transaction, as if completed one after
        the other in that order (a repeated completion changes nothing): each item's
        completion, or in its place the ``RunNotFound`` or ``StaleAttempt`` it was
        refused with. Raises ``InvalidArgument`` naming the item
        (``completions[1].state``) for a malformed one; then nothing is written."""
        _check_batch("completions", completions)
        for i, req in enumerate(completions):
            require_run_id(req.run_id, f"completions[{i}].run_id")
            _check_completion(req, f"completions[{i}].")
        if not completions:
            return []
        results: list[Completion | CronwaveError] = self._rounds(
            lambda s: self._complete_all(s, completions)
        )
        return results

    def _complete_all(
        self, s: Session, completions: Sequence[CompletionRequest]
    ) -> list[Completion | CronwaveError]:
        runs = _lock_runs(s, {req.run_id for req in completions})
        # Stamped once the rows are locked: a run stays in flight to every reader until
        # this commits, so its finished_at must not predate a wait for the lock.
        now = self.clock()
        before: dict[str, tuple[str, str]] = {}
        events: list[dict[str, Any]] = []
        results: list[Completion | CronwaveError] = []
        for req in completions:
            run = runs.get(req.run_id)
            if run is None:
                results.append(RunNotFound(req.run_id))
                continue
            if RunState(run["state"]).terminal:
                results.append(Completion(_run_of(run), changed=False))
                continue
            if not same_token(req.attempt_token, run["attempt_token"]):
                results.append(StaleAttempt(req.run_id, run["attempt"], run["state"]))
                continue
            before.setdefault(run["run_id"], (run["state"], run["attempt_token"]))
            if req.body_started_at is not None:
                run["started_at"] = run["started_at"] or req.body_started_at
                detail = _body_started(req.body_started_at, run["fire_time"])
                events.append(_event_values(run, "started", detail, now))
            if run["cancel_deadline"] is not None:
                # Cancel-requested: whatever the attempt reports, the run is cancelled,
                # and nothing the job returned is kept.
                run.update(
                    state=RunState.CANCELLED.value,
                    finished_at=now,
                    error=run["cancel_reason"],
                    result_json="",
                )
                events.append(
                    _event_values(run, RunState.CANCELLED.value, run["cancel_reason"], now)
                )
            elif req.retry_after > timedelta(0):
                run.update(
                    state=RunState.PENDING.value,
                    error=req.error,
                    result_json=req.result_json,
                    due_at=now + req.retry_after,
                )
                detail = f"retry_after={req.retry_after.total_seconds():g}s"
                if req.error:
                    detail = f"{detail} error={req.error}"
                events.append(_event_values(run, "retry_scheduled", detail, now))
            else:
                run.update(
                    state=req.state.value,
                    finished_at=now,
                    error=req.error,
                    result_json=req.result_json,
                )
                events.append(_event_values(run, req.state.value, req.error, now))
            results.append(Completion(_run_of(run), changed=True))
        _update_runs(s, _COMPLETE_UPDATE, runs, before, _COMPLETE_COLUMNS)
        _insert_events(s, events)
        return results

    def release_run(
        self, run_id: str, attempt_token: str, checkpoint_json: str, reason: str
    ) -> tuple[RunRecord, bool]:
        """Hand the current attempt back: RUNNING -> PENDING, due now, with the event
        "released" (detail ``reason``) and ``checkpoint_json`` kept when given, so the
        next claim resumes the run at once rather than after a heartbeat lapse. The
        attempt's token stops being valid: a later write from it is refused. A run
        already terminal is returned unchanged (``False``). Raises ``StaleAttempt``
        for any token but the current attempt's, ``FailedPrecondition`` when the run
        is not running."""
        return self._rounds(
            lambda s: self._release(s, run_id, attempt_token, checkpoint_json, reason)
        )

    def _release(
        self, s: Session, run_id: str, token: str, checkpoint: str, reason: str
    ) -> tuple[RunRecord, bool]:
        now = self.clock()
        row = _get_run(s, run_id)
        state = RunState(row.state)
        if state.terminal:
            return _run(row), False
        if not same_token(token, row.attempt_token):
            raise StaleAttempt(run_id, row.attempt, row.state)
        if state is not RunState.RUNNING:
            raise FailedPrecondition(
                f"run is {state.value}: run '{run_id}' has no running attempt to release"
            )
        if row.cancel_deadline is not None:  # cancel-requested: it ends here, not resumed
            self._conditional_update(
                s,
                row,
                state=RunState.CANCELLED.value,
                finished_at=now,
                error=row.cancel_reason,
                **({"checkpoint_json": checkpoint} if checkpoint else {}),
            )
            _event(s, row, RunState.CANCELLED.value, now, row.cancel_reason)
            return _run(row), False
        values: dict[str, Any] = {
            "state": RunState.PENDING.value,
            "attempt_token": new_attempt_token(),  # nobody holds it: the old one is void
            "due_at": now,
            "heartbeat_at": None,
            "next_sweep_at": None,
        }
        if checkpoint:
            values["checkpoint_json"] = checkpoint
        self._conditional_update(s, row, **values)
        _event(s, row, "released", now, reason[:200])
        return _run(row), True

    def cancel_run(
        self, request: CancelRequest, actor: Actor | None = None
    ) -> tuple[RunRecord, bool]:
        """Cancel a run that has not finished, whichever attempt holds it (an overlap
        policy, an operator). Returns the run and whether this changed it; a run
        already terminal is returned unchanged (``False``).

        Without a grace, or when no live attempt holds the run (PENDING, or its
        heartbeat lapsed), the run is CANCELLED at once with the reason as its error:
        its queued message is dropped by the claim, and an attempt that held it is
        refused at its next heartbeat or completion. With a grace, a running run is
        marked cancel-requested instead (``cancel_deadline`` = now + grace, event
        ``cancel_requested``): it stays RUNNING while its attempt learns of it at its
        next heartbeat and stops its body by the deadline, and whatever that attempt
        then reports (a completion, a hand-back) ends the run CANCELLED; it is never
        claimed again, and the sweeper ends it CANCELLED should the attempt's heartbeat
        lapse. A second request may bring the deadline closer, never move it away."""
        return self._rounds(lambda s: self._audited_cancel(s, request, actor))

    def _audited_cancel(
        self, s: Session, request: CancelRequest, actor: Actor | None
    ) -> tuple[RunRecord, bool]:
        state = s.scalar(sa.select(m.Run.state).where(m.Run.run_id == request.run_id))
        run, changed = self._cancel(s, request)
        if changed:
            changes: dict[str, Any] = {
                "state": change(str(state).upper(), run.state.value.upper()),
                "reason": request.reason,
                "grace_seconds": request.grace.total_seconds(),
            }
            self._audit(
                s, actor, "CancelRun", changes, schedule_id=run.schedule_id, run_id=run.run_id
            )
        return run, changed

    def _cancel(self, s: Session, request: CancelRequest) -> tuple[RunRecord, bool]:
        now = self.clock()
        row = _get_run(s, request.run_id)
        state = RunState(row.state)
        if state.terminal:
            return _run(row), False
        alive_since = row.heartbeat_at or row.claimed_at
        alive = (
            state is RunState.RUNNING
            and alive_since is not None
            and now - alive_since < self._heartbeat_timeout(s, row.job_type)
        )
        if request.grace > timedelta(0) and alive:
            deadline = now + request.grace
            if row.cancel_deadline is not None and row.cancel_deadline <= deadline:
                return _run(row), False
            self._conditional_update(s, row, cancel_deadline=deadline, cancel_reason=request.reason)
            detail = f"grace={request.grace.total_seconds():g}s reason={request.reason}"
            _event(s, row, "cancel_requested", now, detail)
            return _run(row), True
        self._conditional_update(
            s, row, state=RunState.CANCELLED.value, finished_at=now, error=request.reason
        )
        _event(s, row, RunState.CANCELLED.value, now, request.reason)
        return _run(row), True


def _check_completion(req: CompletionRequest, prefix: str) -> None:
    if req.state not in COMPLETIONS:
        raise InvalidArgument(
            f"{prefix}state", "must be one of succeeded, failed, timed_out or cancelled"
        )
    if req.retry_after < timedelta(0):
        raise InvalidArgument(f"{prefix}retry_after", "must not be negative")
    if req.retry_after > timedelta(0) and req.state is not RunState.FAILED:
        raise InvalidArgument(f"{prefix}retry_after", "only a FAILED completion can be retried")


def _body_started(body_started_at: datetime, fire_time: datetime) -> str:
    """The detail of the run event ``started``: when the job body began, and its fire
    lateness in milliseconds (both to the microsecond)."""
    lateness_us = (body_started_at - fire_time) // timedelta(microseconds=1)
    return (
        f"body_started_at={body_started_at.astimezone(UTC).isoformat(timespec='microseconds')} "
        f"lateness_ms={lateness_us / 1000:.3f}"
    )
