"""What an attempt's result asks of the store: complete the run, schedule a retry, or
move it to the dead-letter list. Pure: no gRPC, no clock."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import timedelta

from cronwave import RetryPolicy
from worker.supervisor import AttemptResult, Outcome


class Action(enum.Enum):
    COMPLETE = "complete"  # a terminal state: SUCCEEDED, FAILED, TIMED_OUT or CANCELLED
    RETRY = "retry"  # FAILED with retry_after: PENDING again, due after the delay
    DEAD_LETTER = "dead_letter"  # the retries are spent
    NOTHING = "nothing"  # superseded (a newer attempt's to finish) or released (handed back)


@dataclass(frozen=True)
class Decision:
    action: Action
    outcome: Outcome
    retry_after: timedelta = timedelta(0)
    detail: str = ""


def decide(result: AttemptResult, policy: RetryPolicy, failed_attempt: int) -> Decision:
    """The decision for ``result``; ``failed_attempt`` is the 1-based count of attempts
    that raised, this one included (only meaningful for a FAILED result).

    A FAILED attempt is retried after ``policy.delay(failed_attempt)`` while attempts
    remain; with a non-retryable error the run ends FAILED; otherwise it is dead-lettered.
    TIMED_OUT ends the run: a body that overran its limit is not run again unasked.
    """
    if result.outcome in (Outcome.SUPERSEDED, Outcome.RELEASED):
        return Decision(Action.NOTHING, result.outcome)
    if result.outcome is not Outcome.FAILED:
        return Decision(Action.COMPLETE, result.outcome)
    if not policy.retryable(result.error_types):
        return Decision(Action.COMPLETE, result.outcome, detail="non-retryable error")
    delay = policy.retry_after(failed_attempt, result.error_types)
    if delay is None:
        return Decision(
            Action.DEAD_LETTER,
            result.outcome,
            detail=f"failed {failed_attempt} of {policy.maximum_attempts} allowed attempt(s)",
        )
    return Decision(Action.RETRY, result.outcome, retry_after=delay)
