"""The CLI lists the scenarios from ``cronwave_bench.names`` without importing the
benchmarks: that list is the runner's, in its order."""

from __future__ import annotations

from cronwave_bench.names import SCENARIO_NAMES
from cronwave_bench.runner import SCENARIOS, choose


def test_the_cli_lists_the_runners_scenarios_in_order():
    assert tuple(SCENARIOS) == SCENARIO_NAMES
    assert choose([]) == list(SCENARIO_NAMES)
