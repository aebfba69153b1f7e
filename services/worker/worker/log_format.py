"""The worker's and its job processes' log lines (``cronwave_core.logs``): a line a job
wrote through ``ctx.logger`` carries the run it belongs to (``run_id``, ``schedule_id``,
``trace_id``, ``span_id``), so a run's lines can be found and its trace opened from
them. Job processes write to the worker's stderr, so their lines are in its log."""

from __future__ import annotations

import os

from cronwave_core.logs import configure_logging as _configure


def configure_logging(job_process: bool = False) -> None:
    """INFO and up to stderr as the service ``worker``; a job process's text lines
    say ``job[<pid>]`` (its JSON lines: their ``logger``, ``cronwave.job.<job type>``
    for a job's own)."""
    _configure("worker", label=f"job[{os.getpid()}]" if job_process else None)
