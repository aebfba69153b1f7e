"""The ``truth`` scenario: a trial on real processes reads which runs carried the
injected delay from their spans, and the table counts the trials it was given. No
trial is held to being named right here (that is timing, the bench's table says it)."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from cronwave_bench.context import BenchContext, Sizes
from cronwave_bench.harness import Backend
from cronwave_bench.truth import Trial, run_trial, table
from cronwave_core.faults import LatencyFault


def _trial(hop: str, kind: str, right: bool, error: float, stalls: int) -> Trial:
    named = f"{hop}:{kind}" if right else "complete:database"
    excess = 50 * (1 + error)
    return Trial(hop, kind, named, right, excess, error, 12, 4, stalls, 5.0, "p99 tail: ")


def test_the_table_has_a_row_per_injection_point_and_one_for_all() -> None:
    trials = [
        _trial("persist", "database", True, 0.02, 1),
        _trial("persist", "database", False, 0.5, 4),
        _trial("pickup", "queue", True, 0.1, 0),
    ]

    rows = table(trials).splitlines()[2:]

    assert rows == [
        "| persist:database | 2 | 1 (50%) | 26%, 50% | 5 of 8 | +5.0 ms |",
        "| pickup:queue | 1 | 1 (100%) | 10%, 10% | 0 of 4 | +5.0 ms |",
        "| all | 3 | 2 (67%) | 10%, 50% | 5 of 12 |  |",
    ]


def test_a_trial_counts_the_runs_its_suite_slowed(
    tmp_path: Path, database_url: str, redis_url: str
) -> None:
    # Given a tiny bench and a delay in a fifth of the runs' queue wait
    sizes = Sizes.tiny().scaled(truth_runs=30)
    ctx = BenchContext(
        Backend(database_url, redis_url), tmp_path, sizes, say=lambda s: print(s, file=sys.stderr)
    )
    fault = LatencyFault("pickup", "queue", timedelta(milliseconds=50), 0.2)

    # When one trial runs
    trial = run_trial(ctx, fault, 0)

    # Then it read the runs the hook chose from the spans, and the waterfall named a cause
    assert 1 <= trial.injected_runs <= 20, trial
    assert trial.tail_runs >= 1, trial
    assert trial.named != "nothing", trial
    assert trial.headline.startswith("p99 tail: "), trial
    assert trial.floor_ms is not None, trial
