"""The client's calls about deadlines: the breaches the store recorded (``Client`` has
them from here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave._models import DeadlineBreach

if TYPE_CHECKING:
    from cronwave._transport import Stubs

Resp = TypeVar("Resp")


class DeadlineCalls:
    """What ``Client`` asks of the store about deadlines."""

    if TYPE_CHECKING:
        _stubs: Stubs

        def _call(self, service: str, method: Callable[..., Resp], request: Any) -> Resp: ...

    def deadline_breaches(
        self, schedule_id: str | None = None, *, limit: int = 50, before_id: int = 0
    ) -> list[DeadlineBreach]:
        """Slots that missed their schedule's deadline, newest first (of one schedule,
        or of all), each with its notifications' deliveries; ``before_id`` pages on
        after the last one's ``breach_id``."""
        resp = self._call(
            "workflow-store",
            self._stubs.store.ListDeadlineBreaches,
            store_pb.ListDeadlineBreachesRequest(
                schedule_id=schedule_id or "", limit=limit, before_id=before_id
            ),
        )
        return [DeadlineBreach.from_proto(b) for b in resp.breaches]
