"""Each schedule's newest runs, for many schedules in one read (ListRecentRuns): the
strip of recent slots a list of schedules shows beside each one.

A schedule that fires every second has millions of runs; only its newest few are
read. On PostgreSQL that is one statement, a LATERAL look-up per schedule down the
``(schedule_id, fire_time)`` unique index, so a page of 200 schedules costs 200 index
descents in one round trip whatever their histories. SQLite has no LATERAL; there each
schedule is one look-up down the same index, all in one read transaction (an embedded
database: a look-up is a function call, not a round trip).

Runs come lean: without payload, result and checkpoint, which no strip shows and which
would make a page of thousands of runs megabytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from cronwave_core.errors import InvalidArgument
from workflow_store import models as m
from workflow_store.db import Database
from workflow_store.records import RunRecord
from workflow_store.rows import _run_of
from workflow_store.store_core import _check_batch

#: The most runs per schedule one call returns.
MAX_PER_SCHEDULE = 200
#: An answer ends before the schedule whose runs would take it past this (the first
#: schedule's are always sent): well under gRPC's 4 MiB, whatever the runs' errors.
ANSWER_BYTES = 3 * 1024 * 1024
_BLOBS = ("payload_json", "result_json", "checkpoint_json", "attempt_token")

T = TypeVar("T")

_RUNS = cast(sa.Table, m.Run.__table__)
_LEAN = [c for c in _RUNS.c if c.name not in _BLOBS]


def _postgres_query() -> sa.Select[Any]:
    asked = (
        sa.func.unnest(sa.bindparam("ids", type_=postgresql.ARRAY(sa.Text())))
        .table_valued("id", with_ordinality="n")
        .render_derived()
    )
    newest = (
        sa.select(*_LEAN)
        .where(_RUNS.c.schedule_id == asked.c.id)
        .order_by(_RUNS.c.fire_time.desc())
        .limit(sa.bindparam("per"))
        .lateral("newest")
    )
    return (
        sa.select(newest)
        .select_from(asked)
        .join(newest, sa.true())
        .order_by(asked.c.n, newest.c.fire_time.desc())
    )


_POSTGRES = _postgres_query()
_ONE_SCHEDULE = (
    sa.select(*_LEAN)
    .where(_RUNS.c.schedule_id == sa.bindparam("id"))
    .order_by(_RUNS.c.fire_time.desc())
    .limit(sa.bindparam("per"))
)


def _lean_run(values: Any) -> RunRecord:
    return _run_of({**values, **dict.fromkeys(_BLOBS, "")})


def recent_runs(db: Database, schedule_ids: Sequence[str], per_schedule: int) -> list[RunRecord]:
    """The newest ``per_schedule`` runs (1 .. ``MAX_PER_SCHEDULE``) of each schedule of
    ``schedule_ids`` (at most 1,000; each once, in the order first named), newest first
    within a schedule, without payload, result and checkpoint. A schedule without
    runs, or unknown, has none."""
    if not 1 <= per_schedule <= MAX_PER_SCHEDULE:
        raise InvalidArgument(
            "per_schedule", f"must be 1 .. {MAX_PER_SCHEDULE} runs, got {per_schedule}"
        )
    _check_batch("schedule_ids", schedule_ids)
    ids = list(dict.fromkeys(i for i in schedule_ids if i))
    if not ids:
        return []
    with db.read() as s:
        if db.dialect == "postgresql":
            rows = s.execute(_POSTGRES, {"ids": ids, "per": per_schedule})
            return [_lean_run(row._mapping) for row in rows]
        return [
            _lean_run(row._mapping)
            for schedule_id in ids
            for row in s.execute(_ONE_SCHEDULE, {"id": schedule_id, "per": per_schedule})
        ]


def fit(
    schedule_ids: Sequence[str],
    runs: Mapping[str, Sequence[T]],
    size: Callable[[T], int],
    budget: int = ANSWER_BYTES,
) -> tuple[list[T], list[str]]:
    """The runs of whole schedules, in the order of ``schedule_ids``, while their
    ``size`` stays within ``budget`` (the first schedule's always), and the schedules
    left out: a caller asks for those again."""
    kept: list[T] = []
    left_out: list[str] = []
    used = 0
    for schedule_id in dict.fromkeys(schedule_ids):
        group = runs.get(schedule_id, ())
        need = sum(size(run) for run in group)
        if used and used + need > budget:
            left_out.append(schedule_id)
            continue
        kept.extend(group)
        used += need
    return kept, left_out
