"""The store's size limits, in one place.

A limit protects every reader of what the store holds, not only the writer: a
schedule is read back by every planner's schedule feed, a page of schedules at a time,
over gRPC, whose messages are at most 4 MiB by default. Two schedules with 3 MiB
payloads made a feed page too large to receive, and since a planner campaigns only
once it has loaded its schedules, no schedule fired at all. Hence a payload limit
checked before anything is written, and replies that never come near the gRPC
limit, whatever the database holds (a row written before the limit, or by hand).
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB
#: gRPC's default for the largest message a channel or server receives.
GRPC_MESSAGE_LIMIT = 4 * MIB


@dataclass(frozen=True)
class Limits:
    """``payload_bytes``: the most UTF-8 bytes a schedule's ``payload_json`` may have
    (CreateSchedule refuses more; ``main()`` sets it from ``CRONWAVE_MAX_PAYLOAD_BYTES``,
    the limit ``validate`` applies). ``page_bytes``: a ListSchedules page ends before the
    schedule that would take its encoding past this (it always holds one, so a page is
    never empty while schedules remain). ``schedule_reply_bytes``: a schedule whose
    encoding is larger than this (a row planted by hand, a huge spec) is sent by its
    identity alone, in any reply. Both bounds stay well under gRPC's 4 MiB message
    limit, so every reply and every page can be received.

    A listing (ListSchedules, WatchSchedules) also leaves out a payload over
    ``payload_bytes``, which only a row written before the limit, or by hand, has."""

    payload_bytes: int = 256 * KIB
    page_bytes: int = 1 * MIB
    schedule_reply_bytes: int = 3 * MIB

    def __post_init__(self) -> None:
        for name in ("payload_bytes", "page_bytes", "schedule_reply_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name} must be positive, got {getattr(self, name)}")
        if self.schedule_reply_bytes >= GRPC_MESSAGE_LIMIT:
            raise ValueError(
                f"Limits.schedule_reply_bytes must stay under gRPC's {GRPC_MESSAGE_LIMIT} "
                f"byte message limit, got {self.schedule_reply_bytes}"
            )
        if self.payload_bytes >= self.schedule_reply_bytes:
            raise ValueError("Limits.payload_bytes must be below schedule_reply_bytes")


LIMITS = Limits()
