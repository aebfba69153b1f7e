"""What a claim's deadline read costs (``workflow_store.claim_deadlines``): the wall
time and this process's CPU of reading the deadlines of batches of claimed runs not
sampled, each run of a schedule of its own with a deadline (the most schedules a
batch can name), on a fresh PostgreSQL database seeded through a real workflow-store
process (not a test: a measurement).

    CRONWAVE_TEST_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python -m tests.workflow_store.measure_claim_deadlines [--runs 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc
from sqlalchemy.orm import Session

from cronwave_core.convert import dt_to_ts, td_to_duration
from cronwave_core.security.pki import ensure_pki
from cronwave_core.telemetry.run_span import decide_run_trace_id
from tests.harness.store import FIRE, StoreProcess, register_job_type, schedule_msg
from tests.helpers import fresh
from tests.workflow_store.measure_batches import fresh_database


def seed(store: api_grpc.WorkflowStoreServiceStub, runs: int, batch: int) -> list[str]:
    """``runs`` runs not sampled, each of a new schedule with a 45-minute deadline."""
    job = register_job_type(store)
    requests = []
    for _ in range(runs):
        schedule = schedule_msg(fresh("deadline"), job)
        schedule.policy.deadline.CopyFrom(td_to_duration(timedelta(minutes=45)))
        store.CreateSchedule(api.CreateScheduleRequest(schedule=schedule))
        trace_id = decide_run_trace_id(time.time_ns(), 0.0)
        requests.append(
            api.RecordRunRequest(
                schedule_id=schedule.schedule_id,
                fire_time=dt_to_ts(FIRE),
                fencing_token=1,
                enqueue=True,
                trace_id=format(trace_id, "032x"),
            )
        )
    ids: list[str] = []
    for i in range(0, runs, batch):
        answer = store.RecordRuns(api.RecordRunsRequest(runs=requests[i : i + batch]))
        ids += [r.recorded.run.run_id for r in answer.results]
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()
    from workflow_store import claim_deadlines
    from workflow_store import models as m

    admin = os.environ.get(
        "CRONWAVE_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    )
    tls_dir = Path(tempfile.mkdtemp(prefix="cronwave-tls-"))
    ensure_pki(tls_dir)
    os.environ.setdefault("CRONWAVE_TLS_DIR", str(tls_dir))
    with fresh_database(admin) as url, tempfile.TemporaryDirectory() as tmp:
        proc = StoreProcess(Path(tmp), url).start()
        try:
            ids = seed(proc.stub(), args.runs, args.batch)
        finally:
            proc.stop()
        engine = sa.create_engine(url)
        runs = m.Base.metadata.tables["runs"]
        walls, cpus = [], []
        with Session(engine) as s:
            rows = [
                dict(r._mapping) for r in s.execute(sa.select(runs).where(runs.c.run_id.in_(ids)))
            ]
            for _ in range(args.passes):
                for i in range(0, len(rows), args.batch):
                    wall, cpu = time.perf_counter(), time.process_time()
                    found = claim_deadlines.deadlines(s, rows[i : i + args.batch])
                    walls.append((time.perf_counter() - wall) * 1e3)
                    cpus.append((time.process_time() - cpu) * 1e3)
                    assert len(found) == len(rows[i : i + args.batch])
        engine.dispose()
    print(
        f"deadline read of {args.batch} runs not sampled ({len(walls)} batches): wall median "
        f"{statistics.median(walls):.2f} ms, CPU median {statistics.median(cpus):.2f} ms"
    )


if __name__ == "__main__":
    main()
