"""The outbox relay: resumes the webhook deliveries nobody is sending.

A delivery whose sender stopped or died -- the store was stopped, killed or lost its
host while the delivery waited for a thread or for its next POST -- stays pending in
its row with the attempts it made and when its next POST is due (``delivery_outbox``).
At start and every ``RELAY_INTERVAL`` each store replica claims the pending deliveries
that are due and whose claim has lapsed, as many as its queue takes, and hands them to
its notifier, which goes on from the attempts recorded with the same backoff. A
delivery is therefore resumed within its claim's lapse (at most its next POST's due
time plus the POST's timeout and ``notifier.CLAIM_MARGIN``, or ``QUEUED_HOLD`` for one
still queued) plus one interval, by whichever replica claims it first.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from typing import Protocol

from cronwave_core.errors import CronwaveError
from workflow_store.deadline_records import QUEUED_HOLD, BreachRecord

log = logging.getLogger("cronwave.store.notify")

RELAY_INTERVAL = timedelta(seconds=2)
#: Deliveries claimed in one look at most.
RELAY_BATCH = 100


class Claims(Protocol):
    """The outbox's claim of due deliveries (``delivery_outbox.DeliveryOutbox``)."""

    def claim_deliveries(self, limit: int, hold: timedelta) -> list[BreachRecord]: ...


class Sender(Protocol):
    """The notifier's queue (``notifier.Notifications``): how much it takes now, and
    a breach's deliveries handed to it without blocking."""

    def room(self) -> int: ...

    def submit(self, breach: BreachRecord) -> None: ...


class DeliveryRelay:
    def __init__(
        self,
        claims: Claims,
        notifications: Sender,
        *,
        interval: timedelta = RELAY_INTERVAL,
    ) -> None:
        self._claims = claims
        self._notifications = notifications
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delivery-relay", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait: bool = True) -> None:
        """Stop after the tick in progress; ``wait``: for it, up to 5 s."""
        self._stop.set()
        if wait and self._thread.is_alive():
            self._thread.join(timeout=5)

    def tick(self) -> int:
        """Claim and queue the deliveries due; how many were."""
        room = min(self._notifications.room(), RELAY_BATCH)
        breaches = self._claims.claim_deliveries(room, QUEUED_HOLD)
        resumed = 0
        for breach in breaches:
            self._notifications.submit(breach)
            resumed += len(breach.deliveries)
        if resumed:
            log.info("%d pending deadline notifications resumed from the outbox", resumed)
        return resumed

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except CronwaveError as exc:  # the database did not answer: next look
                log.warning("pending deadline notifications not looked at: %s", exc)
            except Exception:
                log.exception("the delivery relay failed a look")
            self._stop.wait(self._interval.total_seconds())
