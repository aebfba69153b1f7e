"""Runs per second of the store's batch calls, with many runs per call against one,
over real gRPC to a workflow-store process on a fresh PostgreSQL database (not a test:
a measurement).

    CRONWAVE_TEST_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python -m tests.workflow_store.measure_batches [--runs 1000] [--batch 100]

One client thread; each figure is the runs a phase handled over its wall time. Every
run is recorded, claimed and completed (with ``body_started_at``, as the worker sends
it) once per mode, each mode on its own schedule.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc

from cronwave_core.convert import dt_to_ts
from tests.harness.store import (
    FIRE,
    StoreProcess,
    create_schedule,
    register_job_type,
)


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    admin = sa.make_url(admin_url)
    name = f"cw_measure_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


def timed(what: str, count: int, work: Callable[[], None]) -> float:
    start = time.perf_counter()
    work()
    elapsed = time.perf_counter() - start
    rate = count / elapsed
    print(f"  {what:<34} {count:>5} runs in {elapsed:7.3f} s = {rate:8.0f} runs/s", flush=True)
    return rate


def measure(store: api_grpc.WorkflowStoreServiceStub, runs: int, batch: int) -> dict[str, float]:
    """Runs per second of each step, in calls of ``batch`` runs each."""
    sid = create_schedule(store, register_job_type(store)).schedule_id
    requests = [
        api.RecordRunRequest(
            schedule_id=sid,
            fire_time=dt_to_ts(FIRE + timedelta(minutes=i)),
            fencing_token=1,
            enqueue=True,
        )
        for i in range(runs)
    ]
    chunks = [slice(i, i + batch) for i in range(0, runs, batch)]
    ids: list[str] = []
    tokens: list[int] = []

    def record() -> None:
        for part in chunks:
            answer = store.RecordRuns(api.RecordRunsRequest(runs=requests[part]))
            ids.extend(r.recorded.run.run_id for r in answer.results)

    def claim() -> None:
        claims = [api.ClaimRunRequest(run_id=r, worker_id="w") for r in ids]
        for part in chunks:
            answer = store.ClaimRuns(api.ClaimRunsRequest(claims=claims[part], queues=["default"]))
            tokens.extend(r.claim.attempt_token for r in answer.results)

    def complete() -> None:
        completions = []
        for i, (run_id, token) in enumerate(zip(ids, tokens, strict=True)):
            req = api.CompleteRunRequest(
                run_id=run_id, attempt_token=token, state=pb.RUN_STATE_SUCCEEDED
            )
            req.body_started_at.FromDatetime(FIRE + timedelta(minutes=i, microseconds=250))
            completions.append(req)
        for part in chunks:
            answer = store.CompleteRuns(api.CompleteRunsRequest(completions=completions[part]))
            assert all(r.completion.changed for r in answer.results)

    rates = {
        "record": timed(f"RecordRuns of {batch}", runs, record),
        "claim": timed(f"ClaimRuns of {batch}", runs, claim),
        "complete": timed(f"CompleteRuns of {batch}", runs, complete),
    }
    assert len(ids) == runs and all(ids) and all(t == 1 for t in tokens)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    admin = os.environ.get(
        "CRONWAVE_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    )
    with fresh_database(admin) as url, tempfile.TemporaryDirectory() as tmp:
        proc = StoreProcess(Path(tmp), url).start()
        try:
            stub = proc.stub()
            print("one run per call:")
            single = measure(stub, args.runs, 1)
            print(f"batches of {args.batch}:")
            batched = measure(stub, args.runs, args.batch)
        finally:
            proc.stop()
    print(
        f"{args.batch} / 1 per call: "
        + ", ".join(f"{k} x{batched[k] / single[k]:.1f}" for k in single)
    )


if __name__ == "__main__":
    main()
