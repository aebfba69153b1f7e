"""Which runs a waterfall covers: trigger, schedule, job type, scenario, time range,
last N.

Filters apply in that order, and ``last`` last: "the last 100 runs of schedule X"
means X's 100 most recent, not X's share of the 100 most recent. A run's time is
its fire time (else its first span's start); ``since`` is inclusive, ``until``
exclusive.

Trigger: a filter naming one (``scheduled``, ``manual``, ``backfill``, ``catchup``)
keeps the runs of that trigger only. A filter naming none keeps every run *but*
backfill and catch-up runs (``runs.OWN_POPULATION``): those fire late on purpose,
hours or days after their slot, so counted with the rest they would make the
lateness and end-to-end figures say how far back the slots were, not how the
scheduler did (one backfill stretches a p99 to hours). ``set_aside`` counts what the
default left out, so every view can say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from cronwave_core.errors import InvalidArgument
from cronwave_waterfall.runs import OWN_POPULATION, SCENARIOS, TRIGGERS, Run, epoch_ns


@dataclass(frozen=True)
class RunFilter:
    """A selection of runs; every field left ``None`` selects everything."""

    last: int | None = None
    since: datetime | None = None
    until: datetime | None = None
    schedule_id: str | None = None
    job_type: str | None = None
    scenario: str | None = None
    trigger: str | None = None

    def __post_init__(self) -> None:
        if self.last is not None and self.last < 1:
            raise InvalidArgument("last", f"must be at least 1, got {self.last}")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise InvalidArgument(name, "must carry a time zone (e.g. 2024-05-01T00:00:00Z)")
        if self.since and self.until and self.since >= self.until:
            raise InvalidArgument("until", "must be after since")
        if self.scenario is not None and self.scenario not in SCENARIOS:
            raise InvalidArgument(
                "scenario", f"must be one of {', '.join(SCENARIOS)}, got {self.scenario!r}"
            )
        if self.trigger is not None and self.trigger not in TRIGGERS:
            raise InvalidArgument(
                "trigger",
                f"must be one of {', '.join(TRIGGERS)} (why the run exists), got {self.trigger!r}",
            )

    def describe(self) -> dict[str, Any]:
        """The fields that are set, as JSON-ready values."""
        out: dict[str, Any] = {}
        for name in ("last", "since", "until", "schedule_id", "job_type", "scenario", "trigger"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value.isoformat() if isinstance(value, datetime) else value
        return out


def _of_trigger(runs: list[Run], trigger: str | None) -> list[Run]:
    if trigger is None:
        return [r for r in runs if r.trigger not in OWN_POPULATION]
    return [r for r in runs if r.trigger == trigger]


def select_runs(runs: Sequence[Run], selection: RunFilter | None = None) -> list[Run]:
    """The runs ``selection`` keeps, in time order (no selection: every run, of every
    trigger)."""
    chosen = sorted(runs, key=lambda r: (r.ordering_ns, r.run_id))
    if selection is None:
        return chosen
    return _narrow(_of_trigger(chosen, selection.trigger), selection)


def set_aside(runs: Sequence[Run], selection: RunFilter) -> dict[str, int]:
    """How many runs of each of ``OWN_POPULATION`` a selection naming no trigger left
    out: those its other fields keep (with ``last``, those at or after the earliest
    run it kept). Empty when the selection names a trigger, or left none out."""
    if selection.trigger is not None:
        return {}
    chosen = sorted(runs, key=lambda r: (r.ordering_ns, r.run_id))
    kept = select_runs(chosen, selection)
    aside = _narrow(
        [r for r in chosen if r.trigger in OWN_POPULATION], replace(selection, last=None)
    )
    if selection.last is not None:
        if not kept:
            return {}
        aside = [r for r in aside if r.ordering_ns >= kept[0].ordering_ns]
    counts = {name: sum(1 for r in aside if r.trigger == name) for name in OWN_POPULATION}
    return {name: n for name, n in counts.items() if n}


def _narrow(chosen: list[Run], selection: RunFilter) -> list[Run]:
    if selection.schedule_id is not None:
        chosen = [r for r in chosen if r.schedule_id == selection.schedule_id]
    if selection.job_type is not None:
        chosen = [r for r in chosen if r.job_type == selection.job_type]
    if selection.scenario is not None:
        chosen = [r for r in chosen if r.scenario == selection.scenario]
    if selection.since is not None:
        since_ns = epoch_ns(selection.since)
        chosen = [r for r in chosen if r.ordering_ns >= since_ns]
    if selection.until is not None:
        until_ns = epoch_ns(selection.until)
        chosen = [r for r in chosen if r.ordering_ns < until_ns]
    if selection.last is not None:
        chosen = chosen[-selection.last :]
    return chosen
