"""One statement per batch on PostgreSQL: every column of the batch sent as one array
and turned back into rows by ``unnest``.

An executemany runs its statement once per row: per row, SQLAlchemy binds the
parameters, psycopg sends a Bind and an Execute, and PostgreSQL plans and runs it.
With the columns as arrays the batch is one statement, whatever its size: a claim or
completion batch of 200 runs costs about half the store's CPU and a third of
PostgreSQL's that the executemany did (``docs/benchmarks.md``).

Values go through the columns' own bind processing (``UTCDateTime`` and the like), so
what is stored is what an executemany would store. SQLite has no arrays: its callers
keep the executemany.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

_Processor = Callable[[Any], Any] | None


class Unnest:
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
        """``INSERT INTO table (columns) SELECT * FROM unnest(...) <suffix>``, the rows in
        their order (``suffix``: ``ON CONFLICT ...``, ``RETURNING ...``)."""
        key = ("insert", tuple(columns), suffix)
        statement = self._statements.get(key)
        if statement is None:
            arrays = ", ".join(self._array(name, name) for name in columns)
            sql = (
                f"INSERT INTO {self._q(self._table.name)} ({', '.join(map(self._q, columns))}) "
                f"SELECT * FROM unnest({arrays}) {suffix}"
            )
            statement = self._remember(key, sql)
        params = {name: self._column(rows, name, name) for name in columns}
        result: sa.CursorResult[Any] = s.execute(statement, params)
        return result

    def update(
        self,
        s: Any,
        rows: Sequence[Mapping[str, Any]],
        where: Sequence[str],
        values: Sequence[str],
    ) -> int:
        """``UPDATE table SET <values> FROM unnest(...)`` each row where its ``where``
        columns equal the row's; the number of rows updated. A row's ``where`` values
        are its keys ``w_<column>``, its new values ``v_<column>``."""
        key = ("update", tuple(where), tuple(values))
        statement = self._statements.get(key)
        if statement is None:
            names = [f"w_{c}" for c in where] + [f"v_{c}" for c in values]
            columns = list(where) + list(values)
            arrays = ", ".join(self._array(n, c) for n, c in zip(names, columns, strict=True))
            table, q = self._q(self._table.name), self._q
            sql = (
                f"UPDATE {table} SET {', '.join(f'{q(c)} = v.v_{c}' for c in values)} "
                f"FROM unnest({arrays}) AS v({', '.join(names)}) "
                f"WHERE {' AND '.join(f'{table}.{q(c)} = v.w_{c}' for c in where)}"
            )
            statement = self._remember(key, sql)
        params = {f"w_{c}": self._column(rows, f"w_{c}", c) for c in where}
        params.update({f"v_{c}": self._column(rows, f"v_{c}", c) for c in values})
        result = s.execute(statement, params)
        return int(result.rowcount)

    def _q(self, name: str) -> str:
        return str(self._dialect.identifier_preparer.quote(name))

    def _array(self, param: str, column: str) -> str:
        sql_type = self._table.c[column].type.compile(dialect=self._dialect)
        return f"CAST(:{param} AS {sql_type}[])"

    def _remember(self, key: tuple[Any, ...], sql: str) -> sa.TextClause:
        statement = sa.text(sql)
        with self._lock:
            return self._statements.setdefault(key, statement)

    def _column(self, rows: Sequence[Mapping[str, Any]], key: str, column: str) -> list[Any]:
        """The rows' values of ``key`` as the column stores them."""
        if column not in self._processors:
            self._processors[column] = self._table.c[column].type.bind_processor(self._dialect)
        process = self._processors[column]
        if process is None:
            return [row[key] for row in rows]
        return [process(row[key]) for row in rows]
