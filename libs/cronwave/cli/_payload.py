"""A job's payload on the command line: ``--payload`` takes the JSON object itself,
``@FILE`` (its contents) or ``-`` / ``@-`` (standard input), so a payload too large
for a shell's argument list is still sent whole; and how a payload is shown (short
ones as they are, long ones by size and keys, never hundreds of lines)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from cronwave_core.errors import InvalidArgument

#: What ``--payload`` says of itself in ``--help``.
HELP = "The job's input: a JSON object, @FILE holding one, or - (or @-) to read it from stdin."
#: A payload longer than this (in characters of JSON) is shown by its size and keys.
SHOWN_WHOLE = 200
#: At most this many of a long payload's keys are named.
KEYS_SHOWN = 5

_STDIN = ("-", "@-")


def payload_text(value: str, option: str = "--payload") -> str:
    """The JSON ``value`` stands for: itself, the file named after ``@`` (UTF-8), or
    standard input for ``-`` and ``@-``. A JSON object starts with ``{``, so neither
    form can be mistaken for one."""
    if value in _STDIN:
        return sys.stdin.read()
    if not value.startswith("@"):
        return value
    path = Path(value[1:]).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidArgument(
            option, f"cannot read the payload file {str(path)!r}: {reason}"
        ) from exc


def parse_payload(value: str, option: str = "--payload") -> dict[str, Any]:
    """The JSON object ``value`` gives (``payload_text``); ``InvalidArgument`` naming
    ``option`` otherwise."""
    text = payload_text(value, option)
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(option, f"not valid JSON ({exc.msg} at char {exc.pos})") from exc
    if not isinstance(parsed, dict):
        shown = text if len(text) <= 60 else f"{text[:60]}..."
        raise InvalidArgument(
            option, f"must be a JSON object such as '{{\"customers\": 200}}', got {shown!r}"
        )
    return parsed


def payload_summary(payload_json: str) -> str:
    """``payload_json`` as it is when short; else its size and its first keys, e.g.
    ``102,400 bytes, 3 keys: customers, period, notes``."""
    text = payload_json or "{}"
    if len(text) <= SHOWN_WHOLE:
        return text
    size = f"{len(text.encode()):,} bytes"
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return size
    if not isinstance(value, dict):
        return size
    keys = [key if len(key) <= 30 else f"{key[:30]}..." for key in list(value)[:KEYS_SHOWN]]
    more = ", ..." if len(value) > KEYS_SHOWN else ""
    return f"{size}, {len(value)} key(s): {', '.join(keys)}{more}"
