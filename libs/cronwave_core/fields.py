"""Rules every service applies to request fields: ids and names, free text and JSON
documents.

Each check returns the value (or, for JSON, the parsed document) or raises
``InvalidArgument`` naming the field and the rule, before anything is written. A
refusal quotes at most the first few characters of the value, so a huge value does not
come back in the message.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection
from typing import Any, NoReturn

from cronwave_core.errors import InvalidArgument

#: Ids, keys and page cursors (run ids, idempotency keys, fencing scopes...).
MAX_ID = 255
#: Names a program chooses: job types, queues, workers, event kinds, error types.
MAX_NAME = 200
#: Free text: notes, reasons, event details, errors, a poison message.
MAX_TEXT = 65_536
#: Nesting of a JSON document: objects and arrays inside each other.
MAX_JSON_DEPTH = 64
#: What a refusal quotes of a value.
SHOWN = 40

# Outside strings, only these change the nesting; a string (with its escapes) is
# matched whole, so the brackets inside it do not count.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def shown(value: str) -> str:
    """``value`` quoted for a message, cut to its first ``SHOWN`` characters."""
    if len(value) <= SHOWN:
        return repr(value)
    return f"{value[:SHOWN]!r}... ({len(value)} characters)"


def identifier(value: str, field: str, *, required: bool = False, limit: int = MAX_ID) -> str:
    """An id, key or name: at most ``limit`` characters, none of them a control,
    format or separator character other than the space (``str.isprintable``); empty
    only when not ``required``."""
    if not value:
        if required:
            raise InvalidArgument(field, "required")
        return value
    if len(value) > limit:
        raise InvalidArgument(field, f"must be at most {limit} characters, got {len(value)}")
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise InvalidArgument(
            field,
            f"must not contain control or non-printing characters "
            f"(found U+{ord(bad):04X} at index {value.index(bad)})",
        )
    return value


#: A schedule's id: 1-63 characters of a-z, 0-9, '.', '_' and '-', the first a letter
#: or digit. Every service that takes one checks it by this rule, reads too: an id
#: outside it names no schedule, and the caller hears which of its fields is wrong.
SCHEDULE_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")


def schedule_id(value: str, field: str = "schedule_id", *, required: bool = True) -> str:
    """``value`` if it is a schedule id (``SCHEDULE_ID``), else ``InvalidArgument``
    naming ``field``; empty only when not ``required``."""
    if not value:
        if required:
            raise InvalidArgument(field, "required, e.g. nightly-billing")
        return value
    if not SCHEDULE_ID.fullmatch(value):
        raise InvalidArgument(
            field,
            f"{shown(value)} must be 1-63 characters of a-z, 0-9, '.', '_' or '-', "
            "starting with a letter or digit",
        )
    return value


#: What every RPC, the SDK and a queue message answer for an empty run id: one rule,
#: INVALID_ARGUMENT ``run_id: required`` (the field named in full in a batch item,
#: ``runs[0].run_id``).
RUN_ID_REQUIRED = "required"


def require_run_id(value: str, field: str = "run_id") -> str:
    """``value`` unless it is empty: then ``InvalidArgument`` naming ``field`` with
    ``RUN_ID_REQUIRED``, the one answer every call that takes a run id gives."""
    if not value:
        raise InvalidArgument(field, RUN_ID_REQUIRED)
    return value


def lease_name(value: str, field: str) -> str:
    """A lease scope's or candidate's name, as leader-election grants leases and the
    store fences writes under them: at most ``MAX_NAME`` printable characters, no
    whitespace (it is part of a Redis key)."""
    if len(value) > MAX_NAME:
        raise InvalidArgument(field, f"must be at most {MAX_NAME} characters, got {len(value)}")
    if any(c.isspace() or not c.isprintable() for c in value):
        raise InvalidArgument(field, "must not contain whitespace or control characters")
    return value


def lease_scope(value: str, field: str, scopes: Collection[str]) -> str:
    """A lease scope of this suite: one of ``scopes`` (``CRONWAVE_LEASE_SCOPES``). The
    scopes are a closed set, so no caller can have a lease granted, or a fencing token
    issued, for a scope of its own making and write outside the planners' fence."""
    lease_name(value, field)
    if value not in scopes:
        raise InvalidArgument(
            field,
            f"{shown(value)} is not a lease scope of this suite; the scopes are "
            f"{', '.join(sorted(scopes))} (CRONWAVE_LEASE_SCOPES)",
        )
    return value


def text(value: str, field: str, *, limit: int = MAX_TEXT) -> str:
    """Free text: at most ``limit`` characters and no NUL (line breaks and tabs are
    fine; no database text column can hold a NUL)."""
    if len(value) > limit:
        raise InvalidArgument(field, f"must be at most {limit} characters, got {len(value)}")
    if "\x00" in value:
        raise InvalidArgument(
            field, f"must not contain NUL characters (found one at index {value.index(chr(0))})"
        )
    return value


def json_document(value: str, field: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON document ``value`` parsed: standard JSON (no ``NaN`` or ``Infinity``,
    no number too large for a double) nested at most ``max_depth`` deep. The depth is
    counted before parsing, so a deep document is refused without recursing into it."""
    if value.count("[") + value.count("{") > max_depth:
        depth = 0
        for match in _JSON_TOKEN.finditer(value):
            token = match.group()
            if token in ("[", "{"):
                depth += 1
                if depth > max_depth:
                    raise InvalidArgument(
                        field,
                        f"JSON nested more than {max_depth} levels deep "
                        f"(at character {match.start()})",
                    )
            elif token in ("]", "}"):
                depth -= 1
    try:
        parsed = json.loads(value, parse_constant=_no_constant, parse_float=_finite)
    except _NotStandard as exc:
        raise InvalidArgument(field, f"not standard JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgument(
            field, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError:  # an integer of more digits than Python converts
        raise InvalidArgument(field, "not valid JSON (a number has too many digits)") from None
    if "\\u" in value or _SURROGATE.search(value):
        _check_surrogates(parsed, field)
    return parsed


# A code point UTF-8 cannot encode: half of a UTF-16 pair, standing alone.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_surrogates(document: Any, field: str) -> None:
    """Refuse a string (key or value) holding a lone surrogate: JSON lets ``"\\udc00"``
    through, but the text it stands for is not valid UTF-8, so no database, log or job
    could store or read it whole. A pair (``"\\ud83d\\ude00"``) is one character and
    passes. The refusal says where (``$.a[0]``) and which code point."""
    stack: list[tuple[str, Any]] = [("$", document)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                where = f"{path}.{key}"
                if _SURROGATE.search(key):
                    _refuse_surrogate(field, f"the key {shown(key)} in {path}", key)
                stack.append((where, child))
        elif isinstance(node, list):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(node))
        elif isinstance(node, str) and _SURROGATE.search(node):
            _refuse_surrogate(field, f"the string at {path}", node)


def _refuse_surrogate(field: str, where: str, text: str) -> NoReturn:
    match = _SURROGATE.search(text)
    assert match is not None
    raise InvalidArgument(
        field,
        f"must be valid UTF-8: {where} holds a lone surrogate U+{ord(match.group()):04X} "
        "(a \\ud800-\\udbff escape must be followed by a \\udc00-\\udfff one)",
    )


class _NotStandard(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotStandard(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _NotStandard(f"{shown(text)} is too large for a JSON number")
    return number


# dramatiq's own rule for queue names, checked here so a bad name fails where it is
# chosen (a job type's definition, its registration, dispatch) rather than inside the
# broker.
_QUEUE_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9._-]*")


def validate_queue_name(queue: str, field: str = "queue") -> str:
    """``queue`` if the broker accepts it as a queue name, else ``InvalidArgument``."""
    if not isinstance(queue, str) or not _QUEUE_NAME.fullmatch(queue):
        raise InvalidArgument(
            field,
            f"{queue!r} is not a queue name: start with a letter or underscore, then "
            "letters, digits, '.', '_' or '-'",
        )
    return queue
