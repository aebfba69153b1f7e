"""Write many schedules straight into a store's database, for the planner-memory
benchmark (``cronwave_bench.planner_memory``).

    python -m workflow_store.bench_seed DATABASE_URL JOB_TYPE < schedules.jsonl

Each input line is ``{"id": ..., "cron": ..., "time_zone": ...}``. The schedules go in
by the store's own code (``slots.create_schedules``: one transaction, every schedule
with its own revision, as CreateSchedule would write it, minus a round trip each), with
the default policy and an empty payload. Waits up to 60 s for ``JOB_TYPE`` to be
registered (a worker registers its job types when it starts), then prints
``{"written": N, "insert_s": S, "began_at": T}``: S is the transaction's time (not the
input's), T the wall clock when it began.
"""

from __future__ import annotations

import json
import sys
import time

from cronwave_core.domain.spec import Policy, Spec
from workflow_store import slots
from workflow_store.db import Database, create_engine
from workflow_store.records import NewSchedule
from workflow_store.store import Store

JOB_TYPE_WAIT_S = 60.0


def main() -> None:
    url, job_type = sys.argv[1], sys.argv[2]
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
        while job_type not in {j.name for j in store.list_job_types()}:
            if time.monotonic() >= deadline:
                raise SystemExit(f"job type {job_type!r} not registered in {JOB_TYPE_WAIT_S:.0f} s")
            time.sleep(0.1)
        began_at, began = time.time(), time.monotonic()
        written = slots.create_schedules(store, news)
        figures = {"written": written, "insert_s": time.monotonic() - began, "began_at": began_at}
        print(json.dumps(figures))
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
