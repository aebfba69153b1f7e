"""Run messages on the broker: what the dispatcher enqueues and a worker takes.

A message only says *which* run to take; the run itself (job type, payload, attempt)
lives in the workflow-store, which a worker asks when it claims the run. Payloads are
JSON data, never pickled code, so any worker version can decode any message and a
message cannot carry code into a worker.

No import-time wiring: ``make_broker`` builds a broker and hands it back; it does not
make it dramatiq's global broker (the worker does that in its ``main()``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from cronwave_proto.v1 import common_pb2

from cronwave_core.convert import ts_to_dt
from cronwave_core.errors import CronwaveError, InvalidArgument
from cronwave_core.fields import require_run_id, validate_queue_name
from cronwave_core.settings import RedisSettings
from cronwave_core.telemetry.propagation import inject_context

if TYPE_CHECKING:  # dramatiq (and redis) load where a broker is made or used, so a job
    # process that only validates its job types' queues does without them
    import dramatiq
    import redis
    from dramatiq.brokers.redis import RedisBroker

__all__ = [
    "DEFAULT_QUEUE",
    "FORMAT_VERSION",
    "RunMessage",
    "UndecodableRunMessage",
    "actor_name_for",
    "enqueue_many",
    "make_broker",
    "trigger_name",
    "validate_queue_name",
]

#: The queue of a run whose job type names none.
DEFAULT_QUEUE = "default"

#: Bumped when a field changes meaning; a worker refuses a version it does not know.
FORMAT_VERSION = 1


class UndecodableRunMessage(CronwaveError):
    """A queued message is not a cronwave run message this worker can read; it is
    dead-lettered by the broker, never guessed at."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(
            f"undecodable run message: {field}: {problem}; the message was not produced "
            "by a compatible dispatcher (expected kwargs written by RunMessage.to_message)"
        )
        self.field = field
        self.problem = problem


def make_broker(settings: RedisSettings, client: redis.Redis | None = None) -> RedisBroker:
    """A Redis broker for ``settings.redis_url`` (any of ``cronwave_core.redis_urls``'s
    forms) whose keys live under ``settings.namespace``, over ``client`` when given (a
    service passes its own bounded pool), else over a pool of two connections
    (``cronwave_core.redis_pools``) for a caller that enqueues from one thread. It is
    not installed as dramatiq's global broker."""
    from dramatiq.brokers.redis import RedisBroker

    from cronwave_core.redis_pools import bounded_client

    if client is None:
        client = bounded_client(
            settings.redis_url,
            name="broker",
            size=2,
            wait=timedelta(seconds=2),
            timeout=timedelta(seconds=5),
        )
    return RedisBroker(client=client, namespace=settings.namespace)


def enqueue_many(broker: RedisBroker, messages: Sequence[dramatiq.Message[Any]]) -> None:
    """Put ``messages`` on their queues in one round trip to Redis: the broker's own
    enqueue script, once per message, in a pipeline. Each message is enqueued as
    ``broker.enqueue`` does it (a fresh Redis message id, the middleware told before
    and after), without a delay. Raises what the pipeline raised: then none of them
    may be queued, or some; a run whose message was lost is sent again by the
    sweeper, and a second message for a run is refused by its claim."""
    if not messages:
        return
    from dramatiq.common import current_millis

    dispatch = broker.scripts["dispatch"]
    pipe = broker.client.pipeline(transaction=False)
    sent: list[dramatiq.Message[Any]] = []
    for original in messages:
        message = original.copy(options={"redis_message_id": str(uuid.uuid4())})
        broker.emit_before("enqueue", message, None)
        args = [
            "enqueue",
            current_millis(),
            message.queue_name,
            broker.broker_id,
            broker.heartbeat_timeout,
            broker.dead_message_ttl,
            0,  # no maintenance: the broker's own calls do it now and then
            broker._max_unpack_size(),
            message.options["redis_message_id"],
            message.encode(),
        ]
        # The arguments of RedisBroker.do_enqueue (its ``_dispatch``), so the message
        # lands exactly where broker.enqueue would put it.
        dispatch(keys=[broker.namespace], args=args, client=pipe)
        sent.append(message)
    pipe.execute()
    for message in sent:
        broker.emit_after("enqueue", message, None)


def trigger_name(trigger: int) -> str:
    """``scheduled``, ``manual``, ... for a ``cronwave.v1.TriggerKind`` value."""
    try:
        name = common_pb2.TriggerKind.Name(trigger)
    except ValueError:
        return str(trigger)
    return name.removeprefix("TRIGGER_KIND_").lower()


def actor_name_for(queue: str) -> str:
    """The one actor that consumes ``queue`` (a dramatiq actor binds one queue)."""
    return f"cronwave_run__{validate_queue_name(queue)}"


@dataclass(frozen=True)
class RunMessage:
    """One recorded run handed to a worker pool.

    ``attempt_hint`` is the attempt the dispatcher saw; the store's claim decides the
    real one. ``trace`` is the W3C trace-context carrier of the enqueueing span.
    ``enqueued_at_ns`` is wall-clock nanoseconds since the epoch just before the
    enqueue, so a worker can draw the time the message spent in the queue.
    ``trigger`` is why the run exists (``scheduled``, ``manual``, ...; empty when the
    sender did not say), for the worker's spans.
    """

    run_id: str
    schedule_id: str
    fire_time: datetime
    job_type: str
    queue: str
    attempt_hint: int = 0
    trace: Mapping[str, str] = field(default_factory=dict)
    enqueued_at_ns: int = 0
    trigger: str = ""

    @classmethod
    def for_run(
        cls,
        run: common_pb2.Run,
        delay: timedelta = timedelta(0),
        *,
        trace: Mapping[str, str] | None = None,
    ) -> RunMessage:
        """The message for a recorded run, carrying ``trace`` (a W3C trace-context
        carrier), else the current trace context; with a ``delay`` it counts as
        enqueued when the broker will release it."""
        return cls(
            run_id=run.run_id,
            schedule_id=run.schedule_id,
            fire_time=ts_to_dt(run.fire_time),
            job_type=run.job_type,
            queue=run.queue or DEFAULT_QUEUE,
            attempt_hint=run.attempt,
            trace=inject_context() if trace is None else trace,
            enqueued_at_ns=time.time_ns() + int(delay.total_seconds() * 1e9),
            trigger=trigger_name(run.trigger) if run.trigger else "",
        )

    def __post_init__(self) -> None:
        require_run_id(self.run_id)
        if self.fire_time.tzinfo is None:
            raise InvalidArgument("fire_time", "must be timezone-aware (UTC)")
        validate_queue_name(self.queue)

    def to_kwargs(self) -> dict[str, Any]:
        """The JSON-safe keyword arguments the message carries."""
        return {
            "v": FORMAT_VERSION,
            "run_id": self.run_id,
            "schedule_id": self.schedule_id,
            "fire_time": self.fire_time.astimezone(UTC).isoformat(timespec="microseconds"),
            "job_type": self.job_type,
            "queue": self.queue,
            "attempt_hint": self.attempt_hint,
            "trace": dict(self.trace),
            "enqueued_at_ns": self.enqueued_at_ns,
            "trigger": self.trigger,
        }

    def to_message(self) -> dramatiq.Message[Any]:
        """A broker-independent message for the actor of this run's queue."""
        import dramatiq

        return dramatiq.Message(
            queue_name=self.queue,
            actor_name=actor_name_for(self.queue),
            args=(),
            kwargs=self.to_kwargs(),
            options={},
        )

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> RunMessage:
        """Decode what ``to_kwargs`` wrote; ``UndecodableRunMessage`` names the first
        field that is missing or malformed."""
        if not isinstance(kwargs, Mapping):
            raise UndecodableRunMessage(
                "kwargs", f"expected an object, got {type(kwargs).__name__}"
            )
        version = kwargs.get("v")
        if version != FORMAT_VERSION:
            raise UndecodableRunMessage(
                "v", f"format version {version!r} is not the supported {FORMAT_VERSION}"
            )
        run_id = _text(kwargs, "run_id", required=True)
        raw_fire = _text(kwargs, "fire_time", required=True)
        try:
            fire_time = datetime.fromisoformat(raw_fire)
        except ValueError as exc:
            raise UndecodableRunMessage("fire_time", f"{raw_fire!r} is not ISO 8601") from exc
        if fire_time.tzinfo is None:
            raise UndecodableRunMessage("fire_time", f"{raw_fire!r} has no UTC offset")
        trace = kwargs.get("trace", {})
        if not isinstance(trace, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in trace.items()
        ):
            raise UndecodableRunMessage("trace", "expected an object of strings")
        try:
            return cls(
                run_id=run_id,
                schedule_id=_text(kwargs, "schedule_id"),
                fire_time=fire_time.astimezone(UTC),
                job_type=_text(kwargs, "job_type"),
                queue=_text(kwargs, "queue", required=True),
                attempt_hint=_int(kwargs, "attempt_hint"),
                trace=dict(trace),
                enqueued_at_ns=_int(kwargs, "enqueued_at_ns"),
                trigger=_text(kwargs, "trigger"),
            )
        except InvalidArgument as exc:
            raise UndecodableRunMessage(exc.field, exc.rule) from exc


def _text(kwargs: Mapping[str, Any], name: str, *, required: bool = False) -> str:
    value = kwargs.get(name, "")
    if not isinstance(value, str):
        raise UndecodableRunMessage(name, f"expected a string, got {type(value).__name__}")
    if required and not value:
        raise UndecodableRunMessage(name, "missing")
    return value


def _int(kwargs: Mapping[str, Any], name: str) -> int:
    value = kwargs.get(name, 0)
    # bool is an int subclass; a JSON true here is a malformed message, not 1.
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UndecodableRunMessage(name, f"expected a non-negative integer, got {value!r}")
    return value
