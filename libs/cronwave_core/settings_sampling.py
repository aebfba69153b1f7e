"""What a worker keeps of a run that was not sampled (``telemetry.deferred``, the
worker's ``middleware.tracing``); listed in ``settings.COMPONENTS``. How much of each
schedule's runs is sampled is the schedule's own ``trace_sample``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cronwave_core.config import Duration, setting
from cronwave_core.settings_base import PREFIX, FromEnv


@dataclass(frozen=True, kw_only=True)
class TraceKeepSettings(FromEnv):
    """The rule that keeps a worker's spans of a run its schedule's ``trace_sample`` left
    out (its job process's among them): a run that failed, timed out, was cancelled or
    retried, or had not succeeded by its deadline, is always kept; one that started
    late by more than this is kept too (see *Sampling*)."""

    keep_late: timedelta | None = setting(
        PREFIX + "TRACE_KEEP_LATE",
        Duration(maximum=timedelta(hours=24)),
        timedelta(seconds=1),
        "a run not sampled keeps its worker's spans when its body started later than "
        "this after its fire time (and whenever it failed or was retried); `0`: "
        "lateness alone keeps none",
    )

    def __post_init__(self) -> None:
        if self.keep_late == timedelta(0):
            object.__setattr__(self, "keep_late", None)
