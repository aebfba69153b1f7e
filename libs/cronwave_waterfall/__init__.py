"""cronwave's latency waterfall: where the time of a scheduled run goes, hop by hop.

Spans come from the local span store, Jaeger JSON, OTLP JSON or a Jaeger query
service (``load_spans``); they are grouped into runs and measured per hop and
kind of time (``build_runs``); many runs make a waterfall of exact percentiles
with tail attribution (``waterfall``, ``attribute_tail``), rendered for a
terminal, as JSON or as a self-contained HTML page; one run's own hops are rendered
by ``render_run``, and its critical path by ``render_path`` (``critical_path``).
Backfill and catch-up runs are a population of their own (``selection``).
``waterfall_command`` and
``trace_export_command`` are the CLI's entry points.

The rules each step follows are stated in the docstrings of ``placement`` (run,
hop and kind of every span), ``runs`` (the per-run figures), ``percentiles``,
``waterfall``, ``tail`` and ``render_json`` (the JSON schema).
"""

from __future__ import annotations

from cronwave_waterfall.aggregate import Waterfall, compare_scenarios, waterfall
from cronwave_waterfall.command import trace_export_command, waterfall_command
from cronwave_waterfall.jaeger_json import export_jaeger, read_jaeger
from cronwave_waterfall.jaeger_query import JaegerQuery, query_jaeger
from cronwave_waterfall.otlp_json import export_otlp, read_otlp
from cronwave_waterfall.percentiles import Stats, quantile
from cronwave_waterfall.render_html import render_fragment, render_html
from cronwave_waterfall.render_json import render_json
from cronwave_waterfall.render_run import render_run
from cronwave_waterfall.render_terminal import render_terminal
from cronwave_waterfall.runs import Run, build_runs
from cronwave_waterfall.selection import RunFilter, select_runs
from cronwave_waterfall.sources import load_spans
from cronwave_waterfall.span import Span
from cronwave_waterfall.tail import TailAttribution, attribute_tail

__all__ = [
    "JaegerQuery",
    "Run",
    "RunFilter",
    "Span",
    "Stats",
    "TailAttribution",
    "Waterfall",
    "attribute_tail",
    "build_runs",
    "compare_scenarios",
    "export_jaeger",
    "export_otlp",
    "load_spans",
    "quantile",
    "query_jaeger",
    "read_jaeger",
    "read_otlp",
    "render_fragment",
    "render_html",
    "render_json",
    "render_run",
    "render_terminal",
    "select_runs",
    "trace_export_command",
    "waterfall",
    "waterfall_command",
]
