"""What the store reads and writes, as frozen domain values (no protobuf, no SQL)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from cronwave_core.domain.labels import Labels
from cronwave_core.domain.progress import Progress
from cronwave_core.domain.runs import RunState, Trigger
from cronwave_core.domain.spec import Policy, Spec

# The states a completion may ask for.
COMPLETIONS = frozenset(
    {RunState.SUCCEEDED, RunState.FAILED, RunState.TIMED_OUT, RunState.CANCELLED}
)


# Triggers that come from a planner and so must carry its fencing token.
FENCED_TRIGGERS = frozenset({Trigger.SCHEDULED, Trigger.CATCHUP, Trigger.BACKFILL})
DEFAULT_FENCING_SCOPE = "planner"
DEFAULT_QUEUE = "default"
DEFAULT_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
#: The most items one batch call (RecordRuns, ClaimRuns, ...) may carry.
MAX_BATCH = 1_000


@dataclass(frozen=True)
class NewSchedule:
    """A validated CreateSchedule request."""

    schedule_id: str
    spec: Spec
    policy: Policy
    job_type: str
    payload_json: str
    paused: bool = False
    pause_note: str = ""
    managed_by: str = ""
    labels: Labels = ()


@dataclass(frozen=True)
class ScheduleRecord:
    schedule_id: str
    spec: Spec
    policy: Policy
    job_type: str
    payload_json: str
    paused: bool
    pause_note: str
    deleted: bool
    created_at: datetime
    updated_at: datetime
    revision: int
    managed_by: str = ""
    labels: Labels = ()
    # Only in listings: why part of the row was left out (see ``Schedules.list_schedules``);
    # ``identity_only``: all but its identity was (spec and policy are placeholders).
    withheld: str = ""
    identity_only: bool = False


@dataclass(frozen=True)
class RetrySettings:
    """A job type's retry policy as registered; applying it is the retrying
    component's business, the store only keeps it."""

    initial_interval: timedelta = timedelta(0)
    backoff_coefficient: float = 0.0
    maximum_interval: timedelta = timedelta(0)
    maximum_attempts: int = 0
    non_retryable_errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobTypeRecord:
    name: str
    duration_limit: timedelta
    heartbeat_timeout: timedelta = DEFAULT_HEARTBEAT_TIMEOUT
    retry: RetrySettings = field(default_factory=RetrySettings)
    queue: str = DEFAULT_QUEUE
    priority: int = 0
    financial: bool = False


@dataclass(frozen=True)
class RecordRequest:
    """A validated record of a run (a MISSED slot is recorded by ``slots``)."""

    schedule_id: str
    fire_time: datetime
    trigger: Trigger
    fencing_token: int
    fencing_scope: str = DEFAULT_FENCING_SCOPE
    idempotency_key: str = ""
    queue: str = ""
    trace_id: str = ""
    enqueue: bool = False  # also record the created run's "enqueued" event
    #: A manual run's own payload (JSON object); "": its schedule's.
    payload_json: str = ""


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    schedule_id: str
    fire_time: datetime
    state: RunState
    trigger: Trigger
    job_type: str
    payload_json: str
    attempt: int
    attempt_token: str
    fencing_token: int
    idempotency_key: str
    queue: str
    worker_id: str
    trace_id: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None
    error: str
    result_json: str
    checkpoint_json: str
    due_at: datetime | None = None
    claimed_at: datetime | None = None
    cancel_deadline: datetime | None = None
    cancel_reason: str = ""
    progress: Progress | None = None


@dataclass(frozen=True)
class RunEventRecord:
    seq: int
    run_id: str
    kind: str
    at: datetime
    detail: str
    attempt: int


@dataclass(frozen=True)
class Recorded:
    run: RunRecord
    created: bool


@dataclass(frozen=True)
class Claim:
    run: RunRecord
    claimed: bool
    attempt_token: str
    #: By when the claimed run must have succeeded, when the answer carries it
    #: (``claim_deadlines``); None otherwise.
    deadline_at: datetime | None = None


@dataclass(frozen=True)
class Beat:
    """A heartbeat's answer: the deadline of the next one, and, while a cancel with a
    grace waits for the body (``cancel_grace`` set), how long the body has left and
    why it is cancelled."""

    deadline: datetime
    cancel_grace: timedelta | None = None
    cancel_reason: str = ""


@dataclass(frozen=True)
class Completion:
    run: RunRecord
    changed: bool


@dataclass(frozen=True)
class EventRequest:
    """One AppendRunEvents item: the run event ``kind`` with ``detail``."""

    run_id: str
    kind: str
    detail: str = ""


@dataclass(frozen=True)
class ClaimRequest:
    """One ClaimRuns item: a new attempt of the run for ``worker_id``; ``claim_key``
    (the worker's for this claim, "" = none) lets the claim be asked again after its
    answer was lost and get the attempt it started."""

    run_id: str
    worker_id: str
    claim_key: str = ""


@dataclass(frozen=True)
class BeatRequest:
    """One Heartbeats item: the attempt is alive; ``checkpoint_json`` ("" = unchanged),
    ``body_started_at`` (when its body began, once known) and ``progress`` (None =
    unchanged) ride along."""

    run_id: str
    attempt_token: str
    checkpoint_json: str = ""
    body_started_at: datetime | None = None
    progress: Progress | None = None


@dataclass(frozen=True)
class CompletionRequest:
    """One CompleteRuns item. ``body_started_at``: when the job body began; a
    completion that changes the run then records the run event ``started`` too."""

    run_id: str
    attempt_token: str
    state: RunState
    error: str = ""
    result_json: str = ""
    retry_after: timedelta = timedelta(0)
    body_started_at: datetime | None = None


class StallReason(StrEnum):
    """Why a run needs a new message."""

    NOT_PICKED_UP = "not_picked_up"  # PENDING and due, but no worker claimed it in time
    REPLAYED = "replayed"  # PENDING after a replay; it has no message yet
    HEARTBEAT_LAPSED = "heartbeat_lapsed"  # WAITING/RUNNING, its attempt stopped beating
    QUEUE_LOST = "queue_lost"  # PENDING, and the broker lost the messages it held


@dataclass(frozen=True)
class StalledRun:
    run: RunRecord
    reason: StallReason


@dataclass(frozen=True)
class LostRuns:
    """A page of ``Requeues.requeue_lost_runs``: the runs to enqueue again, and the run id
    the next page starts after ("" when this page was the last)."""

    runs: list[StalledRun]
    next_after_run_id: str


class DeadLetterReason(StrEnum):
    RETRIES_EXHAUSTED = "retries_exhausted"
    UNDECODABLE = "undecodable"
    UNKNOWN_JOB_TYPE = "unknown_job_type"
    UNKNOWN_RUN = "unknown_run"
    REJECTED = "rejected"  # the broker refused it (e.g. no actor for the message)


@dataclass(frozen=True)
class DeadLetterRequest:
    """A validated DeadLetterRun request."""

    run_id: str
    attempt_token: str
    reason: DeadLetterReason
    error: str = ""
    queue: str = ""
    message_json: str = ""


@dataclass(frozen=True)
class DeadLetterRecord:
    id: int
    run_id: str
    reason: str
    error: str
    queue: str
    job_type: str
    attempt: int
    message_json: str
    created_at: datetime
    replayed_at: datetime | None


@dataclass(frozen=True)
class DeadLettered:
    letter: DeadLetterRecord | None  # None: nothing changed
    run: RunRecord | None  # None: the store knows no such run
    changed: bool
