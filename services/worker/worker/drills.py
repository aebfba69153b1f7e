"""Drill hooks of the worker, in a worker started for drills only
(``CRONWAVE_TEST_HOOKS=1``) and off unless ``CRONWAVE_FAULT`` names one.

``worker.stop_before_complete=<attempt>``
    Once an attempt numbered ``<attempt>`` has finished its job body, and before its
    completion is sent, the worker stops its own process group (SIGSTOP), as a paused
    VM or container would stop it at that instant. A drill resumes it (SIGCONT) after
    another worker has taken the run over, to show that the store refuses the
    completion of the superseded attempt and keeps nothing it reports.
"""

from __future__ import annotations

import logging
import os
import signal

from cronwave_core.errors import ConfigurationError
from cronwave_core.faults import named_items
from cronwave_core.settings import TestHooks

log = logging.getLogger("cronwave.worker.drill")

STOP_BEFORE_COMPLETE = "worker.stop_before_complete"


class DrillHooks:
    """Hooks on the worker's path that do nothing: what every worker not started for
    drills has (``NO_DRILLS``)."""

    def before_complete(self, run_id: str, attempt: int) -> None:
        """Called after an attempt's job body ended, before its completion is sent."""


NO_DRILLS = DrillHooks()


class StopBeforeComplete(DrillHooks):
    def __init__(self, attempt: int) -> None:
        self._attempt = attempt

    def before_complete(self, run_id: str, attempt: int) -> None:
        if attempt != self._attempt:
            return
        log.warning(
            "drill %s: stopping this worker before completing run %s attempt %d",
            STOP_BEFORE_COMPLETE,
            run_id,
            attempt,
        )
        os.killpg(os.getpgid(0), signal.SIGSTOP)
        log.warning("drill %s: resumed; completing run %s", STOP_BEFORE_COMPLETE, run_id)


def drill_hooks(hooks: TestHooks) -> DrillHooks:
    """The hooks ``CRONWAVE_FAULT`` names, in a worker started for drills
    (``hooks.enabled``); ``NO_DRILLS`` otherwise. A malformed value stops
    start-up (``ConfigurationError``)."""
    if not hooks.enabled:
        return NO_DRILLS
    raw = named_items(hooks.fault, f"{STOP_BEFORE_COMPLETE}=1").get(STOP_BEFORE_COMPLETE)
    if raw is None:
        return NO_DRILLS
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigurationError(
            f"CRONWAVE_FAULT: {STOP_BEFORE_COMPLETE} expects an attempt number >= 1, got {raw!r}"
        )
    return StopBeforeComplete(int(raw))
