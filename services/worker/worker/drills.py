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
from worker.chain import Delivery, RunMiddleware

log = logging.getLogger("cronwave.worker.drill")

STOP_BEFORE_COMPLETE = "worker.stop_before_complete"


class StopBeforeComplete(RunMiddleware):
    """A middleware of the worker's chain after completion (``worker.chain``): its
    ``before_complete`` runs once the attempt's outcome is decided, just before the
    completion is sent."""

    def __init__(self, attempt: int) -> None:
        self._attempt = attempt

    def before_complete(self, delivery: Delivery) -> None:
        run_id, attempt = delivery.run.run_id, delivery.run.attempt
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


def drill_hooks(hooks: TestHooks) -> StopBeforeComplete | None:
    """The drill ``CRONWAVE_FAULT`` names, in a worker started for drills
    (``hooks.enabled``); None otherwise. A malformed value stops start-up
    (``ConfigurationError``)."""
    if not hooks.enabled:
        return None
    raw = named_items(hooks.fault, f"{STOP_BEFORE_COMPLETE}=1").get(STOP_BEFORE_COMPLETE)
    if raw is None:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigurationError(
            f"CRONWAVE_FAULT: {STOP_BEFORE_COMPLETE} expects an attempt number >= 1, got {raw!r}"
        )
    return StopBeforeComplete(int(raw))
