"""Attempts: claims, heartbeats, completions, hand-backs and cancellations, each a
conditional UPDATE of the run's state and attempt token.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from cronwave_core.domain.cancel import CancelRequest
from cronwave_core.domain.progress import Progress
from cronwave_core.errors import (
    CronwaveError,
    FailedPrecondition,
    InvalidArgument,
    RunNotFound,
    StaleAttempt,
    Unavailable,
)
from cronwave_core.fields import require_run_id
from workflow_store import claim_deadlines, claim_rules
from workflow_store import models as m
from workflow_store.audit_store import Actor, append, change
from workflow_store.ids import new_attempt_token, same_token
from workflow_store.job_types import JobTypes
from workflow_store.records import (
    COMPLETIONS,
    Beat,
    BeatRequest,
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
    _EVENTS,
    _RUNS,
    Clock,
    _check_batch,
    _event_values,
    _insert_events,
    _lock_runs,
    _only,
    _update_of,
    _update_runs,
    conditional_update,
    utc_now,
)
from workflow_store.unit_of_work import Transactions, UnitOfWork


class Attempts:
    """A run's attempts, from claim to completion; whether one is alive is its job
    type's heartbeat timeout (``JobTypes``)."""

    def __init__(self, tx: Transactions, job_types: JobTypes, clock: Clock = utc_now) -> None:
        self.tx = tx
        self.job_types = job_types
        self.clock = clock

    # -- attempts ----------------------------------------------------------------------

    def claim_run(
        self, run_id: str, worker_id: str, queues: Sequence[str], claim_key: str = ""
    ) -> Claim:
        """Start a new attempt of the run for ``worker_id`` unless it is terminal or a
        live attempt holds it (its heartbeat younger than the job's heartbeat timeout).
        Of concurrent claims exactly one wins. The claimed run is WAITING: held, its
        body not started (it becomes RUNNING when the attempt reports its start).

        A claim asked again (same ``claim_key``, same worker) while the run still waits
        under the attempt it started is answered with that attempt, its heartbeat
        renewed: the first answer may have been lost (the call failed after this
        transaction committed), and refusing the claim as held would leave the attempt
        to nobody until its heartbeat lapsed, then start another one."""
        if not worker_id:
            raise InvalidArgument("worker_id", "required: the claiming worker's id")
        serves = claim_rules.served(queues)
        request = ClaimRequest(run_id, worker_id, claim_key)
        claim: Claim = _only(self.tx.rounds(lambda w: self._claim_all(w, [request], serves)))
        return claim

    def claim_runs(
        self, claims: Sequence[ClaimRequest], queues: Sequence[str]
    ) -> list[Claim | CronwaveError]:
        """``claim_run`` for every item in one transaction, as if claimed one after the
        other in that order (a run claimed twice is claimed once), by a worker that
        consumes ``queues``: each item's claim, or in its place the ``RunNotFound``,
        ``QueueNotServed`` or ``RunNotEnqueued`` it was refused with
        (``claim_rules``). Raises ``InvalidArgument`` naming the item
        (``claims[0].worker_id``) for a malformed one, or ``queues`` when the claims
        name none; then nothing is written."""
        _check_batch("claims", claims)
        for i, claim in enumerate(claims):
            require_run_id(claim.run_id, f"claims[{i}].run_id")
            if not claim.worker_id:
                raise InvalidArgument(
                    f"claims[{i}].worker_id", "required: the claiming worker's id"
                )
        if not claims:
            return []
        serves = claim_rules.served(queues)
        results: list[Claim | CronwaveError] = self.tx.rounds(
            lambda w: self._claim_all(w, claims, serves)
        )
        return results

    def _claim_all(
        self, w: UnitOfWork, claims: Sequence[ClaimRequest], queues: frozenset[str]
    ) -> list[Claim | CronwaveError]:
        s = w.session
        now = self.clock()
        runs = _lock_runs(s, {claim.run_id for claim in claims})
        before: dict[str, tuple[str, str]] = {}
        events: list[dict[str, Any]] = []
        results: list[Claim | CronwaveError] = []
        answer = 0  # bytes of blobs the answer carries so far
        for claim in claims:
            run = runs.get(claim.run_id)
            if run is None:
                results.append(RunNotFound(claim.run_id))
                continue
            refused = claim_rules.refusal(run, queues)
            if refused is not None:  # before anything of the run is answered
                results.append(refused)
                continue
            blobs = _blob_bytes(run)
            if answer and answer + blobs > CLAIM_ANSWER_BYTES:
                results.append(AnswerFull(claim.run_id))  # not claimed: asked again
                continue
            if _asked_again(run, claim):  # its first answer was lost: the same attempt
                answer += blobs
                before.setdefault(run["run_id"], (run["state"], run["attempt_token"]))
                run.update(heartbeat_at=now, next_sweep_at=None)
                results.append(
                    Claim(_run_of(run), claimed=True, attempt_token=run["attempt_token"])
                )
                continue
            if not self._claimable(w, run, now):
                results.append(Claim(_run_of(run), claimed=False, attempt_token=""))
                continue
            answer += blobs
            before.setdefault(run["run_id"], (run["state"], run["attempt_token"]))
            run.update(
                state=RunState.WAITING.value,
                attempt=run["attempt"] + 1,
                attempt_token=new_attempt_token(),
                claim_key=claim.claim_key or None,
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
        return _with_deadlines(s, results, runs)

    def _claimable(self, w: UnitOfWork, run: dict[str, Any], now: datetime) -> bool:
        """Whether a claim may start a new attempt: not terminal, not cancel-requested
        (its body is stopping, never to run again), not a retry whose delay has not
        passed (an early duplicate message), not held by a live attempt."""
        state = RunState(run["state"])
        if state.terminal or run.get("cancel_deadline") is not None:
            return False
        if state is RunState.PENDING and run["due_at"] is not None and run["due_at"] > now:
            return False
        if state.held:
            alive_since = run["heartbeat_at"] or run["claimed_at"]
            if alive_since is not None and now - alive_since < self.job_types.heartbeat_timeout(
                w, run["job_type"]
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
        ``body_started_at`` a WAITING run becomes RUNNING, its ``started_at`` is set
        unless an earlier attempt's body began first, and the event ``started`` is
        recorded once per attempt. Raises ``StaleAttempt`` for a superseded attempt,
        ``FailedPrecondition`` when no attempt holds the run (it is neither WAITING nor
        RUNNING)."""
        beat = BeatRequest(run_id, attempt_token, checkpoint_json, body_started_at)
        answer: Beat = _only(self.heartbeats([beat]))
        return answer

    def heartbeats(self, beats: Sequence[BeatRequest]) -> list[Beat | CronwaveError]:
        """``heartbeat`` for every item in one transaction (a worker's liveness: every
        attempt it holds, once per interval): each item's answer, or in its place the
        ``RunNotFound``, ``StaleAttempt`` or ``FailedPrecondition`` it was refused with.
        The cost is a few statements per call, whatever the number of items."""
        _check_batch("beats", beats)
        for i, beat in enumerate(beats):
            require_run_id(beat.run_id, f"beats[{i}].run_id")
        if not beats:
            return []
        results: list[Beat | CronwaveError] = self.tx.rounds(
            lambda w: self._heartbeat_all(w, beats)
        )
        return results

    def _heartbeat_all(
        self, w: UnitOfWork, beats: Sequence[BeatRequest]
    ) -> list[Beat | CronwaveError]:
        s = w.session
        runs = _lock_beats(s, {beat.run_id for beat in beats})
        now = self.clock()
        starting = {beat.run_id for beat in beats if beat.body_started_at is not None}
        started = _started_attempts(s, starting) if starting else set()
        timeouts: dict[str, timedelta] = {}
        alive: dict[str, tuple[str, str]] = {}
        saved: dict[str, tuple[str, str]] = {}
        progressed: dict[str, tuple[str, str]] = {}
        events: list[dict[str, Any]] = []
        results: list[Beat | CronwaveError] = []
        for beat in beats:
            run = runs.get(beat.run_id)
            if run is None:
                results.append(RunNotFound(beat.run_id))
                continue
            refused = _beat_refusal(run, beat)
            if refused is not None:
                results.append(refused)
                continue
            alive[beat.run_id] = (run["state"], run["attempt_token"])
            run["heartbeat_at"] = now
            if beat.body_started_at is not None:
                run["state"] = RunState.RUNNING.value  # its body began: no longer WAITING
            if beat.checkpoint_json:
                run["checkpoint_json"] = beat.checkpoint_json
                saved[beat.run_id] = (run["state"], run["attempt_token"])  # after the beat's
            if beat.body_started_at is not None and (beat.run_id, run["attempt"]) not in started:
                started.add((beat.run_id, run["attempt"]))
                run["started_at"] = run["started_at"] or beat.body_started_at
                detail = _body_started(beat.body_started_at, run["fire_time"])
                events.append(_event_values(run, "started", detail, now))
            if beat.progress is not None:
                run.update(_progress_values(beat.progress, now))
                progressed[beat.run_id] = (run["state"], run["attempt_token"])
            job_type = run["job_type"]
            if job_type not in timeouts:
                timeouts[job_type] = self.job_types.heartbeat_timeout(w, job_type)
            deadline = now + timeouts[job_type]
            if run["cancel_deadline"] is None:
                results.append(Beat(deadline))
            else:
                left = max(run["cancel_deadline"] - now, timedelta(0))
                results.append(Beat(deadline, left, run["cancel_reason"]))
        _update_runs(s, _BEAT_UPDATE, runs, alive, _BEAT_COLUMNS)
        _update_runs(s, _CHECKPOINT_UPDATE, runs, saved, _CHECKPOINT_COLUMNS)
        _update_runs(s, _PROGRESS_UPDATE, runs, progressed, _PROGRESS_COLUMNS)
        _insert_events(s, events)
        return results

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
        completion: Completion = _only(
            self.tx.rounds(lambda w: self._complete_all(w.session, [req]))
        )
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
        results: list[Completion | CronwaveError] = self.tx.rounds(
            lambda w: self._complete_all(w.session, completions)
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
        # A start a heartbeat already recorded is not recorded again (the worker sends
        # it with the completion too when that heartbeat's answer had not come back).
        starting = {req.run_id for req in completions if req.body_started_at is not None}
        started = _started_attempts(s, starting) if starting else set()
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
            if req.body_started_at is not None and (req.run_id, run["attempt"]) not in started:
                started.add((req.run_id, run["attempt"]))
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
        """Hand the current attempt back: WAITING or RUNNING -> PENDING, due now, with
        the event "released" (detail ``reason``) and ``checkpoint_json`` kept when given,
        so the next claim resumes the run at once rather than after a heartbeat lapse. The
        attempt's token stops being valid: a later write from it is refused. A run
        already terminal is returned unchanged (``False``). Raises ``StaleAttempt``
        for any token but the current attempt's, ``FailedPrecondition`` when no
        attempt holds the run."""
        return self.tx.rounds(
            lambda w: self._release(w.session, run_id, attempt_token, checkpoint_json, reason)
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
        if not state.held:
            raise FailedPrecondition(
                f"run is {state.value}: run '{run_id}' has no attempt holding it to release"
            )
        if row.cancel_deadline is not None:  # cancel-requested: it ends here, not resumed
            conditional_update(
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
        conditional_update(s, row, **values)
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
        refused at its next heartbeat or completion. With a grace, a held run (WAITING
        or RUNNING) is marked cancel-requested instead (``cancel_deadline`` = now +
        grace, event ``cancel_requested``): it stays held while its attempt learns of it
        at its next heartbeat and stops its body by the deadline, and whatever that
        attempt then reports (a completion, a hand-back) ends the run CANCELLED; it is
        never claimed again, and the sweeper ends it CANCELLED should the attempt's
        heartbeat lapse. A second request may bring the deadline closer, never move it
        away."""
        return self.tx.rounds(lambda w: self._audited_cancel(w, request, actor))

    def _audited_cancel(
        self, w: UnitOfWork, request: CancelRequest, actor: Actor | None
    ) -> tuple[RunRecord, bool]:
        s = w.session
        state = s.scalar(sa.select(m.Run.state).where(m.Run.run_id == request.run_id))
        run, changed = self.cancel(w, request)
        if changed:
            changes: dict[str, Any] = {
                "state": change(str(state).upper(), run.state.value.upper()),
                "reason": request.reason,
                "grace_seconds": request.grace.total_seconds(),
            }
            append(
                s,
                actor,
                "CancelRun",
                changes,
                self.clock(),
                schedule_id=run.schedule_id,
                run_id=run.run_id,
            )
        return run, changed

    # -- in another part's unit of work -------------------------------------------------

    def cancel(self, w: UnitOfWork, request: CancelRequest) -> tuple[RunRecord, bool]:
        """``cancel_run``'s change in ``w``, with no audit row (the caller writes its own:
        a schedule's deletion cancels its runs in flight). Raises ``RunNotFound``."""
        s = w.session
        now = self.clock()
        row = _get_run(s, request.run_id)
        state = RunState(row.state)
        if state.terminal:
            return _run(row), False
        alive_since = row.heartbeat_at or row.claimed_at
        alive = (
            state.held
            and alive_since is not None
            and now - alive_since < self.job_types.heartbeat_timeout(w, row.job_type)
        )
        if request.grace > timedelta(0) and alive:
            deadline = now + request.grace
            if row.cancel_deadline is not None and row.cancel_deadline <= deadline:
                return _run(row), False
            conditional_update(s, row, cancel_deadline=deadline, cancel_reason=request.reason)
            detail = f"grace={request.grace.total_seconds():g}s reason={request.reason}"
            _event(s, row, "cancel_requested", now, detail)
            return _run(row), True
        conditional_update(
            s, row, state=RunState.CANCELLED.value, finished_at=now, error=request.reason
        )
        _event(s, row, RunState.CANCELLED.value, now, request.reason)
        return _run(row), True


def _with_deadlines(
    s: Session, results: list[Claim | CronwaveError], runs: Mapping[str, Mapping[str, Any]]
) -> list[Claim | CronwaveError]:
    """``results`` with each claimed run's deadline, where it is answered with one."""
    claimed = [runs[r.run.run_id] for r in results if isinstance(r, Claim) and r.claimed]
    found = claim_deadlines.deadlines(s, claimed)
    if not found:
        return results
    return [
        replace(r, deadline_at=found.get(r.run.run_id)) if isinstance(r, Claim) and r.claimed else r
        for r in results
    ]


def _asked_again(run: Mapping[str, Any], claim: ClaimRequest) -> bool:
    """Whether ``claim`` is the one that started the run's current attempt, asked again
    while that attempt waits (its body not begun, no cancel requested): same key, same
    worker. Only that worker knows the key, and its first answer never reached it."""
    key = run.get("claim_key") or ""
    return (
        bool(claim.claim_key)
        and run["state"] == RunState.WAITING.value
        and run.get("cancel_deadline") is None
        and run["worker_id"] == claim.worker_id
        and secrets.compare_digest(claim.claim_key.encode(), key.encode())
    )


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


_BEAT_COLUMNS = ("state", "heartbeat_at", "started_at")
_BEAT_UPDATE = _update_of(_BEAT_COLUMNS)
_CHECKPOINT_COLUMNS = ("checkpoint_json",)
_CHECKPOINT_UPDATE = _update_of(_CHECKPOINT_COLUMNS)
_PROGRESS_COLUMNS = ("progress_done", "progress_total", "progress_unit", "progress_at")
_PROGRESS_UPDATE = _update_of(_PROGRESS_COLUMNS)


def _progress_values(progress: Progress, now: datetime) -> dict[str, Any]:
    """A beat's progress as the run's columns (``at``: when the body reported it, else
    when the store heard of it)."""
    return {
        "progress_done": progress.done,
        "progress_total": progress.total,
        "progress_unit": progress.unit,
        "progress_at": progress.at or now,
    }


# A heartbeat reads what it decides on, not the run's blobs (a batch of runs whose
# payloads and checkpoints are at their limits would be megabytes).
_LOCK_BEATS = (
    sa.select(
        _RUNS.c.run_id,
        _RUNS.c.state,
        _RUNS.c.attempt,
        _RUNS.c.attempt_token,
        _RUNS.c.job_type,
        _RUNS.c.fire_time,
        _RUNS.c.started_at,
        _RUNS.c.cancel_deadline,
        _RUNS.c.cancel_reason,
    )
    .where(_RUNS.c.run_id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(_RUNS.c.run_id)
    .with_for_update(key_share=True)
)
_STARTED = sa.select(_EVENTS.c.run_id, _EVENTS.c.attempt).where(
    _EVENTS.c.kind == "started", _EVENTS.c.run_id.in_(sa.bindparam("ids", expanding=True))
)


def _lock_beats(s: Session, run_ids: set[str]) -> dict[str, dict[str, Any]]:
    """What a heartbeat decides on of each run named, under the rows' locks."""
    ids = sorted(run_ids)
    return {row.run_id: dict(row._mapping) for row in s.execute(_LOCK_BEATS, {"ids": ids})}


def _started_attempts(s: Session, run_ids: set[str]) -> set[tuple[str, int]]:
    """The (run, attempt) pairs whose body's start is recorded already."""
    rows = s.execute(_STARTED, {"ids": sorted(run_ids)})
    return {(row.run_id, int(row.attempt)) for row in rows}


def _beat_refusal(run: Mapping[str, Any], beat: BeatRequest) -> CronwaveError | None:
    """Why the heartbeat of ``beat`` is refused (None: it is the holding attempt's)."""
    run_id, state = beat.run_id, RunState(run["state"])
    if not same_token(beat.attempt_token, run["attempt_token"]):
        return StaleAttempt(run_id, run["attempt"], run["state"])
    if state.terminal:
        return FailedPrecondition(
            f"run is already {state.value}: run '{run_id}' has finished; stop working on it"
        )
    if not state.held:
        return FailedPrecondition(
            f"run is {state.value}: no attempt holds run '{run_id}'; claim it first"
        )
    return None


#: A ClaimRuns answer carries the claimed runs' payloads and checkpoints; past this
#: many bytes of them, the batch's further claims are refused (``AnswerFull``) rather
#: than made, so an answer stays within every client's 4 MiB receive limit. The first
#: claim of a batch is always made (one run fits: its blobs are bounded by the limits).
CLAIM_ANSWER_BYTES = 3 * 1024 * 1024


class AnswerFull(Unavailable):
    """A claim of a batch whose answer is full: nothing was done; claim it again."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"run_id: run '{run_id}' not claimed: this batch's answer is full (its runs' "
            "payloads and checkpoints); claim it again"
        )


def _blob_bytes(run: Mapping[str, Any]) -> int:
    """About what a run's payload, result and checkpoint add to an answer."""
    return sum(
        len(run.get(name) or "") for name in ("payload_json", "result_json", "checkpoint_json")
    )
