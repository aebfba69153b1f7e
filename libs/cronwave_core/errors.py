"""One root error for cronwave, the gRPC status each kind maps to, and the reason
each kind crosses the wire under.

Logic modules raise these; the server bootstrap turns them into a gRPC status with
the message unchanged and, for a kind in ``BY_REASON``, its reason and attributes
(``cronwave_core.status``); the SDK turns that status back into the same class with
the same attributes. A kind's attributes are its annotated instance attributes; a
``field`` class variable names the request field it is about.

A server's message says what was wrong and what to do in words any caller
understands; what to type to do it (a flag, a keyword) is the caller's surface's to
say: the SDK's ``Client`` and the CLI each append their own hint (``hinted``), so an
SDK caller is never told a flag, nor a CLI user a keyword.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

#: The surfaces a caller reaches cronwave through, by the name ``hints`` keys them by.
CLI = "cli"
SDK = "sdk"


class CronwaveError(Exception):
    """Root of every error cronwave raises on purpose."""

    status = "INTERNAL"
    message: str
    #: What to type to do what the message says, by surface (``CLI``: commands and
    #: flags; ``SDK``: calls and keywords): a template of the error's attributes.
    hints: ClassVar[Mapping[str, str]] = {}

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def hinted(self, surface: str) -> Self:
        """This error, its message followed by ``surface``'s hint (once; unchanged for a
        kind with no hint there). The surface calls it where the error reaches its
        caller: a server never does, as it cannot know who called."""
        template = self.hints.get(surface)
        if not template:
            return self
        try:
            hint = template.format_map(vars(self))
        except (AttributeError, IndexError, KeyError):  # an attribute it lacks: no hint
            return self
        if not self.message.endswith(hint):
            self.message = f"{self.message}; {hint}"
            self.args = (self.message,)
        return self


class InvalidArgument(CronwaveError):
    """A request field breaks a rule; nothing was written."""

    status = "INVALID_ARGUMENT"
    field: str
    rule: str

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


class NotFound(CronwaveError):
    status = "NOT_FOUND"


class ScheduleNotFound(NotFound):
    field: ClassVar[str] = "schedule_id"
    hints = {
        CLI: "`cronwave schedule list` shows the ones that exist",
        SDK: "Client.list_schedules() returns the ones that exist",
    }
    schedule_id: str

    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"schedule_id: no schedule '{schedule_id}'")
        self.schedule_id = schedule_id


class RunNotFound(NotFound):
    field: ClassVar[str] = "run_id"
    hints = {
        CLI: "`cronwave runs list` shows recent runs",
        SDK: "Client.list_runs() returns recent runs",
    }
    run_id: str

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run_id: no run '{run_id}'")
        self.run_id = run_id


class AlreadyExists(CronwaveError):
    status = "ALREADY_EXISTS"


class ScheduleExists(AlreadyExists):
    field: ClassVar[str] = "schedule_id"
    hints = {
        CLI: "or create with --if-absent to keep it as it is",
        SDK: "or create_schedule(..., if_absent=True) to keep it as it is",
    }
    schedule_id: str

    def __init__(self, schedule_id: str) -> None:
        super().__init__(
            f"schedule_id: a schedule '{schedule_id}' already exists; "
            "delete it first or choose another id"
        )
        self.schedule_id = schedule_id


class FailedPrecondition(CronwaveError):
    status = "FAILED_PRECONDITION"


class ScheduleBusy(FailedPrecondition):
    """A delete of a schedule whose runs are still in flight (PENDING, WAITING or RUNNING),
    without force: deleting it would leave those runs going with no schedule."""

    field: ClassVar[str] = "schedule_id"
    hints = {
        CLI: "`cronwave runs cancel {run_ids[0]}` cancels one, "
        "`cronwave schedule delete {schedule_id} --force` all of them and the schedule",
        SDK: "Client.cancel_run('{run_ids[0]}') cancels one, "
        "Client.delete_schedule('{schedule_id}', force=True) all of them and the schedule",
    }
    schedule_id: str
    run_ids: list[str]

    def __init__(self, schedule_id: str, runs: list[tuple[str, str]]) -> None:
        shown = ", ".join(f"{run_id} ({state})" for run_id, state in runs[:5])
        more = f" and {len(runs) - 5} more" if len(runs) > 5 else ""
        super().__init__(
            f"schedule_id: schedule '{schedule_id}' has {len(runs)} run(s) in flight: "
            f"{shown}{more}; wait for them to end, cancel them, or delete it with force, "
            "which cancels them"
        )
        self.schedule_id = schedule_id
        self.run_ids = [run_id for run_id, _ in runs]


class SchedulePaused(FailedPrecondition):
    """A scheduled, catch-up or backfill run of a paused schedule: its fires are not
    recorded (a planner that had not heard of the pause records the slot MISSED,
    reason paused); a person may still trigger it."""

    field: ClassVar[str] = "schedule_id"
    hints = {
        CLI: "`cronwave schedule resume {schedule_id}` resumes it",
        SDK: "Client.resume_schedule('{schedule_id}') resumes it",
    }
    schedule_id: str

    def __init__(self, schedule_id: str) -> None:
        super().__init__(
            f"schedule_id: schedule '{schedule_id}' is paused, so its fires are not recorded "
            "(a planner records them MISSED, reason paused); resume it first; a person may "
            "still trigger it"
        )
        self.schedule_id = schedule_id


class StaleFencingToken(FailedPrecondition):
    """A write carried a fencing token older than the newest the store has seen:
    it comes from a planner that lost its lease and must not be applied."""

    field: ClassVar[str] = "fencing_token"
    scope: str
    token: int
    newest: int

    def __init__(self, scope: str, token: int, newest: int) -> None:
        super().__init__(
            f"fencing_token: {token} is older than {newest}, the newest seen for scope "
            f"'{scope}'; this planner is no longer the leader and must campaign again"
        )
        self.scope = scope
        self.token = token
        self.newest = newest


class UnissuedFencingToken(FailedPrecondition):
    """A write carried a fencing token the store never issued for its scope (newer
    than the newest issued, or a scope no lease was ever granted for): only a token
    leader-election obtained from the store, when it granted a lease, fences a write."""

    field: ClassVar[str] = "fencing_token"
    scope: str
    token: int

    def __init__(self, scope: str, token: int, *, scope_known: bool) -> None:
        if scope_known:
            why = f"{token} was never issued for scope '{scope}'"
        else:
            why = f"no fencing token was ever issued for scope '{scope}'"
        super().__init__(
            f"fencing_token: {why}; only the token leader-election granted with the "
            "lease fences a write (campaign for the lease and use its token)"
        )
        self.scope = scope
        self.token = token


class StaleAttempt(FailedPrecondition):
    """A write came with a token that is not the run's current attempt token (a zombie
    worker's, superseded by a newer attempt; one handed back; or one never issued): it
    is refused so the run keeps one writer. The message says "superseded by a newer
    attempt" only when the run has had one (``attempts`` > 1), and never names the
    current token: only the attempt that claimed the run knows it."""

    field: ClassVar[str] = "attempt_token"
    run_id: str
    attempts: int

    def __init__(self, run_id: str, attempts: int, state: str) -> None:
        head = f"attempt_token: not the current attempt of run '{run_id}'"
        if attempts < 1:
            why = (
                f": the run ({state}) has never been claimed, so no attempt token is valid "
                "yet; claim it first"
            )
        elif attempts == 1:
            why = (
                ": the token is not the run's current attempt token, and no newer attempt "
                f"exists (the run is {state}, on its first attempt); use the attempt_token "
                "its claim returned, or stop working on the run"
            )
        else:
            why = (
                f" (superseded by a newer attempt: the run is {state}, on attempt "
                f"{attempts}); this worker must stop working on the run"
            )
        super().__init__(head + why)
        self.run_id = run_id
        self.attempts = attempts


class RunNotEnqueued(FailedPrecondition):
    """A claim of a PENDING run that has no message on any queue (recorded without
    one, or replayed and not yet sent again): only a run's queued message is claimed,
    so a worker takes a run it was sent, never one it picked by id. The dispatcher's
    sweeper sends the run's message."""

    field: ClassVar[str] = "run_id"
    run_id: str

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"run_id: run '{run_id}' has no message on any queue yet (recorded without "
            "one, or replayed and not yet sent again); only a run's queued message is "
            "claimed: the dispatcher's sweeper sends it, then a worker of its queue claims it"
        )
        self.run_id = run_id


class Unavailable(CronwaveError):
    status = "UNAVAILABLE"


class Unimplemented(CronwaveError):
    """The RPC exists in the API but not in this process."""

    status = "UNIMPLEMENTED"


class Unauthenticated(CronwaveError):
    """The caller could not be identified: no usable certificate role and no valid
    API key."""

    status = "UNAUTHENTICATED"


class PermissionDenied(CronwaveError):
    """The caller is known but the RPC's rule does not allow it; the message names
    the identity and the permission missing."""

    status = "PERMISSION_DENIED"


class QueueNotServed(PermissionDenied):
    """A claim of a run enqueued to a queue the claiming worker does not consume (the
    ``queues`` it named): a worker takes only the runs sent to its queues."""

    field: ClassVar[str] = "queues"
    run_id: str
    queue: str

    def __init__(self, run_id: str, queue: str, queues: list[str]) -> None:
        super().__init__(
            f"queues: run '{run_id}' was enqueued to queue '{queue}', which this worker "
            f"does not consume (it named {sorted(queues)}); only a worker of queue "
            f"'{queue}' claims it"
        )
        self.run_id = run_id
        self.queue = queue


class LeaseHeldByAnother(FailedPrecondition):
    """A Renew or Resign named a candidate that does not hold the scope's lease: only
    the holder keeps a lease alive or gives it up."""

    field: ClassVar[str] = "candidate"
    scope: str
    candidate: str
    holder: str

    def __init__(self, scope: str, candidate: str, holder: str) -> None:
        super().__init__(
            f"candidate: '{candidate}' does not hold the lease of scope '{scope}' "
            f"('{holder}' does); only the holder renews or resigns it, so stop acting "
            "as leader and campaign again"
        )
        self.scope = scope
        self.candidate = candidate
        self.holder = holder


class LeaseOwnedByAnother(PermissionDenied):
    """A Renew or Resign named the holder of a lease but came from another identity
    than the one that campaigned for it: a lease is its campaigner's alone."""

    field: ClassVar[str] = "candidate"
    scope: str
    candidate: str

    def __init__(self, scope: str, candidate: str) -> None:
        super().__init__(
            f"candidate: '{candidate}' holds the lease of scope '{scope}' for another "
            "identity than this caller's; only the identity (certificate) that "
            "campaigned for a lease renews or resigns it"
        )
        self.scope = scope
        self.candidate = candidate


class ConfigurationError(CronwaveError):
    """A setting is missing or malformed; the process does not start."""

    status = "FAILED_PRECONDITION"


#: The one table of error kinds on the wire: each kind by the reason it travels under
#: (``google.rpc.ErrorInfo.reason``, domain ``cronwave``). The server sends a kind's
#: reason, the caller builds the class listed for it. A reason is a stable name:
#: renaming a class keeps its reason, and a reason is never reused. An error of a
#: class not listed travels as its nearest listed ancestor of the same status (an
#: ``UndecodableRequest`` as an ``InvalidArgument``); the root, and a class with no
#: such ancestor, as its status code alone. A base kind's reason is its status's
#: name, so a status that comes with no kind (from gRPC itself, or details too large)
#: maps to that base kind (``base_kind``).
BY_REASON: dict[str, type[CronwaveError]] = {
    "INVALID_ARGUMENT": InvalidArgument,
    "NOT_FOUND": NotFound,
    "SCHEDULE_NOT_FOUND": ScheduleNotFound,
    "RUN_NOT_FOUND": RunNotFound,
    "ALREADY_EXISTS": AlreadyExists,
    "SCHEDULE_EXISTS": ScheduleExists,
    "FAILED_PRECONDITION": FailedPrecondition,
    "SCHEDULE_BUSY": ScheduleBusy,
    "SCHEDULE_PAUSED": SchedulePaused,
    "STALE_FENCING_TOKEN": StaleFencingToken,
    "UNISSUED_FENCING_TOKEN": UnissuedFencingToken,
    "STALE_ATTEMPT": StaleAttempt,
    "RUN_NOT_ENQUEUED": RunNotEnqueued,
    "LEASE_HELD_BY_ANOTHER": LeaseHeldByAnother,
    "UNAVAILABLE": Unavailable,
    "UNIMPLEMENTED": Unimplemented,
    "UNAUTHENTICATED": Unauthenticated,
    "PERMISSION_DENIED": PermissionDenied,
    "LEASE_OWNED_BY_ANOTHER": LeaseOwnedByAnother,
    "QUEUE_NOT_SERVED": QueueNotServed,
    "CONFIGURATION_ERROR": ConfigurationError,
}

_REASONS = {cls: reason for reason, cls in BY_REASON.items()}


def base_kind(status: str) -> type[CronwaveError]:
    """The class a status with no kind on the wire stands for: the kind whose reason
    is the status's own name (``NOT_FOUND``: ``NotFound``), else the root."""
    cls = BY_REASON.get(status)
    return cls if cls is not None and cls.status == status else CronwaveError


def kind_of(error: CronwaveError) -> tuple[str, type[CronwaveError]] | None:
    """The reason ``error`` travels under and the class it stands for on the wire:
    its own, else its nearest ancestor in ``BY_REASON`` with the same status (None:
    it travels as its status code alone)."""
    for ancestor in type(error).__mro__:
        reason = _REASONS.get(ancestor)
        if reason is not None and BY_REASON[reason].status == error.status:
            return reason, BY_REASON[reason]
    return None
