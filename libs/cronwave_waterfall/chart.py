"""The HTML chart every waterfall page draws: labels on the left, bars on a time axis
that takes the rest of the page's width.

The chart is a two-column grid: the row labels are HTML text in a column as wide as
the longest label, and the bars are one ``<svg>`` filling the other column
(``width="100%"``), placed in percentages of it, so the chart follows the page's
width with no script and text is never scaled. The axis covers the data exactly and
has "nice" ticks inside it (multiples of 1, 2 or 5 times a power of ten) in one unit
chosen for the range (ms, s, min or h), so a label is a few characters wide; the
first label is anchored at its start and the last at its end, so none sticks out of
the chart, and on a narrow page (``NARROW_PX``) every other tick's label is hidden,
so neighbours do not overlap.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

ROW_H = 26
BAR_H = 16
AXIS_H = 24
NARROW_PX = 640
#: The range over the step, about: three to seven ticks, each label a few characters
#: wide (on a narrow page every other one shows).
TICKS = 6

STYLE = f"""
.chart {{ display: grid; grid-template-columns: max-content minmax(0, 1fr);
  column-gap: 10px; margin: 8px 0 16px; }}
.chart .labels {{ padding-top: {AXIS_H}px; }}
.chart .labels div {{ height: {ROW_H}px; line-height: {BAR_H}px; white-space: nowrap;
  font-size: 12px; }}
.chart .labels div.strong {{ font-weight: 600; }}
.chart svg {{ display: block; width: 100%; overflow: visible; }}
"""
#: For a page of its own: an at-rule, apart from ``STYLE`` (plain rules, which a page
#: that embeds the chart may scope to a part of itself).
NARROW_STYLE = (
    f"@media (max-width: {NARROW_PX}px) {{ .chart svg text.tick.odd {{ display: none; }} }}\n"
)

_UNITS = (("ms", 1.0), ("s", 1_000.0), ("min", 60_000.0), ("h", 3_600_000.0))


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _unit(span_ms: float) -> tuple[str, float]:
    """The largest unit in which the range is at least 2 units (ms below 2 s)."""
    chosen = _UNITS[0]
    for name, size in _UNITS:
        if span_ms >= 2 * size:
            chosen = (name, size)
    return chosen


def _nice_step(raw: float) -> float:
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


@dataclass(frozen=True)
class Axis:
    """Milliseconds from the run's origin to percent of the chart's width, over
    ``[low, high]``; ticks at the multiples of ``step`` inside it."""

    low: float
    high: float
    step: float
    unit: str
    unit_ms: float

    @classmethod
    def over(cls, low_ms: float, high_ms: float) -> Axis:
        """The axis over exactly ``[low_ms, high_ms]`` (none of the chart spent on
        rounding out), with a nice step that puts three to seven ticks in it."""
        if not high_ms > low_ms:
            high_ms = low_ms + 1.0
        unit, size = _unit(high_ms - low_ms)
        step = _nice_step((high_ms - low_ms) / size / TICKS) * size
        return cls(low_ms, high_ms, step, unit, size)

    def pct(self, ms: float) -> float:
        """Where ``ms`` falls, in percent of the chart's width (clamped to it)."""
        return min(100.0, max(0.0, (ms - self.low) / (self.high - self.low) * 100.0))

    def ticks(self) -> list[tuple[float, str]]:
        """Every tick: its place in ms and its label (with the unit)."""
        first = math.ceil(self.low / self.step - 1e-9)
        last = math.floor(self.high / self.step + 1e-9)
        digits = max(0, -math.floor(math.log10(self.step / self.unit_ms) + 1e-9))
        out = []
        for i in range(first, last + 1):
            at = i * self.step
            out.append((at, f"{at / self.unit_ms:,.{digits}f} {self.unit}"))
        return out


def rect(axis: Axis, y: float, start_ms: float, end_ms: float, attrs: str, tip: str) -> str:
    """A bar from ``start_ms`` to ``end_ms`` (at least a hair wide) with a hover tip."""
    left = axis.pct(start_ms)
    width = max(axis.pct(end_ms) - left, 0.15)
    return (
        f'<rect x="{left:.3f}%" y="{y:.1f}" width="{width:.3f}%" height="{BAR_H}" {attrs}>'
        f"<title>{_e(tip)}</title></rect>"
    )


def row_y(index: int) -> float:
    """The top of row ``index``'s bar."""
    return AXIS_H + index * ROW_H


def chart(
    axis: Axis,
    labels: Sequence[tuple[str, bool]],
    body: Sequence[str],
    *,
    aria: str,
    zero_tip: str = "fire time",
) -> str:
    """The grid: ``labels`` (text, bold) one per row, and an SVG with the axis, a line
    at 0 and ``body`` (SVG elements placed with ``rect`` and ``row_y``)."""
    height = AXIS_H + len(labels) * ROW_H
    svg = [f'<svg height="{height}" role="img" aria-label="{_e(aria)}" font-size="12">']
    ticks = axis.ticks()
    for i, (at, label) in enumerate(ticks):
        x = axis.pct(at)
        anchor = "start" if i == 0 else "end" if i == len(ticks) - 1 else "middle"
        odd = " odd" if i % 2 else ""
        svg.append(f'<line x1="{x:.3f}%" y1="18" x2="{x:.3f}%" y2="{height}" stroke="#eee"/>')
        svg.append(
            f'<text class="tick{odd}" x="{x:.3f}%" y="12" text-anchor="{anchor}" '
            f'fill="#666">{_e(label)}</text>'
        )
    if axis.low <= 0 <= axis.high:
        zero = axis.pct(0.0)
        svg.append(
            f'<line x1="{zero:.3f}%" y1="18" x2="{zero:.3f}%" y2="{height}" stroke="#c00" '
            f'stroke-dasharray="3,3"><title>{_e(zero_tip)}</title></line>'
        )
    svg.extend(body)
    svg.append("</svg>")
    strong_class = ' class="strong"'
    names = "".join(
        f"<div{strong_class if strong else ''}>{_e(text)}</div>" for text, strong in labels
    )
    return f'<div class="chart"><div class="labels">{names}</div>' + "\n".join(svg) + "</div>"
