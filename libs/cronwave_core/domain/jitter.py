"""Deterministic jitter: spreads schedules that share a fire time without randomness.

The delay of a fire is a hash of ``(schedule_id, fire_time)``, so every planner --
the leader, its successor after a failover, a preview -- computes the same instant,
and a restarted planner does not move a run it already announced.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from cronwave_core.errors import InvalidArgument

_US = timedelta(microseconds=1)


def jitter_offset(schedule_id: str, fire_time: datetime, jitter: timedelta) -> timedelta:
    """A delay in ``[0, jitter)`` with microsecond resolution, the same for the same
    schedule and nominal fire time in every process (zero when ``jitter`` is
    shorter than a microsecond)."""
    if jitter < timedelta(0):
        raise InvalidArgument("spec.jitter", "must be a non-negative duration")
    if fire_time.utcoffset() is None:
        raise InvalidArgument("fire_time", "must be a timezone-aware datetime")
    span = jitter // _US
    if span <= 0:
        return timedelta(0)
    # The key names the instant in UTC microseconds, so equal instants written in
    # different zones hash alike. blake2b, not hash(): hash() is salted per process.
    micros = (fire_time - datetime(1970, 1, 1, tzinfo=UTC)) // _US
    key = f"{schedule_id}\x00{micros}".encode()
    digest = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")
    return timedelta(microseconds=digest % span)


def jittered(schedule_id: str, fire_time: datetime, jitter: timedelta) -> datetime:
    """``fire_time`` delayed by its deterministic jitter, in
    ``[fire_time, fire_time + jitter)``, as an aware UTC datetime.

    The run keeps ``fire_time`` as its nominal time (its identity and the origin of
    fire lateness); only the moment it is started moves.
    """
    return fire_time.astimezone(UTC) + jitter_offset(schedule_id, fire_time, jitter)
