"""The scenarios' names, in the order ``cronwave bench`` runs them. Apart from the
runner, so that the CLI lists them without importing a benchmark;
``tests/bench/test_scenario_names.py`` keeps the two in step."""

from __future__ import annotations

SCENARIO_NAMES = (
    "cli",
    "startup",
    "console",
    "single",
    "burst",
    "throughput",
    "saturation",
    "stall",
    "waterfall",
    "failover",
    "billing",
    "planner-memory",
    "sharded-planners",
    "fault-matrix",
    "truth",
)

#: ``cronwave load``'s cache scenarios: each one's ``cronwave-cache-control`` metadata.
LOAD_SCENARIOS = {"local": "", "redis": "no-local", "miss": "no-cache"}
#: The job type ``cronwave load`` runs unless told otherwise.
LOAD_JOB_TYPE = "cronwave.noop"
