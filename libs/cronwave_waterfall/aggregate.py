"""The latency waterfall of many runs: one row per hop, broken down by kind of time.

For each hop present in the selected runs:

- ``wall``: the distribution of the hop's wall time over the runs that have the
  hop (``runs`` says how a run's figures are measured);
- one row per kind of time seen in the hop, over the same runs; a run where the
  kind did not occur counts 0, so the kinds' means add up to the hop's mean
  (``present`` counts the runs where it did occur);
- ``offset_ms`` / ``end_offset_ms``: the median start and end of the hop relative
  to the nominal fire time, its place on a time axis shared by all hops.

Plus the end-to-end and fire-lateness distributions and the tail attribution of
the same runs. Percentiles are exact (``percentiles`` says how). A selection that
names no trigger leaves backfill and catch-up runs out (``selection`` says why);
``set_aside`` counts them, and every rendering says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cronwave_core.telemetry.vocabulary import KINDS
from cronwave_waterfall.percentiles import Stats, median, summarize_ns
from cronwave_waterfall.runs import APP, SCENARIOS, Run, hop_order
from cronwave_waterfall.selection import RunFilter, select_runs, set_aside
from cronwave_waterfall.tail import TailAttribution, attribute_tail


@dataclass(frozen=True)
class KindRow:
    kind: str
    present: int
    stats: Stats


@dataclass(frozen=True)
class HopRow:
    hop: str
    stats: Stats
    offset_ms: float | None
    end_offset_ms: float | None
    kinds: tuple[KindRow, ...]


@dataclass(frozen=True)
class Waterfall:
    """A waterfall over ``runs`` runs selected by ``selection``."""

    runs: int
    selection: dict[str, Any]
    hops: tuple[HopRow, ...]
    end_to_end: Stats | None
    lateness: Stats | None
    tail: TailAttribution
    scenario: str | None = None
    scenario_counts: dict[str, int] = field(default_factory=dict)
    set_aside: dict[str, int] = field(default_factory=dict)

    def set_aside_note(self) -> str:
        """One sentence on the runs of their own population left out, or ``""``."""
        if not self.set_aside:
            return ""
        counts = " and ".join(f"{n} {name}" for name, n in self.set_aside.items())
        options = " or ".join(f"--trigger {name}" for name in self.set_aside)
        return (
            f"{counts} runs not counted: they fire late on purpose, so their lateness "
            f"is their own population ({options} shows them)"
        )


def kind_order(kinds: set[str]) -> list[str]:
    """The known kinds in the design's order, then any others by name."""
    return [k for k in KINDS if k in kinds] + sorted(kinds - set(KINDS))


def _hop_row(hop: str, runs: list[Run]) -> HopRow | None:
    having = [r for r in runs if hop in r.hop_ns]
    stats = summarize_ns([r.hop_ns[hop] for r in having])
    if stats is None:
        return None
    seen: set[str] = set()
    for r in having:
        seen.update(k for h, k in r.kind_ns if h == hop)
    rows = []
    for kind in kind_order(seen):
        values = [r.kind_ns.get((hop, kind), 0) for r in having]
        if kind == APP:
            present = sum(1 for v in values if v > 0)
        else:
            present = sum(1 for r in having if (hop, kind) in r.kind_ns)
        if present == 0:
            continue
        kind_stats = summarize_ns(values)
        assert kind_stats is not None  # ``having`` is not empty
        rows.append(KindRow(kind, present, kind_stats))
    starts = [r.hop_start_ns[hop] for r in having if hop in r.hop_start_ns]
    ends = [r.hop_end_ns[hop] for r in having if hop in r.hop_end_ns]
    return HopRow(
        hop=hop,
        stats=stats,
        offset_ms=median(starts) / 1e6 if starts else None,
        end_offset_ms=median(ends) / 1e6 if ends else None,
        kinds=tuple(rows),
    )


def _filter(selection: RunFilter | None, filters: dict[str, Any]) -> RunFilter:
    if selection is not None and filters:
        raise TypeError("pass either a RunFilter or filter keywords, not both")
    return selection if selection is not None else RunFilter(**filters)


def _waterfall_of(
    chosen: list[Run],
    selection: dict[str, Any],
    scenario: str | None,
    aside: dict[str, int] | None = None,
) -> Waterfall:
    hops = hop_order({hop for r in chosen for hop in r.hop_ns})
    rows = [row for hop in hops if (row := _hop_row(hop, chosen)) is not None]
    counts = dict.fromkeys(SCENARIOS, 0)
    for r in chosen:
        counts[r.scenario] = counts.get(r.scenario, 0) + 1
    return Waterfall(
        runs=len(chosen),
        selection=selection,
        hops=tuple(rows),
        end_to_end=summarize_ns([r.end_to_end_ns for r in chosen if r.end_to_end_ns is not None]),
        lateness=summarize_ns([r.lateness_ns for r in chosen if r.lateness_ns is not None]),
        tail=attribute_tail(chosen),
        scenario=scenario,
        scenario_counts=counts,
        set_aside=aside or {},
    )


def waterfall(runs: Sequence[Run], selection: RunFilter | None = None, **filters: Any) -> Waterfall:
    """The waterfall of the runs that ``selection`` (or ``RunFilter(**filters)``:
    ``last``, ``since``, ``until``, ``schedule_id``, ``job_type``, ``scenario``,
    ``trigger``) keeps."""
    chosen_filter = _filter(selection, filters)
    chosen = select_runs(runs, chosen_filter)
    return _waterfall_of(
        chosen,
        chosen_filter.describe(),
        chosen_filter.scenario,
        set_aside(runs, chosen_filter),
    )


def compare_scenarios(
    runs: Sequence[Run], selection: RunFilter | None = None, **filters: Any
) -> list[Waterfall]:
    """Scenarios side by side: the runs the filter keeps (all of its fields but
    ``scenario``, so ``last=100`` means the last 100 runs, whatever their path) split
    by scenario; one waterfall per scenario that has runs, in ``local``, ``redis``,
    ``miss`` order (only the filter's scenario if it names one)."""
    base = _filter(selection, filters)
    overall = replace(base, scenario=None)
    chosen = select_runs(runs, overall)
    out = []
    for name in SCENARIOS:
        if base.scenario is not None and base.scenario != name:
            continue
        members = [r for r in chosen if r.scenario == name]
        if members:
            aside = set_aside(runs, replace(overall, scenario=name))
            out.append(
                _waterfall_of(members, {**overall.describe(), "scenario": name}, name, aside)
            )
    return out
