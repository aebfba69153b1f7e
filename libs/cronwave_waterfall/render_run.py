"""One run's waterfall, as an HTML fragment: its own hops where they happened.

A single run has no distribution: its waterfall shows each hop as it was -- where it
began and ended relative to the run's fire time, its wall time, and that time split by
kind -- not the p50 .. p99.9 of one sample, and no tail to attribute (both are
``render_html``'s, over many runs). Times are in milliseconds from the fire time (from
the run's first span when its spans carry no fire time); a hop's bar spans its first
start to its last end, and its coloured part is its wall time (nested hops taken out)
by kind, in proportion. Every text taken from spans is escaped.
"""

from __future__ import annotations

import html

from cronwave_waterfall.aggregate import kind_order
from cronwave_waterfall.chart import BAR_H, Axis, chart, rect, row_y
from cronwave_waterfall.render_html import KIND_COLORS, OTHER_COLOR
from cronwave_waterfall.runs import Run, hop_order


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ms(ns: float) -> str:
    value = ns / 1e6
    return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"


def _origin(run: Run) -> int:
    return run.fire_ns if run.fire_ns is not None else run.started_ns


def _span_of(run: Run, hop: str) -> tuple[int, int]:
    """The hop's first start and last end, in ns from the run's origin."""
    if hop in run.hop_start_ns:
        return run.hop_start_ns[hop], run.hop_end_ns[hop]
    origin = _origin(run)
    spans = [s for s in run.spans if s.attributes.get("cronwave.hop") == hop]
    if not spans:
        return 0, run.hop_ns.get(hop, 0)
    return min(s.start_ns for s in spans) - origin, max(s.end_ns for s in spans) - origin


def _kinds(run: Run, hop: str) -> list[tuple[str, int]]:
    present = {k for h, k in run.kind_ns if h == hop}
    return [(k, run.kind_ns[(hop, k)]) for k in kind_order(present) if run.kind_ns[(hop, k)] > 0]


def _headline(run: Run, hops: list[str]) -> str:
    parts = []
    if run.end_to_end_ns is not None:
        parts.append(f"end-to-end {_ms(run.end_to_end_ns)} ms")
    if run.lateness_ns is not None:
        parts.append(f"fire lateness {_ms(run.lateness_ns)} ms")
    if hops:
        slowest = max(hops, key=lambda h: run.hop_ns.get(h, 0))
        parts.append(f"longest hop: {slowest}, {_ms(run.hop_ns.get(slowest, 0))} ms")
    return "; ".join(parts) or "no hop measured yet"


def _chart(run: Run, hops: list[str]) -> str:
    ranges = {hop: _span_of(run, hop) for hop in hops}
    marks = [v for v in (run.end_to_end_ns, run.lateness_ns) if v is not None]
    low = min([0, *(start for start, _ in ranges.values())])
    high = max([1_000, *(end for _, end in ranges.values()), *marks])
    axis = Axis.over(low / 1e6, high / 1e6)
    labels: list[tuple[str, bool]] = []
    body: list[str] = []
    for hop in hops:
        y = row_y(len(labels))
        start, end = ranges[hop]
        wall = run.hop_ns.get(hop, 0)
        kinds = _kinds(run, hop)
        tip = f"{hop}: {_ms(start)} .. {_ms(end)} ms from the fire time, {_ms(wall)} ms of work" + (
            "".join(f"; {kind} {_ms(ns)} ms" for kind, ns in kinds)
        )
        body.append(f'<g class="hop" data-hop="{_e(hop)}">')
        body.append(rect(axis, y, start / 1e6, end / 1e6, 'fill="#888" fill-opacity="0.2"', tip))
        at: float = start
        total = sum(ns for _, ns in kinds) or 1
        for kind, ns in kinds:
            length = wall * ns / total
            color = KIND_COLORS.get(kind, OTHER_COLOR)
            tip = f"{kind} {_ms(ns)} ms"
            body.append(rect(axis, y, at / 1e6, (at + length) / 1e6, f'fill="{color}"', tip))
            at += length
        body.append("</g>")
        labels.append((hop, False))
    if run.lateness_ns is not None:
        y = row_y(len(labels))
        mark = axis.pct(run.lateness_ns / 1e6)
        body.append(
            f'<line x1="{mark:.3f}%" y1="{y:.1f}" x2="{mark:.3f}%" y2="{y + BAR_H}" stroke="#222" '
            f'stroke-width="2"><title>fire lateness {_ms(run.lateness_ns)} ms</title></line>'
        )
        labels.append(("body starts", True))
    return chart(axis, labels, body, aria="this run's waterfall")


def _table(run: Run, hops: list[str]) -> str:
    out = [
        '<table class="hops"><tr><th>hop</th><th>starts (ms)</th><th>ends (ms)</th>'
        "<th>work (ms)</th><th>by kind (ms)</th></tr>"
    ]
    for hop in hops:
        start, end = _span_of(run, hop)
        kinds = ", ".join(f"{_e(kind)} {_ms(ns)}" for kind, ns in _kinds(run, hop))
        out.append(
            f'<tr class="hop" data-hop="{_e(hop)}"><td>{_e(hop)}</td><td>{_ms(start)}</td>'
            f"<td>{_ms(end)}</td><td>{_ms(run.hop_ns.get(hop, 0))}</td><td>{kinds}</td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def render_run(run: Run) -> str:
    """The fragment of one run's waterfall (see the module docstring), for a page that
    includes ``render_html.STYLE``."""
    hops = hop_order(run.hop_ns)
    origin = "the fire time" if run.fire_ns is not None else "the run's first span"
    legend = "".join(
        f'<span><i style="background:{c}"></i>{_e(k)}</span>' for k, c in KIND_COLORS.items()
    )
    return "\n".join(
        [
            f'<div class="headline">{_e(_headline(run, hops))}</div>',
            f'<div class="legend">{legend}</div>',
            f'<p class="meta">This run\'s {len(run.spans)} spans; ms from {origin}.</p>',
            _chart(run, hops),
            _table(run, hops),
        ]
    )
