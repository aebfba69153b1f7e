"""Bytes per schedule a planner holds, by structure, in one process (no suite).

    python tools/index_memory.py [N [DISTINCT [SHARDS]]] [--tracemalloc]

``N`` schedules (default 100,000) as ``cronwave_bench.planner_memory.specs`` makes them
(cron times months away; all different specs, or ``DISTINCT`` of them shared) go the
planner's load path: each arrives as the store lists it (a ``common_pb2.Schedule`` with
the default policy, pages of ``feed.PAGE``), is decoded and its values shared as the
feed decodes it, its calendar compiled as the feed checks it, and the whole lot is
loaded into a ``ScheduleIndex`` that keeps each schedule's shard among ``SHARDS``
(default 64), with the default dispatch lead; then a first term re-bases it (nothing
handled yet, as in the benchmarks). What a planner loads for its warm standby is
loaded the same way, so bytes per schedule are the same for held and standby ones.

Printed as JSON: the resident memory the load added (``VmRSS``), per schedule; the
objects the index reaches, by kind, with their bytes per schedule (an object reached
twice counted once; interpreter-wide singletons such as small ints, enum members and
zones left out); the calendar cache's size. ``--tracemalloc`` adds the bytes the load
allocated and kept (traced; slower, and its bookkeeping inflates the RSS figure) and
the source lines that allocated most of them.
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from enum import Enum
from types import FunctionType, ModuleType
from typing import Any
from zoneinfo import ZoneInfo

from cronwave_proto.v1 import common_pb2

from cron_planner.feed import PAGE, SharedValues
from cron_planner.schedule_index import ScheduleIndex
from cronwave_bench.planner_memory import JOB_TYPE, rss_mib, specs
from cronwave_core.domain import calendar
from cronwave_core.domain.spec import Policy, ScheduleDef
from cronwave_core.shards import shard_of
from cronwave_core.wire import dt_to_ts, ts_to_dt

#: The dispatch lead a planner uses unless told otherwise (``CRONWAVE_DISPATCH_LEAD``).
LEAD = timedelta(seconds=5)
_SINGLETONS = (type, ModuleType, FunctionType, Enum, ZoneInfo)


def _pages(n: int, distinct: int, now: datetime) -> Iterator[list[common_pb2.Schedule]]:
    """The listing's pages, made as they are read (as the store sends them)."""
    policy = Policy().to_proto()
    updated = dt_to_ts(now)  # one transaction wrote them all
    for start in range(0, n, PAGE):
        page = []
        for i, row in enumerate(specs(min(PAGE, n - start), now, distinct, start), start):
            msg = common_pb2.Schedule(
                schedule_id=row["id"], job_type=JOB_TYPE, payload_json="{}", revision=i + 1
            )
            msg.spec.cron.append(row["cron"])
            msg.spec.time_zone = row["time_zone"]
            msg.policy.CopyFrom(policy)
            msg.updated_at.CopyFrom(updated)
            page.append(msg)
        yield page


def _load(index: ScheduleIndex, pages: Iterator[list[common_pb2.Schedule]], n: int) -> None:
    """As ``ScheduleFeed._load``: each schedule is decoded, its spec checked, and taken
    into the load as it arrives; the load replaces the index's, and a term re-bases it."""
    shared = SharedValues()
    loading = index.loading()
    for page in pages:
        for msg in page:
            schedule = shared(ScheduleDef.from_proto(msg))
            calendar.validate(schedule.spec)
            loading.add(schedule, shared.instant(ts_to_dt(msg.updated_at)))
    index.load(loading, n)
    index.rebase({})


def _kind(obj: object, owner: str) -> str:
    name = type(obj).__name__
    if isinstance(obj, str | int | tuple | datetime | timedelta):
        return f"{name} in {owner}"
    return name


def _breakdown(index: ScheduleIndex) -> dict[str, tuple[int, int]]:
    """(objects, bytes) by kind of every object the index reaches once, outside the
    interpreter's singletons; a value is named by the object that first reaches it."""
    seen: set[int] = {id(index._lock)}
    found: dict[str, list[int]] = {}
    # The entries first, so that a value they share with the heap is named by them.
    stack: list[tuple[object, str]] = [(index, "ScheduleIndex"), (index._entries, "dict")]
    while stack:
        obj, owner = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, (bool, *_SINGLETONS)):
            continue
        if isinstance(obj, int) and -5 <= obj <= 256:
            continue  # cached by the interpreter
        seen.add(id(obj))
        kind = _kind(obj, owner)
        tally = found.setdefault(kind, [0, 0])
        tally[0] += 1
        tally[1] += sys.getsizeof(obj)
        name = type(obj).__name__
        stack.extend((child, name) for child in gc.get_referents(obj))
    return {k: (v[0], v[1]) for k, v in found.items()}


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 100_000
    distinct = int(args[1]) if len(args) > 1 else 0
    shards = int(args[2]) if len(args) > 2 else 64
    traced = "--tracemalloc" in sys.argv
    now = datetime.now(UTC)
    pages = _pages(n, distinct, now)
    gc.collect()
    before = rss_mib() or 0.0
    if traced:
        tracemalloc.start()
    index = ScheduleIndex(lead=LEAD, shard=lambda sid: shard_of(sid, shards))
    _load(index, pages, n)
    gc.collect()
    after = rss_mib() or 0.0
    report: dict[str, Any] = {
        "schedules": len(index),
        "distinct_specs": min(distinct, n) if distinct else n,
        "rss_added_mib": round(after - before, 1),
        "rss_bytes_per_schedule": round((after - before) * 2**20 / n),
    }
    if traced:
        snapshot = tracemalloc.take_snapshot()
        report["traced_bytes_per_schedule"] = round(tracemalloc.get_traced_memory()[0] / n)
        report["traced_top"] = [
            f"{s.traceback[0].filename.rsplit('/', 1)[-1]}:{s.traceback[0].lineno} "
            f"{s.size / n:.0f} B/schedule"
            for s in snapshot.statistics("lineno")[:12]
        ]
        tracemalloc.stop()
    parts = sorted(_breakdown(index).items(), key=lambda kv: -kv[1][1])
    report["index_bytes_per_schedule"] = round(sum(b for _, (_, b) in parts) / n)
    report["by_kind"] = {k: f"{c} objects, {b / n:.1f} B/schedule" for k, (c, b) in parts}
    info = calendar._cached_calendar.cache_info()
    report["calendars_cached"] = info.currsize
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
