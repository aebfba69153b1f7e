"""What every scenario is given: the backend, the sizes, a work directory, a way to
report progress, and what earlier scenarios left for later ones (span stores)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from cronwave_bench.harness import Backend, Say, _quiet
from cronwave_core.errors import InvalidArgument


@dataclass(frozen=True)
class Sizes:
    """How big each scenario is. The defaults are the figures issue targets are
    stated for; ``tiny()`` is for smoke tests of the runner."""

    single_fires: int = 60
    burst: int = 1000
    #: The large variant of the burst (0: left out), runs per variant, whether the
    #: tuned variant runs (0: left out), and how many of the headline variants (1,000
    #: one-off, 1,000 cron, the large one, in that order) run again under the load.
    burst_large: int = 10_000
    burst_repeats: int = 3
    burst_tuned: int = 1
    burst_loaded: int = 3
    # Offered runs per second (one 1-second schedule each): 2% over the 500/s target,
    # so a pipeline that keeps up reads above it whatever the window's edges catch.
    throughput_rate: int = 510
    throughput_window: timedelta = timedelta(seconds=30)
    throughput_warmup: timedelta = timedelta(seconds=5)
    # The saturation ramp: runs due per second added per step, the highest offer, and
    # each step's window, and how many ramps run (each on a fresh suite).
    saturation_step: int = 250
    saturation_max: int = 2000
    saturation_window: timedelta = timedelta(seconds=10)
    saturation_repeats: int = 3
    # The store stopped under load: 1-second schedules, how long it is stopped, how
    # long the suite is watched after, and how many runs (each on a fresh suite).
    stall_rate: int = 250
    stall_hold: timedelta = timedelta(seconds=15)
    stall_after: timedelta = timedelta(seconds=120)
    stall_repeats: int = 3
    failover_trials: int = 20
    billing_customers: int = 100_000
    planner_schedules: int = 100_000
    # Sharded planning: schedules across 4 planners over 64 shards.
    sharded_schedules: int = 1_000_000
    # The fault matrix: schedules firing every second, how long each held fault lasts
    # (SIGSTOP, blackhole, Redis down), and the quiet period after each recovery.
    fault_matrix_schedules: int = 100
    fault_matrix_hold: timedelta = timedelta(seconds=10)
    fault_matrix_quiet: timedelta = timedelta(seconds=10)
    # Fresh `cronwave` processes timed per command (cli).
    cli_runs: int = 10
    # `cronwave up --workers 2` started per mode, forked and new interpreters (startup).
    startup_runs: int = 3
    # The console's list of schedules: schedules, runs of each, fetches of the front page.
    console_schedules: int = 10_000
    console_runs: int = 24
    console_gets: int = 5
    # The truth trials: trials (round the three injection points), runs per trial, and
    # the delay injected into 3% of each trial's runs at one hop and kind.
    truth_trials: int = 21
    truth_runs: int = 400
    truth_delay_ms: int = 50

    @classmethod
    def tiny(cls) -> Sizes:
        return cls(
            single_fires=3,
            burst=10,
            burst_large=0,
            burst_repeats=1,
            burst_tuned=0,
            burst_loaded=1,  # the loaded path is the same for every kind
            throughput_rate=5,
            throughput_window=timedelta(seconds=3),
            throughput_warmup=timedelta(seconds=1),
            saturation_step=5,
            saturation_max=10,
            saturation_window=timedelta(seconds=3),
            saturation_repeats=1,
            stall_rate=5,
            stall_hold=timedelta(seconds=1),
            stall_after=timedelta(seconds=6),
            stall_repeats=1,
            failover_trials=1,
            billing_customers=50,
            planner_schedules=200,
            sharded_schedules=300,
            fault_matrix_schedules=10,
            fault_matrix_hold=timedelta(seconds=3),
            fault_matrix_quiet=timedelta(seconds=1),
            cli_runs=2,
            startup_runs=1,
            console_schedules=300,
            console_runs=3,
            console_gets=2,
            truth_trials=1,
            truth_runs=40,
        )

    def scaled(self, **changes: Any) -> Sizes:
        return replace(self, **changes)

    def overridden(self, pairs: Sequence[str]) -> Sizes:
        """These sizes with ``NAME=VALUE`` overrides (``burst=100``,
        ``throughput_window=10``: seconds for durations)."""
        changes: dict[str, object] = {}
        known = {f.name: f for f in fields(self)}
        for pair in pairs:
            name, sep, raw = pair.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in known:
                raise InvalidArgument(
                    "--size",
                    f"expected NAME=VALUE with NAME one of {', '.join(known)}, got {pair!r}",
                )
            current = getattr(self, name)
            try:
                value = float(raw) if isinstance(current, timedelta) else int(raw)
            except ValueError:
                raise InvalidArgument("--size", f"{name}: expected a number, got {raw!r}") from None
            if value < 0:
                raise InvalidArgument("--size", f"{name}: must not be negative, got {raw!r}")
            changes[name] = timedelta(seconds=value) if isinstance(current, timedelta) else value
        return self.scaled(**changes)


@dataclass
class BenchContext:
    backend: Backend
    work_dir: Path
    sizes: Sizes = field(default_factory=Sizes)
    say: Say = _quiet
    #: Data dirs of suites that ran with tracing on, by scenario (for ``waterfall``).
    span_dirs: dict[str, Path] = field(default_factory=dict)
    #: A planner process's resident memory with no schedules, in MiB (for
    #: ``planner-memory``), measured by the first suite that ran.
    planner_idle_rss_mib: float | None = None

    def suite_dir(self, name: str) -> Path:
        path = self.work_dir / name
        path.mkdir(parents=True, exist_ok=True)
        return path
