"""The table and the JSON a bench run prints: rows, verdicts, unavailable scenarios."""

from __future__ import annotations

import json
from pathlib import Path

from cronwave_bench.report import NOT_AVAILABLE, Result, fmt_ms, markdown, write_json


def _results() -> list[Result]:
    single = Result("single", figures={"lateness_ms": {"p50": 0.1234567}})
    single.row("fire lateness p50", fmt_ms(0.1234567), "<= 0.5 ms", True)
    single.row("fire lateness p99", fmt_ms(2.5), "<= 1.5 ms", False)
    single.row("fires", "60 of 60 started")
    single.notes.append("dispatch lead 2 s")
    billing = Result("billing", status=NOT_AVAILABLE, notes=["no billing demo here"])
    return [single, billing]


def test_the_table_has_a_row_per_figure_with_its_verdict() -> None:
    text = markdown(_results(), ["backend: SQLite"])

    lines = text.splitlines()
    assert lines[0] == "backend: SQLite"
    assert "| single | fire lateness p50 | 0.123 ms | <= 0.5 ms | met |" in lines
    assert "|  | fire lateness p99 | 2.500 ms | <= 1.5 ms | **missed** |" in lines
    assert "|  | fires | 60 of 60 started |  |  |" in lines
    assert "| billing | not available | no billing demo here | | |" in lines
    assert "- single: dispatch lead 2 s" in lines


def test_the_json_keeps_status_rows_and_rounded_figures(tmp_path: Path) -> None:
    path = tmp_path / "out" / "bench.json"

    write_json(path, _results(), {"database": "sqlite"})

    document = json.loads(path.read_text())
    assert document["database"] == "sqlite"
    single, billing = document["scenarios"]
    assert single["figures"] == {"lateness_ms": {"p50": 0.123}}
    assert single["rows"][1] == {
        "metric": "fire lateness p99",
        "value": "2.500 ms",
        "target": "<= 1.5 ms",
        "met": False,
    }
    assert billing["status"] == NOT_AVAILABLE and billing["rows"] == []


def test_milliseconds_are_shown_at_a_readable_precision() -> None:
    assert [fmt_ms(v) for v in (0.0421, 12.345, 2500.0, None)] == [
        "0.042 ms",
        "12.3 ms",
        "2.50 s",
        "n/a",
    ]
