"""Request rules that need no database. Each failure names the field and the rule.

Ids and names (``key``, ``name``) follow the request limits
(``cronwave_core.limits.RequestLimits``): at most ``id_chars`` characters of ASCII
letters, digits and ``. _ - : @ / + = #``; notes and reasons at most ``note_bytes``;
other free text at most ``MAX_TEXT`` characters without NUL; a result and a checkpoint
at most ``result_bytes`` and ``checkpoint_bytes``; JSON documents standard
(no NaN or Infinity) and at most ``MAX_JSON_DEPTH`` deep. The limits in force are the
ones the store's ``main()`` gave ``use`` before serving (the defaults until then).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from cronwave_core import fields
from cronwave_core.errors import InvalidArgument
from cronwave_core.limits import DEFAULT_LIMITS, RequestLimits
from workflow_store.records import JobTypeRecord

#: A job type's backoff coefficient: 0 (the worker's default) or within this range.
MAX_BACKOFF = 1_000.0
#: The most error type names a job type may list as non-retryable.
MAX_ERROR_NAMES = 100

SCHEDULE_ID = fields.SCHEDULE_ID
JOB_TYPE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")

_limits = DEFAULT_LIMITS


def use(limits: RequestLimits) -> None:
    """Make ``limits`` the ones every later check applies: the store's ``main()`` calls
    it once, before it serves."""
    global _limits
    _limits = limits


def limits() -> RequestLimits:
    """The request limits in force."""
    return _limits


def schedule_id(value: str, field: str = "schedule_id") -> str:
    """The schedule a call is about: required, ``fields.SCHEDULE_ID``."""
    return fields.schedule_id(value, field)


def schedule_ref(value: str, field: str) -> str:
    """A schedule id a read may leave empty (a filter, a page cursor): empty, or
    ``fields.SCHEDULE_ID``, so a value no schedule can have is refused by its field
    rather than answered with nothing."""
    return fields.schedule_id(value, field, required=False)


def key(value: str, field: str, *, required: bool = False) -> str:
    """A run id, idempotency key, trace id or page cursor."""
    return _limits.identifier(value, field, required=required)


def run_id(value: str, field: str = "run_id") -> str:
    """The run id of a call about one run: never empty (``fields.require_run_id``, the
    same answer from every RPC), then a key."""
    return key(fields.require_run_id(value, field), field)


#: A worker's key for one claim: random, long enough not to be guessed.
_CLAIM_KEY = re.compile(r"[A-Za-z0-9_-]{16,64}")


def claim_key(value: str, field: str) -> str:
    """A claim's key: empty (none), or 16 to 64 letters, digits, '-' or '_'."""
    if value and not _CLAIM_KEY.fullmatch(value):
        raise InvalidArgument(
            field,
            "must be empty or 16 to 64 letters, digits, '-' or '_' (a random key the "
            f"worker makes for one claim), got {len(value)} characters",
        )
    return value


def name(value: str, field: str, *, required: bool = False) -> str:
    """A job type, queue, worker, event kind or error type name."""
    return _limits.identifier(value, field, required=required)


def note(value: str, field: str) -> str:
    """A note or reason a person or a policy gives (pause note, cancel reason)."""
    return _limits.note(value, field)


def text(value: str, field: str) -> str:
    """Free text: an event detail, an error or a poison message."""
    return fields.text(value, field)


def payload_json(value: str, field: str = "payload_json", *, within: str = "schedule.") -> str:
    """The payload text, ``"{}"`` when empty; it must be a JSON object of at most the
    limits' ``payload_bytes`` of UTF-8. The size is checked first, so an oversized text
    is never parsed; its refusal names the request's field in full (``within``:
    ``schedule.payload_json``)."""
    _limits.payload_size(value, f"{within}{field}")
    if not value.strip():
        return "{}"
    parsed = fields.json_document(value, field)
    if not isinstance(parsed, dict):
        raise InvalidArgument(field, f"must be a JSON object, got {_json_kind(parsed)}")
    return value


def json_text(value: str, field: str, *, object_only: bool = False) -> str:
    """Empty, or a JSON document (an object with ``object_only``)."""
    if not value:
        return value
    parsed = fields.json_document(value, field)
    if object_only and not isinstance(parsed, dict):
        raise InvalidArgument(field, f"must be a JSON object, got {_json_kind(parsed)}")
    return value


def result_json(value: str, field: str = "result_json") -> str:
    """A run's result: empty, or a JSON document of at most the limits'
    ``result_bytes`` of UTF-8, the size checked before it is parsed."""
    _limits.result_size(value, field)
    return json_text(value, field)


def checkpoint_json(value: str, field: str = "checkpoint_json") -> str:
    """A run's checkpoint: empty (unchanged), or a JSON object of at most the limits'
    ``checkpoint_bytes`` of UTF-8, the size checked before it is parsed."""
    _limits.checkpoint_size(value, field)
    return json_text(value, field, object_only=True)


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def job_type(record: JobTypeRecord) -> JobTypeRecord:
    if not record.name:
        raise InvalidArgument("job_type.name", "required, e.g. billing.nightly")
    name(record.name, "job_type.name")
    if not JOB_TYPE_NAME.fullmatch(record.name):
        raise InvalidArgument(
            "job_type.name",
            f"{fields.shown(record.name)} must use a-z, 0-9, '.', '_' or '-', starting with "
            "a letter or digit",
        )
    if record.duration_limit <= timedelta(0):
        raise InvalidArgument(
            "job_type.duration_limit",
            "required and must be positive: every job type needs a time limit",
        )
    if record.heartbeat_timeout <= timedelta(0):
        raise InvalidArgument("job_type.heartbeat_timeout", "must be positive")
    retry = record.retry
    for what, value in (
        ("initial_interval", retry.initial_interval),
        ("maximum_interval", retry.maximum_interval),
    ):
        if value < timedelta(0):
            raise InvalidArgument(f"job_type.retry.{what}", "must not be negative")
    coefficient = retry.backoff_coefficient
    if coefficient != 0 and not 1.0 <= coefficient <= MAX_BACKOFF:  # also refuses NaN
        raise InvalidArgument(
            "job_type.retry.backoff_coefficient",
            f"must be 0 (the default) or a finite number in [1, {MAX_BACKOFF:g}], "
            f"got {coefficient}",
        )
    if retry.maximum_attempts < 0:
        raise InvalidArgument(
            "job_type.retry.maximum_attempts", "must not be negative (0 means unlimited)"
        )
    errors = retry.non_retryable_errors
    if len(errors) > MAX_ERROR_NAMES:
        raise InvalidArgument(
            "job_type.retry.non_retryable_errors",
            f"must have at most {MAX_ERROR_NAMES} entries, got {len(errors)}",
        )
    for i, error in enumerate(errors):
        name(error, f"job_type.retry.non_retryable_errors[{i}]", required=True)
    name(record.queue, "job_type.queue")
    return record
