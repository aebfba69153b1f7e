"""The queue epoch: a marker the dispatcher keeps in the broker's Redis, so that a Redis
that lost its messages is noticed within a sweeper tick, not run by run once each is
overdue.

Redis loses every message it holds when it restarts without persistence, is flushed,
or fails over to an empty replica; restarted from a snapshot it loses those written
since the snapshot. The store, not the broker, is the source of truth, so a lost
message is never a lost run -- but until someone sends it again the run sits PENDING,
and a schedule whose overlap policy skips a slot while a run is in flight would skip
every slot meanwhile.

The marker (``<namespace>:queue:epoch``, a key no queue can have) names the Redis server
that holds it (its ``run_id``, new at every start of the server) and the instant it was
set. Each tick the dispatcher's sweeper reads it together with the server's ``run_id``
(one round trip, ``EpochWatch``). Marker gone (an empty restart, a flush) or naming
another server (a restart from a snapshot, a failover): every message sent before is
presumed lost. The dispatcher that sets the new marker -- a compare-and-set, so of
several replicas exactly one -- re-sends the message of every PENDING run recorded
before it; the others go on as usual. A message that was not lost after all gets a
second copy, which the run's claim refuses.

The planner reads the marker too (``LossView``) before it skips a slot for a run that
is only PENDING: a run recorded before the last loss may have no message, and the
dispatcher is about to send it again (see ``cron_planner.loss_waits``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import redis

log = logging.getLogger("cronwave.queue")

#: How long after a loss the planner still treats a PENDING run recorded before it as
#: possibly without a message. The dispatcher re-sends them within a tick or two; a run
#: still PENDING this long after is queued like any other.
LOSS_HORIZON = timedelta(seconds=10)
#: The planner's view of the marker is read at most this often.
VIEW_TTL = timedelta(milliseconds=100)
#: After a look that Redis did not answer, the next is at least this much later (a
#: look at an unreachable Redis may wait its whole timeout, in the fire loop).
UNKNOWN_RECHECK = timedelta(seconds=1)
_WARN_EVERY = 30.0  # seconds between two log lines about an unreachable Redis
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Set the marker only if it is still what the caller read (``""``: absent), so that of
# two dispatchers that saw the same loss exactly one sets the new epoch.
_SWAP = """
local current = redis.call('GET', KEYS[1])
if (current == false and ARGV[1] == '') or current == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
"""


def epoch_key(namespace: str) -> str:
    return f"{namespace}:queue:epoch"


@dataclass(frozen=True)
class QueueEpoch:
    """One marker: the server (its ``run_id``) that held it, and since when."""

    server: str
    since: datetime
    token: str

    def __post_init__(self) -> None:
        if self.since.tzinfo is None:
            raise ValueError("QueueEpoch.since must be timezone-aware")

    def encode(self) -> bytes:
        since_us = (self.since - _EPOCH) // timedelta(microseconds=1)
        data = {"server": self.server, "since_us": since_us, "token": self.token}
        return json.dumps(data).encode()

    @classmethod
    def decode(cls, raw: bytes | str | None) -> QueueEpoch | None:
        """The marker ``raw`` encodes; None when absent or not a marker of ours (which
        then counts as a foreign one: the next watch replaces it)."""
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            since = _EPOCH + timedelta(microseconds=int(data["since_us"]))
            return cls(str(data["server"]), since, str(data["token"]))
        except (ValueError, TypeError, KeyError, OverflowError):
            return None


@dataclass(frozen=True)
class Loss:
    """A loss this watcher took charge of: ``epoch`` is the new marker, ``why`` says
    what gave the loss away."""

    epoch: QueueEpoch
    why: str


class EpochWatch:
    """The dispatcher's side: notices a lost queue, and sets the new epoch."""

    def __init__(self, client: redis.Redis, namespace: str) -> None:
        self._client = client
        self._key = epoch_key(namespace)
        self._swap = client.register_script(_SWAP)

    def check(self, now: datetime) -> Loss | None:
        """One look (one round trip; a second to set a new marker): the loss this
        watcher must handle -- it set the new epoch -- else None (no loss, or another
        watcher took it). Raises ``redis.RedisError`` when Redis does not answer."""
        pipe = self._client.pipeline(transaction=False)
        pipe.info("server")
        pipe.get(self._key)
        info, raw = pipe.execute()
        server = str(info.get("run_id", "")) if isinstance(info, dict) else ""
        current = QueueEpoch.decode(raw)
        if current is not None and current.server == server:
            return None
        if raw is None:
            why = "the queue epoch marker is gone (Redis restarted empty or was flushed)"
        elif current is None:
            why = "the queue epoch marker is unreadable"
        else:
            why = f"Redis is another server (run_id {current.server} -> {server})"
        new = QueueEpoch(server, now, uuid.uuid4().hex)
        expected = b"" if raw is None else raw
        if not self._swap(keys=[self._key], args=[expected, new.encode()]):
            return None  # another dispatcher set it first: that one re-sends
        return Loss(new, why)


class LossView:
    """The planner's side: when the queue last lost its messages, if lately.

    The loss is the newest of: the epoch's instant, when the marker names the server
    that answers; the server's start (``uptime_in_seconds`` ago, rounded towards now)
    when it does not -- gone, foreign or unreadable: a loss no dispatcher has handled
    yet; and the moment of the look, when a marker this view saw before is gone (a
    flush); and the moment of the look, when Redis does not answer: then nothing rules
    a loss out, and a run recorded while it was away has no message at all. Read at
    most once per ``VIEW_TTL``, one round trip (after an unanswered look, once per
    ``UNKNOWN_RECHECK``)."""

    def __init__(
        self, client: redis.Redis, namespace: str, horizon: timedelta = LOSS_HORIZON
    ) -> None:
        self._client = client
        self._key = epoch_key(namespace)
        self._horizon = horizon
        self._lock = threading.Lock()
        self._next_read = float("-inf")  # time.monotonic() of the next look
        self._lost: datetime | None = None
        self._vanished = False
        self._unknown = False  # the last look found Redis away
        self._started: datetime | None = None  # the server answering started after this
        self._marker_seen = False
        self._warned_at = float("-inf")

    def lost_at(self, now: datetime) -> datetime | None:
        """The instant of the last loss if it lies within ``horizon`` of ``now``, else
        None. A loss not handled yet by any dispatcher, and a Redis that does not
        answer, count as a loss up to ``now``: every message sent until then may be
        gone."""
        return self._look(now)[0]

    def held_before(self, now: datetime) -> datetime | None:
        """By when a run must have been claimed to have been held by its worker through
        the last loss (None: no loss known). The loss's instant (``lost_at``) is when it
        was noticed, which may be after the server restarted and runs were claimed
        from it again; so when the server started within ``horizon``, its start (at
        the earliest: its uptime is whole seconds) is the bound."""
        lost, started = self._look(now)
        if lost is None:
            return None
        if started is not None and started < lost and now - started < self._horizon:
            return started
        return lost

    def _look(self, now: datetime) -> tuple[datetime | None, datetime | None]:
        """(``lost_at``, the server's start at the earliest), Redis read at most once
        per ``VIEW_TTL``."""
        with self._lock:
            if time.monotonic() >= self._next_read:
                self._read(now)
            if self._vanished or self._unknown:
                return now, self._started
            if self._lost is None or now - self._lost >= self._horizon:
                return None, self._started
            return self._lost, self._started

    def _read(self, now: datetime) -> None:
        read_at = time.monotonic()
        self._next_read = read_at + VIEW_TTL.total_seconds()
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.info("server")
            pipe.get(self._key)
            info, raw = pipe.execute()
        except redis.RedisError as exc:
            self._next_read = time.monotonic() + UNKNOWN_RECHECK.total_seconds()
            if read_at - self._warned_at >= _WARN_EVERY:
                self._warned_at = read_at
                log.warning(
                    "queue epoch unknown (Redis: %s); a slot skipped only for PENDING runs "
                    "waits until Redis answers (at most until its give-up time)",
                    exc,
                )
            self._unknown = True
            return
        self._unknown = False
        epoch = QueueEpoch.decode(raw)
        server = str(info.get("run_id", "")) if isinstance(info, dict) else ""
        uptime = int(info.get("uptime_in_seconds", 0)) if isinstance(info, dict) else 0
        self._started = now - timedelta(seconds=uptime + 1)
        if epoch is not None and epoch.server == server:
            self._lost, self._vanished, self._marker_seen = epoch.since, False, True
            return
        self._lost = now - timedelta(seconds=uptime)
        self._vanished = raw is None and self._marker_seen
