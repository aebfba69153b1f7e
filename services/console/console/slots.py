"""What a person sees of a run in a schedule's strip: one of eight outcomes, and why.

======== ==========================================================================
ran      SUCCEEDED, fire lateness at most the console's ``late_after``
late     SUCCEEDED, fire lateness above ``late_after``
failed   FAILED, TIMED_OUT, CANCELLED or DEAD_LETTERED
missed   MISSED: the slot was not run (catch-up policy, overlap policy, DST gap, ...)
failed-deadline  the slot had not SUCCEEDED by its schedule's deadline (the store
         recorded a breach), whatever its run did later
waiting  WAITING: a worker claimed it (ahead of its fire time, by the dispatch lead)
         and holds it; its body has not started yet
running  PENDING or RUNNING: not finished yet (a PENDING run waits for a worker)
manual   a MANUAL trigger, whatever its state: it ran outside the calendar and
         proves nothing of any slot, so it is never shown as one (its reason says
         how it ended)
======== ==========================================================================

A schedule's last slot is its newest run that is not manual (SCHEDULED, CATCHUP or
BACKFILL); one that only ever ran by hand has no slot yet.

The reason is a sentence, not a code: ``catchup_skip`` reads "not run: the planner
was down at the fire time and the catch-up policy is skip".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronwave import DeadlineBreach, Run

OUTCOMES = (
    "ran",
    "late",
    "failed",
    "missed",
    "waiting",
    "running",
    "failed-deadline",
    "manual",
)
#: A run triggered by hand: no slot of the calendar.
MANUAL = "manual"
#: A slot that had not SUCCEEDED by its schedule's deadline (a breach the store recorded).
DEADLINE_MISSED = "failed-deadline"
_FAILED = {"FAILED", "TIMED_OUT", "CANCELLED", "DEAD_LETTERED"}

#: The MISSED reasons the planner records (``cronwave_core.domain.catchup``,
#: ``overlap``, ``calendar_dst``), as a person reads them.
MISSED_REASONS = {
    "catchup_skip": "not run: the planner was down at the fire time and the catch-up "
    "policy is skip",
    "outside_catchup_window": "not run: the planner was down and the slot is older than "
    "the catch-up window",
    "superseded_by_latest": "not run: catch-up policy latest ran only the newest late slot",
    "catchup_cap": "not run: catch-up policy all reached its cap of late runs",
    "overlap_skip": "not run: the previous run was still running and the overlap policy is skip",
    "dst_gap_skip": "not run: the wall-clock time did not exist (DST spring-forward gap) "
    "and the DST gap policy is skip",
}


def missed_reason(error: str) -> str:
    """The sentence for a MISSED run's recorded reason (``code`` or ``code: detail``)."""
    code, _, detail = error.partition(":")
    sentence = MISSED_REASONS.get(code.strip())
    if sentence is None:
        return f"not run: {error}" if error else "not run"
    return f"{sentence} ({detail.strip()})" if detail.strip() else sentence


def human(delta: timedelta | None) -> str:
    """A duration as a person reads it: ``850 ms``, ``12.3 s``, ``4 min 5 s``."""
    if delta is None:
        return "-"
    seconds = delta.total_seconds()
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    if seconds < 1:
        return f"{sign}{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{sign}{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{sign}{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours} h {minutes} min"


@dataclass(frozen=True)
class Slot:
    """One cell of a strip: the run, what became of it, and why."""

    run: Run
    outcome: str
    reason: str

    @property
    def label(self) -> str:
        return f"{self.run.fire_time:%Y-%m-%d %H:%M:%S}Z {self.outcome}: {self.reason}"


def classify(run: Run, late_after: timedelta) -> Slot:
    """The outcome of ``run`` and its reason (see the module docstring)."""
    slot = _classify_state(run, late_after)
    if run.for_slot:
        return slot
    return Slot(run, MANUAL, f"manual trigger, not a slot; {slot.reason}")


def _classify_state(run: Run, late_after: timedelta) -> Slot:
    lateness = run.lateness
    if run.state == "SUCCEEDED":
        late = lateness is not None and lateness > late_after
        took = f"lateness {human(lateness)}, took {human(run.duration)}"
        return Slot(run, "late" if late else "ran", f"succeeded; {took}")
    if run.state == "MISSED":
        return Slot(run, "missed", missed_reason(run.error))
    if run.state in _FAILED:
        why = run.error or run.cancel_reason or run.state.lower()
        return Slot(run, "failed", f"{run.state.lower().replace('_', ' ')}: {why}")
    if run.state == "WAITING":
        holder = f"claimed by {run.worker_id}" if run.worker_id else "claimed"
        return Slot(
            run,
            "waiting",
            f"waiting: {holder}; its body starts at its fire time (or once a job process is free)",
        )
    if run.state == "RUNNING":
        return Slot(run, "running", f"running; began {human(lateness)} after its fire time")
    return Slot(run, "running", "pending: waiting for a worker")


def strip(
    runs: Sequence[Run],
    late_after: timedelta,
    breaches: Mapping[tuple[str, datetime], DeadlineBreach] | None = None,
) -> list[Slot]:
    """The strip of ``runs``, oldest fire time first. A slot whose deadline was missed
    (``breaches``, by schedule and fire time) is ``failed-deadline`` whatever became
    of its run later, with the breach's reason first; a manual run stays ``manual``."""
    cells = []
    for run in sorted(runs, key=lambda r: r.fire_time):
        slot = classify(run, late_after)
        breach = (breaches or {}).get((run.schedule_id, run.fire_time))
        if breach is not None and run.for_slot:
            slot = Slot(run, DEADLINE_MISSED, f"{deadline_reason(breach)}; {slot.reason}")
        cells.append(slot)
    return cells


def last_slot(cells: Sequence[Slot]) -> Slot | None:
    """The newest cell of ``cells`` (oldest first) that is a slot, not a manual run."""
    return next((c for c in reversed(cells) if c.outcome != MANUAL), None)


def deadline_reason(breach: DeadlineBreach) -> str:
    """``deadline missed at 02:45:00Z: still_running (the run had not ended)``."""
    cause = f" ({breach.cause})" if breach.cause else ""
    return f"deadline missed at {breach.deadline_at:%Y-%m-%d %H:%M:%S}Z: {breach.reason}{cause}"


def by_slot(breaches: Sequence[DeadlineBreach]) -> dict[tuple[str, datetime], DeadlineBreach]:
    return {(b.schedule_id, b.fire_time): b for b in breaches}
