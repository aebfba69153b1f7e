"""Tail attribution: what the slowest runs spend their extra time on, and what they share.

Over the runs that have an end-to-end time:

- The **tail** is the runs whose end-to-end is above its p99 (if ties leave none
  strictly above, the runs at the maximum). The **rest** is every other run.
- The **median run** is the typical run built from medians: for each (hop, kind),
  the median of that time over all runs (0 where a run lacks it). One median run
  per figure is steadier than any single run picked as "the median".
- A (hop, kind)'s **excess** is the time all of its own slowest 1% of runs (at least
  ``MIN_RUNS_PER_CAUSE``) spend on it beyond its own median over all runs, counting
  only runs whose time there **recurs**: at least as many runs (itself included) lie
  within ``RECUR_TOLERANCE`` (10%) of its excess, or within the (hop, kind)'s own
  spread (1.4826 x its median absolute deviation) where that is wider. It is the least
  of those runs' excesses. A cause recurs at one hop and kind and at one value: a
  delay in 1% of the runs or more puts that many runs at that delay. The host's
  stalls (CPU steal, a commit waiting on a shared disk) take a run here and there,
  each for its own 30 to 150 ms: scattered, they are read at no hop, even at one
  where they are slower than the cause and more than 1% of its runs. A time spread
  wide and dense (a job's own work) recurs everywhere, so its excess is its plain
  slowest 1%'s. The excess is read per (hop, kind) over all runs, not over the runs
  above the end-to-end p99, which may all be stalls. At least three runs: with fewer
  than 300 runs 1% is one or two, and one stall would be named.
- An excess **stands out** when more runs lie within 10% of it than between half of
  it and it: a cluster above a gap, as a fixed delay's runs stand above the rest of
  their hop, not the top of a slope (a loaded database's commits, 20 to 150 ms and
  every value between). The (hop, kind)s whose excess stands out and is at least
  1/``STAND_OUT_MARGIN`` (half) of the largest come first, the one whose excess more
  runs share first; the rest follow by excess. A cause recurs in more runs than stalls
  that happen to bunch up (five of them at 76 to 90 ms, in one trial), and than the
  top of a hop's own slope a little slower than it.
- So a cause in fewer than 1% of the runs, or in fewer than three, is not named; nor
  a delay below a dense tail of slow runs: its own (hop, kind)'s, or another's more
  than twice as slow; and stalls that bunch up (within 10% of each other, above a
  gap) in more runs than the cause can be. A contribution's **share** is its excess
  over the sum of all positive excesses (0 if negative). The tail's end-to-end excess
  (its mean minus the median end-to-end) is reported beside it; ``tail_mean_ms`` is
  the (hop, kind)'s mean over the tail runs.
- **Attributes** over-represented in the tail: for every span attribute value a run
  carries (a run "has" ``key=value`` if any of its spans does), the share of tail
  runs that have it against the share of the rest. Ids and times are ignored:
  run ids, fire times, and any key with more than ``MAX_VALUES`` distinct values;
  an ``*.attempt`` number becomes ``>1`` (a retry) or nothing. So is what says where a
  call went or what it said rather than why it was slow: a connection's address and
  port (``net.*``, ``network.*``, ``server.*``, ``client.*``: every connection of a
  pool has its own, and a slow run's are as arbitrary as any), a statement's text
  (``db.statement``, ``db.query.text``) and any value over ``MAX_VALUE_CHARS``
  characters.

The **headline** is one line: the first-ranked excess, its share, the attribute most
over-represented among tail runs (preferring one seen on that hop's spans; only
one that at least half the tail runs carry, at least 25 points more often than the
rest, and only when the tail has 5 runs or more: one slow run shares every
attribute it has), and the excess in milliseconds as the estimate of the delay it
adds to a tail run.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cronwave_core.telemetry.vocabulary import (
    ATTR_CACHE_HIT,
    ATTR_FIRE_TIME,
    ATTR_HOP,
    ATTR_KIND,
    ATTR_RUN_ID,
)
from cronwave_waterfall.percentiles import quantile
from cronwave_waterfall.runs import ATTR_LATENESS_MS, Run, hop_order

MAX_VALUES = 64
#: The share of its slowest runs a (hop, kind)'s excess is common to: 1%, the p99's.
TAIL_SHARE = 0.01
#: A cause is seen in at least this many runs: one or two slow runs are not a pattern.
MIN_RUNS_PER_CAUSE = 3
#: Runs whose excesses are within this share of each other are at one value: a cause's
#: runs are, give or take the hop's own jitter; and it is half the truth trials' 20%.
RECUR_TOLERANCE = 0.1
#: The median absolute deviation times this is a normal distribution's sigma.
_MAD_TO_SIGMA = 1.4826
#: (hop, kind)s whose excess stands out are named first if it is at least the largest
#: over this: a cause before a hop's own slope of slow runs a little slower than it.
STAND_OUT_MARGIN = 2.0
#: A longer attribute value is text (a statement, a message), never a cause to name.
MAX_VALUE_CHARS = 64
#: Keys that say where a call went: an address or port per connection.
_ENDPOINT_PREFIXES = ("net.", "network.", "server.", "client.", "peer.")
#: Keys that hold a statement's text.
_STATEMENTS = {"db.statement", "db.query.text"}
MIN_SKEW_FOR_HEADLINE = 0.25
MIN_TAIL_FREQUENCY_FOR_HEADLINE = 0.5
MIN_TAIL_RUNS_FOR_CAUSE = 5
_IGNORED = {ATTR_RUN_ID, ATTR_FIRE_TIME, ATTR_HOP, ATTR_KIND, ATTR_LATENESS_MS}
_CACHE_LABELS = {"miss": "cache miss", "redis": "redis hit", "local": "local hit"}


@dataclass(frozen=True)
class Contribution:
    """The tail's excess over the median run for one (hop, kind)."""

    hop: str
    kind: str
    excess_ms: float
    share: float
    tail_mean_ms: float
    median_ms: float


@dataclass(frozen=True)
class AttributeSkew:
    """How often tail runs carry ``key=value`` against the rest."""

    key: str
    value: str
    tail_frequency: float
    rest_frequency: float

    @property
    def label(self) -> str:
        if self.key == ATTR_CACHE_HIT:
            return _CACHE_LABELS.get(self.value, f"cache {self.value}")
        if self.key.endswith(".attempt") and self.value == ">1":
            return "retried"
        return f"{self.key.removeprefix('cronwave.')}={self.value}"


@dataclass(frozen=True)
class TailAttribution:
    """See the module docstring. Times in milliseconds."""

    headline: str
    runs: int
    tail_runs: int
    threshold_ms: float | None
    median_end_to_end_ms: float | None
    tail_end_to_end_ms: float | None
    contributions: tuple[Contribution, ...]
    attributes: tuple[AttributeSkew, ...]

    @property
    def top(self) -> Contribution | None:
        return self.contributions[0] if self.contributions else None


def _feature(key: str, value: Any) -> tuple[str, str] | None:
    """The feature ``key=value`` stands for, if any (see the module docstring)."""
    if key in _IGNORED or key in _STATEMENTS or key.startswith(_ENDPOINT_PREFIXES):
        return None
    if key.endswith(".attempt"):
        try:
            retried = not isinstance(value, bool) and float(value) > 1
        except (TypeError, ValueError):
            return None
        return (key, ">1") if retried else None
    if isinstance(value, bool):
        return (key, "true" if value else "false")
    if isinstance(value, str | int):
        text = str(value)
        return (key, text) if len(text) <= MAX_VALUE_CHARS else None
    return None


def _attribute_features(attributes: Mapping[str, Any]) -> set[tuple[str, str]]:
    return {f for key, value in attributes.items() if (f := _feature(key, value)) is not None}


def _features(run: Run) -> set[tuple[str, str]]:
    # The spans of a run repeat the same attributes (run id, schedule, ...): collect
    # the distinct (key, value) pairs first, classify each once.
    pairs: set[tuple[str, Any]] = set()
    for span in run.spans:
        try:
            pairs.update(span.attributes.items())
        except TypeError:  # a list value somewhere: never a feature, skip it
            pairs.update(i for i in span.attributes.items() if not isinstance(i[1], list | dict))
    return {f for key, value in pairs if (f := _feature(key, value)) is not None}


def _skews(tail: list[Run], rest: list[Run]) -> list[AttributeSkew]:
    tail_counts: Counter[tuple[str, str]] = Counter()
    rest_counts: Counter[tuple[str, str]] = Counter()
    for run in tail:
        tail_counts.update(_features(run))
    for run in rest:
        rest_counts.update(_features(run))
    values_per_key: Counter[str] = Counter(key for key, _ in tail_counts.keys() | rest_counts)
    skews = []
    for (key, value), count in tail_counts.items():
        if values_per_key[key] > MAX_VALUES:
            continue
        tail_freq = count / len(tail)
        rest_freq = rest_counts[(key, value)] / len(rest) if rest else 0.0
        if tail_freq > rest_freq:
            skews.append(AttributeSkew(key, value, tail_freq, rest_freq))
    skews.sort(key=lambda s: (-(s.tail_frequency - s.rest_frequency), -s.tail_frequency, s.key))
    return skews


def _headline_attribute(
    skews: list[AttributeSkew], tail: list[Run], hop: str
) -> AttributeSkew | None:
    if len(tail) < MIN_TAIL_RUNS_FOR_CAUSE:
        return None
    strong = [
        s
        for s in skews
        if s.tail_frequency >= MIN_TAIL_FREQUENCY_FOR_HEADLINE
        and s.tail_frequency - s.rest_frequency >= MIN_SKEW_FOR_HEADLINE
    ]
    if not strong:
        return None
    on_hop: set[tuple[str, str]] = set()
    for run in tail:
        for span in run.spans:
            if span.attributes.get(ATTR_HOP) == hop:
                on_hop.update(_attribute_features(span.attributes))
    for skew in strong:
        if (skew.key, skew.value) in on_hop:
            return skew
    return strong[0]


def recurring_level(ordered: Sequence[float], slowest: int) -> float:
    """How far above their median all of the ``slowest`` slowest recurring values of
    ``ordered`` (sorted) lie: the least of their excesses (see the module docstring;
    0 when fewer than ``slowest`` values above the median recur)."""
    if not ordered:
        return 0.0
    med = quantile(ordered, 0.5)
    deviations = sorted(abs(v - med) for v in ordered)
    spread = _MAD_TO_SIGMA * quantile(deviations, 0.5)
    recurring = 0
    for value in reversed(ordered):
        excess = value - med
        if excess <= 0:
            break
        band = max(RECUR_TOLERANCE * excess, spread)
        near = bisect.bisect_right(ordered, value + band) - bisect.bisect_left(
            ordered, value - band
        )
        if near >= slowest:
            recurring += 1
            if recurring == slowest:
                return excess
    return 0.0


def standing_runs(ordered: Sequence[float], excess: float) -> int:
    """How many of ``ordered`` (sorted) lie within ``RECUR_TOLERANCE`` of ``excess`` over
    their median, when more do than between half of it and that (a cluster standing
    above the values' own continuum, as a fixed delay's runs stand above the rest of
    their hop); 0 when fewer do."""
    if not ordered or excess <= 0:
        return 0
    med = quantile(ordered, 0.5)
    low, high = med + (1 - RECUR_TOLERANCE) * excess, med + (1 + RECUR_TOLERANCE) * excess
    at = bisect.bisect_right(ordered, high) - bisect.bisect_left(ordered, low)
    below = bisect.bisect_left(ordered, low) - bisect.bisect_left(ordered, med + excess / 2)
    return at if at > below else 0


def stands_out(ordered: Sequence[float], excess: float) -> bool:
    """Whether ``excess`` stands out of ``ordered`` (see ``standing_runs``)."""
    return standing_runs(ordered, excess) > 0


def attribute_tail(runs: Sequence[Run], top_attributes: int = 10) -> TailAttribution:
    """Where the p99 tail of ``runs`` spends its extra time (see the module docstring)."""
    completed = [r for r in runs if r.end_to_end_ns is not None]
    if len(completed) < 2:
        return TailAttribution(
            headline=f"p99 tail: not enough completed runs to compare ({len(completed)})",
            runs=len(completed),
            tail_runs=0,
            threshold_ms=None,
            median_end_to_end_ms=None,
            tail_end_to_end_ms=None,
            contributions=(),
            attributes=(),
        )
    e2e = sorted(r.end_to_end_ns or 0 for r in completed)
    threshold = quantile(e2e, 0.99)
    tail = [r for r in completed if (r.end_to_end_ns or 0) > threshold]
    if not tail:
        tail = [r for r in completed if r.end_to_end_ns == e2e[-1]]
    tail_ids = {id(r) for r in tail}
    rest = [r for r in completed if id(r) not in tail_ids]

    keys: set[tuple[str, str]] = set()
    for r in completed:
        keys.update(r.kind_ns)
    order = {hop: i for i, hop in enumerate(hop_order({h for h, _ in keys}))}
    contributions: list[Contribution] = []
    #: Per (hop, kind): how many runs stand out at its excess (0: it does not stand out).
    standing: dict[tuple[str, str], int] = {}
    # How many of its slowest runs a (hop, kind)'s excess must be common to.
    slowest = min(len(completed), max(MIN_RUNS_PER_CAUSE, math.ceil(len(completed) * TAIL_SHARE)))
    for hop, kind in keys:
        values = sorted(r.kind_ns.get((hop, kind), 0) for r in completed)
        med = quantile(values, 0.5)
        own_tail = recurring_level(values, slowest)
        standing[(hop, kind)] = standing_runs(values, own_tail)
        tail_mean = sum(r.kind_ns.get((hop, kind), 0) for r in tail) / len(tail)
        contributions.append(
            Contribution(hop, kind, own_tail / 1e6, 0.0, tail_mean / 1e6, med / 1e6)
        )
    positive = sum(c.excess_ms for c in contributions if c.excess_ms > 0)
    contributions = [
        Contribution(
            c.hop,
            c.kind,
            c.excess_ms,
            c.excess_ms / positive if positive > 0 and c.excess_ms > 0 else 0.0,
            c.tail_mean_ms,
            c.median_ms,
        )
        for c in contributions
    ]
    largest = max((c.excess_ms for c in contributions), default=0.0)

    def standing_first(c: Contribution) -> int:
        near = c.excess_ms * STAND_OUT_MARGIN >= largest
        return standing[(c.hop, c.kind)] if near else 0

    contributions.sort(key=lambda c: (-standing_first(c), -c.excess_ms, order[c.hop], c.kind))

    skews = _skews(tail, rest)
    median_e2e = quantile(e2e, 0.5) / 1e6
    tail_e2e = sum(r.end_to_end_ns or 0 for r in tail) / len(tail) / 1e6
    top = contributions[0] if contributions else None
    if top is None or top.excess_ms <= 0:
        headline = (
            f"p99 tail: no hop is slower than in the median run "
            f"({len(tail)} runs > p99 {threshold / 1e6:.1f} ms)"
        )
    else:
        attribute = _headline_attribute(skews, tail, top.hop)
        because = f" ({attribute.label})" if attribute else ""
        headline = (
            f"p99 tail: {top.share:.0%} {top.kind} in {top.hop}{because}, "
            f"+{top.excess_ms:.1f} ms per tail run "
            f"(tail {tail_e2e - median_e2e:+.1f} ms end-to-end over the median run; "
            f"{len(tail)} of {len(completed)} runs > p99 {threshold / 1e6:.1f} ms)"
        )
    return TailAttribution(
        headline=headline,
        runs=len(completed),
        tail_runs=len(tail),
        threshold_ms=threshold / 1e6,
        median_end_to_end_ms=median_e2e,
        tail_end_to_end_ms=tail_e2e,
        contributions=tuple(contributions),
        attributes=tuple(skews[:top_attributes]),
    )
