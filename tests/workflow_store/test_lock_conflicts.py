"""A schedule's deletion and a run's own writes do not deadlock, and a transaction
PostgreSQL rolls back to break a deadlock is run again, not answered as a lost database.

Real PostgreSQL and a real store process; the other side of each conflict is a
transaction of the test's own on the store's database, holding the run's row as a
worker's heartbeat does."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest
import sqlalchemy as sa
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from tests.conftest import PG_URL
from tests.harness.store import StoreProcess, claimed_run
from tests.helpers import eventually, get_one

pytestmark = [
    pytest.mark.postgres_only,
    pytest.mark.skipif(
        not PG_URL, reason="row locks and deadlocks are PostgreSQL's (CRONWAVE_TEST_DATABASE_URL)"
    ),
]


@contextmanager
def _holding_the_run(database_url: str, run_id: str) -> Iterator[tuple[sa.Connection, int]]:
    """A transaction that has written ``run_id``'s row (a heartbeat's first UPDATE) and
    is still open: the row is locked until the block ends, when it commits."""
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as conn, conn.begin():
            pid = int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
            conn.execute(
                sa.text("UPDATE runs SET heartbeat_at = now() WHERE run_id = :r"), {"r": run_id}
            )
            yield conn, pid
    finally:
        engine.dispose()


def _waiting_on(conn: sa.Connection, pid: int) -> int:
    """How many other backends wait for a lock ``pid`` holds."""
    query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE :p = ANY(pg_blocking_pids(pid))")
    return int(conn.execute(query, {"p": pid}).scalar_one())


def _delete_in_background(stub, schedule_id: str) -> tuple[threading.Thread, list[object]]:
    answers: list[object] = []

    def delete() -> None:
        try:
            request = api.DeleteScheduleRequest(schedule_id=schedule_id, force=True)
            answers.append(stub.DeleteSchedule(request, timeout=30))
        except grpc.RpcError as exc:
            answers.append(exc)

    thread = threading.Thread(target=delete, name="delete-schedule", daemon=True)
    thread.start()
    return thread, answers


def _deleted_and_cancelled(stub, answers: list[object], schedule_id: str, run_id: str) -> None:
    (answer,) = answers
    assert isinstance(answer, api.DeleteScheduleResponse), (
        f"{answer.code()}: {answer.details()}" if isinstance(answer, grpc.RpcError) else answer
    )
    assert answer.schedule.schedule_id == schedule_id
    assert [run.run_id for run in answer.cancelled] == [run_id]
    assert get_one(stub, run_id).state == pb.RUN_STATE_CANCELLED


def test_a_run_written_twice_in_one_transaction_does_not_wait_for_a_deletion(
    store: StoreProcess, database_url: str
) -> None:
    # Given a claimed run, and a transaction that has written its row once
    stub = store.stub()
    run, _token = claimed_run(stub)
    with _holding_the_run(database_url, run.run_id) as (held, pid):
        # When the schedule is deleted with --force: it locks the schedule, then waits
        # for the run's row to cancel it
        thread, answers = _delete_in_background(stub, run.schedule_id)
        eventually(lambda: _waiting_on(held, pid) == 1, timeout=10, what="the deletion waiting")

        # Then the run's second write in that transaction (progress after a heartbeat)
        # checks its foreign key to the schedule without waiting for the deletion's
        # lock: it passes well inside PostgreSQL's 1 s deadlock check
        held.execute(sa.text("SET LOCAL lock_timeout = '300ms'"))
        held.execute(
            sa.text("UPDATE runs SET progress_done = 1 WHERE run_id = :r"), {"r": run.run_id}
        )
    # and once it committed, the deletion goes on and cancels the run
    thread.join(timeout=30)
    assert not thread.is_alive()
    _deleted_and_cancelled(stub, answers, run.schedule_id, run.run_id)


def test_a_deletion_chosen_to_break_a_deadlock_runs_again(
    store: StoreProcess, database_url: str
) -> None:
    # Given a claimed run, and a transaction that has written its row and will wait
    # past PostgreSQL's deadlock check itself (so the store's side is the one rolled back)
    stub = store.stub()
    run, _token = claimed_run(stub)
    admin = sa.create_engine(database_url, isolation_level="AUTOCOMMIT")
    deadlocks = sa.text(
        "SELECT pg_stat_clear_snapshot(), deadlocks FROM pg_stat_database "
        "WHERE datname = current_database()"
    )
    try:
        with admin.connect() as watch:
            before = int(watch.execute(deadlocks).one().deadlocks)
            with _holding_the_run(database_url, run.run_id) as (held, pid):
                held.execute(sa.text("SET LOCAL deadlock_timeout = '30s'"))
                # When the deletion (holding the store's revision) waits for the run,
                # and that transaction then waits for the revision: a deadlock
                thread, answers = _delete_in_background(stub, run.schedule_id)
                eventually(
                    lambda: _waiting_on(held, pid) == 1, timeout=10, what="the deletion waiting"
                )
                held.execute(sa.text("SELECT revision FROM store_revision FOR UPDATE"))
            thread.join(timeout=30)
            assert not thread.is_alive()

            # Then PostgreSQL broke it by rolling the deletion back (the fault happened),
            # and the store ran the deletion again: it answers as if nothing had happened
            eventually(
                lambda: int(watch.execute(deadlocks).one().deadlocks) > before,
                timeout=15,
                what="PostgreSQL counting the deadlock",
            )
    finally:
        admin.dispose()
    _deleted_and_cancelled(stub, answers, run.schedule_id, run.run_id)
