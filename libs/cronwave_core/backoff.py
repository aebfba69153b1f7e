"""Every wait between a failed try and the next: tenacity's exponential wait.

A loop that sleeps between tries runs under ``tenacity.Retrying`` with ``exponential``
as its wait (the worker's store calls, the planner's schedule feed, the billing job's
gateway calls, the store's webhook deliveries). A loop that must not sleep asks for the
n-th wait with ``nth_wait`` and schedules its next try: the planner's fire loop serves
other fires meanwhile, and a job's retry is a later dispatch of its run. Both kinds
thus share one formula, ``initial * multiplier ** (n - 1)`` at most ``maximum`` after
the n-th failed try.
"""

from __future__ import annotations

from datetime import timedelta

from tenacity import RetryCallState, Retrying, wait_exponential
from tenacity.wait import wait_base

# ``nth_wait`` asks a wait strategy as tenacity does, with a call state of its own.
_SCHEDULED = Retrying()


def exponential(
    initial: timedelta, maximum: timedelta, multiplier: float = 2.0
) -> wait_exponential:
    """``initial`` after the first failed try, ``multiplier`` times more after each
    next one, never more than ``maximum``."""
    return wait_exponential(
        multiplier=initial.total_seconds(), max=maximum.total_seconds(), exp_base=multiplier
    )


def nth_wait(wait: wait_base, attempt: int) -> timedelta:
    """The wait ``wait`` gives after failed try number ``attempt`` (1-based), for a
    loop that schedules its next try instead of sleeping."""
    state = RetryCallState(_SCHEDULED, None, (), {})
    state.attempt_number = attempt
    return timedelta(seconds=wait(state))
