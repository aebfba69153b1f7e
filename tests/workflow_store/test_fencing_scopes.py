"""Fencing scopes are a closed, configured set (CRONWAVE_LEASE_SCOPES), over real gRPC:
leader-election's certificate gets no token for a scope of its own making, and no
planner's write is fenced in one, whatever tokens it was issued before."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc
import sqlalchemy as sa
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts
from tests.harness.store import FIRE, PAST_FIRE, StoreProcess, create_schedule, rpc_error
from tests.harness.tls import caller_for


def test_no_token_is_issued_for_a_made_up_scope(stub) -> None:
    # Given the store (the harness calls IssueFencingToken as leader-election)
    assert caller_for("/cronwave.v1.WorkflowStoreService/IssueFencingToken") == ("leader-election")
    planner = stub.IssueFencingToken(api.IssueFencingTokenRequest(fencing_scope="planner"))

    # When leader-election's certificate asks for a token of a scope the suite lacks
    err = rpc_error(stub.IssueFencingToken, api.IssueFencingTokenRequest(fencing_scope="rogue"))

    # Then it is refused, naming the field and the scopes there are
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details() == (
        "fencing_scope: 'rogue' is not a lease scope of this suite; the scopes are "
        "planner (CRONWAVE_LEASE_SCOPES)"
    )
    assert planner.fencing_token > 0  # the planners' scope has its tokens


def test_no_write_is_fenced_in_a_scope_the_suite_lacks(store: StoreProcess, stub) -> None:
    # Given a scope that was issued tokens before the suite's scopes were closed
    engine = sa.create_engine(store.env["CRONWAVE_DATABASE_URL"])
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO fencing (scope, token, issued, updated_at) "
                "VALUES ('rogue', 0, 5, :now)"
            ),
            {"now": datetime.now(UTC)},
        )
    engine.dispose()
    sid = create_schedule(stub).schedule_id

    # When a scheduled run and a MISSED slot are written under it with its token
    run = api.RecordRunRequest(
        schedule_id=sid,
        fire_time=dt_to_ts(FIRE),
        trigger=pb.TRIGGER_KIND_SCHEDULED,
        fencing_token=5,
        fencing_scope="rogue",
    )
    [recorded] = stub.RecordRuns(api.RecordRunsRequest(runs=[run])).results
    missed = rpc_error(
        stub.RecordMissedSlots,
        api.RecordMissedSlotsRequest(
            slots=[api.MissedSlot(schedule_id=sid, fire_time=dt_to_ts(PAST_FIRE), reason="x")],
            fencing_token=5,
            fencing_scope="rogue",
        ),
    )

    # Then both are refused, naming the scope, and nothing is written
    assert recorded.error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert recorded.error.message.startswith("fencing_scope: 'rogue' is not a lease scope")
    assert missed.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert missed.details().startswith("fencing_scope: 'rogue' is not a lease scope")
    assert list(stub.ListRuns(api.ListRunsRequest(schedule_id=sid)).runs) == []
