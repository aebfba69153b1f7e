"""One run's critical path (``cronwave waterfall --run``), for a terminal, as JSON or
as an HTML page.

Every form says the same: the run (its trigger, schedule, end-to-end and fire
lateness), the path's steps in time order -- hop, from and to in ms from the fire
time (from the run's first span when no span says the fire time), time on the path
and its kinds -- and per hop the path time against the hop's own work (``Run.hop_ns``:
work off the path ran beside something slower). JSON schema
``cronwave.run-path/v1``::

    {"schema", "unit": "ms", "run_id", "schedule_id", "job_type", "trigger",
     "fire_time": ISO-8601 | null, "origin": "fire time" | "first span",
     "end_to_end_ms" | null, "lateness_ms" | null, "path_ms", "headline",
     "steps": [{"hop", "start_ms", "end_ms", "ms", "kinds": {kind: ms}}],
     "hops": [{"hop", "path_ms", "share", "work_ms" | null, "kinds": {kind: ms}}]}
"""

from __future__ import annotations

import html
import io
import json
from typing import Any

from rich.table import Table
from rich.text import Text

from cronwave_waterfall.chart import NARROW_STYLE, Axis, chart, rect, row_y
from cronwave_waterfall.critical_path import Step, by_hop, critical_path, steps
from cronwave_waterfall.render_html import KIND_COLORS, OTHER_COLOR, STYLE
from cronwave_waterfall.render_run import render_run
from cronwave_waterfall.render_terminal import text_console
from cronwave_waterfall.runs import Run

SCHEMA = "cronwave.run-path/v1"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def _round(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


def _origin(run: Run) -> int:
    return run.fire_ns if run.fire_ns is not None else run.started_ns


def _kinds_text(kinds: dict[str, int]) -> str:
    ordered = sorted(kinds.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{kind} {_ms(ns)}" for kind, ns in ordered if ns > 0)


class _Path:
    """The run's path, measured once for every form."""

    def __init__(self, run: Run) -> None:
        self.run = run
        segments = critical_path(run)
        self.steps: list[Step] = steps(segments)
        self.hops = by_hop(segments)
        self.total = sum(s.duration_ns for s in self.steps)
        self.origin = _origin(run)

    def share(self, ns: int) -> float:
        return ns / self.total if self.total else 0.0

    def about(self) -> str:
        run = self.run
        said = [f"run {run.run_id}"]
        facts = [run.trigger or "trigger unknown"]
        if run.schedule_id:
            facts.append(f"schedule {run.schedule_id}")
        if run.job_type:
            facts.append(f"job type {run.job_type}")
        figures = []
        if run.end_to_end_ns is not None:
            figures.append(f"end-to-end {_ms(run.end_to_end_ns)} ms")
        if run.lateness_ns is not None:
            figures.append(f"fire lateness {_ms(run.lateness_ns)} ms")
        return f"{said[0]} ({'; '.join(facts)})" + (": " + ", ".join(figures) if figures else "")

    def headline(self) -> str:
        if not self.steps:
            return "critical path: the run has no spans"
        hop, kinds = max(self.hops.items(), key=lambda kv: sum(kv[1].values()))
        ns = sum(kinds.values())
        kind, kind_ns = max(kinds.items(), key=lambda kv: kv[1])
        return (
            f"critical path {_ms(self.total)} ms in {len(self.steps)} steps; most in {hop}: "
            f"{_ms(ns)} ms ({self.share(ns):.0%}), of which {kind} {_ms(kind_ns)} ms"
        )

    def to_dict(self) -> dict[str, Any]:
        run = self.run
        return {
            "schema": SCHEMA,
            "unit": "ms",
            "run_id": run.run_id,
            "schedule_id": run.schedule_id,
            "job_type": run.job_type,
            "trigger": run.trigger,
            "fire_time": run.fire_time.isoformat() if run.fire_time else None,
            "origin": "fire time" if run.fire_ns is not None else "first span",
            "end_to_end_ms": _round(run.end_to_end_ns),
            "lateness_ms": _round(run.lateness_ns),
            "path_ms": _round(self.total),
            "headline": self.headline(),
            "steps": [
                {
                    "hop": s.hop,
                    "start_ms": _round(s.start_ns - self.origin),
                    "end_ms": _round(s.end_ns - self.origin),
                    "ms": _round(s.duration_ns),
                    "kinds": {k: _round(v) for k, v in s.kinds.items()},
                }
                for s in self.steps
            ],
            "hops": [
                {
                    "hop": hop,
                    "path_ms": _round(sum(kinds.values())),
                    "share": round(self.share(sum(kinds.values())), 4),
                    "work_ms": _round(run.hop_ns.get(hop)),
                    "kinds": {k: _round(v) for k, v in kinds.items()},
                }
                for hop, kinds in self.hops.items()
            ],
        }


def render_path_json(run: Run) -> str:
    return json.dumps(_Path(run).to_dict(), indent=2, sort_keys=True) + "\n"


def render_path_terminal(run: Run, *, width: int = 110, color: bool = False) -> str:
    path = _Path(run)
    out = io.StringIO()
    console = text_console(out, width, color)
    console.print(Text(path.headline(), style="bold yellow"), soft_wrap=True)
    console.print(Text(path.about()), soft_wrap=True)
    origin = "fire time" if run.fire_ns is not None else "the run's first span"
    table = Table(title=f"the path, step by step (ms from the {origin})", box=None)
    table.title_justify = "left"
    for name, justify in (("hop", "left"), ("from", "right"), ("to", "right")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("on path", justify="right", no_wrap=True)
    table.add_column("share", justify="right", no_wrap=True)
    table.add_column("kinds (ms)")
    for s in path.steps:
        table.add_row(
            s.hop,
            _ms(s.start_ns - path.origin),
            _ms(s.end_ns - path.origin),
            _ms(s.duration_ns),
            f"{path.share(s.duration_ns):.0%}",
            _kinds_text(s.kinds),
        )
    console.print(table)
    hops = Table(title="per hop: time on the path, and the hop's own work", box=None)
    hops.title_justify = "left"
    hops.add_column("hop", no_wrap=True)
    for name in ("on path", "share", "work"):
        hops.add_column(name, justify="right", no_wrap=True)
    hops.add_column("kinds on the path (ms)")
    for hop, kinds in path.hops.items():
        ns = sum(kinds.values())
        work = run.hop_ns.get(hop)
        hops.add_row(
            hop,
            _ms(ns),
            f"{path.share(ns):.0%}",
            "-" if work is None else _ms(work),
            _kinds_text(kinds),
        )
    console.print(hops)
    return out.getvalue()


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _chart(path: _Path) -> str:
    if not path.steps:
        return ""
    axis = Axis.over(
        min(0, path.steps[0].start_ns - path.origin) / 1e6,
        (path.steps[-1].end_ns - path.origin) / 1e6,
    )
    labels: list[tuple[str, bool]] = []
    body: list[str] = []
    for s in path.steps:
        y = row_y(len(labels))
        at = s.start_ns - path.origin
        for kind, ns in s.kinds.items():
            color = KIND_COLORS.get(kind, OTHER_COLOR)
            tip = f"{s.hop} / {kind}: {_ms(ns)} ms on the path"
            body.append(rect(axis, y, at / 1e6, (at + ns) / 1e6, f'fill="{color}"', tip))
            at += ns
        labels.append((s.hop, False))
    return chart(axis, labels, body, aria="the run's critical path")


def render_path_html(run: Run, title: str | None = None) -> str:
    path = _Path(run)
    title = title or f"cronwave critical path of run {run.run_id}"
    rows = "".join(
        f'<tr class="step" data-hop="{_e(s.hop)}"><td>{_e(s.hop)}</td>'
        f"<td>{_ms(s.start_ns - path.origin)}</td><td>{_ms(s.end_ns - path.origin)}</td>"
        f"<td>{_ms(s.duration_ns)}</td><td>{path.share(s.duration_ns):.0%}</td>"
        f"<td>{_e(_kinds_text(s.kinds))}</td></tr>"
        for s in path.steps
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{STYLE}{NARROW_STYLE}</style></head>\n<body>\n"
        f"<h1>{_e(title)}</h1>\n"
        f'<div class="headline">{_e(path.headline())}</div>\n'
        f'<p class="meta">{_e(path.about())}</p>\n'
        "<h2>critical path</h2>\n"
        + _chart(path)
        + '\n<table class="path"><tr><th>hop</th><th>from (ms)</th><th>to (ms)</th>'
        "<th>on path (ms)</th><th>share</th><th>kinds (ms)</th></tr>"
        + rows
        + "</table>\n<h2>the run's hops</h2>\n"
        + render_run(run)
        + "\n</body></html>\n"
    )
