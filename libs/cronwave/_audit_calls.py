"""The client's calls to the audit trail (``Client`` has them from here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave._models import AuditEvent
from cronwave_core.errors import InvalidArgument

if TYPE_CHECKING:
    from cronwave._transport import Stubs

Resp = TypeVar("Resp")
#: The most items one listing page may ask for (the store's default page size limit).
_PAGE = 1_000


class AuditCalls:
    """What ``Client`` asks of the audit trail."""

    if TYPE_CHECKING:
        _stubs: Stubs

        def _call(self, service: str, method: Callable[..., Resp], request: Any) -> Resp: ...

    def audit_events(self, schedule_id: str = "", *, limit: int = 50) -> list[AuditEvent]:
        """The audit trail, newest first: of ``schedule_id`` (its creation, changes,
        pauses, deletion, and its runs' manual triggers, backfills, cancels and
        replays), or of everything when it is empty; at most ``limit`` events (read a
        page of up to 1,000 at a time)."""
        if limit < 1:
            raise InvalidArgument("limit", f"must be at least 1, got {limit}")
        events: list[AuditEvent] = []
        before = 0
        while len(events) < limit:
            resp = self._call(
                "workflow-store",
                self._stubs.store.ListAuditEvents,
                store_pb.ListAuditEventsRequest(
                    schedule_id=schedule_id,
                    limit=min(limit - len(events), _PAGE),
                    before_id=before,
                ),
            )
            events.extend(AuditEvent.from_proto(e) for e in resp.events)
            before = resp.next_before_id
            if not before or not resp.events:
                break
        return events
