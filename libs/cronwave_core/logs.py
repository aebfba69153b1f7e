"""A process's log lines: JSON for machines, one readable line for people.

Every cronwave process (the five services, the worker's job processes, the billing
demo's gateway) logs through the standard library's ``logging`` and calls
``configure_logging`` once in its ``main()``. One handler on the root logger writes to
stderr (the suite points it at ``<data dir>/logs/<process>.log``), in the format of
``CRONWAVE_LOG_FORMAT``: ``json``, ``text``, or, unset, ``text`` when stderr is a
terminal and ``json`` otherwise (a file, a pipe, a container's log).

A JSON line is one object::

    {"time": "2030-01-01T02:00:00.004Z", "level": "INFO", "service": "worker",
     "logger": "cronwave.job.billing.nightly", "message": "charged 1000 invoices",
     "run_id": "…", "schedule_id": "nightly-billing", "trace_id": "…", "span_id": "…",
     "job_type": "billing.nightly"}

``message`` is the same text a ``text`` line carries, so a search for a phrase finds
it in either. A line written while a span is current (everything a run does, in every
service: the run's spans carry ``cronwave.run_id`` and ``cronwave.schedule_id``) gets
the span's trace and span ids and the run's ids; a job's ``ctx.logger`` lines carry
them from the job's context. An exception's traceback is the ``exc_info`` field.

Whatever the format, every line goes through ``cronwave_core.redaction.redact``: no
URL password, bearer token or API key reaches the log (a driver's error that quotes a
connection string included).

Why python-json-logger: it is a ``logging.Formatter``, so the services' existing
``logging.getLogger(...)`` calls, dramatiq's and grpc's loggers, and ``%``-style
arguments keep working unchanged, with no second logging API to learn (structlog's
strength, bound loggers and processor chains, would mean rewriting every call).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import IO, Any

from opentelemetry import trace
from pythonjsonlogger.json import JsonFormatter

from cronwave_core.redaction import redact
from cronwave_core.settings import LogSettings
from cronwave_core.telemetry.lean import plain_attributes

#: The fields of a run a line carries when it is known (a record's own ``extra``,
#: e.g. ``JobContext.logger``'s, wins over the current span's).
RUN_FIELDS = ("run_id", "schedule_id", "trace_id", "span_id", "job_type")

# record attribute -> span attribute it is read from
_FROM_SPAN = (
    ("run_id", "cronwave.run_id"),
    ("schedule_id", "cronwave.schedule_id"),
    ("job_type", "cronwave.job_type"),
)


class ContextFilter(logging.Filter):
    """Adds ``service`` and, inside a span, the trace and span ids and the run's ids."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def filter(self, record: logging.LogRecord) -> bool:
        record.service = self.service
        span = trace.get_current_span()
        context = span.get_span_context()
        if context.is_valid:
            if not getattr(record, "trace_id", ""):
                record.trace_id = format(context.trace_id, "032x")
            if not getattr(record, "span_id", ""):
                record.span_id = format(context.span_id, "016x")
            attributes = plain_attributes(span)
            for name, key in _FROM_SPAN:
                value = attributes.get(key)
                if value and not getattr(record, name, ""):
                    setattr(record, name, str(value))
        return True


class SecretFilter(logging.Filter):
    """Masks secrets (``cronwave_core.redaction``) in a record's message, its
    traceback and its stack before any formatter sees them."""

    _render = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info:
            # Rendered here, once, and redacted: both formatters use exc_text.
            record.exc_text = record.exc_text or self._render.formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class TextFormatter(logging.Formatter):
    """``time service LEVEL message``, then ``[run_id=… schedule_id=… trace_id=…]``
    for a line of a run."""

    def __init__(self, label: str) -> None:
        super().__init__(f"%(asctime)s {label} %(levelname)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = [f"{name}={value}" for name in RUN_FIELDS if (value := getattr(record, name, ""))]
        return f"{line} [{' '.join(fields)}]" if fields else line


class JsonLineFormatter(JsonFormatter):
    """One JSON object a line (see the module's docstring); fields absent from a line
    are left out, never written empty."""

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(service)s %(name)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            json_ensure_ascii=False,
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{seconds}.{int(record.msecs):03d}Z"

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_data, record, message_dict)
        for name in RUN_FIELDS:
            if not log_data.get(name):
                log_data.pop(name, None)
        if record.exc_text and "exc_info" not in log_data:
            log_data["exc_info"] = record.exc_text


def resolve_format(settings: LogSettings, stream: IO[str]) -> str:
    """``json`` or ``text``: the setting, else ``text`` on a terminal."""
    if settings.log_format:
        return settings.log_format
    isatty = getattr(stream, "isatty", None)
    return "text" if callable(isatty) and isatty() else "json"


def configure_logging(
    service: str,
    settings: LogSettings | None = None,
    level: int = logging.INFO,
    stream: IO[str] | None = None,
    label: str | None = None,
) -> logging.Handler:
    """Make the root logger write ``level`` and up to ``stream`` (stderr) in the
    process's format, with its ``service`` name, the run's fields and secrets
    masked; any handler installed before is replaced. ``label`` names the process on
    a text line (default: ``service``). Returns the handler."""
    out = stream if stream is not None else sys.stderr
    chosen = resolve_format(settings or LogSettings.from_env(), out)
    handler = logging.StreamHandler(out)
    handler.addFilter(ContextFilter(service))
    handler.addFilter(SecretFilter())
    handler.setFormatter(
        JsonLineFormatter() if chosen == "json" else TextFormatter(label or service)
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # What Python would print to stderr by itself goes through the handler too, so
    # every line of the log has the format (and the masking).
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_thread_uncaught
    return handler


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    logging.getLogger("cronwave").critical("uncaught exception", exc_info=(kind, exc, tb))


def _log_thread_uncaught(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("cronwave").error(
        "uncaught exception in thread %s",
        name,
        exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback),
    )
