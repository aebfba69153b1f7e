"""The store's audit RPC (``ListAuditEvents``, over ``audit_store.AuditLog`` alone) and
who a servicer call is made by."""

from __future__ import annotations

import grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts
from workflow_store import validate
from workflow_store.audit_store import DEFAULT_AUDIT_LIMIT, Actor, AuditLog, AuditRecord


def actor(context: grpc.ServicerContext) -> Actor:
    """Who makes the call being served and from where (the audit rows' who and peer)."""
    return Actor.current(context.peer() or "")


def audit_event_to_proto(record: AuditRecord) -> api.AuditEvent:
    return api.AuditEvent(
        id=record.id,
        at=dt_to_ts(record.at),
        actor=record.actor,
        peer=record.peer,
        rpc=record.rpc,
        schedule_id=record.schedule_id,
        run_id=record.run_id,
        changes_json=record.changes_json,
    )


def list_audit_events(
    audit: AuditLog, request: api.ListAuditEventsRequest
) -> api.ListAuditEventsResponse:
    """``ListAuditEvents``: a page of ``audit``'s rows, newest first."""
    schedule_id = validate.schedule_ref(request.schedule_id, "schedule_id")
    limit = validate.limits().page(request.limit)
    records = audit.list_audit_events(schedule_id, limit, request.before_id)
    full = len(records) == (limit or DEFAULT_AUDIT_LIMIT)
    return api.ListAuditEventsResponse(
        events=[audit_event_to_proto(r) for r in records],
        next_before_id=records[-1].id if full and records else 0,
    )
