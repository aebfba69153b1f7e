"""``ListDeadlineBreaches``: the servicer's part for deadlines (proto <-> records), over
``deadline_store.DeadlineStore`` alone."""

from __future__ import annotations

from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts
from workflow_store import validate
from workflow_store.deadline_records import BreachRecord, DeliveryRecord
from workflow_store.deadline_store import DeadlineStore


def delivery_to_proto(d: DeliveryRecord) -> api.DeadlineDelivery:
    return api.DeadlineDelivery(
        url=d.url,
        format=d.format.to_proto(),
        status=d.status.value,
        attempts=d.attempts,
        http_status=d.http_status,
        error=d.error,
        updated_at=dt_to_ts(d.updated_at),
    )


def breach_to_proto(b: BreachRecord) -> api.DeadlineBreach:
    return api.DeadlineBreach(
        id=b.breach_id,
        schedule_id=b.schedule_id,
        fire_time=dt_to_ts(b.fire_time),
        deadline_at=dt_to_ts(b.deadline_at),
        reason=b.reason,
        cause=b.cause,
        run_id=b.run_id,
        run_state=(b.run_state.to_proto() if b.run_state else common_pb2.RUN_STATE_UNSPECIFIED),
        detected_at=dt_to_ts(b.detected_at),
        deliveries=[delivery_to_proto(d) for d in b.deliveries],
    )


def list_deadline_breaches(
    deadlines: DeadlineStore, request: api.ListDeadlineBreachesRequest
) -> api.ListDeadlineBreachesResponse:
    """``ListDeadlineBreaches``: a page of breaches, newest first, with their deliveries."""
    breaches = deadlines.list_deadline_breaches(
        validate.schedule_ref(request.schedule_id, "schedule_id"),
        request.limit,
        request.before_id,
    )
    return api.ListDeadlineBreachesResponse(breaches=[breach_to_proto(b) for b in breaches])
