"""The dispatcher's sweeper re-sends the message of a run nobody picked up: a lost
message (Redis lost its queue) still runs."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis

from cronwave.v1 import common_pb2
from cronwave.v1 import workflow_store_service_pb2 as store_pb
from cronwave_core.convert import td_to_duration
from tests.reliability.conftest import MakeRig
from tests.reliability.support import events_of, lifecycle

pytestmark = pytest.mark.slow


def test_a_lost_message_is_sent_again_and_the_run_succeeds(make_rig: MakeRig) -> None:
    # Given a run recorded and queued on the bulk pool while no bulk worker runs
    rig = make_rig(pools={"default": 1})
    rig.store.RegisterJobType(
        store_pb.RegisterJobTypeRequest(
            job_type=common_pb2.JobType(
                name="drill.bulk",
                duration_limit=td_to_duration(timedelta(minutes=1)),
                queue="bulk",
            )
        ),
        timeout=10,
    )
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
