"""Webhook deliveries are an outbox: a delivery pending when its store dies is resumed
after the restart, from the attempts it made, and two replicas do not both take one.
Real store processes on SQLite and PostgreSQL, a loopback webhook of the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc

from cronwave_core.convert import dt_to_ts, td_to_duration
from tests.deadlines import webhooks
from tests.harness.store import StartStore, register_job_type
from tests.helpers import eventually, fresh
from workflow_store.db import Database, create_engine
from workflow_store.deadline_records import DeliveryStatus
from workflow_store.delivery_outbox import DeliveryOutbox

#: Quick deadline sweeps; a second POST 4 s after a failed first, so the store can be
#: killed while the delivery waits for it (a window wide enough for a loaded machine).
STORE_ENV = {
    "CRONWAVE_DEADLINE_SWEEP_INTERVAL": "200ms",
    "CRONWAVE_NOTIFY_ATTEMPTS": "4",
    "CRONWAVE_NOTIFY_BACKOFF": "4s",
    "CRONWAVE_NOTIFY_TIMEOUT": "1s",
}


@pytest.fixture
def hooks() -> Iterator[webhooks.Receiver]:
    with webhooks.receiver() as rec:
        yield rec


def _breaches(
    stub: api_grpc.WorkflowStoreServiceStub, schedule_id: str
) -> list[api.DeadlineBreach]:
    request = api.ListDeadlineBreachesRequest(schedule_id=schedule_id)
    return list(stub.ListDeadlineBreaches(request).breaches)


def _schedule_breaching_soon(stub: api_grpc.WorkflowStoreServiceStub, url: str) -> str:
    """A schedule whose one slot, a few seconds from now, breaches its 1 s deadline
    (nobody runs it), notifying ``url``. The slot lies after the schedule's creation
    even on a loaded machine: a slot before it would never be judged."""
    schedule_id = fresh("outbox")
    job_type = register_job_type(stub)
    slot = (datetime.now(UTC) + timedelta(seconds=4)).replace(microsecond=0)
    policy = pb.SchedulePolicy(
        deadline=td_to_duration(timedelta(seconds=1)),
        notifiers=[pb.Notifier(url=url, format=pb.NOTIFY_FORMAT_JSON)],
    )
    schedule = pb.Schedule(
        schedule_id=schedule_id,
        spec=pb.ScheduleSpec(one_off=[dt_to_ts(slot)]),
        policy=policy,
        job_type=job_type,
    )
    stub.CreateSchedule(api.CreateScheduleRequest(schedule=schedule))
    return schedule_id


@pytest.mark.both_backends
def test_a_delivery_pending_when_the_store_is_killed_is_sent_after_the_restart(
    start_store: StartStore, hooks: webhooks.Receiver
) -> None:
    # Given a breach whose webhook answers 500 to its first POST
    store = start_store(env=STORE_ENV)
    stub = store.stub()
    url = hooks.url("/flaky", 500)
    schedule_id = _schedule_breaching_soon(stub, url)

    def waiting_for_its_second_post() -> api.DeadlineBreach:
        found = _breaches(stub, schedule_id)
        assert found and found[0].deliveries, "no delivery yet"
        delivery = found[0].deliveries[0]
        assert (delivery.status, delivery.attempts) == ("pending", 1), delivery
        return found[0]

    breach = eventually(waiting_for_its_second_post, timeout=60, interval=0.1, what="1 POST")

    # When the store is killed (kill -9) while the delivery waits for its next POST,
    # the webhook recovers, and a store starts again on the same database
    store.kill9()
    hooks.answers["/flaky"] = 200
    stub = start_store(env=STORE_ENV).stub()

    # Then the restarted store sends it: the second attempt of the same delivery
    def delivered() -> api.DeadlineDelivery:
        delivery = _breaches(stub, schedule_id)[0].deliveries[0]
        assert delivery.status == "delivered", delivery
        return delivery

    delivery = eventually(delivered, timeout=60, interval=0.2, what="delivered after restart")
    assert (delivery.attempts, delivery.http_status, delivery.error) == (2, 200, "")
    posts = hooks.posts("/flaky")
    assert [p.body["breach_id"] for p in posts] == [breach.id, breach.id]


@pytest.mark.both_backends
def test_two_replicas_never_both_claim_a_pending_delivery(
    start_store: StartStore, hooks: webhooks.Receiver, database_url: str, tmp_path: Path
) -> None:
    # Given a breach whose delivery is pending with its claim lapsed (the store that
    # recorded it was killed before its notifier took it, and the webhook is down)
    store = start_store(env={**STORE_ENV, "CRONWAVE_NOTIFY_ATTEMPTS": "1"})
    stub = store.stub()
    schedule_id = _schedule_breaching_soon(stub, hooks.url("/claimed", 200))
    eventually(lambda: _breaches(stub, schedule_id), timeout=60, interval=0.1, what="a breach")
    store.kill9()
    engine = create_engine(database_url, instrument=False)
    try:
        db = Database(engine)
        later = datetime.now(UTC) + timedelta(minutes=10)  # every claim has lapsed
        replicas = [DeliveryOutbox(db, clock=lambda: later) for _ in range(2)]
        with db.write() as s:
            s.execute(
                sa.text("UPDATE deadline_deliveries SET status = 'pending', claim_token = 'dead'")
            )

        # When both replicas claim the pending deliveries
        first = replicas[0].claim_deliveries(10, timedelta(seconds=30))
        second = replicas[1].claim_deliveries(10, timedelta(seconds=30))

        # Then one has it, the other nothing, and only the holder may record its outcome
        assert [len(b.deliveries) for b in first] == [1] and second == []
        held = first[0].deliveries[0]
        assert held.claim_token not in ("", "dead")
        assert not replicas[1].record_delivery(
            held.delivery_id, "dead", DeliveryStatus.FAILED, 1, 0, "x"
        )
        assert replicas[0].record_delivery(
            held.delivery_id, held.claim_token, DeliveryStatus.DELIVERED, 1, 200, ""
        )
        assert replicas[1].claim_deliveries(10, timedelta(seconds=30)) == []
    finally:
        engine.dispose()
