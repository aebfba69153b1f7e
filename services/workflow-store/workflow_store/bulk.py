"""One statement per batch on PostgreSQL: the batch's rows sent as one JSON document
and turned back into typed rows by ``json_to_recordset``.

An executemany runs its statement once per row: per row, SQLAlchemy binds the
parameters, psycopg sends a Bind and an Execute, and PostgreSQL plans and runs it.
With the rows as one parameter the batch is one statement, whatever its size. The
document is written by orjson (C, datetimes included). An ``unnest`` of one array per
column, the statement this replaced, needs psycopg's array dumpers, which are Python:
a batch of 200 event rows cost the store 1.7-2.4 ms of CPU that way, and 0.3-0.5 ms as
a JSON document (``python tools/microbench.py inserts URL``; ``docs/benchmarks.md``).

Values go through the columns' own bind processing (``UTCDateTime`` and the like), so
what is stored is what an executemany would store. SQLite has no ``json_to_recordset``:
its callers keep the executemany.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Dialect

_Processor = Callable[[Any], Any] | None


class RecordSet:
    """Multi-row INSERT and UPDATE statements over ``table`` for one dialect's
    connections (PostgreSQL), built once per column list."""

    def __init__(self, table: sa.Table, dialect: Dialect) -> None:
        self._table = table
        self._dialect = dialect
        self._lock = threading.Lock()
        self._statements: dict[tuple[Any, ...], sa.TextClause] = {}
        self._processors: dict[str, _Processor] = {}

    def insert(
        self,
        s: Any,  # a Session or Connection
        rows: Sequence[Mapping[str, Any]],
        columns: Sequence[str],
        *,
        suffix: str = "",
    ) -> sa.CursorResult[Any]:
        """``INSERT INTO table (columns) SELECT ... FROM json_to_recordset(...)
        <suffix>``, the rows in their order (``suffix``: ``ON CONFLICT ...``,
        ``RETURNING ...``)."""
        key = ("insert", tuple(columns), suffix)
        statement = self._statements.get(key)
        if statement is None:
            names = ", ".join(map(self._q, columns))
            sql = (
                f"INSERT INTO {self._q(self._table.name)} ({names}) "
                f"SELECT {names} FROM {self._recordset(columns, columns)} {suffix}"
            )
            statement = self._remember(key, sql)
        result: sa.CursorResult[Any] = s.execute(
            statement, {"rows": self._document(rows, columns, columns)}
        )
        return result

    def update(
        self,
        s: Any,
        rows: Sequence[Mapping[str, Any]],
        where: Sequence[str],
        values: Sequence[str],
    ) -> int:
        """``UPDATE table SET <values> FROM json_to_recordset(...)`` each row where its
        ``where`` columns equal the row's; the number of rows updated. A row's ``where``
        values are its keys ``w_<column>``, its new values ``v_<column>``."""
        names = [f"w_{c}" for c in where] + [f"v_{c}" for c in values]
        columns = list(where) + list(values)
        key = ("update", tuple(where), tuple(values))
        statement = self._statements.get(key)
        if statement is None:
            table, q = self._q(self._table.name), self._q
            sql = (
                f"UPDATE {table} SET {', '.join(f'{q(c)} = v.v_{c}' for c in values)} "
                f"FROM {self._recordset(names, columns)} "
                f"WHERE {' AND '.join(f'{table}.{q(c)} = v.w_{c}' for c in where)}"
            )
            statement = self._remember(key, sql)
        result = s.execute(statement, {"rows": self._document(rows, names, columns)})
        return int(result.rowcount)

    def _q(self, name: str) -> str:
        return str(self._dialect.identifier_preparer.quote(name))

    def _recordset(self, names: Sequence[str], columns: Sequence[str]) -> str:
        """``json_to_recordset(:rows) AS v(<name> <the column's type>, ...)``."""
        fields = ", ".join(
            f"{name} {self._table.c[column].type.compile(dialect=self._dialect)}"
            for name, column in zip(names, columns, strict=True)
        )
        return f"json_to_recordset(CAST(:rows AS json)) AS v({fields})"

    def _remember(self, key: tuple[Any, ...], sql: str) -> sa.TextClause:
        statement = sa.text(sql)
        with self._lock:
            return self._statements.setdefault(key, statement)

    def _document(
        self, rows: Sequence[Mapping[str, Any]], names: Sequence[str], columns: Sequence[str]
    ) -> str:
        """The rows as a JSON array of objects, each value of ``names[i]`` as the
        column ``columns[i]`` stores it."""
        processors = [self._processor(c) for c in columns]
        if all(p is None for p in processors):
            records = [{name: row[name] for name in names} for row in rows]
        else:
            pairs = list(zip(names, processors, strict=True))
            records = [
                {name: (row[name] if p is None else p(row[name])) for name, p in pairs}
                for row in rows
            ]
        return orjson.dumps(records).decode()

    def _processor(self, column: str) -> _Processor:
        if column not in self._processors:
            self._processors[column] = self._table.c[column].type.bind_processor(self._dialect)
        return self._processors[column]
