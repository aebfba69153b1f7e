"""Drill hooks of the worker, in a worker started for drills only
(``CRONWAVE_TEST_HOOKS=1``) and off unless ``CRONWAVE_FAULT`` names one.

``worker.stop_before_complete=<attempt>``
    Once an attempt numbered ``<attempt>`` has finished its job body, and before its
    completion is sent, the worker stops its own process group (SIGSTOP), as a paused
    VM or container would stop it at that instant. A drill resumes it (SIGCONT) after
    another worker has taken the run over, to show that the store refuses the
    completion of the superseded attempt and keeps nothing it reports.

``worker.lose_claim_answers=<count>``
    The answers of the worker's first ``<count>`` ``ClaimRuns`` calls that claimed a
    run are dropped once the store has committed them: each call fails
    DEADLINE_EXCEEDED, as one whose deadline passed while a busy store finished it.
    A drill shows that the claims are asked again and answered with the attempts they
    started (``worker.middleware.claim``), so no run gets an attempt its policy did
    not allow.

Why the pause waits for its SIGCONT: a SIGSTOP sent to one's own process is taken by
one thread the kernel picks (the main thread, when it is not running), and only when
that thread runs does it stop the others. Until then the thread that sent it runs on;
on a loaded machine that is long enough to send the completion the drill exists to
hold back (the run then succeeded as attempt 1, and the drill waited for a successor
that never came). So the sending thread does not go on until the process has been
resumed: the SIGCONT, seen through the signal wake-up pipe, tells it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import grpc

from cronwave_core.errors import ConfigurationError, CronwaveError
from cronwave_core.faults import named_items
from cronwave_core.settings import TestHooks
from worker.chain import Delivery, RunMiddleware

log = logging.getLogger("cronwave.worker.drill")

STOP_BEFORE_COMPLETE = "worker.stop_before_complete"
LOSE_CLAIM_ANSWERS = "worker.lose_claim_answers"
_CLAIM_RUNS = "/cronwave.v1.WorkflowStoreService/ClaimRuns"

#: How long a paused drill waits to be resumed before it gives up and says so.
PAUSE_LIMIT = timedelta(minutes=10)


class DrillNotResumed(CronwaveError):
    """A paused drill was not resumed within its limit: the drill's test is gone."""


class GroupPause:
    """Stops this process's group and returns only once it has been resumed.

    Construct it in the main thread: it installs a SIGCONT handler and the signal
    wake-up pipe. The pipe is what tells the pausing thread: the interpreter's C-level
    handler writes to it from whichever thread the kernel gave the SIGCONT, at once,
    while a Python-level handler would run only when the main thread next wakes.
    ``pause`` may be called from any thread."""

    def __init__(self, limit: timedelta = PAUSE_LIMIT) -> None:
        self._limit = limit
        self._read, write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(write, False)
        signal.signal(signal.SIGCONT, lambda _signum, _frame: None)
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        if previous != -1:
            signal.set_wakeup_fd(previous)
            raise ConfigurationError("drill: the signal wake-up pipe is already in use")

    def _drain(self) -> bytes:
        with contextlib.suppress(BlockingIOError):
            return os.read(self._read, 4096)
        return b""

    def pause(self) -> timedelta:
        """SIGSTOP the process group; the time until SIGCONT resumed it.
        ``DrillNotResumed`` past the limit."""
        self._drain()
        start = time.monotonic()
        os.killpg(os.getpgid(0), signal.SIGSTOP)
        deadline = start + self._limit.total_seconds()
        while signal.SIGCONT not in self._drain():
            left = deadline - time.monotonic()
            if left <= 0:
                raise DrillNotResumed(
                    f"drill: the process group was not resumed within {self._limit}"
                )
            select.select([self._read], [], [], left)
        return timedelta(seconds=time.monotonic() - start)


class StopBeforeComplete(RunMiddleware):
    """A middleware of the worker's chain after completion (``worker.chain``): its
    ``before_complete`` runs once the attempt's outcome is decided, just before the
    completion is sent."""

    def __init__(self, attempt: int, group: GroupPause) -> None:
        self._attempt = attempt
        self._group = group

    def before_complete(self, delivery: Delivery) -> None:
        run_id, attempt = delivery.run.run_id, delivery.run.attempt
        if attempt != self._attempt:
            return
        log.warning(
            "drill %s: stopping this worker before completing run %s attempt %d",
            STOP_BEFORE_COMPLETE,
            run_id,
            attempt,
        )
        paused = self._group.pause()
        log.warning(
            "drill %s: resumed after %.3f s; completing run %s",
            STOP_BEFORE_COMPLETE,
            paused.total_seconds(),
            run_id,
        )


def drill_hooks(hooks: TestHooks) -> StopBeforeComplete | None:
    """The drill ``CRONWAVE_FAULT`` names, in a worker started for drills
    (``hooks.enabled``); None otherwise. A malformed value stops start-up
    (``ConfigurationError``). Called in the main thread."""
    if not hooks.enabled:
        return None
    raw = named_items(hooks.fault, f"{STOP_BEFORE_COMPLETE}=1").get(STOP_BEFORE_COMPLETE)
    if raw is None:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigurationError(
            f"CRONWAVE_FAULT: {STOP_BEFORE_COMPLETE} expects an attempt number >= 1, got {raw!r}"
        )
    return StopBeforeComplete(int(raw), GroupPause())


class ClaimAnswerLost(grpc.RpcError):
    """What a ``ClaimRuns`` call whose answer the drill dropped raises."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.DEADLINE_EXCEEDED

    def details(self) -> str:
        return f"Deadline Exceeded (drill {LOSE_CLAIM_ANSWERS}: the answer was dropped)"


class LoseClaimAnswers(grpc.UnaryUnaryClientInterceptor):
    """On the worker's channel to the store: the first ``count`` ``ClaimRuns`` calls
    that claimed a run are made, and their answers dropped."""

    def __init__(self, count: int) -> None:
        self._left = count
        self._lock = threading.Lock()

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        outcome = continuation(client_call_details, request)
        if client_call_details.method != _CLAIM_RUNS or outcome.exception() is not None:
            return outcome
        claimed = [r.claim.run.run_id for r in outcome.result().results if r.claim.claimed]
        with self._lock:
            if not claimed or self._left <= 0:
                return outcome
            self._left -= 1
        log.warning(
            "drill %s: dropping the answer of a ClaimRuns call that claimed %d run(s): %s",
            LOSE_CLAIM_ANSWERS,
            len(claimed),
            ", ".join(claimed),
        )
        raise ClaimAnswerLost()


def drill_channel(hooks: TestHooks, channel: grpc.Channel) -> grpc.Channel:
    """``channel`` (the worker's to the store), with the drill ``CRONWAVE_FAULT`` names
    for it in a worker started for drills; ``channel`` itself otherwise. A malformed
    value stops start-up (``ConfigurationError``)."""
    if not hooks.enabled:
        return channel
    raw = named_items(hooks.fault, f"{LOSE_CLAIM_ANSWERS}=1").get(LOSE_CLAIM_ANSWERS)
    if raw is None:
        return channel
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigurationError(
            f"CRONWAVE_FAULT: {LOSE_CLAIM_ANSWERS} expects a count of calls >= 1, got {raw!r}"
        )
    return grpc.intercept_channel(channel, LoseClaimAnswers(int(raw)))
