"""What a SQL span is called and what it says of its statement: the operation and the
table it works on (``INSERT runs``, ``SELECT schedules``, ``BEGIN``), never where the
database lives (OpenTelemetry's instrumentation names a SQLite span by the file's
path); the statement's text only as an attribute, cut to ``MAX_STATEMENT`` characters.

The table is read from the statement, not parsed: the name after ``INTO`` (an insert),
``UPDATE``, or the first ``FROM`` (a select or delete); a statement with none, or with a
sub-select there, is called by its operation alone.
"""

from __future__ import annotations

import re

#: ``db.statement`` keeps at most this many characters of a statement's text.
MAX_STATEMENT = 1000

_COMMENT = re.compile(r"^\s*(?:/\*.*?\*/\s*)+", re.S)
_NAME = r'"?([A-Za-z_][A-Za-z0-9_$]*)"?(?:\."?([A-Za-z_][A-Za-z0-9_$]*)"?)?'
_TABLE = {
    "INSERT": re.compile(r"\bINTO\s+" + _NAME, re.I),
    "UPDATE": re.compile(r"^\s*UPDATE\s+(?:ONLY\s+)?" + _NAME, re.I),
    "DELETE": re.compile(r"\bFROM\s+" + _NAME, re.I),
    "SELECT": re.compile(r"\bFROM\s+" + _NAME, re.I),
}


def span_name(statement: str) -> str:
    """``<OPERATION> <table>`` of ``statement``, or its operation alone (see the
    module docstring); ``SQL`` for a statement with no words."""
    text = _COMMENT.sub("", statement)
    words = text.split(None, 1)
    if not words:
        return "SQL"
    operation = words[0].upper()
    pattern = _TABLE.get(operation)
    found = pattern.search(text) if pattern is not None else None
    if found is None:
        return operation
    table = found.group(2) or found.group(1)
    return f"{operation} {table}"


def statement_text(statement: str) -> str:
    """The statement as its span's attribute keeps it: at most ``MAX_STATEMENT``
    characters, a cut one ending in ``...``."""
    if len(statement) <= MAX_STATEMENT:
        return statement
    return statement[: MAX_STATEMENT - 3] + "..."
