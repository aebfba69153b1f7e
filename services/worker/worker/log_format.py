"""The worker's and its job processes' log lines: a line a job wrote through
``ctx.logger`` ends with the run it belongs to (``run_id=… schedule_id=… trace_id=…``),
so a run's lines can be found with grep and its trace opened from them."""

from __future__ import annotations

import logging

from cronwave._job_context import LOG_FIELDS


class RunLogFormatter(logging.Formatter):
    """``fmt``, plus the run's fields for a record that carries them."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = [f"{name}={value}" for name in LOG_FIELDS if (value := getattr(record, name, ""))]
        return f"{line} [{' '.join(fields)}]" if fields else line


def configure_logging(fmt: str) -> None:
    """INFO and up to stderr, in ``fmt`` with the run's fields (``RunLogFormatter``)."""
    logging.basicConfig(level=logging.INFO, format=fmt)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(RunLogFormatter(fmt))
