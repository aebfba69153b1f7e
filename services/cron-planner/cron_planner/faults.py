"""Fault injection for failover drills, in a planner started for them only
(``CRONWAVE_TEST_HOOKS=1``) and off unless ``CRONWAVE_FAULT`` names one.

``CRONWAVE_FAULT`` is a comma-separated list of ``name=value`` items; the planner acts
on the ones below and leaves the others to the services they name.

``planner.hold_start=<seconds>``
    Every start request is held that long after the fire loop has taken the leader's
    fencing token and before it is sent. It stands for what a real leader suffers
    between checking its lease and writing: a GC pause, a swapped-out page, a slow
    network. A drill pauses the process (SIGSTOP) inside the hold, past its lease, to
    show that the store, not the lease, keeps the late write out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import timedelta

from cron_planner.ports import Dispatch, Start
from cronwave_core.errors import ConfigurationError, CronwaveError
from cronwave_core.faults import named_items
from cronwave_core.settings import TestHooks

log = logging.getLogger("cronwave.planner.fault")

HOLD_START = "planner.hold_start"


def parse(raw: str) -> dict[str, str]:
    """``name=value`` items of ``CRONWAVE_FAULT``; a malformed item stops start-up."""
    return named_items(raw, f"{HOLD_START}=0.5")


def hold_start(faults: dict[str, str]) -> timedelta | None:
    raw = faults.get(HOLD_START)
    if raw is None:
        return None
    try:
        seconds = float(raw.removesuffix("s"))
    except ValueError as exc:
        raise ConfigurationError(
            f"CRONWAVE_FAULT: {HOLD_START} expects seconds, got {raw!r}"
        ) from exc
    if not 0 < seconds <= 60:
        raise ConfigurationError(f"CRONWAVE_FAULT: {HOLD_START} must be in (0, 60], got {raw!r}")
    return timedelta(seconds=seconds)


class HeldDispatch:
    """A ``Dispatch`` that holds every start for ``hold`` before passing it on."""

    def __init__(self, inner: Dispatch, hold: timedelta) -> None:
        self._inner = inner
        self._hold = hold.total_seconds()

    def start_runs(self, starts: Sequence[Start], token: int) -> list[str | CronwaveError]:
        for start in starts:
            log.warning(
                "fault %s: holding the start of %s@%s (fencing token %d) for %.2fs",
                HOLD_START,
                start.schedule_id,
                start.fire_time.isoformat(),
                token,
                self._hold,
            )
        time.sleep(self._hold)  # monotonic: a pause of the process counts against it
        return self._inner.start_runs(starts, token)


def with_faults(dispatch: Dispatch, hooks: TestHooks) -> Dispatch:
    """``dispatch`` as ``CRONWAVE_FAULT`` says, in a planner started for tests
    (``hooks.enabled``); unchanged in any other and when it names no fault."""
    if not hooks.enabled:
        return dispatch
    hold = hold_start(parse(hooks.fault))
    if hold is None:
        return dispatch
    log.warning("fault injection on: %s=%s", HOLD_START, hold.total_seconds())
    return HeldDispatch(dispatch, hold)
