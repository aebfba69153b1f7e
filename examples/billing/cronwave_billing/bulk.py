"""Bulk writes and look-ups that cost one statement whatever their size, on SQLite and
PostgreSQL.

Row-at-a-time ``executemany`` on PostgreSQL, and an ``IN (...)`` list with a bound
parameter per value, spend most of their time on round trips and SQL compilation.
These send a whole batch as one JSON parameter (PostgreSQL), or through SQLite's
in-process ``executemany`` and ``json_each``, with the same SQL text every time. The
billing job's charges and the demo gateway's ledger write through them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

__all__ = ["any_of", "insert_skipping_conflicts"]


def insert_skipping_conflicts(
    conn: sa.Connection,
    table: sa.Table,
    rows: Sequence[Mapping[str, Any]],
    conflict: Sequence[str],
) -> int:
    """Insert ``rows`` (all with the same keys) into ``table``, skipping each row that a
    unique constraint on the ``conflict`` columns already holds, in the caller's
    transaction. Returns how many rows were inserted."""
    if not rows:
        return 0
    columns = list(rows[0])
    names = ", ".join(columns)
    target = ", ".join(conflict)
    if conn.dialect.name == "postgresql":
        # One JSON document for the whole batch: psycopg turns it into a single text
        # parameter at C speed, where arrays are quoted element by element in Python.
        shape = ", ".join(f"{c} {table.c[c].type.compile(conn.dialect)}" for c in columns)
        statement = sa.text(
            f"INSERT INTO {table.name} ({names}) SELECT {names} "
            f"FROM json_to_recordset(CAST(:rows AS json)) AS r({shape}) "
            f"ON CONFLICT ({target}) DO NOTHING"
        )
        params: Any = {"rows": json.dumps(list(rows), default=_json_value)}
    else:
        statement = sa.text(
            f"INSERT INTO {table.name} ({names}) VALUES ({', '.join(':' + c for c in columns)}) "
            f"ON CONFLICT ({target}) DO NOTHING"
        ).bindparams(*(sa.bindparam(c, type_=table.c[c].type) for c in columns))
        params = [dict(row) for row in rows]
    result = conn.execution_options(preserve_rowcount=True).execute(statement, params)
    return int(result.rowcount)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"cannot send {type(value).__name__} in a bulk insert")


def any_of(
    column: sa.ColumnElement[Any], values: Sequence[Any], dialect: str
) -> sa.ColumnElement[bool]:
    """``column IN values`` for a database of ``dialect`` with one bound parameter,
    whatever the number of values, sent as one JSON array: ``IN (SELECT value FROM
    json_array_elements_text(...))`` on PostgreSQL, ``IN (SELECT value FROM
    json_each(...))`` on SQLite."""
    if dialect == "postgresql":
        elements = sa.func.json_array_elements_text(
            sa.cast(sa.literal(json.dumps(list(values)), sa.Text), postgresql.JSON)
        ).table_valued("value")
        return column.in_(sa.select(sa.cast(elements.c.value, column.type)))
    each = sa.func.json_each(sa.literal(json.dumps(list(values)), sa.String)).table_valued("value")
    return column.in_(sa.select(each.c.value))
