"""The worker's own settings, read from ``CRONWAVE_*`` variables (``Settings.extra``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from cronwave_core.errors import ConfigurationError

ISOLATION_VAR = "CRONWAVE_JOB_ISOLATION"
KILL_GRACE_VAR = "CRONWAVE_JOB_KILL_GRACE"
WARM_VAR = "CRONWAVE_JOB_WARM_PROCESSES"
MAX_VAR = "CRONWAVE_JOB_MAX_PROCESSES"


@dataclass(frozen=True)
class WorkerOptions:
    """``isolation``: "process" (each job body in a job process the worker can kill;
    the default) or "thread" (in the worker's threads: no kill for a body stuck in C
    code). ``kill_grace``: between SIGTERM and SIGKILL of a job process.
    ``warm_processes``: job processes kept started and ready (default 2).
    ``max_processes``: job bodies running at once (default: the worker's threads);
    more wait, heartbeating, for a process to come back."""

    isolation: str = "process"
    kill_grace: timedelta = timedelta(seconds=2)
    warm_processes: int = 2
    max_processes: int = 8

    @classmethod
    def from_env(cls, env: Mapping[str, str], threads: int) -> WorkerOptions:
        isolation = (env.get(ISOLATION_VAR) or "process").strip().lower()
        if isolation not in ("process", "thread"):
            raise ConfigurationError(
                f"{ISOLATION_VAR}: expected process or thread, got {isolation!r}"
            )
        raw_grace = env.get(KILL_GRACE_VAR) or "2"
        try:
            grace = float(raw_grace.removesuffix("s"))
        except ValueError:
            grace = -1.0
        if not 0 <= grace <= 300:
            raise ConfigurationError(
                f"{KILL_GRACE_VAR}: expected seconds in [0, 300], got {raw_grace!r}"
            )
        raw_max = env.get(MAX_VAR) or str(threads)
        if not raw_max.isdigit() or int(raw_max) < 1:
            raise ConfigurationError(f"{MAX_VAR}: expected a whole number >= 1, got {raw_max!r}")
        most = int(raw_max)
        raw_warm = env.get(WARM_VAR) or str(min(2, most))
        if not raw_warm.isdigit():
            raise ConfigurationError(f"{WARM_VAR}: expected a whole number, got {raw_warm!r}")
        return cls(
            isolation=isolation,
            kill_grace=timedelta(seconds=grace),
            warm_processes=min(int(raw_warm), most),
            max_processes=most,
        )
