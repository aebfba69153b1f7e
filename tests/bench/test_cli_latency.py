"""The ``cli`` scenario end to end at a tiny size: fresh ``cronwave`` processes against
a real suite, each command's figures and its row against the target (read, never
asserted: speed belongs to the table)."""

from __future__ import annotations

import sys
from pathlib import Path

from cronwave_bench.context import BenchContext, Sizes
from cronwave_bench.harness import Backend
from cronwave_bench.report import OK
from cronwave_bench.runner import run_scenarios


def test_the_cli_scenario_times_help_and_a_listing(
    tmp_path: Path, database_url: str, redis_url: str
) -> None:
    ctx = BenchContext(
        Backend(database_url, redis_url),
        tmp_path,
        Sizes.tiny(),
        say=lambda line: print(line, file=sys.stderr),
    )

    (result,) = run_scenarios(["cli"], ctx)

    assert result.status == OK, result.notes
    for command in ("--help", "schedule list"):
        assert result.figures[command]["count"] == ctx.sizes.cli_runs
        assert result.figures[command]["p50"] > 0
    assert [row.target for row in result.rows] == ["p50 <= 0.3 s", "p50 <= 0.5 s"]
    assert all(row.met is not None for row in result.rows)
