"""Request rules that need no database. Each failure names the field and the rule."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from cronwave_core.errors import InvalidArgument
from workflow_store.records import JobTypeRecord

SCHEDULE_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
JOB_TYPE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


def schedule_id(value: str, field: str = "schedule_id") -> str:
    if not value:
        raise InvalidArgument(field, "required, e.g. nightly-billing")
    if not SCHEDULE_ID.fullmatch(value):
        raise InvalidArgument(
            field,
            f"{value!r} must be 1-63 characters of a-z, 0-9, '.', '_' or '-', "
            "starting with a letter or digit",
        )
    return value


def payload_json(value: str, limit: int, field: str = "payload_json") -> str:
    """The payload text, ``"{}"`` when empty; it must be a JSON object of at most
    ``limit`` bytes of UTF-8. The size is checked first, so an oversized text is never
    parsed; its refusal names the request's field in full (``schedule.payload_json``)."""
    size = utf8_size(value)
    if size > limit:
        raise InvalidArgument(f"schedule.{field}", f"at most {limit} bytes, got {size}")
    if not value.strip():
        return "{}"
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise InvalidArgument(field, f"not valid JSON ({exc})") from exc
    if not isinstance(parsed, dict):
        raise InvalidArgument(field, f"must be a JSON object, got {type(parsed).__name__}")
    return value


def utf8_size(text: str) -> int:
    """The UTF-8 length of ``text``, without encoding an ASCII-only one."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def job_type(record: JobTypeRecord) -> JobTypeRecord:
    if not record.name:
        raise InvalidArgument("job_type.name", "required, e.g. billing.nightly")
    if not JOB_TYPE_NAME.fullmatch(record.name):
        raise InvalidArgument(
            "job_type.name",
            f"{record.name!r} must use a-z, 0-9, '.', '_' or '-', starting with a letter or digit",
        )
    if record.duration_limit <= timedelta(0):
        raise InvalidArgument(
            "job_type.duration_limit",
            "required and must be positive: every job type needs a time limit",
        )
    if record.heartbeat_timeout <= timedelta(0):
        raise InvalidArgument("job_type.heartbeat_timeout", "must be positive")
    retry = record.retry
    for name, value in (
        ("initial_interval", retry.initial_interval),
        ("maximum_interval", retry.maximum_interval),
    ):
        if value < timedelta(0):
            raise InvalidArgument(f"job_type.retry.{name}", "must not be negative")
    if retry.backoff_coefficient < 0:
        raise InvalidArgument("job_type.retry.backoff_coefficient", "must not be negative")
    if retry.maximum_attempts < 0:
        raise InvalidArgument(
            "job_type.retry.maximum_attempts", "must not be negative (0 means unlimited)"
        )
    return record
