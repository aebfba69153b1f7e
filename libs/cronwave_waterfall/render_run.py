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
from cronwave_waterfall.render_html import BAR_H, CHART_W, KIND_COLORS, LABEL_W, OTHER_COLOR, ROW_H
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


def _svg(run: Run, hops: list[str]) -> str:
    ranges = {hop: _span_of(run, hop) for hop in hops}
    marks = [v for v in (run.end_to_end_ns, run.lateness_ns) if v is not None]
    low = min([0, *(start for start, _ in ranges.values())])
    high = max([1_000, *(end for _, end in ranges.values()), *marks])

    def x(ns: float) -> float:
        return LABEL_W + (ns - low) / (high - low) * CHART_W

    height = 34 + (len(hops) + 1) * ROW_H
    width = LABEL_W + CHART_W + 20
    out = [
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="this run\'s waterfall" font-size="12">'
    ]
    for i in range(6):
        at = low + (high - low) * i / 5
        tick = x(at)
        out.append(f'<line x1="{tick:.1f}" y1="18" x2="{tick:.1f}" y2="{height}" stroke="#eee"/>')
        out.append(f'<text x="{tick:.1f}" y="12" text-anchor="middle" fill="#666">{_ms(at)}</text>')
    out.append(
        f'<line x1="{x(0):.1f}" y1="18" x2="{x(0):.1f}" y2="{height}" stroke="#c00" '
        'stroke-dasharray="3,3"><title>fire time</title></line>'
    )
    y = 24.0
    for hop in hops:
        start, end = ranges[hop]
        wall = run.hop_ns.get(hop, 0)
        kinds = _kinds(run, hop)
        tip = f"{hop}: {_ms(start)} .. {_ms(end)} ms from the fire time, {_ms(wall)} ms of work" + (
            "".join(f"; {kind} {_ms(ns)} ms" for kind, ns in kinds)
        )
        out.append(f'<g class="hop" data-hop="{_e(hop)}"><title>{_e(tip)}</title>')
        out.append(f'<text x="4" y="{y + 12:.1f}">{_e(hop)}</text>')
        out.append(
            f'<rect x="{x(start):.1f}" y="{y:.1f}" width="{max(x(end) - x(start), 1.0):.1f}" '
            f'height="{BAR_H}" fill="#888" fill-opacity="0.2"/>'
        )
        left, total = x(start), sum(ns for _, ns in kinds) or 1
        span_w = max(x(start + wall) - x(start), 1.0)
        for kind, ns in kinds:
            w = span_w * ns / total
            color = KIND_COLORS.get(kind, OTHER_COLOR)
            out.append(
                f'<rect x="{left:.1f}" y="{y:.1f}" width="{w:.1f}" height="{BAR_H}" '
                f'fill="{color}"><title>{_e(kind)} {_ms(ns)} ms</title></rect>'
            )
            left += w
        out.append("</g>")
        y += ROW_H
    if run.lateness_ns is not None:
        at = x(run.lateness_ns)
        out.append(f'<text x="4" y="{y + 12:.1f}" font-weight="600">body starts</text>')
        out.append(
            f'<line x1="{at:.1f}" y1="{y:.1f}" x2="{at:.1f}" y2="{y + BAR_H}" stroke="#222" '
            f'stroke-width="2"><title>fire lateness {_ms(run.lateness_ns)} ms</title></line>'
        )
    out.append("</svg>")
    return "\n".join(out)


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
            _svg(run, hops),
            _table(run, hops),
        ]
    )
