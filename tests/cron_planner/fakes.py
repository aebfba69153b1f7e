"""What the fire loop's stand-in dispatchers share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from cron_planner.ports import Start
from cron_planner.work import Trigger
from cronwave_core.errors import CronwaveError


def start_each(
    start_run: Callable[[str, datetime, int, Trigger], str], starts: Sequence[Start], token: int
) -> list[str | CronwaveError]:
    """A batch of starts answered start by start: a run id or the error raised."""
    answers: list[str | CronwaveError] = []
    for start in starts:
        try:
            answers.append(start_run(start.schedule_id, start.fire_time, token, start.trigger))
        except CronwaveError as exc:
            answers.append(exc)
    return answers
