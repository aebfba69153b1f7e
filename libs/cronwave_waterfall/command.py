"""Entry points for ``cronwave waterfall`` and ``cronwave trace export``.

They take plain arguments (strings, numbers, flags) and return the text to print,
so the CLI wires each with one line. With ``output`` the rendering goes to that
file instead and the text returned is one line saying where. Bad arguments raise
``InvalidArgument`` naming the argument.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from cronwave_core.errors import InvalidArgument
from cronwave_waterfall.aggregate import Waterfall, compare_scenarios, waterfall
from cronwave_waterfall.jaeger_json import export_jaeger
from cronwave_waterfall.jaeger_query import JaegerQuery
from cronwave_waterfall.otlp_json import export_otlp
from cronwave_waterfall.render_html import render_html
from cronwave_waterfall.render_json import render_json
from cronwave_waterfall.render_terminal import render_terminal
from cronwave_waterfall.runs import SCENARIOS, Run, build_runs, parse_instant
from cronwave_waterfall.selection import RunFilter, select_runs
from cronwave_waterfall.sources import Source, load_spans

FORMATS = ("terminal", "json", "html")
EXPORT_FORMATS = ("jaeger", "otlp")


def _instant(raw: str | datetime | None, name: str) -> datetime | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, datetime):
        if raw.tzinfo is None:
            raise InvalidArgument(name, "must carry a time zone (e.g. 2025-03-01T00:00:00Z)")
        return raw
    has_zone = raw.strip().endswith("Z") or "+" in raw[10:] or "-" in raw[10:]
    moment = parse_instant(raw)
    if moment is None or not has_zone:
        raise InvalidArgument(
            name, f"expected ISO-8601 with a time zone (e.g. 2025-03-01T00:00:00Z), got {raw!r}"
        )
    return moment


def deliver(text: str, output: str | Path | None, what: str) -> str:
    if output is None or str(output) == "":
        return text
    path = Path(output).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InvalidArgument("output", f"cannot write {path}: {exc.strerror or exc}") from exc
    return f"wrote {what} to {path}\n"


def select_waterfall(
    source: Source,
    *,
    last: int | None = None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    schedule_id: str | None = None,
    job_type: str | None = None,
    scenario: str | None = None,
    compare: bool = False,
    service: str | None = None,
) -> tuple[Waterfall | list[Waterfall], list[Run]]:
    """Load spans from ``source``, choose runs and compute their waterfall (one per
    scenario with ``compare``); also returns the runs chosen. For a Jaeger source,
    ``service``, ``since`` and ``until`` shape the query."""
    if scenario is not None and scenario not in SCENARIOS:
        raise InvalidArgument(
            "scenario", f"must be one of {', '.join(SCENARIOS)}, got {scenario!r}"
        )
    selection = RunFilter(
        last=last,
        since=_instant(since, "since"),
        until=_instant(until, "until"),
        schedule_id=schedule_id or None,
        job_type=job_type or None,
        scenario=scenario or None,
    )
    if isinstance(source, JaegerQuery):
        source = replace(
            source,
            start_min=selection.since or source.start_min,
            start_max=selection.until or source.start_max,
        )
    spans = load_spans(
        source, service=service, start_min=selection.since, start_max=selection.until
    )
    runs = build_runs(spans)
    result = compare_scenarios(runs, selection) if compare else waterfall(runs, selection)
    return result, select_runs(runs, selection)


def waterfall_command(
    source: str | Path,
    *,
    last: int | None = None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    schedule_id: str | None = None,
    job_type: str | None = None,
    scenario: str | None = None,
    compare: bool = False,
    fmt: str = "terminal",
    output: str | Path | None = None,
    width: int = 110,
    color: bool = False,
    service: str | None = None,
) -> str:
    """``cronwave waterfall``: load spans from ``source`` (data dir, span file,
    Jaeger/OTLP JSON file, or Jaeger URL, for which ``service``, ``since`` and
    ``until`` shape the query), select runs, and render as ``fmt``. ``compare``
    puts the scenarios side by side (``scenario`` then limits it to one)."""
    if fmt not in FORMATS:
        raise InvalidArgument("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    result, _ = select_waterfall(
        source,
        last=last,
        since=since,
        until=until,
        schedule_id=schedule_id,
        job_type=job_type,
        scenario=scenario,
        compare=compare,
        service=service,
    )
    if fmt == "json":
        text = render_json(result)
    elif fmt == "html":
        text = render_html(result)
    else:
        text = render_terminal(result, width=width, color=color and output is None)
    return deliver(text, output, f"{fmt} waterfall")


def trace_export_command(
    source: str | Path,
    *,
    trace_id: str | None = None,
    run_id: str | None = None,
    fmt: str = "jaeger",
    output: str | Path | None = None,
    service: str | None = None,
) -> str:
    """``cronwave trace export``: the spans of one trace (``trace_id``), or of the
    traces of one run (``run_id``), or of the only trace in ``source``, as Jaeger
    JSON (loadable by Jaeger UI's upload) or OTLP JSON."""
    if fmt not in EXPORT_FORMATS:
        raise InvalidArgument("format", f"must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
    spans = load_spans(source, service=service)
    if trace_id:
        wanted = {trace_id.strip().lower().rjust(32, "0")}
    elif run_id:
        runs = [r for r in build_runs(spans) if r.run_id == run_id]
        if not runs:
            raise InvalidArgument("run_id", f"no spans of run '{run_id}' in {source}")
        wanted = {s.trace_id for s in runs[0].spans}
    else:
        wanted = {s.trace_id for s in spans}
        if len(wanted) != 1:
            raise InvalidArgument(
                "trace_id", f"{source} holds {len(wanted)} traces; name one with a trace or run id"
            )
    chosen = [s for s in spans if s.trace_id in wanted]
    if not chosen:
        raise InvalidArgument("trace_id", f"no spans of trace '{trace_id}' in {source}")
    document = export_jaeger(chosen) if fmt == "jaeger" else export_otlp(chosen)
    text = json.dumps(document, indent=2) + "\n"
    return deliver(text, output, f"{fmt} trace ({len(chosen)} spans)")
