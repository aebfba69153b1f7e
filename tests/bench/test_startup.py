"""The ``startup`` scenario end to end at a tiny size: real ``cronwave up`` processes,
forked and as new interpreters, each service's CPU read in both modes (compared in the
table, never asserted: speed belongs there)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cronwave_bench.context import BenchContext, Sizes
from cronwave_bench.harness import Backend
from cronwave_bench.report import OK
from cronwave_bench.runner import run_scenarios
from cronwave_bench.startup import STARTS

pytestmark = pytest.mark.slow

SERVICES = {"workflow-store", "leader-election", "dispatcher", "worker", "cron-planner"}


def test_the_startup_scenario_reads_every_service_forked_and_new(tmp_path: Path) -> None:
    say = lambda line: print(line, file=sys.stderr)  # noqa: E731
    ctx = BenchContext(Backend(), tmp_path, Sizes.tiny(), say=say)

    (result,) = run_scenarios(["startup"], ctx)

    assert result.status == OK, result.notes
    for start in STARTS:
        forked = result.figures["medians"][f"forked, {start}"]
        fresh = result.figures["medians"][f"new interpreters, {start}"]
        for figures in (forked, fresh):
            assert figures.keys() >= SERVICES, figures
            assert all(figures[name] > 0 for name in SERVICES)
        # Only a forked suite has its own fork server (besides the workers' ones)
        assert forked["fork servers"] > fresh["fork servers"]
    compared = [row for row in result.rows if row.target == "<= half"]
    assert len(compared) >= 2 * len(SERVICES) and all(row.met is not None for row in compared)
