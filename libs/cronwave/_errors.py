"""The SDK's own errors; every other error class is ``cronwave_core.errors``'s."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from cronwave_core.errors import CLI, SDK, CronwaveError

if TYPE_CHECKING:
    from cronwave._models import Run


class WaitTimeout(CronwaveError):
    """``Client.wait_run`` gave up before the run reached a terminal state.

    The run itself goes on; ``run`` is the last state the client saw of it."""

    status = "DEADLINE_EXCEEDED"
    hints = {
        CLI: "`cronwave runs show {run.run_id}` shows how far it got, "
        "or wait longer (`cronwave runs wait --timeout`)",
        SDK: "Client.run_events('{run.run_id}') shows how far it got, "
        "or wait longer (wait_run(..., timeout=...))",
    }

    def __init__(self, run: Run, waited: timedelta) -> None:
        seconds = f"{waited.total_seconds():g}s"
        super().__init__(f"run_id: run '{run.run_id}' is still {run.state} after {seconds}")
        self.run = run
        self.waited = waited
