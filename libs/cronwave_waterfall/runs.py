"""Runs: the spans of one scheduled run, and the times the waterfall is made of.

``build_runs(spans)`` groups spans into runs (``placement`` says how) and measures,
per run, in integer nanoseconds:

- **Hop wall time** (``hop_ns[hop]``): the union of the intervals of the hop's
  spans, minus the time of spans of *other* hops nested under them in the span
  tree (a dispatcher waiting on the store is ``persist`` time, not ``dispatch``).
- **Time per (hop, kind)** (``kind_ns[(hop, kind)]``) for every kind but ``app``:
  the union of the intervals of the spans with that hop and kind (nested or
  overlapping spans of the same hop and kind count once), minus the same nested
  other-hop time; plus, for ``network``, the derived network time of each RPC
  (client minus server duration), added per call. A connection's set-up counts
  once, as its narrowest kind: ``dns`` time is out of ``connect``, and both are out
  of the hop's other kinds (a connection opened inside a pool checkout).
- **App** (``kind_ns[(hop, "app")]``): the hop's wall time minus the sum of its
  other kinds, never negative. Spans marked ``cronwave.kind=app`` only contribute
  wall time: ``app`` is always the remainder, so a job body that does SQL is not
  counted twice. When kinds overlap each other (a cache look-up inside a database
  span), their sum can exceed the wall time; ``app`` is then 0.
- **End-to-end** (``end_to_end_ns``): the end of the last ``complete`` span minus
  the nominal fire time (``cronwave.fire_time``, ISO-8601); unset for a run with
  no ``complete`` span or no fire time.
- **Fire lateness** (``lateness_ns``): ``cronwave.lateness_ms`` when a span
  carries it (an ``execute`` span's first), else the start of the earliest
  ``execute`` span minus the fire time.
- **Hop position** (``hop_start_ns``/``hop_end_ns``): first start and last end of
  the hop's spans, relative to the fire time (so they can be negative: the planner
  works ahead of the fire).

A run's **trigger** is why it exists (``scheduled``, ``manual``, ``backfill``,
``catchup``), as the first of its spans that says (``cronwave.trigger``); ``""`` when
none does (traces older than the attribute).

A run's **scenario** is where its look-ups were answered: ``miss`` if any span has
``cronwave.cache.hit=miss``, else ``redis`` if any says ``redis``, else ``local``.
Look-ups of a de-duplication cache (``cronwave.cache.name=dedup``) do not count: a
new run is never in it, so its miss says nothing about the path the run took.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cronwave_core.telemetry.vocabulary import (
    ATTR_CACHE_HIT,
    ATTR_CACHE_NAME,
    ATTR_FIRE_TIME,
    ATTR_SCHEDULE_ID,
    ATTR_TRIGGER,
    HOPS,
)
from cronwave_waterfall import intervals
from cronwave_waterfall.placement import NETWORK, Placed, place
from cronwave_waterfall.span import Span

APP = "app"
DNS = "dns"
CONNECT = "connect"
SETUP_KINDS = (DNS, CONNECT)
ATTR_JOB_TYPE = "cronwave.job_type"
ATTR_LATENESS_MS = "cronwave.lateness_ms"
SCENARIOS = ("local", "redis", "miss")
TRIGGERS = ("scheduled", "manual", "backfill", "catchup")
#: Runs late by design (a slot fired hours or days after its time, on purpose): their
#: lateness and end-to-end say how far back the slot was, not how the scheduler did,
#: so they are a population of their own, outside the default waterfall.
OWN_POPULATION = ("backfill", "catchup")
DEDUP_CACHE = "dedup"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Run:
    """One run's spans and measurements (see the module docstring).

    Times relative to the fire time (``hop_start_ns``, ``hop_end_ns``) are empty
    when the run has no fire time.
    """

    run_id: str
    schedule_id: str
    job_type: str
    fire_time: datetime | None
    fire_ns: int | None
    scenario: str
    spans: tuple[Span, ...]
    started_ns: int
    trigger: str = ""
    hop_ns: dict[str, int] = field(default_factory=dict)
    kind_ns: dict[tuple[str, str], int] = field(default_factory=dict)
    hop_start_ns: dict[str, int] = field(default_factory=dict)
    hop_end_ns: dict[str, int] = field(default_factory=dict)
    end_to_end_ns: int | None = None
    lateness_ns: int | None = None

    @property
    def end_to_end(self) -> timedelta | None:
        return (
            None
            if self.end_to_end_ns is None
            else timedelta(microseconds=self.end_to_end_ns / 1000)
        )

    @property
    def lateness(self) -> timedelta | None:
        return None if self.lateness_ns is None else timedelta(microseconds=self.lateness_ns / 1000)

    @property
    def ordering_ns(self) -> int:
        """The run's place in time: its fire time, else its first span's start."""
        return self.started_ns if self.fire_ns is None else self.fire_ns


def epoch_ns(moment: datetime) -> int:
    """Nanoseconds since the Unix epoch, exactly (no float rounding)."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def parse_instant(raw: object) -> datetime | None:
    """An aware UTC datetime from ISO-8601 (``Z`` or an offset); naive means UTC.
    ``None`` for anything unparseable: a run without a readable fire time has no
    end-to-end or lateness, but its hops still count."""
    if isinstance(raw, datetime):
        moment = raw
    elif isinstance(raw, str) and raw:
        try:
            moment = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _number(raw: object) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw)
        except ValueError:
            return None
    return None


def trigger_of(run: Run) -> str:
    """Why the run exists, as its spans say (``scheduled``, ``manual``...; ``""``)."""
    return run.trigger


def hop_order(hops: Iterable[str]) -> list[str]:
    """Hops in run order: the seven known hops first, then any others by name."""
    known = [h for h in HOPS if h in hops]
    return known + sorted(h for h in set(hops) if h not in HOPS)


def build_runs(spans: Iterable[Span]) -> list[Run]:
    """Runs from spans, ordered by fire time (then run id). Spans repeated across
    sources (same trace and span id) count once."""
    # Hundreds of thousands of small acyclic objects are made here; pausing the
    # cycle collector meanwhile saves a third of the time and leaks nothing.
    collecting = gc.isenabled()
    gc.disable()
    try:
        by_run: dict[str, list[Placed]] = {}
        for p in place(spans):
            by_run.setdefault(p.run_id, []).append(p)
        runs = [_measure(run_id, members) for run_id, members in by_run.items()]
    finally:
        if collecting:
            gc.enable()
    runs.sort(key=lambda r: (r.ordering_ns, r.run_id))
    return runs


def _first_attribute(members: list[Placed], key: str) -> object:
    for p in members:
        value = p.span.attributes.get(key)
        if value is not None and value != "":
            return value
    return None


def _scenario(members: list[Placed]) -> str:
    hits = {
        p.span.attributes.get(ATTR_CACHE_HIT)
        for p in members
        if p.span.attributes.get(ATTR_CACHE_NAME) != DEDUP_CACHE
    }
    if "miss" in hits:
        return "miss"
    if "redis" in hits:
        return "redis"
    return "local"


def _carve_setup(covered: dict[tuple[str, str], list[tuple[int, int]]]) -> None:
    """Set-up time counts once, as its narrowest kind: a hop's ``dns`` time is taken out
    of its ``connect`` time, and both out of its other kinds (a connection opened
    inside a pool checkout's ``database`` span, a look-up's ``cache`` span)."""
    for hop in {hop for hop, kind in covered if kind in SETUP_KINDS}:
        dns = covered.get((hop, DNS), [])
        if dns and (hop, CONNECT) in covered:
            covered[(hop, CONNECT)] = intervals.subtract(covered[(hop, CONNECT)], dns)
        setup = intervals.union(dns + covered.get((hop, CONNECT), []))
        for key in [k for k in covered if k[0] == hop and k[1] not in SETUP_KINDS]:
            covered[key] = intervals.subtract(covered[key], setup)


def _measure(run_id: str, members: list[Placed]) -> Run:
    fire = parse_instant(_first_attribute(members, ATTR_FIRE_TIME))
    fire_ns = epoch_ns(fire) if fire is not None else None

    walls: dict[str, list[tuple[int, int]]] = {}
    nested: dict[str, list[tuple[int, int]]] = {}
    typed: dict[tuple[str, str], list[tuple[int, int]]] = {}
    derived: dict[str, int] = {}
    for p in members:
        s = p.span
        interval = (s.start_ns, s.end_ns)
        for outer in p.outer_hops:
            if outer != p.hop:
                nested.setdefault(outer, []).append(interval)
        if p.hop is None:
            continue
        walls.setdefault(p.hop, []).append(interval)
        if p.derived_network_ns is not None:
            derived[p.hop] = derived.get(p.hop, 0) + p.derived_network_ns
        elif p.kind is not None and p.kind != APP:
            typed.setdefault((p.hop, p.kind), []).append(interval)

    hop_ns: dict[str, int] = {}
    kind_ns: dict[tuple[str, str], int] = {}
    hop_start: dict[str, int] = {}
    hop_end: dict[str, int] = {}
    excluded = {hop: intervals.union(spans) for hop, spans in nested.items()}
    for hop, spans in walls.items():
        cut = excluded.get(hop, [])
        covered = intervals.union(spans)
        wall = intervals.length(intervals.subtract(covered, cut))
        hop_ns[hop] = wall
        if fire_ns is not None:
            hop_start[hop] = covered[0][0] - fire_ns if covered else spans[0][0] - fire_ns
            hop_end[hop] = covered[-1][1] - fire_ns if covered else spans[0][1] - fire_ns
    covered_by: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for (hop, kind), spans in typed.items():
        cut = excluded.get(hop, [])
        covered_by[(hop, kind)] = intervals.subtract(intervals.union(spans), cut)
    _carve_setup(covered_by)
    for key, kept in covered_by.items():
        kind_ns[key] = intervals.length(kept)
    for hop, network in derived.items():
        kind_ns[(hop, NETWORK)] = kind_ns.get((hop, NETWORK), 0) + network
    typed_total: dict[str, int] = {}
    for (hop, _), value in kind_ns.items():
        typed_total[hop] = typed_total.get(hop, 0) + value
    for hop, wall in hop_ns.items():
        kind_ns[(hop, APP)] = max(0, wall - typed_total.get(hop, 0))

    end_to_end: int | None = None
    lateness: int | None = None
    executes = [p for p in members if p.hop == "execute"]
    stated = _first_attribute(executes, ATTR_LATENESS_MS)
    if stated is None:
        stated = _first_attribute(members, ATTR_LATENESS_MS)
    stated_ms = _number(stated)
    if stated_ms is not None:
        lateness = round(stated_ms * 1_000_000)
    if fire_ns is not None:
        completes = [p.span.end_ns for p in members if p.hop == "complete"]
        if completes:
            end_to_end = max(completes) - fire_ns
        if lateness is None and executes:
            lateness = min(p.span.start_ns for p in executes) - fire_ns

    return Run(
        run_id=run_id,
        schedule_id=str(_first_attribute(members, ATTR_SCHEDULE_ID) or ""),
        job_type=str(_first_attribute(members, ATTR_JOB_TYPE) or ""),
        fire_time=fire,
        fire_ns=fire_ns,
        scenario=_scenario(members),
        spans=tuple(p.span for p in members),
        started_ns=min(p.span.start_ns for p in members),
        trigger=str(_first_attribute(members, ATTR_TRIGGER) or ""),
        hop_ns=hop_ns,
        kind_ns=kind_ns,
        hop_start_ns=hop_start,
        hop_end_ns=hop_end,
        end_to_end_ns=end_to_end,
        lateness_ns=lateness,
    )
