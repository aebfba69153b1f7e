"""The dispatcher's sweeper re-sends the message of a run nobody picked up: a lost
message (Redis lost its queue) still runs, and a message still waiting in its queue's
backlog is not sent twice."""

from __future__ import annotations

import time

import dramatiq
import pytest
import redis

from tests.harness.cluster import MakeRig
from tests.helpers import eventually
from tests.reliability.support import events_of, lifecycle, register_drill

pytestmark = pytest.mark.slow


def test_a_lost_message_is_sent_again_and_the_run_succeeds(make_rig: MakeRig) -> None:
    # Given a run recorded and queued on the bulk pool while no bulk worker runs
    rig = make_rig(pools={"default": 1})
    register_drill(rig.store, "drill.bulk")
    run_id = rig.start(rig.schedule("drill.bulk", {"seconds": 0})).run.run_id
    client = redis.Redis.from_url(rig.suite.redis_url)
    try:
        assert client.hlen(f"{rig.namespace}:bulk.msgs") == 1
        # When Redis loses the queue (a restart with persistence off)
        client.delete(f"{rig.namespace}:bulk", f"{rig.namespace}:bulk.msgs")
    finally:
        client.close()
    # and a bulk worker starts
    rig.suite.start_service(
        "worker", index=1, name="worker-bulk", extra_env={"CRONWAVE_WORKER_QUEUES": "bulk"}
    )

    # Then the sweeper sends the run again once overdue, and it succeeds
    rig.wait_state(run_id, "SUCCEEDED", timeout=30)
    events = rig.run_events(run_id)
    kinds = lifecycle(events)
    assert kinds[:2] == ["recorded", "enqueued"] and kinds[-2:] == ["claimed", "succeeded"]
    requeued = events_of(events, "requeued")
    assert requeued and requeued[0].detail == "not_picked_up"


def test_the_runs_of_a_lost_queue_are_sent_again_at_once_not_after_the_bound(
    make_rig: MakeRig,
) -> None:
    # Given a sweeper that re-sends an unclaimed run only after 30 s, and two runs
    # recorded and queued on the bulk pool while no bulk worker runs
    rig = make_rig(pools={"default": 1}, env={"CRONWAVE_SWEEP_PENDING_AFTER": "30"})
    register_drill(rig.store, "drill.bulk")
    run_ids = [rig.start(rig.schedule("drill.bulk", {"seconds": 0})).run.run_id for _ in "ab"]
    client = redis.Redis.from_url(rig.suite.redis_url)
    try:
        assert client.hlen(f"{rig.namespace}:bulk.msgs") == 2
        # When Redis loses this namespace's data (as in a restart with persistence off)
        client.delete(
            f"{rig.namespace}:bulk", f"{rig.namespace}:bulk.msgs", f"{rig.namespace}:queue:epoch"
        )

        # Then the dispatcher notices within a tick, sets a new epoch and sends both
        # runs again, long before the 30-s bound
        def resent() -> list[str]:
            details = [
                [e.detail for e in events_of(rig.run_events(run_id), "requeued")]
                for run_id in run_ids
            ]
            assert all(d == ["queue_lost"] for d in details), details
            return details[0]

        eventually(resent, timeout=10, what="both runs re-sent for the lost queue")
        assert client.exists(f"{rig.namespace}:queue:epoch")
        # (the store records the re-send, then the dispatcher enqueues the messages)
        eventually(
            lambda: client.hlen(f"{rig.namespace}:bulk.msgs") == 2,
            timeout=10,
            what="both messages on the bulk queue again",
        )
    finally:
        client.close()
    assert "queue lost: 2 runs re-sent" in rig.log("dispatcher")

    # And once a bulk worker runs, each succeeds, once
    rig.suite.start_service(
        "worker", index=1, name="worker-bulk", extra_env={"CRONWAVE_WORKER_QUEUES": "bulk"}
    )
    for run_id in run_ids:
        run = rig.wait_state(run_id, "SUCCEEDED", timeout=30)
        assert run.attempt == 1


def test_a_message_still_waiting_on_its_queue_is_not_sent_again_past_the_bound(
    make_rig: MakeRig,
) -> None:
    # Given a sweeper that takes an unclaimed run's message for lost after 1 s, and two
    # runs queued on the bulk pool 2.5 s apart while no bulk worker runs
    rig = make_rig(pools={"default": 1}, env={"CRONWAVE_SWEEP_PENDING_AFTER": "1"})
    register_drill(rig.store, "drill.bulk")
    lost = rig.start(rig.schedule("drill.bulk", {"seconds": 0})).run.run_id
    time.sleep(2.5)
    waiting = rig.start(rig.schedule("drill.bulk", {"seconds": 0})).run.run_id
    client = redis.Redis.from_url(rig.suite.redis_url)
    queue, messages = f"{rig.namespace}:bulk", f"{rig.namespace}:bulk.msgs"
    try:
        # When the older run's message is lost (taken out of the queue); till then it
        # had one message, though it waited past the bound
        ids = [
            mid
            for mid, body in client.hgetall(messages).items()
            if dramatiq.Message.decode(body).kwargs.get("run_id") == lost
        ]
        assert len(ids) == 1, f"a message waiting in its queue was sent again: {ids}"
        [message_id] = ids
        assert client.lrem(queue, 0, message_id) == 1 and client.hdel(messages, message_id) == 1

        # Then that run is sent again: its message is older than the queue's backlog
        def resent() -> bool:
            return bool(events_of(rig.run_events(lost), "requeued"))

        eventually(resent, timeout=20, what="the lost message sent again")
        # while the one whose message still waits at the queue's head, three times the
        # bound by now, is not: the queue holds it and the lost run's new message
        time.sleep(3)
        assert not events_of(rig.run_events(waiting), "requeued")
        assert client.llen(queue) == 2 and client.hlen(messages) == 2
    finally:
        client.close()

    # And once a bulk worker runs, each succeeds, in one attempt
    rig.suite.start_service(
        "worker", index=1, name="worker-bulk", extra_env={"CRONWAVE_WORKER_QUEUES": "bulk"}
    )
    for run_id in (lost, waiting):
        assert rig.wait_state(run_id, "SUCCEEDED", timeout=30).attempt == 1
