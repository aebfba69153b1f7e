"""``LogSettings``: how a process writes its log lines (``cronwave_core.logs``)."""

from __future__ import annotations

from dataclasses import dataclass

from cronwave_core.config import Choice, setting
from cronwave_core.settings_base import PREFIX, FromEnv


@dataclass(frozen=True, kw_only=True)
class LogSettings(FromEnv):
    """A process's log lines (``cronwave_core.logs``)."""

    #: None (unset or empty): JSON unless stderr is a terminal.
    log_format: str | None = setting(
        PREFIX + "LOG_FORMAT",
        Choice("json", "text"),
        None,
        "`json`: one JSON object a line (`time`, `level`, `service`, `logger`, `message`, "
        "and a run's `run_id`, `schedule_id`, `trace_id`, `span_id`); `text`: one "
        "readable line. Unset: `text` when stderr is a terminal, else `json` (see *Logs*)",
    )
