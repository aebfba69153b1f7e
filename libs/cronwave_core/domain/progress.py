"""A run's progress: how far its job body says it got (``JobContext.progress``).

It is the job's own count of its work -- ``done`` of ``total`` ``unit`` -- not a guess
from its checkpoint: the checkpoint says where to resume, the progress what a person
watching the run reads. The worker sends the newest with the attempt's next heartbeat
(within the checkpoint flush, a second by default), so reporting it is cheap at any
rate: only the last report of each flush reaches the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from cronwave_core.errors import InvalidArgument

if TYPE_CHECKING:
    from cronwave_proto.v1 import common_pb2

#: The most characters of a unit ("customers charged").
MAX_UNIT = 64


def _count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(field, f"must be a whole number, got {value!r}")
    if value < 0:
        raise InvalidArgument(field, f"must not be negative, got {value}")
    return value


@dataclass(frozen=True)
class Progress:
    """``done`` of ``total`` ``unit`` (``total`` None: not known), as the body
    reported it at ``at`` (aware, UTC). Raises ``InvalidArgument`` naming the field for
    a negative or fractional count, or a unit longer than ``MAX_UNIT`` characters."""

    done: int
    total: int | None = None
    unit: str = ""
    at: datetime | None = None

    def __post_init__(self) -> None:
        _count(self.done, "done")
        if self.total is not None:
            _count(self.total, "total")
        if not isinstance(self.unit, str):
            raise InvalidArgument("unit", f"must be text, got {type(self.unit).__name__}")
        if len(self.unit) > MAX_UNIT or any(not c.isprintable() for c in self.unit):
            raise InvalidArgument(
                "unit", f"at most {MAX_UNIT} printable characters, e.g. 'customers charged'"
            )
        if self.at is not None and self.at.tzinfo is None:
            raise InvalidArgument("at", "must be a timezone-aware datetime")

    @property
    def fraction(self) -> float | None:
        """``done / total`` within 0 .. 1; None when the total is not known (or 0)."""
        if not self.total:
            return None
        return max(0.0, min(1.0, self.done / self.total))

    # The conversions import the messages when called: a job process, which builds
    # Progress values, never loads protobuf for them.
    def to_proto(self) -> common_pb2.Progress:
        from cronwave_proto.v1 import common_pb2

        from cronwave_core.wire import dt_to_ts

        msg = common_pb2.Progress(done=self.done, total=self.total or 0, unit=self.unit)
        if self.at is not None:
            msg.at.CopyFrom(dt_to_ts(self.at))
        return msg

    @classmethod
    def from_proto(cls, msg: common_pb2.Progress) -> Progress:
        """Raises ``InvalidArgument`` naming the field, as the constructor does."""
        from cronwave_core.wire import ts_to_dt

        at = ts_to_dt(msg.at) if msg.HasField("at") else None
        return cls(msg.done, msg.total or None, msg.unit, at)

    def __str__(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        if self.total is None:
            return f"{self.done:,}{unit}"
        return f"{self.done:,} of {self.total:,}{unit}"
