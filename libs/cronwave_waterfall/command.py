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
from cronwave_core.fields import MAX_NAME
from cronwave_waterfall.aggregate import Waterfall, compare_scenarios, waterfall
from cronwave_waterfall.jaeger_json import export_jaeger
from cronwave_waterfall.jaeger_query import JaegerQuery
from cronwave_waterfall.otlp_json import export_otlp
from cronwave_waterfall.render_html import render_html
from cronwave_waterfall.render_json import render_json
from cronwave_waterfall.render_path import (
    render_path_html,
    render_path_json,
    render_path_terminal,
)
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
    trigger: str | None = None,
) -> tuple[Waterfall | list[Waterfall], list[Run]]:
    """Load spans from ``source``, choose runs and compute their waterfall (one per
    scenario with ``compare``); also returns the runs chosen. For a Jaeger source,
    ``service``, ``since`` and ``until`` shape the query. No ``trigger`` leaves
    backfill and catch-up runs out (``selection`` says why; the waterfall counts
    them in ``set_aside``)."""
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
        trigger=trigger or None,
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
    trigger: str | None = None,
    run: str | None = None,
) -> str:
    """``cronwave waterfall``: load spans from ``source`` (data dir, span file,
    Jaeger/OTLP JSON file, or Jaeger URL, for which ``service``, ``since`` and
    ``until`` shape the query), select runs, and render as ``fmt``. ``compare``
    puts the scenarios side by side (``scenario`` then limits it to one);
    ``trigger`` chooses the runs of one trigger. ``run`` renders that one run's
    critical path instead (``run_path``), and takes no other selection."""
    if fmt not in FORMATS:
        raise InvalidArgument("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if run is not None:
        refuse_with_run(
            last=last,
            schedule_id=schedule_id,
            job_type=job_type,
            scenario=scenario,
            trigger=trigger,
            compare=compare,
        )
        found = find_run(source, run, since=since, until=until, service=service)
        text = render_path(found, fmt, width=width, color=color and output is None)
        return deliver(text, output, f"{fmt} critical path of run {found.run_id}")
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
        trigger=trigger,
    )
    if fmt == "json":
        text = render_json(result)
    elif fmt == "html":
        text = render_html(result)
    else:
        text = render_terminal(result, width=width, color=color and output is None)
    return deliver(text, output, f"{fmt} waterfall")


def check_run_id(raw: str) -> str:
    """``raw`` stripped, if it can be a run id: else ``InvalidArgument`` naming ``run``."""
    text = raw.strip()
    if not text or len(text) > MAX_NAME or any(c.isspace() or not c.isprintable() for c in text):
        raise InvalidArgument(
            "run",
            f"must be a run id: 1 to {MAX_NAME} printable characters, no spaces "
            f"(as `cronwave runs list` shows them), got {raw[:MAX_NAME]!r}",
        )
    return text


def refuse_with_run(
    *,
    last: int | None,
    schedule_id: str | None,
    job_type: str | None,
    scenario: str | None,
    trigger: str | None,
    compare: bool,
) -> None:
    """Refuse, naming ``run``, the selection options given beside it."""
    given = {
        "--last": last is not None,
        "--schedule": bool(schedule_id),
        "--job-type": bool(job_type),
        "--scenario": bool(scenario),
        "--trigger": trigger is not None,
        "--compare": compare,
    }
    options = [name for name, on in given.items() if on]
    if options:
        raise InvalidArgument(
            "run",
            f"shows one run's critical path and takes no selection of runs: leave out "
            f"{', '.join(options)} (--since and --until may narrow a Jaeger query)",
        )


def find_run(
    source: Source,
    run: str,
    *,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    service: str | None = None,
) -> Run:
    """The run ``run`` from the spans in ``source``: ``InvalidArgument`` naming ``run``
    when it is no run id, or no span of it is there."""
    run_id = check_run_id(run)
    start_min, start_max = _instant(since, "since"), _instant(until, "until")
    if isinstance(source, JaegerQuery):
        source = replace(
            source,
            start_min=start_min or source.start_min,
            start_max=start_max or source.start_max,
        )
    spans = load_spans(source, service=service, start_min=start_min, start_max=start_max)
    for candidate in build_runs(spans):
        if candidate.run_id == run_id:
            return candidate
    raise InvalidArgument(
        "run",
        f"no span of run {run_id!r} in the spans read: its trace was not kept (sampled "
        "out), its spans are in another source (--source), or the id is mistyped",
    )


def render_path(run: Run, fmt: str, *, width: int = 110, color: bool = False) -> str:
    """One run's critical path as ``fmt`` (``terminal``/``text``, ``json``, ``html``)."""
    if fmt == "json":
        return render_path_json(run)
    if fmt == "html":
        return render_path_html(run)
    return render_path_terminal(run, width=width, color=color)


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
