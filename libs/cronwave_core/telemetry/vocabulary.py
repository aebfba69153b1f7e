"""The words a cronwave span is written in: its hop, its kind of time, and the names of
the attributes that tie it to a run.

``Hop`` and ``Kind`` are ``StrEnum``s: a member *is* its string (``Hop.PERSIST ==
"persist"``, and it formats and serializes as ``persist``), so span attributes and the
waterfall's JSON read as before, while every ``hop_span`` call is checked by mypy.
The order of the members is the order of a waterfall's rows and columns.
"""

from __future__ import annotations

from enum import StrEnum


class Hop(StrEnum):
    """The seven hops of a run, in the order a run crosses them (docs/architecture.md)."""

    PLAN = "plan"
    LEADER = "leader"
    DISPATCH = "dispatch"
    PERSIST = "persist"
    PICKUP = "pickup"
    EXECUTE = "execute"
    COMPLETE = "complete"


class Kind(StrEnum):
    """The kinds of time a hop is broken down into. ``DNS`` and ``CONNECT`` are a
    connection's set-up (``cronwave_core.telemetry.setup``): rare, as connections are
    pooled, and in a tail for that reason."""

    DNS = "dns"
    CONNECT = "connect"
    NETWORK = "network"
    SERIALIZATION = "serialization"
    CACHE = "cache"
    DATABASE = "database"
    QUEUE = "queue"
    APP = "app"


HOPS: tuple[Hop, ...] = tuple(Hop)
KINDS: tuple[Kind, ...] = tuple(Kind)

#: The ``cronwave.hop`` of a span that is the run's, not one hop's: the run span itself
#: (``cronwave.run``), an attempt of it (``cronwave.attempt``), and a run held until
#: its fire time (``worker.hold``: waiting on purpose, no hop's latency). The
#: waterfall counts such a span for the run's extent and for no hop's row.
RUN_HOP = "run"
#: The ``cronwave.kind`` of the spans of ``RUN_HOP``, one each: the run from its fire
#: decision (or the trigger's arrival) to its durable completion, one attempt, a hold.
RUN_KIND = "run"
ATTEMPT_KIND = "attempt"
HOLD_KIND = "hold"

ATTR_HOP = "cronwave.hop"
ATTR_KIND = "cronwave.kind"
ATTR_RUN_ID = "cronwave.run_id"
ATTR_SCHEDULE_ID = "cronwave.schedule_id"
ATTR_FIRE_TIME = "cronwave.fire_time"
ATTR_CACHE_HIT = "cronwave.cache.hit"
#: Which cache a look-up asked (``dedup``, ``route``, ``schedule``, ``lease``, ...).
ATTR_CACHE_NAME = "cronwave.cache.name"
ATTR_JOB_TYPE = "cronwave.job_type"
ATTR_QUEUE = "cronwave.queue"
ATTR_ATTEMPT = "cronwave.attempt"
ATTR_WORKER_ID = "cronwave.worker_id"
#: ``scheduled``, ``manual``, ``backfill`` or ``catchup``: why the run exists.
ATTR_TRIGGER = "cronwave.trigger"
#: On the run span: the state the run ended in (``SUCCEEDED``, ``DEAD_LETTERED``, ...).
ATTR_RUN_STATE = "cronwave.run.state"
#: Set on the span a latency fault was injected into (see ``cronwave_core.faults``).
ATTR_FAULT = "cronwave.fault"
#: Set on the span of a run held until its fire time (dispatched ahead): waiting on
#: purpose before the instant, which is no hop's latency.
ATTR_HOLD = "cronwave.hold"
#: On a ``dns`` or ``connect`` span: the name or address and port it was for
#: (``redis.cronwave.svc:6379``), and on a ``dns`` span the addresses it was answered.
ATTR_PEER = "cronwave.peer"
ATTR_ADDRESSES = "cronwave.dns.addresses"

#: The attributes a span inherits from its in-process parent
#: (``propagation.RunAttributesProcessor``).
RUN_KEYS = (
    ATTR_RUN_ID,
    ATTR_SCHEDULE_ID,
    ATTR_FIRE_TIME,
    ATTR_JOB_TYPE,
    ATTR_QUEUE,
    ATTR_ATTEMPT,
    ATTR_WORKER_ID,
    ATTR_TRIGGER,
)

#: The run attributes that travel as baggage to other processes (all strings).
BAGGAGE_KEYS = (
    ATTR_RUN_ID,
    ATTR_SCHEDULE_ID,
    ATTR_FIRE_TIME,
    ATTR_JOB_TYPE,
    ATTR_QUEUE,
    ATTR_TRIGGER,
)


def run_attributes(run_id: str, schedule_id: str, fire_time: str) -> dict[str, str]:
    """The attributes every span of a run carries."""
    return {ATTR_RUN_ID: run_id, ATTR_SCHEDULE_ID: schedule_id, ATTR_FIRE_TIME: fire_time}
