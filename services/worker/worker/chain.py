"""A run message's way through the worker, as a chain of middleware.

Each concern of handling a message is one ``RunMiddleware``: a class whose hooks do
nothing unless it overrides them (dramatiq's middleware style). A message goes
through four phases, and each phase calls its hooks on the whole chain:

- ``pickup``   the message was taken from its queue (decoded, not early, not draining);
- ``claim``    the store is asked for the run (one live attempt per run);
- ``execute``  the job body runs (the chain's ``execute`` step, between the hooks);
- ``complete`` the attempt's outcome goes to the store.

When the delivery is over (its attempt completed, handed back or dead-lettered, or
nothing claimed), ``after_delivery`` hooks are called, in reverse order: for a run held
until its fire time, that is after its attempt, in another thread.

``before_<phase>`` hooks are called in the declared order, ``after_<phase>`` hooks in
reverse, so each middleware wraps the ones after it as a ``with`` block would: what
the first one opens, it closes last. The declared order (``ORDER``) is

1. tracing: outermost, so every span the others draw sits in the message's trace
   context and the spans of waiting (pickup, hold) and of the body (execute) cover
   everything the inner middleware do in those phases;
2. metrics: the attempt's fire lateness and body duration, once the body returned;
3. dead-lettering: before the steps, so a poison message or run any later hook finds
   (``Poison``) reaches the store's dead-letter list;
4. claim: the run must be this worker's before anything is run for it;
5. heartbeat and 6. time limit: what the body runs under (the store's heartbeat, the
   job type's duration limit), set before the execute step;
7. completion: innermost, it acts on the attempt's outcome last of all.

Test hooks (latency faults, drills; ``worker.middleware.faults``) go after
completion: their delays fall inside the spans and steps of the chain, and a drill
runs where completion is about to send.

A hook ends the delivery by raising ``Skip`` (nothing more to do: the message is
acknowledged) or ``Poison`` (likewise, after every ``on_poison`` hook has seen it);
the rest of the phase is not called, and the contexts its hooks entered
(``Delivery.phase``) are closed. Any other exception propagates to dramatiq (the
message is rejected; see ``worker.dead_letters``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cronwave_proto.v1 import common_pb2
from opentelemetry.trace import INVALID_SPAN, INVALID_SPAN_CONTEXT, Span, SpanContext

from cronwave import JobType
from cronwave_core.convert import ts_to_dt
from cronwave_core.domain.progress import Progress
from cronwave_core.queueing import RunMessage
from worker.cancellation import CancelSignal
from worker.draining import AttemptStop
from worker.liveness import Lease
from worker.outcome import Decision
from worker.supervisor import AttemptResult, BeatResult

PHASES = ("pickup", "claim", "execute", "complete")


class Skip(Exception):
    """Raised by a hook: this delivery has nothing more to do."""


class Poison(Exception):
    """Raised by a hook: the message or its run cannot be used here, for ``reason``."""

    def __init__(
        self,
        reason: str,
        error: str,
        *,
        run_id: str = "",
        attempt_token: str = "",
        queue: str = "",
        message_json: str = "",
    ) -> None:
        super().__init__(f"{reason}: {error}")
        self.reason = reason
        self.error = error
        self.run_id = run_id
        self.attempt_token = attempt_token
        self.queue = queue
        self.message_json = message_json
        #: The run as the store left it when its dead letter ended it (dead-lettering).
        self.ended_run: common_pb2.Run | None = None


@dataclass
class Delivery:
    """One message on its way through the chain; hooks read and fill it."""

    message: RunMessage
    stop: AttemptStop
    #: Contexts held for the whole delivery (the message's trace context).
    stack: ExitStack = field(default_factory=ExitStack)
    #: Contexts held for the current phase (its spans); closed when the phase ends.
    phase: ExitStack = field(default_factory=ExitStack)
    #: The run's attributes, for every span drawn for it.
    attrs: dict[str, Any] = field(default_factory=dict)
    #: More attributes of the pickup span (a fault that delayed the pickup).
    pickup_marks: dict[str, Any] = field(default_factory=dict)
    #: The span of the current phase's step, when one is open.
    span: Span = INVALID_SPAN
    #: The span that queued the message (tracing links the run's worker spans to it).
    sender: SpanContext = INVALID_SPAN_CONTEXT
    #: When the attempt's span began (ns since the epoch; 0: no attempt's span).
    attempt_began_ns: int = 0
    # Filled by claim
    run: common_pb2.Run = field(default_factory=common_pb2.Run)
    attempt_token: str = ""
    job_type: JobType | None = None
    #: By when the run must have succeeded, when the claim's answer said (a run not
    #: sampled whose schedule has a deadline); None otherwise.
    deadline_at: datetime | None = None
    # What the body runs under, filled before the execute step
    beat: Callable[[str], BeatResult] | None = None
    #: Tells the store when the body began (ns since the epoch), while it runs.
    report_start: Callable[[int], BeatResult] | None = None
    #: Hands the body's progress (``JobContext.progress``) to the next heartbeat.
    report_progress: Callable[[Progress], None] | None = None
    #: Set when the store asks for the run's cancel; read by the body's supervisor.
    cancel: CancelSignal | None = None
    #: The attempt's place in the worker's heartbeats (``worker.liveness``).
    lease: Lease | None = None
    heartbeat_interval: timedelta | None = None
    duration_limit: timedelta | None = None
    kill_grace: timedelta | None = None
    # Filled by the execute step and by completion
    result: AttemptResult | None = None
    decision: Decision | None = None
    #: The run as the store left it when this delivery's completion (or dead letter)
    #: ended it; None while it has not, or when another call did.
    ended_run: common_pb2.Run | None = None
    #: The poison that ended the delivery, once every ``on_poison`` hook has seen it.
    poison: Poison | None = None

    def start_recorded(self) -> bool:
        """Whether the store has the body's start of this attempt already: a heartbeat
        call carrying it was answered (the lease knows; without one, the supervisor)."""
        if self.lease is not None:
            return self.lease.start_recorded
        return self.result is not None and self.result.start_recorded

    @property
    def fire_time(self) -> datetime:
        """The claimed run's fire time (the message's before the claim)."""
        return ts_to_dt(self.run.fire_time) if self.run.run_id else self.message.fire_time


class RunMiddleware:
    """A concern of handling run messages; every hook does nothing unless overridden.
    See the module's docstring for the phases and the order hooks are called in."""

    def before_pickup(self, delivery: Delivery) -> None: ...
    def after_pickup(self, delivery: Delivery) -> None: ...
    def before_claim(self, delivery: Delivery) -> None: ...
    def after_claim(self, delivery: Delivery) -> None: ...
    def before_execute(self, delivery: Delivery) -> None: ...
    def after_execute(self, delivery: Delivery) -> None: ...
    def before_complete(self, delivery: Delivery) -> None: ...
    def after_complete(self, delivery: Delivery) -> None: ...

    def after_delivery(self, delivery: Delivery) -> None:
        """The delivery is over (see the module's docstring); never raises."""

    def on_poison(self, poison: Poison) -> None:
        """A hook raised ``Poison``, or the message could not be decoded."""

    def close(self) -> None:
        """The worker is stopping: send what is still queued, take nothing new."""


class Chain:
    """``middleware`` in their declared order (see the module's docstring)."""

    def __init__(
        self,
        middleware: Sequence[RunMiddleware],
        execute: Callable[[Delivery], AttemptResult],
    ) -> None:
        self.middleware = tuple(middleware)
        self._execute = execute
        self._reversed = tuple(reversed(self.middleware))

    def find(self, kind: type[Any]) -> Any:
        """The chain's middleware of ``kind``; LookupError names it when there is none."""
        for middleware in self.middleware:
            if isinstance(middleware, kind):
                return middleware
        raise LookupError(f"no {kind.__name__} in the worker's middleware chain")

    def take(self, delivery: Delivery) -> bool:
        """The pickup and claim phases; True when the run is claimed and its attempt
        is to run (``attempt``, now or later). The caller holds ``delivery.stack``
        open until then."""
        with self._ending(delivery):
            self._phase("pickup", delivery)
            self._phase("claim", delivery)
            return True
        return False

    def attempt(self, delivery: Delivery) -> None:
        """The execute and complete phases of a claimed run."""
        with self._ending(delivery):
            self._phase("execute", delivery, step=True)
            self._phase("complete", delivery)

    def finish(self, delivery: Delivery) -> None:
        """The delivery is over: every ``after_delivery`` hook, in reverse order."""
        for middleware in self._reversed:
            middleware.after_delivery(delivery)

    def poisoned(self, poison: Poison) -> None:
        for middleware in self.middleware:
            middleware.on_poison(poison)

    def close(self) -> None:
        for middleware in self.middleware:
            middleware.close()

    @contextmanager
    def _ending(self, delivery: Delivery) -> Iterator[None]:
        try:
            yield
        except Skip:
            pass
        except Poison as poison:
            self.poisoned(poison)
            delivery.poison = poison

    def _phase(self, name: str, delivery: Delivery, *, step: bool = False) -> None:
        before = f"before_{name}"
        after = f"after_{name}"
        delivery.phase = ExitStack()
        with delivery.phase:
            try:
                for middleware in self.middleware:
                    getattr(middleware, before)(delivery)
                if step:
                    delivery.result = self._execute(delivery)
                for middleware in self._reversed:
                    getattr(middleware, after)(delivery)
            except (Skip, Poison):
                delivery.phase.close()  # the phase's spans end as they are, not as errors
                raise
            finally:
                delivery.span = INVALID_SPAN
