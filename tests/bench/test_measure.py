"""Reading body starts from run histories, exact percentiles, size overrides, and the
CPU meter (on real processes)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from cronwave._models import RunEvent
from cronwave_bench.context import Sizes
from cronwave_bench.measure import (
    CpuMeter,
    MachineTimes,
    body_starts,
    cpu_seconds,
    descendants,
    ms_figures,
)
from cronwave_core.errors import InvalidArgument

AT = datetime(2030, 1, 1, 2, 0, tzinfo=UTC)


def _event(seq: int, kind: str, detail: str) -> RunEvent:
    return RunEvent(seq=seq, run_id="r", kind=kind, at=AT, detail=detail, attempt=1)


def test_body_starts_come_from_started_events_only() -> None:
    events = [
        _event(1, "claimed", "worker-1"),
        _event(2, "started", "body_started_at=2030-01-01T02:00:00.000250+00:00 lateness_ms=0.250"),
        _event(3, "succeeded", ""),
        _event(4, "started", "body_started_at=2030-01-01T02:00:05+00:00 lateness_ms=5000.0"),
        _event(5, "started", "garbled"),
    ]

    assert body_starts(events) == [
        AT + timedelta(microseconds=250),
        AT + timedelta(seconds=5),
    ]


def test_figures_are_exact_percentiles_of_the_values() -> None:
    figures = ms_figures([float(v) for v in range(1, 101)], ("p50", "p99", "p999", "max"))

    assert figures == {"count": 100.0, "p50": 50.5, "p99": 99.01, "p999": 99.901, "max": 100.0}
    assert ms_figures([], ("p50",)) is None


def test_sizes_take_overrides_by_name() -> None:
    sizes = Sizes().overridden(["burst=100", "throughput-window=10"])

    assert sizes.burst == 100
    assert sizes.throughput_window == timedelta(seconds=10)
    with pytest.raises(InvalidArgument, match="--size"):
        Sizes().overridden(["bursts=1"])
    with pytest.raises(InvalidArgument, match="burst: expected a number"):
        Sizes().overridden(["burst=many"])


# Waits for a line, spends CPU, says so, then waits to be killed.
_BURN = (
    "import sys\n"
    "sys.stdin.readline()\n"
    "n = 0\n"
    "for i in range(5_000_000): n += i\n"
    "print(n, flush=True)\n"
    "sys.stdin.readline()\n"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_cpu_meter_counts_what_a_process_spent_between_start_and_stop() -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    busy, idle = procs
    assert busy.stdin and busy.stdout
    try:
        meter = CpuMeter({"busy": busy.pid, "idle": idle.pid})
        meter.start()
        busy.stdin.write("go\n")
        busy.stdin.flush()
        assert busy.stdout.readline().strip() == str(sum(range(5_000_000)))
        spent = meter.stop()
        idle.kill()
        idle.wait(timeout=10)
        after_exit = meter.stop()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=10)

    # Five million additions cost the busy process far more CPU than the idle one.
    assert spent["busy"] > 0.05
    assert spent["idle"] < spent["busy"] / 5
    # A process that is gone is left out, not counted as zero.
    assert "idle" not in after_exit and "busy" in after_exit
    assert cpu_seconds(idle.pid) is None
    # And the machine was busy for at least the busy process's share of it
    assert meter.machine is not None
    assert 0 < meter.machine["busy"] <= 1 and 0 <= meter.machine["stolen"] <= 1


def test_machine_shares_are_of_all_the_time_in_between() -> None:
    before = MachineTimes(busy=1000, idle=3000, steal=10)
    after = MachineTimes(busy=1150, idle=3040, steal=20)
    # 150 busy, 40 idle and 10 stolen ticks: 200 in all
    assert after.shares_since(before) == {"busy": 0.75, "stolen": 0.05}
    # No tick in between: no shares, rather than a division by zero
    assert before.shares_since(before) is None


# Once told to, starts two children that each spend CPU: the first is reaped, the
# second has spent its CPU and lives on until the parent is killed.
_PARENT = """
import subprocess, sys
burn = "n = 0\\nfor i in range(5_000_000): n += i\\nprint(n, flush=True)\\ninput()"
pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
print("ready", flush=True)
sys.stdin.readline()
gone = subprocess.Popen([sys.executable, "-c", burn], **pipes)
gone.communicate("x\\n")
live = subprocess.Popen([sys.executable, "-c", burn], **pipes)
live.stdout.readline()
print(live.pid, flush=True)
sys.stdin.readline()
live.kill()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_cpu_meter_counts_the_processes_a_service_started_apart_from_it() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdin and parent.stdout
    try:
        assert parent.stdout.readline().strip() == "ready"
        meter = CpuMeter({"worker": parent.pid})
        meter.start()
        parent.stdin.write("go\n")
        parent.stdin.flush()
        live = int(parent.stdout.readline())
        assert live in descendants(parent.pid)  # the live child was still there
        spent = meter.stop()
    finally:
        parent.kill()
        parent.wait(timeout=10)

    # Two children's five million additions each, the reaped one's included, and
    # far more than the parent itself spent waiting for them.
    assert spent["worker children"] > 0.1
    assert spent["worker"] < spent["worker children"] / 3
