"""HTML rendering: one self-contained page with an inline SVG waterfall.

No scripts, fonts, stylesheets or images are fetched: the styles are inline and
the chart is an ``<svg>`` element in the page, so the file opens offline and can
be attached to a ticket as is. Every text taken from spans is escaped.

The chart (``chart``) fills the page's width, with one row per hop on a time axis
from the fire time: the bar starts at the hop's median offset and is split, up to the hop's p50, by
kind of time (in proportion to each kind's mean); lighter bands carry on to p90
and p99. Hovering a bar shows its numbers. End-to-end and fire lateness are drawn
from the fire time. In compare mode each scenario gets its own chart, on one axis.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from cronwave_waterfall.aggregate import HopRow, Waterfall
from cronwave_waterfall.chart import NARROW_STYLE, Axis, chart, rect, row_y
from cronwave_waterfall.chart import STYLE as CHART_STYLE
from cronwave_waterfall.percentiles import Stats

KIND_COLORS = {
    "dns": "#b07aa1",
    "connect": "#9c755f",
    "network": "#4e79a7",
    "serialization": "#f28e2b",
    "cache": "#59a14f",
    "database": "#e15759",
    "queue": "#edc948",
    "app": "#76b7b2",
}
OTHER_COLOR = "#bab0ac"

STYLE = (
    """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
.headline { font-size: 1.15em; font-weight: 600; background: #fff4d6;
  border-left: 4px solid #e0a800; padding: 8px 12px; margin: 8px 0 16px; }
table { border-collapse: collapse; margin: 12px 0 24px; font-size: 0.9em; }
th, td { padding: 2px 10px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.hop td { font-weight: 600; border-top: 1px solid #ddd; }
.legend span { display: inline-block; margin-right: 14px; font-size: 0.85em; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
  vertical-align: -2px; }
.meta { color: #666; font-size: 0.9em; }
.aside { color: #7a5200; font-size: 0.9em; }
"""
    + CHART_STYLE
)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ms(value: float) -> str:
    return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"


def _axis_for(waterfalls: Sequence[Waterfall]) -> Axis:
    low, high = 0.0, 1.0
    for w in waterfalls:
        for row in w.hops:
            start = row.offset_ms or 0.0
            low = min(low, start)
            high = max(high, start + row.stats.p99_ms)
        for stats in (w.end_to_end, w.lateness):
            if stats is not None:
                high = max(high, stats.p99_ms)
    return Axis.over(low, high)


def _tip(name: str, stats: Stats) -> str:
    return (
        f"{name}: p50 {_ms(stats.p50_ms)} ms, p90 {_ms(stats.p90_ms)} ms, "
        f"p99 {_ms(stats.p99_ms)} ms, p99.9 {_ms(stats.p999_ms)} ms, "
        f"mean {_ms(stats.mean_ms)} ms over {stats.count} runs"
    )


def _bands(axis: Axis, y: float, start: float, stats: Stats, name: str) -> list[str]:
    tip = _tip(name, stats)
    p50, p90, p99 = (start + stats.p50_ms, start + stats.p90_ms, start + stats.p99_ms)
    return [
        rect(axis, y, p50, p99, 'fill="#888" fill-opacity="0.25"', tip),
        rect(axis, y, p50, p90, 'fill="#888" fill-opacity="0.45"', tip),
        rect(axis, y, start, p50, 'fill="#555" fill-opacity="0.9"', tip),
    ]


def _hop_bar(axis: Axis, y: float, row: HopRow) -> list[str]:
    start = row.offset_ms or 0.0
    parts = _bands(axis, y, start, row.stats, row.hop)
    total_mean = sum(k.stats.mean_ms for k in row.kinds)
    at = start
    for kind in row.kinds:
        if total_mean <= 0 or kind.stats.mean_ms <= 0:
            continue
        length = row.stats.p50_ms * kind.stats.mean_ms / total_mean
        color = KIND_COLORS.get(kind.kind, OTHER_COLOR)
        tip = _tip(f"{row.hop} / {kind.kind}", kind.stats)
        parts.append(rect(axis, y, at, at + length, f'fill="{color}"', tip))
        at += length
    return parts


def _chart(waterfall: Waterfall, axis: Axis) -> str:
    labels: list[tuple[str, bool]] = []
    body: list[str] = []
    for row in waterfall.hops:
        body.extend(_hop_bar(axis, row_y(len(labels)), row))
        labels.append((row.hop, False))
    for name, stats in (
        ("end-to-end", waterfall.end_to_end),
        ("fire lateness", waterfall.lateness),
    ):
        if stats is not None:
            body.extend(_bands(axis, row_y(len(labels)), 0.0, stats, name))
        labels.append((name, True))
    return chart(axis, labels, body, aria="latency waterfall", zero_tip="nominal fire time")


def _stats_cells(stats: Stats, count: int) -> str:
    values = (stats.mean_ms, stats.p50_ms, stats.p90_ms, stats.p99_ms, stats.p999_ms)
    return f"<td>{count}</td>" + "".join(f"<td>{_ms(v)}</td>" for v in values)


def _table(waterfall: Waterfall) -> str:
    out = [
        "<table><tr><th>hop / kind</th><th>runs</th><th>mean</th><th>p50</th><th>p90</th>"
        "<th>p99</th><th>p99.9</th></tr>"
    ]
    for row in waterfall.hops:
        out.append(
            f'<tr class="hop"><td>{_e(row.hop)}</td>{_stats_cells(row.stats, row.stats.count)}</tr>'
        )
        for kind in row.kinds:
            cells = _stats_cells(kind.stats, kind.present)
            out.append(f"<tr><td>&nbsp;&nbsp;{_e(kind.kind)}</td>{cells}</tr>")
    for name, stats in (
        ("end-to-end", waterfall.end_to_end),
        ("fire lateness", waterfall.lateness),
    ):
        if stats is not None:
            out.append(
                f'<tr class="hop"><td>{_e(name)}</td>{_stats_cells(stats, stats.count)}</tr>'
            )
    out.append("</table>")
    return "\n".join(out)


def _tail_table(waterfall: Waterfall) -> str:
    tail = waterfall.tail
    out = ["<table><tr><th>p99 tail: hop / kind</th><th>excess ms</th><th>share</th></tr>"]
    for c in [c for c in tail.contributions if c.excess_ms > 0][:8]:
        out.append(
            f"<tr><td>{_e(c.kind)} in {_e(c.hop)}</td><td>+{c.excess_ms:.2f}</td>"
            f"<td>{c.share:.0%}</td></tr>"
        )
    out.append("</table>")
    if tail.attributes:
        out.append(
            "<table><tr><th>over-represented in the tail</th><th>tail</th><th>rest</th></tr>"
        )
        for a in tail.attributes:
            out.append(
                f"<tr><td>{_e(a.key)}={_e(a.value)}</td><td>{a.tail_frequency:.0%}</td>"
                f"<td>{a.rest_frequency:.0%}</td></tr>"
            )
        out.append("</table>")
    return "\n".join(out)


def _legend() -> str:
    items = [f'<span><i style="background:{c}"></i>{_e(k)}</span>' for k, c in KIND_COLORS.items()]
    items.append('<span><i style="background:#888;opacity:.45"></i>p50..p90</span>')
    items.append('<span><i style="background:#888;opacity:.25"></i>p90..p99</span>')
    return f'<div class="legend">{"".join(items)}</div>'


def render_fragment(waterfall: Waterfall | Sequence[Waterfall]) -> str:
    """The page's content without the document around it: headline, legend, chart and
    tables, for a page of one's own (the web console) that includes ``STYLE``."""
    waterfalls = [waterfall] if isinstance(waterfall, Waterfall) else list(waterfall)
    compare = not isinstance(waterfall, Waterfall)
    axis = _axis_for(waterfalls)
    body = []
    for w in waterfalls:
        prefix = f"[{w.scenario}] " if compare else ""
        body.append(f'<div class="headline">{_e(prefix + w.tail.headline)}</div>')
    if not waterfalls:
        body.append("<p>No runs match the selection.</p>")
    body.append(_legend())
    for w in waterfalls:
        picked = ", ".join(f"{k}={v}" for k, v in w.selection.items()) or "all runs"
        heading = f"scenario {w.scenario}" if compare else "waterfall"
        body.append(f"<h2>{_e(heading)}</h2>")
        body.append(
            f'<p class="meta">{w.runs} runs ({_e(picked)}); ms from the fire time; '
            "exact percentiles</p>"
        )
        if w.set_aside:
            body.append(f'<p class="aside">{_e(w.set_aside_note())}</p>')
        body.append(_chart(w, axis))
        body.append(_table(w))
        body.append(_tail_table(w))
    return "\n".join(body)


def render_html(
    waterfall: Waterfall | Sequence[Waterfall], title: str = "cronwave waterfall"
) -> str:
    """A complete HTML document (see the module docstring)."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{STYLE}{NARROW_STYLE}</style></head>\n<body>\n"
        f"<h1>{_e(title)}</h1>\n" + render_fragment(waterfall) + "\n</body></html>\n"
    )
