"""The worker's side of the result and checkpoint limits: a checkpoint save over the
limit raises in the job, naming it; a result over the limit ends the run FAILED, not
retried; completions go to the store in batches that stay under 4 MiB."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime

import pytest

from cronwave import Checkpoint, InvalidArgument, RetryPolicy
from cronwave_core.batching import Coalescer
from cronwave_core.limits import DEFAULT_LIMITS, MIB
from cronwave_core.telemetry.vocabulary import Hop
from worker.middleware.completion import bounded
from worker.outcome import Action, decide
from worker.run_context import job_context
from worker.supervisor import AttemptResult, Outcome

LIMIT = DEFAULT_LIMITS.checkpoint_bytes


def _blob(size: int) -> dict[str, str]:
    """A JSON object whose ``json.dumps`` is exactly ``size`` bytes."""
    return {"blob": "x" * (size - len(json.dumps({"blob": ""})))}


def _context(reported: list[object]):
    return job_context(
        run_id="run_1",
        schedule_id="s",
        fire_time=datetime(2030, 1, 1, tzinfo=UTC),
        attempt=1,
        payload={},
        checkpoint={"step": 1},
        checkpoint_bytes=LIMIT,
        job_type="job",
        on_heartbeat=reported.append,
        is_cancelled=lambda: False,
        on_progress=reported.append,
    )


def test_a_checkpoint_over_the_limit_raises_in_the_job_naming_the_limit() -> None:
    # Given a job's context
    reported: list[object] = []
    ctx = _context(reported)

    # When the job saves 5 MiB, or beats with it
    with pytest.raises(InvalidArgument) as saved:
        ctx.checkpoint.save(_blob(5 * MIB))
    with pytest.raises(InvalidArgument) as beat:
        ctx.heartbeat(_blob(5 * MIB))

    # Then both raise naming the limit and its setting, nothing is sent, and the
    # checkpoint is still the one it had
    for info in (saved, beat):
        assert info.value.message == (
            f"checkpoint: at most {LIMIT} bytes of JSON (CRONWAVE_MAX_CHECKPOINT_BYTES), "
            f"got {5 * MIB}; save where the work is (ids, offsets), not the work itself"
        )
    assert reported == [] and ctx.checkpoint.load() == {"step": 1}


def test_a_checkpoint_at_the_limit_is_saved() -> None:
    reported: list[object] = []
    ctx = _context(reported)

    ctx.checkpoint.save(_blob(LIMIT))

    assert len(reported) == 1 and len(json.dumps(reported[0])) == LIMIT


def test_a_checkpoint_keeps_a_smaller_limit_it_is_given() -> None:
    checkpoint = Checkpoint({}, limit_bytes=2_048)

    with pytest.raises(InvalidArgument, match="at most 2048 bytes"):
        checkpoint.save(_blob(2_049))


def test_a_result_over_the_limit_fails_the_run_and_is_not_retried() -> None:
    # Given a success whose result is 5 MiB, under a policy that retries failures
    limit = DEFAULT_LIMITS.result_bytes
    success = AttemptResult(Outcome.SUCCEEDED, result=_blob(5 * MIB), body_started_ns=1)
    policy = RetryPolicy(maximum_attempts=5)

    # When the worker bounds it and decides
    result = bounded(success, limit)
    decision = decide(result, policy, 1)

    # Then the run ends FAILED with the limit named, without a result, and no retry
    assert result.outcome is Outcome.FAILED and result.result == {}
    assert result.error == (
        f"ResultTooLarge: result: at most {limit} bytes of JSON (CRONWAVE_MAX_RESULT_BYTES), "
        f"got {5 * MIB}; return a summary and keep the data elsewhere"
    )
    assert decision.action is Action.COMPLETE and decision.outcome is Outcome.FAILED
    assert result.body_started_ns == 1


def test_a_result_at_the_limit_succeeds() -> None:
    success = AttemptResult(Outcome.SUCCEEDED, result=_blob(DEFAULT_LIMITS.result_bytes))

    assert bounded(success, DEFAULT_LIMITS.result_bytes) is success


def test_a_batch_ends_before_the_request_that_would_take_it_past_its_bytes() -> None:
    # Given a coalescer bounded to 10 bytes a batch, whose sender is held busy
    batches: list[list[int]] = []
    sending, release = threading.Event(), threading.Event()

    def send(requests: list[int]) -> list[int]:
        sending.set()
        release.wait(5)
        batches.append(list(requests))
        return requests

    coalescer: Coalescer[int, int] = Coalescer(
        "test", send, lambda r, _tp: r, hop=Hop.COMPLETE, max_bytes=10, size=lambda r: r
    )
    first = threading.Thread(target=coalescer.call, args=(1,))
    first.start()
    assert sending.wait(5)  # the first call is on its way

    # When requests of 4, 4, 4 and 20 bytes queue up meanwhile
    threads = [threading.Thread(target=coalescer.call, args=(n,)) for n in (4, 4, 4, 20)]
    for thread in threads:
        thread.start()
        thread.join(timeout=0.05)
    release.set()
    for thread in [first, *threads]:
        thread.join(timeout=5)
    coalescer.close()

    # Then no batch goes past 10 bytes unless it holds one request alone
    assert sorted(n for batch in batches for n in batch) == [1, 4, 4, 4, 20]
    for batch in batches:
        assert sum(batch) <= 10 or len(batch) == 1, batches


def test_a_byte_bound_needs_a_size() -> None:
    with pytest.raises(ValueError, match="max_bytes needs size"):
        Coalescer("test", lambda r: r, lambda r, _tp: r, hop=Hop.COMPLETE, max_bytes=10)
