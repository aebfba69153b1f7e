"""What the fire loop has done since it started, as the planner's status reports it.
One instance, shared by the loop's parts; written by the loop's thread only."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FireStats:
    fired: int = 0
    catchups: int = 0
    backfills: int = 0
    missed: int = 0
    retries: int = 0
    step_downs: int = 0
    terms: int = 0
    buffered: int = 0
    cancelled: int = 0
    resumed: int = 0
    lost_waits: int = 0  # overlap decisions put off for a run lost in the queue
    last_error: str = ""
