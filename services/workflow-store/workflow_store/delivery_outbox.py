"""The store's half of webhook deliveries: an outbox. A breach's deliveries are
written in the transaction that records it, pending and claimed by the replica that
recorded it; every POST's outcome is written back to its row, with when the next POST
is due. Nothing but the row says what is left to send, so a delivery outlives the
process that was sending it.

Claims. A pending row is held by the bearer of its ``claim_token`` until
``claimed_until``: for ``QUEUED_HOLD`` after it is queued, then, before each POST,
for the POST's timeout and a margin (``renew_delivery``), and while it waits for its
next POST, until that is due plus the same. Only the bearer may renew it or write an
outcome, so a replica that lost its claim (it stalled past it) neither POSTs again nor
overwrites the new holder's record. A lapsed claim of a due row is anyone's to take
(``claim_deliveries``): one conditional UPDATE per batch, which PostgreSQL re-checks on
each row it had to wait for, and SQLite runs one writer at a time, so of two replicas
one wins each row. A delivery is sent at least once: a replica that dies between a
POST and its outcome's write leaves the POST to be made again.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from workflow_store import models as m
from workflow_store.db import Database
from workflow_store.deadline_records import BreachRecord, DeliveryStatus
from workflow_store.deadline_store import breach_record, delivery_record
from workflow_store.store_core import Clock, utc_now

_D = m.DeadlineDelivery


def new_claim_token() -> str:
    return uuid.uuid4().hex


class DeliveryOutbox:
    """The delivery rows over a ``Database``: the notifier's ``notifier.Outbox`` and the
    relay's ``delivery_relay.Claims``. It takes no other part of the store."""

    def __init__(self, db: Database, clock: Clock = utc_now) -> None:
        self.db = db
        self.clock = clock

    def record_delivery(
        self,
        delivery_id: int,
        token: str,
        status: DeliveryStatus,
        attempts: int,
        http_status: int,
        error: str,
        *,
        retry_in: timedelta | None = None,
        hold: timedelta = timedelta(0),
    ) -> bool:
        """The outcome of a delivery's latest POST, written by the holder of
        ``token`` only (False: another holds it now). A pending one's next POST is
        due ``retry_in`` from now, and it stays claimed until then plus ``hold``."""
        now = self.clock()
        values: dict[str, object] = {
            "status": status.value,
            "attempts": attempts,
            "http_status": http_status,
            "error": error[:2000],
            "updated_at": now,
        }
        if status is DeliveryStatus.PENDING:
            due = now + (retry_in or timedelta(0))
            values.update(next_attempt_at=due, claimed_until=due + hold)
        else:
            values.update(next_attempt_at=None, claimed_until=None, claim_token="")
        with self.db.write() as s:
            done: Any = s.execute(
                sa.update(_D).where(_D.id == delivery_id, _D.claim_token == token).values(values)
            )
            return bool(done.rowcount)

    def renew_delivery(self, delivery_id: int, token: str, hold: timedelta) -> bool:
        """Hold a pending delivery for ``hold`` from now, for the bearer of ``token``
        (False: it is not pending, or another holds it). A ``hold`` of 0 lets the
        claim lapse: the outbox sends it later."""
        with self.db.write() as s:
            done: Any = s.execute(
                sa.update(_D)
                .where(
                    _D.id == delivery_id,
                    _D.claim_token == token,
                    _D.status == DeliveryStatus.PENDING.value,
                )
                .values(claimed_until=self.clock() + hold)
            )
            return bool(done.rowcount)

    def claim_deliveries(self, limit: int, hold: timedelta) -> list[BreachRecord]:
        """Claim, for ``hold``, at most ``limit`` pending deliveries whose next POST
        is due and whose claim has lapsed (oldest first); returns their breaches,
        each with the deliveries claimed (bearing the new claim's token)."""
        if limit <= 0:
            return []
        now = self.clock()
        token = new_claim_token()
        free = sa.and_(
            _D.status == DeliveryStatus.PENDING.value,
            sa.or_(_D.next_attempt_at.is_(None), _D.next_attempt_at <= now),
            sa.or_(_D.claimed_until.is_(None), _D.claimed_until <= now),
        )
        due = sa.select(_D.id).where(free).order_by(_D.id).limit(limit).scalar_subquery()
        with self.db.write() as s:
            s.execute(
                sa.update(_D)
                .where(_D.id.in_(due), free)
                .values(claim_token=token, claimed_until=now + hold)
                .execution_options(synchronize_session=False)
            )
            rows = list(s.scalars(sa.select(_D).where(_D.claim_token == token).order_by(_D.id)))
            if not rows:
                return []
            breaches = s.scalars(
                sa.select(m.DeadlineBreach).where(
                    m.DeadlineBreach.id.in_({r.breach_id for r in rows})
                )
            )
            by_id = {b.id: b for b in breaches}
            claimed: dict[int, list[m.DeadlineDelivery]] = {}
            for row in rows:
                claimed.setdefault(row.breach_id, []).append(row)
            return [
                breach_record(by_id[bid], tuple(delivery_record(d) for d in ds))
                for bid, ds in claimed.items()
            ]
