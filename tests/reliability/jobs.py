"""Drill job types for the reliability tests, loaded by the workers under test through
``CRONWAVE_JOB_MODULES=tests.reliability.jobs``: short heartbeat timeouts, a scaled
retry policy, runaway bodies, jobs for the priority pools, and one that stops when its
run is cancelled."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from cronwave import NO_RETRY, JobContext, JobType, NonRetryable, RetryPolicy
from cronwave_core.settings import WorkerSettings

HEARTBEAT_TIMEOUT = timedelta(seconds=1)
#: The lost-claim-answer drill's: short enough that an attempt held by nobody is taken
#: over within seconds, long enough that a loaded machine's heartbeats do not lapse.
CLAIM_DRILL_TIMEOUT = timedelta(seconds=5)
RUNAWAY_LIMIT = timedelta(seconds=1)
#: Scaled retries: 0.2 s, 0.4 s, 0.8 s between four attempts.
SCALED_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=0.2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=4,
    non_retryable_errors=("Declined",),
)
#: One retry, 50 ms after the first failure (the failure-burst test).
ONE_QUICK_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=50),
    backoff_coefficient=1.0,
    maximum_interval=timedelta(milliseconds=50),
    maximum_attempts=2,
    non_retryable_errors=("Declined",),
)


class Flaky(Exception):
    """A failure worth retrying."""


class Declined(Exception):
    """A failure no retry can fix (listed as non-retryable)."""


class CardRefused(NonRetryable):
    """A failure no retry can fix, by its base type alone (listed nowhere)."""


def steps(ctx: JobContext) -> Mapping[str, Any]:
    """``payload["steps"]`` steps of ``payload["step_seconds"]`` each, checkpointing
    after every step; a resumed attempt starts after its checkpoint."""
    total = int(ctx.payload.get("steps", 20))
    pause = float(ctx.payload.get("step_seconds", 0.1))
    resumed_from = int(ctx.checkpoint.get("step", 0))
    for step in range(resumed_from + 1, total + 1):
        time.sleep(pause)
        ctx.heartbeat({"step": step})
    return {"resumed_from": resumed_from, "last_step": total, "attempt": ctx.attempt}


def zombie(ctx: JobContext) -> Mapping[str, Any]:
    """Attempt 1 runs ``payload["first_steps"]`` steps and returns at once (its worker
    is then stopped before completing, by the drill ``worker.stop_before_complete``);
    a later attempt resumes from the checkpoint and runs to ``payload["steps"]``."""
    total = int(ctx.payload.get("steps", 40))
    pause = float(ctx.payload.get("step_seconds", 0.1))
    resumed_from = int(ctx.checkpoint.get("step", 0))
    last = int(ctx.payload.get("first_steps", 3)) if ctx.attempt == 1 else total
    for step in range(resumed_from + 1, last + 1):
        time.sleep(pause)
        ctx.heartbeat({"step": step})
    return {"resumed_from": resumed_from, "last_step": last, "attempt": ctx.attempt}


def gated(ctx: JobContext) -> Mapping[str, Any]:
    """Checkpoints step 1, waits for the file ``payload["gate"]`` to exist (a minute at
    most), then checkpoints step 2: a test opens the gate once it has seen what must
    happen while the body is still running."""
    gate = Path(str(ctx.payload["gate"]))
    ctx.heartbeat({"step": 1})
    for _ in range(6000):
        if gate.exists():
            break
        time.sleep(0.01)
    else:
        raise TimeoutError(f"the gate {gate} was not opened within a minute")
    ctx.heartbeat({"step": 2})
    return {"last_step": 2}


def flaky(ctx: JobContext) -> Mapping[str, Any]:
    """Fails (retryably) until attempt ``payload["succeed_at_attempt"]``; with
    ``payload["declined"]`` fails non-retryably, and with ``payload["refused"]`` raises
    a subclass of ``NonRetryable`` that no policy lists."""
    if ctx.payload.get("declined"):
        raise Declined("card declined")
    if ctx.payload.get("refused"):
        raise CardRefused("card refused")
    if ctx.attempt < int(ctx.payload.get("succeed_at_attempt", 1_000)):
        raise Flaky(f"attempt {ctx.attempt} failed")
    return {"attempt": ctx.attempt}


def fail_then_decline(ctx: JobContext) -> Mapping[str, Any]:
    """Fails retryably on its first attempt and non-retryably on any later one: with
    one retry allowed, its run is retried once and then ends FAILED."""
    if ctx.attempt < 2:
        raise Flaky(f"attempt {ctx.attempt} failed")
    raise Declined(f"attempt {ctx.attempt} declined")


def spin(ctx: JobContext) -> Mapping[str, Any]:
    """A pure-Python busy loop that never ends."""
    n = 0
    while True:
        n += 1


def block(ctx: JobContext) -> Mapping[str, Any]:
    """One blocking sleep in C for an hour."""
    time.sleep(3600)
    return {}


def stubborn(ctx: JobContext) -> Mapping[str, Any]:
    """Ignores SIGTERM, then blocks: only SIGKILL ends it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(3600)
    return {}


def _mark(ctx: JobContext) -> None:
    """With ``payload["mark"]``, append a line to that file (one per body begun)."""
    mark = ctx.payload.get("mark")
    if mark:
        with open(str(mark), "a") as marks:
            marks.write(f"{os.getpid()}\n")


def crash(ctx: JobContext) -> Mapping[str, Any]:
    """The job process dies under the job (as after a segfault in C code); marks its
    begin first (``_mark``)."""
    _mark(ctx)
    os._exit(3)


def marked(ctx: JobContext) -> Mapping[str, Any]:
    """Marks its begin (``_mark``) and ends at once."""
    _mark(ctx)
    return {"pid": os.getpid()}


def nap(ctx: JobContext) -> Mapping[str, Any]:
    """Sleeps ``payload["seconds"]`` (default 0.5): a bulk job."""
    time.sleep(float(ctx.payload.get("seconds", 0.5)))
    return {}


def polite(ctx: JobContext) -> Mapping[str, Any]:
    """Works in 20 ms steps for up to ten minutes, until ``ctx.cancelled``; then
    returns at once, saying it saw the cancel."""
    for _ in range(30_000):
        if ctx.cancelled:
            return {"saw_cancel": True}
        time.sleep(0.02)
    return {"saw_cancel": False}


def job_types(settings: WorkerSettings) -> list[JobType]:
    return [
        JobType(
            "drill.steps",
            steps,
            duration_limit=timedelta(minutes=2),
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
        ),
        JobType(
            "drill.zombie",
            zombie,
            duration_limit=timedelta(minutes=2),
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
        ),
        JobType("drill.gated", gated, duration_limit=timedelta(minutes=2)),
        JobType("drill.flaky", flaky, duration_limit=timedelta(minutes=1), retry=SCALED_RETRY),
        JobType("drill.spin", spin, duration_limit=RUNAWAY_LIMIT),
        JobType("drill.block", block, duration_limit=RUNAWAY_LIMIT),
        JobType("drill.stubborn", stubborn, duration_limit=RUNAWAY_LIMIT),
        JobType("drill.crash", crash, duration_limit=timedelta(minutes=1), retry=SCALED_RETRY),
        JobType("drill.marked", marked, duration_limit=timedelta(minutes=1)),
        JobType("drill.bulk", nap, duration_limit=timedelta(minutes=1), queue="bulk"),
        JobType("drill.polite", polite, duration_limit=timedelta(minutes=15)),
        JobType(
            "drill.burst_retried",
            fail_then_decline,
            duration_limit=timedelta(minutes=1),
            retry=ONE_QUICK_RETRY,
        ),
        JobType(
            "drill.burst_unretried", flaky, duration_limit=timedelta(minutes=1), retry=NO_RETRY
        ),
        JobType(
            "drill.once",
            flaky,
            duration_limit=timedelta(minutes=1),
            heartbeat_timeout=CLAIM_DRILL_TIMEOUT,
            retry=NO_RETRY,
        ),
    ]
