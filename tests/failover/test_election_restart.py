"""leader-election and its Redis (persistence off) killed and restarted mid-lease: the
lease and the fencing counter are gone, yet election resumes, tokens keep increasing
(floored by the store), and no slot runs twice or goes missing."""

from __future__ import annotations

import signal
from datetime import UTC, datetime

import pytest
import redis
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave_bench.failover import SCOPE
from cronwave_bench.faults import OwnRedis
from tests.failover.support import LEASE_ENV
from tests.harness.planner import start_planner_process
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually

pytestmark = pytest.mark.slow


def test_election_resumes_with_newer_tokens_after_losing_its_redis(
    make_suite: SuiteFactory, drill_of, own_redis: OwnRedis, namespace: str
) -> None:
    # Given leader-election on a Redis of its own, two planners, a 1-second schedule
    suite = make_suite(planners=0, env=LEASE_ENV)
    suite.procs["leader-election"].env["CRONWAVE_REDIS_URL"] = own_redis.url
    suite.restart("leader-election")
    drill = drill_of(suite)
    start_planner_process(suite, 0)
    start_planner_process(suite, 1)
    drill.create_schedule()
    leader, old_token = drill.wait_leading(30)
    eventually(
        lambda: sum(r.fencing_token == old_token for r in drill.runs(limit=20)) >= 2,
        timeout=10,
        what="two fires of the leader",
    )

    # When leader-election and its Redis die mid-lease and come back empty
    assert drill.lease().holder.startswith(f"{leader}@")
    drill.suite.signal("leader-election", signal.SIGKILL)
    drill.suite.procs["leader-election"].popen.wait(timeout=10)
    own_redis.kill()
    own_redis.start()
    client = redis.Redis.from_url(own_redis.url)
    assert client.dbsize() == 0  # the lease and the fencing counter are gone
    client.close()
    suite.restart("leader-election")

    # Then a planner is elected again, with a token newer than any before
    def newer_fire() -> int | None:
        tokens = [r.fencing_token for r in drill.runs(limit=20) if r.fencing_token > old_token]
        return min(tokens) if tokens else None

    new_token = eventually(newer_fire, timeout=20, what="a fire after the restart")
    assert new_token > old_token
    held = drill.holder()  # the token as the leading planner reports it
    assert held is not None and held[1] >= new_token
    client = redis.Redis.from_url(own_redis.url)
    assert int(client.get(f"{namespace}:fence:{SCOPE}") or 0) >= new_token
    client.close()

    # And no slot ran twice or went missing; tokens never go down along the slots, and
    # the store has seen the newest
    accounts = drill.finish(datetime.now(UTC))
    assert accounts["audit"]["duplicate_runs"] == 0
    assert accounts["job_body_ran_twice"] == 0
    assert accounts["missed_fires"] == 0
    assert accounts["audit"]["tokens_in_order"]
    runs = drill.runs()
    newest = drill.store.GetFencingToken(
        store_pb.GetFencingTokenRequest(fencing_scope=SCOPE), timeout=5
    ).fencing_token
    assert newest == max(r.fencing_token for r in runs)
