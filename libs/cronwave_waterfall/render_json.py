"""JSON rendering, schema ``cronwave.waterfall/v1``. Stable: fields are only ever added.

One waterfall::

    {
      "schema": "cronwave.waterfall/v1",
      "unit": "ms",
      "percentiles": "exact, linear interpolation between closest ranks (type 7)",
      "runs": 5000,                       # runs selected
      "selection": {"last": 5000, ...},   # the filter fields that were set
      "scenario": "miss" | null,
      "scenario_counts": {"local": 0, "redis": 0, "miss": 0},
      "set_aside": {"backfill": 3},       # runs a selection naming no trigger left
                                          # out, by trigger (see ``selection``)
      "set_aside_note": "3 backfill runs not counted: ..." | "",
      "tail": {
        "headline": "p99 tail: ...",      # the one line to show first
        "runs": 5000, "tail_runs": 50,    # completed runs, runs above p99
        "threshold_ms": 61.2, "median_end_to_end_ms": 14.1, "tail_end_to_end_ms": 64.9,
        "contributions": [                # by excess, largest first
          {"hop", "kind", "excess_ms", "share", "tail_mean_ms", "median_ms"}],
        "attributes": [                   # over-represented in the tail, strongest first
          {"key", "value", "label", "tail_frequency", "rest_frequency"}]
      },
      "end_to_end": STATS | null,
      "lateness": STATS | null,
      "hops": [                           # run order: plan .. complete, then others
        {"hop", "offset_ms", "end_offset_ms", "wall": STATS,
         "kinds": [{"kind", "present", "stats": STATS}]}]
    }

``STATS`` is ``{"count", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"}``.
Compare mode wraps several: ``{"schema": "cronwave.waterfall-compare/v1",
"scenarios": [<one waterfall as above>, ...]}``. Keys are sorted, floats rounded
to microseconds, so equal inputs give byte-identical output.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from cronwave_waterfall.aggregate import Waterfall
from cronwave_waterfall.percentiles import Stats
from cronwave_waterfall.tail import TailAttribution

SCHEMA = "cronwave.waterfall/v1"
COMPARE_SCHEMA = "cronwave.waterfall-compare/v1"
PERCENTILES = "exact, linear interpolation between closest ranks (type 7)"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _stats(stats: Stats | None) -> dict[str, Any] | None:
    if stats is None:
        return None
    return {k: (v if k == "count" else _round(v)) for k, v in asdict(stats).items()}


def _tail(tail: TailAttribution) -> dict[str, Any]:
    return {
        "headline": tail.headline,
        "runs": tail.runs,
        "tail_runs": tail.tail_runs,
        "threshold_ms": _round(tail.threshold_ms),
        "median_end_to_end_ms": _round(tail.median_end_to_end_ms),
        "tail_end_to_end_ms": _round(tail.tail_end_to_end_ms),
        "contributions": [
            {
                "hop": c.hop,
                "kind": c.kind,
                "excess_ms": _round(c.excess_ms),
                "share": round(c.share, 4),
                "tail_mean_ms": _round(c.tail_mean_ms),
                "median_ms": _round(c.median_ms),
            }
            for c in tail.contributions
        ],
        "attributes": [
            {
                "key": a.key,
                "value": a.value,
                "label": a.label,
                "tail_frequency": round(a.tail_frequency, 4),
                "rest_frequency": round(a.rest_frequency, 4),
            }
            for a in tail.attributes
        ],
    }


def waterfall_to_dict(waterfall: Waterfall) -> dict[str, Any]:
    """One waterfall as the schema's object (see the module docstring)."""
    return {
        "schema": SCHEMA,
        "unit": "ms",
        "percentiles": PERCENTILES,
        "runs": waterfall.runs,
        "selection": waterfall.selection,
        "scenario": waterfall.scenario,
        "scenario_counts": waterfall.scenario_counts,
        "set_aside": waterfall.set_aside,
        "set_aside_note": waterfall.set_aside_note(),
        "tail": _tail(waterfall.tail),
        "end_to_end": _stats(waterfall.end_to_end),
        "lateness": _stats(waterfall.lateness),
        "hops": [
            {
                "hop": row.hop,
                "offset_ms": _round(row.offset_ms),
                "end_offset_ms": _round(row.end_offset_ms),
                "wall": _stats(row.stats),
                "kinds": [
                    {"kind": k.kind, "present": k.present, "stats": _stats(k.stats)}
                    for k in row.kinds
                ],
            }
            for row in waterfall.hops
        ],
    }


def render_json(waterfall: Waterfall | Sequence[Waterfall]) -> str:
    """The JSON text of one waterfall, or of several side by side (compare mode)."""
    if isinstance(waterfall, Waterfall):
        document = waterfall_to_dict(waterfall)
    else:
        document = {
            "schema": COMPARE_SCHEMA,
            "scenarios": [waterfall_to_dict(w) for w in waterfall],
        }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
