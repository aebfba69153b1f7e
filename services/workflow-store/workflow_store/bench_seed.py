"""Write many schedules straight into a store's database, for the planner-memory and
console benchmarks (``cronwave_bench.planner_memory``, ``cronwave_bench.console_list``).

    python -m workflow_store.bench_seed DATABASE_URL JOB_TYPE [RUNS] < schedules.jsonl

Each input line is ``{"id": ..., "cron": ..., "time_zone": ...}``. The schedules go in
by the store's own code (``slots.create_schedules``: one transaction, every schedule
with its own revision, as CreateSchedule would write it, minus a round trip each), with
the default policy and an empty payload. Waits up to 60 s for ``JOB_TYPE`` to be
registered (a worker registers its job types when it starts), then prints
``{"written": N, "insert_s": S, "began_at": T}``: S is the transaction's time (not the
input's), T the wall clock when it began.

With ``RUNS``, each schedule also gets that many SUCCEEDED scheduled runs, an hour apart
up to the last whole hour (a history for a strip of recent slots), written in a
transaction of their own after the schedules; ``runs_written`` says how many.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from cronwave_core.domain.spec import Policy, Spec
from workflow_store import models as m
from workflow_store import slots
from workflow_store.db import Database, create_engine
from workflow_store.ids import new_run_id
from workflow_store.records import NewSchedule, RunState, Trigger
from workflow_store.store import Store

JOB_TYPE_WAIT_S = 60.0
#: Runs per INSERT statement.
RUN_CHUNK = 5_000


def _runs(
    schedule_ids: Sequence[str], job_type: str, per_schedule: int, now: datetime
) -> Iterator[dict[str, object]]:
    last = now.replace(minute=0, second=0, microsecond=0)
    for schedule_id in schedule_ids:
        for i in range(per_schedule):
            fire = last - timedelta(hours=i)
            yield {
                "run_id": new_run_id(), "schedule_id": schedule_id, "fire_time": fire,
                "state": RunState.SUCCEEDED.value, "trigger": Trigger.SCHEDULED.value,
                "job_type": job_type,
                "payload_json": "{}", "attempt": 1, "attempt_token": "", "fencing_token": 1,
                "idempotency_key": f"{schedule_id}@{fire.isoformat()}", "queue": "default",
                "worker_id": "bench", "trace_id": "", "created_at": fire,
                "started_at": fire + timedelta(milliseconds=2), "claimed_at": fire,
                "finished_at": fire + timedelta(milliseconds=40), "heartbeat_at": None,
                "error": "", "result_json": "{}", "checkpoint_json": "", "due_at": fire,
            }  # fmt: skip


def seed_runs(store: Store, schedule_ids: Sequence[str], job_type: str, per_schedule: int) -> int:
    """``per_schedule`` SUCCEEDED runs of each schedule (see the module docstring)."""
    written = 0
    batch: list[dict[str, object]] = []
    with store.db.write() as s:
        for row in _runs(schedule_ids, job_type, per_schedule, datetime.now(UTC)):
            batch.append(row)
            if len(batch) >= RUN_CHUNK:
                s.execute(sa.insert(m.Run), batch)
                written, batch = written + len(batch), []
        if batch:
            s.execute(sa.insert(m.Run), batch)
            written += len(batch)
    return written


def main() -> None:
    url, job_type = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    news = [
        NewSchedule(
            row["id"],
            Spec(cron=(row["cron"],), time_zone=row["time_zone"]),
            Policy(),
            job_type,
            "{}",
        )
        for row in map(json.loads, sys.stdin)
    ]
    engine = create_engine(url, instrument=False)
    try:
        store = Store(Database(engine))
        deadline = time.monotonic() + JOB_TYPE_WAIT_S
        while job_type not in {j.name for j in store.job_types.list_job_types()}:
            if time.monotonic() >= deadline:
                raise SystemExit(f"job type {job_type!r} not registered in {JOB_TYPE_WAIT_S:.0f} s")
            time.sleep(0.1)
        began_at, began = time.time(), time.monotonic()
        written = slots.create_schedules(store, news)
        figures = {"written": written, "insert_s": time.monotonic() - began, "began_at": began_at}
        if runs:
            ids = [new.schedule_id for new in news]
            figures["runs_written"] = seed_runs(store, ids, job_type, runs)
        print(json.dumps(figures))
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
