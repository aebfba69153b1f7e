"""Webhook deliveries as an outbox: when a pending delivery's next POST is due
(deadline_deliveries.next_attempt_at) and which store replica holds it until when
(claim_token, claimed_until), so a restarted or another replica resumes it.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The models' UTCDateTime is stored as this type.
Instant = sa.DateTime(timezone=True)


def upgrade() -> None:
    # Existing pending rows get no next_attempt_at and no claim: due at once.
    with op.batch_alter_table("deadline_deliveries") as batch:
        batch.add_column(sa.Column("next_attempt_at", Instant, nullable=True))
        batch.add_column(
            sa.Column("claim_token", sa.String(), nullable=False, server_default=sa.text("''"))
        )
        batch.add_column(sa.Column("claimed_until", Instant, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deadline_deliveries") as batch:
        batch.drop_column("claimed_until")
        batch.drop_column("claim_token")
        batch.drop_column("next_attempt_at")
