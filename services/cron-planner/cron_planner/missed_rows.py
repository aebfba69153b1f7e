"""MISSED rows (and placeholders, see ``work``) on their way to the store.

A row is queued with the fencing token of the term that decided it and sent on the
loop's first step at or after its fire time, at most ``ROWS_A_STEP`` rows of one token
a step (a backlog takes the loop one call a step, between its fires): the store records a
slot MISSED only once it is due (a fire decided ahead of its instant -- the dispatch
lead -- and then skipped, paused or given up waits for it). A placeholder does not
wait: a fire decided ahead and put off (its start failed) stands in the store from the
next step on (up to ``PLACEHOLDER_AHEAD`` before its fire time), so that when the term
ends before the fire starts, the next term -- here or on another planner -- resumes
it, even if a later slot of its schedule was recorded first and the store's newest
fire time has passed it.

A term of this planner that follows its own last one with nobody between (a lease
renewed late, or Redis lost and the lease granted again: the next token) sends the
rows still queued under the new token (``retoken``): the decisions stand, and under
the old token the store would refuse them as stale once the new term has written.

While the store is away a row is retried with the loop's backoff; a row the store
refuses for good is said in the error log, the one place it is then kept. Not
thread-safe: the fire loop owns it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from cron_planner.backoff import Backoff
from cron_planner.fire_stats import FireStats
from cron_planner.ports import Ledger
from cron_planner.work import Missed, iso
from cronwave_core.domain.runs import PLACEHOLDER_AHEAD
from cronwave_core.errors import CronwaveError, Unavailable

log = logging.getLogger("cronwave.planner.fire")

#: At most this many rows go to the store on one step of the fire loop (one call: the
#: store's client sends up to 500 a call).
ROWS_A_STEP = 500


@dataclass
class _Record:
    """A row on its way to the store: retried while the store is away."""

    missed: Missed
    token: int
    next_try: datetime
    attempts: int = 0


class MissedRows:
    def __init__(self, ledger: Ledger, backoff: Backoff, stats: FireStats) -> None:
        self._ledger = ledger
        self._backoff = backoff
        self._stats = stats
        self._records: list[_Record] = []

    def __len__(self) -> int:
        return len(self._records)

    def due(self, now: datetime) -> int:
        """How many rows are to be sent by ``now`` (the others wait for their slot)."""
        return sum(r.next_try <= now for r in self._records)

    def next_try(self) -> datetime | None:
        """When the earliest row waiting is due to be sent; None when none waits."""
        return min((r.next_try for r in self._records), default=None)

    def queue(self, missed: Sequence[Missed], token: int, now: datetime) -> None:
        """Queue rows decided under ``token``: a placeholder to go at once, a final
        reason once its slot's fire time has come."""
        for m in missed:
            send_at = m.fire_time
            if m.placeholder:
                send_at -= PLACEHOLDER_AHEAD
            else:
                self._stats.missed += 1
            self._records.append(_Record(m, token, max(now, send_at)))

    def retoken(self, token: int) -> list[Missed]:
        """This planner's new term (``token``): the rows still queued under the token
        just before it go under this one. Returns them: the store has not recorded
        them, so the new term cannot read their placeholders there. Tokens are issued
        one more than any before, so that token was this planner's and nobody led in
        between; rows of an older token stay under it (another leader may have decided
        their slots since, and the store refuses them as stale once it has written)."""
        moved = []
        for r in self._records:
            if r.token == token - 1:
                r.token = token
                moved.append(r.missed)
        return moved

    def flush(self, now: datetime) -> None:
        """Send rows whose turn has come: at most ``ROWS_A_STEP`` of one token, the
        longest waiting first, so that a backlog of rows (a stall past which thousands
        of slots were decided) takes the loop a call a step and never holds its firing
        for longer; the rest go on the next steps."""
        ready = sorted((r for r in self._records if r.next_try <= now), key=lambda r: r.next_try)
        if not ready:
            return
        token = ready[0].token
        batch = [r for r in ready if r.token == token][:ROWS_A_STEP]
        sent = {id(r) for r in batch}
        try:
            unknown = self._ledger.record_missed([r.missed for r in batch], token)
        except Unavailable as exc:
            for r in batch:
                r.attempts += 1
                r.next_try = now + self._backoff.delay(r.attempts)
            log.warning("%d MISSED rows not recorded yet (%s)", len(batch), exc)
            return
        except CronwaveError as exc:
            for r in batch:
                log.error(
                    "MISSED %s@%s could not be recorded and is only in this log: %s (%s)",
                    r.missed.schedule_id,
                    iso(r.missed.fire_time),
                    r.missed.reason,
                    exc,
                )
        else:
            if unknown:
                log.info("MISSED rows of deleted schedules left out: %s", ", ".join(unknown))
        self._records = [r for r in self._records if id(r) not in sent]
