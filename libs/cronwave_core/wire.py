"""Protobuf's well-known types <-> Python's: ``Timestamp`` <-> aware UTC
``datetime``, ``Duration`` <-> ``timedelta``. Refusals name the request field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from cronwave_core.errors import InvalidArgument

#: The instants a Timestamp may name: years 1 to 9999, as datetime holds them.
MIN_SECONDS = -62_135_596_800  # 0001-01-01T00:00:00Z
MAX_SECONDS = 253_402_300_799  # 9999-12-31T23:59:59Z
#: The longest duration a request may carry unless its field says otherwise.
MAX_DURATION = timedelta(days=36_525)  # 100 years
_NANOS = 1_000_000_000

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def ts_to_dt(ts: Timestamp, field: str = "timestamp") -> datetime:
    """The aware UTC instant of ``ts``; ``InvalidArgument(field)`` unless its nanos are
    in [0, 1e9) and it lies within years 1 to 9999."""
    seconds, nanos = ts.seconds, ts.nanos
    if not 0 <= nanos < _NANOS:
        raise InvalidArgument(field, f"nanos must be in [0, 999999999], got {nanos}")
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise InvalidArgument(
            field, f"must lie between 0001-01-01 and 9999-12-31 (UTC), got seconds={seconds}"
        )
    return _EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)


def dt_to_ts(dt: datetime) -> Timestamp:
    if dt.tzinfo is None:
        raise ValueError("naive datetime: cronwave instants are timezone-aware")
    # timedelta keeps 0 <= seconds < 86400 and 0 <= microseconds < 10**6, which is
    # also Timestamp's normal form (non-negative nanos, also before 1970).
    delta = dt - _EPOCH
    return Timestamp(seconds=delta.days * 86_400 + delta.seconds, nanos=delta.microseconds * 1000)


def opt_ts(msg: Message, name: str, field: str = "") -> datetime | None:
    """``msg.<name>`` as an instant (``ts_to_dt``, refusals naming ``field``, by
    default ``name``), or None when unset."""
    if not msg.HasField(name):
        return None
    return ts_to_dt(getattr(msg, name), field or name)


def td_to_duration(td: timedelta) -> Duration:
    d = Duration()
    d.FromTimedelta(td)
    return d


def duration_to_td(
    d: Duration, field: str = "duration", limit: timedelta = MAX_DURATION
) -> timedelta:
    """As ``Duration.ToTimedelta`` (nanoseconds rounded toward zero), without its
    Python-level checks: a schedule load converts a few of these per schedule.
    ``InvalidArgument(field)`` for a Duration protobuf calls malformed (nanos outside
    (-1e9, 1e9) or of the other sign than seconds) and for one longer than ``limit``
    either way (``MAX_DURATION`` lies well inside both protobuf's and timedelta's
    range); whether it may be negative is the field's own rule."""
    seconds, nanos = d.seconds, d.nanos
    if not -_NANOS < nanos < _NANOS or (seconds > 0 > nanos) or (seconds < 0 < nanos):
        raise InvalidArgument(
            field,
            f"not a valid Duration: nanos must be in (-1e9, 1e9) with the sign of seconds, "
            f"got seconds={seconds}, nanos={nanos}",
        )
    micros = nanos // 1000 if nanos >= 0 else -(-nanos // 1000)
    if abs(seconds) > limit.days * 86_400 + limit.seconds:
        raise InvalidArgument(field, f"must be at most {_span(limit)} either way, got {seconds}s")
    return timedelta(seconds=seconds, microseconds=micros)


def _span(td: timedelta) -> str:
    seconds = td.total_seconds()
    if td.days and not td.seconds and not td.microseconds:
        return f"{td.days} day{'s' if td.days != 1 else ''} ({seconds:g}s)"
    return f"{seconds:g}s"
