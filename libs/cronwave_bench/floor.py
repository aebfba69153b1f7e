"""The machine's floor: how late a bare process wakes for an instant it waits for.

While ``single`` runs, a separate process waits for every half second between its
fires with the worker's own wait (``cronwave_core.domain.instants.wait_until_fire_time``) and does
nothing else. Its lateness is what the operating system alone adds on this machine at
this time (other processes wanting the CPUs); a job body cannot start earlier than
that. On a shared machine it tells the scheduler's share of the tail from the
machine's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from typing import Any

from cronwave_bench.measure import ms_figures

_PROBE = """
import json, sys, time
from datetime import UTC, datetime, timedelta
from cronwave_core.domain.instants import epoch_ns, wait_until_fire_time

count = int(sys.argv[1])
late = []
for _ in range(count):
    now = datetime.now(UTC)
    instant = now.replace(microsecond=500_000)
    if instant <= now:
        instant += timedelta(seconds=1)
    late.append((wait_until_fire_time(instant) - epoch_ns(instant)) / 1e6)
print(json.dumps(late))
"""


def start_floor(duration: timedelta) -> subprocess.Popen[str]:
    """Start waiting for every half second during ``duration``."""
    count = max(1, int(duration.total_seconds()))
    return subprocess.Popen(
        [sys.executable, "-P", "-c", _PROBE, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def floor_figures(proc: subprocess.Popen[str], timeout: timedelta) -> dict[str, Any] | None:
    """Lateness p50 / p90 / p99 / max of the waits, in ms; None if the probe failed."""
    try:
        out, _ = proc.communicate(timeout=timeout.total_seconds())
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    try:
        values = [float(v) for v in json.loads(out.strip().splitlines()[-1])]
    except (ValueError, IndexError):
        return None
    return ms_figures(values, ("p50", "p90", "p99", "max"))
