"""What a scenario hands back, and the Markdown table and JSON made of it.

Targets are read off the figures, never asserted: a row says ``met``, ``missed`` or
nothing (a figure without a target).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cronwave_bench.measure import rounded

OK = "ok"
NOT_AVAILABLE = "not available"
FAILED = "failed"


@dataclass(frozen=True)
class Row:
    """One line of the table: a figure, and the target it is held to (if any)."""

    metric: str
    value: str
    target: str = ""
    met: bool | None = None  # None: no target


@dataclass
class Result:
    """One scenario's outcome: its table rows and its figures (JSON-able)."""

    scenario: str
    status: str = OK
    rows: list[Row] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def row(self, metric: str, value: str, target: str = "", met: bool | None = None) -> None:
        self.rows.append(Row(metric, value, target, met))

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "status": self.status,
            "seconds": round(self.seconds, 1),
            "figures": rounded(self.figures),
            "rows": [
                {"metric": r.metric, "value": r.value, "target": r.target, "met": r.met}
                for r in self.rows
            ],
            "notes": self.notes,
        }


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 1000:
        return f"{value / 1000:.2f} s"
    if abs(value) >= 10:
        return f"{value:.1f} ms"
    return f"{value:.3f} ms"


def verdict(met: bool | None) -> str:
    if met is None:
        return ""
    return "met" if met else "**missed**"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(results: Sequence[Result], header: Sequence[str] = ()) -> str:
    """The table of every scenario's rows, after ``header`` lines (backend, machine)."""
    lines = [*header, ""] if header else []
    lines.append("| scenario | metric | value | target | |")
    lines.append("|---|---|---|---|---|")
    for result in results:
        if result.status != OK or not result.rows:
            reason = "; ".join(result.notes) or result.status
            lines.append(f"| {result.scenario} | {_cell(result.status)} | {_cell(reason)} | | |")
            continue
        for i, row in enumerate(result.rows):
            name = result.scenario if i == 0 else ""
            lines.append(
                f"| {name} | {_cell(row.metric)} | {_cell(row.value)} | {_cell(row.target)} "
                f"| {verdict(row.met)} |"
            )
    notes = [f"- {r.scenario}: {n}" for r in results if r.status == OK for n in r.notes]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines)


def write_json(path: Path, results: Sequence[Result], meta: dict[str, Any]) -> None:
    document = {**meta, "scenarios": [r.to_json() for r in results]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
