"""Terminal rendering (rich): the tail line first, then the hops on a shared time
axis, then the numbers.

Each hop's bar starts at the hop's median offset from the fire time; ``█`` runs to
its p50 duration, ``▓`` on to p90, ``░`` on to p99, so a hop with a long tail shows
a long light band. End-to-end and lateness are drawn from the fire time (0) the
same way. In compare mode each hop gets one bar per scenario, on one axis.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cronwave_waterfall.aggregate import Waterfall
from cronwave_waterfall.percentiles import Stats

LABEL = 22
BANDS = (("█", "bold cyan"), ("▓", "cyan"), ("░", "dim cyan"))


class _Axis:
    """Milliseconds to columns over ``[low, high]``."""

    def __init__(self, low: float, high: float, columns: int) -> None:
        self.low = low
        self.high = high if high > low else low + 1.0
        self.columns = max(columns, 10)

    def col(self, ms: float) -> int:
        position = (ms - self.low) / (self.high - self.low) * self.columns
        return min(self.columns, max(0, round(position)))

    def bar(self, start_ms: float, stats: Stats) -> Text:
        """The p50/p90/p99 bands of ``stats`` drawn from ``start_ms``."""
        text = Text(" " * self.col(start_ms))
        cursor = self.col(start_ms)
        ends = (stats.p50_ms, stats.p90_ms, stats.p99_ms)
        for (char, style), end_ms in zip(BANDS, ends, strict=True):
            end = self.col(start_ms + end_ms)
            if char == BANDS[0][0] and end <= cursor and stats.p50_ms > 0:
                end = min(self.columns, cursor + 1)  # never let a hop vanish
            if end > cursor:
                text.append(char * (end - cursor), style=style)
                cursor = end
        return text

    def ruler(self) -> Text:
        marks = Text(" " * (self.columns + 1), style="dim")
        ticks = 4
        for i in range(ticks + 1):
            ms = self.low + (self.high - self.low) * i / ticks
            label = f"{ms:.1f}"
            at = min(self.col(ms), self.columns + 1 - len(label))
            marks = marks[:at] + Text(label, style="dim") + marks[at + len(label) :]
        return marks


def _axis_for(waterfalls: Sequence[Waterfall], columns: int) -> _Axis:
    low, high = 0.0, 1.0
    for w in waterfalls:
        for row in w.hops:
            start = row.offset_ms or 0.0
            low = min(low, start)
            high = max(high, start + row.stats.p99_ms)
        for stats in (w.end_to_end, w.lateness):
            if stats is not None:
                high = max(high, stats.p99_ms)
    return _Axis(low, high, columns)


def _ms(value: float) -> str:
    return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"


def _add_stats(table: Table, label: str, count: str, stats: Stats, style: str = "") -> None:
    table.add_row(
        label,
        count,
        _ms(stats.mean_ms),
        _ms(stats.p50_ms),
        _ms(stats.p90_ms),
        _ms(stats.p99_ms),
        _ms(stats.p999_ms),
        style=style,
    )


def _numbers(waterfall: Waterfall) -> Table:
    table = Table(title="milliseconds (exact percentiles)", title_justify="left", box=None)
    table.add_column("hop / kind", no_wrap=True)
    for name in ("runs", "mean", "p50", "p90", "p99", "p99.9"):
        table.add_column(name, justify="right")
    for row in waterfall.hops:
        _add_stats(table, row.hop, str(row.stats.count), row.stats, style="bold")
        for kind in row.kinds:
            _add_stats(table, f"  {kind.kind}", f"{kind.present}", kind.stats)
    if waterfall.end_to_end is not None:
        _add_stats(
            table, "end-to-end", str(waterfall.end_to_end.count), waterfall.end_to_end, "bold"
        )
    if waterfall.lateness is not None:
        _add_stats(
            table, "fire lateness", str(waterfall.lateness.count), waterfall.lateness, "bold"
        )
    return table


def _tail_details(waterfall: Waterfall) -> Table:
    tail = waterfall.tail
    table = Table(title="p99 tail vs the median run", title_justify="left", box=None)
    table.add_column("hop / kind")
    table.add_column("excess ms", justify="right")
    table.add_column("share", justify="right")
    table.add_column("tail attribute")
    table.add_column("tail / rest", justify="right")
    positive = [c for c in tail.contributions if c.excess_ms > 0][:5]
    attributes = list(tail.attributes[:5])
    for i in range(max(len(positive), len(attributes))):
        c = positive[i] if i < len(positive) else None
        a = attributes[i] if i < len(attributes) else None
        table.add_row(
            f"{c.kind} in {c.hop}" if c else "",
            f"+{c.excess_ms:.2f}" if c else "",
            f"{c.share:.0%}" if c else "",
            f"{a.key}={a.value}" if a else "",
            f"{a.tail_frequency:.0%} / {a.rest_frequency:.0%}" if a else "",
        )
    return table


def _bars(waterfalls: Sequence[Waterfall], columns: int, compare: bool) -> Table:
    axis = _axis_for(waterfalls, columns)
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column(width=LABEL, no_wrap=True)
    table.add_column(no_wrap=True, width=columns + 1)
    table.add_row(Text("ms from fire time", style="dim"), axis.ruler())
    hops: list[str] = []
    for w in waterfalls:
        hops.extend(r.hop for r in w.hops if r.hop not in hops)
    for hop in hops:
        for w in waterfalls:
            row = next((r for r in w.hops if r.hop == hop), None)
            label = f"{hop} {w.scenario}" if compare else hop
            if row is None:
                table.add_row(label, Text("(no spans)", style="dim"))
            else:
                table.add_row(label, axis.bar(row.offset_ms or 0.0, row.stats))
    for name, attr in (("end-to-end", "end_to_end"), ("fire lateness", "lateness")):
        for w in waterfalls:
            stats = getattr(w, attr)
            if stats is not None:
                label = f"{name} {w.scenario}" if compare else name
                table.add_row(Text(label, style="bold"), axis.bar(0.0, stats))
    table.add_row(
        Text("legend", style="dim"),
        Text("█ p50  ▓ p90  ░ p99, from the hop's median start", style="dim"),
    )
    return table


def _side_by_side(waterfalls: Sequence[Waterfall]) -> Table:
    """One row per hop and kind, mean / p50 / p99 columns per scenario."""
    table = Table(title="milliseconds, scenarios side by side", title_justify="left", box=None)
    table.add_column("hop / kind", no_wrap=True, min_width=15)
    for w in waterfalls:
        for name in ("mean", "p50", "p99"):
            table.add_column(f"{w.scenario}\n{name}", justify="right", no_wrap=True)
    keys: list[tuple[str, str | None]] = []
    for w in waterfalls:
        for row in w.hops:
            for key in [(row.hop, None), *((row.hop, k.kind) for k in row.kinds)]:
                if key not in keys:
                    keys.append(key)
    hop_rank = {hop: i for i, (hop, kind) in enumerate(keys) if kind is None}
    keys.sort(key=lambda k: hop_rank[k[0]])

    def cells(stats: Stats | None) -> list[str]:
        if stats is None:
            return ["-", "-", "-"]
        return [_ms(stats.mean_ms), _ms(stats.p50_ms), _ms(stats.p99_ms)]

    for hop, kind in keys:
        row_cells: list[str] = []
        for w in waterfalls:
            hop_row = next((r for r in w.hops if r.hop == hop), None)
            if hop_row is None:
                row_cells += cells(None)
            elif kind is None:
                row_cells += cells(hop_row.stats)
            else:
                k = next((k for k in hop_row.kinds if k.kind == kind), None)
                row_cells += cells(k.stats if k else None)
        label = hop if kind is None else f"  {kind}"
        table.add_row(label, *row_cells, style="bold" if kind is None else "")
    for name, attr in (("end-to-end", "end_to_end"), ("fire lateness", "lateness")):
        table.add_row(name, *[c for w in waterfalls for c in cells(getattr(w, attr))], style="bold")
    table.add_row("runs", *[c for w in waterfalls for c in (str(w.runs), "", "")])
    return table


def _header(waterfall: Waterfall) -> str:
    picked = ", ".join(f"{k}={v}" for k, v in waterfall.selection.items()) or "all runs"
    return f"{waterfall.runs} runs ({picked})"


def text_console(out: io.StringIO, width: int, color: bool) -> Console:
    """A rich console writing plain text to ``out`` (ANSI styles with ``color``)."""
    return Console(
        file=out,
        width=width,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
        emoji=False,
    )


def render_terminal(
    waterfall: Waterfall | Sequence[Waterfall], *, width: int = 110, color: bool = False
) -> str:
    """The waterfall (or, for a sequence, the scenarios side by side) as terminal
    text; ``color`` adds ANSI styles."""
    waterfalls = [waterfall] if isinstance(waterfall, Waterfall) else list(waterfall)
    compare = not isinstance(waterfall, Waterfall)
    out = io.StringIO()
    console = text_console(out, width, color)
    if not waterfalls:
        console.print("no runs match the selection")
        return out.getvalue()
    for w in waterfalls:
        prefix = f"[{w.scenario}] " if compare else ""
        console.print(Text(prefix + w.tail.headline, style="bold yellow"), soft_wrap=True)
    for w in waterfalls:
        console.print(Text(("[" + str(w.scenario) + "] " if compare else "") + _header(w)))
        if w.set_aside:
            console.print(Text("note: " + w.set_aside_note()), soft_wrap=True)
    console.print(_bars(waterfalls, width - LABEL - 2, compare))
    if compare:
        console.print(_side_by_side(waterfalls))
        return out.getvalue()
    for w in waterfalls:
        console.print(_numbers(w))
        if w.tail.contributions:
            console.print(_tail_details(w))
    return out.getvalue()
